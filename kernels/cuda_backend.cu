/* cuda_backend.cu - the CUDA backend's op table: device memory, cuBLASLt
 * matmuls, and the kernels of the other kernels/ files. Built into libtitan-cuda.so,
 * which titan loads at run time (lib/backend/backend_loader.c), so a CPU-only
 * build never needs CUDA. The only exported symbol is
 * titan_backend_cuda_create (see backend.h).
 *
 * Matmuls run in fp32 with CUBLAS_COMPUTE_32F: no TF32, so results stay
 * within ~1e-6 relative of the CPU backend. The backend holds one device,
 * the default stream, one cuBLASLt handle and a 32 MiB workspace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "backend/backend.h"
#include "cuda_ops.cuh"

#define CUBLAS_CHECK(stmt)                                                                 \
    do {                                                                                   \
        cublasStatus_t cublas_check_st_ = (stmt);                                          \
        if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS)                                     \
            titan_cuda_panic(__FILE__, __LINE__, #stmt, cublasLtGetStatusString(cublas_check_st_)); \
    } while (0)

void titan_cuda_panic(const char *file, int line, const char *stmt, const char *what) {
    fprintf(stderr, "titan: cuda: %s:%d: %s: %s\n", file, line, stmt, what);
    fflush(stderr);
    abort();
}

enum { WORKSPACE_BYTES = 32 << 20 };

static struct {
    int ready, ordinal;
    cublasLtHandle_t lt;
    void *workspace;
} g_cuda;

/* ------------------------------------------------------------------ memory */

/* zero-filled; cudaMalloc aligns to 256 bytes. NULL on failure. */
static void *cuda_alloc(size_t nbytes) {
    void *p = NULL;
    if (cudaMalloc(&p, nbytes ? nbytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* clear it: an out-of-memory is the caller's to report */
        return NULL;
    }
    if (cudaMemset(p, 0, nbytes) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(void *p) {
    if (p) CUDA_CHECK(cudaFree(p));
}

static void cuda_zero(void *p, size_t nbytes) {
    if (nbytes) CUDA_CHECK(cudaMemset(p, 0, nbytes));
}

static void cuda_to_device(void *dst, const void *host_src, size_t nbytes) {
    if (nbytes) CUDA_CHECK(cudaMemcpy(dst, host_src, nbytes, cudaMemcpyHostToDevice));
}

static void cuda_to_host(void *host_dst, const void *src, size_t nbytes) {
    if (nbytes) CUDA_CHECK(cudaMemcpy(host_dst, src, nbytes, cudaMemcpyDeviceToHost));
}

/* ------------------------------------------------------------------ matmul */

/* The largest power of two (up to 256) dividing the address: cuBLASLt
 * assumes 256-byte aligned matrices unless told, and the model passes
 * pointers into larger buffers. */
static uint32_t alignment(const void *p) {
    uint32_t a = 256;
    while (a > 4 && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

/* Column-major C[m,n] = op(A)[m,k] op(B)[k,n] + beta C, as cuBLAS sees it.
 * Descriptors are made per call (a few microseconds of host time; a cache
 * keyed by shape is the follow-up). The heuristic's first choice for a
 * shape is stable, so the same shapes give the same bits. */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) { /* an empty sum: C = beta C */
        if (beta == 0.0f) {
            for (int j = 0; j < n; j++)
                CUDA_CHECK(cudaMemset(C + (size_t)j * ldc, 0, (size_t)m * sizeof(float)));
        }
        return;
    }
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k,
                                            ta == CUBLAS_OP_N ? k : m, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb == CUBLAS_OP_N ? k : n,
                                            tb == CUBLAS_OP_N ? n : k, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc));
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    uint32_t al[3] = {alignment(A), alignment(B), alignment(C)};
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], sizeof al[2]));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(g_cuda.lt, op, la, lb, lc, lc, pref, 1, &heur,
                                                &found));
    if (found == 0)
        titan_cuda_panic(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic",
                         "no fp32 algorithm for this shape");
    float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(g_cuda.lt, op, &alpha, A, la, B, lb, &beta, C, lc, C, lc,
                                &heur.algo, g_cuda.workspace, WORKSPACE_BYTES, 0));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
}

/* Row-major X[r,c] is column-major X^T[c,r] with the same pointer, so each
 * row-major product is computed as its transpose. */

/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T  <=>  out^T[OC,N] = op_T(w^T[IC,OC]) inp^T[IC,N],
 * where w^T and inp^T are w and inp read column-major. */
void titan_cuda_matmul_forward(float *out, const float *inp, const float *w, int N, int IC,
                               int OC) {
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, w, IC, inp, IC, 0.0f, out, OC);
}

/* dinp[N,IC] += dout[N,OC] @ w[OC,IC]  <=>  dinp^T[IC,N] += w^T[IC,OC] dout^T[OC,N];
 * dw[OC,IC] += dout^T @ inp            <=>  dw^T[IC,OC] += inp^T[IC,N] (dout^T)^T[N,OC] */
void titan_cuda_matmul_backward(float *dinp, float *dw, const float *dout, const float *inp,
                                const float *w, int N, int IC, int OC) {
    if (dinp) gemm(CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, w, IC, dout, OC, 1.0f, dinp, IC);
    if (dw) gemm(CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, inp, IC, dout, OC, 1.0f, dw, IC);
}

/* ------------------------------------------------------------------- table */

static const titan_backend cuda_backend = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .zero = cuda_zero,
    .to_device = cuda_to_device,
    .to_host = cuda_to_host,
    .matmul_forward = titan_cuda_matmul_forward,
    .matmul_backward = titan_cuda_matmul_backward,
    .add = titan_cuda_add,
    .embedding_forward = titan_cuda_embedding_forward,
    .embedding_backward = titan_cuda_embedding_backward,
    .rmsnorm_forward = titan_cuda_rmsnorm_forward,
    .rmsnorm_backward = titan_cuda_rmsnorm_backward,
    .rope_forward = titan_cuda_rope_forward,
    .rope_backward = titan_cuda_rope_backward,
    .attention_forward = titan_cuda_attention_forward,
    .attention_backward = titan_cuda_attention_backward,
    .swiglu_forward = titan_cuda_swiglu_forward,
    .swiglu_backward = titan_cuda_swiglu_backward,
    .cross_entropy = titan_cuda_cross_entropy,
    .adamw_step = titan_cuda_adamw_step,
    .sumsq = titan_cuda_sumsq,
    .scale = titan_cuda_scale,
};

/* "name: cause" of a failed CUDA call, into msg */
static const titan_backend *fail(char *msg, size_t len, const char *what, cudaError_t e) {
    snprintf(msg, len, "no GPU (%s: %s: %s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();
    return NULL;
}

extern "C" __attribute__((visibility("default"))) const titan_backend *
titan_backend_cuda_create(size_t table_size, int ordinal, char *msg, size_t msg_len) {
    if (table_size != sizeof(titan_backend)) {
        snprintf(msg, msg_len,
                 "libtitan-cuda.so was built from another backend.h (op table of %zu bytes, "
                 "this program's has %zu): rebuild both",
                 sizeof(titan_backend), table_size);
        return NULL;
    }
    if (g_cuda.ready) {
        if (ordinal != g_cuda.ordinal) {
            snprintf(msg, msg_len, "already opened on GPU %d, cannot also open GPU %d",
                     g_cuda.ordinal, ordinal);
            return NULL;
        }
    } else {
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess) return fail(msg, msg_len, "cudaGetDeviceCount", e);
        if (count == 0) {
            snprintf(msg, msg_len, "no GPU (cudaGetDeviceCount: 0 devices)");
            return NULL;
        }
        if (ordinal < 0 || ordinal >= count) {
            snprintf(msg, msg_len, "GPU %d requested, %d visible (0..%d)", ordinal, count,
                     count - 1);
            return NULL;
        }
        if ((e = cudaSetDevice(ordinal)) != cudaSuccess) return fail(msg, msg_len, "cudaSetDevice", e);
        /* kernels for this GPU? (the .so holds sm_80, sm_90 code and compute_90 PTX) */
        if ((e = titan_cuda_probe()) != cudaSuccess) return fail(msg, msg_len, "probe kernel", e);
        if (cublasLtCreate(&g_cuda.lt) != CUBLAS_STATUS_SUCCESS) {
            snprintf(msg, msg_len, "cuBLASLt: cublasLtCreate failed");
            return NULL;
        }
        if ((e = cudaMalloc(&g_cuda.workspace, WORKSPACE_BYTES)) != cudaSuccess) {
            cublasLtDestroy(g_cuda.lt);
            return fail(msg, msg_len, "cudaMalloc (cuBLASLt workspace)", e);
        }
        g_cuda.ordinal = ordinal;
        g_cuda.ready = 1;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, g_cuda.ordinal));
    snprintf(msg, msg_len, "GPU %d: %s, sm_%d%d, %.1f GiB", g_cuda.ordinal, prop.name, prop.major,
             prop.minor, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return &cuda_backend;
}
