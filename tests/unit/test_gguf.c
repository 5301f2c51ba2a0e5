/* test_gguf.c - the GGUF writer byte by byte (header, key/values, tensor
 * infos, alignment, padding), its refusals, GPT-2's byte-to-unicode map, and
 * the byte tokenizer as a vocabulary. llama.cpp itself reads the files in
 * tests/cli/gguf.sh. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "interchange/gguf.h"
#include "interchange/vocab_pieces.h"
#include "core/fsutil.h"

static char dir[64];

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A cursor over a file, reading GGUF's little-endian fields. */
typedef struct { const uint8_t *p; size_t at, n; } cur;
static uint64_t rd(cur *c, int n) { uint64_t v = c->at + n <= c->n ? le(c->p + c->at, n) : 0; c->at += n; return v; }
static int rd_str(cur *c, const char *want) {
    uint64_t n = rd(c, 8);
    int ok = c->at + n <= c->n && n == strlen(want) && !memcmp(c->p + c->at, want, n);
    c->at += n;
    return ok;
}

static void layout(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    titan_gguf_writer *w;
    CHECK(titan_gguf_writer_new(&w) == TITAN_OK);
    CHECK(titan_gguf_kv_str(w, "general.architecture", "llama") == TITAN_OK);
    CHECK(titan_gguf_kv_u32(w, "llama.block_count", 7) == TITAN_OK);
    CHECK(titan_gguf_kv_f32(w, "llama.rope.freq_base", 0.5f) == TITAN_OK);
    CHECK(titan_gguf_kv_array(w, "a", TITAN_GGUF_STRING, 2) == TITAN_OK);
    CHECK(titan_gguf_arr_str(w, "xy", 2) == TITAN_OK);
    CHECK(titan_gguf_arr_str(w, "", 0) == TITAN_OK);
    float m[2][3] = {{1, 2, 3}, {4, 5, 6}}, v[1] = {9};
    CHECK(titan_gguf_add_tensor(w, "m", TITAN_DTYPE_F32, 2, (int64_t[]){2, 3}) == TITAN_OK);
    CHECK(titan_gguf_add_tensor(w, "v", TITAN_DTYPE_F32, 1, (int64_t[]){1}) == TITAN_OK);
    CHECK(titan_gguf_data_bytes(w) == 64, "24 bytes padded to 32, then 4 padded to 32");
    CHECK(titan_gguf_begin(w, path) == TITAN_OK);
    CHECK(!titan_fs_exists(path), "only PATH.tmp until finish");
    CHECK(titan_gguf_write(w, m) == TITAN_OK);
    CHECK(titan_gguf_write(w, v) == TITAN_OK);
    CHECK(titan_gguf_finish(w) == TITAN_OK);
    titan_gguf_writer_free(w);
    char *raw;
    size_t n;
    CHECK(titan_fs_read_file(path, &raw, &n, 1 << 20) == TITAN_OK);
    if (!raw) return;
    cur c = {(const uint8_t *)raw, 0, n};
    CHECK(!memcmp(raw, "GGUF", 4));
    c.at = 4;
    CHECK(rd(&c, 4) == 3 && rd(&c, 8) == 2 && rd(&c, 8) == 4, "version 3, 2 tensors, 4 keys");
    CHECK(rd_str(&c, "general.architecture") && rd(&c, 4) == TITAN_GGUF_STRING && rd_str(&c, "llama"));
    CHECK(rd_str(&c, "llama.block_count") && rd(&c, 4) == TITAN_GGUF_U32 && rd(&c, 4) == 7);
    CHECK(rd_str(&c, "llama.rope.freq_base") && rd(&c, 4) == TITAN_GGUF_F32 && rd(&c, 4) == 0x3f000000);
    CHECK(rd_str(&c, "a") && rd(&c, 4) == TITAN_GGUF_ARRAY && rd(&c, 4) == TITAN_GGUF_STRING && rd(&c, 8) == 2);
    CHECK(rd_str(&c, "xy") && rd_str(&c, ""));
    /* m: dims innermost first (3, 2), f32, offset 0; v: (1), offset 32 */
    CHECK(rd_str(&c, "m") && rd(&c, 4) == 2 && rd(&c, 8) == 3 && rd(&c, 8) == 2 && rd(&c, 4) == 0 && rd(&c, 8) == 0);
    CHECK(rd_str(&c, "v") && rd(&c, 4) == 1 && rd(&c, 8) == 1 && rd(&c, 4) == 0 && rd(&c, 8) == 32);
    size_t data = (c.at + 31) / 32 * 32;
    CHECK(n == data + 64, "file %zu bytes, want %zu", n, data + 64);
    int zero = 1;
    for (size_t i = c.at; i < data && i < n; i++) zero &= raw[i] == 0;
    for (size_t i = data + 24; i < data + 32 && i < n; i++) zero &= raw[i] == 0;
    CHECK(zero, "padding is zeros");
    CHECK(n >= data + 64 && !memcmp(raw + data, m, 24) && !memcmp(raw + data + 32, v, 4));
    free(raw);
    unlink(path);
}

static void refusals(void) {
    titan_gguf_writer *w;
    CHECK(titan_gguf_writer_new(&w) == TITAN_OK);
    CHECK(titan_gguf_kv_u32(w, "k", 1) == TITAN_OK);
    CHECK(titan_gguf_kv_u32(w, "k", 2) == TITAN_ERR_USAGE, "duplicate key");
    CHECK(titan_gguf_kv_array(w, "arr", TITAN_GGUF_I32, 2) == TITAN_OK);
    CHECK(titan_gguf_arr_str(w, "x", 1) == TITAN_ERR_USAGE, "string into an i32 array");
    CHECK(titan_gguf_arr_i32(w, 1) == TITAN_OK);
    CHECK(titan_gguf_kv_u32(w, "next", 1) == TITAN_ERR_USAGE, "array short of an element");
    char longname[80];
    memset(longname, 'n', sizeof longname - 1);
    longname[79] = 0;
    CHECK(titan_gguf_add_tensor(w, longname, TITAN_DTYPE_F32, 1, (int64_t[]){1}) == TITAN_ERR_USAGE);
    CHECK(titan_gguf_add_tensor(w, "u", TITAN_DTYPE_U32, 1, (int64_t[]){1}) == TITAN_ERR_USAGE);
    CHECK(titan_gguf_add_tensor(w, "z", TITAN_DTYPE_F32, 1, (int64_t[]){0}) == TITAN_ERR_USAGE);
    char path[128];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    CHECK(titan_gguf_begin(w, path) != TITAN_OK, "a writer that refused something never writes");
    titan_gguf_writer_free(w);
    CHECK(!titan_fs_exists(path));
    /* A file begun and abandoned leaves nothing behind. */
    CHECK(titan_gguf_writer_new(&w) == TITAN_OK);
    CHECK(titan_gguf_add_tensor(w, "t", TITAN_DTYPE_BF16, 1, (int64_t[]){3}) == TITAN_OK);
    CHECK(titan_gguf_begin(w, path) == TITAN_OK);
    CHECK(titan_gguf_finish(w) == TITAN_ERR_USAGE, "finish before every tensor is written");
    titan_gguf_writer_free(w);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(!titan_fs_exists(path) && !titan_fs_exists(tmp));
}

static void byte_unicode(void) {
    char out[8];
    struct { uint8_t b; const char *s; } cases[] = {
        {'A', "A"}, {' ', "\xc4\xa0"} /* U+0120 'Ġ' */, {'\n', "\xc4\x8a"} /* U+010A 'Ċ' */,
        {0x00, "\xc4\x80"} /* U+0100 */, {0x7f, "\xc4\xa1"} /* U+0121 */, {0xad, "\xc5\x83"} /* U+0143 */,
        {0xa1, "\xc2\xa1"}, {0xff, "\xc3\xbf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = titan_vocab_byte_unicode(&cases[i].b, 1, out);
        CHECK(n == strlen(cases[i].s) && !strcmp(out, cases[i].s), "byte 0x%02x", cases[i].b);
    }
    /* The map is one-to-one: 256 distinct strings. */
    char all[256][4];
    int distinct = 1;
    for (int b = 0; b < 256; b++) {
        uint8_t x = (uint8_t)b;
        titan_vocab_byte_unicode(&x, 1, all[b]);
        for (int a = 0; a < b; a++) distinct &= strcmp(all[a], all[b]) != 0;
    }
    CHECK(distinct);
}

static void byte_vocab(void) {
    titan_tokenizer *t;
    CHECK(titan_tokenizer_open(&t, "byte") == TITAN_OK);
    if (!t) return;
    titan_gguf_writer *w;
    CHECK(titan_gguf_writer_new(&w) == TITAN_OK);
    CHECK(titan_gguf_put_vocab(w, t, 257) == TITAN_ERR_FORMAT, "a model vocabulary smaller than the tokenizer's");
    titan_gguf_writer_free(w);
    CHECK(titan_gguf_writer_new(&w) == TITAN_OK);
    CHECK(titan_gguf_put_vocab(w, t, 260) == TITAN_OK);
    char path[128];
    snprintf(path, sizeof path, "%s/v.gguf", dir);
    CHECK(titan_gguf_begin(w, path) == TITAN_OK && titan_gguf_finish(w) == TITAN_OK);
    titan_gguf_writer_free(w);
    titan_tokenizer_free(t);
    char *raw;
    size_t n;
    CHECK(titan_fs_read_file(path, &raw, &n, 1 << 20) == TITAN_OK);
    if (!raw) return;
    /* Spot checks in the serialised strings: byte 'A', space as 'Ġ', the specials, padding. */
    CHECK(memmem(raw, n, "\x01\0\0\0\0\0\0\0A", 9) != NULL);
    CHECK(memmem(raw, n, "\x02\0\0\0\0\0\0\0\xc4\xa0", 10) != NULL);
    CHECK(memmem(raw, n, "<|begin_of_text|>", 17) && memmem(raw, n, "<|end_of_text|>", 15));
    CHECK(memmem(raw, n, "[PAD259]", 8) != NULL);
    CHECK(memmem(raw, n, "tokenizer.ggml.merges", 21) != NULL);
    free(raw);
    unlink(path);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_gguf.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    layout();
    refusals();
    byte_unicode();
    byte_vocab();
    titan_fs_remove_tree(dir);
    if (failures) fprintf(stderr, "test_gguf: %d failures\n", failures);
    else printf("test_gguf: ok\n");
    return failures != 0;
}
