/* test_cuda_ops.c - every op of the CUDA backend against the CPU reference
 * backend on the same random inputs: forward outputs and backward gradients
 * (gradients start random, so "adds into" is checked too), aliasing cases,
 * and bitwise repeatability of the GPU results. Error is normalised:
 * ||gpu - cpu|| / ||cpu|| (L2), against a tolerance per kind of op.
 *
 * Without a GPU (or without libtitan-cuda.so) it prints "no GPU: <reason>"
 * and exits 77, which scripts/run-tests.sh reports as skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/rng.h"

/* tolerance table (fp32) */
#define TOL_ELEMENTWISE 1e-5 /* add, scale, embedding, rope, swiglu, norms, loss, adamw */
#define TOL_MATMUL 1e-4      /* long fp32 dot products summed in another order */
#define TOL_ATTENTION 1e-4
#define TOL_SUMSQ 1e-12      /* both sum in double */

static const titan_backend *cpu, *gpu;
static int failures;
static uint64_t stream_counter = 1;

/* ---------------------------------------------------------------- helpers */

static float *randf(size_t n, double lo, double hi) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    uint64_t s = stream_counter++;
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * titan_rng_uniform(7, s, i));
    return x;
}

/* a device copy of n host floats (or bytes via up_bytes) */
static void *up_bytes(const void *h, size_t nbytes) {
    void *d = gpu->alloc(nbytes);
    if (!d) {
        fprintf(stderr, "cuda alloc of %zu bytes failed\n", nbytes);
        exit(1);
    }
    gpu->to_device(d, h, nbytes);
    return d;
}
static float *up(const float *h, size_t n) { return up_bytes(h, n * sizeof(float)); }

/* the device buffer's contents in a new host array */
static float *down(const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    gpu->to_host(h, d, n * sizeof(float));
    return h;
}

static void check(const char *name, const float *got, const float *want, size_t n, double tol) {
    double num = 0.0, den = 0.0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        if (d != d) nan = 1;
        num += d * d;
        den += (double)want[i] * want[i];
    }
    double rel = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
    int ok = !nan && rel <= tol;
    printf("%-4s %-48s rel err %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", name, rel, tol);
    if (!ok) failures++;
}

/* compares a device buffer with a host reference, then frees the download */
static void check_dev(const char *name, const float *dev, const float *want, size_t n, double tol) {
    float *h = down(dev, n);
    check(name, h, want, n, tol);
    free(h);
}

static void check_bits(const char *name, const void *a, const void *b, size_t nbytes) {
    int ok = memcmp(a, b, nbytes) == 0;
    printf("%-4s %-48s %s\n", ok ? "ok" : "FAIL", name, ok ? "bitwise equal" : "bits differ");
    if (!ok) failures++;
}

/* ------------------------------------------------------------------- ops */

static void test_memory(void) {
    size_t n = 100003;
    float *d = gpu->alloc(n * sizeof(float));
    float *h = down(d, n), *z = calloc(n, sizeof(float));
    check_bits("alloc is zero-filled", h, z, n * sizeof(float));
    float *x = randf(n, -1, 1);
    gpu->to_device(d, x, n * sizeof(float));
    free(h);
    h = down(d, n);
    check_bits("to_device / to_host round trip", h, x, n * sizeof(float));
    gpu->zero(d, n * sizeof(float));
    free(h);
    h = down(d, n);
    check_bits("zero", h, z, n * sizeof(float));
    gpu->free(d);
    free(h), free(z), free(x);
}

static void test_elementwise(void) {
    size_t n = 100003;
    float *a = randf(n, -2, 2), *b = randf(n, -2, 2), *out = malloc(n * sizeof(float));
    float *da = up(a, n), *db = up(b, n), *dout = up(a, n);
    cpu->add(out, a, b, n);
    gpu->add(dout, da, db, n);
    check_dev("add", dout, out, n, TOL_ELEMENTWISE);
    cpu->scale(a, n, -0.37f);
    gpu->scale(da, n, -0.37f);
    check_dev("scale", da, a, n, TOL_ELEMENTWISE);

    size_t m = 1000003;
    float *x = randf(m, -3, 3), *dx = up(x, m);
    double sc = cpu->sumsq(x, m), sg = gpu->sumsq(dx, m), sg2 = gpu->sumsq(dx, m);
    double rel = fabs(sg - sc) / sc;
    int ok = rel <= TOL_SUMSQ;
    printf("%-4s %-48s rel err %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", "sumsq (n = 1000003)", rel,
           TOL_SUMSQ);
    if (!ok) failures++;
    check_bits("sumsq repeats bitwise", &sg, &sg2, sizeof sg);
    gpu->free(da), gpu->free(db), gpu->free(dout), gpu->free(dx);
    free(a), free(b), free(out), free(x);
}

static void test_matmul(int N, int IC, int OC) {
    char name[96];
    float *inp = randf((size_t)N * IC, -1, 1), *w = randf((size_t)OC * IC, -0.5, 0.5);
    float *dout = randf((size_t)N * OC, -1, 1);
    float *dinp = randf((size_t)N * IC, -1, 1), *dw = randf((size_t)OC * IC, -1, 1);
    float *out = malloc((size_t)N * OC * sizeof(float));
    float *d_inp = up(inp, (size_t)N * IC), *d_w = up(w, (size_t)OC * IC);
    float *d_dout = up(dout, (size_t)N * OC), *d_out = gpu->alloc((size_t)N * OC * sizeof(float));
    float *d_dinp = up(dinp, (size_t)N * IC), *d_dw = up(dw, (size_t)OC * IC);

    cpu->matmul_forward(out, inp, w, N, IC, OC);
    gpu->matmul_forward(d_out, d_inp, d_w, N, IC, OC);
    snprintf(name, sizeof name, "matmul_forward N=%d IC=%d OC=%d", N, IC, OC);
    check_dev(name, d_out, out, (size_t)N * OC, TOL_MATMUL);

    cpu->matmul_backward(dinp, dw, dout, inp, w, N, IC, OC);
    gpu->matmul_backward(d_dinp, d_dw, d_dout, d_inp, d_w, N, IC, OC);
    snprintf(name, sizeof name, "matmul_backward dinp (+=) N=%d IC=%d OC=%d", N, IC, OC);
    check_dev(name, d_dinp, dinp, (size_t)N * IC, TOL_MATMUL);
    snprintf(name, sizeof name, "matmul_backward dw (+=) N=%d IC=%d OC=%d", N, IC, OC);
    check_dev(name, d_dw, dw, (size_t)OC * IC, TOL_MATMUL);

    /* NULL gradients are skipped */
    cpu->matmul_backward(NULL, dw, dout, inp, w, N, IC, OC);
    gpu->matmul_backward(NULL, d_dw, d_dout, d_inp, d_w, N, IC, OC);
    cpu->matmul_backward(dinp, NULL, dout, inp, w, N, IC, OC);
    gpu->matmul_backward(d_dinp, NULL, d_dout, d_inp, d_w, N, IC, OC);
    check_dev("matmul_backward with one NULL gradient: dinp", d_dinp, dinp, (size_t)N * IC,
              TOL_MATMUL);
    check_dev("matmul_backward with one NULL gradient: dw", d_dw, dw, (size_t)OC * IC,
              TOL_MATMUL);
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_out);
    gpu->free(d_dinp), gpu->free(d_dw);
    free(inp), free(w), free(dout), free(dinp), free(dw), free(out);
}

/* pointers 4 bytes past an allocation's start, as into a carved buffer */
static void test_matmul_unaligned(int N, int IC, int OC) {
    float *inp = randf((size_t)N * IC + 1, -1, 1), *w = randf((size_t)OC * IC + 1, -0.5, 0.5);
    float *out = malloc((size_t)N * OC * sizeof(float));
    float *d_inp = up(inp, (size_t)N * IC + 1), *d_w = up(w, (size_t)OC * IC + 1);
    float *d_out = gpu->alloc(((size_t)N * OC + 1) * sizeof(float));
    cpu->matmul_forward(out, inp + 1, w + 1, N, IC, OC);
    gpu->matmul_forward(d_out + 1, d_inp + 1, d_w + 1, N, IC, OC);
    check_dev("matmul_forward on 4-byte aligned pointers", d_out + 1, out, (size_t)N * OC,
              TOL_MATMUL);
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_out);
    free(inp), free(w), free(out);
}

static void test_embedding(void) {
    int N = 300, C = 96, V = 50;
    uint32_t tokens[300];
    for (int n = 0; n < N; n++) tokens[n] = (uint32_t)(titan_rng_u64(7, 999, n) % V);
    tokens[1] = tokens[0]; /* a repeat for certain */
    float *wte = randf((size_t)V * C, -1, 1), *dout = randf((size_t)N * C, -1, 1);
    float *dwte = randf((size_t)V * C, -1, 1), *out = malloc((size_t)N * C * sizeof(float));
    uint32_t *d_tok = up_bytes(tokens, sizeof tokens);
    float *d_wte = up(wte, (size_t)V * C), *d_dout = up(dout, (size_t)N * C);
    float *d_dwte = up(dwte, (size_t)V * C), *d_out = gpu->alloc((size_t)N * C * sizeof(float));
    cpu->embedding_forward(out, tokens, wte, N, C);
    gpu->embedding_forward(d_out, d_tok, d_wte, N, C);
    check_dev("embedding_forward", d_out, out, (size_t)N * C, TOL_ELEMENTWISE);
    cpu->embedding_backward(dwte, dout, tokens, N, C);
    gpu->embedding_backward(d_dwte, d_dout, d_tok, N, C);
    check_dev("embedding_backward (+=, repeated tokens)", d_dwte, dwte, (size_t)V * C,
              TOL_ELEMENTWISE);
    gpu->free(d_tok), gpu->free(d_wte), gpu->free(d_dout), gpu->free(d_dwte), gpu->free(d_out);
    free(wte), free(dout), free(dwte), free(out);
}

static void test_rmsnorm(int N, int C) {
    char name[96];
    size_t nc = (size_t)N * C;
    float *inp = randf(nc, -2, 2), *w = randf(C, 0.5, 1.5), *dout = randf(nc, -1, 1);
    float *dinp = randf(nc, -1, 1), *dw = randf(C, -1, 1);
    float *out = malloc(nc * sizeof(float)), *rstd = malloc(N * sizeof(float));
    float *d_inp = up(inp, nc), *d_w = up(w, C), *d_dout = up(dout, nc), *d_dinp = up(dinp, nc);
    float *d_dw = up(dw, C), *d_out = gpu->alloc(nc * sizeof(float));
    float *d_rstd = gpu->alloc(N * sizeof(float));
    cpu->rmsnorm_forward(out, rstd, inp, w, N, C, 1e-5f);
    gpu->rmsnorm_forward(d_out, d_rstd, d_inp, d_w, N, C, 1e-5f);
    snprintf(name, sizeof name, "rmsnorm_forward out N=%d C=%d", N, C);
    check_dev(name, d_out, out, nc, TOL_ELEMENTWISE);
    check_dev("rmsnorm_forward rstd", d_rstd, rstd, N, TOL_ELEMENTWISE);
    /* backward from the CPU's rstd on both sides, so only the backward is compared */
    gpu->to_device(d_rstd, rstd, N * sizeof(float));
    cpu->rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
    gpu->rmsnorm_backward(d_dinp, d_dw, d_dout, d_inp, d_w, d_rstd, N, C);
    check_dev("rmsnorm_backward dinp (+=)", d_dinp, dinp, nc, TOL_ELEMENTWISE);
    check_dev("rmsnorm_backward dweight (+=)", d_dw, dw, C, TOL_ELEMENTWISE);
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_dinp), gpu->free(d_dw);
    gpu->free(d_out), gpu->free(d_rstd);
    free(inp), free(w), free(dout), free(dinp), free(dw), free(out), free(rstd);
}

static void test_rope(void) {
    int B = 2, T = 37, NHX = 3, HD = 16;
    size_t n = (size_t)B * T * NHX * HD, nt = (size_t)T * HD / 2;
    float *cs = malloc(nt * sizeof(float)), *sn = malloc(nt * sizeof(float));
    titan_rope_tables(cs, sn, T, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    float *x = randf(n, -1, 1), *dout = randf(n, -1, 1), *dinp = randf(n, -1, 1);
    float *out = malloc(n * sizeof(float));
    float *d_cs = up(cs, nt), *d_sn = up(sn, nt), *d_x = up(x, n), *d_dout = up(dout, n);
    float *d_dinp = up(dinp, n), *d_out = gpu->alloc(n * sizeof(float));
    cpu->rope_forward(out, x, cs, sn, B, T, NHX, HD);
    gpu->rope_forward(d_out, d_x, d_cs, d_sn, B, T, NHX, HD);
    check_dev("rope_forward", d_out, out, n, TOL_ELEMENTWISE);
    gpu->rope_forward(d_x, d_x, d_cs, d_sn, B, T, NHX, HD); /* in place */
    check_dev("rope_forward in place (out == inp)", d_x, out, n, TOL_ELEMENTWISE);
    cpu->rope_backward(dinp, dout, cs, sn, B, T, NHX, HD);
    gpu->rope_backward(d_dinp, d_dout, d_cs, d_sn, B, T, NHX, HD);
    check_dev("rope_backward (+=)", d_dinp, dinp, n, TOL_ELEMENTWISE);
    gpu->free(d_cs), gpu->free(d_sn), gpu->free(d_x), gpu->free(d_dout), gpu->free(d_dinp);
    gpu->free(d_out);
    free(cs), free(sn), free(x), free(dout), free(dinp), free(out);
}

static void test_attention(int B, int T, int NH, int NKV, int HD) {
    char name[128];
    size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * NKV * HD, nl = (size_t)B * NH * T;
    float *q = randf(nq, -1, 1), *k = randf(nk, -1, 1), *v = randf(nk, -1, 1);
    float *dout = randf(nq, -1, 1);
    float *dq = randf(nq, -1, 1), *dk = randf(nk, -1, 1), *dv = randf(nk, -1, 1);
    float *out = malloc(nq * sizeof(float)), *lse = malloc(nl * sizeof(float));
    float *d_q = up(q, nq), *d_k = up(k, nk), *d_v = up(v, nk), *d_dout = up(dout, nq);
    float *d_dq = up(dq, nq), *d_dk = up(dk, nk), *d_dv = up(dv, nk);
    float *d_out = gpu->alloc(nq * sizeof(float)), *d_lse = gpu->alloc(nl * sizeof(float));

    cpu->attention_forward(out, lse, q, k, v, B, T, NH, NKV, HD);
    gpu->attention_forward(d_out, d_lse, d_q, d_k, d_v, B, T, NH, NKV, HD);
    snprintf(name, sizeof name, "attention_forward out B=%d T=%d NH=%d NKV=%d HD=%d", B, T, NH,
             NKV, HD);
    check_dev(name, d_out, out, nq, TOL_ATTENTION);
    check_dev("attention_forward lse", d_lse, lse, nl, TOL_ATTENTION);

    /* backward from the CPU's out and lse on both sides */
    gpu->to_device(d_out, out, nq * sizeof(float));
    gpu->to_device(d_lse, lse, nl * sizeof(float));
    cpu->attention_backward(dq, dk, dv, dout, out, lse, q, k, v, B, T, NH, NKV, HD);
    gpu->attention_backward(d_dq, d_dk, d_dv, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, NH, NKV,
                            HD);
    check_dev("attention_backward dq (+=)", d_dq, dq, nq, TOL_ATTENTION);
    check_dev("attention_backward dk (+=)", d_dk, dk, nk, TOL_ATTENTION);
    check_dev("attention_backward dv (+=)", d_dv, dv, nk, TOL_ATTENTION);

    /* the same call twice from zero gradients gives the same bits */
    float *g1[3], *g2[3];
    size_t sz[3] = {nq, nk, nk};
    for (int rep = 0; rep < 2; rep++) {
        gpu->zero(d_dq, nq * sizeof(float));
        gpu->zero(d_dk, nk * sizeof(float));
        gpu->zero(d_dv, nk * sizeof(float));
        gpu->attention_backward(d_dq, d_dk, d_dv, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, NH,
                                NKV, HD);
        float **g = rep ? g2 : g1;
        g[0] = down(d_dq, nq), g[1] = down(d_dk, nk), g[2] = down(d_dv, nk);
    }
    int same = 1;
    for (int i = 0; i < 3; i++) same &= memcmp(g1[i], g2[i], sz[i] * sizeof(float)) == 0;
    check_bits("attention_backward repeats bitwise", &same, &(int){1}, sizeof same);
    for (int i = 0; i < 3; i++) free(g1[i]), free(g2[i]);

    gpu->free(d_q), gpu->free(d_k), gpu->free(d_v), gpu->free(d_dout), gpu->free(d_dq);
    gpu->free(d_dk), gpu->free(d_dv), gpu->free(d_out), gpu->free(d_lse);
    free(q), free(k), free(v), free(dout), free(dq), free(dk), free(dv), free(out), free(lse);
}

static void test_swiglu(void) {
    int N = 33, H = 700;
    size_t n = (size_t)N * H;
    float *h1 = randf(n, -6, 6), *h3 = randf(n, -2, 2), *dout = randf(n, -1, 1);
    float *dh1 = randf(n, -1, 1), *dh3 = randf(n, -1, 1), *out = malloc(n * sizeof(float));
    float *d_h1 = up(h1, n), *d_h3 = up(h3, n), *d_dout = up(dout, n), *d_dh1 = up(dh1, n);
    float *d_dh3 = up(dh3, n), *d_out = gpu->alloc(n * sizeof(float));
    cpu->swiglu_forward(out, h1, h3, N, H);
    gpu->swiglu_forward(d_out, d_h1, d_h3, N, H);
    check_dev("swiglu_forward", d_out, out, n, TOL_ELEMENTWISE);
    cpu->swiglu_backward(dh1, dh3, dout, h1, h3, N, H);
    gpu->swiglu_backward(d_dh1, d_dh3, d_dout, d_h1, d_h3, N, H);
    check_dev("swiglu_backward dh1 (+=)", d_dh1, dh1, n, TOL_ELEMENTWISE);
    check_dev("swiglu_backward dh3 (+=)", d_dh3, dh3, n, TOL_ELEMENTWISE);
    gpu->free(d_h1), gpu->free(d_h3), gpu->free(d_dout), gpu->free(d_dh1), gpu->free(d_dh3);
    gpu->free(d_out);
    free(h1), free(h3), free(dout), free(dh1), free(dh3), free(out);
}

static void test_cross_entropy(void) {
    int N = 17, V = 5003;
    size_t n = (size_t)N * V;
    uint32_t targets[17];
    for (int i = 0; i < N; i++) targets[i] = (uint32_t)(titan_rng_u64(7, 1234, i) % V);
    targets[0] = 0, targets[1] = (uint32_t)V - 1; /* both ends */
    float *logits = randf(n, -8, 8), *losses = malloc(N * sizeof(float));
    float *dlogits = malloc(n * sizeof(float));
    float *d_logits = up(logits, n), *d_losses = gpu->alloc(N * sizeof(float));
    float *d_dlogits = gpu->alloc(n * sizeof(float));
    uint32_t *d_tg = up_bytes(targets, sizeof targets);
    float dscale = 1.0f / N;
    cpu->cross_entropy(losses, dlogits, logits, targets, N, V, dscale);
    gpu->cross_entropy(d_losses, d_dlogits, d_logits, d_tg, N, V, dscale);
    check_dev("cross_entropy losses", d_losses, losses, N, TOL_ELEMENTWISE);
    check_dev("cross_entropy dlogits", d_dlogits, dlogits, n, TOL_ELEMENTWISE);
    gpu->zero(d_losses, N * sizeof(float));
    gpu->cross_entropy(d_losses, d_logits, d_logits, d_tg, N, V, dscale); /* in place */
    check_dev("cross_entropy losses (dlogits == logits)", d_losses, losses, N, TOL_ELEMENTWISE);
    check_dev("cross_entropy dlogits in place", d_logits, dlogits, n, TOL_ELEMENTWISE);
    gpu->free(d_logits), gpu->free(d_losses), gpu->free(d_dlogits), gpu->free(d_tg);
    free(logits), free(losses), free(dlogits);
}

static void test_adamw(void) {
    size_t n = 10007;
    float *p = randf(n, -1, 1), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    float *d_p = up(p, n), *d_m = up(m, n), *d_v = up(v, n);
    for (int64_t t = 1; t <= 3; t++) {
        float *g = randf(n, -0.1, 0.1), *d_g = up(g, n);
        cpu->adamw_step(p, g, m, v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        gpu->adamw_step(d_p, d_g, d_m, d_v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        gpu->free(d_g);
        free(g);
    }
    check_dev("adamw_step p (3 steps)", d_p, p, n, TOL_ELEMENTWISE);
    check_dev("adamw_step m", d_m, m, n, TOL_ELEMENTWISE);
    check_dev("adamw_step v", d_v, v, n, TOL_ELEMENTWISE);
    float *hp = down(d_p, n);
    check_bits("adamw_step p equals the CPU's bits", hp, p, n * sizeof(float));
    free(hp);
    gpu->free(d_p), gpu->free(d_m), gpu->free(d_v);
    free(p), free(m), free(v);
}

int main(void) {
    titan_status st = titan_backend_open("cuda", &gpu);
    if (st != TITAN_OK) {
        printf("no GPU: %s\n", titan_error_message());
        return 77;
    }
    cpu = titan_backend_cpu();
    printf("backend %s against %s\n", gpu->name, cpu->name);
    test_memory();
    test_elementwise();
    test_matmul(67, 129, 95);
    test_matmul(256, 512, 384);
    test_matmul_unaligned(33, 65, 17);
    test_embedding();
    test_rmsnorm(37, 1000);
    test_rmsnorm(5, 16);
    test_rope();
    test_attention(2, 100, 4, 2, 16);
    test_attention(1, 130, 8, 8, 64);
    test_attention(1, 70, 4, 1, 128);
    test_attention(1, 40, 2, 1, 256);
    test_swiglu();
    test_cross_entropy();
    test_adamw();
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
