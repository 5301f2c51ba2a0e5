/* cuda_ops.cuh - the CUDA backend's ops, one .cu file per subject; cuda_backend.cu
 * puts them in the titan_backend table (lib/backend/backend.h). Internal to
 * libtitan-cuda.so, which is self-contained: it shares only backend.h's types
 * with the rest of titan.
 *
 * Every op has the CPU op's name with "cuda" for "cpu" and the same arguments
 * (titan_cpu_rmsnorm_forward <-> titan_cuda_rmsnorm_forward); the kernels are
 * named <op>_kernel. Pointers are device pointers. All work is queued on the
 * default stream; to_host and sumsq synchronise.
 *
 * Determinism: no float atomics anywhere. Each output element is written by
 * one thread, reductions run in fixed trees whose shape depends only on the
 * tensor shapes (never on the GPU's SM count), so the same inputs give the
 * same bits on every run.
 *
 * Errors: the table's ops return void, so a failing CUDA or cuBLAS call
 * inside an op is a dead end; CUDA_CHECK / CUBLAS_CHECK print the statement,
 * file:line and CUDA's message, then abort (like TITAN_ASSERT). */
#ifndef TITAN_KERNELS_CUDA_OPS_CUH
#define TITAN_KERNELS_CUDA_OPS_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

/* cuda_backend.cu: prints "titan: cuda: file:line: statement: what" and aborts */
[[noreturn]] void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what);

#define CUDA_CHECK(stmt)                                                              \
    do {                                                                              \
        cudaError_t cuda_check_err_ = (stmt);                                         \
        if (cuda_check_err_ != cudaSuccess)                                           \
            titan_cuda_panic(__FILE__, __LINE__, #stmt, cudaGetErrorString(cuda_check_err_)); \
    } while (0)

/* after a <<<...>>> launch: catches bad configurations at the launch site */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* ------------------------------------------------------- device helpers */

#define WARP 32
#define FULL_MASK 0xffffffffu

static inline unsigned titan_cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < 65536 ? b : 65536); /* grid-stride loops cover the rest */
}

/* Butterfly (xor) reductions: every lane ends with the same value, and the
 * tree is fixed, so the result does not depend on timing. */
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
static __device__ __forceinline__ double warp_sum_double(double v) {
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024) in a fixed
 * order: warps first, then warp 0 folds the per-warp sums. Every thread gets
 * the total. `tmp` is __shared__ double[32]; it may be reused after return. */
static __device__ __forceinline__ double block_sum_double(double v, double *tmp) {
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum_double(v);
    __syncthreads(); /* tmp may still be read from a previous call */
    if (lane == 0) tmp[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double w = lane < nw ? tmp[lane] : 0.0;
        w = warp_sum_double(w);
        if (lane == 0) tmp[0] = w;
    }
    __syncthreads();
    return tmp[0];
}

static __device__ __forceinline__ float block_max(float v, float *tmp) {
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) tmp[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < nw ? tmp[lane] : -INFINITY;
        w = warp_max(w);
        if (lane == 0) tmp[0] = w;
    }
    __syncthreads();
    return tmp[0];
}

/* ------------------------------------------------------------ the ops */

/* elementwise.cu */
void titan_cuda_add(float *out, const float *a, const float *b, size_t n);
void titan_cuda_scale(float *x, size_t n, float s);

/* reductions.cu */
double titan_cuda_sumsq(const float *x, size_t n);

/* matmul: in cuda_backend.cu (cuBLASLt, which owns the handle and workspace) */
void titan_cuda_matmul_forward(float *out, const float *inp, const float *w, int N, int IC, int OC);
void titan_cuda_matmul_backward(float *dinp, float *dw, const float *dout, const float *inp,
                                const float *w, int N, int IC, int OC);

/* embedding.cu */
void titan_cuda_embedding_forward(float *out, const uint32_t *tokens, const float *wte, int N,
                                  int C);
void titan_cuda_embedding_backward(float *dwte, const float *dout, const uint32_t *tokens, int N,
                                   int C);

/* rmsnorm.cu */
void titan_cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                                int N, int C, float eps);
void titan_cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                 const float *weight, const float *rstd, int N, int C);

/* rope.cu */
void titan_cuda_rope_forward(float *out, const float *inp, const float *cos, const float *sin,
                             int B, int T, int NHX, int HD);
void titan_cuda_rope_backward(float *dinp, const float *dout, const float *cos, const float *sin,
                              int B, int T, int NHX, int HD);

/* attention.cu */
void titan_cuda_attention_forward(float *out, float *lse, const float *q, const float *k,
                                  const float *v, int B, int T, int NH, int NKV, int HD);
void titan_cuda_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                   const float *out, const float *lse, const float *q,
                                   const float *k, const float *v, int B, int T, int NH, int NKV,
                                   int HD);

/* swiglu.cu */
void titan_cuda_swiglu_forward(float *out, const float *h1, const float *h3, int N, int H);
void titan_cuda_swiglu_backward(float *dh1, float *dh3, const float *dout, const float *h1,
                                const float *h3, int N, int H);

/* cross_entropy.cu */
void titan_cuda_cross_entropy(float *losses, float *dlogits, const float *logits,
                              const uint32_t *targets, int N, int V, float dscale);

/* adamw.cu */
void titan_cuda_adamw_step(float *p, const float *g, float *m, float *v, size_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int64_t t);

/* elementwise.cu: launches an empty kernel and waits, so "no kernel image
 * for this GPU" shows up when the backend is opened, not in the first op */
cudaError_t titan_cuda_probe(void);

#endif
