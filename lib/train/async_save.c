/* async_save.c - one background writer thread per save, one save at a time;
 * for a multi-rank job, a thread per rank and a collective commit. */
#include "train/async_save.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "train/state_dist.h"

struct titan_async_saver {
    const titan_backend *be; /* whose memory start's view points to */
    size_t n, nm;          /* floats of the parameters, of each moment */
    float *params, *exp_avg, *exp_avg_sq; /* the snapshot */
    int pinned;            /* the snapshot is be->host_alloc's (titan_async_saver_pin) */
    float *aux;            /* of the optimizer's aux tensors (GaLore's) */
    size_t aux_cap;
    /* the save in flight */
    pthread_t thread;
    int running;           /* a thread was started and not joined */
    atomic_int done;       /* the thread finished */
    char root[4096];
    const titan_tokenizer *tokenizer; /* the caller's: it outlives the saver */
    titan_llama_config mc;
    titan_state_view view;
    titan_train_progress progress;
    int keep_latest_k;
    titan_status status;   /* the thread's result */
    char message[1024];    /* and its error message */
    /* sharded saves (NULL mesh: one process) */
    titan_mesh *mesh;
    const titan_shard_piece *pieces;
    titan_shard_save *shard; /* started and not yet committed */
    double started;          /* when it started (titan_now_s) */
};

titan_status titan_async_saver_create(titan_async_saver **out, const titan_backend *be, size_t n) {
    *out = NULL;
    titan_async_saver *s = titan_alloc(sizeof *s, "async checkpoint");
    if (!s) return TITAN_ERR_NOMEM;
    memset(s, 0, sizeof *s);
    s->be = be;
    s->n = s->nm = n;
    s->params = titan_alloc(n * sizeof(float), "async checkpoint snapshot (parameters)");
    s->exp_avg = titan_alloc(n * sizeof(float), "async checkpoint snapshot (exp_avg)");
    s->exp_avg_sq = titan_alloc(n * sizeof(float), "async checkpoint snapshot (exp_avg_sq)");
    if (!s->params || !s->exp_avg || !s->exp_avg_sq) {
        titan_async_saver_free(s);
        return TITAN_ERR_NOMEM;
    }
    *out = s;
    return TITAN_OK;
}

static void *writer_main(void *arg) {
    titan_async_saver *s = arg;
    if (s->shard) { /* finish (collective) reports the outcome */
        titan_shard_save_set_optim(s->shard, &s->view);
        titan_shard_save_write(s->shard, s->view.params, s->view.exp_avg, s->view.exp_avg_sq);
        atomic_store(&s->done, 1);
        return NULL;
    }
    double t0 = titan_now_s();
    s->status = titan_state_save_view(s->root, &s->mc, &s->view, &s->progress, s->tokenizer,
                                      s->keep_latest_k);
    if (s->status != TITAN_OK) snprintf(s->message, sizeof s->message, "%s", titan_error_message());
    else titan_info("checkpoint: step %" PRId64 " written in %.2f s (in the background)", s->progress.step,
                    titan_now_s() - t0);
    atomic_store(&s->done, 1);
    return NULL;
}

/* Joins a started thread; re-raises its error in the calling thread. */
static titan_status join(titan_async_saver *s) {
    if (!s->running) return TITAN_OK;
    pthread_join(s->thread, NULL);
    s->running = 0;
    if (s->status == TITAN_OK) return TITAN_OK;
    return titan_error(s->status, "checkpoint step %" PRId64 " (written in the background): %s", s->progress.step,
                       s->message);
}

/* Sharded: waits for this rank's thread, then commits with the others. */
static titan_status commit_shard(titan_async_saver *s) {
    if (!s->shard) return TITAN_OK;
    if (s->running) pthread_join(s->thread, NULL);
    s->running = 0;
    titan_shard_save *ss = s->shard;
    s->shard = NULL;
    double t0 = titan_now_s();
    titan_status st = titan_shard_save_finish(ss, s->keep_latest_k);
    double t1 = titan_now_s();
    if (st == TITAN_OK)
        titan_info("checkpoint: step %" PRId64 " saved in the background (%.2f s after the save started; "
                   "commit %.3f s)", s->progress.step, t1 - s->started, t1 - t0);
    return st;
}

titan_status titan_async_save_wait(titan_async_saver *s) { return s->mesh ? commit_shard(s) : join(s); }

titan_status titan_async_save_poll(titan_async_saver *s) {
    if (s->mesh) {
        if (!s->shard) return TITAN_OK; /* the same on every rank: saves start and commit together */
        int world = s->mesh->world;
        uint32_t done = (uint32_t)atomic_load(&s->done);
        uint32_t *all = malloc((size_t)world * sizeof *all);
        titan_status st = all ? titan_comm_all_gather(s->mesh->world_comm, &done, all, 1, TITAN_DTYPE_U32, NULL)
                              : titan_error(TITAN_ERR_NOMEM, "checkpoint: flags of %d ranks: out of memory", world);
        int waiting = 0;
        for (int r = 0; st == TITAN_OK && r < world; r++) waiting |= !all[r];
        free(all);
        if (st != TITAN_OK || waiting) return st;
        return commit_shard(s);
    }
    if (!s->running || !atomic_load(&s->done)) return TITAN_OK;
    return join(s);
}

static void free_snapshot(titan_async_saver *s) {
    float *arrays[3] = {s->params, s->exp_avg, s->exp_avg_sq};
    for (int i = 0; i < 3; i++) {
        if (s->pinned) s->be->host_free(arrays[i]);
        else titan_free(arrays[i]);
    }
    s->params = s->exp_avg = s->exp_avg_sq = NULL;
}

void titan_async_saver_free(titan_async_saver *s) {
    if (!s) return;
    if (s->running) pthread_join(s->thread, NULL);
    titan_shard_save_abort(s->shard);
    free_snapshot(s);
    titan_free(s->aux);
    titan_free(s);
}

titan_status titan_async_saver_set_moment_numel(titan_async_saver *s, size_t nm) {
    if (s->n == 0 || nm == s->nm) return TITAN_OK; /* a rank that saves nothing keeps nothing */
    TITAN_ASSERT(!s->pinned && !s->running && !s->shard);
    titan_free(s->exp_avg);
    titan_free(s->exp_avg_sq);
    s->nm = nm;
    s->exp_avg = titan_alloc((nm ? nm : 1) * sizeof(float), "async checkpoint snapshot (exp_avg)");
    s->exp_avg_sq = titan_alloc((nm ? nm : 1) * sizeof(float), "async checkpoint snapshot (exp_avg_sq)");
    return s->exp_avg && s->exp_avg_sq ? TITAN_OK : TITAN_ERR_NOMEM;
}

int titan_async_saver_pin(titan_async_saver *s) {
    if (s->pinned || s->running || s->shard) return s->pinned;
    if (!s->be->host_alloc || !s->be->host_free || s->n == 0) return 0;
    size_t bytes = s->n * sizeof(float), mbytes = (s->nm ? s->nm : 1) * sizeof(float);
    float *p = s->be->host_alloc(bytes), *m = p ? s->be->host_alloc(mbytes) : NULL;
    float *v = m ? s->be->host_alloc(mbytes) : NULL;
    if (!v) { /* all or none */
        if (m) s->be->host_free(m);
        if (p) s->be->host_free(p);
        return 0;
    }
    free_snapshot(s);
    s->params = p, s->exp_avg = m, s->exp_avg_sq = v;
    s->pinned = 1;
    return 1;
}

titan_status titan_async_saver_create_sharded(titan_async_saver **out, titan_mesh *mesh, const titan_backend *be,
                                              const titan_llama_config *mc, const titan_shard_piece *pieces,
                                              size_t n) {
    int np = titan_llama_params(mc, NULL), writes = 0;
    for (int i = 0; i < np; i++) writes |= pieces[i].len && pieces[i].writes;
    TITAN_TRY(titan_async_saver_create(out, be, writes ? n : 0));
    (*out)->mesh = mesh;
    (*out)->pieces = pieces;
    return TITAN_OK;
}

/* The optimizer's mask and aux tensors (GaLore's, backend memory) into the snapshot. */
static titan_status snapshot_aux(titan_async_saver *s, const titan_state_view *v) {
    s->view.flat_mask = v->flat_mask;
    s->view.moment_off = v->moment_off;
    s->view.moment_numel = v->moment_numel;
    s->view.aux = v->aux;
    s->view.n_aux = v->n_aux;
    return titan_state_aux_to_host(s->be, v, &s->aux, &s->aux_cap, "async checkpoint snapshot (GaLore state)",
                                   &s->view.aux_data);
}

/* Sharded: a collective start, then this rank's thread writes its part. */
static titan_status start_shard(titan_async_saver *s, const titan_state_view *v, const titan_train_progress *pr) {
    if (!v->exp_avg && !v->model_only)
        return titan_error(TITAN_ERR_USAGE, "checkpoint step %" PRId64 ": a sharded save needs the AdamW moments",
                           pr->step);
    TITAN_TRY(titan_shard_save_begin(&s->shard, s->mesh, s->pieces, s->root, &s->mc, pr, s->tokenizer,
                                     &s->view));
    s->started = titan_now_s();
    if (s->n == 0) { /* nothing of ours to write: no thread */
        writer_main(s);
        return TITAN_OK;
    }
    int rc = pthread_create(&s->thread, NULL, writer_main, s);
    if (rc == 0) {
        s->running = 1;
        return TITAN_OK;
    }
    /* The other ranks went ahead: write here rather than leave them waiting. */
    titan_warn("checkpoint step %" PRId64 ": cannot start the writer thread (%s); writing in the loop", pr->step,
               strerror(rc));
    writer_main(s);
    return TITAN_OK;
}

titan_status titan_async_save_start(titan_async_saver *s, const char *root, const titan_llama_config *mc,
                                    const titan_state_view *v, const titan_train_progress *progress,
                                    const titan_tokenizer *tokenizer, int keep_latest_k, double *stall_s) {
    double t0 = titan_now_s();
    *stall_s = 0.0;
    titan_status st = titan_async_save_wait(s);
    if (st != TITAN_OK) return st;
    size_t bytes = s->n * sizeof(float);
    /* the snapshot: straight from the device's memory where v is there */
    s->be->to_host(s->params, v->params, bytes);
    s->view.params = s->params;
    s->view.exp_avg = NULL;
    s->view.exp_avg_sq = NULL;
    s->view.adam_step = v->adam_step;
    s->view.model_only = v->model_only;
    s->view.dtype = v->dtype;
    if (v->exp_avg && !v->model_only) {
        /* a rank that saves no box (n 0) copies nothing */
        size_t mbytes = s->n ? (v->moment_numel ? v->moment_numel : s->n) * sizeof(float) : 0;
        if (mbytes > s->nm * sizeof(float))
            return titan_error(TITAN_ERR_USAGE, "checkpoint step %" PRId64 ": moments of %zu floats, a snapshot of "
                               "%zu (titan_async_saver_set_moment_numel)", progress->step, mbytes / sizeof(float), s->nm);
        s->be->to_host(s->exp_avg, v->exp_avg, mbytes);
        s->be->to_host(s->exp_avg_sq, v->exp_avg_sq, mbytes);
        s->view.exp_avg = s->exp_avg;
        s->view.exp_avg_sq = s->exp_avg_sq;
    }
    TITAN_TRY(snapshot_aux(s, v));
    snprintf(s->root, sizeof s->root, "%s", root);
    s->tokenizer = tokenizer;
    s->mc = *mc;
    s->progress = *progress;
    s->keep_latest_k = keep_latest_k;
    s->status = TITAN_OK;
    s->message[0] = '\0';
    atomic_store(&s->done, 0);
    if (s->mesh) {
        st = start_shard(s, v, progress);
        *stall_s = titan_now_s() - t0;
        return st;
    }
    int rc = pthread_create(&s->thread, NULL, writer_main, s);
    if (rc != 0) return titan_error(TITAN_ERR_FAIL, "checkpoint step %" PRId64 ": cannot start the writer thread: %s",
                                    progress->step, strerror(rc));
    s->running = 1;
    *stall_s = titan_now_s() - t0;
    return TITAN_OK;
}
