/* elementwise.cu - add and scale, one thread per element (grid-stride), and
 * the probe kernel the backend launches once when it is opened. */
#include "cuda_ops.cuh"

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float *x, size_t n, float s) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= s;
}

__global__ void probe_kernel(void) {}

/* out[i] = a[i] + b[i] */
void titan_cuda_add(float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    add_kernel<<<titan_cuda_blocks(n, 256), 256>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}

/* x[i] *= s */
void titan_cuda_scale(float *x, size_t n, float s) {
    if (n == 0) return;
    scale_kernel<<<titan_cuda_blocks(n, 256), 256>>>(x, n, s);
    CUDA_CHECK_LAUNCH();
}

cudaError_t titan_cuda_probe(void) {
    probe_kernel<<<1, 1>>>();
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    return cudaDeviceSynchronize();
}
