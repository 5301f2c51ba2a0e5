/* cudnn_emu.cpp - host definitions of the cuDNN backend calls the attention
 * graph makes, for the CUDA emulator (cuda_emu.h): an interpreter that
 * EXECUTES an operation graph on the CPU, by this file's reading of the cuDNN
 * backend documentation (cudnn_graph library) and header. <cudnn.h> declares
 * every function (C linkage), so the compiler checks each definition against
 * the real API; they are exported (default visibility) because the backend
 * finds them with dlopen + dlsym on libtitan-cuda-emu.so itself
 * (TITAN_CUDNN_LIB), not by linking.
 *
 * Modelled: the handle (cudnnCreate, cudnnDestroy, cudnnSetStream; the stream
 * is ignored, everything runs synchronously), cudnnGetVersion (91900),
 * cudnnGetErrorString, cudnnGetLastErrorString (per thread, cleared once
 * read), and the descriptors TENSOR, MATMUL, POINTWISE, REDUCTION,
 * OPERATION_MATMUL, OPERATION_POINTWISE, OPERATION_REDUCTION,
 * OPERATION_RESHAPE, OPERATIONGRAPH, ENGINEHEUR, ENGINECFG, EXECUTION_PLAN
 * and VARIANT_PACK with the attributes below.
 *   - TENSOR: DATA_TYPE (FLOAT, BFLOAT16, INT32, BOOLEAN: one byte, 0 or 1),
 *     DIMENSIONS and STRIDES (1 to 8 of them, >= 1, no two elements at one
 *     offset), UNIQUE_ID, BYTE_ALIGNMENT (all five required), IS_VIRTUAL,
 *     IS_BY_VALUE (one element, not virtual; its variant-pack pointer is a
 *     host pointer to one value of the tensor's type).
 *   - MATMUL (COMP_TYPE FLOAT): C[.., M, N] = A[.., M, K] B[.., K, N] per
 *     batch index; each batch dimension of A and B equals C's or divides it
 *     (C index c reads c / (C_d / A_d): 1 broadcasts, a divisor groups, as
 *     grouped-query attention's heads). A, B, C are FLOAT or BFLOAT16.
 *   - POINTWISE (MODE, MATH_PREC required; AXIS for GEN_INDEX): ADD, SUB,
 *     MUL, DIV, EXP, LOG, IDENTITY, CMP_GE (1 where X >= B), GEN_INDEX (Y has
 *     X's dimensions; each element is its index along AXIS; X is not read),
 *     BINARY_SELECT (Y = T ? X : B, T nonzero meaning true: XDESC is the
 *     value taken where the mask is true, BDESC where false, TDESC the mask;
 *     the frontend's binary_select(in0, in1, mask) lowers in0, in1, mask to
 *     X, B, T, and its causal mask keeps the score where row >= col). Inputs
 *     have Y's rank; a dimension of 1 broadcasts. MATH_PREC FLOAT for all,
 *     INT32 for all but DIV, EXP, LOG, BOOLEAN for CMP_GE, BINARY_SELECT,
 *     IDENTITY; every mode is computed in float.
 *   - REDUCTION (OPERATOR ADD or MAX, COMP_TYPE FLOAT): each Y dimension
 *     divides X's: groups of X_d / Y_d consecutive indices fold into one
 *     (equal keeps it, 1 reduces it away).
 *   - OPERATION_RESHAPE: a view. Y (same element count) is X's memory read
 *     with Y's own dimensions and strides; the two layouts must cover the
 *     same offsets (so a transpose by strides is one). Each element is
 *     rounded to Y's type like any stored value: the frontend's reshape
 *     documentation speaks of no type change, but NVIDIA's own frontend
 *     graphs change it (its SDPA backward views its fp32 virtual P as a
 *     virtual P^T typed as Q, bf16, for the dV matmul; a virtual reshape
 *     output it leaves untyped gets the graph's intermediate type, FLOAT).
 *   - OPERATIONGRAPH: HANDLE (attribute 800) and OPS, both required.
 *     Finalize collects the tensors by UID (two descriptors with one UID must
 *     agree in every attribute: they are one tensor), and refuses a tensor
 *     written by two operations, a by-value tensor written at all, a virtual
 *     tensor read but never written, and cycles; the operations run in a
 *     topological order (the order given where it is one).
 *   - ENGINEHEUR: OPERATION_GRAPH, MODE (any cudnnBackendHeurMode_t). After
 *     Finalize, GetAttribute(RESULTS) fills the first of the caller's ENGINECFG
 *     descriptors (finalized) and returns count 1: one engine, this one.
 *   - EXECUTION_PLAN: HANDLE (attribute 400), ENGINE_CONFIG; after Finalize,
 *     GetAttribute(WORKSPACE_SIZE) is 1 MiB, always.
 *   - VARIANT_PACK: UNIQUE_IDS, DATA_POINTERS (as many), WORKSPACE.
 * Numbers: every operation computes in float, element by element, sums (the
 * matmul's over k from 0, a reduction's over X's indices in row-major order)
 * in increasing index order, without contraction (the build has
 * -ffp-contract=off); expf and logf. Each stored element, virtual or not, is
 * rounded to its tensor's type: BFLOAT16 to nearest even, INT32 to the
 * nearest integer (saturated; exact below 2^24 in magnitude: the values are
 * held in float), BOOLEAN to 0 or 1. A reduction's MAX propagates NaN.
 * Descriptors hold what they were given: Finalize snapshots it, and a
 * descriptor set as another's attribute must be finalized then (its
 * snapshot is taken), so any destruction order is safe.
 *
 * Checked, as the documentation says: an attribute of the wrong type or
 * count, or an invalid value, is CUDNN_STATUS_BAD_PARAM; setting an attribute
 * of a finalized descriptor is CUDNN_STATUS_NOT_INITIALIZED (the documented
 * code for "already in the finalized state"), and so is getting one of a
 * descriptor not finalized; Finalize with a required attribute missing, or
 * with inconsistent ones, is BAD_PARAM, and so is finalizing twice (an
 * ENGINECFG is finalized by the heuristics' RESULTS, never by the caller).
 * cudnnBackendExecute needs a valid
 * handle, a finalized plan and variant pack; every non-virtual tensor of the
 * graph needs exactly one entry and no entry may name another UID (BAD_PARAM);
 * a device tensor's pointer must be non-null and aligned to its
 * BYTE_ALIGNMENT (BAD_PARAM), and its whole strided extent must lie in one
 * live device allocation (emu::check_device aborts otherwise); an output may
 * not overlap another tensor of the call (BAD_PARAM); the workspace must
 * cover 1 MiB of device memory (null: BAD_PARAM), and it is filled with 0xff
 * before the inputs are read, so an input inside it shows. Device memory is
 * touched only inside an emu::DeviceScope. Every failure records
 * "cudnn_emu: <descriptor>: <what>" for cudnnGetLastErrorString and prints
 * nothing.
 *
 * Refused with CUDNN_STATUS_NOT_SUPPORTED (and a message): every other
 * descriptor type, attribute, data type, pointwise mode, reduction operator
 * and compute type, where the real library may accept them; strides below 1;
 * overlapping layouts; by-value tensors of more than one element.
 * Limits: no engine choice, knobs, or intermediates (one engine runs every
 * graph); the real engines support far fewer graphs than this interpreter
 * runs, so a graph that executes here may still find no engine on a GPU. The
 * GPU sums in other orders (tensor-core tiles, split reductions) and rounds
 * its virtual tensors as its kernels do: results match it to rounding, not
 * bit for bit. */
#include <cudnn.h>
#include <cuda_bf16.h>

#include <math.h>
#include <stdarg.h>

#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "cuda_emu.h"

#define CUDNN_EMU_EXPORT __attribute__((visibility("default")))

/* the handle's struct, which the header leaves incomplete */
struct cudnnContext {
    uint32_t magic;
    cudaStream_t stream;
};

namespace {
constexpr uint32_t HANDLE_MAGIC = 0x644e6e48, DESC_MAGIC = 0x644e6e44;
constexpr int64_t WORKSPACE_BYTES = (int64_t)1 << 20;
constexpr int64_t MAX_ELEMENTS = (int64_t)1 << 34; /* per tensor extent, in elements */
/* the deprecated names of two required attributes */
constexpr int ATTR_PLAN_HANDLE = 400, ATTR_GRAPH_HANDLE = 800;

std::mutex g_lock; /* every backend call, so descriptors never race */
std::set<const void *> g_live_desc, g_live_handles;
thread_local std::string g_error; /* the last failure's message, this thread */

__attribute__((format(printf, 3, 4))) cudnnStatus_t fail(cudnnStatus_t st, const char *who,
                                                         const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_error = std::string("cudnn_emu: ") + who + ": " + buf;
    return st;
}

/* ------------------------------------------------------------ tensors */

size_t type_size(cudnnDataType_t t) {
    return t == CUDNN_DATA_BFLOAT16 ? 2 : t == CUDNN_DATA_BOOLEAN ? 1 : 4;
}

const char *type_name(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    case CUDNN_DATA_INT32: return "INT32";
    case CUDNN_DATA_BOOLEAN: return "BOOLEAN";
    default: return "another type";
    }
}

struct Tensor {
    int64_t uid = 0, align = 0;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    std::vector<int64_t> dim, stride;
    bool virt = false, by_value = false;

    size_t nd() const { return dim.size(); }
    int64_t count() const {
        int64_t n = 1;
        for (int64_t d : dim) n *= d;
        return n;
    }
    /* elements from the first to one past the last, by the strides */
    int64_t extent() const {
        int64_t e = 1;
        for (size_t d = 0; d < nd(); d++) e += (dim[d] - 1) * stride[d];
        return e;
    }
    int64_t bytes() const { return extent() * (int64_t)type_size(type); }
    bool same(const Tensor &o) const {
        return uid == o.uid && align == o.align && type == o.type && dim == o.dim &&
               stride == o.stride && virt == o.virt && by_value == o.by_value;
    }
};
using TensorP = std::shared_ptr<const Tensor>;

/* the offset of element idx (dim[d] indices) */
int64_t offset(const Tensor &t, const int64_t *idx) {
    int64_t o = 0;
    for (size_t d = 0; d < t.nd(); d++) o += idx[d] * t.stride[d];
    return o;
}

/* the offset in t of the element that element idx of a tensor with
 * dimensions ref reads, in its first n dimensions: index i of dimension d
 * reads index i / (ref[d] / t.dim[d]) (t.dim[d] equal to ref's, 1, or a
 * divisor of it) */
int64_t offset_of(const Tensor &t, const int64_t *idx, const std::vector<int64_t> &ref, size_t n) {
    int64_t o = 0;
    for (size_t d = 0; d < n; d++) o += idx[d] / (ref[d] / t.dim[d]) * t.stride[d];
    return o;
}

/* calls f(idx) for every index of dimensions dim, in row-major order */
template <typename F>
void each(const std::vector<int64_t> &dim, F f) {
    std::vector<int64_t> idx(dim.size(), 0);
    int64_t n = 1;
    for (int64_t d : dim) n *= d;
    for (int64_t i = 0; i < n; i++) {
        f((const int64_t *)idx.data());
        for (size_t d = dim.size(); d-- > 0;) {
            if (++idx[d] < dim[d]) break;
            idx[d] = 0;
        }
    }
}

/* every dimension of small is big's or (divides: 1 too) a divisor of it */
bool divides(const std::vector<int64_t> &small, const std::vector<int64_t> &big, size_t n) {
    for (size_t d = 0; d < n; d++)
        if (big[d] % small[d] != 0) return false;
    return true;
}

/* a stored value of type t */
float round_to(cudnnDataType_t t, float v) {
    switch (t) {
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(__float2bfloat16_rn(v));
    case CUDNN_DATA_INT32:
        if (isnan(v)) return 0.0f;
        v = nearbyintf(v);
        return v < -2147483648.0f ? -2147483648.0f : v > 2147483520.0f ? 2147483520.0f : v;
    case CUDNN_DATA_BOOLEAN: return v != 0.0f ? 1.0f : 0.0f;
    default: return v;
    }
}

float load(const void *p, cudnnDataType_t t, int64_t i) {
    switch (t) {
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case CUDNN_DATA_INT32: return (float)((const int32_t *)p)[i];
    case CUDNN_DATA_BOOLEAN: return ((const uint8_t *)p)[i] ? 1.0f : 0.0f;
    default: return ((const float *)p)[i];
    }
}

void store(void *p, cudnnDataType_t t, int64_t i, float v) { /* v: round_to(t, .)'s */
    switch (t) {
    case CUDNN_DATA_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    case CUDNN_DATA_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CUDNN_DATA_BOOLEAN: ((uint8_t *)p)[i] = v != 0.0f; break;
    default: ((float *)p)[i] = v; break;
    }
}

/* --------------------------------------------------- operations, graph */

enum Kind { MATMUL, POINTWISE, REDUCTION, RESHAPE };

/* a finalized MATMUL, POINTWISE or REDUCTION descriptor */
struct Setting {
    cudnnBackendDescriptorType_t type;
    int64_t mode, prec, axis; /* pointwise mode or reduction operator; compute type */
};
using SettingP = std::shared_ptr<const Setting>;

struct Op {
    Kind kind;
    int64_t mode = 0, axis = 0;
    std::vector<TensorP> in; /* matmul A, B; pointwise X[, B[, T]]; reduction, reshape X */
    TensorP out;
};
using OpP = std::shared_ptr<const Op>;

struct Graph {
    std::vector<OpP> ops;               /* in an order that runs */
    std::map<int64_t, TensorP> tensors; /* by UID */
};
using GraphP = std::shared_ptr<const Graph>;

/* ------------------------------------------------------- descriptors */

struct Desc {
    uint32_t magic = DESC_MAGIC;
    cudnnBackendDescriptorType_t type;
    bool finalized = false;
    std::set<int> have; /* attributes set */
    /* TENSOR */
    Tensor t;
    TensorP tensor;
    /* MATMUL, POINTWISE, REDUCTION */
    Setting s{};
    SettingP setting;
    /* operations */
    std::map<int, TensorP> ports; /* by attribute */
    SettingP op_setting;
    OpP op;
    /* OPERATIONGRAPH, ENGINEHEUR, ENGINECFG, EXECUTION_PLAN */
    cudnnHandle_t handle = nullptr;
    std::vector<OpP> ops;
    GraphP graph;
    /* VARIANT_PACK */
    std::vector<int64_t> uids;
    std::vector<void *> ptrs;
    void *workspace = nullptr;
};

const char *desc_name(cudnnBackendDescriptorType_t t) {
    switch (t) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return "tensor";
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return "matmul";
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return "pointwise";
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return "reduction";
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return "matmul operation";
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return "pointwise operation";
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return "reduction operation";
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: return "reshape operation";
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return "operation graph";
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return "engine heuristics";
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return "engine config";
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return "execution plan";
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return "variant pack";
    default: return "descriptor";
    }
}

bool is_op(cudnnBackendDescriptorType_t t) {
    return t == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

Desc *live_desc(const void *p) {
    if (!p || !g_live_desc.count(p)) return nullptr;
    Desc *d = (Desc *)p;
    return d->magic == DESC_MAGIC ? d : nullptr;
}

bool handle_ok(cudnnHandle_t h) {
    return h && g_live_handles.count(h) && h->magic == HANDLE_MAGIC;
}

const char *attr_name(int a) {
    switch (a) {
    case CUDNN_ATTR_TENSOR_DATA_TYPE: return "DATA_TYPE";
    case CUDNN_ATTR_TENSOR_DIMENSIONS: return "DIMENSIONS";
    case CUDNN_ATTR_TENSOR_STRIDES: return "STRIDES";
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: return "UNIQUE_ID";
    case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: return "BYTE_ALIGNMENT";
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL: return "IS_VIRTUAL";
    case CUDNN_ATTR_TENSOR_IS_BY_VALUE: return "IS_BY_VALUE";
    case CUDNN_ATTR_MATMUL_COMP_TYPE: return "MATMUL_COMP_TYPE";
    case CUDNN_ATTR_POINTWISE_MODE: return "POINTWISE_MODE";
    case CUDNN_ATTR_POINTWISE_MATH_PREC: return "POINTWISE_MATH_PREC";
    case CUDNN_ATTR_POINTWISE_AXIS: return "POINTWISE_AXIS";
    case CUDNN_ATTR_REDUCTION_OPERATOR: return "REDUCTION_OPERATOR";
    case CUDNN_ATTR_REDUCTION_COMP_TYPE: return "REDUCTION_COMP_TYPE";
    case CUDNN_ATTR_OPERATION_MATMUL_ADESC: return "ADESC";
    case CUDNN_ATTR_OPERATION_MATMUL_BDESC: return "BDESC";
    case CUDNN_ATTR_OPERATION_MATMUL_CDESC: return "CDESC";
    case CUDNN_ATTR_OPERATION_MATMUL_DESC: return "MATMUL_DESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: return "PW_DESCRIPTOR";
    case CUDNN_ATTR_OPERATION_POINTWISE_XDESC: return "XDESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: return "BDESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_YDESC: return "YDESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_TDESC: return "TDESC";
    case CUDNN_ATTR_OPERATION_REDUCTION_XDESC: return "XDESC";
    case CUDNN_ATTR_OPERATION_REDUCTION_YDESC: return "YDESC";
    case CUDNN_ATTR_OPERATION_REDUCTION_DESC: return "REDUCTION_DESC";
    case CUDNN_ATTR_OPERATION_RESHAPE_XDESC: return "XDESC";
    case CUDNN_ATTR_OPERATION_RESHAPE_YDESC: return "YDESC";
    case ATTR_GRAPH_HANDLE: return "OPERATIONGRAPH_HANDLE";
    case CUDNN_ATTR_OPERATIONGRAPH_OPS: return "OPS";
    case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: return "OPERATION_GRAPH";
    case CUDNN_ATTR_ENGINEHEUR_MODE: return "HEUR_MODE";
    case CUDNN_ATTR_ENGINEHEUR_RESULTS: return "RESULTS";
    case ATTR_PLAN_HANDLE: return "EXECUTION_PLAN_HANDLE";
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: return "ENGINE_CONFIG";
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE: return "WORKSPACE_SIZE";
    case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: return "UNIQUE_IDS";
    case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return "DATA_POINTERS";
    case CUDNN_ATTR_VARIANT_PACK_WORKSPACE: return "WORKSPACE";
    default: return nullptr;
    }
}

/* "NAME" or "attribute N" */
std::string attr_str(int a) {
    const char *n = attr_name(a);
    return n ? std::string(n) : "attribute " + std::to_string(a);
}

/* An attribute value's checks: the type and a count in [lo, hi]. */
struct Value {
    const char *who;
    int attr;
    cudnnBackendAttributeType_t type;
    int64_t n;
    const void *p;

    cudnnStatus_t expect(cudnnBackendAttributeType_t want, int64_t lo, int64_t hi) const {
        if (type != want)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%s: attribute type %d, not %d",
                        attr_str(attr).c_str(), (int)type, (int)want);
        if (n < lo || n > hi)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%s: %lld elements, not %lld to %lld",
                        attr_str(attr).c_str(), (long long)n, (long long)lo, (long long)hi);
        if (n > 0 && !p)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%s: null array", attr_str(attr).c_str());
        return CUDNN_STATUS_SUCCESS;
    }
    template <typename T>
    T get(int64_t i = 0) const {
        T v;
        memcpy(&v, (const char *)p + i * (int64_t)sizeof(T), sizeof(T));
        return v;
    }
    /* a finalized descriptor of type want, as this attribute's single value */
    cudnnStatus_t desc(cudnnBackendDescriptorType_t want, Desc **out, int64_t i = 0) const {
        Desc *d = live_desc(get<cudnnBackendDescriptor_t>(i));
        if (!d)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%s: not a live descriptor",
                        attr_str(attr).c_str());
        if (d->type != want)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%s: a %s descriptor, not a %s one",
                        attr_str(attr).c_str(), desc_name(d->type), desc_name(want));
        if (!d->finalized)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%s: the %s descriptor is not finalized",
                        attr_str(attr).c_str(), desc_name(want));
        *out = d;
        return CUDNN_STATUS_SUCCESS;
    }
};

#define TRY(x)                                                                                     \
    do {                                                                                           \
        const cudnnStatus_t st_ = (x);                                                             \
        if (st_ != CUDNN_STATUS_SUCCESS) return st_;                                               \
    } while (0)

cudnnStatus_t unsupported(const Value &v) {
    return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who, "%s is not modelled", attr_str(v.attr).c_str());
}

bool supported_type(int64_t t) {
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_BFLOAT16 || t == CUDNN_DATA_INT32 ||
           t == CUDNN_DATA_BOOLEAN;
}

bool supported_mode(int64_t m) {
    switch (m) {
    case CUDNN_POINTWISE_ADD: case CUDNN_POINTWISE_SUB: case CUDNN_POINTWISE_MUL:
    case CUDNN_POINTWISE_DIV: case CUDNN_POINTWISE_EXP: case CUDNN_POINTWISE_LOG:
    case CUDNN_POINTWISE_IDENTITY: case CUDNN_POINTWISE_GEN_INDEX: case CUDNN_POINTWISE_CMP_GE:
    case CUDNN_POINTWISE_BINARY_SELECT: return true;
    default: return false;
    }
}

/* inputs a mode takes: 1 (X), 2 (X, B) or 3 (X, B, T) */
int arity(int64_t m) {
    switch (m) {
    case CUDNN_POINTWISE_EXP: case CUDNN_POINTWISE_LOG: case CUDNN_POINTWISE_IDENTITY:
    case CUDNN_POINTWISE_GEN_INDEX: return 1;
    case CUDNN_POINTWISE_BINARY_SELECT: return 3;
    default: return 2;
    }
}

/* -------------------------------------------------------- SetAttribute */

cudnnStatus_t set_tensor(Desc *d, const Value &v) {
    Tensor &t = d->t;
    switch (v.attr) {
    case CUDNN_ATTR_TENSOR_DATA_TYPE: {
        TRY(v.expect(CUDNN_TYPE_DATA_TYPE, 1, 1));
        const cudnnDataType_t ty = v.get<cudnnDataType_t>();
        if (!supported_type(ty))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who, "data type %d is not modelled", (int)ty);
        t.type = ty;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_ATTR_TENSOR_DIMENSIONS:
    case CUDNN_ATTR_TENSOR_STRIDES: {
        TRY(v.expect(CUDNN_TYPE_INT64, 1, CUDNN_DIM_MAX));
        std::vector<int64_t> a((size_t)v.n);
        for (int64_t i = 0; i < v.n; i++) {
            a[(size_t)i] = v.get<int64_t>(i);
            if (a[(size_t)i] < 1)
                return fail(v.attr == CUDNN_ATTR_TENSOR_DIMENSIONS ? CUDNN_STATUS_BAD_PARAM
                                                                   : CUDNN_STATUS_NOT_SUPPORTED,
                            v.who, "%s[%lld] = %lld (below 1)", attr_str(v.attr).c_str(),
                            (long long)i, (long long)a[(size_t)i]);
        }
        (v.attr == CUDNN_ATTR_TENSOR_DIMENSIONS ? t.dim : t.stride) = a;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_ATTR_TENSOR_UNIQUE_ID:
        TRY(v.expect(CUDNN_TYPE_INT64, 1, 1));
        t.uid = v.get<int64_t>();
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
        TRY(v.expect(CUDNN_TYPE_INT64, 1, 1));
        t.align = v.get<int64_t>();
        if (t.align < 1)
            return fail(CUDNN_STATUS_BAD_PARAM, v.who, "BYTE_ALIGNMENT %lld", (long long)t.align);
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL:
    case CUDNN_ATTR_TENSOR_IS_BY_VALUE:
        TRY(v.expect(CUDNN_TYPE_BOOLEAN, 1, 1));
        (v.attr == CUDNN_ATTR_TENSOR_IS_VIRTUAL ? t.virt : t.by_value) = v.get<bool>();
        return CUDNN_STATUS_SUCCESS;
    default: return unsupported(v);
    }
}

cudnnStatus_t set_setting(Desc *d, const Value &v) {
    Setting &s = d->s;
    switch (v.attr) {
    case CUDNN_ATTR_MATMUL_COMP_TYPE:
    case CUDNN_ATTR_REDUCTION_COMP_TYPE:
        if ((v.attr == CUDNN_ATTR_MATMUL_COMP_TYPE) !=
            (d->type == CUDNN_BACKEND_MATMUL_DESCRIPTOR))
            break;
        TRY(v.expect(CUDNN_TYPE_DATA_TYPE, 1, 1));
        s.prec = v.get<cudnnDataType_t>();
        if (s.prec != CUDNN_DATA_FLOAT)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who, "compute type %d: only FLOAT",
                        (int)s.prec);
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_POINTWISE_MODE:
        if (d->type != CUDNN_BACKEND_POINTWISE_DESCRIPTOR) break;
        TRY(v.expect(CUDNN_TYPE_POINTWISE_MODE, 1, 1));
        s.mode = v.get<cudnnPointwiseMode_t>();
        if (!supported_mode(s.mode))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who, "mode %d is not modelled", (int)s.mode);
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_POINTWISE_MATH_PREC:
        if (d->type != CUDNN_BACKEND_POINTWISE_DESCRIPTOR) break;
        TRY(v.expect(CUDNN_TYPE_DATA_TYPE, 1, 1));
        s.prec = v.get<cudnnDataType_t>();
        if (s.prec != CUDNN_DATA_FLOAT && s.prec != CUDNN_DATA_INT32 &&
            s.prec != CUDNN_DATA_BOOLEAN)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who,
                        "math precision %d: only FLOAT, INT32, BOOLEAN", (int)s.prec);
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_POINTWISE_AXIS:
        if (d->type != CUDNN_BACKEND_POINTWISE_DESCRIPTOR) break;
        TRY(v.expect(CUDNN_TYPE_INT64, 1, 1));
        s.axis = v.get<int64_t>();
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_REDUCTION_OPERATOR:
        if (d->type != CUDNN_BACKEND_REDUCTION_DESCRIPTOR) break;
        TRY(v.expect(CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, 1));
        s.mode = v.get<cudnnReduceTensorOp_t>();
        if (s.mode != CUDNN_REDUCE_TENSOR_ADD && s.mode != CUDNN_REDUCE_TENSOR_MAX)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who, "operator %d: only ADD and MAX",
                        (int)s.mode);
        return CUDNN_STATUS_SUCCESS;
    default: break;
    }
    return unsupported(v);
}

/* the tensor ports of each operation type */
bool is_port(cudnnBackendDescriptorType_t t, int a) {
    switch (t) {
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        return a == CUDNN_ATTR_OPERATION_MATMUL_ADESC || a == CUDNN_ATTR_OPERATION_MATMUL_BDESC ||
               a == CUDNN_ATTR_OPERATION_MATMUL_CDESC;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        return a == CUDNN_ATTR_OPERATION_POINTWISE_XDESC ||
               a == CUDNN_ATTR_OPERATION_POINTWISE_BDESC ||
               a == CUDNN_ATTR_OPERATION_POINTWISE_YDESC ||
               a == CUDNN_ATTR_OPERATION_POINTWISE_TDESC;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
        return a == CUDNN_ATTR_OPERATION_REDUCTION_XDESC ||
               a == CUDNN_ATTR_OPERATION_REDUCTION_YDESC;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
        return a == CUDNN_ATTR_OPERATION_RESHAPE_XDESC || a == CUDNN_ATTR_OPERATION_RESHAPE_YDESC;
    default: return false;
    }
}

/* the descriptor attribute of each operation type and what it takes */
cudnnBackendDescriptorType_t setting_of(cudnnBackendDescriptorType_t t, int a) {
    if (t == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR && a == CUDNN_ATTR_OPERATION_MATMUL_DESC)
        return CUDNN_BACKEND_MATMUL_DESCRIPTOR;
    if (t == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR &&
        a == CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR)
        return CUDNN_BACKEND_POINTWISE_DESCRIPTOR;
    if (t == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR &&
        a == CUDNN_ATTR_OPERATION_REDUCTION_DESC)
        return CUDNN_BACKEND_REDUCTION_DESCRIPTOR;
    return (cudnnBackendDescriptorType_t)-1;
}

cudnnStatus_t set_op(Desc *d, const Value &v) {
    Desc *r;
    if (is_port(d->type, v.attr)) {
        TRY(v.expect(CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, 1));
        TRY(v.desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &r));
        d->ports[v.attr] = r->tensor;
        return CUDNN_STATUS_SUCCESS;
    }
    const cudnnBackendDescriptorType_t want = setting_of(d->type, v.attr);
    if (want == (cudnnBackendDescriptorType_t)-1) return unsupported(v);
    TRY(v.expect(CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, 1));
    TRY(v.desc(want, &r));
    d->op_setting = r->setting;
    return CUDNN_STATUS_SUCCESS;
}

/* the deprecated handle attribute of a graph or a plan */
cudnnStatus_t set_handle(Desc *d, const Value &v) {
    TRY(v.expect(CUDNN_TYPE_HANDLE, 1, 1));
    d->handle = v.get<cudnnHandle_t>();
    if (!handle_ok(d->handle))
        return fail(CUDNN_STATUS_BAD_PARAM, v.who, "HANDLE: not a live cudnnHandle_t");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_other(Desc *d, const Value &v) {
    Desc *r;
    switch (d->type) {
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        if (v.attr == ATTR_GRAPH_HANDLE) return set_handle(d, v);
        if (v.attr == CUDNN_ATTR_OPERATIONGRAPH_OPS) {
            TRY(v.expect(CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, INT32_MAX));
            std::vector<OpP> ops;
            for (int64_t i = 0; i < v.n; i++) {
                Desc *o = live_desc(v.get<cudnnBackendDescriptor_t>(i));
                if (!o || !is_op(o->type) || !o->finalized)
                    return fail(CUDNN_STATUS_BAD_PARAM, v.who,
                                "OPS[%lld]: not a finalized operation descriptor of a modelled "
                                "type",
                                (long long)i);
                ops.push_back(o->op);
            }
            d->ops = ops;
            return CUDNN_STATUS_SUCCESS;
        }
        break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        if (v.attr == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH) {
            TRY(v.expect(CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, 1));
            TRY(v.desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &r));
            d->graph = r->graph;
            return CUDNN_STATUS_SUCCESS;
        }
        if (v.attr == CUDNN_ATTR_ENGINEHEUR_MODE) {
            TRY(v.expect(CUDNN_TYPE_HEUR_MODE, 1, 1));
            const int m = (int)v.get<cudnnBackendHeurMode_t>();
            if (m < 0 || m >= CUDNN_HEUR_MODES_COUNT)
                return fail(CUDNN_STATUS_BAD_PARAM, v.who, "HEUR_MODE %d", m);
            return CUDNN_STATUS_SUCCESS; /* one engine whatever the mode */
        }
        break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        if (v.attr == ATTR_PLAN_HANDLE) return set_handle(d, v);
        if (v.attr == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG) {
            TRY(v.expect(CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, 1));
            TRY(v.desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &r));
            d->graph = r->graph;
            return CUDNN_STATUS_SUCCESS;
        }
        break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        if (v.attr == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) {
            TRY(v.expect(CUDNN_TYPE_INT64, 0, INT32_MAX));
            d->uids.resize((size_t)v.n);
            for (int64_t i = 0; i < v.n; i++) d->uids[(size_t)i] = v.get<int64_t>(i);
            return CUDNN_STATUS_SUCCESS;
        }
        if (v.attr == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS) {
            TRY(v.expect(CUDNN_TYPE_VOID_PTR, 0, INT32_MAX));
            d->ptrs.resize((size_t)v.n);
            for (int64_t i = 0; i < v.n; i++) d->ptrs[(size_t)i] = v.get<void *>(i);
            return CUDNN_STATUS_SUCCESS;
        }
        if (v.attr == CUDNN_ATTR_VARIANT_PACK_WORKSPACE) {
            TRY(v.expect(CUDNN_TYPE_VOID_PTR, 1, 1));
            d->workspace = v.get<void *>();
            return CUDNN_STATUS_SUCCESS;
        }
        break;
    default: break;
    }
    return unsupported(v);
}

/* ------------------------------------------------------------ Finalize */

cudnnStatus_t need(const Desc *d, std::initializer_list<int> attrs) {
    for (int a : attrs)
        if (!d->have.count(a))
            return fail(CUDNN_STATUS_BAD_PARAM, desc_name(d->type), "%s is required",
                        attr_str(a).c_str());
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_tensor(Desc *d) {
    const char *who = "tensor";
    TRY(need(d, {CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_ATTR_TENSOR_DIMENSIONS,
                 CUDNN_ATTR_TENSOR_STRIDES, CUDNN_ATTR_TENSOR_UNIQUE_ID,
                 CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT}));
    const Tensor &t = d->t;
    const long long uid = (long long)t.uid;
    if (t.dim.size() != t.stride.size())
        return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld: %zu dimensions, %zu strides", uid,
                    t.dim.size(), t.stride.size());
    if (t.by_value && t.virt)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld: virtual and by value", uid);
    /* sizes, without overflow: every dimension and stride below 2^34 */
    double e = 1, n = 1;
    for (size_t i = 0; i < t.nd(); i++) {
        e += (double)(t.dim[i] - 1) * (double)t.stride[i];
        n *= (double)t.dim[i];
    }
    if (e > (double)MAX_ELEMENTS || n > (double)MAX_ELEMENTS)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "uid %lld: over 2^34 elements", uid);
    if (t.by_value && t.count() != 1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "uid %lld: by value, %lld elements", uid,
                    (long long)t.count());
    /* no two elements at one offset: in order of stride, each dimension
     * (of more than one index) steps past the previous one's extent */
    std::vector<size_t> order;
    for (size_t i = 0; i < t.nd(); i++)
        if (t.dim[i] > 1) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return t.stride[a] < t.stride[b]; });
    int64_t reach = 1; /* offsets spanned by the dimensions so far */
    for (size_t i : order) {
        if (t.stride[i] < reach)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who,
                        "uid %lld: overlapping layout (stride %lld of dimension %zu)", uid,
                        (long long)t.stride[i], i);
        reach = t.stride[i] * (t.dim[i] - 1) + reach;
    }
    d->tensor = std::make_shared<const Tensor>(t);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_setting(Desc *d) {
    const char *who = desc_name(d->type);
    const Setting &s = d->s;
    if (d->type == CUDNN_BACKEND_MATMUL_DESCRIPTOR) {
        TRY(need(d, {CUDNN_ATTR_MATMUL_COMP_TYPE}));
    } else if (d->type == CUDNN_BACKEND_REDUCTION_DESCRIPTOR) {
        TRY(need(d, {CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_ATTR_REDUCTION_COMP_TYPE}));
    } else {
        TRY(need(d, {CUDNN_ATTR_POINTWISE_MODE, CUDNN_ATTR_POINTWISE_MATH_PREC}));
        if (s.mode == CUDNN_POINTWISE_GEN_INDEX) TRY(need(d, {CUDNN_ATTR_POINTWISE_AXIS}));
        const bool i32_ok = s.mode != CUDNN_POINTWISE_DIV && s.mode != CUDNN_POINTWISE_EXP &&
                            s.mode != CUDNN_POINTWISE_LOG;
        const bool bool_ok = s.mode == CUDNN_POINTWISE_CMP_GE ||
                             s.mode == CUDNN_POINTWISE_BINARY_SELECT ||
                             s.mode == CUDNN_POINTWISE_IDENTITY;
        if ((s.prec == CUDNN_DATA_INT32 && !i32_ok) || (s.prec == CUDNN_DATA_BOOLEAN && !bool_ok))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "mode %d with math precision %s",
                        (int)s.mode, type_name((cudnnDataType_t)s.prec));
    }
    Setting copy = s;
    copy.type = d->type;
    d->setting = std::make_shared<const Setting>(copy);
    return CUDNN_STATUS_SUCCESS;
}

std::string dims_str(const Tensor &t) {
    std::string s = "[";
    for (size_t i = 0; i < t.nd(); i++) s += (i ? "," : "") + std::to_string(t.dim[i]);
    return s + "]";
}

cudnnStatus_t finalize_op(Desc *d) {
    const char *who = desc_name(d->type);
    auto op = std::make_shared<Op>();
    auto port = [&](int a) { return d->ports.count(a) ? d->ports[a] : TensorP(); };
    switch (d->type) {
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
        TRY(need(d, {CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                     CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_ATTR_OPERATION_MATMUL_DESC}));
        op->kind = MATMUL;
        op->in = {port(CUDNN_ATTR_OPERATION_MATMUL_ADESC), port(CUDNN_ATTR_OPERATION_MATMUL_BDESC)};
        op->out = port(CUDNN_ATTR_OPERATION_MATMUL_CDESC);
        const Tensor &a = *op->in[0], &b = *op->in[1], &c = *op->out;
        const size_t n = c.nd();
        if (n < 2 || a.nd() != n || b.nd() != n)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "ranks %zu, %zu, %zu (equal, at least 2)",
                        a.nd(), b.nd(), c.nd());
        if (a.dim[n - 2] != c.dim[n - 2] || b.dim[n - 1] != c.dim[n - 1] ||
            a.dim[n - 1] != b.dim[n - 2] || !divides(a.dim, c.dim, n - 2) ||
            !divides(b.dim, c.dim, n - 2))
            return fail(CUDNN_STATUS_BAD_PARAM, who,
                        "A %s x B %s -> C %s: not [..,M,K] x [..,K,N] -> [..,M,N] with "
                        "A's and B's batch dimensions dividing C's",
                        dims_str(a).c_str(), dims_str(b).c_str(), dims_str(c).c_str());
        for (const Tensor *t : {&a, &b, &c})
            if (t->type != CUDNN_DATA_FLOAT && t->type != CUDNN_DATA_BFLOAT16)
                return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "uid %lld is %s: FLOAT or BFLOAT16",
                            (long long)t->uid, type_name(t->type));
        break;
    }
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
        TRY(need(d, {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                     CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_YDESC}));
        const Setting &s = *d->op_setting;
        const int k = arity(s.mode);
        const bool has_b = d->ports.count(CUDNN_ATTR_OPERATION_POINTWISE_BDESC) != 0;
        const bool has_t = d->ports.count(CUDNN_ATTR_OPERATION_POINTWISE_TDESC) != 0;
        if (has_b != (k >= 2) || has_t != (k == 3))
            return fail(CUDNN_STATUS_BAD_PARAM, who,
                        "mode %d takes %d inputs (X%s%s), and BDESC is %sset, TDESC %sset",
                        (int)s.mode, k, k >= 2 ? ", B" : "", k == 3 ? ", T" : "",
                        has_b ? "" : "not ", has_t ? "" : "not ");
        op->kind = POINTWISE;
        op->mode = s.mode;
        op->axis = s.axis;
        op->in = {port(CUDNN_ATTR_OPERATION_POINTWISE_XDESC)};
        if (k >= 2) op->in.push_back(port(CUDNN_ATTR_OPERATION_POINTWISE_BDESC));
        if (k == 3) op->in.push_back(port(CUDNN_ATTR_OPERATION_POINTWISE_TDESC));
        op->out = port(CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
        const Tensor &y = *op->out;
        for (const TensorP &x : op->in) {
            bool ok = x->nd() == y.nd();
            for (size_t i = 0; ok && i < y.nd(); i++)
                ok = x->dim[i] == y.dim[i] || (x->dim[i] == 1 && s.mode != CUDNN_POINTWISE_GEN_INDEX);
            if (!ok)
                return fail(CUDNN_STATUS_BAD_PARAM, who,
                            "input uid %lld %s does not broadcast to Y %s%s", (long long)x->uid,
                            dims_str(*x).c_str(), dims_str(y).c_str(),
                            s.mode == CUDNN_POINTWISE_GEN_INDEX ? " (GEN_INDEX: equal)" : "");
        }
        if (s.mode == CUDNN_POINTWISE_GEN_INDEX && (s.axis < 0 || s.axis >= (int64_t)y.nd()))
            return fail(CUDNN_STATUS_BAD_PARAM, who, "GEN_INDEX axis %lld of rank %zu",
                        (long long)s.axis, y.nd());
        break;
    }
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
        TRY(need(d, {CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                     CUDNN_ATTR_OPERATION_REDUCTION_DESC}));
        op->kind = REDUCTION;
        op->mode = d->op_setting->mode;
        op->in = {port(CUDNN_ATTR_OPERATION_REDUCTION_XDESC)};
        op->out = port(CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
        const Tensor &x = *op->in[0], &y = *op->out;
        if (x.nd() != y.nd() || !divides(y.dim, x.dim, x.nd()))
            return fail(CUDNN_STATUS_BAD_PARAM, who,
                        "X %s -> Y %s: each Y dimension must divide X's", dims_str(x).c_str(),
                        dims_str(y).c_str());
        break;
    }
    default: { /* RESHAPE */
        TRY(need(d, {CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_ATTR_OPERATION_RESHAPE_YDESC}));
        op->kind = RESHAPE;
        op->in = {port(CUDNN_ATTR_OPERATION_RESHAPE_XDESC)};
        op->out = port(CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
        const Tensor &x = *op->in[0], &y = *op->out;
        if (x.count() != y.count())
            return fail(CUDNN_STATUS_BAD_PARAM, who, "X %s -> Y %s: not one element count",
                        dims_str(x).c_str(), dims_str(y).c_str());
        /* a view: Y's layout must cover exactly X's offsets */
        std::vector<int64_t> ox, oy;
        try {
            ox.reserve((size_t)x.count());
            oy.reserve((size_t)y.count());
        } catch (const std::bad_alloc &) {
            return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, who, "out of memory");
        }
        each(x.dim, [&](const int64_t *i) { ox.push_back(offset(x, i)); });
        each(y.dim, [&](const int64_t *i) { oy.push_back(offset(y, i)); });
        std::sort(ox.begin(), ox.end());
        std::sort(oy.begin(), oy.end());
        if (ox != oy)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who,
                        "Y's layout (uid %lld) is not a view of X's memory (uid %lld)",
                        (long long)y.uid, (long long)x.uid);
        break;
    }
    }
    d->op = op;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_graph(Desc *d) {
    const char *who = "operation graph";
    TRY(need(d, {ATTR_GRAPH_HANDLE, CUDNN_ATTR_OPERATIONGRAPH_OPS}));
    auto g = std::make_shared<Graph>();
    const std::vector<OpP> &ops = d->ops;
    std::map<int64_t, size_t> producer; /* uid -> the op writing it */
    for (size_t i = 0; i < ops.size(); i++) {
        std::vector<TensorP> all = ops[i]->in;
        all.push_back(ops[i]->out);
        for (const TensorP &t : all) {
            auto it = g->tensors.find(t->uid);
            if (it == g->tensors.end())
                g->tensors[t->uid] = t;
            else if (!it->second->same(*t))
                return fail(CUDNN_STATUS_BAD_PARAM, who,
                            "uid %lld names two different tensors (ops %zu and earlier)",
                            (long long)t->uid, i);
        }
        const Tensor &o = *ops[i]->out;
        if (o.by_value)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "op %zu writes by-value tensor uid %lld", i,
                        (long long)o.uid);
        if (producer.count(o.uid))
            return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld is written by ops %zu and %zu",
                        (long long)o.uid, producer[o.uid], i);
        producer[o.uid] = i;
    }
    /* a topological order, the given one where it is one */
    std::vector<std::vector<size_t>> users(ops.size());
    std::vector<size_t> waiting(ops.size(), 0);
    for (size_t i = 0; i < ops.size(); i++)
        for (const TensorP &t : ops[i]->in) {
            auto it = producer.find(t->uid);
            if (it == producer.end()) {
                if (t->virt)
                    return fail(CUDNN_STATUS_BAD_PARAM, who,
                                "virtual tensor uid %lld is read (op %zu) but never written",
                                (long long)t->uid, i);
                continue;
            }
            users[it->second].push_back(i);
            waiting[i]++;
        }
    std::set<size_t> ready;
    for (size_t i = 0; i < ops.size(); i++)
        if (!waiting[i]) ready.insert(i);
    while (!ready.empty()) {
        const size_t i = *ready.begin();
        ready.erase(ready.begin());
        g->ops.push_back(ops[i]);
        for (size_t u : users[i])
            if (--waiting[u] == 0) ready.insert(u);
    }
    if (g->ops.size() != ops.size())
        return fail(CUDNN_STATUS_BAD_PARAM, who, "the operations form a cycle");
    d->graph = g;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(Desc *d) {
    const char *who = desc_name(d->type);
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return finalize_tensor(d);
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return finalize_setting(d);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return finalize_graph(d);
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        return need(d, {CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_ATTR_ENGINEHEUR_MODE});
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
        return fail(CUDNN_STATUS_BAD_PARAM, who,
                    "no engine: an engine config comes from ENGINEHEUR_RESULTS");
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        return need(d, {ATTR_PLAN_HANDLE, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG});
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        TRY(need(d, {CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS}));
        if (d->uids.size() != d->ptrs.size())
            return fail(CUDNN_STATUS_BAD_PARAM, who, "%zu UNIQUE_IDS, %zu DATA_POINTERS",
                        d->uids.size(), d->ptrs.size());
        return CUDNN_STATUS_SUCCESS;
    default: return finalize_op(d);
    }
}

/* ------------------------------------------------------------- Execute */

/* one tensor's values during a call: every element at its offset, rounded
 * to the tensor's type */
struct Buf {
    const Tensor *t = nullptr;
    void *ptr = nullptr; /* non-virtual: the variant pack's */
    std::vector<float> v;
};

void run_matmul(const Op &op, const Buf &A, const Buf &B, Buf &C) {
    const Tensor &a = *A.t, &b = *B.t, &c = *C.t;
    const size_t n = c.nd();
    const int64_t M = c.dim[n - 2], N = c.dim[n - 1], K = a.dim[n - 1];
    const int64_t sam = a.stride[n - 2], sak = a.stride[n - 1];
    const int64_t sbk = b.stride[n - 2], sbn = b.stride[n - 1];
    const int64_t scm = c.stride[n - 2], scn = c.stride[n - 1];
    const std::vector<int64_t> batch(c.dim.begin(), c.dim.end() - 2);
    (void)op;
    each(batch, [&](const int64_t *idx) {
        const int64_t ab = offset_of(a, idx, c.dim, n - 2), bb = offset_of(b, idx, c.dim, n - 2);
        int64_t cb = 0;
        for (size_t d = 0; d + 2 < n; d++) cb += idx[d] * c.stride[d];
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += A.v[(size_t)(ab + m * sam + k * sak)] * B.v[(size_t)(bb + k * sbk + j * sbn)];
                C.v[(size_t)(cb + m * scm + j * scn)] = round_to(c.type, acc);
            }
    });
}

void run_pointwise(const Op &op, const std::vector<const Buf *> &in, Buf &Y) {
    const Tensor &y = *Y.t;
    const size_t n = y.nd();
    each(y.dim, [&](const int64_t *idx) {
        float x[3] = {0, 0, 0};
        if (op.mode != CUDNN_POINTWISE_GEN_INDEX)
            for (size_t i = 0; i < in.size(); i++)
                x[i] = in[i]->v[(size_t)offset_of(*in[i]->t, idx, y.dim, n)];
        float r;
        switch (op.mode) {
        case CUDNN_POINTWISE_ADD: r = x[0] + x[1]; break;
        case CUDNN_POINTWISE_SUB: r = x[0] - x[1]; break;
        case CUDNN_POINTWISE_MUL: r = x[0] * x[1]; break;
        case CUDNN_POINTWISE_DIV: r = x[0] / x[1]; break;
        case CUDNN_POINTWISE_EXP: r = expf(x[0]); break;
        case CUDNN_POINTWISE_LOG: r = logf(x[0]); break;
        case CUDNN_POINTWISE_CMP_GE: r = x[0] >= x[1] ? 1.0f : 0.0f; break;
        case CUDNN_POINTWISE_BINARY_SELECT: r = x[2] != 0.0f ? x[0] : x[1]; break;
        case CUDNN_POINTWISE_GEN_INDEX: r = (float)idx[op.axis]; break;
        default: r = x[0]; break; /* IDENTITY */
        }
        Y.v[(size_t)offset(y, idx)] = round_to(y.type, r);
    });
}

void run_reduction(const Op &op, const Buf &X, Buf &Y) {
    const Tensor &x = *X.t, &y = *Y.t;
    const size_t n = x.nd();
    std::vector<float> acc((size_t)y.count());
    std::vector<char> seen((size_t)y.count(), 0);
    /* X in row-major order: each Y element's terms in increasing index order */
    each(x.dim, [&](const int64_t *idx) {
        int64_t lin = 0; /* Y's row-major index */
        for (size_t d = 0; d < n; d++) lin = lin * y.dim[d] + idx[d] / (x.dim[d] / y.dim[d]);
        const float v = X.v[(size_t)offset(x, idx)];
        float &a = acc[(size_t)lin];
        if (!seen[(size_t)lin]) {
            a = v;
            seen[(size_t)lin] = 1;
        } else if (op.mode == CUDNN_REDUCE_TENSOR_ADD) {
            a = a + v;
        } else if (isnan(v) || v > a) { /* MAX; NaN propagates */
            a = v;
        }
    });
    int64_t lin = 0;
    each(y.dim, [&](const int64_t *idx) {
        Y.v[(size_t)offset(y, idx)] = round_to(y.type, acc[(size_t)lin++]);
    });
}

void run_reshape(const Buf &X, Buf &Y) {
    const Tensor &y = *Y.t;
    each(y.dim, [&](const int64_t *idx) {
        const size_t o = (size_t)offset(y, idx);
        Y.v[o] = round_to(y.type, X.v[o]);
    });
}

bool overlap(const Buf &a, const Buf &b) {
    const char *p = (const char *)a.ptr, *q = (const char *)b.ptr;
    return p < q + b.t->bytes() && q < p + a.t->bytes();
}

cudnnStatus_t execute(cudnnHandle_t handle, Desc *plan, Desc *pack) {
    const char *who = "execute";
    if (!handle_ok(handle)) return fail(CUDNN_STATUS_BAD_PARAM, who, "not a live cudnnHandle_t");
    if (!plan || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !plan->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "not a finalized execution plan");
    if (!pack || pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !pack->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "not a finalized variant pack");
    const Graph &g = *plan->graph;
    std::map<int64_t, Buf> bufs;
    try {
        for (const auto &kv : g.tensors) bufs[kv.first].t = kv.second.get();
    } catch (const std::bad_alloc &) {
        return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, who, "out of memory");
    }
    /* the variant pack: one entry for each non-virtual tensor, no other */
    std::set<int64_t> given;
    for (size_t i = 0; i < pack->uids.size(); i++) {
        const long long uid = (long long)pack->uids[i];
        auto it = bufs.find(pack->uids[i]);
        if (it == bufs.end())
            return fail(CUDNN_STATUS_BAD_PARAM, who, "variant pack uid %lld is not in the graph",
                        uid);
        if (it->second.t->virt)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "variant pack uid %lld is virtual", uid);
        if (!given.insert(pack->uids[i]).second)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "variant pack uid %lld given twice", uid);
        it->second.ptr = pack->ptrs[i];
    }
    for (auto &kv : bufs) {
        Buf &b = kv.second;
        const long long uid = (long long)kv.first;
        if (b.t->virt) continue;
        if (!given.count(kv.first))
            return fail(CUDNN_STATUS_BAD_PARAM, who, "no variant pack entry for uid %lld", uid);
        if (!b.ptr) return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld: null pointer", uid);
        const uintptr_t u = (uintptr_t)b.ptr;
        if (b.t->by_value) {
            if (emu::is_device(b.ptr, 1))
                return fail(CUDNN_STATUS_BAD_PARAM, who,
                            "uid %lld is by value: its pointer must be host memory", uid);
        } else if (u % (uintptr_t)b.t->align || u % type_size(b.t->type)) {
            return fail(CUDNN_STATUS_BAD_PARAM, who,
                        "uid %lld: pointer %p not aligned to %lld bytes", uid, b.ptr,
                        (long long)b.t->align);
        }
    }
    std::set<int64_t> written;
    for (const OpP &op : g.ops) written.insert(op->out->uid);
    for (const auto &kv : bufs) {
        const Buf &b = kv.second;
        if (b.t->virt || b.t->by_value || !written.count(kv.first)) continue;
        for (const auto &kv2 : bufs)
            if (kv2.first != kv.first && !kv2.second.t->virt && !kv2.second.t->by_value &&
                overlap(b, kv2.second))
                return fail(CUDNN_STATUS_BAD_PARAM, who,
                            "output uid %lld overlaps the memory of uid %lld",
                            (long long)kv.first, (long long)kv2.first);
    }
    if (!pack->workspace)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "null workspace (the plan needs %lld bytes)",
                    (long long)WORKSPACE_BYTES);
    try {
        for (auto &kv : bufs) kv.second.v.assign((size_t)kv.second.t->extent(), 0.0f);
    } catch (const std::bad_alloc &) {
        return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, who, "out of memory");
    }
    /* the memory the call touches, before touching any */
    for (const auto &kv : bufs) {
        const Buf &b = kv.second;
        if (b.t->virt || b.t->by_value) continue;
        char what[64];
        snprintf(what, sizeof what, "cudnn: tensor uid %lld", (long long)kv.first);
        emu::check_device(b.ptr, (size_t)b.t->bytes(), what);
    }
    emu::check_device(pack->workspace, (size_t)WORKSPACE_BYTES, "cudnn: workspace");
    for (auto &kv : bufs) /* host memory: one value of its type */
        if (kv.second.t->by_value) kv.second.v[0] = load(kv.second.ptr, kv.second.t->type, 0);

    emu::DeviceScope scope;
    memset(pack->workspace, 0xff, (size_t)WORKSPACE_BYTES); /* an input inside it shows */
    for (auto &kv : bufs) {
        Buf &b = kv.second;
        if (b.t->virt || b.t->by_value || written.count(kv.first)) continue;
        each(b.t->dim, [&](const int64_t *idx) {
            const int64_t o = offset(*b.t, idx);
            b.v[(size_t)o] = load(b.ptr, b.t->type, o);
        });
    }
    for (const OpP &op : g.ops) {
        std::vector<const Buf *> in;
        for (const TensorP &t : op->in) in.push_back(&bufs[t->uid]);
        Buf &out = bufs[op->out->uid];
        switch (op->kind) {
        case MATMUL: run_matmul(*op, *in[0], *in[1], out); break;
        case POINTWISE: run_pointwise(*op, in, out); break;
        case REDUCTION: run_reduction(*op, *in[0], out); break;
        case RESHAPE: run_reshape(*in[0], out); break;
        }
    }
    for (auto &kv : bufs) {
        Buf &b = kv.second;
        if (b.t->virt || !written.count(kv.first)) continue;
        each(b.t->dim, [&](const int64_t *idx) {
            const int64_t o = offset(*b.t, idx);
            store(b.ptr, b.t->type, o, b.v[(size_t)o]);
        });
    }
    return CUDNN_STATUS_SUCCESS;
}
} /* namespace */

/* ------------------------------------------------------------- handle */

CUDNN_EMU_EXPORT size_t cudnnGetVersion(void) { return 91900; }

CUDNN_EMU_EXPORT const char *cudnnGetErrorString(cudnnStatus_t st) {
    switch ((int)st) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    default: break;
    }
    switch (CUDNN_STATUS_CATEGORY((int)st)) {
    case 1000: return "CUDNN_STATUS_NOT_INITIALIZED (or another uncategorized error)";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM (a subcategory)";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED (a subcategory)";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

CUDNN_EMU_EXPORT void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || !max_size) return;
    snprintf(message, max_size, "%s", g_error.c_str());
    g_error.clear();
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    std::lock_guard<std::mutex> hold(g_lock);
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "null handle pointer");
    cudnnContext *c = new (std::nothrow) cudnnContext{HANDLE_MAGIC, nullptr};
    if (!c) return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnCreate", "out of memory");
    g_live_handles.insert(c);
    *handle = c;
    return CUDNN_STATUS_SUCCESS;
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    std::lock_guard<std::mutex> hold(g_lock);
    if (!handle_ok(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy", "not a live cudnnHandle_t");
    g_live_handles.erase(handle);
    handle->magic = 0;
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    std::lock_guard<std::mutex> hold(g_lock);
    if (!handle_ok(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "not a live cudnnHandle_t");
    handle->stream = stream; /* every stream runs synchronously */
    return CUDNN_STATUS_SUCCESS;
}

/* --------------------------------------------------------- descriptors */

CUDNN_EMU_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                                            cudnnBackendDescriptor_t *out) {
    std::lock_guard<std::mutex> hold(g_lock);
    const char *who = "cudnnBackendCreateDescriptor";
    if (!out) return fail(CUDNN_STATUS_BAD_PARAM, who, "null descriptor pointer");
    switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: break;
    default:
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "descriptor type %d is not modelled",
                    (int)type);
    }
    Desc *d = new (std::nothrow) Desc();
    if (!d) return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, who, "out of memory");
    d->type = type;
    g_live_desc.insert(d);
    *out = d;
    return CUDNN_STATUS_SUCCESS;
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t desc) {
    std::lock_guard<std::mutex> hold(g_lock);
    Desc *d = live_desc(desc);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendDestroyDescriptor",
                    "not a live descriptor");
    g_live_desc.erase(d);
    d->magic = 0;
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t desc,
                                                        cudnnBackendAttributeName_t name,
                                                        cudnnBackendAttributeType_t type,
                                                        int64_t count, const void *values) {
    std::lock_guard<std::mutex> hold(g_lock);
    Desc *d = live_desc(desc);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute", "not a live descriptor");
    const Value v{desc_name(d->type), (int)name, type, count, values};
    if (d->finalized)
        return fail(CUDNN_STATUS_NOT_INITIALIZED, v.who, "%s: the descriptor is finalized",
                    attr_str(v.attr).c_str());
    cudnnStatus_t st;
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: st = set_tensor(d, v); break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: st = set_setting(d, v); break;
    default: st = is_op(d->type) ? set_op(d, v) : set_other(d, v); break;
    }
    if (st == CUDNN_STATUS_SUCCESS) d->have.insert(v.attr);
    return st;
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const desc,
                                                        cudnnBackendAttributeName_t name,
                                                        cudnnBackendAttributeType_t type,
                                                        int64_t requested, int64_t *count,
                                                        void *values) {
    std::lock_guard<std::mutex> hold(g_lock);
    Desc *d = live_desc(desc);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute", "not a live descriptor");
    const Value v{desc_name(d->type), (int)name, type, requested, values};
    if (!d->finalized)
        return fail(CUDNN_STATUS_NOT_INITIALIZED, v.who, "%s: the descriptor is not finalized",
                    attr_str(v.attr).c_str());
    if (requested < 0 || (requested > 0 && !values))
        return fail(CUDNN_STATUS_BAD_PARAM, v.who, "%s: %lld elements requested into %p",
                    attr_str(v.attr).c_str(), (long long)requested, values);
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && v.attr == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
        if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM, v.who, "RESULTS: attribute type %d, not %d",
                        (int)type, (int)CUDNN_TYPE_BACKEND_DESCRIPTOR);
        if (requested > 0) {
            Desc *cfg = live_desc(((cudnnBackendDescriptor_t *)values)[0]);
            if (!cfg || cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                return fail(CUDNN_STATUS_BAD_PARAM, v.who,
                            "RESULTS[0]: not a live engine config descriptor");
            cfg->graph = d->graph;
            cfg->finalized = true;
        }
        if (count) *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        v.attr == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
        if (type != CUDNN_TYPE_INT64)
            return fail(CUDNN_STATUS_BAD_PARAM, v.who, "WORKSPACE_SIZE: attribute type %d, not %d",
                        (int)type, (int)CUDNN_TYPE_INT64);
        if (requested > 0) memcpy(values, &WORKSPACE_BYTES, sizeof WORKSPACE_BYTES);
        if (count) *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    return fail(CUDNN_STATUS_NOT_SUPPORTED, v.who, "getting %s is not modelled",
                attr_str(v.attr).c_str());
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t desc) {
    std::lock_guard<std::mutex> hold(g_lock);
    Desc *d = live_desc(desc);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize", "not a live descriptor");
    if (d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, desc_name(d->type), "finalized already");
    const cudnnStatus_t st = finalize(d);
    if (st == CUDNN_STATUS_SUCCESS) d->finalized = true;
    return st;
}

CUDNN_EMU_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
                                                   cudnnBackendDescriptor_t plan,
                                                   cudnnBackendDescriptor_t pack) {
    std::lock_guard<std::mutex> hold(g_lock);
    return execute(handle, live_desc(plan), live_desc(pack));
}
