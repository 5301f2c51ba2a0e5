/* overlap.c - partial clipping norms in the backward, AdamW block by block
 * on the side stream beside the next forward (overlap.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "train/overlap.h"

struct titan_overlap {
    titan_llama *model;
    const titan_backend *be;
    int nblocks;
    size_t *lo, *len;  /* each block's parameters: [lo, lo + len) of the flat buffers */
    double *sums;      /* backend memory: each block's sum of squares of the gradients */
    double *host_sums; /* read back */
    void **events;     /* per block, recorded after its update (deferred only) */
    int *pending;      /* the block's update is queued and its forward has not waited */
    int last, defer;
    int no_wait; /* TITAN_TEST_OVERLAP_NO_WAIT=1: the bug the tests must catch */
};

static titan_status on_before_forward(void *ctx, int block) {
    titan_overlap *o = ctx;
    if (o->pending[block]) {
        if (!o->no_wait) o->be->event_wait(o->events[block]);
        o->pending[block] = 0;
    }
    return TITAN_OK;
}

/* The block's gradients are final: its sum of squares, queued. */
static titan_status on_after_backward(void *ctx, int block) {
    titan_overlap *o = ctx;
    if (o->last)
        o->be->sumsq_into(o->sums + block, titan_llama_grads_data(o->model) + o->lo[block], o->len[block]);
    return TITAN_OK;
}

/* Each block's range of the flat parameters (catalog order is block order). */
static titan_status block_ranges(titan_overlap *o) {
    int np;
    const titan_param *ps = titan_llama_catalog(o->model, &np);
    size_t next = 0;
    for (int b = 0; b < o->nblocks; b++) o->lo[b] = SIZE_MAX;
    for (int i = 0; i < np; i++) {
        int b = ps[i].place.block;
        if (b < 0 || b >= o->nblocks || ps[i].offset != next || (o->lo[b] != SIZE_MAX && b != ps[i - 1].place.block))
            return titan_error(TITAN_ERR_FAIL, "optimizer overlap: parameter %d (block %d) is not where block order puts it",
                               i, b);
        if (o->lo[b] == SIZE_MAX) o->lo[b] = ps[i].offset;
        o->len[b] = ps[i].offset + ps[i].numel - o->lo[b];
        next = ps[i].offset + ps[i].numel;
    }
    if (next != titan_llama_params_count(o->model))
        return titan_error(TITAN_ERR_FAIL, "optimizer overlap: the catalog covers %zu of %zu parameters", next,
                           titan_llama_params_count(o->model));
    for (int b = 0; b < o->nblocks; b++)
        if (o->lo[b] == SIZE_MAX) o->lo[b] = 0, o->len[b] = 0; /* no parameters */
    return TITAN_OK;
}

titan_status titan_overlap_create(titan_overlap **out, titan_llama *model, int defer) {
    *out = NULL;
    titan_overlap *o = titan_alloc(sizeof *o, "optimizer overlap");
    if (!o) return TITAN_ERR_NOMEM;
    memset(o, 0, sizeof *o);
    o->model = model;
    o->be = titan_llama_backend(model);
    o->nblocks = titan_llama_blocks(model);
    o->last = 1;
    /* A deliberate bug for tests (tests/cli/overlap_emu.sh): a block's
     * forward reads its parameters without waiting for their update. */
    const char *nw = getenv("TITAN_TEST_OVERLAP_NO_WAIT");
    o->no_wait = nw && strcmp(nw, "1") == 0;
    o->defer = defer && o->be->side_stream && o->be->event_create;
    size_t nb = (size_t)o->nblocks;
    o->lo = titan_alloc(nb * sizeof *o->lo, "optimizer overlap");
    o->len = titan_alloc(nb * sizeof *o->len, "optimizer overlap");
    o->host_sums = titan_alloc(nb * sizeof *o->host_sums, "optimizer overlap");
    o->events = titan_alloc(nb * sizeof *o->events, "optimizer overlap");
    o->pending = titan_alloc(nb * sizeof *o->pending, "optimizer overlap");
    o->sums = o->be->alloc(nb * sizeof *o->sums);
    titan_status st = TITAN_OK;
    if (!o->lo || !o->len || !o->host_sums || !o->events || !o->pending)
        st = TITAN_ERR_NOMEM;
    else if (!o->sums)
        st = titan_error(TITAN_ERR_NOMEM, "optimizer overlap: cannot allocate %zu bytes of %s memory",
                         nb * sizeof *o->sums, o->be->name);
    else {
        memset(o->events, 0, nb * sizeof *o->events);
        memset(o->pending, 0, nb * sizeof *o->pending);
        st = block_ranges(o);
    }
    for (int b = 0; st == TITAN_OK && o->defer && b < o->nblocks; b++)
        if (!(o->events[b] = o->be->event_create()))
            st = titan_error(TITAN_ERR_NOMEM, "optimizer overlap: cannot create an event on %s", o->be->name);
    if (st != TITAN_OK) {
        titan_overlap_free(o);
        return st;
    }
    titan_llama_hooks h = {o, on_before_forward, NULL, NULL, on_after_backward, .regathers = 0};
    titan_llama_set_hooks(model, &h);
    *out = o;
    return TITAN_OK;
}

void titan_overlap_free(titan_overlap *o) {
    if (!o) return;
    if (o->model && o->sums) titan_llama_set_hooks(o->model, NULL);
    if (o->defer && o->events) {
        o->be->sync(); /* no update left running on what is freed after */
        for (int b = 0; b < o->nblocks; b++) o->be->event_free(o->events[b]);
    }
    if (o->sums) o->be->free(o->sums);
    titan_free(o->lo);
    titan_free(o->len);
    titan_free(o->host_sums);
    titan_free(o->events);
    titan_free(o->pending);
    titan_free(o);
}

int titan_overlap_deferred(const titan_overlap *o) { return o->defer; }

void titan_overlap_set_last(titan_overlap *o, int last) { o->last = last; }

double titan_overlap_norm(titan_overlap *o) {
    o->be->to_host(o->host_sums, o->sums, (size_t)o->nblocks * sizeof *o->host_sums);
    double ss = 0.0;
    for (int b = 0; b < o->nblocks; b++) ss += o->host_sums[b];
    return sqrt(ss);
}

void titan_overlap_update(titan_overlap *o, titan_adamw *adam, float *params, void *copy,
                          const float *grads, float clip, float lr) {
    titan_adamw_begin_step(adam);
    if (o->defer) o->be->side_stream(1); /* after the backward and the norm */
    for (int b = 0; b < o->nblocks; b++) { /* forward order: the first block's first */
        titan_adamw_step_range(adam, o->lo[b], o->len[b], params, copy, grads, clip, lr);
        if (o->defer) {
            o->be->event_record(o->events[b]);
            o->pending[b] = 1;
        }
    }
    if (o->defer) o->be->side_stream(0);
}

void titan_overlap_join(titan_overlap *o) {
    for (int b = 0; b < o->nblocks; b++)
        if (o->pending[b]) {
            o->be->event_wait(o->events[b]);
            o->pending[b] = 0;
        }
}
