/* cudnn_graph.cu - cuDNN opened at run time, and the graph builder of
 * cudnn_graph.cuh. Host code only. */
#include "cudnn_graph.cuh"

#ifdef TITAN_HAVE_CUDNN
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------- loading */

static CudnnApi g_api;
static std::string g_why;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

template <typename F>
static bool resolve(void *lib, const char *name, F *fn) {
    *fn = (F)dlsym(lib, name);
    if (!*fn) g_why = std::string("cuDNN library lacks ") + name;
    return *fn != nullptr;
}

static void load_once(void) {
    const char *path = getenv("TITAN_CUDNN_LIB");
    if (!path || !*path) path = "libcudnn.so.9";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        g_why = std::string("cannot open ") + path + ": " + (e ? e : "unknown error") +
                " (set TITAN_CUDNN_LIB to libcudnn.so.9's path)";
        return;
    }
    CudnnApi a = {};
    if (!resolve(lib, "cudnnGetVersion", &a.getVersion) ||
        !resolve(lib, "cudnnGetErrorString", &a.getErrorString) ||
        !resolve(lib, "cudnnGetLastErrorString", &a.getLastErrorString) ||
        !resolve(lib, "cudnnCreate", &a.create) || !resolve(lib, "cudnnSetStream", &a.setStream) ||
        !resolve(lib, "cudnnBackendCreateDescriptor", &a.createDescriptor) ||
        !resolve(lib, "cudnnBackendDestroyDescriptor", &a.destroyDescriptor) ||
        !resolve(lib, "cudnnBackendSetAttribute", &a.setAttribute) ||
        !resolve(lib, "cudnnBackendGetAttribute", &a.getAttribute) ||
        !resolve(lib, "cudnnBackendFinalize", &a.finalize) ||
        !resolve(lib, "cudnnBackendExecute", &a.execute))
        return; /* the library stays open: harmless, and cuDNN dislikes unloading */
    a.version = a.getVersion();
    /* the backend graph API with these attributes is cuDNN 9's */
    if (a.version < 90000) {
        char v[64];
        snprintf(v, sizeof v, "cuDNN %zu is older than 9.0", a.version);
        g_why = v;
        return;
    }
    cudnnStatus_t st = a.create(&a.handle);
    if (st == CUDNN_STATUS_SUCCESS) st = a.setStream(a.handle, 0);
    if (st != CUDNN_STATUS_SUCCESS) {
        g_why = std::string("cudnnCreate: ") + a.getErrorString(st);
        return;
    }
    g_api = a;
}

const CudnnApi *titan_cudnn_api(std::string *why) {
    pthread_once(&g_once, load_once);
    if (g_api.handle) return &g_api;
    if (why) *why = g_why;
    return nullptr;
}

/* ------------------------------------------------------------- builder */

CudnnGraph::~CudnnGraph() {
    if (plan_) api_->destroyDescriptor(plan_);
    for (size_t i = owned_.size(); i-- > 0;) api_->destroyDescriptor(owned_[i]);
}

void CudnnGraph::fail(cudnnStatus_t st, const char *what) {
    if (!error_.empty()) return;
    char msg[512] = "";
    api_->getLastErrorString(msg, sizeof msg);
    error_ = std::string(what) + ": " + api_->getErrorString(st);
    if (msg[0]) error_ += std::string(": ") + msg;
}

cudnnBackendDescriptor_t CudnnGraph::make(cudnnBackendDescriptorType_t type, const char *what) {
    if (!error_.empty()) return nullptr;
    cudnnBackendDescriptor_t d = nullptr;
    cudnnStatus_t st = api_->createDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) {
        fail(st, what);
        return nullptr;
    }
    owned_.push_back(d);
    return d;
}

void CudnnGraph::set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                     cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *what) {
    if (!error_.empty()) return;
    cudnnStatus_t st = api_->setAttribute(d, name, type, n, v);
    if (st != CUDNN_STATUS_SUCCESS) fail(st, what);
}

void CudnnGraph::finalize(cudnnBackendDescriptor_t d, const char *what) {
    if (!error_.empty()) return;
    cudnnStatus_t st = api_->finalize(d);
    if (st != CUDNN_STATUS_SUCCESS) fail(st, what);
}

CudnnTensor CudnnGraph::tensor(cudnnDataType_t type, const int64_t dim[4],
                               const int64_t stride[4], int64_t uid, bool by_value) {
    bool is_virtual = uid == 0;
    if (is_virtual) uid = next_virtual_uid_++;
    int64_t align = 16;
    cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type");
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dims");
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, "tensor strides");
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual");
    if (by_value)
        set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor by value");
    finalize(d, "tensor");
    return CudnnTensor{d, uid, {dim[0], dim[1], dim[2], dim[3]}};
}

CudnnTensor CudnnGraph::virt(cudnnDataType_t type, int64_t d0, int64_t d1, int64_t d2,
                             int64_t d3) {
    const int64_t dim[4] = {d0, d1, d2, d3};
    const int64_t stride[4] = {d1 * d2 * d3, d2 * d3, d3, 1};
    return tensor(type, dim, stride, 0);
}

void CudnnGraph::pointwise(cudnnPointwiseMode_t mode, CudnnTensor x, const CudnnTensor *b,
                           const CudnnTensor *t, CudnnTensor y, cudnnDataType_t prec,
                           int64_t axis) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise prec");
    if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    finalize(pw, "pointwise");
    cudnnBackendDescriptor_t o = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op");
    set_desc(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise op desc");
    set_desc(o, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.desc, "pointwise op x");
    if (b) set_desc(o, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b->desc, "pointwise op b");
    if (t) set_desc(o, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t->desc, "pointwise op t");
    set_desc(o, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.desc, "pointwise op y");
    finalize(o, "pointwise op");
    op(o);
}

CudnnTensor CudnnGraph::pointwise(cudnnPointwiseMode_t mode, CudnnTensor x, const CudnnTensor *b,
                                  cudnnDataType_t type, cudnnDataType_t prec, int64_t axis) {
    CudnnTensor y = virt(type, x.dim[0], x.dim[1], x.dim[2], x.dim[3]);
    pointwise(mode, x, b, nullptr, y, prec, axis);
    return y;
}

CudnnTensor CudnnGraph::reduce_last(cudnnReduceTensorOp_t op, CudnnTensor x) {
    CudnnTensor y = virt(CUDNN_DATA_FLOAT, x.dim[0], x.dim[1], x.dim[2], 1);
    reduction(op, x, y);
    return y;
}

void CudnnGraph::matmul(CudnnTensor a, CudnnTensor b, CudnnTensor c) {
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul compute type");
    finalize(mm, "matmul");
    cudnnBackendDescriptor_t o = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
    set_desc(o, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.desc, "matmul op a");
    set_desc(o, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.desc, "matmul op b");
    set_desc(o, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.desc, "matmul op c");
    set_desc(o, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, "matmul op desc");
    finalize(o, "matmul op");
    op(o);
}

void CudnnGraph::reduction(cudnnReduceTensorOp_t rop, CudnnTensor x, CudnnTensor y) {
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &rop,
        "reduction operator");
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "reduction type");
    finalize(r, "reduction");
    cudnnBackendDescriptor_t o = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
    set_desc(o, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.desc, "reduction op x");
    set_desc(o, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.desc, "reduction op y");
    set_desc(o, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r, "reduction op desc");
    finalize(o, "reduction op");
    op(o);
}

void CudnnGraph::reshape(CudnnTensor x, CudnnTensor y) {
    cudnnBackendDescriptor_t o = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape op");
    set_desc(o, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.desc, "reshape op x");
    set_desc(o, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.desc, "reshape op y");
    finalize(o, "reshape op");
    op(o);
}

bool CudnnGraph::build() {
    if (!error_.empty()) return false;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    /* the graph's handle attribute: deprecated in 9.x, still the way to bind one */
    const cudnnBackendAttributeName_t graph_handle = (cudnnBackendAttributeName_t)800;
    const cudnnBackendAttributeName_t plan_handle = (cudnnBackendAttributeName_t)400;
    cudnnBackendDescriptor_t g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    set(g, graph_handle, CUDNN_TYPE_HANDLE, 1, &api_->handle, "graph handle");
    set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, D, (int64_t)ops_.size(), ops_.data(), "graph ops");
    finalize(g, "operation graph");
    /* heuristics' engine configs, best first: mode A, then the fallback list */
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    std::string first_refusal; /* over both modes: mode A's reason is the telling one */
    int64_t tried = 0;
    for (int m = 0; m < 2 && error_.empty() && !plan_; m++) {
        cudnnBackendDescriptor_t h = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
        set_desc(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g, "heuristics graph");
        set(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m], "heuristics mode");
        finalize(h, "heuristics");
        enum { MAX_CFG = 8 };
        cudnnBackendDescriptor_t cfg[MAX_CFG];
        int64_t ncfg = 0;
        for (int i = 0; i < MAX_CFG; i++) cfg[i] = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "config");
        if (!error_.empty()) return false;
        cudnnStatus_t st =
            api_->getAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, D, MAX_CFG, &ncfg, cfg);
        if (st != CUDNN_STATUS_SUCCESS) {
            fail(st, "heuristics results");
            return false;
        }
        for (int64_t i = 0; i < ncfg && i < MAX_CFG && !plan_; i++) {
            tried++;
            cudnnBackendDescriptor_t p = nullptr;
            st = api_->createDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p);
            if (st == CUDNN_STATUS_SUCCESS)
                st = api_->setAttribute(p, plan_handle, CUDNN_TYPE_HANDLE, 1, &api_->handle);
            if (st == CUDNN_STATUS_SUCCESS)
                st = api_->setAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, D, 1, &cfg[i]);
            if (st == CUDNN_STATUS_SUCCESS) st = api_->finalize(p);
            if (st == CUDNN_STATUS_SUCCESS) {
                plan_ = p;
                break;
            }
            if (first_refusal.empty()) {
                char msg[512] = "";
                api_->getLastErrorString(msg, sizeof msg);
                first_refusal = std::string(api_->getErrorString(st)) + (msg[0] ? ": " : "") + msg;
            }
            if (p) api_->destroyDescriptor(p);
        }
        if (!plan_ && m == 1)
            error_ = tried ? "execution plan: no engine config finalizes (first: " + first_refusal + ")"
                           : "heuristics: no engine supports this graph";
    }
    if (!plan_) return false;
    int64_t n = 0;
    cudnnStatus_t st = api_->getAttribute(plan_, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, &workspace_);
    if (st != CUDNN_STATUS_SUCCESS) {
        fail(st, "plan workspace size");
        return false;
    }
    return true;
}

std::string titan_cudnn_execute(const CudnnApi *api, cudnnBackendDescriptor_t plan,
                                const int64_t *uids, void *const *data, int n, void *workspace) {
    cudnnBackendDescriptor_t vp = nullptr;
    const char *what = "variant pack";
    cudnnStatus_t st = api->createDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = api->setAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = api->setAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n,
                               data);
    if (st == CUDNN_STATUS_SUCCESS)
        st = api->setAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                               &workspace);
    if (st == CUDNN_STATUS_SUCCESS) st = api->finalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) {
        what = "execute";
        st = api->execute(api->handle, plan, vp);
    }
    std::string err;
    if (st != CUDNN_STATUS_SUCCESS) {
        char msg[512] = "";
        api->getLastErrorString(msg, sizeof msg);
        err = std::string(what) + ": " + api->getErrorString(st) + (msg[0] ? ": " : "") + msg;
    }
    if (vp) api->destroyDescriptor(vp);
    return err;
}
#endif /* TITAN_HAVE_CUDNN */
