/* fp8_matmul.cu - float8 linears on the GPU, torchao's Float8Linear
 * (backend.h, tensor/fp8.h). Each GEMM the recipe casts gets its two
 * operands cast to float8 (fp8.cu) with the contraction dimension
 * contiguous:
 *   out     [N,OC] = x [N,IC]    . w [OC,IC]^T   (x, w as they are)
 *   grad_in [N,IC] = dy [N,OC]   . (w^T) [IC,OC]^T  (w cast transposed)
 *   grad_w  [OC,IC] = (dy^T) [OC,N] . (x^T) [IC,N]^T (both transposed)
 * and runs on cuBLASLt's float8 tensor cores (matmul.cu's gemm_fp8) with
 * fp32 accumulation, the dequant scales applied in its epilogue and one
 * rounding to the output type; fast accumulation for out only, as
 * torchao's Float8MMConfig (grad_in and grad_w accumulate with periodic
 * promotion to fp32).
 *
 * The emulated product (recipe emulate, torchao's emulate=True, or no
 * cuBLASLt algorithm for the shape or alignment): the same float8 operands
 * dequantized to fp32 as decode(q) / scale, an fp32 GEMM, then one rounding
 * to the output type: the CPU backend's arithmetic. A GEMM the recipe
 * leaves in high precision (rowwise_with_gw_hp's grad_w) is matmul.cu's.
 *
 * x's casts can serve several calls (the recipe's share: the model's wk,
 * wv and wq read one x): held here between the calls, in the pool's
 * scratch like any cast. */
#include "cuda_ops.cuh"

/* out (type dt) = beta out + P Q^T, emulated: fp32 operands and product */
static void emulated_product(titan_dtype dt, void *out, const void *C, float beta, const titan_cuda_fp8_operand *P,
                             const titan_cuda_fp8_operand *Q) {
    int M = P->rows, Nn = Q->rows, K = P->cols;
    size_t no = (size_t)M * Nn;
    float *p = (float *)titan_cuda_scratch((size_t)M * K * sizeof(float), "float8 product (emulated)");
    float *q = (float *)titan_cuda_scratch((size_t)Nn * K * sizeof(float), "float8 product (emulated)");
    titan_cuda_fp8_dequantize(p, P);
    titan_cuda_fp8_dequantize(q, Q);
    float *y = dt == TITAN_DTYPE_F32 ? (float *)out : (float *)titan_cuda_scratch(no * sizeof(float), "float8 product");
    if (beta != 0.0f) {
        if (C && C != out) titan_cuda_convert(y, TITAN_DTYPE_F32, C, dt, no);
        else if (y != out) titan_cuda_convert(y, TITAN_DTYPE_F32, out, dt, no);
        titan_cuda_matmul_add_forward(TITAN_DTYPE_F32, y, p, q, y, M, K, Nn);
    } else {
        titan_cuda_matmul_forward(TITAN_DTYPE_F32, y, p, q, M, K, Nn);
    }
    if (y != out) {
        titan_cuda_convert(out, dt, y, TITAN_DTYPE_F32, no);
        CUDA_CHECK(cudaFreeAsync(y, 0));
    }
    CUDA_CHECK(cudaFreeAsync(p, 0));
    CUDA_CHECK(cudaFreeAsync(q, 0));
}

/* out (dt) = beta C + P Q^T on the tensor cores, else emulated */
static void product(titan_dtype dt, int emulate, void *out, const void *C, float beta, titan_cuda_fp8_operand *P,
                    titan_cuda_fp8_operand *Q, int fast_accum) {
    if (!emulate && P->rowwise != Q->rowwise) { /* rowwise_with_gw_hp's grad_in: dy rowwise, w tensorwise */
        titan_cuda_fp8_rowwise(P);
        titan_cuda_fp8_rowwise(Q);
    }
    if (!emulate && titan_cuda_gemm_fp8(dt, out, C, beta, P, Q, fast_accum)) return;
    emulated_product(dt, out, C, beta, P, Q);
}

static void cast(titan_cuda_fp8_operand *o, const titan_fp8_recipe *r, int c, titan_dtype dt, const void *x,
                 int rows, int cols, int transpose) {
    titan_cuda_fp8_cast(o, dt, x, rows, cols, titan_fp8_recipe_axis(r, c), (titan_fp8_format)r->format[c], r->pow2,
                        transpose, r->amax[c]);
}

/* The casts held for the next calls (the recipe's share, tensor/fp8.h): one
 * per kind, with what it was cast from, to hold a USE to it. The model
 * calls from one thread. */
static struct {
    int on;
    titan_cuda_fp8_operand o;
    const void *x;
    titan_dtype dt;
    int rows, cols, transpose;
} g_held[TITAN_FP8_NCASTS];

/* the cast of the operand each cast kind multiplies with (the same scaling
 * mode: product() never rescales a held cast) */
static int partner_of(int c) {
    return c == TITAN_FP8_X_OUT ? TITAN_FP8_W_OUT : c == TITAN_FP8_X_GW ? TITAN_FP8_GO_GW : c;
}

/* o = cast c of x for this call: the held one (share USE, LAST) or a new
 * one (held after the call when KEEP) */
static void cast_shared(titan_cuda_fp8_operand *o, const titan_fp8_recipe *r, int c, titan_dtype dt, const void *x,
                        int rows, int cols, int transpose) {
    int s = r->share[c];
    if (s == TITAN_FP8_SHARE_USE || s == TITAN_FP8_SHARE_LAST) {
        const titan_cuda_fp8_operand *h = &g_held[c].o;
        if (!g_held[c].on || g_held[c].x != x || g_held[c].dt != dt || g_held[c].rows != rows ||
            g_held[c].cols != cols || g_held[c].transpose != transpose || h->format != (titan_fp8_format)r->format[c] ||
            h->rowwise != (titan_fp8_recipe_axis(r, c) != TITAN_FP8_TENSOR))
            titan_cuda_panic(__FILE__, __LINE__, "float8 shared cast", "no held cast of this operand");
        *o = *h;
        return;
    }
    if (s == TITAN_FP8_SHARE_KEEP && (g_held[c].on || r->rowwise[c] != r->rowwise[partner_of(c)]))
        titan_cuda_panic(__FILE__, __LINE__, "float8 shared cast",
                         g_held[c].on ? "a cast of this kind is held already" : "a cast product() would rescale");
    cast(o, r, c, dt, x, rows, cols, transpose);
    if (s == TITAN_FP8_SHARE_KEEP) {
        g_held[c].on = 1, g_held[c].o = *o, g_held[c].x = x, g_held[c].dt = dt;
        g_held[c].rows = rows, g_held[c].cols = cols, g_held[c].transpose = transpose;
    }
}

/* the call is done with cast c: released unless held for the next calls */
static void release_shared(titan_cuda_fp8_operand *o, const titan_fp8_recipe *r, int c) {
    int s = r->share[c];
    if (s == TITAN_FP8_SHARE_KEEP || s == TITAN_FP8_SHARE_USE) return;
    if (s == TITAN_FP8_SHARE_LAST) g_held[c].on = 0;
    titan_cuda_fp8_release(o);
}

int titan_cuda_fp8_matmul_forward(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                                  const void *w, const void *resid, int N, int IC, int OC) {
    if (N <= 0 || OC <= 0 || IC <= 0) { /* empty: the plain path's zero fill or residual copy */
        if (resid) titan_cuda_matmul_add_forward(dt, out, inp, w, resid, N, IC, OC);
        else titan_cuda_matmul_forward(dt, out, inp, w, N, IC, OC);
        return 1;
    }
    titan_cuda_fp8_operand x, wq;
    cast_shared(&x, r, TITAN_FP8_X_OUT, dt, inp, N, IC, 0);
    cast(&wq, r, TITAN_FP8_W_OUT, dt, w, OC, IC, 0);
    product(dt, r->emulate, out, resid, resid ? 1.0f : 0.0f, &x, &wq, 1);
    release_shared(&x, r, TITAN_FP8_X_OUT);
    titan_cuda_fp8_release(&wq);
    return 1;
}

int titan_cuda_fp8_matmul_backward(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                                   const void *dout, const void *inp, const void *w, int N, int IC, int OC) {
    int gemms = 0;
    int empty = N <= 0 || OC <= 0 || IC <= 0;
    int hp = r->format[TITAN_FP8_GO_GW] == TITAN_FP8_NONE || r->format[TITAN_FP8_X_GW] == TITAN_FP8_NONE;
    /* Both products cast dy tensorwise to one format from one amax (the
     * tensorwise recipe): both layouts from one read of dy, one amax pass
     * (a max: the same bits as one each). Given amaxes share it only when
     * they are the same one (the model's, reduced once under tp). */
    int both = dinp && dw && !empty && !hp && titan_fp8_recipe_axis(r, TITAN_FP8_GO_GI) == TITAN_FP8_TENSOR &&
               titan_fp8_recipe_axis(r, TITAN_FP8_GO_GW) == TITAN_FP8_TENSOR &&
               r->format[TITAN_FP8_GO_GI] == r->format[TITAN_FP8_GO_GW] &&
               r->amax[TITAN_FP8_GO_GI] == r->amax[TITAN_FP8_GO_GW];
    titan_cuda_fp8_operand gs, gt;
    if (both)
        titan_cuda_fp8_cast_both(&gs, &gt, dt, dout, N, OC, (titan_fp8_format)r->format[TITAN_FP8_GO_GI], r->pow2,
                                 r->amax[TITAN_FP8_GO_GI]);
    if (dinp && empty) {
        titan_cuda_matmul_backward(dt, acc & TITAN_ACC_DX, dinp, NULL, dout, inp, w, N, IC, OC);
        gemms++;
    } else if (dinp) {
        titan_cuda_fp8_operand g, wt;
        if (both) g = gs;
        else cast(&g, r, TITAN_FP8_GO_GI, dt, dout, N, OC, 0);
        cast(&wt, r, TITAN_FP8_W_GI, dt, w, OC, IC, 1);
        product(dt, r->emulate, dinp, NULL, acc & TITAN_ACC_DX ? 1.0f : 0.0f, &g, &wt, 0);
        titan_cuda_fp8_release(&g);
        titan_cuda_fp8_release(&wt);
        gemms++;
    }
    if (!dw) return gemms;
    if (hp || empty) { /* high precision (not counted), or nothing to cast */
        titan_cuda_matmul_backward(dt, acc & TITAN_ACC_DW, NULL, dw, dout, inp, w, N, IC, OC);
        return gemms + !hp;
    }
    titan_cuda_fp8_operand xt;
    if (!both) cast(&gt, r, TITAN_FP8_GO_GW, dt, dout, N, OC, 1);
    cast_shared(&xt, r, TITAN_FP8_X_GW, dt, inp, N, IC, 1);
    product(TITAN_DTYPE_F32, r->emulate, dw, NULL, acc & TITAN_ACC_DW ? 1.0f : 0.0f, &gt, &xt, 0);
    titan_cuda_fp8_release(&gt);
    release_shared(&xt, r, TITAN_FP8_X_GW);
    return gemms + 1;
}
