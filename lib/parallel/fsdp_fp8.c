/* fsdp_fp8.c - FSDP's float8 all-gather (torchao's
 * enable_fsdp_float8_all_gather with
 * precompute_float8_dynamic_scale_for_fsdp): the weights of float8 linears
 * are cast to float8 on their shards and gathered as bytes, half the bytes
 * of bf16; the other tensors of a unit are gathered as before.
 *
 * Tensorwise only (the config refuses the rest, as torchtitan does): a
 * weight's scale comes from the whole tensor's amax, the shards' maxima
 * reduced over the shard group and, under tensor parallelism, the tp group
 * (torchao's all-reduce of a DTensor's amax), once per step for all the
 * weights after the optimizer step, before the first gather. The gathered
 * bytes are dequantized into the model's parameters (fp32 or its compute
 * copy), and the model's casts of those weights scale from the same amax
 * (titan_llama_set_fp8_weight_amax), so they give back these very bytes: in
 * fp32 the step is bit for bit the one that gathers in fp32. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "parallel/fsdp_impl.h"

/* Bytes tensor i's n elements take in the gather: 1 each (float8 codes)
 * or the parameter dtype's, each piece rounded up to 16 bytes so that the
 * next starts aligned for the device's convert and cast kernels. */
static size_t piece_bytes(const titan_fsdp *f, int i, size_t n) {
    size_t b = n * (f->fp8_lin[i] >= 0 ? 1 : titan_dtype_size(f->pdtype));
    return (b + 15) & ~(size_t)15;
}

/* v[n] = its max over communicator c (every rank's in rank order), through
 * the memory c takes: the backend's where it moves device buffers. */
static titan_status max_over(titan_fsdp *f, titan_comm *c, float *v, size_t n) {
    int size = titan_comm_size(c), me = titan_comm_rank(c);
    float *all = f->fp8_all;
    int dev = titan_comm_device_buffers(c) && !f->be->host;
    titan_status st;
    if (dev) {
        f->be->to_device(f->fp8_dev_all + (size_t)me * n, v, n * sizeof(float));
        st = titan_comm_all_gather(c, f->fp8_dev_all + (size_t)me * n, f->fp8_dev_all, n, TITAN_DTYPE_F32, NULL);
        if (st == TITAN_OK) f->be->to_host(all, f->fp8_dev_all, (size_t)size * n * sizeof(float));
    } else {
        memcpy(all + (size_t)me * n, v, n * sizeof(float));
        st = titan_comm_all_gather(c, all + (size_t)me * n, all, n, TITAN_DTYPE_F32, NULL);
    }
    if (st != TITAN_OK) return st;
    titan_fp8_amax_fold_ranks(all, size, n);
    memcpy(v, all, n * sizeof(float));
    return TITAN_OK;
}

titan_status titan_fsdp_fp8_refresh(titan_fsdp *f) {
    if (!f->fp8_stale) return TITAN_OK;
    /* not again on a failure here: the ranks must not disagree on the
     * collectives below (the error stops the run) */
    f->fp8_stale = 0;
    size_t np = (size_t)f->np;
    float *amax = f->fp8_host, *per_linear = f->fp8_host + np;
    /* the shards' maxima (a tensor this rank holds nothing of: 0) */
    for (int i = 0; i < f->np; i++) {
        if (f->fp8_lin[i] < 0) continue;
        size_t len = f->pieces[i].len;
        f->be->fp8_amax(TITAN_DTYPE_F32, f->fp8_dev + i, f->sp + f->pieces[i].shard_off, 1, (int)len,
                        TITAN_FP8_TENSOR);
    }
    f->be->to_host(amax, f->fp8_dev, np * sizeof(float));
    for (int i = 0; i < f->np; i++)
        if (f->fp8_lin[i] < 0) amax[i] = 0.0f;
    double t0 = titan_now_s();
    TITAN_TRY(max_over(f, f->mesh->shard_comm, amax, np));
    if (f->mesh->tp_comm) TITAN_TRY(max_over(f, f->mesh->tp_comm, amax, np));
    double dt = titan_now_s() - t0; /* blocking: all of it exposed */
    f->exposed_s += dt;
    f->total_s += dt;
    /* the amaxes, then the scales the gathers' casts and unpacks use */
    memset(per_linear, 0, (size_t)f->fp8_nlin * sizeof(float));
    for (int i = 0; i < f->np; i++)
        if (f->fp8_lin[i] >= 0) per_linear[f->fp8_lin[i]] = amax[i];
    TITAN_TRY(titan_llama_set_fp8_weight_amax(f->model, per_linear));
    f->be->to_device(f->fp8_dev, amax, np * sizeof(float));
    for (int i = 0; i < f->np; i++) amax[i] = titan_fp8_scale(amax[i], TITAN_FP8_E4M3, 0);
    f->be->to_device(f->fp8_dev + np, amax, np * sizeof(float));
    return TITAN_OK;
}

void titan_fsdp_fp8_pack(titan_fsdp *f, const unit *u, void *dst) {
    char *d = dst;
    for (int i = u->p0; i < u->p1; i++) {
        size_t len = f->pieces[i].len;
        const float *src = f->sp + f->pieces[i].shard_off;
        if (f->fp8_lin[i] >= 0)
            f->be->fp8_quantize(TITAN_DTYPE_F32, (uint8_t *)d, f->fp8_dev + 2 * (size_t)f->np, src, 1, (int)len,
                                TITAN_FP8_TENSOR, TITAN_FP8_E4M3, 0, f->fp8_dev + i);
        else
            f->be->convert(d, f->pdtype, src, TITAN_DTYPE_F32, len);
        d += piece_bytes(f, i, len);
    }
}

void titan_fsdp_fp8_unpack(titan_fsdp *f, const unit *u, const void *buf, void *flat, titan_dtype fdt) {
    int S = f->nshards;
    size_t fsz = titan_dtype_size(fdt);
    for (int r = 0; r < S; r++) {
        const char *b = (const char *)buf + u->fp8_rank_off[r];
        for (int i = u->p0; i < u->p1; i++) {
            const size_t *c = f->counts + (size_t)i * S;
            size_t fpos = f->pieces[i].param_off;
            for (int q = 0; q < r; q++) fpos += c[q];
            char *x = (char *)flat + fpos * fsz;
            if (f->fp8_lin[i] >= 0)
                f->be->fp8_dequantize(fdt, x, (const uint8_t *)b, f->fp8_dev + f->np + i, c[r], TITAN_FP8_E4M3);
            else
                f->be->convert(x, fdt, b, f->pdtype, c[r]);
            b += piece_bytes(f, i, c[r]);
        }
    }
}

titan_status titan_fsdp_set_float8_gather(titan_fsdp *f, size_t *saved) {
    *saved = 0;
    if (f->nshards == 1 || f->fp8_lin) return TITAN_OK;
    int S = f->nshards, tp = f->mesh->tp_comm ? titan_comm_size(f->mesh->tp_comm) : 1;
    int most = S > tp ? S : tp;
    const titan_llama_config *mc = titan_llama_get_config(f->model);
    f->fp8_nlin = mc->n_layers * 7 + 1;
    f->fp8_lin = titan_alloc((size_t)f->np * sizeof(int), "float8 all-gather plan");
    f->fp8_host = titan_alloc(((size_t)f->np + (size_t)f->fp8_nlin) * sizeof(float), "float8 all-gather amax");
    f->fp8_all = titan_alloc((size_t)most * (size_t)f->np * sizeof(float), "float8 all-gather amax");
    if (!f->fp8_lin || !f->fp8_host || !f->fp8_all) return TITAN_ERR_NOMEM;
    int any = 0;
    for (int i = 0; i < f->np; i++) {
        f->fp8_lin[i] = titan_llama_fp8_param_linear(f->model, i);
        if (f->fp8_lin[i] >= 0 && f->pieces[i].len > (size_t)INT_MAX)
            return titan_error(TITAN_ERR_USAGE, "fsdp float8 all-gather: parameter %d's shard of %zu elements is "
                               "over %d", i, f->pieces[i].len, INT_MAX);
        any |= f->fp8_lin[i] >= 0;
    }
    /* amax, scale per tensor, a scale of scratch; the group's amaxes */
    f->fp8_dev = f->be->alloc((2 * (size_t)f->np + 1) * sizeof(float));
    f->fp8_dev_all = f->be->alloc((size_t)most * (size_t)f->np * sizeof(float));
    if (!f->fp8_dev || !f->fp8_dev_all)
        return titan_error(TITAN_ERR_NOMEM, "fsdp float8 all-gather: amax buffers (%s): out of memory", f->be->name);
    memset(f->fp8_host, 0, (size_t)f->np * sizeof(float));
    f->be->to_device(f->fp8_dev, f->fp8_host, (size_t)f->np * sizeof(float)); /* the other tensors' slots */
    /* each unit's bytes rank by rank */
    size_t esz = titan_dtype_size(f->pdtype);
    for (int k = 0; k < f->nunits; k++) {
        unit *u = &f->units[k];
        u->fp8_counts = titan_alloc(2 * (size_t)S * sizeof(size_t), "float8 unit counts");
        if (!u->fp8_counts) return TITAN_ERR_NOMEM;
        u->fp8_rank_off = u->fp8_counts + S;
        size_t off = 0;
        for (int r = 0; r < S; r++) {
            u->fp8_counts[r] = 0;
            for (int i = u->p0; i < u->p1; i++) u->fp8_counts[r] += piece_bytes(f, i, f->counts[(size_t)i * S + r]);
            u->fp8_rank_off[r] = off;
            off += u->fp8_counts[r];
        }
        u->fp8_bytes = off;
        if (u->full_len * esz > off) *saved += u->full_len * esz - off;
    }
    f->fp8_stale = 1;
    f->fp8_gather = any;
    return titan_fsdp_fp8_staging(f); /* the layout's padding may take more */
}

void titan_fsdp_fp8_free(titan_fsdp *f) {
    if (f->fp8_dev) f->be->free(f->fp8_dev);
    if (f->fp8_dev_all) f->be->free(f->fp8_dev_all);
    titan_free(f->fp8_lin);
    titan_free(f->fp8_host);
    titan_free(f->fp8_all);
    for (int u = 0; f->units && u < f->nunits; u++) titan_free(f->units[u].fp8_counts);
}
