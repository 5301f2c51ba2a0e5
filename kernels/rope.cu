/* rope.cu - rotary position embedding, Meta's interleaved complex view:
 * the pair (x[2i], x[2i+1]) at position t is multiplied by e^{i angle(t,i)},
 * cos/sin[T, HD/2] from titan_rope_tables(). One thread per pair. */
#include "cuda_ops.cuh"

/* out may alias inp: each thread reads its pair before writing it */
__global__ void rope_forward_kernel(float *out, const float *inp, const float *cos,
                                    const float *sin, int T, int NHX, int HD, size_t pairs) {
    int h2 = HD / 2;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        int i = (int)(p % h2);
        size_t bt = p / ((size_t)h2 * NHX);
        int t = (int)(bt % T);
        size_t x = 2 * p; /* HD is even: pair p starts at element 2p */
        float c = cos[(size_t)t * h2 + i], s = sin[(size_t)t * h2 + i];
        float x0 = inp[x], x1 = inp[x + 1];
        out[x] = x0 * c - x1 * s;
        out[x + 1] = x0 * s + x1 * c;
    }
}

/* the transpose (rotation by -angle), added into dinp */
__global__ void rope_backward_kernel(float *dinp, const float *dout, const float *cos,
                                     const float *sin, int T, int NHX, int HD, size_t pairs) {
    int h2 = HD / 2;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += stride) {
        int i = (int)(p % h2);
        size_t bt = p / ((size_t)h2 * NHX);
        int t = (int)(bt % T);
        size_t x = 2 * p;
        float c = cos[(size_t)t * h2 + i], s = sin[(size_t)t * h2 + i];
        float g0 = dout[x], g1 = dout[x + 1];
        dinp[x] += g0 * c + g1 * s;
        dinp[x + 1] += g1 * c - g0 * s;
    }
}

void titan_cuda_rope_forward(float *out, const float *inp, const float *cos, const float *sin,
                             int B, int T, int NHX, int HD) {
    size_t pairs = (size_t)B * T * NHX * (HD / 2);
    if (pairs == 0) return;
    rope_forward_kernel<<<titan_cuda_blocks(pairs, 256), 256>>>(out, inp, cos, sin, T, NHX, HD,
                                                                pairs);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_rope_backward(float *dinp, const float *dout, const float *cos, const float *sin,
                              int B, int T, int NHX, int HD) {
    size_t pairs = (size_t)B * T * NHX * (HD / 2);
    if (pairs == 0) return;
    rope_backward_kernel<<<titan_cuda_blocks(pairs, 256), 256>>>(dinp, dout, cos, sin, T, NHX,
                                                                 HD, pairs);
    CUDA_CHECK_LAUNCH();
}
