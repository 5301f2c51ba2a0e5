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

static std::string said_ipc;

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

/* CUDA IPC between processes: a child maps the parent's export, reads what
 * the parent wrote and writes back where the parent sees it; the errors
 * CUDA gives (its own handle in the exporting process, other flags, a
 * freed export). */
static int ipc_child(cudaIpcMemHandle_t hd) {
    float *p = nullptr, h[1000];
    if (cudaIpcOpenMemHandle((void **)&p, hd, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) return 2;
    float *again = nullptr; /* a second open: the same pointer, counted */
    if (cudaIpcOpenMemHandle((void **)&again, hd, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess || again != p) return 3;
    if (cudaIpcCloseMemHandle(again) != cudaSuccess) return 4;
    cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 1000; i++)
        if (h[i] != 5.0f) return 5;
    fill_kernel<<<4, 256>>>(p, 1000, 6.0f); /* an opened pointer is a kernel argument like the process's own */
    if (cudaGetLastError() != cudaSuccess || cudaFree(p) != cudaErrorInvalidValue) return 6;
    return cudaIpcCloseMemHandle(p) == cudaSuccess && cudaIpcCloseMemHandle(p) == cudaErrorInvalidValue ? 0 : 7;
}

static int in_child(int (*fn)(cudaIpcMemHandle_t), cudaIpcMemHandle_t hd) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) _exit(fn(hd));
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static int ipc_open_fails(cudaIpcMemHandle_t hd) {
    void *p = nullptr;
    return cudaIpcOpenMemHandle(&p, hd, cudaIpcMemLazyEnablePeerAccess) == cudaErrorInvalidResourceHandle ? 0 : 1;
}

static cudaIpcMemHandle_t g_fresh;

/* opens hd and finds 5.0 throughout */
static int ipc_open_reads(cudaIpcMemHandle_t hd) {
    float *p = nullptr, h[1000];
    if (cudaIpcOpenMemHandle((void **)&p, hd, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) return 1;
    cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 1000; i++)
        if (h[i] != 5.0f) return 2;
    return cudaIpcCloseMemHandle(p) == cudaSuccess ? 0 : 3;
}

static void ipc_cases(void) {
    float *d = nullptr, h[1000];
    cudaMalloc((void **)&d, 1000 * sizeof(float));
    fill_kernel<<<4, 256>>>(d, 1000, 5.0f);
    cudaIpcMemHandle_t hd;
    cudaError_t e = cudaIpcGetMemHandle(&hd, d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    report(e == cudaSuccess && h[0] == 5.0f && h[999] == 5.0f, "cudaIpcGetMemHandle keeps the allocation's bytes",
           cudaGetErrorName(e));
    cudaIpcMemHandle_t inner;
    report(cudaIpcGetMemHandle(&inner, d + 1) == cudaErrorInvalidValue, "only an allocation's start is exported");
    void *p = nullptr;
    e = cudaIpcOpenMemHandle(&p, hd, cudaIpcMemLazyEnablePeerAccess);
    report(e == cudaErrorDeviceUninitialized && !p, "the exporting process cannot open its own handle",
           cudaGetErrorName(e));
    e = cudaIpcOpenMemHandle(&p, hd, 0);
    report(e == cudaErrorInvalidValue, "flags other than cudaIpcMemLazyEnablePeerAccess are refused",
           cudaGetErrorName(e));
    cudaGetLastError();
    int rc = in_child(ipc_child, hd);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    report(rc == 0 && h[0] == 6.0f && h[999] == 6.0f,
           "another process maps the export, reads it and writes where the exporter sees it",
           "child step " + std::to_string(rc));
    report(dies_saying([&] { printf("%f\n", d[1]); }, "host code touched device memory", &said_ipc),
           "host read of an exported pointer still faults", said_ipc);
    report(cudaFree(d) == cudaSuccess, "cudaFree of an exported allocation");
    report(in_child(ipc_open_fails, hd) == 0, "a freed export no longer opens (cudaErrorInvalidResourceHandle)");
    /* a new export takes the freed one's memfd number: the stale handle
     * must still fail, not open the new buffer */
    float *d2 = nullptr;
    cudaMalloc((void **)&d2, 1000 * sizeof(float));
    fill_kernel<<<4, 256>>>(d2, 1000, 5.0f);
    e = cudaIpcGetMemHandle(&g_fresh, d2);
    int32_t fd_old, fd_new; /* the emulator's handle: magic, pid, then the memfd's number */
    memcpy(&fd_old, (const char *)&hd + 8, 4), memcpy(&fd_new, (const char *)&g_fresh + 8, 4);
    report(e == cudaSuccess && fd_old == fd_new, "a new export reuses the freed export's memfd number",
           std::to_string(fd_old) + " then " + std::to_string(fd_new));
    report(in_child(ipc_open_fails, hd) == 0, "the stale handle of a freed export does not open the new buffer");
    report(in_child(ipc_open_reads, g_fresh) == 0, "the new export opens and reads as written");
    cudaFree(d2);
    cudaGetLastError();
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
    ipc_cases();
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
