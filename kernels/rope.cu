/* rope.cu - rotary position embedding, Meta's interleaved complex view:
 * the pair (x[2i], x[2i+1]) at position t is multiplied by e^{i angle(t,i)},
 * cos/sin[T, HD/2] (fp32) from the model (titan_rope_tables(),
 * lib/model/rope_freqs.h). x of storage type S, rotated in fp32.
 *
 * Grid-stride over packs of P elements (P/2 pairs, 16 bytes, cuda_ops.cuh)
 * when x is 16-byte aligned and HD is a multiple of P, so that a pack lies
 * in one head row (one t, consecutive i); otherwise (nvec = 0) one pair per
 * step. Both paths call the same per-pair functions: the same bits. */
#include "cuda_ops.cuh"

/* forward: rotation by angle; backward: its transpose (rotation by -angle) */
static __device__ __forceinline__ void rotate(float x0, float x1, float c, float s, float *y0,
                                              float *y1) {
    *y0 = x0 * c - x1 * s;
    *y1 = x0 * s + x1 * c;
}
static __device__ __forceinline__ void unrotate(float g0, float g1, float c, float s, float *d0,
                                                float *d1) {
    *d0 = g0 * c + g1 * s;
    *d1 = g1 * c - g0 * s;
}

/* Pair p of [B, T, NHX, HD/2] pairs: its position's row of the tables, at i.
 * HD is even, so pair p starts at element 2p. */
static __device__ __forceinline__ size_t table_index(size_t p, int T, int NHX, int h2) {
    int i = (int)(p % h2);
    int t = (int)(p / ((size_t)h2 * NHX) % T);
    return (size_t)t * h2 + i;
}

/* out may alias inp: each thread reads its pairs before writing them */
template <typename S>
__global__ void rope_forward_kernel(S *out, const S *inp, const float *cos, const float *sin,
                                    int T, int NHX, int HD, size_t pairs, size_t nvec) {
    constexpr int P = TITAN_PACK(S);
    int h2 = HD / 2;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = first; v < nvec; v += stride) {
        size_t x = v * P, ti = table_index(x / 2, T, NHX, h2);
        float in[P], y[P];
        load_f32_vec(inp + x, in);
#pragma unroll
        for (int k = 0; k < P / 2; k++)
            rotate(in[2 * k], in[2 * k + 1], cos[ti + k], sin[ti + k], &y[2 * k], &y[2 * k + 1]);
        store_f32_vec(out + x, y);
    }
    for (size_t p = nvec * (P / 2) + first; p < pairs; p += stride) {
        size_t x = 2 * p, ti = table_index(p, T, NHX, h2);
        float y0, y1;
        rotate(load_f32(inp + x), load_f32(inp + x + 1), cos[ti], sin[ti], &y0, &y1);
        store_f32(out + x, y0);
        store_f32(out + x + 1, y1);
    }
}

/* the transpose, added into dinp (add) or stored there (dinp not read) */
template <typename S>
__global__ void rope_backward_kernel(S *dinp, const S *dout, const float *cos, const float *sin,
                                     int T, int NHX, int HD, size_t pairs, size_t nvec,
                                     bool add) {
    constexpr int P = TITAN_PACK(S);
    int h2 = HD / 2;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t v = first; v < nvec; v += stride) {
        size_t x = v * P, ti = table_index(x / 2, T, NHX, h2);
        float g[P], d[P];
        load_f32_vec(dout + x, g);
        if (add) load_f32_vec(dinp + x, d);
#pragma unroll
        for (int k = 0; k < P / 2; k++) {
            float d0, d1;
            unrotate(g[2 * k], g[2 * k + 1], cos[ti + k], sin[ti + k], &d0, &d1);
            d[2 * k] = add ? d[2 * k] + d0 : d0;
            d[2 * k + 1] = add ? d[2 * k + 1] + d1 : d1;
        }
        store_f32_vec(dinp + x, d);
    }
    for (size_t p = nvec * (P / 2) + first; p < pairs; p += stride) {
        size_t x = 2 * p, ti = table_index(p, T, NHX, h2);
        float d0, d1;
        unrotate(load_f32(dout + x), load_f32(dout + x + 1), cos[ti], sin[ti], &d0, &d1);
        store_grad(add, dinp + x, d0);
        store_grad(add, dinp + x + 1, d1);
    }
}

/* packs the 16-byte path takes: all of them when the two tensors are
 * aligned and a pack stays in one head row */
template <typename S>
static size_t rope_packs(const S *a, const S *b, int HD, size_t pairs) {
    constexpr int P = TITAN_PACK(S);
    return titan_cuda_aligned16(a, b) && HD % P == 0 ? pairs / (P / 2) : 0;
}

template <typename S>
static void forward_launch(S *out, const S *inp, const float *cos, const float *sin, int T,
                           int NHX, int HD, size_t pairs) {
    size_t nvec = rope_packs(out, inp, HD, pairs);
    rope_forward_kernel<S><<<titan_cuda_blocks(nvec ? nvec : pairs, 256), 256>>>(
        out, inp, cos, sin, T, NHX, HD, pairs, nvec);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(bool acc, S *dinp, const S *dout, const float *cos, const float *sin,
                            int T, int NHX, int HD, size_t pairs) {
    size_t nvec = rope_packs(dinp, dout, HD, pairs);
    unsigned blocks = titan_cuda_blocks(nvec ? nvec : pairs, 256);
    rope_backward_kernel<S><<<blocks, 256>>>(dinp, dout, cos, sin, T, NHX, HD, pairs, nvec, acc);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos,
                             const float *sin, int B, int T, int NHX, int HD) {
    if (B <= 0 || T <= 0 || NHX <= 0 || HD < 2) return;
    size_t pairs = (size_t)B * T * NHX * (HD / 2);
    TITAN_CUDA_DISPATCH(dt, "rope_forward",
                        forward_launch<S>((S *)out, (const S *)inp, cos, sin, T, NHX, HD, pairs));
}

void titan_cuda_rope_backward(titan_dtype dt, int acc, void *dinp, const void *dout,
                              const float *cos, const float *sin, int B, int T, int NHX, int HD) {
    if (B <= 0 || T <= 0 || NHX <= 0 || HD < 2) return;
    size_t pairs = (size_t)B * T * NHX * (HD / 2);
    TITAN_CUDA_DISPATCH(dt, "rope_backward",
                        backward_launch<S>((acc & TITAN_ACC_DX) != 0, (S *)dinp, (const S *)dout,
                                           cos, sin, T, NHX, HD, pairs));
}
