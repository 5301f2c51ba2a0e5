/* llama_config.c - Llama 3 flavors, FFN sizing, the parameter catalog and init. */
#include "model/llama_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tensor/layout.h"

typedef struct {
    const char *name;
    int dim, n_layers, n_heads, n_kv_heads, multiple_of;
    float ffn_dim_multiplier, rope_scaling_factor;
    int tie_embeddings;
} flavor;

/* Published dimensions (Meta's params.json of Llama 3.1 / 3.2). */
static const flavor flavors[] = {
    {"debugmodel", 256, 6, 16, 16, 256, 0.0f, 8.0f, 0},
    {"1B", 2048, 16, 32, 8, 256, 1.5f, 32.0f, 1},
    {"3B", 3072, 28, 24, 8, 256, 1.0f, 32.0f, 1},
    {"8B", 4096, 32, 32, 8, 1024, 1.3f, 8.0f, 0},
    {"70B", 8192, 80, 64, 8, 4096, 1.3f, 8.0f, 0},
    {"405B", 16384, 126, 128, 8, 4096, 1.2f, 8.0f, 0},
};
#define N_FLAVORS ((int)(sizeof flavors / sizeof flavors[0]))

const char *titan_llama_flavor_names(void) { return "debugmodel, 1B, 3B, 8B, 70B, 405B"; }

titan_status titan_llama_flavor(const char *name, titan_llama_config *out) {
    for (int i = 0; i < N_FLAVORS; i++) {
        const flavor *f = &flavors[i];
        if (strcmp(name, f->name) != 0) continue;
        memset(out, 0, sizeof *out);
        out->dim = f->dim;
        out->n_layers = f->n_layers;
        out->n_heads = f->n_heads;
        out->n_kv_heads = f->n_kv_heads;
        out->vocab_size = 0; /* from the tokenizer */
        out->multiple_of = f->multiple_of;
        out->ffn_dim_multiplier = f->ffn_dim_multiplier;
        out->norm_eps = 1e-5f;
        out->rope_theta = 500000.0f;
        out->rope_scaling_factor = f->rope_scaling_factor;
        out->rope_low_freq_factor = 1.0f;
        out->rope_high_freq_factor = 4.0f;
        out->rope_original_context = 8192;
        out->tie_embeddings = f->tie_embeddings;
        return TITAN_OK;
    }
    titan_error(TITAN_ERR_USAGE, "model.flavor: unknown flavor '%s'", name);
    titan_error_hint("valid flavors: %s", titan_llama_flavor_names());
    return TITAN_ERR_USAGE;
}

int titan_llama_hidden_dim(const titan_llama_config *c) {
    /* Meta: h = int(2 * 4 * dim / 3); h = int(multiplier * h); round up to
     * multiple_of. The multiplier is a Python float (double) there: take the
     * decimal value the float was written from, so 1.3f acts as 1.3. */
    long long h = (long long)(2.0 * 4.0 * c->dim / 3.0);
    if (c->ffn_dim_multiplier > 0.0f) {
        double m = round((double)c->ffn_dim_multiplier * 1e6) / 1e6;
        h = (long long)(m * (double)h);
    }
    long long mo = c->multiple_of > 0 ? c->multiple_of : 1;
    h = mo * ((h + mo - 1) / mo);
    return (int)h;
}

titan_status titan_llama_config_check(const titan_llama_config *c) {
    const char *w = "model config";
    if (c->dim <= 0) return titan_error(TITAN_ERR_USAGE, "%s: dim: must be > 0 (got %d)", w, c->dim);
    if (c->n_layers <= 0 || c->n_layers > TITAN_LLAMA_MAX_LAYERS)
        return titan_error(TITAN_ERR_USAGE, "%s: n_layers: must be 1 to %d (got %d)", w, TITAN_LLAMA_MAX_LAYERS,
                           c->n_layers);
    if (c->n_heads <= 0)
        return titan_error(TITAN_ERR_USAGE, "%s: n_heads: must be > 0 (got %d)", w, c->n_heads);
    if (c->dim % c->n_heads != 0)
        return titan_error(TITAN_ERR_USAGE, "%s: n_heads: %d does not divide dim %d", w,
                           c->n_heads, c->dim);
    if ((c->dim / c->n_heads) % 2 != 0)
        return titan_error(TITAN_ERR_USAGE,
                           "%s: head dim %d (dim / n_heads) must be even for rotary embeddings",
                           w, c->dim / c->n_heads);
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0)
        return titan_error(TITAN_ERR_USAGE, "%s: n_kv_heads: %d must be > 0 and divide n_heads %d",
                           w, c->n_kv_heads, c->n_heads);
    if (c->vocab_size <= 0)
        return titan_error(TITAN_ERR_USAGE, "%s: vocab_size: must be > 0 (got %d)", w,
                           c->vocab_size);
    if (c->multiple_of <= 0)
        return titan_error(TITAN_ERR_USAGE, "%s: multiple_of: must be > 0 (got %d)", w,
                           c->multiple_of);
    if (!(c->ffn_dim_multiplier >= 0.0f) || c->ffn_dim_multiplier > 64.0f)
        return titan_error(TITAN_ERR_USAGE,
                           "%s: ffn_dim_multiplier: must be 0 (none) or in (0, 64] (got %g)", w,
                           (double)c->ffn_dim_multiplier);
    if (!(c->norm_eps > 0.0f))
        return titan_error(TITAN_ERR_USAGE, "%s: norm_eps: must be > 0 (got %g)", w,
                           (double)c->norm_eps);
    if (!(c->rope_theta > 1.0f))
        return titan_error(TITAN_ERR_USAGE, "%s: rope_theta: must be > 1 (got %g)", w,
                           (double)c->rope_theta);
    if (!(c->rope_scaling_factor >= 0.0f))
        return titan_error(TITAN_ERR_USAGE, "%s: rope_scaling_factor: must be >= 0 (got %g)", w,
                           (double)c->rope_scaling_factor);
    if (c->rope_scaling_factor > 0.0f) {
        if (!(c->rope_low_freq_factor > 0.0f) ||
            !(c->rope_high_freq_factor > c->rope_low_freq_factor))
            return titan_error(TITAN_ERR_USAGE,
                               "%s: rope frequency factors: need 0 < low (%g) < high (%g)", w,
                               (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor);
        if (c->rope_original_context <= 0)
            return titan_error(TITAN_ERR_USAGE,
                               "%s: rope_original_context: must be > 0 (got %d)", w,
                               c->rope_original_context);
    }
    long long h = titan_llama_hidden_dim(c);
    if (h <= 0 || h > (1LL << 30))
        return titan_error(TITAN_ERR_USAGE, "%s: FFN hidden size %lld out of range", w, h);
    /* In double: titan_llama_num_params would wrap around first. */
    double C = c->dim, layer = 2 * C + 2 * C * C + 2 * (double)c->n_kv_heads * (C / c->n_heads) * C + 3 * C * h;
    double total = (double)c->vocab_size * C * (c->tie_embeddings ? 1 : 2) + C + (double)c->n_layers * layer;
    if (total > TITAN_LLAMA_MAX_PARAMS)
        return titan_error(TITAN_ERR_USAGE, "%s: %.3g parameters (dim %d, %d layers, vocab %d): more than the "
                           "2^50 titan can hold", w, total, c->dim, c->n_layers, c->vocab_size);
    return TITAN_OK;
}

/* ---- the parameter catalog ---- */

/* A transformer layer's tensors, in catalog order: name, role, tp split dim
 * (column-parallel wq, wk, wv, w1, w3 keep their rows' share, row-parallel
 * wo, w2 their columns'; the norms are whole). */
static const struct {
    const char *sub;
    titan_param_role role;
    int tp_dim;
} layer_params[9] = {
    {"attention_norm", TITAN_PARAM_ATTENTION_NORM, -1}, {"attention.wq", TITAN_PARAM_WQ, 0},
    {"attention.wk", TITAN_PARAM_WK, 0},                {"attention.wv", TITAN_PARAM_WV, 0},
    {"attention.wo", TITAN_PARAM_WO, 1},                {"ffn_norm", TITAN_PARAM_FFN_NORM, -1},
    {"feed_forward.w1", TITAN_PARAM_W1, 0},             {"feed_forward.w2", TITAN_PARAM_W2, 1},
    {"feed_forward.w3", TITAN_PARAM_W3, 0},
};

/* Everything of a catalog entry but its shape and offset. */
typedef struct {
    titan_param_role role;
    int tp_dim, block;
} param_info;

static int put(titan_param *out, int i, size_t *off, const char *name, param_info in, int64_t r, int64_t cl) {
    if (out) {
        titan_param *p = &out[i];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s", name);
        p->role = in.role;
        p->place = (titan_layout_place){.tp_dim = in.tp_dim, .block = in.block};
        p->ndim = cl > 0 ? 2 : 1;
        p->shape[0] = r;
        p->shape[1] = cl > 0 ? cl : 0;
        p->offset = *off;
        p->numel = (size_t)r * (size_t)(cl > 0 ? cl : 1);
    }
    *off += (size_t)r * (size_t)(cl > 0 ? cl : 1);
    return i + 1;
}

titan_status titan_llama_tp_check(const titan_llama_config *c, int size) {
    if (size < 1) return titan_error(TITAN_ERR_USAGE, "tensor parallel degree %d: must be >= 1", size);
    const char *w = "tensor parallelism";
    if (c->n_kv_heads % size != 0)
        return titan_error(TITAN_ERR_USAGE, "%s: degree %d does not divide n_kv_heads %d (each rank takes "
                           "whole heads)", w, size, c->n_kv_heads);
    int h = titan_llama_hidden_dim(c);
    if (h % size != 0)
        return titan_error(TITAN_ERR_USAGE, "%s: degree %d does not divide the FFN hidden size %d", w, size, h);
    int64_t off, len;
    titan_layout_chunk(c->vocab_size, size, size - 1, &off, &len);
    if (len <= 0)
        return titan_error(TITAN_ERR_USAGE, "%s: degree %d leaves the last rank no rows of the vocabulary "
                           "(%d split in pieces of %d)", w, size, c->vocab_size,
                           (c->vocab_size + size - 1) / size);
    return TITAN_OK;
}

void titan_llama_tp_vocab(const titan_llama_config *c, titan_llama_tp tp, int64_t *v0, int64_t *nv) {
    titan_layout_chunk(c->vocab_size, tp.size, tp.rank, v0, nv); /* torch.chunk's pieces, as the layout's */
}

titan_status titan_llama_pp_check(const titan_llama_config *c, int size) {
    if (size < 1 || size > c->n_layers + 2)
        return titan_error(TITAN_ERR_USAGE, "pipeline parallelism: %d stages for a model of %d layers (1 to %d: the "
                           "embedding and the head count as a layer each)", size, c->n_layers, c->n_layers + 2);
    if (size > 1 && c->tie_embeddings)
        return titan_error(TITAN_ERR_USAGE, "pipeline parallelism: tied embeddings would put tok_embeddings on the "
                           "first and the last stage (not supported)");
    return TITAN_OK;
}

titan_layout titan_llama_pp_layout(titan_llama_pp pp) {
    titan_layout l = titan_layout_single();
    l.pp = pp.size;
    if (pp.v > 0) {
        l.pp_v = pp.v;
        l.pp_first_less = pp.first_less;
        l.pp_last_less = pp.last_less;
        l.pp_vshape = pp.vshape;
        l.pp_layers = pp.layers;
    }
    return l;
}

int titan_llama_pp_global_stage(titan_llama_pp pp, int k) {
    titan_layout l = titan_llama_pp_layout(pp);
    return titan_layout_rank_stage(&l, pp.stage, k);
}

int titan_llama_pp_local_stages(titan_llama_pp pp) { return pp.v > 1 ? pp.v : 1; }

void titan_llama_pp_stage_layers(const titan_llama_config *c, titan_llama_pp pp, int k, int *first, int *end) {
    titan_layout l = titan_llama_pp_layout(pp);
    titan_layout_stage_layers(&l, c->n_layers, titan_layout_rank_stage(&l, pp.stage, k), first, end);
}

void titan_llama_pp_layers(const titan_llama_config *c, titan_llama_pp pp, int *first, int *end) {
    titan_llama_pp_stage_layers(c, pp, 0, first, end);
}

int titan_llama_pp_has_block(const titan_llama_config *c, titan_llama_pp pp, int b) {
    titan_layout l = titan_llama_pp_layout(pp);
    return titan_layout_stage(&l, c->n_layers, b) == pp.stage;
}

int titan_llama_params_tp(const titan_llama_config *c, titan_llama_tp tp, titan_param *out) {
    return titan_llama_params_local(c, tp, (titan_llama_pp){.size = 1, .stage = 0}, out);
}

int titan_llama_params_local(const titan_llama_config *c, titan_llama_tp tp, titan_llama_pp pp, titan_param *out) {
    int64_t C = c->dim, H = titan_llama_hidden_dim(c) / tp.size;
    int64_t HD = c->dim / c->n_heads;
    int64_t QD = (int64_t)c->n_heads / tp.size * HD, KVD = (int64_t)c->n_kv_heads / tp.size * HD;
    int64_t v0, V;
    titan_llama_tp_vocab(c, tp, &v0, &V);
    int NL = c->n_layers;
    size_t off = 0;
    int i = 0;
    char name[80];
    param_info in = {TITAN_PARAM_TOK_EMBEDDINGS, 0, 0};
    i = put(out, i, &off, "tok_embeddings.weight", in, titan_llama_pp_has_block(c, pp, 0) ? V : 0, C);
    for (int l = 0; l < NL; l++) {
        const int64_t rows[9] = {C, QD, KVD, KVD, C, C, H, C, H};
        const int64_t cols[9] = {0, C, C, C, QD, 0, C, H, C};
        int mine = titan_llama_pp_has_block(c, pp, l + 1);
        for (int k = 0; k < 9; k++) {
            snprintf(name, sizeof name, "layers.%d.%s.weight", l, layer_params[k].sub);
            in = (param_info){layer_params[k].role, layer_params[k].tp_dim, l + 1};
            i = put(out, i, &off, name, in, mine ? rows[k] : 0, cols[k]);
        }
    }
    int head = titan_llama_pp_has_block(c, pp, NL + 1);
    in = (param_info){TITAN_PARAM_NORM, -1, NL + 1};
    i = put(out, i, &off, "norm.weight", in, head ? C : 0, 0);
    in.role = TITAN_PARAM_OUTPUT;
    in.tp_dim = 0;
    if (!c->tie_embeddings) i = put(out, i, &off, "output.weight", in, head ? V : 0, C);
    return i;
}

titan_param *titan_llama_params_local_new(const titan_llama_config *c, titan_llama_tp tp, titan_llama_pp pp,
                                          int *n) {
    *n = titan_llama_params_local(c, tp, pp, NULL);
    titan_param *ps = malloc((size_t)*n * sizeof *ps);
    if (!ps) {
        titan_error(TITAN_ERR_NOMEM, "model of %d layers: parameter catalog of %d tensors (%zu bytes): out of memory",
                    c->n_layers, *n, (size_t)*n * sizeof *ps);
        return NULL;
    }
    titan_llama_params_local(c, tp, pp, ps);
    return ps;
}

titan_param *titan_llama_params_new(const titan_llama_config *c, int *n) {
    return titan_llama_params_local_new(c, (titan_llama_tp){1, 0}, (titan_llama_pp){.size = 1, .stage = 0}, n);
}

int titan_llama_param_place(const char *name, int n_layers, titan_layout_place *out) {
    size_t n = strcspn(name, ":");
    char base[80];
    *out = (titan_layout_place){.tp_dim = -1, .block = 0};
    if (n >= sizeof base) return 0;
    memcpy(base, name, n);
    base[n] = '\0';
    if (!strcmp(base, "tok_embeddings.weight")) *out = (titan_layout_place){0, 0};
    else if (!strcmp(base, "norm.weight")) *out = (titan_layout_place){-1, n_layers + 1};
    else if (!strcmp(base, "output.weight")) *out = (titan_layout_place){0, n_layers + 1};
    else {
        int l, used = 0;
        if (sscanf(base, "layers.%d.%n", &l, &used) != 1 || used == 0 || l < 0 || l >= n_layers) return 0;
        char want[80];
        for (int k = 0; k < 9; k++) {
            snprintf(want, sizeof want, "layers.%d.%s.weight", l, layer_params[k].sub);
            if (strcmp(base, want)) continue;
            *out = (titan_layout_place){layer_params[k].tp_dim, l + 1};
            return 1;
        }
        return 0;
    }
    return 1;
}

int titan_llama_param_index(const titan_llama_config *c, const char *name) {
    int L = c->n_layers;
    if (!strcmp(name, "tok_embeddings.weight")) return 0;
    if (!strcmp(name, "norm.weight")) return 9 * L + 1;
    if (!strcmp(name, "output.weight")) return c->tie_embeddings ? -1 : 9 * L + 2;
    int l, used = 0;
    if (sscanf(name, "layers.%d.%n", &l, &used) != 1 || used == 0 || l < 0 || l >= L) return -1;
    char want[80];
    snprintf(want, sizeof want, "layers.%d.", l);
    if (strncmp(name, want, (size_t)used)) return -1; /* "layers.+1." or "layers.01." */
    for (int k = 0; k < 9; k++) {
        size_t n = strlen(layer_params[k].sub);
        if (!strncmp(name + used, layer_params[k].sub, n) && !strcmp(name + used + n, ".weight")) return 1 + 9 * l + k;
    }
    return -1;
}

int titan_llama_params(const titan_llama_config *c, titan_param *out) {
    return titan_llama_params_tp(c, (titan_llama_tp){1, 0}, out);
}

size_t titan_llama_num_params(const titan_llama_config *c) {
    size_t C = (size_t)c->dim, H = (size_t)titan_llama_hidden_dim(c);
    size_t HD = C / (size_t)c->n_heads;
    size_t QD = (size_t)c->n_heads * HD, KVD = (size_t)c->n_kv_heads * HD;
    size_t emb = (size_t)c->vocab_size * C;
    size_t layer = 2 * C + QD * C + 2 * KVD * C + C * QD + 3 * H * C;
    return emb + (size_t)c->n_layers * layer + C + (c->tie_embeddings ? 0 : emb);
}

size_t titan_llama_num_params_nonembed(const titan_llama_config *c) {
    return titan_llama_num_params(c) - (size_t)c->vocab_size * (size_t)c->dim;
}

double titan_llama_flops_per_token(const titan_llama_config *c, int seq_len) {
    /* A tied head is still a V x D matmul (torchtitan's count leaves it out). */
    double head = c->tie_embeddings ? (double)c->vocab_size * (double)c->dim : 0.0;
    return 6.0 * ((double)titan_llama_num_params_nonembed(c) + head) +
           12.0 * c->n_layers * (double)c->dim * (double)seq_len;
}

/* ---- initialisation ---- */

/* Each tensor draws from the stream named after it, so the values depend only
 * on (seed, name, index): not on visiting order, threads or the catalog. */
titan_status titan_llama_init_weights(const titan_llama_config *c, float *params, uint64_t seed) {
    int n;
    titan_param *ps = titan_llama_params_new(c, &n);
    if (!ps) return TITAN_ERR_NOMEM;
    const double out_std = 1.0 / sqrt((double)c->dim), tied_std = 1.0 / c->dim;
    for (int i = 0; i < n; i++) {
        const titan_param *p = &ps[i];
        float *x = params + p->offset;
        uint64_t stream = titan_rng_hash_name(p->name);
        titan_param_role r = p->role;
        if (r == TITAN_PARAM_ATTENTION_NORM || r == TITAN_PARAM_FFN_NORM || r == TITAN_PARAM_NORM) {
            for (size_t j = 0; j < p->numel; j++) x[j] = 1.0f;
        } else if (r == TITAN_PARAM_TOK_EMBEDDINGS) {
            /* Tied (torchtitan has no such case): the final norm gives each
             * position's own embedding row norm sqrt(dim), so its logit is
             * dim * std. std = 1/dim keeps that near 1 and the loss at init
             * near ln V; N(0,1) would start it near dim. */
            if (c->tie_embeddings)
                titan_rng_trunc_normal(x, (int64_t)p->numel, seed, stream, 0.0, tied_std,
                                       -3.0 * tied_std, 3.0 * tied_std);
            else
                titan_rng_trunc_normal(x, (int64_t)p->numel, seed, stream, 0.0, 1.0, -INFINITY,
                                       INFINITY);
        } else if (r == TITAN_PARAM_OUTPUT) {
            titan_rng_trunc_normal(x, (int64_t)p->numel, seed, stream, 0.0, out_std,
                                   -3.0 * out_std, 3.0 * out_std);
        } else if (r == TITAN_PARAM_WO || r == TITAN_PARAM_W2 || r == TITAN_PARAM_W3) {
            double std = 0.02 / sqrt(2.0 * p->place.block); /* block = 1 + layer */
            titan_rng_trunc_normal(x, (int64_t)p->numel, seed, stream, 0.0, std, -2.0, 2.0);
        } else { /* wq, wk, wv, w1 */
            titan_rng_trunc_normal(x, (int64_t)p->numel, seed, stream, 0.0, 0.02, -2.0, 2.0);
        }
    }
    free(ps);
    return TITAN_OK;
}
