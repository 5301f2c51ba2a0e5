/* bpe_hf.c - loads a Hugging Face tokenizer.json of the byte-level BPE kind
 * (Llama 3's): model.vocab maps token strings, written in GPT-2's
 * byte-to-unicode alphabet, to ids; model.merges ("a b" strings or [a, b]
 * pairs) rank the merges by their index; added_tokens are the special
 * tokens. Only Llama 3's pre-tokenizer is supported: a file that asks for
 * another pattern, a prefix space or a normalizer is refused rather than
 * encoded differently from its reference.
 *
 * bos/eos: the added tokens named <|begin_of_text|> and <|end_of_text|>;
 * failing those, the first and second added tokens (the first for both when
 * there is only one). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe_impl.h"

/* GPT-2's printable stand-ins: bytes '!'..'~', 0xa1..0xac and 0xae..0xff are
 * themselves; the others become U+0100, U+0101, ... in byte order. */
static void byte_alphabet(int16_t from_cp[324]) {
    for (int i = 0; i < 324; i++) from_cp[i] = -1;
    int next = 256;
    for (int c = 0; c < 256; c++) {
        int printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae);
        from_cp[printable ? c : next++] = (int16_t)c;
    }
}

/* Token string -> bytes; -1 when a character is outside the alphabet. */
static long unmap(const int16_t from_cp[324], const char *s, size_t n, unsigned char *out) {
    size_t len = 0;
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        uint32_t cp;
        if (p[0] < 0x80) cp = *p++;
        else if ((p[0] & 0xe0) == 0xc0 && p + 1 < end) cp = (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f), p += 2;
        else return -1; /* the alphabet ends at U+0143: two bytes at most */
        if (cp >= 324 || from_cp[cp] < 0) return -1;
        out[len++] = (unsigned char)from_cp[cp];
    }
    return (long)len;
}

static titan_status check_pretokenizer(const char *path, json_t *p) {
    if (!p || json_is_null(p)) return TITAN_OK; /* none given: Llama 3's pattern is used */
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return titan_error(TITAN_ERR_FORMAT, "%s: pre_tokenizer: no type", path);
    if (strcmp(type, "Sequence") == 0) {
        json_t *arr = json_object_get(p, "pretokenizers"), *e;
        size_t i;
        if (!json_is_array(arr))
            return titan_error(TITAN_ERR_FORMAT, "%s: pre_tokenizer: Sequence without pretokenizers", path);
        json_array_foreach(arr, i, e) TITAN_TRY(check_pretokenizer(path, e));
        return TITAN_OK;
    }
    if (strcmp(type, "Split") == 0) {
        const char *re = json_string_value(json_object_get(json_object_get(p, "pattern"), "Regex"));
        const char *how = json_string_value(json_object_get(p, "behavior"));
        if (!re || strcmp(re, titan_bpe_llama3_pattern) != 0 || !how || strcmp(how, "Isolated") != 0 ||
            json_is_true(json_object_get(p, "invert")))
            return titan_error(TITAN_ERR_FORMAT,
                               "%s: pre_tokenizer: a Split other than Llama 3's pattern (only Llama 3's is supported)",
                               path);
        return TITAN_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return titan_error(TITAN_ERR_FORMAT, "%s: pre_tokenizer: ByteLevel add_prefix_space is not supported",
                               path);
        json_t *use = json_object_get(p, "use_regex");
        if (!use || json_is_true(use))
            return titan_error(TITAN_ERR_FORMAT,
                               "%s: pre_tokenizer: ByteLevel use_regex (GPT-2's pattern) is not supported; "
                               "only Llama 3's pattern is", path);
        return TITAN_OK;
    }
    return titan_error(TITAN_ERR_FORMAT, "%s: pre_tokenizer: type '%s' is not supported", path, type);
}

static titan_status check_model(const char *path, json_t *root, json_t *model) {
    const char *type = json_string_value(json_object_get(model, "type"));
    if (type && strcmp(type, "BPE") != 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: model.type is '%s', not BPE", path, type);
    static const char *const empty_keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *v = json_string_value(json_object_get(model, empty_keys[i]));
        if (v && v[0]) return titan_error(TITAN_ERR_FORMAT, "%s: model.%s is not supported", path, empty_keys[i]);
    }
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return titan_error(TITAN_ERR_FORMAT, "%s: model.byte_fallback is set: not a byte-level BPE tokenizer", path);
    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm))
        return titan_error(TITAN_ERR_FORMAT, "%s: normalizer: not supported (Llama 3 has none)", path);
    return check_pretokenizer(path, json_object_get(root, "pre_tokenizer"));
}

static titan_status get_id(const char *path, const char *where, json_t *v, uint32_t *id) {
    /* Ids index a table: a vocabulary of 16M is far beyond any real one. */
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
    if (x < 0 || x >= (1 << 24))
        return titan_error(TITAN_ERR_FORMAT, "%s: %s: id is not an integer in 0..2^24-1", path, where);
    *id = (uint32_t)x;
    return TITAN_OK;
}

static titan_status load_vocab(titan_bpe *b, const char *path, json_t *vocab, json_t *added, const int16_t *from_cp) {
    const char *key;
    json_t *v, *e;
    size_t i;
    uint32_t id = 0, dup;
    /* A token's bytes are never more than its string's (a character of the
     * alphabet is 1 or 2 bytes for 1 byte): long tokens (a run of hundreds
     * of spaces is one in a vocabulary trained on formatted text) fit. */
    size_t cap = 0;
    json_object_foreach(vocab, key, v) if (strlen(key) > cap) cap = strlen(key);
    unsigned char *buf = malloc(cap + 1);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "%s: model.vocab: out of memory", path);
    titan_status st = TITAN_OK;
    json_object_foreach(vocab, key, v) {
        size_t kn = strlen(key), had;
        long n = unmap(from_cp, key, kn, buf);
        if (n <= 0 || (size_t)n >= (1u << 24)) {
            st = titan_error(TITAN_ERR_FORMAT,
                             "%s: model.vocab: token '%.40s' is empty, too long or outside the byte-level alphabet",
                             path, key);
            break;
        }
        if ((st = get_id(path, "model.vocab", v, &id)) != TITAN_OK) break;
        if (titan_bpe_bytes(b, id, &had)) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: model.vocab: id %u given twice", path, id);
            break;
        }
        if ((st = titan_bpe_set(b, id, buf, (size_t)n, 1, &dup)) != TITAN_OK) break;
        if (dup != TITAN_BPE_NONE) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: model.vocab: token '%.40s' given twice", path, key);
            break;
        }
    }
    free(buf);
    TITAN_TRY(st);
    json_array_foreach(added, i, e) {
        const char *content = json_string_value(json_object_get(e, "content"));
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        TITAN_TRY(get_id(path, where, json_object_get(e, "id"), &id));
        if (!content || !content[0] || strlen(content) > 4096)
            return titan_error(TITAN_ERR_FORMAT, "%s: %s: content empty or longer than 4096 bytes", path, where);
        /* Decoding an added token gives its content, even where the vocab has the id. */
        TITAN_TRY(titan_bpe_set(b, id, content, strlen(content), 0, &dup));
    }
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        if ((b->byte_id[c] = titan_bpe_lookup(b, &byte, 1)) == TITAN_BPE_NONE)
            return titan_error(TITAN_ERR_FORMAT,
                               "%s: model.vocab: no token for the byte 0x%02x (not a byte-level BPE vocabulary?)",
                               path, c);
    }
    return TITAN_OK;
}

/* One merge: its two token strings, from "a b" or ["a", "b"]. */
static int merge_parts(json_t *m, const char **a, size_t *an, const char **bb, size_t *bn) {
    if (json_is_string(m)) {
        const char *s = json_string_value(m), *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' ')) return 0;
        *a = s, *an = (size_t)(sp - s), *bb = sp + 1, *bn = strlen(sp + 1);
        return 1;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0)), *an = strlen(*a);
        *bb = json_string_value(json_array_get(m, 1)), *bn = strlen(*bb);
        return 1;
    }
    return 0;
}

static titan_status load_merges(titan_bpe *b, const char *path, json_t *merges, const int16_t *from_cp) {
    json_t *m;
    size_t i, cap = 0;
    unsigned char *buf = NULL;
    titan_status st = TITAN_OK;
    json_array_foreach(merges, i, m) {
        const char *a, *c;
        size_t an, cn;
        if (!merge_parts(m, &a, &an, &c, &cn)) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: model.merges[%zu]: not \"a b\" nor [a, b]", path, i);
            break;
        }
        if (an + cn > cap) { /* the bytes are never more than the strings' */
            unsigned char *nb = realloc(buf, 2 * (an + cn) + 64);
            if (!nb) {
                st = titan_error(TITAN_ERR_NOMEM, "%s: model.merges: out of memory", path);
                break;
            }
            buf = nb, cap = 2 * (an + cn) + 64;
        }
        long la = unmap(from_cp, a, an, buf);
        long lc = la > 0 ? unmap(from_cp, c, cn, buf + la) : -1;
        uint32_t left = la > 0 ? titan_bpe_lookup(b, buf, (size_t)la) : TITAN_BPE_NONE;
        uint32_t right = lc > 0 ? titan_bpe_lookup(b, buf + la, (size_t)lc) : TITAN_BPE_NONE;
        uint32_t whole = left != TITAN_BPE_NONE && right != TITAN_BPE_NONE
                             ? titan_bpe_lookup(b, buf, (size_t)(la + lc)) : TITAN_BPE_NONE;
        if (whole == TITAN_BPE_NONE) {
            st = titan_error(TITAN_ERR_FORMAT,
                             "%s: model.merges[%zu]: '%.*s' + '%.*s': a part or the merged token is not in model.vocab",
                             path, i, (int)(an > 40 ? 40 : an), a, (int)(cn > 40 ? 40 : cn), c);
            break;
        }
        if (i >= UINT32_MAX) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: model.merges: too many", path);
            break;
        }
        if ((st = titan_bpe_add_pair(b, left, right, (uint32_t)i, whole)) != TITAN_OK) break;
    }
    free(buf);
    return st;
}

static void pick_bos_eos(json_t *added, uint32_t *bos, uint32_t *eos) {
    json_t *e;
    size_t i;
    uint32_t first = TITAN_BPE_NONE, second = TITAN_BPE_NONE;
    *bos = *eos = TITAN_BPE_NONE;
    json_array_foreach(added, i, e) {
        uint32_t id = (uint32_t)json_integer_value(json_object_get(e, "id"));
        const char *c = json_string_value(json_object_get(e, "content"));
        if (strcmp(c, "<|begin_of_text|>") == 0 && *bos == TITAN_BPE_NONE) *bos = id;
        if (strcmp(c, "<|end_of_text|>") == 0 && *eos == TITAN_BPE_NONE) *eos = id;
        if (i == 0) first = id;
        if (i == 1) second = id;
    }
    if (*bos == TITAN_BPE_NONE) *bos = first;
    if (*eos == TITAN_BPE_NONE) *eos = second != TITAN_BPE_NONE ? second : first;
}

static titan_status load(titan_bpe *b, const char *path, json_t *root, uint32_t *bos, uint32_t *eos) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return titan_error(TITAN_ERR_FORMAT, "%s: no \"model\" object", path);
    TITAN_TRY(check_model(path, root, model));
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab)) return titan_error(TITAN_ERR_FORMAT, "%s: model.vocab: missing or not an object", path);
    if (!json_is_array(merges)) return titan_error(TITAN_ERR_FORMAT, "%s: model.merges: missing or not an array", path);
    if (added && !json_is_array(added)) return titan_error(TITAN_ERR_FORMAT, "%s: added_tokens: not an array", path);
    if (json_array_size(added) == 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: added_tokens: none, so no <|begin_of_text|>/<|end_of_text|>", path);
    /* The vocabulary size is the largest id + 1, over vocab and added tokens. */
    uint32_t max_id = 0, id = 0;
    const char *key;
    json_t *v;
    size_t i;
    json_object_foreach(vocab, key, v) {
        TITAN_TRY(get_id(path, "model.vocab", v, &id));
        if (id > max_id) max_id = id;
    }
    json_array_foreach(added, i, v) {
        TITAN_TRY(get_id(path, "added_tokens", json_object_get(v, "id"), &id));
        if (id > max_id) max_id = id;
    }
    int16_t from_cp[324];
    byte_alphabet(from_cp);
    TITAN_TRY(titan_bpe_init(b, max_id + 1, path));
    TITAN_TRY(load_vocab(b, path, vocab, added, from_cp));
    TITAN_TRY(load_merges(b, path, merges, from_cp));
    b->whole_words = json_is_true(json_object_get(model, "ignore_merges"));
    pick_bos_eos(added, bos, eos);
    return TITAN_OK;
}

titan_status titan_bpe_load_hf(titan_bpe *b, const char *path, const char *data, size_t n, uint32_t *bos,
                               uint32_t *eos) {
    json_error_t err;
    json_t *root = json_loadb(data, n, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return titan_error(TITAN_ERR_FORMAT, "%s: line %d, column %d: %s", path, err.line, err.column, err.text);
    titan_status st = json_is_object(root) ? load(b, path, root, bos, eos)
                                           : titan_error(TITAN_ERR_FORMAT, "%s: not a JSON object", path);
    json_decref(root);
    return st;
}
