/* shard_pipeline.h - tokenizes documents on several threads and writes them,
 * in the order they were added, to shard writers.
 *
 * The caller (one thread) adds documents; each is copied into a batch of
 * about half a MiB of text. A full batch is queued; worker threads tokenize
 * whole batches; the caller's thread writes finished batches strictly in
 * queue order, and tokenizes queued batches itself while it waits for room.
 * A document is always encoded whole, by one thread, with the same
 * tokenizer, so the shards are byte-identical for any number of threads.
 * With threads = 1 there are no workers: the caller does everything. */
#ifndef TITAN_DATA_SHARD_PIPELINE_H
#define TITAN_DATA_SHARD_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/shard.h"
#include "data/tokenizer.h"

typedef struct titan_shard_pipeline titan_shard_pipeline;

/* threads >= 1 counts the caller's thread: threads - 1 workers are started.
 * tok must stay open (and every writer given to _add) until _free. */
titan_status titan_shard_pipeline_open(titan_shard_pipeline **out, const titan_tokenizer *tok, int threads);

/* Copies text[0..n) as one document for writer w. May write earlier
 * documents; a writer error (a full disk) is returned, after which the
 * pipeline only accepts _free. */
titan_status titan_shard_pipeline_add(titan_shard_pipeline *p, titan_shard_writer *w, const char *text, size_t n);

/* Tokenizes and writes every document added so far. */
titan_status titan_shard_pipeline_flush(titan_shard_pipeline *p);

/* Documents, tokens (framing included) and bytes of text written so far. */
typedef struct {
    uint64_t documents, tokens, text_bytes;
} titan_shard_pipeline_counts;
titan_shard_pipeline_counts titan_shard_pipeline_written(const titan_shard_pipeline *p);

/* Stops the workers; documents not yet written are dropped. */
void titan_shard_pipeline_free(titan_shard_pipeline *p);

/* The number of online CPUs (at least 1): the default thread count. */
int titan_shard_pipeline_default_threads(void);

#endif
