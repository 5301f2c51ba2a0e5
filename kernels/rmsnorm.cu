/* rmsnorm.cu - RMSNorm as Meta's Llama: y = (x * rsqrt(mean(x^2) + eps)) * w.
 * Statistics as the CPU backend: the mean of squares is summed in double and
 * rounded once to fp32; r = 1/sqrtf(ms + eps) (IEEE, not rsqrtf). */
#include "cuda_ops.cuh"

#define RMS_THREADS 256

/* one block per row */
__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp,
                                       const float *weight, int C, float eps) {
    __shared__ double tmp[32];
    const float *x = inp + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    double acc = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) acc += (double)x[c] * (double)x[c];
    double ss = block_sum_double(acc, tmp);
    float ms = (float)(ss / C);
    float r = 1.0f / sqrtf(ms + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) y[c] = (x[c] * r) * weight[c];
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* one block per row: dx += r*(dy*w) - x * r^3/C * sum_c(dy*w*x) */
__global__ void rmsnorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                             const float *weight, const float *rstd, int C) {
    __shared__ double tmp[32];
    size_t off = (size_t)blockIdx.x * C;
    const float *x = inp + off, *dy = dout + off;
    float *dx = dinp + off;
    double acc = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        acc += (double)(dy[c] * weight[c]) * (double)x[c];
    double dot = block_sum_double(acc, tmp);
    float r = rstd[blockIdx.x];
    float k = (float)((double)r * r * r * dot / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) dx[c] += r * (dy[c] * weight[c]) - x[c] * k;
}

/* One thread per column sums its rows in order, in double: dw += sum_n dy*(x*r).
 * Deterministic without atomics; only C threads, a two-pass split over
 * row blocks is the faster follow-up. */
__global__ void rmsnorm_backward_dweight_kernel(float *dweight, const float *dout,
                                                const float *inp, const float *rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double acc = 0.0;
    for (int n = 0; n < N; n++) {
        size_t i = (size_t)n * C + c;
        acc += (double)dout[i] * (double)(inp[i] * rstd[n]);
    }
    dweight[c] += (float)acc;
}

void titan_cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                                int N, int C, float eps) {
    if (N <= 0 || C <= 0) return;
    rmsnorm_forward_kernel<<<N, RMS_THREADS>>>(out, rstd, inp, weight, C, eps);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                 const float *weight, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    if (dinp) {
        rmsnorm_backward_dinp_kernel<<<N, RMS_THREADS>>>(dinp, dout, inp, weight, rstd, C);
        CUDA_CHECK_LAUNCH();
    }
    if (dweight) {
        rmsnorm_backward_dweight_kernel<<<(C + 127) / 128, 128>>>(dweight, dout, inp, rstd, N, C);
        CUDA_CHECK_LAUNCH();
    }
}
