/* test_safetensors.c - safetensors writer/reader round trip and each malformed-header case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "interchange/safetensors.h"
#include "core/fsutil.h"

static char dir[256];

static void round_trip(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    float a[12];
    for (int i = 0; i < 12; i++) a[i] = (float)i * 0.5f - 2.0f;
    uint16_t b[5], h[4];
    for (int i = 0; i < 5; i++) b[i] = titan_f32_to_bf16((float)i + 0.25f);
    for (int i = 0; i < 4; i++) h[i] = titan_f32_to_f16((float)-i * 0.125f);
    int64_t sa[2] = {3, 4}, sb[1] = {5}, sh[2] = {2, 2};
    titan_st_writer *w;
    CHECK(titan_st_writer_new(&w) == TITAN_OK, "writer_new");
    CHECK(titan_st_writer_add(w, "a", TITAN_DTYPE_F32, 2, sa) == TITAN_OK, "add a");
    CHECK(titan_st_writer_add(w, "b.bf16", TITAN_DTYPE_BF16, 1, sb) == TITAN_OK, "add b");
    CHECK(titan_st_writer_add(w, "h", TITAN_DTYPE_F16, 2, sh) == TITAN_OK, "add h");
    CHECK(titan_st_writer_add(w, "a", TITAN_DTYPE_F32, 2, sa) == TITAN_ERR_USAGE, "duplicate name refused");
    CHECK(titan_st_writer_meta(w, "format", "pt") == TITAN_OK, "meta");
    CHECK(titan_st_writer_data_bytes(w) == 48 + 10 + 8, "data bytes %llu",
          (unsigned long long)titan_st_writer_data_bytes(w));
    CHECK(titan_st_writer_begin(w, path) == TITAN_OK, "begin");
    CHECK(!titan_fs_exists(path), "file appears only at finish");
    CHECK(titan_st_writer_write(w, a) == TITAN_OK, "write a");
    CHECK(titan_st_writer_write(w, b) == TITAN_OK, "write b");
    CHECK(titan_st_writer_write(w, h) == TITAN_OK, "write h");
    CHECK(titan_st_writer_finish(w) == TITAN_OK, "finish");
    titan_st_writer_free(w);

    titan_st_file *f;
    CHECK(titan_st_open(&f, path) == TITAN_OK, "open round trip");
    if (!f) return;
    CHECK(titan_st_num_tensors(f) == 3, "3 tensors");
    CHECK(titan_st_metadata(f, "format") && !strcmp(titan_st_metadata(f, "format"), "pt"), "metadata");
    CHECK(titan_st_metadata(f, "nope") == NULL, "missing metadata is NULL");
    const titan_st_tensor *ta = titan_st_find(f, "a"), *tb = titan_st_find(f, "b.bf16"), *th = titan_st_find(f, "h");
    CHECK(ta && ta->dtype == TITAN_DTYPE_F32 && ta->ndim == 2 && ta->shape[0] == 3 && ta->shape[1] == 4, "a entry");
    CHECK(tb && tb->dtype == TITAN_DTYPE_BF16 && tb->ndim == 1 && tb->shape[0] == 5, "b entry");
    CHECK(th && th->dtype == TITAN_DTYPE_F16 && th->begin % 2 == 0, "h entry aligned");
    CHECK(titan_st_find(f, "zzz") == NULL, "absent tensor");
    float ra[12], rb[5], rh[4];
    uint16_t rab[12];
    CHECK(ta && titan_st_read(f, ta, TITAN_DTYPE_F32, ra) == TITAN_OK && !memcmp(ra, a, sizeof a), "a data");
    CHECK(tb && titan_st_read(f, tb, TITAN_DTYPE_F32, rb) == TITAN_OK && rb[3] == 3.25f, "bf16 -> f32");
    CHECK(th && titan_st_read(f, th, TITAN_DTYPE_F32, rh) == TITAN_OK && rh[3] == -0.375f, "f16 -> f32");
    CHECK(ta && titan_st_read(f, ta, TITAN_DTYPE_BF16, rab) == TITAN_OK && rab[5] == titan_f32_to_bf16(a[5]),
          "f32 -> bf16");
    titan_st_close(f);
}

/* Writes an 8-byte length, the header text and `data` bytes of zeros. */
static void write_raw(const char *path, uint64_t hlen_field, const char *header, size_t data) {
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 8; i++) fputc((int)(hlen_field >> (8 * i)) & 0xff, f);
    fputs(header, f);
    for (size_t i = 0; i < data; i++) fputc(0, f);
    fclose(f);
}

static void expect_code(titan_status code, const char *what, const char *header, size_t data, const char *needle) {
    char path[300];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    write_raw(path, strlen(header), header, data);
    titan_st_file *f = NULL;
    titan_status st = titan_st_open(&f, path);
    CHECK(st == code && f == NULL, "%s: status %d, want %d", what, st, code);
    CHECK(strstr(titan_error_message(), needle) != NULL, "%s: message lacks '%s'", what, needle);
    titan_st_close(f);
    titan_error_clear();
    /* The in-memory parser (the fuzz target's entry) agrees. */
    size_t hl = strlen(header), n = 8 + hl + data;
    unsigned char *mem = calloc(1, n);
    for (int i = 0; i < 8; i++) mem[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(mem + 8, header, hl);
    st = titan_st_parse(&f, mem, n, "mem");
    CHECK(st == code && f == NULL, "%s (from memory): status %d, want %d", what, st, code);
    titan_st_close(f);
    titan_error_clear();
    free(mem);
}

static void expect_bad(const char *what, const char *header, size_t data, const char *needle) {
    expect_code(TITAN_ERR_FORMAT, what, header, data, needle);
}

static void malformed(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/len.safetensors", dir);
    titan_st_file *f = NULL;
    /* header length past the end of the file */
    write_raw(path, 4096, "{}", 0);
    CHECK(titan_st_open(&f, path) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "absurd"), "length > file");
    /* header length over 100 MB */
    write_raw(path, (uint64_t)200 << 20, "{}", 0);
    CHECK(titan_st_open(&f, path) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "absurd"), "length > 100 MB");
    write_raw(path, UINT64_MAX, "{}", 0);
    CHECK(titan_st_open(&f, path) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "absurd"), "length 2^64-1");
    /* shorter than the length field */
    FILE *s = fopen(path, "wb");
    fputs("abc", s);
    fclose(s);
    CHECK(titan_st_open(&f, path) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "too short"), "3-byte file");
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    CHECK(titan_st_open(&f, path) == TITAN_ERR_IO, "missing file is an I/O error");
    titan_error_clear();

    expect_bad("not JSON", "{\"a\": ", 0, "header");
    expect_bad("not an object", "[1, 2, 3]", 0, "not a JSON object");
    expect_bad("unknown dtype", "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "I64");
    expect_bad("missing field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets");
    expect_bad("shape/size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16,
               "shape holds 16 bytes");
    expect_bad("negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative");
    /* A header whose data the file does not hold: the file was cut short (exit status 7). */
    expect_code(TITAN_ERR_CORRUPT, "offsets out of range",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "truncated");
    expect_bad("begin > end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "begin <= end");
    expect_bad("misaligned", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, "not aligned");
    expect_bad("overlap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    expect_bad("duplicate key",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "header");
    expect_bad("metadata not strings", "{\"__metadata__\":{\"n\":1}}", 0, "__metadata__");
    expect_bad("too many dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               "dimensions");
    expect_bad("huge shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
               4, "too large");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_safetensors.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    round_trip();
    malformed();
    titan_fs_remove_tree(dir);
    if (failures) fprintf(stderr, "test_safetensors: %d failures\n", failures);
    else printf("test_safetensors: ok\n");
    return failures != 0;
}
