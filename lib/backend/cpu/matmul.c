/* matmul.c - linear layers through OpenBLAS sgemm. Weights are [OC, IC]
 * (PyTorch's layout), so every product is one sgemm with a transpose flag
 * and no copies. OpenBLAS splits sgemm over output rows/columns, never over
 * the K reduction, so results do not depend on its thread count. */
#include <cblas.h>

#include "backend/cpu/cpu_ops.h"

/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T */
void titan_cpu_matmul_forward(float *out, const float *inp, const float *w, int N, int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (IC <= 0) {
        for (long i = 0; i < (long)N * OC; i++) out[i] = 0.0f;
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f,
                out, OC);
}

/* dinp[N,IC] += dout[N,OC] @ w[OC,IC];  dw[OC,IC] += dout^T @ inp[N,IC] */
void titan_cpu_matmul_backward(float *dinp, float *dw, const float *dout, const float *inp,
                               const float *w, int N, int IC, int OC) {
    if (N <= 0 || IC <= 0 || OC <= 0) return;
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC, w, IC,
                    1.0f, dinp, IC);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC,
                    1.0f, dw, IC);
}
