/* fuzz_tokenizer.h - what the tokenizer fuzz targets do with a tokenizer
 * that opened: encode and decode texts, write its GGUF vocabulary. */
#ifndef TITAN_FUZZ_TOKENIZER_H
#define TITAN_FUZZ_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/tokenizer.h"
#include "interchange/gguf.h"
#include "fuzz_util.h"

/* Encodes text[0..n), checks the ids, decodes them; exact: the decoded text
 * must be the text (where every id encoding gives decodes to its own bytes). */
static inline void fuzz_encode_decode(const titan_tokenizer *t, const char *text, size_t n, int exact) {
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    char *back = malloc(64 * n + 64);
    if (!ids || !back) abort();
    size_t count = titan_tokenizer_encode(t, text, n, ids, n);
    if (count > n) abort(); /* at most one token a byte, the header promises */
    uint32_t vocab = (uint32_t)titan_tokenizer_vocab_size(t);
    for (size_t i = 0; i < count; i++)
        if (ids[i] >= vocab) abort();
    size_t len = titan_tokenizer_decode(t, ids, count, back, 64 * n + 64);
    if (exact && (len != n || memcmp(back, text, n) != 0)) {
        fprintf(stderr, "fuzz: %zu bytes encode to %zu ids that decode to %zu bytes\n", n, count, len);
        abort();
    }
    /* Every id, bos, eos and one past the vocabulary decode without harm. */
    uint32_t probe[4] = {titan_tokenizer_bos(t), titan_tokenizer_eos(t), vocab - 1, vocab};
    titan_tokenizer_decode(t, probe, 4, back, 64);
    free(ids);
    free(back);
}

static inline void fuzz_exercise_tokenizer(const titan_tokenizer *t, const uint8_t *data, size_t size, int exact) {
    static const char text[] = "Hello, world! It's 2024: 12345 tokens  \n\n\t  over\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                               "<|end_of_text|> \xff\xfe\x80 abc   def's'll";
    fuzz_encode_decode(t, text, sizeof text - 1, exact);
    fuzz_encode_decode(t, (const char *)data, size < 64 ? size : 64, exact);
    if (titan_tokenizer_vocab_size(t) <= 0 || !titan_tokenizer_id(t)[0]) abort();
}

/* The tokenizer as a llama.cpp vocabulary, into a writer never written out. */
static inline void fuzz_gguf_vocab(const titan_tokenizer *t) {
    titan_gguf_writer *w = NULL;
    if (titan_gguf_writer_new(&w) != TITAN_OK) abort();
    titan_gguf_put_vocab(w, t, titan_tokenizer_vocab_size(t) + 3);
    titan_gguf_writer_free(w);
    titan_error_clear();
}

/* One input of a tokenizer-file target: data written as dir/file, opened
 * as "<scheme>:dir/file" the way the tools open it; a file that opens is
 * exercised (exact: decoding must give the text back) and written as a
 * GGUF vocabulary; one that does not must say why. */
static inline int fuzz_tokenizer_file(const char *scratch, const char *file, const char *scheme,
                                      const uint8_t *data, size_t size, int exact) {
    const char *dir = fuzz_scratch(scratch);
    fuzz_write(dir, file, data, size);
    char spec[512];
    if ((size_t)snprintf(spec, sizeof spec, "%s:%s/%s", scheme, dir, file) >= sizeof spec) abort();
    titan_tokenizer *t = NULL;
    if (titan_tokenizer_open(&t, spec) != TITAN_OK) {
        if (t || !titan_error_message()[0]) abort();
        titan_error_clear();
        return 0;
    }
    fuzz_exercise_tokenizer(t, data, size, exact);
    fuzz_gguf_vocab(t);
    titan_tokenizer_free(t);
    titan_error_clear();
    return 0;
}

#endif
