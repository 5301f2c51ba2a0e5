/* tokenizer_bpe.c - Llama 3's byte-level BPE tokenizer behind the tokenizer
 * API, from either file it ships in:
 *
 *   tiktoken:PATH  the tiktoken file (Llama 3's tokenizer.model): one
 *                  "base64(bytes) rank" per line; Llama 3's 256 special
 *                  tokens follow the ranks (bos = n_base, eos = n_base + 1).
 *   hf:PATH        a Hugging Face tokenizer.json of the byte-level BPE kind.
 *
 * Text is split into pre-tokens by Llama 3's pattern (PCRE2, UTF + UCP, JIT),
 * then each pre-token's bytes are merged into tokens. Special tokens written
 * in the text are plain text. Invalid UTF-8 never matches the pattern: each
 * run of it is merged as a pre-token of its own, so every byte still encodes
 * and decoding gives back the input exactly. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

#include "core/fsutil.h"
#include "data/bpe_impl.h"
#include "data/tokenizer_impl.h"

const char titan_bpe_llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The same pattern for PCRE2. tiktoken runs it with Rust's regex, where \s
 * is Unicode White_Space; PCRE2's \s (with UCP) lacks U+0085 NEXT LINE, so it
 * is added to every \s and \S. */
static const char pcre_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n]*|"
    "[\\s\\x{85}]*[\\r\\n]+|[\\s\\x{85}]+(?![^\\s\\x{85}])|[\\s\\x{85}]+";

titan_status titan_bpe_compile_pattern(titan_bpe *b) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pcre_pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return titan_error(TITAN_ERR_FAIL, "tokenizer: pre-tokenizer pattern: offset %zu: %s", (size_t)off,
                           (char *)msg);
    }
    b->re = re;
    b->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0; /* else pcre2_match interprets */
    return TITAN_OK;
}

typedef struct {
    uint32_t *out;
    size_t cap, count;
} sink;

static inline void put(sink *k, uint32_t id) {
    if (k->count < k->cap) k->out[k->count] = id;
    k->count++;
}

/* One pre-token: a whole-word hit, or the merge of its bytes. */
static void encode_word(const titan_bpe *b, const uint8_t *s, size_t n, sink *k) {
    if (n == 1) {
        put(k, b->byte_id[s[0]]);
        return;
    }
    if (b->whole_words) {
        uint32_t id = titan_bpe_lookup(b, s, n);
        if (id != TITAN_BPE_NONE) {
            put(k, id);
            return;
        }
    }
    if (k->count + n <= k->cap) { /* room: merge straight into the output */
        k->count += titan_bpe_merge(b, s, n, k->out + k->count, -1);
        return;
    }
    uint32_t small[256], *ids = n <= 256 ? small : malloc(n * sizeof *ids);
    if (!ids) titan_panic(__FILE__, __LINE__, "out of memory encoding a long word");
    size_t m = titan_bpe_merge(b, s, n, ids, -1);
    for (size_t i = 0; i < m; i++) put(k, ids[i]);
    if (ids != small) free(ids);
}

titan_status titan_bpe_split(const titan_bpe *b, const uint8_t *s, size_t n, titan_bpe_word_fn fn, void *ctx) {
    if (n == 0) return TITAN_OK;
    pcre2_code *re = b->re;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return titan_error(TITAN_ERR_NOMEM, "tokenizer: out of memory for the pre-tokenizer");
    titan_status st = TITAN_OK;
    size_t pos = 0;
    while (pos < n && st == TITAN_OK) {
        int rc = b->jit ? pcre2_jit_match(re, s, n, pos, 0, md, NULL) : pcre2_match(re, s, n, pos, 0, md, NULL);
        size_t ms, me;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            ms = ov[0], me = ov[1];
        } else if (rc == PCRE2_ERROR_NOMATCH) {
            ms = me = n; /* only invalid UTF-8 is left */
        } else {
            ms = pos, me = pos + 1; /* a matcher limit: take one byte and go on */
        }
        if (ms > pos) st = fn(ctx, s + pos, ms - pos); /* invalid UTF-8 between matches */
        if (me > ms && st == TITAN_OK) st = fn(ctx, s + ms, me - ms);
        pos = me > pos ? me : pos + 1;
    }
    pcre2_match_data_free(md);
    return st;
}

typedef struct {
    const titan_bpe *b;
    sink *k;
} encode_ctx;

static titan_status encode_one(void *ctx, const uint8_t *s, size_t n) {
    encode_ctx *e = ctx;
    encode_word(e->b, s, n, e->k);
    return TITAN_OK;
}

static size_t bpe_encode(const titan_tokenizer *t, const char *text, size_t n, uint32_t *out, size_t cap) {
    sink k = {out, cap, 0};
    encode_ctx e = {t->state, &k};
    if (titan_bpe_split(t->state, (const uint8_t *)text, n, encode_one, &e) != TITAN_OK)
        titan_panic(__FILE__, __LINE__, "out of memory for the pre-tokenizer");
    return k.count;
}

static size_t bpe_piece(const titan_tokenizer *t, uint32_t id, const char **bytes) {
    size_t n;
    const char *p = titan_bpe_bytes(t->state, id, &n);
    if (!p) {
        *bytes = "<|unk|>";
        return 7;
    }
    *bytes = p;
    return n;
}

static void bpe_fini(titan_tokenizer *t) {
    titan_bpe *b = t->state;
    if (!b) return;
    titan_bpe_fini(b);
    free(b);
    t->state = NULL;
}

/* Llama 3's files are 2 MB (tiktoken) and 9 MB (tokenizer.json). */
#define FILE_MAX ((size_t)1 << 30)

enum { KIND_TIKTOKEN, KIND_HF };

static titan_status bpe_open(titan_tokenizer *t, const char *arg, int kind) {
    const char *word = kind == KIND_TIKTOKEN ? "tiktoken" : "hf";
    if (!arg || !arg[0])
        return titan_error(TITAN_ERR_USAGE, "tokenizer '%s': needs a file: %s:PATH", word, word);
    char *data;
    size_t n;
    TITAN_TRY(titan_fs_read_file(arg, &data, &n, FILE_MAX));
    titan_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        free(data);
        return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", arg);
    }
    t->state = b;
    titan_status st;
    if (kind == KIND_TIKTOKEN) {
        uint32_t n_base = 0;
        st = titan_bpe_load_tiktoken(b, arg, data, n, &n_base);
        t->bos = n_base;
        t->eos = n_base + 1;
    } else {
        st = titan_bpe_load_hf(b, arg, data, n, &t->bos, &t->eos);
    }
    if (st == TITAN_OK) st = titan_bpe_compile_pattern(b);
    if (st == TITAN_OK) {
        /* The id names the exact file: "tt:" or "hf:" and 48 bits of XXH64. */
        snprintf(t->id, sizeof t->id, "%s:%012llx", kind == KIND_TIKTOKEN ? "tt" : "hf",
                 (unsigned long long)(XXH64(data, n, 0) >> 16));
        t->vocab_size = (int)b->n_ids;
        t->file = data; /* kept: checkpoints and exports carry a copy */
        t->file_len = n;
    } else {
        free(data);
    }
    if (st != TITAN_OK) bpe_fini(t);
    return st;
}

static titan_status tiktoken_init(titan_tokenizer *t, const char *arg) { return bpe_open(t, arg, KIND_TIKTOKEN); }
static titan_status hf_init(titan_tokenizer *t, const char *arg) { return bpe_open(t, arg, KIND_HF); }

const titan_tokenizer_ops titan_tokenizer_tiktoken_ops = {
    .name = "tiktoken",
    .init = tiktoken_init,
    .fini = bpe_fini,
    .encode = bpe_encode,
    .piece = bpe_piece,
};

const titan_tokenizer_ops titan_tokenizer_hf_ops = {
    .name = "hf",
    .init = hf_init,
    .fini = bpe_fini,
    .encode = bpe_encode,
    .piece = bpe_piece,
};
