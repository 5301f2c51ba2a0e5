/* llama.c - the Llama 3 model on a backend: buffers, forward, explicit backward.
 *
 * Three allocations, llm.c style: parameters and gradients (flat, catalog
 * order, fp32) and one activation arena carved by a table of sizes. With a
 * bf16 compute type a fourth holds the bf16 compute copy of the parameters,
 * cast block by block just before the block runs (so FSDP's freshly
 * gathered fp32 parameters are what is cast); activations and their
 * gradients are bf16, parameter gradients stay fp32 (the backend's ops add
 * into them in fp32), as do the norms' rstd, attention's lse and the
 * losses. Activation checkpointing (llama.h) decides, layer by layer,
 * which intermediates have a slot of their own; the others share one
 * scratch slot and are recomputed in backward, just before the layer's
 * backward, from the saved layer input and what the layer kept; the ops
 * are deterministic, so the recomputed values and the gradients are bitwise
 * the same as with TITAN_AC_NONE.
 *
 * Tensor parallelism (llama.h) changes only the shapes the ops see (the
 * rank's heads, hidden units and vocabulary rows) and adds the sums over
 * the tp group where a row-parallel output or a column-parallel input
 * gradient is partial (tp_sum), and the vocabulary-parallel loss.
 *
 * Context parallelism (llama.h) gives every per-token op the rank's rows
 * (two chunks of each sequence), RoPE a table of those rows' positions,
 * and attention to attention_cp.c, which sees the whole sequence's keys.
 *
 * A pipeline stage (llama.h) runs its own blocks only: the catalog stays
 * the whole model's (other stages' tensors empty), layers are numbered as
 * in the whole model, activations are allocated for the stage's layers.
 * Several micro-batches can be in flight at once (a pipeline schedule):
 * what a forward keeps for its backward is allocated once per slot, the
 * backward's scratch once. The buffers, their plan and the accessors are
 * llama_create.c's; the tables and the struct, llama_impl.h's. */
#include "model/llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama_impl.h"

/* Sequence parallelism's two collectives over the tp group, on [N, C]
 * buffers of the compute type whose rows [rank x NR, (rank + 1) x NR) are
 * the rank's (own_rows). gather: every rank's own rows into all of full
 * (each wrote its own first); scatter: the sum over the group of full's
 * rows into the rank's NR rows at local (which may be own_rows(full)).
 * Failures are kept as tp_sum keeps them. */
static void *own_rows(const titan_llama *m, void *full) {
    return (char *)full + (size_t)m->tpp.rank * m->NR * m->C * titan_dtype_size(m->dt);
}

static titan_status sp_collective(titan_llama *m, void *full, void *local, int gather) {
    if (m->err != TITAN_OK) return m->err;
    size_t n = (size_t)m->NR * m->C;
    const titan_group *g = m->tp;
    titan_status st = gather ? g->all_gather(g->ctx, own_rows(m, full), full, n, m->dt)
                             : g->reduce_scatter(g->ctx, full, local, n, m->dt);
    if (st != TITAN_OK) {
        titan_error_context("model: sequence parallel %s", gather ? "all-gather" : "reduce-scatter");
        m->err = st;
    }
    return st;
}
static void sp_gather(titan_llama *m, void *full) {
    if (m->sp) (void)sp_collective(m, full, NULL, 1);
}

/* Keeps the first failure of a collective for titan_llama_take_error. */
static void keep_error(titan_llama *m, titan_status st) {
    if (m->err == TITAN_OK) m->err = st;
}

/* x[n] (of type dt) = its sum over the tp group: the row-parallel
 * outputs and the column-parallel input gradients (compute type), the
 * sequence-parallel norm weight gradients (fp32). A failure is kept
 * (m->err) and returned. */
static titan_status tp_sum(titan_llama *m, void *x, size_t n, titan_dtype dt) {
    if (!m->tp || m->err != TITAN_OK) return m->err;
    titan_status st = m->tp->all_reduce(m->tp->ctx, x, n, dt);
    if (st != TITAN_OK) {
        titan_error_context("model: tensor parallel sum of %zu values", n);
        m->err = st;
    }
    return st;
}

/* A row-parallel output part[N, C] (partial over the rank's heads, hidden
 * units or vocabulary) summed over the tp group into the rank's residual
 * rows at local: all of it (all-reduce; part is local), or under sequence
 * parallelism its own rows (reduce-scatter). */
static void tp_reduce(titan_llama *m, void *part, void *local) {
    if (m->sp) (void)sp_collective(m, part, local, 0);
    else tp_sum(m, part, (size_t)m->N * m->C, m->dt);
}

/* Where a row-parallel output goes before tp_reduce: the scratch under
 * sequence parallelism (the rank's residual rows are fewer), else local. */
static void *part_of(const titan_llama *m, void *local) { return m->sp ? m->act[A_FULL] : local; }

/* A column-parallel input gradient d[N, C], partial over the rank's
 * columns, summed over the tp group; returns the rows the norm backward
 * reads: all of d, or under sequence parallelism the rank's own rows. */
static void *tp_reduce_grad(titan_llama *m, void *d) {
    if (!m->tp) return d;
    tp_reduce(m, d, own_rows(m, d));
    return m->sp ? own_rows(m, d) : d;
}

/* RMSNorm forward on the rank's residual rows: into all of out, or under
 * sequence parallelism into its own rows, then gathered whole. */
static void norm_forward(titan_llama *m, void *out, float *rstd, const void *x, const void *w) {
    m->be->rmsnorm_forward(m->dt, m->sp ? own_rows(m, out) : out, rstd, x, w, m->NR, m->C, m->cfg.norm_eps);
    sp_gather(m, out);
}

/* ---- async tensor parallelism: the sp collectives as collective matmuls ----
 * The same products as the blocking path, cut by rows into the tp group's
 * blocks (NR rows each: a row's result reads no other row, though a BLAS
 * may round a shorter product differently), run as each block arrives
 * (all-gather) or before its partial is summed (reduce-scatter); a
 * weight's gradient, which sums over all rows, stays one product over the
 * gathered rows as before, so its summation order does not change. */

static size_t rows_at(const titan_llama *m, int block, int width) {
    return (size_t)block * m->NR * (size_t)width * titan_dtype_size(m->dt);
}

static void overlap_failed(titan_llama *m, titan_status st, const char *what) {
    if (st == TITAN_OK) return;
    titan_error_context("model: async tensor parallel %s", what);
    keep_error(m, st);
}

/* Up to three column-parallel products of one gathered input x[N, C]:
 * forward y_i[N, OC_i] = x @ w_i^T; backward dx (+)= sum_i dy_i[N, OC_i] @ w_i. */
typedef struct {
    titan_llama *m;
    int np;
    void *y[3];
    const void *dy[3], *w[3];
    int OC[3];
    void *dx;
    /* backward under async tp: ready(m) makes dy[ready_at..] (the cp
     * ring's key and value gradients), called after the products of
     * the dy before it */
    void (*ready)(titan_llama *m);
    int ready_at;
} col_products;

static void col_add(col_products *p, void *y, const void *dy, const void *w, int OC) {
    p->y[p->np] = y, p->dy[p->np] = dy, p->w[p->np] = w, p->OC[p->np] = OC;
    p->np++;
}

/* forward, rows of block r (x its rows) */
static void col_forward_block(void *arg, int r, void *x) {
    col_products *p = arg;
    titan_llama *m = p->m;
    for (int i = 0; i < p->np; i++)
        m->be->matmul_forward(m->dt, (char *)p->y[i] + rows_at(m, r, p->OC[i]), x, p->w[i], m->NR, m->C, p->OC[i]);
}

/* backward: this rank's partial of dx's block d into dst */
static void col_backward_block(void *arg, int d, void *dst) {
    col_products *p = arg;
    titan_llama *m = p->m;
    for (int i = 0; i < p->np; i++)
        m->be->matmul_backward(m->dt, i ? TITAN_ACC_DX : 0, dst, NULL, (const char *)p->dy[i] + rows_at(m, d, p->OC[i]),
                               NULL, p->w[i], m->NR, m->C, p->OC[i]);
}

/* The products of a gathered input x, when it was not just gathered. */
static void products_of(titan_llama *m, const void *x, col_products *p) {
    for (int i = 0; i < p->np; i++) m->be->matmul_forward(m->dt, p->y[i], x, p->w[i], m->N, m->C, p->OC[i]);
}

/* The norm's output (own rows, then whole) and the column-parallel
 * products that read it: under async tp each block is multiplied as it
 * arrives; else gathered whole, then multiplied. */
static void norm_products(titan_llama *m, void *out, float *rstd, const void *x, const void *w, col_products *p) {
    if (!m->overlap) {
        norm_forward(m, out, rstd, x, w);
        products_of(m, out, p);
        return;
    }
    m->be->rmsnorm_forward(m->dt, own_rows(m, out), rstd, x, w, m->NR, m->C, m->cfg.norm_eps);
    if (m->err != TITAN_OK) return;
    overlap_failed(m, m->tp->all_gather_each(m->tp->ctx, own_rows(m, out), out, (size_t)m->NR * m->C, m->dt,
                                             p->np ? col_forward_block : NULL, p), "all-gather matmul");
}


/* Backward of column-parallel products of x[N, C] (dy_i given, dw_i their
 * weights' gradients, acc gw): dx = sum_i dy_i @ w_i summed over the tp
 * group; returns the rows the norm backward reads (tp_reduce_grad's). */
static void *col_backward(titan_llama *m, int gw, col_products *p, float *const *dw, const void *x) {
    const titan_backend *be = m->be;
    if (!m->overlap) {
        for (int i = 0; i < p->np; i++)
            be->matmul_backward(m->dt, (i ? TITAN_ACC_DX : 0) | gw, p->dx, dw[i], p->dy[i], x, p->w[i], m->N, m->C,
                                p->OC[i]);
        return tp_reduce_grad(m, p->dx);
    }
    for (int i = 0; i < p->np; i++) {
        if (p->ready && i == p->ready_at) p->ready(m);
        be->matmul_backward(m->dt, gw, NULL, dw[i], p->dy[i], x, p->w[i], m->N, m->C, p->OC[i]);
    }
    if (m->err == TITAN_OK)
        overlap_failed(m, m->tp->reduce_scatter_each(m->tp->ctx, own_rows(m, p->dx), (size_t)m->NR * m->C, m->dt,
                                                     col_backward_block, p), "matmul reduce-scatter");
    return own_rows(m, p->dx);
}

/* A row-parallel product inp[N, IC] @ w^T (w [C, IC]), partial over the rank's columns. */
typedef struct {
    titan_llama *m;
    const void *inp, *w;
    void *dinp;
    int IC;
} row_product;

static void row_forward_block(void *arg, int d, void *dst) {
    row_product *p = arg;
    titan_llama *m = p->m;
    m->be->matmul_forward(m->dt, dst, (const char *)p->inp + rows_at(m, d, p->IC), p->w, m->NR, p->IC, m->C);
}

static void row_backward_block(void *arg, int r, void *dout) {
    row_product *p = arg;
    titan_llama *m = p->m;
    m->be->matmul_backward(m->dt, 0, (char *)p->dinp + rows_at(m, r, p->IC), NULL, dout, NULL, p->w, m->NR, p->IC,
                           m->C);
}

static void embed_block(void *arg, int d, void *dst) {
    titan_llama *m = arg;
    m->be->embedding_forward(m->dt, dst, (const uint32_t *)m->act[A_TOKENS] + (size_t)d * m->NR, W(m, 0), m->NR, m->C,
                             m->V);
}

/* The residual gradient's blocks gathered whole into A_FULL, fn run on each. */
static void *gather_dresid(titan_llama *m, titan_group_block_fn fn, void *arg) {
    void *full = m->act[A_FULL];
    if (m->err == TITAN_OK)
        overlap_failed(m, m->tp->all_gather_each(m->tp->ctx, m->act[A_DRESID], full, (size_t)m->NR * m->C, m->dt, fn,
                                                 arg), "all-gather matmul");
    return full;
}

/* RMSNorm backward on the rank's residual rows. Under sequence parallelism
 * the weight's gradient covers the rank's rows only: it goes to a scratch,
 * is summed over the group (fp32) and then written or added (acc) to dw. */
static void norm_backward(titan_llama *m, int acc, void *dinp, float *dw, const void *dout, const void *x,
                          const void *w, const float *rstd) {
    const titan_backend *be = m->be;
    if (!m->sp) {
        be->rmsnorm_backward(m->dt, acc, dinp, dw, dout, x, w, rstd, m->NR, m->C);
        return;
    }
    float *part = m->act[A_DNORM];
    size_t C = (size_t)m->C;
    be->rmsnorm_backward(m->dt, acc & TITAN_ACC_DX, dinp, part, dout, x, w, rstd, m->NR, m->C);
    if (tp_sum(m, part, C, TITAN_DTYPE_F32) != TITAN_OK) return;
    if (acc & TITAN_ACC_DW) be->add(TITAN_DTYPE_F32, dw, dw, part, C);
    else be->convert(dw, TITAN_DTYPE_F32, part, TITAN_DTYPE_F32, C);
}

/* The whole [N, C] gradient of the residual stream for the matmuls' and
 * the embedding's backward: dresid itself, or under sequence parallelism
 * every rank's rows gathered into the scratch. */
static const void *whole_dresid(titan_llama *m) {
    void *dresid = m->act[A_DRESID];
    if (!m->sp) return dresid;
    if (m->overlap) return gather_dresid(m, NULL, NULL);
    void *full = m->act[A_FULL];
    m->be->convert(own_rows(m, full), m->dt, dresid, m->dt, (size_t)m->NR * m->C);
    sp_gather(m, full);
    return full;
}
static void *W_tok(const titan_llama *m) { return W(m, 0); }
static void *W_layer(const titan_llama *m, int l, int k) { return W(m, layer_index(l, k)); }
static void *W_final_norm(const titan_llama *m) { return W(m, final_norm_index(m)); }
static void *W_head(const titan_llama *m) { return W(m, head_index(m)); }
static float *G_tok(const titan_llama *m) { return G(m, 0); }
static float *G_layer(const titan_llama *m, int l, int k) { return G(m, layer_index(l, k)); }
static float *G_final_norm(const titan_llama *m) { return G(m, final_norm_index(m)); }
static float *G_head(const titan_llama *m) { return G(m, head_index(m)); }

/* Casts catalog tensors [first, last] to the compute copy, but those whose
 * copy is current: one convert per run of neighbours. */
static void cast_params(titan_llama *m, int first, int last) {
    size_t e = titan_dtype_size(m->dt);
    for (int i = first; i <= last;) {
        if (m->copy_current[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j < last && !m->copy_current[j + 1]) j++;
        size_t lo = m->catalog[i].offset, hi = m->catalog[j].offset + m->catalog[j].numel;
        m->be->convert((char *)m->params_lp + lo * e, m->dt, m->params + lo, TITAN_DTYPE_F32, hi - lo);
        i = j + 1;
    }
}

/* Refreshes the compute copy of what block b reads (see llama.h for blocks). */
static void cast_block(titan_llama *m, int b) {
    if (!m->params_lp) return;
    int last = m->L + 1;
    if (b == 0) cast_params(m, 0, 0);
    else if (b < last) cast_params(m, layer_index(b - 1, 0), layer_index(b - 1, P_PER_LAYER - 1));
    else {
        cast_params(m, final_norm_index(m), final_norm_index(m));
        cast_params(m, head_index(m), head_index(m));
    }
}

/* Share flags for the linears ks[0..n) of layer l that read one x, in call
 * order (run[i]: ks[i] runs in this pass): among the float8 ones, the
 * first keeps x's cast, the middle ones use it, the last uses it and lets
 * it go; a lone one shares nothing. wk, wv and wq read n1, w1 and w3 n2:
 * x is cast once for them, forward and backward, not once each. */
static void fp8_share_flags(const titan_llama *m, int l, const int *ks, const int *run, int n, int *flag) {
    int at[FP8_PER_LAYER], count = 0;
    for (int i = 0; i < n; i++) {
        flag[i] = TITAN_FP8_SHARE_NONE;
        if (run[i] && titan_llama_float8_linear(m, l, ks[i])) at[count++] = i;
    }
    if (count < 2 || !m->fp8_reuse) return;
    for (int j = 0; j < count; j++)
        flag[at[j]] = j == 0 ? TITAN_FP8_SHARE_KEEP : j == count - 1 ? TITAN_FP8_SHARE_LAST : TITAN_FP8_SHARE_USE;
}

/* The backward's share flags: grad_w's cast of n1 for wq, wk, wv (sq, in
 * that call order) and of n2 for w1, w3 (sf). */
static void fp8_backward_share(const titan_llama *m, int l, int sq[3], int sf[2]) {
    const int qkv[3] = {FP8_WQ, FP8_WK, FP8_WV}, ffn[2] = {FP8_W1, FP8_W3}, all[3] = {1, 1, 1};
    fp8_share_flags(m, l, qkv, all, 3, sq);
    fp8_share_flags(m, l, ffn, all, 2, sf);
}

/* out[N, OC] (= resid +) inp @ w^T for layer l's linear k: in float8 when
 * it is converted (counting the float8 GEMMs the backend ran; x's cast
 * shared as share says), else as matmul_forward / matmul_add_forward. */
static void linear_forward_shared(titan_llama *m, int l, int k, int share, void *out, const void *inp, const void *w,
                                  const void *resid, int IC, int OC) {
    titan_fp8_recipe buf;
    const titan_fp8_recipe *r = titan_llama_fp8_recipe(m, &buf, l, k, TITAN_FP8_X_OUT, TITAN_FP8_GO_GI, inp, w, NULL,
                                                       IC, OC, share);
    if (r) m->fp8_gemms += m->be->fp8_matmul_forward(m->dt, r, out, inp, w, resid, m->N, IC, OC);
    else if (resid) m->be->matmul_add_forward(m->dt, out, inp, w, resid, m->N, IC, OC);
    else m->be->matmul_forward(m->dt, out, inp, w, m->N, IC, OC);
}

static void linear_forward(titan_llama *m, int l, int k, void *out, const void *inp, const void *w,
                           const void *resid, int IC, int OC) {
    linear_forward_shared(m, l, k, TITAN_FP8_SHARE_NONE, out, inp, w, resid, IC, OC);
}

/* The backward of linear_forward: dinp (+)= dout w, dw (+)= dout^T inp
 * (grad_w's cast of x shared as share says). */
static void linear_backward_shared(titan_llama *m, int l, int k, int share, int acc, void *dinp, float *dw,
                                   const void *dout, const void *inp, const void *w, int IC, int OC) {
    titan_fp8_recipe buf;
    /* the casts of the GEMMs that run: grad_in's with dinp, grad_w's with dw */
    const titan_fp8_recipe *r = titan_llama_fp8_recipe(m, &buf, l, k, dinp ? TITAN_FP8_GO_GI : TITAN_FP8_GO_GW,
                                                       dw ? TITAN_FP8_NCASTS : TITAN_FP8_GO_GW, inp, w, dout, IC, OC,
                                                       dw ? share : TITAN_FP8_SHARE_NONE);
    if (r) m->fp8_gemms += m->be->fp8_matmul_backward(m->dt, r, acc, dinp, dw, dout, inp, w, m->N, IC, OC);
    else m->be->matmul_backward(m->dt, acc, dinp, dw, dout, inp, w, m->N, IC, OC);
}

static void linear_backward(titan_llama *m, int l, int k, int acc, void *dinp, float *dw, const void *dout,
                            const void *inp, const void *w, int IC, int OC) {
    linear_backward_shared(m, l, k, TITAN_FP8_SHARE_NONE, acc, dinp, dw, dout, inp, w, IC, OC);
}

/* dst = resid + inp[N, IC] @ w^T, a residual branch's output projection
 * (wo, w2): one product with the add in its epilogue, rounded once. Under
 * tp the row-parallel product is partial over the rank's heads or hidden
 * units: it goes to scratch, is summed over the group, then added. dst may
 * be scratch. */
static void residual_out(titan_llama *m, int l, int k, void *dst, const void *inp, const void *w, const void *resid,
                         int IC, void *scratch) {
    const titan_backend *be = m->be;
    if (!m->tp) {
        linear_forward(m, l, k, dst, inp, w, resid, IC, m->C);
        return;
    }
    if (m->overlap) {
        row_product p = {m, inp, w, NULL, IC};
        if (m->err == TITAN_OK)
            overlap_failed(m, m->tp->reduce_scatter_each(m->tp->ctx, scratch, (size_t)m->NR * m->C, m->dt,
                                                         row_forward_block, &p), "matmul reduce-scatter");
    } else {
        linear_forward(m, l, k, part_of(m, scratch), inp, w, NULL, IC, m->C);
        tp_reduce(m, part_of(m, scratch), scratch);
    }
    be->add(m->dt, dst, resid, scratch, (size_t)m->NR * m->C);
}

/* One transformer block: x -> out, intermediates into a. out may hold
 * anything on entry (it is used as the projection scratch). With rerun (in
 * backward, before the layer's backward) only what the layer did not keep
 * is computed, and out, the layer's output slot, which nothing reads any
 * more, serves as scratch only: the output itself is not needed. */
/* From the projections to the attention output: q and k rotated ([N,
 * NH*HD] is [B, T, NH, HD]: in place but for KEEP_OPS, no transposes), then
 * attention; each only where the caller needs it (a rerun keeps some). */
static void rope_attention_forward(titan_llama *m, const layer_acts *a, int need_q, int need_k, int need_att) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    const float *cs = m->act[A_COS], *sn = m->act[A_SIN];
    if (need_q) be->rope_forward(dt, a->q, a->q_pre, cs, sn, m->B, m->T, m->NH, m->HD);
    if (need_k) be->rope_forward(dt, a->k, a->k, cs, sn, m->B, m->T, m->NKV, m->HD);
    if (need_att && m->cpa)
        keep_error(m, titan_attention_cp_forward(m->cpa, a->att, a->lse, a->q, a->k, a->v));
    else if (need_att)
        be->attention_forward(dt, a->att, a->lse, a->q, a->k, a->v, m->B, m->T, m->T, m->NH, m->NKV, m->HD);
}

/* layer_forward under async tensor parallelism: the column-parallel
 * products as collective matmuls over the rows' blocks (no float8, no
 * split backward: both are refused with it). */
static void layer_forward_overlap(titan_llama *m, int l, const void *x, void *out, int rerun) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    layer_acts a = acts_of(m, l);
    layer_keep keep = keep_of_layer(m, l);
    int N = m->N, QD = m->QD, KVD = m->KVD, H = m->H;
#define NEED(id) (!rerun || !layer_keeps(keep, id))

    col_products p = {.m = m};
    if (NEED(A_QPRE) && NEED(A_Q)) col_add(&p, a.q_pre, NULL, W_layer(m, l, P_WQ), QD);
    if (NEED(A_K)) col_add(&p, a.k, NULL, W_layer(m, l, P_WK), KVD);
    if (NEED(A_V)) col_add(&p, a.v, NULL, W_layer(m, l, P_WV), KVD);
    if (NEED(A_N1)) norm_products(m, a.n1, a.rstd1, x, W_layer(m, l, P_ATTN_NORM), &p);
    else products_of(m, a.n1, &p);
    rope_attention_forward(m, &a, NEED(A_Q), NEED(A_K), NEED(A_ATT));
    if (NEED(A_H)) residual_out(m, l, FP8_WO, a.h, a.att, W_layer(m, l, P_WO), x, QD, out);

    p = (col_products){.m = m};
    if (NEED(A_H1)) col_add(&p, a.h1, NULL, W_layer(m, l, P_W1), H);
    if (NEED(A_H3)) col_add(&p, a.h3, NULL, W_layer(m, l, P_W3), H);
    if (NEED(A_N2)) norm_products(m, a.n2, a.rstd2, a.h, W_layer(m, l, P_FFN_NORM), &p);
    else products_of(m, a.n2, &p);
    if (NEED(A_SW)) be->swiglu_forward(dt, a.sw, a.h1, a.h3, N, H);
    if (!rerun) residual_out(m, l, FP8_W2, out, a.sw, W_layer(m, l, P_W2), a.h, H, out);
#undef NEED
}

static void layer_forward(titan_llama *m, int l, const void *x, void *out, int rerun) {
    if (m->overlap) {
        layer_forward_overlap(m, l, x, out, rerun);
        return;
    }
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    layer_acts a = acts_of(m, l);
    layer_keep keep = keep_of_layer(m, l);
    int N = m->N, C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
#define NEED(id) (!rerun || !layer_keeps(keep, id))

    /* n1 feeds wk, wv, wq; n2 feeds w1, w3: float8 casts each once */
    const int qkv[3] = {FP8_WK, FP8_WV, FP8_WQ}, ffn[2] = {FP8_W1, FP8_W3};
    const int qkv_run[3] = {NEED(A_K), NEED(A_V), NEED(A_QPRE) && NEED(A_Q)}, ffn_run[2] = {NEED(A_H1), NEED(A_H3)};
    int sq[3], sf[2];
    fp8_share_flags(m, l, qkv, qkv_run, 3, sq);
    fp8_share_flags(m, l, ffn, ffn_run, 2, sf);

    if (NEED(A_N1)) norm_forward(m, a.n1, a.rstd1, x, W_layer(m, l, P_ATTN_NORM));
    if (qkv_run[0]) linear_forward_shared(m, l, FP8_WK, sq[0], a.k, a.n1, W_layer(m, l, P_WK), NULL, C, KVD);
    if (qkv_run[1]) linear_forward_shared(m, l, FP8_WV, sq[1], a.v, a.n1, W_layer(m, l, P_WV), NULL, C, KVD);
    int k_early = m->cpa && NEED(A_ATT); /* the cp ring sends k, v while q is projected */
    if (k_early && NEED(A_K)) be->rope_forward(dt, a.k, a.k, m->act[A_COS], m->act[A_SIN], m->B, m->T, m->NKV, m->HD);
    if (k_early) keep_error(m, titan_attention_cp_prepare(m->cpa, a.k, a.v));
    if (qkv_run[2]) linear_forward_shared(m, l, FP8_WQ, sq[2], a.q_pre, a.n1, W_layer(m, l, P_WQ), NULL, C, QD);
    rope_attention_forward(m, &a, NEED(A_Q), NEED(A_K) && !k_early, NEED(A_ATT));
    if (NEED(A_H)) residual_out(m, l, FP8_WO, a.h, a.att, W_layer(m, l, P_WO), x, QD, out);

    if (NEED(A_N2)) norm_forward(m, a.n2, a.rstd2, a.h, W_layer(m, l, P_FFN_NORM));
    if (ffn_run[0]) linear_forward_shared(m, l, FP8_W1, sf[0], a.h1, a.n2, W_layer(m, l, P_W1), NULL, C, H);
    if (ffn_run[1]) linear_forward_shared(m, l, FP8_W3, sf[1], a.h3, a.n2, W_layer(m, l, P_W3), NULL, C, H);
    if (NEED(A_SW)) be->swiglu_forward(dt, a.sw, a.h1, a.h3, N, H);
    if (!rerun) residual_out(m, l, FP8_W2, out, a.sw, W_layer(m, l, P_W2), a.h, H, out);
#undef NEED
}

/* *x = its sum over the tp group, added in rank order (the same on every rank). */
static titan_status tp_sum_double(titan_llama *m, double *x) {
    titan_status st = m->tp->sum_double(m->tp->ctx, x);
    if (st != TITAN_OK) titan_error_context("model: tensor parallel loss sum");
    return st;
}

/* A_LSEV = each logits row's log-sum-exp over the whole vocabulary: the
 * ranks' shard-wise ones gathered and combined on the host in double, in
 * rank order (tp x N floats: small next to the logits). */
static titan_status tp_row_lse(titan_llama *m) {
    int N = m->N, n = m->tpp.size;
    float *lsev = m->act[A_LSEV], *all = m->lse_host;
    m->be->logsumexp(m->dt, lsev, m->act[A_LOGITS], N, m->V);
    float *mine = all + (size_t)m->tpp.rank * N;
    m->be->to_host(mine, lsev, (size_t)N * sizeof(float));
    titan_status st = m->tp->all_gather_host(m->tp->ctx, mine, all, (size_t)N);
    if (st != TITAN_OK) {
        titan_error_context("model: tensor parallel log-sum-exp");
        return st;
    }
    for (int i = 0; i < N; i++) {
        double mx = all[i];
        for (int r = 1; r < n; r++) mx = fmax(mx, all[(size_t)r * N + i]);
        double e = 0.0;
        for (int r = 0; r < n; r++) e += exp(all[(size_t)r * N + i] - mx);
        mine[i] = (float)(mx + log(e)); /* mine is done with: it takes the result */
    }
    m->be->to_device(lsev, mine, (size_t)N * sizeof(float));
    return TITAN_OK;
}

/* Vocabulary id in the rank's shard: id - v0, or V (none of its rows) for
 * another rank's (below v0 it wraps to >= V as well). */
static uint32_t shard_id(const titan_llama *m, uint32_t id) {
    uint32_t local = id - (uint32_t)m->v0;
    return local < (uint32_t)m->V ? local : (uint32_t)m->V;
}

/* grad_scale > 0: the cross-entropy pass also writes the logits' gradient */
static titan_status forward_run(titan_llama *m, const uint32_t *tokens, const uint32_t *targets,
                                float grad_scale, float *loss) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    int N = m->N, C = m->C, V = m->V, Vg = m->cfg.vocab_size;
    int with_targets = targets != NULL;
    if (!m->embed) tokens = NULL; /* the stage input is the previous stage's output */
    if (!m->head) targets = NULL;
    TITAN_ASSERT(tokens || !m->embed);
    /* Out-of-range ids would read outside the embedding table. */
    for (int i = 0; i < N; i++) {
        if (tokens && tokens[i] >= (uint32_t)Vg)
            return titan_error(TITAN_ERR_FORMAT, "model input: token %d: id %u >= vocab size %d",
                               i, tokens[i], Vg);
        if (targets && targets[i] >= (uint32_t)Vg)
            return titan_error(TITAN_ERR_FORMAT, "model input: target %d: id %u >= vocab size %d",
                               i, targets[i], Vg);
    }
    if (m->tp) { /* ids in the rank's vocabulary shard; V (none of its rows) outside it */
        uint32_t *lt = m->ids_host, *lg = m->ids_host + N;
        for (int i = 0; i < N; i++) {
            if (tokens) lt[i] = shard_id(m, tokens[i]);
            if (targets) lg[i] = shard_id(m, targets[i]);
        }
        if (tokens) tokens = lt;
        if (targets) targets = lg;
    }
    uint32_t *tok = m->act[A_TOKENS], *tgt = m->act[A_TARGETS];
    if (tokens) be->to_device(tok, tokens, (size_t)N * sizeof(uint32_t));
    if (targets) be->to_device(tgt, targets, (size_t)N * sizeof(uint32_t));
    int k = m->slot;
    TITAN_ASSERT(!m->wstash || !m->w_pending[k]); /* a slot's weight part runs before its next forward */
    m->have_targets[k] = 0;
    m->dlogits_scale[k] = 0.0f;
    if (loss) *loss = 0.0f;

    int last = m->L + 1;
    if (m->embed) {
        TITAN_TRY(HOOK(m, before_forward, 0));
        cast_block(m, 0);
        if (m->overlap) {
            overlap_failed(m, m->tp->reduce_scatter_each(m->tp->ctx, resid(m, 0), (size_t)m->NR * C, dt, embed_block, m),
                           "embedding reduce-scatter");
        } else {
            be->embedding_forward(dt, part_of(m, resid(m, 0)), tok, W_tok(m), N, C, V);
            tp_reduce(m, part_of(m, resid(m, 0)), resid(m, 0)); /* each row from the rank holding its id */
        }
        TITAN_TRY(titan_llama_take_error(m));
        TITAN_TRY(HOOK(m, after_forward, 0));
    }
    for (int l = m->l0; l < m->l1; l++) {
        TITAN_TRY(HOOK(m, before_forward, l + 1));
        cast_block(m, l + 1);
        layer_forward(m, l, resid(m, l), resid(m, l + 1), 0);
        TITAN_TRY(titan_llama_take_error(m));
        TITAN_TRY(HOOK(m, after_forward, l + 1));
    }
    if (!m->head) { /* the stage output goes on to the next stage */
        /* a backward may follow a forward with targets, or forward_train's (targets are the last stage's) */
        m->have_targets[k] = (unsigned char)(with_targets || grad_scale > 0.0f);
        return TITAN_OK;
    }
    TITAN_TRY(HOOK(m, before_forward, last));
    cast_block(m, last);
    if (m->overlap) {
        col_products head = {.m = m};
        col_add(&head, m->act[A_LOGITS], NULL, W_head(m), V);
        norm_products(m, m->act[A_XF], m->act[A_RSTDF], resid(m, m->L), W_final_norm(m), &head);
    } else {
        norm_forward(m, m->act[A_XF], m->act[A_RSTDF], resid(m, m->L), W_final_norm(m));
        linear_forward(m, m->L, 0, m->act[A_LOGITS], m->act[A_XF], W_head(m), NULL, C, V);
    }
    TITAN_TRY(titan_llama_take_error(m));
    TITAN_TRY(HOOK(m, after_forward, last));

    if (!targets) return TITAN_OK;
    /* Loss only, so the logits stay readable after forward (backward then
     * recomputes the softmax into dlogits in place); or, for a training
     * step, loss and dlogits in one pass over the logits. */
    const float *lse = NULL; /* tensor parallel: the rows' log-sum-exps over the whole vocabulary */
    if (m->tp) {
        TITAN_TRY(tp_row_lse(m));
        lse = m->act[A_LSEV];
    }
    if (grad_scale > 0.0f) {
        be->cross_entropy(dt, m->act[A_LOSSES], m->act[A_LOGITS], m->act[A_LOGITS], tgt, N, V,
                          grad_scale / (float)N, lse);
        m->dlogits_scale[k] = grad_scale;
    } else {
        be->cross_entropy(dt, m->act[A_LOSSES], NULL, m->act[A_LOGITS], tgt, N, V, 0.0f, lse);
    }
    /* The host adds the losses (in order, in double): read in place on the
     * CPU, copied over from a device (the copy waits for the forward). */
    const float *losses = m->act[A_LOSSES];
    if (m->loss_host) {
        be->to_host(m->loss_host, m->act[A_LOSSES], (size_t)N * sizeof(float));
        losses = m->loss_host;
    }
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    /* tp: each rank holds the losses of the targets in its shard (0 elsewhere) */
    if (m->tp) TITAN_TRY(tp_sum_double(m, &sum));
    if (loss) *loss = (float)(sum / N);
    m->have_targets[k] = 1;
    return TITAN_OK;
}

titan_status titan_llama_forward(titan_llama *m, const uint32_t *tokens, const uint32_t *targets,
                                 float *loss) {
    return forward_run(m, tokens, targets, 0.0f, loss);
}

titan_status titan_llama_forward_train(titan_llama *m, const uint32_t *tokens,
                                       const uint32_t *targets, float loss_scale, float *loss) {
    TITAN_ASSERT((targets || !m->head) && loss_scale > 0.0f);
    return forward_run(m, tokens, targets, loss_scale, loss);
}

/* The split backward's stash entry id of local layer l in the current
 * slot (WS_EMBED: the stage's), NULL where the layer keeps that input. */
static void *ws_at(const titan_llama *m, int l, int id) {
    char *p = m->wstash + (size_t)m->slot * m->wstash_stride;
    int j = id == WS_EMBED ? m->LLmax : l - m->l0;
    for (int jj = 0; jj < j; jj++)
        for (int i = 0; i < WS_EMBED; i++) p += ws_has(m->ac, i, jj) ? m->ws_bytes[i] : 0;
    if (id != WS_EMBED && !ws_has(m->ac, id, j)) return NULL;
    for (int i = 0; i < id && id != WS_EMBED; i++) p += ws_has(m->ac, i, j) ? m->ws_bytes[i] : 0;
    return p;
}

/* With a stash (split), a copy of n elements of src into layer l's entry id. */
static void stash(titan_llama *m, int split, int l, int id, const void *src, size_t n) {
    void *dst = split ? ws_at(m, l, id) : NULL;
    if (dst) m->be->convert(dst, m->dt, src, m->dt, n);
}

/* A layer's matmul inputs for its weight gradients: the kept activations,
 * or the stash's copies of the recomputed ones. */
static void *ws_input(const titan_llama *m, int l, int id, void *kept) {
    void *copy = ws_at(m, l, id);
    return copy ? copy : kept;
}

/* dinp[N, IC] = dout @ w and dw (+)= dout^T inp of a row-parallel product
 * (w [C, IC]), dout the whole residual gradient: gathered whole, then
 * multiplied; under async tp dinp block by block as dout's blocks arrive. */
static void row_parallel_backward(titan_llama *m, int gw, void *dinp, float *dw, const void *inp, const void *w,
                                  int IC) {
    if (!m->overlap) {
        m->be->matmul_backward(m->dt, gw, dinp, dw, whole_dresid(m), inp, w, m->N, IC, m->C);
        return;
    }
    row_product p = {m, inp, w, dinp, IC};
    const void *full = gather_dresid(m, row_backward_block, &p);
    m->be->matmul_backward(m->dt, gw, NULL, dw, full, inp, w, m->N, IC, m->C);
}

/* dk into dkr, dv: under context parallelism, once the cp group has summed them. */
static void attention_kv_backward_finish(titan_llama *m) {
    if (m->cpa) keep_error(m, titan_attention_cp_backward_finish(m->cpa));
    m->be->rope_backward(m->dt, 0, m->act[A_DKR], m->act[A_DK], m->act[A_COS], m->act[A_SIN], m->B, m->T, m->NKV,
                         m->HD);
}

/* Backward of one block. On entry dresid = dL/d(block output); on exit
 * dL/d(block input). Into the block's parameter gradients: gw (the
 * matmuls') and gn (the norms') are TITAN_ACC_DW to add, 0 to write them.
 * split: the matmuls' weight gradients are left to layer_weights, what
 * they read stashed. Each activation gradient's first writer overwrites it
 * (acc without TITAN_ACC_DX), later ones add. */
/* From datt (the attention output's gradient) to the rotated projections'
 * gradients: dq into datt (free again: it takes the un-rotated dq), dk
 * into dkr, dv. defer: dkr and dv only at attention_kv_backward_finish
 * (the cp ring's peers finish their partials of them meanwhile). */
static void attention_rope_backward(titan_llama *m, const layer_acts *a, int defer) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    void *dq = m->act[A_DQ], *dk = m->act[A_DK], *dv = m->act[A_DV];
    void *datt = m->act[A_DATT];
    const float *cs = m->act[A_COS], *sn = m->act[A_SIN];
    if (m->cpa)
        keep_error(m, titan_attention_cp_backward_start(m->cpa, dq, dk, dv, datt, a->att, a->lse, a->q, a->k, a->v));
    else
        be->attention_backward(dt, 0, dq, dk, dv, datt, a->att, a->lse, a->q, a->k, a->v, m->B, m->T, m->T, m->NH,
                               m->NKV, m->HD);
    be->rope_backward(dt, 0, datt, dq, cs, sn, m->B, m->T, m->NH, m->HD);
    if (!defer) attention_kv_backward_finish(m);
}

/* layer_backward under async tensor parallelism (whole, never split). */
static void layer_backward_overlap(titan_llama *m, int l, const void *x, int gw) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    layer_acts a = acts_of(m, l);
    int N = m->N, QD = m->QD, KVD = m->KVD, H = m->H;
    void *dresid = m->act[A_DRESID], *dn = m->act[A_DN];
    void *dv = m->act[A_DV], *datt = m->act[A_DATT], *dkr = m->act[A_DKR];
    void *dh1 = m->act[A_DH1], *dh3 = m->act[A_DH3], *dsw = m->act[A_DSW];
    const int add = TITAN_ACC_DX;

    /* out = h + w2(swiglu(w1 n2, w3 n2)), n2 = rmsnorm(h) */
    row_parallel_backward(m, gw, dsw, G_layer(m, l, P_W2), a.sw, W_layer(m, l, P_W2), H);
    be->swiglu_backward(dt, 0, dh1, dh3, dsw, a.h1, a.h3, N, H);
    /* column-parallel w1, w3: partial over the rank's hidden units */
    col_products p = {.m = m, .dx = dn};
    col_add(&p, NULL, dh1, W_layer(m, l, P_W1), H);
    col_add(&p, NULL, dh3, W_layer(m, l, P_W3), H);
    void *dn_rows = col_backward(m, gw, &p, (float *const[]){G_layer(m, l, P_W1), G_layer(m, l, P_W3)}, a.n2);
    /* dresid already holds the residual path's share: the norm adds the rest. */
    norm_backward(m, add | gw, dresid, G_layer(m, l, P_FFN_NORM), dn_rows, a.h, W_layer(m, l, P_FFN_NORM),
                  a.rstd2);

    /* h = x + wo(attention(rope(wq n1), rope(wk n1), wv n1)), n1 = rmsnorm(x) */
    row_parallel_backward(m, gw, datt, G_layer(m, l, P_WO), a.att, W_layer(m, l, P_WO), QD);
    /* dk and dv once wq's weight gradient is made: the cp ring's peers
     * finish their partials of them meanwhile */
    attention_rope_backward(m, &a, 1);
    p = (col_products){.m = m, .dx = dn, .ready = attention_kv_backward_finish, .ready_at = 1};
    col_add(&p, NULL, datt, W_layer(m, l, P_WQ), QD);
    col_add(&p, NULL, dkr, W_layer(m, l, P_WK), KVD);
    col_add(&p, NULL, dv, W_layer(m, l, P_WV), KVD);
    dn_rows = col_backward(m, gw, &p, (float *const[]){G_layer(m, l, P_WQ), G_layer(m, l, P_WK), G_layer(m, l, P_WV)},
                           a.n1);
    norm_backward(m, add | gw, dresid, G_layer(m, l, P_ATTN_NORM), dn_rows, x, W_layer(m, l, P_ATTN_NORM),
                  a.rstd1);
}

static void layer_backward(titan_llama *m, int l, const void *x, int gw, int gn, int split) {
    if (m->overlap) { /* never split (llama_create refuses the pair): gn is gw */
        layer_backward_overlap(m, l, x, gw);
        return;
    }
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    layer_acts a = acts_of(m, l);
    int N = m->N, C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
    size_t NC = (size_t)N * C;
    void *dresid = m->act[A_DRESID], *dn = m->act[A_DN];
    void *dv = m->act[A_DV], *datt = m->act[A_DATT], *dkr = m->act[A_DKR];
    void *dh1 = m->act[A_DH1], *dh3 = m->act[A_DH3], *dsw = m->act[A_DSW];
    const int add = TITAN_ACC_DX;
    int sq[3], sf[2];
    fp8_backward_share(m, l, sq, sf);
#define GW(k) (split ? NULL : G_layer(m, l, k))
    if (split) { /* the inputs the layer recomputed, before the next layer's recompute overwrites them */
        stash(m, split, l, WS_N1, a.n1, NC);
        stash(m, split, l, WS_ATT, a.att, (size_t)N * QD);
        stash(m, split, l, WS_N2, a.n2, NC);
        stash(m, split, l, WS_SW, a.sw, (size_t)N * H);
    }

    /* out = h + w2(swiglu(w1 n2, w3 n2)), n2 = rmsnorm(h) */
    const void *dout = whole_dresid(m);
    stash(m, split, l, WS_DRES_OUT, dout, NC);
    linear_backward(m, l, FP8_W2, gw, dsw, GW(P_W2), dout, a.sw, W_layer(m, l, P_W2), H, C);
    be->swiglu_backward(dt, 0, dh1, dh3, dsw, a.h1, a.h3, N, H);
    stash(m, split, l, WS_DH1, dh1, (size_t)N * H);
    stash(m, split, l, WS_DH3, dh3, (size_t)N * H);
    linear_backward_shared(m, l, FP8_W1, sf[0], gw, dn, GW(P_W1), dh1, a.n2, W_layer(m, l, P_W1), C, H);
    linear_backward_shared(m, l, FP8_W3, sf[1], add | gw, dn, GW(P_W3), dh3, a.n2, W_layer(m, l, P_W3), C, H);
    /* column-parallel w1, w3: partial over the rank's hidden units */
    void *dn_rows = tp_reduce_grad(m, dn);
    /* dresid already holds the residual path's share: the norm adds the rest. */
    norm_backward(m, add | gn, dresid, G_layer(m, l, P_FFN_NORM), dn_rows, a.h, W_layer(m, l, P_FFN_NORM),
                  a.rstd2);

    /* h = x + wo(attention(rope(wq n1), rope(wk n1), wv n1)), n1 = rmsnorm(x) */
    dout = whole_dresid(m);
    stash(m, split, l, WS_DRES_MID, dout, NC);
    linear_backward(m, l, FP8_WO, gw, datt, GW(P_WO), dout, a.att, W_layer(m, l, P_WO), QD, C);
    attention_rope_backward(m, &a, 1);
    stash(m, split, l, WS_DQ, datt, (size_t)N * QD);
    linear_backward_shared(m, l, FP8_WQ, sq[0], gw, dn, GW(P_WQ), datt, a.n1, W_layer(m, l, P_WQ), C, QD);
    attention_kv_backward_finish(m); /* after wq's product: the cp ring's sum of dk, dv waits less */
    stash(m, split, l, WS_DK, dkr, (size_t)N * KVD);
    stash(m, split, l, WS_DV, dv, (size_t)N * KVD);
    linear_backward_shared(m, l, FP8_WK, sq[1], add | gw, dn, GW(P_WK), dkr, a.n1, W_layer(m, l, P_WK), C, KVD);
    linear_backward_shared(m, l, FP8_WV, sq[2], add | gw, dn, GW(P_WV), dv, a.n1, W_layer(m, l, P_WV), C, KVD);
    dn_rows = tp_reduce_grad(m, dn);
    norm_backward(m, add | gn, dresid, G_layer(m, l, P_ATTN_NORM), dn_rows, x, W_layer(m, l, P_ATTN_NORM),
                  a.rstd1);
#undef GW
}

/* The weight part of layer l's split backward: its matmuls' weight
 * gradients from the stash (the same ops layer_backward would have run). */
static void layer_weights(titan_llama *m, int l, int gw) {
    layer_acts a = acts_of(m, l);
    int C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
    void *n1 = ws_input(m, l, WS_N1, a.n1), *att = ws_input(m, l, WS_ATT, a.att);
    void *n2 = ws_input(m, l, WS_N2, a.n2), *sw = ws_input(m, l, WS_SW, a.sw);
    int sq[3], sf[2];
    fp8_backward_share(m, l, sq, sf);
    /* linear_backward: a float8 linear's grad_w in float8 too, as unsplit */
    linear_backward(m, l, FP8_W2, gw, NULL, G_layer(m, l, P_W2), ws_at(m, l, WS_DRES_OUT), sw, W_layer(m, l, P_W2),
                    H, C);
    linear_backward_shared(m, l, FP8_W1, sf[0], gw, NULL, G_layer(m, l, P_W1), ws_at(m, l, WS_DH1), n2,
                           W_layer(m, l, P_W1), C, H);
    linear_backward_shared(m, l, FP8_W3, sf[1], gw, NULL, G_layer(m, l, P_W3), ws_at(m, l, WS_DH3), n2,
                           W_layer(m, l, P_W3), C, H);
    linear_backward(m, l, FP8_WO, gw, NULL, G_layer(m, l, P_WO), ws_at(m, l, WS_DRES_MID), att, W_layer(m, l, P_WO),
                    QD, C);
    linear_backward_shared(m, l, FP8_WQ, sq[0], gw, NULL, G_layer(m, l, P_WQ), ws_at(m, l, WS_DQ), n1,
                           W_layer(m, l, P_WQ), C, QD);
    linear_backward_shared(m, l, FP8_WK, sq[1], gw, NULL, G_layer(m, l, P_WK), ws_at(m, l, WS_DK), n1,
                           W_layer(m, l, P_WK), C, KVD);
    linear_backward_shared(m, l, FP8_WV, sq[2], gw, NULL, G_layer(m, l, P_WV), ws_at(m, l, WS_DV), n1,
                           W_layer(m, l, P_WV), C, KVD);
}

/* The backward (split: its input part) of the current slot. The first
 * backward after zero_grads writes every parameter gradient (each has one
 * writer, but for tied embeddings: the head writes, the embedding adds);
 * later ones add. */
static void backward_run(titan_llama *m, float loss_scale, int split) {
    int k = m->slot;
    TITAN_ASSERT(m->have_targets[k]); /* backward needs a forward with targets */
    TITAN_ASSERT(!split || (m->wstash && !m->w_pending[k]));
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    int N = m->N, C = m->C, V = m->V;
    void *logits = m->act[A_LOGITS], *dresid = m->act[A_DRESID], *dxf = m->act[A_DN];
    struct vstage *vs = &m->vs[m->vstage];
    int gw = vs->grads_fresh ? 0 : TITAN_ACC_DW, gn = vs->norms_fresh ? 0 : TITAN_ACC_DW;
    if (!split) vs->grads_fresh = 0; /* (a stage may mix B and I + W: a CSV schedule) */
    vs->norms_fresh = 0;
    /* FSDP may have re-gathered the parameters since forward: cast again. */
    int recast = m->hooks.regathers;
    m->have_targets[k] = 0; /* the logits are gone */
    if (split) m->w_pending[k] = 1;

    if (m->head) {
        /* dlogits overwrite the logits: d(loss_scale * mean CE), unless the
         * forward wrote them already (with this very scale). */
        if (m->dlogits_scale[k] > 0.0f)
            TITAN_ASSERT(m->dlogits_scale[k] == loss_scale);
        else
            be->cross_entropy(dt, m->act[A_LOSSES], logits, logits, m->act[A_TARGETS], N, V,
                              loss_scale / (float)N, m->tp ? m->act[A_LSEV] : NULL);
        m->dlogits_scale[k] = 0.0f;

        /* Backward hooks' failures stay with their owner (see llama.h). */
        (void)HOOK(m, before_backward, m->L + 1);
        if (recast) cast_block(m, m->L + 1);
        /* column-parallel head: partial over the rank's vocabulary */
        void *dxf_rows;
        if (m->overlap) {
            col_products p = {.m = m, .dx = dxf};
            col_add(&p, NULL, logits, W_head(m), V);
            dxf_rows = col_backward(m, gw, &p, (float *const[]){G_head(m)}, m->act[A_XF]);
        } else {
            /* split: dlogits stay in the slot's logits for the weight part */
            linear_backward(m, m->L, 0, gw, dxf, split ? NULL : G_head(m), logits, m->act[A_XF], W_head(m), C, V);
            dxf_rows = tp_reduce_grad(m, dxf);
        }
        norm_backward(m, gn, dresid, G_final_norm(m), dxf_rows, resid(m, m->L), W_final_norm(m),
                      m->act[A_RSTDF]);
        if (!split) (void)HOOK(m, after_backward, m->L + 1);
    } /* else dresid holds d(loss)/d(stage output), from the next stage */

    for (int l = m->l1 - 1; l >= m->l0; l--) {
        (void)HOOK(m, before_backward, l + 1);
        if (recast) cast_block(m, l + 1);
        /* Recompute what the layer did not keep from its saved input; its
         * output slot is no longer needed, so it serves as scratch. */
        if (keep_of_layer(m, l) != KEEP_ALL) layer_forward(m, l, resid(m, l), resid(m, l + 1), 1);
        /* the cp ring's keys and values out to the peers now, read at the attention's backward */
        if (m->cpa) keep_error(m, titan_attention_cp_prepare(m->cpa, acts_of(m, l).k, acts_of(m, l).v));
        layer_backward(m, l, resid(m, l), gw, gn, split);
        if (!split) (void)HOOK(m, after_backward, l + 1);
    }
    if (!m->embed) return; /* dresid: d(loss)/d(stage input), for the previous stage */
    if (split) {
        stash(m, split, 0, WS_EMBED, whole_dresid(m), (size_t)N * C);
        return;
    }
    (void)HOOK(m, before_backward, 0);
    be->embedding_backward(dt, m->cfg.tie_embeddings ? TITAN_ACC_DW : gw, G_tok(m), whole_dresid(m),
                           m->act[A_TOKENS], N, C, V);
    (void)HOOK(m, after_backward, 0);
}

void titan_llama_backward(titan_llama *m, float loss_scale) { backward_run(m, loss_scale, 0); }
void titan_llama_backward_input(titan_llama *m, float loss_scale) { backward_run(m, loss_scale, 1); }

void titan_llama_backward_weight(titan_llama *m) {
    int k = m->slot;
    TITAN_ASSERT(m->wstash && m->w_pending[k]); /* the slot's input part first, one weight part each */
    m->w_pending[k] = 0;
    const titan_backend *be = m->be;
    struct vstage *vs = &m->vs[m->vstage];
    int gw = vs->grads_fresh ? 0 : TITAN_ACC_DW;
    vs->grads_fresh = 0;
    if (m->head) {
        linear_backward(m, m->L, 0, gw, NULL, G_head(m), m->act[A_LOGITS], m->act[A_XF], W_head(m), m->C, m->V);
        (void)HOOK(m, after_backward, m->L + 1);
    }
    for (int l = m->l1 - 1; l >= m->l0; l--) {
        layer_weights(m, l, gw);
        (void)HOOK(m, after_backward, l + 1);
    }
    if (!m->embed) return;
    (void)HOOK(m, before_backward, 0);
    be->embedding_backward(m->dt, m->cfg.tie_embeddings ? TITAN_ACC_DW : gw, G_tok(m), ws_at(m, 0, WS_EMBED),
                           m->act[A_TOKENS], m->N, m->C, m->V);
    (void)HOOK(m, after_backward, 0);
}
