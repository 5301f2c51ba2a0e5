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
 * type combinations A/B -> C/D fp32 -> fp32, bf16 -> bf16, bf16 -> fp32,
 * and float8 as Hopper has it: A and B e4m3 or e5m2 (not both e5m2), TRANSA
 * T and TRANSB N only, C/D bf16 or fp32, A's and B's dequant scales from
 * device pointers (NULL: 1) read as one scalar each or, with
 * OUTER_VEC_32F, a vector of m (A) and n (B) floats; lda, ldb and ldc must
 * be multiples of 16 bytes, and the preference's minimum alignments of
 * A, B, C and D 16 bytes or more, else the heuristic finds no algorithm
 * (cuBLASLt documents both for float8); a scale pointer not
 * 16-byte aligned is NOT_SUPPORTED at the matmul (as an H100 answered). D = alpha sa sb sum + beta C;
 * FAST_ACCUM is taken and changes nothing here.
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
 * Limits: other descriptor attributes (epilogues, bias, C/D scales, amax)
 * are refused with NOT_SUPPORTED at SetAttribute, where the real library
 * would accept them; layouts stay column-major and unbatched (no
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
struct Desc {
    uint32_t magic;
    int32_t compute, scale, pointer_mode, ta, tb;
    int32_t fast_accum, a_scale_mode, b_scale_mode;
    uint64_t a_scale, b_scale; /* device pointers */
};
struct Pref { uint32_t magic, reduction_mask; uint64_t max_workspace; uint32_t align[4]; };
struct Algo { uint32_t magic; int32_t ab, cd; uint32_t align[4]; int32_t b; };

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
bool is_fp8(int32_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }
size_t type_size(int32_t t) { return is_fp8(t) ? 1 : t == CUDA_R_16BF ? 2 : 4; }

/* the value of a float8 code (OCP e4m3fn / e5m2) */
float fp8_value(uint8_t code, bool e5m2) {
    const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, mask = (1 << mbits) - 1;
    const int e = (code & 0x7f) >> mbits, m = code & mask, emax = 0x7f >> mbits;
    float v;
    if (!e5m2 && e == emax && m == mask) v = NAN;
    else if (e5m2 && e == emax) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexpf((float)m, 1 - bias - mbits);
    else v = ldexpf((float)(m | (1 << mbits)), e - bias - mbits);
    return code & 0x80 ? -v : v;
}

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
    if (p->c.type != cd) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (is_fp8(ab) || is_fp8(p->b.type)) {
        if (!is_fp8(ab) || !is_fp8(p->b.type) || (ab == CUDA_R_8F_E5M2 && p->b.type == CUDA_R_8F_E5M2))
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (d.ta != CUBLAS_OP_T || d.tb != CUBLAS_OP_N || (cd != CUDA_R_16BF && cd != CUDA_R_32F))
            return CUBLAS_STATUS_NOT_SUPPORTED;
        const int32_t scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        if (d.a_scale_mode != d.b_scale_mode || (d.a_scale_mode != scalar && d.a_scale_mode != outer))
            return CUBLAS_STATUS_NOT_SUPPORTED;
    } else {
        if (p->b.type != ab) return CUBLAS_STATUS_NOT_SUPPORTED;
        if (!((ab == CUDA_R_32F && cd == CUDA_R_32F) || (ab == CUDA_R_16BF && cd == CUDA_R_16BF) ||
              (ab == CUDA_R_16BF && cd == CUDA_R_32F)))
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (d.a_scale || d.b_scale || d.a_scale_mode || d.b_scale_mode || d.fast_accum)
            return CUBLAS_STATUS_INVALID_VALUE; /* scaling is for float8 here */
    }
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
    if (is_fp8(t)) return fp8_value(((const uint8_t *)p)[i], t == CUDA_R_8F_E5M2);
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
    return create(op, Desc{DESC_MAGIC, (int32_t)compute, (int32_t)scale, CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N,
                           CUBLAS_OP_N, 0, 0, 0, 0, 0});
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
    if (a == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER || a == CUBLASLT_MATMUL_DESC_B_SCALE_POINTER) {
        const void *ptr;
        if (!attr(buf, size, &ptr)) return CUBLAS_STATUS_INVALID_VALUE;
        (a == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER ? d.a_scale : d.b_scale) = (uint64_t)(uintptr_t)ptr;
        store(op, d);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (a == CUBLASLT_MATMUL_DESC_FAST_ACCUM) {
        int8_t f;
        if (!attr(buf, size, &f)) return CUBLAS_STATUS_INVALID_VALUE;
        d.fast_accum = f;
        store(op, d);
        return CUBLAS_STATUS_SUCCESS;
    }
    int32_t *field = a == CUBLASLT_MATMUL_DESC_COMPUTE_TYPE   ? &d.compute
                     : a == CUBLASLT_MATMUL_DESC_SCALE_TYPE   ? &d.scale
                     : a == CUBLASLT_MATMUL_DESC_POINTER_MODE ? &d.pointer_mode
                     : a == CUBLASLT_MATMUL_DESC_TRANSA       ? &d.ta
                     : a == CUBLASLT_MATMUL_DESC_TRANSB       ? &d.tb
                     : a == CUBLASLT_MATMUL_DESC_A_SCALE_MODE ? &d.a_scale_mode
                     : a == CUBLASLT_MATMUL_DESC_B_SCALE_MODE ? &d.b_scale_mode
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
    if (is_fp8(p.a.type) && ((p.a.ld * type_size(p.a.type)) % 16 || (p.b.ld * type_size(p.b.type)) % 16 ||
                             (p.dd.ld * type_size(p.dd.type)) % 16 || pr.align[0] < 16 || pr.align[1] < 16 ||
                             pr.align[2] < 16 || pr.align[3] < 16)) {
        *returned = 0; /* float8 tensor-core tiles: 16-byte leading dimensions and pointers */
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    Algo al{ALGO_MAGIC, p.a.type, p.dd.type, {pr.align[0], pr.align[1], pr.align[2], pr.align[3]}, p.b.type};
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
    Algo al{ALGO_MAGIC, p.a.type, p.dd.type, {1, 1, 1, 1}, p.b.type}; /* null: an implicit query */
    if (algo && (!load(algo, ALGO_MAGIC, &al) || al.ab != p.a.type || al.cd != p.dd.type || al.b != p.b.type))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!alpha || !beta || (workspace_bytes && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
    const float fa = *(const float *)alpha, fb = *(const float *)beta;
    /* in place: one layout for both (out of place, ld may differ) */
    if (C == D && p.c.ld != p.dd.ld) return CUBLAS_STATUS_INVALID_VALUE;
    const size_t esa = type_size(p.a.type), esb = type_size(p.b.type), esc = type_size(p.dd.type);
    const struct {
        const void *ptr;
        size_t bytes, elem;
        const char *what;
    } m[4] = {{A, extent(p.a) * esa, esa, "cublasLtMatmul A"},
              {B, extent(p.b) * esb, esb, "cublasLtMatmul B"},
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
    const bool outer = p.d.a_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const float *sa = (const float *)(uintptr_t)p.d.a_scale, *sb = (const float *)(uintptr_t)p.d.b_scale;
    /* an H100 with cuBLAS 13.0 answered NOT_SUPPORTED at the matmul for a
     * scale pointer 4 bytes past a 256-byte boundary (2026-11-27) */
    if (((uintptr_t)sa | (uintptr_t)sb) % 16) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (sa) emu::check_device(sa, (outer ? p.m : 1) * sizeof(float), "cublasLtMatmul A scale");
    if (sb) emu::check_device(sb, (outer ? p.n : 1) * sizeof(float), "cublasLtMatmul B scale");
    if (workspace_bytes) emu::check_device(workspace, workspace_bytes, "cublasLtMatmul workspace");
    if (!M || !N) return CUBLAS_STATUS_SUCCESS;

    emu::DeviceScope scope;
    const size_t lda = (size_t)p.a.ld, ldb = (size_t)p.b.ld;
    const size_t ldc = (size_t)p.c.ld, ldd = (size_t)p.dd.ld;
    const int32_t ab = p.a.type, bt = p.b.type, cd = p.dd.type;
    const bool na = p.d.ta == CUBLAS_OP_N, nb = p.d.tb == CUBLAS_OP_N;
    for (size_t i = 0; i < M; i++)
        for (size_t l = 0; l < K; l++) at[i * K + l] = get(A, ab, na ? l * lda + i : i * lda + l);
    for (size_t j = 0; j < N; j++) {
        for (size_t l = 0; l < K; l++) bcol[l] = get(B, bt, nb ? j * ldb + l : l * ldb + j);
        for (size_t i = 0; i < M; i++) {
            const float *ar = &at[i * K];
            float acc = 0.0f;
            for (size_t l = 0; l < K; l++) acc += ar[l] * bcol[l];
            if (sa || sb) /* the dequant scales, in the epilogue */
                acc *= (sa ? sa[outer ? i : 0] : 1.0f) * (sb ? sb[outer ? j : 0] : 1.0f);
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
