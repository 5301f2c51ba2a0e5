/* hf_tokenizer.c - titan's tokenizers as Hugging Face tokenizer files:
 * tokenizer.json (the `tokenizers` library's format), tokenizer_config.json
 * and special_tokens_map.json (transformers' AutoTokenizer).
 *
 *   tiktoken  a byte-level BPE: the ranks are the ids, each token written in
 *             GPT-2's byte-to-unicode alphabet; the merges are every split
 *             of a token into two tokens, in the order of the token's rank
 *             (splits of one token by their parts' ranks), with
 *             ignore_merges, so a pre-token that is a token is taken whole:
 *             tiktoken's rule, as transformers' own tiktoken converter
 *             derives it. Llama 3's pattern splits pre-tokens; the 256
 *             special tokens are added tokens.
 *   byte      the same form with the 256 bytes as the vocabulary and no
 *             merges, so every byte stays a token of its own (titan's byte
 *             tokenizer exactly); <|begin_of_text|> and <|end_of_text|> are
 *             added tokens 256 and 257.
 *   hf        the tokenizer.json it was opened from, byte for byte.
 *
 * The post-processor starts every text with <|begin_of_text|> (titan-shard
 * starts every document with it; add_special_tokens=False leaves it out).
 * titan encodes the text of a special token ("<|end_of_text|>" written in
 * a document) as plain text: tokenizer_config.json sets
 * split_special_tokens, so AutoTokenizer does the same; the bare
 * `tokenizers` library needs encode_special_tokens = True for it. */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "interchange/hf_convert.h"
#include "interchange/vocab_pieces.h"

static titan_status dump(const char *dir, const char *name, json_t *j, size_t flags) {
    char path[PATH_MAX];
    if (!j) return titan_error(TITAN_ERR_NOMEM, "%s/%s: out of memory", dir, name);
    titan_status st = titan_fs_join(path, sizeof path, dir, name);
    char *txt = st == TITAN_OK ? json_dumps(j, flags | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (st != TITAN_OK) return st;
    if (!txt) return titan_error(TITAN_ERR_NOMEM, "%s: cannot format JSON", path);
    size_t n = strlen(txt);
    txt[n] = '\n'; /* json_dumps leaves room for the NUL only: rewrite it */
    st = titan_fs_write_file(path, txt, n + 1);
    free(txt);
    return st;
}

static json_t *added_token(uint32_t id, const char *content) {
    return json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", content, "single_word", 0,
                     "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
}

static json_t *byte_level(int prefix_space, int trim_offsets, int use_regex) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", prefix_space, "trim_offsets",
                     trim_offsets, "use_regex", use_regex);
}

/* Byte-level output, then <|begin_of_text|> before each sequence. */
static json_t *post_processor(const char *bos, uint32_t bos_id) {
    json_t *single = json_pack("[{s:{s:s, s:i}}, {s:{s:s, s:i}}]", "SpecialToken", "id", bos, "type_id", 0,
                               "Sequence", "id", "A", "type_id", 0);
    json_t *pair = json_pack("[{s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}]", "SpecialToken",
                             "id", bos, "type_id", 0, "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id", bos,
                             "type_id", 1, "Sequence", "id", "B", "type_id", 1);
    json_t *specials = json_pack("{s:{s:s, s:[I], s:[s]}}", bos, "id", bos, "ids", (json_int_t)bos_id, "tokens", bos);
    json_t *tmpl = json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", single, "pair", pair,
                             "special_tokens", specials);
    return json_pack("{s:s, s:[o, o]}", "type", "Sequence", "processors", byte_level(1, 0, 1), tmpl);
}

/* The merges of a tiktoken vocabulary (see the top of the file). */
static titan_status rank_merges(const titan_vocab_pieces *p, uint32_t n_base, json_t *merges) {
    size_t maxlen = 0, n;
    for (uint32_t r = 0; r < n_base; r++) {
        titan_vocab_piece(p, r, &n);
        if (n > maxlen) maxlen = n;
    }
    char *buf = malloc(4 * maxlen + 4);
    uint64_t *local = malloc((maxlen + 1) * sizeof *local);
    titan_status st = buf && local ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "tokenizer.json: out of memory");
    for (uint32_t r = 0; r < n_base && st == TITAN_OK; r++) {
        const uint8_t *s = (const uint8_t *)titan_vocab_piece(p, r, &n);
        size_t m = 0;
        for (size_t k = 1; k < n; k++) {
            uint32_t a = titan_vocab_lookup(p, s, k), b = titan_vocab_lookup(p, s + k, n - k);
            if (a < n_base && b < n_base) local[m++] = (uint64_t)a << 32 | b;
        }
        for (size_t i = 1; i < m; i++) /* by (left rank, right rank): a few splits, insertion sort */
            for (size_t j = i; j > 0 && local[j - 1] > local[j]; j--) {
                uint64_t t = local[j];
                local[j] = local[j - 1], local[j - 1] = t;
            }
        for (size_t i = 0; i < m && st == TITAN_OK; i++) {
            size_t la, lb;
            const char *a = titan_vocab_piece(p, (uint32_t)(local[i] >> 32), &la);
            const char *b = titan_vocab_piece(p, (uint32_t)local[i], &lb);
            size_t o = titan_vocab_byte_unicode((const uint8_t *)a, la, buf);
            buf[o++] = ' '; /* never inside a token: the space byte is written U+0120 */
            titan_vocab_byte_unicode((const uint8_t *)b, lb, buf + o);
            if (json_array_append_new(merges, json_string(buf)) != 0)
                st = titan_error(TITAN_ERR_NOMEM, "tokenizer.json: out of memory");
        }
    }
    free(buf);
    free(local);
    return st;
}

/* tokenizer.json of a byte or tiktoken tokenizer: ids below bos are the
 * regular tokens, bos and the ids after it the special ones. */
static titan_status build_bpe(const titan_tokenizer *t, int byte, json_t **out) {
    uint32_t n = (uint32_t)titan_tokenizer_vocab_size(t), n_base = titan_tokenizer_bos(t);
    titan_vocab_pieces p;
    titan_status st = titan_vocab_pieces_load(&p, t, n, n_base);
    if (st != TITAN_OK) {
        titan_vocab_pieces_free(&p);
        return st;
    }
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    size_t maxlen = 0, k;
    for (uint32_t id = 0; id < n; id++) {
        titan_vocab_piece(&p, id, &k);
        if (k > maxlen) maxlen = k;
    }
    char *buf = malloc(2 * maxlen + 1);
    if (!vocab || !merges || !added || !buf)
        st = titan_error(TITAN_ERR_NOMEM, "tokenizer.json: out of memory");
    for (uint32_t id = 0; id < n && st == TITAN_OK; id++) {
        const char *s = titan_vocab_piece(&p, id, &k);
        int bad;
        if (id < n_base) {
            titan_vocab_byte_unicode((const uint8_t *)s, k, buf);
            bad = json_object_set_new(vocab, buf, json_integer(id));
        } else {
            memcpy(buf, s, k);
            buf[k] = 0;
            bad = json_array_append_new(added, added_token(id, buf));
        }
        if (bad) st = titan_error(TITAN_ERR_NOMEM, "tokenizer.json: out of memory");
    }
    if (st == TITAN_OK && !byte) st = rank_merges(&p, n_base, merges);
    free(buf);
    titan_vocab_pieces_free(&p);
    if (st != TITAN_OK) {
        json_decref(vocab), json_decref(merges), json_decref(added);
        return st;
    }
    json_t *pre = byte ? byte_level(0, 1, 0)
                       : json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers",
                                   "type", "Split", "pattern", "Regex", titan_bpe_llama3_pattern, "behavior",
                                   "Isolated", "invert", 0, byte_level(0, 1, 0));
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout",
                              "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", !byte, "vocab", vocab, "merges", merges);
    *out = json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation", "padding",
                     "added_tokens", added, "normalizer", "pre_tokenizer", pre, "post_processor",
                     post_processor("<|begin_of_text|>", n_base), "decoder", byte_level(1, 1, 1), "model", model);
    return *out ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "tokenizer.json: out of memory");
}

/* The content of added token id in a tokenizer.json (hf: bos and eos are
 * its added tokens, whatever their names). */
static const char *added_content(json_t *root, uint32_t id) {
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(root, "added_tokens"), i, e)
        if (json_integer_value(json_object_get(e, "id")) == (json_int_t)id)
            return json_string_value(json_object_get(e, "content"));
    return NULL;
}

static titan_status write_configs(const char *dir, const char *bos, const char *eos, int64_t max_length) {
    json_t *cfg = json_pack("{s:s, s:s, s:b, s:[s, s], s:I, s:b, s:s}", "bos_token", bos, "eos_token", eos,
                            "clean_up_tokenization_spaces", 0, "model_input_names", "input_ids", "attention_mask",
                            "model_max_length", (json_int_t)max_length, "split_special_tokens", 1,
                            "tokenizer_class", "PreTrainedTokenizerFast");
    TITAN_TRY(dump(dir, "tokenizer_config.json", cfg, JSON_INDENT(2)));
    return dump(dir, "special_tokens_map.json", json_pack("{s:s, s:s}", "bos_token", bos, "eos_token", eos),
                JSON_INDENT(2));
}

titan_status titan_hf_write_tokenizer(const titan_tokenizer *t, const char *dir, int64_t max_length) {
    const char *data;
    size_t len;
    const char *kind = titan_tokenizer_file(t, &data, &len), *id = titan_tokenizer_id(t);
    if (kind && !strcmp(kind, "hf")) {
        json_error_t je;
        json_t *root = json_loadb(data, len, 0, &je);
        if (!root) return titan_error(TITAN_ERR_FORMAT, "tokenizer %s: line %d: %s", id, je.line, je.text);
        const char *bos = added_content(root, titan_tokenizer_bos(t));
        const char *eos = added_content(root, titan_tokenizer_eos(t));
        char path[PATH_MAX];
        titan_status st = bos && eos ? titan_fs_join(path, sizeof path, dir, "tokenizer.json")
                                     : titan_error(TITAN_ERR_FORMAT, "tokenizer %s: bos/eos are no added tokens", id);
        if (st == TITAN_OK) st = titan_fs_write_file(path, data, len);
        if (st == TITAN_OK) st = write_configs(dir, bos, eos, max_length);
        json_decref(root);
        return st;
    }
    json_t *tj = NULL;
    TITAN_TRY(build_bpe(t, kind == NULL, &tj));
    TITAN_TRY(dump(dir, "tokenizer.json", tj, JSON_INDENT(2)));
    return write_configs(dir, "<|begin_of_text|>", "<|end_of_text|>", max_length);
}
