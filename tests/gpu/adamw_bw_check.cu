/* adamw_bw_check.cu - the AdamW kernel's memory bandwidth on this GPU,
 * beside a device-to-device copy (the practical ceiling of a pure-bandwidth
 * kernel) measured in the same run. One flat tensor of N parameters (the
 * 1B model's 1.24e9 by default, or argv[1]), fp32 parameters, gradients and
 * both moments, with and without the bf16 compute copy; 28 bytes move per
 * parameter (30 with the copy). Also checks that two steps from the same
 * state give the same bits. Prints one line per measurement, then "all ok".
 *   nvcc -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/adamw_bw_check.cu \
 *        kernels/adamw.cu -o build/adamw_bw_check && build/adamw_bw_check [N] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.cuh"
#include "../tests/gpu/cuda_standins.h"

static float ms_of(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

__global__ void fill(float *x, size_t n, float scale, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
        x[i] = scale * ((float)(h & 0xffff) / 65536.0f - 0.5f);
    }
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1240000000ull;
    float *p, *g, *m, *v, *p2, *m2, *v2;
    void *copy;
    size_t bytes = n * sizeof(float);
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMalloc(&g, bytes));
    CUDA_CHECK(cudaMalloc(&m, bytes));
    CUDA_CHECK(cudaMalloc(&v, bytes));
    CUDA_CHECK(cudaMalloc(&copy, n * 2));
    fill<<<4096, 256>>>(p, n, 1.0f, 1);
    fill<<<4096, 256>>>(g, n, 0.01f, 2);
    CUDA_CHECK(cudaMemset(m, 0, bytes));
    CUDA_CHECK(cudaMemset(v, 0, bytes));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    const int reps = 10;
    /* the ceiling: a copy reads and writes each byte once */
    CUDA_CHECK(cudaMemcpy(m, p, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(a));
    for (int r = 0; r < reps; r++) CUDA_CHECK(cudaMemcpy(m, p, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    double copy_gbs = 2.0 * bytes * reps / (ms_of(a, b) * 1e-3) / 1e9;
    printf("cudaMemcpy device to device, %zu floats: %.0f GB/s (read + write)\n", n, copy_gbs);
    CUDA_CHECK(cudaMemset(m, 0, bytes));
    for (int with_copy = 0; with_copy <= 1; with_copy++) {
        void *c = with_copy ? copy : NULL;
        titan_cuda_adamw_step(p, c, g, 1.0f, m, v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1); /* warm */
        CUDA_CHECK(cudaEventRecord(a));
        for (int r = 0; r < reps; r++)
            titan_cuda_adamw_step(p, c, g, 1.0f, m, v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 2 + r);
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        double ms = ms_of(a, b) / reps;
        double moved = (28.0 + (with_copy ? 2.0 : 0.0)) * (double)n;
        printf("AdamW step, %zu parameters%s: %.3f ms, %.0f GB/s, %.0f%% of the copy's\n", n,
               with_copy ? " + bf16 copy" : "", ms, moved / (ms * 1e-3) / 1e9,
               100.0 * moved / (ms * 1e-3) / 1e9 / copy_gbs);
    }
    /* the same state stepped twice gives the same bits */
    size_t k = n < 100000000 ? n : 100000000;
    CUDA_CHECK(cudaMalloc(&p2, k * 4));
    CUDA_CHECK(cudaMalloc(&m2, k * 4));
    CUDA_CHECK(cudaMalloc(&v2, k * 4));
    CUDA_CHECK(cudaMemcpy(p2, p, k * 4, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(m2, m, k * 4, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(v2, v, k * 4, cudaMemcpyDeviceToDevice));
    titan_cuda_adamw_step(p, NULL, g, 0.5f, m, v, k, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 20);
    titan_cuda_adamw_step(p2, NULL, g, 0.5f, m2, v2, k, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 20);
    float *h1 = (float *)malloc(k * 4), *h2 = (float *)malloc(k * 4);
    CUDA_CHECK(cudaMemcpy(h1, p, k * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(h2, p2, k * 4, cudaMemcpyDeviceToHost));
    int same = memcmp(h1, h2, k * 4) == 0;
    printf("%s\n", same ? "all ok" : "FAIL: two steps from the same state differ");
    return same ? 0 : 1;
}
