/* test_loader.c - packing into samples, the data-parallel split, wrap-around
 * and bitwise-identical resume from a saved state. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"

#include "check.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

enum { L = 7, PER = L + 1, N_DOCS = 23 };

static uint32_t *stream;  /* the whole token stream, read back once */
static uint64_t n_tokens;

/* Documents of varied length and content, in small shard files so that
 * samples cross file boundaries. */
static titan_status make_dir(const char *dir) {
    titan_tokenizer *t;
    TITAN_TRY(titan_tokenizer_open(&t, "byte"));
    titan_shard_writer *w;
    titan_status st = titan_shard_writer_open(&w, dir, t, 37, 0);
    char doc[64];
    for (int i = 0; st == TITAN_OK && i < N_DOCS; i++) {
        int n = 1 + (i * 7) % 13;
        for (int j = 0; j < n; j++) doc[j] = (char)('a' + (i + j) % 26);
        st = titan_shard_writer_add_text(w, doc, (size_t)n);
    }
    if (st == TITAN_OK) st = titan_shard_writer_finish(w, NULL);
    titan_shard_writer_free(w);
    titan_tokenizer_free(t);
    return st;
}

/* Sample k as it must come out of the loader. */
static int is_sample(const uint32_t *in, const uint32_t *tg, uint64_t k) {
    return memcmp(in, stream + k * PER, L * 4) == 0 && memcmp(tg, stream + k * PER + 1, L * 4) == 0;
}

static void test_packing(const titan_shard_dir *d) {
    titan_loader *l;
    CHECK(titan_loader_create(&l, d, L, 0, 1) == TITAN_OK);
    uint64_t S = n_tokens / PER;
    CHECK(titan_loader_samples_per_epoch(l) == S);
    uint32_t in[3 * L], tg[3 * L];
    int ok = 1;
    for (uint64_t k = 0; k + 3 <= S; k += 3) {
        CHECK(titan_loader_next(l, in, tg, 3) == TITAN_OK);
        for (int b = 0; b < 3; b++) ok &= is_sample(in + b * L, tg + b * L, k + (uint64_t)b);
    }
    CHECK(ok);
    titan_loader_free(l);
}

static void test_dp_split(const titan_shard_dir *d) {
    titan_loader *r[2];
    CHECK(titan_loader_create(&r[0], d, L, 0, 2) == TITAN_OK);
    CHECK(titan_loader_create(&r[1], d, L, 1, 2) == TITAN_OK);
    uint64_t S = titan_loader_samples_per_epoch(r[0]);
    CHECK(S % 2 == 0 && S == n_tokens / PER / 2 * 2 && S >= 4);
    /* Over one epoch rank r reads samples r, r+2, r+4, ...: disjoint, and
     * together every sample once. */
    char *seen = calloc(S, 1);
    int ok = 1;
    for (int rank = 0; rank < 2; rank++)
        for (uint64_t j = 0; j < S / 2; j++) {
            uint32_t in[L], tg[L];
            titan_loader_state st;
            titan_loader_get_state(r[rank], &st);
            ok &= st.epoch == 0 && st.next_sample == 2 * j + (uint64_t)rank;
            CHECK(titan_loader_next(r[rank], in, tg, 1) == TITAN_OK);
            uint64_t k = 2 * j + (uint64_t)rank;
            ok &= is_sample(in, tg, k) && !seen[k];
            seen[k] = 1;
        }
    for (uint64_t k = 0; k < S; k++) ok &= seen[k] == 1;
    CHECK(ok);
    /* Both wrapped together. */
    for (int rank = 0; rank < 2; rank++) {
        titan_loader_state st;
        titan_loader_get_state(r[rank], &st);
        CHECK(st.epoch == 1 && st.next_sample == (uint64_t)rank);
    }
    free(seen);
    titan_loader_free(r[0]);
    titan_loader_free(r[1]);
}

static void test_wrap(const titan_shard_dir *d) {
    titan_loader *l;
    CHECK(titan_loader_create(&l, d, L, 0, 1) == TITAN_OK);
    uint64_t S = titan_loader_samples_per_epoch(l);
    /* A batch that straddles the end of the data continues at sample 0. */
    uint32_t in[4 * L], tg[4 * L];
    for (uint64_t k = 0; k + 2 < S; k++) CHECK(titan_loader_next(l, in, tg, 1) == TITAN_OK);
    CHECK(titan_loader_next(l, in, tg, 4) == TITAN_OK);
    CHECK(is_sample(in, tg, S - 2) && is_sample(in + L, tg + L, S - 1));
    CHECK(is_sample(in + 2 * L, tg + 2 * L, 0) && is_sample(in + 3 * L, tg + 3 * L, 1));
    titan_loader_state st;
    titan_loader_get_state(l, &st);
    CHECK(st.epoch == 1 && st.next_sample == 2);
    titan_loader_free(l);
}

static void test_resume(const titan_shard_dir *d) {
    for (int dp = 1; dp <= 2; dp++)
        for (int rank = 0; rank < dp; rank++) {
            titan_loader *a, *b;
            CHECK(titan_loader_create(&a, d, L, rank, dp) == TITAN_OK);
            CHECK(titan_loader_create(&b, d, L, rank, dp) == TITAN_OK);
            enum { B = 5, STEPS = 9 };
            uint32_t ia[B * L], ta[B * L], ib[B * L], tb[B * L];
            for (int s = 0; s < 4; s++) CHECK(titan_loader_next(a, ia, ta, B) == TITAN_OK);
            titan_loader_state st;
            titan_loader_get_state(a, &st);
            CHECK(titan_loader_set_state(b, &st) == TITAN_OK);
            int same = 1;
            for (int s = 0; s < STEPS; s++) { /* crosses at least one epoch end */
                CHECK(titan_loader_next(a, ia, ta, B) == TITAN_OK);
                CHECK(titan_loader_next(b, ib, tb, B) == TITAN_OK);
                same &= memcmp(ia, ib, sizeof ia) == 0 && memcmp(ta, tb, sizeof ta) == 0;
            }
            titan_loader_state sa, sb;
            titan_loader_get_state(a, &sa);
            titan_loader_get_state(b, &sb);
            CHECK(same && sa.epoch >= 1 && sa.epoch == sb.epoch && sa.next_sample == sb.next_sample);
            /* States that do not fit are refused and change nothing. */
            titan_loader_state bad = {.next_sample = titan_loader_samples_per_epoch(a), .epoch = 0};
            CHECK(titan_loader_set_state(b, &bad) == TITAN_ERR_FORMAT);
            if (dp == 2) {
                bad.next_sample = (uint64_t)(1 - rank);
                CHECK(titan_loader_set_state(b, &bad) == TITAN_ERR_FORMAT);
            }
            titan_loader_get_state(b, &sb);
            CHECK(sb.next_sample == sa.next_sample && sb.epoch == sa.epoch);
            titan_loader_free(a);
            titan_loader_free(b);
        }
}

static void test_errors(const titan_shard_dir *d) {
    titan_loader *l = (titan_loader *)1;
    CHECK(titan_loader_create(&l, d, (int)n_tokens, 0, 1) == TITAN_ERR_USAGE && l == NULL);
    CHECK(strstr(titan_error_message(), "fewer than seq_len + 1") != NULL);
    CHECK(titan_loader_create(&l, d, (int)n_tokens - 1, 0, 1) == TITAN_OK); /* exactly one sample */
    titan_loader_free(l);
    CHECK(titan_loader_create(&l, d, (int)n_tokens - 1, 0, 2) == TITAN_ERR_USAGE);
    CHECK(titan_loader_create(&l, d, 0, 0, 1) == TITAN_ERR_USAGE);
    CHECK(titan_loader_create(&l, d, L, 2, 2) == TITAN_ERR_USAGE);
}

int main(void) {
    char root[] = "/tmp/titan-test-loader-XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char dir[64];
    snprintf(dir, sizeof dir, "%s/data", root);
    titan_shard_dir *d = NULL;
    CHECK(make_dir(dir) == TITAN_OK);
    CHECK(titan_shard_dir_open(&d, dir) == TITAN_OK);
    if (d) {
        n_tokens = titan_shard_dir_tokens(d);
        CHECK(titan_shard_dir_files(d) > 3 && n_tokens % PER != 0); /* a partial last sample is dropped */
        stream = malloc(n_tokens * 4);
        CHECK(titan_shard_dir_read(d, 0, stream, n_tokens) == TITAN_OK);
        test_packing(d);
        test_dp_split(d);
        test_wrap(d);
        test_resume(d);
        test_errors(d);
        free(stream);
        titan_shard_dir_close(d);
    }
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (failures) {
        fprintf(stderr, "test_loader: %d failures\n", failures);
        return 1;
    }
    printf("test_loader: ok\n");
    return 0;
}
