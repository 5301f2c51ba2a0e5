/* cublaslt_emu.cpp - host definitions of the cuBLASLt calls kernels/matmul.cu
 * makes, for the CUDA emulator (cuda_emu.h): cublasLtMatmul as a plain
 * column-major GEMM, D = alpha op(A) op(B) + beta C, by this file's reading
 * of the cuBLASLt documentation and header. <cublasLt.h> declares every
 * function (C linkage), so the compiler checks each definition against the
 * real API.
 *
 * Modelled: compute type CUBLAS_COMPUTE_32F with scale type CUDA_R_32F,
 * host pointer mode, TRANSA/TRANSB N or T, column-major layouts (rows and
 * cols of the stored matrix, before the op; ld >= max(1, rows)), and the
 * type combinations A/B -> C/D fp32 -> fp32, bf16 -> bf16, bf16 -> fp32.
 * Each element of D is a float sum over k in increasing order, then
 * alpha * sum + beta * C in float, rounded once to D's type (bf16: nearest
 * even). beta == 0 reads nothing of C (a NaN there does not propagate). In
 * place (C == D) needs C's layout to equal D's, ld included.
 * The heuristic returns one algorithm (no split-K, no workspace) that
 * records the preference's minimum alignments and the types: cublasLtMatmul
 * refuses (INVALID_VALUE) pointers less aligned than those (the contract the
 * real heuristic relies on) or an algorithm found for other types; a null
 * algo is an implicit query. Before touching memory, every extent read or
 * written (A, B, C when read, D, the workspace) must lie in one live device
 * allocation (emu::check_device aborts otherwise); the product runs under an
 * emu::DeviceScope, synchronously (the stream is ignored).
 * Limits: other descriptor attributes (epilogues, bias, scale pointers) are
 * refused with NOT_SUPPORTED at SetAttribute, where the real library would
 * accept them; layouts stay column-major and unbatched (no
 * cublasLtMatrixLayoutSetAttribute: a new call fails to link); the
 * preference's reduction mask, impl mask and wave count are stored or
 * ignored (the one algorithm never splits K). The sum is exact in order only
 * without contraction (the build has -ffp-contract=off). The GPU sums in
 * another order (tensor-core tiles, maybe split K): results match it to
 * rounding, not bit for bit. Nothing is printed. */
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <new>
#include <type_traits>
#include <vector>

#include "cuda_emu.h"

/* the handle's struct, which the header leaves incomplete */
struct cublasLtContext { uint32_t magic; };

namespace {
enum : uint32_t {
    HANDLE_MAGIC = 0x4c74486e, LAYOUT_MAGIC = 0x4c744c79, DESC_MAGIC = 0x4c744473,
    PREF_MAGIC = 0x4c745072, ALGO_MAGIC = 0x4c74416c,
};

/* Our state inside the semi-opaque structs' data arrays (memcpy in and out:
 * the header gives only uint64_t data[N]); align[]: A, B, C, D in bytes. */
struct Layout { uint32_t magic; int32_t type; uint64_t rows, cols; int64_t ld; };
struct Desc { uint32_t magic; int32_t compute, scale, pointer_mode, ta, tb; };
struct Pref { uint32_t magic, reduction_mask; uint64_t max_workspace; uint32_t align[4]; };
struct Algo { uint32_t magic; int32_t ab, cd; uint32_t align[4]; };

template <typename S, typename O>
bool load(const O *o, uint32_t magic, S *s) {
    static_assert(sizeof(S) <= sizeof(o->data) && std::is_trivially_copyable<S>::value, "fits");
    if (!o) return false;
    memcpy(s, o->data, sizeof *s);
    return s->magic == magic;
}
template <typename S, typename O>
void store(O *o, const S &s) { memcpy(o->data, &s, sizeof s); }

template <typename O, typename S>
cublasStatus_t create(O **out, const S &s) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    O *o = new (std::nothrow) O();
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    store(o, s);
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}
template <typename S, typename O>
cublasStatus_t destroy(O *o, uint32_t magic) {
    S s;
    if (!o) return CUBLAS_STATUS_SUCCESS;
    if (!load(o, magic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
    memset(o->data, 0, sizeof o->data); /* a later use sees no magic */
    delete o;
    return CUBLAS_STATUS_SUCCESS;
}

/* an attribute's value: buf must hold exactly a T */
template <typename T>
bool attr(const void *buf, size_t size, T *v) {
    if (!buf || size != sizeof(T)) return false;
    memcpy(v, buf, sizeof(T));
    return true;
}

bool handle_ok(cublasLtHandle_t h) { return h && h->magic == HANDLE_MAGIC; }
size_t type_size(int32_t t) { return t == CUDA_R_16BF ? 2 : 4; }

/* A checked problem: D[m,n] = op(A)[m,k] op(B)[k,n] + C[m,n]. */
struct Problem {
    Desc d;
    Layout a, b, c, dd;
    uint64_t m, n, k;
};

cublasStatus_t problem(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                       cublasLtMatrixLayout_t ld, Problem *p) {
    if (!load(op, DESC_MAGIC, &p->d) || !load(la, LAYOUT_MAGIC, &p->a) ||
        !load(lb, LAYOUT_MAGIC, &p->b) || !load(lc, LAYOUT_MAGIC, &p->c) ||
        !load(ld, LAYOUT_MAGIC, &p->dd))
        return CUBLAS_STATUS_INVALID_VALUE;
    const Desc &d = p->d;
    if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F ||
        d.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((d.ta != CUBLAS_OP_N && d.ta != CUBLAS_OP_T) ||
        (d.tb != CUBLAS_OP_N && d.tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const int32_t ab = p->a.type, cd = p->dd.type;
    if (p->b.type != ab || p->c.type != cd) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!((ab == CUDA_R_32F && cd == CUDA_R_32F) || (ab == CUDA_R_16BF && cd == CUDA_R_16BF) ||
          (ab == CUDA_R_16BF && cd == CUDA_R_32F)))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    for (const Layout *l : {&p->a, &p->b, &p->c, &p->dd}) {
        if (l->rows > INT32_MAX || l->cols > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
        if (l->ld < 1 || (uint64_t)l->ld < l->rows) return CUBLAS_STATUS_INVALID_VALUE;
    }
    p->m = p->dd.rows, p->n = p->dd.cols;
    p->k = d.ta == CUBLAS_OP_N ? p->a.cols : p->a.rows;
    const uint64_t am = d.ta == CUBLAS_OP_N ? p->a.rows : p->a.cols;
    const uint64_t bk = d.tb == CUBLAS_OP_N ? p->b.rows : p->b.cols;
    const uint64_t bn = d.tb == CUBLAS_OP_N ? p->b.cols : p->b.rows;
    if (am != p->m || bk != p->k || bn != p->n || p->c.rows != p->m || p->c.cols != p->n)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

/* elements from the first to one past the last of a column-major matrix */
size_t extent(const Layout &l) {
    return l.rows && l.cols ? (size_t)((l.cols - 1) * (uint64_t)l.ld + l.rows) : 0;
}

float get(const void *p, int32_t t, size_t i) {
    return t == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
                            : ((const float *)p)[i];
}
} /* namespace */

/* ------------------------------------------------------------- handle */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtContext *c = new (std::nothrow) cublasLtContext{HANDLE_MAGIC};
    if (!c) return CUBLAS_STATUS_ALLOC_FAILED;
    *h = c;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
    }
    return "unknown cuBLAS status";
}

/* --------------------------------------------------------- descriptors */

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    return create(l, Layout{LAYOUT_MAGIC, (int32_t)type, rows, cols, ld});
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    return destroy<Layout>(l, LAYOUT_MAGIC);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *op, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
    return create(op, Desc{DESC_MAGIC, (int32_t)compute, (int32_t)scale,
                           CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N, CUBLAS_OP_N});
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t op) {
    return destroy<Desc>(op, DESC_MAGIC);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t op,
                                              cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t size) {
    Desc d;
    int32_t v;
    if (!load(op, DESC_MAGIC, &d)) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t *field = a == CUBLASLT_MATMUL_DESC_COMPUTE_TYPE   ? &d.compute
                     : a == CUBLASLT_MATMUL_DESC_SCALE_TYPE   ? &d.scale
                     : a == CUBLASLT_MATMUL_DESC_POINTER_MODE ? &d.pointer_mode
                     : a == CUBLASLT_MATMUL_DESC_TRANSA       ? &d.ta
                     : a == CUBLASLT_MATMUL_DESC_TRANSB       ? &d.tb
                                                              : nullptr;
    /* TRANSC and EPILOGUE only at their defaults; the rest is not modelled */
    bool dflt = a == CUBLASLT_MATMUL_DESC_TRANSC || a == CUBLASLT_MATMUL_DESC_EPILOGUE;
    if (!field && !dflt) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!attr(buf, size, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    if (dflt)
        return v == (a == CUBLASLT_MATMUL_DESC_TRANSC ? (int32_t)CUBLAS_OP_N
                                                      : (int32_t)CUBLASLT_EPILOGUE_DEFAULT)
                   ? CUBLAS_STATUS_SUCCESS
                   : CUBLAS_STATUS_NOT_SUPPORTED;
    *field = v; /* values are checked where the descriptor is used */
    store(op, d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    /* the header's defaults: no workspace, every reduction scheme, 256 bytes */
    return create(pref, Pref{PREF_MAGIC, CUBLASLT_REDUCTION_SCHEME_MASK, 0, {256, 256, 256, 256}});
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    return destroy<Pref>(pref, PREF_MAGIC);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size) {
    Pref p;
    uint32_t u32;
    uint64_t u64;
    float f;
    if (!load(pref, PREF_MAGIC, &p)) return CUBLAS_STATUS_INVALID_VALUE;
    bool ok = false;
    switch (a) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
        if ((ok = attr(buf, size, &u32)) && u32 != CUBLASLT_SEARCH_BEST_FIT)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        break;
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = attr(buf, size, &p.max_workspace); break;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: ok = attr(buf, size, &p.reduction_mask); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        ok = attr(buf, size, &p.align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES]);
        break;
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: ok = attr(buf, size, &f); break; /* ignored */
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: ok = attr(buf, size, &u64); break;    /* ignored */
    default: break;
    }
    if (!ok) return CUBLAS_STATUS_INVALID_VALUE;
    store(pref, p);
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------- matmul */

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                              cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned) {
    if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    Pref pr;
    Problem p;
    if (requested <= 0 || !results || !returned || !load(pref, PREF_MAGIC, &pr))
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = problem(op, la, lb, lc, ld, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    memset(&results[0], 0, sizeof results[0]);
    Algo al{ALGO_MAGIC, p.a.type, p.dd.type, {pr.align[0], pr.align[1], pr.align[2], pr.align[3]}};
    store(&results[0].algo, al);
    results[0].workspaceSize = 0; /* never more than the preference's maximum */
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t la, const void *B,
                              cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                              cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
    if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    Problem p;
    cublasStatus_t st = problem(op, la, lb, lc, ld, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    Algo al{ALGO_MAGIC, p.a.type, p.dd.type, {1, 1, 1, 1}}; /* null: an implicit query */
    if (algo && (!load(algo, ALGO_MAGIC, &al) || al.ab != p.a.type || al.cd != p.dd.type))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!alpha || !beta || (workspace_bytes && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
    const float fa = *(const float *)alpha, fb = *(const float *)beta;
    /* in place: one layout for both (out of place, ld may differ) */
    if (C == D && p.c.ld != p.dd.ld) return CUBLAS_STATUS_INVALID_VALUE;
    const size_t esa = type_size(p.a.type), esc = type_size(p.dd.type);
    const struct {
        const void *ptr;
        size_t bytes, elem;
        const char *what;
    } m[4] = {{A, extent(p.a) * esa, esa, "cublasLtMatmul A"},
              {B, extent(p.b) * esa, esa, "cublasLtMatmul B"},
              {C, fb != 0.0f ? extent(p.c) * esc : 0, esc, "cublasLtMatmul C"},
              {D, extent(p.dd) * esc, esc, "cublasLtMatmul D"}};
    for (int i = 0; i < 4; i++) {
        if (!m[i].bytes) continue;
        const uintptr_t u = (uintptr_t)m[i].ptr;
        if (!u || u % m[i].elem || (al.align[i] && u % al.align[i]))
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    const size_t M = p.m, N = p.n, K = p.k;
    std::vector<float> at, bcol; /* op(A) row-major, one column of op(B) */
    try {
        at.resize(M * K);
        bcol.resize(K);
    } catch (const std::bad_alloc &) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    for (int i = 0; i < 4; i++)
        if (m[i].bytes) emu::check_device(m[i].ptr, m[i].bytes, m[i].what);
    if (workspace_bytes) emu::check_device(workspace, workspace_bytes, "cublasLtMatmul workspace");
    if (!M || !N) return CUBLAS_STATUS_SUCCESS;

    emu::DeviceScope scope;
    const size_t lda = (size_t)p.a.ld, ldb = (size_t)p.b.ld;
    const size_t ldc = (size_t)p.c.ld, ldd = (size_t)p.dd.ld;
    const int32_t ab = p.a.type, cd = p.dd.type;
    const bool na = p.d.ta == CUBLAS_OP_N, nb = p.d.tb == CUBLAS_OP_N;
    for (size_t i = 0; i < M; i++)
        for (size_t l = 0; l < K; l++) at[i * K + l] = get(A, ab, na ? l * lda + i : i * lda + l);
    for (size_t j = 0; j < N; j++) {
        for (size_t l = 0; l < K; l++) bcol[l] = get(B, ab, nb ? j * ldb + l : l * ldb + j);
        for (size_t i = 0; i < M; i++) {
            const float *ar = &at[i * K];
            float acc = 0.0f;
            for (size_t l = 0; l < K; l++) acc += ar[l] * bcol[l];
            float v = fa * acc;
            if (fb != 0.0f) v += fb * get(C, cd, j * ldc + i); /* before D(i, j) is written */
            if (cd == CUDA_R_16BF)
                ((__nv_bfloat16 *)D)[j * ldd + i] = __float2bfloat16_rn(v);
            else
                ((float *)D)[j * ldd + i] = v;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}
