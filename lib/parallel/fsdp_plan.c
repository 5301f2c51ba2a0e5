/* fsdp_plan.c - which rank holds what under FSDP: the shard plan of a
 * layout (each parameter's box and the rank's packed pieces), the
 * communication plan parsed from parallelism.comm_bucket_plan, and the
 * units built from it. */
#include "parallel/fsdp.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "parallel/fsdp_impl.h"

titan_status titan_shard_plan(const titan_layout *l, const titan_llama_config *mc, int rank,
                              titan_shard_piece *pieces, size_t *nshard) {
    titan_layout_coord c;
    titan_layout_coord_of(l, rank, &c);
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    /* what the rank's model holds */
    titan_llama_pp pp = {.size = l->pp, .stage = c.pp, .v = l->pp_v, .first_less = l->pp_first_less,
                         .last_less = l->pp_last_less,
                         .vshape = l->pp_vshape, .layers = l->pp_layers};
    titan_param *loc = ps ? titan_llama_params_local_new(mc, (titan_llama_tp){l->tp, c.tp}, pp, &np) : NULL;
    if (!loc) {
        free(ps);
        return TITAN_ERR_NOMEM;
    }
    size_t off = 0;
    for (int i = 0; i < np; i++) {
        titan_shard_piece *p = &pieces[i];
        memset(p, 0, sizeof *p);
        p->param_off = loc[i].offset;
        p->full_off = loc[i].offset + loc[i].numel;
        p->shard_off = off;
        if (!titan_layout_box(l, mc->n_layers, ps[i].place, ps[i].ndim, ps[i].shape, rank, &p->box, &p->writes))
            continue;
        /* FSDP's dim-0 chunk of the tp-local tensor is one contiguous run
         * of its rows; the box is global, so rows split by tp start at the
         * tp piece's first row. */
        int64_t tp_row0 = 0, tp_rows;
        if (ps[i].place.tp_dim == 0) titan_layout_chunk(ps[i].shape[0], l->tp, c.tp, &tp_row0, &tp_rows);
        size_t row = loc[i].numel / (size_t)loc[i].shape[0];
        p->full_off = loc[i].offset + (size_t)(p->box.offset[0] - tp_row0) * row;
        p->len = (size_t)titan_box_numel(&p->box);
        off += p->len;
    }
    *nshard = off;
    free(ps);
    free(loc);
    return TITAN_OK;
}

/* ---- plan -------------------------------------------------------------- */

titan_status titan_fsdp_parse_plan(const char *s, int n_blocks, int sharded, int *units, titan_fsdp_options *opt) {
    opt->unit_of_block = NULL;
    opt->bucket_bytes = 0;
    if (strcmp(s, "auto") == 0) {
        opt->bucket_bytes = sharded ? 0 : DDP_BUCKET_BYTES;
        return TITAN_OK;
    }
    if (strcmp(s, "blocks") == 0) return TITAN_OK;
    if (strcmp(s, "whole") == 0) {
        for (int b = 0; b < n_blocks; b++) units[b] = 0;
        opt->unit_of_block = units;
        return TITAN_OK;
    }
    if (strncmp(s, "size:", 5) == 0) {
        char *end;
        double mb = strtod(s + 5, &end);
        if (end == s + 5 || *end || !(mb > 0) || mb > 1e9)
            goto bad;
        opt->bucket_bytes = (size_t)(mb * 1048576.0);
        return TITAN_OK;
    }
    const char *p = s;
    for (int b = 0; b < n_blocks; b++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) goto bad;
        int prev = b ? units[b - 1] : 0;
        if (v != prev && v != prev + 1) goto bad;
        if (b == 0 && v != 0) goto bad;
        units[b] = (int)v;
        p = end;
        if (b + 1 < n_blocks && *p++ != ',') goto bad;
    }
    if (*p) goto bad;
    opt->unit_of_block = units;
    return TITAN_OK;
bad:
    titan_error(TITAN_ERR_USAGE, "parallelism.comm_bucket_plan = \"%s\": expected auto, blocks, whole, size:MB or "
                "%d comma-separated unit ids (0 first, each the same as or one more than the previous)", s, n_blocks);
    titan_error_hint("blocks are 0 = embedding, 1..n_layers = layers, %d = norm and output", n_blocks - 1);
    return TITAN_ERR_USAGE;
}

/* unit_of[nb]: each block's unit under the plan opt, over the tp-local
 * catalog ps[np] (its parameters' blocks and sizes). */
static titan_status assign_units(const titan_param *ps, int np, int nb, const titan_fsdp_options *opt, int *unit_of) {
    size_t *bytes = titan_alloc((size_t)nb * sizeof *bytes, "communication units"); /* per block */
    if (!bytes) return TITAN_ERR_NOMEM;
    for (int i = 0; i < np; i++) bytes[ps[i].place.block] += ps[i].numel * sizeof(float);
    if (opt && opt->unit_of_block) {
        for (int b = 0; b < nb; b++) unit_of[b] = opt->unit_of_block[b];
    } else {
        size_t cap = opt ? opt->bucket_bytes : 0, have = 0;
        int u = 0;
        for (int b = 0; b < nb; b++) {
            if (b > 0 && (cap == 0 || have + bytes[b] > cap)) {
                u++;
                have = 0;
            }
            have += bytes[b];
            unit_of[b] = u;
        }
    }
    titan_free(bytes);
    return TITAN_OK;
}

titan_status titan_fsdp_plan_memory(const titan_layout *l, const titan_llama_config *mc, int rank,
                                    const titan_fsdp_options *opt, titan_fsdp_memory *out) {
    memset(out, 0, sizeof *out);
    int np = titan_llama_params(mc, NULL), nb = mc->n_layers + 2;
    titan_layout_coord c;
    titan_layout_coord_of(l, rank, &c);
    titan_llama_pp pp = {.size = l->pp, .stage = c.pp, .v = l->pp_v, .first_less = l->pp_first_less,
                         .last_less = l->pp_last_less,
                         .vshape = l->pp_vshape, .layers = l->pp_layers};
    titan_shard_piece *pieces = titan_alloc((size_t)np * sizeof *pieces, "shard plan");
    int *unit_of = titan_alloc((size_t)nb * sizeof *unit_of, "unit plan");
    size_t *len = titan_alloc((size_t)nb * sizeof *len, "unit plan");
    int nl;
    titan_param *loc = titan_llama_params_local_new(mc, (titan_llama_tp){l->tp, c.tp}, pp, &nl);
    titan_status st = pieces && unit_of && len && loc ? TITAN_OK : TITAN_ERR_NOMEM;
    if (st == TITAN_OK) st = titan_shard_plan(l, mc, rank, pieces, &out->nshard);
    if (st == TITAN_OK) st = assign_units(loc, nl, nb, opt, unit_of);
    if (st == TITAN_OK) {
        out->nshards = l->dp_shard * l->cp; /* fsdp.c's shard group */
        out->nunits = unit_of[nb - 1] + 1;
        memset(len, 0, (size_t)nb * sizeof *len);
        for (int i = 0; i < nl; i++) len[unit_of[loc[i].place.block]] += loc[i].numel;
        for (int u = 0; u < out->nunits; u++) {
            if (len[u] > out->unit_max) out->unit_max = len[u];
            out->nonempty += len[u] > 0;
        }
        /* fsdp.c's units count their tensors, empty ones (another stage's) too */
        for (int u = 0; u < out->nunits; u++) {
            int nt = 0;
            for (int i = 0; i < nl; i++) nt += unit_of[loc[i].place.block] == u;
            if (len[u] > 0 && nt > out->unit_tensors_max) out->unit_tensors_max = nt;
        }
        /* a unit's shard: its tensors' pieces, packed in catalog order */
        memset(len, 0, (size_t)nb * sizeof *len);
        for (int i = 0; i < nl && i < np; i++) len[unit_of[loc[i].place.block]] += pieces[i].len;
        for (int u = 0; u < out->nunits; u++)
            if (len[u] > out->unit_shard_max) out->unit_shard_max = len[u];
        out->first_unit = len[0];
        out->last_unit = len[out->nunits - 1];
    }
    titan_free(pieces);
    titan_free(unit_of);
    titan_free(len);
    free(loc);
    return st;
}

titan_status titan_fsdp_make_units(titan_fsdp *f, const titan_fsdp_options *opt) {
    int nb = f->nblocks, np;
    const titan_param *ps = titan_llama_catalog(f->model, &np); /* the tp-local shapes */
    TITAN_ASSERT(np == f->np);
    TITAN_TRY(assign_units(ps, np, nb, opt, f->unit_of));
    f->nunits = f->unit_of[nb - 1] + 1;
    f->units = titan_alloc((size_t)f->nunits * sizeof *f->units, "communication units");
    if (!f->units) return TITAN_ERR_NOMEM;
    memset(f->units, 0, (size_t)f->nunits * sizeof *f->units);
    for (int u = 0; u < f->nunits; u++) {
        f->units[u].first_block = nb;
        f->units[u].p0 = f->np;
    }
    for (int b = 0; b < nb; b++) {
        unit *u = &f->units[f->unit_of[b]];
        if (b < u->first_block) u->first_block = b;
        u->last_block = b;
    }
    /* Catalog order is block order, so each unit's tensors are one run. */
    for (int i = 0; i < f->np; i++) {
        unit *u = &f->units[f->unit_of[ps[i].place.block]];
        if (i < u->p0) u->p0 = i;
        u->p1 = i + 1;
    }
    int S = f->nshards;
    for (int u = 0; u < f->nunits; u++) {
        unit *x = &f->units[u];
        x->counts = titan_alloc(2 * (size_t)S * sizeof(size_t), "unit counts");
        if (!x->counts) return TITAN_ERR_NOMEM;
        x->rank_off = x->counts + S;
        x->state = READY;
        /* Blocks without parameters, or only empty ones (another pipeline
         * stage's): an empty run, nothing to gather or reduce. */
        if (x->p1 <= x->p0 || ps[x->p1 - 1].offset + ps[x->p1 - 1].numel == ps[x->p0].offset) {
            x->p0 = x->p1 = 0;
            continue;
        }
        x->shard_off = f->pieces[x->p0].shard_off;
        x->shard_len = f->pieces[x->p1 - 1].shard_off + f->pieces[x->p1 - 1].len - x->shard_off;
        x->full_off = ps[x->p0].offset;
        x->full_len = ps[x->p1 - 1].offset + ps[x->p1 - 1].numel - x->full_off;
        size_t off = 0;
        for (int r = 0; r < S; r++) {
            for (int i = x->p0; i < x->p1; i++) x->counts[r] += f->counts[(size_t)i * S + r];
            x->rank_off[r] = off;
            off += x->counts[r];
        }
        if (S > 1) x->state = STALE;
    }
    return TITAN_OK;
}

void titan_fsdp_staging(const titan_fsdp_memory *fm, titan_dtype pd, titan_dtype rd, int replicate_staged,
                        int fp8_gather, int *count, size_t *bytes) {
    size_t pe = titan_dtype_size(pd), re = titan_dtype_size(rd);
    *count = 0;
    *bytes = 0;
    if (fm->nshards > 1) { /* gathers, reduce-scatters, and all-reduces of a unit's shard */
        *bytes = fm->unit_max * (pe > re ? pe : re);
        /* fsdp_fp8.c: each rank's piece of a tensor rounded up to 16 bytes */
        size_t fp8 = fm->unit_max * pe + (size_t)15 * (size_t)fm->nshards * (size_t)fm->unit_tensors_max;
        if (fp8_gather && fp8 > *bytes) *bytes = fp8;
    } else if (replicate_staged) {
        *bytes = fm->unit_max * re;
    }
    if (*bytes) *count = fm->nonempty < NSTAGE ? fm->nonempty : NSTAGE;
    if (!*count) *bytes = 0;
}
