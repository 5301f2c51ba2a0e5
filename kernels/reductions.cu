/* reductions.cu - sum of squares in double, deterministic.
 *
 * Two passes with a fixed shape: SUMSQ_BLOCKS blocks of SUMSQ_THREADS threads
 * (constants, not the GPU's SM count) each stride over the input and reduce
 * in a fixed tree into partial[block]; then one block folds the partials in
 * the same tree. The split depends on nothing but n (and whether x is
 * 16-byte aligned), so every run and every GPU gives the same bits. The
 * partials live in __device__ globals: the backend runs on one stream, so
 * calls never overlap.
 *
 * It reads every gradient once a step (the clipping norm): a memory-bound
 * pass over 4 bytes a parameter, so an aligned x is read 16 bytes a load
 * (float4, 4 in flight a thread), from enough threads to keep the loads of
 * every SM in flight; one element a load otherwise. */
#include "cuda_ops.cuh"

#define SUMSQ_BLOCKS 1024
#define SUMSQ_THREADS 256

__device__ double sumsq_partial[SUMSQ_BLOCKS];
__device__ double sumsq_result;

/* VEC: x 16-byte aligned; thread g sums float4 g, g + stride, .. (each
 * one's squares in order), then, if g < n % 4, element n - n % 4 + g */
template <bool VEC>
__global__ void sumsq_partial_kernel(const float *x, size_t n) {
    __shared__ double tmp[32];
    const size_t stride = (size_t)SUMSQ_BLOCKS * SUMSQ_THREADS;
    const size_t g = (size_t)blockIdx.x * SUMSQ_THREADS + threadIdx.x;
    double acc = 0.0;
    if (VEC) {
        const size_t n4 = n / 4;
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
#pragma unroll 4
        for (size_t i = g; i < n4; i += stride) {
            const float4 v = x4[i];
            acc += (double)v.x * (double)v.x;
            acc += (double)v.y * (double)v.y;
            acc += (double)v.z * (double)v.z;
            acc += (double)v.w * (double)v.w;
        }
        if (g < n % 4) {
            const double t = (double)x[n4 * 4 + g];
            acc += t * t;
        }
    } else {
        for (size_t i = g; i < n; i += stride) {
            const double xi = (double)x[i];
            acc += xi * xi;
        }
    }
    double s = block_sum_double(acc, tmp);
    if (threadIdx.x == 0) sumsq_partial[blockIdx.x] = s;
}

/* out: where the sum goes (sumsq_into), or NULL for sumsq_result */
__global__ void sumsq_final_kernel(double *out) {
    __shared__ double tmp[32];
    double s = block_sum_double(sumsq_partial[threadIdx.x], tmp);
    if (threadIdx.x == 0) *(out ? out : &sumsq_result) = s;
}

/* The two passes, the sum left in out (NULL: sumsq_result). */
static void sumsq_launch(double *out, const float *x, size_t n) {
    if (titan_cuda_aligned16(x))
        sumsq_partial_kernel<true><<<SUMSQ_BLOCKS, SUMSQ_THREADS>>>(x, n);
    else
        sumsq_partial_kernel<false><<<SUMSQ_BLOCKS, SUMSQ_THREADS>>>(x, n);
    CUDA_CHECK_LAUNCH();
    sumsq_final_kernel<<<1, SUMSQ_BLOCKS>>>(out);
    CUDA_CHECK_LAUNCH();
}

/* sum of x[i]^2 in double; waits for the result */
double titan_cuda_sumsq(const float *x, size_t n) {
    if (n == 0) return 0.0;
    sumsq_launch(NULL, x, n);
    double s = 0.0;
    CUDA_CHECK(cudaMemcpyFromSymbol(&s, sumsq_result, sizeof s));
    return s;
}

/* the same sum into out (device memory), queued: nothing waits for it */
void titan_cuda_sumsq_into(double *out, const float *x, size_t n) {
    if (n == 0) {
        CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof *out, 0));
        return;
    }
    sumsq_launch(out, x, n);
}
