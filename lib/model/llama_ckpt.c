/* llama_ckpt.c - a checkpoint's metadata (model.*) against its catalog. */
#include "model/llama_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void shape_str(char *out, size_t cap, int ndim, const int64_t *shape) {
    size_t n = 0;
    out[0] = 0;
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", d ? " x " : "", (long long)shape[d]);
}

/* Metadata naming more layers than the catalog could hold (each takes 9
 * tensors) is refused before the model's parameter list is built for it:
 * a crafted model.n_layers must not cost time or memory. The message names
 * the first layer's first tensor the catalog lacks. */
static titan_status too_many_layers(const titan_ckpt *ck, const titan_llama_config *mc) {
    int nt = titan_ckpt_num_tensors(ck);
    if ((int64_t)mc->n_layers * 9 <= nt) return TITAN_OK;
    char *present = calloc((size_t)nt + 1, 1);
    if (!present) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", titan_ckpt_path(ck));
    for (int i = 0; i < nt; i++) {
        titan_ckpt_tensor t;
        int layer;
        if (titan_ckpt_tensor_info(ck, i, &t) == TITAN_OK && sscanf(t.name, "layers.%d.attention_norm.weight", &layer) == 1 &&
            layer >= 0 && layer < nt && !strchr(t.name, ':'))
            present[layer] = 1;
    }
    int missing = 0;
    while (missing < nt && present[missing]) missing++;
    free(present);
    return titan_error(TITAN_ERR_FORMAT, "%s: tensor layers.%d.attention_norm.weight is missing from the catalog, but the "
                       "model its metadata names has it (model.n_layers %d)", titan_ckpt_path(ck), missing, mc->n_layers);
}

titan_status titan_llama_ckpt_check(const titan_ckpt *ck, const titan_llama_config *mc) {
    const char *path = titan_ckpt_path(ck);
    TITAN_TRY(too_many_layers(ck, mc));
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    char *seen = ps ? calloc((size_t)np, 1) : NULL;
    if (!seen) {
        free(ps);
        return titan_error(TITAN_ERR_NOMEM, "%s: checking a model of %d layers: out of memory", path, mc->n_layers);
    }
    titan_status st = TITAN_OK;
    int nt = titan_ckpt_num_tensors(ck);
    for (int i = 0; i < nt && st == TITAN_OK; i++) {
        titan_ckpt_tensor t;
        if ((st = titan_ckpt_tensor_info(ck, i, &t)) != TITAN_OK) break;
        char base[96];
        size_t n = strcspn(t.name, ":");
        const char *suffix = t.name + n;
        int k = -1;
        if (n < sizeof base) {
            memcpy(base, t.name, n);
            base[n] = 0;
            k = titan_llama_param_index(mc, base);
        }
        /* GaLore's low-rank state of a matrix: 2-D, of its own shape */
        int galore = k >= 0 && (!strcmp(suffix, ":galore_proj") || !strcmp(suffix, ":galore_exp_avg") ||
                                !strcmp(suffix, ":galore_exp_avg_sq"));
        if (galore && t.ndim == 2 && ps[k].ndim == 2 && titan_dtype_is_float(t.dtype)) continue;
        if (k < 0 || (*suffix && !galore && strcmp(suffix, ":exp_avg") && strcmp(suffix, ":exp_avg_sq"))) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: tensor %s is not part of the model its metadata names "
                             "(model.n_layers %d, model.tie_embeddings %d)", path, t.name, mc->n_layers,
                             mc->tie_embeddings);
            break;
        }
        int same = t.ndim == ps[k].ndim && titan_dtype_is_float(t.dtype);
        for (int d = 0; same && d < t.ndim; d++) same = t.shape[d] == ps[k].shape[d];
        if (!same) {
            char got[64], want[64];
            shape_str(got, sizeof got, t.ndim, t.shape);
            shape_str(want, sizeof want, ps[k].ndim, ps[k].shape);
            st = titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: %s [%s] in the catalog, but the model its metadata "
                             "names (model.dim %d, ...) has f32 [%s]", path, t.name, titan_dtype_name(t.dtype), got,
                             mc->dim, want);
            break;
        }
        if (!*suffix) seen[k] = 1; /* names are unique in a catalog */
    }
    for (int k = 0; k < np && st == TITAN_OK; k++)
        if (!seen[k])
            st = titan_error(TITAN_ERR_FORMAT, "%s: tensor %s is missing from the catalog, but the model its metadata "
                             "names has it (model.n_layers %d)", path, ps[k].name, mc->n_layers);
    free(seen);
    free(ps);
    return st;
}
