/* attention_cudnn.cu - bf16 causal grouped-query attention through cuDNN's
 * fused flash attention (the "SDPA" operation graphs of its backend API).
 * It is the other implementation the CUDA backend keeps beside its own
 * kernels (attention_tc.cu): each checks the other. It is the faster on
 * Hopper (scripts/bench_gpu.sh; README, "Measured"), so titan-train uses it for
 * bf16 unless training.deterministic asks for repeatable bits (attention.cu
 * decides; TITAN_CUDA_ATTENTION=cudnn requires it, =titan keeps it out).
 *
 * The graphs are the ones cuDNN's fused engines recognise, written here
 * against the backend API (cudnn_graph.cuh), from cuDNN's documentation of
 * its attention graphs:
 *
 *   forward   S = Q K^T (fp32) * scale; causal mask: row >= col keeps S,
 *             else -inf (GEN_INDEX, CMP_GE, BINARY_SELECT); for Tq < Tk
 *             cuDNN's bottom-right causal mask, row + Tk - Tq >= col (the
 *             row index shifted by an INT32 ADD of Tk and SUB of Tq, both
 *             by-value scalars, as cuDNN's frontend builds it); softmax as
 *             max, sub, exp, sum, div, with Stats = max + log(sum) saved
 *             (titan's lse); P in bf16; O = P V.
 *   backward  D = rowsum(dO * O) (kept in the workspace: softmax_sum);
 *             P = exp(S * scale - Stats) with the same mask;
 *             dV = P^T dO; dS = P * (dO V^T - D) * scale;
 *             dK = dS^T Q; dQ = dS K, accumulated in fp32 (dQ_accum, in
 *             the workspace, zeroed first) and cast to bf16.
 *             Grouped-query: the query heads' dK, dV are summed per kv head
 *             by a reduction over the head dim.
 *
 * Layouts are titan's: q, dq, out, dout [B,Tq,NH,HD] and k, v, dk, dv
 * [B,Tk,NKV,HD] are given to cuDNN as [B,H,T,HD] tensors with strides
 * (T*H*HD, HD, H*HD, 1); K^T and V^T are the same memory with the last two
 * dims and strides swapped. lse [B,NH,Tq] is Stats [B,NH,Tq,1], packed.
 *
 * Plans are built once per shape (forward or backward, B, Tq, Tk, NH, NKV,
 * HD) and kept for the process; a mutex guards the table. Applies to bf16
 * with HD a multiple of 8 up to 128 and 16-byte aligned pointers (and,
 * before cuDNN 9.16, Tq and Tk multiples of 128, where older backward
 * engines need a padding mask this code does not build; that also meets
 * the bottom-right mask's multiples of 64 before 9.6); other calls return
 * false and the caller runs its own kernels. A missing library or a graph
 * no engine takes sends the call there too, with a note; but where cuDNN is
 * required (TITAN_CUDA_ATTENTION=cudnn) they end the process with the
 * reason: that run does not silently measure something else.
 *
 * Numbers: not titan's bits. cuDNN sums in its own order, and its backward
 * adds dQ across key blocks with atomics, so the backward is not bitwise
 * repeatable (the forward is). The acc mask's "+=" goes through a
 * temporary and titan_cuda_add. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <limits>
#include <string>

#include "cuda_ops.cuh"
#include "cudnn_graph.cuh"

#ifndef TITAN_HAVE_CUDNN
/* As where the library does not open: a note once, or the end where required. */
bool titan_cuda_attention_cudnn_forward(bool required, bf16 *, float *, const bf16 *,
                                        const bf16 *, const bf16 *, int, int, int, int, int, int) {
    static int told;
    if (!required) {
        if (!__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL))
            fprintf(stderr, "titan: note: cuda: attention through titan's kernels: this library "
                            "was built without cudnn.h\n");
        return false;
    }
    fprintf(stderr, "titan: error: cuda: TITAN_CUDA_ATTENTION=cudnn, but this library was built "
                    "without cudnn.h\n");
    fflush(NULL);
    _exit(TITAN_ERR_USAGE);
}
bool titan_cuda_attention_cudnn_backward(bool required, int, bf16 *, bf16 *, bf16 *,
                                         const bf16 *, const bf16 *, const float *, const bf16 *,
                                         const bf16 *, const bf16 *, int, int, int, int, int, int) {
    return titan_cuda_attention_cudnn_forward(required, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
#else

/* variant-pack uids */
enum {
    UID_Q = 1, UID_KT, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF, UID_DO, UID_DQ, UID_DK,
    UID_DV, UID_ONE, UID_SOFTMAX_SUM, UID_DQ_ACCUM, UID_SKV, UID_SQ,
};

struct PlanKey {
    int backward, B, Tq, Tk, NH, NKV, HD;
    bool operator==(const PlanKey &o) const { return memcmp(this, &o, sizeof o) == 0; }
};

struct Plan {
    PlanKey key;
    CudnnGraph *graph; /* kept for the process: the plan refers to its descriptors */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Plan g_plans[32];
static int g_nplans;

[[noreturn]] static void cudnn_fatal(int code, const PlanKey &k, const std::string &what) {
    fflush(NULL); /* what the process printed so far comes first */
    fprintf(stderr,
            "titan: error: cuda: attention %s through cuDNN "
            "B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d: %s\n"
            "hint: TITAN_CUDA_ATTENTION=titan uses titan's own attention kernels\n",
            k.backward ? "backward" : "forward", k.B, k.Tq, k.Tk, k.NH, k.NKV, k.HD, what.c_str());
    fflush(NULL);
    _exit(code);
}

/* [B, H, T, HD] over titan's [B, T, H, HD] memory; transposed: [B, H, HD, T] */
static void bshd(int64_t dim[4], int64_t stride[4], int B, int T, int H, int HD, bool transposed) {
    dim[0] = B, dim[1] = H, dim[2] = T, dim[3] = HD;
    stride[0] = (int64_t)T * H * HD, stride[1] = HD, stride[2] = (int64_t)H * HD, stride[3] = 1;
    if (transposed) {
        int64_t d = dim[2], s = stride[2];
        dim[2] = dim[3], stride[2] = stride[3];
        dim[3] = d, stride[3] = s;
    }
}

static CudnnTensor io_tensor(CudnnGraph &g, int64_t uid, int B, int T, int H, int HD,
                             bool transposed = false) {
    int64_t dim[4], stride[4];
    bshd(dim, stride, B, T, H, HD, transposed);
    return g.tensor(CUDNN_DATA_BFLOAT16, dim, stride, uid);
}

static CudnnTensor scalar(CudnnGraph &g, int64_t uid, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    const int64_t one[4] = {1, 1, 1, 1};
    return g.tensor(type, one, one, uid, true);
}

/* s [B, NH, Tq, Tk] (fp32) with the keys past each query's position set to
 * neg_inf: the upper triangle for Tq = Tk; for Tq < Tk the bottom-right
 * aligned one (row + Tk - Tq >= col keeps S), the row index shifted by the
 * by-value INT32 scalars UID_SKV (Tk) and UID_SQ (Tq) */
static CudnnTensor causal_mask(CudnnGraph &g, const PlanKey &k, CudnnTensor s,
                               CudnnTensor neg_inf) {
    const cudnnDataType_t F = CUDNN_DATA_FLOAT, I = CUDNN_DATA_INT32, BOOL = CUDNN_DATA_BOOLEAN;
    CudnnTensor row = g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, I, F, 2);
    if (k.Tq != k.Tk) {
        CudnnTensor skv = scalar(g, UID_SKV, I), sq = scalar(g, UID_SQ, I);
        CudnnTensor shifted = g.pointwise(CUDNN_POINTWISE_ADD, row, &skv, I, I);
        row = g.pointwise(CUDNN_POINTWISE_SUB, shifted, &sq, I, I);
    }
    CudnnTensor col = g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, I, F, 3);
    CudnnTensor keep = g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, BOOL, BOOL);
    CudnnTensor out = g.virt(F, s.dim[0], s.dim[1], s.dim[2], s.dim[3]);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, &neg_inf, &keep, out, F);
    return out;
}

static void build_forward(CudnnGraph &g, const PlanKey &k) {
    const cudnnDataType_t F = CUDNN_DATA_FLOAT;
    CudnnTensor q = io_tensor(g, UID_Q, k.B, k.Tq, k.NH, k.HD);
    CudnnTensor kt = io_tensor(g, UID_KT, k.B, k.Tk, k.NKV, k.HD, true);
    CudnnTensor v = io_tensor(g, UID_V, k.B, k.Tk, k.NKV, k.HD);
    CudnnTensor o = io_tensor(g, UID_O, k.B, k.Tq, k.NH, k.HD);
    const int64_t sdim[4] = {k.B, k.NH, k.Tq, 1}, sstride[4] = {(int64_t)k.NH * k.Tq, k.Tq, 1, 1};
    CudnnTensor stats = g.tensor(F, sdim, sstride, UID_STATS);
    CudnnTensor scale = scalar(g, UID_SCALE), neg_inf = scalar(g, UID_NEG_INF);

    CudnnTensor s = g.virt(F, k.B, k.NH, k.Tq, k.Tk);
    g.matmul(q, kt, s);
    CudnnTensor ss = g.pointwise(CUDNN_POINTWISE_MUL, s, &scale);
    CudnnTensor masked = causal_mask(g, k, ss, neg_inf);
    /* softmax, with the statistics the backward needs */
    CudnnTensor mx = g.reduce_last(CUDNN_REDUCE_TENSOR_MAX, masked);
    CudnnTensor centered = g.pointwise(CUDNN_POINTWISE_SUB, masked, &mx);
    CudnnTensor e = g.pointwise(CUDNN_POINTWISE_EXP, centered);
    CudnnTensor sum = g.reduce_last(CUDNN_REDUCE_TENSOR_ADD, e);
    CudnnTensor logsum = g.pointwise(CUDNN_POINTWISE_LOG, sum);
    g.pointwise(CUDNN_POINTWISE_ADD, mx, &logsum, nullptr, stats, F);
    CudnnTensor p = g.pointwise(CUDNN_POINTWISE_DIV, e, &sum, CUDNN_DATA_BFLOAT16);
    g.matmul(p, v, o);
}

/* a [B, NH, Tk, X] product summed over each group of NH / NKV query heads
 * into out [B, NKV, Tk, X]; with NH == NKV the product goes straight to out */
static void per_kv_head(CudnnGraph &g, CudnnTensor a, CudnnTensor b, CudnnTensor out,
                        const PlanKey &k) {
    if (k.NH == k.NKV) {
        g.matmul(a, b, out);
        return;
    }
    CudnnTensor full = g.virt(CUDNN_DATA_BFLOAT16, k.B, k.NH, k.Tk, k.HD);
    g.matmul(a, b, full);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
}

static void build_backward(CudnnGraph &g, const PlanKey &k) {
    const cudnnDataType_t F = CUDNN_DATA_FLOAT, BF = CUDNN_DATA_BFLOAT16;
    CudnnTensor q = io_tensor(g, UID_Q, k.B, k.Tq, k.NH, k.HD);
    CudnnTensor kt = io_tensor(g, UID_KT, k.B, k.Tk, k.NKV, k.HD, true);
    CudnnTensor vt = io_tensor(g, UID_V, k.B, k.Tk, k.NKV, k.HD, true);
    CudnnTensor o = io_tensor(g, UID_O, k.B, k.Tq, k.NH, k.HD);
    CudnnTensor dout = io_tensor(g, UID_DO, k.B, k.Tq, k.NH, k.HD);
    CudnnTensor dq = io_tensor(g, UID_DQ, k.B, k.Tq, k.NH, k.HD);
    CudnnTensor dk = io_tensor(g, UID_DK, k.B, k.Tk, k.NKV, k.HD);
    CudnnTensor dv = io_tensor(g, UID_DV, k.B, k.Tk, k.NKV, k.HD);
    const int64_t rdim[4] = {k.B, k.NH, k.Tq, 1}, rstride[4] = {(int64_t)k.NH * k.Tq, k.Tq, 1, 1};
    CudnnTensor stats = g.tensor(F, rdim, rstride, UID_STATS);
    CudnnTensor softmax_sum = g.tensor(F, rdim, rstride, UID_SOFTMAX_SUM);
    const int64_t adim[4] = {k.B, k.NH, k.Tq, k.HD},
                  astride[4] = {(int64_t)k.NH * k.Tq * k.HD, (int64_t)k.Tq * k.HD, k.HD, 1};
    CudnnTensor dq_accum = g.tensor(F, adim, astride, UID_DQ_ACCUM);
    CudnnTensor scale = scalar(g, UID_SCALE), neg_inf = scalar(g, UID_NEG_INF);
    CudnnTensor one = scalar(g, UID_ONE);

    /* D = rowsum(dO * O) */
    CudnnTensor d_o = g.pointwise(CUDNN_POINTWISE_MUL, dout, &o);
    CudnnTensor dsum = g.reduce_last(CUDNN_REDUCE_TENSOR_ADD, d_o);
    g.pointwise(CUDNN_POINTWISE_MUL, dsum, &one, nullptr, softmax_sum, F);
    /* P = exp(S * scale - Stats), masked */
    CudnnTensor s = g.virt(F, k.B, k.NH, k.Tq, k.Tk);
    g.matmul(q, kt, s);
    CudnnTensor ss = g.pointwise(CUDNN_POINTWISE_MUL, s, &scale);
    CudnnTensor centered = g.pointwise(CUDNN_POINTWISE_SUB, ss, &stats);
    CudnnTensor masked = causal_mask(g, k, centered, neg_inf);
    CudnnTensor p = g.pointwise(CUDNN_POINTWISE_EXP, masked);
    /* dV = P^T dO (P^T [B, NH, Tk, Tq]: P's memory viewed transposed, bf16) */
    const int64_t tdim[4] = {k.B, k.NH, k.Tk, k.Tq},
                  tstride[4] = {(int64_t)k.NH * k.Tq * k.Tk, (int64_t)k.Tq * k.Tk, 1, k.Tk};
    CudnnTensor pt = g.tensor(BF, tdim, tstride, 0);
    g.reshape(p, pt);
    per_kv_head(g, pt, dout, dv, k);
    /* dS = P * (dO V^T - D) * scale */
    CudnnTensor dp = g.virt(F, k.B, k.NH, k.Tq, k.Tk);
    g.matmul(dout, vt, dp);
    CudnnTensor dp_centered = g.pointwise(CUDNN_POINTWISE_SUB, dp, &softmax_sum);
    CudnnTensor ds_unscaled = g.pointwise(CUDNN_POINTWISE_MUL, dp_centered, &p);
    CudnnTensor ds = g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, &scale);
    /* dK = dS^T Q */
    CudnnTensor dst = g.tensor(BF, tdim, tstride, 0);
    g.reshape(ds, dst);
    per_kv_head(g, dst, q, dk, k);
    /* dQ = dS K, K being K^T's memory viewed back as [B, NKV, T, HD] (typed
     * fp32 as cuDNN's own frontend leaves this virtual view; the data is K's) */
    int64_t kdim[4], kstride[4];
    bshd(kdim, kstride, k.B, k.Tk, k.NKV, k.HD, false);
    CudnnTensor kk = g.tensor(F, kdim, kstride, 0);
    g.reshape(kt, kk);
    g.matmul(ds, kk, dq_accum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq, F);
}

/* cuDNN, or nullptr where it does not open: fatal when required (the
 * user asked for it), else a note once and the caller's own kernels */
static const CudnnApi *api_for(const PlanKey &k, bool required) {
    std::string why;
    const CudnnApi *api = titan_cudnn_api(&why);
    static int told;
    if (!api) {
        if (required) cudnn_fatal(TITAN_ERR_USAGE, k, why);
        if (!__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL))
            fprintf(stderr, "titan: note: cuda: attention through titan's kernels: %s\n", why.c_str());
        return nullptr;
    }
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL))
        fprintf(stderr, "titan: note: cuda: attention through cuDNN %zu.%zu.%zu\n",
                api->version / 10000, api->version / 100 % 100, api->version % 100);
    return api;
}

/* The shape's plan, built on first use; nullptr where cuDNN refuses the
 * graph and it is not required (remembered: the refusal is not retried,
 * and said once per shape). */
static CudnnGraph *plan_for(const CudnnApi *api, const PlanKey &k, bool required) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nplans; i++)
        if (g_plans[i].key == k) {
            CudnnGraph *g = g_plans[i].graph;
            pthread_mutex_unlock(&g_lock);
            return g; /* nullptr only where not required: required refusals end the process */
        }
    CudnnGraph *g = new CudnnGraph(api);
    if (k.backward) build_backward(*g, k);
    else build_forward(*g, k);
    if (!g->build()) {
        std::string err = g->error();
        if (required) {
            pthread_mutex_unlock(&g_lock);
            cudnn_fatal(TITAN_ERR_FAIL, k, err);
        }
        fprintf(stderr,
                "titan: note: cuda: attention %s B=%d Tq=%d Tk=%d NH=%d NKV=%d HD=%d through "
                "titan's kernels: cuDNN: %s\n",
                k.backward ? "backward" : "forward", k.B, k.Tq, k.Tk, k.NH, k.NKV, k.HD,
                err.c_str());
        delete g;
        g = nullptr;
    }
    if (g_nplans == (int)(sizeof g_plans / sizeof g_plans[0])) {
        /* more shapes than a model has: drop the oldest (its graph stays: a
         * caller may still be inside it) */
        memmove(g_plans, g_plans + 1, sizeof g_plans - sizeof g_plans[0]);
        g_nplans--;
    }
    g_plans[g_nplans++] = Plan{k, g};
    pthread_mutex_unlock(&g_lock);
    return g;
}

static bool applies(int Tq, int Tk, int HD, bool aligned16) {
    if (HD % 8 != 0 || HD > 128 || Tq <= 0 || Tq > Tk || !aligned16) return false;
    const CudnnApi *api = titan_cudnn_api(nullptr); /* none: api_for says why */
    /* cuDNN's own frontend adds a padding mask before 9.16 when T % 128 != 0 */
    if (api && api->version < 91600 && (Tq % 128 != 0 || Tk % 128 != 0)) return false;
    return true;
}

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

/* the plan's workspace, then extra bytes for the caller at *extra_out */
static char *alloc_workspace(CudnnGraph *g, size_t extra, char **extra_out) {
    size_t ws = round256((size_t)g->workspace_bytes());
    char *w = (char *)titan_cuda_scratch(ws + extra, "cuDNN attention workspace");
    if (extra_out) *extra_out = w + ws;
    return w;
}

/* a data pointer for each uid (N of each, checked at compile time); the
 * last two, the mask's Tk and Tq, only where the graph has them (Tq < Tk) */
template <int N>
static void execute_or_die(const CudnnApi *api, const PlanKey &k, CudnnGraph *g,
                           const int64_t (&uids)[N], void *const (&data)[N], void *workspace) {
    static_assert(N >= 2, "the mask's two scalars come last");
    const int n = k.Tq != k.Tk ? N : N - 2;
    std::string err = titan_cudnn_execute(api, g->plan(), uids, data, n, workspace);
    if (!err.empty()) cudnn_fatal(TITAN_ERR_FAIL, k, err);
}

static float neg_inf_value(const CudnnApi *api) {
    /* cuDNN before 9.10 wants the lowest finite float as its mask value */
    return api->version < 91000 ? -std::numeric_limits<float>::max()
                                : -std::numeric_limits<float>::infinity();
}

bool titan_cuda_attention_cudnn_forward(bool required, bf16 *out, float *lse, const bf16 *q,
                                        const bf16 *k, const bf16 *v, int B, int Tq, int Tk,
                                        int NH, int NKV, int HD) {
    if (!applies(Tq, Tk, HD, titan_cuda_aligned16(out, lse, q, k, v))) return false;
    PlanKey key = {0, B, Tq, Tk, NH, NKV, HD};
    const CudnnApi *api = api_for(key, required);
    CudnnGraph *g = api ? plan_for(api, key, required) : nullptr;
    if (!g) return false;
    float scale = 1.0f / sqrtf((float)HD), neg_inf = neg_inf_value(api);
    int32_t skv = Tk, sq = Tq;
    const int64_t uids[] = {UID_Q,     UID_KT,      UID_V,   UID_O, UID_STATS,
                            UID_SCALE, UID_NEG_INF, UID_SKV, UID_SQ};
    void *const data[] = {(void *)q, (void *)k, (void *)v, out, lse, &scale, &neg_inf, &skv, &sq};
    char *w = alloc_workspace(g, 0, nullptr);
    execute_or_die(api, key, g, uids, data, w);
    CUDA_CHECK(cudaFreeAsync(w, 0));
    return true;
}

bool titan_cuda_attention_cudnn_backward(bool required, int add, bf16 *dq, bf16 *dk,
                                         bf16 *dv, const bf16 *dout, const bf16 *out,
                                         const float *lse, const bf16 *q, const bf16 *k,
                                         const bf16 *v, int B, int Tq, int Tk, int NH, int NKV,
                                         int HD) {
    if (!applies(Tq, Tk, HD, titan_cuda_aligned16(dq, dk, dv, dout, out, lse, q, k, v)))
        return false;
    PlanKey key = {1, B, Tq, Tk, NH, NKV, HD};
    const CudnnApi *api = api_for(key, required);
    CudnnGraph *g = api ? plan_for(api, key, required) : nullptr;
    if (!g) return false;
    const size_t nq = (size_t)B * Tq * NH * HD, nkv = (size_t)B * Tk * NKV * HD;
    /* after the plan's workspace: softmax_sum, dq_accum and, for "+=", the
     * temporaries cuDNN writes dq, dk, dv to before they are added in */
    const size_t part[5] = {round256((size_t)B * NH * Tq * sizeof(float)),
                            round256(nq * sizeof(float)), add ? round256(nq * sizeof(bf16)) : 0,
                            add ? round256(nkv * sizeof(bf16)) : 0,
                            add ? round256(nkv * sizeof(bf16)) : 0};
    char *at[5];
    char *w = alloc_workspace(g, part[0] + part[1] + part[2] + part[3] + part[4], &at[0]);
    for (int i = 1; i < 5; i++) at[i] = at[i - 1] + part[i - 1];
    char *softmax_sum = at[0], *dq_accum = at[1];
    bf16 *odq = add ? (bf16 *)at[2] : dq, *odk = add ? (bf16 *)at[3] : dk;
    bf16 *odv = add ? (bf16 *)at[4] : dv;
    float scale = 1.0f / sqrtf((float)HD), neg_inf = neg_inf_value(api), one = 1.0f;
    int32_t skv = Tk, sq = Tq;
    CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, nq * sizeof(float), 0));
    const int64_t uids[] = {UID_Q,  UID_KT, UID_V,   UID_O,          UID_STATS,
                            UID_DO, UID_DQ, UID_DK,  UID_DV,         UID_SCALE,
                            UID_NEG_INF, UID_ONE, UID_SOFTMAX_SUM, UID_DQ_ACCUM,
                            UID_SKV, UID_SQ};
    void *const data[] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse,
                          (void *)dout, odq, odk, odv, &scale, &neg_inf, &one, softmax_sum,
                          dq_accum, &skv, &sq};
    execute_or_die(api, key, g, uids, data, w);
    if (add) {
        titan_cuda_add(TITAN_DTYPE_BF16, dq, dq, odq, nq);
        titan_cuda_add(TITAN_DTYPE_BF16, dk, dk, odk, nkv);
        titan_cuda_add(TITAN_DTYPE_BF16, dv, dv, odv, nkv);
    }
    CUDA_CHECK(cudaFreeAsync(w, 0));
    return true;
}
#endif /* TITAN_HAVE_CUDNN */
