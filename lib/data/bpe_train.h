/* bpe_train.h - learns a byte-level BPE vocabulary from text and writes it
 * as a tiktoken file, the kind the "tiktoken:PATH" tokenizer loads.
 *
 * Text is split into pre-tokens by Llama 3's pattern, exactly as the encoder
 * splits it (titan_bpe_split), and the distinct pre-tokens are counted. The
 * vocabulary starts with the 256 single bytes (ranks 0..255, in byte order);
 * each merge then joins the most frequent adjacent pair of tokens (counted
 * over the distinct pre-tokens, weighted by how often each occurs; ties go
 * to the smaller (left rank, right rank)) into a new token of the next rank.
 * Learning stops at the requested size, or early when no pair occurs twice.
 * The result does not depend on the order in which texts are added (unless
 * the cap below drops pre-tokens).
 *
 * Encoding a training pre-token with the written file (tiktoken's rule:
 * merge the lowest-ranked pair, leftmost first) gives exactly the trainer's
 * final segmentation of it; tests/unit/test_bpe_train.c checks this and
 * compares the merges with an independent reference (tests/tokenizer/
 * bpe_train_ref.py).
 *
 * Memory grows with the distinct pre-tokens: with their pairs, about 250
 * bytes each (3.8 million distinct random words: 880 MB). At most
 * TITAN_BPE_TRAIN_WORDS_MAX are kept (about 2 GB): when that many are held,
 * the rarest (those seen once, then twice, ...) are dropped until at most
 * half remain. Pre-tokens longer than
 * TITAN_BPE_TRAIN_WORD_BYTES are not counted (runs of letters or spaces that
 * long teach nothing useful and would cost time every merge). */
#ifndef TITAN_DATA_BPE_TRAIN_H
#define TITAN_DATA_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TITAN_BPE_TRAIN_VOCAB_MAX (1 << 20)
#define TITAN_BPE_TRAIN_WORD_BYTES 1024
#define TITAN_BPE_TRAIN_WORDS_MAX (1u << 23)

typedef struct titan_bpe_trainer titan_bpe_trainer;

typedef struct {
    uint64_t documents;   /* texts added */
    uint64_t bytes;       /* their bytes */
    uint64_t pretokens;   /* pre-tokens counted, with repeats */
    uint64_t too_long;    /* pre-tokens longer than TITAN_BPE_TRAIN_WORD_BYTES, not counted */
    uint64_t distinct;    /* distinct pre-tokens held */
    uint64_t dropped;     /* distinct pre-tokens dropped to stay under the cap */
    uint32_t vocab_size;  /* requested tokens (with the 256 bytes) */
    uint32_t merges;      /* merges learned (0 until learned) */
    uint64_t last_count;  /* weighted count of the last merge's pair */
} titan_bpe_train_stats;

/* vocab_size counts the 256 single-byte tokens and the merges, not the 256
 * special tokens the loader adds after them: 256 <= vocab_size <=
 * TITAN_BPE_TRAIN_VOCAB_MAX, else TITAN_ERR_USAGE. */
titan_status titan_bpe_trainer_create(titan_bpe_trainer **out, int vocab_size);
void titan_bpe_trainer_free(titan_bpe_trainer *t);

/* Counts the pre-tokens of one text (a document). Not after learning. */
titan_status titan_bpe_trainer_add_text(titan_bpe_trainer *t, const char *text, size_t n);

/* The same for n texts at once, split into pre-tokens on `threads` threads
 * (OpenMP; the counts are the same for any number). */
titan_status titan_bpe_trainer_add_texts(titan_bpe_trainer *t, const char *const *texts, const size_t *lens, size_t n,
                                         int threads);

/* Learns the merges (once; later calls do nothing). */
titan_status titan_bpe_trainer_learn(titan_bpe_trainer *t);

/* Learns if not done yet, then writes the tiktoken file: one
 * "base64(token bytes) rank" line per token, ranks 0..merges+255. Written
 * PATH.tmp, synced, renamed over path. */
titan_status titan_bpe_trainer_write(titan_bpe_trainer *t, const char *path);

void titan_bpe_trainer_stats(const titan_bpe_trainer *t, titan_bpe_train_stats *s);

/* Inspection, for tests, once learned (0 words before): the distinct
 * pre-tokens in byte order (memcmp, then length): word i's bytes, its count
 * and its final segmentation into token ids. NULL past the end. */
size_t titan_bpe_trainer_words(const titan_bpe_trainer *t);
const uint8_t *titan_bpe_trainer_word(const titan_bpe_trainer *t, size_t i, size_t *n, uint64_t *count,
                                      const uint32_t **ids, size_t *n_ids);
/* The bytes of token id (NULL past the learned vocabulary). */
const uint8_t *titan_bpe_trainer_token(const titan_bpe_trainer *t, uint32_t id, size_t *n);
/* Lowers the distinct pre-token cap (tests of the pruning); at least 16. */
void titan_bpe_trainer_set_words_max(titan_bpe_trainer *t, size_t max);

#endif
