/* attention_merge.cu - backend.h's attention_merge: context parallelism's
 * ring merges one block's attention (out, lse) into the running result
 * (acc, acc_lse, fp32) by their log-sum-exps. A warp per row of [B, NH, T]
 * (lse's order): every lane reads the row's two log-sum-exps and forms the
 * weights, the lanes walk the row's HD values (coalesced), and lane 0
 * writes the new log-sum-exp once the warp has read the old one. The
 * arithmetic is the CPU's (lib/backend/cpu/attention_merge.c) spelled with
 * _rn intrinsics and fmaf, so nvcc contracts nothing else: the same bits
 * but for expf's and logf's last bits. */
#include "cuda_ops.cuh"

#define MERGE_THREADS 256 /* 8 rows (warps) a block */

template <typename S>
__global__ void attention_merge_kernel(float *acc, float *acc_lse, const S *out, const float *lse, int T, int NH,
                                       int HD, size_t rows, int first) {
    const int lane = threadIdx.x % WARP;
    const size_t nwarps = (size_t)gridDim.x * blockDim.x / WARP;
    for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP; r < rows; r += nwarps) {
        const size_t bh = r / T, b = bh / NH, h = bh % NH, t = r % T;
        const size_t row = ((b * T + t) * NH + h) * HD;
        if (lse[r] == -INFINITY) { /* the block's keys all after the row's query: it adds nothing */
            if (first) {
                for (int d = lane; d < HD; d += WARP) acc[row + d] = 0.0f;
                if (lane == 0) acc_lse[r] = -INFINITY;
            }
            continue;
        }
        const float l1 = first ? -INFINITY : acc_lse[r], l2 = lse[r], m = l1 > l2 ? l1 : l2;
        const float w1 = l1 == -INFINITY ? 0.0f : expf(__fsub_rn(l1, m)), w2 = expf(__fsub_rn(l2, m));
        const float sum = __fadd_rn(w1, w2);
        for (int d = lane; d < HD; d += WARP) {
            const float prev = first ? 0.0f : acc[row + d];
            acc[row + d] = __fdiv_rn(fmaf(w1, prev, __fmul_rn(w2, load_f32(out + row + d))), sum);
        }
        __syncwarp(); /* every lane has read acc_lse[r] */
        if (lane == 0) acc_lse[r] = __fadd_rn(m, logf(sum));
    }
}

template <typename S>
static void merge_launch(float *acc, float *acc_lse, const S *out, const float *lse, int T, int NH, int HD,
                         size_t rows, int first) {
    attention_merge_kernel<S><<<titan_cuda_blocks(rows * WARP, MERGE_THREADS), MERGE_THREADS>>>(
        acc, acc_lse, out, lse, T, NH, HD, rows, first);
    CUDA_CHECK_LAUNCH();
}

void titan_cuda_attention_merge(titan_dtype dt, float *acc, float *acc_lse, const void *out, const float *lse,
                                int B, int T, int NH, int HD, int first) {
    size_t rows = (size_t)B * NH * T;
    if (rows == 0 || HD <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "attention_merge",
                        merge_launch<S>(acc, acc_lse, (const S *)out, lse, T, NH, HD, rows, first));
}
