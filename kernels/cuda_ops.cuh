/* cuda_ops.cuh - the CUDA backend's ops, one .cu file per subject; cuda_backend.cu
 * puts them in the titan_backend table (lib/backend/backend.h). Internal to
 * libtitan-cuda.so, which is self-contained: it shares only backend.h's types
 * with the rest of titan.
 *
 * Every op has the CPU op's name with "cuda" for "cpu" and the same arguments
 * (titan_cpu_rmsnorm_forward <-> titan_cuda_rmsnorm_forward); the kernels are
 * named <op>_kernel. Pointers are device pointers. All work is queued on the
 * default stream; to_host, sumsq and memory synchronise.
 *
 * Storage types: the compute ops take the table's titan_dtype dt first. Their
 * kernels are templates on the storage type S (float or __nv_bfloat16) that
 * load with load_f32, compute in fp32 exactly as the fp32 kernel does, and
 * write each output once with store_f32 (round to nearest even): for T =
 * float the code and bits are the fp32 op's. TITAN_CUDA_DISPATCH turns dt
 * into S at each entry point (S, not T: T is the sequence length).
 *
 * Gradients: a backward op's acc mask (backend.h, TITAN_ACC_DX / _DW) says
 * which outputs it adds into (+=, store_grad with add: read, add in fp32,
 * round once) and which it overwrites (=, without: never read, so they may
 * hold NaN on entry). The flag is the same for a whole launch, so kernels
 * take it at run time (a uniform branch), not as a template parameter.
 * Overwriting stores the term alone, which is the sum into zeros bit for bit
 * but for the sign of a zero (0 + x == x).
 *
 * Determinism: no float atomics anywhere. Each output element is written by
 * one thread, reductions run in fixed trees whose shape depends only on the
 * tensor shapes (never on the GPU's SM count), so the same inputs give the
 * same bits on every run. The exception: bf16 attention through cuDNN,
 * whose backward adds dQ with atomics. titan-train takes it (the faster)
 * unless training.deterministic (set_option(TITAN_OPT_ATTENTION_CUDNN)); TITAN_CUDA_ATTENTION=cudnn|titan forces
 * the choice (attention.cu).
 *
 * Errors: the table's ops return void, so a failing CUDA or cuBLAS call
 * inside an op is a dead end; CUDA_CHECK / CUBLAS_CHECK print the statement,
 * file:line and CUDA's message, then abort (like TITAN_ASSERT). */
#ifndef TITAN_KERNELS_CUDA_OPS_CUH
#define TITAN_KERNELS_CUDA_OPS_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/backend.h" /* TITAN_ACC_DX, TITAN_ACC_DW */
#include "core/error.h"
#include "tensor/dtype.h"

/* cuda_backend.cu: prints "titan: cuda: file:line: statement: what" and aborts */
[[noreturn]] void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what);

/* A call's status: ok, or the end of the process naming the statement (text,
 * unexpanded: the callers stringify it) and describe(status). */
#define TITAN_STATUS_CHECK_(type, ok, describe, stmt, text)                         \
    do {                                                                            \
        type status_check_ = (stmt);                                                \
        if (status_check_ != (ok)) titan_cuda_panic(__FILE__, __LINE__, text, describe(status_check_)); \
    } while (0)

#define CUDA_CHECK(stmt) TITAN_STATUS_CHECK_(cudaError_t, cudaSuccess, cudaGetErrorString, stmt, #stmt)

/* after a <<<...>>> launch: catches bad configurations at the launch site */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* a cuBLASLt call (where cublasLt.h is included: matmul.cu, tests/gpu) */
#define CUBLAS_CHECK(stmt) \
    TITAN_STATUS_CHECK_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString, stmt, #stmt)

/* cuda_backend.cu: nbytes of scratch for an op, from the stream-ordered pool
 * on the default stream (give it back with cudaFreeAsync(p, 0)). The ops
 * return void, so out of GPU memory cannot be an error they return: it ends
 * the process with exit status 6 (TITAN_ERR_NOMEM, as an allocation the
 * caller checks) and a message that names the op and the size, never an
 * abort. The pool keeps its memory, so only a run's first step can get here. */
void *titan_cuda_scratch(size_t nbytes, const char *op);

/* cuda_backend.cu: an op was called with a dt other than f32 / bf16; aborts */
[[noreturn]] void titan_cuda_bad_dtype(const char *file, int line, const char *op, titan_dtype dt);

/* Runs the statement(s) with the typedef S the storage type of dt:
 *   TITAN_CUDA_DISPATCH(dt, "add", add_launch<S>((S *)out, (const S *)a, (const S *)b, n));
 * Any other dt aborts, naming the op. */
#define TITAN_CUDA_DISPATCH(dt, op, ...)                                 \
    do {                                                                 \
        if ((dt) == TITAN_DTYPE_F32) {                                   \
            typedef float S;                                             \
            __VA_ARGS__;                                                 \
        } else if ((dt) == TITAN_DTYPE_BF16) {                           \
            typedef __nv_bfloat16 S;                                     \
            __VA_ARGS__;                                                 \
        } else {                                                         \
            titan_cuda_bad_dtype(__FILE__, __LINE__, (op), (dt));        \
        }                                                                \
    } while (0)

typedef __nv_bfloat16 bf16;

/* ------------------------------------------------------- device helpers */

#define WARP 32
#define FULL_MASK 0xffffffffu

static inline unsigned titan_cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < 65536 ? b : 65536); /* grid-stride loops cover the rest */
}

/* Storage <-> fp32. Loads widen exactly; a store rounds once, to nearest
 * even (the CPU's titan_f32_to_bf16), so "+=" on bf16 is
 * store_f32(p, load_f32(p) + x): read, add in fp32, round. */
static __device__ __forceinline__ float load_f32(const float *p) { return *p; }
static __device__ __forceinline__ float load_f32(const bf16 *p) { return __bfloat162float(*p); }
static __device__ __forceinline__ void store_f32(float *p, float x) { *p = x; }
static __device__ __forceinline__ void store_f32(bf16 *p, float x) { *p = __float2bfloat16_rn(x); }

/* A gradient element under the acc mask (see the top): p += x (add) or p = x */
template <typename S>
static __device__ __forceinline__ void store_grad(bool add, S *p, float x) {
    store_f32(p, add ? load_f32(p) + x : x);
}

/* 16-byte packs for the memory-bound kernels: one 128-bit access instead of
 * 4 (fp32) or 8 (bf16) narrow ones. TITAN_PACK(S) elements of S fill 16
 * bytes. load_f32_vec / store_f32_vec move N elements (whole 16-byte chunks)
 * and widen or round each one exactly as load_f32 / store_f32 do, so a
 * kernel applying its per-element arithmetic to the unpacked values keeps
 * the scalar kernel's bits. p must be 16-byte aligned: the host checks
 * titan_cuda_aligned16 and otherwise takes the kernel's scalar path. */
#define TITAN_PACK(S) ((int)(16 / sizeof(S)))

template <typename S>
union titan_pack16 {
    uint4 u;
    S e[TITAN_PACK(S)];
};

template <int N, typename S>
static __device__ __forceinline__ void load_f32_vec(const S *p, float (&x)[N]) {
    static_assert(N % TITAN_PACK(S) == 0, "whole 16-byte chunks");
#pragma unroll
    for (int c = 0; c < N / TITAN_PACK(S); c++) {
        titan_pack16<S> k;
        k.u = reinterpret_cast<const uint4 *>(p)[c];
#pragma unroll
        for (int i = 0; i < TITAN_PACK(S); i++) x[c * TITAN_PACK(S) + i] = load_f32(&k.e[i]);
    }
}

template <int N, typename S>
static __device__ __forceinline__ void store_f32_vec(S *p, const float (&x)[N]) {
    static_assert(N % TITAN_PACK(S) == 0, "whole 16-byte chunks");
#pragma unroll
    for (int c = 0; c < N / TITAN_PACK(S); c++) {
        titan_pack16<S> k;
#pragma unroll
        for (int i = 0; i < TITAN_PACK(S); i++) store_f32(&k.e[i], x[c * TITAN_PACK(S) + i]);
        reinterpret_cast<uint4 *>(p)[c] = k.u;
    }
}

/* host: whether every pointer is 16-byte aligned (NULL is) */
template <typename... P>
static inline bool titan_cuda_aligned16(const P *...p) {
    return (((uintptr_t)p | ... | (uintptr_t)0) & 15) == 0;
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

/* fp8.cu: torchao's dynamic float8 cast of an operand (tensor/fp8.h) into
 * scratch from the pool. q is [rows, cols] as the GEMM reads it (the
 * source transposed when asked); scale[ns] is torchao's scale, inv[ns] its
 * reciprocal (the dequant scale cuBLASLt takes); rowwise: one per row of q,
 * else one. Release gives the scratch back. */
typedef struct {
    uint8_t *q;
    float *scale, *inv;
    int rows, cols, rowwise;
    titan_fp8_format format;
} titan_cuda_fp8_operand;
static inline int titan_cuda_fp8_nscales(titan_fp8_axis axis, int rows, int cols) {
    return axis == TITAN_FP8_ROWS ? rows : axis == TITAN_FP8_COLS ? cols : 1;
}
/* amax: the caller's (tensor parallelism's, reduced over the group), or
 * NULL: x's own */
void titan_cuda_fp8_cast(titan_cuda_fp8_operand *o, titan_dtype dt, const void *x, int rows, int cols,
                         titan_fp8_axis axis, titan_fp8_format f, int pow2, int transpose, const float *amax);
/* x's tensorwise codes in both layouts, from one read of x where the
 * shape allows: o [rows, cols] and ot [cols, rows], the same scale (dy's
 * casts for grad_in and grad_w) */
void titan_cuda_fp8_cast_both(titan_cuda_fp8_operand *o, titan_cuda_fp8_operand *ot, titan_dtype dt, const void *x,
                              int rows, int cols, titan_fp8_format f, int pow2, const float *amax);
void titan_cuda_fp8_release(titan_cuda_fp8_operand *o);
/* 1: the element-wise transposed casts and a cast a layout (as
 * TITAN_CUDA_FP8_CAST=simple), 0: the tiled ones; for the checks that
 * time or compare one against the other */
void titan_cuda_fp8_set_simple(int on);
/* TITAN_CUDA_FP8_CAST read now: an unknown value ends the process (exit 2) */
void titan_cuda_fp8_check_env(void);
/* a tensorwise operand's scale repeated on each row (the same numbers:
 * float8 cuBLASLt scales A and B alike, both scalars or both vectors) */
void titan_cuda_fp8_rowwise(titan_cuda_fp8_operand *o);
/* out[rows, cols] = fp32(decode(q) / scale) (torchao's emulated operand) */
void titan_cuda_fp8_dequantize(float *out, const titan_cuda_fp8_operand *o);
void titan_cuda_fp8_quantize(titan_dtype dt, uint8_t *q, float *scale, const void *x, int rows, int cols,
                             titan_fp8_axis axis, titan_fp8_format f, int pow2, const float *amax);
void titan_cuda_fp8_dequantize_to(titan_dtype dt, void *out, const uint8_t *q, const float *scale, size_t n,
                                  titan_fp8_format f);
void titan_cuda_fp8_amax(titan_dtype dt, float *amax, const void *x, int rows, int cols, titan_fp8_axis axis);
/* fp8_matmul.cu: backend.h's float8 linears */
int titan_cuda_fp8_matmul_forward(titan_dtype dt, const titan_fp8_recipe *r, void *out, const void *inp,
                                  const void *w, const void *resid, int N, int IC, int OC);
int titan_cuda_fp8_matmul_backward(titan_dtype dt, const titan_fp8_recipe *r, int acc, void *dinp, float *dw,
                                   const void *dout, const void *inp, const void *w, int N, int IC, int OC);

/* elementwise.cu */
void titan_cuda_add(titan_dtype dt, void *out, const void *a, const void *b, size_t n);
void titan_cuda_scale(float *x, size_t n, float s);
/* dst[i] = src[i] between f32 and bf16 (round to nearest even); same type: a copy */
void titan_cuda_convert(void *dst, titan_dtype dst_type, const void *src, titan_dtype src_type,
                        size_t n);

/* reductions.cu */
double titan_cuda_sumsq(const float *x, size_t n);
void titan_cuda_sumsq_into(double *out, const float *x, size_t n);

/* matmul.cu (cuBLASLt, which owns the handle, workspace and descriptor cache).
 * open: once, on the current device; 0, or -1 with the cause in msg. */
int titan_cuda_matmul_open(char *msg, size_t msg_len);
void titan_cuda_matmul_forward(titan_dtype dt, void *out, const void *inp, const void *w, int N,
                               int IC, int OC);
void titan_cuda_matmul_add_forward(titan_dtype dt, void *out, const void *inp, const void *w,
                                   const void *resid, int N, int IC, int OC);
void titan_cuda_matmul_backward(titan_dtype dt, int acc, void *dinp, float *dw,
                                const void *dout, const void *inp, const void *w, int N, int IC,
                                int OC);
/* Row-major out[M,Nn] = beta C + P[M,K] Q[Nn,K]^T from float8 operands
 * (M = P's rows, Nn = Q's, K their cols) with their dequant scales, fp32
 * accumulation, out and C of type cdt (f32 or bf16; C NULL is out, beta 0
 * reads nothing); fast_accum: cuBLASLt's float8 fast accumulation. Returns
 * 1, or 0 (nothing run) when cuBLASLt has no algorithm for it. */
int titan_cuda_gemm_fp8(titan_dtype cdt, void *out, const void *C, float beta, const titan_cuda_fp8_operand *P,
                        const titan_cuda_fp8_operand *Q, int fast_accum);

/* embedding.cu */
void titan_cuda_embedding_forward(titan_dtype dt, void *out, const uint32_t *tokens,
                                  const void *wte, int N, int C, int V);
void titan_cuda_embedding_backward(titan_dtype dt, int acc, float *dwte, const void *dout,
                                   const uint32_t *tokens, int N, int C, int V);

/* rmsnorm.cu */
void titan_cuda_rmsnorm_forward(titan_dtype dt, void *out, float *rstd, const void *inp,
                                const void *weight, int N, int C, float eps);
void titan_cuda_rmsnorm_backward(titan_dtype dt, int acc, void *dinp, float *dweight,
                                 const void *dout, const void *inp, const void *weight,
                                 const float *rstd, int N, int C);

/* rope.cu */
void titan_cuda_rope_forward(titan_dtype dt, void *out, const void *inp, const float *cos,
                             const float *sin, int B, int T, int NHX, int HD);
void titan_cuda_rope_backward(titan_dtype dt, int acc, void *dinp, const void *dout,
                              const float *cos, const float *sin, int B, int T, int NHX, int HD);

/* attention.cu: the table's ops (backend.h: q [B,Tq,NH,HD] the last Tq of
 * the Tk positions of k, v [B,Tk,NKV,HD]) */
void titan_cuda_attention_forward(titan_dtype dt, void *out, float *lse, const void *q,
                                  const void *k, const void *v, int B, int Tq, int Tk, int NH,
                                  int NKV, int HD);
void titan_cuda_attention_backward(titan_dtype dt, int acc, void *dq, void *dk, void *dv,
                                   const void *dout, const void *out, const float *lse,
                                   const void *q, const void *k, const void *v, int B, int Tq,
                                   int Tk, int NH, int NKV, int HD);
/* the same with query 0 at key position off >= 0 (backend.h's _at ops) */
void titan_cuda_attention_forward_at(titan_dtype dt, void *out, float *lse, const void *q, const void *k,
                                     const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD);
void titan_cuda_attention_backward_at(titan_dtype dt, int acc, void *dq, void *dk, void *dv, const void *dout,
                                      const void *out, const float *lse, const void *q, const void *k,
                                      const void *v, int B, int Tq, int Tk, int off, int NH, int NKV, int HD);
/* attention_merge.cu: backend.h's attention_merge */
void titan_cuda_attention_merge(titan_dtype dt, float *acc, float *acc_lse, const void *out, const float *lse,
                                int B, int T, int NH, int HD, int first);
/* Whether bf16 attention may go through cuDNN (1) or keeps to titan's
 * kernels (0, the default): the table's set_option(TITAN_OPT_ATTENTION_CUDNN).
 * Also reads TITAN_CUDA_ATTENTION, which overrides it (a bad value ends
 * the process). */
void titan_cuda_set_attention_cudnn(int prefer);

/* attention_tc.cu: bf16 on tensor cores (mma.sync), HD 64 and 128, any
 * Tq <= Tk; q, k, v, dout 16-byte aligned, out, dq, dk, dv 4-byte aligned
 * (attention.cu's entry points choose it; same contract as the table's
 * attention ops, but acc is a flag: nonzero adds into dq, dk, dv, 0
 * overwrites them) */
int titan_cuda_attention_tc_supported(int HD);
void titan_cuda_attention_tc_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                     const bf16 *v, int B, int Tq, int Tk, int NH, int NKV,
                                     int HD);
void titan_cuda_attention_tc_backward(int acc, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                      const bf16 *out, const float *lse, const bf16 *q,
                                      const bf16 *k, const bf16 *v, int B, int Tq, int Tk, int NH,
                                      int NKV, int HD);
/* the same with query 0 at key position off >= 0 (the plain ones: Tk - Tq) */
void titan_cuda_attention_tc_forward_at(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                        const bf16 *v, int B, int Tq, int Tk, int off, int NH,
                                        int NKV, int HD);
void titan_cuda_attention_tc_backward_at(int acc, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout,
                                         const bf16 *out, const float *lse, const bf16 *q,
                                         const bf16 *k, const bf16 *v, int B, int Tq, int Tk, int off,
                                         int NH, int NKV, int HD);

/* attention_cudnn.cu: bf16 attention through cuDNN's fused flash attention
 * graphs, called by attention.cu when cuDNN is wanted. Same contract as
 * attention_tc's (Tq < Tk with cuDNN's bottom-right causal mask); false
 * when the call does not apply (HD not a multiple of 8 up to 128, a
 * pointer not 16-byte aligned, or before cuDNN 9.16 Tq or Tk not a
 * multiple of 128), and the caller runs its own kernels. cuDNN missing,
 * or a graph it refuses: false with a note, or where required the end of
 * the process with the reason. Not bitwise repeatable in the backward
 * (cuDNN adds dQ with atomics). */
bool titan_cuda_attention_cudnn_forward(bool required, bf16 *out, float *lse, const bf16 *q,
                                        const bf16 *k, const bf16 *v, int B, int Tq, int Tk,
                                        int NH, int NKV, int HD);
bool titan_cuda_attention_cudnn_backward(bool required, int add, bf16 *dq, bf16 *dk,
                                         bf16 *dv, const bf16 *dout, const bf16 *out,
                                         const float *lse, const bf16 *q, const bf16 *k,
                                         const bf16 *v, int B, int Tq, int Tk, int NH, int NKV,
                                         int HD);

/* swiglu.cu */
void titan_cuda_swiglu_forward(titan_dtype dt, void *out, const void *h1, const void *h3, int N,
                               int H);
void titan_cuda_swiglu_backward(titan_dtype dt, int acc, void *dh1, void *dh3,
                                const void *dout, const void *h1, const void *h3, int N, int H);

/* cross_entropy.cu */
void titan_cuda_cross_entropy(titan_dtype dt, float *losses, void *dlogits, const void *logits,
                              const uint32_t *targets, int N, int V, float dscale,
                              const float *lse);
void titan_cuda_logsumexp(titan_dtype dt, float *lse, const void *logits, int N, int V);

/* adamw.cu */
void titan_cuda_adamw_step(float *p, void *p_bf16, const float *g, float gscale, float *m,
                           float *v, size_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, int64_t t);

/* galore.cu: GaLore's low-rank Adam and update (backend.h) */
void titan_cuda_galore_adam(float *m, float *v, float *low, size_t n, float b1, float w1, float b2, float w2,
                            float eps);
void titan_cuda_galore_update(float *p, const float *upd, size_t n, float scale, float step, float decay);

/* linalg.cu: cuSOLVER (backend.h's qr_orthonormal, svd_thin, svd_signs) */
int titan_cuda_qr_orthonormal(float *a, int rows, int cols);
int titan_cuda_svd_thin(const float *a, int rows, int cols, int k, float *u, float *vt);
void titan_cuda_svd_signs(float *u, float *vt, int rows, int cols, int k);

/* cuda_backend.cu: the stream adamw_step queues on (backend.h's
 * side_stream: the side stream while it is on, else the default one) */
cudaStream_t titan_cuda_optimizer_stream(void);

/* cuda_backend.cu: the backend's GPU; the accounting behind memory() of
 * committed releasable memory (bytes mapped, whole granules) */
int titan_cuda_device(void);
void titan_cuda_mem_commit(size_t nbytes);
void titan_cuda_mem_uncommit(size_t nbytes);
/* 0 when nbytes more would take this process past its share of a GPU that
 * several ranks share (TITAN_OPT_DEVICE_SHARE; the first refusal says why on
 * stderr), else 1 */
int titan_cuda_mem_share_allows(size_t nbytes);

/* cuda_backend.cu: records a titan error for the calling thread. The library
 * cannot call titan_error itself (it lives in the executable, which does not
 * export it to a dlopen'ed library): the loader hands it over through the
 * exported titan_cuda_set_error_fn; before that, the message goes to stderr. */
void titan_cuda_error(titan_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* vmm.cu: releasable buffers (backend.h's alloc_releasable, commit, release)
 * on CUDA's virtual memory management, or fallback_alloc's ordinary buffers
 * where the driver or device lacks it. vmm_free: 1 when p was a VMM buffer,
 * now freed; 0 otherwise (a fallback buffer is forgotten here, and the caller
 * frees it as the ordinary allocation it is). */
void *titan_cuda_vmm_alloc(size_t nbytes, void *(*fallback_alloc)(size_t));
int titan_cuda_vmm_commit(void *p, size_t nbytes);
void titan_cuda_vmm_release(void *p, size_t nbytes);
int titan_cuda_vmm_free(void *p);

/* ipc.cu: backend.h's ipc_export, ipc_open, ipc_close, copy, sum_ranks
 * and host_call (the shared windows of async tensor parallelism) */
int titan_cuda_ipc_export(void *p, void *handle);
void *titan_cuda_ipc_open(const void *handle);
void titan_cuda_ipc_close(void *p);
void titan_cuda_copy(void *dst, const void *src, size_t nbytes);
void titan_cuda_sum_ranks(titan_dtype dt, void *out, const void *const *src, int n, size_t m);
void titan_cuda_host_call(void (*fn)(void *arg), void *arg);

/* elementwise.cu: launches an empty kernel and waits, so "no kernel image
 * for this GPU" shows up when the backend is opened, not in the first op */
cudaError_t titan_cuda_probe(void);

#endif
