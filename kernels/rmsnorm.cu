/* rmsnorm.cu - RMSNorm as Meta's Llama: y = (x * rsqrt(mean(x^2) + eps)) * w.
 * Statistics as the CPU backend: the mean of squares is summed in double and
 * rounded once to fp32; r = 1/sqrtf(ms + eps) (IEEE, not rsqrtf). Activations
 * and the weight are of storage type S; rstd and dweight are fp32. */
#include "cuda_ops.cuh"

#define RMS_THREADS 256

/* one block per row */
template <typename S>
__global__ void rmsnorm_forward_kernel(S *out, float *rstd, const S *inp, const S *weight, int C,
                                       float eps) {
    __shared__ double tmp[32];
    const S *x = inp + (size_t)blockIdx.x * C;
    S *y = out + (size_t)blockIdx.x * C;
    double acc = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double xc = (double)load_f32(x + c);
        acc += xc * xc;
    }
    double ss = block_sum_double(acc, tmp);
    float ms = (float)(ss / C);
    float r = 1.0f / sqrtf(ms + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        store_f32(y + c, (load_f32(x + c) * r) * load_f32(weight + c));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* one block per row: dx += r*(dy*w) - x * r^3/C * sum_c(dy*w*x) */
template <typename S>
__global__ void rmsnorm_backward_dinp_kernel(S *dinp, const S *dout, const S *inp, const S *weight,
                                             const float *rstd, int C) {
    __shared__ double tmp[32];
    size_t off = (size_t)blockIdx.x * C;
    const S *x = inp + off, *dy = dout + off;
    S *dx = dinp + off;
    double acc = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        acc += (double)(load_f32(dy + c) * load_f32(weight + c)) * (double)load_f32(x + c);
    double dot = block_sum_double(acc, tmp);
    float r = rstd[blockIdx.x];
    float k = (float)((double)r * r * r * dot / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = r * (load_f32(dy + c) * load_f32(weight + c)) - load_f32(x + c) * k;
        store_f32(dx + c, load_f32(dx + c) + g);
    }
}

/* One thread per column sums its rows in order, in double: dw += sum_n dy*(x*r).
 * Deterministic without atomics; only C threads, a two-pass split over
 * row blocks is the faster follow-up. */
template <typename S>
__global__ void rmsnorm_backward_dweight_kernel(float *dweight, const S *dout, const S *inp,
                                                const float *rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double acc = 0.0;
    for (int n = 0; n < N; n++) {
        size_t i = (size_t)n * C + c;
        acc += (double)load_f32(dout + i) * (double)(load_f32(inp + i) * rstd[n]);
    }
    dweight[c] += (float)acc;
}

template <typename S>
static void forward_launch(S *out, float *rstd, const S *inp, const S *weight, int N, int C,
                           float eps) {
    rmsnorm_forward_kernel<S><<<N, RMS_THREADS>>>(out, rstd, inp, weight, C, eps);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(S *dinp, float *dweight, const S *dout, const S *inp, const S *weight,
                            const float *rstd, int N, int C) {
    if (dinp) {
        rmsnorm_backward_dinp_kernel<S><<<N, RMS_THREADS>>>(dinp, dout, inp, weight, rstd, C);
        CUDA_CHECK_LAUNCH();
    }
    if (dweight) {
        rmsnorm_backward_dweight_kernel<S><<<(C + 127) / 128, 128>>>(dweight, dout, inp, rstd, N,
                                                                      C);
        CUDA_CHECK_LAUNCH();
    }
}

void titan_cuda_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp,
                                const void *weight, int N, int C, float eps) {
    if (N <= 0 || C <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "rmsnorm_forward",
                        forward_launch<S>((S *)out, rstd, (const S *)inp, (const S *)weight, N,
                                          C, eps));
}

void titan_cuda_rmsnorm_backward(titan_dtype dt, void *dinp, float *dweight, const void *dout,
                                 const void *inp, const void *weight, const float *rstd, int N,
                                 int C) {
    if (N <= 0 || C <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "rmsnorm_backward",
                        backward_launch<S>((S *)dinp, dweight, (const S *)dout, (const S *)inp,
                                           (const S *)weight, rstd, N, C));
}
