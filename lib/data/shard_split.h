/* shard_split.h - which documents are held out for validation.
 *
 * Documents are numbered 0, 1, 2 ... in input order (the order of the
 * stream). Document i gets the key XXH64 of i as 8 little-endian bytes with
 * the seed, so the choice depends on the position, the seed and the split
 * alone: never on threads, timing or the text.
 *   fraction f (0 < f < 1): i is held out when key(i) < f * 2^64;
 *   count N: the N documents with the smallest keys (ties by index), which
 *            needs the total number of documents up front. */
#ifndef TITAN_DATA_SHARD_SPLIT_H
#define TITAN_DATA_SHARD_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct {
    uint64_t seed;
    uint64_t threshold;   /* fraction: held out when key < threshold */
    uint64_t *picked;     /* count: the held-out indices, ascending */
    size_t n_picked, next;
    int by_count;
} titan_shard_split;

/* Parses "0.01", "1%" (a fraction) or "1000" (a count of documents). Exactly
 * one of *fraction (> 0) and *count (> 0) is set; anything else is
 * TITAN_ERR_USAGE naming the text. */
titan_status titan_shard_split_parse(const char *s, double *fraction, uint64_t *count);

uint64_t titan_shard_split_key(uint64_t seed, uint64_t index);

void titan_shard_split_init_fraction(titan_shard_split *s, double fraction, uint64_t seed);
/* Picks count of total documents; count < total, else TITAN_ERR_USAGE. */
titan_status titan_shard_split_init_count(titan_shard_split *s, uint64_t count, uint64_t total, uint64_t seed);
void titan_shard_split_fini(titan_shard_split *s);

/* 1 when document index is held out. Indices must be asked in increasing
 * order (each once) for a count split. */
int titan_shard_split_held_out(titan_shard_split *s, uint64_t index);

#endif
