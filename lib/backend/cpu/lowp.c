/* lowp.c - the CPU backend's typed table entries and convert.
 *
 * dt = TITAN_DTYPE_F32 calls the fp32 kernel as it is. dt = TITAN_DTYPE_BF16
 * stages: the bf16 inputs (and the bf16 "+=" outputs) are widened exactly
 * into fp32 scratch, the same fp32 kernel runs on them, and each bf16 output
 * is rounded once, to nearest even, on the way back. A bf16 op therefore
 * gives round(fp32 op on the widened values) element by element: the
 * reference the CUDA bf16 kernels are checked against, not a fast path.
 * fp32 arguments (dw, dweight, dwte, rstd, lse, losses, rope tables) are
 * passed straight through.
 *
 * Row-local ops (add, swiglu, rope, rmsnorm forward, cross-entropy,
 * logsumexp) stage in pieces of whole rows cut from the shape alone, each
 * thread with its own scratch: their fp32 kernels compute every row on its
 * own, so pieces give the bits of one whole call while the scratch stays
 * small and in cache.
 * Ops that mix rows (matmul, attention, rmsnorm and embedding backward)
 * stage whole tensors for one call of the fp32 kernel, so they keep its
 * thread-independent tiling. Scratch lives for one call. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

/* floats a tensor in one piece of a row-local op: the pieces' scratch stays in L2 */
enum { PIECE = 1 << 16 };
/* elements one step of add stages on the stack */
enum { ADD_STEP = 1024 };

#define F32 TITAN_DTYPE_F32
#define BF16 TITAN_DTYPE_BF16

typedef uint16_t bf16;

static __attribute__((noreturn)) void fail(const char *what) {
    titan_panic(__FILE__, __LINE__, what);
}

/* 1 for F32, 0 for BF16; any other type is the caller's bug. */
static int is_f32(titan_dtype dt, const char *op) {
    if (dt == F32) return 1;
    if (dt == BF16) return 0;
    char what[128];
    snprintf(what, sizeof what, "cpu backend: %s: dtype %d is neither f32 nor bf16", op, (int)dt);
    fail(what);
}

/* ---------------------------------------------------------------- convert */

/* Fixed blocks of TITAN_CPU_BLOCK elements; each element converts on its
 * own, so the split never changes the bits. */
void titan_cpu_convert(void *dst, titan_dtype dst_type, const void *src, titan_dtype src_type,
                       size_t n) {
    size_t ds = titan_dtype_size(dst_type), ss = titan_dtype_size(src_type);
    if (!titan_dtype_is_float(dst_type) || !titan_dtype_is_float(src_type)) {
        if (dst_type != src_type || ds == 0) fail("cpu backend: convert: not a float type pair");
    }
    long nb = (long)((n + TITAN_CPU_BLOCK - 1) / TITAN_CPU_BLOCK);
#pragma omp parallel for schedule(static) if (n > 4 * TITAN_CPU_BLOCK)
    for (long b = 0; b < nb; b++) {
        size_t lo = (size_t)b * TITAN_CPU_BLOCK;
        size_t len = n - lo < TITAN_CPU_BLOCK ? n - lo : TITAN_CPU_BLOCK;
        titan_dtype_convert((char *)dst + lo * ds, dst_type, (const char *)src + lo * ss, src_type,
                            len);
    }
}

/* --------------------------------------------------------------- staging */

/* One allocation carved into k fp32 arrays of len[i] floats, each 64-byte
 * aligned; *arr[i] gets array i. Returns the block to free(). */
static void *stage(int k, const size_t *len, float **const *arr) {
    size_t total = 0;
    for (int i = 0; i < k; i++) total += (len[i] + 15) & ~(size_t)15;
    float *p = aligned_alloc(64, (total ? total : 16) * sizeof(float));
    if (!p) {
        char what[128];
        snprintf(what, sizeof what, "cpu backend: no memory for %zu bytes of bf16 staging",
                 total * sizeof(float));
        fail(what);
    }
    size_t off = 0;
    for (int i = 0; i < k; i++) {
        *arr[i] = p + off;
        off += (len[i] + 15) & ~(size_t)15;
    }
    return p;
}

/* Serial (inside a piece) and parallel (whole tensors) widening/rounding. */
static void widen(float *dst, const void *src, size_t n) {
    titan_dtype_convert(dst, F32, src, BF16, n);
}
static void narrow(void *dst, const float *src, size_t n) {
    titan_dtype_convert(dst, BF16, src, F32, n);
}
static void widen_all(float *dst, const void *src, size_t n) {
    titan_cpu_convert(dst, F32, src, BF16, n);
}
static void narrow_all(void *dst, const float *src, size_t n) {
    titan_cpu_convert(dst, BF16, src, F32, n);
}

/* Rows in one piece of a row-local op with rows of `row` elements. */
static long piece_rows(size_t row) { return row >= PIECE ? 1 : (long)(PIECE / (row ? row : 1)); }

static long min_l(long a, long b) { return a < b ? a : b; }

/* Threads for np pieces: no thread without a piece allocates scratch. */
static int team(long np) { return (int)min_l(np > 0 ? np : 1, omp_get_max_threads()); }

/* ---------------------------------------------------------------- matmul */

void titan_cpu_dt_matmul_forward(titan_dtype dt, void *out, const void *inp, const void *w, int N,
                                 int IC, int OC) {
    if (is_f32(dt, "matmul_forward")) {
        titan_cpu_matmul_forward(out, inp, w, N, IC, OC);
        return;
    }
    size_t no = (size_t)N * OC, ni = (size_t)N * IC, nw = (size_t)OC * IC;
    float *y, *x, *wf;
    void *mem = stage(3, (size_t[]){no, ni, nw}, (float **const[]){&y, &x, &wf});
    widen_all(x, inp, ni);
    widen_all(wf, w, nw);
    titan_cpu_matmul_forward(y, x, wf, N, IC, OC);
    narrow_all(out, y, no);
    free(mem);
}

/* The fp32 product plus the widened residual, rounded once to bf16:
 * round(resid + sum), not round(resid + round(sum)). */
void titan_cpu_dt_matmul_add_forward(titan_dtype dt, void *out, const void *inp, const void *w,
                                     const void *resid, int N, int IC, int OC) {
    if (is_f32(dt, "matmul_add_forward")) {
        titan_cpu_matmul_add_forward(out, inp, w, resid, N, IC, OC);
        return;
    }
    size_t no = (size_t)N * OC, ni = (size_t)N * IC, nw = (size_t)OC * IC;
    float *y, *r, *x, *wf;
    void *mem = stage(4, (size_t[]){no, no, ni, nw}, (float **const[]){&y, &r, &x, &wf});
    widen_all(r, resid, no);
    widen_all(x, inp, ni);
    widen_all(wf, w, nw);
    titan_cpu_matmul_add_forward(y, x, wf, r, N, IC, OC);
    narrow_all(out, y, no);
    free(mem);
}

/* In the bf16 ops below, an output that is overwritten (acc bit clear) is
 * never widened: the fp32 kernel overwrites its copy. */
void titan_cpu_dt_matmul_backward(titan_dtype dt, int acc, void *dinp, float *dw,
                                  const void *dout, const void *inp, const void *w, int N, int IC,
                                  int OC) {
    if (is_f32(dt, "matmul_backward")) {
        titan_cpu_matmul_backward(acc, dinp, dw, dout, inp, w, N, IC, OC);
        return;
    }
    if (!dinp && !dw) return;
    /* only what the requested gradients read */
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    size_t nd = dinp ? ni : 0, nwf = dinp ? nw : 0, nx = dw ? ni : 0;
    float *d, *wf, *x, *g;
    void *mem = stage(4, (size_t[]){nd, nwf, nx, no}, (float **const[]){&d, &wf, &x, &g});
    widen_all(g, dout, no);
    if (dinp) widen_all(wf, w, nw);
    if (dinp && (acc & TITAN_ACC_DX)) widen_all(d, dinp, ni);
    if (dw) widen_all(x, inp, ni);
    titan_cpu_matmul_backward(acc, dinp ? d : NULL, dw, g, x, wf, N, IC, OC);
    if (dinp) narrow_all(dinp, d, ni);
    free(mem);
}

/* -------------------------------------------------------------------- add */

/* out may alias a or b: each step reads both inputs before it writes. */
void titan_cpu_dt_add(titan_dtype dt, void *out, const void *a, const void *b, size_t n) {
    if (is_f32(dt, "add")) {
        titan_cpu_add(out, a, b, n);
        return;
    }
    const bf16 *ha = a, *hb = b;
    bf16 *ho = out;
    long nb = (long)((n + TITAN_CPU_BLOCK - 1) / TITAN_CPU_BLOCK);
#pragma omp parallel for schedule(static) if (n > 4 * TITAN_CPU_BLOCK)
    for (long blk = 0; blk < nb; blk++) {
        size_t lo = (size_t)blk * TITAN_CPU_BLOCK;
        size_t hi = n - lo < TITAN_CPU_BLOCK ? n : lo + TITAN_CPU_BLOCK;
        float fa[ADD_STEP], fb[ADD_STEP];
        for (size_t i0 = lo; i0 < hi; i0 += ADD_STEP) {
            size_t m = hi - i0 < ADD_STEP ? hi - i0 : ADD_STEP;
            widen(fa, ha + i0, m);
            widen(fb, hb + i0, m);
            for (size_t i = 0; i < m; i++) fa[i] = fa[i] + fb[i]; /* titan_cpu_add's one rounding */
            narrow(ho + i0, fa, m);
        }
    }
}

/* -------------------------------------------------------------- embedding */

/* A bf16 row copied is the widened row rounded back (NaN payloads aside);
 * a token >= V gets zeros, as the fp32 kernel's. */
void titan_cpu_dt_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens,
                                    const void *wte, int N, int C, int V) {
    if (is_f32(dt, "embedding_forward")) {
        titan_cpu_embedding_forward(out, tokens, wte, N, C, V);
        return;
    }
    bf16 *o = out;
    const bf16 *e = wte;
#pragma omp parallel for schedule(static) if ((long)N * C > 4 * TITAN_CPU_BLOCK)
    for (int n = 0; n < N; n++) {
        bf16 *dst = o + (size_t)n * C;
        if (tokens[n] < (uint32_t)V)
            memcpy(dst, e + (size_t)tokens[n] * C, (size_t)C * sizeof(bf16));
        else
            memset(dst, 0, (size_t)C * sizeof(bf16));
    }
}

void titan_cpu_dt_embedding_backward(titan_dtype dt, int acc, float *dwte, const void *dout,
                                     const uint32_t *tokens, int N, int C, int V) {
    if (is_f32(dt, "embedding_backward")) {
        titan_cpu_embedding_backward(acc, dwte, dout, tokens, N, C, V);
        return;
    }
    size_t nd = (size_t)N * C;
    float *g;
    void *mem = stage(1, (size_t[]){nd}, (float **const[]){&g});
    widen_all(g, dout, nd);
    titan_cpu_embedding_backward(acc, dwte, g, tokens, N, C, V);
    free(mem);
}

/* ---------------------------------------------------------------- rmsnorm */

void titan_cpu_dt_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp,
                                  const void *weight, int N, int C, float eps) {
    if (is_f32(dt, "rmsnorm_forward")) {
        titan_cpu_rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
        return;
    }
    float *wf;
    void *wmem = stage(1, (size_t[]){(size_t)C}, (float **const[]){&wf});
    widen(wf, weight, (size_t)C);
    long R = min_l(piece_rows((size_t)C), N), np = R > 0 ? (N + R - 1) / R : 0;
#pragma omp parallel if (np > 1) num_threads(team(np))
    {
        size_t cap = (size_t)R * C;
        float *x, *y;
        void *mem = stage(2, (size_t[]){cap, cap}, (float **const[]){&x, &y});
#pragma omp for schedule(static)
        for (long p = 0; p < np; p++) {
            long n0 = p * R, rows = min_l(R, N - n0);
            size_t off = (size_t)n0 * C, cnt = (size_t)rows * C;
            widen(x, (const bf16 *)inp + off, cnt);
            titan_cpu_rmsnorm_forward(y, rstd + n0, x, wf, (int)rows, C, eps);
            narrow((bf16 *)out + off, y, cnt);
        }
        free(mem);
    }
    free(wmem);
}

void titan_cpu_dt_rmsnorm_backward(titan_dtype dt, int acc, void *dinp, float *dweight,
                                   const void *dout, const void *inp, const void *weight,
                                   const float *rstd, int N, int C) {
    if (is_f32(dt, "rmsnorm_backward")) {
        titan_cpu_rmsnorm_backward(acc, dinp, dweight, dout, inp, weight, rstd, N, C);
        return;
    }
    if (!dinp && !dweight) return;
    size_t nx = (size_t)N * C, nd = dinp ? nx : 0;
    float *d, *g, *x, *wf;
    void *mem = stage(4, (size_t[]){nd, nx, nx, (size_t)C}, (float **const[]){&d, &g, &x, &wf});
    if (dinp && (acc & TITAN_ACC_DX)) widen_all(d, dinp, nx);
    widen_all(g, dout, nx);
    widen_all(x, inp, nx);
    widen_all(wf, weight, (size_t)C);
    titan_cpu_rmsnorm_backward(acc, dinp ? d : NULL, dweight, g, x, wf, rstd, N, C);
    if (dinp) narrow_all(dinp, d, nx);
    free(mem);
}

/* ------------------------------------------------------------------- rope */

/* Pieces of rope: `seqs` whole sequences when a piece holds at least one
 * (seqs > 0), else `rows` positions inside one sequence, called as B = 1
 * with the tables moved to the piece's first position. */
typedef struct {
    long seqs, rows, np, tp;
} rope_cut;

static rope_cut rope_pieces(int B, int T, int NHX, int HD) {
    rope_cut c = {0, 0, 0, 0};
    if (B <= 0 || T <= 0) return c;
    long R = piece_rows((size_t)NHX * HD);
    if (R >= T) {
        c.seqs = min_l(R / T, B);
        c.np = (B + c.seqs - 1) / c.seqs;
    } else {
        c.rows = R;
        c.tp = (T + R - 1) / R;
        c.np = (long)B * c.tp;
    }
    return c;
}

/* Piece p: first row (b*T + t), its row count, B and T of the kernel call, position t0. */
static void rope_piece(const rope_cut *c, long p, int B, int T, long *row0, long *rows, int *pb,
                       int *pt, long *t0) {
    if (c->seqs) {
        long b0 = p * c->seqs, nb = min_l(c->seqs, B - b0);
        *row0 = b0 * T, *rows = nb * T, *pb = (int)nb, *pt = T, *t0 = 0;
    } else {
        long b = p / c->tp;
        *t0 = (p % c->tp) * c->rows;
        *rows = min_l(c->rows, T - *t0);
        *row0 = b * T + *t0, *pb = 1, *pt = (int)*rows;
    }
}

/* out may alias inp: a piece is widened whole before it is written. */
void titan_cpu_dt_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos,
                               const float *sin, int B, int T, int NHX, int HD) {
    if (is_f32(dt, "rope_forward")) {
        titan_cpu_rope_forward(out, inp, cos, sin, B, T, NHX, HD);
        return;
    }
    rope_cut c = rope_pieces(B, T, NHX, HD);
    size_t row = (size_t)NHX * HD, h2 = (size_t)(HD / 2);
#pragma omp parallel if (c.np > 1) num_threads(team(c.np))
    {
        float *x;
        void *mem = stage(1, (size_t[]){(size_t)(c.seqs ? c.seqs * T : c.rows) * row},
                          (float **const[]){&x});
#pragma omp for schedule(static)
        for (long p = 0; p < c.np; p++) {
            long row0, rows, t0;
            int pb, pt;
            rope_piece(&c, p, B, T, &row0, &rows, &pb, &pt, &t0);
            size_t off = (size_t)row0 * row, cnt = (size_t)rows * row;
            widen(x, (const bf16 *)inp + off, cnt);
            titan_cpu_rope_forward(x, x, cos + (size_t)t0 * h2, sin + (size_t)t0 * h2, pb, pt,
                                   NHX, HD);
            narrow((bf16 *)out + off, x, cnt);
        }
        free(mem);
    }
}

void titan_cpu_dt_rope_backward(titan_dtype dt, int acc, void *dinp, const void *dout,
                                const float *cos, const float *sin, int B, int T, int NHX,
                                int HD) {
    if (is_f32(dt, "rope_backward")) {
        titan_cpu_rope_backward(acc, dinp, dout, cos, sin, B, T, NHX, HD);
        return;
    }
    rope_cut c = rope_pieces(B, T, NHX, HD);
    size_t row = (size_t)NHX * HD, h2 = (size_t)(HD / 2);
#pragma omp parallel if (c.np > 1) num_threads(team(c.np))
    {
        size_t cap = (size_t)(c.seqs ? c.seqs * T : c.rows) * row;
        float *d, *g;
        void *mem = stage(2, (size_t[]){cap, cap}, (float **const[]){&d, &g});
#pragma omp for schedule(static)
        for (long p = 0; p < c.np; p++) {
            long row0, rows, t0;
            int pb, pt;
            rope_piece(&c, p, B, T, &row0, &rows, &pb, &pt, &t0);
            size_t off = (size_t)row0 * row, cnt = (size_t)rows * row;
            if (acc & TITAN_ACC_DX) widen(d, (const bf16 *)dinp + off, cnt);
            widen(g, (const bf16 *)dout + off, cnt);
            titan_cpu_rope_backward(acc, d, g, cos + (size_t)t0 * h2, sin + (size_t)t0 * h2, pb, pt,
                                    NHX, HD);
            narrow((bf16 *)dinp + off, d, cnt);
        }
        free(mem);
    }
}

/* -------------------------------------------------------------- attention */

void titan_cpu_dt_attention_forward(titan_dtype dt, void *out, float *lse, const void *q,
                                    const void *k, const void *v, int B, int Tq, int Tk, int NH,
                                    int NKV, int HD) {
    TITAN_ASSERT(Tq <= Tk);
    titan_cpu_dt_attention_forward_at(dt, out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

void titan_cpu_dt_attention_forward_at(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                                       const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    if (is_f32(dt, "attention_forward")) {
        titan_cpu_attention_forward_at(out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
        return;
    }
    if (B <= 0 || Tq <= 0 || NH <= 0) return;
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD;
    float *o, *qf, *kf, *vf;
    void *mem = stage(4, (size_t[]){nq, nq, nk, nk}, (float **const[]){&o, &qf, &kf, &vf});
    widen_all(qf, q, nq);
    widen_all(kf, k, nk);
    widen_all(vf, v, nk);
    titan_cpu_attention_forward_at(o, lse, qf, kf, vf, B, Tq, Tk, off, NH, NKV, HD);
    narrow_all(out, o, nq);
    free(mem);
}

void titan_cpu_dt_attention_backward(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                                     const void *dout, const void *out, const float *lse,
                                     const void *q, const void *k, const void *v, int B, int Tq,
                                     int Tk, int NH, int NKV, int HD) {
    TITAN_ASSERT(Tq <= Tk);
    titan_cpu_dt_attention_backward_at(dt, acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, Tk - Tq, NH, NKV, HD);
}

void titan_cpu_dt_attention_backward_at(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                                        const void *out, const float *lse, const void *q, const void *k,
                                        const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD) {
    if (is_f32(dt, "attention_backward")) {
        titan_cpu_attention_backward_at(acc, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, off, NH, NKV, HD);
        return;
    }
    if (B <= 0 || Tk <= 0 || NH <= 0) return;
    size_t nq = (size_t)B * Tq * NH * HD, nk = (size_t)B * Tk * NKV * HD;
    float *dqf, *dkf, *dvf, *g, *o, *qf, *kf, *vf;
    void *mem = stage(8, (size_t[]){nq, nk, nk, nq, nq, nq, nk, nk},
                      (float **const[]){&dqf, &dkf, &dvf, &g, &o, &qf, &kf, &vf});
    if (acc & TITAN_ACC_DX) {
        widen_all(dqf, dq, nq);
        widen_all(dkf, dk, nk);
        widen_all(dvf, dv, nk);
    }
    widen_all(g, dout, nq);
    widen_all(o, out, nq);
    widen_all(qf, q, nq);
    widen_all(kf, k, nk);
    widen_all(vf, v, nk);
    titan_cpu_attention_backward_at(acc, dqf, dkf, dvf, g, o, lse, qf, kf, vf, B, Tq, Tk, off, NH, NKV, HD);
    narrow_all(dq, dqf, nq);
    narrow_all(dk, dkf, nk);
    narrow_all(dv, dvf, nk);
    free(mem);
}

/* ----------------------------------------------------------------- swiglu */

void titan_cpu_dt_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N,
                                 int H) {
    if (is_f32(dt, "swiglu_forward")) {
        titan_cpu_swiglu_forward(out, h1, h3, N, H);
        return;
    }
    long R = min_l(piece_rows((size_t)H), N), np = R > 0 ? (N + R - 1) / R : 0;
#pragma omp parallel if (np > 1) num_threads(team(np))
    {
        size_t cap = (size_t)R * H;
        float *a, *b, *y;
        void *mem = stage(3, (size_t[]){cap, cap, cap}, (float **const[]){&a, &b, &y});
#pragma omp for schedule(static)
        for (long p = 0; p < np; p++) {
            long n0 = p * R, rows = min_l(R, N - n0);
            size_t off = (size_t)n0 * H, cnt = (size_t)rows * H;
            widen(a, (const bf16 *)h1 + off, cnt);
            widen(b, (const bf16 *)h3 + off, cnt);
            titan_cpu_swiglu_forward(y, a, b, (int)rows, H);
            narrow((bf16 *)out + off, y, cnt);
        }
        free(mem);
    }
}

void titan_cpu_dt_swiglu_backward(titan_dtype dt, int acc, void *dh1, void *dh3,
                                  const void *dout, const void *h1, const void *h3, int N, int H) {
    if (is_f32(dt, "swiglu_backward")) {
        titan_cpu_swiglu_backward(acc, dh1, dh3, dout, h1, h3, N, H);
        return;
    }
    if (!dh1 && !dh3) return;
    int add = acc & TITAN_ACC_DX;
    long R = min_l(piece_rows((size_t)H), N), np = R > 0 ? (N + R - 1) / R : 0;
#pragma omp parallel if (np > 1) num_threads(team(np))
    {
        size_t cap = (size_t)R * H;
        float *d1, *d3, *g, *a, *b;
        void *mem = stage(5, (size_t[]){dh1 ? cap : 0, dh3 ? cap : 0, cap, cap, cap},
                          (float **const[]){&d1, &d3, &g, &a, &b});
#pragma omp for schedule(static)
        for (long p = 0; p < np; p++) {
            long n0 = p * R, rows = min_l(R, N - n0);
            size_t off = (size_t)n0 * H, cnt = (size_t)rows * H;
            if (dh1 && add) widen(d1, (const bf16 *)dh1 + off, cnt);
            if (dh3 && add) widen(d3, (const bf16 *)dh3 + off, cnt);
            widen(g, (const bf16 *)dout + off, cnt);
            widen(a, (const bf16 *)h1 + off, cnt);
            widen(b, (const bf16 *)h3 + off, cnt);
            titan_cpu_swiglu_backward(acc, dh1 ? d1 : NULL, dh3 ? d3 : NULL, g, a, b, (int)rows, H);
            if (dh1) narrow((bf16 *)dh1 + off, d1, cnt);
            if (dh3) narrow((bf16 *)dh3 + off, d3, cnt);
        }
        free(mem);
    }
}

/* ---------------------------------------------------------- cross-entropy */

/* The bf16 ops over logits rows: each piece of rows widened, then the fp32
 * op: the rows' log-sum-exps into lse_out when given, else cross-entropy
 * (dlogits may alias logits: a piece is widened whole before it is written). */
static void logits_rows(float *lse_out, float *losses, void *dlogits, const void *logits,
                        const uint32_t *targets, int N, int V, float dscale, const float *lse) {
    long R = min_l(piece_rows((size_t)V), N), np = R > 0 ? (N + R - 1) / R : 0;
#pragma omp parallel if (np > 1) num_threads(team(np))
    {
        float *x;
        void *mem = stage(1, (size_t[]){(size_t)R * V}, (float **const[]){&x});
#pragma omp for schedule(static)
        for (long p = 0; p < np; p++) {
            long n0 = p * R, rows = min_l(R, N - n0);
            size_t off = (size_t)n0 * V, cnt = (size_t)rows * V;
            widen(x, (const bf16 *)logits + off, cnt);
            if (lse_out) {
                titan_cpu_logsumexp(lse_out + n0, x, (int)rows, V);
                continue;
            }
            titan_cpu_cross_entropy(losses ? losses + n0 : NULL, dlogits ? x : NULL, x,
                                    targets + n0, (int)rows, V, dscale, lse ? lse + n0 : NULL);
            if (dlogits) narrow((bf16 *)dlogits + off, x, cnt);
        }
        free(mem);
    }
}

void titan_cpu_dt_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                                const uint32_t *targets, int N, int V, float dscale,
                                const float *lse) {
    if (is_f32(dt, "cross_entropy")) titan_cpu_cross_entropy(losses, dlogits, logits, targets, N, V, dscale, lse);
    else logits_rows(NULL, losses, dlogits, logits, targets, N, V, dscale, lse);
}

void titan_cpu_dt_logsumexp(titan_dtype dt, float *lse, const void *logits, int N, int V) {
    if (is_f32(dt, "logsumexp")) titan_cpu_logsumexp(lse, logits, N, V);
    else logits_rows(lse, NULL, NULL, logits, NULL, N, V, 0.0f, NULL);
}
