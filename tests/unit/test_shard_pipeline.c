/* test_shard_pipeline.c - the threaded tokenizing pipeline writes exactly
 * what the one-thread writer writes, for any thread count and two writers;
 * the --split choice: parsing, fraction rate, count exactness, determinism. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "data/shard.h"
#include "data/shard_pipeline.h"
#include "data/shard_split.h"
#include "data/tokenizer.h"

#include "check.h"

static char root[256];

/* ---- the split ---- */

static void test_split_parse(void) {
    double f;
    uint64_t n;
    CHECK(titan_shard_split_parse("0.01", &f, &n) == TITAN_OK && f == 0.01 && n == 0);
    CHECK(titan_shard_split_parse("2.5%", &f, &n) == TITAN_OK && f == 0.025 && n == 0);
    CHECK(titan_shard_split_parse(".5", &f, &n) == TITAN_OK && f == 0.5);
    CHECK(titan_shard_split_parse("1000", &f, &n) == TITAN_OK && f == 0 && n == 1000);
    const char *bad[] = {"0", "0.0", "1.0", "100%", "1.5", "-1", "", "abc", "10x", "0.1.2", "1e400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        titan_status st = titan_shard_split_parse(bad[i], &f, &n);
        CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "--split"), "'%s'", bad[i]);
    }
}

static void test_split_fraction(void) {
    const uint64_t total = 100000;
    uint64_t held[4] = {0}, same_as_seed0 = 0;
    titan_shard_split s0;
    titan_shard_split_init_fraction(&s0, 0.01, 0);
    for (uint64_t seed = 0; seed < 4; seed++) {
        titan_shard_split s;
        titan_shard_split_init_fraction(&s, 0.01, seed);
        for (uint64_t i = 0; i < total; i++) {
            int h = titan_shard_split_held_out(&s, i);
            held[seed] += (uint64_t)h;
            CHECK(h == titan_shard_split_held_out(&s, i)); /* a pure function of index and seed */
            if (seed == 1 && h && titan_shard_split_held_out(&s0, i)) same_as_seed0++;
        }
        /* 1000 expected, standard deviation ~31.5: 5 sigma either way. */
        CHECK(held[seed] > 840 && held[seed] < 1160, "seed %llu: %llu held out", (unsigned long long)seed,
              (unsigned long long)held[seed]);
    }
    CHECK(same_as_seed0 < 100, "seeds 0 and 1 share %llu", (unsigned long long)same_as_seed0);
    CHECK(titan_shard_split_key(7, 5) == titan_shard_split_key(7, 5) && titan_shard_split_key(7, 5) != titan_shard_split_key(8, 5));
}

static void test_split_count(void) {
    const uint64_t total = 5000, want = 100;
    titan_shard_split s;
    CHECK(titan_shard_split_init_count(&s, want, total, 42) == TITAN_OK);
    uint64_t held = 0, max_in = 0, min_out = UINT64_MAX;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t k = titan_shard_split_key(42, i);
        if (titan_shard_split_held_out(&s, i)) {
            held++;
            max_in = k > max_in ? k : max_in;
        } else {
            min_out = k < min_out ? k : min_out;
        }
    }
    CHECK(held == want, "%llu held out", (unsigned long long)held);
    CHECK(max_in < min_out); /* the smallest keys */
    titan_shard_split_fini(&s);
    /* Spread over the stream, not bunched at its start. */
    CHECK(titan_shard_split_init_count(&s, 10, total, 1) == TITAN_OK);
    CHECK(s.n_picked == 10 && s.picked[9] > total / 2);
    titan_shard_split_fini(&s);
    CHECK(titan_shard_split_init_count(&s, total, total, 0) == TITAN_ERR_USAGE);
    CHECK(strstr(titan_error_message(), "at least one must stay"));
    CHECK(titan_shard_split_init_count(&s, 1, total, 0) == TITAN_OK && s.n_picked == 1);
    titan_shard_split_fini(&s);
}

/* ---- the pipeline ---- */

typedef struct {
    char *text;
    size_t *off, *len;
    size_t n;
} corpus;

/* n documents of 0 to max_len bytes, words of a small alphabet (spaces,
 * newlines, UTF-8), and one document larger than a batch in the middle. */
static corpus make_corpus(size_t n, size_t max_len, uint64_t seed) {
    corpus c = {.n = n};
    size_t cap = n * (max_len + 1) + (2u << 20);
    c.text = malloc(cap);
    c.off = malloc(n * sizeof *c.off);
    c.len = malloc(n * sizeof *c.len);
    static const char *const words[] = {"the ", "tokens ", "shard", "\n", "\xc3\xa9t\xc3\xa9 ", "42 ", "  ", "don't ",
                                        "\xe6\x97\xa5\xe6\x9c\xac ", ", ", "running.", "A"};
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = i == n / 2 ? (1u << 20) + 12345 : (size_t)(x % (max_len + 1));
        c.off[i] = pos;
        size_t end = pos + len;
        while (pos < end) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *w = words[x % (sizeof words / sizeof words[0])];
            size_t k = strlen(w);
            if (k > end - pos) k = end - pos;
            memcpy(c.text + pos, w, k);
            pos += k;
        }
        c.len[i] = len;
    }
    return c;
}

static void free_corpus(corpus *c) {
    free(c->text);
    free(c->off);
    free(c->len);
}

static int held(size_t i) { return i % 7 == 3; }

/* Writes the corpus into DIR/NAME and DIR/NAME-val, either through the
 * pipeline (threads > 0) or with titan_shard_writer_add_text (threads 0). */
static titan_status write_both(const titan_tokenizer *t, const corpus *c, const char *name, int threads,
                               uint64_t shard_tokens) {
    char dir[512], vdir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(vdir, sizeof vdir, "%s/%s-val", root, name);
    titan_shard_writer *w = NULL, *v = NULL;
    titan_shard_pipeline *p = NULL;
    titan_status st = titan_shard_writer_open(&w, dir, t, shard_tokens, 0);
    if (st == TITAN_OK) st = titan_shard_writer_open(&v, vdir, t, shard_tokens, 0);
    if (st == TITAN_OK && threads > 0) st = titan_shard_pipeline_open(&p, t, threads);
    for (size_t i = 0; st == TITAN_OK && i < c->n; i++) {
        titan_shard_writer *to = held(i) ? v : w;
        st = p ? titan_shard_pipeline_add(p, to, c->text + c->off[i], c->len[i])
               : titan_shard_writer_add_text(to, c->text + c->off[i], c->len[i]);
    }
    if (st == TITAN_OK && p) {
        st = titan_shard_pipeline_flush(p);
        titan_shard_pipeline_counts k = titan_shard_pipeline_written(p);
        CHECK(k.documents == c->n);
    }
    titan_shard_stats ss;
    if (st == TITAN_OK) st = titan_shard_writer_finish(w, &ss);
    if (st == TITAN_OK) st = titan_shard_writer_finish(v, &ss);
    titan_shard_pipeline_free(p);
    titan_shard_writer_free(w);
    titan_shard_writer_free(v);
    return st;
}

static int same_file(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int same = titan_fs_read_file(a, &x, &nx, (size_t)1 << 30) == TITAN_OK &&
               titan_fs_read_file(b, &y, &ny, (size_t)1 << 30) == TITAN_OK && nx == ny && memcmp(x, y, nx) == 0;
    if (!same) fprintf(stderr, "  %s and %s differ\n", a, b);
    free(x);
    free(y);
    return same;
}

/* Every file of root/ref(-val) equals the one of root/name(-val). */
static int same_dirs(const char *ref, const char *name) {
    int ok = 1;
    for (int val = 0; val < 2; val++) {
        char d1[512], d2[512], f1[600], f2[600];
        snprintf(d1, sizeof d1, "%s/%s%s", root, ref, val ? "-val" : "");
        snprintf(d2, sizeof d2, "%s/%s%s", root, name, val ? "-val" : "");
        titan_shard_dir *d;
        if (titan_shard_dir_open(&d, d2) != TITAN_OK) return 0;
        int files = titan_shard_dir_files(d);
        titan_shard_dir_close(d);
        snprintf(f1, sizeof f1, "%s/index.json", d1);
        snprintf(f2, sizeof f2, "%s/index.json", d2);
        ok &= same_file(f1, f2);
        for (int i = 0; i < files; i++) {
            snprintf(f1, sizeof f1, "%s/shard-%05d.bin", d1, i);
            snprintf(f2, sizeof f2, "%s/shard-%05d.bin", d2, i);
            ok &= same_file(f1, f2);
        }
    }
    return ok;
}

static void test_pipeline(const char *spec, size_t n_docs, uint64_t shard_tokens, const int *threads, int n_threads) {
    titan_tokenizer *t;
    if (titan_tokenizer_open(&t, spec) != TITAN_OK) {
        CHECK(0, "tokenizer %s", spec);
        return;
    }
    corpus c = make_corpus(n_docs, 3000, 1);
    char ref[64];
    snprintf(ref, sizeof ref, "%.8s-ref", spec);
    CHECK(write_both(t, &c, ref, 0, shard_tokens) == TITAN_OK);
    titan_shard_dir *d;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, ref);
    CHECK(titan_shard_dir_open(&d, dir) == TITAN_OK && titan_shard_dir_files(d) > 2, "several shard files");
    if (d) titan_shard_dir_close(d);
    for (int k = 0; k < n_threads; k++) {
        char name[64];
        snprintf(name, sizeof name, "%.8s-j%d", spec, threads[k]);
        CHECK(write_both(t, &c, name, threads[k], shard_tokens) == TITAN_OK, "%d threads", threads[k]);
        CHECK(same_dirs(ref, name), "%s, %d threads: shards differ from the one-thread writer", spec, threads[k]);
    }
    free_corpus(&c);
    titan_tokenizer_free(t);
}

/* A writer failing under the pipeline: the error comes back from add or
 * flush, and free stops the workers without writing the rest. */
static void test_pipeline_error(void) {
    titan_tokenizer *t;
    CHECK(titan_tokenizer_open(&t, "byte") == TITAN_OK);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/err", root);
    titan_shard_writer *w;
    CHECK(titan_shard_writer_open(&w, dir, t, 1000, 0) == TITAN_OK);
    titan_shard_pipeline *p;
    CHECK(titan_shard_pipeline_open(&p, t, 3) == TITAN_OK);
    CHECK(rmdir(dir) == 0); /* the first shard file cannot be created now */
    static char doc[100000];
    memset(doc, 'x', sizeof doc);
    titan_status st = TITAN_OK;
    for (int i = 0; st == TITAN_OK && i < 40; i++) st = titan_shard_pipeline_add(p, w, doc, sizeof doc);
    if (st == TITAN_OK) st = titan_shard_pipeline_flush(p);
    CHECK(st == TITAN_ERR_IO && strstr(titan_error_message(), "shard-00000.bin.tmp"));
    titan_shard_pipeline_free(p);
    titan_shard_writer_free(w);
    CHECK(titan_shard_pipeline_open(&p, t, 0) == TITAN_ERR_USAGE);
    titan_tokenizer_free(t);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/titan-test-pipeline-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_split_parse();
    test_split_fraction();
    test_split_count();
    test_pipeline("byte", 3000, 1 << 20, (const int[]){1, 2, 3, 8}, 4);
    test_pipeline_error();
    const char *tt = "build/tokenizer/cl100k_base.tiktoken";
    if (access(tt, R_OK) == 0)
        test_pipeline("tiktoken:build/tokenizer/cl100k_base.tiktoken", 1500, 1 << 18, (const int[]){1, 4}, 2);
    else
        printf("test_shard_pipeline: %s missing (sh tests/tokenizer/prepare.sh): BPE part skipped\n", tt);
    titan_fs_remove_tree(root);
    if (failures) {
        fprintf(stderr, "test_shard_pipeline: %d failures\n", failures);
        return 1;
    }
    printf("test_shard_pipeline: ok\n");
    return 0;
}
