/* bpe_tiktoken.c - loads a tiktoken BPE file (Llama 3's tokenizer.model):
 * one "base64(token bytes) rank" per line, ranks 0..n-1 each once. The ranks
 * are the ids; Llama 3's 256 special tokens take ids n..n+255. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe_impl.h"

#define N_SPECIAL 256

/* Llama 3.1's special tokens in id order, from n_base; the rest of the 256
 * are <|reserved_special_token_3|> .. <|reserved_special_token_247|>. */
static const char *const llama3_specials[] = {
    "<|begin_of_text|>",    "<|end_of_text|>",        "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
    "<|start_header_id|>",  "<|end_header_id|>",      "<|eom_id|>",
    "<|eot_id|>",           "<|python_tag|>",
};
#define N_NAMED (sizeof llama3_specials / sizeof llama3_specials[0])

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict standard base64 with padding; returns the decoded length or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out) {
    if (n == 0 || n % 4) return -1;
    size_t len = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            if (c == '=' && i + 4 == n && j >= 2) {
                v[j] = 0;
                pad++;
            } else if (pad || (v[j] = b64_value(c)) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[len++] = (unsigned char)(w >> 16);
        if (pad < 2) out[len++] = (unsigned char)(w >> 8);
        if (pad < 1) out[len++] = (unsigned char)w;
    }
    return (long)len;
}

/* Splits a line into its base64 word and rank; on bad input returns an error
 * naming path and line. */
static titan_status parse_line(const char *path, size_t line_no, const char *s, size_t n, unsigned char *buf,
                               long *len, uint64_t *rank) {
    const char *sp = memchr(s, ' ', n);
    if (!sp)
        return titan_error(TITAN_ERR_FORMAT, "%s: line %zu: expected 'base64 rank', found no space", path, line_no);
    size_t wn = (size_t)(sp - s);
    *len = b64_decode(s, wn, buf);
    if (*len <= 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: line %zu: bad base64 '%.*s'", path, line_no,
                           (int)(wn > 40 ? 40 : wn), s);
    const char *r = sp + 1, *end = s + n;
    if (r == end) return titan_error(TITAN_ERR_FORMAT, "%s: line %zu: no rank after the token", path, line_no);
    uint64_t v = 0;
    for (const char *p = r; p < end; p++) {
        if (*p < '0' || *p > '9' || v > UINT32_MAX)
            return titan_error(TITAN_ERR_FORMAT, "%s: line %zu: rank '%.*s' is not a number below 2^32", path,
                               line_no, (int)(end - r > 20 ? 20 : end - r), r);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *rank = v;
    return TITAN_OK;
}

/* Every way to split a token into two tokens is a merge of the token's rank:
 * merging the lowest-ranked pair is then tiktoken's rule exactly. */
static titan_status add_merges(titan_bpe *b, uint32_t n_base) {
    for (uint32_t id = 0; id < n_base; id++) {
        size_t n;
        const char *s = titan_bpe_bytes(b, id, &n);
        for (size_t k = 1; k < n; k++) {
            uint32_t l = titan_bpe_lookup(b, s, k);
            if (l == TITAN_BPE_NONE) continue;
            uint32_t r = titan_bpe_lookup(b, s + k, n - k);
            if (r != TITAN_BPE_NONE) TITAN_TRY(titan_bpe_add_pair(b, l, r, id, id));
        }
    }
    return TITAN_OK;
}

static titan_status add_specials(titan_bpe *b, uint32_t n_base) {
    char name[64];
    uint32_t dup;
    for (uint32_t i = 0; i < N_SPECIAL; i++) {
        if (i < N_NAMED) snprintf(name, sizeof name, "%s", llama3_specials[i]);
        else snprintf(name, sizeof name, "<|reserved_special_token_%u|>", i - (uint32_t)N_NAMED + 3);
        TITAN_TRY(titan_bpe_set(b, n_base + i, name, strlen(name), 0, &dup));
    }
    return TITAN_OK;
}

titan_status titan_bpe_load_tiktoken(titan_bpe *b, const char *path, const char *data, size_t n,
                                     uint32_t *n_base) {
    /* Count the tokens (non-empty lines) first: they fix the special ids. */
    size_t count = 0, longest = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(data + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - data) : n;
        if (e > i && !(e == i + 1 && data[i] == '\r')) count++;
        if (e - i > longest) longest = e - i;
        i = e + 1;
    }
    if (count == 0) return titan_error(TITAN_ERR_FORMAT, "%s: no tokens (empty file?)", path);
    if (count > UINT32_MAX - N_SPECIAL) return titan_error(TITAN_ERR_FORMAT, "%s: too many tokens", path);
    TITAN_TRY(titan_bpe_init(b, (uint32_t)count + N_SPECIAL, path));
    unsigned char *buf = malloc(longest + 4);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    titan_status st = TITAN_OK;
    size_t line_no = 0;
    for (size_t i = 0; i < n && st == TITAN_OK;) {
        const char *nl = memchr(data + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - data) : n, len = e - i;
        line_no++;
        const char *s = data + i;
        i = e + 1;
        if (len && s[len - 1] == '\r') len--;
        if (len == 0) continue;
        long k = 0;
        uint64_t rank = 0;
        st = parse_line(path, line_no, s, len, buf, &k, &rank);
        if (st != TITAN_OK) break;
        size_t had;
        if (rank >= count)
            st = titan_error(TITAN_ERR_FORMAT, "%s: line %zu: rank %llu out of range (%zu tokens: ranks 0..%zu)", path,
                             line_no, (unsigned long long)rank, count, count - 1);
        else if (titan_bpe_bytes(b, (uint32_t)rank, &had))
            st = titan_error(TITAN_ERR_FORMAT, "%s: line %zu: duplicate rank %llu", path, line_no,
                             (unsigned long long)rank);
        if (st != TITAN_OK) break;
        if ((size_t)k >= (1u << 24)) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: line %zu: token of %ld bytes is too long", path, line_no, k);
            break;
        }
        uint32_t dup;
        st = titan_bpe_set(b, (uint32_t)rank, buf, (size_t)k, 1, &dup);
        if (st == TITAN_OK && dup != TITAN_BPE_NONE)
            st = titan_error(TITAN_ERR_FORMAT, "%s: line %zu: token of rank %llu repeats the bytes of rank %u", path,
                             line_no, (unsigned long long)rank, dup);
    }
    free(buf);
    TITAN_TRY(st);
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        b->byte_id[c] = titan_bpe_lookup(b, &byte, 1);
        if (b->byte_id[c] == TITAN_BPE_NONE)
            return titan_error(TITAN_ERR_FORMAT, "%s: no token for the byte 0x%02x (not a byte-level BPE file?)",
                               path, c);
    }
    *n_base = (uint32_t)count;
    b->whole_words = 1; /* tiktoken takes a pre-token that is a token whole */
    TITAN_TRY(add_merges(b, (uint32_t)count));
    return add_specials(b, (uint32_t)count);
}
