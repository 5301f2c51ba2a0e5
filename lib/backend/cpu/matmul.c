/* matmul.c - linear layers through OpenBLAS sgemm. Weights are [OC, IC]
 * (PyTorch's layout), so every product is an sgemm with a transpose flag and
 * no copies.
 *
 * Determinism: OpenBLAS's threaded driver cuts the K reduction into blocks
 * differently from its single-threaded driver, so one multi-threaded sgemm
 * gives different bits with 1 and 2 threads (seen for K = 1000, 2000). We
 * therefore tile C ourselves into blocks chosen from the shape alone and run
 * one single-threaded sgemm per block (OpenBLAS's OpenMP build runs on one
 * thread inside an active parallel region): each element of C always comes
 * from the same call, whatever the thread count. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

typedef struct {
    enum CBLAS_TRANSPOSE ta, tb;
    int M, N, K;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float beta;
    float *C;
    int ldc;
    const float *R; /* NULL, or a residual added to the product (ldc apart; may be C), beta 0 */
} gemm_args;

static int half16(int x) { return ((x + 1) / 2 + 15) & ~15; }

/* C[M,N] = op(A)[M,K] op(B)[K,N] + beta C, row-major; with R, C = R +
 * op(A) op(B), each block's residual added right after its product, while
 * in cache. Not beta 1 on a copy of R: OpenBLAS adds its K panels into C
 * one by one, so R + p1 + p2 would round differently from R + (p1 + p2).
 * Blocks are halved,
 * the larger side first, until there are 16 of them, a side would drop
 * below 128, or a block would hold fewer than 2^23 multiply-adds. Measured
 * beside one 2-thread sgemm at the debug model's shapes: within ~10%, mostly
 * noise. A single block still runs inside the parallel region, so OpenBLAS
 * never threads it itself. */
static void gemm(const gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0 && g->R) { /* C = R: nothing to add */
        for (int i = 0; i < g->M; i++)
            memmove(g->C + (size_t)i * g->ldc, g->R + (size_t)i * g->ldc, (size_t)g->N * sizeof(float));
        return;
    }
    if (g->K <= 0) {
        for (int i = 0; i < g->M; i++)
            for (int j = 0; j < g->N; j++) {
                float *c = g->C + (size_t)i * g->ldc + j;
                *c = g->beta == 0.0f ? 0.0f : *c * g->beta;
            }
        return;
    }
    int MB = g->M, NB = g->N;
    for (;;) {
        long nb = (long)((g->M + MB - 1) / MB) * ((g->N + NB - 1) / NB);
        int *side = MB >= NB ? &MB : &NB;
        if (nb >= 16 || *side <= 128) break;
        int h = half16(*side);
        long macs = (long)(side == &MB ? h : MB) * (side == &NB ? h : NB) * g->K;
        if (macs < (1L << 23)) break;
        *side = h;
    }
    int nm = (g->M + MB - 1) / MB, nn = (g->N + NB - 1) / NB;
#pragma omp parallel for schedule(dynamic, 1)
    for (int blk = 0; blk < nm * nn; blk++) {
        int i0 = (blk / nn) * MB, j0 = (blk % nn) * NB;
        int mb = g->M - i0 < MB ? g->M - i0 : MB, nb = g->N - j0 < NB ? g->N - j0 : NB;
        /* row i0 of op(A), column j0 of op(B) */
        const float *a = g->ta == CblasNoTrans ? g->A + (size_t)i0 * g->lda : g->A + i0;
        const float *b = g->tb == CblasNoTrans ? g->B + j0 : g->B + (size_t)j0 * g->ldb;
        float *c = g->C + (size_t)i0 * g->ldc + j0;
        if (!g->R) {
            cblas_sgemm(CblasRowMajor, g->ta, g->tb, mb, nb, g->K, 1.0f, a, g->lda, b, g->ldb,
                        g->beta, c, g->ldc);
            continue;
        }
        /* in place (R is C): the product goes to scratch first */
        float *p = g->R == g->C ? malloc((size_t)mb * nb * sizeof(float)) : c;
        int ldp = g->R == g->C ? nb : g->ldc;
        if (!p) titan_panic(__FILE__, __LINE__, "cpu backend: matmul_add_forward: no memory for a block");
        cblas_sgemm(CblasRowMajor, g->ta, g->tb, mb, nb, g->K, 1.0f, a, g->lda, b, g->ldb, 0.0f, p, ldp);
        const float *r = g->R + (size_t)i0 * g->ldc + j0;
        for (int i = 0; i < mb; i++)
            for (int j = 0; j < nb; j++)
                c[(size_t)i * g->ldc + j] = r[(size_t)i * g->ldc + j] + p[(size_t)i * ldp + j];
        if (p != c) free(p);
    }
}

/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T */
void titan_cpu_matmul_forward(float *out, const float *inp, const float *w, int N, int IC, int OC) {
    gemm(&(gemm_args){CblasNoTrans, CblasTrans, N, OC, IC, inp, IC, w, IC, 0.0f, out, OC, NULL});
}

/* out[N,OC] = resid[N,OC] + inp[N,IC] @ w[OC,IC]^T: the product's fp32
 * bits plus the residual, one rounding, as add() after matmul_forward would
 * (the same bits). out may alias resid. */
void titan_cpu_matmul_add_forward(float *out, const float *inp, const float *w, const float *resid,
                                  int N, int IC, int OC) {
    gemm(&(gemm_args){CblasNoTrans, CblasTrans, N, OC, IC, inp, IC, w, IC, 0.0f, out, OC, resid});
}

/* dinp[N,IC] (+)= dout[N,OC] @ w[OC,IC];  dw[OC,IC] (+)= dout^T @ inp[N,IC]:
 * beta 1 adds, beta 0 overwrites (BLAS never reads C then, NaN included). */
void titan_cpu_matmul_backward(int acc, float *dinp, float *dw, const float *dout,
                               const float *inp, const float *w, int N, int IC, int OC) {
    float beta_x = acc & TITAN_ACC_DX ? 1.0f : 0.0f, beta_w = acc & TITAN_ACC_DW ? 1.0f : 0.0f;
    if (dinp)
        gemm(&(gemm_args){CblasNoTrans, CblasNoTrans, N, IC, OC, dout, OC, w, IC, beta_x, dinp, IC, NULL});
    if (dw)
        gemm(&(gemm_args){CblasTrans, CblasNoTrans, OC, IC, N, dout, OC, inp, IC, beta_w, dw, IC, NULL});
}
