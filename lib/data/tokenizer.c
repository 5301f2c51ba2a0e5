/* tokenizer.c - picks a tokenizer by spec and dispatches to it. */
#include "data/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "data/tokenizer_impl.h"

/* Byte-level BPE (tokenizer_bpe.c): Llama 3's tiktoken file or a tokenizer.json. */
extern const titan_tokenizer_ops titan_tokenizer_tiktoken_ops, titan_tokenizer_hf_ops;

static const titan_tokenizer_ops *const known[] = {
    &titan_tokenizer_byte_ops,
    &titan_tokenizer_tiktoken_ops, &titan_tokenizer_hf_ops,
};
#define N_KNOWN (sizeof known / sizeof known[0])

const char *titan_tokenizer_choices(void) { return "byte, tiktoken:PATH, hf:PATH"; }

titan_status titan_tokenizer_open(titan_tokenizer **out, const char *spec) {
    *out = NULL;
    if (!spec || !spec[0]) spec = "byte";
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    const titan_tokenizer_ops *ops = NULL;
    for (size_t i = 0; i < N_KNOWN; i++)
        if (strlen(known[i]->name) == len && memcmp(known[i]->name, spec, len) == 0) ops = known[i];
    if (!ops)
        return titan_error(TITAN_ERR_USAGE, "tokenizer '%s': unknown (choices: %s)", spec,
                           titan_tokenizer_choices());
    titan_tokenizer *t = titan_alloc(sizeof *t, "tokenizer");
    if (!t) return TITAN_ERR_NOMEM;
    memset(t, 0, sizeof *t);
    t->ops = ops;
    titan_status st = ops->init(t, colon ? colon + 1 : NULL);
    if (st != TITAN_OK) {
        free(t->file);
        titan_free(t);
        return st;
    }
    TITAN_ASSERT(t->vocab_size > 0 && t->bos < (uint32_t)t->vocab_size && t->eos < (uint32_t)t->vocab_size);
    *out = t;
    return TITAN_OK;
}

void titan_tokenizer_free(titan_tokenizer *t) {
    if (!t) return;
    if (t->ops->fini) t->ops->fini(t);
    free(t->file);
    titan_free(t);
}

const char *titan_tokenizer_file(const titan_tokenizer *t, const char **data, size_t *len) {
    *data = t->file;
    *len = t->file ? t->file_len : 0;
    return t->file ? t->ops->name : NULL;
}

const char *titan_tokenizer_id(const titan_tokenizer *t) { return t->id; }
int titan_tokenizer_vocab_size(const titan_tokenizer *t) { return t->vocab_size; }
uint32_t titan_tokenizer_bos(const titan_tokenizer *t) { return t->bos; }
uint32_t titan_tokenizer_eos(const titan_tokenizer *t) { return t->eos; }

size_t titan_tokenizer_encode(const titan_tokenizer *t, const char *text, size_t n,
                              uint32_t *out, size_t cap) {
    return t->ops->encode(t, text, n, out, cap);
}

size_t titan_tokenizer_decode(const titan_tokenizer *t, const uint32_t *ids, size_t n,
                              char *out, size_t cap) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *bytes;
        size_t k;
        if (ids[i] == t->bos) bytes = "<|begin_of_text|>", k = strlen(bytes);
        else if (ids[i] == t->eos) bytes = "<|end_of_text|>", k = strlen(bytes);
        else if (ids[i] >= (uint32_t)t->vocab_size) bytes = "<|unk|>", k = strlen(bytes);
        else k = t->ops->piece(t, ids[i], &bytes);
        if (cap > 0 && len < cap - 1) {
            size_t room = cap - 1 - len;
            memcpy(out + len, bytes, k < room ? k : room);
        }
        len += k;
    }
    if (cap > 0) out[len < cap - 1 ? len : cap - 1] = '\0';
    return len;
}
