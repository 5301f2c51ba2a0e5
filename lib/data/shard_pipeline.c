/* shard_pipeline.c - batches of documents tokenized by a pool of pthreads,
 * written in order by the caller's thread (see shard_pipeline.h).
 *
 * The batches live in a ring of slots. Batch number s uses slot s % n_slots;
 * three counters order everything: `filled` batches were queued, `started`
 * were taken by some thread, `written` were written. Only the caller's
 * thread fills and writes, so a slot belongs to it from written to filled;
 * workers touch a queued slot's documents only between taking it and
 * marking it done, all under the one mutex. Workers never report errors:
 * encoding cannot fail (memory is allocated by the caller beforehand). */
#include "data/shard_pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mem.h"

#define BATCH_BYTES (1u << 19) /* text per batch: enough to amortise the handoff, small for balance */

typedef struct {
    titan_shard_writer *w;
    size_t off, len; /* text[off, off+len); its tokens go to ids[off...] (never more tokens than bytes) */
    size_t tokens;   /* set when tokenized */
} doc;

typedef struct {
    char *text;
    size_t text_len, text_cap;
    uint32_t *ids;
    size_t ids_cap;
    doc *docs;
    size_t n_docs, docs_cap;
    int done; /* tokenized; guarded by the mutex */
} batch;

struct titan_shard_pipeline {
    const titan_tokenizer *tok;
    batch *slots;
    int n_slots, n_workers, failed;
    uint64_t filled, started, written;
    titan_shard_pipeline_counts counts;
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a batch was queued, or stop */
    pthread_cond_t done_cv; /* a batch was tokenized */
    int sync_ok, stop;
};

int titan_shard_pipeline_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

static void tokenize(const titan_tokenizer *tok, batch *b) {
    for (size_t i = 0; i < b->n_docs; i++) {
        doc *d = &b->docs[i];
        d->tokens = titan_tokenizer_encode(tok, b->text + d->off, d->len, b->ids + d->off, d->len);
        TITAN_ASSERT(d->tokens <= d->len); /* the tokenizer API promises it */
    }
}

static void *worker_main(void *arg) {
    titan_shard_pipeline *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->started == p->filled) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop) break;
        batch *b = &p->slots[p->started++ % (uint64_t)p->n_slots];
        pthread_mutex_unlock(&p->mu);
        tokenize(p->tok, b);
        pthread_mutex_lock(&p->mu);
        b->done = 1;
        pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

titan_status titan_shard_pipeline_open(titan_shard_pipeline **out, const titan_tokenizer *tok, int threads) {
    *out = NULL;
    if (threads < 1) return titan_error(TITAN_ERR_USAGE, "threads: %d (at least 1)", threads);
    titan_shard_pipeline *p = titan_alloc(sizeof *p, "shard pipeline");
    if (!p) return TITAN_ERR_NOMEM;
    p->tok = tok;
    /* Two batches per thread keep every thread busy while the caller reads;
     * one more is the one being filled. */
    p->n_slots = threads == 1 ? 1 : 2 * threads + 1;
    p->slots = calloc((size_t)p->n_slots, sizeof *p->slots);
    p->workers = calloc((size_t)threads, sizeof *p->workers);
    if (!p->slots || !p->workers) {
        titan_shard_pipeline_free(p);
        return titan_error(TITAN_ERR_NOMEM, "shard pipeline: %d batches", p->n_slots);
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        titan_shard_pipeline_free(p);
        return titan_error(TITAN_ERR_FAIL, "shard pipeline: cannot create a mutex");
    }
    if (pthread_cond_init(&p->work_cv, NULL) != 0 || pthread_cond_init(&p->done_cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        titan_shard_pipeline_free(p);
        return titan_error(TITAN_ERR_FAIL, "shard pipeline: cannot create condition variables");
    }
    p->sync_ok = 1;
    for (int i = 0; i < threads - 1; i++) {
        int rc = pthread_create(&p->workers[i], NULL, worker_main, p);
        if (rc != 0) {
            titan_shard_pipeline_free(p);
            titan_status st = titan_error(TITAN_ERR_FAIL, "shard pipeline: cannot start thread %d of %d: %s",
                                          i + 2, threads, strerror(rc));
            titan_error_hint("give fewer threads with -j");
            return st;
        }
        p->n_workers++;
    }
    *out = p;
    return TITAN_OK;
}

static titan_status write_batch(titan_shard_pipeline *p, batch *b) {
    for (size_t i = 0; i < b->n_docs; i++) {
        const doc *d = &b->docs[i];
        TITAN_TRY(titan_shard_writer_add_encoded(d->w, b->ids + d->off, d->tokens, d->len));
        p->counts.documents++;
        p->counts.tokens += d->tokens + 2;
        p->counts.text_bytes += d->len;
    }
    b->n_docs = 0;
    b->text_len = 0;
    b->done = 0;
    return TITAN_OK;
}

/* Writes finished batches in order. With room, until the ring has a free
 * slot; with all, until every queued batch is written. While the oldest is
 * not done it tokenizes a queued batch itself, or waits. */
static titan_status drain(titan_shard_pipeline *p, int all) {
    titan_status st = TITAN_OK;
    pthread_mutex_lock(&p->mu);
    while (st == TITAN_OK && p->written < p->filled) {
        batch *b = &p->slots[p->written % (uint64_t)p->n_slots];
        if (b->done) {
            pthread_mutex_unlock(&p->mu); /* the slot is the caller's alone now */
            st = write_batch(p, b);
            pthread_mutex_lock(&p->mu);
            p->written++;
            continue;
        }
        if (!all && p->filled - p->written < (uint64_t)p->n_slots) break;
        if (p->started < p->filled) {
            batch *mine = &p->slots[p->started++ % (uint64_t)p->n_slots];
            pthread_mutex_unlock(&p->mu);
            tokenize(p->tok, mine);
            pthread_mutex_lock(&p->mu);
            mine->done = 1;
            continue;
        }
        pthread_cond_wait(&p->done_cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    if (st != TITAN_OK) p->failed = 1;
    return st;
}

/* Queues the batch being filled and makes room for the next one. */
static titan_status submit(titan_shard_pipeline *p) {
    batch *b = &p->slots[p->filled % (uint64_t)p->n_slots];
    if (b->n_docs == 0) return TITAN_OK;
    if (b->ids_cap < b->text_len) {
        uint32_t *ids = realloc(b->ids, b->text_len * sizeof *ids);
        if (!ids) return titan_error(TITAN_ERR_NOMEM, "shard pipeline: tokens of %zu bytes of text", b->text_len);
        b->ids = ids;
        b->ids_cap = b->text_len;
    }
    pthread_mutex_lock(&p->mu);
    p->filled++;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    return drain(p, 0);
}

static titan_status grow(void **buf, size_t *cap, size_t need, size_t elem, size_t first, const char *what) {
    if (need <= *cap) return TITAN_OK;
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return titan_error(TITAN_ERR_NOMEM, "shard pipeline: %s: %zu too many", what, need);
        c *= 2;
    }
    void *g = realloc(*buf, c * elem);
    if (!g) return titan_error(TITAN_ERR_NOMEM, "shard pipeline: %s: cannot hold %zu", what, need);
    *buf = g;
    *cap = c;
    return TITAN_OK;
}

titan_status titan_shard_pipeline_add(titan_shard_pipeline *p, titan_shard_writer *w, const char *text, size_t n) {
    TITAN_ASSERT(!p->failed);
    batch *b = &p->slots[p->filled % (uint64_t)p->n_slots];
    if (b->n_docs > 0 && b->text_len + n > BATCH_BYTES) {
        TITAN_TRY(submit(p));
        b = &p->slots[p->filled % (uint64_t)p->n_slots];
    }
    if (n > SIZE_MAX / 4 - b->text_len) return titan_error(TITAN_ERR_NOMEM, "document of %zu bytes: too large", n);
    TITAN_TRY(grow((void **)&b->text, &b->text_cap, b->text_len + n, 1, BATCH_BYTES, "bytes of text"));
    TITAN_TRY(grow((void **)&b->docs, &b->docs_cap, b->n_docs + 1, sizeof *b->docs, 256, "documents"));
    memcpy(b->text + b->text_len, text, n);
    b->docs[b->n_docs++] = (doc){.w = w, .off = b->text_len, .len = n};
    b->text_len += n;
    if (b->text_len >= BATCH_BYTES) TITAN_TRY(submit(p));
    return TITAN_OK;
}

titan_status titan_shard_pipeline_flush(titan_shard_pipeline *p) {
    TITAN_ASSERT(!p->failed);
    TITAN_TRY(submit(p));
    return drain(p, 1);
}

titan_shard_pipeline_counts titan_shard_pipeline_written(const titan_shard_pipeline *p) { return p->counts; }

void titan_shard_pipeline_free(titan_shard_pipeline *p) {
    if (!p) return;
    if (p->sync_ok) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
        pthread_cond_destroy(&p->work_cv);
        pthread_cond_destroy(&p->done_cv);
        pthread_mutex_destroy(&p->mu);
    }
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        free(p->slots[i].text);
        free(p->slots[i].ids);
        free(p->slots[i].docs);
    }
    free(p->slots);
    free(p->workers);
    titan_free(p);
}
