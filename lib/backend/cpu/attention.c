/* attention.c - causal grouped-query attention, FlashAttention-2 style on CPU.
 *
 * Queries and keys are cut into 64-row tiles. The forward walks the key tiles
 * of one query tile with an online softmax (running max m, running sum l) and
 * never forms the T x T matrix; tiles above the diagonal are skipped, so
 * causal attention costs half. It saves lse = m + log(l) per query.
 *
 * The backward recomputes P = exp(S - lse) tile by tile, with
 * D = rowsum(dout * out):  dV = P^T dO,  dS = P * (dO V^T - D),
 * dK = scale dS^T Q,  dQ = scale dS K.  To stay deterministic without float
 * atomics it runs two passes: one over key tiles (each owns its dK/dV rows
 * and loops over every query head of its kv group), one over query tiles
 * (each owns its dQ rows). Both recompute P. Every sum runs in a fixed order
 * inside one work item, so the thread count never changes the bits.
 *
 * Vectors always run along the 64 rows of the tile that a work item owns:
 * the forward and the dQ pass keep scores transposed, St[key][query], so the
 * online softmax is vertical vector max/add and K, V are read as broadcast
 * scalars; the dK/dV pass keeps S[query][key]. A pre-pass copies K and V
 * (and in the backward Q, dO and their transposes) into head-major, tile-
 * padded buffers: rows of the caller's [B,T,heads,HD] tensors lie
 * heads*HD floats apart (1 KiB for the debug model), map to a few L1 sets
 * and evict each other, and would otherwise be re-gathered for every
 * (query tile, key tile) pair. Two kernels over GCC vector types do all the
 * products (rowdot: out = A B^T; colcomb: acc^T += M^T coef), inlined with
 * HD a constant for 16/32/64/128.
 *
 * The queries may be the last Tq of Tk positions (a chunk of a longer
 * sequence, context parallelism): query i sits at position off + i with
 * off = Tk - Tq. Query tiles cut the Tq queries, key tiles stay aligned at
 * key 0, so a key meets the same tile and lane order whatever the chunk.
 * A query tile visits the key tiles up to its last query's position and
 * masks (-inf) every key after a query's position; a query's lane sees
 * exactly its whole-sequence tiles plus fully masked ones, which add exact
 * zeros (exp(-inf) = 0, and alpha = exp(0) = 1 exactly in titan_cpu_exp).
 * So a chunk's out, lse and dq rows carry the bits of the whole call's;
 * dk, dv sum over other query groupings and only agree to rounding. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

#define TB 64 /* queries per query tile = keys per key tile */
#define ALWAYS static inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64))); /* 64-byte aligned scratch only */
typedef int32_t v16i __attribute__((vector_size(64)));

#define NV (TB / 16) /* vectors per tile row */

static inline v16f vmax(v16f a, v16f b) {
    v16i gt = b > a;
    return (v16f)((gt & (v16i)b) | (~gt & (v16i)a));
}

/* out[c][:] = sum_d A[c*lda + d] * Bt[d][:] for rows c < n (one vector row =
 * the 64 queries). Four rows share each load of Bt. */
ALWAYS void rowdot_rows(float *restrict out, const float *restrict A, size_t lda,
                        const float *restrict Bt, int c, const int R, int HD) {
    v16f acc[4][NV];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = (v16f){0};
    for (int d = 0; d < HD; d++) {
        const v16f *b = (const v16f *)(Bt + (size_t)d * TB);
        for (int r = 0; r < R; r++) {
            float a = A[(size_t)(c + r) * lda + d];
            for (int v = 0; v < NV; v++) acc[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < NV; v++) ((v16f *)(out + (size_t)(c + r) * TB))[v] = acc[r][v];
}

ALWAYS void rowdot(float *restrict out, const float *restrict A, size_t lda,
                   const float *restrict Bt, int n, int HD) {
    int c = 0;
    for (; c + 4 <= n; c += 4) rowdot_rows(out, A, lda, Bt, c, 4, HD);
    for (; c < n; c++) rowdot_rows(out, A, lda, Bt, c, 1, HD);
}

/* accT[d][:] += sum_{c < n} M[c*ldm + d] * coef[c][:]  (accT is [HD][TB]) */
ALWAYS void colcomb_cols(float *restrict accT, const float *restrict coef,
                         const float *restrict M, size_t ldm, int n, int d0, const int R) {
    v16f a[4][NV];
    for (int i = 0; i < R; i++)
        for (int v = 0; v < NV; v++) a[i][v] = ((v16f *)(accT + (size_t)(d0 + i) * TB))[v];
    for (int c = 0; c < n; c++) {
        const v16f *p = (const v16f *)(coef + (size_t)c * TB);
        for (int i = 0; i < R; i++) {
            float m = M[(size_t)c * ldm + d0 + i];
            for (int v = 0; v < NV; v++) a[i][v] += m * p[v];
        }
    }
    for (int i = 0; i < R; i++)
        for (int v = 0; v < NV; v++) ((v16f *)(accT + (size_t)(d0 + i) * TB))[v] = a[i][v];
}

ALWAYS void colcomb(float *restrict accT, const float *restrict coef, const float *restrict M,
                    size_t ldm, int n, int HD) {
    int d = 0;
    for (; d + 4 <= HD; d += 4) colcomb_cols(accT, coef, M, ldm, n, d, 4);
    for (; d < HD; d++) colcomb_cols(accT, coef, M, ldm, n, d, 1);
}

/* dst[d][r] = src[r*ld + d] * mul for r < n, zero for n <= r < TB. */
static void pack_t(float *dst, const float *src, size_t ld, int n, float mul, int HD) {
    for (int d = 0; d < HD; d++) {
        float *o = dst + (size_t)d * TB;
        for (int r = 0; r < n; r++) o[r] = src[(size_t)r * ld + d] * mul;
        for (int r = n; r < TB; r++) o[r] = 0.0f;
    }
}

/* St[c][r] = -inf where key c comes after query r (r < nq), with dpos =
 * position of key 0 minus position of query 0 of the tiles; only called
 * when some key does (dpos + nk - 1 > 0). */
static void mask_tile(float *St, int nk, int nq, int dpos) {
    for (int c = dpos > 0 ? 0 : 1 - dpos; c < nk; c++) {
        int end = c + dpos < nq ? c + dpos : nq;
        for (int r = 0; r < end; r++) St[(size_t)c * TB + r] = -INFINITY;
    }
}

/* St[c][:] -= L[:] for c < n, then the causal mask, then P = exp(St). */
static void softmax_tile(float *St, const float *L, int n, int nq, int dpos) {
    const v16f *l = (const v16f *)L;
    for (int c = 0; c < n; c++) {
        v16f *s = (v16f *)(St + (size_t)c * TB);
        for (int v = 0; v < NV; v++) s[v] -= l[v];
    }
    if (dpos + n - 1 > 0) mask_tile(St, n, nq, dpos);
    titan_cpu_exp(St, St, n * TB);
}

/* dst[r][:] = src[r*ld + :] * mul for r < n; zero rows n..TB-1. */
static void copy_rows(float *dst, const float *src, size_t ld, int n, float mul, int HD) {
    for (int r = 0; r < n; r++)
        for (int d = 0; d < HD; d++) dst[(size_t)r * HD + d] = src[(size_t)r * ld + d] * mul;
    if (n < TB) memset(dst + (size_t)n * HD, 0, (size_t)(TB - n) * HD * sizeof(float));
}

typedef struct {
    int B, Tq, Tk, off, NH, NKV, HD; /* off = Tk - Tq: position of query 0 */
    int nqt, nkt;                    /* query tiles, key tiles */
    float scale;
    int acc;                  /* backward: add into dq, dk, dv (else overwrite) */
    /* head-major packs, one [TB][HD] tile (or [HD][TB] for *t) per (b, head, tile) */
    float *kp, *vp;           /* K, V rows */
    float *qp, *dop, *qt, *dot; /* backward: Q*scale, dO rows; their transposes */
    float *lse, *delta;       /* backward: [TB] per query tile: lse, D = rowsum(dO*O) */
} shape;

static size_t q_index(const shape *g, int b, int h, int qi) {
    return ((size_t)b * g->NH + h) * g->nqt + qi;
}

static const float *kv_tile(const shape *g, const float *pack, int b, int kh, int kj) {
    return pack + (((size_t)b * g->NKV + kh) * g->nkt + kj) * TB * g->HD;
}

static int rows_from(int n, int r0) { return n - r0 < TB ? n - r0 : TB; }

/* The last key tile a query at position pos sees (off may put the
 * queries after every key: then the last tile there is). */
static int last_tile(const shape *g, int pos) {
    int t = pos / TB;
    return t < g->nkt - 1 ? t : g->nkt - 1;
}

/* Per-thread scratch, 64-byte aligned. */
typedef struct {
    float *st, *dp;         /* [TB*TB] scores / probabilities, dP / dS */
    float *acc, *acc2, *qt; /* [TB*HD] accumulators, Q^T of the forward's tile */
    float *kt, *vt;         /* [HD*TB] K^T, V^T of pass 1's key tile */
    float *m, *l, *alpha;   /* [TB] */
} scratch;

static void *scratch_alloc(int HD, scratch *w) {
    size_t sq = (size_t)TB * TB, tile = (size_t)TB * HD;
    float *p = aligned_alloc(64, (2 * sq + 5 * tile + 3 * TB) * sizeof(float));
    TITAN_ASSERT(p != NULL);
    float *x = p;
    w->st = x, x += sq;
    w->dp = x, x += sq;
    float **tiles[5] = {&w->acc, &w->acc2, &w->qt, &w->kt, &w->vt};
    for (int i = 0; i < 5; i++) *tiles[i] = x, x += tile;
    w->m = x, w->l = x + TB, w->alpha = x + 2 * TB;
    return p;
}

static float *pack_alloc(size_t nfloats) {
    float *p = aligned_alloc(64, nfloats * sizeof(float));
    TITAN_ASSERT(p != NULL);
    return p;
}

/* K and V tile (b, kh, kj) into the packs */
static void pack_kv(const shape *g, const float *k, const float *v, int b, int kh, int kj) {
    int k0 = kj * TB, nk = rows_from(g->Tk, k0);
    size_t off = (((size_t)b * g->Tk + k0) * g->NKV + kh) * g->HD, ld = (size_t)g->NKV * g->HD;
    copy_rows((float *)kv_tile(g, g->kp, b, kh, kj), k + off, ld, nk, 1.0f, g->HD);
    copy_rows((float *)kv_tile(g, g->vp, b, kh, kj), v + off, ld, nk, 1.0f, g->HD);
}

/* ------------------------------------------------------------------ forward */

ALWAYS void fwd_item(const shape *g, scratch *w, float *out, float *lse, const float *q, int b,
                     int h, int qi, int HD) {
    int Tq = g->Tq, NH = g->NH, kh = h / (NH / g->NKV);
    int q0 = qi * TB, nq = rows_from(Tq, q0), p0 = g->off + q0; /* p0: first query's position */
    v16f *m = (v16f *)w->m, *l = (v16f *)w->l, *alpha = (v16f *)w->alpha;
    pack_t(w->qt, q + (((size_t)b * Tq + q0) * NH + h) * HD, (size_t)NH * HD, nq, g->scale, HD);
    memset(w->acc, 0, (size_t)TB * HD * sizeof(float));
    for (int i = 0; i < NV; i++) m[i] = (v16f){0} - INFINITY, l[i] = (v16f){0};
    /* key tile 0 is never fully masked, so every row's m is finite after it */
    for (int kj = 0, last = last_tile(g, p0 + nq - 1); kj <= last; kj++) {
        int nk = rows_from(g->Tk, kj * TB), dpos = kj * TB - p0;
        rowdot(w->st, kv_tile(g, g->kp, b, kh, kj), HD, w->qt, nk, HD);
        if (dpos + nk - 1 > 0) mask_tile(w->st, nk, nq, dpos);
        /* online softmax, one lane per query */
        v16f mx[NV];
        for (int i = 0; i < NV; i++) mx[i] = ((v16f *)w->st)[i];
        for (int c = 1; c < nk; c++)
            for (int i = 0; i < NV; i++) mx[i] = vmax(mx[i], ((v16f *)(w->st + (size_t)c * TB))[i]);
        for (int i = 0; i < NV; i++) {
            mx[i] = vmax(m[i], mx[i]);
            alpha[i] = m[i] - mx[i]; /* exp below: 0 on the first tile (m = -inf) */
            m[i] = mx[i];
        }
        for (int c = 0; c < nk; c++)
            for (int i = 0; i < NV; i++) ((v16f *)(w->st + (size_t)c * TB))[i] -= mx[i];
        titan_cpu_exp(w->st, w->st, nk * TB);
        titan_cpu_exp(w->alpha, w->alpha, TB);
        v16f sum[NV];
        for (int i = 0; i < NV; i++) sum[i] = ((v16f *)w->st)[i];
        for (int c = 1; c < nk; c++)
            for (int i = 0; i < NV; i++) sum[i] += ((v16f *)(w->st + (size_t)c * TB))[i];
        for (int i = 0; i < NV; i++) l[i] = l[i] * alpha[i] + sum[i];
        for (int d = 0; d < HD; d++)
            for (int i = 0; i < NV; i++) ((v16f *)(w->acc + (size_t)d * TB))[i] *= alpha[i];
        colcomb(w->acc, w->st, kv_tile(g, g->vp, b, kh, kj), HD, nk, HD);
    }
    for (int r = 0; r < nq; r++) {
        float *o = out + (((size_t)b * Tq + q0 + r) * NH + h) * HD;
        float inv = 1.0f / w->l[r];
        for (int d = 0; d < HD; d++) o[d] = w->acc[(size_t)d * TB + r] * inv;
        lse[((size_t)b * NH + h) * Tq + q0 + r] = w->m[r] + logf(w->l[r]);
    }
}

/* ------------------------------------------ backward: packing per query tile */

ALWAYS void pack_q_item(const shape *g, const float *dout, const float *out, const float *lse,
                        const float *q, int b, int h, int qi, int HD) {
    int Tq = g->Tq, NH = g->NH, q0 = qi * TB, nq = rows_from(Tq, q0);
    size_t ld = (size_t)NH * HD, off = (((size_t)b * Tq + q0) * NH + h) * HD;
    size_t ti = q_index(g, b, h, qi);
    float *qr = g->qp + ti * TB * HD, *dr = g->dop + ti * TB * HD;
    copy_rows(qr, q + off, ld, nq, g->scale, HD);
    copy_rows(dr, dout + off, ld, nq, 1.0f, HD);
    pack_t(g->qt + ti * TB * HD, qr, HD, nq, 1.0f, HD);
    pack_t(g->dot + ti * TB * HD, dr, HD, nq, 1.0f, HD);
    float *L = g->lse + ti * TB, *D = g->delta + ti * TB;
    for (int r = 0; r < TB; r++) {
        float s = 0.0f;
        if (r < nq)
            for (int d = 0; d < HD; d++) s += dout[off + r * ld + d] * out[off + r * ld + d];
        D[r] = s;
        L[r] = r < nq ? lse[((size_t)b * NH + h) * Tq + q0 + r] : 0.0f;
    }
}

/* ------------------------------------------- backward pass 1: dK, dV per key tile
 * Here scores are S[query][key], vectors along the 64 keys of the tile, so
 * dV^T and dK^T accumulate with the same column kernel as the forward. */

ALWAYS void bwd_kv_item(const shape *g, scratch *w, float *dk, float *dv, int b, int kh, int kj,
                        int HD) {
    int NH = g->NH, NKV = g->NKV, rep = NH / NKV;
    int k0 = kj * TB, nk = rows_from(g->Tk, k0);
    /* the first query tile with a query at or after key k0 */
    int qfirst = k0 <= g->off ? 0 : (k0 - g->off) / TB;
    float *dKT = w->acc, *dVT = w->acc2; /* [HD][TB] */
    pack_t(w->kt, kv_tile(g, g->kp, b, kh, kj), HD, nk, 1.0f, HD);
    pack_t(w->vt, kv_tile(g, g->vp, b, kh, kj), HD, nk, 1.0f, HD);
    memset(dKT, 0, (size_t)TB * HD * sizeof(float));
    memset(dVT, 0, (size_t)TB * HD * sizeof(float));
    for (int h = kh * rep; h < (kh + 1) * rep; h++)
        for (int qi = qfirst; qi < g->nqt; qi++) {
            int nq = rows_from(g->Tq, qi * TB), dpos = k0 - (g->off + qi * TB);
            size_t ti = q_index(g, b, h, qi);
            const float *L = g->lse + ti * TB, *D = g->delta + ti * TB;
            const float *qr = g->qp + ti * TB * HD, *dr = g->dop + ti * TB * HD;
            rowdot(w->st, qr, HD, w->kt, nq, HD);
            for (int r = 0; r < nq; r++) {
                float *s = w->st + (size_t)r * TB;
                for (int c = 0; c < TB; c++) s[c] -= L[r];
                /* keys from r - dpos + 1 on come after query r: -inf
                 * (a row before the whole tile gets no probability) */
                int first_masked = r - dpos + 1 < nk ? r - dpos + 1 : nk;
                if (first_masked < 0) first_masked = 0;
                for (int c = first_masked; c < TB; c++) s[c] = -INFINITY;
            }
            titan_cpu_exp(w->st, w->st, nq * TB);
            rowdot(w->dp, dr, HD, w->vt, nq, HD);
            for (int r = 0; r < nq; r++) {
                float *p = w->st + (size_t)r * TB, *s = w->dp + (size_t)r * TB;
                for (int c = 0; c < TB; c++) s[c] = p[c] * (s[c] - D[r]);
            }
            colcomb(dVT, w->st, dr, HD, nq, HD);
            colcomb(dKT, w->dp, qr, HD, nq, HD);
        }
    size_t koff = (((size_t)b * g->Tk + k0) * NKV + kh) * HD, ldk = (size_t)NKV * HD;
    for (int c = 0; c < nk; c++) {
        float *gk = dk + koff + (size_t)c * ldk, *gv = dv + koff + (size_t)c * ldk;
        for (int d = 0; d < HD; d++) {
            gk[d] = g->acc ? gk[d] + dKT[(size_t)d * TB + c] : dKT[(size_t)d * TB + c];
            gv[d] = g->acc ? gv[d] + dVT[(size_t)d * TB + c] : dVT[(size_t)d * TB + c];
        }
    }
}

/* ----------------------------------------------- backward pass 2: dQ per query tile */

ALWAYS void bwd_q_item(const shape *g, scratch *w, float *dq, int b, int h, int qi, int HD) {
    int Tq = g->Tq, NH = g->NH, kh = h / (NH / g->NKV);
    int q0 = qi * TB, nq = rows_from(Tq, q0), p0 = g->off + q0;
    size_t ti = q_index(g, b, h, qi);
    const float *qt = g->qt + ti * TB * HD, *dot = g->dot + ti * TB * HD;
    const v16f *D = (const v16f *)(g->delta + ti * TB);
    float *dQ = w->acc; /* [HD][TB] */
    memset(dQ, 0, (size_t)TB * HD * sizeof(float));
    for (int kj = 0, last = last_tile(g, p0 + nq - 1); kj <= last; kj++) {
        int nk = rows_from(g->Tk, kj * TB);
        const float *kr = kv_tile(g, g->kp, b, kh, kj);
        rowdot(w->st, kr, HD, qt, nk, HD);
        softmax_tile(w->st, g->lse + ti * TB, nk, nq, kj * TB - p0);
        rowdot(w->dp, kv_tile(g, g->vp, b, kh, kj), HD, dot, nk, HD);
        for (int c = 0; c < nk; c++) {
            v16f *p = (v16f *)(w->st + (size_t)c * TB), *s = (v16f *)(w->dp + (size_t)c * TB);
            for (int i = 0; i < NV; i++) s[i] = p[i] * (s[i] - D[i]);
        }
        colcomb(dQ, w->dp, kr, HD, nk, HD);
    }
    float *x = w->acc2; /* one dq row; [TB*HD], unused by this pass */
    for (int r = 0; r < nq; r++) {
        for (int d = 0; d < HD; d++) x[d] = g->scale * dQ[(size_t)d * TB + r];
        titan_cpu_store_grad(dq + (((size_t)b * Tq + q0 + r) * NH + h) * HD, x, (size_t)HD, g->acc);
    }
}

/* ------------------------------------------- instances with HD a constant */

#define INSTANCE(SUFFIX, HDV)                                                                  \
    static void fwd_##SUFFIX(const shape *g, scratch *w, float *out, float *lse,             \
                             const float *q, int b, int h, int qi) {                           \
        fwd_item(g, w, out, lse, q, b, h, qi, HDV);                                            \
    }                                                                                          \
    static void pack_##SUFFIX(const shape *g, const float *dy, const float *o,                \
                              const float *lse, const float *q, int b, int h, int qi) {        \
        pack_q_item(g, dy, o, lse, q, b, h, qi, HDV);                                          \
    }                                                                                          \
    static void kv_##SUFFIX(const shape *g, scratch *w, float *dk, float *dv, int b, int kh,   \
                            int kj) {                                                          \
        bwd_kv_item(g, w, dk, dv, b, kh, kj, HDV);                                             \
    }                                                                                          \
    static void q_##SUFFIX(const shape *g, scratch *w, float *dq, int b, int h, int qi) {      \
        bwd_q_item(g, w, dq, b, h, qi, HDV);                                                   \
    }

INSTANCE(16, 16)
INSTANCE(32, 32)
INSTANCE(64, 64)
INSTANCE(128, 128)
INSTANCE(any, g->HD)

typedef struct {
    void (*fwd)(const shape *, scratch *, float *, float *, const float *, int, int, int);
    void (*pack)(const shape *, const float *, const float *, const float *, const float *, int,
                 int, int);
    void (*kv)(const shape *, scratch *, float *, float *, int, int, int);
    void (*q)(const shape *, scratch *, float *, int, int, int);
} kernels;

static kernels pick(int HD) {
    switch (HD) {
    case 16: return (kernels){fwd_16, pack_16, kv_16, q_16};
    case 32: return (kernels){fwd_32, pack_32, kv_32, q_32};
    case 64: return (kernels){fwd_64, pack_64, kv_64, q_64};
    case 128: return (kernels){fwd_128, pack_128, kv_128, q_128};
    default: return (kernels){fwd_any, pack_any, kv_any, q_any};
    }
}

/* ------------------------------------------------------------- entry points */

static shape make_shape(int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    TITAN_ASSERT(NKV > 0 && NH % NKV == 0 && HD > 0 && off >= 0);
    shape g = {0};
    g.B = B, g.Tq = Tq, g.Tk = Tk, g.off = off, g.NH = NH, g.NKV = NKV, g.HD = HD;
    g.nqt = (Tq + TB - 1) / TB, g.nkt = (Tk + TB - 1) / TB;
    g.scale = 1.0f / sqrtf((float)HD);
    size_t kvsize = (size_t)B * NKV * g.nkt * TB * HD;
    g.kp = pack_alloc(2 * kvsize);
    g.vp = g.kp + kvsize;
    return g;
}

void titan_cpu_attention_forward(float *out, float *lse, const float *q, const float *k,
                                 const float *v, int B, int Tq, int Tk, int NH, int NKV, int HD) {
    TITAN_ASSERT(Tq <= Tk);
    titan_cpu_attention_forward_at(out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

void titan_cpu_attention_forward_at(float *out, float *lse, const float *q, const float *k, const float *v, int B,
                                    int Tq, int Tk, int off, int NH, int NKV, int HD) {
    if (B <= 0 || Tq <= 0 || NH <= 0) return;
    shape g = make_shape(B, Tq, Tk, off, NH, NKV, HD);
    kernels kn = pick(HD);
    int nqt = g.nqt, nkt = g.nkt;
    long items = (long)nqt * B * NH, kv_items = (long)nkt * B * NKV;
#pragma omp parallel if (items > 1 || kv_items > 1)
    {
        scratch w;
        void *mem = scratch_alloc(HD, &w);
#pragma omp for schedule(static)
        for (long it = 0; it < kv_items; it++)
            pack_kv(&g, k, v, (int)(it / nkt / NKV), (int)(it / nkt % NKV), (int)(it % nkt));
        /* one head after another, so its K and V stay in this core's L2;
         * heaviest (last) query tiles first within a head */
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < items; it++) {
            int bh = (int)(it / nqt), qi = nqt - 1 - (int)(it % nqt);
            kn.fwd(&g, &w, out, lse, q, bh / NH, bh % NH, qi);
        }
        free(mem);
    }
    free(g.kp);
}

void titan_cpu_attention_backward(int acc, float *dq, float *dk, float *dv, const float *dout,
                                  const float *out, const float *lse, const float *q,
                                  const float *k, const float *v, int B, int Tq, int Tk, int NH,
                                  int NKV, int HD) {
    TITAN_ASSERT(Tq <= Tk);
    titan_cpu_attention_backward_at(acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

void titan_cpu_attention_backward_at(int acc, float *dq, float *dk, float *dv, const float *dout, const float *out,
                                     const float *lse, const float *q, const float *k, const float *v, int B, int Tq,
                                     int Tk, int off, int NH, int NKV, int HD) {
    if (B <= 0 || NH <= 0 || Tk <= 0) return;
    if (Tq <= 0) { /* no queries: the keys get no gradient */
        if (!(acc & TITAN_ACC_DX)) {
            memset(dk, 0, (size_t)B * Tk * NKV * HD * sizeof(float));
            memset(dv, 0, (size_t)B * Tk * NKV * HD * sizeof(float));
        }
        return;
    }
    shape g = make_shape(B, Tq, Tk, off, NH, NKV, HD);
    g.acc = acc & TITAN_ACC_DX;
    kernels kn = pick(HD);
    int nqt = g.nqt, nkt = g.nkt;
    long q_items = (long)nqt * B * NH, kv_items = (long)nkt * B * NKV;
    size_t qsize = (size_t)q_items * TB * HD;
    float *qpack = pack_alloc(4 * qsize + 2 * (size_t)q_items * TB);
    g.qp = qpack, g.dop = qpack + qsize, g.qt = qpack + 2 * qsize, g.dot = qpack + 3 * qsize;
    g.lse = qpack + 4 * qsize, g.delta = g.lse + (size_t)q_items * TB;
#pragma omp parallel if (q_items > 1 || kv_items > 1)
    {
        scratch w;
        void *mem = scratch_alloc(HD, &w);
#pragma omp for schedule(static) nowait
        for (long it = 0; it < kv_items; it++)
            pack_kv(&g, k, v, (int)(it / nkt / NKV), (int)(it / nkt % NKV), (int)(it % nkt));
#pragma omp for schedule(static)
        for (long it = 0; it < q_items; it++) {
            int bh = (int)(it / nqt), qi = (int)(it % nqt);
            kn.pack(&g, dout, out, lse, q, bh / NH, bh % NH, qi);
        }
        /* head by head (cache reuse), heaviest (first) key tiles first */
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < kv_items; it++) {
            int bk = (int)(it / nkt), kj = (int)(it % nkt);
            kn.kv(&g, &w, dk, dv, bk / NKV, bk % NKV, kj);
        }
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < q_items; it++) {
            int bh = (int)(it / nqt), qi = nqt - 1 - (int)(it % nqt);
            kn.q(&g, &w, dq, bh / NH, bh % NH, qi);
        }
        free(mem);
    }
    free(qpack);
    free(g.kp);
}
