/* test_ckpt.c - checkpoint format: round trips, sharded boxes, partial and
 * converting reads, `latest` and pruning, corruption, and SIGKILL during writes. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"

#include "check.h"
#include "files.h"
#define OK(expr) CHECK((expr) == TITAN_OK)

/* st must be `code` and the message must hold each of the (up to 3) strings. */
static void expect_err_at(int line, titan_status st, titan_status code, const char *a, const char *b,
                          const char *c) {
    const char *m = titan_error_message();
    const char *need[3] = {a, b, c};
    int ok = st == code;
    for (int i = 0; i < 3; i++)
        if (need[i] && !strstr(m, need[i])) ok = 0;
    if (!ok) {
        fprintf(stderr, "FAIL line %d: expected status %d with [%s|%s|%s], got %d: %s\n", line, code,
                a ? a : "", b ? b : "", c ? c : "", st, m);
        failures++;
    }
}
#define EXPECT_ERR(st, code, a, b, c) expect_err_at(__LINE__, (st), (code), (a), (b), (c))

static void fill(float *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (float)(int32_t)(uint32_t)x * 1e-9f;
    }
}

static titan_box box2(int64_t o0, int64_t o1, int64_t s0, int64_t s1) {
    titan_box b = {.ndim = 2};
    b.offset[0] = o0, b.offset[1] = o1, b.size[0] = s0, b.size[1] = s1;
    return b;
}

/* Copies the region b of a [rows x cols] row-major matrix into a dense buffer. */
static void extract(float *out, const float *m, int64_t cols, const titan_box *b) {
    for (int64_t i = 0; i < b->size[0]; i++)
        memcpy(out + i * b->size[1], m + (b->offset[0] + i) * cols + b->offset[1],
               (size_t)b->size[1] * sizeof(float));
}

/* ---- round trip: whole tensors, 2x2 sharded boxes, partial and converting reads ---- */

enum { BR = 6, BC = 8 };
static float A[3 * 5], B[BR * BC];
static uint16_t C16[4];
static uint32_t D[2 * 3];

/* Writes the fixture tensors at `step` into root. */
static titan_status write_fixture(const char *root, int64_t step, int keep) {
    titan_ckpt_writer *w;
    TITAN_TRY(titan_ckpt_begin(&w, root, step));
    int64_t sa[2] = {3, 5}, sb[2] = {BR, BC}, sc[1] = {4}, sd[2] = {2, 3};
    titan_status st = titan_ckpt_add(w, "a", TITAN_DTYPE_F32, 2, sa, NULL, A);
    /* b as four ranks would save it: 2x2 boxes, all into this one file. */
    for (int r = 0; r < 4 && st == TITAN_OK; r++) {
        titan_box bx = box2((r / 2) * (BR / 2), (r % 2) * (BC / 2), BR / 2, BC / 2);
        float part[(BR / 2) * (BC / 2)];
        extract(part, B, BC, &bx);
        st = titan_ckpt_add(w, "b", TITAN_DTYPE_F32, 2, sb, &bx, part);
    }
    if (st == TITAN_OK) st = titan_ckpt_add(w, "c", TITAN_DTYPE_BF16, 1, sc, NULL, C16);
    if (st == TITAN_OK) st = titan_ckpt_add(w, "d", TITAN_DTYPE_U32, 2, sd, NULL, D);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "tokens", 123456789012345ll);
    if (st == TITAN_OK) st = titan_ckpt_meta_f64(w, "lr", 3e-4);
    if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "tokenizer", "llama3");
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "step", step);
    if (st != TITAN_OK) {
        titan_ckpt_abort(w);
        return st;
    }
    return titan_ckpt_commit(w, keep);
}

static void test_roundtrip(const char *tmp) {
    char root[256];
    snprintf(root, sizeof root, "%s/rt", tmp);
    fill(A, 15, 1);
    fill(B, BR * BC, 2);
    float c32[4] = {1.5f, -2.25f, 1e-3f, 65504.0f};
    for (int i = 0; i < 4; i++) C16[i] = titan_f32_to_bf16(c32[i]);
    for (int i = 0; i < 6; i++) D[i] = 0xdeadbe00u + (uint32_t)i;
    OK(write_fixture(root, 7, 0));

    /* Writer usage errors leave the writer usable. */
    titan_ckpt_writer *w;
    OK(titan_ckpt_begin(&w, root, 8));
    int64_t s44[2] = {4, 4}, s45[2] = {4, 5};
    float z[16] = {0};
    titan_box top = box2(0, 0, 2, 4), mid = box2(1, 0, 2, 4), bot = box2(2, 0, 2, 4), out = box2(3, 0, 2, 4);
    OK(titan_ckpt_add(w, "p", TITAN_DTYPE_F32, 2, s44, &top, z));
    EXPECT_ERR(titan_ckpt_add(w, "p", TITAN_DTYPE_F32, 2, s44, &mid, z), TITAN_ERR_USAGE, "p", "overlaps", NULL);
    EXPECT_ERR(titan_ckpt_add(w, "p", TITAN_DTYPE_F32, 2, s45, &bot, z), TITAN_ERR_USAGE, "dtype or shape", NULL, NULL);
    EXPECT_ERR(titan_ckpt_add(w, "q", TITAN_DTYPE_F32, 2, s44, &out, z), TITAN_ERR_USAGE, "outside", NULL, NULL);
    EXPECT_ERR(titan_ckpt_meta_f64(w, "x", 1.0 / 0.0), TITAN_ERR_USAGE, "not finite", NULL, NULL);
    titan_ckpt_abort(w);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/step-00000008.tmp", root);
    CHECK(!titan_fs_exists(p));

    titan_ckpt *ck;
    OK(titan_ckpt_open(&ck, root));
    if (!ck) return;
    CHECK(titan_ckpt_step(ck) == 7);
    CHECK(strstr(titan_ckpt_path(ck), "step-00000007") != NULL);
    int64_t i64 = 0;
    double f64 = 0;
    const char *s = NULL;
    OK(titan_ckpt_meta_get_i64(ck, "tokens", &i64));
    CHECK(i64 == 123456789012345ll);
    OK(titan_ckpt_meta_get_f64(ck, "lr", &f64));
    CHECK(f64 == 3e-4);
    OK(titan_ckpt_meta_get_f64(ck, "tokens", &f64)); /* integers read as doubles */
    OK(titan_ckpt_meta_get_str(ck, "tokenizer", &s));
    CHECK(s && !strcmp(s, "llama3"));
    EXPECT_ERR(titan_ckpt_meta_get_i64(ck, "lr", &i64), TITAN_ERR_FORMAT, "\"lr\"", "metadata.json", "not an integer");
    EXPECT_ERR(titan_ckpt_meta_get_str(ck, "nope", &s), TITAN_ERR_FORMAT, "\"nope\"", "missing", NULL);

    CHECK(titan_ckpt_num_tensors(ck) == 4);
    titan_ckpt_tensor ti;
    OK(titan_ckpt_tensor_info(ck, 1, &ti));
    CHECK(!strcmp(ti.name, "b") && ti.dtype == TITAN_DTYPE_F32 && ti.ndim == 2 && ti.shape[0] == BR &&
          ti.shape[1] == BC && ti.nchunks == 4);
    OK(titan_ckpt_tensor_find(ck, "c", &ti));
    CHECK(ti.dtype == TITAN_DTYPE_BF16 && ti.ndim == 1 && ti.shape[0] == 4);
    CHECK(titan_ckpt_has_tensor(ck, "d") && !titan_ckpt_has_tensor(ck, "e"));
    EXPECT_ERR(titan_ckpt_tensor_find(ck, "e", &ti), TITAN_ERR_FORMAT, "e", NULL, NULL);
    titan_ckpt_chunk cinfo;
    OK(titan_ckpt_chunk_info(ck, "b", 3, &cinfo));
    CHECK(!strcmp(cinfo.file, "rank-00000.bin") && cinfo.box.offset[0] == 3 && cinfo.box.offset[1] == 4 &&
          cinfo.nbytes == 3 * 4 * 4 && cinfo.offset % 64 == 0);

    float a2[15], b2[BR * BC], part[64], ref[64];
    uint32_t d2[6];
    OK(titan_ckpt_read(ck, "a", TITAN_DTYPE_F32, NULL, a2));
    CHECK(!memcmp(a2, A, sizeof A));
    OK(titan_ckpt_read(ck, "b", TITAN_DTYPE_F32, NULL, b2));
    CHECK(!memcmp(b2, B, sizeof B));
    OK(titan_ckpt_read(ck, "d", TITAN_DTYPE_U32, NULL, d2));
    CHECK(!memcmp(d2, D, sizeof D));
    /* A box across all four saved chunks, and one inside a single chunk. */
    titan_box across = box2(1, 2, 4, 5), inside = box2(3, 5, 2, 2);
    OK(titan_ckpt_read(ck, "b", TITAN_DTYPE_F32, &across, part));
    extract(ref, B, BC, &across);
    CHECK(!memcmp(part, ref, 20 * sizeof(float)));
    OK(titan_ckpt_read(ck, "b", TITAN_DTYPE_F32, &inside, part));
    extract(ref, B, BC, &inside);
    CHECK(!memcmp(part, ref, 4 * sizeof(float)));
    /* Conversions: f32 -> bf16 (sharded, partial) and bf16 -> f32. */
    uint16_t h[20];
    OK(titan_ckpt_read(ck, "b", TITAN_DTYPE_BF16, &across, h));
    extract(ref, B, BC, &across);
    int conv_ok = 1;
    for (int i = 0; i < 20; i++) conv_ok &= h[i] == titan_f32_to_bf16(ref[i]);
    CHECK(conv_ok);
    float c2[4];
    OK(titan_ckpt_read(ck, "c", TITAN_DTYPE_F32, NULL, c2));
    CHECK(c2[0] == 1.5f && c2[1] == -2.25f && c2[3] == titan_bf16_to_f32(titan_f32_to_bf16(65504.0f)));
    EXPECT_ERR(titan_ckpt_read(ck, "d", TITAN_DTYPE_F32, NULL, a2), TITAN_ERR_USAGE, "u32", NULL, NULL);
    titan_box bad = box2(5, 0, 2, 2);
    EXPECT_ERR(titan_ckpt_read(ck, "b", TITAN_DTYPE_F32, &bad, part), TITAN_ERR_USAGE, "outside", NULL, NULL);
    OK(titan_ckpt_verify(ck));
    titan_ckpt_close(ck);

    /* A tensor saved with a missing quarter: reads of the saved part work, the rest is refused. */
    OK(titan_ckpt_begin(&w, root, 9));
    for (int r = 0; r < 3; r++) {
        titan_box bx = box2((r / 2) * 2, (r % 2) * 2, 2, 2);
        float q[4] = {(float)r, (float)r, (float)r, (float)r};
        OK(titan_ckpt_add(w, "holey", TITAN_DTYPE_F32, 2, s44, &bx, q));
    }
    OK(titan_ckpt_commit(w, 0));
    OK(titan_ckpt_open(&ck, root));
    if (!ck) return;
    CHECK(titan_ckpt_step(ck) == 9);
    float hole[16];
    EXPECT_ERR(titan_ckpt_read(ck, "holey", TITAN_DTYPE_F32, NULL, hole), TITAN_ERR_FORMAT, "holey",
               "not covered by the saved chunks", "12 of 16");
    titan_box ok_part = box2(0, 0, 4, 2);
    OK(titan_ckpt_read(ck, "holey", TITAN_DTYPE_F32, &ok_part, hole));
    CHECK(hole[0] == 0.0f && hole[7] == 2.0f);
    titan_ckpt_close(ck);
}

/* ---- `latest`, pruning, replacing a step, stale .tmp, fallbacks ---- */

static int64_t open_step(const char *path) {
    titan_ckpt *ck;
    if (titan_ckpt_open(&ck, path) != TITAN_OK) return -1;
    int64_t s = titan_ckpt_step(ck);
    titan_ckpt_close(ck);
    return s;
}

static void test_dir(const char *tmp) {
    char root[256], p[PATH_MAX];
    snprintf(root, sizeof root, "%s/dir", tmp);
    int64_t steps[8], latest = -1;
    int n = 0;
    EXPECT_ERR(titan_ckpt_latest_step(root, &latest), TITAN_ERR_IO, root, NULL, NULL);
    OK(titan_fs_mkdir_p(root));
    EXPECT_ERR(titan_ckpt_latest_step(root, &latest), TITAN_ERR_IO, "no checkpoint in", root, NULL);
    EXPECT_ERR(titan_ckpt_open(&(titan_ckpt *){0}, root), TITAN_ERR_IO, "no checkpoint in", NULL, NULL);

    for (int64_t s = 10; s <= 40; s += 10) OK(write_fixture(root, s, 2));
    OK(titan_ckpt_list_steps(root, steps, 8, &n));
    CHECK(n == 2 && steps[0] == 30 && steps[1] == 40);
    OK(titan_ckpt_latest_step(root, &latest));
    CHECK(latest == 40);
    char *txt = NULL;
    snprintf(p, sizeof p, "%s/latest", root);
    OK(titan_fs_read_file(p, &txt, NULL, 100));
    CHECK(txt && !strcmp(txt, "step-00000040\n"));
    free(txt);

    /* A rollback writes a lower step: it becomes `latest` and is kept. */
    OK(write_fixture(root, 25, 2));
    OK(titan_ckpt_list_steps(root, steps, 8, &n));
    CHECK(n == 2 && steps[0] == 25 && steps[1] == 40);
    CHECK(open_step(root) == 25);

    /* Rewriting an existing step replaces it. */
    float keep_a0 = A[0];
    A[0] = 42.0f;
    OK(write_fixture(root, 40, 0));
    A[0] = keep_a0;
    titan_ckpt *ck;
    snprintf(p, sizeof p, "%s/step-00000040", root);
    OK(titan_ckpt_open(&ck, p));
    if (ck) {
        float a2[15];
        OK(titan_ckpt_read(ck, "a", TITAN_DTYPE_F32, NULL, a2));
        CHECK(a2[0] == 42.0f);
        titan_ckpt_close(ck);
    }
    snprintf(p, sizeof p, "%s/step-00000040.tmp", root);
    CHECK(!titan_fs_exists(p));

    /* A stale step-50.tmp (even with a metadata.json) is ignored. */
    snprintf(p, sizeof p, "%s/step-00000050.tmp", root);
    OK(titan_fs_mkdir_p(p));
    snprintf(p, sizeof p, "%s/step-00000050.tmp/metadata.json", root);
    OK(titan_fs_write_file(p, "{", 1));
    CHECK(open_step(root) == 40);
    OK(titan_ckpt_list_steps(root, steps, 8, &n));
    CHECK(n == 2);
    /* `latest` missing, or naming a missing dir: the highest complete step, with a warning. */
    snprintf(p, sizeof p, "%s/latest", root);
    unlink(p);
    CHECK(open_step(root) == 40);
    OK(titan_fs_write_atomic(p, "step-00000099\n", 14));
    CHECK(open_step(root) == 40);
    OK(titan_ckpt_latest_step(root, &latest));
    CHECK(latest == 40);
    OK(titan_ckpt_set_latest(root, 25));
    CHECK(open_step(root) == 25);
    /* Pruning removes stale .tmp dirs of lower steps and never the new step. */
    OK(write_fixture(root, 60, 1));
    OK(titan_ckpt_list_steps(root, steps, 8, &n));
    CHECK(n == 1 && steps[0] == 60);
    snprintf(p, sizeof p, "%s/step-00000050.tmp", root);
    CHECK(!titan_fs_exists(p));
}

/* ---- corruption and malformed catalogs ---- */

/* Loads root/step-00000001/metadata.json, lets edit() change it, writes it back. */
static void edit_meta(const char *root, void (*edit)(json_t *)) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/step-00000001/metadata.json", root);
    json_t *j = json_load_file(p, 0, NULL);
    CHECK(j != NULL);
    if (!j) return;
    edit(j);
    CHECK(json_dump_file(j, p, JSON_INDENT(1)) == 0);
    json_decref(j);
}

static json_t *chunk_of(json_t *j, const char *t, int k) {
    return json_array_get(json_object_get(json_object_get(json_object_get(j, "tensors"), t), "chunks"), (size_t)k);
}
static void set_box_offset(json_t *j, int k, int64_t o0) {
    json_t *off = json_object_get(json_object_get(chunk_of(j, "b", k), "box"), "offset");
    json_array_set_new(off, 0, json_integer(o0));
}
static void edit_missing_file(json_t *j) { json_object_set_new(chunk_of(j, "b", 2), "file", json_string("rank-00001.bin")); }
static void edit_overlap(json_t *j) { set_box_offset(j, 2, 1); }     /* rows 1..3 meet rows 0..2 */
static void edit_out_of_range(json_t *j) { set_box_offset(j, 2, 4); } /* rows 4..6 of 6 */
static void edit_version(json_t *j) { json_object_set_new(j, "version", json_integer(2)); }
static void edit_nbytes(json_t *j) { json_object_set_new(chunk_of(j, "b", 0), "nbytes", json_integer(44)); }

static void test_corrupt(const char *tmp) {
    char root[256], data[PATH_MAX];
    snprintf(root, sizeof root, "%s/bad", tmp);
    snprintf(data, sizeof data, "%s/step-00000001/rank-00000.bin", root);
    titan_ckpt *ck = NULL;

    /* One flipped byte inside b's chunk 1: open succeeds, reading b fails. */
    OK(write_fixture(root, 1, 0));
    OK(titan_ckpt_open(&ck, root));
    titan_ckpt_chunk c;
    if (ck) OK(titan_ckpt_chunk_info(ck, "b", 1, &c));
    titan_ckpt_close(ck);
    FILE *f = fopen(data, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, (long)c.offset + 5, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, (long)c.offset + 5, SEEK_SET);
        fputc(ch ^ 0x10, f);
        fclose(f);
    }
    OK(titan_ckpt_open(&ck, root));
    if (ck) {
        float b2[BR * BC], a2[15];
        EXPECT_ERR(titan_ckpt_read(ck, "b", TITAN_DTYPE_F32, NULL, b2), TITAN_ERR_CORRUPT,
                   "checksum mismatch", "tensor b", "rank-00000.bin");
        titan_box other = box2(3, 0, 3, 4); /* only chunk 2: still readable */
        OK(titan_ckpt_read(ck, "b", TITAN_DTYPE_F32, &other, b2));
        OK(titan_ckpt_read(ck, "a", TITAN_DTYPE_F32, NULL, a2));
        EXPECT_ERR(titan_ckpt_verify(ck), TITAN_ERR_CORRUPT, "checksum mismatch", "(chunk 1)", NULL);
        titan_ckpt_close(ck);
    }

    /* Truncated data file. */
    OK(write_fixture(root, 1, 0));
    struct stat st;
    CHECK(stat(data, &st) == 0);
    CHECK(truncate(data, st.st_size - 10) == 0);
    EXPECT_ERR(titan_ckpt_open(&ck, root), TITAN_ERR_CORRUPT, "truncated", "rank-00000.bin", "tensor d (chunk 0)");

    /* A data file the catalog names is missing: an I/O error naming the chunk. */
    OK(write_fixture(root, 1, 0));
    edit_meta(root, edit_missing_file);
    EXPECT_ERR(titan_ckpt_open(&ck, root), TITAN_ERR_IO, "rank-00001.bin", "No such file", "tensor b: chunk 2");

    struct { void (*edit)(json_t *); const char *a, *b; } cases[] = {
        {edit_overlap, "tensor b", "overlap"},
        {edit_out_of_range, "tensor b", "outside the shape"},
        {edit_version, "version 2", "not supported"},
        {edit_nbytes, "tensor b", "nbytes 44"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        OK(write_fixture(root, 1, 0));
        edit_meta(root, cases[i].edit);
        EXPECT_ERR(titan_ckpt_open(&ck, root), TITAN_ERR_FORMAT, cases[i].a, cases[i].b, "metadata.json");
    }
    /* Not JSON at all. */
    OK(write_fixture(root, 1, 0));
    char mp[PATH_MAX];
    snprintf(mp, sizeof mp, "%s/step-00000001/metadata.json", root);
    OK(titan_fs_write_file(mp, "{\"format\": ", 11));
    EXPECT_ERR(titan_ckpt_open(&ck, root), TITAN_ERR_FORMAT, "metadata.json", "line 1", NULL);
}

/* ---- zstd chunks: round trip, raw fallback, determinism, damage ---- */

enum { ZR = 64, ZC = 96, ZBIG_ROWS = 17, ZBIG_COLS = 1 << 20 };

/* A smooth (compressible) f32 matrix and a random (incompressible) one. */
static void fill_smooth(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(i % 100) * 0.25f;
}

static void fill_bits(float *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t u = (uint32_t)(x >> 16);
        memcpy(&p[i], &u, sizeof u);
    }
}

/* Step `step` of root: tensors "s" (smooth, 4 row-band chunks), "r" (random)
 * and, when big, "big" (68 MiB: two chunks, compressed from the caller's memory). */
static titan_status write_z(const char *root, int64_t step, const float *sm, const float *rnd, const float *big) {
    titan_ckpt_writer *w;
    TITAN_TRY(titan_ckpt_begin(&w, root, step));
    int64_t sh[2] = {ZR, ZC}, bsh[2] = {ZBIG_ROWS, ZBIG_COLS};
    titan_status st = titan_ckpt_set_compression(w, TITAN_CKPT_COMPRESS_ZSTD, 3);
    for (int r = 0; r < 4 && st == TITAN_OK; r++) {
        titan_box bx = box2(r * (ZR / 4), 0, ZR / 4, ZC);
        st = titan_ckpt_add(w, "s", TITAN_DTYPE_F32, 2, sh, &bx, sm + (size_t)r * (ZR / 4) * ZC);
    }
    if (st == TITAN_OK) st = titan_ckpt_add(w, "r", TITAN_DTYPE_F32, 2, sh, NULL, rnd);
    if (st == TITAN_OK && big) st = titan_ckpt_add(w, "big", TITAN_DTYPE_F32, 2, bsh, NULL, big);
    if (st != TITAN_OK) {
        titan_ckpt_abort(w);
        return st;
    }
    return titan_ckpt_commit(w, 0);
}

static void edit_zstd_stored_huge(json_t *j) {
    json_object_set_new(chunk_of(j, "s", 0), "stored_nbytes", json_integer((json_int_t)1 << 40));
}
static void edit_zstd_no_stored(json_t *j) { json_object_del(chunk_of(j, "s", 0), "stored_nbytes"); }
static void edit_zstd_lz4(json_t *j) { json_object_set_new(chunk_of(j, "s", 0), "compression", json_string("lz4")); }
static void edit_raw_stored(json_t *j) { json_object_set_new(chunk_of(j, "r", 0), "stored_nbytes", json_integer(7)); }
static void edit_zstd_short(json_t *j) { /* the frame's last byte cut off */
    json_t *c = chunk_of(j, "s", 1);
    json_object_set_new(c, "stored_nbytes", json_integer(json_integer_value(json_object_get(c, "stored_nbytes")) - 1));
}

static void test_zstd(const char *tmp) {
    char root[256], root1[256], p[PATH_MAX], q[PATH_MAX];
    snprintf(root, sizeof root, "%s/z", tmp);
    snprintf(root1, sizeof root1, "%s/z1", tmp);
    size_t n = (size_t)ZR * ZC, nb = (size_t)ZBIG_ROWS * ZBIG_COLS;
    float *sm = malloc(n * sizeof *sm), *rnd = malloc(n * sizeof *rnd), *out = malloc(nb * sizeof *out);
    float *big = malloc(nb * sizeof *big);
    CHECK(sm && rnd && out && big);
    if (!sm || !rnd || !out || !big) return;
    fill_smooth(sm, n);
    fill_bits(rnd, n, 5);
    fill_smooth(big, nb);

    /* Levels: 0 is the default, 1..19 are accepted. */
    EXPECT_ERR(titan_ckpt_set_default_compression(TITAN_CKPT_COMPRESS_ZSTD, 20), TITAN_ERR_USAGE, "level 20", NULL, NULL);
    EXPECT_ERR(titan_ckpt_set_default_compression(TITAN_CKPT_COMPRESS_ZSTD, -1), TITAN_ERR_USAGE, "1..19", NULL, NULL);
    titan_ckpt_compression cz;
    CHECK(titan_ckpt_compression_parse("zstd", &cz) == 0 && cz == TITAN_CKPT_COMPRESS_ZSTD);
    CHECK(titan_ckpt_compression_parse("gzip", &cz) == -1);

    /* Same bytes with 1 thread and with all of them. */
    int nthreads = omp_get_max_threads();
    omp_set_num_threads(1);
    OK(write_z(root1, 1, sm, rnd, big));
    omp_set_num_threads(nthreads > 1 ? nthreads : 2);
    OK(write_z(root, 1, sm, rnd, big));
    omp_set_num_threads(nthreads);
    snprintf(p, sizeof p, "%s/step-00000001/rank-00000.bin", root);
    snprintf(q, sizeof q, "%s/step-00000001/rank-00000.bin", root1);
    CHECK(files_equal(p, q));
    snprintf(p, sizeof p, "%s/step-00000001/metadata.json", root);
    snprintf(q, sizeof q, "%s/step-00000001/metadata.json", root1);
    CHECK(files_equal(p, q));

    titan_ckpt *ck = NULL;
    OK(titan_ckpt_open(&ck, root));
    if (ck) {
        titan_ckpt_chunk c;
        OK(titan_ckpt_chunk_info(ck, "s", 2, &c));
        CHECK(c.compression == TITAN_CKPT_COMPRESS_ZSTD && c.nbytes == (uint64_t)(ZR / 4) * ZC * 4 &&
              c.stored_nbytes < c.nbytes / 4 && c.offset % 64 == 0);
        OK(titan_ckpt_chunk_info(ck, "r", 0, &c)); /* random floats do not shrink: stored raw */
        CHECK(c.compression == TITAN_CKPT_COMPRESS_NONE && c.stored_nbytes == c.nbytes);
        titan_ckpt_tensor ti;
        OK(titan_ckpt_tensor_find(ck, "big", &ti));
        CHECK(ti.nchunks == 2);
        OK(titan_ckpt_read(ck, "s", TITAN_DTYPE_F32, NULL, out));
        CHECK(!memcmp(out, sm, n * sizeof *sm));
        OK(titan_ckpt_read(ck, "r", TITAN_DTYPE_F32, NULL, out));
        CHECK(!memcmp(out, rnd, n * sizeof *rnd)); /* NaN patterns included: bits, not values */
        OK(titan_ckpt_read(ck, "big", TITAN_DTYPE_F32, NULL, out));
        CHECK(!memcmp(out, big, nb * sizeof *big));
        /* Partial and converting reads across two compressed chunks. */
        titan_box across = box2(10, 5, 20, 30);
        float ref[600];
        uint16_t h[600];
        OK(titan_ckpt_read(ck, "s", TITAN_DTYPE_BF16, &across, h));
        extract(ref, sm, ZC, &across);
        int conv_ok = 1;
        for (int i = 0; i < 600; i++) conv_ok &= h[i] == titan_f32_to_bf16(ref[i]);
        CHECK(conv_ok);
        OK(titan_ckpt_verify(ck));
        titan_ckpt_close(ck);
    }

    /* The catalog parsed from memory: same tensors, no data. */
    char *txt = NULL;
    size_t len = 0;
    OK(titan_fs_read_file(p, &txt, &len, (size_t)1 << 30));
    if (txt) {
        OK(titan_ckpt_parse(&ck, txt, len, "mem.json"));
        if (ck) {
            CHECK(titan_ckpt_num_tensors(ck) == 3 && titan_ckpt_step(ck) == 1);
            EXPECT_ERR(titan_ckpt_read(ck, "s", TITAN_DTYPE_F32, NULL, out), TITAN_ERR_IO, "mem.json", "no data files", NULL);
            titan_ckpt_close(ck);
        }
        EXPECT_ERR(titan_ckpt_parse(&ck, txt, len / 2, "mem.json"), TITAN_ERR_FORMAT, "mem.json", NULL, NULL);
        CHECK(ck == NULL);
        free(txt);
    }

    /* A flipped byte inside a compressed frame: exit status 7 either way (frame error or checksum). */
    OK(titan_ckpt_open(&ck, root));
    titan_ckpt_chunk c1 = {0};
    if (ck) OK(titan_ckpt_chunk_info(ck, "s", 1, &c1));
    titan_ckpt_close(ck);
    snprintf(q, sizeof q, "%s/step-00000001/rank-00000.bin", root);
    FILE *f = fopen(q, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, (long)(c1.offset + c1.stored_nbytes / 2), SEEK_SET);
        int ch = fgetc(f);
        fseek(f, (long)(c1.offset + c1.stored_nbytes / 2), SEEK_SET);
        fputc(ch ^ 0x5a, f);
        fclose(f);
    }
    OK(titan_ckpt_open(&ck, root));
    if (ck) {
        EXPECT_ERR(titan_ckpt_read(ck, "s", TITAN_DTYPE_F32, NULL, out), TITAN_ERR_CORRUPT, "rank-00000.bin",
                   "tensor s (chunk 1)", NULL);
        titan_box first = box2(0, 0, ZR / 4, ZC); /* chunk 0 alone still reads */
        OK(titan_ckpt_read(ck, "s", TITAN_DTYPE_F32, &first, out));
        titan_ckpt_close(ck);
    }

    /* Malformed compression fields are catalog errors (4); a frame cut short is corrupt (7). */
    struct { void (*edit)(json_t *); titan_status code; const char *a, *b; } cases[] = {
        {edit_zstd_stored_huge, TITAN_ERR_FORMAT, "tensor s", "stored_nbytes 1099511627776 is impossible"},
        {edit_zstd_no_stored, TITAN_ERR_FORMAT, "tensor s", "needs stored_nbytes"},
        {edit_zstd_lz4, TITAN_ERR_FORMAT, "tensor s", "\"lz4\" is not supported"},
        {edit_raw_stored, TITAN_ERR_FORMAT, "tensor r", "stored_nbytes 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        OK(write_z(root, 1, sm, rnd, NULL));
        edit_meta(root, cases[i].edit);
        EXPECT_ERR(titan_ckpt_open(&ck, root), cases[i].code, cases[i].a, cases[i].b, "metadata.json");
    }
    OK(write_z(root, 1, sm, rnd, NULL));
    edit_meta(root, edit_zstd_short);
    OK(titan_ckpt_open(&ck, root));
    if (ck) {
        EXPECT_ERR(titan_ckpt_verify(ck), TITAN_ERR_CORRUPT, "zstd frame of tensor s (chunk 1)", "does not decode", NULL);
        titan_ckpt_close(ck);
    }
    free(sm);
    free(rnd);
    free(out);
    free(big);
}

/* ---- SIGKILL at random points of a large write: the previous step stays loadable ---- */

enum { BIG_ROWS = 17, BIG_COLS = 1 << 20 }; /* 68 MiB of f32: two chunks (64 MiB + 4 MiB) */

static void child_write(const char *root, int64_t step, int64_t seed, const float *big) {
    titan_ckpt_writer *w;
    int64_t shape[2] = {BIG_ROWS, BIG_COLS};
    if (titan_ckpt_begin(&w, root, step) != TITAN_OK) _exit(3);
    if (titan_ckpt_meta_i64(w, "seed", seed) != TITAN_OK ||
        titan_ckpt_add(w, "big", TITAN_DTYPE_F32, 2, shape, NULL, big) != TITAN_OK) {
        titan_ckpt_abort(w);
        _exit(4);
    }
    _exit(titan_ckpt_commit(w, 2) == TITAN_OK ? 0 : 5);
}

/* Opens root and reads "big"; returns which of the two candidates (seed and
 * data) it matches bit-exact, or -1. */
static int64_t check_loadable(const char *root, float *scratch, int64_t seed_a, const float *a,
                              int64_t seed_b, const float *b) {
    titan_ckpt *ck;
    if (titan_ckpt_open(&ck, root) != TITAN_OK) {
        fprintf(stderr, "open after kill: %s\n", titan_error_message());
        return -1;
    }
    int64_t seed = -1;
    titan_ckpt_tensor ti;
    size_t nbytes = (size_t)BIG_ROWS * BIG_COLS * sizeof(float);
    if (titan_ckpt_meta_get_i64(ck, "seed", &seed) != TITAN_OK ||
        titan_ckpt_tensor_find(ck, "big", &ti) != TITAN_OK || ti.nchunks != 2 ||
        titan_ckpt_read(ck, "big", TITAN_DTYPE_F32, NULL, scratch) != TITAN_OK) {
        fprintf(stderr, "read after kill: %s\n", titan_error_message());
        seed = -1;
    } else if (!((seed == seed_a && !memcmp(a, scratch, nbytes)) ||
                 (seed == seed_b && !memcmp(b, scratch, nbytes)))) {
        fprintf(stderr, "after kill: seed %lld: data differs\n", (long long)seed);
        seed = -1;
    }
    titan_ckpt_close(ck);
    return seed;
}

static void test_crash(const char *tmp) {
    char root[256];
    snprintf(root, sizeof root, "%s/crash", tmp);
    size_t n = (size_t)BIG_ROWS * BIG_COLS;
    float *big = malloc(n * sizeof *big), *scratch = malloc(n * sizeof *scratch), *ref = malloc(n * sizeof *ref);
    CHECK(big && scratch && ref);
    if (!big || !scratch || !ref) return;

    /* A complete first step, timed: the kill delays are fractions of it. */
    fill(big, n, 1);
    double t0 = titan_now_s();
    pid_t pid = fork();
    if (pid == 0) child_write(root, 1, 1, big);
    int status = 0;
    waitpid(pid, &status, 0);
    double full = titan_now_s() - t0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    memcpy(ref, big, n * sizeof *big); /* ref: the data of the previous committed step */
    int64_t prev_seed = check_loadable(root, scratch, 1, ref, 1, ref), prev_step = 1;
    CHECK(prev_seed == 1);

    /* Timed kills spread over the whole write, then kills triggered by the
     * files that mark each commit stage (metadata written, step renamed,
     * `latest` being replaced); a trigger that is missed ends in a full write. */
    const double frac[] = {0.02, 0.15, 0.35, 0.55, 0.7, 0.8, 0.88, 0.94, 0.98, 1.05};
    const char *trig[] = {"%s.tmp/metadata.json", "%s/metadata.json", "latest.tmp", "%s.tmp/metadata.json"};
    int ntimed = (int)(sizeof frac / sizeof *frac), ntrig = (int)(sizeof trig / sizeof *trig);
    int trials = ntimed + ntrig, loaded_new = 0, triggered = 0;
    srand((unsigned)time(NULL));
    for (int t = 0; t < trials; t++) {
        /* Every third timed trial and the last triggered one rewrite the current step (replace path). */
        int same = t < ntimed ? t % 3 == 2 : t == trials - 1;
        int64_t step = same ? prev_step : prev_step + 1, seed = 100 + t;
        fill(big, n, (uint64_t)seed);
        char name[64], tp[PATH_MAX + 64] = "";
        titan_ckpt_step_name(name, sizeof name, step);
        if (t >= ntimed) {
            char rel[128];
            snprintf(rel, sizeof rel, trig[t - ntimed], name);
            snprintf(tp, sizeof tp, "%s/%s", root, rel);
        }
        double delay = t < ntimed ? full * frac[t] * (0.9 + 0.2 * rand() / (double)RAND_MAX) : 0;
        double start = titan_now_s();
        pid = fork();
        if (pid == 0) child_write(root, step, seed, big);
        if (t < ntimed) {
            struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
            nanosleep(&ts, NULL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        } else {
            struct timespec ts = {0, 20000};
            while (waitpid(pid, &status, WNOHANG) == 0) {
                if (titan_fs_exists(tp)) {
                    kill(pid, SIGKILL);
                    waitpid(pid, &status, 0);
                    triggered++;
                    break;
                }
                nanosleep(&ts, NULL);
            }
            delay = titan_now_s() - start;
        }
        int64_t got = check_loadable(root, scratch, prev_seed, ref, seed, big);
        int is_new = got == seed;
        if (!(got == prev_seed || is_new))
            fprintf(stderr, "FAIL crash trial %d (kill after %.3f s of %.3f): loaded seed %lld, "
                    "expected %lld or %lld\n", t, delay, full, (long long)got, (long long)prev_seed,
                    (long long)seed);
        CHECK(got == prev_seed || is_new);
        /* `latest` must name a complete dir whenever it exists. */
        char lp[PATH_MAX], *txt = NULL;
        snprintf(lp, sizeof lp, "%s/latest", root);
        if (titan_fs_read_file(lp, &txt, NULL, 100) == TITAN_OK) {
            char mp[PATH_MAX];
            txt[strcspn(txt, "\n")] = '\0';
            snprintf(mp, sizeof mp, "%s/%s/metadata.json", root, txt);
            CHECK(titan_fs_exists(mp));
            free(txt);
        }
        if (getenv("TITAN_TEST_VERBOSE"))
            printf("trial %d: step %lld killed after %.3f s%s%s: loaded %s\n", t, (long long)step, delay,
                   tp[0] ? " at " : "", tp[0] ? tp + strlen(root) + 1 : "", is_new ? "new" : "previous");
        if (is_new) {
            prev_seed = seed;
            prev_step = step;
            float *swap = ref;
            ref = big;
            big = swap;
            loaded_new++;
        }
    }
    printf("crash: full write %.3f s; %d kills (%d at a commit-stage trigger), %d found the new step committed\n",
           full, trials, triggered, loaded_new);
    free(big);
    free(scratch);
    free(ref);
}

int main(void) {
    char tmp[] = "/tmp/titan-test-ckpt-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    /* Each part's own time (not the running total). */
    double t0 = titan_now_s(), lap = t0;
#define LAP(name) (printf(name " %.2f s\n", titan_now_s() - lap), lap = titan_now_s())
    test_roundtrip(tmp);
    LAP("roundtrip");
    test_dir(tmp);
    LAP("dir");
    test_corrupt(tmp);
    LAP("corrupt");
    test_zstd(tmp);
    LAP("zstd");
    test_crash(tmp);
    if (titan_fs_remove_tree(tmp) != TITAN_OK) fprintf(stderr, "cleanup: %s\n", titan_error_message());
    printf("test_ckpt: %s (%d failures, %.2f s)\n", failures ? "FAIL" : "ok", failures, titan_now_s() - t0);
    return failures ? 1 : 0;
}
