/* test_cuda_emu.cu - the CUDA emulator (tests/emu/cuda_emu.h) catches what it
 * says it catches. CUDA source, made host C++ by gen_kernels.awk like
 * the files of kernels/ (so the generator's rewrites are checked too) and linked with
 * the emulated runtime (cuda_emu.cpp); never compiled by nvcc.
 *
 * Each case that must stop the process runs in a child: it must die by
 * SIGABRT or SIGSEGV with the emulator's message on stderr. The others are
 * checked in place: launch errors from cudaGetLastError, NaN-filled fresh
 * memory and shared memory, out of memory. One line per case; exit 0 when
 * all pass. */
#include "emu_test.h"

/* ------------------------------------------------------------ kernels */

__global__ void write_kernel(float *p, size_t at, float v) { p[at] = v; }

__global__ void fill_kernel(float *p, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

/* thread 0 reads slot 1 of a static shared array that nothing wrote */
__global__ void unwritten_shared_kernel(float *out) {
    __shared__ float tmp[32];
    if (threadIdx.x == 0) tmp[0] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = tmp[0] + tmp[1];
}

/* dynamic shared memory, a whole 64 KiB of it */
__global__ void dynamic_shared_kernel(float *out) {
    extern __shared__ float smem[];
    smem[threadIdx.x] = 2.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = smem[31];
}

/* thread 0 returns before the barrier the others wait at */
__global__ void early_return_kernel(float *out) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* ------------------------------------------------------------ cases */

static bool all_bytes(const void *p, size_t n, unsigned char b) {
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != b) return false;
    return true;
}

int main(void) {
    std::string said;
    float *d = nullptr;
    report(cudaMalloc((void **)&d, 4000) == cudaSuccess, "cudaMalloc of 4000 bytes");

    float h[1000];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    report(all_bytes(h, sizeof h, 0xff), "fresh device memory reads as 0xff (NaN)");

    report(dies_saying([&] { printf("%f\n", d[1]); }, "host code touched device memory", &said),
           "host read of a device pointer faults", said);

    report(dies_saying([&] {
               write_kernel<<<1, 32>>>(d, 1025, 1.0f); /* byte 4100: past its page */
               cudaDeviceSynchronize();
           }, "device code touched device memory", &said),
           "a kernel writing past its allocation's pages faults", said);

    report(dies_saying([&] {
               write_kernel<<<1, 32>>>(d, 1002, 1.0f); /* byte 4008: in the 256-byte rounding */
               cudaFree(d);
           }, "written past its end", &said),
           "a write into an allocation's rounding is found at cudaFree", said);

    report(dies_saying([&] {
               write_kernel<<<1, 32>>>(h, 0, 1.0f);
           }, "kernel argument 0", &said),
           "a host pointer as a kernel argument stops the launch", said);

    report(dies_saying([&] {
               early_return_kernel<<<1, 64>>>(d);
           }, "deadlock", &said),
           "a barrier that not every thread reaches is a deadlock", said);

    cudaGetLastError();
    fill_kernel<<<1, 2048>>>(d, 1000, 3.0f);
    cudaError_t e = cudaGetLastError();
    report(e == cudaErrorInvalidConfiguration, "a block of 2048 threads is refused",
           cudaGetErrorName(e));
    fill_kernel<<<dim3(1, 70000), 32>>>(d, 1000, 3.0f);
    e = cudaGetLastError();
    report(e == cudaErrorInvalidConfiguration, "gridDim.y over 65535 is refused",
           cudaGetErrorName(e));
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    report(all_bytes(h, sizeof h, 0xff), "refused launches ran nothing");

    dynamic_shared_kernel<<<1, 32, 64 * 1024>>>(d);
    e = cudaGetLastError();
    report(e == cudaErrorInvalidValue,
           "64 KiB of dynamic shared memory without the attribute is refused",
           cudaGetErrorName(e));
    cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         64 * 1024);
    dynamic_shared_kernel<<<1, 32, 64 * 1024>>>(d);
    e = cudaGetLastError();
    cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost);
    report(e == cudaSuccess && h[0] == 2.0f, "with cudaFuncSetAttribute it runs",
           cudaGetErrorName(e));

    unwritten_shared_kernel<<<2, 32>>>(d);
    cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost);
    report(h[0] != h[0], "unwritten static shared memory reads as NaN");

    void *huge = nullptr;
    e = cudaMalloc(&huge, SIZE_MAX - 100);
    report(e == cudaErrorMemoryAllocation && !huge, "cudaMalloc of SIZE_MAX - 100 bytes fails",
           cudaGetErrorName(e));
    cudaGetLastError();

    report(cudaFree(d) == cudaSuccess, "cudaFree");
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
