/* embedding.cu - token embedding lookup and its scatter-add backward.
 *
 * Tokens >= V are another rank's vocabulary shard (tensor parallelism): the
 * lookup gives them a row of zeros and the backward skips them (they sort
 * after every token of this shard).
 *
 * Backward without atomics, in the CPU backend's exact additions: for each
 * token, dwte[token] += dout[n] for its rows n in increasing order, each add
 * rounded to fp32 (dwte is fp32 whatever dout's type). The rows are grouped
 * by token with a stable radix sort of (token, n) pairs (CUB, part of the
 * CUDA Toolkit), so a token repeated in the batch is one run of rows in n
 * order; the block that holds a run's first row walks it, a thread per
 * column. Work is spread over the batch's distinct tokens and the columns,
 * not over C threads only.
 *
 * Overwriting (acc without TITAN_ACC_DW) writes all of dwte[V, C] once, with
 * no fill before and no read of it: a block per row v finds token v's run in
 * the sorted tokens by binary search and stores its sum from 0 in the same
 * order, or 0 when v is not in the batch. */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_ops.cuh"

#define EMB_THREADS 256 /* columns per block of the backward */

/* one thread per output element: out[n,c] = wte[tokens[n],c] (a copy: same
 * bits), +0 for a token >= V */
template <typename S>
__global__ void embedding_forward_kernel(S *out, const uint32_t *tokens, const S *wte, int N,
                                         int C, int V) {
    size_t total = (size_t)N * C, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t n = i / C, c = i % C;
        const uint32_t t = tokens[n];
        if (t < (uint32_t)V) out[i] = wte[(size_t)t * C + c];
        else store_f32(out + i, 0.0f);
    }
}

/* rows of 16-byte chunks: the same copy, 16 bytes per thread, when every row
 * is a whole number of aligned chunks */
__global__ void embedding_forward_vec_kernel(uint4 *out, const uint32_t *tokens, const uint4 *wte,
                                             int N, int chunks, int V) {
    size_t total = (size_t)N * chunks, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t n = i / chunks, c = i % chunks;
        const uint32_t t = tokens[n];
        out[i] = t < (uint32_t)V ? wte[(size_t)t * chunks + c] : make_uint4(0, 0, 0, 0);
    }
}

__global__ void embedding_iota_kernel(uint32_t *rows, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N) rows[n] = (uint32_t)n;
}

/* Block (i, y): if sorted position i starts a run of one token < V, its
 * threads add the run's rows into columns y*EMB_THREADS.. of that token's
 * row, in the sorted (= increasing n) order. Other blocks return at once. */
template <typename S>
__global__ void embedding_backward_runs_kernel(float *dwte, const S *dout, const uint32_t *tok,
                                               const uint32_t *rows, int N, int C, int V) {
    const int i = blockIdx.x;
    const uint32_t token = tok[i];
    if (token >= (uint32_t)V || (i > 0 && tok[i - 1] == token)) return;
    const int c = blockIdx.y * EMB_THREADS + threadIdx.x;
    if (c >= C) return;
    float *dst = dwte + (size_t)token * C + c;
    float acc = *dst;
    for (int j = i; j < N && tok[j] == token; j++)
        acc += load_f32(dout + (size_t)rows[j] * C + c);
    *dst = acc;
}

/* Block v (overwrite): row v of dwte = the sum of token v's run of rows, in
 * the sorted order, or 0 without one; every element of dwte written once.
 * Tokens >= V have no block: they add nothing. */
template <typename S>
__global__ void embedding_backward_fill_kernel(float *dwte, const S *dout, const uint32_t *tok,
                                               const uint32_t *rows, int N, int C) {
    const uint32_t token = blockIdx.x;
    int lo = 0, hi = N; /* the first sorted position whose token is >= this one */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (tok[mid] < token) lo = mid + 1;
        else hi = mid;
    }
    float *dst = dwte + (size_t)token * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = lo; j < N && tok[j] == token; j++)
            acc += load_f32(dout + (size_t)rows[j] * C + c);
        dst[c] = acc;
    }
}

template <typename S>
static void forward_launch(S *out, const uint32_t *tokens, const S *wte, int N, int C, int V) {
    size_t row_bytes = (size_t)C * sizeof(S);
    if (row_bytes % 16 == 0 && ((uintptr_t)out | (uintptr_t)wte) % 16 == 0) {
        int chunks = (int)(row_bytes / 16);
        size_t total = (size_t)N * chunks;
        embedding_forward_vec_kernel<<<titan_cuda_blocks(total, 256), 256>>>(
            (uint4 *)out, tokens, (const uint4 *)wte, N, chunks, V);
    } else {
        size_t total = (size_t)N * C;
        embedding_forward_kernel<S><<<titan_cuda_blocks(total, 256), 256>>>(out, tokens, wte, N,
                                                                           C, V);
    }
    CUDA_CHECK_LAUNCH();
}

/* Sort scratch, stream-ordered on the default stream like every op: keys and
 * values out, values in, then CUB's temporary storage. */
template <typename S>
static void backward_launch(bool acc, float *dwte, const S *dout, const uint32_t *tokens, int N,
                            int C, int V) {
    size_t cub_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const uint32_t *)nullptr,
                                               (uint32_t *)nullptr, (const uint32_t *)nullptr,
                                               (uint32_t *)nullptr, N, 0, 32, (cudaStream_t)0));
    size_t list = ((size_t)N * sizeof(uint32_t) + 255) / 256 * 256;
    unsigned char *scratch = (unsigned char *)titan_cuda_scratch(
        3 * list + cub_bytes, "embedding_backward (token sort)");
    uint32_t *tok_sorted = (uint32_t *)scratch, *rows = (uint32_t *)(scratch + list),
             *rows_sorted = (uint32_t *)(scratch + 2 * list);
    void *cub_tmp = scratch + 3 * list;

    embedding_iota_kernel<<<(N + 255) / 256, 256>>>(rows, N);
    CUDA_CHECK_LAUNCH();
    /* stable: equal tokens keep their rows in increasing order */
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, tokens, tok_sorted, rows,
                                               rows_sorted, N, 0, 32, (cudaStream_t)0));
    if (acc) {
        dim3 grid((unsigned)N, (unsigned)((C + EMB_THREADS - 1) / EMB_THREADS));
        embedding_backward_runs_kernel<S><<<grid, EMB_THREADS>>>(dwte, dout, tok_sorted,
                                                                 rows_sorted, N, C, V);
    } else {
        embedding_backward_fill_kernel<S><<<(unsigned)V, EMB_THREADS>>>(dwte, dout, tok_sorted,
                                                                        rows_sorted, N, C);
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFreeAsync(scratch, 0));
}

void titan_cuda_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens,
                                  const void *wte, int N, int C, int V) {
    if (N <= 0 || C <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "embedding_forward",
                        forward_launch<S>((S *)out, tokens, (const S *)wte, N, C, V));
}

/* dwte[tokens[n], :] += dout[n, :]  (dwte[V, C] fp32), tokens >= V
 * skipped; without TITAN_ACC_DW all of dwte is written, rows of absent
 * tokens 0 */
void titan_cuda_embedding_backward(titan_dtype dt, int acc, float *dwte, const void *dout,
                                   const uint32_t *tokens, int N, int C, int V) {
    const bool add = (acc & TITAN_ACC_DW) != 0;
    if (C <= 0 || (add && N <= 0) || (!add && V <= 0)) return;
    if (N <= 0) { /* no rows: an overwritten dwte is the empty sum */
        CUDA_CHECK(cudaMemsetAsync(dwte, 0, (size_t)V * C * sizeof(float), 0));
        return;
    }
    if ((C + EMB_THREADS - 1) / EMB_THREADS > 65535)
        titan_cuda_panic(__FILE__, __LINE__, "embedding_backward", "C is too large");
    TITAN_CUDA_DISPATCH(dt, "embedding_backward",
                        backward_launch<S>(add, dwte, (const S *)dout, tokens, N, C, V));
}
