/* ipc.cu - device memory the other processes of this host address
 * directly (backend.h's ipc_* ops, copy, sum_ranks and host_call): what
 * comm.h's shared windows need on a GPU for async tensor parallelism.
 *
 * CUDA IPC handles (cudaIpcGetMemHandle on the cudaMalloc'd buffer alloc
 * gives), not VMM's shareable handles: a handle is 64 plain bytes that go
 * to the peers through the communicator's host memory, where a VMM handle
 * is a file descriptor that would need a Unix socket (SCM_RIGHTS) to
 * travel; both map the same memory on one GPU and over NVLink between
 * GPUs (cudaIpcMemLazyEnablePeerAccess turns peer access on). A rank's
 * window is small (two halves of one block per rank), so alloc's
 * non-releasable memory is the right kind.
 *
 * sum_ranks adds the ranks' blocks where they lie, each element by one
 * thread, in rank order in fp32, rounded once: the host's
 * titan_comm_sum_ranks bit for bit (fp32 addition is the same IEEE
 * operation on both; nothing is fused or reordered). */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.cuh"

static_assert(sizeof(cudaIpcMemHandle_t) == TITAN_IPC_HANDLE_BYTES, "backend.h's handle size");

int titan_cuda_ipc_export(void *p, void *handle) {
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, p);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: the caller reports it */
        titan_cuda_error(TITAN_ERR_FAIL, "cuda: exporting device buffer %p to the other processes "
                         "(cudaIpcGetMemHandle): %s", p, cudaGetErrorString(e));
        return -1;
    }
    memcpy(handle, &h, sizeof h);
    return 0;
}

void *titan_cuda_ipc_open(const void *handle) {
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        cudaGetLastError();
        titan_cuda_error(TITAN_ERR_FAIL, "cuda: mapping another process's device buffer (cudaIpcOpenMemHandle): "
                         "%s", cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void titan_cuda_ipc_close(void *p) {
    if (p) CUDA_CHECK(cudaIpcCloseMemHandle(p));
}

void titan_cuda_copy(void *dst, const void *src, size_t nbytes) {
    /* Default: unified addressing tells a peer GPU's mapping from this one's */
    if (nbytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, 0));
}

void titan_cuda_host_call(void (*fn)(void *arg), void *arg) {
    CUDA_CHECK(cudaLaunchHostFunc(0, fn, arg));
}

/* the sources by value: one kernel argument, no device copy of the table */
struct sum_sources {
    const void *p[TITAN_SUM_RANKS_MAX];
};

/* out may be one of the sources: each thread reads its element from all
 * of them before writing it */
template <typename S>
__global__ void sum_ranks_kernel(S *out, sum_sources src, int n, size_t m) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride) {
        float acc = load_f32((const S *)src.p[0] + i);
        for (int j = 1; j < n; j++) acc = acc + load_f32((const S *)src.p[j] + i);
        store_f32(out + i, acc);
    }
}

void titan_cuda_sum_ranks(titan_dtype dt, void *out, const void *const *src, int n, size_t m) {
    if (n < 1 || n > TITAN_SUM_RANKS_MAX) {
        char why[64];
        snprintf(why, sizeof why, "%d sources: want 1 to %d", n, TITAN_SUM_RANKS_MAX);
        titan_cuda_panic(__FILE__, __LINE__, "sum_ranks", why);
    }
    if (m == 0) return;
    sum_sources s;
    memset(&s, 0, sizeof s);
    for (int j = 0; j < n; j++) s.p[j] = src[j];
    TITAN_CUDA_DISPATCH(dt, "sum_ranks",
                        sum_ranks_kernel<S><<<titan_cuda_blocks(m, 256), 256>>>((S *)out, s, n, m));
    CUDA_CHECK_LAUNCH();
}
