/* test_loader.c - packing into samples, the data-parallel split, wrap-around,
 * the shuffle, and exact resume from a saved state, also under another
 * data-parallel degree. */
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
    CHECK(S >= 4);
    /* Each call takes 2 slots: rank 0 the even one, rank 1 the odd one;
     * disjoint, and together every sample once per S slots. */
    char *seen = calloc(S, 1);
    int ok = 1;
    for (uint64_t j = 0; j < S / 2; j++)
        for (int rank = 0; rank < 2; rank++) {
            uint32_t in[L], tg[L];
            titan_loader_state st;
            titan_loader_get_state(r[rank], &st);
            ok &= st.position == 2 * j;
            CHECK(titan_loader_next(r[rank], in, tg, 1) == TITAN_OK);
            uint64_t k = 2 * j + (uint64_t)rank;
            ok &= is_sample(in, tg, k) && !seen[k];
            seen[k] = 1;
        }
    for (uint64_t k = 0; k < S / 2 * 2; k++) ok &= seen[k] == 1;
    CHECK(ok);
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
    CHECK(st.position == S + 2);
    titan_loader_free(l);
}

/* Every epoch of a shuffled loader is a permutation of the samples, a
 * different one each epoch, the same for the same seed. */
static void test_shuffle(const titan_shard_dir *d) {
    titan_loader *a, *b, *c;
    CHECK(titan_loader_create(&a, d, L, 0, 1) == TITAN_OK);
    CHECK(titan_loader_create(&b, d, L, 0, 1) == TITAN_OK);
    CHECK(titan_loader_create(&c, d, L, 0, 1) == TITAN_OK);
    titan_loader_set_shuffle(a, 7);
    titan_loader_set_shuffle(b, 7);
    titan_loader_set_shuffle(c, 8);
    uint64_t S = titan_loader_samples_per_epoch(a);
    char *seen = calloc(S, 1);
    int perm_ok = 1, same_seed = 1, moved = 0, epochs_differ = 0, seeds_differ = 0;
    for (uint64_t e = 0; e < 3; e++) {
        memset(seen, 0, S);
        for (uint64_t i = 0; i < S; i++) {
            uint64_t k = titan_loader_sample_at(a, e * S + i);
            perm_ok &= k < S && !seen[k];
            if (k < S) seen[k] = 1;
            same_seed &= k == titan_loader_sample_at(b, e * S + i);
            moved += k != i;
            epochs_differ += e > 0 && k != titan_loader_sample_at(a, i);
            seeds_differ += k != titan_loader_sample_at(c, e * S + i);
        }
    }
    CHECK(perm_ok && same_seed && moved > 0 && epochs_differ > 0 && seeds_differ > 0);
    /* The loader reads what sample_at says. */
    uint32_t in[L], tg[L];
    int ok = 1;
    for (uint64_t p = 0; p < S + 3; p++) {
        CHECK(titan_loader_next(a, in, tg, 1) == TITAN_OK);
        ok &= is_sample(in, tg, titan_loader_sample_at(b, p));
    }
    CHECK(ok);
    free(seen);
    titan_loader_free(a);
    titan_loader_free(b);
    titan_loader_free(c);
}

static void test_resume(const titan_shard_dir *d) {
    for (int shuffle = 0; shuffle <= 1; shuffle++)
        for (int dp = 1; dp <= 2; dp++)
            for (int rank = 0; rank < dp; rank++) {
                titan_loader *a, *b;
                CHECK(titan_loader_create(&a, d, L, rank, dp) == TITAN_OK);
                CHECK(titan_loader_create(&b, d, L, rank, dp) == TITAN_OK);
                if (shuffle) titan_loader_set_shuffle(a, 3), titan_loader_set_shuffle(b, 3);
                enum { B = 5, STEPS = 9 };
                uint32_t ia[B * L], ta[B * L], ib[B * L], tb[B * L];
                for (int s = 0; s < 4; s++) CHECK(titan_loader_next(a, ia, ta, B) == TITAN_OK);
                titan_loader_state st;
                titan_loader_get_state(a, &st);
                titan_loader_set_state(b, &st);
                int same = 1;
                for (int s = 0; s < STEPS; s++) { /* crosses at least one epoch end */
                    CHECK(titan_loader_next(a, ia, ta, B) == TITAN_OK);
                    CHECK(titan_loader_next(b, ib, tb, B) == TITAN_OK);
                    same &= memcmp(ia, ib, sizeof ia) == 0 && memcmp(ta, tb, sizeof ta) == 0;
                }
                titan_loader_state sa, sb;
                titan_loader_get_state(a, &sa);
                titan_loader_get_state(b, &sb);
                CHECK(same && sa.position == sb.position &&
                      sa.position > titan_loader_samples_per_epoch(a));
                titan_loader_free(a);
                titan_loader_free(b);
            }
}

/* Sorts n samples (rows of L+L tokens: input then target) so that sets can
 * be compared. */
static int cmp_row(const void *x, const void *y) { return memcmp(x, y, 2 * L * 4); }

/* A run at dp 1 (global batch G = 6 as 1 x 6) saved mid-way and resumed at
 * dp 2 (2 x 3) and dp 3 (3 x 2): every later optimizer step sees exactly the
 * samples of the uninterrupted dp-1 run, for plain and shuffled order. */
static void test_resume_changed_dp(const titan_shard_dir *d) {
    enum { G = 6, BEFORE = 3, AFTER = 8 };
    for (int shuffle = 0; shuffle <= 1; shuffle++)
        for (int dp = 2; dp <= 3; dp++) {
            titan_loader *ref, *first;
            CHECK(titan_loader_create(&ref, d, L, 0, 1) == TITAN_OK);
            CHECK(titan_loader_create(&first, d, L, 0, 1) == TITAN_OK);
            if (shuffle) titan_loader_set_shuffle(ref, 11), titan_loader_set_shuffle(first, 11);
            uint32_t in[G * L], tg[G * L];
            for (int s = 0; s < BEFORE; s++) {
                CHECK(titan_loader_next(ref, in, tg, G) == TITAN_OK);
                CHECK(titan_loader_next(first, in, tg, G) == TITAN_OK);
            }
            titan_loader_state st;
            titan_loader_get_state(first, &st); /* the checkpoint */
            titan_loader *ranks[3];
            for (int r = 0; r < dp; r++) {
                CHECK(titan_loader_create(&ranks[r], d, L, r, dp) == TITAN_OK);
                if (shuffle) titan_loader_set_shuffle(ranks[r], 11);
                titan_loader_set_state(ranks[r], &st);
            }
            int same = 1;
            for (int s = 0; s < AFTER; s++) { /* crosses an epoch end */
                uint32_t want[G][2 * L], got[G][2 * L];
                CHECK(titan_loader_next(ref, in, tg, G) == TITAN_OK);
                for (int b = 0; b < G; b++) {
                    memcpy(want[b], in + b * L, L * 4);
                    memcpy(want[b] + L, tg + b * L, L * 4);
                }
                int per = G / dp, row = 0;
                for (int r = 0; r < dp; r++) {
                    CHECK(titan_loader_next(ranks[r], in, tg, per) == TITAN_OK);
                    for (int b = 0; b < per; b++, row++) {
                        memcpy(got[row], in + b * L, L * 4);
                        memcpy(got[row] + L, tg + b * L, L * 4);
                    }
                }
                qsort(want, G, sizeof want[0], cmp_row);
                qsort(got, G, sizeof got[0], cmp_row);
                same &= memcmp(want, got, sizeof want) == 0;
            }
            CHECK(same);
            titan_loader_state end_ref, end_rank;
            titan_loader_get_state(ref, &end_ref);
            titan_loader_get_state(ranks[0], &end_rank);
            CHECK(end_ref.position == end_rank.position);
            CHECK(end_ref.position > titan_loader_samples_per_epoch(ref));
            for (int r = 0; r < dp; r++) titan_loader_free(ranks[r]);
            titan_loader_free(ref);
            titan_loader_free(first);
        }
}

static void test_errors(const titan_shard_dir *d) {
    titan_loader *l = (titan_loader *)1;
    CHECK(titan_loader_create(&l, d, (int)n_tokens, 0, 1) == TITAN_ERR_USAGE && l == NULL);
    CHECK(strstr(titan_error_message(), "fewer than seq_len + 1") != NULL);
    CHECK(titan_loader_create(&l, d, (int)n_tokens - 1, 0, 1) == TITAN_OK); /* exactly one sample */
    titan_loader_free(l);
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
        test_shuffle(d);
        test_resume(d);
        test_resume_changed_dp(d);
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
