/* loader.h - packs the token stream of a shard directory into training samples.
 *
 * As torchtitan does: sample k is tokens [k*(L+1), (k+1)*(L+1)) of the stream
 * (L = seq_len); its input is the first L tokens, its target the last L.
 * Samples never overlap; a partial last sample is dropped.
 *
 * All ranks walk one global sequence of sample slots: slot p is sample
 * order_e(p mod S) of epoch e = p / S (S samples per epoch; order_e is the
 * identity, or with shuffle a seeded permutation of the S samples that
 * changes every epoch). One call to titan_loader_next(batch) on each of the
 * dp_size ranks consumes slots [p, p + batch*dp_size): rank r takes slots
 * p + b*dp_size + r. The state is the one number p, the same on every rank, so
 * a checkpoint taken under one data-parallel degree resumes under another and
 * the run still sees exactly the samples an uninterrupted run would have (the
 * same set per optimizer step when the global batch is kept). */
#ifndef TITAN_DATA_LOADER_H
#define TITAN_DATA_LOADER_H

#include <stdint.h>

#include "core/error.h"
#include "data/shard.h"

typedef struct titan_loader titan_loader;

/* What a checkpoint records of the loader (identical on every rank). */
typedef struct titan_loader_state {
    uint64_t position; /* sample slots consumed by all ranks together */
} titan_loader_state;

/* The loader reads d, which must outlive it. Fewer than seq_len+1 tokens:
 * TITAN_ERR_USAGE. */
titan_status titan_loader_create(titan_loader **out, const titan_shard_dir *d, int seq_len,
                                 int dp_rank, int dp_size);
void titan_loader_free(titan_loader *l);

/* Visit the samples of each epoch in a permutation drawn from seed (and the
 * epoch number); call before the first titan_loader_next. */
void titan_loader_set_shuffle(titan_loader *l, uint64_t seed);

/* Fills inputs and targets, each batch x seq_len tokens, row-major. */
titan_status titan_loader_next(titan_loader *l, uint32_t *inputs, uint32_t *targets, int batch);

void titan_loader_get_state(const titan_loader *l, titan_loader_state *st);
void titan_loader_set_state(titan_loader *l, const titan_loader_state *st);

/* Samples per epoch, S. */
uint64_t titan_loader_samples_per_epoch(const titan_loader *l);
/* The sample index (0 <= k < S) at global slot p. */
uint64_t titan_loader_sample_at(const titan_loader *l, uint64_t p);

#endif
