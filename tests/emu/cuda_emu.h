/* cuda_emu.h - the whole CUDA backend (every .cu of kernels/, host side included) on
 * the CPU: build/emu/libtitan-cuda-emu.so, loaded like libtitan-cuda.so
 * through TITAN_CUDA_LIB, so test_cuda_ops and titan-train --device cuda run
 * the backend's own code on machines without a GPU.
 *
 * Each kernels/X.cu is turned into build/emu/cuda/X.cpp by
 * gen_kernels.awk (whole=1), which includes this header first and rewrites
 * every launch `k<<<cfg>>>(args)` into `emu_kernel_launch(cfg).run(k, args)`.
 * Underneath, with the real CUDA headers' declarations (so the compiler
 * checks every call against the real API) and host definitions:
 *   - cuda_emu.cpp: the CUDA runtime calls the backend makes. One device,
 *     an sm_90 "emulated" GPU; the default stream runs synchronously, a
 *     created stream on a worker thread of its own (kernels, event records
 *     and waits in order, each kernel after a pause drawn per
 *     TITAN_EMU_SEED), ordered against the default stream only by events
 *     and synchronisation. Device memory is an arena of pages that are
 *     inaccessible except while a kernel or a device-side runtime call
 *     (memcpy, memset, cuBLASLt, CUB) runs: host code that touches a device
 *     pointer faults where, on a GPU, it would read garbage. Each allocation
 *     ends at a page boundary followed by 64 KiB of inaccessible pages, so a
 *     kernel that runs past its end faults too, and cudaFree checks that the
 *     rest of its pages (the 256-byte rounding) was not written; new
 *     allocations are filled with 0xff (NaN), so a read before the first
 *     write shows. Launches are
 *     checked as the GPU does (block and grid limits, dynamic shared memory
 *     over 48 KiB without cudaFuncSetAttribute) and set cudaGetLastError;
 *     kernel arguments that are pointers must be null or device memory.
 *     CUDA IPC between the processes of the host (cudaIpcGetMemHandle,
 *     cudaIpcOpenMemHandle, cudaIpcCloseMemHandle): an exported allocation's
 *     pages become a memfd mapped in place, which the peers map from
 *     /proc/PID/fd (cuda_emu.cpp says how, and which errors CUDA's
 *     it returns; a handle names its memfd by identity, so a stale one
 *     fails, and a peer's access after the exporter's cudaFree faults
 *     with SIGBUS; TITAN_EMU_NO_PEER=1 makes the GPUs of TITAN_EMU_DEVICES
 *     unable to reach each other: another GPU's export does not open,
 *     cudaErrorPeerAccessUnsupported); cudaLaunchHostFunc runs the
 *     function in stream order.
 *     The GPU has 80 GiB, or TITAN_EMU_MEMORY_MIB.
 *   - cublaslt_emu.cpp: the cuBLASLt calls of kernels/matmul.cu, as plain
 *     column-major GEMMs (fp32 accumulation, one rounding to the output
 *     type) by this emulator's reading of the cuBLASLt documentation.
 *   - cusolver_emu.cpp: the cuSOLVER calls of kernels/linalg.cu on LAPACK
 *     (OpenBLAS's), with cuSOLVER's workspace and devInfo rules.
 *   - nccl_emu.cpp (where nccl.h is): the NCCL calls of comm_nccl.cu,
 *     between the rank processes through shared memory; TITAN_EMU_DEVICES=N
 *     makes N GPUs so that each rank of a --nproc job has its own.
 *   - here: cub::DeviceRadixSort::SortPairs (a stable host sort).
 *   - emu_core.h: the kernels' execution (fibers, barriers, shuffles).
 * Not emulated: the driver's virtual memory management (vmm.cu finds no
 * driver entry points and takes its fallback; tests/mock/test_vmm_mock
 * checks the VMM path), concurrency of kernels (one runs at a time, so
 * streams interleave kernel by kernel), copies on created streams (done at
 * once by the caller), and memory shared between the GPUs of one process. Limits: emu_core.h's header;
 * host libm stands in for device math (ulp-level differences), so the
 * numbers match the GPU's to the test tolerances, not bit for bit. */
#ifndef TITAN_TESTS_EMU_CUDA_EMU_H
#define TITAN_TESTS_EMU_CUDA_EMU_H

#include <algorithm>
#include <functional>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "emu_core.h"

/* a static __shared__ array: one per kernel, shared by the block's fibers */
#undef __shared__
#define __shared__ static

/* ------------------------------------------------ device math intrinsics */
/* (IEEE round-to-nearest operations; the host build does not contract) */
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
using std::max;
using std::min;

/* cuda_runtime.h's C++ overloads for kernels and symbols, which it defines
 * only under nvcc */
template <class T>
inline cudaError_t cudaFuncSetAttribute(T *kernel, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute((const void *)kernel, attr, value);
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t count = sizeof(T),
                                        size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    return ::cudaMemcpyFromSymbol(dst, (const void *)&symbol, count, offset, kind);
}

namespace emu {
/* cuda_emu.cpp: the runtime's side of a launch */

/* whether [p, p + n) lies in one live device allocation */
bool is_device(const void *p, size_t n);
/* aborts, naming what, unless [p, p + n) lies in one live device allocation */
void check_device(const void *p, size_t n, const char *what);
/* a launch's configuration against the device's limits; cudaSuccess or the
 * error the launch sets (and records for cudaGetLastError) */
cudaError_t check_launch(const void *kernel, dim3 grid, dim3 block, size_t smem);
/* While one lives: the emulator's lock held and device memory accessible. */
struct DeviceScope {
    DeviceScope();
    ~DeviceScope();
    DeviceScope(const DeviceScope &) = delete;
    DeviceScope &operator=(const DeviceScope &) = delete;
};

template <typename A>
inline void check_arg(int i, const A &a) {
    if constexpr (std::is_pointer<A>::value) {
        if (a && !is_device(a, 0)) { /* one past the end is a legal argument */
            char what[64];
            snprintf(what, sizeof what, "kernel argument %d (a host pointer?)", i);
            check_device(a, 1, what);
        }
    }
}

/* Queues run on stream st, when st is a created stream (cuda_emu.cpp's
 * workers); false for the default stream: the caller runs it now. */
bool enqueue_kernel(cudaStream_t st, std::function<void()> run);

struct Launch {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    /* runs kernel k on every block of the grid, unless the configuration is
     * one the GPU refuses: now, or in its turn on a created stream */
    template <typename... P, typename... A>
    void run(void (*k)(P...), A... a) {
        if (check_launch((const void *)k, grid, block, smem) != cudaSuccess) return;
        int i = 0;
        (check_arg(i++, a), ...);
        dim3 g = grid, b = block;
        size_t sm = smem;
        auto body = [g, b, sm, k, a...] {
            DeviceScope scope;
            emu_launch(g, b, sm, [&] { k(a...); });
        };
        if (!enqueue_kernel(stream, body)) body();
    }
};
} /* namespace emu */

inline emu::Launch emu_kernel_launch(dim3 grid, dim3 block, size_t smem = 0,
                                     cudaStream_t stream = 0) {
    return emu::Launch{grid, block, smem, stream};
}

/* --------------------------------------------------------- host CUB */
namespace cub {
struct DeviceRadixSort {
    /* keys_out, values_out = (key, value) pairs sorted stably by bits
     * [begin_bit, end_bit) of the key; with temp == nullptr only the
     * temporary storage size */
    template <typename K, typename V, typename NumT>
    static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const K *keys_in, K *keys_out,
                                 const V *values_in, V *values_out, NumT num_items,
                                 int begin_bit = 0, int end_bit = (int)(sizeof(K) * 8),
                                 cudaStream_t stream = 0) {
        static_assert(std::is_unsigned<K>::value, "unsigned keys");
        (void)stream;
        const size_t n = (size_t)num_items;
        if (!temp) {
            temp_bytes = 2 * n * sizeof(size_t) + 256; /* something, as CUB asks some */
            return cudaSuccess;
        }
        emu::check_device(temp, temp_bytes, "SortPairs temporary storage");
        if (n == 0) return cudaSuccess;
        emu::check_device(keys_in, n * sizeof(K), "SortPairs keys_in");
        emu::check_device(keys_out, n * sizeof(K), "SortPairs keys_out");
        emu::check_device(values_in, n * sizeof(V), "SortPairs values_in");
        emu::check_device(values_out, n * sizeof(V), "SortPairs values_out");
        emu::DeviceScope scope;
        const int bits = end_bit - begin_bit;
        const K mask = bits >= (int)(sizeof(K) * 8) ? (K)~(K)0 : (K)(((K)1 << bits) - 1);
        std::vector<size_t> order(n);
        for (size_t i = 0; i < n; i++) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
            return (K)(keys_in[x] >> begin_bit & mask) < (K)(keys_in[y] >> begin_bit & mask);
        });
        std::vector<K> k(n);
        std::vector<V> v(n);
        for (size_t i = 0; i < n; i++) k[i] = keys_in[order[i]], v[i] = values_in[order[i]];
        std::copy(k.begin(), k.end(), keys_out);
        std::copy(v.begin(), v.end(), values_out);
        return cudaSuccess;
    }
};
} /* namespace cub */

#endif
