/* llama_fp8.c - which linears train in float8 (torchtitan's float8
 * converter and torchao's filters, llama.h: titan_llama_set_float8). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "model/llama_impl.h"

static const char *const LINEAR_NAMES[FP8_PER_LAYER] = {
    "attention.wq", "attention.wk", "attention.wv", "attention.wo",
    "feed_forward.w1", "feed_forward.w2", "feed_forward.w3",
};

/* 1 when fqn contains one of the comma-joined filters (not the
 * auto_filter_small_kn flag, which is no name) */
static int filtered(const char *fqn, const char *filters) {
    for (const char *p = filters; *p;) {
        size_t len = strcspn(p, ",");
        char f[256];
        snprintf(f, sizeof f, "%.*s", (int)len, p);
        if (f[0] && strcmp(f, "auto_filter_small_kn") != 0 && strstr(fqn, f)) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

/* torchao's float8_linear_utils._auto_filter_for_{tensorwise,rowwise}:
 * 1 when a weight [N, K] is too small to gain (by its H100 tables) */
static int too_small(const titan_fp8_recipe *r, int N, int K) {
    if (!r->rowwise[TITAN_FP8_X_OUT]) return K <= 4096 && N <= 1024;
    return N <= 2048 || K <= 1024 || (N <= 4096 && K <= 2048);
}

static int has_filter(const char *filters, const char *name) {
    for (const char *p = filters; *p;) {
        size_t len = strcspn(p, ",");
        if (len == strlen(name) && strncmp(p, name, len) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

void titan_llama_fp8_free(titan_llama *m) {
    titan_free(m->fp8_linear);
    if (m->fp8_amax_dev) m->be->free(m->fp8_amax_dev);
    if (m->fp8_wamax) m->be->free(m->fp8_wamax);
    if (m->fp8_wamax_fwd) m->be->free(m->fp8_wamax_fwd);
    if (m->fp8_xamax) m->be->free(m->fp8_xamax);
    titan_free(m->fp8_amax_host);
    m->fp8_linear = NULL;
    m->fp8_amax_dev = m->fp8_amax_host = m->fp8_wamax = m->fp8_wamax_fwd = m->fp8_xamax = NULL;
    m->fp8_wamax_on = 0;
    m->fp8_amax_cap = 0;
}

size_t titan_llama_fp8_tp_amax_floats(const titan_llama_config *c, int tp, int N) {
    titan_llama_tp place = {tp, 0}; /* rank 0 holds the most vocabulary rows */
    int64_t v0, nv;
    titan_llama_tp_vocab(c, place, &v0, &nv);
    int hd = c->dim / c->n_heads;
    const size_t dims[] = {(size_t)c->dim, (size_t)(titan_llama_hidden_dim(c) / tp), (size_t)(c->n_heads / tp * hd),
                           (size_t)(c->n_kv_heads / tp * hd), (size_t)nv};
    size_t cap = (size_t)N;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > cap) cap = dims[i];
    return cap;
}

/* The amax buffers of titan_llama_fp8_recipe under tp */
static titan_status alloc_tp_amax(titan_llama *m) {
    size_t cap = titan_llama_fp8_tp_amax_floats(&m->cfg, m->tpp.size, m->N);
    TITAN_ASSERT(cap >= (size_t)m->V && cap >= (size_t)m->H && cap >= (size_t)m->QD);
    m->fp8_amax_cap = cap;
    m->fp8_amax_dev = m->be->alloc(TITAN_FP8_NCASTS * cap * sizeof(float));
    m->fp8_amax_host = titan_alloc((size_t)m->tpp.size * cap * sizeof(float), "float8 tensor parallel amax");
    if (!m->fp8_amax_dev || !m->fp8_amax_host)
        return titan_error(TITAN_ERR_NOMEM, "float8 with tensor parallelism: amax buffers of %zu floats: out of memory",
                           cap * (TITAN_FP8_NCASTS + (size_t)m->tpp.size));
    return TITAN_OK;
}

void titan_llama_float8_shape(const titan_llama_config *c, int lin, int *out, int *in) {
    int C = c->dim, HD = c->dim / c->n_heads;
    int QD = c->n_heads * HD, KVD = c->n_kv_heads * HD, H = titan_llama_hidden_dim(c);
    const int shape[FP8_PER_LAYER][2] = {{QD, C}, {KVD, C}, {KVD, C}, {C, QD}, {H, C}, {C, H}, {H, C}};
    if (lin >= c->n_layers * FP8_PER_LAYER) *out = c->vocab_size, *in = C;
    else *out = shape[lin % FP8_PER_LAYER][0], *in = shape[lin % FP8_PER_LAYER][1];
}

int titan_llama_float8_plan(const titan_llama_config *c, const titan_fp8_recipe *r, const char *filter_fqns,
                            unsigned char *on) {
    int L = c->n_layers, n = L * FP8_PER_LAYER + 1;
    int autof = has_filter(filter_fqns, "auto_filter_small_kn"), count = 0;
    for (int i = 0; i < n; i++) {
        int l = i / FP8_PER_LAYER, k = i % FP8_PER_LAYER;
        char fqn[96];
        int N, K;
        /* the whole weights' [out, in], as torchtitan converts before sharding */
        titan_llama_float8_shape(c, i, &N, &K);
        if (l == L) snprintf(fqn, sizeof fqn, "output");
        else snprintf(fqn, sizeof fqn, "layers.%d.%s", l, LINEAR_NAMES[k]);
        on[i] = (unsigned char)(N % 16 == 0 && K % 16 == 0 && !filtered(fqn, filter_fqns) &&
                                !(autof && too_small(r, N, K)));
        count += on[i];
    }
    return count;
}

titan_status titan_llama_set_float8(titan_llama *m, const titan_fp8_recipe *r, const char *filter_fqns,
                                    int *converted, int *total) {
    titan_llama_fp8_free(m);
    if (converted) *converted = 0;
    if (total) *total = 0;
    if (!r) return TITAN_OK;
    if (!m->be->fp8_matmul_forward || !m->be->fp8_matmul_backward)
        return titan_error(TITAN_ERR_USAGE, "float8 training: the %s backend has no float8 GEMMs", m->be->name);
    /* the collective matmuls run plain GEMMs */
    if (m->overlap)
        return titan_error(TITAN_ERR_USAGE, "float8 training with async tensor parallelism: not supported yet");
    const char *reuse = getenv("TITAN_FP8_REUSE");
    if (reuse && *reuse && strcmp(reuse, "0") != 0 && strcmp(reuse, "1") != 0)
        return titan_error(TITAN_ERR_USAGE, "TITAN_FP8_REUSE=%s: expected 0 or 1 (or unset)", reuse);
    m->fp8_reuse = !(reuse && strcmp(reuse, "0") == 0);
    size_t n = (size_t)m->cfg.n_layers * FP8_PER_LAYER + 1;
    m->fp8_linear = titan_alloc(n, "float8 linear flags");
    if (!m->fp8_linear) return TITAN_ERR_NOMEM;
    m->fp8 = *r;
    int count = titan_llama_float8_plan(&m->cfg, r, filter_fqns, m->fp8_linear);
    if (converted) *converted = count;
    if (total) *total = (int)n;
    size_t nw = count && m->fp8_reuse ? titan_llama_fp8_wamax_floats(r, m->cfg.n_layers) : 0;
    size_t nx = count && m->fp8_reuse ? titan_llama_fp8_xamax_floats(r, m->cfg.n_layers, m->slots) : 0;
    if (nw) {
        m->fp8_wamax_fwd = m->be->alloc(nw * sizeof(float));
        if (!m->fp8_wamax_fwd)
            return titan_error(TITAN_ERR_NOMEM, "float8 weight amax of the forward (%zu floats): out of memory", nw);
    }
    if (nx) {
        m->fp8_xamax = m->be->alloc(nx * sizeof(float));
        if (!m->fp8_xamax)
            return titan_error(TITAN_ERR_NOMEM, "float8 activation amax of the forward (%zu floats): out of memory", nx);
    }
    if (m->tp && m->tpp.size > 1 && count) return alloc_tp_amax(m);
    return TITAN_OK;
}

/* ---- tensor parallelism ----
 *
 * torchao casts a DTensor with the amax of the whole tensor (an all-reduce
 * of the shards' maxima), so a shard's float8 bytes are those of the same
 * rows and columns in one process. The column-parallel linears (wq, wk,
 * wv, w1, w3, the output) shard w's rows and dy's columns; the
 * row-parallel ones (wo, w2) shard w's and x's columns; x of a
 * column-parallel linear and dy of a row-parallel one are whole on every
 * rank. A cast reduces across the shard when its amax runs over a sharded
 * dimension: all of it (tensorwise), a row's columns (rowwise along the
 * columns) or a column's rows. */

enum { OPERAND_X, OPERAND_W, OPERAND_DY };

static int operand_of(int c) {
    return c == TITAN_FP8_X_OUT || c == TITAN_FP8_X_GW ? OPERAND_X
           : c == TITAN_FP8_W_OUT || c == TITAN_FP8_W_GI ? OPERAND_W : OPERAND_DY;
}

static int crosses_shard(const titan_fp8_recipe *r, int c, int colwise) {
    int o = operand_of(c);
    int rows_sharded = o == OPERAND_W && colwise;
    int cols_sharded = o == OPERAND_DY ? colwise : !colwise;
    titan_fp8_axis axis = titan_fp8_recipe_axis(r, c);
    return axis == TITAN_FP8_TENSOR ? rows_sharded || cols_sharded
           : axis == TITAN_FP8_ROWS ? cols_sharded : rows_sharded;
}

/* dev[ns] = its max over the tp group (in rank order) */
static titan_status group_amax(titan_llama *m, float *dev, size_t ns) {
    const titan_group *g = m->tp;
    float *all = m->fp8_amax_host, *mine = all + (size_t)g->rank * ns;
    m->be->to_host(mine, dev, ns * sizeof(float));
    titan_status st = g->all_gather_host(g->ctx, mine, all, ns);
    if (st != TITAN_OK) return titan_error_context("model: float8 amax of %zu values over the tp group", ns), st;
    titan_fp8_amax_fold_ranks(all, g->size, ns);
    m->be->to_device(dev, all, ns * sizeof(float));
    return TITAN_OK;
}

size_t titan_llama_fp8_wamax_floats(const titan_fp8_recipe *r, int n_layers) {
    int tensorwise = !r->rowwise[TITAN_FP8_W_OUT] && !r->rowwise[TITAN_FP8_W_GI];
    return tensorwise ? (size_t)n_layers * FP8_PER_LAYER + 1 : 0;
}

size_t titan_llama_fp8_xamax_floats(const titan_fp8_recipe *r, int n_layers, int slots) {
    int tensorwise = !r->rowwise[TITAN_FP8_X_OUT] && !r->rowwise[TITAN_FP8_X_GW] &&
                     r->format[TITAN_FP8_X_GW] != TITAN_FP8_NONE && r->format[TITAN_FP8_GO_GW] != TITAN_FP8_NONE;
    return tensorwise ? (size_t)slots * ((size_t)n_layers * FP8_INPUTS + 1) : 0;
}

/* linear k's input among a layer's FP8_INPUTS: wq, wk and wv read n1, wo
 * att, w1 and w3 n2, w2 sw */
static int input_of(int k) {
    return k == FP8_WQ || k == FP8_WK || k == FP8_WV ? 0 : k == FP8_WO ? 1 : k == FP8_W2 ? 3 : 2;
}

/* x's amax for linear (l, k) in the current micro-batch slot */
static float *xamax_slot(const titan_llama *m, int l, int k) {
    size_t per_slot = (size_t)m->cfg.n_layers * FP8_INPUTS + 1;
    size_t at = l >= m->L ? (size_t)m->cfg.n_layers * FP8_INPUTS : (size_t)l * FP8_INPUTS + (size_t)input_of(k);
    return m->fp8_xamax + (size_t)m->slot * per_slot + at;
}

/* dev = cast c's amax of its operand (x [N, IC], w [OC, IC] or dy [N, OC]):
 * the backend's, then the whole tensor's over the tp group where the
 * cast's axis crosses the shard */
static titan_status cast_amax(titan_llama *m, const titan_fp8_recipe *r, int c, int colwise, const void *x,
                              const void *w, const void *dy, int IC, int OC, float *dev) {
    int o = operand_of(c);
    int rows = o == OPERAND_W ? OC : m->N, cols = o == OPERAND_DY ? OC : IC;
    titan_fp8_axis axis = titan_fp8_recipe_axis(r, c);
    m->be->fp8_amax(m->dt, dev, o == OPERAND_X ? x : o == OPERAND_W ? w : dy, rows, cols, axis);
    if (!m->fp8_amax_dev || !crosses_shard(r, c, colwise)) return TITAN_OK;
    size_t ns = (size_t)titan_fp8_nscales(axis, rows, cols);
    TITAN_ASSERT(ns <= m->fp8_amax_cap);
    return group_amax(m, dev, ns);
}

/* The cast's amax given by the tp group: see titan_llama_fp8_recipe. */
static titan_status tp_amax(titan_llama *m, const titan_fp8_recipe *r, int c, int colwise, const void *x,
                            const void *w, const void *dy, int IC, int OC, const float **amax) {
    *amax = NULL;
    if (!m->fp8_amax_dev || !crosses_shard(r, c, colwise)) return TITAN_OK;
    float *dev = m->fp8_amax_dev + (size_t)c * m->fp8_amax_cap;
    TITAN_TRY(cast_amax(m, r, c, colwise, x, w, dy, IC, OC, dev));
    *amax = dev;
    return TITAN_OK;
}

const titan_fp8_recipe *titan_llama_fp8_recipe(titan_llama *m, titan_fp8_recipe *buf, int l, int k, int c0, int c1,
                                               const void *x, const void *w, const void *dy, int IC, int OC,
                                               int xshare) {
    if (!titan_llama_float8_linear(m, l, k)) return NULL;
    const titan_fp8_recipe *r = &m->fp8;
    if (!m->fp8_wamax_on && !m->fp8_amax_dev && !m->fp8_wamax_fwd && !m->fp8_xamax && !xshare) return r;
    *buf = *r;
    int xcast = c0 == TITAN_FP8_X_OUT ? TITAN_FP8_X_OUT : TITAN_FP8_X_GW; /* the forward's, or grad_w's */
    if (c0 <= xcast && xcast < c1) buf->share[xcast] = (unsigned char)xshare;
    int held = xshare == TITAN_FP8_SHARE_USE || xshare == TITAN_FP8_SHARE_LAST;
    size_t lin = l >= m->L ? (size_t)m->L * FP8_PER_LAYER : (size_t)l * FP8_PER_LAYER + (size_t)k;
    int colwise = l >= m->L || !(k == FP8_WO || k == FP8_W2);
    /* a tied output's weight is the embedding, gathered in high precision */
    int gathered8 = m->fp8_wamax_on && !(l >= m->L && m->cfg.tie_embeddings);
    for (int c = c0; c < c1; c++) {
        if (r->format[c] == TITAN_FP8_NONE) continue;
        if (gathered8 && operand_of(c) == OPERAND_W) {
            buf->amax[c] = m->fp8_wamax + lin; /* tensorwise: the all-gather's scale */
            continue;
        }
        /* tensorwise: the forward takes w's amax, the backward's w^T reuses it */
        if (m->fp8_wamax_fwd && operand_of(c) == OPERAND_W) {
            float *slot = m->fp8_wamax_fwd + lin;
            if (c == TITAN_FP8_W_OUT && m->err == TITAN_OK) {
                titan_status st = cast_amax(m, r, c, colwise, x, w, dy, IC, OC, slot);
                if (st != TITAN_OK) m->err = st;
            }
            buf->amax[c] = slot;
            continue;
        }
        /* tensorwise: the forward takes x's amax, grad_w's x^T reuses it */
        if (m->fp8_xamax && operand_of(c) == OPERAND_X) {
            float *slot = xamax_slot(m, l, k);
            if (c == TITAN_FP8_X_OUT && !held && m->err == TITAN_OK) {
                titan_status st = cast_amax(m, r, c, colwise, x, w, dy, IC, OC, slot);
                if (st != TITAN_OK) m->err = st;
            }
            buf->amax[c] = slot;
            continue;
        }
        /* tensorwise: grad_w's dy is grad_in's, reduced once */
        if (c == TITAN_FP8_GO_GW && buf->amax[TITAN_FP8_GO_GI] && !r->rowwise[TITAN_FP8_GO_GI] &&
            !r->rowwise[TITAN_FP8_GO_GW]) {
            buf->amax[c] = buf->amax[TITAN_FP8_GO_GI];
            continue;
        }
        if (m->err != TITAN_OK) continue;
        titan_status st = tp_amax(m, r, c, colwise, x, w, dy, IC, OC, &buf->amax[c]);
        if (st != TITAN_OK) m->err = st;
    }
    return buf;
}

int titan_llama_fp8_param_linear(const titan_llama *m, int i) {
    /* the catalog's tensors of a layer (P_*) as linears (FP8_*) */
    static const int LINEAR_OF[P_PER_LAYER] = {-1, FP8_WQ, FP8_WK, FP8_WV, FP8_WO, -1, FP8_W1, FP8_W2, FP8_W3};
    if (!m->fp8_linear || i <= 0) return -1; /* the embedding is read in high precision, even tied */
    int lin = -1;
    if (i < final_norm_index(m)) {
        int k = LINEAR_OF[(i - 1) % P_PER_LAYER];
        if (k >= 0) lin = (i - 1) / P_PER_LAYER * FP8_PER_LAYER + k;
    } else if (i == head_index(m) && !m->cfg.tie_embeddings) {
        lin = m->L * FP8_PER_LAYER;
    }
    return lin >= 0 && m->fp8_linear[lin] ? lin : -1;
}

titan_status titan_llama_set_fp8_weight_amax(titan_llama *m, const float *amax) {
    if (!amax) {
        m->fp8_wamax_on = 0;
        return TITAN_OK;
    }
    TITAN_ASSERT(m->fp8_linear && !m->fp8.rowwise[TITAN_FP8_W_OUT] && !m->fp8.rowwise[TITAN_FP8_W_GI]);
    size_t n = (size_t)m->L * FP8_PER_LAYER + 1;
    if (!m->fp8_wamax) {
        m->fp8_wamax = m->be->alloc(n * sizeof(float));
        if (!m->fp8_wamax) return titan_error(TITAN_ERR_NOMEM, "float8 weight amax (%zu floats): out of memory", n);
    }
    m->be->to_device(m->fp8_wamax, amax, n * sizeof(float));
    m->fp8_wamax_on = 1;
    return TITAN_OK;
}

int titan_llama_float8_linear(const titan_llama *m, int l, int k) {
    if (!m->fp8_linear) return 0;
    return m->fp8_linear[l >= m->cfg.n_layers ? (size_t)m->cfg.n_layers * FP8_PER_LAYER
                                              : (size_t)l * FP8_PER_LAYER + (size_t)k];
}

int64_t titan_llama_take_fp8_gemms(titan_llama *m) {
    int64_t g = m->fp8_gemms;
    m->fp8_gemms = 0;
    return g;
}
