/* rope.cu - rotary position embedding, Meta's interleaved complex view:
 * the pair (x[2i], x[2i+1]) at position t is multiplied by e^{i angle(t,i)},
 * cos/sin[T, HD/2] (fp32) from titan_rope_tables(). One thread per pair;
 * x of storage type S, rotated in fp32. */
#include "cuda_ops.cuh"

/* out may alias inp: each thread reads its pair before writing it */
template <typename S>
__global__ void rope_forward_kernel(S *out, const S *inp, const float *cos, const float *sin,
                                    int T, int NHX, int HD, size_t pairs) {
    int h2 = HD / 2;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        int i = (int)(p % h2);
        size_t bt = p / ((size_t)h2 * NHX);
        int t = (int)(bt % T);
        size_t x = 2 * p; /* HD is even: pair p starts at element 2p */
        float c = cos[(size_t)t * h2 + i], s = sin[(size_t)t * h2 + i];
        float x0 = load_f32(inp + x), x1 = load_f32(inp + x + 1);
        store_f32(out + x, x0 * c - x1 * s);
        store_f32(out + x + 1, x0 * s + x1 * c);
    }
}

/* the transpose (rotation by -angle), added into dinp */
template <typename S>
__global__ void rope_backward_kernel(S *dinp, const S *dout, const float *cos, const float *sin,
                                     int T, int NHX, int HD, size_t pairs) {
    int h2 = HD / 2;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        int i = (int)(p % h2);
        size_t bt = p / ((size_t)h2 * NHX);
        int t = (int)(bt % T);
        size_t x = 2 * p;
        float c = cos[(size_t)t * h2 + i], s = sin[(size_t)t * h2 + i];
        float g0 = load_f32(dout + x), g1 = load_f32(dout + x + 1);
        store_f32(dinp + x, load_f32(dinp + x) + (g0 * c + g1 * s));
        store_f32(dinp + x + 1, load_f32(dinp + x + 1) + (g1 * c - g0 * s));
    }
}

template <typename S>
static void forward_launch(S *out, const S *inp, const float *cos, const float *sin, int T,
                           int NHX, int HD, size_t pairs) {
    rope_forward_kernel<S><<<titan_cuda_blocks(pairs, 256), 256>>>(out, inp, cos, sin, T, NHX,
                                                                   HD, pairs);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(S *dinp, const S *dout, const float *cos, const float *sin, int T,
                            int NHX, int HD, size_t pairs) {
    rope_backward_kernel<S><<<titan_cuda_blocks(pairs, 256), 256>>>(dinp, dout, cos, sin, T, NHX,
                                                                    HD, pairs);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos,
                             const float *sin, int B, int T, int NHX, int HD) {
    if (B <= 0 || T <= 0 || NHX <= 0 || HD < 2) return;
    size_t pairs = (size_t)B * T * NHX * (HD / 2);
    TITAN_CUDA_DISPATCH(dt, "rope_forward",
                        forward_launch<S>((S *)out, (const S *)inp, cos, sin, T, NHX, HD, pairs));
}

void titan_cuda_rope_backward(titan_dtype dt, void *dinp, const void *dout, const float *cos,
                              const float *sin, int B, int T, int NHX, int HD) {
    if (B <= 0 || T <= 0 || NHX <= 0 || HD < 2) return;
    size_t pairs = (size_t)B * T * NHX * (HD / 2);
    TITAN_CUDA_DISPATCH(dt, "rope_backward",
                        backward_launch<S>((S *)dinp, (const S *)dout, cos, sin, T, NHX, HD,
                                           pairs));
}
