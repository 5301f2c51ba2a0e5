/* llama_fp8.c - which linears train in float8 (torchtitan's float8
 * converter and torchao's filters, llama.h: titan_llama_set_float8). */
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

titan_status titan_llama_set_float8(titan_llama *m, const titan_fp8_recipe *r, const char *filter_fqns,
                                    int *converted, int *total) {
    titan_free(m->fp8_linear);
    m->fp8_linear = NULL;
    if (converted) *converted = 0;
    if (total) *total = 0;
    if (!r) return TITAN_OK;
    if (!m->be->fp8_matmul_forward || !m->be->fp8_matmul_backward)
        return titan_error(TITAN_ERR_USAGE, "float8 training: the %s backend has no float8 GEMMs", m->be->name);
    /* the collective matmuls run plain GEMMs */
    if (m->overlap)
        return titan_error(TITAN_ERR_USAGE, "float8 training with async tensor parallelism: not supported yet");
    const titan_llama_config *c = &m->cfg;
    int L = c->n_layers, C = c->dim, HD = c->dim / c->n_heads;
    int QD = c->n_heads * HD, KVD = c->n_kv_heads * HD, H = titan_llama_hidden_dim(c);
    /* the whole weights' [out, in], as torchtitan converts before sharding */
    const int shape[FP8_PER_LAYER][2] = {{QD, C}, {KVD, C}, {KVD, C}, {C, QD}, {H, C}, {C, H}, {H, C}};
    size_t n = (size_t)L * FP8_PER_LAYER + 1;
    m->fp8_linear = titan_alloc(n, "float8 linear flags");
    if (!m->fp8_linear) return TITAN_ERR_NOMEM;
    m->fp8 = *r;
    int autof = has_filter(filter_fqns, "auto_filter_small_kn"), count = 0;
    for (size_t i = 0; i < n; i++) {
        int l = (int)(i / FP8_PER_LAYER), k = (int)(i % FP8_PER_LAYER);
        char fqn[96];
        int N, K;
        if (l == L) {
            snprintf(fqn, sizeof fqn, "output");
            N = c->vocab_size, K = C;
        } else {
            snprintf(fqn, sizeof fqn, "layers.%d.%s", l, LINEAR_NAMES[k]);
            N = shape[k][0], K = shape[k][1];
        }
        int on = N % 16 == 0 && K % 16 == 0 && !filtered(fqn, filter_fqns) && !(autof && too_small(r, N, K));
        m->fp8_linear[i] = (unsigned char)on;
        count += on;
    }
    if (converted) *converted = count;
    if (total) *total = (int)n;
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
