/* llama_impl.h - the model's insides, shared by llama.c (forward and
 * backward) and llama_create.c (the buffers and their plan, the accessors):
 * the parameter and activation tables, the model's struct, and the
 * arithmetic of what each layer keeps under activation checkpointing. */
#ifndef TITAN_MODEL_LLAMA_IMPL_H
#define TITAN_MODEL_LLAMA_IMPL_H

#include "model/attention_cp.h"
#include "model/llama.h"

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

/* The split backward's stash of a layer (per slot, per local layer): the
 * gradients of the matmuls' outputs, and their inputs where the layer does
 * not keep them (activation checkpointing recomputes those into scratch,
 * which the next layer's recomputation overwrites); then the gradient of
 * the stage input for the embedding (the first stage). */
enum { WS_DRES_OUT, WS_DH1, WS_DH3, WS_DRES_MID, WS_DQ, WS_DK, WS_DV, WS_N1, WS_ATT, WS_N2, WS_SW, WS_EMBED,
       WS_COUNT };

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
    /* Several stages a rank (virtual stages): the rank's stages, nv of
     * them; the fields above are those of stage vstage
     * (titan_llama_set_stage). Activations are planned for the largest
     * (LLmax layers), with the embedding's and head's where any stage has
     * them, so every slot serves any of the rank's stages. */
    int nv, vstage, LLmax, any_embed, any_head;
    struct vstage {
        int l0, l1, embed, head;
        /* 1 after titan_llama_zero_grads until the stage's next backward,
         * which then writes its gradients (=) instead of adding: no zero
         * fill, no read. */
        int grads_fresh;
        /* The same for the norms' weight gradients, which a split
         * backward computes in its input part (titan_llama_backward_input). */
        int norms_fresh;
    } *vs;
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
    /* async tensor parallelism: the sp collectives run as collective
     * matmuls (model/group.h's all_gather_each, reduce_scatter_each) */
    int overlap;
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
    /* 1 after titan_llama_zero_grads until the stage's next backward
     * (vs[].grads_fresh), which then writes the gradients (=) instead of
     * adding: no zero fill, no read. */
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
    /* Float8 training (titan_llama_set_float8): the recipe, and per linear
     * (layer l's k-th at l x FP8_PER_LAYER + k, in enum fp8_linear order,
     * the output at L x FP8_PER_LAYER) 1 when it runs in float8; NULL: none.
     * fp8_gemms: GEMMs run from float8 operands since the last take. */
    titan_fp8_recipe fp8;
    unsigned char *fp8_linear;
    int64_t fp8_gemms;
    /* Under tensor parallelism: per cast, fp8_amax_cap amaxes (backend
     * memory), and the group's on the host (tp x fp8_amax_cap), for the
     * casts that scale from the whole tensor (titan_llama_fp8_tp). */
    float *fp8_amax_dev, *fp8_amax_host;
    size_t fp8_amax_cap;
    /* FSDP's float8 all-gather: per linear, the whole weight's amax
     * (backend memory) while fp8_wamax_on (titan_llama_set_fp8_weight_amax) */
    float *fp8_wamax;
    int fp8_wamax_on;
    /* Tensorwise w casts: per linear, the whole weight's amax the forward
     * took (backend memory), which the backward's cast of w^T scales from:
     * w is the same tensor between them, so one amax pass (and under tp one
     * group reduction) serves both. NULL where the recipe's w casts are
     * rowwise. */
    float *fp8_wamax_fwd;
    /* Tensorwise x casts: per micro-batch slot, per layer and input (n1 for
     * wq, wk, wv; att for wo; n2 for w1, w3; sw for w2; then the output's
     * x), the amax (the whole tensor's under tp) the forward took, which
     * grad_w's cast of x^T scales from: the same activation, so one amax
     * pass serves both. NULL where x's casts are not both tensorwise. */
    float *fp8_xamax;
    /* 0 under TITAN_FP8_REUSE=0: every float8 cast takes its own amax and
     * casts its own operand (no share flags, no kept amaxes): the bytes
     * are the same, to check the reuse against */
    int fp8_reuse;
    /* Split backward (titan_llama_options.split_backward): per slot, what
     * the weight part needs from the input part (ws_* below), wstash_stride
     * bytes a slot; w_pending[slot]: 1 from a slot's input part to its
     * weight part. NULL without. */
    char *wstash;
    size_t wstash_stride, ws_bytes[WS_COUNT];
    unsigned char *w_pending;
};

/* The linears of a layer, in the order of fp8_linear. */
enum { FP8_WQ, FP8_WK, FP8_WV, FP8_WO, FP8_W1, FP8_W2, FP8_W3, FP8_PER_LAYER };
/* The float8 linears' distinct inputs in a layer: n1, att, n2, sw. */
enum { FP8_INPUTS = 4 };

/* llama_fp8.c: the recipe linear (l, k) (l = L: the output) runs with,
 * NULL when it runs in the compute dtype. Casts [c0, c1) are those of the
 * GEMMs about to run, on the operands x [N, IC], w [OC, IC], dy [N, OC]
 * (dy NULL in the forward). The weight's casts scale from the amax FSDP's
 * float8 all-gather gave (titan_llama_set_fp8_weight_amax), else
 * (tensorwise) from the amax the forward's cast took (fp8_wamax_fwd); under tensor
 * parallelism each other cast whose amax reduces across the sharded
 * dimension gets the whole tensor's, reduced over the tp group. Where a
 * cast is given an amax the recipe is a copy in *buf. A group failure is
 * kept in m->err. xshare: x's cast in this call (X_OUT in the forward,
 * X_GW in the backward) is shared with the neighbouring calls
 * (titan_fp8_share); a USE or LAST takes the held cast and needs no amax. */
const titan_fp8_recipe *titan_llama_fp8_recipe(titan_llama *m, titan_fp8_recipe *buf, int l, int k, int c0, int c1,
                                               const void *x, const void *w, const void *dy, int IC, int OC,
                                               int xshare);
void titan_llama_fp8_free(titan_llama *m);

#define HOOK(m, which, b) ((m)->hooks.which ? (m)->hooks.which((m)->hooks.ctx, (b)) : TITAN_OK)

static inline size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static inline layer_keep keep_of(titan_ac_mode ac, int l) {
    if (ac == TITAN_AC_OP) return KEEP_OPS;
    if (ac >= 1 && (l + 1) % ac == 0) return KEEP_INPUT;
    return KEEP_ALL;
}

/* Whether a layer under k keeps per-layer activation id. A_QPRE, q before
 * RoPE, is a tensor of its own only where q is not kept but it is (KEEP_OPS);
 * elsewhere RoPE rotates q in place. rstd and lse go with their outputs. */
static inline int layer_keeps(layer_keep k, int id) {
    switch (k) {
    case KEEP_ALL: return id != A_QPRE;
    case KEEP_INPUT: return 0;
    case KEEP_OPS: return id == A_QPRE || id == A_V || id == A_ATT || id == A_LSE || id == A_H1;
    }
    return 0;
}

/* The activation a stash input copies (0 for the gradients). */
static inline int ws_input_act(int id) {
    switch (id) {
    case WS_N1: return A_N1;
    case WS_ATT: return A_ATT;
    case WS_N2: return A_N2;
    case WS_SW: return A_SW;
    }
    return 0;
}
/* Whether local layer j's stash holds entry id (not WS_EMBED). */
static inline int ws_has(titan_ac_mode ac, int id, int j) {
    int a = ws_input_act(id);
    return !a || !layer_keeps(keep_of(ac, j), a);
}

/* How many of layers 0..n-1 keep per-layer activation id. */
static inline size_t kept_before(titan_ac_mode ac, int id, int n) {
    size_t kept = 0;
    for (int j = 0; j < n; j++) kept += (size_t)layer_keeps(keep_of(ac, j), id);
    return kept;
}

/* Whether layers 0..L-1 need a copy of per-layer activation id shared by
 * those that do not keep it (none for A_QPRE, which they alias to q). */
static inline int layer_shares(titan_ac_mode ac, int L, int id) {
    return kept_before(ac, id, L) < (size_t)L && id != A_QPRE;
}

/* Whether activation id is fp32 whatever the compute type (statistics,
 * losses, tables, token ids in 4-byte slots). */
static inline int act_is_fp32(int id) {
    return id == A_RSTD1 || id == A_RSTD2 || id == A_RSTDF || id == A_LSE || id == A_LOSSES || id == A_LSEV ||
           id == A_DNORM ||
           id == A_COS || id == A_SIN || id == A_TOKENS || id == A_TARGETS;
}

/* Whether activation id lives from a forward to its backward (one copy per
 * micro-batch slot; a per-layer id's copies of the layers that keep it)
 * rather than being scratch or a table (one copy). */
static inline int act_per_slot(int id) {
    return id == A_RESID || (id >= A_LAYER_FIRST && id <= A_LAYER_LAST) || id == A_XF || id == A_RSTDF ||
           id == A_LOGITS || id == A_LSEV || id == A_TOKENS || id == A_TARGETS;
}

/* Parameter tensor k of the catalog in a flat buffer of elements of esz bytes. */
static inline void *param_at(const titan_llama *m, void *base, size_t esz, int k) {
    return (char *)base + m->catalog[k].offset * esz;
}
/* Catalog indices of the tensors the blocks read. */
static inline int layer_index(int l, int k) { return 1 + l * P_PER_LAYER + k; }
static inline int final_norm_index(const titan_llama *m) { return 1 + m->L * P_PER_LAYER; }
static inline int head_index(const titan_llama *m) {
    return m->cfg.tie_embeddings ? 0 : 2 + m->L * P_PER_LAYER;
}
/* Tensor k as the ops read it (the compute copy, in dt) and its fp32 gradient. */
static inline void *W(const titan_llama *m, int k) {
    return param_at(m, m->params_lp ? m->params_lp : m->params, titan_dtype_size(m->dt), k);
}
static inline float *G(const titan_llama *m, int k) { return param_at(m, m->grads, sizeof(float), k); }

static inline void *act_slot(const titan_llama *m, int id, size_t slot) {
    return (char *)m->act[id] + slot * m->act_bytes[id];
}

/* Layers are numbered as in the whole model; a stage's activations and its
 * activation checkpointing count from its first layer. */
static inline layer_keep keep_of_layer(const titan_llama *m, int l) { return keep_of(m->ac, l - m->l0); }

/* Layer l's copy of per-layer activation id: the layers that keep it have
 * copies 0, 1, ... in layer order (per slot); the others the shared one. */
static inline void *layer_act(const titan_llama *m, int id, int l) {
    l -= m->l0;
    return layer_keeps(keep_of(m->ac, l), id) ? act_slot(m, id, kept_before(m->ac, id, l)) : m->act_shared[id];
}

static inline layer_acts acts_of(const titan_llama *m, int l) {
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
static inline void *resid(const titan_llama *m, int l) { return act_slot(m, A_RESID, (size_t)(l - m->l0)); }

/* Copies of activation id: per slot where act_per_slot, the kept ones of a
 * per-layer id (its shared copy: shared_copies). */
static inline int is_layer_act(int id) { return id >= A_LAYER_FIRST && id <= A_LAYER_LAST; }
static inline size_t act_copies(const titan_llama *m, int id) {
    if (id == A_RESID) return (size_t)m->LLmax + 1;
    if (is_layer_act(id)) return kept_before(m->ac, id, m->LLmax);
    return 1;
}
static inline size_t shared_copies(const titan_llama *m, int id) {
    return is_layer_act(id) && layer_shares(m->ac, m->LLmax, id);
}


#endif
