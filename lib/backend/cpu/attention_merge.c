/* attention_merge.c - the CPU backend's attention_merge (backend.h):
 * context parallelism's ring merges each block's attention into the
 * running result by the log-sum-exps. The arithmetic is spelled out (fmaf,
 * no contraction) so that the CUDA kernel (kernels/attention_merge.cu)
 * gives the same bits but for its expf and logf. */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "tensor/dtype.h"

static float element(titan_dtype dt, const void *x, size_t i) {
    return dt == TITAN_DTYPE_BF16 ? titan_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

__attribute__((optimize("fp-contract=off")))
void titan_cpu_attention_merge(titan_dtype dt, float *acc, float *acc_lse, const void *out, const float *lse, int B,
                               int T, int NH, int HD, int first) {
    if (dt != TITAN_DTYPE_F32 && dt != TITAN_DTYPE_BF16)
        titan_panic(__FILE__, __LINE__, "cpu backend: attention_merge: a block's out is f32 or bf16");
    long rows = (long)B * NH * T; /* [B, NH, T]: lse's order */
#pragma omp parallel for schedule(static) if (rows * HD > (1L << 16))
    for (long r = 0; r < rows; r++) {
        long b = r / ((long)NH * T), h = r / T % NH, t = r % T;
        size_t row = (((size_t)b * T + (size_t)t) * NH + (size_t)h) * HD;
        float *o = acc + row;
        if (lse[r] == -INFINITY) { /* the block's keys all after the row's query: it adds nothing */
            if (first) {
                for (int d = 0; d < HD; d++) o[d] = 0.0f;
                acc_lse[r] = -INFINITY;
            }
            continue;
        }
        float l1 = first ? -INFINITY : acc_lse[r], l2 = lse[r], m = l1 > l2 ? l1 : l2;
        float w1 = l1 == -INFINITY ? 0.0f : expf(l1 - m), w2 = expf(l2 - m), sum = w1 + w2;
        for (int d = 0; d < HD; d++) {
            float prev = first ? 0.0f : o[d];
            o[d] = fmaf(w1, prev, w2 * element(dt, out, row + d)) / sum;
        }
        acc_lse[r] = m + logf(sum);
    }
}
