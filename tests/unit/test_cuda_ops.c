/* test_cuda_ops.c - every op of the CUDA backend against the CPU reference
 * backend on the same random inputs, once with dt = f32 and once with
 * dt = bf16: forward outputs and backward gradients, aliasing cases, bitwise
 * repeatability of the GPU results, convert both ways, and memory()'s
 * accounting. Every backward op runs under each acc mask (backend.h): an
 * added gradient (+=) starts random, on the CPU too, so the result is start
 * + gradient; an overwritten one (=) starts as NaN on the GPU and must equal
 * the CPU's sum into zeros, with no NaN left (nothing read). Ops with two
 * kinds of gradient (matmul, rmsnorm) also run the mixed masks. Attention
 * runs whole sequences and chunks of queries (the last Tq of Tk positions,
 * as context parallelism computes them). bf16
 * attention at HD 64 and 128 runs the tensor-core kernels (attention_tc.cu);
 * TITAN_CUDA_ATTENTION=simple sends it to the CUDA-core ones instead, and
 * TITAN_CUDA_ATTENTION=cudnn to cuDNN's (attention_cudnn.cu; its backward is
 * not bitwise repeatable, so that one check is skipped).
 *
 * bf16 inputs are random values rounded to bf16 on the host, so both
 * backends read the same bits; the CPU backend's bf16 ops (fp32 ops on
 * widened copies, rounded once) are the reference. Error is normalised:
 * ||gpu - cpu|| / ||cpu|| (L2, over the values widened to fp32), against the
 * tolerance of the op's dt and kind below; the fp32 outputs of a bf16 op
 * (dw, dweight, dwte, rstd, lse, losses) are held to the same dt's row.
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
#include "tensor/dtype.h"
#include "model/rope_freqs.h" /* titan_rope_tables: the cos/sin the rope ops take */
#include "optim/svd.h"        /* GaLore's refresh written over the backend ops */
#include "subspace.h"

/* tolerance table: normalised L2 error by dt and kind of op */
enum { ELEMENTWISE, MATMUL, ATTENTION, KINDS };
static const double TOL_F32[KINDS] = {
    1e-5, /* add, embedding, rope, swiglu, norms, loss, adamw */
    1e-4, /* long fp32 dot products summed in another order */
    1e-4,
};
static const double TOL_BF16[KINDS] = {
    1e-2, /* one bf16 rounding of nearly equal fp32 results: ~1 ulp (2^-8) on a few elements */
    2e-2, /* fp32-accumulated products of bf16 inputs (tensor cores vs BLAS) */
    2e-2,
};
#define TOL_SUMSQ 1e-12 /* both sum in double */

static const titan_backend *cpu, *gpu;
static int failures;
static uint64_t stream_counter = 1;
static titan_dtype cur_dt; /* the dt of the section running */

static double tol(int kind) { return cur_dt == TITAN_DTYPE_BF16 ? TOL_BF16[kind] : TOL_F32[kind]; }
static size_t esize(titan_dtype t) { return t == TITAN_DTYPE_BF16 ? 2 : 4; }
static const char *dname(void) { return cur_dt == TITAN_DTYPE_BF16 ? "bf16" : "f32"; }

/* ---------------------------------------------------------------- helpers */

static void *xmalloc(size_t nbytes) {
    void *p = malloc(nbytes ? nbytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", nbytes);
        exit(1);
    }
    return p;
}

/* n random values in [lo, hi) stored as type t (bf16: rounded to nearest even) */
static void *rand_t(titan_dtype t, size_t n, double lo, double hi) {
    void *x = xmalloc(n * esize(t));
    uint64_t s = stream_counter++;
    for (size_t i = 0; i < n; i++) {
        float v = (float)(lo + (hi - lo) * titan_rng_uniform(7, s, i));
        if (t == TITAN_DTYPE_BF16) ((uint16_t *)x)[i] = titan_f32_to_bf16(v);
        else ((float *)x)[i] = v;
    }
    return x;
}
static float *randf(size_t n, double lo, double hi) { return rand_t(TITAN_DTYPE_F32, n, lo, hi); }
/* of the section's dt */
static void *randd(size_t n, double lo, double hi) { return rand_t(cur_dt, n, lo, hi); }
static void *hostd(size_t n) { return xmalloc(n * esize(cur_dt)); }

/* a device copy of nbytes of host memory */
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
static void *upd(const void *h, size_t n) { return up_bytes(h, n * esize(cur_dt)); }
static void *allocd(size_t n) {
    void *d = gpu->alloc(n * esize(cur_dt));
    if (!d) {
        fprintf(stderr, "cuda alloc of %zu elements failed\n", n);
        exit(1);
    }
    return d;
}

/* the device buffer's contents (n elements of type t) in a new host array */
static void *down_t(titan_dtype t, const void *d, size_t n) {
    void *h = xmalloc(n * esize(t));
    gpu->to_host(h, d, n * esize(t));
    return h;
}
static float *down(const float *d, size_t n) { return down_t(TITAN_DTYPE_F32, d, n); }

static double widen(titan_dtype t, const void *x, size_t i) {
    return t == TITAN_DTYPE_BF16 ? (double)titan_bf16_to_f32(((const uint16_t *)x)[i])
                                 : (double)((const float *)x)[i];
}

static void report(const char *name, int ok, double rel, double tl) {
    printf("%-4s [%-4s] %-50s rel err %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", dname(), name, rel,
           tl);
    if (!ok) failures++;
}

static void check_t(const char *name, titan_dtype t, const void *got, const void *want, size_t n,
                    double tl) {
    double num = 0.0, den = 0.0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        double w = widen(t, want, i), d = widen(t, got, i) - w;
        if (d != d) nan = 1;
        num += d * d;
        den += w * w;
    }
    double rel = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
    report(name, !nan && rel <= tl, rel, tl);
}

/* compares a device buffer of type t with a host reference */
static void check_dev_t(const char *name, titan_dtype t, const void *dev, const void *want,
                        size_t n, double tl) {
    void *h = down_t(t, dev, n);
    check_t(name, t, h, want, n, tl);
    free(h);
}
/* an fp32 buffer (dw, rstd, lse, losses, ...) */
static void check_dev(const char *name, const float *dev, const float *want, size_t n, double tl) {
    check_dev_t(name, TITAN_DTYPE_F32, dev, want, n, tl);
}
/* a buffer of the section's dt */
static void check_devd(const char *name, const void *dev, const void *want, size_t n, double tl) {
    check_dev_t(name, cur_dt, dev, want, n, tl);
}

static void check_bits(const char *name, const void *a, const void *b, size_t nbytes) {
    int ok = memcmp(a, b, nbytes) == 0;
    printf("%-4s [%-4s] %-50s %s\n", ok ? "ok" : "FAIL", dname(), name,
           ok ? "bitwise equal" : "bits differ");
    if (!ok) failures++;
}

/* two device buffers hold the same bytes */
static void check_dev_bits(const char *name, const void *d1, const void *d2, size_t nbytes) {
    void *h1 = xmalloc(nbytes), *h2 = xmalloc(nbytes);
    gpu->to_host(h1, d1, nbytes);
    gpu->to_host(h2, d2, nbytes);
    check_bits(name, h1, h2, nbytes);
    free(h1), free(h2);
}

static void check_true(const char *name, int ok, const char *detail) {
    printf("%-4s [%-4s] %-50s %s\n", ok ? "ok" : "FAIL", dname(), name, detail);
    if (!ok) failures++;
}

/* ------------------------------------------------- gradients and acc masks */

/* the CPU reference always adds: an overwrite is its sum into zeros */
#define ACC_ALL (TITAN_ACC_DX | TITAN_ACC_DW)

/* every mask: both outputs added, both overwritten, then the mixed ones */
static const int MASKS[] = {ACC_ALL, 0, TITAN_ACC_DX, TITAN_ACC_DW};

/* how an output under mask bit `bit` is written, for check names */
static const char *mode(int acc, int bit) { return acc & bit ? "+=" : "= over NaN"; }

/* n NaNs of type t (f32 or bf16 quiet NaN) */
static void *nan_t(titan_dtype t, size_t n) {
    void *x = xmalloc(n * esize(t));
    for (size_t i = 0; i < n; i++) {
        if (t == TITAN_DTYPE_BF16) ((uint16_t *)x)[i] = 0x7fc0u;
        else ((float *)x)[i] = NAN;
    }
    return x;
}

/* A gradient of n elements of type t as a backward op finds it: added into
 * (add != 0): the same random values in *host (the CPU reference's start)
 * and on the GPU; overwritten: zeros in *host, NaN on the GPU. Returns the
 * device buffer. */
static void *grad_start(titan_dtype t, size_t n, int add, void **host) {
    void *h = add ? rand_t(t, n, -1, 1) : calloc(n ? n : 1, esize(t)); /* 0 bits: +0 */
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    void *src = add ? h : nan_t(t, n);
    void *d = up_bytes(src, n * esize(t));
    if (src != h) free(src);
    *host = h;
    return d;
}

/* ------------------------------------------------ memory, convert (no dt) */

static void test_buffers(void) {
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

static void test_memory_accounting(void) {
    char detail[160];
    size_t u0, p0, dev0, u1, p1, dev1, u2, p2, u3, p3;
    gpu->memory(&u0, &p0, &dev0, 1); /* a new peak window at u0 */
    gpu->memory(NULL, NULL, NULL, 0); /* any pointer may be NULL */
    size_t nb = (size_t)3 << 20;
    void *a = gpu->alloc(nb);
    gpu->memory(&u1, &p1, &dev1, 0);
    snprintf(detail, sizeof detail, "in_use %zu -> %zu, peak %zu, device_used %zu", u0, u1, p1,
             dev1);
    check_true("memory: alloc adds its size to in_use and peak", u1 == u0 + nb && p1 == u1,
               detail);
    check_true("memory: device_used covers in_use", dev1 >= u1 && dev1 > 0, detail);
    gpu->free(a);
    gpu->memory(&u2, &p2, NULL, 0);
    snprintf(detail, sizeof detail, "in_use %zu, peak %zu", u2, p2);
    check_true("memory: free returns in_use, peak stays", u2 == u0 && p2 == u0 + nb, detail);
    gpu->memory(NULL, NULL, NULL, 1);
    gpu->memory(&u3, &p3, NULL, 0);
    snprintf(detail, sizeof detail, "in_use %zu, peak %zu", u3, p3);
    check_true("memory: reset starts the peak at in_use", u3 == u0 && p3 == u0, detail);
    (void)p0, (void)dev0;
}

/* f32 -> bf16 bitwise as titan_f32_to_bf16 (ties, overflow, subnormals,
 * signed zero), bf16 -> f32 exactly, same-type copies; NaN stays NaN. */
static void test_convert(void) {
    size_t n = 70001, nspec = 12;
    float *f = randf(n, -3, 3);
    uint32_t sub = 0x00012345u; /* a subnormal */
    float fsub;
    memcpy(&fsub, &sub, sizeof fsub);
    float spec[12] = {0.0f, -0.0f, INFINITY, -INFINITY, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                      -(1.0f + 0x1p-8f), 3.3961e38f, 3.4e38f, fsub, -fsub, 1e-39f};
    memcpy(f, spec, nspec * sizeof(float));
    for (size_t i = nspec; i < n; i += 97) f[i] *= 1e30f; /* large exponents too */
    uint16_t *want16 = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) want16[i] = titan_f32_to_bf16(f[i]);
    float *want32 = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) want32[i] = titan_bf16_to_f32(want16[i]);

    float *d_f = up(f, n), *d_f2 = gpu->alloc(n * 4);
    uint16_t *d_b = gpu->alloc(n * 2), *d_b2 = gpu->alloc(n * 2);
    gpu->convert(d_b, TITAN_DTYPE_BF16, d_f, TITAN_DTYPE_F32, n);
    uint16_t *h16 = down_t(TITAN_DTYPE_BF16, d_b, n);
    check_bits("convert f32 -> bf16 (ties, inf, subnormals)", h16, want16, n * 2);
    gpu->convert(d_f2, TITAN_DTYPE_F32, d_b, TITAN_DTYPE_BF16, n);
    float *h32 = down(d_f2, n);
    check_bits("convert bf16 -> f32", h32, want32, n * 4);
    gpu->convert(d_b2, TITAN_DTYPE_BF16, d_b, TITAN_DTYPE_BF16, n);
    check_dev_bits("convert bf16 -> bf16 (a copy)", d_b2, d_b, n * 2);
    gpu->convert(d_f2, TITAN_DTYPE_F32, d_f, TITAN_DTYPE_F32, n);
    check_dev_bits("convert f32 -> f32 (a copy)", d_f2, d_f, n * 4);

    float nan = NAN;
    gpu->to_device(d_f, &nan, sizeof nan);
    gpu->convert(d_b, TITAN_DTYPE_BF16, d_f, TITAN_DTYPE_F32, 1);
    uint16_t hb;
    gpu->to_host(&hb, d_b, 2);
    check_true("convert NaN f32 -> bf16 stays NaN", (hb & 0x7f80u) == 0x7f80u && (hb & 0x7fu),
               "");
    gpu->free(d_f), gpu->free(d_f2), gpu->free(d_b), gpu->free(d_b2);
    free(f), free(want16), free(want32), free(h16), free(h32);
}

/* ------------------------------------------------------------- fp32 only */

static void test_scale_sumsq(void) {
    size_t n = 100003;
    float *a = randf(n, -2, 2), *da = up(a, n);
    cpu->scale(a, n, -0.37f);
    gpu->scale(da, n, -0.37f);
    check_dev("scale", da, a, n, TOL_F32[ELEMENTWISE]);

    size_t m = 1000003;
    float *x = randf(m, -3, 3), *dx = up(x, m);
    double sc = cpu->sumsq(x, m), sg = gpu->sumsq(dx, m), sg2 = gpu->sumsq(dx, m);
    double rel = fabs(sg - sc) / sc;
    report("sumsq (n = 1000003)", rel <= TOL_SUMSQ, rel, TOL_SUMSQ);
    check_bits("sumsq repeats bitwise", &sg, &sg2, sizeof sg);
    /* off 16-byte alignment (the element-wise kernel), and shorter than the threads */
    double so = cpu->sumsq(x + 1, m - 1), sgo = gpu->sumsq(dx + 1, m - 1);
    rel = fabs(sgo - so) / so;
    report("sumsq off 16-byte alignment (n = 1000002)", rel <= TOL_SUMSQ, rel, TOL_SUMSQ);
    double ss = cpu->sumsq(x, 1003), sgs = gpu->sumsq(dx, 1003);
    rel = fabs(sgs - ss) / ss;
    report("sumsq (n = 1003: a tail of 3)", rel <= TOL_SUMSQ, rel, TOL_SUMSQ);
    /* sumsq_into: sumsq's bits, left in device memory (the partial clip norms) */
    double *d_out = gpu->alloc(3 * sizeof(double)), into[3];
    gpu->sumsq_into(d_out, dx, m);
    gpu->sumsq_into(d_out + 1, dx + 1, m - 1);
    gpu->sumsq_into(d_out + 2, dx, 0);
    gpu->to_host(into, d_out, sizeof into);
    double want[3] = {sg, sgo, 0.0};
    check_bits("sumsq_into equals sumsq bitwise (aligned, off alignment, empty)", into, want, sizeof want);
    gpu->free(d_out);
    gpu->free(da), gpu->free(dx);
    free(a), free(x);
}

static void test_adamw(void) {
    size_t n = 10007;
    float *p = randf(n, -1, 1), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    float *d_p = up(p, n), *d_m = up(m, n), *d_v = up(v, n);
    /* the third step also writes the bf16 compute copy */
    uint16_t *copy = malloc(n * 2), *hcopy = malloc(n * 2);
    void *d_copy = gpu->alloc(n * 2);
    for (int64_t t = 1; t <= 3; t++) {
        float *g = randf(n, -0.1, 0.1), *d_g = up(g, n);
        /* step 2 clipped (gscale), step 3 with the bf16 compute copy */
        float gs = t == 2 ? 0.4321f : 1.0f;
        cpu->adamw_step(p, t == 3 ? copy : NULL, g, gs, m, v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                        t);
        gpu->adamw_step(d_p, t == 3 ? d_copy : NULL, d_g, gs, d_m, d_v, n, 3e-4f, 0.9f, 0.95f,
                        1e-8f, 0.1f, t);
        gpu->free(d_g);
        free(g);
    }
    check_dev("adamw_step p (3 steps)", d_p, p, n, TOL_F32[ELEMENTWISE]);
    check_dev("adamw_step m", d_m, m, n, TOL_F32[ELEMENTWISE]);
    check_dev("adamw_step v", d_v, v, n, TOL_F32[ELEMENTWISE]);
    float *hp = down(d_p, n);
    check_bits("adamw_step p equals the CPU's bits", hp, p, n * sizeof(float));
    gpu->to_host(hcopy, d_copy, n * 2);
    check_bits("adamw_step bf16 copy equals the CPU's bits", hcopy, copy, n * 2);
    /* pointers off 16-byte alignment take the one-by-one kernel */
    float *g = randf(n, -0.1, 0.1), *d_g = up(g, n);
    size_t k = n - 1;
    cpu->adamw_step(p + 1, copy + 1, g + 1, 0.77f, m + 1, v + 1, k, 1e-3f, 0.9f, 0.95f, 1e-8f,
                    0.1f, 4);
    gpu->adamw_step(d_p + 1, (uint16_t *)d_copy + 1, d_g + 1, 0.77f, d_m + 1, d_v + 1, k, 1e-3f,
                    0.9f, 0.95f, 1e-8f, 0.1f, 4);
    free(hp);
    hp = down(d_p, n);
    gpu->to_host(hcopy, d_copy, n * 2);
    check_bits("adamw_step unaligned: p equals the CPU's bits", hp, p, n * sizeof(float));
    check_bits("adamw_step unaligned: bf16 copy equals the CPU's", hcopy, copy, n * 2);
    /* on the side stream in two ranges, each followed by an event the main
     * stream waits for: the bits of one step on the main stream */
    if (gpu->side_stream) {
        void *ev[2] = {gpu->event_create(), gpu->event_create()};
        size_t half = n / 2;
        cpu->adamw_step(p, copy, g, 0.5f, m, v, n, 2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 5);
        gpu->side_stream(1);
        gpu->adamw_step(d_p, d_copy, d_g, 0.5f, d_m, d_v, half, 2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 5);
        gpu->event_record(ev[0]);
        gpu->adamw_step(d_p + half, (uint16_t *)d_copy + half, d_g + half, 0.5f, d_m + half,
                        d_v + half, n - half, 2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 5);
        gpu->event_record(ev[1]);
        gpu->side_stream(0);
        gpu->event_wait(ev[0]);
        gpu->event_wait(ev[1]);
        free(hp);
        hp = down(d_p, n);
        gpu->to_host(hcopy, d_copy, n * 2);
        check_bits("adamw_step on the side stream, two ranges: p equals the CPU's bits", hp, p,
                   n * sizeof(float));
        check_bits("adamw_step on the side stream: bf16 copy equals the CPU's", hcopy, copy, n * 2);
        gpu->event_free(ev[0]), gpu->event_free(ev[1]);
    }
    gpu->free(d_g), gpu->free(d_copy);
    free(g), free(copy), free(hcopy);
    free(hp);
    gpu->free(d_p), gpu->free(d_m), gpu->free(d_v);
    free(p), free(m), free(v);
}

/* ------------------------------------------------- every dt (cur_dt) ops */

static void test_add(void) {
    titan_dtype dt = cur_dt;
    size_t n = 100003;
    void *a = randd(n, -2, 2), *b = randd(n, -2, 2), *out = hostd(n);
    void *da = upd(a, n), *db = upd(b, n), *dout = allocd(n);
    cpu->add(dt, out, a, b, n);
    gpu->add(dt, dout, da, db, n);
    check_devd("add", dout, out, n, tol(ELEMENTWISE));
    gpu->add(dt, da, da, db, n); /* out == a */
    check_devd("add in place (out == a)", da, out, n, tol(ELEMENTWISE));
    gpu->to_device(da, a, n * esize(dt));
    gpu->add(dt, db, da, db, n); /* out == b */
    check_devd("add in place (out == b)", db, out, n, tol(ELEMENTWISE));
    /* one element in: no 16-byte packs, the kernel's element-wise path */
    size_t e = esize(dt);
    gpu->to_device(da, a, n * e);
    gpu->to_device(db, b, n * e);
    gpu->add(dt, (char *)dout + e, (char *)da + e, (char *)db + e, n - 1);
    check_devd("add, pointers off 16-byte alignment", (char *)dout + e, (char *)out + e, n - 1,
               tol(ELEMENTWISE));
    gpu->free(da), gpu->free(db), gpu->free(dout);
    free(a), free(b), free(out);
}

static void test_matmul(int N, int IC, int OC) {
    titan_dtype dt = cur_dt;
    char name[96];
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    void *inp = randd(ni, -1, 1), *w = randd(nw, -0.5, 0.5), *dout = randd(no, -1, 1);
    void *out = hostd(no);
    void *d_inp = upd(inp, ni), *d_w = upd(w, nw), *d_dout = upd(dout, no), *d_out = allocd(no);

    cpu->matmul_forward(dt, out, inp, w, N, IC, OC);
    gpu->matmul_forward(dt, d_out, d_inp, d_w, N, IC, OC);
    snprintf(name, sizeof name, "matmul_forward N=%d IC=%d OC=%d", N, IC, OC);
    check_devd(name, d_out, out, no, tol(MATMUL));

    /* each mask: beta 1 or 0 per output (dinp: DX, dw: DW) */
    for (size_t m = 0; m < sizeof MASKS / sizeof MASKS[0]; m++) {
        int acc = MASKS[m];
        void *dinp, *dw;
        void *d_dinp = grad_start(dt, ni, acc & TITAN_ACC_DX, &dinp);
        float *d_dw = grad_start(TITAN_DTYPE_F32, nw, acc & TITAN_ACC_DW, &dw);
        cpu->matmul_backward(dt, ACC_ALL, dinp, dw, dout, inp, w, N, IC, OC);
        gpu->matmul_backward(dt, acc, d_dinp, d_dw, d_dout, d_inp, d_w, N, IC, OC);
        snprintf(name, sizeof name, "matmul_backward dinp (%s) N=%d IC=%d OC=%d",
                 mode(acc, TITAN_ACC_DX), N, IC, OC);
        check_devd(name, d_dinp, dinp, ni, tol(MATMUL));
        snprintf(name, sizeof name, "matmul_backward dw (%s, f32)", mode(acc, TITAN_ACC_DW));
        check_dev(name, d_dw, dw, nw, tol(MATMUL));
        gpu->free(d_dinp), gpu->free(d_dw);
        free(dinp), free(dw);
    }

    /* NULL gradients are skipped: the other one is still written as its bit says */
    void *dinp = randd(ni, -1, 1), *d_dinp = upd(dinp, ni);
    float *dw = randf(nw, -1, 1), *d_dw = up(dw, nw);
    cpu->matmul_backward(dt, ACC_ALL, NULL, dw, dout, inp, w, N, IC, OC);
    gpu->matmul_backward(dt, ACC_ALL, NULL, d_dw, d_dout, d_inp, d_w, N, IC, OC);
    cpu->matmul_backward(dt, ACC_ALL, dinp, NULL, dout, inp, w, N, IC, OC);
    gpu->matmul_backward(dt, ACC_ALL, d_dinp, NULL, d_dout, d_inp, d_w, N, IC, OC);
    check_devd("matmul_backward with one NULL gradient: dinp", d_dinp, dinp, ni, tol(MATMUL));
    check_dev("matmul_backward with one NULL gradient: dw", d_dw, dw, nw, tol(MATMUL));

    /* the same calls again from the same state give the same bits */
    void *d_out2 = allocd(no), *d_dinp2 = upd(dinp, ni);
    float *d_dw2 = up(dw, nw);
    gpu->to_device(d_dinp, dinp, ni * esize(dt));
    gpu->to_device(d_dw, dw, nw * sizeof(float));
    gpu->matmul_forward(dt, d_out2, d_inp, d_w, N, IC, OC);
    gpu->matmul_backward(dt, ACC_ALL, d_dinp, d_dw, d_dout, d_inp, d_w, N, IC, OC);
    gpu->matmul_backward(dt, ACC_ALL, d_dinp2, d_dw2, d_dout, d_inp, d_w, N, IC, OC);
    check_dev_bits("matmul_forward repeats bitwise", d_out2, d_out, no * esize(dt));
    check_dev_bits("matmul_backward dinp repeats bitwise", d_dinp2, d_dinp, ni * esize(dt));
    check_dev_bits("matmul_backward dw repeats bitwise", d_dw2, d_dw, nw * sizeof(float));

    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_out);
    gpu->free(d_dinp), gpu->free(d_dw), gpu->free(d_out2), gpu->free(d_dinp2), gpu->free(d_dw2);
    free(inp), free(w), free(dout), free(dinp), free(dw), free(out);
}

/* out = resid + inp @ w^T (cuBLASLt's C = resid, D = out): out starts as
 * NaN (written, never read), the same bits again, in place (D = C), a
 * residual and output off 16-byte alignment (the plan takes the smaller of
 * C's and D's). In place is held to the reference and to repeating itself,
 * not to the out-of-place bits: cuBLASLt may run it differently (an H100,
 * cuBLAS 13.0, bf16 N=256 IC=512 OC=384: other bits, 2026-11-26). The
 * model never adds in place. */
static void test_matmul_add(int N, int IC, int OC) {
    titan_dtype dt = cur_dt;
    char name[96];
    size_t es = esize(dt), ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    char *inp = randd(ni, -1, 1), *w = randd(nw, -0.5, 0.5), *resid = randd(no + 1, -2, 2);
    char *out = hostd(no), *nan = hostd(no + 1);
    memset(nan, 0xff, (no + 1) * es);
    char *d_inp = upd(inp, ni), *d_w = upd(w, nw), *d_resid = upd(resid, no + 1), *d_out = upd(nan, no + 1);
    cpu->matmul_add_forward(dt, out, inp, w, resid, N, IC, OC);
    gpu->matmul_add_forward(dt, d_out, d_inp, d_w, d_resid, N, IC, OC);
    snprintf(name, sizeof name, "matmul_add_forward N=%d IC=%d OC=%d", N, IC, OC);
    check_devd(name, d_out, out, no, tol(MATMUL));
    char *d_out2 = upd(nan, no);
    gpu->matmul_add_forward(dt, d_out2, d_inp, d_w, d_resid, N, IC, OC);
    check_dev_bits("matmul_add_forward repeats bitwise", d_out2, d_out, no * es);
    gpu->matmul_add_forward(dt, d_resid, d_inp, d_w, d_resid, N, IC, OC); /* in place */
    check_devd("matmul_add_forward in place (out == resid)", d_resid, out, no, tol(MATMUL));
    gpu->convert(d_out2, dt, d_resid, dt, no); /* keep the first in-place result */
    gpu->to_device(d_resid, resid, no * es);
    gpu->matmul_add_forward(dt, d_resid, d_inp, d_w, d_resid, N, IC, OC);
    check_dev_bits("matmul_add_forward in place repeats bitwise", d_resid, d_out2, no * es);
    gpu->to_device(d_resid, resid, (no + 1) * es);
    gpu->to_device(d_out, nan, (no + 1) * es);
    cpu->matmul_add_forward(dt, out, inp, w, resid + es, N, IC, OC);
    gpu->matmul_add_forward(dt, d_out + es, d_inp, d_w, d_resid + es, N, IC, OC);
    check_devd("matmul_add_forward, resid and out one element off", d_out + es, out, no, tol(MATMUL));
    gpu->matmul_add_forward(dt, d_out, d_inp, d_w, d_resid + es, N, IC, OC);
    check_devd("matmul_add_forward, resid off, out aligned", d_out, out, no, tol(MATMUL));
    gpu->to_device(d_out2, nan, no * es); /* no inner dimension: the residual itself */
    gpu->matmul_add_forward(dt, d_out2, d_inp, d_w, d_resid, N, 0, OC);
    check_dev_bits("matmul_add_forward with IC = 0 copies the residual", d_out2, d_resid, no * es);
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_resid), gpu->free(d_out), gpu->free(d_out2);
    free(inp), free(w), free(resid), free(out), free(nan);
}

/* pointers one element past an allocation's start, as into a carved buffer
 * (4-byte aligned for f32, 2-byte for bf16); the backward added into, then
 * overwritten */
static void test_matmul_unaligned(int N, int IC, int OC) {
    titan_dtype dt = cur_dt;
    char name[96];
    size_t es = esize(dt), ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    char *inp = randd(ni + 1, -1, 1), *w = randd(nw + 1, -0.5, 0.5), *dout = randd(no + 1, -1, 1);
    char *out = hostd(no);
    char *d_inp = upd(inp, ni + 1), *d_w = upd(w, nw + 1), *d_dout = upd(dout, no + 1);
    char *d_out = allocd(no + 1);
    cpu->matmul_forward(dt, out, inp + es, w + es, N, IC, OC);
    gpu->matmul_forward(dt, d_out + es, d_inp + es, d_w + es, N, IC, OC);
    check_devd("matmul_forward on one-element-offset pointers", d_out + es, out, no,
               tol(MATMUL));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m];
        void *dinp, *dw;
        char *d_dinp = grad_start(dt, ni + 1, acc & TITAN_ACC_DX, &dinp);
        float *d_dw = grad_start(TITAN_DTYPE_F32, nw + 1, acc & TITAN_ACC_DW, &dw);
        cpu->matmul_backward(dt, ACC_ALL, (char *)dinp + es, (float *)dw + 1, dout + es,
                             inp + es, w + es, N, IC, OC);
        gpu->matmul_backward(dt, acc, d_dinp + es, d_dw + 1, d_dout + es, d_inp + es, d_w + es,
                             N, IC, OC);
        snprintf(name, sizeof name, "matmul_backward dinp (%s), offset pointers",
                 mode(acc, TITAN_ACC_DX));
        check_devd(name, d_dinp + es, (char *)dinp + es, ni, tol(MATMUL));
        snprintf(name, sizeof name, "matmul_backward dw (%s), offset pointers",
                 mode(acc, TITAN_ACC_DW));
        check_dev(name, d_dw + 1, (float *)dw + 1, nw, tol(MATMUL));
        gpu->free(d_dinp), gpu->free(d_dw);
        free(dinp), free(dw);
    }
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_out);
    free(inp), free(w), free(dout), free(out);
}

/* V small against N: tokens repeat, in runs the backward walks in row
 * order; V large against N: most rows of dwte are of tokens not in the
 * batch, which an overwrite must zero. shard: about a third of the ids are
 * >= V (another rank's vocabulary shard: zero rows, no gradient), some of
 * them repeated, UINT32_MAX among them */
static void test_embedding(int N, int C, int V, int shard) {
    titan_dtype dt = cur_dt;
    char name[96];
    const char *sfx = shard ? ", ids >= V" : "";
    uint32_t *tokens = xmalloc((size_t)N * sizeof *tokens);
    for (int n = 0; n < N; n++) tokens[n] = (uint32_t)(titan_rng_u64(7, 999, n) % V);
    for (int n = 2; shard && n < N; n += 3)
        tokens[n] = n % 2 ? UINT32_MAX : (uint32_t)V + (uint32_t)(n % 5);
    tokens[1] = tokens[0]; /* a repeat for certain */
    size_t nw = (size_t)V * C, no = (size_t)N * C;
    void *wte = randd(nw, -1, 1), *dout = randd(no, -1, 1), *out = hostd(no);
    uint32_t *d_tok = up_bytes(tokens, (size_t)N * sizeof *tokens);
    void *d_wte = upd(wte, nw), *d_dout = upd(dout, no), *d_out = allocd(no);
    cpu->embedding_forward(dt, out, tokens, wte, N, C, V);
    gpu->embedding_forward(dt, d_out, d_tok, d_wte, N, C, V);
    snprintf(name, sizeof name, "embedding_forward N=%d C=%d%s", N, C, sfx);
    check_devd(name, d_out, out, no, tol(ELEMENTWISE));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m];
        void *dwte;
        float *d_dwte = grad_start(TITAN_DTYPE_F32, nw, acc & TITAN_ACC_DW, &dwte);
        cpu->embedding_backward(dt, ACC_ALL, dwte, dout, tokens, N, C, V);
        gpu->embedding_backward(dt, acc, d_dwte, d_dout, d_tok, N, C, V);
        snprintf(name, sizeof name, "embedding_backward (%s, f32 dwte) N=%d C=%d V=%d%s",
                 mode(acc, TITAN_ACC_DW), N, C, V, sfx);
        check_dev(name, d_dwte, dwte, nw, tol(ELEMENTWISE));
        gpu->free(d_dwte);
        free(dwte);
    }
    gpu->free(d_tok), gpu->free(d_wte), gpu->free(d_dout), gpu->free(d_out);
    free(wte), free(dout), free(out), free(tokens);
}

static void test_rmsnorm(int N, int C) {
    titan_dtype dt = cur_dt;
    char name[96];
    size_t nc = (size_t)N * C;
    void *inp = randd(nc, -2, 2), *w = randd(C, 0.5, 1.5), *dout = randd(nc, -1, 1);
    void *out = hostd(nc);
    float *rstd = xmalloc(N * sizeof(float));
    void *d_inp = upd(inp, nc), *d_w = upd(w, C), *d_dout = upd(dout, nc);
    void *d_out = allocd(nc);
    float *d_rstd = gpu->alloc(N * sizeof(float));
    cpu->rmsnorm_forward(dt, out, rstd, inp, w, N, C, 1e-5f);
    gpu->rmsnorm_forward(dt, d_out, d_rstd, d_inp, d_w, N, C, 1e-5f);
    snprintf(name, sizeof name, "rmsnorm_forward out N=%d C=%d", N, C);
    check_devd(name, d_out, out, nc, tol(ELEMENTWISE));
    check_dev("rmsnorm_forward rstd (f32)", d_rstd, rstd, N, tol(ELEMENTWISE));
    /* out one element off 16-byte alignment: the element-wise kernel, the same numbers */
    char *d_off = allocd(nc + 1);
    gpu->rmsnorm_forward(dt, d_off + esize(dt), d_rstd, d_inp, d_w, N, C, 1e-5f);
    check_devd("rmsnorm_forward out off 16-byte alignment", d_off + esize(dt), out, nc, tol(ELEMENTWISE));
    gpu->free(d_off);
    /* backward from the CPU's rstd on both sides, so only the backward is compared */
    gpu->to_device(d_rstd, rstd, N * sizeof(float));
    for (size_t m = 0; m < sizeof MASKS / sizeof MASKS[0]; m++) {
        int acc = MASKS[m];
        void *dinp, *dw;
        void *d_dinp = grad_start(dt, nc, acc & TITAN_ACC_DX, &dinp);
        float *d_dw = grad_start(TITAN_DTYPE_F32, C, acc & TITAN_ACC_DW, &dw);
        cpu->rmsnorm_backward(dt, ACC_ALL, dinp, dw, dout, inp, w, rstd, N, C);
        gpu->rmsnorm_backward(dt, acc, d_dinp, d_dw, d_dout, d_inp, d_w, d_rstd, N, C);
        snprintf(name, sizeof name, "rmsnorm_backward dinp (%s)", mode(acc, TITAN_ACC_DX));
        check_devd(name, d_dinp, dinp, nc, tol(ELEMENTWISE));
        snprintf(name, sizeof name, "rmsnorm_backward dweight (%s, f32) N=%d C=%d",
                 mode(acc, TITAN_ACC_DW), N, C);
        check_dev(name, d_dw, dw, C, tol(ELEMENTWISE));
        gpu->free(d_dinp), gpu->free(d_dw);
        free(dinp), free(dw);
    }
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_out), gpu->free(d_rstd);
    free(inp), free(w), free(dout), free(out), free(rstd);
}

/* No rows: an overwritten parameter gradient is the empty sum, zeros (an
 * added one is left as it was); no other output has elements. */
static void test_empty_batch(void) {
    titan_dtype dt = cur_dt;
    int C = 40, V = 7;
    size_t nw = (size_t)V * C;
    float *zeros = calloc(nw, sizeof(float));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m], add = acc & TITAN_ACC_DW;
        void *start;
        float *d_dw = grad_start(TITAN_DTYPE_F32, C, add, &start);
        gpu->rmsnorm_backward(dt, acc, NULL, d_dw, NULL, NULL, NULL, NULL, 0, C);
        float *h = down(d_dw, C);
        check_bits(add ? "rmsnorm_backward N=0 (+=) leaves dweight"
                       : "rmsnorm_backward N=0 (= over NaN) zeroes dweight",
                   h, add ? start : zeros, C * sizeof(float));
        gpu->free(d_dw);
        free(h), free(start);

        d_dw = grad_start(TITAN_DTYPE_F32, nw, add, &start);
        gpu->embedding_backward(dt, acc, d_dw, NULL, NULL, 0, C, V);
        h = down(d_dw, nw);
        check_bits(add ? "embedding_backward N=0 (+=) leaves dwte"
                       : "embedding_backward N=0 (= over NaN) zeroes dwte",
                   h, add ? start : zeros, nw * sizeof(float));
        gpu->free(d_dw);
        free(h), free(start);
    }
    free(zeros);
}

static void test_rope(void) {
    titan_dtype dt = cur_dt;
    int B = 2, T = 37, NHX = 3, HD = 16;
    char name[96];
    size_t n = (size_t)B * T * NHX * HD, nt = (size_t)T * HD / 2, e = esize(dt);
    float *cs = xmalloc(nt * sizeof(float)), *sn = xmalloc(nt * sizeof(float));
    titan_rope_tables(cs, sn, T, HD, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    void *x = randd(n, -1, 1), *dout = randd(n, -1, 1), *out = hostd(n);
    float *d_cs = up(cs, nt), *d_sn = up(sn, nt);
    void *d_x = upd(x, n), *d_dout = upd(dout, n), *d_out = allocd(n);
    cpu->rope_forward(dt, out, x, cs, sn, B, T, NHX, HD);
    gpu->rope_forward(dt, d_out, d_x, d_cs, d_sn, B, T, NHX, HD);
    check_devd("rope_forward", d_out, out, n, tol(ELEMENTWISE));
    gpu->rope_forward(dt, d_x, d_x, d_cs, d_sn, B, T, NHX, HD); /* in place */
    check_devd("rope_forward in place (out == inp)", d_x, out, n, tol(ELEMENTWISE));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m];
        void *dinp;
        void *d_dinp = grad_start(dt, n, acc & TITAN_ACC_DX, &dinp);
        cpu->rope_backward(dt, ACC_ALL, dinp, dout, cs, sn, B, T, NHX, HD);
        gpu->rope_backward(dt, acc, d_dinp, d_dout, d_cs, d_sn, B, T, NHX, HD);
        snprintf(name, sizeof name, "rope_backward (%s)", mode(acc, TITAN_ACC_DX));
        check_devd(name, d_dinp, dinp, n, tol(ELEMENTWISE));
        /* one pair in (B = 1 of 2): no 16-byte packs, the pair-wise path */
        gpu->free(d_dinp);
        free(dinp);
        d_dinp = grad_start(dt, n, acc & TITAN_ACC_DX, &dinp);
        cpu->rope_backward(dt, ACC_ALL, (char *)dinp + 2 * e, (char *)dout + 2 * e, cs, sn, 1, T,
                           NHX, HD);
        gpu->rope_backward(dt, acc, (char *)d_dinp + 2 * e, (char *)d_dout + 2 * e, d_cs, d_sn,
                           1, T, NHX, HD);
        snprintf(name, sizeof name, "rope_backward (%s), off 16-byte alignment",
                 mode(acc, TITAN_ACC_DX));
        check_devd(name, (char *)d_dinp + 2 * e, (char *)dinp + 2 * e, n / 2, tol(ELEMENTWISE));
        gpu->free(d_dinp);
        free(dinp);
    }
    gpu->free(d_cs), gpu->free(d_sn), gpu->free(d_x), gpu->free(d_dout), gpu->free(d_out);
    free(cs), free(sn), free(x), free(dout), free(out);
}

/* TITAN_CUDA_ATTENTION=cudnn: bf16 attention through cuDNN (attention_cudnn.cu) */
static int cudnn_attention(void) {
    const char *e = getenv("TITAN_CUDA_ATTENTION");
    return e && strcmp(e, "cudnn") == 0;
}

/* q [B,Tq,NH,HD] the last Tq of the Tk positions of k, v [B,Tk,NKV,HD] */
static void test_attention(int B, int Tq, int Tk, int NH, int NKV, int HD) {
    titan_dtype dt = cur_dt;
    char name[128];
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD,
           nl = (size_t)B * NH * Tq;
    size_t es = esize(dt);
    void *q = randd(nq, -1, 1), *k = randd(nk, -1, 1), *v = randd(nk, -1, 1);
    void *dout = randd(nq, -1, 1);
    void *out = hostd(nq);
    float *lse = xmalloc(nl * sizeof(float));
    void *d_q = upd(q, nq), *d_k = upd(k, nk), *d_v = upd(v, nk), *d_dout = upd(dout, nq);
    void *d_out = allocd(nq);
    float *d_lse = gpu->alloc(nl * sizeof(float));

    cpu->attention_forward(dt, out, lse, q, k, v, B, Tq, Tk, NH, NKV, HD);
    gpu->attention_forward(dt, d_out, d_lse, d_q, d_k, d_v, B, Tq, Tk, NH, NKV, HD);
    if (Tq == Tk)
        snprintf(name, sizeof name, "attention_forward out B=%d T=%d NH=%d NKV=%d HD=%d", B, Tq,
                 NH, NKV, HD);
    else
        snprintf(name, sizeof name, "attention_forward out B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d",
                 B, Tq, Tk, NH, NKV, HD);
    check_devd(name, d_out, out, nq, tol(ATTENTION));
    check_dev("attention_forward lse (f32)", d_lse, lse, nl, tol(ATTENTION));
    void *d_out2 = allocd(nq);
    float *d_lse2 = gpu->alloc(nl * sizeof(float));
    gpu->attention_forward(dt, d_out2, d_lse2, d_q, d_k, d_v, B, Tq, Tk, NH, NKV, HD);
    check_dev_bits("attention_forward out repeats bitwise", d_out2, d_out, nq * es);
    check_dev_bits("attention_forward lse repeats bitwise", d_lse2, d_lse, nl * sizeof(float));

    /* backward from the CPU's out and lse on both sides */
    gpu->to_device(d_out, out, nq * es);
    gpu->to_device(d_lse, lse, nl * sizeof(float));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m], add = acc & TITAN_ACC_DX;
        void *dq, *dk, *dv;
        void *d_dq = grad_start(dt, nq, add, &dq), *d_dk = grad_start(dt, nk, add, &dk),
             *d_dv = grad_start(dt, nk, add, &dv);
        cpu->attention_backward(dt, ACC_ALL, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, NH,
                                NKV, HD);
        gpu->attention_backward(dt, acc, d_dq, d_dk, d_dv, d_dout, d_out, d_lse, d_q, d_k, d_v,
                                B, Tq, Tk, NH, NKV, HD);
        const char *md = mode(acc, TITAN_ACC_DX);
        snprintf(name, sizeof name, "attention_backward dq (%s)", md);
        check_devd(name, d_dq, dq, nq, tol(ATTENTION));
        snprintf(name, sizeof name, "attention_backward dk (%s)", md);
        check_devd(name, d_dk, dk, nk, tol(ATTENTION));
        snprintf(name, sizeof name, "attention_backward dv (%s)", md);
        check_devd(name, d_dv, dv, nk, tol(ATTENTION));
        gpu->free(d_dq), gpu->free(d_dk), gpu->free(d_dv);
        free(dq), free(dk), free(dv);
    }

    /* the same call twice, overwriting NaN-filled gradients, gives the same bits */
    void *g1[3], *g2[3];
    size_t sz[3] = {nq, nk, nk};
    for (int rep = 0; rep < 2; rep++) {
        void *ignored[3], *d_g[3];
        for (int i = 0; i < 3; i++) d_g[i] = grad_start(dt, sz[i], 0, &ignored[i]);
        gpu->attention_backward(dt, 0, d_g[0], d_g[1], d_g[2], d_dout, d_out, d_lse, d_q, d_k,
                                d_v, B, Tq, Tk, NH, NKV, HD);
        void **g = rep ? g2 : g1;
        for (int i = 0; i < 3; i++) {
            g[i] = down_t(dt, d_g[i], sz[i]);
            gpu->free(d_g[i]);
            free(ignored[i]);
        }
    }
    int same = 1;
    for (int i = 0; i < 3; i++) same &= memcmp(g1[i], g2[i], sz[i] * es) == 0;
    if (cudnn_attention() && dt == TITAN_DTYPE_BF16 && HD % 8 == 0 && HD <= 128)
        printf("skip [%-4s] %-50s %s\n", dname(), "attention_backward repeats bitwise",
               "cuDNN adds dQ with atomics");
    else check_bits("attention_backward repeats bitwise", &same, &(int){1}, sizeof same);
    for (int i = 0; i < 3; i++) free(g1[i]), free(g2[i]);

    gpu->free(d_q), gpu->free(d_k), gpu->free(d_v), gpu->free(d_dout);
    gpu->free(d_out), gpu->free(d_lse), gpu->free(d_out2), gpu->free(d_lse2);
    free(q), free(k), free(v), free(dout), free(out), free(lse);
}

/* attention_forward_at / _backward_at: q [B,T,NH,HD] with query 0 at key
 * position off of k, v [B,Tk,NKV,HD], as context parallelism's ring calls
 * them (off 0: the diagonal block, off >= Tk - 1: every key), against the
 * CPU's _at ops; off = Tk - Tq gives the plain ops' bits. */
static void test_attention_at(int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    titan_dtype dt = cur_dt;
    char name[128];
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD, nl = (size_t)B * NH * Tq;
    size_t es = esize(dt);
    void *q = randd(nq, -1, 1), *k = randd(nk, -1, 1), *v = randd(nk, -1, 1), *dout = randd(nq, -1, 1);
    void *out = hostd(nq);
    float *lse = xmalloc(nl * sizeof(float));
    void *d_q = upd(q, nq), *d_k = upd(k, nk), *d_v = upd(v, nk), *d_dout = upd(dout, nq), *d_out = allocd(nq);
    float *d_lse = gpu->alloc(nl * sizeof(float));
    cpu->attention_forward_at(dt, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
    gpu->attention_forward_at(dt, d_out, d_lse, d_q, d_k, d_v, B, Tq, Tk, off, NH, NKV, HD);
    snprintf(name, sizeof name, "attention_forward_at out B=%d Tq=%d Tk=%d off=%d NH=%d NKV=%d HD=%d", B, Tq, Tk,
             off, NH, NKV, HD);
    check_devd(name, d_out, out, nq, tol(ATTENTION));
    check_dev("attention_forward_at lse (f32)", d_lse, lse, nl, tol(ATTENTION));
    gpu->to_device(d_out, out, nq * es); /* backward from the CPU's out and lse on both sides */
    gpu->to_device(d_lse, lse, nl * sizeof(float));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m], add = acc & TITAN_ACC_DX;
        void *dq, *dk, *dv;
        void *d_dq = grad_start(dt, nq, add, &dq), *d_dk = grad_start(dt, nk, add, &dk),
             *d_dv = grad_start(dt, nk, add, &dv);
        cpu->attention_backward_at(dt, ACC_ALL, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
        gpu->attention_backward_at(dt, acc, d_dq, d_dk, d_dv, d_dout, d_out, d_lse, d_q, d_k, d_v, B, Tq, Tk, off,
                                   NH, NKV, HD);
        const char *md = mode(acc, TITAN_ACC_DX);
        snprintf(name, sizeof name, "attention_backward_at off=%d dq (%s)", off, md);
        check_devd(name, d_dq, dq, nq, tol(ATTENTION));
        snprintf(name, sizeof name, "attention_backward_at off=%d dk (%s)", off, md);
        check_devd(name, d_dk, dk, nk, tol(ATTENTION));
        snprintf(name, sizeof name, "attention_backward_at off=%d dv (%s)", off, md);
        check_devd(name, d_dv, dv, nk, tol(ATTENTION));
        gpu->free(d_dq), gpu->free(d_dk), gpu->free(d_dv);
        free(dq), free(dk), free(dv);
    }
    gpu->free(d_q), gpu->free(d_k), gpu->free(d_v), gpu->free(d_dout), gpu->free(d_out), gpu->free(d_lse);
    free(q), free(k), free(v), free(dout), free(out), free(lse);
}

static int on_emulator; /* the CUDA emulator: host libm, so exp and log are the CPU's */

/* attention_merge: three blocks merged (the first unread over NaN), the
 * CPU's bits on the emulator; on a GPU its expf and logf differ in their
 * last bits, held to the elementwise tolerance. */
static void test_attention_merge(int B, int T, int NH, int HD) {
    titan_dtype dt = cur_dt;
    size_t n = (size_t)B * T * NH * HD, nl = (size_t)B * NH * T;
    float *acc = xmalloc(n * sizeof(float)), *acc_lse = xmalloc(nl * sizeof(float));
    float *d_acc = gpu->alloc(n * sizeof(float)), *d_lse = gpu->alloc(nl * sizeof(float));
    float *poison = nan_t(TITAN_DTYPE_F32, n); /* the first block must not read acc, acc_lse */
    gpu->to_device(d_acc, poison, n * sizeof(float));
    gpu->to_device(d_lse, poison, nl * sizeof(float));
    for (int blk = 0; blk < 3; blk++) {
        void *out = randd(n, -1, 1);
        float *lse = randf(nl, -3 + blk, 3 + blk);
        for (size_t r = 0; r < nl && blk < 2; r++) /* rows that see no key of blocks 0 and 1 */
            if (r % (blk ? 5 : 7) == 0) lse[r] = -INFINITY;
        float *d_blse = up(lse, nl);
        void *d_out = upd(out, n);
        cpu->attention_merge(dt, acc, acc_lse, out, lse, B, T, NH, HD, blk == 0);
        gpu->attention_merge(dt, d_acc, d_lse, d_out, d_blse, B, T, NH, HD, blk == 0);
        gpu->free(d_out), gpu->free(d_blse);
        free(out), free(lse);
    }
    char name[128];
    float *h_acc = down(d_acc, n), *h_lse = down(d_lse, nl);
    int finite = 1; /* a block's -inf lse adds nothing, never a NaN */
    for (size_t i = 0; i < n; i++) finite &= isfinite(acc[i]) && isfinite(h_acc[i]);
    for (size_t i = 0; i < nl; i++) finite &= isfinite(acc_lse[i]) && isfinite(h_lse[i]);
    printf("%-4s [%-4s] %-50s %s\n", finite ? "ok" : "FAIL", dname(), "attention_merge: -inf block lse rows",
           finite ? "add nothing (all finite)" : "a NaN or inf");
    if (!finite) failures++;
    if (on_emulator) {
        snprintf(name, sizeof name, "attention_merge B=%d T=%d NH=%d HD=%d: the CPU's out", B, T, NH, HD);
        check_bits(name, h_acc, acc, n * sizeof(float));
        check_bits("attention_merge: the CPU's lse", h_lse, acc_lse, nl * sizeof(float));
    } else {
        snprintf(name, sizeof name, "attention_merge B=%d T=%d NH=%d HD=%d out (f32)", B, T, NH, HD);
        check_t(name, TITAN_DTYPE_F32, h_acc, acc, n, TOL_F32[ELEMENTWISE]);
        check_t("attention_merge lse (f32)", TITAN_DTYPE_F32, h_lse, acc_lse, nl, TOL_F32[ELEMENTWISE]);
    }
    free(h_acc), free(h_lse), free(poison), free(acc), free(acc_lse);
    gpu->free(d_acc), gpu->free(d_lse);
}

static void test_swiglu(void) {
    titan_dtype dt = cur_dt;
    int N = 33, H = 700;
    char name[96];
    size_t n = (size_t)N * H;
    void *h1 = randd(n, -6, 6), *h3 = randd(n, -2, 2), *dout = randd(n, -1, 1);
    void *out = hostd(n);
    void *d_h1 = upd(h1, n), *d_h3 = upd(h3, n), *d_dout = upd(dout, n), *d_out = allocd(n);
    cpu->swiglu_forward(dt, out, h1, h3, N, H);
    gpu->swiglu_forward(dt, d_out, d_h1, d_h3, N, H);
    check_devd("swiglu_forward", d_out, out, n, tol(ELEMENTWISE));
    size_t e = esize(dt); /* one element in: the element-wise path */
    gpu->zero(d_out, n * e);
    gpu->swiglu_forward(dt, (char *)d_out + e, (char *)d_h1 + e, (char *)d_h3 + e, 1, (int)n - 1);
    check_devd("swiglu_forward, pointers off 16-byte alignment", (char *)d_out + e,
               (char *)out + e, n - 1, tol(ELEMENTWISE));
    for (int m = 0; m < 2; m++) { /* ACC_ALL, then 0 */
        int acc = MASKS[m], add = acc & TITAN_ACC_DX;
        const char *md = mode(acc, TITAN_ACC_DX);
        void *dh1, *dh3;
        void *d_dh1 = grad_start(dt, n, add, &dh1), *d_dh3 = grad_start(dt, n, add, &dh3);
        cpu->swiglu_backward(dt, ACC_ALL, dh1, dh3, dout, h1, h3, N, H);
        gpu->swiglu_backward(dt, acc, d_dh1, d_dh3, d_dout, d_h1, d_h3, N, H);
        snprintf(name, sizeof name, "swiglu_backward dh1 (%s)", md);
        check_devd(name, d_dh1, dh1, n, tol(ELEMENTWISE));
        snprintf(name, sizeof name, "swiglu_backward dh3 (%s)", md);
        check_devd(name, d_dh3, dh3, n, tol(ELEMENTWISE));
        gpu->free(d_dh1), gpu->free(d_dh3);
        free(dh1), free(dh3);
        /* one element in: the element-wise path */
        d_dh1 = grad_start(dt, n, add, &dh1), d_dh3 = grad_start(dt, n, add, &dh3);
        cpu->swiglu_backward(dt, ACC_ALL, (char *)dh1 + e, (char *)dh3 + e, (char *)dout + e,
                             (char *)h1 + e, (char *)h3 + e, 1, (int)n - 1);
        gpu->swiglu_backward(dt, acc, (char *)d_dh1 + e, (char *)d_dh3 + e, (char *)d_dout + e,
                             (char *)d_h1 + e, (char *)d_h3 + e, 1, (int)n - 1);
        snprintf(name, sizeof name, "swiglu_backward dh1 (%s), off 16-byte alignment", md);
        check_devd(name, (char *)d_dh1 + e, (char *)dh1 + e, n - 1, tol(ELEMENTWISE));
        snprintf(name, sizeof name, "swiglu_backward dh3 (%s), off 16-byte alignment", md);
        check_devd(name, (char *)d_dh3 + e, (char *)dh3 + e, n - 1, tol(ELEMENTWISE));
        gpu->free(d_dh1), gpu->free(d_dh3);
        free(dh1), free(dh3);
    }
    gpu->free(d_h1), gpu->free(d_h3), gpu->free(d_dout), gpu->free(d_out);
    free(h1), free(h3), free(dout), free(out);
}

/* V odd: every row starts at another offset from a 16-byte boundary (the
 * kernel's head, packs and tail); V a multiple of 8: whole packs. dlogits
 * also one element off logits' alignment (written element by element). */
static void test_cross_entropy(int N, int V) {
    titan_dtype dt = cur_dt;
    char name[96];
    size_t n = (size_t)N * V;
    uint32_t *targets = xmalloc((size_t)N * sizeof *targets);
    for (int i = 0; i < N; i++) targets[i] = (uint32_t)(titan_rng_u64(7, 1234, i) % V);
    targets[0] = 0, targets[1] = (uint32_t)V - 1; /* both ends */
    void *logits = randd(n, -8, 8), *dlogits = hostd(n);
    float *losses = xmalloc(N * sizeof(float));
    void *d_logits = upd(logits, n), *d_dlogits = allocd(n);
    float *d_losses = gpu->alloc(N * sizeof(float));
    uint32_t *d_tg = up_bytes(targets, (size_t)N * sizeof *targets);
    float dscale = 1.0f / N;
    cpu->cross_entropy(dt, losses, dlogits, logits, targets, N, V, dscale, NULL);
    gpu->cross_entropy(dt, d_losses, d_dlogits, d_logits, d_tg, N, V, dscale, NULL);
    snprintf(name, sizeof name, "cross_entropy losses (f32) N=%d V=%d", N, V);
    check_dev(name, d_losses, losses, N, tol(ELEMENTWISE));
    snprintf(name, sizeof name, "cross_entropy dlogits N=%d V=%d", N, V);
    check_devd(name, d_dlogits, dlogits, n, tol(ELEMENTWISE));
    char *d_off = allocd(n + 1);
    gpu->cross_entropy(dt, d_losses, d_off + esize(dt), d_logits, d_tg, N, V, dscale, NULL);
    check_dev_bits("cross_entropy dlogits off logits' alignment: same bits", d_off + esize(dt),
                   d_dlogits, n * esize(dt));
    gpu->free(d_off);
    gpu->zero(d_losses, N * sizeof(float));
    gpu->cross_entropy(dt, d_losses, NULL, d_logits, d_tg, N, V, dscale, NULL); /* losses only */
    check_dev("cross_entropy losses (dlogits NULL)", d_losses, losses, N, tol(ELEMENTWISE));
    gpu->zero(d_losses, N * sizeof(float));
    gpu->cross_entropy(dt, d_losses, d_logits, d_logits, d_tg, N, V, dscale, NULL); /* in place */
    check_dev("cross_entropy losses (dlogits == logits)", d_losses, losses, N, tol(ELEMENTWISE));
    check_devd("cross_entropy dlogits in place", d_logits, dlogits, n, tol(ELEMENTWISE));
    check_dev_bits("cross_entropy dlogits in place equals out of place", d_logits, d_dlogits,
                   n * esize(dt));
    gpu->free(d_logits), gpu->free(d_losses), gpu->free(d_dlogits), gpu->free(d_tg);
    free(logits), free(losses), free(dlogits), free(targets);
}

/* The vocabulary sharded: logsumexp over whole rows of logits[N, V], then
 * cross_entropy with the rows' lse on the columns [v0, v0 + Vs), targets
 * remapped (t - v0, or >= Vs in another shard: loss 0, no onehot). Both
 * backends get the CPU's lse, so the shard's check is of cross_entropy
 * alone. */
static void test_cross_entropy_shard(int N, int V, int v0, int Vs) {
    titan_dtype dt = cur_dt;
    char name[96];
    size_t n = (size_t)N * V, ns = (size_t)N * Vs, es = esize(dt);
    void *logits = randd(n, -8, 8);
    float *lse = xmalloc(N * sizeof(float));
    void *d_logits = upd(logits, n);
    float *d_lse = gpu->alloc(N * sizeof(float)), *d_lse2 = gpu->alloc(N * sizeof(float));
    cpu->logsumexp(dt, lse, logits, N, V);
    gpu->logsumexp(dt, d_lse, d_logits, N, V);
    gpu->logsumexp(dt, d_lse2, d_logits, N, V);
    snprintf(name, sizeof name, "logsumexp N=%d V=%d (f32)", N, V);
    check_dev(name, d_lse, lse, N, tol(ELEMENTWISE));
    check_dev_bits("logsumexp repeats bitwise", d_lse2, d_lse, N * sizeof(float));

    char *shard = xmalloc(ns * es);
    for (int r = 0; r < N; r++)
        memcpy(shard + (size_t)r * Vs * es, (char *)logits + ((size_t)r * V + v0) * es, Vs * es);
    uint32_t *ts = xmalloc((size_t)N * sizeof *ts);
    for (int r = 0; r < N; r++) {
        uint32_t t = (uint32_t)(titan_rng_u64(7, 4321, r) % V);
        ts[r] = t >= (uint32_t)v0 && t < (uint32_t)(v0 + Vs) ? t - (uint32_t)v0
                : r % 2 ? UINT32_MAX : (uint32_t)Vs;
    }
    ts[0] = 0, ts[1] = (uint32_t)Vs - 1, ts[2] = (uint32_t)Vs; /* the ends, just outside */
    void *dlogits = hostd(ns);
    float *losses = xmalloc(N * sizeof(float)), dscale = 1.0f / N;
    void *d_shard = upd(shard, ns), *d_dlogits = allocd(ns);
    float *d_losses = gpu->alloc(N * sizeof(float));
    uint32_t *d_ts = up_bytes(ts, (size_t)N * sizeof *ts);
    gpu->to_device(d_lse, lse, N * sizeof(float));
    cpu->cross_entropy(dt, losses, dlogits, shard, ts, N, Vs, dscale, lse);
    gpu->cross_entropy(dt, d_losses, d_dlogits, d_shard, d_ts, N, Vs, dscale, d_lse);
    snprintf(name, sizeof name, "cross_entropy(lse) losses (f32) shard %d of %d", Vs, V);
    check_dev(name, d_losses, losses, N, tol(ELEMENTWISE));
    snprintf(name, sizeof name, "cross_entropy(lse) dlogits shard %d of %d", Vs, V);
    check_devd(name, d_dlogits, dlogits, ns, tol(ELEMENTWISE));
    gpu->zero(d_losses, N * sizeof(float));
    gpu->cross_entropy(dt, d_losses, NULL, d_shard, d_ts, N, Vs, dscale, d_lse);
    check_dev("cross_entropy(lse) losses (dlogits NULL)", d_losses, losses, N,
              tol(ELEMENTWISE));
    gpu->zero(d_losses, N * sizeof(float));
    gpu->cross_entropy(dt, d_losses, d_shard, d_shard, d_ts, N, Vs, dscale, d_lse); /* in place */
    check_dev("cross_entropy(lse) losses (dlogits == logits)", d_losses, losses, N,
              tol(ELEMENTWISE));
    check_dev_bits("cross_entropy(lse) in place equals out of place", d_shard, d_dlogits,
                   ns * es);
    gpu->free(d_logits), gpu->free(d_lse), gpu->free(d_lse2), gpu->free(d_shard);
    gpu->free(d_dlogits), gpu->free(d_losses), gpu->free(d_ts);
    free(logits), free(lse), free(shard), free(ts), free(dlogits), free(losses);
}

/* every op that takes a dt, with cur_dt */
/* ------------------------------------------------------------ float8 */

/* The casts: bytes and scales equal to the CPU's bit for bit, each axis,
 * both formats, with and without power-of-two scales. Values over several
 * decades, zeros, and some that fall to subnormals or round to zero. Not
 * NaN: the sign of x * scale's NaN (and so of its code) is the hardware's.
 * The transposed casts (the GEMMs' grad_in and grad_w operands) are held
 * to the GEMMs' tolerances below. */
static void test_fp8_quantize(int rows, int cols) {
    titan_dtype dt = cur_dt;
    size_t n = (size_t)rows * cols, na = n ? n : 1; /* buffers of one element at least */
    float *v = randf(n, -1, 1);
    for (size_t i = 0; i < n; i++) v[i] = ldexpf(v[i], (int)(i % 23) - 12); /* 2^-12 .. 2^10 */
    if (n > 8) v[0] = 0.0f, v[3] = -0.0f, v[5] = 3e5f, v[7] = -1e-30f;
    void *x = calloc(na, esize(dt));
    cpu->convert(x, dt, v, TITAN_DTYPE_F32, n);
    void *d_x = upd(x, na);
    uint8_t *q = xmalloc(na), *d_q = gpu->alloc(na);
    for (int axis = 0; axis < 3; axis++)
        for (int f = TITAN_FP8_E4M3; f <= TITAN_FP8_E5M2; f++)
            for (int pow2 = 0; pow2 < 2; pow2++) {
                int ns = titan_fp8_nscales((titan_fp8_axis)axis, rows, cols);
                float *scale = xmalloc((size_t)ns * sizeof(float)), *d_scale = gpu->alloc((size_t)(ns ? ns : 1) * sizeof(float));
                cpu->fp8_quantize(dt, q, scale, x, rows, cols, (titan_fp8_axis)axis, (titan_fp8_format)f, pow2, NULL);
                gpu->fp8_quantize(dt, d_q, d_scale, d_x, rows, cols, (titan_fp8_axis)axis, (titan_fp8_format)f, pow2,
                                  NULL);
                uint8_t *hq = xmalloc(n);
                gpu->to_host(hq, d_q, n);
                float *hs = down(d_scale, (size_t)ns);
                char name[96];
                snprintf(name, sizeof name, "fp8_quantize %dx%d %s %s%s: bytes", rows, cols,
                         axis == 0 ? "tensor" : axis == 1 ? "rows" : "cols", titan_fp8_format_name((titan_fp8_format)f),
                         pow2 ? " pow2" : "");
                check_bits(name, hq, q, n);
                snprintf(name, sizeof name, "fp8_quantize %dx%d: scales", rows, cols);
                check_bits(name, hs, scale, (size_t)ns * sizeof(float));
                free(hq), free(hs), free(scale);
                gpu->free(d_scale);
            }
    for (int axis = 0; axis < 3; axis++) { /* fp8_amax: the bits the casts scale from */
        int ns = titan_fp8_nscales((titan_fp8_axis)axis, rows, cols);
        float *amax = xmalloc((size_t)(ns ? ns : 1) * sizeof(float));
        float *d_amax = gpu->alloc((size_t)(ns ? ns : 1) * sizeof(float));
        cpu->fp8_amax(dt, amax, x, rows, cols, (titan_fp8_axis)axis);
        gpu->fp8_amax(dt, d_amax, d_x, rows, cols, (titan_fp8_axis)axis);
        float *h = down(d_amax, (size_t)ns);
        char name[96];
        snprintf(name, sizeof name, "fp8_amax %dx%d %s", rows, cols, axis == 0 ? "tensor" : axis == 1 ? "rows" : "cols");
        check_bits(name, h, amax, (size_t)ns * sizeof(float));
        /* the cast from a given amax (three times x's own), and a
         * tensorwise one back (fp8_dequantize): bitwise the CPU's */
        for (int i = 0; i < ns; i++) amax[i] *= 3.0f;
        gpu->to_device(d_amax, amax, (size_t)ns * sizeof(float));
        float *scale = xmalloc((size_t)(ns ? ns : 1) * sizeof(float)), *d_scale = gpu->alloc((size_t)(ns ? ns : 1) * sizeof(float));
        cpu->fp8_quantize(dt, q, scale, x, rows, cols, (titan_fp8_axis)axis, TITAN_FP8_E4M3, 0, amax);
        gpu->fp8_quantize(dt, d_q, d_scale, d_x, rows, cols, (titan_fp8_axis)axis, TITAN_FP8_E4M3, 0, d_amax);
        uint8_t *hq = xmalloc(na);
        gpu->to_host(hq, d_q, n);
        snprintf(name, sizeof name, "fp8_quantize %dx%d %s, given amax: bytes", rows, cols,
                 axis == 0 ? "tensor" : axis == 1 ? "rows" : "cols");
        check_bits(name, hq, q, n);
        if (axis == 0 && n) {
            void *deq = hostd(n), *d_deq = allocd(n), *hd = hostd(n);
            cpu->fp8_dequantize(dt, deq, q, scale, n, TITAN_FP8_E4M3);
            gpu->fp8_dequantize(dt, d_deq, d_q, d_scale, n, TITAN_FP8_E4M3);
            gpu->to_host(hd, d_deq, n * esize(dt));
            snprintf(name, sizeof name, "fp8_dequantize %zu", n);
            check_bits(name, hd, deq, n * esize(dt));
            free(deq), free(hd);
            gpu->free(d_deq);
        }
        free(h), free(amax), free(scale), free(hq);
        gpu->free(d_amax), gpu->free(d_scale);
    }
    gpu->free(d_x), gpu->free(d_q);
    free(v), free(x), free(q);
}

/* The float8 linear's three GEMMs against the CPU's emulation: emulated on
 * the GPU too (the same dequantized operands, fp32 products: the matmul
 * tolerance), and on float8 tensor cores (dequant scales in the epilogue,
 * sums in another order: TOL_FP8), each recipe, with a residual, under
 * every acc mask. The count of float8 GEMMs is the CPU's. */
static void test_fp8_matmul(int N, int IC, int OC) {
    static const double TOL_FP8_F32 = 2e-3, TOL_FP8_BF16 = 2e-2;
    static const char *const RECIPES[] = {"tensorwise", "rowwise", "rowwise_with_gw_hp"};
    titan_dtype dt = cur_dt;
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    void *inp = randd(ni, -1, 1), *w = randd(nw, -0.5, 0.5), *dout = randd(no, -1e-3, 1e-3),
         *resid = randd(no, -1, 1);
    void *out = hostd(no);
    void *d_inp = upd(inp, ni), *d_w = upd(w, nw), *d_dout = upd(dout, no), *d_resid = upd(resid, no),
         *d_out = allocd(no);
    for (int rc = 0; rc < 3; rc++)
        for (int emulate = 1; emulate >= 0; emulate--) {
            titan_fp8_recipe r;
            titan_fp8_recipe_from_name(RECIPES[rc], &r);
            r.emulate = (unsigned char)emulate;
            double tl = emulate ? tol(MATMUL) : dt == TITAN_DTYPE_BF16 ? TOL_FP8_BF16 : TOL_FP8_F32;
            char name[128], what[64];
            snprintf(what, sizeof what, "%s%s N=%d IC=%d OC=%d", RECIPES[rc], emulate ? " emulated" : "", N, IC, OC);
            int want = cpu->fp8_matmul_forward(dt, &r, out, inp, w, NULL, N, IC, OC);
            int got = gpu->fp8_matmul_forward(dt, &r, d_out, d_inp, d_w, NULL, N, IC, OC);
            snprintf(name, sizeof name, "fp8 forward %s", what);
            check_devd(name, d_out, out, no, tl);
            cpu->fp8_matmul_forward(dt, &r, out, inp, w, resid, N, IC, OC);
            gpu->fp8_matmul_forward(dt, &r, d_out, d_inp, d_w, d_resid, N, IC, OC);
            snprintf(name, sizeof name, "fp8 forward + resid %s", what);
            check_devd(name, d_out, out, no, tl);
            for (size_t m = 0; m < sizeof MASKS / sizeof MASKS[0]; m++) {
                int acc = MASKS[m];
                void *dinp, *dw;
                void *d_dinp = grad_start(dt, ni, acc & TITAN_ACC_DX, &dinp);
                float *d_dw = grad_start(TITAN_DTYPE_F32, nw, acc & TITAN_ACC_DW, &dw);
                want += cpu->fp8_matmul_backward(dt, &r, ACC_ALL, dinp, dw, dout, inp, w, N, IC, OC);
                got += gpu->fp8_matmul_backward(dt, &r, acc, d_dinp, d_dw, d_dout, d_inp, d_w, N, IC, OC);
                snprintf(name, sizeof name, "fp8 backward dinp (%s) %s", mode(acc, TITAN_ACC_DX), what);
                check_devd(name, d_dinp, dinp, ni, tl);
                snprintf(name, sizeof name, "fp8 backward dw (%s) %s", mode(acc, TITAN_ACC_DW), what);
                check_dev(name, d_dw, dw, nw, tl);
                gpu->free(d_dinp), gpu->free(d_dw);
                free(dinp), free(dw);
            }
            char detail[64];
            snprintf(detail, sizeof detail, "%d float8 GEMMs, the CPU %d", got, want);
            snprintf(name, sizeof name, "fp8 GEMM count %s", what);
            check_true(name, got == want, detail);
        }
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_resid), gpu->free(d_out);
    free(inp), free(w), free(dout), free(resid), free(out);
}

/* The casts scaled from a given amax (tensor parallelism gives a shard the
 * whole tensor's): every cast of each recipe given twice its operand's own
 * amax on both backends; the three GEMMs within the tolerances above. */
static void test_fp8_given_amax(int N, int IC, int OC) {
    static const char *const RECIPES[] = {"tensorwise", "rowwise"};
    titan_dtype dt = cur_dt;
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    void *inp = randd(ni, -1, 1), *w = randd(nw, -0.5, 0.5), *dout = randd(no, -1e-3, 1e-3);
    void *out = hostd(no), *dinp = hostd(ni);
    float *dw = xmalloc(nw * sizeof(float));
    void *d_inp = upd(inp, ni), *d_w = upd(w, nw), *d_dout = upd(dout, no), *d_out = allocd(no), *d_dinp = allocd(ni);
    float *d_dw = gpu->alloc(nw * sizeof(float));
    const void *ops[TITAN_FP8_NCASTS] = {inp, w, dout, w, dout, inp};
    const int rows[TITAN_FP8_NCASTS] = {N, OC, N, OC, N, N}, cols[TITAN_FP8_NCASTS] = {IC, IC, OC, IC, OC, IC};
    for (int rc = 0; rc < 2; rc++)
        for (int emulate = 1; emulate >= 0; emulate--) {
            titan_fp8_recipe rh, rd;
            titan_fp8_recipe_from_name(RECIPES[rc], &rh);
            rh.emulate = (unsigned char)emulate;
            rd = rh;
            float *ha[TITAN_FP8_NCASTS], *da[TITAN_FP8_NCASTS];
            for (int c = 0; c < TITAN_FP8_NCASTS; c++) {
                titan_fp8_axis ax = titan_fp8_recipe_axis(&rh, c);
                int ns = titan_fp8_nscales(ax, rows[c], cols[c]);
                ha[c] = xmalloc((size_t)ns * sizeof(float));
                cpu->fp8_amax(dt, ha[c], ops[c], rows[c], cols[c], ax);
                for (int i = 0; i < ns; i++) ha[c][i] *= 2.0f;
                da[c] = gpu->alloc((size_t)ns * sizeof(float));
                gpu->to_device(da[c], ha[c], (size_t)ns * sizeof(float));
                rh.amax[c] = ha[c], rd.amax[c] = da[c];
            }
            double tl = emulate ? tol(MATMUL) : dt == TITAN_DTYPE_BF16 ? 2e-2 : 2e-3;
            char name[128];
            cpu->fp8_matmul_forward(dt, &rh, out, inp, w, NULL, N, IC, OC);
            gpu->fp8_matmul_forward(dt, &rd, d_out, d_inp, d_w, NULL, N, IC, OC);
            snprintf(name, sizeof name, "fp8 forward, given amax, %s%s", RECIPES[rc], emulate ? " emulated" : "");
            check_devd(name, d_out, out, no, tl);
            cpu->fp8_matmul_backward(dt, &rh, 0, dinp, dw, dout, inp, w, N, IC, OC);
            gpu->fp8_matmul_backward(dt, &rd, 0, d_dinp, d_dw, d_dout, d_inp, d_w, N, IC, OC);
            snprintf(name, sizeof name, "fp8 backward dinp, given amax, %s%s", RECIPES[rc], emulate ? " emulated" : "");
            check_devd(name, d_dinp, dinp, ni, tl);
            snprintf(name, sizeof name, "fp8 backward dw, given amax, %s%s", RECIPES[rc], emulate ? " emulated" : "");
            check_dev(name, d_dw, dw, nw, tl);
            for (int c = 0; c < TITAN_FP8_NCASTS; c++) free(ha[c]), gpu->free(da[c]);
        }
    gpu->free(d_inp), gpu->free(d_w), gpu->free(d_dout), gpu->free(d_out), gpu->free(d_dinp), gpu->free(d_dw);
    free(inp), free(w), free(dout), free(out), free(dinp), free(dw);
}

/* n bytes of src (host) to p on backend be (device or host) */
static void put(const titan_backend *be, void *p, const void *src, size_t n) {
    if (be == gpu) gpu->to_device(p, src, n);
    else memcpy(p, src, n);
}

/* The bytes of n elements of type t at p on backend be (device or host) */
static void *bytes_of(const titan_backend *be, const void *p, size_t n) {
    void *h = xmalloc(n);
    if (be == gpu) gpu->to_host(h, p, n);
    else memcpy(h, p, n);
    return h;
}

/* x's cast shared by three linears (the recipe's share: the model's wk,
 * wv and wq): KEEP, USE, LAST give each product the bits of a call that
 * casts x itself, forward (out) and backward (grad_w's x^T; dinp too), on
 * both backends, every recipe, emulated and on float8 tensor cores. After
 * the KEEP, x's buffer is overwritten with other numbers: a USE that cast
 * x again instead of taking the held cast would show (grad_w kept in high
 * precision reads x itself: not overwritten there). */
static void test_fp8_share(int N, int IC) {
    static const char *const RECIPES[] = {"tensorwise", "rowwise", "rowwise_with_gw_hp"};
    static const int OCS[3] = {32, 48, 96};
    titan_dtype dt = cur_dt;
    size_t es = esize(dt), ni = (size_t)N * IC;
    void *inp = randd(ni, -1, 1), *other = randd(ni, -2, 2), *w[3], *dout[3];
    for (int j = 0; j < 3; j++)
        w[j] = randd((size_t)OCS[j] * IC, -0.5, 0.5), dout[j] = randd((size_t)N * OCS[j], -1e-3, 1e-3);
    const titan_backend *bes[2] = {cpu, gpu};
    for (int b = 0; b < 2; b++) {
        const titan_backend *be = bes[b];
        int dev = be == gpu;
        /* x a copy of inp (overwritten and put back below) */
        void *x = dev ? upd(inp, ni) : memcpy(hostd(ni), inp, ni * es), *wj[3], *dj[3], *o[2][3], *dx[2][3];
        float *dw[2][3];
        for (int j = 0; j < 3; j++) {
            size_t nw = (size_t)OCS[j] * IC, no = (size_t)N * OCS[j];
            wj[j] = dev ? upd(w[j], nw) : w[j];
            dj[j] = dev ? upd(dout[j], no) : dout[j];
            for (int v = 0; v < 2; v++) {
                o[v][j] = dev ? allocd(no) : hostd(no);
                dx[v][j] = dev ? allocd(ni) : hostd(ni);
                dw[v][j] = dev ? gpu->alloc(nw * sizeof(float)) : xmalloc(nw * sizeof(float));
            }
        }
        for (int rc = 0; rc < 3; rc++)
            for (int emulate = 1; emulate >= (dev ? 0 : 1); emulate--) {
                titan_fp8_recipe r;
                titan_fp8_recipe_from_name(RECIPES[rc], &r);
                r.emulate = (unsigned char)emulate;
                static const unsigned char FLAGS[3] = {TITAN_FP8_SHARE_KEEP, TITAN_FP8_SHARE_USE,
                                                       TITAN_FP8_SHARE_LAST};
                int gw8 = r.format[TITAN_FP8_X_GW] != TITAN_FP8_NONE;
                for (int v = 0; v < 2; v++) /* v 0: each casts x; v 1: shared */
                    for (int j = 0; j < 3; j++) {
                        titan_fp8_recipe rj = r;
                        rj.share[TITAN_FP8_X_OUT] = rj.share[TITAN_FP8_X_GW] = v ? FLAGS[j] : 0;
                        be->fp8_matmul_forward(dt, &rj, o[v][j], x, wj[j], NULL, N, IC, OCS[j]);
                        if (v && j == 0) put(be, x, other, ni * es); /* the held cast, not x, from here */
                    }
                put(be, x, inp, ni * es);
                for (int v = 0; v < 2; v++)
                    for (int j = 0; j < 3; j++) {
                        titan_fp8_recipe rj = r;
                        rj.share[TITAN_FP8_X_GW] = v ? FLAGS[j] : 0;
                        be->fp8_matmul_backward(dt, &rj, 0, dx[v][j], dw[v][j], dj[j], x, wj[j], N, IC, OCS[j]);
                        if (v && j == 0 && gw8) put(be, x, other, ni * es);
                    }
                put(be, x, inp, ni * es);
                size_t bad = 0;
                for (int j = 0; j < 3; j++) {
                    size_t sizes[3] = {(size_t)N * OCS[j] * es, ni * es, (size_t)OCS[j] * IC * sizeof(float)};
                    void *pa[3] = {o[0][j], dx[0][j], dw[0][j]}, *pb[3] = {o[1][j], dx[1][j], dw[1][j]};
                    for (int t = 0; t < 3; t++) {
                        void *ha = bytes_of(be, pa[t], sizes[t]), *hb = bytes_of(be, pb[t], sizes[t]);
                        bad += memcmp(ha, hb, sizes[t]) != 0;
                        free(ha), free(hb);
                    }
                }
                char name[128], detail[64];
                snprintf(name, sizeof name, "fp8 x cast shared by 3 linears, %s, %s%s", dev ? "gpu" : "cpu",
                         RECIPES[rc], emulate ? " emulated" : "");
                snprintf(detail, sizeof detail, "%zu of 9 outputs differ from unshared casts' bits", bad);
                check_true(name, bad == 0, detail);
            }
        for (int j = 0; j < 3; j++) {
            for (int v = 0; v < 2; v++) {
                if (dev) gpu->free(o[v][j]), gpu->free(dx[v][j]), gpu->free(dw[v][j]);
                else free(o[v][j]), free(dx[v][j]), free(dw[v][j]);
            }
            if (dev) gpu->free(wj[j]), gpu->free(dj[j]);
        }
        if (dev) gpu->free(x);
        else free(x);
    }
    for (int j = 0; j < 3; j++) free(w[j]), free(dout[j]);
    free(inp), free(other);
}

static void test_fp8(titan_dtype dt) {
    cur_dt = dt;
    printf("--- float8, dt = %s\n", dname());
    test_fp8_quantize(67, 129);
    test_fp8_quantize(300, 64); /* column maxima over two chunks of rows; 16-byte packs */
    test_fp8_quantize(20, 30);  /* one partial maximum (no fold), element by element */
    test_fp8_quantize(0, 8);    /* empty: no scales for rows, nothing launched */
    test_fp8_matmul(64, 128, 96); /* dimensions of 16: the tensor-core path */
    test_fp8_matmul(40, 72, 24);  /* K = 72 (out), 24 (grad_in), 40 (grad_w): no float8 algorithm, emulated */
    test_fp8_given_amax(64, 128, 96);
    test_fp8_share(64, 128);
}

static void test_dtype_ops(titan_dtype dt) {
    cur_dt = dt;
    printf("--- dt = %s\n", dname());
    test_add();
    test_matmul(67, 129, 95);
    test_matmul(256, 512, 384);
    test_matmul_unaligned(33, 65, 17);
    test_matmul_add(67, 129, 95);
    test_matmul_add(256, 512, 384);
    test_embedding(300, 96, 50, 0);
    test_embedding(700, 300, 3, 0); /* long runs; C over one block of columns */
    test_embedding(300, 96, 50, 1); /* 16-byte copies */
    test_embedding(200, 45, 20, 1); /* one element a thread (rows not 16-byte chunks) */
    test_rmsnorm(37, 1000);
    test_rmsnorm(5, 16);
    test_rmsnorm(700, 45); /* dweight in 3 chunks of rows, the last ragged */
    test_embedding(20, 40, 1000, 0); /* most rows of dwte not in the batch */
    test_empty_batch();
    test_rope();
    test_attention(2, 100, 100, 4, 2, 16);
    test_attention(1, 130, 130, 8, 8, 64);
    test_attention(1, 70, 70, 4, 1, 128);
    test_attention(1, 40, 40, 2, 1, 256);
    /* bf16 at HD 64 and 128 runs the tensor-core kernels (attention_tc.cu):
     * whole and ragged tiles, GQA groups of 1, 2 and 4 (the cases above too) */
    test_attention(1, 64, 64, 4, 4, 64);
    test_attention(2, 257, 257, 8, 2, 128);
    /* T a multiple of 128: cuDNN before 9.16 takes only these (the model's shapes) */
    test_attention(2, 256, 256, 8, 2, 64);
    /* a context-parallel chunk: the queries are the last Tq of Tk positions.
     * Offsets Tk - Tq a multiple of 64 (the tensor-core kernels' diagonal
     * shifted by whole key tiles) and not (diagonals straddling two tiles,
     * the CUDA-core kernels' tiles of 32 too), ragged tiles, GQA */
    test_attention(2, 37, 100, 4, 2, 16);  /* offset 63 */
    test_attention(1, 64, 192, 4, 2, 64);  /* offset 128, whole tiles */
    test_attention(2, 70, 200, 4, 1, 64);  /* offset 130, ragged */
    test_attention(1, 50, 146, 4, 2, 128); /* offset 96, ragged */
    test_attention(1, 1, 65, 2, 1, 64);    /* one query, the last position */
    /* the ring's blocks (Tq = Tk = L): the diagonal (off 0) and a block
     * wholly before the queries (off L: every key), GQA; bf16 at HD 64
     * runs the tensor-core kernels, L = 70 their ragged last key tile
     * (keys past Tk masked without the causal mask); an offset between */
    test_attention_at(2, 100, 100, 0, 4, 2, 16);
    test_attention_at(2, 100, 100, 100, 4, 2, 16);
    test_attention_at(1, 70, 70, 0, 4, 2, 64);
    test_attention_at(1, 70, 70, 70, 4, 2, 64);
    test_attention_at(1, 64, 64, 64, 4, 1, 64);
    test_attention_at(1, 40, 90, 13, 2, 1, 64);
    test_attention_at(1, 40, 200, 0, 2, 1, 64); /* keys past every query: tiles no query sees */
    test_attention_merge(2, 37, 4, 16);
    test_attention_merge(1, 20, 2, 64);
    test_swiglu();
    test_cross_entropy(17, 5003);
    test_cross_entropy(9, 4096);
    test_cross_entropy_shard(17, 5003, 2000, 1700);
    test_cross_entropy_shard(5, 70001, 0, 35001); /* the first shard, rows over 64 KiB */
}

/* GaLore's elementwise ops: the CPU's bits, with and without decay, scale 1 and not. */
static void test_galore_steps(void) {
    size_t n = 10007;
    float *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float)), *p = randf(n, -1, 1);
    float *d_m = up(m, n), *d_v = up(v, n), *d_p = up(p, n);
    for (int t = 0; t < 3; t++) {
        float *low = randf(n, -0.1, 0.1), *d_low = up(low, n);
        cpu->galore_adam(m, v, low, n, 0.9f, (float)(1.0 - 0.9), 0.999f, (float)(1.0 - 0.999), 1e-8f);
        gpu->galore_adam(d_m, d_v, d_low, n, 0.9f, (float)(1.0 - 0.9), 0.999f, (float)(1.0 - 0.999), 1e-8f);
        float *h = down(d_low, n);
        check_bits("galore_adam: the update equals the CPU's bits", h, low, n * sizeof(float));
        free(h);
        float scale = t == 1 ? 1.0f : 0.25f, decay = t == 2 ? 0.0f : 1e-4f;
        cpu->galore_update(p, low, n, scale, 1e-3f, decay);
        gpu->galore_update(d_p, d_low, n, scale, 1e-3f, decay);
        gpu->free(d_low);
        free(low);
    }
    float *hm = down(d_m, n), *hv = down(d_v, n), *hp = down(d_p, n);
    check_bits("galore_adam m (3 steps) equals the CPU's bits", hm, m, n * sizeof(float));
    check_bits("galore_adam v equals the CPU's bits", hv, v, n * sizeof(float));
    check_bits("galore_update p (3 steps: scale, decay, neither) equals the CPU's bits", hp, p, n * sizeof(float));
    free(hm), free(hv), free(hp);
    gpu->free(d_m), gpu->free(d_v), gpu->free(d_p);
    free(m), free(v), free(p);
}

/* max |a - b| over column-major rows x cols, each column's sign taken
 * from the pair that agrees best (a factorisation's columns are unique up to sign) */
static double diff_up_to_sign(const float *a, const float *b, int rows, int cols, int ld_col, int ld_row) {
    double worst = 0;
    for (int c = 0; c < cols; c++) {
        double same = 0, flip = 0;
        for (int i = 0; i < rows; i++) {
            double x = a[(size_t)i * ld_row + (size_t)c * ld_col], y = b[(size_t)i * ld_row + (size_t)c * ld_col];
            same = fmax(same, fabs(x - y));
            flip = fmax(flip, fabs(x + y));
        }
        worst = fmax(worst, fmin(same, flip));
    }
    return worst;
}

/* A row-major rows x cols matrix with singular values decay^i and random vectors (the CPU's QR). */
static float *known_matrix(int rows, int cols, double decay) {
    int p = rows < cols ? rows : cols;
    float *u = randf((size_t)rows * p, -1, 1), *v = randf((size_t)cols * p, -1, 1); /* column-major */
    cpu->qr_orthonormal(u, rows, p);
    cpu->qr_orthonormal(v, cols, p);
    float *a = xmalloc((size_t)rows * cols * sizeof *a);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double sum = 0;
            for (int c = 0; c < p; c++) sum += (double)u[i + (size_t)c * rows] * pow(decay, c) * v[j + (size_t)c * cols];
            a[(size_t)i * cols + j] = (float)sum;
        }
    free(u), free(v);
    return a;
}

static float *transposed(const float *x, int rows, int cols) {
    float *y = xmalloc((size_t)rows * cols * sizeof *y);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) y[(size_t)j * rows + i] = x[(size_t)i * cols + j];
    return y;
}

/* qr_orthonormal and svd_thin (cuSOLVER) against LAPACK; svd_signs bitwise. */
static void test_linalg(int rows, int cols) {
    char name[160];
    int p = rows < cols ? rows : cols, k = 6;
    if (rows >= cols) {
        float *x = randf((size_t)rows * cols, -1, 1), *d_x = up(x, (size_t)rows * cols);
        int ic = cpu->qr_orthonormal(x, rows, cols), ig = gpu->qr_orthonormal(d_x, rows, cols);
        float *q = down(d_x, (size_t)rows * cols);
        double orth = 0;
        for (int a = 0; a < cols; a++)
            for (int b = 0; b < cols; b++) {
                double dot = 0;
                for (int i = 0; i < rows; i++) dot += (double)q[i + (size_t)a * rows] * q[i + (size_t)b * rows];
                orth = fmax(orth, fabs(dot - (a == b)));
            }
        double d = diff_up_to_sign(q, x, rows, cols, rows, 1);
        snprintf(name, sizeof name, "qr_orthonormal %dx%d: Q^T Q - I %.1e, Q vs LAPACK's %.1e (info %d %d)", rows,
                 cols, orth, d, ic, ig);
        report(name, ic == 0 && ig == 0 && orth < 1e-5 && d < 1e-4, d, 1e-4);
        free(q), free(x);
        gpu->free(d_x);
    }
    /* a is taken column-major rows x cols: a row-major cols x rows matrix */
    float *a = known_matrix(cols, rows, 0.7), *d_a = up(a, (size_t)rows * cols);
    float *u = xmalloc((size_t)rows * k * 4), *vt = xmalloc((size_t)k * cols * 4);
    float *d_u = allocd((size_t)rows * k), *d_vt = allocd((size_t)k * cols);
    int ic = cpu->svd_thin(a, rows, cols, k, u, vt), ig = gpu->svd_thin(d_a, rows, cols, k, d_u, d_vt);
    float *gu = down(d_u, (size_t)rows * k), *gvt = down(d_vt, (size_t)k * cols);
    double du = diff_up_to_sign(gu, u, rows, k, rows, 1), dv = diff_up_to_sign(gvt, vt, cols, k, 1, k);
    snprintf(name, sizeof name, "svd_thin %dx%d (p %d) rank %d: U %.1e, V^T %.1e from LAPACK's (info %d %d)", rows,
             cols, p, k, du, dv, ic, ig);
    report(name, ic == 0 && ig == 0 && du < 1e-4 && dv < 1e-4, fmax(du, dv), 1e-4);
    /* signs: u as row-major rows x k, vt as row-major k x cols (their layouts reread) */
    float *su = randf((size_t)rows * k, -1, 1), *svt = randf((size_t)k * cols, -1, 1);
    float *d_su = up(su, (size_t)rows * k), *d_svt = up(svt, (size_t)k * cols);
    cpu->svd_signs(su, svt, rows, cols, k);
    gpu->svd_signs(d_su, d_svt, rows, cols, k);
    float *hsu = down(d_su, (size_t)rows * k), *hsvt = down(d_svt, (size_t)k * cols);
    snprintf(name, sizeof name, "svd_signs %dx%d rank %d equals the CPU's bits (u, vt)", rows, cols, k);
    check_bits(name, hsu, su, (size_t)rows * k * 4);
    check_bits(name, hsvt, svt, (size_t)k * cols * 4);
    free(hsu), free(hsvt), free(su), free(svt);
    gpu->free(d_su), gpu->free(d_svt);
    free(gu), free(gvt), free(u), free(vt), free(a);
    gpu->free(d_u), gpu->free(d_vt), gpu->free(d_a);
}

/* svd.c's exact and randomized refresh run on the device (cuSOLVER and the
 * backend's GEMMs) against the same on the CPU, and randomized vs exact,
 * on a matrix with a known spectrum: subspace angles in degrees. */
static void test_refresh_svd(int m, int n, int k) {
    char name[200];
    float *a = known_matrix(m, n, 0.75), *d_a = up(a, (size_t)m * n);
    size_t nu = (size_t)m * k, nv = (size_t)k * n;
    float *ue = xmalloc(nu * 4), *ve = xmalloc(nv * 4), *ur = xmalloc(nu * 4), *vr = xmalloc(nv * 4);
    float *d_ue = allocd(nu), *d_ve = allocd(nv), *d_ur = allocd(nu), *d_vr = allocd(nv);
    /* the exact SVD allocates its workspace, the randomized one is given it */
    float *d_work = allocd(titan_svd_work_numel(m, n, k, 8, 1));
    int ok = titan_svd_topk(a, m, n, k, ue, ve) == TITAN_OK &&
             titan_rsvd_topk(a, m, n, k, 8, 1, 11, 5, ur, vr) == TITAN_OK &&
             titan_svd_topk_on(gpu, d_a, m, n, k, d_ue, d_ve, NULL) == TITAN_OK &&
             titan_rsvd_topk_on(gpu, d_a, m, n, k, 8, 1, 11, 5, d_ur, d_vr, d_work) == TITAN_OK;
    gpu->free(d_work);
    float *gue = down(d_ue, nu), *gve = down(d_ve, nv), *gur = down(d_ur, nu), *gvr = down(d_vr, nv);
    float *tve = transposed(ve, k, n), *tgve = transposed(gve, k, n), *tvr = transposed(vr, k, n);
    float *tgvr = transposed(gvr, k, n);
    double deg = 180.0 / M_PI;
    double ex = fmax(subspace_angle(gue, ue, m, k), subspace_angle(tgve, tve, n, k)) * deg;
    double rr = fmax(subspace_angle(gur, ur, m, k), subspace_angle(tgvr, tvr, n, k)) * deg;
    double re = fmax(subspace_angle(gur, gue, m, k), subspace_angle(tgvr, tgve, n, k)) * deg;
    double lead = 0; /* canonical signs: the leading left vectors agree entry by entry */
    for (int i = 0; i < m; i++) lead = fmax(lead, fabs(gue[(size_t)i * k] - ue[(size_t)i * k]));
    snprintf(name, sizeof name, "refresh svd %dx%d rank %d on the device: exact %.1e deg from the CPU's, randomized "
             "%.1e deg from the CPU's, %.2e deg from exact; leading vector %.1e", m, n, k, ex, rr, re, lead);
    report(name, ok && ex < 1e-3 && rr < 1e-3 && re < 0.5 && lead < 1e-4, ex, 1e-3);
    free(gue), free(gve), free(gur), free(gvr), free(tve), free(tgve), free(tvr), free(tgvr);
    free(ue), free(ve), free(ur), free(vr), free(a);
    gpu->free(d_ue), gpu->free(d_ve), gpu->free(d_ur), gpu->free(d_vr), gpu->free(d_a);
}

static void test_galore_ops(void) {
    test_galore_steps();
    test_linalg(300, 24);
    test_linalg(40, 90); /* wide: cuSOLVER's gesvd on the transpose */
    test_linalg(64, 64);
    test_refresh_svd(192, 80, 8);
    test_refresh_svd(48, 150, 6);
}

int main(void) {
    char desc[256] = "";
    titan_status st = titan_backend_open_desc("cuda", &gpu, desc, sizeof desc);
    if (st != TITAN_OK) {
        printf("no GPU: %s\n", titan_error_message());
        return 77;
    }
    on_emulator = strstr(desc, "titan CPU emulator") != NULL;
    cpu = titan_backend_cpu();
    printf("backend %s against %s\n", gpu->name, cpu->name);
    /* what the training loop asks (lib/train/device.c) instead of the name;
     * TITAN_CAP_NCCL depends on the build (nccl.h) */
    report("caps: a GPU, attention choice, not the CPU",
           (gpu->caps & (TITAN_CAP_GPU | TITAN_CAP_ATTENTION_CUDNN | TITAN_CAP_CPU)) ==
               (TITAN_CAP_GPU | TITAN_CAP_ATTENTION_CUDNN), 0, 0);
    report("set_option refuses an unknown key", gpu->set_option("no.such.option", 1) == -1, 0, 0);
    cur_dt = TITAN_DTYPE_F32;
    test_buffers();
    test_memory_accounting();
    test_convert();
    test_scale_sumsq();
    test_adamw();
    test_galore_ops();
    test_dtype_ops(TITAN_DTYPE_F32);
    test_dtype_ops(TITAN_DTYPE_BF16);
    test_fp8(TITAN_DTYPE_F32);
    test_fp8(TITAN_DTYPE_BF16);
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
