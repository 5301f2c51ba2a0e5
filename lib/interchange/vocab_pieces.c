/* vocab_pieces.c - a tokenizer's vocabulary as byte strings (vocab_pieces.h). */
#include "interchange/vocab_pieces.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* GPT-2's map: printable Latin-1 bytes stand for themselves, the other 68
 * bytes take the code points 256, 257, ... in byte order. */
static uint32_t byte_cp(uint8_t b) {
    if (b <= 0x20) return 256 + b;                       /* 0x00..0x20: 33 of them */
    if (b >= 0x7f && b <= 0xa0) return 289 + (b - 0x7f); /* 0x7f..0xa0: 34 */
    if (b == 0xad) return 323;
    return b;
}

size_t titan_vocab_byte_unicode(const uint8_t *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = byte_cp(s[i]); /* < 0x800: one or two UTF-8 bytes */
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else {
            out[o++] = (char)(0xc0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    out[o] = 0;
    return o;
}

void titan_vocab_pieces_free(titan_vocab_pieces *p) {
    free(p->arena);
    free(p->off);
    free(p->slots);
    memset(p, 0, sizeof *p);
}

static size_t slot_of(const titan_vocab_pieces *p, const void *s, size_t n) {
    size_t h = (size_t)XXH3_64bits(s, n) & p->mask;
    for (;;) {
        uint32_t v = p->slots[h];
        if (!v) return h;
        size_t m;
        const char *q = titan_vocab_piece(p, v - 1, &m);
        if (m == n && !memcmp(q, s, n)) return h;
        h = (h + 1) & p->mask;
    }
}

uint32_t titan_vocab_lookup(const titan_vocab_pieces *p, const void *s, size_t n) {
    uint32_t v = p->slots[slot_of(p, s, n)];
    return v ? v - 1 : UINT32_MAX;
}

titan_status titan_vocab_pieces_load(titan_vocab_pieces *p, const titan_tokenizer *t, uint32_t n,
                                     uint32_t n_regular) {
    memset(p, 0, sizeof *p);
    p->n = n;
    size_t cap = (size_t)n * 8 + 64, len = 0;
    p->arena = malloc(cap);
    p->off = malloc(((size_t)n + 1) * sizeof *p->off);
    for (p->mask = 1; p->mask < 2 * (size_t)n_regular + 2; p->mask *= 2) {}
    p->slots = calloc(p->mask, sizeof *p->slots);
    p->mask--;
    if (!p->arena || !p->off || !p->slots) return titan_error(TITAN_ERR_NOMEM, "vocabulary: out of memory");
    p->off[0] = 0;
    for (uint32_t id = 0; id < n; id++) {
        size_t k = titan_tokenizer_decode(t, &id, 1, NULL, 0);
        if (len + k + 1 > cap) {
            while (len + k + 1 > cap) cap *= 2;
            char *a = realloc(p->arena, cap);
            if (!a) return titan_error(TITAN_ERR_NOMEM, "vocabulary: out of memory");
            p->arena = a;
        }
        titan_tokenizer_decode(t, &id, 1, p->arena + len, k + 1);
        p->off[id] = len;
        len += k;
        p->off[id + 1] = len;
        if (id < n_regular && k > 0) {
            size_t s = slot_of(p, p->arena + p->off[id], k);
            if (!p->slots[s]) p->slots[s] = id + 1;
        }
    }
    return TITAN_OK;
}
