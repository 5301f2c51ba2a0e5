/* tokenizer_impl.h - what a tokenizer implementation provides (internal to
 * lib/data). tokenizer.c dispatches through these operations; adding a
 * tokenizer (BPE) means one new file with one ops table and one line in the
 * table of tokenizer.c. */
#ifndef TITAN_DATA_TOKENIZER_IMPL_H
#define TITAN_DATA_TOKENIZER_IMPL_H

#include "data/tokenizer.h"

typedef struct titan_tokenizer_ops titan_tokenizer_ops;

struct titan_tokenizer {
    const titan_tokenizer_ops *ops;
    char id[TITAN_TOKENIZER_ID_MAX + 1];
    int vocab_size;
    uint32_t bos, eos;
    void *state; /* the implementation's own data (vocabulary, merges) */
    char *file;  /* the bytes of the file it was loaded from (NULL: none, the byte tokenizer) */
    size_t file_len;
};

struct titan_tokenizer_ops {
    const char *name; /* the spec word before any ':' */
    /* Fills id, vocab_size, bos, eos, state; arg is the text after ':' or NULL. */
    titan_status (*init)(titan_tokenizer *t, const char *arg);
    void (*fini)(titan_tokenizer *t);
    size_t (*encode)(const titan_tokenizer *t, const char *text, size_t n, uint32_t *out, size_t cap);
    /* Points *bytes at the text of one regular id (bos, eos and ids outside
     * the vocabulary never reach it) and returns its length. */
    size_t (*piece)(const titan_tokenizer *t, uint32_t id, const char **bytes);
};

extern const titan_tokenizer_ops titan_tokenizer_byte_ops;

#endif
