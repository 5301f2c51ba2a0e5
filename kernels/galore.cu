/* galore.cu - GaLore's elementwise steps (backend.h's galore_adam and
 * galore_update) with the CPU backend's arithmetic (lib/backend/cpu/
 * galore.c): every fp32 operation spelled with a _rn intrinsic so nvcc
 * cannot contract them into FMAs, the same order, the same bits. */
#include "cuda_ops.cuh"

__global__ void galore_adam_kernel(float *m, float *v, float *low, size_t n, float b1, float w1, float b2,
                                   float w2, float eps) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x = low[i];
        float mi = __fadd_rn(__fmul_rn(m[i], b1), __fmul_rn(w1, x));
        float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(__fmul_rn(w2, x), x));
        m[i] = mi;
        v[i] = vi;
        low[i] = __fdiv_rn(mi, __fadd_rn(__fsqrt_rn(vi), eps));
    }
}

__global__ void galore_update_kernel(float *p, const float *upd, size_t n, float scale, float neg_step,
                                     float neg_decay, int decay) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float q = __fadd_rn(p[i], __fmul_rn(neg_step, __fmul_rn(upd[i], scale)));
        p[i] = decay ? __fadd_rn(q, __fmul_rn(neg_decay, q)) : q;
    }
}

void titan_cuda_galore_adam(float *m, float *v, float *low, size_t n, float b1, float w1, float b2, float w2,
                            float eps) {
    if (n == 0) return;
    galore_adam_kernel<<<titan_cuda_blocks(n, 256), 256>>>(m, v, low, n, b1, w1, b2, w2, eps);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_galore_update(float *p, const float *upd, size_t n, float scale, float step, float decay) {
    if (n == 0) return;
    galore_update_kernel<<<titan_cuda_blocks(n, 256), 256>>>(p, upd, n, scale, -step, -decay, decay > 0.0f);
    CUDA_CHECK_LAUNCH();
}
