/* matmul.cu - the linear layer's products through cuBLASLt:
 *   forward   out[N,OC]  = inp[N,IC] @ w[OC,IC]^T
 *             out[N,OC]  = resid[N,OC] + inp @ w^T (the residual add in the
 *                          epilogue: C = resid, D = out, beta 1)
 *   backward  dinp[N,IC] (+)= dout @ w,   dw[OC,IC] (+)= dout^T @ inp (dw fp32)
 * The backward's acc mask picks beta per output: 1 adds into it (+=), 0
 * overwrites it (=): cuBLASLt then reads nothing of C, so a NaN there does
 * not propagate, and the first writer of a gradient needs no zero fill.
 *
 * Always CUBLAS_COMPUTE_32F with an fp32 scale type, so accumulation is fp32:
 *   dt = f32:  A, B, C, D fp32. No TF32 (that would be COMPUTE_32F_FAST_TF32),
 *              results stay within ~1e-6 relative of the CPU backend.
 *   dt = bf16: A, B bf16 (tensor cores, fp32 accumulate); out and dinp bf16
 *              (the epilogue computes alpha*acc + beta*C in fp32 and rounds
 *              once; C = D but for the residual product); dw fp32 (C = D
 *              fp32 with bf16 A, B: a combination cuBLASLt supports).
 * A bf16 output must not be rounded more than once, so split-K algorithms
 * that reduce "in place" in the output type are excluded for it (the
 * preference's reduction-scheme mask allows only partials kept in the
 * compute type, or no split).
 *
 * Plan cache: the matmul descriptor, the three layouts and the heuristic's
 * first algorithm are made once per key (transposes, m, n, k, leading dims,
 * A/B type, C/D type, the three pointers' alignments) and kept in a small
 * table (CACHE_SLOTS, replaced round-robin). A model has a handful of
 * shapes, so after the first step every call is a table hit: no descriptor
 * creation and no heuristic query. The heuristic's choice depends only on
 * the key, so a hit and a fresh query run the same algorithm: the same
 * inputs give the same bits either way. The table, the handle and the
 * workspace are shared; a mutex serialises the lookup and the enqueue.
 *
 * Should the heuristic offer no algorithm for a key (odd leading dims with
 * 2-byte aligned bf16 pointers are the likely case), the plan falls back to
 * a plain tiled kernel here (fp32 accumulation in a fixed order, one
 * rounding), with one note on stderr per plan, instead of aborting.
 * TITAN_CUDA_GEMM_FALLBACK=1 in the environment when the backend opens sends
 * every matmul there (to test that kernel against the CPU backend). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "cuda_ops.cuh"

enum { WORKSPACE_BYTES = 32 << 20, CACHE_SLOTS = 128 };

/* All 4-byte fields, no padding: compared with memcmp. */
typedef struct {
    int32_t ta, tb, m, n, k, lda, ldb, ldc;
    int32_t ab_type, cd_type;           /* cudaDataType_t */
    uint32_t align_a, align_b, align_c; /* bytes; of C and D both (one layout) */
    /* float8 products (gemm_fp8): B's type (ab_type is A's), the scale
     * modes of A and B, fast accumulation; all 0 otherwise */
    int32_t fp8, b_type, a_scale_mode, b_scale_mode, fast_accum;
} gemm_key;

typedef struct {
    int used, fallback; /* fallback: no cuBLASLt algorithm, gemm_fallback_kernel */
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

static struct {
    int ready;
    cublasLtHandle_t lt;
    void *workspace;
    gemm_plan plans[CACHE_SLOTS];
    int next;           /* the slot a miss fills when the table is full */
    int force_fallback; /* TITAN_CUDA_GEMM_FALLBACK=1 */
} g_mm;
static pthread_mutex_t g_mm_mutex = PTHREAD_MUTEX_INITIALIZER;

int titan_cuda_matmul_open(char *msg, size_t msg_len) {
    if (g_mm.ready) return 0;
    cublasStatus_t st = cublasLtCreate(&g_mm.lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, msg_len, "cuBLASLt: cublasLtCreate: %s", cublasLtGetStatusString(st));
        return -1;
    }
    cudaError_t e = cudaMalloc(&g_mm.workspace, WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        cudaGetLastError();
        cublasLtDestroy(g_mm.lt);
        snprintf(msg, msg_len, "cudaMalloc of the cuBLASLt workspace (%d MiB): %s",
                 WORKSPACE_BYTES >> 20, cudaGetErrorString(e));
        return -1;
    }
    const char *fb = getenv("TITAN_CUDA_GEMM_FALLBACK");
    g_mm.force_fallback = fb && strcmp(fb, "1") == 0;
    g_mm.ready = 1;
    return 0;
}

/* The largest power of two (up to 256) dividing the address, at least the
 * element size: cuBLASLt assumes 256-byte aligned matrices unless told, and
 * the model passes pointers into larger buffers. */
static uint32_t alignment(const void *p, uint32_t elem) {
    uint32_t a = 256;
    while (a > elem && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

static const char *type_name(int32_t t) {
    return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_8F_E4M3 ? "e4m3" : t == CUDA_R_8F_E5M2 ? "e5m2" : "f32";
}

static void plan_destroy(gemm_plan *p) {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->la));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->op));
    p->used = 0;
}

/* The heuristic's first algorithm for the plan's descriptors under a
 * reduction-scheme mask; 0 when there is none. */
static int plan_algo(gemm_plan *p, uint32_t reduction_mask) {
    const gemm_key *k = &p->key;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = WORKSPACE_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction_mask, sizeof reduction_mask));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k->align_a, sizeof k->align_a));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k->align_b, sizeof k->align_b));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->align_c, sizeof k->align_c));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k->align_c, sizeof k->align_c));
    cublasLtMatmulHeuristicResult_t heur;
    memset(&heur, 0, sizeof heur);
    int found = 0;
    /* NOT_SUPPORTED is cuBLASLt's "no heuristic for this configuration":
     * no algorithm, as found = 0; and a result is usable only when its
     * state is SUCCESS */
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_mm.lt, p->op, p->la, p->lb, p->lc,
                                                       p->lc, pref, 1, &heur, &found);
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    found = st == CUBLAS_STATUS_SUCCESS && found > 0 && heur.state == CUBLAS_STATUS_SUCCESS;
    if (found) p->algo = heur.algo;
    return found;
}

/* A float8 product's descriptor attributes: fast accumulation and how A's
 * and B's scale pointers (set per call) are read. */
static void fp8_attributes(cublasLtMatmulDesc_t op, const gemm_key *key) {
    int8_t fast = (int8_t)key->fast_accum;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    /* scalar is the default: the attribute only for vectors (a cuBLAS
     * before 12.8 does not know it) */
    if (key->a_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &key->a_scale_mode,
                                                    sizeof key->a_scale_mode));
    if (key->b_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &key->b_scale_mode,
                                                    sizeof key->b_scale_mode));
}

static void fp8_scale_pointers(cublasLtMatmulDesc_t op, const float *a_scale, const float *b_scale) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
}

/* Fills a free slot with the descriptors, layouts and algorithm of key. */
static void plan_create(gemm_plan *p, const gemm_key *key) {
    p->key = *key;
    p->fallback = 0;
    cublasOperation_t ta = (cublasOperation_t)key->ta, tb = (cublasOperation_t)key->tb;
    cudaDataType_t ab = (cudaDataType_t)key->ab_type, cd = (cudaDataType_t)key->cd_type;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, ab, ta == CUBLAS_OP_N ? key->m : key->k,
                                            ta == CUBLAS_OP_N ? key->k : key->m, key->lda));
    if (key->fp8) {
        fp8_attributes(p->op, key);
        /* the heuristic sees scale pointers set; each call sets its own */
        fp8_scale_pointers(p->op, (const float *)g_mm.workspace, (const float *)g_mm.workspace);
    }
    cudaDataType_t bt = key->fp8 ? (cudaDataType_t)key->b_type : ab;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, bt, tb == CUBLAS_OP_N ? key->k : key->n,
                                            tb == CUBLAS_OP_N ? key->n : key->k, key->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, cd, key->m, key->n, key->ldc));
    p->used = 1;
    if (g_mm.force_fallback) {
        p->fallback = 1;
        return;
    }
    /* a bf16 output: no in-place split-K (partial sums rounded to bf16) */
    uint32_t mask = cd == CUDA_R_16BF ? (uint32_t)CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                      : (uint32_t)CUBLASLT_REDUCTION_SCHEME_MASK;
    /* none (not expected): the fallback kernel, which rounds once, rather
     * than an in-place split-K that would round partial sums to bf16 */
    if (plan_algo(p, mask)) return;
    p->fallback = 1;
    fprintf(stderr,
            "titan: cuda: note: cuBLASLt has no algorithm for m=%d n=%d k=%d op=%c%c "
            "ld=%d,%d,%d A %s B %s C/D %s%s alignment %u,%u,%u bytes; using %s\n",
            key->m, key->n, key->k, ta == CUBLAS_OP_N ? 'N' : 'T', tb == CUBLAS_OP_N ? 'N' : 'T',
            key->lda, key->ldb, key->ldc, type_name(key->ab_type),
            type_name(key->fp8 ? key->b_type : key->ab_type), type_name(key->cd_type),
            key->fp8 && key->a_scale_mode ? " rowwise scales" : "", key->align_a, key->align_b, key->align_c,
            key->fp8 ? "the emulated float8 product (dequantized operands, an fp32 GEMM)" : "the fallback kernel");
}

/* The plan of key: a hit, or a new one in a free slot or the next victim's.
 * Called with the mutex held. */
static gemm_plan *plan_get(const gemm_key *key) {
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (g_mm.plans[i].used && memcmp(&g_mm.plans[i].key, key, sizeof *key) == 0)
            return &g_mm.plans[i];
    gemm_plan *p = NULL;
    for (int i = 0; i < CACHE_SLOTS && !p; i++)
        if (!g_mm.plans[i].used) p = &g_mm.plans[i];
    if (!p) {
        p = &g_mm.plans[g_mm.next];
        g_mm.next = (g_mm.next + 1) % CACHE_SLOTS;
        plan_destroy(p);
    }
    plan_create(p, key);
    return p;
}

/* ------------------------------------------------------- fallback kernel */

#define FB_TILE 16

/* Column-major D[m,n] = op(A) op(B) + beta C (alpha 1; D may be C), one
 * thread per element of D, FB_TILE x FB_TILE blocks; k is walked in tiles
 * staged in shared memory as fp32, each sum in order l = 0..k-1. beta == 0 does not
 * read C. ta/tb: 1 for a transposed operand. Column tiles run along
 * blockIdx.x (n is the token count in the forward and dinp products, up to
 * 2^30), row tiles along blockIdx.y (m is a model dimension). */
template <typename AB, typename CD>
__global__ void gemm_fallback_kernel(int ta, int tb, int m, int n, int k, const AB *A, int lda,
                                     const AB *B, int ldb, float beta, const CD *C, CD *D,
                                     int ldc) {
    __shared__ float As[FB_TILE][FB_TILE + 1], Bs[FB_TILE][FB_TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * FB_TILE + tx, j = blockIdx.x * FB_TILE + ty;
    float acc = 0.0f;
    for (int l0 = 0; l0 < k; l0 += FB_TILE) {
        int al = l0 + ty; /* As[l][i] = op(A)(i, l) */
        float a = 0.0f, b = 0.0f;
        if (i < m && al < k)
            a = load_f32(A + (ta ? (size_t)i * lda + al : (size_t)al * lda + i));
        int bl = l0 + tx; /* Bs[j][l] = op(B)(l, j) */
        if (bl < k && j < n)
            b = load_f32(B + (tb ? (size_t)bl * ldb + j : (size_t)j * ldb + bl));
        As[ty][tx] = a;
        Bs[ty][tx] = b;
        __syncthreads();
        for (int l = 0; l < FB_TILE; l++) acc += As[l][tx] * Bs[ty][l];
        __syncthreads();
    }
    if (i < m && j < n) {
        size_t at = (size_t)j * ldc + i;
        store_f32(D + at, beta == 0.0f ? acc : acc + beta * load_f32(C + at));
    }
}

template <typename AB, typename CD>
static void gemm_fallback_launch(const gemm_key *key, const void *A, const void *B, float beta,
                                 const void *C, void *D) {
    unsigned gy = (unsigned)((key->m + FB_TILE - 1) / FB_TILE);
    if (gy > 65535)
        titan_cuda_panic(__FILE__, __LINE__, "gemm_fallback_kernel", "m above 65535 * 16");
    dim3 grid((unsigned)((key->n + FB_TILE - 1) / FB_TILE), gy), block(FB_TILE, FB_TILE);
    gemm_fallback_kernel<AB, CD><<<grid, block>>>(key->ta != CUBLAS_OP_N, key->tb != CUBLAS_OP_N,
                                                  key->m, key->n, key->k, (const AB *)A, key->lda,
                                                  (const AB *)B, key->ldb, beta, (const CD *)C,
                                                  (CD *)D, key->ldc);
    CUDA_CHECK_LAUNCH();
}

static void gemm_fallback(const gemm_key *key, const void *A, const void *B, float beta,
                          const void *C, void *D) {
    int ab16 = key->ab_type == CUDA_R_16BF, cd16 = key->cd_type == CUDA_R_16BF;
    if (ab16 && cd16) gemm_fallback_launch<bf16, bf16>(key, A, B, beta, C, D);
    else if (ab16) gemm_fallback_launch<bf16, float>(key, A, B, beta, C, D);
    else if (cd16) gemm_fallback_launch<float, bf16>(key, A, B, beta, C, D);
    else gemm_fallback_launch<float, float>(key, A, B, beta, C, D);
}

/* ------------------------------------------------------------------ gemm */

static size_t type_size(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

static cudaDataType_t lt_type(titan_dtype dt, const char *op) {
    if (dt == TITAN_DTYPE_F32) return CUDA_R_32F;
    if (dt == TITAN_DTYPE_BF16) return CUDA_R_16BF;
    titan_cuda_bad_dtype(__FILE__, __LINE__, op, dt);
}

/* Column-major D[m,n] = op(A)[m,k] op(B)[k,n] + beta C, as cuBLAS sees it;
 * A and B of type ab, C and D of type cd in one layout; C NULL is D. */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                 cudaDataType_t ab, const void *A, int lda, const void *B, int ldb,
                 cudaDataType_t cd, float beta, const void *C, void *D, int ldc) {
    if (m <= 0 || n <= 0) return;
    size_t es = type_size(cd);
    if (!C) C = D;
    if (k <= 0) { /* an empty sum: D = beta C */
        if (beta == 0.0f)
            CUDA_CHECK(cudaMemset2D(D, (size_t)ldc * es, 0, (size_t)m * es, (size_t)n));
        else if (C != D) /* beta 1: the residual's copy */
            CUDA_CHECK(cudaMemcpy2D(D, (size_t)ldc * es, C, (size_t)ldc * es, (size_t)m * es,
                                    (size_t)n, cudaMemcpyDeviceToDevice));
        return;
    }
    if (!g_mm.ready)
        titan_cuda_panic(__FILE__, __LINE__, "matmul", "cuBLASLt is not open (no backend created)");
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.ta = (int32_t)ta, key.tb = (int32_t)tb;
    key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.ab_type = (int32_t)ab, key.cd_type = (int32_t)cd;
    key.align_a = alignment(A, (uint32_t)type_size(ab));
    key.align_b = alignment(B, (uint32_t)type_size(ab));
    key.align_c = alignment(C, (uint32_t)es);
    uint32_t align_d = alignment(D, (uint32_t)es);
    if (align_d < key.align_c) key.align_c = align_d;
    float alpha = 1.0f;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    pthread_mutex_lock(&g_mm_mutex);
    gemm_plan *p = plan_get(&key);
    if (p->fallback)
        gemm_fallback(&key, A, B, beta, C, D);
    else
        st = cublasLtMatmul(g_mm.lt, p->op, &alpha, A, p->la, B, p->lb, &beta, C, p->lc, D, p->lc,
                            &p->algo, g_mm.workspace, WORKSPACE_BYTES, 0);
    pthread_mutex_unlock(&g_mm_mutex);
    CUBLAS_CHECK(st);
}

/* Row-major X[r,c] is column-major X^T[c,r] with the same pointer, so each
 * row-major product is computed as its transpose. */

/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T  <=>  out^T[OC,N] = op_T(w^T[IC,OC]) inp^T[IC,N],
 * where w^T and inp^T are w and inp read column-major. */
void titan_cuda_matmul_forward(titan_dtype dt, void *out, const void *inp, const void *w, int N,
                               int IC, int OC) {
    cudaDataType_t t = lt_type(dt, "matmul_forward");
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, t, w, IC, inp, IC, t, 0.0f, NULL, out, OC);
}

/* out[N,OC] = resid[N,OC] + inp @ w^T: the forward's product with C = resid,
 * beta 1 (the epilogue adds in fp32 and rounds once; out may be resid). */
void titan_cuda_matmul_add_forward(titan_dtype dt, void *out, const void *inp, const void *w,
                                   const void *resid, int N, int IC, int OC) {
    cudaDataType_t t = lt_type(dt, "matmul_add_forward");
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, t, w, IC, inp, IC, t, 1.0f, resid, out, OC);
}

/* dinp[N,IC] += dout[N,OC] @ w[OC,IC]  <=>  dinp^T[IC,N] += w^T[IC,OC] dout^T[OC,N];
 * dw[OC,IC] += dout^T @ inp            <=>  dw^T[IC,OC] += inp^T[IC,N] (dout^T)^T[N,OC]
 * dinp is dt, dw fp32; "=" instead of "+=" (beta 0) where acc lacks the bit. */
void titan_cuda_matmul_backward(titan_dtype dt, int acc, void *dinp, float *dw,
                                const void *dout, const void *inp, const void *w, int N, int IC,
                                int OC) {
    cudaDataType_t t = lt_type(dt, "matmul_backward");
    float beta_x = acc & TITAN_ACC_DX ? 1.0f : 0.0f, beta_w = acc & TITAN_ACC_DW ? 1.0f : 0.0f;
    if (dinp)
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, t, w, IC, dout, OC, t, beta_x, NULL, dinp, IC);
    if (dw)
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, t, inp, IC, dout, OC, CUDA_R_32F, beta_w, NULL,
             dw, IC);
}

/* ------------------------------------------------------- float8 products */

static cudaDataType_t fp8_type(titan_fp8_format f) {
    return f == TITAN_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

/* Row-major out[M,Nn] = beta C + P Q^T  <=>  column-major out^T[Nn,M] =
 * op_T(Q^T[K,Nn]) P^T[K,M]: A = Q transposed, B = P as it is, both with K
 * contiguous (the only layout float8 cuBLASLt takes on Hopper). A's scales
 * run along m (Q's rows), B's along n (P's rows): outer-vector scaling for
 * the rowwise recipes, one scalar each for tensorwise. */
int titan_cuda_gemm_fp8(titan_dtype cdt, void *out, const void *C, float beta, const titan_cuda_fp8_operand *P,
                        const titan_cuda_fp8_operand *Q, int fast_accum) {
    int M = P->rows, Nn = Q->rows, K = P->cols;
    if (Q->cols != K)
        titan_cuda_panic(__FILE__, __LINE__, "gemm_fp8", "operands with different contraction lengths");
    if (M <= 0 || Nn <= 0 || K <= 0) return 0; /* the caller's plain path handles empty products */
    if (!g_mm.ready)
        titan_cuda_panic(__FILE__, __LINE__, "gemm_fp8", "cuBLASLt is not open (no backend created)");
    cudaDataType_t cd = lt_type(cdt, "gemm_fp8");
    size_t es = type_size(cd);
    if (!C) C = out;
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.ta = (int32_t)CUBLAS_OP_T, key.tb = (int32_t)CUBLAS_OP_N;
    key.m = Nn, key.n = M, key.k = K, key.lda = K, key.ldb = K, key.ldc = Nn;
    key.ab_type = (int32_t)fp8_type(Q->format), key.cd_type = (int32_t)cd;
    key.fp8 = 1, key.b_type = (int32_t)fp8_type(P->format), key.fast_accum = fast_accum != 0;
    int32_t outer = (int32_t)CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, scalar = (int32_t)CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    key.a_scale_mode = Q->rowwise ? outer : scalar;
    key.b_scale_mode = P->rowwise ? outer : scalar;
    key.align_a = alignment(Q->q, 1);
    key.align_b = alignment(P->q, 1);
    key.align_c = alignment(C, (uint32_t)es);
    uint32_t align_d = alignment(out, (uint32_t)es);
    if (align_d < key.align_c) key.align_c = align_d;
    float alpha = 1.0f;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    pthread_mutex_lock(&g_mm_mutex);
    gemm_plan *p = plan_get(&key);
    int ran = !p->fallback;
    if (ran) {
        fp8_scale_pointers(p->op, Q->inv, P->inv);
        st = cublasLtMatmul(g_mm.lt, p->op, &alpha, Q->q, p->la, P->q, p->lb, &beta, C, p->lc, out, p->lc, &p->algo,
                            g_mm.workspace, WORKSPACE_BYTES, 0);
        /* refused only now, after the heuristic offered the algorithm (an
         * H100 did so for a misaligned scale pointer): this plan is the
         * emulated product from now on, with one note, not an abort */
        if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
            p->fallback = 1, ran = 0, st = CUBLAS_STATUS_SUCCESS;
            fprintf(stderr, "titan: cuda: note: cuBLASLt refused a float8 product it had an algorithm for (m=%d n=%d "
                    "k=%d); using the emulated float8 product\n", key.m, key.n, key.k);
        }
    }
    pthread_mutex_unlock(&g_mm_mutex);
    CUBLAS_CHECK(st);
    return ran;
}
