/* bpe_train_corpus.c - corpus inputs into a BPE trainer, in batches (bpe_train_corpus.h). */
#include "data/bpe_train_corpus.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"

/* Documents are copied into batches of about 4 MB, whose pre-tokens are
 * split on the threads. */
#define TRAIN_BATCH_BYTES (4u << 20)

typedef struct {
    titan_bpe_trainer *trainer;
    int threads;
    char *buf; /* the batch's documents, back to back */
    size_t len, cap;
    const char **texts; /* set at the flush: buf may move until then */
    size_t *lens;
    size_t n, ncap;
    const titan_corpus_stats *cs;
    uint64_t total_bytes;
    titan_progress progress;
} train_feed;

static titan_status train_flush(train_feed *f) {
    for (size_t i = 0, off = 0; i < f->n; off += f->lens[i++]) f->texts[i] = f->buf + off;
    titan_status st = titan_bpe_trainer_add_texts(f->trainer, f->texts, f->lens, f->n, f->threads);
    f->n = f->len = 0;
    return st;
}

/* Room in the batch for one more document of n bytes. */
static titan_status train_reserve(train_feed *f, size_t n) {
    if (f->len + n > f->cap) {
        size_t cap = 2 * (f->len + n) > TRAIN_BATCH_BYTES ? 2 * (f->len + n) : TRAIN_BATCH_BYTES;
        char *b = realloc(f->buf, cap);
        if (!b) return titan_error(TITAN_ERR_NOMEM, "tokenizer training: out of memory for a batch of %zu bytes", cap);
        f->buf = b, f->cap = cap;
    }
    if (f->n == f->ncap) {
        size_t cap = f->ncap ? 2 * f->ncap : 4096;
        size_t *l = realloc(f->lens, cap * sizeof *l);
        const char **t = realloc(f->texts, cap * sizeof *t);
        if (l) f->lens = l;
        if (t) f->texts = t;
        if (!l || !t) return titan_error(TITAN_ERR_NOMEM, "tokenizer training: out of memory for a batch");
        f->ncap = cap;
    }
    return TITAN_OK;
}

static titan_status train_doc(void *ctx, const char *source, const char *text, size_t n) {
    (void)source;
    train_feed *f = ctx;
    TITAN_TRY(train_reserve(f, n));
    memcpy(f->buf + f->len, text, n);
    f->len += n;
    f->lens[f->n++] = n;
    titan_status st = f->len >= TRAIN_BATCH_BYTES ? train_flush(f) : TITAN_OK;
    if (titan_progress_due(&f->progress)) {
        char what[64];
        snprintf(what, sizeof what, "counting pre-tokens: %" PRIu64 " docs", f->cs->documents);
        titan_progress_bytes(&f->progress, f->cs->input_bytes, f->total_bytes, f->cs->bytes, what);
    }
    return st;
}

titan_status titan_bpe_trainer_add_corpus(titan_bpe_trainer *t, char *const *inputs, int n,
                                          const titan_corpus_opts *opts, int threads, titan_corpus_stats *stats) {
    train_feed f = {.trainer = t, .threads = threads, .cs = stats};
    titan_progress_init(&f.progress);
    for (int i = 0; f.progress.on && i < n; i++) f.total_bytes += titan_corpus_size(inputs[i]);
    titan_status st = titan_corpus_read_all(inputs, n, opts, train_doc, &f, stats);
    if (st == TITAN_OK) st = train_flush(&f);
    free(f.buf), free(f.texts), free(f.lens);
    titan_progress_clear(&f.progress);
    return st;
}
