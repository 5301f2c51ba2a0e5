/* fp8_matmul.c - float8 linears on the CPU, as torchao's Float8Linear with
 * emulate=True (torchao/float8/float8_ops.py, float8_mm): each operand the
 * recipe casts becomes float8 bytes with its dynamic scales
 * (tensor/fp8.h), is dequantized to fp32 as fp32(decode(q) / scale), and
 * the product runs in fp32 through matmul.c's deterministic tiling, rounded
 * once to the compute type. An operand the recipe leaves in high
 * precision (rowwise_with_gw_hp's grad_w) goes through the plain matmul.
 *
 * The casts run in row blocks fixed by the shape; amax is a max, exact in
 * any order, so the bytes and scales do not depend on the thread count.
 * x's dequantized cast can serve several calls (the recipe's share): held
 * here between them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

enum { ROWS_PER_BLOCK = 64 };

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, ((n ? n : 1) + 63) & ~(size_t)63);
    if (!p) {
        char what[128];
        snprintf(what, sizeof what, "cpu backend: float8 matmul: no memory for %zu bytes", n);
        titan_panic(__FILE__, __LINE__, what);
    }
    return p;
}

/* backend.h's fp8_amax: row blocks fold their partial maxima in block
 * order (max is exact in any order, NaN kept) */
void titan_cpu_fp8_amax(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis) {
    int nb = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    int ns = titan_fp8_nscales(axis, rows, cols);
    /* per block partial amax for one scale or one per column; rows own theirs */
    int part = axis == TITAN_FP8_ROWS ? 0 : ns;
    float *partial = part ? calloc((size_t)nb * part, sizeof(float)) : NULL;
    if (part && !partial) titan_panic(__FILE__, __LINE__, "cpu backend: float8 amax: no memory");
    if (!part) memset(amax, 0, (size_t)ns * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        int r0 = b * ROWS_PER_BLOCK, r1 = r0 + ROWS_PER_BLOCK < rows ? r0 + ROWS_PER_BLOCK : rows;
        titan_fp8_amax(part ? partial + (size_t)b * part : amax, x, dt, r0, r1, cols, axis);
    }
    if (part) {
        for (int i = 0; i < ns; i++) amax[i] = 0.0f;
        for (int b = 0; b < nb; b++) titan_fp8_amax(amax, partial + (size_t)b * part, TITAN_DTYPE_F32, 0, 1,
                                                     part, axis == TITAN_FP8_TENSOR ? TITAN_FP8_TENSOR : TITAN_FP8_COLS);
        free(partial);
    }
}

void titan_cpu_fp8_quantize(uint8_t *q, float *scale, float *deq, const void *x, titan_dtype dt, int rows,
                            int cols, titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax) {
    int nb = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    int ns = titan_fp8_nscales(axis, rows, cols);
    if (amax) memcpy(scale, amax, (size_t)ns * sizeof(float));
    else titan_cpu_fp8_amax(dt, scale, x, rows, cols, axis);
    for (int i = 0; i < ns; i++) scale[i] = titan_fp8_scale(scale[i], f, pow2);
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        int r0 = b * ROWS_PER_BLOCK, r1 = r0 + ROWS_PER_BLOCK < rows ? r0 + ROWS_PER_BLOCK : rows;
        titan_fp8_cast(q, x, dt, scale, r0, r1, cols, axis, f);
        if (deq) titan_fp8_dequantize(deq, q, scale, r0, r1, cols, axis, f);
    }
}

/* backend.h's fp8_quantize: the cast without the dequantized copy */
void titan_cpu_fp8_quantize_op(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                               titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax) {
    titan_cpu_fp8_quantize(q, scale, NULL, x, dt, rows, cols, axis, f, pow2, amax);
}

/* backend.h's fp8_dequantize, in chunks through an fp32 buffer */
void titan_cpu_fp8_dequantize(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                              titan_fp8_format f) {
    enum { CHUNK = 4096 };
    float buf[CHUNK];
    size_t esz = titan_dtype_size(dt);
    for (size_t i = 0; i < n; i += CHUNK) {
        int len = (int)(n - i < CHUNK ? n - i : CHUNK);
        titan_fp8_dequantize(buf, q + i, scale, 0, 1, len, TITAN_FP8_TENSOR, f);
        titan_cpu_convert((char *)out + i * esz, dt, buf, TITAN_DTYPE_F32, (size_t)len);
    }
}

/* One cast of recipe r: deq gets the dequantized operand (fp32 [rows, cols]). */
static void cast_operand(const titan_fp8_recipe *r, int c, float *deq, const void *x, titan_dtype dt, int rows,
                         int cols) {
    size_t n = (size_t)rows * cols;
    uint8_t *q = xalloc(n);
    int ns = titan_fp8_nscales(titan_fp8_recipe_axis(r, c), rows, cols);
    float *scale = xalloc((size_t)ns * sizeof(float));
    titan_cpu_fp8_quantize(q, scale, deq, x, dt, rows, cols, titan_fp8_recipe_axis(r, c),
                           (titan_fp8_format)r->format[c], r->pow2, r->amax[c]);
    free(scale);
    free(q);
}

/* The dequantized casts held for the next calls (the recipe's share,
 * tensor/fp8.h): one per kind, with what it was cast from. The model
 * calls from one thread. */
static struct {
    float *deq;
    const void *x;
    titan_dtype dt;
    int rows, cols, format, rowwise;
} g_held[TITAN_FP8_NCASTS];

/* cast c of x (fp32, dequantized [rows, cols]) for this call: the held one
 * (share USE, LAST) or a new one (held after the call when KEEP) */
static float *shared_operand(const titan_fp8_recipe *r, int c, const void *x, titan_dtype dt, int rows, int cols) {
    int s = r->share[c];
    if (s == TITAN_FP8_SHARE_USE || s == TITAN_FP8_SHARE_LAST) {
        if (!g_held[c].deq || g_held[c].x != x || g_held[c].dt != dt || g_held[c].rows != rows ||
            g_held[c].cols != cols || g_held[c].format != r->format[c] || g_held[c].rowwise != r->rowwise[c])
            titan_panic(__FILE__, __LINE__, "cpu backend: float8 shared cast: no held cast of this operand");
        return g_held[c].deq;
    }
    if (s == TITAN_FP8_SHARE_KEEP && g_held[c].deq)
        titan_panic(__FILE__, __LINE__, "cpu backend: float8 shared cast: a cast of this kind is held already");
    float *deq = xalloc((size_t)rows * cols * sizeof(float));
    cast_operand(r, c, deq, x, dt, rows, cols);
    if (s == TITAN_FP8_SHARE_KEEP) {
        g_held[c].deq = deq, g_held[c].x = x, g_held[c].dt = dt, g_held[c].rows = rows, g_held[c].cols = cols;
        g_held[c].format = r->format[c], g_held[c].rowwise = r->rowwise[c];
    }
    return deq;
}

/* the call is done with cast c: freed unless held for the next calls */
static void release_operand(const titan_fp8_recipe *r, int c, float *deq) {
    int s = r->share[c];
    if (s == TITAN_FP8_SHARE_KEEP || s == TITAN_FP8_SHARE_USE) return;
    if (s == TITAN_FP8_SHARE_LAST) g_held[c].deq = NULL;
    free(deq);
}

static void widen(float *dst, const void *src, titan_dtype dt, size_t n) {
    titan_cpu_convert(dst, TITAN_DTYPE_F32, src, dt, n);
}

int titan_cpu_fp8_matmul_forward(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                                 const void *w, const void *resid, int N, int IC, int OC) {
    size_t nw = (size_t)OC * IC, no = (size_t)N * OC;
    float *x = shared_operand(r, TITAN_FP8_X_OUT, inp, dt, N, IC), *wd = xalloc(nw * sizeof(float));
    cast_operand(r, TITAN_FP8_W_OUT, wd, w, dt, OC, IC);
    float *y = dt == TITAN_DTYPE_F32 ? out : xalloc(no * sizeof(float));
    if (resid) {
        const float *rf = resid;
        float *rw = NULL;
        if (dt != TITAN_DTYPE_F32) widen(rw = xalloc(no * sizeof(float)), resid, dt, no), rf = rw;
        titan_cpu_matmul_add_forward(y, x, wd, rf, N, IC, OC);
        free(rw);
    } else {
        titan_cpu_matmul_forward(y, x, wd, N, IC, OC);
    }
    if (y != out) {
        titan_cpu_convert(out, dt, y, TITAN_DTYPE_F32, no);
        free(y);
    }
    release_operand(r, TITAN_FP8_X_OUT, x);
    free(wd);
    return 1;
}

/* dinp (+)= g w from float8 operands (g: dy cast for grad_in, dequantized) */
static void grad_input(titan_dtype dt, const titan_fp8_recipe *r, int add, void *dinp, const float *g,
                       const void *w, int N, int IC, int OC) {
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC;
    float *wd = xalloc(nw * sizeof(float));
    cast_operand(r, TITAN_FP8_W_GI, wd, w, dt, OC, IC);
    float *d = dt == TITAN_DTYPE_F32 ? dinp : xalloc(ni * sizeof(float));
    if (d != dinp && add) widen(d, dinp, dt, ni);
    titan_cpu_matmul_backward(add ? TITAN_ACC_DX : 0, d, NULL, g, NULL, wd, N, IC, OC);
    if (d != dinp) {
        titan_cpu_convert(dinp, dt, d, TITAN_DTYPE_F32, ni);
        free(d);
    }
    free(wd);
}

/* dw (+)= g^T inp from float8 operands (fp32 dw; g: dy cast for grad_w) */
static void grad_weight(titan_dtype dt, const titan_fp8_recipe *r, int add, float *dw, const float *g,
                        const void *inp, int N, int IC, int OC) {
    float *x = shared_operand(r, TITAN_FP8_X_GW, inp, dt, N, IC);
    titan_cpu_matmul_backward(add ? TITAN_ACC_DW : 0, NULL, dw, g, x, NULL, N, IC, OC);
    release_operand(r, TITAN_FP8_X_GW, x);
}

int titan_cpu_fp8_matmul_backward(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                                  const void *dout, const void *inp, const void *w, int N, int IC, int OC) {
    int gemms = 0;
    size_t no = (size_t)N * OC;
    int hp = r->format[TITAN_FP8_GO_GW] == TITAN_FP8_NONE || r->format[TITAN_FP8_X_GW] == TITAN_FP8_NONE;
    /* Both products cast dy tensorwise to one format from one amax (the
     * tensorwise recipe): the same dequantized dy serves both, one cast
     * (as the cuda backend's titan_cuda_fp8_cast_both). */
    int both = dinp && dw && !hp && titan_fp8_recipe_axis(r, TITAN_FP8_GO_GI) == TITAN_FP8_TENSOR &&
               titan_fp8_recipe_axis(r, TITAN_FP8_GO_GW) == TITAN_FP8_TENSOR &&
               r->format[TITAN_FP8_GO_GI] == r->format[TITAN_FP8_GO_GW] &&
               r->amax[TITAN_FP8_GO_GI] == r->amax[TITAN_FP8_GO_GW];
    float *g = NULL;
    if (dinp) {
        g = xalloc(no * sizeof(float));
        cast_operand(r, TITAN_FP8_GO_GI, g, dout, dt, N, OC);
        grad_input(dt, r, acc & TITAN_ACC_DX, dinp, g, w, N, IC, OC);
        gemms++;
    }
    if (dw && hp) { /* high precision, torchao's DISABLED cast: the plain product */
        titan_cpu_dt_matmul_backward(dt, acc & TITAN_ACC_DW, NULL, dw, dout, inp, w, N, IC, OC);
    } else if (dw) {
        if (!both) {
            if (!g) g = xalloc(no * sizeof(float));
            cast_operand(r, TITAN_FP8_GO_GW, g, dout, dt, N, OC);
        }
        grad_weight(dt, r, acc & TITAN_ACC_DW, dw, g, inp, N, IC, OC);
        gemms++;
    }
    free(g);
    return gemms;
}
