/* llama.c - the Llama 3 model on a backend: buffers, forward, explicit backward.
 *
 * Three allocations, llm.c style: parameters and gradients (flat, catalog
 * order) and one activation arena carved by a table of sizes. With
 * TITAN_AC_FULL the per-layer intermediates exist once and are recomputed
 * layer by layer in backward from the saved layer inputs; the ops are
 * deterministic, so the recomputed values and the gradients are bitwise the
 * same as with TITAN_AC_NONE. */
#include "model/llama.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

/* Per-layer parameter slots, in catalog order. */
enum { P_ATTN_NORM, P_WQ, P_WK, P_WV, P_WO, P_FFN_NORM, P_W1, P_W2, P_W3, P_PER_LAYER };

/* The activation table. Per-layer tensors are repeated n_layers times
 * (TITAN_AC_NONE) or once (TITAN_AC_FULL). */
enum {
    A_RESID,   /* (L+1) x [N,C]: each layer's input, then the last layer's output */
    /* per layer */
    A_N1, A_RSTD1, A_Q, A_K, A_V, A_ATT, A_LSE, A_H, A_N2, A_RSTD2, A_H1, A_H3, A_SW,
    /* head */
    A_XF, A_RSTDF, A_LOGITS, A_LOSSES,
    /* backward scratch */
    A_DRESID, A_DN, A_DQ, A_DK, A_DV, A_DATT, A_DKR, A_DH1, A_DH3, A_DSW,
    /* inputs and tables */
    A_COS, A_SIN, A_TOKENS, A_TARGETS,
    A_COUNT
};
#define A_LAYER_FIRST A_N1
#define A_LAYER_LAST A_SW

typedef struct {
    float *n1, *rstd1, *q, *k, *v, *att, *lse, *h, *n2, *rstd2, *h1, *h3, *sw;
} layer_acts;

struct titan_llama {
    titan_llama_config cfg;
    const titan_backend *be;
    titan_ac_mode ac;
    int B, T, N, C, NH, NKV, HD, QD, KVD, H, V, L;
    size_t nparams;
    float *params, *grads;
    float *arena;
    size_t arena_floats;
    size_t act_size[A_COUNT]; /* floats per copy */
    float *act[A_COUNT];
    int n_param_tensors;
    titan_param *catalog;
    int have_targets;
    titan_llama_hooks hooks;
    /* Host copy of the per-token losses when backend memory is not host
     * memory (NULL on the CPU backend, whose losses are read in place). */
    float *loss_host;
};

#define HOOK(m, which, b) ((m)->hooks.which ? (m)->hooks.which((m)->hooks.ctx, (b)) : TITAN_OK)

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Parameter (or gradient) tensor pointers. */
static float *tok_emb(const titan_llama *m, float *base) { return base + m->catalog[0].offset; }
static float *layer_param(const titan_llama *m, float *base, int l, int k) {
    return base + m->catalog[1 + l * P_PER_LAYER + k].offset;
}
static float *final_norm(const titan_llama *m, float *base) {
    return base + m->catalog[1 + m->L * P_PER_LAYER].offset;
}
static float *head(const titan_llama *m, float *base) {
    return m->cfg.tie_embeddings ? tok_emb(m, base)
                                 : base + m->catalog[2 + m->L * P_PER_LAYER].offset;
}

static layer_acts acts_of(const titan_llama *m, int l) {
    int slot = m->ac == TITAN_AC_FULL ? 0 : l;
#define SLOT(id) (m->act[id] + (size_t)slot * m->act_size[id])
    layer_acts a = {SLOT(A_N1), SLOT(A_RSTD1), SLOT(A_Q),   SLOT(A_K),     SLOT(A_V),
                    SLOT(A_ATT), SLOT(A_LSE),  SLOT(A_H),   SLOT(A_N2),    SLOT(A_RSTD2),
                    SLOT(A_H1), SLOT(A_H3),    SLOT(A_SW)};
#undef SLOT
    return a;
}

static float *resid(const titan_llama *m, int l) {
    return m->act[A_RESID] + (size_t)l * m->act_size[A_RESID];
}

titan_status titan_llama_create(titan_llama **out, const titan_llama_config *c,
                                const titan_backend *be, int B, int T, titan_ac_mode ac) {
    *out = NULL;
    TITAN_TRY(titan_llama_config_check(c));
    if (B <= 0 || T <= 0)
        return titan_error(TITAN_ERR_USAGE, "model: micro-batch %d x %d: both must be > 0", B, T);
    if ((long long)B * T > (1LL << 30) || (long long)B * T * c->vocab_size > (1LL << 40))
        return titan_error(TITAN_ERR_USAGE, "model: micro-batch %d x %d: too many tokens", B, T);
    if (ac != TITAN_AC_NONE && ac != TITAN_AC_FULL)
        return titan_error(TITAN_ERR_USAGE, "model: unknown activation checkpoint mode %d", ac);

    titan_llama *m = titan_alloc(sizeof *m, "model");
    if (!m) return TITAN_ERR_NOMEM;
    m->cfg = *c;
    m->be = be;
    m->ac = ac;
    m->B = B;
    m->T = T;
    m->N = B * T;
    m->C = c->dim;
    m->NH = c->n_heads;
    m->NKV = c->n_kv_heads;
    m->HD = c->dim / c->n_heads;
    m->QD = m->NH * m->HD;
    m->KVD = m->NKV * m->HD;
    m->H = titan_llama_hidden_dim(c);
    m->V = c->vocab_size;
    m->L = c->n_layers;

    m->n_param_tensors = titan_llama_params(c, NULL);
    m->catalog = titan_alloc((size_t)m->n_param_tensors * sizeof(titan_param), "model catalog");
    if (!m->catalog) {
        titan_llama_free(m);
        return TITAN_ERR_NOMEM;
    }
    titan_llama_params(c, m->catalog);
    m->nparams = titan_llama_num_params(c);

    size_t N = (size_t)m->N, C = (size_t)m->C, QD = (size_t)m->QD, KVD = (size_t)m->KVD;
    size_t H = (size_t)m->H, V = (size_t)m->V;
    size_t *s = m->act_size;
    s[A_RESID] = N * C;
    s[A_N1] = N * C;
    s[A_RSTD1] = N;
    s[A_Q] = N * QD;
    s[A_K] = N * KVD;
    s[A_V] = N * KVD;
    s[A_ATT] = N * QD;
    s[A_LSE] = N * (size_t)m->NH; /* [B, NH, T] */
    s[A_H] = N * C;
    s[A_N2] = N * C;
    s[A_RSTD2] = N;
    s[A_H1] = N * H;
    s[A_H3] = N * H;
    s[A_SW] = N * H;
    s[A_XF] = N * C;
    s[A_RSTDF] = N;
    s[A_LOGITS] = N * V;
    s[A_LOSSES] = N;
    s[A_DRESID] = N * C;
    s[A_DN] = N * C;
    s[A_DQ] = N * QD;
    s[A_DK] = N * KVD;
    s[A_DV] = N * KVD;
    s[A_DATT] = N * QD;
    s[A_DKR] = N * KVD;
    s[A_DH1] = N * H;
    s[A_DH3] = N * H;
    s[A_DSW] = N * H;
    s[A_COS] = (size_t)T * (size_t)(m->HD / 2);
    s[A_SIN] = (size_t)T * (size_t)(m->HD / 2);
    s[A_TOKENS] = N; /* uint32 in float-sized slots */
    s[A_TARGETS] = N;
    for (int i = 0; i < A_COUNT; i++) s[i] = round16(s[i]);

    size_t total = 0;
    for (int i = 0; i < A_COUNT; i++) {
        size_t copies = 1;
        if (i == A_RESID) copies = (size_t)m->L + 1;
        else if (i >= A_LAYER_FIRST && i <= A_LAYER_LAST && ac == TITAN_AC_NONE)
            copies = (size_t)m->L;
        total += copies * s[i];
    }
    m->arena_floats = total;

    size_t pbytes = m->nparams * sizeof(float);
    m->params = be->alloc(pbytes);
    m->grads = m->params ? be->alloc(pbytes) : NULL;
    m->arena = m->grads ? be->alloc(total * sizeof(float)) : NULL;
    if (!m->arena) {
        titan_llama_free(m);
        return titan_error(TITAN_ERR_NOMEM,
                           "model: cannot allocate %zu bytes of %s memory (parameters, gradients, "
                           "activations for %d x %d tokens)",
                           2 * pbytes + total * sizeof(float), be->name, B, T);
    }
    float *p = m->arena;
    for (int i = 0; i < A_COUNT; i++) {
        size_t copies = 1;
        if (i == A_RESID) copies = (size_t)m->L + 1;
        else if (i >= A_LAYER_FIRST && i <= A_LAYER_LAST && ac == TITAN_AC_NONE)
            copies = (size_t)m->L;
        m->act[i] = p;
        p += copies * s[i];
    }

    /* RoPE tables for positions 0..T-1, built on the host once. */
    size_t tb = (size_t)T * (size_t)(m->HD / 2) * sizeof(float);
    float *cs = malloc(2 * tb);
    if (!cs) {
        titan_llama_free(m);
        return titan_error(TITAN_ERR_NOMEM, "model: rope tables: cannot allocate %zu bytes", 2 * tb);
    }
    titan_rope_tables(cs, cs + tb / sizeof(float), T, m->HD, c->rope_theta, c->rope_scaling_factor,
                      c->rope_low_freq_factor, c->rope_high_freq_factor, c->rope_original_context);
    be->to_device(m->act[A_COS], cs, tb);
    be->to_device(m->act[A_SIN], cs + tb / sizeof(float), tb);
    free(cs);
    if (be != titan_backend_cpu()) {
        m->loss_host = titan_alloc((size_t)N * sizeof(float), "model: host copy of the losses");
        if (!m->loss_host) {
            titan_llama_free(m);
            return TITAN_ERR_NOMEM;
        }
    }
    *out = m;
    return TITAN_OK;
}

void titan_llama_free(titan_llama *m) {
    if (!m) return;
    if (m->arena) m->be->free(m->arena);
    if (m->grads) m->be->free(m->grads);
    if (m->params) m->be->free(m->params);
    titan_free(m->catalog);
    titan_free(m->loss_host);
    titan_free(m);
}

const titan_llama_config *titan_llama_get_config(const titan_llama *m) { return &m->cfg; }
const titan_backend *titan_llama_backend(const titan_llama *m) { return m->be; }
float *titan_llama_params_data(titan_llama *m) { return m->params; }
float *titan_llama_grads_data(titan_llama *m) { return m->grads; }
size_t titan_llama_params_count(const titan_llama *m) { return m->nparams; }
size_t titan_llama_activation_bytes(const titan_llama *m) {
    return m->arena_floats * sizeof(float);
}
const float *titan_llama_logits(const titan_llama *m) { return m->act[A_LOGITS]; }

void titan_llama_set_hooks(titan_llama *m, const titan_llama_hooks *h) {
    if (h) m->hooks = *h;
    else memset(&m->hooks, 0, sizeof m->hooks);
}
int titan_llama_blocks(const titan_llama *m) { return m->L + 2; }

void titan_llama_zero_grads(titan_llama *m) {
    m->be->zero(m->grads, m->nparams * sizeof(float));
}

/* One transformer block: x -> out, intermediates into a. out may hold
 * anything on entry (it is used as the projection scratch). */
static void layer_forward(titan_llama *m, int l, const float *x, float *out) {
    const titan_backend *be = m->be;
    layer_acts a = acts_of(m, l);
    int N = m->N, C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
    float *P = m->params;
    const float *cs = m->act[A_COS], *sn = m->act[A_SIN];

    be->rmsnorm_forward(a.n1, a.rstd1, x, layer_param(m, P, l, P_ATTN_NORM), N, C,
                        m->cfg.norm_eps);
    be->matmul_forward(a.q, a.n1, layer_param(m, P, l, P_WQ), N, C, QD);
    be->matmul_forward(a.k, a.n1, layer_param(m, P, l, P_WK), N, C, KVD);
    be->matmul_forward(a.v, a.n1, layer_param(m, P, l, P_WV), N, C, KVD);
    /* [N, NH*HD] is [B, T, NH, HD]: rotate in place, no transposes. */
    be->rope_forward(a.q, a.q, cs, sn, m->B, m->T, m->NH, m->HD);
    be->rope_forward(a.k, a.k, cs, sn, m->B, m->T, m->NKV, m->HD);
    be->attention_forward(a.att, a.lse, a.q, a.k, a.v, m->B, m->T, m->NH, m->NKV, m->HD);
    be->matmul_forward(out, a.att, layer_param(m, P, l, P_WO), N, QD, C);
    be->add(a.h, x, out, (size_t)N * C);

    be->rmsnorm_forward(a.n2, a.rstd2, a.h, layer_param(m, P, l, P_FFN_NORM), N, C,
                        m->cfg.norm_eps);
    be->matmul_forward(a.h1, a.n2, layer_param(m, P, l, P_W1), N, C, H);
    be->matmul_forward(a.h3, a.n2, layer_param(m, P, l, P_W3), N, C, H);
    be->swiglu_forward(a.sw, a.h1, a.h3, N, H);
    be->matmul_forward(out, a.sw, layer_param(m, P, l, P_W2), N, H, C);
    be->add(out, a.h, out, (size_t)N * C);
}

titan_status titan_llama_forward(titan_llama *m, const uint32_t *tokens, const uint32_t *targets,
                                 float *loss) {
    const titan_backend *be = m->be;
    int N = m->N, C = m->C, V = m->V;
    /* Out-of-range ids would read outside the embedding table. */
    for (int i = 0; i < N; i++) {
        if (tokens[i] >= (uint32_t)V)
            return titan_error(TITAN_ERR_FORMAT, "model input: token %d: id %u >= vocab size %d",
                               i, tokens[i], V);
        if (targets && targets[i] >= (uint32_t)V)
            return titan_error(TITAN_ERR_FORMAT, "model input: target %d: id %u >= vocab size %d",
                               i, targets[i], V);
    }
    uint32_t *tok = (uint32_t *)m->act[A_TOKENS], *tgt = (uint32_t *)m->act[A_TARGETS];
    be->to_device(tok, tokens, (size_t)N * sizeof(uint32_t));
    if (targets) be->to_device(tgt, targets, (size_t)N * sizeof(uint32_t));
    m->have_targets = 0;

    int last = m->L + 1;
    TITAN_TRY(HOOK(m, before_forward, 0));
    be->embedding_forward(resid(m, 0), tok, tok_emb(m, m->params), N, C);
    TITAN_TRY(HOOK(m, after_forward, 0));
    for (int l = 0; l < m->L; l++) {
        TITAN_TRY(HOOK(m, before_forward, l + 1));
        layer_forward(m, l, resid(m, l), resid(m, l + 1));
        TITAN_TRY(HOOK(m, after_forward, l + 1));
    }
    TITAN_TRY(HOOK(m, before_forward, last));
    be->rmsnorm_forward(m->act[A_XF], m->act[A_RSTDF], resid(m, m->L), final_norm(m, m->params),
                        N, C, m->cfg.norm_eps);
    be->matmul_forward(m->act[A_LOGITS], m->act[A_XF], head(m, m->params), N, C, V);
    TITAN_TRY(HOOK(m, after_forward, last));

    if (!targets) return TITAN_OK;
    /* Loss only; backward recomputes the softmax into dlogits in place, so
     * the logits stay readable after forward and need no second buffer. */
    be->cross_entropy(m->act[A_LOSSES], NULL, m->act[A_LOGITS], tgt, N, V, 0.0f);
    /* The host adds the losses (in order, in double): read in place on the
     * CPU, copied over from a device (the copy waits for the forward). */
    const float *losses = m->act[A_LOSSES];
    if (m->loss_host) {
        be->to_host(m->loss_host, m->act[A_LOSSES], (size_t)N * sizeof(float));
        losses = m->loss_host;
    }
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    if (loss) *loss = (float)(sum / N);
    m->have_targets = 1;
    return TITAN_OK;
}

/* Backward of one block. On entry dresid = dL/d(block output); on exit
 * dL/d(block input). Adds into the block's parameter gradients. */
static void layer_backward(titan_llama *m, int l, const float *x) {
    const titan_backend *be = m->be;
    layer_acts a = acts_of(m, l);
    int N = m->N, C = m->C, QD = m->QD, KVD = m->KVD, H = m->H;
    float *P = m->params, *G = m->grads;
    float *dresid = m->act[A_DRESID], *dn = m->act[A_DN];
    float *dq = m->act[A_DQ], *dk = m->act[A_DK], *dv = m->act[A_DV];
    float *datt = m->act[A_DATT], *dkr = m->act[A_DKR];
    float *dh1 = m->act[A_DH1], *dh3 = m->act[A_DH3], *dsw = m->act[A_DSW];
    const float *cs = m->act[A_COS], *sn = m->act[A_SIN];
    size_t f = sizeof(float);

    /* out = h + w2(swiglu(w1 n2, w3 n2)), n2 = rmsnorm(h) */
    be->zero(dsw, (size_t)N * H * f);
    be->matmul_backward(dsw, layer_param(m, G, l, P_W2), dresid, a.sw, layer_param(m, P, l, P_W2),
                        N, H, C);
    be->zero(dh1, (size_t)N * H * f);
    be->zero(dh3, (size_t)N * H * f);
    be->swiglu_backward(dh1, dh3, dsw, a.h1, a.h3, N, H);
    be->zero(dn, (size_t)N * C * f);
    be->matmul_backward(dn, layer_param(m, G, l, P_W1), dh1, a.n2, layer_param(m, P, l, P_W1), N,
                        C, H);
    be->matmul_backward(dn, layer_param(m, G, l, P_W3), dh3, a.n2, layer_param(m, P, l, P_W3), N,
                        C, H);
    /* dresid already holds the residual path's share: the norm adds the rest. */
    be->rmsnorm_backward(dresid, layer_param(m, G, l, P_FFN_NORM), dn, a.h,
                         layer_param(m, P, l, P_FFN_NORM), a.rstd2, N, C);

    /* h = x + wo(attention(rope(wq n1), rope(wk n1), wv n1)), n1 = rmsnorm(x) */
    be->zero(datt, (size_t)N * QD * f);
    be->matmul_backward(datt, layer_param(m, G, l, P_WO), dresid, a.att, layer_param(m, P, l, P_WO),
                        N, QD, C);
    be->zero(dq, (size_t)N * QD * f);
    be->zero(dk, (size_t)N * KVD * f);
    be->zero(dv, (size_t)N * KVD * f);
    be->attention_backward(dq, dk, dv, datt, a.att, a.lse, a.q, a.k, a.v, m->B, m->T, m->NH,
                           m->NKV, m->HD);
    /* datt is free again: it takes the un-rotated dq. */
    be->zero(datt, (size_t)N * QD * f);
    be->rope_backward(datt, dq, cs, sn, m->B, m->T, m->NH, m->HD);
    be->zero(dkr, (size_t)N * KVD * f);
    be->rope_backward(dkr, dk, cs, sn, m->B, m->T, m->NKV, m->HD);
    be->zero(dn, (size_t)N * C * f);
    be->matmul_backward(dn, layer_param(m, G, l, P_WQ), datt, a.n1, layer_param(m, P, l, P_WQ), N,
                        C, QD);
    be->matmul_backward(dn, layer_param(m, G, l, P_WK), dkr, a.n1, layer_param(m, P, l, P_WK), N,
                        C, KVD);
    be->matmul_backward(dn, layer_param(m, G, l, P_WV), dv, a.n1, layer_param(m, P, l, P_WV), N,
                        C, KVD);
    be->rmsnorm_backward(dresid, layer_param(m, G, l, P_ATTN_NORM), dn, x,
                         layer_param(m, P, l, P_ATTN_NORM), a.rstd1, N, C);
}

void titan_llama_backward(titan_llama *m, float loss_scale) {
    TITAN_ASSERT(m->have_targets); /* backward needs a forward with targets */
    const titan_backend *be = m->be;
    int N = m->N, C = m->C, V = m->V;
    float *P = m->params, *G = m->grads;
    float *logits = m->act[A_LOGITS], *dresid = m->act[A_DRESID], *dxf = m->act[A_DN];
    size_t f = sizeof(float);

    /* dlogits overwrite the logits: d(loss_scale * mean CE). */
    be->cross_entropy(m->act[A_LOSSES], logits, logits, (const uint32_t *)m->act[A_TARGETS], N, V,
                      loss_scale / (float)N);
    m->have_targets = 0; /* the logits are gone */

    /* Backward hooks' failures stay with their owner (see llama.h). */
    (void)HOOK(m, before_backward, m->L + 1);
    be->zero(dxf, (size_t)N * C * f);
    be->matmul_backward(dxf, head(m, G), logits, m->act[A_XF], head(m, P), N, C, V);
    be->zero(dresid, (size_t)N * C * f);
    be->rmsnorm_backward(dresid, final_norm(m, G), dxf, resid(m, m->L), final_norm(m, P),
                         m->act[A_RSTDF], N, C);
    (void)HOOK(m, after_backward, m->L + 1);

    for (int l = m->L - 1; l >= 0; l--) {
        (void)HOOK(m, before_backward, l + 1);
        /* Recompute the block's intermediates from its saved input; its
         * output slot is no longer needed, so it serves as scratch. */
        if (m->ac == TITAN_AC_FULL) layer_forward(m, l, resid(m, l), resid(m, l + 1));
        layer_backward(m, l, resid(m, l));
        (void)HOOK(m, after_backward, l + 1);
    }
    (void)HOOK(m, before_backward, 0);
    be->embedding_backward(tok_emb(m, G), dresid, (const uint32_t *)m->act[A_TOKENS], N, C);
    (void)HOOK(m, after_backward, 0);
}
