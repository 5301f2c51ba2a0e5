/* cross_entropy.cu - fused softmax + cross-entropy over the vocabulary: the
 * loss and its gradient in one kernel, one block per row of logits; and the
 * rows' log-sum-exp alone (ranks holding shards of the vocabulary combine
 * theirs, then run the cross-entropy on their shard with the whole row's).
 *
 * As the CPU backend, in fp32 whatever the logits' storage type S: the row
 * max in fp32, the exp sum in double (fixed block tree), lse = max + log(sum)
 * in double, dlogits = (softmax - onehot) * dscale with inv = (float)(1/sum),
 * rounded once to S; losses are fp32. Given the whole row's lse, the
 * softmax is exp(x - lse) and the reductions are skipped. dlogits may alias
 * logits: every read of the row (and the target logit) happens before a
 * barrier (the reductions' last, or its own), every write after it, and
 * each thread rewrites only the elements it reads again itself. */
#include "cuda_ops.cuh"

#define CE_THREADS 512

/* The row's max (*mx, fp32) and its sum of exp(x - max) in double, the
 * same in every thread of the block; ends on a barrier, after which no
 * thread reads the row for it. */
template <typename S>
static __device__ double row_exp_sum(const S *x, int V, float *mx, float *ftmp, double *dtmp) {
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, load_f32(x + i));
    m = block_max(m, ftmp);
    double acc = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) acc += (double)expf(load_f32(x + i) - m);
    *mx = m;
    return block_sum_double(acc, dtmp);
}

template <typename S>
__global__ void cross_entropy_kernel(float *losses, S *dlogits, const S *logits,
                                     const uint32_t *targets, int V, float dscale,
                                     const float *lse) {
    __shared__ float ftmp[32];
    __shared__ double dtmp[32];
    size_t row = (size_t)blockIdx.x * V;
    const S *x = logits + row;
    uint32_t tg = targets[blockIdx.x];
    /* without lse every target is in the row; with it, one >= V is another shard's */
    bool here = !lse || tg < (uint32_t)V;
    float xt = here ? load_f32(x + tg) : 0.0f;

    float shift, inv, loss;
    if (lse) { /* the same branch in the whole block */
        shift = lse[blockIdx.x], inv = 1.0f; /* exact: e * 1 == e */
        loss = here ? (float)((double)shift - (double)xt) : 0.0f;
        __syncthreads(); /* every thread's xt read before any write of the row */
    } else {
        double sum = row_exp_sum(x, V, &shift, ftmp, dtmp);
        inv = (float)(1.0 / sum);
        loss = (float)((double)shift + log(sum) - (double)xt);
    }

    if (losses && threadIdx.x == 0) losses[blockIdx.x] = loss;
    if (dlogits) {
        S *d = dlogits + row;
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            float onehot = (uint32_t)i == tg ? 1.0f : 0.0f;
            store_f32(d + i, (expf(load_f32(x + i) - shift) * inv - onehot) * dscale);
        }
    }
}

template <typename S>
__global__ void logsumexp_kernel(float *lse, const S *logits, int V) {
    __shared__ float ftmp[32];
    __shared__ double dtmp[32];
    float mx;
    double sum = row_exp_sum(logits + (size_t)blockIdx.x * V, V, &mx, ftmp, dtmp);
    if (threadIdx.x == 0) lse[blockIdx.x] = (float)((double)mx + log(sum));
}

template <typename S>
static void launch(float *losses, S *dlogits, const S *logits, const uint32_t *targets, int N,
                   int V, float dscale, const float *lse) {
    cross_entropy_kernel<S><<<N, CE_THREADS>>>(losses, dlogits, logits, targets, V, dscale, lse);
    CUDA_CHECK_LAUNCH();
}

template <typename S>
static void lse_launch(float *lse, const S *logits, int N, int V) {
    logsumexp_kernel<S><<<N, CE_THREADS>>>(lse, logits, V);
    CUDA_CHECK_LAUNCH();
}

/* lse NULL: losses[n] = logsumexp(logits[n]) - logits[n][targets[n]];
 * dlogits[n] = (softmax(logits[n]) - onehot(targets[n])) * dscale (NULL: skip).
 * lse given (logits one vocabulary shard): losses[n] = lse[n] - the target
 * logit, 0 for a target >= V; dlogits[n] = (exp(logits[n] - lse[n]) -
 * onehot) * dscale. */
void titan_cuda_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                              const uint32_t *targets, int N, int V, float dscale,
                              const float *lse) {
    if (N <= 0 || (V <= 0 && !lse)) return; /* an empty shard still writes its 0 losses */
    TITAN_CUDA_DISPATCH(dt, "cross_entropy",
                        launch<S>(losses, (S *)dlogits, (const S *)logits, targets, N, V, dscale,
                                  lse));
}

/* lse[n] = log(sum_j exp(logits[n][j])), max-shifted, as cross_entropy's */
void titan_cuda_logsumexp(titan_dtype dt, float *lse, const void *logits, int N, int V) {
    if (N <= 0) return; /* V = 0: -inf, the log of an empty sum */
    TITAN_CUDA_DISPATCH(dt, "logsumexp", lse_launch<S>(lse, (const S *)logits, N, V));
}
