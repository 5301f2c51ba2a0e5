/* embedding.cu - token embedding lookup and its scatter-add backward. */
#include "cuda_ops.cuh"

/* one thread per output element: out[n,c] = wte[tokens[n],c] (a copy: same bits) */
template <typename S>
__global__ void embedding_forward_kernel(S *out, const uint32_t *tokens, const S *wte, int N,
                                         int C) {
    size_t total = (size_t)N * C, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t n = i / C, c = i % C;
        out[i] = wte[(size_t)tokens[n] * C + c];
    }
}

/* One thread per column walks the rows in token order: a token repeated in
 * the batch is summed by one thread in a fixed order, without atomics, and
 * with the CPU backend's exact additions (same bits; dwte is fp32 whatever
 * dout's type). Neighbouring threads touch neighbouring columns, so each
 * row's access is coalesced. Only C threads run; a sorted-bucket version is
 * the faster follow-up. */
template <typename S>
__global__ void embedding_backward_kernel(float *dwte, const S *dout, const uint32_t *tokens,
                                          int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int n = 0; n < N; n++)
        dwte[(size_t)tokens[n] * C + c] += load_f32(dout + (size_t)n * C + c);
}

template <typename S>
static void forward_launch(S *out, const uint32_t *tokens, const S *wte, int N, int C) {
    size_t total = (size_t)N * C;
    embedding_forward_kernel<S><<<titan_cuda_blocks(total, 256), 256>>>(out, tokens, wte, N, C);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void backward_launch(float *dwte, const S *dout, const uint32_t *tokens, int N, int C) {
    embedding_backward_kernel<S><<<(C + 127) / 128, 128>>>(dwte, dout, tokens, N, C);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens,
                                  const void *wte, int N, int C) {
    if (N <= 0 || C <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "embedding_forward",
                        forward_launch<S>((S *)out, tokens, (const S *)wte, N, C));
}

/* dwte[tokens[n], :] += dout[n, :]  (dwte fp32) */
void titan_cuda_embedding_backward(titan_dtype dt, float *dwte, const void *dout,
                                   const uint32_t *tokens, int N, int C) {
    if (N <= 0 || C <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "embedding_backward",
                        backward_launch<S>(dwte, (const S *)dout, tokens, N, C));
}
