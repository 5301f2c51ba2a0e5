/* cuda_standins.h - cuda_backend.cu's panic and scratch allocator, for the
 * programs that compile kernels/attention_tc.cu without the rest of the
 * backend (libtitan-cuda.so hides its own): tests/gpu/attention_tc_check.cu
 * (nvcc) and tests/emu/test_attention_tc_emu.cpp (g++ on the emulator); and
 * for tests/gpu/gemm_inplace_check.cu's CUDA_CHECK and CUBLAS_CHECK.
 * Include once, after the CUDA runtime's declarations. */
#ifndef TITAN_TESTS_CUDA_STANDINS_H
#define TITAN_TESTS_CUDA_STANDINS_H

#include <stdio.h>
#include <stdlib.h>

void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what) {
    fprintf(stderr, "titan: cuda: %s:%d: %s: %s\n", file, line, stmt, what);
    abort();
}

/* Stream-ordered on the default stream, as the backend's; no out-of-memory
 * exit status here: a test stops at once. */
void *titan_cuda_scratch(size_t nbytes, const char *op) {
    void *p = nullptr;
    if (cudaMallocAsync(&p, nbytes, 0) != cudaSuccess)
        titan_cuda_panic(__FILE__, __LINE__, op, "scratch");
    return p;
}

/* cuda_backend.cu's optimizer side stream (kernels/adamw.cu asks for it):
 * none here, the default stream */
cudaStream_t titan_cuda_optimizer_stream(void) { return 0; }

#endif
