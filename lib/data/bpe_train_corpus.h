/* bpe_train_corpus.h - feeds a BPE trainer the documents of corpus inputs
 * (titan-shard --train-tokenizer).
 *
 * The documents are copied into batches of about 4 MB, back to back, and
 * each batch's pre-tokens are counted on a number of threads
 * (titan_bpe_trainer_add_texts); the counts, and so the learned vocabulary,
 * are the same for any number of threads. */
#ifndef TITAN_DATA_BPE_TRAIN_CORPUS_H
#define TITAN_DATA_BPE_TRAIN_CORPUS_H

#include "core/error.h"
#include "data/bpe_train.h"
#include "data/corpus.h"

/* Reads the n inputs in turn (titan_corpus_read_all: no document at all is
 * TITAN_ERR_FORMAT) and counts the pre-tokens of every document into t, on
 * `threads` threads. Shows a "counting pre-tokens" progress line while it
 * reads, cleared before it returns. stats is added to (sources skipped:
 * stats->skipped). Learning and writing are left to the caller. */
titan_status titan_bpe_trainer_add_corpus(titan_bpe_trainer *t, char *const *inputs, int n,
                                          const titan_corpus_opts *opts, int threads, titan_corpus_stats *stats);

#endif
