/* cross_entropy.cu - fused softmax + cross-entropy over the vocabulary: the
 * loss and its gradient in one kernel, one block per row of logits; and the
 * rows' log-sum-exp alone (ranks holding shards of the vocabulary combine
 * theirs, then run the cross-entropy on their shard with the whole row's).
 *
 * Two passes over a row, 16 bytes a load: the max and the exp sum together
 * (an online softmax), then the gradient. The logits are the largest
 * activation (N x 128256 for Llama 3), so the bytes are the cost: two reads
 * and a write, where max, sum and gradient passes would read three times.
 *
 * As the CPU backend, in fp32 whatever the logits' storage type S: the row
 * max in fp32, the exp sum in double (fixed order per thread, fixed block
 * tree), lse = max + log(sum) in double, dlogits = (softmax - onehot) *
 * dscale with inv = (float)(1/sum), rounded once to S; losses are fp32.
 * Given the whole row's lse, the softmax is exp(x - lse) and the reductions
 * are skipped. dlogits may alias
 * logits: every read of the row (and the target logit) happens before a
 * barrier (the reductions' last, or its own), every write after it, and
 * each thread rewrites only the elements it reads again itself. */
#include "cuda_ops.cuh"

#define CE_THREADS 512

/* A row as three runs: a head of up to PACK - 1 elements before the row's
 * first 16-byte boundary, np whole 16-byte packs from there, and a tail from
 * element tail on. Thread t takes the head and tail elements t, t +
 * blockDim.x, .. and the packs t, t + blockDim.x, .. (a fixed assignment, so
 * every sum below has a fixed order). The packs are the bandwidth: 16 bytes
 * a load, several in flight per thread. */
struct row_runs {
    int head, np, tail;
};

template <typename S>
static __device__ __forceinline__ row_runs row_split(const S *x, int V) {
    constexpr int P = TITAN_PACK(S);
    int head = (int)((16 - ((uintptr_t)x & 15)) % 16 / sizeof(S));
    if (head > V) head = V;
    const int np = (V - head) / P;
    return {head, np, head + np * P};
}

/* This thread's elements of the row, widened to fp32, in row_split's runs:
 * one(i, v) for each of the head and tail, pack(i0, v) for each whole pack
 * (v[0..P) the elements i0..i0+P, which pack may change in place); the
 * packs' loop unrolled U times. */
template <int U, typename S, typename One, typename Pack>
static __device__ __forceinline__ void row_each(const S *x, int V, One &&one, Pack &&pack) {
    constexpr int P = TITAN_PACK(S);
    const row_runs r = row_split(x, V);
    for (int i = threadIdx.x; i < r.head; i += blockDim.x) one(i, load_f32(x + i));
    for (int i = r.tail + threadIdx.x; i < V; i += blockDim.x) one(i, load_f32(x + i));
#pragma unroll U
    for (int p = threadIdx.x; p < r.np; p += blockDim.x) {
        const int i0 = r.head + p * P;
        float v[P];
        load_f32_vec<P>(x + i0, v);
        pack(i0, v);
    }
}

/* f(i, x[i] widened to fp32) for every element of the row this thread takes */
template <typename S, typename F>
static __device__ __forceinline__ void row_walk(const S *x, int V, F &&f) {
    constexpr int P = TITAN_PACK(S);
    row_each<4>(x, V, f, [&](int i0, auto &v) {
#pragma unroll
        for (int e = 0; e < P; e++) f(i0 + e, v[e]);
    });
}

/* The row's max (*mx, fp32) and its sum of exp(x - max) in double, the
 * same in every thread of the block, from one read of the row: each thread
 * keeps a running max m and a sum s of exp(x - m) (rescaled by exp(m_old -
 * m_new) when m grows, FlashAttention's online softmax), then the block
 * takes the largest m and adds the threads' s * exp(m - max) in a fixed
 * tree. The CPU sums exp(x - max) directly: the two agree to a few fp32
 * roundings of the rescale factors (a relative 1e-7 or so of the sum). Ends
 * on a barrier, after which no thread reads the row for it. */
template <typename S>
static __device__ double row_exp_sum(const S *x, int V, float *mx, float *ftmp, double *dtmp) {
    float m = -INFINITY;
    double s = 0.0;
    row_walk(x, V, [&](int, float v) {
        if (v > m) {
            s = s * (double)expf(m - v) + 1.0; /* m = -inf: s is 0, exp(-inf) is 0 */
            m = v;
        } else if (m != -INFINITY) { /* -inf only while every v so far is -inf: nothing to add */
            s += (double)expf(v - m);
        }
    });
    const float M = block_max(m, ftmp);
    *mx = M;
    return block_sum_double(m == -INFINITY ? 0.0 : s * (double)expf(m - M), dtmp);
}

/* vec_d: dlogits has logits' alignment modulo 16 bytes (always when it is
 * logits, or both are allocations), so a row's packs line up in both and
 * the gradient is written a pack at a time; otherwise element by element. */
template <typename S>
__global__ void cross_entropy_kernel(float *losses, S *dlogits, const S *logits,
                                     const uint32_t *targets, int V, float dscale,
                                     const float *lse, bool vec_d) {
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
    if (!dlogits) return;
    /* each thread rewrites only what it reads itself (dlogits may be logits) */
    S *d = dlogits + row;
    auto grad = [&](int i, float v) {
        return (expf(v - shift) * inv - ((uint32_t)i == tg ? 1.0f : 0.0f)) * dscale;
    };
    if (!vec_d) {
        for (int i = threadIdx.x; i < V; i += blockDim.x) store_f32(d + i, grad(i, load_f32(x + i)));
        return;
    }
    /* the walk's runs, with the packs stored whole (d's runs are x's: vec_d) */
    constexpr int P = TITAN_PACK(S);
    row_each<2>(
        x, V, [&](int i, float v) { store_f32(d + i, grad(i, v)); },
        [&](int i0, auto &v) {
#pragma unroll
            for (int e = 0; e < P; e++) v[e] = grad(i0 + e, v[e]);
            store_f32_vec<P>(d + i0, v);
        });
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
    const bool vec_d = (((uintptr_t)logits ^ (uintptr_t)dlogits) & 15) == 0;
    cross_entropy_kernel<S><<<N, CE_THREADS>>>(losses, dlogits, logits, targets, V, dscale, lse,
                                               vec_d);
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
