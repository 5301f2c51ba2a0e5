/* ops_test.h - what the op tests against double-precision references share
 * (test_ops.c, test_attention_chunk.c): random inputs, the normalised-error
 * and bitwise checks (one printed line each, failures counted), central
 * finite differences of a scalar loss, and the causal attention reference
 * for queries that are the last Tq of Tk positions. */
#ifndef TITAN_TESTS_OPS_TEST_H
#define TITAN_TESTS_OPS_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

static int failures;
static uint64_t stream_counter = 1;

static inline float *randf(size_t n, double lo, double hi) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    uint64_t s = stream_counter++;
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * titan_rng_uniform(42, s, i));
    return x;
}

static inline float *zerosf(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static inline double *zerosd(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static inline double *to_double(const float *x, size_t n) {
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static inline float *dupf(const float *x, size_t n) {
    float *d = malloc((n ? n : 1) * sizeof(float));
    memcpy(d, x, n * sizeof(float));
    return d;
}

/* max |got - want| / max |want|: an error normalised by the tensor's scale,
 * which stays meaningful where single elements are near zero. */
static inline void check(const char *name, const float *got, const double *want, size_t n, double tol) {
    double err = 0.0, scale = 0.0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d == d)) bad = 1;
        if (d > err) err = d;
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    double rel = err / (scale > 0 ? scale : 1.0);
    int ok = !bad && rel <= tol;
    printf("%-4s %-44s max rel err %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", name, rel, tol);
    if (!ok) failures++;
}

static inline void check_bits(const char *name, const void *a, const void *b, size_t nbytes) {
    int ok = memcmp(a, b, nbytes) == 0;
    printf("%-4s %-44s %s\n", ok ? "ok" : "FAIL", name, ok ? "bitwise equal" : "bits differ");
    if (!ok) failures++;
}

/* A scalar loss of double inputs, for finite differences. */
typedef double (*loss_fn)(void *ctx);

/* Central differences of f with respect to x[idx[j]] (x is one of the
 * double inputs f reads through ctx). h is relative to the element. */
static inline void fd_grad(loss_fn f, void *ctx, double *x, const size_t *idx, size_t nidx, double *out) {
    for (size_t j = 0; j < nidx; j++) {
        size_t i = idx[j];
        double x0 = x[i], h = 1e-5 * (fabs(x0) > 1.0 ? fabs(x0) : 1.0);
        x[i] = x0 + h;
        double lp = f(ctx);
        x[i] = x0 - h;
        double lm = f(ctx);
        x[i] = x0;
        out[j] = (lp - lm) / (2 * h);
    }
}

/* All indices when n is small, else `max` spread over the tensor. */
static inline size_t pick(size_t n, size_t max, size_t *idx) {
    if (n <= max) {
        for (size_t i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    for (size_t j = 0; j < max; j++) idx[j] = (size_t)((double)j * (double)n / (double)max);
    return max;
}

/* Compares an analytic gradient (float, all elements) with finite differences
 * at up to 300 picked elements. */
static inline void check_grad(const char *name, loss_fn f, void *ctx, double *x, const float *grad,
                       size_t n, double tol) {
    size_t *idx = malloc(300 * sizeof(size_t));
    size_t m = pick(n, 300, idx);
    double *fd = zerosd(m);
    float *g = zerosf(m);
    fd_grad(f, ctx, x, idx, m, fd);
    for (size_t j = 0; j < m; j++) g[j] = grad[idx[j]];
    check(name, g, fd, m, tol);
    free(idx);
    free(fd);
    free(g);
}

static inline double dot_w(const double *y, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += y[i] * w[i];
    return s;
}

/* Causal GQA attention in double: q[B,Tq,NH,HD], k, v[B,Tk,NKV,HD]; query i
 * at position Tk - Tq + i sees keys 0 .. Tk - Tq + i (backend.h). wt: the
 * weights of at_loss's scalar. */
typedef struct {
    int B, Tq, Tk, NH, NKV, HD;
    double *q, *k, *v;
    const float *wt;
} at_ctx;

static inline void at_ref(double *out, double *lse, const at_ctx *c) {
    int Tq = c->Tq, Tk = c->Tk, NH = c->NH, NKV = c->NKV, HD = c->HD, rep = NH / NKV;
    double scale = 1.0 / sqrt((double)HD), *s = zerosd(Tk);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tq; t++) {
                int pos = Tk - Tq + t;
                const double *qr = c->q + (((size_t)b * Tq + t) * NH + h) * HD;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j <= pos; j++) {
                    const double *kr = c->k + (((size_t)b * Tk + j) * NKV + h / rep) * HD;
                    double d = 0.0;
                    for (int i = 0; i < HD; i++) d += qr[i] * kr[i];
                    s[j] = d * scale;
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j <= pos; j++) sum += exp(s[j] - mx);
                double *o = out + (((size_t)b * Tq + t) * NH + h) * HD;
                for (int i = 0; i < HD; i++) o[i] = 0.0;
                for (int j = 0; j <= pos; j++) {
                    const double *vr = c->v + (((size_t)b * Tk + j) * NKV + h / rep) * HD;
                    double p = exp(s[j] - mx) / sum;
                    for (int i = 0; i < HD; i++) o[i] += p * vr[i];
                }
                if (lse) lse[((size_t)b * NH + h) * Tq + t] = mx + log(sum);
            }
    free(s);
}

/* sum of out * wt: the scalar whose gradient is attention backward's with dout = wt */
static inline double at_loss(void *p) {
    at_ctx *c = p;
    size_t n = (size_t)c->B * c->Tq * c->NH * c->HD;
    double *y = zerosd(n);
    at_ref(y, NULL, c);
    double l = dot_w(y, c->wt, n);
    free(y);
    return l;
}

#endif
