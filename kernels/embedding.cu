/* embedding.cu - token embedding lookup and its scatter-add backward. */
#include "cuda_ops.cuh"

/* one thread per output element: out[n,c] = wte[tokens[n],c] */
__global__ void embedding_forward_kernel(float *out, const uint32_t *tokens, const float *wte,
                                         int N, int C) {
    size_t total = (size_t)N * C, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t n = i / C, c = i % C;
        out[i] = wte[(size_t)tokens[n] * C + c];
    }
}

/* One thread per column walks the rows in token order: a token repeated in
 * the batch is summed by one thread in a fixed order, without atomics, and
 * with the CPU backend's exact additions (same bits). Neighbouring threads
 * touch neighbouring columns, so each row's access is coalesced. Only C
 * threads run; a sorted-bucket version is the faster follow-up. */
__global__ void embedding_backward_kernel(float *dwte, const float *dout, const uint32_t *tokens,
                                          int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int n = 0; n < N; n++) dwte[(size_t)tokens[n] * C + c] += dout[(size_t)n * C + c];
}

void titan_cuda_embedding_forward(float *out, const uint32_t *tokens, const float *wte, int N,
                                  int C) {
    size_t total = (size_t)N * C;
    if (total == 0) return;
    embedding_forward_kernel<<<titan_cuda_blocks(total, 256), 256>>>(out, tokens, wte, N, C);
    CUDA_CHECK_LAUNCH();
}

/* dwte[tokens[n], :] += dout[n, :] */
void titan_cuda_embedding_backward(float *dwte, const float *dout, const uint32_t *tokens, int N,
                                   int C) {
    if (N <= 0 || C <= 0) return;
    embedding_backward_kernel<<<(C + 127) / 128, 128>>>(dwte, dout, tokens, N, C);
    CUDA_CHECK_LAUNCH();
}
