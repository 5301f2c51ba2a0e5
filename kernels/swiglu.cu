/* swiglu.cu - the SwiGLU gate of Llama's feed-forward: silu(h1) * h3,
 * silu(x) = x * sigmoid(x) = x / (1 + e^-x). One thread per element. */
#include "cuda_ops.cuh"

__global__ void swiglu_forward_kernel(float *out, const float *h1, const float *h3, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float a = h1[i];
        out[i] = (a / (1.0f + expf(-a))) * h3[i];
    }
}

/* sig = 1/(1+e^-h1), silu = h1*sig:  dh3 += dy*silu;
 * dh1 += dy*h3 * sig*(1 + h1*(1-sig)). Either gradient may be NULL. */
__global__ void swiglu_backward_kernel(float *dh1, float *dh3, const float *dout, const float *h1,
                                       const float *h3, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float a = h1[i], dy = dout[i];
        float sig = 1.0f / (1.0f + expf(-a));
        if (dh3) dh3[i] += dy * (a * sig);
        if (dh1) dh1[i] += dy * h3[i] * (sig * (1.0f + a * (1.0f - sig)));
    }
}

void titan_cuda_swiglu_forward(float *out, const float *h1, const float *h3, int N, int H) {
    size_t n = (size_t)N * H;
    if (n == 0) return;
    swiglu_forward_kernel<<<titan_cuda_blocks(n, 256), 256>>>(out, h1, h3, n);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_swiglu_backward(float *dh1, float *dh3, const float *dout, const float *h1,
                                const float *h3, int N, int H) {
    size_t n = (size_t)N * H;
    if (n == 0 || (!dh1 && !dh3)) return;
    swiglu_backward_kernel<<<titan_cuda_blocks(n, 256), 256>>>(dh1, dh3, dout, h1, h3, n);
    CUDA_CHECK_LAUNCH();
}
