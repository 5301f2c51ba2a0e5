/* gguf_vocab.c - titan's tokenizers as llama.cpp "gpt2" (byte-level BPE)
 * vocabularies: tokenizer.ggml.{model, pre, tokens, token_type, merges,
 * bos/eos_token_id, add_bos_token}.
 *
 * llama.cpp stores a byte-level vocabulary as GPT-2 does: every byte maps to
 * one printable unicode character (bytes_to_unicode), a token is the string
 * of its bytes' characters, a merge is "left right" in that form, in priority
 * order. Without merges llama.cpp's BPE leaves each byte a token of its own,
 * which is exactly titan's byte tokenizer. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interchange/gguf.h"
#include "interchange/vocab_pieces.h"
#include "core/log.h"

/* ---- writing the keys ---- */

static titan_status put_common(titan_gguf_writer *w, const titan_tokenizer *t, const char *pre) {
    TITAN_TRY(titan_gguf_kv_str(w, "tokenizer.ggml.model", "gpt2"));
    TITAN_TRY(titan_gguf_kv_str(w, "tokenizer.ggml.pre", pre));
    TITAN_TRY(titan_gguf_kv_u32(w, "tokenizer.ggml.bos_token_id", titan_tokenizer_bos(t)));
    TITAN_TRY(titan_gguf_kv_u32(w, "tokenizer.ggml.eos_token_id", titan_tokenizer_eos(t)));
    /* titan-shard starts every document with bos, so prompts should too. */
    TITAN_TRY(titan_gguf_kv_bool(w, "tokenizer.ggml.add_bos_token", 1));
    return titan_gguf_kv_bool(w, "tokenizer.ggml.add_eos_token", 0);
}

/* tokens and token_type: the ids below n_regular as byte-level strings, the
 * ids up to the tokenizer's size as control tokens under their names, the
 * rest padding. */
static titan_status put_tokens(titan_gguf_writer *w, const titan_vocab_pieces *p, uint32_t n_regular, int n_vocab) {
    size_t maxlen = 0, k;
    for (uint32_t id = 0; id < p->n; id++) {
        titan_vocab_piece(p, id, &k);
        if (k > maxlen) maxlen = k;
    }
    char *buf = malloc(2 * maxlen + 32);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "gguf vocabulary: out of memory");
    titan_status st = titan_gguf_kv_array(w, "tokenizer.ggml.tokens", TITAN_GGUF_STRING, (uint64_t)n_vocab);
    for (int id = 0; id < n_vocab && st == TITAN_OK; id++) {
        if ((uint32_t)id >= p->n) {
            int m = snprintf(buf, 32, "[PAD%d]", id);
            st = titan_gguf_arr_str(w, buf, (size_t)m);
            continue;
        }
        const char *s = titan_vocab_piece(p, (uint32_t)id, &k);
        if ((uint32_t)id < n_regular) st = titan_gguf_arr_str(w, buf, titan_vocab_byte_unicode((const uint8_t *)s, k, buf));
        else st = titan_gguf_arr_str(w, s, k);
    }
    free(buf);
    if (st == TITAN_OK) st = titan_gguf_kv_array(w, "tokenizer.ggml.token_type", TITAN_GGUF_I32, (uint64_t)n_vocab);
    for (int id = 0; id < n_vocab && st == TITAN_OK; id++)
        st = titan_gguf_arr_i32(w, (uint32_t)id < n_regular ? TITAN_GGUF_TOKEN_NORMAL
                                   : (uint32_t)id < p->n ? TITAN_GGUF_TOKEN_CONTROL : TITAN_GGUF_TOKEN_UNUSED);
    return st;
}

/* The merge that makes token r: its bytes merged as tiktoken would with only
 * the ranks below r end as two tokens, left and right. 0 when they do not. */
static int split_by_rank(const titan_vocab_pieces *p, uint32_t r, uint32_t *left_len) {
    size_t n;
    const char *s = titan_vocab_piece(p, r, &n);
    size_t len[256], m = n;
    if (n < 2 || n > 256) return 0;
    for (size_t i = 0; i < n; i++) len[i] = 1;
    while (m > 2) {
        uint32_t best = UINT32_MAX;
        size_t bi = 0, at = 0;
        for (size_t i = 0; i + 1 < m; at += len[i], i++) {
            uint32_t rk = titan_vocab_lookup(p, s + at, len[i] + len[i + 1]);
            if (rk < r && rk < best) best = rk, bi = i;
        }
        if (best == UINT32_MAX) return 0;
        len[bi] += len[bi + 1];
        memmove(len + bi + 1, len + bi + 2, (m - bi - 2) * sizeof *len);
        m--;
    }
    *left_len = (uint32_t)len[0];
    return titan_vocab_lookup(p, s, len[0]) < r && titan_vocab_lookup(p, s + len[0], len[1]) < r;
}

static titan_status put_rank_merges(titan_gguf_writer *w, const titan_vocab_pieces *p, uint32_t n_regular) {
    uint32_t *split = malloc((size_t)n_regular * sizeof *split);
    if (!split) return titan_error(TITAN_ERR_NOMEM, "gguf vocabulary: out of memory");
    uint64_t count = 0, lost = 0;
    size_t maxlen = 0;
    for (uint32_t r = 0; r < n_regular; r++) {
        size_t n;
        titan_vocab_piece(p, r, &n);
        if (n > maxlen) maxlen = n;
        split[r] = 0;
        if (n < 2) continue;
        if (split_by_rank(p, r, &split[r])) count++;
        else split[r] = 0, lost++;
    }
    if (lost) titan_debug("gguf: %llu tokens are no merge of lower-ranked ones", (unsigned long long)lost);
    char *buf = malloc(2 * maxlen + 2);
    titan_status st = buf ? titan_gguf_kv_array(w, "tokenizer.ggml.merges", TITAN_GGUF_STRING, count)
                          : titan_error(TITAN_ERR_NOMEM, "gguf vocabulary: out of memory");
    for (uint32_t r = 0; r < n_regular && st == TITAN_OK; r++) {
        if (!split[r]) continue;
        size_t n;
        const uint8_t *s = (const uint8_t *)titan_vocab_piece(p, r, &n);
        size_t a = titan_vocab_byte_unicode(s, split[r], buf);
        buf[a++] = ' ';
        a += titan_vocab_byte_unicode(s + split[r], n - split[r], buf + a);
        st = titan_gguf_arr_str(w, buf, a);
    }
    free(buf);
    free(split);
    return st;
}

/* ---- tokenizer.json (hf:PATH): its own strings, merges and added tokens ---- */

static titan_status put_hf(titan_gguf_writer *w, const titan_tokenizer *t, int n_vocab) {
    const char *txt, *path = titan_tokenizer_id(t);
    size_t len;
    titan_tokenizer_file(t, &txt, &len);
    json_error_t je;
    json_t *j = json_loadb(txt, len, 0, &je);
    if (!j) return titan_error(TITAN_ERR_FORMAT, "%s: line %d: %s", path, je.line, je.text);
    json_t *vocab = json_object_get(json_object_get(j, "model"), "vocab");
    json_t *merges = json_object_get(json_object_get(j, "model"), "merges");
    json_t *added = json_object_get(j, "added_tokens");
    const char **tok = calloc((size_t)n_vocab, sizeof *tok);
    int *type = calloc((size_t)n_vocab, sizeof *type);
    titan_status st = tok && type ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    if (st == TITAN_OK && (!json_is_object(vocab) || !json_is_array(merges)))
        st = titan_error(TITAN_ERR_FORMAT, "%s: no model.vocab object or model.merges array", path);
    const char *k;
    json_t *v;
    if (st == TITAN_OK) json_object_foreach(vocab, k, v) {
        json_int_t id = json_integer_value(v);
        if (json_is_integer(v) && id >= 0 && id < n_vocab) tok[id] = k, type[id] = TITAN_GGUF_TOKEN_NORMAL;
    }
    size_t i;
    if (st == TITAN_OK && json_is_array(added)) json_array_foreach(added, i, v) {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        const char *c = json_string_value(json_object_get(v, "content"));
        if (c && id >= 0 && id < n_vocab) {
            tok[id] = c;
            type[id] = json_is_true(json_object_get(v, "special")) ? TITAN_GGUF_TOKEN_CONTROL
                                                                   : TITAN_GGUF_TOKEN_USER_DEFINED;
        }
    }
    if (st == TITAN_OK) st = put_common(w, t, "llama-bpe");
    if (st == TITAN_OK) st = titan_gguf_kv_array(w, "tokenizer.ggml.tokens", TITAN_GGUF_STRING, (uint64_t)n_vocab);
    char pad[32];
    for (int id = 0; id < n_vocab && st == TITAN_OK; id++) {
        if (tok[id]) st = titan_gguf_arr_str(w, tok[id], strlen(tok[id]));
        else st = titan_gguf_arr_str(w, pad, (size_t)snprintf(pad, sizeof pad, "[PAD%d]", id));
    }
    if (st == TITAN_OK) st = titan_gguf_kv_array(w, "tokenizer.ggml.token_type", TITAN_GGUF_I32, (uint64_t)n_vocab);
    for (int id = 0; id < n_vocab && st == TITAN_OK; id++)
        st = titan_gguf_arr_i32(w, type[id] ? type[id] : TITAN_GGUF_TOKEN_UNUSED);
    if (st == TITAN_OK) st = titan_gguf_kv_array(w, "tokenizer.ggml.merges", TITAN_GGUF_STRING, json_array_size(merges));
    json_array_foreach(merges, i, v) {
        if (st != TITAN_OK) break;
        const char *a = json_string_value(v), *b = NULL;
        if (json_is_array(v) && json_array_size(v) == 2) {
            a = json_string_value(json_array_get(v, 0));
            b = json_string_value(json_array_get(v, 1));
        }
        if (!a || (json_is_array(v) && !b)) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: model.merges[%zu]: neither \"a b\" nor [a, b]", path, i);
            break;
        }
        if (!b) {
            st = titan_gguf_arr_str(w, a, strlen(a));
            continue;
        }
        size_t la = strlen(a), lb = strlen(b);
        char *m = malloc(la + lb + 2);
        if (!m) {
            st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        memcpy(m, a, la);
        m[la] = ' ';
        memcpy(m + la + 1, b, lb);
        st = titan_gguf_arr_str(w, m, la + lb + 1);
        free(m);
    }
    free(tok);
    free(type);
    json_decref(j);
    return st;
}

titan_status titan_gguf_put_vocab(titan_gguf_writer *w, const titan_tokenizer *t, int n_vocab) {
    int size = titan_tokenizer_vocab_size(t);
    if (n_vocab < size)
        return titan_error(TITAN_ERR_FORMAT, "tokenizer %s has %d tokens, more than the model's vocabulary of %d",
                           titan_tokenizer_id(t), size, n_vocab);
    const char *id = titan_tokenizer_id(t);
    if (!strncmp(id, "hf:", 3)) return put_hf(w, t, n_vocab);
    /* byte and tiktoken: the ids below bos are the byte strings (for
     * tiktoken their ranks), bos and every id after it are special. */
    int byte = !strcmp(id, "byte");
    uint32_t n_regular = titan_tokenizer_bos(t);
    titan_vocab_pieces p;
    titan_status st = titan_vocab_pieces_load(&p, t, (uint32_t)size, n_regular);
    if (st == TITAN_OK) st = put_common(w, t, byte ? "default" : "llama-bpe");
    if (st == TITAN_OK) st = put_tokens(w, &p, n_regular, n_vocab);
    if (st == TITAN_OK && byte) st = titan_gguf_kv_array(w, "tokenizer.ggml.merges", TITAN_GGUF_STRING, 0);
    if (st == TITAN_OK && !byte) st = put_rank_merges(w, &p, n_regular);
    titan_vocab_pieces_free(&p);
    return st;
}
