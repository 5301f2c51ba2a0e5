/* test_bpe_train.c - byte-level BPE training (lib/data/bpe_train.c).
 *
 * Always: merges worked out by hand (ties, overlaps, the early stop), the
 * file it writes, refusals, and on random bytes that encoding each training
 * pre-token with the written file (tiktoken:PATH) gives the trainer's final
 * segmentation. With the demo corpus (.deps/man-pages-6.03, Debian's man
 * pages as text, made by scripts/corpus.sh; or $TITAN_CORPUS): on ~300 KB,
 * the pre-token counts equal a naive count made here, and the 500 merges
 * equal those of tests/tokenizer/bpe_train_ref.py (an independent, slow
 * Python trainer) line for line; the result does not depend on the order of
 * the documents; pruning keeps it consistent; on ~2 MB to 4096 tokens, the
 * encoding property, a round trip, the time and the bytes per token. Exits 77 (skip) after the rest passes when python3
 * or the corpus is missing. Run from the repository root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/bpe_impl.h"
#include "data/bpe_train.h"
#include "data/corpus.h"
#include "data/tokenizer.h"

#include "check.h"

static char root[256];

/* The whole file (NUL-terminated), or NULL. */
static char *read_all(const char *path, size_t *n) {
    char *data = NULL;
    *n = 0;
    if (titan_fs_read_file(path, &data, n, (size_t)1 << 30) != TITAN_OK) return NULL;
    return data;
}

static void path_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", root, name); }

/* Texts: a set of documents in one buffer. */
typedef struct {
    char *buf;
    size_t len, cap;
    size_t *off; /* document i is buf[off[i] .. off[i+1]) */
    size_t n, ncap;
    size_t want; /* stop reading after this many bytes */
} texts;

static void texts_add(texts *x, const char *s, size_t n) {
    if (x->len + n > x->cap) {
        x->cap = 2 * (x->len + n) + 4096;
        x->buf = realloc(x->buf, x->cap);
    }
    if (x->n + 2 > x->ncap) {
        x->ncap = 2 * x->ncap + 64;
        x->off = realloc(x->off, x->ncap * sizeof *x->off);
    }
    if (!x->buf || !x->off) exit(1);
    if (x->n == 0) x->off[0] = 0;
    memcpy(x->buf + x->len, s, n);
    x->len += n;
    x->off[++x->n] = x->len;
}

static titan_status take_doc(void *ctx, const char *source, const char *text, size_t n) {
    (void)source;
    texts *x = ctx;
    if (x->len >= x->want) return TITAN_ERR_FAIL; /* enough: stops the reading */
    texts_add(x, text, n);
    return TITAN_OK;
}

static const char *doc(const texts *x, size_t i, size_t *n) {
    *n = x->off[i + 1] - x->off[i];
    return x->buf + x->off[i];
}

/* Trains on documents [0, k) of x (backwards when reverse) to vocab tokens;
 * threads > 0: in batches of 500 documents through add_texts. */
static titan_bpe_trainer *train(const texts *x, size_t k, int vocab, int reverse, size_t words_max, int threads) {
    titan_bpe_trainer *t = NULL;
    CHECK(titan_bpe_trainer_create(&t, vocab) == TITAN_OK);
    if (!t) exit(1);
    if (words_max) titan_bpe_trainer_set_words_max(t, words_max);
    for (size_t j = 0; threads > 0 && j < k; j += 500) {
        const char *ts[500];
        size_t ls[500], m = k - j < 500 ? k - j : 500;
        for (size_t i = 0; i < m; i++) ts[i] = doc(x, j + i, &ls[i]);
        CHECK(titan_bpe_trainer_add_texts(t, ts, ls, m, threads) == TITAN_OK);
    }
    for (size_t j = 0; threads == 0 && j < k; j++) {
        size_t n;
        const char *s = doc(x, reverse ? k - 1 - j : j, &n);
        CHECK(titan_bpe_trainer_add_text(t, s, n) == TITAN_OK);
    }
    CHECK(titan_bpe_trainer_learn(t) == TITAN_OK);
    return t;
}

/* Encoding every training pre-token with the written file gives the
 * trainer's segmentation of it; the vocabulary is 256 + merges + 256. */
static void check_encoding(const titan_bpe_trainer *t, const char *path, const char *label) {
    char spec[320];
    snprintf(spec, sizeof spec, "tiktoken:%s", path);
    titan_tokenizer *tok = NULL;
    CHECK(titan_tokenizer_open(&tok, spec) == TITAN_OK, "%s", label);
    if (!tok) return;
    titan_bpe_train_stats st;
    titan_bpe_trainer_stats(t, &st);
    CHECK(titan_tokenizer_vocab_size(tok) == (int)(256 + st.merges + 256), "%s", label);
    size_t bad = 0, words = titan_bpe_trainer_words(t);
    uint32_t *got = malloc((TITAN_BPE_TRAIN_WORD_BYTES + 1) * sizeof *got);
    for (size_t i = 0; i < words; i++) {
        size_t n, n_ids;
        uint64_t count;
        const uint32_t *ids;
        const uint8_t *s = titan_bpe_trainer_word(t, i, &n, &count, &ids, &n_ids);
        size_t k = titan_tokenizer_encode(tok, (const char *)s, n, got, TITAN_BPE_TRAIN_WORD_BYTES);
        if (k == n_ids && memcmp(got, ids, k * sizeof *got) == 0) continue;
        if (bad++ < 5) {
            fprintf(stderr, "  %s: word %zu '%.*s' (%zu bytes): trainer", label, i, (int)n, (const char *)s, n);
            for (size_t j = 0; j < n_ids; j++) fprintf(stderr, " %u", ids[j]);
            fprintf(stderr, ", encoder");
            for (size_t j = 0; j < k; j++) fprintf(stderr, " %u", got[j]);
            fprintf(stderr, "\n");
        }
    }
    CHECK(bad == 0, "%s: %zu of %zu words encode differently", label, bad, words);
    CHECK(words > 0, "%s", label);
    free(got);
    titan_tokenizer_free(tok);
}

static int same_file(const char *a, const char *b, const char *label) {
    size_t na, nb;
    char *x = read_all(a, &na), *y = read_all(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    if (!same && x && y) { /* the first line that differs */
        size_t line = 1, i = 0;
        while (i < na && i < nb && x[i] == y[i]) line += x[i++] == '\n';
        size_t s = i;
        while (s > 0 && x[s - 1] != '\n') s--;
        fprintf(stderr, "  %s: %s and %s differ at line %zu: '%.*s' vs '%.*s'\n", label, a, b, line,
                (int)strcspn(x + s, "\n"), x + s, (int)strcspn(y + s, "\n"), y + s);
    }
    free(x);
    free(y);
    return same;
}

/* ---- by hand -------------------------------------------------------------- */

static titan_bpe_trainer *train_text(const char *text, int vocab) {
    texts x = {0};
    texts_add(&x, text, strlen(text));
    titan_bpe_trainer *t = train(&x, 1, vocab, 0, 0, 0);
    free(x.buf), free(x.off);
    return t;
}

static int token_is(const titan_bpe_trainer *t, uint32_t id, const char *want) {
    size_t n;
    const uint8_t *s = titan_bpe_trainer_token(t, id, &n);
    return s && n == strlen(want) && memcmp(s, want, n) == 0;
}

static void test_by_hand(void) {
    /* "abab", " abab", " ab": (a,b) 5 times -> 256 "ab"; then (' ', 256) and
     * (256, 256) both twice: the smaller pair wins -> 257 " ab"; then no pair
     * occurs twice and learning stops at 2 merges. */
    titan_bpe_trainer *t = train_text("abab abab ab", 300);
    titan_bpe_train_stats st;
    titan_bpe_trainer_stats(t, &st);
    CHECK(st.merges == 2 && st.documents == 1 && st.bytes == 12 && st.pretokens == 3 && st.distinct == 3);
    CHECK(st.last_count == 2 && st.vocab_size == 300);
    CHECK(token_is(t, 256, "ab") && token_is(t, 257, " ab") && token_is(t, 'x', "x"));
    size_t n;
    CHECK(titan_bpe_trainer_token(t, 258, &n) == NULL && n == 0);
    char path[300];
    path_of(path, sizeof path, "hand.tiktoken");
    CHECK(titan_bpe_trainer_write(t, path) == TITAN_OK);
    size_t len;
    char *file = read_all(path, &len);
    CHECK(file && strncmp(file, "AA== 0\nAQ== 1\n", 14) == 0);
    const char *tail = "YWI= 256\nIGFi 257\n";
    CHECK(file && len > strlen(tail) && strcmp(file + len - strlen(tail), tail) == 0);
    free(file);
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0); /* renamed into place */
    check_encoding(t, path, "hand");
    /* Learned once: more text is refused. */
    CHECK(titan_bpe_trainer_add_text(t, "x", 1) == TITAN_ERR_USAGE);
    titan_bpe_trainer_free(t);

    /* Overlaps merge left to right: "aaaaa" -> aa aa a; then (aa, a) beats
     * (aa, aa) at equal counts -> "aaa"; then aa + aaa -> "aaaaa". */
    t = train_text("aaaaa aaaaa", 1000);
    titan_bpe_trainer_stats(t, &st);
    CHECK(st.merges == 3 && token_is(t, 256, "aa") && token_is(t, 257, "aaa") && token_is(t, 258, "aaaaa"));
    path_of(path, sizeof path, "overlap.tiktoken");
    CHECK(titan_bpe_trainer_write(t, path) == TITAN_OK);
    check_encoding(t, path, "overlap");
    titan_bpe_trainer_free(t);

    /* 256: no merges at all, only the bytes. */
    t = train_text("hello hello hello", 256);
    titan_bpe_trainer_stats(t, &st);
    CHECK(st.merges == 0);
    path_of(path, sizeof path, "bytes.tiktoken");
    CHECK(titan_bpe_trainer_write(t, path) == TITAN_OK);
    file = read_all(path, &len);
    CHECK(file && len == 256 * 5 + 10 * 2 + 90 * 3 + 156 * 4 && strcmp(file + len - 9, "/w== 255\n") == 0);
    free(file);
    titan_bpe_trainer_free(t);
}

static void test_refusals(void) {
    titan_bpe_trainer *t = (titan_bpe_trainer *)1;
    CHECK(titan_bpe_trainer_create(&t, 255) == TITAN_ERR_USAGE && t == NULL);
    CHECK(strstr(titan_error_message(), "255") && strstr(titan_error_message(), "256.."));
    CHECK(titan_bpe_trainer_create(&t, -1) == TITAN_ERR_USAGE);
    CHECK(titan_bpe_trainer_create(&t, TITAN_BPE_TRAIN_VOCAB_MAX + 1) == TITAN_ERR_USAGE);
    CHECK(titan_bpe_trainer_create(&t, TITAN_BPE_TRAIN_VOCAB_MAX) == TITAN_OK);
    titan_bpe_trainer_free(t);
    t = train_text("the cat the hat", 400);
    CHECK(titan_bpe_trainer_write(t, "/nonexistent/dir/tok.tiktoken") == TITAN_ERR_IO);
    CHECK(strstr(titan_error_message(), "/nonexistent/dir/tok.tiktoken"));
    titan_bpe_trainer_free(t);
}

/* Random bytes (invalid UTF-8 too) and text from a small alphabet: the
 * encoding property holds, and texts round trip through the file. */
static void test_random(void) {
    texts x = {0};
    srand(3);
    char buf[700];
    for (int r = 0; r < 400; r++) {
        size_t len = (size_t)(rand() % 600);
        for (size_t i = 0; i < len; i++)
            buf[i] = r % 3 == 0 ? (char)(rand() % 256) : "ahelo  \n\r'12\xc3\xa9\xff"[rand() % 16];
        texts_add(&x, buf, len);
    }
    titan_bpe_trainer *t = train(&x, x.n, 600, 0, 0, 0);
    char path[300], spec[320];
    path_of(path, sizeof path, "random.tiktoken");
    CHECK(titan_bpe_trainer_write(t, path) == TITAN_OK);
    check_encoding(t, path, "random");
    snprintf(spec, sizeof spec, "tiktoken:%s", path);
    titan_tokenizer *tok = NULL;
    CHECK(titan_tokenizer_open(&tok, spec) == TITAN_OK);
    if (tok) {
        uint32_t *ids = malloc(x.len * sizeof *ids);
        char *back = malloc(x.len + 1);
        size_t k = titan_tokenizer_encode(tok, x.buf, x.len, ids, x.len);
        CHECK(titan_tokenizer_decode(tok, ids, k, back, x.len + 1) == x.len && memcmp(back, x.buf, x.len) == 0);
        free(ids), free(back);
    }
    titan_tokenizer_free(tok);
    titan_bpe_trainer_free(t);
    free(x.buf), free(x.off);
}

/* ---- the corpus --------------------------------------------------------------- */

typedef struct {
    const uint8_t **s;
    size_t *n;
    size_t len, cap;
} pieces;

static titan_status take_piece(void *ctx, const uint8_t *s, size_t n) {
    pieces *p = ctx;
    if (n > TITAN_BPE_TRAIN_WORD_BYTES) return TITAN_OK;
    if (p->len == p->cap) {
        p->cap = 2 * p->cap + 1024;
        p->s = realloc(p->s, p->cap * sizeof *p->s);
        p->n = realloc(p->n, p->cap * sizeof *p->n);
        if (!p->s || !p->n) exit(1);
    }
    p->s[p->len] = s;
    p->n[p->len++] = n;
    return TITAN_OK;
}

static const pieces *sort_pieces;
static int piece_cmp(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b, ni = sort_pieces->n[i], nj = sort_pieces->n[j];
    int c = memcmp(sort_pieces->s[i], sort_pieces->s[j], ni < nj ? ni : nj);
    return c ? c : (ni > nj) - (ni < nj);
}

/* Counts the pre-tokens of documents [0, k) naively (split, sort, count
 * runs), compares them with the trainer's words and writes them as
 * "hex count" lines for the Python reference. */
static void naive_words(const texts *x, size_t k, const titan_bpe_trainer *t, const char *path) {
    titan_bpe b;
    memset(&b, 0, sizeof b);
    CHECK(titan_bpe_compile_pattern(&b) == TITAN_OK);
    pieces p = {0};
    for (size_t j = 0; j < k; j++) {
        size_t n;
        const char *s = doc(x, j, &n);
        titan_bpe_split(&b, (const uint8_t *)s, n, take_piece, &p);
    }
    size_t *order = malloc(p.len * sizeof *order);
    for (size_t i = 0; i < p.len; i++) order[i] = i;
    sort_pieces = &p;
    qsort(order, p.len, sizeof *order, piece_cmp);
    FILE *f = fopen(path, "w");
    if (!f) exit(1);
    size_t w = 0, bad = 0;
    for (size_t i = 0; i < p.len;) {
        size_t j = i + 1;
        while (j < p.len && piece_cmp(&order[i], &order[j]) == 0) j++;
        const uint8_t *s = p.s[order[i]];
        size_t n = p.n[order[i]], tn, n_ids;
        uint64_t tc;
        const uint32_t *ids;
        const uint8_t *ts = titan_bpe_trainer_word(t, w++, &tn, &tc, &ids, &n_ids);
        if (!ts || tn != n || memcmp(ts, s, n) != 0 || tc != j - i) bad++;
        for (size_t q = 0; q < n; q++) fprintf(f, "%02x", s[q]);
        fprintf(f, " %zu\n", j - i);
        i = j;
    }
    fclose(f);
    CHECK(bad == 0 && w == titan_bpe_trainer_words(t), "%zu of %zu words differ; trainer has %zu", bad, w,
          titan_bpe_trainer_words(t));
    free(order), free(p.s), free(p.n);
    titan_bpe_fini(&b);
}

/* Returns 0 when python3 is missing (the comparison is skipped). */
static int test_reference(const texts *x) {
    size_t k = 0;
    while (k < x->n && x->off[k] < 300000) k++;
    const int vocab = 256 + 500;
    titan_bpe_trainer *t = train(x, k, vocab, 0, 0, 0);
    titan_bpe_train_stats st;
    titan_bpe_trainer_stats(t, &st);
    printf("reference: %zu documents, %.2f MB, %llu distinct pre-tokens, %u merges\n", k, (double)x->off[k] / 1e6,
           (unsigned long long)st.distinct, st.merges);
    CHECK(st.merges == 500);
    char mine[300], words[300], ref[300], cmd[1200];
    path_of(mine, sizeof mine, "c.tiktoken");
    path_of(words, sizeof words, "words.txt");
    path_of(ref, sizeof ref, "ref.tiktoken");
    CHECK(titan_bpe_trainer_write(t, mine) == TITAN_OK);
    naive_words(x, k, t, words);
    check_encoding(t, mine, "reference");

    /* The same documents backwards: the same file. */
    titan_bpe_trainer *r = train(x, k, vocab, 1, 0, 0);
    char back[300];
    path_of(back, sizeof back, "back.tiktoken");
    CHECK(titan_bpe_trainer_write(r, back) == TITAN_OK);
    CHECK(same_file(mine, back, "order"));
    titan_bpe_trainer_free(r);

    /* Split on 3 threads: the same file, the same counts. */
    r = train(x, k, vocab, 0, 0, 3);
    titan_bpe_train_stats s3;
    titan_bpe_trainer_stats(t, &st);
    titan_bpe_trainer_stats(r, &s3);
    CHECK(memcmp(&st, &s3, sizeof st) == 0);
    CHECK(titan_bpe_trainer_write(r, back) == TITAN_OK);
    CHECK(same_file(mine, back, "threads"));
    titan_bpe_trainer_free(r);

    /* A cap of 2000 distinct pre-tokens: the rare ones go, the rest holds. */
    r = train(x, k, vocab, 0, 2000, 0);
    titan_bpe_trainer_stats(r, &st);
    CHECK(st.dropped > 0 && st.distinct <= 2000 && st.merges > 100, "dropped %llu, distinct %llu, merges %u",
          (unsigned long long)st.dropped, (unsigned long long)st.distinct, st.merges);
    path_of(back, sizeof back, "pruned.tiktoken");
    CHECK(titan_bpe_trainer_write(r, back) == TITAN_OK);
    check_encoding(r, back, "pruned");
    titan_bpe_trainer_free(r);
    titan_bpe_trainer_free(t);

    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("reference: /usr/bin/python3 missing: merges not compared with bpe_train_ref.py\n");
        return 0;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/tokenizer/bpe_train_ref.py '%s' %d '%s'", words, vocab, ref);
    double t0 = titan_now_s();
    int rc = system(cmd);
    CHECK(rc == 0, "%s: exit %d", cmd, rc);
    printf("reference: bpe_train_ref.py took %.1f s\n", titan_now_s() - t0);
    CHECK(rc == 0 && same_file(mine, ref, "C vs Python"));
    return 1;
}

/* ~2 MB to 4096 tokens: time, the encoding property, round trip, bytes per token. */
static void test_scale(const texts *x) {
    double t0 = titan_now_s();
    titan_bpe_trainer *t = train(x, x->n, 4096, 0, 0, 0);
    double secs = titan_now_s() - t0;
    titan_bpe_train_stats st;
    titan_bpe_trainer_stats(t, &st);
    CHECK(st.merges == 4096 - 256);
    char path[300], spec[320];
    path_of(path, sizeof path, "scale.tiktoken");
    CHECK(titan_bpe_trainer_write(t, path) == TITAN_OK);
    check_encoding(t, path, "scale");
    snprintf(spec, sizeof spec, "tiktoken:%s", path);
    titan_tokenizer *tok = NULL;
    CHECK(titan_tokenizer_open(&tok, spec) == TITAN_OK);
    if (tok) {
        uint32_t *ids = malloc(x->len * sizeof *ids);
        char *back = malloc(x->len + 1);
        size_t k = titan_tokenizer_encode(tok, x->buf, x->len, ids, x->len);
        CHECK(titan_tokenizer_decode(tok, ids, k, back, x->len + 1) == x->len &&
              memcmp(back, x->buf, x->len) == 0);
        printf("scale: %zu documents, %.1f MB, %llu distinct pre-tokens, 4096 tokens in %.2f s (one thread); "
               "%.2f bytes per token on the training text\n",
               x->n, (double)x->len / 1e6, (unsigned long long)st.distinct, secs, (double)x->len / (double)k);
        free(ids), free(back);
    }
    titan_tokenizer_free(tok);
    titan_bpe_trainer_free(t);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/titan-test-bpe-train-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_by_hand();
    test_refusals();
    test_random();
    const char *corpus = getenv("TITAN_CORPUS") ? getenv("TITAN_CORPUS") : ".deps/man-pages-6.03";
    int have_corpus = access(corpus, R_OK) == 0, have_python = 0;
    if (have_corpus) {
        texts x = {.want = 2000000};
        titan_corpus_stats cs = {0};
        titan_status st = titan_corpus_read(corpus, NULL, take_doc, &x, &cs);
        CHECK(st == TITAN_OK || (st == TITAN_ERR_FAIL && x.len >= x.want));
        titan_error_clear();
        CHECK(x.len >= x.want);
        if (x.len >= x.want) {
            have_python = test_reference(&x);
            test_scale(&x);
        }
        free(x.buf), free(x.off);
    }
    titan_fs_remove_tree(root);
    if (failures) {
        fprintf(stderr, "test_bpe_train: %d failures\n", failures);
        return 1;
    }
    if (!have_corpus || !have_python) {
        printf("test_bpe_train: small cases ok; skipped: %s\n",
               !have_corpus ? "the corpus (.deps/man-pages-6.03: scripts/corpus.sh makes it) is missing"
                            : "/usr/bin/python3 is missing (the reference trainer)");
        return 77;
    }
    printf("test_bpe_train: ok\n");
    return 0;
}
