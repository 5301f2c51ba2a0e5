/* llama_gather.c - the whole model's parameters from a tensor-parallel one:
 * each tensor's pieces gathered over the tp group and put back together. */
#include "model/llama.h"

#include <string.h>

#include "core/mem.h"
#include "tensor/layout.h"

titan_status titan_llama_gather_whole(titan_llama *m, float *dst) {
    const titan_llama_config *c = titan_llama_get_config(m);
    const titan_backend *be = titan_llama_backend(m);
    titan_llama_tp tp = titan_llama_get_tp(m);
    size_t nloc = titan_llama_params_count(m);
    if (titan_llama_get_pp(m).size > 1) /* refused alike on every rank: no collective started */
        return titan_error(TITAN_ERR_USAGE, "model: the whole model from a pipeline stage: not yet supported");
    if (tp.size == 1) {
        if (dst) be->to_host(dst, titan_llama_params_data(m), nloc * sizeof(float));
        return TITAN_OK;
    }
    const titan_group *g = titan_llama_tp_group(m);
    int np;
    const titan_param *mine = titan_llama_catalog(m, &np);
    titan_param *all = titan_alloc((size_t)(tp.size + 1) * (size_t)np * sizeof(titan_param), "model: catalogs");
    size_t *counts = titan_alloc((size_t)tp.size * sizeof(size_t), "model: piece sizes");
    float *loc = titan_alloc(nloc * sizeof(float), "model: host copy of the parameters");
    titan_param *whole = all + (size_t)tp.size * np; /* all[r * np + i]: rank r's piece of tensor i */
    size_t biggest = 0;
    if (all) {
        titan_llama_params(c, whole);
        for (int i = 0; i < np; i++) biggest = whole[i].numel > biggest ? whole[i].numel : biggest;
    }
    float *buf = all ? titan_alloc(biggest * sizeof(float), "model: gathered tensor") : NULL;
    /* The group agrees first: a rank that could not allocate would leave the
     * others waiting in the first gather until the communicator's timeout. */
    int failed = !all || !counts || !loc || !buf;
    double nfailed = failed;
    titan_status st = g->sum_double(g->ctx, &nfailed);
    if (st == TITAN_OK && failed) st = TITAN_ERR_NOMEM; /* titan_alloc said what */
    else if (st == TITAN_OK && nfailed > 0)
        st = titan_error(TITAN_ERR_NOMEM, "%.0f of the %d ranks of the tp group ran out of memory", nfailed, tp.size);
    if (st != TITAN_OK) goto out;
    for (int r = 0; r < tp.size; r++) titan_llama_params_tp(c, (titan_llama_tp){tp.size, r}, all + (size_t)r * np);
    be->to_host(loc, titan_llama_params_data(m), nloc * sizeof(float));
    for (int i = 0; i < np && st == TITAN_OK; i++) {
        const titan_param *w = &whole[i];
        float *out = dst ? dst + w->offset : NULL;
        int d = w->place.tp_dim; /* the catalog's split */
        if (d < 0) { /* whole on every rank */
            if (out) memcpy(out, loc + mine[i].offset, w->numel * sizeof(float));
            continue;
        }
        for (int r = 0; r < tp.size; r++) counts[r] = all[(size_t)r * np + i].numel;
        /* rank order: dim-0 pieces are the tensor's rows in order already */
        st = g->all_gather_v_host(g->ctx, loc + mine[i].offset, d == 0 && out ? out : buf, counts);
        if (st != TITAN_OK || d == 0 || !out) continue;
        /* dim-1 pieces: rank r's columns of every row */
        size_t col0 = 0, off = 0, cols = (size_t)w->shape[1];
        for (int r = 0; r < tp.size; r++) {
            size_t wr = (size_t)all[(size_t)r * np + i].shape[1];
            for (int64_t row = 0; row < w->shape[0]; row++)
                memcpy(out + (size_t)row * cols + col0, buf + off + (size_t)row * wr, wr * sizeof(float));
            col0 += wr;
            off += counts[r];
        }
    }
out:
    if (st != TITAN_OK) titan_error_context("model: gathering the tensor-parallel pieces");
    titan_free(all);
    titan_free(counts);
    titan_free(loc);
    titan_free(buf);
    return st;
}
