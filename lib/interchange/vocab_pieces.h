/* vocab_pieces.h - a tokenizer's vocabulary as byte strings, for the
 * exporters that describe it to other tools (GGUF, Hugging Face
 * tokenizer.json): every id's bytes from the public decode, a bytes -> id
 * table of the regular tokens, and GPT-2's byte-to-unicode form in which
 * byte-level BPE files write tokens. */
#ifndef TITAN_INTERCHANGE_VOCAB_PIECES_H
#define TITAN_INTERCHANGE_VOCAB_PIECES_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/tokenizer.h"

typedef struct {
    char *arena;     /* every id's bytes, back to back */
    size_t *off;     /* n + 1 offsets */
    uint32_t n;
    uint32_t *slots; /* bytes -> id + 1 (0 empty), regular ids only */
    size_t mask;
} titan_vocab_pieces;

/* Decodes ids 0..n-1 of t; the first n_regular enter the bytes -> id table
 * (the lowest id of equal bytes wins). Free with titan_vocab_pieces_free,
 * also after a failure. */
titan_status titan_vocab_pieces_load(titan_vocab_pieces *p, const titan_tokenizer *t, uint32_t n,
                                     uint32_t n_regular);
void titan_vocab_pieces_free(titan_vocab_pieces *p);

static inline const char *titan_vocab_piece(const titan_vocab_pieces *p, uint32_t id, size_t *n) {
    *n = p->off[id + 1] - p->off[id];
    return p->arena + p->off[id];
}

/* The regular id whose bytes are s[0..n), or UINT32_MAX. */
uint32_t titan_vocab_lookup(const titan_vocab_pieces *p, const void *s, size_t n);

/* GPT-2's byte-to-unicode form of n bytes: UTF-8 into out (cap >= 2n + 1,
 * NUL-terminated); returns its length. Printable Latin-1 bytes stand for
 * themselves, the other 68 bytes take the code points 256, 257, ... */
size_t titan_vocab_byte_unicode(const uint8_t *s, size_t n, char *out);

#endif
