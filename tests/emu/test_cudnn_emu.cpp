/* test_cudnn_emu.cpp - the cuDNN backend interpreter (tests/emu/cudnn_emu.cpp)
 * alone, on the emulated runtime (cuda_emu.cpp): a small causal
 * grouped-query attention graph (reshape as a transposing view, two batched
 * matmuls reading a kv head per group of query heads, a by-value scale,
 * GEN_INDEX, CMP_GE, BINARY_SELECT with a by-value -inf, MAX and ADD
 * reductions, EXP, SUB, DIV, a bf16 virtual P, a reduction folding query
 * heads into kv heads, reshapes that change the type) against hand loops
 * with the same operations in the same order (bit-identical), executed after
 * every descriptor but the plan and the variant pack is destroyed; the
 * bottom-right causal mask of a chunk of queries (Tq < Tk: the row index
 * shifted by by-value INT32 ADD and SUB, as attention_cudnn.cu builds it);
 * then the refusals: statuses and messages at SetAttribute, Finalize, GetAttribute
 * and Execute, and the emulator's abort for a host pointer given as device
 * memory (in a child). One line per check; exit 0 when all pass. */
#include <cudnn.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include <string>
#include <vector>

#include "emu_test.h"

static std::string last_error() {
    char buf[512];
    cudnnGetLastErrorString(buf, sizeof buf);
    return buf;
}

/* a call that must return want; its message must start "cudnn_emu: " unless it succeeds */
static void expect(cudnnStatus_t got, cudnnStatus_t want, const char *what) {
    const std::string msg = last_error();
    const bool ok = got == want && (want == CUDNN_STATUS_SUCCESS ||
                                    msg.rfind("cudnn_emu: ", 0) == 0);
    report(ok, what,
           std::string(cudnnGetErrorString(got)) + (msg.empty() ? "" : " (" + msg + ")"));
}

static bool must(cudnnStatus_t st, const char *what) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    report(false, what, std::string(cudnnGetErrorString(st)) + " (" + last_error() + ")");
    return false;
}

/* ------------------------------------------------------ descriptors */

typedef cudnnBackendDescriptor_t Desc;

static Desc make(cudnnBackendDescriptorType_t t) {
    Desc d = nullptr;
    must(cudnnBackendCreateDescriptor(t, &d), "create a descriptor");
    return d;
}

static void set(Desc d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
                const void *v) {
    must(cudnnBackendSetAttribute(d, a, t, n, v), "set an attribute");
}

static void setd(Desc d, cudnnBackendAttributeName_t a, Desc v) {
    set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}

static std::vector<int64_t> packed(const std::vector<int64_t> &dim) {
    std::vector<int64_t> s(dim.size(), 1);
    for (size_t i = dim.size() - 1; i-- > 0;) s[i] = s[i + 1] * dim[i + 1];
    return s;
}

static Desc tensor(int64_t uid, cudnnDataType_t type, const std::vector<int64_t> &dim,
                   std::vector<int64_t> stride = {}, bool virt = false, bool by_value = false) {
    if (stride.empty()) stride = packed(dim);
    Desc d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, (int64_t)dim.size(), dim.data());
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, (int64_t)stride.size(), stride.data());
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (by_value) set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    must(cudnnBackendFinalize(d), "finalize a tensor");
    return d;
}

static std::vector<Desc> g_made; /* descriptors to destroy before executing */

static Desc keep(Desc d) {
    g_made.push_back(d);
    return d;
}

static Desc pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc t, Desc y, int64_t axis = -1,
                      cudnnDataType_t prec = CUDNN_DATA_FLOAT) {
    Desc pw = keep(make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    must(cudnnBackendFinalize(pw), "finalize a pointwise descriptor");
    Desc op = keep(make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    setd(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    setd(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) setd(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t) setd(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    setd(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    must(cudnnBackendFinalize(op), "finalize a pointwise operation");
    return op;
}

static Desc matmul(Desc a, Desc b, Desc c) {
    Desc mm = keep(make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    must(cudnnBackendFinalize(mm), "finalize a matmul descriptor");
    Desc op = keep(make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
    setd(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    setd(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    setd(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    setd(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    must(cudnnBackendFinalize(op), "finalize a matmul operation");
    return op;
}

static Desc reduction(cudnnReduceTensorOp_t how, Desc x, Desc y) {
    Desc r = keep(make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    must(cudnnBackendFinalize(r), "finalize a reduction descriptor");
    Desc op = keep(make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
    setd(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    setd(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    setd(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    must(cudnnBackendFinalize(op), "finalize a reduction operation");
    return op;
}

static Desc reshape(Desc x, Desc y) {
    Desc op = keep(make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR));
    setd(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    setd(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    must(cudnnBackendFinalize(op), "finalize a reshape operation");
    return op;
}

/* the graph of ops, finalized; its status */
static cudnnStatus_t graph(cudnnHandle_t h, const std::vector<Desc> &ops, Desc *out) {
    Desc g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(g, (cudnnBackendAttributeName_t)800 /* HANDLE */, CUDNN_TYPE_HANDLE, 1, &h);
    set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(),
        ops.data());
    *out = g;
    return cudnnBackendFinalize(g);
}

/* heuristics, engine config, plan for a finalized graph (destroyed after) */
static Desc plan_of(cudnnHandle_t h, Desc g) {
    Desc heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    setd(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    must(cudnnBackendFinalize(heur), "finalize the heuristics");
    Desc cfg = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t n = 0;
    must(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg),
         "get the heuristics' results");
    report(n == 1, "heuristics return one engine config", std::to_string(n));
    Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(plan, (cudnnBackendAttributeName_t)400 /* HANDLE */, CUDNN_TYPE_HANDLE, 1, &h);
    setd(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    must(cudnnBackendFinalize(plan), "finalize the plan");
    cudnnBackendDestroyDescriptor(cfg);
    cudnnBackendDestroyDescriptor(heur);
    return plan;
}

static Desc pack_of(const std::vector<int64_t> &uids, const std::vector<void *> &ptrs, void *ws) {
    Desc p = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    set(p, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(), uids.data());
    set(p, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, (int64_t)ptrs.size(),
        ptrs.data());
    set(p, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    must(cudnnBackendFinalize(p), "finalize the variant pack");
    return p;
}

template <typename T>
static T *upload(const std::vector<T> &h) {
    void *p = nullptr;
    cudaMalloc(&p, h.size() * sizeof(T));
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return (T *)p;
}

template <typename T>
static std::vector<T> download(const T *d, size_t n) {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

static float bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/* ------------------------------------------- causal GQA attention */

enum : int64_t {
    U_Q = 1, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT, /* non-virtual */
    U_KT = 100, U_S, U_SS, U_ROW, U_COL, U_MASK, U_MASKED, U_D, U_E, U_L, U_P,
};

static void attention(cudnnHandle_t h) {
    const int64_t B = 1, HQ = 4, HK = 2, S = 5, D = 3, G = HQ / HK;
    const float scale = 0.37f;
    const cudnnDataType_t F = CUDNN_DATA_FLOAT, BF = CUDNN_DATA_BFLOAT16;
    const cudnnDataType_t I = CUDNN_DATA_INT32, BOOL = CUDNN_DATA_BOOLEAN;
    /* inputs */
    std::vector<__nv_bfloat16> q(B * HQ * S * D), k(B * HK * S * D), v(B * HK * S * D);
    unsigned x = 12345;
    auto rnd = [&] {
        x = x * 1103515245u + 12345u;
        return ((float)((x >> 8) & 0xffff) / 65536.0f - 0.5f) * 4.0f;
    };
    for (auto *a : {&q, &k, &v})
        for (auto &e : *a) e = __float2bfloat16_rn(rnd());

    const std::vector<int64_t> dq{B, HQ, S, D}, dk{B, HK, S, D}, ds{B, HQ, S, S};
    const std::vector<int64_t> one{1, 1, 1, 1}, dstat{B, HQ, S, 1};
    Desc tq = keep(tensor(U_Q, BF, dq)), tk = keep(tensor(U_K, BF, dk));
    Desc tv = keep(tensor(U_V, BF, dk));
    /* K^T [b,hk,d,s] as a view of K's memory, typed FLOAT as the frontend
     * types such virtual views (bf16 to float: exact) */
    Desc tkt = keep(tensor(U_KT, F, {B, HK, D, S}, {HK * S * D, S * D, 1, D}, true));
    Desc tscale = keep(tensor(U_SCALE, F, one, {}, false, true));
    Desc tneg = keep(tensor(U_NEGINF, F, one, {}, false, true));
    Desc ts = keep(tensor(U_S, F, ds, {}, true)), tss = keep(tensor(U_SS, F, ds, {}, true));
    Desc trow = keep(tensor(U_ROW, I, ds, {}, true)), tcol = keep(tensor(U_COL, I, ds, {}, true));
    Desc tmask = keep(tensor(U_MASK, BOOL, ds, {}, true));
    Desc tmasked = keep(tensor(U_MASKED, F, ds, {}, true));
    Desc tstats = keep(tensor(U_STATS, F, dstat));
    Desc td = keep(tensor(U_D, F, ds, {}, true)), te = keep(tensor(U_E, F, ds, {}, true));
    Desc tl = keep(tensor(U_L, F, dstat, {}, true)), tp = keep(tensor(U_P, BF, ds, {}, true));
    Desc to = keep(tensor(U_O, F, dq)), tg = keep(tensor(U_G, F, dk));
    Desc tot = keep(tensor(U_OT, BF, {B, HQ, D, S}, {HQ * S * D, S * D, 1, D}));

    std::vector<Desc> ops = {
        reshape(tk, tkt),
        matmul(tq, tkt, ts),
        pointwise(CUDNN_POINTWISE_MUL, ts, tscale, nullptr, tss),
        pointwise(CUDNN_POINTWISE_GEN_INDEX, tss, nullptr, nullptr, trow, 2, I),
        pointwise(CUDNN_POINTWISE_GEN_INDEX, tss, nullptr, nullptr, tcol, 3, I),
        pointwise(CUDNN_POINTWISE_CMP_GE, trow, tcol, nullptr, tmask, -1, BOOL),
        pointwise(CUDNN_POINTWISE_BINARY_SELECT, tss, tneg, tmask, tmasked),
        reduction(CUDNN_REDUCE_TENSOR_MAX, tmasked, tstats),
        pointwise(CUDNN_POINTWISE_SUB, tmasked, tstats, nullptr, td),
        pointwise(CUDNN_POINTWISE_EXP, td, nullptr, nullptr, te),
        reduction(CUDNN_REDUCE_TENSOR_ADD, te, tl),
        pointwise(CUDNN_POINTWISE_DIV, te, tl, nullptr, tp),
        matmul(tp, tv, to),
        reduction(CUDNN_REDUCE_TENSOR_ADD, to, tg),
        reshape(to, tot),
    };
    Desc g = nullptr;
    expect(graph(h, ops, &g), CUDNN_STATUS_SUCCESS, "attention graph finalizes");
    Desc plan = plan_of(h, g);
    int64_t ws_bytes = 0, n = 0;
    must(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                  CUDNN_TYPE_INT64, 1, &n, &ws_bytes),
         "get the workspace size");
    report(n == 1 && ws_bytes > 0, "the plan asks for a workspace", std::to_string(ws_bytes));
    /* everything but the plan (and the pack) destroyed before executing */
    cudnnBackendDestroyDescriptor(g);
    for (Desc d : g_made) cudnnBackendDestroyDescriptor(d);
    g_made.clear();

    __nv_bfloat16 *dq_ = upload(q), *dk_ = upload(k), *dv_ = upload(v);
    float *dstats, *dout, *dgrp;
    __nv_bfloat16 *dot;
    void *ws;
    cudaMalloc((void **)&dstats, B * HQ * S * sizeof(float));
    cudaMalloc((void **)&dout, B * HQ * S * D * sizeof(float));
    cudaMalloc((void **)&dgrp, B * HK * S * D * sizeof(float));
    cudaMalloc((void **)&dot, B * HQ * S * D * sizeof(__nv_bfloat16));
    cudaMalloc(&ws, (size_t)ws_bytes);
    float neginf = -INFINITY;
    float sc = scale;
    Desc pack = pack_of({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT},
                        {dq_, dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dot}, ws);
    expect(cudnnBackendExecute(h, plan, pack), CUDNN_STATUS_SUCCESS, "attention graph executes");
    const std::vector<float> stats = download(dstats, (size_t)(B * HQ * S));
    const std::vector<float> out = download(dout, (size_t)(B * HQ * S * D));
    const std::vector<float> grp = download(dgrp, (size_t)(B * HK * S * D));
    const std::vector<__nv_bfloat16> ot = download(dot, (size_t)(B * HQ * S * D));

    /* the same in hand loops */
    std::vector<float> rstats(stats.size()), rout(out.size()), rgrp(grp.size(), 0.0f);
    for (int64_t hh = 0; hh < HQ; hh++) {
        const int64_t kh = hh / G;
        for (int64_t i = 0; i < S; i++) {
            float s[S], p[S];
            for (int64_t j = 0; j < S; j++) {
                float acc = 0.0f;
                for (int64_t c = 0; c < D; c++)
                    acc += __bfloat162float(q[(hh * S + i) * D + c]) *
                           __bfloat162float(k[(kh * S + j) * D + c]);
                s[j] = i >= j ? acc * scale : -INFINITY;
            }
            float m = s[0];
            for (int64_t j = 1; j < S; j++) m = s[j] > m ? s[j] : m;
            float e[S], l = 0.0f;
            for (int64_t j = 0; j < S; j++) e[j] = expf(s[j] - m);
            l = e[0];
            for (int64_t j = 1; j < S; j++) l = l + e[j];
            for (int64_t j = 0; j < S; j++) p[j] = bf(e[j] / l);
            rstats[hh * S + i] = m;
            for (int64_t c = 0; c < D; c++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < S; j++) acc += p[j] * __bfloat162float(v[(kh * S + j) * D + c]);
                rout[(hh * S + i) * D + c] = acc;
            }
        }
    }
    for (int64_t hh = 0; hh < HQ; hh++) /* heads of a group in increasing order */
        for (int64_t i = 0; i < S * D; i++) {
            float &r = rgrp[(hh / G) * S * D + i];
            r = hh % G == 0 ? rout[hh * S * D + i] : r + rout[hh * S * D + i];
        }
    report(memcmp(stats.data(), rstats.data(), stats.size() * 4) == 0,
           "row maxima (MAX reduction of the masked scores) match the hand loop");
    report(memcmp(out.data(), rout.data(), out.size() * 4) == 0,
           "the output (bf16 P, GQA matmuls, view of K^T) matches the hand loop bit for bit");
    report(memcmp(grp.data(), rgrp.data(), grp.size() * 4) == 0,
           "a reduction folds each group of query heads into its kv head");
    bool tr = true;
    for (int64_t hh = 0; hh < HQ; hh++)
        for (int64_t i = 0; i < S; i++)
            for (int64_t c = 0; c < D; c++)
                tr = tr && __bfloat162float(ot[hh * S * D + c * 1 + i * D]) ==
                               bf(out[(hh * S + i) * D + c]);
    report(tr, "a non-virtual bf16 reshape output: its element (c, i), at its own strides, is "
               "O's (i, c) rounded");
    /* a row of all -inf but the first: position 0 is never masked */
    report(!isnan(out[0]), "no NaN from masked exponentials");

    /* the variant pack's checks */
    auto run = [&](const std::vector<int64_t> &u, const std::vector<void *> &p, void *w) {
        Desc pk = pack_of(u, p, w);
        const cudnnStatus_t st = cudnnBackendExecute(h, plan, pk);
        cudnnBackendDestroyDescriptor(pk);
        return st;
    };
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G},
               {dq_, dk_, dv_, &sc, &neginf, dstats, dout, dgrp}, ws),
           CUDNN_STATUS_BAD_PARAM, "execute: a non-virtual tensor without an entry");
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT, 999},
               {dq_, dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dot, dot}, ws),
           CUDNN_STATUS_BAD_PARAM, "execute: an entry for a uid not in the graph");
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT, U_P},
               {dq_, dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dot, dot}, ws),
           CUDNN_STATUS_BAD_PARAM, "execute: an entry for a virtual tensor");
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT},
               {dq_, dk_, dv_, dstats, &neginf, dstats, dout, dgrp, dot}, ws),
           CUDNN_STATUS_BAD_PARAM, "execute: a by-value tensor given device memory");
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT},
               {(char *)dq_ + 2, dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dot}, ws),
           CUDNN_STATUS_BAD_PARAM, "execute: a pointer below its BYTE_ALIGNMENT");
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT},
               {dq_, dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dout}, ws),
           CUDNN_STATUS_BAD_PARAM, "execute: an output overlapping another tensor");
    expect(run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT},
               {dq_, dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dot}, nullptr),
           CUDNN_STATUS_BAD_PARAM, "execute: no workspace");
    expect(cudnnBackendExecute(nullptr, plan, pack), CUDNN_STATUS_BAD_PARAM,
           "execute: a null handle");
    {
        /* device memory checks abort, naming the tensor */
        std::string said;
        const bool died = dies_saying(
            [&] {
                std::vector<__nv_bfloat16> hostq(q);
                run({U_Q, U_K, U_V, U_SCALE, U_NEGINF, U_STATS, U_O, U_G, U_OT},
                    {hostq.data(), dk_, dv_, &sc, &neginf, dstats, dout, dgrp, dot}, ws);
            },
            "cudnn: tensor uid 1", &said);
        report(died, "execute: host memory as a device tensor aborts in emu::check_device", said);
    }
    cudnnBackendDestroyDescriptor(pack);
    cudnnBackendDestroyDescriptor(plan);
    for (void *p : {(void *)dq_, (void *)dk_, (void *)dv_, (void *)dstats, (void *)dout,
                    (void *)dgrp, (void *)dot, ws})
        cudaFree(p);
}

/* ------------------------------------- bottom-right causal mask */

/* Y = X where row + skv - sq >= col, else -inf, over X [1, 1, SQ, SKV]:
 * the mask of the last SQ queries of SKV positions, the shift by two
 * by-value INT32 scalars in INT32 arithmetic */
static void bottom_right_mask(cudnnHandle_t h) {
    enum : int64_t { U_X = 1, U_Y, U_SKV, U_SQ, U_NEG, U_ROW = 100, U_ROW1, U_ROW2, U_COL, U_KEEP };
    const int64_t SQ = 3, SKV = 7;
    const cudnnDataType_t F = CUDNN_DATA_FLOAT, I = CUDNN_DATA_INT32, BOOL = CUDNN_DATA_BOOLEAN;
    const std::vector<int64_t> dx{1, 1, SQ, SKV}, one{1, 1, 1, 1};
    Desc tx = keep(tensor(U_X, F, dx)), ty = keep(tensor(U_Y, F, dx));
    Desc tskv = keep(tensor(U_SKV, I, one, {}, false, true));
    Desc tsq = keep(tensor(U_SQ, I, one, {}, false, true));
    Desc tneg = keep(tensor(U_NEG, F, one, {}, false, true));
    Desc trow = keep(tensor(U_ROW, I, dx, {}, true)), trow1 = keep(tensor(U_ROW1, I, dx, {}, true));
    Desc trow2 = keep(tensor(U_ROW2, I, dx, {}, true)), tcol = keep(tensor(U_COL, I, dx, {}, true));
    Desc tkeep = keep(tensor(U_KEEP, BOOL, dx, {}, true));
    std::vector<Desc> ops = {
        pointwise(CUDNN_POINTWISE_GEN_INDEX, tx, nullptr, nullptr, trow, 2, I),
        pointwise(CUDNN_POINTWISE_ADD, trow, tskv, nullptr, trow1, -1, I),
        pointwise(CUDNN_POINTWISE_SUB, trow1, tsq, nullptr, trow2, -1, I),
        pointwise(CUDNN_POINTWISE_GEN_INDEX, tx, nullptr, nullptr, tcol, 3, I),
        pointwise(CUDNN_POINTWISE_CMP_GE, trow2, tcol, nullptr, tkeep, -1, BOOL),
        pointwise(CUDNN_POINTWISE_BINARY_SELECT, tx, tneg, tkeep, ty),
    };
    Desc g = nullptr;
    expect(graph(h, ops, &g), CUDNN_STATUS_SUCCESS, "bottom-right mask graph finalizes");
    Desc plan = plan_of(h, g);
    cudnnBackendDestroyDescriptor(g);
    for (Desc d : g_made) cudnnBackendDestroyDescriptor(d);
    g_made.clear();

    std::vector<float> x(SQ * SKV);
    for (size_t i = 0; i < x.size(); i++) x[i] = 0.25f * (float)i + 1.0f;
    float *dx_ = upload(x), *dy = nullptr;
    void *ws = nullptr;
    cudaMalloc((void **)&dy, x.size() * sizeof(float));
    cudaMalloc(&ws, 1 << 20);
    int32_t skv = (int32_t)SKV, sq = (int32_t)SQ;
    float neginf = -INFINITY;
    Desc pack = pack_of({U_X, U_Y, U_SKV, U_SQ, U_NEG}, {dx_, dy, &skv, &sq, &neginf}, ws);
    expect(cudnnBackendExecute(h, plan, pack), CUDNN_STATUS_SUCCESS,
           "bottom-right mask graph executes");
    const std::vector<float> y = download(dy, x.size());
    bool ok = true;
    for (int64_t i = 0; i < SQ; i++)
        for (int64_t j = 0; j < SKV; j++) {
            const float want = i + SKV - SQ >= j ? x[i * SKV + j] : -INFINITY;
            ok = ok && y[i * SKV + j] == want;
        }
    report(ok, "bottom-right causal mask (INT32 by-value ADD, SUB): query i of the last 3 of 7 "
               "positions keeps keys 0 .. i + 4");
    cudnnBackendDestroyDescriptor(pack);
    cudnnBackendDestroyDescriptor(plan);
    for (void *p : {(void *)dx_, (void *)dy, ws}) cudaFree(p);
}

/* --------------------------------------------------------- refusals */

static void refusals(cudnnHandle_t h) {
    Desc d = nullptr;
    expect(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &d),
           CUDNN_STATUS_NOT_SUPPORTED, "create: a descriptor type not modelled");
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &d);
    char buf[256];
    cudnnGetLastErrorString(buf, sizeof buf);
    cudnnGetLastErrorString(buf, sizeof buf);
    report(buf[0] == 0, "the last error string is cleared once read", buf);

    Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int32_t dims32[4] = {1, 1, 1, 1};
    const int64_t dims[4] = {1, 2, 3, 4}, uid2[2] = {1, 2};
    expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT32, 4, dims32),
           CUDNN_STATUS_BAD_PARAM, "set: the wrong attribute type");
    expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 2, uid2),
           CUDNN_STATUS_BAD_PARAM, "set: the wrong count");
    const cudnnDataType_t half = CUDNN_DATA_HALF;
    expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &half),
           CUDNN_STATUS_NOT_SUPPORTED, "set: a data type not modelled");
    const int64_t one = 1;
    expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_VECTOR_COUNT, CUDNN_TYPE_INT64, 1, &one),
           CUDNN_STATUS_NOT_SUPPORTED, "set: an attribute not modelled");
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &one);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &one);
    expect(cudnnBackendFinalize(t), CUDNN_STATUS_BAD_PARAM, "finalize: STRIDES missing");
    const int64_t overlapping[4] = {24, 12, 4, 2};
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, overlapping);
    expect(cudnnBackendFinalize(t), CUDNN_STATUS_NOT_SUPPORTED, "finalize: overlapping strides");
    const std::vector<int64_t> st = packed({1, 2, 3, 4});
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st.data());
    expect(cudnnBackendFinalize(t), CUDNN_STATUS_SUCCESS, "finalize: a tensor");
    expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &one),
           CUDNN_STATUS_NOT_INITIALIZED, "set: a finalized descriptor");
    expect(cudnnBackendFinalize(t), CUDNN_STATUS_BAD_PARAM, "finalize: twice");

    Desc pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnPointwiseMode_t tanh_mode = CUDNN_POINTWISE_TANH_FWD;
    expect(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
                                    &tanh_mode),
           CUDNN_STATUS_NOT_SUPPORTED, "set: a pointwise mode not modelled");
    const cudnnPointwiseMode_t gen = CUDNN_POINTWISE_GEN_INDEX;
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &gen);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f);
    expect(cudnnBackendFinalize(pw), CUDNN_STATUS_BAD_PARAM, "finalize: GEN_INDEX without AXIS");

    /* graphs */
    const cudnnDataType_t F = CUDNN_DATA_FLOAT;
    Desc x = keep(tensor(10, F, {1, 1, 2, 2})), y = keep(tensor(11, F, {1, 1, 2, 2}));
    Desc vin = keep(tensor(12, F, {1, 1, 2, 2}, {}, true));
    Desc wrong = keep(tensor(11, F, {1, 1, 2, 2}, {}, true)); /* y's uid, virtual */
    Desc g = nullptr;
    expect(graph(h, {pointwise(CUDNN_POINTWISE_EXP, vin, nullptr, nullptr, y)}, &g),
           CUDNN_STATUS_BAD_PARAM, "graph: a virtual tensor read but never written");
    cudnnBackendDestroyDescriptor(g);
    expect(graph(h,
                 {pointwise(CUDNN_POINTWISE_EXP, x, nullptr, nullptr, y),
                  pointwise(CUDNN_POINTWISE_LOG, x, nullptr, nullptr, y)},
                 &g),
           CUDNN_STATUS_BAD_PARAM, "graph: a tensor written twice");
    cudnnBackendDestroyDescriptor(g);
    expect(graph(h,
                 {pointwise(CUDNN_POINTWISE_EXP, x, nullptr, nullptr, y),
                  pointwise(CUDNN_POINTWISE_EXP, x, nullptr, nullptr, wrong)},
                 &g),
           CUDNN_STATUS_BAD_PARAM, "graph: one uid for two different tensors");
    cudnnBackendDestroyDescriptor(g);
    Desc op = keep(make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    setd(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    expect(cudnnBackendFinalize(op), CUDNN_STATUS_BAD_PARAM, "finalize: an operation missing Y");
    Desc mmx = keep(tensor(20, F, {1, 3, 2, 4})), mmy = keep(tensor(21, F, {1, 2, 4, 5}));
    Desc mmz = keep(tensor(22, F, {1, 3, 2, 5}));
    Desc mm = keep(make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &F);
    must(cudnnBackendFinalize(mm), "finalize a matmul descriptor");
    Desc mop = keep(make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
    setd(mop, CUDNN_ATTR_OPERATION_MATMUL_ADESC, mmx);
    setd(mop, CUDNN_ATTR_OPERATION_MATMUL_BDESC, mmy);
    setd(mop, CUDNN_ATTR_OPERATION_MATMUL_CDESC, mmz);
    setd(mop, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    expect(cudnnBackendFinalize(mop), CUDNN_STATUS_BAD_PARAM,
           "finalize: a matmul whose B heads (2) do not divide C's (3)");
    Desc unfinal = keep(make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    expect(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &unfinal),
           CUDNN_STATUS_BAD_PARAM, "set: a tensor descriptor not finalized");

    Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    int64_t ws = 0, n = 0;
    expect(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                    CUDNN_TYPE_INT64, 1, &n, &ws),
           CUDNN_STATUS_NOT_INITIALIZED, "get: a descriptor not finalized");
    expect(cudnnBackendFinalize(plan), CUDNN_STATUS_BAD_PARAM, "finalize: a plan without a config");

    for (Desc e : g_made) cudnnBackendDestroyDescriptor(e);
    g_made.clear();
    for (Desc e : {t, pw, plan}) cudnnBackendDestroyDescriptor(e);
    expect(cudnnBackendDestroyDescriptor(t), CUDNN_STATUS_BAD_PARAM, "destroy: twice");
}

int main() {
    report(cudnnGetVersion() == 91900, "cudnnGetVersion", std::to_string(cudnnGetVersion()));
    cudnnHandle_t h = nullptr;
    if (!must(cudnnCreate(&h), "cudnnCreate")) return 1;
    must(cudnnSetStream(h, 0), "cudnnSetStream");
    attention(h);
    bottom_right_mask(h);
    refusals(h);
    expect(cudnnDestroy(h), CUDNN_STATUS_SUCCESS, "cudnnDestroy");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
