/* test_ckpt_part.c - ranks writing their own data files (ckpt.h, "writing in
 * parallel"): parts written by concurrent threads and merged into the
 * catalog give byte for byte the checkpoint one writer makes with
 * titan_ckpt_add_rank, raw and zstd; the data reads back; and every bad
 * index or misuse is refused without spoiling the catalog writer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "core/error.h"
#include "core/fsutil.h"

#include "check.h"
#include "files.h"
#define OK(expr) CHECK((expr) == TITAN_OK)

/* st must be `code` and the message must hold `need`. */
static void expect_err_at(int line, titan_status st, titan_status code, const char *need) {
    if (st != code || !strstr(titan_error_message(), need)) {
        fprintf(stderr, "FAIL line %d: expected status %d with '%s', got %d: %s\n", line, code, need, st,
                titan_error_message());
        failures++;
    }
}
#define EXPECT_ERR(st, code, need) expect_err_at(__LINE__, (st), (code), (need))

enum { NR = 4, WR = 16, WC = 6, VR = 4, VC = 8, ZR = 64, ZC = 32 };
static float W[WR * WC], V[VR * VC], Z[ZR * ZC];
static uint16_t E[3];
static const int64_t SW[2] = {WR, WC}, SV[2] = {VR, VC}, SZ[2] = {ZR, ZC}, SE[1] = {3};

static titan_box box2(int64_t o0, int64_t o1, int64_t s0, int64_t s1) {
    titan_box b = {.ndim = 2};
    b.offset[0] = o0, b.offset[1] = o1, b.size[0] = s0, b.size[1] = s1;
    return b;
}

/* The boxes rank r holds: rows of W and Z, columns of V; E on rank 0 only. */
static titan_box wbox(int r) { return box2(r * (WR / NR), 0, WR / NR, WC); }
static titan_box zbox(int r) { return box2(r * (ZR / NR), 0, ZR / NR, ZC); }
static titan_box vbox(int r) { return box2(0, r * (VC / NR), VR, VC / NR); }

/* Adds rank r's boxes through `add` (a writer and rank, or a part). */
typedef struct {
    titan_ckpt_writer *w;
    int rank;
    titan_ckpt_part *p;
} target;

static titan_status add(target *t, const char *name, titan_dtype dt, int nd, const int64_t *shape,
                        const titan_box *b, const void *data) {
    return t->p ? titan_ckpt_part_add(t->p, name, dt, nd, shape, b, data)
                : titan_ckpt_add_rank(t->w, t->rank, name, dt, nd, shape, b, data);
}

static titan_status add_rank_boxes(target *t, int r) {
    titan_box wb = wbox(r), zb = zbox(r), vb = vbox(r);
    float vpart[VR * (VC / NR)];
    for (int i = 0; i < VR; i++)
        memcpy(vpart + i * (VC / NR), V + i * VC + vb.offset[1], (VC / NR) * sizeof(float));
    TITAN_TRY(add(t, "w", TITAN_DTYPE_F32, 2, SW, &wb, W + wb.offset[0] * WC));
    TITAN_TRY(add(t, "v", TITAN_DTYPE_F32, 2, SV, &vb, vpart));
    if (r == 0) TITAN_TRY(add(t, "e", TITAN_DTYPE_BF16, 1, SE, NULL, E));
    return add(t, "z", TITAN_DTYPE_F32, 2, SZ, &zb, Z + zb.offset[0] * ZC);
}

/* The reference: one writer saves every rank's boxes. */
static titan_status write_one(const char *root, int64_t step) {
    titan_ckpt_writer *w;
    TITAN_TRY(titan_ckpt_begin(&w, root, step));
    titan_status st = titan_ckpt_meta_str(w, "layout", "test");
    for (int r = 0; r < NR && st == TITAN_OK; r++) {
        target t = {.w = w, .rank = r};
        st = add_rank_boxes(&t, r);
    }
    if (st != TITAN_OK) {
        titan_ckpt_abort(w);
        return st;
    }
    return titan_ckpt_commit(w, 0);
}

/* A rank: writes its part and keeps its index. Threads, not processes:
 * OpenMP (zstd) does not survive fork in a process that used it. */
typedef struct {
    const char *root;
    int64_t step;
    int rank;
    titan_status st;
    char *index, msg[256];
    size_t len;
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = arg;
    titan_ckpt_part *p;
    j->st = titan_ckpt_part_begin(&p, j->root, j->step, j->rank);
    if (j->st == TITAN_OK) {
        target t = {.p = p};
        j->st = add_rank_boxes(&t, j->rank);
        if (j->st == TITAN_OK) j->st = titan_ckpt_part_finish(p, &j->index, &j->len);
        else titan_ckpt_part_abort(p);
    }
    snprintf(j->msg, sizeof j->msg, "%s", titan_error_message());
    return NULL;
}

/* The same checkpoint, every rank writing its own file at once (ranks 1..3
 * on threads), rank 0 merging their indexes; sync: rank 0 syncs its file
 * (titan_ckpt_sync) before it takes them, as a sharded save does. */
static titan_status write_parts(const char *root, int64_t step, int sync) {
    titan_ckpt_writer *w;
    TITAN_TRY(titan_ckpt_begin(&w, root, step));
    titan_status st = titan_ckpt_meta_str(w, "layout", "test");
    rank_job jobs[NR] = {{0}};
    pthread_t th[NR];
    for (int r = 1; r < NR; r++) {
        jobs[r] = (rank_job){.root = root, .step = step, .rank = r};
        CHECK(pthread_create(&th[r], NULL, rank_main, &jobs[r]) == 0);
    }
    target t0 = {.w = w, .rank = 0};
    if (st == TITAN_OK) st = add_rank_boxes(&t0, 0);
    if (st == TITAN_OK && sync) {
        st = titan_ckpt_sync(w);
        float x = 0.0f; /* no chunk after the sync */
        int64_t one = 1;
        CHECK(st != TITAN_OK || titan_ckpt_add(w, "late", TITAN_DTYPE_F32, 1, &one, NULL, &x) == TITAN_ERR_USAGE);
    }
    for (int r = 1; r < NR; r++) {
        pthread_join(th[r], NULL);
        CHECK(jobs[r].st == TITAN_OK, "rank %d: %s", r, jobs[r].msg);
        if (st == TITAN_OK) st = titan_ckpt_add_part(w, r, jobs[r].index, jobs[r].len);
        free(jobs[r].index);
    }
    if (st != TITAN_OK) {
        titan_ckpt_abort(w);
        return st;
    }
    return titan_ckpt_commit(w, 0);
}

static void test_same_as_one_writer(const char *tmp, titan_ckpt_compression comp) {
    OK(titan_ckpt_set_default_compression(comp, 0));
    char one[4200], par[4200];
    snprintf(one, sizeof one, "%s/one-%d", tmp, (int)comp);
    snprintf(par, sizeof par, "%s/par-%d", tmp, (int)comp);
    OK(write_one(one, 5));
    OK(write_parts(par, 5, comp == TITAN_CKPT_COMPRESS_ZSTD));
    const char *files[] = {"metadata.json", "rank-00000.bin", "rank-00001.bin", "rank-00002.bin", "rank-00003.bin"};
    for (int i = 0; i < 5; i++) {
        char a[4300], b[4300];
        snprintf(a, sizeof a, "%s/step-00000005/%s", one, files[i]);
        snprintf(b, sizeof b, "%s/step-00000005/%s", par, files[i]);
        CHECK(files_equal(a, b), "%s differs (compression %d)", files[i], (int)comp);
    }
    char stage[4300];
    snprintf(stage, sizeof stage, "%s/step-00000005.tmp", par);
    CHECK(!titan_fs_exists(stage), "staging dir left behind");

    titan_ckpt *ck = NULL;
    OK(titan_ckpt_open(&ck, par));
    if (!ck) return;
    OK(titan_ckpt_verify(ck));
    static float w[WR * WC], v[VR * VC], z[ZR * ZC];
    uint16_t e[3];
    OK(titan_ckpt_read(ck, "w", TITAN_DTYPE_F32, NULL, w));
    OK(titan_ckpt_read(ck, "v", TITAN_DTYPE_F32, NULL, v));
    OK(titan_ckpt_read(ck, "z", TITAN_DTYPE_F32, NULL, z));
    OK(titan_ckpt_read(ck, "e", TITAN_DTYPE_BF16, NULL, e));
    CHECK(!memcmp(w, W, sizeof w) && !memcmp(v, V, sizeof v) && !memcmp(z, Z, sizeof z) && !memcmp(e, E, sizeof e));
    titan_ckpt_chunk c;
    OK(titan_ckpt_chunk_info(ck, "z", 3, &c));
    CHECK(!strcmp(c.file, "rank-00003.bin") && c.compression == comp);
    titan_ckpt_close(ck);
    OK(titan_ckpt_set_default_compression(TITAN_CKPT_COMPRESS_NONE, 0));
}

/* Finishes rank r's part of step `step` (boxes as add_rank_boxes, or W in bf16). */
static char *part_index(const char *root, int64_t step, int r, int bf16, size_t *len) {
    titan_ckpt_part *p = NULL;
    char *idx = NULL;
    *len = 0;
    titan_status st = titan_ckpt_part_begin(&p, root, step, r);
    if (st == TITAN_OK) {
        target t = {.p = p};
        titan_box wb = wbox(r);
        uint16_t wh[(WR / NR) * WC] = {0};
        st = bf16 ? titan_ckpt_part_add(p, "w", TITAN_DTYPE_BF16, 2, SW, &wb, wh) : add_rank_boxes(&t, r);
        if (st == TITAN_OK) st = titan_ckpt_part_finish(p, &idx, len);
        else titan_ckpt_part_abort(p);
    }
    CHECK(st == TITAN_OK && idx, "part of rank %d", r);
    return idx;
}

static void test_refusals(const char *tmp) {
    char root[4200], path[4300];
    snprintf(root, sizeof root, "%s/bad", tmp);
    titan_ckpt_part *p = NULL;
    /* A part needs the catalog writer's staging dir, and is never rank 0. */
    EXPECT_ERR(titan_ckpt_part_begin(&p, root, 7, 1), TITAN_ERR_IO, "no such staging directory");
    EXPECT_ERR(titan_ckpt_part_begin(&p, root, 7, 0), TITAN_ERR_USAGE, "catalog writer's");

    titan_ckpt_writer *w = NULL;
    OK(titan_ckpt_begin(&w, root, 7));
    target t0 = {.w = w, .rank = 0};
    OK(add_rank_boxes(&t0, 0));
    OK(titan_ckpt_part_begin(&p, root, 7, 1));
    titan_ckpt_part *twice = NULL;
    EXPECT_ERR(titan_ckpt_part_begin(&twice, root, 7, 1), TITAN_ERR_IO, "rank-00001.bin");
    /* An aborted part takes its file with it. */
    snprintf(path, sizeof path, "%s/step-00000007.tmp/rank-00001.bin", root);
    CHECK(titan_fs_exists(path));
    titan_ckpt_part_abort(p);
    CHECK(!titan_fs_exists(path));

    size_t n1, n2, n3, nold;
    char *i1 = part_index(root, 7, 1, 0, &n1), *i2 = part_index(root, 7, 2, 0, &n2);
    char *i3 = part_index(root, 7, 3, 1, &n3);
    EXPECT_ERR(titan_ckpt_add_part(w, 2, i1, n1), TITAN_ERR_FORMAT, "meta.rank is not 2");
    EXPECT_ERR(titan_ckpt_add_part(w, 1, "{", 1), TITAN_ERR_FORMAT, "index of rank 1");
    EXPECT_ERR(titan_ckpt_add_part(w, 1, NULL, 0), TITAN_ERR_FORMAT, "index of rank 1");
    EXPECT_ERR(titan_ckpt_add_part(w, 0, i1, n1), TITAN_ERR_USAGE, "rank-00000.bin is already");
    EXPECT_ERR(titan_ckpt_add_part(w, 3, i3, n3), TITAN_ERR_USAGE, "dtype or shape");
    /* Another step's part. */
    char other[4200];
    snprintf(other, sizeof other, "%s/other", tmp);
    titan_ckpt_writer *w8 = NULL;
    OK(titan_ckpt_begin(&w8, other, 8));
    char *iold = part_index(other, 8, 1, 0, &nold);
    titan_ckpt_abort(w8);
    EXPECT_ERR(titan_ckpt_add_part(w, 1, iold, nold), TITAN_ERR_USAGE, "step 8");
    OK(titan_ckpt_add_part(w, 1, i1, n1));
    EXPECT_ERR(titan_ckpt_add_part(w, 1, i1, n1), TITAN_ERR_USAGE, "already in the checkpoint");
    /* Nor is a taken part's file written over by this writer. */
    {
        target t1 = {.w = w, .rank = 1};
        EXPECT_ERR(add_rank_boxes(&t1, 3), TITAN_ERR_USAGE, "came from that rank's part");
    }
    /* A part whose boxes overlap boxes already taken: rank 1's, written as rank 4. */
    free(i3);
    i3 = NULL;
    {
        titan_ckpt_part *q = NULL;
        OK(titan_ckpt_part_begin(&q, root, 7, 4));
        target t = {.p = q};
        if (q) OK(add_rank_boxes(&t, 1));
        if (q) OK(titan_ckpt_part_finish(q, &i3, &n3));
    }
    EXPECT_ERR(titan_ckpt_add_part(w, 4, i3, n3), TITAN_ERR_USAGE, "overlaps");
    /* None of the refusals spoiled the writer. */
    OK(titan_ckpt_add_part(w, 2, i2, n2));
    OK(titan_ckpt_commit(w, 0));
    titan_ckpt *ck = NULL;
    OK(titan_ckpt_open(&ck, root));
    if (ck) {
        titan_ckpt_tensor ti;
        OK(titan_ckpt_tensor_find(ck, "w", &ti));
        CHECK(ti.nchunks == 3); /* ranks 0, 1, 2 */
        OK(titan_ckpt_verify(ck));
        titan_ckpt_close(ck);
    }
    free(i1);
    free(i2);
    free(i3);
    free(iold);

    /* Aborting the catalog writer removes the parts with the staging dir. */
    OK(titan_ckpt_begin(&w, root, 9));
    size_t n;
    char *i = part_index(root, 9, 1, 0, &n);
    titan_ckpt_abort(w);
    snprintf(path, sizeof path, "%s/step-00000009.tmp", root);
    CHECK(!titan_fs_exists(path));
    free(i);

    /* A part's file gone before the commit (it fsyncs every file again):
     * nothing is published. */
    OK(titan_ckpt_begin(&w, root, 10));
    i = part_index(root, 10, 1, 0, &n);
    snprintf(path, sizeof path, "%s/step-00000010.tmp/rank-00001.bin", root);
    CHECK(unlink(path) == 0);
    OK(titan_ckpt_add_part(w, 1, i, n));
    EXPECT_ERR(titan_ckpt_commit(w, 0), TITAN_ERR_IO, "rank-00001.bin");
    snprintf(path, sizeof path, "%s/step-00000010", root);
    CHECK(!titan_fs_exists(path));
    snprintf(path, sizeof path, "%s/step-00000010.tmp", root);
    CHECK(!titan_fs_exists(path));
    free(i);
}

int main(void) {
    char tmp[] = "/tmp/titan-test-ckpt-part-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    for (int i = 0; i < WR * WC; i++) W[i] = (float)i * 0.25f;
    for (int i = 0; i < VR * VC; i++) V[i] = -(float)i;
    for (int i = 0; i < ZR * ZC; i++) Z[i] = (float)(i % 97) * 1e-3f; /* compressible */
    for (int i = 0; i < 3; i++) E[i] = (uint16_t)(0x3f80 + i);
    test_same_as_one_writer(tmp, TITAN_CKPT_COMPRESS_NONE);
    test_same_as_one_writer(tmp, TITAN_CKPT_COMPRESS_ZSTD);
    test_refusals(tmp);
    if (titan_fs_remove_tree(tmp) != TITAN_OK) fprintf(stderr, "cleanup: %s\n", titan_error_message());
    printf("test_ckpt_part: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
