/* reductions.cu - sum of squares in double, deterministic.
 *
 * Two passes with a fixed shape: SUMSQ_BLOCKS blocks of SUMSQ_THREADS threads
 * (constants, not the GPU's SM count) each stride over the input and reduce
 * in a fixed tree into partial[block]; then one block folds the partials in
 * the same tree. The split depends on nothing but n, so every run and every
 * GPU gives the same bits. The partials live in __device__ globals: the
 * backend runs on one stream, so calls never overlap. */
#include "cuda_ops.cuh"

#define SUMSQ_BLOCKS 256
#define SUMSQ_THREADS 256

__device__ double sumsq_partial[SUMSQ_BLOCKS];
__device__ double sumsq_result;

__global__ void sumsq_partial_kernel(const float *x, size_t n) {
    __shared__ double tmp[32];
    size_t stride = (size_t)SUMSQ_BLOCKS * SUMSQ_THREADS;
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * SUMSQ_THREADS + threadIdx.x; i < n; i += stride) {
        double xi = (double)x[i];
        acc += xi * xi;
    }
    double s = block_sum_double(acc, tmp);
    if (threadIdx.x == 0) sumsq_partial[blockIdx.x] = s;
}

__global__ void sumsq_final_kernel(void) {
    __shared__ double tmp[32];
    double s = block_sum_double(sumsq_partial[threadIdx.x], tmp);
    if (threadIdx.x == 0) sumsq_result = s;
}

/* sum of x[i]^2 in double; waits for the result */
double titan_cuda_sumsq(const float *x, size_t n) {
    if (n == 0) return 0.0;
    sumsq_partial_kernel<<<SUMSQ_BLOCKS, SUMSQ_THREADS>>>(x, n);
    CUDA_CHECK_LAUNCH();
    sumsq_final_kernel<<<1, SUMSQ_BLOCKS>>>();
    CUDA_CHECK_LAUNCH();
    double s = 0.0;
    CUDA_CHECK(cudaMemcpyFromSymbol(&s, sumsq_result, sizeof s));
    return s;
}
