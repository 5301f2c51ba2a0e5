/* loader.h - packs the token stream of a shard directory into training samples.
 *
 * As torchtitan does: sample k is tokens [k*(L+1), (k+1)*(L+1)) of the stream
 * (L = seq_len); its input is the first L tokens, its target the last L.
 * Samples never overlap. Data parallel: sample k belongs to rank k % dp_size.
 * Each epoch uses the first floor(S / dp_size) * dp_size of the S whole
 * samples, so every rank reads the same number per epoch and ranks wrap to
 * the start together (epoch + 1). The order is fixed: a loader whose state was
 * saved and restored yields exactly what an uninterrupted one would. */
#ifndef TITAN_DATA_LOADER_H
#define TITAN_DATA_LOADER_H

#include <stdint.h>

#include "core/error.h"
#include "data/shard.h"

typedef struct titan_loader titan_loader;

/* What a checkpoint records for one rank's loader. */
typedef struct titan_loader_state {
    uint64_t next_sample; /* global index k of the next sample this rank reads (k % dp_size == dp_rank) */
    uint64_t epoch;       /* completed passes over the data */
} titan_loader_state;

/* The loader reads d, which must outlive it. Fewer than seq_len+1 tokens, or
 * fewer samples than ranks: TITAN_ERR_USAGE. */
titan_status titan_loader_create(titan_loader **out, const titan_shard_dir *d, int seq_len,
                                 int dp_rank, int dp_size);
void titan_loader_free(titan_loader *l);

/* Fills inputs and targets, each batch x seq_len tokens, row-major. */
titan_status titan_loader_next(titan_loader *l, uint32_t *inputs, uint32_t *targets, int batch);

void titan_loader_get_state(const titan_loader *l, titan_loader_state *st);
/* Restores a state from titan_loader_get_state (a checkpoint); a state that
 * does not fit this data and rank (sample out of range, wrong rank) is
 * TITAN_ERR_FORMAT and leaves the loader as it was. */
titan_status titan_loader_set_state(titan_loader *l, const titan_loader_state *st);

/* Samples per epoch, all ranks together (a multiple of dp_size). */
uint64_t titan_loader_samples_per_epoch(const titan_loader *l);

#endif
