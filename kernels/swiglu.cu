/* swiglu.cu - the SwiGLU gate of Llama's feed-forward: silu(h1) * h3,
 * silu(x) = x * sigmoid(x) = x / (1 + e^-x). Elements of storage type S,
 * computed in fp32, grid-stride: the first nvec packs of P elements move 16
 * bytes per access (cuda_ops.cuh), the rest (the tail, or everything when a
 * pointer is not 16-byte aligned: nvec = 0) one element at a time. Both
 * paths call the same per-element functions, so they give the same bits. */
#include "cuda_ops.cuh"

static __device__ __forceinline__ float swiglu_f32(float a, float b) {
    return (a / (1.0f + expf(-a))) * b;
}

template <typename S>
__global__ void swiglu_forward_kernel(S *out, const S *h1, const S *h3, size_t n, size_t nvec) {
    constexpr int P = TITAN_PACK(S);
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = first; v < nvec; v += stride) {
        float a[P], b[P];
        load_f32_vec(h1 + v * P, a);
        load_f32_vec(h3 + v * P, b);
#pragma unroll
        for (int k = 0; k < P; k++) a[k] = swiglu_f32(a[k], b[k]);
        store_f32_vec(out + v * P, a);
    }
    for (size_t i = nvec * P + first; i < n; i += stride)
        store_f32(out + i, swiglu_f32(load_f32(h1 + i), load_f32(h3 + i)));
}

/* sig = 1/(1+e^-h1), silu = h1*sig:  dh3 (+)= dy*silu;
 * dh1 (+)= dy*h3 * sig*(1 + h1*(1-sig)). The "+=" is old + term, one
 * rounding; without add the term alone (the output is not loaded). */
static __device__ __forceinline__ float sigmoid_f32(float a) { return 1.0f / (1.0f + expf(-a)); }
static __device__ __forceinline__ float dh3_f32(float dy, float a, float sig) {
    return dy * (a * sig);
}
static __device__ __forceinline__ float dh1_f32(float dy, float b, float a, float sig) {
    return dy * b * (sig * (1.0f + a * (1.0f - sig)));
}

/* Either gradient may be NULL. */
template <typename S>
__global__ void swiglu_backward_kernel(S *dh1, S *dh3, const S *dout, const S *h1, const S *h3,
                                       size_t n, size_t nvec, bool add) {
    constexpr int P = TITAN_PACK(S);
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = first; v < nvec; v += stride) {
        size_t o = v * P;
        float a[P], dy[P], sig[P], g[P];
        load_f32_vec(h1 + o, a);
        load_f32_vec(dout + o, dy);
#pragma unroll
        for (int k = 0; k < P; k++) sig[k] = sigmoid_f32(a[k]);
        if (dh3) {
            if (add) load_f32_vec(dh3 + o, g);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float t = dh3_f32(dy[k], a[k], sig[k]);
                g[k] = add ? g[k] + t : t;
            }
            store_f32_vec(dh3 + o, g);
        }
        if (dh1) {
            float b[P];
            load_f32_vec(h3 + o, b);
            if (add) load_f32_vec(dh1 + o, g);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float t = dh1_f32(dy[k], b[k], a[k], sig[k]);
                g[k] = add ? g[k] + t : t;
            }
            store_f32_vec(dh1 + o, g);
        }
    }
    for (size_t i = nvec * P + first; i < n; i += stride) {
        float a = load_f32(h1 + i), dy = load_f32(dout + i);
        float sig = sigmoid_f32(a);
        if (dh3) store_grad(add, dh3 + i, dh3_f32(dy, a, sig));
        if (dh1) store_grad(add, dh1 + i, dh1_f32(dy, load_f32(h3 + i), a, sig));
    }
}

template <typename S>
static void forward_launch(S *out, const S *h1, const S *h3, size_t n) {
    size_t nvec = titan_cuda_aligned16(out, h1, h3) ? n / TITAN_PACK(S) : 0;
    swiglu_forward_kernel<S><<<titan_cuda_blocks(nvec ? nvec : n, 256), 256>>>(out, h1, h3, n,
                                                                              nvec);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(bool acc, S *dh1, S *dh3, const S *dout, const S *h1, const S *h3,
                            size_t n) {
    size_t nvec = titan_cuda_aligned16(dh1, dh3, dout, h1, h3) ? n / TITAN_PACK(S) : 0;
    unsigned blocks = titan_cuda_blocks(nvec ? nvec : n, 256);
    swiglu_backward_kernel<S><<<blocks, 256>>>(dh1, dh3, dout, h1, h3, n, nvec, acc);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N,
                               int H) {
    if (N <= 0 || H <= 0) return;
    size_t n = (size_t)N * H;
    TITAN_CUDA_DISPATCH(dt, "swiglu_forward",
                        forward_launch<S>((S *)out, (const S *)h1, (const S *)h3, n));
}

void titan_cuda_swiglu_backward(titan_dtype dt, int acc, void *dh1, void *dh3,
                                const void *dout, const void *h1, const void *h3, int N, int H) {
    if (N <= 0 || H <= 0 || (!dh1 && !dh3)) return;
    size_t n = (size_t)N * H;
    TITAN_CUDA_DISPATCH(dt, "swiglu_backward",
                        backward_launch<S>((acc & TITAN_ACC_DX) != 0, (S *)dh1, (S *)dh3,
                                           (const S *)dout, (const S *)h1, (const S *)h3, n));
}
