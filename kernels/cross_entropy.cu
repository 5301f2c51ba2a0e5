/* cross_entropy.cu - fused softmax + cross-entropy over the vocabulary: the
 * loss and its gradient in one kernel, one block per row of logits.
 *
 * As the CPU backend, in fp32 whatever the logits' storage type S: the row
 * max in fp32, the exp sum in double (fixed block tree), lse = max + log(sum)
 * in double, dlogits = (softmax - onehot) * dscale with inv = (float)(1/sum),
 * rounded once to S; losses are fp32. dlogits may alias logits: every read of
 * the row (and the target logit) happens before the block's last barrier of
 * the reductions, every write after it, and each thread rewrites only the
 * elements it reads again itself. */
#include "cuda_ops.cuh"

#define CE_THREADS 512

template <typename S>
__global__ void cross_entropy_kernel(float *losses, S *dlogits, const S *logits,
                                     const uint32_t *targets, int V, float dscale) {
    __shared__ float ftmp[32];
    __shared__ double dtmp[32];
    size_t row = (size_t)blockIdx.x * V;
    const S *x = logits + row;
    uint32_t tg = targets[blockIdx.x];
    float xt = load_f32(x + tg);

    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, load_f32(x + i));
    mx = block_max(mx, ftmp);

    double acc = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) acc += (double)expf(load_f32(x + i) - mx);
    double sum = block_sum_double(acc, dtmp);

    if (losses && threadIdx.x == 0) losses[blockIdx.x] = (float)((double)mx + log(sum) - (double)xt);
    if (dlogits) {
        S *d = dlogits + row;
        float inv = (float)(1.0 / sum);
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            float onehot = i == (int)tg ? 1.0f : 0.0f;
            store_f32(d + i, (expf(load_f32(x + i) - mx) * inv - onehot) * dscale);
        }
    }
}

template <typename S>
static void launch(float *losses, S *dlogits, const S *logits, const uint32_t *targets, int N,
                   int V, float dscale) {
    cross_entropy_kernel<S><<<N, CE_THREADS>>>(losses, dlogits, logits, targets, V, dscale);
    CUDA_CHECK_LAUNCH();
}

/* losses[n] = logsumexp(logits[n]) - logits[n][targets[n]];
 * dlogits[n] = (softmax(logits[n]) - onehot(targets[n])) * dscale (NULL: skip). */
void titan_cuda_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                              const uint32_t *targets, int N, int V, float dscale) {
    if (N <= 0 || V <= 0) return;
    TITAN_CUDA_DISPATCH(dt, "cross_entropy",
                        launch<S>(losses, (S *)dlogits, (const S *)logits, targets, N, V, dscale));
}
