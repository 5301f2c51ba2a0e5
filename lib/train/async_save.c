/* async_save.c - one background writer thread per save, one save at a time. */
#include "train/async_save.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"

struct titan_async_saver {
    size_t n;
    float *params, *exp_avg, *exp_avg_sq; /* the snapshot */
    /* the save in flight */
    pthread_t thread;
    int running;           /* a thread was started and not joined */
    atomic_int done;       /* the thread finished */
    char root[4096];
    char tokenizer_id[64];
    titan_llama_config mc;
    titan_state_view view;
    titan_train_progress progress;
    int keep_latest_k;
    titan_status status;   /* the thread's result */
    char message[1024];    /* and its error message */
};

titan_status titan_async_saver_create(titan_async_saver **out, size_t n) {
    *out = NULL;
    titan_async_saver *s = titan_alloc(sizeof *s, "async checkpoint");
    if (!s) return TITAN_ERR_NOMEM;
    memset(s, 0, sizeof *s);
    s->n = n;
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
    double t0 = titan_now_s();
    s->status = titan_state_save_view(s->root, &s->mc, &s->view, &s->progress, s->tokenizer_id,
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

titan_status titan_async_save_wait(titan_async_saver *s) { return join(s); }

titan_status titan_async_save_poll(titan_async_saver *s) {
    if (!s->running || !atomic_load(&s->done)) return TITAN_OK;
    return join(s);
}

void titan_async_saver_free(titan_async_saver *s) {
    if (!s) return;
    if (s->running) pthread_join(s->thread, NULL);
    titan_free(s->params);
    titan_free(s->exp_avg);
    titan_free(s->exp_avg_sq);
    titan_free(s);
}

titan_status titan_async_save_start(titan_async_saver *s, const char *root, const titan_llama_config *mc,
                                    const titan_state_view *v, const titan_train_progress *progress,
                                    const char *tokenizer_id, int keep_latest_k, double *stall_s) {
    double t0 = titan_now_s();
    *stall_s = 0.0;
    titan_status st = join(s);
    if (st != TITAN_OK) return st;
    size_t bytes = s->n * sizeof(float);
    memcpy(s->params, v->params, bytes);
    s->view.params = s->params;
    s->view.exp_avg = NULL;
    s->view.exp_avg_sq = NULL;
    s->view.adam_step = v->adam_step;
    if (v->exp_avg) {
        memcpy(s->exp_avg, v->exp_avg, bytes);
        memcpy(s->exp_avg_sq, v->exp_avg_sq, bytes);
        s->view.exp_avg = s->exp_avg;
        s->view.exp_avg_sq = s->exp_avg_sq;
    }
    snprintf(s->root, sizeof s->root, "%s", root);
    snprintf(s->tokenizer_id, sizeof s->tokenizer_id, "%s", tokenizer_id);
    s->mc = *mc;
    s->progress = *progress;
    s->keep_latest_k = keep_latest_k;
    s->status = TITAN_OK;
    s->message[0] = '\0';
    atomic_store(&s->done, 0);
    int rc = pthread_create(&s->thread, NULL, writer_main, s);
    if (rc != 0) return titan_error(TITAN_ERR_FAIL, "checkpoint step %" PRId64 ": cannot start the writer thread: %s",
                                    progress->step, strerror(rc));
    s->running = 1;
    *stall_s = titan_now_s() - t0;
    return TITAN_OK;
}
