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
} gemm_args;

static int half16(int x) { return ((x + 1) / 2 + 15) & ~15; }

/* C[M,N] = op(A)[M,K] op(B)[K,N] + beta C, row-major. Blocks are halved,
 * the larger side first, until there are 16 of them, a side would drop
 * below 128, or a block would hold fewer than 2^23 multiply-adds. Measured
 * beside one 2-thread sgemm at the debug model's shapes: within ~10%, mostly
 * noise. A single block still runs inside the parallel region, so OpenBLAS
 * never threads it itself. */
static void gemm(const gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return;
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
        cblas_sgemm(CblasRowMajor, g->ta, g->tb, mb, nb, g->K, 1.0f, a, g->lda, b, g->ldb,
                    g->beta, g->C + (size_t)i0 * g->ldc + j0, g->ldc);
    }
}

/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T */
void titan_cpu_matmul_forward(float *out, const float *inp, const float *w, int N, int IC, int OC) {
    gemm(&(gemm_args){CblasNoTrans, CblasTrans, N, OC, IC, inp, IC, w, IC, 0.0f, out, OC});
}

/* dinp[N,IC] (+)= dout[N,OC] @ w[OC,IC];  dw[OC,IC] (+)= dout^T @ inp[N,IC]:
 * beta 1 adds, beta 0 overwrites (BLAS never reads C then, NaN included). */
void titan_cpu_matmul_backward(int acc, float *dinp, float *dw, const float *dout,
                               const float *inp, const float *w, int N, int IC, int OC) {
    float beta_x = acc & TITAN_ACC_DX ? 1.0f : 0.0f, beta_w = acc & TITAN_ACC_DW ? 1.0f : 0.0f;
    if (dinp)
        gemm(&(gemm_args){CblasNoTrans, CblasNoTrans, N, IC, OC, dout, OC, w, IC, beta_x, dinp, IC});
    if (dw)
        gemm(&(gemm_args){CblasTrans, CblasNoTrans, OC, IC, N, dout, OC, inp, IC, beta_w, dw, IC});
}
