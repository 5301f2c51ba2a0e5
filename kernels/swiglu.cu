/* swiglu.cu - the SwiGLU gate of Llama's feed-forward: silu(h1) * h3,
 * silu(x) = x * sigmoid(x) = x / (1 + e^-x). One thread per element, of
 * storage type S, computed in fp32. */
#include "cuda_ops.cuh"

template <typename S>
__global__ void swiglu_forward_kernel(S *out, const S *h1, const S *h3, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float a = load_f32(h1 + i);
        store_f32(out + i, (a / (1.0f + expf(-a))) * load_f32(h3 + i));
    }
}

/* sig = 1/(1+e^-h1), silu = h1*sig:  dh3 += dy*silu;
 * dh1 += dy*h3 * sig*(1 + h1*(1-sig)). Either gradient may be NULL. */
template <typename S>
__global__ void swiglu_backward_kernel(S *dh1, S *dh3, const S *dout, const S *h1, const S *h3,
                                       size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float a = load_f32(h1 + i), dy = load_f32(dout + i);
        float sig = 1.0f / (1.0f + expf(-a));
        if (dh3) store_f32(dh3 + i, load_f32(dh3 + i) + dy * (a * sig));
        if (dh1) {
            float g = dy * load_f32(h3 + i) * (sig * (1.0f + a * (1.0f - sig)));
            store_f32(dh1 + i, load_f32(dh1 + i) + g);
        }
    }
}

template <typename S>
static void forward_launch(S *out, const S *h1, const S *h3, size_t n) {
    swiglu_forward_kernel<S><<<titan_cuda_blocks(n, 256), 256>>>(out, h1, h3, n);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(S *dh1, S *dh3, const S *dout, const S *h1, const S *h3, size_t n) {
    swiglu_backward_kernel<S><<<titan_cuda_blocks(n, 256), 256>>>(dh1, dh3, dout, h1, h3, n);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N,
                               int H) {
    if (N <= 0 || H <= 0) return;
    size_t n = (size_t)N * H;
    TITAN_CUDA_DISPATCH(dt, "swiglu_forward",
                        forward_launch<S>((S *)out, (const S *)h1, (const S *)h3, n));
}

void titan_cuda_swiglu_backward(titan_dtype dt, void *dh1, void *dh3, const void *dout,
                                const void *h1, const void *h3, int N, int H) {
    if (N <= 0 || H <= 0 || (!dh1 && !dh3)) return;
    size_t n = (size_t)N * H;
    TITAN_CUDA_DISPATCH(dt, "swiglu_backward",
                        backward_launch<S>((S *)dh1, (S *)dh3, (const S *)dout, (const S *)h1,
                                           (const S *)h3, n));
}
