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
 * backward's scratch once. */
#include "model/llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "model/attention_cp.h"
#include "model/rope_freqs.h"
#include "tensor/layout.h"

/* Per-layer parameter slots, in catalog order. */
enum { P_ATTN_NORM, P_WQ, P_WK, P_WV, P_WO, P_FFN_NORM, P_W1, P_W2, P_W3, P_PER_LAYER };

/* The activation table. A per-layer tensor has a slot for each layer that
 * keeps it, plus one shared by the layers that recompute it (layer_keeps):
 * scratch, rewritten by every such layer's forward and recompute. */
enum {
    A_RESID,   /* (L+1) x [N,C]: each layer's input, then the last layer's output */
    /* per layer */
    A_N1, A_RSTD1, A_QPRE, A_Q, A_K, A_V, A_ATT, A_LSE, A_H, A_N2, A_RSTD2, A_H1, A_H3, A_SW,
    /* head */
    A_XF, A_RSTDF, A_LOGITS, A_LOSSES,
    A_LSEV, /* tensor parallel: each row's log-sum-exp over the whole vocabulary */
    A_FULL,  /* sequence parallel: a whole [N, C] partial output or gathered gradient */
    A_DNORM, /* sequence parallel: a norm's weight gradient over the rank's rows (fp32) */
    /* backward scratch */
    A_DRESID, A_DN, A_DQ, A_DK, A_DV, A_DATT, A_DKR, A_DH1, A_DH3, A_DSW,
    /* inputs and tables */
    A_COS, A_SIN, A_TOKENS, A_TARGETS,
    A_COUNT
};
#define A_LAYER_FIRST A_N1
#define A_LAYER_LAST A_SW

/* void *: the compute type; float *: always fp32 */
typedef struct {
    void *n1, *q_pre, *q, *k, *v, *att, *h, *n2, *h1, *h3, *sw;
    float *rstd1, *lse, *rstd2;
} layer_acts;

/* What a layer keeps from its forward for its backward (llama.h). */
typedef enum {
    KEEP_ALL,   /* everything */
    KEEP_INPUT, /* its input only (the next layer's slot in A_RESID) */
    KEEP_OPS,   /* the outputs of attention and of every other matmul */
} layer_keep;

struct titan_llama {
    titan_llama_config cfg;
    const titan_backend *be;
    titan_ac_mode ac;
    titan_dtype dt; /* compute type of activations and the weights ops read */
    /* NH, NKV, QD, KVD, H, V: this tp rank's; T: the tokens of a sequence
     * this rank holds (the whole sequence's / cp) */
    int B, T, N, C, NH, NKV, HD, QD, KVD, H, V, L;
    /* Pipeline stage: layers [l0, l1) (LL of them; L is the whole model's),
     * whether it holds the embedding (first stage) and the head (last). */
    titan_llama_pp ppp;
    int l0, l1, LL, embed, head;
    /* Micro-batch slots: act[] points into slot `slot`'s copies of the
     * per-slot activations (act_per_slot); act_base[] at slot 0's. */
    int slots, slot;
    void *act_base[A_COUNT];
    /* Per-layer activation id's copy shared by the layers that do not keep
     * it (scratch: one for all slots), NULL where every layer keeps it. */
    void *act_shared[A_COUNT];
    size_t slot_stride; /* bytes between slots */
    /* Rows of the residual stream a rank holds: N, or N / tp under
     * sequence parallelism (sp), rows [rank, rank + 1) x NR of the whole. */
    int NR, sp;
    size_t nparams;
    float *params, *grads;
    void *params_lp; /* the compute copy when dt is not fp32, else NULL */
    char *arena;
    size_t arena_bytes;
    size_t act_size[A_COUNT];  /* elements per copy */
    size_t act_bytes[A_COUNT]; /* bytes per copy, 64-byte multiples */
    void *act[A_COUNT];
    int n_param_tensors;
    titan_param *catalog;
    /* Per slot: 1 after a forward a backward may follow; > 0 when that
     * forward also wrote d(loss * scale)/dlogits over the logits
     * (titan_llama_forward_train): backward starts from them. */
    unsigned char *have_targets;
    float *dlogits_scale;
    /* 1 after titan_llama_zero_grads until the next backward, which then
     * writes the gradients (=) instead of adding: no zero fill, no read. */
    int grads_fresh;
    /* Per parameter tensor: 1 while its compute copy is current because the
     * caller wrote it (titan_llama_set_copy_current): its casts are skipped. */
    unsigned char *copy_current;
    titan_llama_hooks hooks;
    /* Host copy of the per-token losses when backend memory is not host
     * memory (NULL on the CPU backend, whose losses are read in place). */
    float *loss_host;
    /* Tensor parallelism (NULL / {1, 0} without): the group's collectives
     * (model/group.h), the place, the first vocabulary row held; host
     * buffers for the remapped token ids (2N) and the ranks' row
     * log-sum-exps (tp x N). */
    const titan_group *tp;
    titan_llama_tp tpp;
    int v0;
    uint32_t *ids_host;
    float *lse_host;
    titan_status err; /* first tp or cp failure (titan_llama_take_error) */
    titan_attention_cp *cpa; /* context parallelism's attention, NULL without */
};

#define HOOK(m, which, b) ((m)->hooks.which ? (m)->hooks.which((m)->hooks.ctx, (b)) : TITAN_OK)

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static layer_keep keep_of(titan_ac_mode ac, int l) {
    if (ac == TITAN_AC_OP) return KEEP_OPS;
    if (ac >= 1 && (l + 1) % ac == 0) return KEEP_INPUT;
    return KEEP_ALL;
}

/* Whether a layer under k keeps per-layer activation id. A_QPRE, q before
 * RoPE, is a tensor of its own only where q is not kept but it is (KEEP_OPS);
 * elsewhere RoPE rotates q in place. rstd and lse go with their outputs. */
static int layer_keeps(layer_keep k, int id) {
    switch (k) {
    case KEEP_ALL: return id != A_QPRE;
    case KEEP_INPUT: return 0;
    case KEEP_OPS: return id == A_QPRE || id == A_V || id == A_ATT || id == A_LSE || id == A_H1;
    }
    return 0;
}

/* How many of layers 0..n-1 keep per-layer activation id. */
static size_t kept_before(titan_ac_mode ac, int id, int n) {
    size_t kept = 0;
    for (int j = 0; j < n; j++) kept += (size_t)layer_keeps(keep_of(ac, j), id);
    return kept;
}

/* Whether layers 0..L-1 need a copy of per-layer activation id shared by
 * those that do not keep it (none for A_QPRE, which they alias to q). */
static int layer_shares(titan_ac_mode ac, int L, int id) {
    return kept_before(ac, id, L) < (size_t)L && id != A_QPRE;
}

/* Whether activation id is fp32 whatever the compute type (statistics,
 * losses, tables, token ids in 4-byte slots). */
static int act_is_fp32(int id) {
    return id == A_RSTD1 || id == A_RSTD2 || id == A_RSTDF || id == A_LSE || id == A_LOSSES || id == A_LSEV ||
           id == A_DNORM ||
           id == A_COS || id == A_SIN || id == A_TOKENS || id == A_TARGETS;
}

/* Whether activation id lives from a forward to its backward (one copy per
 * micro-batch slot; a per-layer id's copies of the layers that keep it)
 * rather than being scratch or a table (one copy). */
static int act_per_slot(int id) {
    return id == A_RESID || (id >= A_LAYER_FIRST && id <= A_LAYER_LAST) || id == A_XF || id == A_RSTDF ||
           id == A_LOGITS || id == A_LSEV || id == A_TOKENS || id == A_TARGETS;
}

/* Parameter tensor k of the catalog in a flat buffer of elements of esz bytes. */
static void *param_at(const titan_llama *m, void *base, size_t esz, int k) {
    return (char *)base + m->catalog[k].offset * esz;
}
/* Catalog indices of the tensors the blocks read. */
static int layer_index(int l, int k) { return 1 + l * P_PER_LAYER + k; }
static int final_norm_index(const titan_llama *m) { return 1 + m->L * P_PER_LAYER; }
static int head_index(const titan_llama *m) {
    return m->cfg.tie_embeddings ? 0 : 2 + m->L * P_PER_LAYER;
}
/* Tensor k as the ops read it (the compute copy, in dt) and its fp32 gradient. */
static void *W(const titan_llama *m, int k) {
    return param_at(m, m->params_lp ? m->params_lp : m->params, titan_dtype_size(m->dt), k);
}
static float *G(const titan_llama *m, int k) { return param_at(m, m->grads, sizeof(float), k); }

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

static void *act_slot(const titan_llama *m, int id, size_t slot) {
    return (char *)m->act[id] + slot * m->act_bytes[id];
}

/* Layers are numbered as in the whole model; a stage's activations and its
 * activation checkpointing count from its first layer. */
static layer_keep keep_of_layer(const titan_llama *m, int l) { return keep_of(m->ac, l - m->l0); }

/* Layer l's copy of per-layer activation id: the layers that keep it have
 * copies 0, 1, ... in layer order (per slot); the others the shared one. */
static void *layer_act(const titan_llama *m, int id, int l) {
    l -= m->l0;
    return layer_keeps(keep_of(m->ac, l), id) ? act_slot(m, id, kept_before(m->ac, id, l)) : m->act_shared[id];
}

static layer_acts acts_of(const titan_llama *m, int l) {
    layer_acts a = {
        .n1 = layer_act(m, A_N1, l),   .q = layer_act(m, A_Q, l),      .k = layer_act(m, A_K, l),
        .v = layer_act(m, A_V, l),     .att = layer_act(m, A_ATT, l),  .h = layer_act(m, A_H, l),
        .n2 = layer_act(m, A_N2, l),   .h1 = layer_act(m, A_H1, l),    .h3 = layer_act(m, A_H3, l),
        .sw = layer_act(m, A_SW, l),   .rstd1 = layer_act(m, A_RSTD1, l), .lse = layer_act(m, A_LSE, l),
        .rstd2 = layer_act(m, A_RSTD2, l),
    };
    a.q_pre = layer_keeps(keep_of_layer(m, l), A_QPRE) ? layer_act(m, A_QPRE, l) : a.q;
    return a;
}

/* The residual stream before layer l (l1: after the stage's last layer). */
static void *resid(const titan_llama *m, int l) { return act_slot(m, A_RESID, (size_t)(l - m->l0)); }

/* Copies of activation id: per slot where act_per_slot, the kept ones of a
 * per-layer id (its shared copy: shared_copies). */
static int is_layer_act(int id) { return id >= A_LAYER_FIRST && id <= A_LAYER_LAST; }
static size_t act_copies(const titan_llama *m, int id) {
    if (id == A_RESID) return (size_t)m->LL + 1;
    if (is_layer_act(id)) return kept_before(m->ac, id, m->LL);
    return 1;
}
static size_t shared_copies(const titan_llama *m, int id) {
    return is_layer_act(id) && layer_shares(m->ac, m->LL, id);
}

titan_status titan_llama_create(titan_llama **out, const titan_llama_config *c, const titan_backend *be, int B,
                                int T, titan_ac_mode ac, titan_dtype dt) {
    return titan_llama_create_ex(out, c, be, B, T, ac, dt, NULL);
}

titan_status titan_llama_create_ex(titan_llama **out, const titan_llama_config *c,
                                   const titan_backend *be, int B, int T, titan_ac_mode ac,
                                   titan_dtype dt, const titan_llama_options *opt) {
    *out = NULL;
    unsigned flags = opt ? opt->flags : 0;
    const titan_group *tpc = opt && opt->tp && opt->tp->size > 1 ? opt->tp : NULL;
    titan_llama_tp tp = {tpc ? tpc->size : 1, tpc ? tpc->rank : 0};
    titan_llama_pp pp = {opt && opt->pp_size > 1 ? opt->pp_size : 1, opt && opt->pp_size > 1 ? opt->pp_stage : 0};
    int slots = opt && opt->slots > 1 ? opt->slots : 1;
    const titan_group *cpc = opt && opt->cp && opt->cp->size > 1 ? opt->cp : NULL;
    int cpn = cpc ? cpc->size : 1;
    TITAN_TRY(titan_llama_config_check(c));
    TITAN_TRY(titan_llama_tp_check(c, tp.size));
    TITAN_TRY(titan_llama_pp_check(c, pp.size));
    int stage = opt ? opt->pp_stage : 0;
    if (stage != pp.stage || pp.stage < 0 || pp.stage >= pp.size)
        return titan_error(TITAN_ERR_USAGE, "model: pipeline stage %d of %d", stage, pp.size);
    if (slots > 4096) return titan_error(TITAN_ERR_USAGE, "model: %d micro-batch slots (at most 4096)", slots);
    if (B <= 0 || T <= 0)
        return titan_error(TITAN_ERR_USAGE, "model: micro-batch %d x %d: both must be > 0", B, T);
    if ((long long)B * T > (1LL << 30) || (long long)B * T * c->vocab_size > (1LL << 40))
        return titan_error(TITAN_ERR_USAGE, "model: micro-batch %d x %d: too many tokens", B, T);
    if (cpc && T % (2 * cpn) != 0)
        return titan_error(TITAN_ERR_USAGE, "model: context parallelism: a sequence of %d tokens does not split into "
                           "2 x %d equal chunks", T, cpn);
    if (ac < TITAN_AC_OP)
        return titan_error(TITAN_ERR_USAGE, "model: unknown activation checkpoint mode %d", ac);
    if (dt != TITAN_DTYPE_F32 && dt != TITAN_DTYPE_BF16)
        return titan_error(TITAN_ERR_USAGE, "model: compute type %s: only f32 and bf16 are supported",
                           titan_dtype_name(dt));

    titan_llama *m = titan_alloc(sizeof *m, "model");
    if (!m) return TITAN_ERR_NOMEM;
    m->cfg = *c;
    m->be = be;
    m->ac = ac;
    m->dt = dt;
    m->B = B;
    m->T = T / cpn;
    m->N = B * m->T;
    m->sp = tpc && opt->sequence_parallel;
    m->NR = m->sp ? m->N / tp.size : m->N;
    if (m->sp && m->N % tp.size != 0) {
        titan_llama_free(m);
        return titan_error(TITAN_ERR_USAGE, "model: sequence parallelism: %d x %d tokens do not split over %d ranks",
                           B, m->T, tp.size);
    }
    m->C = c->dim;
    m->tp = tpc;
    m->tpp = tp;
    m->NH = c->n_heads / tp.size;
    m->NKV = c->n_kv_heads / tp.size;
    m->HD = c->dim / c->n_heads;
    m->QD = m->NH * m->HD;
    m->KVD = m->NKV * m->HD;
    m->H = titan_llama_hidden_dim(c) / tp.size;
    int64_t v0, nv;
    titan_llama_tp_vocab(c, tp, &v0, &nv);
    m->v0 = (int)v0;
    m->V = (int)nv;
    m->L = c->n_layers;
    m->ppp = pp;
    titan_llama_pp_layers(c, pp, &m->l0, &m->l1);
    m->LL = m->l1 - m->l0;
    m->embed = pp.stage == 0;
    m->head = pp.stage == pp.size - 1;
    m->slots = slots;
    m->have_targets = titan_alloc((size_t)slots, "model slot flags");
    m->dlogits_scale = titan_alloc((size_t)slots * sizeof(float), "model slot scales");
    if (!m->have_targets || !m->dlogits_scale) {
        titan_llama_free(m);
        return TITAN_ERR_NOMEM;
    }
    memset(m->have_targets, 0, (size_t)slots);
    memset(m->dlogits_scale, 0, (size_t)slots * sizeof(float));

    m->n_param_tensors = titan_llama_params_local(c, tp, pp, NULL);
    m->catalog = titan_alloc((size_t)m->n_param_tensors * sizeof(titan_param), "model catalog");
    m->copy_current = titan_alloc((size_t)m->n_param_tensors, "model compute copy flags");
    if (!m->catalog || !m->copy_current) {
        titan_llama_free(m);
        return TITAN_ERR_NOMEM;
    }
    titan_llama_params_local(c, tp, pp, m->catalog);
    memset(m->copy_current, 0, (size_t)m->n_param_tensors);
    const titan_param *lastp = &m->catalog[m->n_param_tensors - 1];
    m->nparams = lastp->offset + lastp->numel;

    size_t N = (size_t)m->N, C = (size_t)m->C, QD = (size_t)m->QD, KVD = (size_t)m->KVD;
    size_t H = (size_t)m->H, V = (size_t)m->V;
    size_t *s = m->act_size;
    size_t NR = (size_t)m->NR; /* the residual stream's rows on this rank */
    s[A_RESID] = NR * C;
    s[A_N1] = N * C;
    s[A_RSTD1] = NR;
    s[A_QPRE] = N * QD;
    s[A_Q] = N * QD;
    s[A_K] = N * KVD;
    s[A_V] = N * KVD;
    s[A_ATT] = N * QD;
    s[A_LSE] = N * (size_t)m->NH; /* [B, NH, T] */
    s[A_H] = NR * C;
    s[A_N2] = N * C;
    s[A_RSTD2] = NR;
    s[A_H1] = N * H;
    s[A_H3] = N * H;
    s[A_SW] = N * H;
    size_t head = (size_t)m->head; /* the head's activations: last stage only */
    s[A_XF] = head * N * C;
    s[A_RSTDF] = head * NR;
    s[A_LOGITS] = head * N * V;
    s[A_LOSSES] = head * N;
    s[A_LSEV] = tpc ? head * N : 0;
    s[A_FULL] = m->sp ? N * C : 0;
    s[A_DNORM] = m->sp ? C : 0;
    s[A_DRESID] = NR * C;
    s[A_DN] = N * C;
    s[A_DQ] = N * QD;
    s[A_DK] = N * KVD;
    s[A_DV] = N * KVD;
    s[A_DATT] = N * QD;
    s[A_DKR] = N * KVD;
    s[A_DH1] = N * H;
    s[A_DH3] = N * H;
    s[A_DSW] = N * H;
    s[A_COS] = (size_t)m->T * (size_t)(m->HD / 2);
    s[A_SIN] = (size_t)m->T * (size_t)(m->HD / 2);
    s[A_TOKENS] = m->embed ? N : 0; /* uint32 in float-sized slots; with tp, ids in the rank's vocabulary */
    s[A_TARGETS] = head * N;
    size_t total = 0, per_slot = 0;
    for (int i = 0; i < A_COUNT; i++) {
        m->act_bytes[i] = round64(s[i] * (act_is_fp32(i) ? sizeof(float) : titan_dtype_size(dt)));
        if (act_per_slot(i)) per_slot += act_copies(m, i) * m->act_bytes[i];
        else total += act_copies(m, i) * m->act_bytes[i];
        total += shared_copies(m, i) * m->act_bytes[i];
    }
    m->slot_stride = per_slot;
    total += (size_t)slots * per_slot;
    m->arena_bytes = total;

    size_t pbytes = m->nparams * sizeof(float);
    size_t lpbytes = dt == TITAN_DTYPE_F32 ? 0 : m->nparams * titan_dtype_size(dt);
    void *(*state_alloc)(size_t) = flags & TITAN_LLAMA_RELEASABLE ? be->alloc_releasable : be->alloc;
    m->params = state_alloc(pbytes);
    m->grads = m->params ? state_alloc(pbytes) : NULL;
    m->params_lp = m->grads && lpbytes ? state_alloc(lpbytes) : NULL;
    m->arena = m->grads && (m->params_lp || !lpbytes) ? be->alloc(total) : NULL;
    if (!m->arena) {
        titan_llama_free(m);
        return titan_error(TITAN_ERR_NOMEM,
                           "model: cannot allocate %zu bytes of %s memory (parameters, gradients, "
                           "%s activations for %d x %d tokens)",
                           2 * pbytes + lpbytes + total, be->name, titan_dtype_name(dt), B, T);
    }
    /* The scratch and tables first, then slot 0's activations (slot k's
     * k x slot_stride bytes on). */
    char *p = m->arena;
    for (int i = 0; i < A_COUNT; i++) {
        if (!shared_copies(m, i)) continue;
        m->act_shared[i] = p;
        p += m->act_bytes[i];
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < A_COUNT; i++) {
            if (act_per_slot(i) != pass) continue;
            m->act[i] = m->act_base[i] = p;
            p += act_copies(m, i) * m->act_bytes[i];
        }

    /* RoPE tables for positions 0..T-1 of the whole sequence, built on the host once; under
     * context parallelism the rows of the rank's two chunks (its tokens'
     * positions, in the order it holds them). */
    size_t row = (size_t)(m->HD / 2) * sizeof(float), tb = (size_t)T * row;
    float *cs = malloc(2 * tb);
    if (!cs) {
        titan_llama_free(m);
        return titan_error(TITAN_ERR_NOMEM, "model: rope tables: cannot allocate %zu bytes", 2 * tb);
    }
    float *sn = cs + tb / sizeof(float);
    titan_rope_tables(cs, sn, T, m->HD, c->rope_theta, c->rope_scaling_factor, c->rope_low_freq_factor,
                      c->rope_high_freq_factor, c->rope_original_context);
    int chunk[2] = {0, 0}, len = cpc ? m->T / 2 : m->T;
    if (cpc) titan_layout_cp_chunks(T, cpn, cpc->rank, chunk);
    for (int j = 0; j < (cpc ? 2 : 1); j++) {
        be->to_device((char *)m->act[A_COS] + (size_t)j * len * row, (char *)cs + (size_t)chunk[j] * row, len * row);
        be->to_device((char *)m->act[A_SIN] + (size_t)j * len * row, (char *)sn + (size_t)chunk[j] * row, len * row);
    }
    free(cs);
    if (!be->host) {
        m->loss_host = titan_alloc((size_t)N * sizeof(float), "model: host copy of the losses");
        if (!m->loss_host) {
            titan_llama_free(m);
            return TITAN_ERR_NOMEM;
        }
    }
    if (cpc) {
        titan_status st = titan_attention_cp_create(&m->cpa, cpc, be, dt, B, T, m->NH, m->NKV, m->HD);
        if (st != TITAN_OK) {
            titan_llama_free(m);
            return st;
        }
    }
    if (tpc) {
        m->ids_host = titan_alloc(2 * (size_t)N * sizeof(uint32_t), "model: tensor parallel token ids");
        m->lse_host = titan_alloc((size_t)tp.size * (size_t)N * sizeof(float), "model: tensor parallel log-sum-exps");
        /* the largest collective: an [N, C] activation */
        titan_status st = !m->ids_host || !m->lse_host ? TITAN_ERR_NOMEM
                                                       : tpc->reserve(tpc->ctx, (size_t)N * C * titan_dtype_size(dt));
        if (st != TITAN_OK) {
            titan_llama_free(m);
            return st;
        }
    }
    *out = m;
    return TITAN_OK;
}

void titan_llama_free(titan_llama *m) {
    if (!m) return;
    if (m->arena) m->be->free(m->arena);
    if (m->params_lp) m->be->free(m->params_lp);
    if (m->grads) m->be->free(m->grads);
    if (m->params) m->be->free(m->params);
    titan_free(m->catalog);
    titan_free(m->copy_current);
    titan_free(m->have_targets);
    titan_free(m->dlogits_scale);
    titan_free(m->loss_host);
    titan_free(m->ids_host);
    titan_free(m->lse_host);
    titan_attention_cp_free(m->cpa);
    titan_free(m);
}

const titan_llama_config *titan_llama_get_config(const titan_llama *m) { return &m->cfg; }
titan_llama_tp titan_llama_get_tp(const titan_llama *m) { return m->tpp; }
titan_llama_pp titan_llama_get_pp(const titan_llama *m) { return m->ppp; }
int titan_llama_slots(const titan_llama *m) { return m->slots; }
void titan_llama_set_slot(titan_llama *m, int slot) {
    TITAN_ASSERT(slot >= 0 && slot < m->slots);
    m->slot = slot;
    for (int i = 0; i < A_COUNT; i++)
        if (act_per_slot(i)) m->act[i] = (char *)m->act_base[i] + (size_t)slot * m->slot_stride;
}
void *titan_llama_stage_input(titan_llama *m) { return resid(m, m->l0); }
const void *titan_llama_stage_output(const titan_llama *m) { return resid(m, m->l1); }
void *titan_llama_stage_grad(titan_llama *m) { return m->act[A_DRESID]; }
size_t titan_llama_stage_io_count(const titan_llama *m) { return (size_t)m->NR * (size_t)m->C; }
const titan_group *titan_llama_tp_group(const titan_llama *m) { return m->tp; }
const titan_param *titan_llama_catalog(const titan_llama *m, int *n) {
    *n = m->n_param_tensors;
    return m->catalog;
}
double titan_llama_take_comm_s(titan_llama *m) {
    return (m->tp ? m->tp->take_comm_s(m->tp->ctx) : 0.0) + (m->cpa ? titan_attention_cp_take_comm_s(m->cpa) : 0.0);
}
titan_status titan_llama_take_error(titan_llama *m) {
    titan_status st = m->err;
    m->err = TITAN_OK;
    return st;
}
const titan_backend *titan_llama_backend(const titan_llama *m) { return m->be; }
float *titan_llama_params_data(titan_llama *m) { return m->params; }
float *titan_llama_grads_data(titan_llama *m) { return m->grads; }
size_t titan_llama_params_count(const titan_llama *m) { return m->nparams; }
size_t titan_llama_activation_bytes(const titan_llama *m) {
    return m->arena_bytes + (m->cpa ? titan_attention_cp_bytes(m->cpa) : 0);
}
size_t titan_llama_compute_copy_bytes(const titan_llama *m) {
    return m->params_lp ? m->nparams * titan_dtype_size(m->dt) : 0;
}
void *titan_llama_compute_copy(titan_llama *m) { return m->params_lp; }
void titan_llama_set_copy_current(titan_llama *m, size_t off, size_t n, int current) {
    for (int i = 0; i < m->n_param_tensors; i++)
        if (m->catalog[i].offset >= off && m->catalog[i].offset + m->catalog[i].numel <= off + n)
            m->copy_current[i] = (unsigned char)(current && m->params_lp);
}
titan_dtype titan_llama_compute_dtype(const titan_llama *m) { return m->dt; }
static titan_status commit(titan_llama *m, void *p, size_t bytes, const char *what) {
    if (m->be->commit(p, bytes) == 0) return TITAN_OK;
    titan_error_context("model: %s", what);
    return TITAN_ERR_NOMEM;
}

titan_status titan_llama_commit_params(titan_llama *m, size_t off, size_t n) {
    titan_llama_set_copy_current(m, off, n, 0); /* FSDP's gathers write the parameters */
    TITAN_TRY(commit(m, m->params + off, n * sizeof(float), "parameters"));
    size_t e = titan_dtype_size(m->dt);
    return m->params_lp ? commit(m, (char *)m->params_lp + off * e, n * e, "compute copy") : TITAN_OK;
}

titan_status titan_llama_commit_copy(titan_llama *m, size_t off, size_t n) {
    size_t e = titan_dtype_size(m->dt);
    return m->params_lp ? commit(m, (char *)m->params_lp + off * e, n * e, "compute copy") : TITAN_OK;
}

void titan_llama_release_params(titan_llama *m, size_t off, size_t n) {
    titan_llama_set_copy_current(m, off, n, 0);
    m->be->release(m->params + off, n * sizeof(float));
    size_t e = titan_dtype_size(m->dt);
    if (m->params_lp) m->be->release((char *)m->params_lp + off * e, n * e);
}

titan_status titan_llama_commit_grads(titan_llama *m, size_t off, size_t n) {
    return commit(m, m->grads + off, n * sizeof(float), "gradients");
}

void titan_llama_release_grads(titan_llama *m, size_t off, size_t n) {
    m->be->release(m->grads + off, n * sizeof(float));
}
const float *titan_llama_logits(const titan_llama *m) {
    TITAN_ASSERT(m->dt == TITAN_DTYPE_F32 && m->head); /* others: titan_llama_logits_host */
    return m->act[A_LOGITS];
}

titan_status titan_llama_logits_host(const titan_llama *m, float *dst) {
    TITAN_ASSERT(m->head);
    size_t n = (size_t)m->N * (size_t)m->V;
    if (m->dt == TITAN_DTYPE_F32) {
        m->be->to_host(dst, m->act[A_LOGITS], n * sizeof(float));
        return TITAN_OK;
    }
    size_t esz = titan_dtype_size(m->dt);
    void *tmp = titan_alloc(n * esz, "model: host copy of the logits");
    if (!tmp) return TITAN_ERR_NOMEM;
    m->be->to_host(tmp, m->act[A_LOGITS], n * esz);
    titan_dtype_convert(dst, TITAN_DTYPE_F32, tmp, m->dt, n);
    titan_free(tmp);
    return TITAN_OK;
}

void titan_llama_set_hooks(titan_llama *m, const titan_llama_hooks *h) {
    if (h) m->hooks = *h;
    else memset(&m->hooks, 0, sizeof m->hooks);
}
int titan_llama_blocks(const titan_llama *m) { return m->L + 2; }

void titan_llama_zero_grads(titan_llama *m) { m->grads_fresh = 1; }

/* dst = resid + inp[N, IC] @ w^T, a residual branch's output projection
 * (wo, w2): one product with the add in its epilogue, rounded once. Under
 * tp the row-parallel product is partial over the rank's heads or hidden
 * units: it goes to scratch, is summed over the group, then added. dst may
 * be scratch. */
static void residual_out(titan_llama *m, void *dst, const void *inp, const void *w, const void *resid, int IC,
                         void *scratch) {
    const titan_backend *be = m->be;
    if (!m->tp) {
        be->matmul_add_forward(m->dt, dst, inp, w, resid, m->N, IC, m->C);
        return;
    }
    be->matmul_forward(m->dt, part_of(m, scratch), inp, w, m->N, IC, m->C);
    tp_reduce(m, part_of(m, scratch), scratch);
    be->add(m->dt, dst, resid, scratch, (size_t)m->NR * m->C);
}

/* One transformer block: x -> out, intermediates into a. out may hold
 * anything on entry (it is used as the projection scratch). With rerun (in
 * backward, before the layer's backward) only what the layer did not keep
 * is computed, and out, the layer's output slot, which nothing reads any
 * more, serves as scratch only: the output itself is not needed. */
static void layer_forward(titan_llama *m, int l, const void *x, void *out, int rerun) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    layer_acts a = acts_of(m, l);
    layer_keep keep = keep_of_layer(m, l);
    int N = m->N, C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
    const float *cs = m->act[A_COS], *sn = m->act[A_SIN];
#define NEED(id) (!rerun || !layer_keeps(keep, id))

    if (NEED(A_N1)) norm_forward(m, a.n1, a.rstd1, x, W_layer(m, l, P_ATTN_NORM));
    if (NEED(A_QPRE) && NEED(A_Q)) be->matmul_forward(dt, a.q_pre, a.n1, W_layer(m, l, P_WQ), N, C, QD);
    if (NEED(A_K)) be->matmul_forward(dt, a.k, a.n1, W_layer(m, l, P_WK), N, C, KVD);
    if (NEED(A_V)) be->matmul_forward(dt, a.v, a.n1, W_layer(m, l, P_WV), N, C, KVD);
    /* [N, NH*HD] is [B, T, NH, HD]: rotate (in place but for KEEP_OPS), no transposes. */
    if (NEED(A_Q)) be->rope_forward(dt, a.q, a.q_pre, cs, sn, m->B, m->T, m->NH, m->HD);
    if (NEED(A_K)) be->rope_forward(dt, a.k, a.k, cs, sn, m->B, m->T, m->NKV, m->HD);
    if (NEED(A_ATT) && m->cpa)
        keep_error(m, titan_attention_cp_forward(m->cpa, a.att, a.lse, a.q, a.k, a.v));
    else if (NEED(A_ATT))
        be->attention_forward(dt, a.att, a.lse, a.q, a.k, a.v, m->B, m->T, m->T, m->NH, m->NKV, m->HD);
    if (NEED(A_H)) residual_out(m, a.h, a.att, W_layer(m, l, P_WO), x, QD, out);

    if (NEED(A_N2)) norm_forward(m, a.n2, a.rstd2, a.h, W_layer(m, l, P_FFN_NORM));
    if (NEED(A_H1)) be->matmul_forward(dt, a.h1, a.n2, W_layer(m, l, P_W1), N, C, H);
    if (NEED(A_H3)) be->matmul_forward(dt, a.h3, a.n2, W_layer(m, l, P_W3), N, C, H);
    if (NEED(A_SW)) be->swiglu_forward(dt, a.sw, a.h1, a.h3, N, H);
    if (!rerun) residual_out(m, out, a.sw, W_layer(m, l, P_W2), a.h, H, out);
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
    m->have_targets[k] = 0;
    m->dlogits_scale[k] = 0.0f;
    if (loss) *loss = 0.0f;

    int last = m->L + 1;
    if (m->embed) {
        TITAN_TRY(HOOK(m, before_forward, 0));
        cast_block(m, 0);
        be->embedding_forward(dt, part_of(m, resid(m, 0)), tok, W_tok(m), N, C, V);
        tp_reduce(m, part_of(m, resid(m, 0)), resid(m, 0)); /* each row from the rank holding its id */
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
    norm_forward(m, m->act[A_XF], m->act[A_RSTDF], resid(m, m->L), W_final_norm(m));
    TITAN_TRY(titan_llama_take_error(m));
    be->matmul_forward(dt, m->act[A_LOGITS], m->act[A_XF], W_head(m), N, C, V);
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

/* Backward of one block. On entry dresid = dL/d(block output); on exit
 * dL/d(block input). Into the block's parameter gradients: gw is
 * TITAN_ACC_DW to add, 0 to write them. Each activation gradient's first
 * writer overwrites it (acc without TITAN_ACC_DX), later ones add. */
static void layer_backward(titan_llama *m, int l, const void *x, int gw) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    layer_acts a = acts_of(m, l);
    int N = m->N, C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
    void *dresid = m->act[A_DRESID], *dn = m->act[A_DN];
    void *dq = m->act[A_DQ], *dk = m->act[A_DK], *dv = m->act[A_DV];
    void *datt = m->act[A_DATT], *dkr = m->act[A_DKR];
    void *dh1 = m->act[A_DH1], *dh3 = m->act[A_DH3], *dsw = m->act[A_DSW];
    const float *cs = m->act[A_COS], *sn = m->act[A_SIN];
    const int add = TITAN_ACC_DX;

    /* out = h + w2(swiglu(w1 n2, w3 n2)), n2 = rmsnorm(h) */
    be->matmul_backward(dt, gw, dsw, G_layer(m, l, P_W2), whole_dresid(m), a.sw, W_layer(m, l, P_W2), N, H,
                        C);
    be->swiglu_backward(dt, 0, dh1, dh3, dsw, a.h1, a.h3, N, H);
    be->matmul_backward(dt, gw, dn, G_layer(m, l, P_W1), dh1, a.n2, W_layer(m, l, P_W1), N, C, H);
    be->matmul_backward(dt, add | gw, dn, G_layer(m, l, P_W3), dh3, a.n2, W_layer(m, l, P_W3), N,
                        C, H);
    /* column-parallel w1, w3: partial over the rank's hidden units */
    void *dn_rows = tp_reduce_grad(m, dn);
    /* dresid already holds the residual path's share: the norm adds the rest. */
    norm_backward(m, add | gw, dresid, G_layer(m, l, P_FFN_NORM), dn_rows, a.h, W_layer(m, l, P_FFN_NORM),
                  a.rstd2);

    /* h = x + wo(attention(rope(wq n1), rope(wk n1), wv n1)), n1 = rmsnorm(x) */
    be->matmul_backward(dt, gw, datt, G_layer(m, l, P_WO), whole_dresid(m), a.att, W_layer(m, l, P_WO), N,
                        QD, C);
    if (m->cpa)
        keep_error(m, titan_attention_cp_backward(m->cpa, dq, dk, dv, datt, a.att, a.lse, a.q, a.k, a.v));
    else
        be->attention_backward(dt, 0, dq, dk, dv, datt, a.att, a.lse, a.q, a.k, a.v, m->B, m->T, m->T, m->NH,
                               m->NKV, m->HD);
    /* datt is free again: it takes the un-rotated dq. */
    be->rope_backward(dt, 0, datt, dq, cs, sn, m->B, m->T, m->NH, m->HD);
    be->rope_backward(dt, 0, dkr, dk, cs, sn, m->B, m->T, m->NKV, m->HD);
    be->matmul_backward(dt, gw, dn, G_layer(m, l, P_WQ), datt, a.n1, W_layer(m, l, P_WQ), N, C,
                        QD);
    be->matmul_backward(dt, add | gw, dn, G_layer(m, l, P_WK), dkr, a.n1, W_layer(m, l, P_WK), N,
                        C, KVD);
    be->matmul_backward(dt, add | gw, dn, G_layer(m, l, P_WV), dv, a.n1, W_layer(m, l, P_WV), N, C,
                        KVD);
    dn_rows = tp_reduce_grad(m, dn);
    norm_backward(m, add | gw, dresid, G_layer(m, l, P_ATTN_NORM), dn_rows, x, W_layer(m, l, P_ATTN_NORM),
                  a.rstd1);
}

void titan_llama_backward(titan_llama *m, float loss_scale) {
    int k = m->slot;
    TITAN_ASSERT(m->have_targets[k]); /* backward needs a forward with targets */
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    int N = m->N, C = m->C, V = m->V;
    void *logits = m->act[A_LOGITS], *dresid = m->act[A_DRESID], *dxf = m->act[A_DN];
    /* The first backward after zero_grads writes every parameter gradient
     * (each has one writer, but for tied embeddings: the head writes,
     * the embedding adds); later ones add. */
    int gw = m->grads_fresh ? 0 : TITAN_ACC_DW;
    m->grads_fresh = 0;
    /* FSDP may have re-gathered the parameters since forward: cast again. */
    int recast = m->hooks.regathers;
    m->have_targets[k] = 0; /* the logits are gone */

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
        be->matmul_backward(dt, gw, dxf, G_head(m), logits, m->act[A_XF], W_head(m), N, C, V);
        /* column-parallel head: partial over the rank's vocabulary */
        void *dxf_rows = tp_reduce_grad(m, dxf);
        norm_backward(m, gw, dresid, G_final_norm(m), dxf_rows, resid(m, m->L), W_final_norm(m),
                      m->act[A_RSTDF]);
        (void)HOOK(m, after_backward, m->L + 1);
    } /* else dresid holds d(loss)/d(stage output), from the next stage */

    for (int l = m->l1 - 1; l >= m->l0; l--) {
        (void)HOOK(m, before_backward, l + 1);
        if (recast) cast_block(m, l + 1);
        /* Recompute what the layer did not keep from its saved input; its
         * output slot is no longer needed, so it serves as scratch. */
        if (keep_of_layer(m, l) != KEEP_ALL) layer_forward(m, l, resid(m, l), resid(m, l + 1), 1);
        layer_backward(m, l, resid(m, l), gw);
        (void)HOOK(m, after_backward, l + 1);
    }
    if (!m->embed) return; /* dresid: d(loss)/d(stage input), for the previous stage */
    (void)HOOK(m, before_backward, 0);
    be->embedding_backward(dt, m->cfg.tie_embeddings ? TITAN_ACC_DW : gw, G_tok(m), whole_dresid(m),
                           m->act[A_TOKENS], N, C, V);
    (void)HOOK(m, after_backward, 0);
}
