/* attention.c - causal grouped-query attention, FlashAttention-2 style on CPU.
 *
 * Queries and keys are cut into 64-row tiles. The forward walks the key tiles
 * of one query tile with an online softmax (running max m, running sum l) and
 * never forms the T x T matrix; tiles entirely above the diagonal are
 * skipped, so causal attention costs half. It saves lse = m + log(l) per row.
 *
 * The backward recomputes P = exp(S - lse) tile by tile, with
 * D = rowsum(dout * out):  dV = P^T dO,  dS = P * (dO V^T - D),
 * dK = scale dS^T Q,  dQ = scale dS K.  To stay deterministic without float
 * atomics it runs two passes: one over key tiles (each owns its dK/dV rows
 * and loops over every query head of its kv group), one over query tiles
 * (each owns its dQ rows). Both recompute P; every sum runs in a fixed order
 * inside one work item, so the thread count never changes the bits.
 *
 * The tile products are two shapes of kernel over GCC vector types:
 * rowdot (out[64 x 64] = A[64 x HD] Bt[HD x 64], vectorised along the 64
 * columns) and rowcomb (acc[64 x HD] += coef[64 x n] M[n x HD], vectorised
 * along HD). Both are inlined with HD a constant for 16/32/64/128. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

#define TB 64 /* tile rows: queries per query tile = keys per key tile */
#define ALWAYS static inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* per-thread scratch, 64-byte aligned */
typedef struct {
    float *qs, *qt, *dos, *dot, *ks, *kt, *vs, *vt; /* [TB*HD] tiles, *t = transposed */
    float *s, *p, *dp;                              /* [TB*TB] */
    float *acc1, *acc2;                             /* [TB*HD] accumulators */
    float *rowa, *rowb, *rowc, *rowd;               /* [TB] per-row values */
} scratch;

static void *scratch_block(int HD, scratch *w) {
    size_t tile = (size_t)TB * HD, sq = (size_t)TB * TB;
    float *base = aligned_alloc(64, (10 * tile + 3 * sq + 4 * TB) * sizeof(float));
    TITAN_ASSERT(base != NULL);
    float *p = base;
    float **tiles[10] = {&w->qs, &w->qt, &w->dos, &w->dot, &w->ks,
                         &w->kt, &w->vs, &w->vt,  &w->acc1, &w->acc2};
    for (int i = 0; i < 10; i++) *tiles[i] = p, p += tile;
    w->s = p, p += sq;
    w->p = p, p += sq;
    w->dp = p, p += sq;
    w->rowa = p, p += TB;
    w->rowb = p, p += TB;
    w->rowc = p, p += TB;
    w->rowd = p;
    return base;
}

/* out[i][c] = sum_d A[i][d] * Bt[d][c] for 64 rows and 64 columns. */
ALWAYS void rowdot(float *restrict out, const float *restrict A, const float *restrict Bt,
                   int HD) {
    for (int i = 0; i < TB; i += 4) {
        v16f acc[4][4];
        for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = (v16f){0};
        for (int d = 0; d < HD; d++) {
            const v16f *b = (const v16f *)(Bt + (size_t)d * TB);
            v16f b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
            for (int r = 0; r < 4; r++) {
                float a = A[(size_t)(i + r) * HD + d];
                acc[r][0] += a * b0;
                acc[r][1] += a * b1;
                acc[r][2] += a * b2;
                acc[r][3] += a * b3;
            }
        }
        for (int r = 0; r < 4; r++) {
            v16f *o = (v16f *)(out + (size_t)(i + r) * TB);
            o[0] = acc[r][0], o[1] = acc[r][1], o[2] = acc[r][2], o[3] = acc[r][3];
        }
    }
}

/* acc[i][:] += sum_{x < nx} coef[i][x] * M[x][:] for 64 rows of HD. Rows are
 * blocked so about 8 vector accumulators are live. */
ALWAYS void rowcomb(float *restrict acc, const float *restrict coef, const float *restrict M,
                    int nx, int HD) {
    if (HD % 16 == 0 && HD <= 256) {
        const int NV = HD / 16, RB = NV >= 8 ? 1 : 8 / NV;
        for (int i = 0; i < TB; i += RB) {
            v16f a[16];
            for (int r = 0; r < RB; r++)
                for (int v = 0; v < NV; v++)
                    a[r * NV + v] = ((v16f *)(acc + (size_t)(i + r) * HD))[v];
            for (int x = 0; x < nx; x++) {
                const v16f *m = (const v16f *)(M + (size_t)x * HD);
                for (int r = 0; r < RB; r++) {
                    float c = coef[(size_t)(i + r) * TB + x];
                    for (int v = 0; v < NV; v++) a[r * NV + v] += c * m[v];
                }
            }
            for (int r = 0; r < RB; r++)
                for (int v = 0; v < NV; v++)
                    ((v16f *)(acc + (size_t)(i + r) * HD))[v] = a[r * NV + v];
        }
    } else {
        for (int i = 0; i < TB; i++)
            for (int x = 0; x < nx; x++) {
                float c = coef[(size_t)i * TB + x];
                for (int d = 0; d < HD; d++) acc[(size_t)i * HD + d] += c * M[(size_t)x * HD + d];
            }
    }
}

/* Copies n rows (stride `ld` floats) of a [.., HD] tensor into a tile, times
 * `mul`, as rows ([TB][HD]) and/or transposed ([HD][TB]); the rest is zero. */
ALWAYS void load_tile(float *rows, float *cols, const float *src, size_t ld, int n, float mul,
                      int HD) {
    if (rows) memset(rows, 0, (size_t)TB * HD * sizeof(float));
    if (cols) memset(cols, 0, (size_t)TB * HD * sizeof(float));
    for (int r = 0; r < n; r++) {
        const float *x = src + (size_t)r * ld;
        for (int d = 0; d < HD; d++) {
            float y = x[d] * mul;
            if (rows) rows[(size_t)r * HD + d] = y;
            if (cols) cols[(size_t)d * TB + r] = y;
        }
    }
}

static float hmax16(v16f v) {
    float m = v[0];
    for (int i = 1; i < 16; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static float hsum16(v16f v) {
    /* a fixed pairwise tree */
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) v[i] += v[i + w];
    return v[0];
}

static inline v16f vmax(v16f a, v16f b) {
    v16i gt = b > a;
    return (v16f)((gt & (v16i)b) | (~gt & (v16i)a));
}

static float row_max(const float *x) {
    const v16f *v = (const v16f *)x;
    return hmax16(vmax(vmax(v[0], v[1]), vmax(v[2], v[3])));
}

static float row_sum(const float *x) {
    const v16f *v = (const v16f *)x;
    return hsum16((v[0] + v[1]) + (v[2] + v[3]));
}

/* Sets masked scores to -inf: key column c >= nk, query row r >= nq, or key
 * after query (k0 + c > q0 + r). `trans` means s is [key][query]. */
static void apply_mask(float *s, int trans, int q0, int nq, int k0, int nk) {
    for (int a = 0; a < TB; a++)
        for (int b = 0; b < TB; b++) {
            int r = trans ? b : a, c = trans ? a : b;
            if (c >= nk || r >= nq || k0 + c > q0 + r) s[(size_t)a * TB + b] = -INFINITY;
        }
}

static int needs_mask(int q0, int nq, int k0, int nk) { return nq < TB || nk < TB || k0 + TB - 1 > q0; }

/* D[r] = dot(dout[r], out[r]) in a fixed order. */
ALWAYS void row_delta(float *D, const float *dout, const float *out, size_t ld, int nq, int HD) {
    for (int r = 0; r < TB; r++) {
        float s = 0.0f;
        if (r < nq)
            for (int d = 0; d < HD; d++) s += dout[(size_t)r * ld + d] * out[(size_t)r * ld + d];
        D[r] = s;
    }
}

typedef struct {
    int B, T, NH, NKV, HD;
    float scale;
} shape;

/* ------------------------------------------------------------------ forward */

ALWAYS void fwd_item(const shape *g, scratch *w, float *out, float *lse, const float *q,
                     const float *k, const float *v, int b, int h, int qi, int HD) {
    int T = g->T, NH = g->NH, NKV = g->NKV, kh = h / (NH / NKV);
    int q0 = qi * TB, nq = T - q0 < TB ? T - q0 : TB;
    float *m = w->rowa, *l = w->rowb, *alpha = w->rowc;
    load_tile(w->qs, NULL, q + (((size_t)b * T + q0) * NH + h) * HD, (size_t)NH * HD, nq,
              g->scale, HD);
    memset(w->acc1, 0, (size_t)TB * HD * sizeof(float));
    for (int r = 0; r < TB; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (int kj = 0; kj <= qi; kj++) {
        int k0 = kj * TB, nk = T - k0 < TB ? T - k0 : TB;
        size_t off = (((size_t)b * T + k0) * NKV + kh) * HD;
        load_tile(NULL, w->kt, k + off, (size_t)NKV * HD, nk, 1.0f, HD);
        load_tile(w->vs, NULL, v + off, (size_t)NKV * HD, nk, 1.0f, HD);
        rowdot(w->s, w->qs, w->kt, HD);
        if (needs_mask(q0, nq, k0, nk)) apply_mask(w->s, 0, q0, TB, k0, nk);
        for (int r = 0; r < TB; r++) {
            float *sr = w->s + (size_t)r * TB;
            float mx = row_max(sr), mnew = mx > m[r] ? mx : m[r];
            alpha[r] = m[r] - mnew; /* exp below; -inf on the first tile gives 0 */
            m[r] = mnew;
            for (int c = 0; c < TB; c++) sr[c] -= mnew;
        }
        titan_cpu_exp(w->s, w->s, TB * TB);
        titan_cpu_exp(alpha, alpha, TB);
        for (int r = 0; r < TB; r++) {
            l[r] = l[r] * alpha[r] + row_sum(w->s + (size_t)r * TB);
            for (int d = 0; d < HD; d++) w->acc1[(size_t)r * HD + d] *= alpha[r];
        }
        rowcomb(w->acc1, w->s, w->vs, nk, HD);
    }
    for (int r = 0; r < nq; r++) {
        float *o = out + (((size_t)b * T + q0 + r) * NH + h) * HD;
        float inv = 1.0f / l[r];
        for (int d = 0; d < HD; d++) o[d] = w->acc1[(size_t)r * HD + d] * inv;
        lse[((size_t)b * NH + h) * T + q0 + r] = m[r] + logf(l[r]);
    }
}

/* ------------------------------------------- backward pass 1: dK, dV per key tile */

ALWAYS void bwd_kv_item(const shape *g, scratch *w, float *dk, float *dv, const float *dout,
                        const float *out, const float *lse, const float *q, const float *k,
                        const float *v, int b, int kh, int kj, int HD) {
    int T = g->T, NH = g->NH, NKV = g->NKV, rep = NH / NKV, nqt = (T + TB - 1) / TB;
    int k0 = kj * TB, nk = T - k0 < TB ? T - k0 : TB;
    size_t koff = (((size_t)b * T + k0) * NKV + kh) * HD;
    float *L = w->rowa, *D = w->rowb;
    load_tile(w->ks, NULL, k + koff, (size_t)NKV * HD, nk, 1.0f, HD);
    load_tile(w->vs, NULL, v + koff, (size_t)NKV * HD, nk, 1.0f, HD);
    memset(w->acc1, 0, (size_t)TB * HD * sizeof(float)); /* dK */
    memset(w->acc2, 0, (size_t)TB * HD * sizeof(float)); /* dV */
    for (int h = kh * rep; h < (kh + 1) * rep; h++)
        for (int qi = kj; qi < nqt; qi++) {
            int q0 = qi * TB, nq = T - q0 < TB ? T - q0 : TB;
            size_t qoff = (((size_t)b * T + q0) * NH + h) * HD, ld = (size_t)NH * HD;
            load_tile(w->qs, w->qt, q + qoff, ld, nq, g->scale, HD);
            load_tile(w->dos, w->dot, dout + qoff, ld, nq, 1.0f, HD);
            row_delta(D, dout + qoff, out + qoff, ld, nq, HD);
            for (int r = 0; r < TB; r++) L[r] = r < nq ? lse[((size_t)b * NH + h) * T + q0 + r] : 0.0f;
            /* transposed: rows are keys, columns queries */
            rowdot(w->p, w->ks, w->qt, HD);
            for (int c = 0; c < TB; c++)
                for (int r = 0; r < TB; r++) w->p[(size_t)c * TB + r] -= L[r];
            if (needs_mask(q0, nq, k0, nk)) apply_mask(w->p, 1, q0, nq, k0, nk);
            titan_cpu_exp(w->p, w->p, TB * TB);
            rowcomb(w->acc2, w->p, w->dos, nq, HD);
            rowdot(w->dp, w->vs, w->dot, HD);
            for (int c = 0; c < TB; c++)
                for (int r = 0; r < TB; r++) {
                    size_t x = (size_t)c * TB + r;
                    w->dp[x] = w->p[x] * (w->dp[x] - D[r]);
                }
            rowcomb(w->acc1, w->dp, w->qs, nq, HD);
        }
    for (int c = 0; c < nk; c++) {
        float *gk = dk + koff + (size_t)c * NKV * HD, *gv = dv + koff + (size_t)c * NKV * HD;
        for (int d = 0; d < HD; d++) {
            gk[d] += w->acc1[(size_t)c * HD + d];
            gv[d] += w->acc2[(size_t)c * HD + d];
        }
    }
}

/* ----------------------------------------------- backward pass 2: dQ per query tile */

ALWAYS void bwd_q_item(const shape *g, scratch *w, float *dq, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v, int b,
                       int h, int qi, int HD) {
    int T = g->T, NH = g->NH, NKV = g->NKV, kh = h / (NH / NKV);
    int q0 = qi * TB, nq = T - q0 < TB ? T - q0 : TB;
    size_t qoff = (((size_t)b * T + q0) * NH + h) * HD, ld = (size_t)NH * HD;
    float *L = w->rowa, *D = w->rowb;
    load_tile(w->qs, NULL, q + qoff, ld, nq, g->scale, HD);
    load_tile(w->dos, NULL, dout + qoff, ld, nq, 1.0f, HD);
    row_delta(D, dout + qoff, out + qoff, ld, nq, HD);
    for (int r = 0; r < TB; r++) L[r] = r < nq ? lse[((size_t)b * NH + h) * T + q0 + r] : 0.0f;
    memset(w->acc1, 0, (size_t)TB * HD * sizeof(float));
    for (int kj = 0; kj <= qi; kj++) {
        int k0 = kj * TB, nk = T - k0 < TB ? T - k0 : TB;
        size_t koff = (((size_t)b * T + k0) * NKV + kh) * HD;
        load_tile(w->ks, w->kt, k + koff, (size_t)NKV * HD, nk, 1.0f, HD);
        load_tile(NULL, w->vt, v + koff, (size_t)NKV * HD, nk, 1.0f, HD);
        rowdot(w->p, w->qs, w->kt, HD);
        for (int r = 0; r < TB; r++)
            for (int c = 0; c < TB; c++) w->p[(size_t)r * TB + c] -= L[r];
        if (needs_mask(q0, nq, k0, nk)) apply_mask(w->p, 0, q0, nq, k0, nk);
        titan_cpu_exp(w->p, w->p, TB * TB);
        rowdot(w->dp, w->dos, w->vt, HD);
        for (int r = 0; r < TB; r++)
            for (int c = 0; c < TB; c++) {
                size_t x = (size_t)r * TB + c;
                w->dp[x] = w->p[x] * (w->dp[x] - D[r]);
            }
        rowcomb(w->acc1, w->dp, w->ks, nk, HD);
    }
    for (int r = 0; r < nq; r++) {
        float *gq = dq + qoff + (size_t)r * ld;
        for (int d = 0; d < HD; d++) gq[d] += g->scale * w->acc1[(size_t)r * HD + d];
    }
}

/* ------------------------------------------- instances with HD a constant */

#define INSTANCE(SUFFIX, HDV)                                                                  \
    static void fwd_##SUFFIX(const shape *g, scratch *w, float *out, float *lse,             \
                             const float *q, const float *k, const float *v, int b, int h,     \
                             int qi) {                                                         \
        fwd_item(g, w, out, lse, q, k, v, b, h, qi, HDV);                                      \
    }                                                                                          \
    static void kv_##SUFFIX(const shape *g, scratch *w, float *dk, float *dv, const float *dy, \
                            const float *o, const float *lse, const float *q, const float *k,  \
                            const float *v, int b, int kh, int kj) {                           \
        bwd_kv_item(g, w, dk, dv, dy, o, lse, q, k, v, b, kh, kj, HDV);                        \
    }                                                                                          \
    static void q_##SUFFIX(const shape *g, scratch *w, float *dq, const float *dy,              \
                           const float *o, const float *lse, const float *q, const float *k,   \
                           const float *v, int b, int h, int qi) {                             \
        bwd_q_item(g, w, dq, dy, o, lse, q, k, v, b, h, qi, HDV);                              \
    }

INSTANCE(16, 16)
INSTANCE(32, 32)
INSTANCE(64, 64)
INSTANCE(128, 128)
INSTANCE(any, g->HD)

typedef void (*fwd_fn)(const shape *, scratch *, float *, float *, const float *, const float *,
                       const float *, int, int, int);
typedef void (*kv_fn)(const shape *, scratch *, float *, float *, const float *, const float *,
                      const float *, const float *, const float *, const float *, int, int, int);
typedef void (*q_fn)(const shape *, scratch *, float *, const float *, const float *,
                     const float *, const float *, const float *, const float *, int, int, int);

static void pick(int HD, fwd_fn *f, kv_fn *kv, q_fn *qf) {
    switch (HD) {
    case 16: *f = fwd_16, *kv = kv_16, *qf = q_16; break;
    case 32: *f = fwd_32, *kv = kv_32, *qf = q_32; break;
    case 64: *f = fwd_64, *kv = kv_64, *qf = q_64; break;
    case 128: *f = fwd_128, *kv = kv_128, *qf = q_128; break;
    default: *f = fwd_any, *kv = kv_any, *qf = q_any; break;
    }
}

/* ------------------------------------------------------------- entry points */

void titan_cpu_attention_forward(float *out, float *lse, const float *q, const float *k,
                                 const float *v, int B, int T, int NH, int NKV, int HD) {
    TITAN_ASSERT(NKV > 0 && NH % NKV == 0 && HD > 0);
    if (B <= 0 || T <= 0) return;
    shape g = {B, T, NH, NKV, HD, 1.0f / sqrtf((float)HD)};
    fwd_fn f;
    kv_fn kv;
    q_fn qf;
    pick(HD, &f, &kv, &qf);
    int nqt = (T + TB - 1) / TB;
    long items = (long)nqt * B * NH;
#pragma omp parallel if (items > 1)
    {
        scratch w;
        void *mem = scratch_block(HD, &w);
        /* heaviest (last) query tiles first */
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < items; it++) {
            int qi = nqt - 1 - (int)(it / ((long)B * NH));
            int bh = (int)(it % ((long)B * NH));
            f(&g, &w, out, lse, q, k, v, bh / NH, bh % NH, qi);
        }
        free(mem);
    }
}

void titan_cpu_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                  const float *out, const float *lse, const float *q,
                                  const float *k, const float *v, int B, int T, int NH, int NKV,
                                  int HD) {
    TITAN_ASSERT(NKV > 0 && NH % NKV == 0 && HD > 0);
    if (B <= 0 || T <= 0) return;
    shape g = {B, T, NH, NKV, HD, 1.0f / sqrtf((float)HD)};
    fwd_fn f;
    kv_fn kv;
    q_fn qf;
    pick(HD, &f, &kv, &qf);
    int nt = (T + TB - 1) / TB;
    long kv_items = (long)nt * B * NKV, q_items = (long)nt * B * NH;
#pragma omp parallel if (q_items > 1)
    {
        scratch w;
        void *mem = scratch_block(HD, &w);
        /* heaviest (first) key tiles first */
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < kv_items; it++) {
            int kj = (int)(it / ((long)B * NKV)), bk = (int)(it % ((long)B * NKV));
            kv(&g, &w, dk, dv, dout, out, lse, q, k, v, bk / NKV, bk % NKV, kj);
        }
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < q_items; it++) {
            int qi = nt - 1 - (int)(it / ((long)B * NH)), bh = (int)(it % ((long)B * NH));
            qf(&g, &w, dq, dout, out, lse, q, k, v, bh / NH, bh % NH, qi);
        }
        free(mem);
    }
}
