/* cudnn_graph.cuh - cuDNN's backend graph API, loaded at run time, and a small
 * builder for operation graphs over it (cudnn_graph.cu). Internal to
 * libtitan-cuda.so; attention_cudnn.cu is its user.
 *
 * cuDNN is opened with dlopen on first use ($TITAN_CUDNN_LIB, else
 * libcudnn.so.9 on the library search path), so the backend neither links
 * nor needs it: without cuDNN the CUDA backend works as before and only the
 * cuDNN attention path is unavailable.
 *
 * A CudnnGraph collects tensor and operation descriptors; build() finalizes
 * the operation graph, takes the first engine config (heuristic mode A's,
 * then the fallback list's) that finalizes into an execution plan, and reads
 * the plan's workspace size.
 * The first failing cuDNN call is kept (where, status, cuDNN's last error
 * message) and every later call is skipped, so a graph is built straight
 * through and checked once at the end. */
#ifndef TITAN_KERNELS_CUDNN_GRAPH_CUH
#define TITAN_KERNELS_CUDNN_GRAPH_CUH

#if __has_include(<cudnn.h>)
#define TITAN_HAVE_CUDNN 1
#include <cudnn.h>

#include <stdint.h>

#include <string>
#include <vector>

/* The cuDNN entry points titan calls, resolved from the opened library. */
struct CudnnApi {
    size_t (*getVersion)(void);
    const char *(*getErrorString)(cudnnStatus_t);
    void (*getLastErrorString)(char *, size_t);
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*setStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*createDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*destroyDescriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*setAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                  cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*getAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                  cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
    cudnnHandle_t handle; /* on the default stream */
    size_t version;       /* cudnnGetVersion(): 91900 for 9.19.0 */
};

/* The loaded API with a handle, or NULL with *why saying what is missing
 * (the library, a symbol, or the handle). Loaded once per process. */
const CudnnApi *titan_cudnn_api(std::string *why);

struct CudnnTensor {
    cudnnBackendDescriptor_t desc;
    int64_t uid;
    int64_t dim[4];
};

class CudnnGraph {
  public:
    explicit CudnnGraph(const CudnnApi *api) : api_(api) {}
    ~CudnnGraph();
    CudnnGraph(const CudnnGraph &) = delete;
    CudnnGraph &operator=(const CudnnGraph &) = delete;

    /* A 4-d tensor. uid > 0 names a tensor of the variant pack (virtual
     * false); uid 0 makes a virtual one (an intermediate the engine keeps to
     * itself) with a uid of its own. by_value: a scalar passed from host
     * memory at execution. */
    CudnnTensor tensor(cudnnDataType_t type, const int64_t dim[4], const int64_t stride[4],
                       int64_t uid, bool by_value = false);
    /* A virtual tensor, dense in [d0, d1, d2, d3] order. */
    CudnnTensor virt(cudnnDataType_t type, int64_t d0, int64_t d1, int64_t d2, int64_t d3);

    /* y = mode(x[, b[, t]]), math in prec; axis for GEN_INDEX (else -1) */
    void pointwise(cudnnPointwiseMode_t mode, CudnnTensor x, const CudnnTensor *b,
                   const CudnnTensor *t, CudnnTensor y, cudnnDataType_t prec, int64_t axis = -1);
    /* the same into a new virtual tensor of x's dims and the given type */
    CudnnTensor pointwise(cudnnPointwiseMode_t mode, CudnnTensor x, const CudnnTensor *b = nullptr,
                          cudnnDataType_t type = CUDNN_DATA_FLOAT,
                          cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1);
    /* c[.., M, N] = a[.., M, K] b[.., K, N], fp32 accumulation */
    void matmul(CudnnTensor a, CudnnTensor b, CudnnTensor c);
    /* y = op over the dims where y is smaller than x */
    void reduction(cudnnReduceTensorOp_t op, CudnnTensor x, CudnnTensor y);
    /* op over x's last dim, into a new fp32 virtual tensor [x0, x1, x2, 1] */
    CudnnTensor reduce_last(cudnnReduceTensorOp_t op, CudnnTensor x);
    /* y views x's memory with y's dims and strides */
    void reshape(CudnnTensor x, CudnnTensor y);

    /* Finalizes the graph and a plan for it: true, or false with error(). */
    bool build();
    cudnnBackendDescriptor_t plan() const { return plan_; }
    int64_t workspace_bytes() const { return workspace_; }
    /* "stage: status: cuDNN's message" of the first failure, else empty */
    const std::string &error() const { return error_; }

  private:
    cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type, const char *what);
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
             cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *what);
    /* attribute name of d := the one descriptor v */
    void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                  cudnnBackendDescriptor_t v, const char *what) {
        set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
    }
    void finalize(cudnnBackendDescriptor_t d, const char *what);
    void fail(cudnnStatus_t st, const char *what);
    void op(cudnnBackendDescriptor_t d) { ops_.push_back(d); }

    const CudnnApi *api_;
    std::vector<cudnnBackendDescriptor_t> owned_, ops_;
    cudnnBackendDescriptor_t plan_ = nullptr;
    int64_t workspace_ = 0;
    int64_t next_virtual_uid_ = 1000; /* above every variant-pack uid */
    std::string error_;
};

/* Runs a built plan: data[i] for uids[i] (device pointers; host pointers
 * for by-value tensors), workspace of plan's size. Returns "" or the error. */
std::string titan_cudnn_execute(const CudnnApi *api, cudnnBackendDescriptor_t plan,
                                const int64_t *uids, void *const *data, int n, void *workspace);

#endif /* __has_include(<cudnn.h>) */
#endif
