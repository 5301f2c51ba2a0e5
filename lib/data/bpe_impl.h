/* bpe_impl.h - the byte-level BPE vocabulary shared by the tiktoken and
 * Hugging Face loaders (internal to lib/data).
 *
 * Every id has a byte string in one arena: regular tokens their text,
 * special/added tokens their name. Two hash tables drive encoding: bytes ->
 * id (whole-word lookup) and (left id, right id) -> (rank, result id), the
 * merges. For tiktoken files the rank of a pair is the rank (= id) of the
 * concatenated bytes, so merging the lowest-ranked pair is exactly
 * tiktoken's rule; for tokenizer.json the rank is the merge's index. */
#ifndef TITAN_DATA_BPE_IMPL_H
#define TITAN_DATA_BPE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TITAN_BPE_NONE UINT32_MAX

typedef struct titan_bpe_pair {
    uint64_t key; /* left << 32 | right; UINT64_MAX when the slot is empty */
    uint32_t rank, result;
} titan_bpe_pair;

typedef struct titan_bpe {
    uint32_t n_ids;      /* ids 0..n_ids-1; some may have no token (hf gaps) */
    uint64_t *tok;       /* per id: arena offset << 24 | length; UINT64_MAX: no token */
    char *arena;
    size_t arena_len, arena_cap;
    uint64_t *words;     /* bytes -> id: hash high 32 bits << 32 | (id + 1); 0 empty */
    size_t words_mask, words_n;
    titan_bpe_pair *pairs;
    size_t pairs_mask, pairs_n;
    uint32_t byte_id[256]; /* the token of each single byte */
    int whole_words;     /* look a whole pre-token up before merging (tiktoken; hf ignore_merges) */
    void *re;            /* the pre-tokenizer, a pcre2_code_8 */
    int jit;             /* re is JIT-compiled */
} titan_bpe;

/* Sets n_ids and allocates the per-id table with every id empty. */
titan_status titan_bpe_init(titan_bpe *b, uint32_t n_ids, const char *what);
/* Frees the tables and the compiled pattern (a zeroed b is fine). */
void titan_bpe_fini(titan_bpe *b);

/* Gives id the byte string s[0..n) (n < 2^24). Regular tokens also enter the
 * bytes -> id table; *dup receives the id that already had these bytes
 * (TITAN_BPE_NONE when none). */
titan_status titan_bpe_set(titan_bpe *b, uint32_t id, const void *s, size_t n, int regular, uint32_t *dup);
/* The id whose bytes are s[0..n), or TITAN_BPE_NONE. */
uint32_t titan_bpe_lookup(const titan_bpe *b, const void *s, size_t n);
/* Bytes of id (NULL, 0 when the id has none). */
const char *titan_bpe_bytes(const titan_bpe *b, uint32_t id, size_t *n);
/* Adds the merge left+right -> result with rank; keeps an existing one. */
titan_status titan_bpe_add_pair(titan_bpe *b, uint32_t left, uint32_t right, uint32_t rank, uint32_t result);
/* Merge of (left, right): its rank, or TITAN_BPE_NONE; *result its id. */
uint32_t titan_bpe_pair_rank(const titan_bpe *b, uint32_t left, uint32_t right, uint32_t *result);

/* Merges the bytes s[0..n) (n >= 1, every byte has a token) into ids, writing
 * at most n of them to out; returns their count. heap: 1 forces the
 * priority-queue path, 0 the quadratic one, -1 picks by length. */
size_t titan_bpe_merge(const titan_bpe *b, const uint8_t *s, size_t n, uint32_t *out, int heap);

/* Compiles Llama 3's pre-tokenizer pattern into b->re. */
titan_status titan_bpe_compile_pattern(titan_bpe *b);
/* Calls fn on each pre-token of s[0..n) in order: the pattern's matches and,
 * between them, each run of invalid UTF-8 (which never matches), so the
 * pieces cover s exactly. The encoder and the trainer (bpe_train.c) both
 * split here, so they agree on pre-tokens. Stops at fn's first non-OK
 * status and returns it; TITAN_ERR_NOMEM if match data cannot be made. */
typedef titan_status (*titan_bpe_word_fn)(void *ctx, const uint8_t *s, size_t n);
titan_status titan_bpe_split(const titan_bpe *b, const uint8_t *s, size_t n, titan_bpe_word_fn fn, void *ctx);
/* Llama 3's pattern as written in its tokenizer (and tokenizer.json). */
extern const char titan_bpe_llama3_pattern[];

/* Loaders: fill b (vocabulary, merges, byte_id, whole_words) and the
 * tokenizer facts. path names the file in messages. */
titan_status titan_bpe_load_tiktoken(titan_bpe *b, const char *path, const char *data, size_t n,
                                     uint32_t *n_base);
titan_status titan_bpe_load_hf(titan_bpe *b, const char *path, const char *data, size_t n,
                               uint32_t *bos, uint32_t *eos);

#endif
