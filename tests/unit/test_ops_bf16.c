/* test_ops_bf16.c - the CPU backend's bf16 ops (dt = TITAN_DTYPE_BF16)
 * against their definition in backend.h: bf16 in memory, the fp32 op on the
 * widened values, each bf16 output rounded once to nearest even.
 *
 * For every op, on bf16 inputs: every bf16 output equals the f32 op on the
 * widened inputs rounded by this file's own rounding (written apart from
 * lib/tensor/dtype.c), bit for bit; "+=" outputs start as random bf16;
 * fp32 outputs (dw, dweight, dwte, rstd, lse, losses) equal the f32 op's
 * exactly; aliasing (add, rope, cross-entropy) and NULL gradients; ids and
 * targets of another vocabulary shard (embedding, cross-entropy with the
 * whole rows' lse). Shapes are cut so the staging runs in several pieces. Also: convert (every bf16
 * value, random fp32 bit patterns, ties, NaN, inf, subnormals), memory()
 * accounting on cpu and cpu-guard, 1 vs 2 threads, and cpu-guard giving the
 * cpu's bits on buffers sized in bf16 elements. One line per check. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/mem.h"
#include "core/rng.h"
#include "model/rope_freqs.h" /* titan_rope_tables: the cos/sin the rope ops take */

#define F32 TITAN_DTYPE_F32
#define BF16 TITAN_DTYPE_BF16
/* the backward checks here add into every gradient (+=); overwriting: test_ops_acc.c */
#define ACC (TITAN_ACC_DX | TITAN_ACC_DW)

typedef uint16_t bf16;

static const titan_backend *be;
static uint64_t stream = 1;
static int checks, failures;

/* ------------------------------------------------------------ rounding */

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float widen1(bf16 h) { return bitsf((uint32_t)h << 16); }
static int is_nan16(bf16 h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

/* Nearest bf16 by distance in double to the two candidates around f (the
 * one toward zero and the next away from it, inf counting as 2^128, as IEEE
 * overflow does); a tie goes to the even mantissa. NaN -> quiet NaN. */
static bf16 rne(float f) {
    uint32_t u = fbits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x7fc0u);
    if ((u & 0x7fffffffu) == 0x7f800000u) return (bf16)(u >> 16);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double x = fabs((double)f), a = fabs((double)bitsf(lo));
    double b = (hi & 0x7fffffffu) == 0x7f800000u ? ldexp(1.0, 128) : fabs((double)bitsf(hi));
    if (x - a < b - x) return (bf16)(lo >> 16);
    if (b - x < x - a) return (bf16)(hi >> 16);
    return (bf16)(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

/* ------------------------------------------------------------- tensors */

/* bf16 data and its exact widening */
typedef struct {
    bf16 *h;
    float *f;
    size_t n;
} tb;

static tb rand_tb(size_t n, double lo, double hi) {
    tb t = {malloc((n ? n : 1) * sizeof(bf16)), malloc((n ? n : 1) * sizeof(float)), n};
    uint64_t s = stream++;
    for (size_t i = 0; i < n; i++) {
        t.h[i] = rne((float)(lo + (hi - lo) * titan_rng_uniform(7, s, i)));
        t.f[i] = widen1(t.h[i]);
    }
    return t;
}

static void free_tb(tb *t) { free(t->h), free(t->f); }

static float *randf(size_t n, double lo, double hi) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    uint64_t s = stream++;
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * titan_rng_uniform(7, s, i));
    return x;
}

static void *dup(const void *x, size_t nbytes) {
    void *d = malloc(nbytes ? nbytes : 1);
    memcpy(d, x, nbytes);
    return d;
}

static void report(int ok, const char *name, const char *what) {
    checks++;
    printf("%-4s %-50s %s\n", ok ? "ok" : "FAIL", name, what);
    if (!ok) failures++;
}

/* got[i] == rne(ref[i]) for every element */
static void check_rounded(const char *name, const bf16 *got, const float *ref, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != rne(ref[i]) && !bad++) first = i;
    char what[128];
    if (!bad) snprintf(what, sizeof what, "%zu = round(f32 op)", n);
    else
        snprintf(what, sizeof what, "%zu of %zu differ, first [%zu] %04x vs %04x (%.9g)", bad, n,
                 first, got[first], rne(ref[first]), ref[first]);
    report(!bad, name, what);
}

static void check_same(const char *name, const void *a, const void *b, size_t nbytes) {
    report(memcmp(a, b, nbytes) == 0, name, memcmp(a, b, nbytes) ? "bits differ" : "bitwise equal");
}

/* ---------------------------------------------------------------- matmul */

static void test_matmul(int N, int IC, int OC) {
    char name[96];
    tb x = rand_tb((size_t)N * IC, -1, 1), w = rand_tb((size_t)OC * IC, -1, 1);
    tb g = rand_tb((size_t)N * OC, -1, 1), dx = rand_tb((size_t)N * IC, -1, 1);
    bf16 *y = malloc((size_t)N * OC * sizeof(bf16));
    float *yr = malloc((size_t)N * OC * sizeof(float));
    be->matmul_forward(BF16, y, x.h, w.h, N, IC, OC);
    be->matmul_forward(F32, yr, x.f, w.f, N, IC, OC);
    snprintf(name, sizeof name, "matmul_forward %dx%dx%d", N, IC, OC);
    check_rounded(name, y, yr, (size_t)N * OC);

    float *dw = randf((size_t)OC * IC, -1, 1), *dwr = dup(dw, (size_t)OC * IC * 4);
    float *dxr = dup(dx.f, (size_t)N * IC * 4);
    bf16 *dx0 = dup(dx.h, (size_t)N * IC * 2);
    float *dw0 = dup(dw, (size_t)OC * IC * 4);
    be->matmul_backward(BF16, ACC, dx.h, dw, g.h, x.h, w.h, N, IC, OC);
    be->matmul_backward(F32, ACC, dxr, dwr, g.f, x.f, w.f, N, IC, OC);
    snprintf(name, sizeof name, "matmul_backward dinp += %dx%dx%d", N, IC, OC);
    check_rounded(name, dx.h, dxr, (size_t)N * IC);
    snprintf(name, sizeof name, "matmul_backward dw (fp32) += %dx%dx%d", N, IC, OC);
    check_same(name, dw, dwr, (size_t)OC * IC * 4);
    /* one gradient at a time gives the same bits */
    be->matmul_backward(BF16, ACC, dx0, NULL, g.h, x.h, w.h, N, IC, OC);
    be->matmul_backward(BF16, ACC, NULL, dw0, g.h, x.h, w.h, N, IC, OC);
    snprintf(name, sizeof name, "matmul_backward dinp alone, dw alone %dx%dx%d", N, IC, OC);
    report(!memcmp(dx0, dx.h, (size_t)N * IC * 2) && !memcmp(dw0, dw, (size_t)OC * IC * 4), name,
           "bitwise equal to both at once");
    free_tb(&x), free_tb(&w), free_tb(&g), free_tb(&dx);
    free(y), free(yr), free(dw), free(dwr), free(dxr), free(dx0), free(dw0);
}

/* out = round(resid + inp @ w^T): the f32 op on the widened values, one
 * rounding (not the product's and then add's); in place too. */
static void test_matmul_add(int N, int IC, int OC) {
    char name[96];
    size_t no = (size_t)N * OC;
    tb x = rand_tb((size_t)N * IC, -1, 1), w = rand_tb((size_t)OC * IC, -1, 1), r = rand_tb(no, -4, 4);
    bf16 *y = malloc(no * sizeof(bf16));
    float *yr = malloc(no * sizeof(float));
    memset(y, 0xff, no * sizeof(bf16)); /* NaN: overwritten, never read */
    be->matmul_add_forward(BF16, y, x.h, w.h, r.h, N, IC, OC);
    be->matmul_add_forward(F32, yr, x.f, w.f, r.f, N, IC, OC);
    snprintf(name, sizeof name, "matmul_add_forward %dx%dx%d", N, IC, OC);
    check_rounded(name, y, yr, no);
    bf16 *in = dup(r.h, no * sizeof(bf16));
    be->matmul_add_forward(BF16, in, x.h, w.h, in, N, IC, OC);
    snprintf(name, sizeof name, "matmul_add_forward in place %dx%dx%d", N, IC, OC);
    report(!memcmp(in, y, no * sizeof(bf16)), name, "bitwise equal to out of place");
    free_tb(&x), free_tb(&w), free_tb(&r);
    free(y), free(yr), free(in);
}

/* One block of the CPU matmul is one sgemm: the bf16 result is a plain
 * single-threaded sgemm of the widened inputs, rounded. */
static void test_matmul_sgemm(void) {
    int N = 37, IC = 70, OC = 45;
    titan_backend_cpu_set_threads(1);
    tb x = rand_tb((size_t)N * IC, -2, 2), w = rand_tb((size_t)OC * IC, -2, 2);
    bf16 *y = malloc((size_t)N * OC * sizeof(bf16));
    float *yr = malloc((size_t)N * OC * sizeof(float));
    be->matmul_forward(BF16, y, x.h, w.h, N, IC, OC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, x.f, IC, w.f, IC, 0.0f,
                yr, OC);
    check_rounded("matmul_forward vs cblas_sgemm of widened inputs", y, yr, (size_t)N * OC);
    titan_backend_cpu_set_threads(0);
    free_tb(&x), free_tb(&w), free(y), free(yr);
}

/* ------------------------------------------------------------------- add */

static void test_add(void) {
    size_t n = 100003;
    tb a = rand_tb(n, -4, 4), b = rand_tb(n, -4, 4);
    bf16 *o = malloc(n * sizeof(bf16));
    float *r = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) r[i] = a.f[i] + b.f[i];
    be->add(BF16, o, a.h, b.h, n);
    check_rounded("add", o, r, n);
    bf16 *oa = dup(a.h, n * 2), *ob = dup(b.h, n * 2);
    be->add(BF16, oa, oa, b.h, n);
    check_same("add out == a", oa, o, n * 2);
    be->add(BF16, ob, a.h, ob, n);
    check_same("add out == b", ob, o, n * 2);
    free_tb(&a), free_tb(&b), free(o), free(r), free(oa), free(ob);
}

/* ------------------------------------------------------------- embedding */

/* shard: every 4th id is >= V (another rank's vocabulary shard) */
static void test_embedding(int shard) {
    int V = 50, C = 72, N = 40;
    char name[96];
    const char *sfx = shard ? ", ids >= V" : "";
    tb wte = rand_tb((size_t)V * C, -1, 1), g = rand_tb((size_t)N * C, -1, 1);
    uint32_t tok[40];
    for (int i = 0; i < N; i++) tok[i] = (uint32_t)((i % 3 == 0 ? 5 : i * 7) % V); /* repeats */
    for (int i = 1; shard && i < N; i += 4) tok[i] = i % 8 == 1 ? (uint32_t)V + i : UINT32_MAX;
    bf16 *o = malloc((size_t)N * C * sizeof(bf16));
    float *r = malloc((size_t)N * C * sizeof(float));
    be->embedding_forward(BF16, o, tok, wte.h, N, C, V);
    be->embedding_forward(F32, r, tok, wte.f, N, C, V);
    snprintf(name, sizeof name, "embedding_forward%s", sfx);
    check_rounded(name, o, r, (size_t)N * C);
    float *dw = randf((size_t)V * C, -1, 1), *dwr = dup(dw, (size_t)V * C * 4);
    be->embedding_backward(BF16, ACC, dw, g.h, tok, N, C, V);
    be->embedding_backward(F32, ACC, dwr, g.f, tok, N, C, V);
    snprintf(name, sizeof name, "embedding_backward dwte (fp32) +=, repeated tokens%s", sfx);
    check_same(name, dw, dwr, (size_t)V * C * 4);
    be->embedding_backward(BF16, 0, dw, g.h, tok, N, C, V);
    be->embedding_backward(F32, 0, dwr, g.f, tok, N, C, V);
    snprintf(name, sizeof name, "embedding_backward dwte (fp32) =%s", sfx);
    check_same(name, dw, dwr, (size_t)V * C * 4);
    free_tb(&wte), free_tb(&g), free(o), free(r), free(dw), free(dwr);
}

/* --------------------------------------------------------------- rmsnorm */

static void test_rmsnorm(void) {
    int N = 700, C = 200; /* 3 pieces */
    size_t n = (size_t)N * C;
    tb x = rand_tb(n, -2, 2), w = rand_tb((size_t)C, 0.5, 1.5), g = rand_tb(n, -1, 1);
    tb dx = rand_tb(n, -1, 1);
    bf16 *y = malloc(n * sizeof(bf16));
    float *yr = malloc(n * sizeof(float));
    float *rs = malloc((size_t)N * 4), *rsr = malloc((size_t)N * 4);
    be->rmsnorm_forward(BF16, y, rs, x.h, w.h, N, C, 1e-5f);
    be->rmsnorm_forward(F32, yr, rsr, x.f, w.f, N, C, 1e-5f);
    check_rounded("rmsnorm_forward", y, yr, n);
    check_same("rmsnorm_forward rstd (fp32)", rs, rsr, (size_t)N * 4);

    float *dw = randf((size_t)C, -1, 1);
    float *dwr = dup(dw, (size_t)C * 4), *dw0 = dup(dw, (size_t)C * 4);
    float *dxr = dup(dx.f, n * 4);
    bf16 *dx0 = dup(dx.h, n * 2);
    be->rmsnorm_backward(BF16, ACC, dx.h, dw, g.h, x.h, w.h, rsr, N, C);
    be->rmsnorm_backward(F32, ACC, dxr, dwr, g.f, x.f, w.f, rsr, N, C);
    check_rounded("rmsnorm_backward dinp +=", dx.h, dxr, n);
    check_same("rmsnorm_backward dweight (fp32) +=", dw, dwr, (size_t)C * 4);
    be->rmsnorm_backward(BF16, ACC, dx0, NULL, g.h, x.h, w.h, rsr, N, C);
    be->rmsnorm_backward(BF16, ACC, NULL, dw0, g.h, x.h, w.h, rsr, N, C);
    report(!memcmp(dx0, dx.h, n * 2) && !memcmp(dw0, dw, (size_t)C * 4),
           "rmsnorm_backward dinp alone, dweight alone", "bitwise equal to both at once");
    free_tb(&x), free_tb(&w), free_tb(&g), free_tb(&dx);
    free(y), free(yr), free(rs), free(rsr), free(dw), free(dwr), free(dw0), free(dxr), free(dx0);
}

/* ------------------------------------------------------------------ rope */

static void test_rope(int B, int T, int NHX, int HD) {
    char name[96];
    size_t n = (size_t)B * T * NHX * HD, tab = (size_t)T * (HD / 2);
    float *cs = malloc(tab * 4), *sn = malloc(tab * 4);
    titan_rope_tables(cs, sn, T, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 64);
    tb x = rand_tb(n, -2, 2), g = rand_tb(n, -1, 1), dx = rand_tb(n, -1, 1);
    bf16 *y = malloc(n * 2), *yi = dup(x.h, n * 2);
    float *yr = malloc(n * 4), *dxr = dup(dx.f, n * 4);
    be->rope_forward(BF16, y, x.h, cs, sn, B, T, NHX, HD);
    be->rope_forward(F32, yr, x.f, cs, sn, B, T, NHX, HD);
    snprintf(name, sizeof name, "rope_forward B%d T%d NHX%d HD%d", B, T, NHX, HD);
    check_rounded(name, y, yr, n);
    be->rope_forward(BF16, yi, yi, cs, sn, B, T, NHX, HD);
    snprintf(name, sizeof name, "rope_forward out == inp T%d", T);
    check_same(name, yi, y, n * 2);
    be->rope_backward(BF16, ACC, dx.h, g.h, cs, sn, B, T, NHX, HD);
    be->rope_backward(F32, ACC, dxr, g.f, cs, sn, B, T, NHX, HD);
    snprintf(name, sizeof name, "rope_backward dinp += T%d", T);
    check_rounded(name, dx.h, dxr, n);
    free_tb(&x), free_tb(&g), free_tb(&dx), free(cs), free(sn), free(y), free(yi), free(yr);
    free(dxr);
}

/* ------------------------------------------------------------- attention */

/* Tq < Tk: the queries are the last Tq of the Tk positions (a chunk) */
static void test_attention(int B, int Tq, int Tk, int NH, int NKV, int HD) {
    char name[112];
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD, nl = (size_t)B * NH * Tq;
    tb q = rand_tb(nq, -1, 1), k = rand_tb(nk, -1, 1), v = rand_tb(nk, -1, 1);
    tb g = rand_tb(nq, -1, 1), dq = rand_tb(nq, -1, 1), dk = rand_tb(nk, -1, 1);
    tb dv = rand_tb(nk, -1, 1);
    bf16 *o = malloc(nq * 2);
    float *orf = malloc(nq * 4), *lse = malloc(nl * 4), *lser = malloc(nl * 4);
    be->attention_forward(BF16, o, lse, q.h, k.h, v.h, B, Tq, Tk, NH, NKV, HD);
    be->attention_forward(F32, orf, lser, q.f, k.f, v.f, B, Tq, Tk, NH, NKV, HD);
    snprintf(name, sizeof name, "attention_forward B%d Tq%d Tk%d NH%d NKV%d HD%d", B, Tq, Tk, NH,
             NKV, HD);
    check_rounded(name, o, orf, nq);
    snprintf(name, sizeof name, "attention_forward lse (fp32) Tq%d Tk%d HD%d", Tq, Tk, HD);
    check_same(name, lse, lser, nl * 4);
    /* the backward reads the bf16 out: the reference gets it widened */
    float *ow = malloc(nq * 4);
    for (size_t i = 0; i < nq; i++) ow[i] = widen1(o[i]);
    float *dqr = dup(dq.f, nq * 4), *dkr = dup(dk.f, nk * 4), *dvr = dup(dv.f, nk * 4);
    be->attention_backward(BF16, ACC, dq.h, dk.h, dv.h, g.h, o, lse, q.h, k.h, v.h, B, Tq, Tk, NH,
                           NKV, HD);
    be->attention_backward(F32, ACC, dqr, dkr, dvr, g.f, ow, lse, q.f, k.f, v.f, B, Tq, Tk, NH,
                           NKV, HD);
    snprintf(name, sizeof name, "attention_backward dq += Tq%d Tk%d HD%d", Tq, Tk, HD);
    check_rounded(name, dq.h, dqr, nq);
    snprintf(name, sizeof name, "attention_backward dk += Tq%d Tk%d HD%d", Tq, Tk, HD);
    check_rounded(name, dk.h, dkr, nk);
    snprintf(name, sizeof name, "attention_backward dv += Tq%d Tk%d HD%d", Tq, Tk, HD);
    check_rounded(name, dv.h, dvr, nk);
    free_tb(&q), free_tb(&k), free_tb(&v), free_tb(&g), free_tb(&dq), free_tb(&dk), free_tb(&dv);
    free(o), free(orf), free(lse), free(lser), free(ow), free(dqr), free(dkr), free(dvr);
}

/* ---------------------------------------------------------------- swiglu */

static void test_swiglu(void) {
    int N = 300, H = 500; /* 3 pieces */
    size_t n = (size_t)N * H;
    tb a = rand_tb(n, -4, 4), b = rand_tb(n, -2, 2), g = rand_tb(n, -1, 1);
    tb d1 = rand_tb(n, -1, 1), d3 = rand_tb(n, -1, 1);
    bf16 *y = malloc(n * 2), *d1a = dup(d1.h, n * 2), *d3a = dup(d3.h, n * 2);
    float *yr = malloc(n * 4), *d1r = dup(d1.f, n * 4), *d3r = dup(d3.f, n * 4);
    be->swiglu_forward(BF16, y, a.h, b.h, N, H);
    be->swiglu_forward(F32, yr, a.f, b.f, N, H);
    check_rounded("swiglu_forward", y, yr, n);
    be->swiglu_backward(BF16, ACC, d1.h, d3.h, g.h, a.h, b.h, N, H);
    be->swiglu_backward(F32, ACC, d1r, d3r, g.f, a.f, b.f, N, H);
    check_rounded("swiglu_backward dh1 +=", d1.h, d1r, n);
    check_rounded("swiglu_backward dh3 +=", d3.h, d3r, n);
    be->swiglu_backward(BF16, ACC, d1a, NULL, g.h, a.h, b.h, N, H);
    be->swiglu_backward(BF16, ACC, NULL, d3a, g.h, a.h, b.h, N, H);
    report(!memcmp(d1a, d1.h, n * 2) && !memcmp(d3a, d3.h, n * 2),
           "swiglu_backward dh1 alone, dh3 alone", "bitwise equal to both at once");
    free_tb(&a), free_tb(&b), free_tb(&g), free_tb(&d1), free_tb(&d3);
    free(y), free(d1a), free(d3a), free(yr), free(d1r), free(d3r);
}

/* --------------------------------------------------------- cross-entropy */

/* bf16 cross_entropy over logits x[N, V] against the f32 op on the widened
 * values: dlogits rounded once, the fp32 losses bitwise, dlogits written over
 * the logits, and each of the two outputs alone (NULL for the other). lse,
 * lser: NULL for whole rows, else the rows' log-sum-exps (bf16's, f32's). */
static void check_cross_entropy(const char *what, const tb *x, const uint32_t *tg, int N, int V,
                                const float *lse, const float *lser) {
    char name[128];
    size_t n = (size_t)N * V;
    float dscale = 1.0f / (float)N;
    float *l = malloc((size_t)N * 4), *lr = malloc((size_t)N * 4), *l2 = malloc((size_t)N * 4);
    bf16 *d = malloc(n * 2), *al = dup(x->h, n * 2);
    float *dr = malloc(n * 4);
    be->cross_entropy(BF16, l, d, x->h, tg, N, V, dscale, lse);
    be->cross_entropy(F32, lr, dr, x->f, tg, N, V, dscale, lser);
    snprintf(name, sizeof name, "%s dlogits", what);
    check_rounded(name, d, dr, n);
    snprintf(name, sizeof name, "%s losses (fp32)", what);
    check_same(name, l, lr, (size_t)N * 4);
    be->cross_entropy(BF16, l2, al, al, tg, N, V, dscale, lse);
    snprintf(name, sizeof name, "%s dlogits == logits", what);
    report(!memcmp(al, d, n * 2) && !memcmp(l2, lr, (size_t)N * 4), name, "bitwise equal");
    memset(l2, 0, (size_t)N * 4);
    be->cross_entropy(BF16, l2, NULL, x->h, tg, N, V, dscale, lse);
    be->cross_entropy(BF16, NULL, al, x->h, tg, N, V, dscale, lse);
    snprintf(name, sizeof name, "%s NULL dlogits, NULL losses", what);
    report(!memcmp(l2, lr, (size_t)N * 4) && !memcmp(al, d, n * 2), name, "bitwise equal");
    free(l), free(lr), free(l2), free(d), free(al), free(dr);
}

static void test_cross_entropy(int N, int V) {
    char what[64];
    tb x = rand_tb((size_t)N * V, -6, 6);
    uint32_t *tg = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) tg[i] = (uint32_t)((i * 7919) % V);
    snprintf(what, sizeof what, "cross_entropy N%d V%d", N, V);
    check_cross_entropy(what, &x, tg, N, V, NULL, NULL);
    free_tb(&x), free(tg);
}

/* logsumexp over whole rows of logits[N, V], then cross_entropy with that
 * lse on the shard of columns [v0, v0 + Vs), targets remapped (>= Vs when
 * in another shard): bf16 against the f32 ops on the widened values. */
static void test_cross_entropy_shard(int N, int V, int v0, int Vs) {
    char name[96];
    size_t n = (size_t)N * V, ns = (size_t)N * Vs;
    tb x = rand_tb(n, -6, 6);
    float *lse = malloc((size_t)N * 4), *lser = malloc((size_t)N * 4);
    be->logsumexp(BF16, lse, x.h, N, V);
    be->logsumexp(F32, lser, x.f, N, V);
    snprintf(name, sizeof name, "logsumexp (fp32) N%d V%d", N, V);
    check_same(name, lse, lser, (size_t)N * 4);

    tb xs = {malloc(ns * 2), malloc(ns * 4), ns};
    for (int r = 0; r < N; r++) {
        memcpy(xs.h + (size_t)r * Vs, x.h + (size_t)r * V + v0, (size_t)Vs * 2);
        memcpy(xs.f + (size_t)r * Vs, x.f + (size_t)r * V + v0, (size_t)Vs * 4);
    }
    uint32_t *ts = malloc((size_t)N * 4);
    for (int r = 0; r < N; r++) {
        int t = (int)((r * 7919u) % (unsigned)V);
        ts[r] = t >= v0 && t < v0 + Vs ? (uint32_t)(t - v0) : r % 2 ? UINT32_MAX : (uint32_t)Vs;
    }
    ts[0] = 0, ts[N - 1] = (uint32_t)Vs - 1; /* the shard's ends */
    char what[64];
    snprintf(what, sizeof what, "cross_entropy(lse) N%d shard %d of %d", N, Vs, V);
    check_cross_entropy(what, &xs, ts, N, Vs, lse, lser);
    free_tb(&x), free_tb(&xs), free(lse), free(lser), free(ts);
}

/* --------------------------------------------------------------- threads */

/* The row-local ops stage in pieces shared out among threads. */
static void run_threaded(bf16 *out[4], int threads) {
    titan_backend_cpu_set_threads(threads);
    int N = 300, H = 500, V = 5000, B = 2, T = 300, NHX = 4, HD = 64;
    stream = 5000;
    size_t nx = (size_t)B * T * NHX * HD, tab = (size_t)T * HD / 2;
    tb a = rand_tb((size_t)N * H, -4, 4), b = rand_tb((size_t)N * H, -2, 2);
    tb lg = rand_tb((size_t)8 * V, -6, 6), x = rand_tb(nx, -2, 2);
    float *cs = malloc(tab * 4), *sn = malloc(tab * 4), loss[8];
    titan_rope_tables(cs, sn, T, HD, 10000.0f, 0.0f, 0.0f, 0.0f, 0);
    uint32_t tg[8] = {0, 1, 2, 3, 4999, 17, 256, 4096};
    out[0] = malloc((size_t)N * H * 2), out[1] = malloc((size_t)N * H * 2);
    out[2] = malloc((size_t)8 * V * 2), out[3] = malloc(nx * 2);
    be->swiglu_forward(BF16, out[0], a.h, b.h, N, H);
    be->add(BF16, out[1], a.h, b.h, (size_t)N * H);
    be->cross_entropy(BF16, loss, out[2], lg.h, tg, 8, V, 0.125f, NULL);
    be->rope_forward(BF16, out[3], x.h, cs, sn, B, T, NHX, HD);
    free_tb(&a), free_tb(&b), free_tb(&lg), free_tb(&x), free(cs), free(sn);
}

static void test_threads(void) {
    bf16 *o1[4], *o2[4];
    run_threaded(o1, 1);
    run_threaded(o2, 2);
    titan_backend_cpu_set_threads(0);
    size_t sz[4] = {300 * 500, 300 * 500, 8 * 5000, 2 * 300 * 4 * 64};
    const char *names[4] = {"swiglu_forward", "add", "cross_entropy", "rope_forward"};
    for (int i = 0; i < 4; i++) {
        char name[96];
        snprintf(name, sizeof name, "threads 1 vs 2: bf16 %s", names[i]);
        check_same(name, o1[i], o2[i], sz[i] * 2);
        free(o1[i]), free(o2[i]);
    }
}

/* --------------------------------------------------------------- convert */

static void test_convert(void) {
    /* every bf16 widens exactly, and rounds back to itself (NaN to a NaN) */
    bf16 *all = malloc(65536 * 2), *back = malloc(65536 * 2);
    float *wide = malloc(65536 * 4);
    for (uint32_t i = 0; i < 65536; i++) all[i] = (bf16)i;
    be->convert(wide, F32, all, BF16, 65536);
    size_t bad = 0;
    for (uint32_t i = 0; i < 65536; i++) bad += fbits(wide[i]) != i << 16;
    report(!bad, "convert bf16 -> f32, all 65536 values", bad ? "not exact" : "exact");
    be->convert(back, BF16, wide, F32, 65536);
    bad = 0;
    for (uint32_t i = 0; i < 65536; i++)
        bad += is_nan16(all[i]) ? !is_nan16(back[i]) || (back[i] ^ all[i]) & 0x8000
                                : back[i] != all[i];
    report(!bad, "convert bf16 -> f32 -> bf16 round trip",
           bad ? "changed" : "identity (NaN stays NaN)");

    /* random fp32 bit patterns: every exponent, subnormals, NaN, inf */
    size_t n = 200003;
    uint32_t *u = malloc(n * 4);
    bf16 *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)titan_rng_u64(7, 99, i);
    for (size_t i = 0; i < n; i += 97) u[i] = (u[i] & 0xffff0000u) | 0x8000u; /* exact ties */
    be->convert(h, BF16, u, F32, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float f = bitsf(u[i]);
        bad += f != f ? !is_nan16(h[i]) || ((h[i] >> 15) != (u[i] >> 31)) : h[i] != rne(f);
    }
    report(!bad, "convert f32 -> bf16, 200003 random bit patterns",
           bad ? "differ" : "= nearest even");

    static const struct {
        uint32_t f;
        bf16 want;
    } cases[] = {
        {0x3f808000u, 0x3f80}, /* 1 + 2^-8: tie, down to even */
        {0x3f818000u, 0x3f82}, /* tie, up to even */
        {0x3f808001u, 0x3f81}, /* just above a tie */
        {0x3f817fffu, 0x3f81}, /* just below a tie */
        {0xbf808000u, 0xbf80}, /* negative ties */
        {0xbf818000u, 0xbf82},
        {0x7f7f7fffu, 0x7f7f}, /* below half an ulp past the largest finite */
        {0x7f7f8000u, 0x7f80}, /* tie past the largest finite: to inf */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to inf */
        {0xff7fffffu, 0xff80},
        {0x7f800000u, 0x7f80}, /* inf */
        {0xff800000u, 0xff80},
        {0x00008000u, 0x0000}, /* subnormal tie, to even zero */
        {0x00018000u, 0x0002}, /* subnormal tie, up to even */
        {0x007fffffu, 0x0080}, /* largest subnormal rounds to the smallest normal */
        {0x80000000u, 0x8000}, /* -0 */
        {0x00000000u, 0x0000},
    };
    int nc = (int)(sizeof cases / sizeof cases[0]), cbad = 0;
    for (int i = 0; i < nc; i++) {
        bf16 got;
        be->convert(&got, BF16, &cases[i].f, F32, 1);
        if (got != cases[i].want || rne(bitsf(cases[i].f)) != cases[i].want) {
            cbad++;
            printf("     %08x -> %04x, want %04x\n", cases[i].f, got, cases[i].want);
        }
    }
    report(!cbad, "convert f32 -> bf16: ties, overflow, inf, subnormal, -0",
           cbad ? "wrong" : "as IEEE");
    /* NaNs stay NaN with their sign, also one whose payload is only in the
     * low 16 bits (truncation would make it inf) */
    uint32_t nans[4] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff80ffffu};
    bf16 hn[4];
    be->convert(hn, BF16, nans, F32, 4);
    int nok = 1;
    for (int i = 0; i < 4; i++) nok &= is_nan16(hn[i]) && (hn[i] >> 15) == (nans[i] >> 31);
    report(nok, "convert f32 -> bf16: NaN (incl. low-payload) stays NaN", nok ? "yes" : "no");

    /* the same type is a copy */
    float *c32 = malloc(n * 4);
    bf16 *c16 = malloc(n * 2);
    be->convert(c32, F32, u, F32, n);
    be->convert(c16, BF16, h, BF16, n);
    report(!memcmp(c32, u, n * 4) && !memcmp(c16, h, n * 2), "convert f32 -> f32, bf16 -> bf16",
           "copies");
    free(all), free(back), free(wide), free(u), free(h), free(c32), free(c16);
}

/* ---------------------------------------------------------------- memory */

static void test_memory(const titan_backend *b) {
    char name[96];
    size_t u0, use, peak, dev = 1;
    b->memory(NULL, NULL, NULL, 1); /* a new peak window */
    b->memory(&u0, &peak, &dev, 0);
    int ok = peak == u0 && dev == 0;
    void *p1 = b->alloc(1000);
    b->memory(&use, &peak, NULL, 0);
    ok &= p1 && use == u0 + 1000 && peak == u0 + 1000;
    void *p2 = b->alloc(5000);
    b->memory(&use, &peak, NULL, 0);
    ok &= p2 && use == u0 + 6000 && peak == u0 + 6000;
    b->free(p1);
    b->memory(&use, &peak, NULL, 0);
    ok &= use == u0 + 5000 && peak == u0 + 6000;
    b->memory(NULL, NULL, NULL, 1);
    b->memory(&use, &peak, NULL, 0);
    ok &= use == u0 + 5000 && peak == u0 + 5000;
    void *p3 = b->alloc(123);
    b->memory(&use, &peak, NULL, 0);
    ok &= p3 && use == u0 + 5123 && peak == u0 + 5123;
    b->free(p2);
    b->free(p3);
    b->memory(&use, &peak, NULL, 0);
    ok &= use == u0 && peak == u0 + 5123;
    snprintf(name, sizeof name, "%s memory(): in_use, peak, reset, device_used 0", b->name);
    report(ok, name, ok ? "as allocated" : "wrong");
    if (!ok) printf("     in_use %zu (base %zu) peak %zu\n", use, u0, peak);

    /* alloc and free from two threads at once: nothing lost */
    int nullp = 0;
#pragma omp parallel for num_threads(2) reduction(+ : nullp)
    for (int i = 0; i < 200; i++) {
        void *p = b->alloc((size_t)(i % 7 + 1) * 100);
        nullp += !p;
        b->free(p);
    }
    b->memory(&use, NULL, NULL, 0);
    snprintf(name, sizeof name, "%s memory(): concurrent alloc/free", b->name);
    report(!nullp && use == u0, name, use == u0 ? "balanced" : "unbalanced");
}

/* ----------------------------------------------------------------- guard */

/* Buffers sized in bf16 elements (whole pages, so a check sized for fp32
 * elements would abort): guard and cpu give the same bits. */
static void test_guard(void) {
    const titan_backend *gd = titan_backend_cpu_guard(), *cpu = titan_backend_cpu();
    int N = 32, IC = 64, OC = 128, V = 128;
    tb x = rand_tb((size_t)N * IC, -1, 1), w = rand_tb((size_t)OC * IC, -1, 1);
    tb nw = rand_tb((size_t)IC, 0.5, 1.5), lg = rand_tb((size_t)16 * V, -6, 6);
    uint32_t tg[16];
    for (int i = 0; i < 16; i++) tg[i] = (uint32_t)(i * 9 % V);
    size_t sx = (size_t)N * IC * 2, sw = (size_t)OC * IC * 2, sy = (size_t)N * OC * 2;
    size_t sl = (size_t)16 * V * 2;
    bf16 *dx = gd->alloc(sx), *dw = gd->alloc(sw), *dy = gd->alloc(sy), *dnw = gd->alloc(IC * 2);
    bf16 *dlg = gd->alloc(sl), *dn = gd->alloc(sx);
    float *drs = gd->alloc((size_t)N * 4), *dls = gd->alloc(16 * 4), *dxf = gd->alloc(sx * 2);
    float *dlse = gd->alloc(16 * 4), *dls2 = gd->alloc(16 * 4);
    uint32_t *dtg = gd->alloc(sizeof tg);
    gd->to_device(dx, x.h, sx), gd->to_device(dw, w.h, sw), gd->to_device(dnw, nw.h, IC * 2);
    gd->to_device(dlg, lg.h, sl), gd->to_device(dtg, tg, sizeof tg);
    gd->matmul_forward(BF16, dy, dx, dw, N, IC, OC);
    gd->rmsnorm_forward(BF16, dn, drs, dx, dnw, N, IC, 1e-5f);
    gd->logsumexp(BF16, dlse, dlg, 16, V);
    gd->cross_entropy(BF16, dls2, NULL, dlg, dtg, 16, V, 0.5f, dlse);
    gd->cross_entropy(BF16, dls, dlg, dlg, dtg, 16, V, 0.5f, NULL);
    gd->convert(dxf, F32, dx, BF16, (size_t)N * IC);

    bf16 *y = malloc(sy), *yn = malloc(sx), *lgc = dup(lg.h, sl);
    bf16 *gy = malloc(sy), *gn = malloc(sx), *glg = malloc(sl);
    float rs[32], grs[32], ls[16], gls[16], *gxf = malloc(sx * 2);
    float lse[16], glse[16], ls2[16], gls2[16];
    cpu->matmul_forward(BF16, y, x.h, w.h, N, IC, OC);
    cpu->rmsnorm_forward(BF16, yn, rs, x.h, nw.h, N, IC, 1e-5f);
    cpu->logsumexp(BF16, lse, lgc, 16, V);
    cpu->cross_entropy(BF16, ls2, NULL, lgc, tg, 16, V, 0.5f, lse);
    cpu->cross_entropy(BF16, ls, lgc, lgc, tg, 16, V, 0.5f, NULL);
    gd->to_host(gy, dy, sy), gd->to_host(gn, dn, sx), gd->to_host(grs, drs, sizeof grs);
    gd->to_host(glg, dlg, sl), gd->to_host(gls, dls, sizeof gls), gd->to_host(gxf, dxf, sx * 2);
    gd->to_host(glse, dlse, sizeof glse), gd->to_host(gls2, dls2, sizeof gls2);
    check_same("cpu-guard bf16 matmul_forward = cpu", gy, y, sy);
    report(!memcmp(gn, yn, sx) && !memcmp(grs, rs, sizeof rs),
           "cpu-guard bf16 rmsnorm_forward = cpu", "bitwise equal");
    report(!memcmp(glg, lgc, sl) && !memcmp(gls, ls, sizeof ls),
           "cpu-guard bf16 cross_entropy (aliased) = cpu", "bitwise equal");
    report(!memcmp(glse, lse, sizeof lse) && !memcmp(gls2, ls2, sizeof ls2),
           "cpu-guard bf16 logsumexp, cross_entropy(lse) = cpu", "bitwise equal");
    check_same("cpu-guard convert bf16 -> f32 = widening", gxf, x.f, sx * 2);
    void *bufs[] = {dx, dw, dy, dnw, dlg, dn, drs, dls, dxf, dtg, dlse, dls2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gd->free(bufs[i]);
    free_tb(&x), free_tb(&w), free_tb(&nw), free_tb(&lg);
    free(y), free(yn), free(lgc), free(gy), free(gn), free(glg), free(gxf);
}

int main(void) {
    be = titan_backend_cpu();
    titan_backend_cpu_set_threads(0);
    test_convert();
    test_matmul(37, 70, 45);
    test_matmul(130, 300, 260); /* tiled into several sgemm blocks */
    test_matmul_add(37, 70, 45);
    test_matmul_add(130, 300, 260);
    test_matmul_add(40, 1500, 30);
    test_matmul_sgemm();
    test_add();
    test_embedding(0);
    test_embedding(1);
    test_rmsnorm();
    test_rope(7, 37, 8, 64);  /* pieces of whole sequences, a ragged last */
    test_rope(2, 300, 4, 64); /* pieces inside a sequence, a ragged last */
    test_attention(2, 70, 70, 4, 2, 16);
    test_attention(1, 33, 33, 2, 1, 64);
    test_attention(2, 70, 133, 4, 2, 16); /* a chunk of a longer sequence's queries */
    test_attention(1, 1, 65, 4, 1, 100);  /* one query, HD of the generic kernel */
    test_swiglu();
    test_cross_entropy(20, 5000);  /* 13 rows a piece */
    test_cross_entropy(3, 70000); /* rows longer than a piece */
    test_cross_entropy_shard(50, 5000, 1500, 3000); /* 13 and 21 rows a piece */
    test_cross_entropy_shard(3, 70000, 30000, 40000); /* a row a piece */
    test_threads();
    test_memory(be);
    test_memory(titan_backend_cpu_guard());
    test_guard();
    if (failures) {
        printf("test_ops_bf16: %d of %d check(s) FAILED\n", failures, checks);
        return 1;
    }
    printf("test_ops_bf16: all %d checks passed\n", checks);
    return 0;
}
