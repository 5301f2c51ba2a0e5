/* test_shard.c - byte tokenizer, shard write/read round trip, and every kind
 * of damage the reader must refuse with the right status and message. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "data/shard.h"
#include "data/tokenizer.h"

#include "check.h"

/* The status is `want` and the message holds every given fragment. */
static int error_is(titan_status got, titan_status want, const char *frag1, const char *frag2) {
    if (got != want) {
        fprintf(stderr, "  status %d, want %d: %s\n", got, want, titan_error_message());
        return 0;
    }
    const char *m = titan_error_message();
    if ((frag1 && !strstr(m, frag1)) || (frag2 && !strstr(m, frag2))) {
        fprintf(stderr, "  message '%s' lacks '%s' / '%s'\n", m, frag1 ? frag1 : "", frag2 ? frag2 : "");
        return 0;
    }
    return 1;
}

static char root[256];

static void path_of(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void test_tokenizer(void) {
    titan_tokenizer *t;
    CHECK(titan_tokenizer_open(&t, "byte") == TITAN_OK);
    CHECK(strcmp(titan_tokenizer_id(t), "byte") == 0);
    CHECK(titan_tokenizer_vocab_size(t) == 258);
    CHECK(titan_tokenizer_bos(t) == 256 && titan_tokenizer_eos(t) == 257);

    const char *text = "h\xc3\xa9llo\n\x01\xff";
    size_t n = strlen(text);
    uint32_t ids[32];
    CHECK(titan_tokenizer_encode(t, text, n, ids, 32) == n);
    CHECK(ids[0] == 'h' && ids[1] == 0xc3 && ids[n - 1] == 0xff);
    char back[64];
    CHECK(titan_tokenizer_decode(t, ids, n, back, sizeof back) == n);
    CHECK(memcmp(back, text, n) == 0 && back[n] == '\0');
    /* A short buffer: the count of the whole text, a truncated prefix. */
    uint32_t few[3];
    CHECK(titan_tokenizer_encode(t, text, n, few, 3) == n && few[2] == 0xa9);
    char small[4];
    CHECK(titan_tokenizer_decode(t, ids, n, small, sizeof small) == n && strcmp(small, "h\xc3\xa9") == 0);

    uint32_t special[] = {256, 'a', 257, 999};
    char s[80];
    size_t k = titan_tokenizer_decode(t, special, 4, s, sizeof s);
    CHECK(strcmp(s, "<|begin_of_text|>a<|end_of_text|><|unk|>") == 0 && k == strlen(s));
    titan_tokenizer_free(t);

    titan_tokenizer *bad = (titan_tokenizer *)1;
    CHECK(error_is(titan_tokenizer_open(&bad, "sentencepiece"), TITAN_ERR_USAGE, "sentencepiece", "byte"));
    CHECK(bad == NULL);
    CHECK(titan_tokenizer_open(&bad, "byte:x") == TITAN_ERR_USAGE);
}

/* The documents every round trip writes, and the stream they make. */
static const char *docs[] = {"alpha", "", "a much longer document that crosses several shard files of the test",
                             "z", "\xf0\x9f\x98\x80 emoji", "last"};
#define N_DOCS (sizeof docs / sizeof docs[0])
static const uint32_t extra[] = {1, 2, 3, 255};

static size_t expected_stream(uint32_t *out) {
    size_t n = 0;
    for (size_t i = 0; i < N_DOCS; i++) {
        out[n++] = 256;
        for (const char *p = docs[i]; *p; p++) out[n++] = (unsigned char)*p;
        out[n++] = 257;
    }
    out[n++] = 256;
    for (size_t i = 0; i < 4; i++) out[n++] = extra[i];
    out[n++] = 257;
    return n;
}

static titan_status write_dir(const char *dir, uint64_t shard_tokens, int force, titan_shard_stats *ss) {
    titan_tokenizer *t;
    TITAN_TRY(titan_tokenizer_open(&t, "byte"));
    titan_shard_writer *w;
    titan_status st = titan_shard_writer_open(&w, dir, t, shard_tokens, force);
    for (size_t i = 0; st == TITAN_OK && i < N_DOCS; i++) st = titan_shard_writer_add_text(w, docs[i], strlen(docs[i]));
    if (st == TITAN_OK) st = titan_shard_writer_add_tokens(w, extra, 4);
    if (st == TITAN_OK) st = titan_shard_writer_finish(w, ss);
    titan_shard_writer_free(w);
    titan_tokenizer_free(t);
    return st;
}

static void test_round_trip(void) {
    char dir[300];
    path_of(dir, sizeof dir, root, "rt");
    titan_shard_stats ss;
    CHECK(write_dir(dir, 16, 0, &ss) == TITAN_OK);
    uint32_t want[512];
    size_t n = expected_stream(want);
    CHECK(ss.tokens == n && ss.documents == N_DOCS + 1 && ss.files == (int)((n + 15) / 16));

    titan_shard_dir *d;
    CHECK(titan_shard_dir_open(&d, dir) == TITAN_OK);
    if (!d) return;
    CHECK(titan_shard_dir_tokens(d) == n);
    CHECK(titan_shard_dir_documents(d) == N_DOCS + 1);
    CHECK(strcmp(titan_shard_dir_tokenizer(d), "byte") == 0);
    CHECK(titan_shard_dir_vocab_size(d) == 258);
    CHECK(titan_shard_dir_files(d) == ss.files);
    uint32_t got[512];
    CHECK(titan_shard_dir_read(d, 0, got, n) == TITAN_OK && memcmp(got, want, n * 4) == 0);
    /* Every window, across file boundaries. */
    int windows_ok = 1;
    for (size_t off = 0; off < n; off += 3)
        for (size_t len = 0; off + len <= n && len < 40; len += 7) {
            memset(got, 0xee, sizeof got);
            if (titan_shard_dir_read(d, off, got, len) != TITAN_OK || memcmp(got, want + off, len * 4) != 0)
                windows_ok = 0;
        }
    CHECK(windows_ok);
    CHECK(error_is(titan_shard_dir_read(d, n - 2, got, 3), TITAN_ERR_USAGE, "past the end", NULL));
    titan_shard_dir_close(d);

    /* A directory with a trailing slash reads the same. */
    char slash[310];
    snprintf(slash, sizeof slash, "%s/", dir);
    CHECK(titan_shard_dir_open(&d, slash) == TITAN_OK);
    titan_shard_dir_close(d);
}

static void patch(const char *path, long off, const void *bytes, size_t n) {
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, bytes, n, off) == (ssize_t)n);
    close(fd);
}

/* Writes a fresh 2-file directory and returns the path of its second file. */
static void fresh(const char *name, char *dir, size_t dcap, char *file, size_t fcap) {
    path_of(dir, dcap, root, name);
    titan_shard_stats ss;
    CHECK(write_dir(dir, 64, 0, &ss) == TITAN_OK && ss.files == 2);
    path_of(file, fcap, dir, "shard-00001.bin");
}

static titan_status open_status(const char *dir) {
    titan_shard_dir *d = (titan_shard_dir *)1;
    titan_status st = titan_shard_dir_open(&d, dir);
    if (st != TITAN_OK) CHECK(d == NULL);
    titan_shard_dir_close(d != (titan_shard_dir *)1 ? d : NULL);
    return st;
}

static void test_damage(void) {
    char dir[300], file[320];

    fresh("payload", dir, sizeof dir, file, sizeof file);
    patch(file, 64 + 4 * 3, "\x07", 1);
    CHECK(error_is(open_status(dir), TITAN_ERR_CORRUPT, "shard-00001.bin: byte 64", "checksum mismatch"));

    fresh("truncated", dir, sizeof dir, file, sizeof file);
    struct stat sb;
    stat(file, &sb);
    CHECK(truncate(file, sb.st_size - 4) == 0);
    CHECK(error_is(open_status(dir), TITAN_ERR_CORRUPT, "shard-00001.bin", "truncated"));
    CHECK(truncate(file, 10) == 0);
    CHECK(error_is(open_status(dir), TITAN_ERR_CORRUPT, "shard-00001.bin: byte 10", "truncated"));

    fresh("trailing", dir, sizeof dir, file, sizeof file);
    stat(file, &sb);
    CHECK(truncate(file, sb.st_size + 4) == 0);
    CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "shard-00001.bin", "after the last token"));

    fresh("magic", dir, sizeof dir, file, sizeof file);
    patch(file, 0, "XITANSHD", 8);
    CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "shard-00001.bin: byte 0", "bad magic"));

    fresh("version", dir, sizeof dir, file, sizeof file);
    patch(file, 8, "\x02", 1);
    CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "shard-00001.bin: byte 8", "version 2"));

    fresh("header", dir, sizeof dir, file, sizeof file);
    patch(file, 16, "\x05", 1); /* token count: caught by the header checksum */
    CHECK(error_is(open_status(dir), TITAN_ERR_CORRUPT, "shard-00001.bin: byte 60", "header checksum"));

    /* A valid file whose header disagrees with the index. */
    fresh("disagree", dir, sizeof dir, file, sizeof file);
    char index[340];
    path_of(index, sizeof index, dir, "index.json");
    FILE *f = fopen(index, "r");
    char text[4096] = {0};
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    char *p = strstr(text, "\"shard-00001.bin\"");
    p = p ? strstr(p, "\"documents\": ") : NULL;
    CHECK(p != NULL); /* else the case below would not run */
    if (p) {
        p += strlen("\"documents\": ");
        *p = *p == '9' ? '8' : (char)(*p + 1);
        f = fopen(index, "w");
        fwrite(text, 1, len, f);
        fclose(f);
        CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "shard-00001.bin: byte 24", "disagree"));
    }

    /* A file correct in every checksum that holds a token outside the vocabulary. */
    fresh("vocab", dir, sizeof dir, file, sizeof file);
    uint32_t payload[8] = {256, 'a', 'b', 300, 'c', 257, 256, 257};
    titan_shard_header h = {.version = 1, .header_size = 64, .tokens = 8, .documents = 2,
                            .payload_xxh64 = XXH64(payload, sizeof payload, 0), .vocab_size = 258};
    strcpy(h.tokenizer, "byte");
    unsigned char head[64];
    titan_shard_header_encode(&h, head);
    f = fopen(file, "w");
    fwrite(head, 1, 64, f);
    fwrite(payload, 1, sizeof payload, f);
    fclose(f);
    char idx[1024];
    snprintf(idx, sizeof idx,
             "{\"format\": \"titan-shard\", \"version\": 1, \"tokenizer\": \"byte\", \"vocab_size\": 258,"
             " \"documents\": 2, \"tokens\": 8, \"shards\": [{\"file\": \"shard-00001.bin\", \"tokens\": 8,"
             " \"documents\": 2, \"xxh64\": \"%016llx\"}]}\n", (unsigned long long)h.payload_xxh64);
    path_of(index, sizeof index, dir, "index.json");
    f = fopen(index, "w");
    fputs(idx, f);
    fclose(f);
    CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "shard-00001.bin: byte 76", "token 300 outside"));

    /* Index problems. */
    fresh("index", dir, sizeof dir, file, sizeof file);
    path_of(index, sizeof index, dir, "index.json");
    f = fopen(index, "w");
    fputs("{\"format\": \"titan-shard\", \"version\": 1,", f);
    fclose(f);
    CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "index.json: line", NULL));
    f = fopen(index, "w");
    fputs("{\"format\": \"titan-shard\", \"version\": 1, \"tokenizer\": \"byte\", \"vocab_size\": 258,"
          " \"documents\": 0, \"tokens\": 0, \"shards\": [{\"file\": \"../x.bin\", \"tokens\": 0,"
          " \"documents\": 0, \"xxh64\": \"0000000000000000\"}]}", f);
    fclose(f);
    CHECK(error_is(open_status(dir), TITAN_ERR_FORMAT, "not a plain file name", NULL));

    /* Missing directory and missing index: I/O, with the hint to shard first. */
    path_of(dir, sizeof dir, root, "nosuch");
    CHECK(error_is(open_status(dir), TITAN_ERR_IO, "nosuch", NULL));
    CHECK(strstr(titan_error_hint_text(), "titan-shard") != NULL);
    path_of(dir, sizeof dir, root, "payload");
    path_of(index, sizeof index, dir, "index.json");
    unlink(index);
    CHECK(error_is(open_status(dir), TITAN_ERR_IO, "index.json", NULL));
    CHECK(strstr(titan_error_hint_text(), "titan-shard") != NULL);
}

static void test_writer_rules(void) {
    char dir[300], file[340];
    titan_shard_stats ss;

    /* Replacing a shard directory needs force; stale files then go. */
    path_of(dir, sizeof dir, root, "force");
    CHECK(write_dir(dir, 8, 0, &ss) == TITAN_OK && ss.files > 3);
    CHECK(error_is(write_dir(dir, 8, 0, &ss), TITAN_ERR_USAGE, "already holds shards", NULL));
    CHECK(write_dir(dir, 1 << 20, 1, &ss) == TITAN_OK && ss.files == 1);
    path_of(file, sizeof file, dir, "shard-00001.bin");
    CHECK(access(file, F_OK) != 0);
    CHECK(open_status(dir) == TITAN_OK);

    /* A directory holding anything else is never written to. */
    path_of(dir, sizeof dir, root, "other");
    mkdir(dir, 0755);
    path_of(file, sizeof file, dir, "notes.txt");
    FILE *f = fopen(file, "w");
    fputs("mine\n", f);
    fclose(f);
    CHECK(error_is(write_dir(dir, 8, 1, &ss), TITAN_ERR_USAGE, "not a shard directory", NULL));
    CHECK(access(file, F_OK) == 0);

    /* A writer freed before finish leaves nothing behind. */
    path_of(dir, sizeof dir, root, "aborted");
    titan_tokenizer *t;
    titan_tokenizer_open(&t, "byte");
    titan_shard_writer *w;
    CHECK(titan_shard_writer_open(&w, dir, t, 4, 0) == TITAN_OK);
    CHECK(titan_shard_writer_add_text(w, "hello world", 11) == TITAN_OK);
    uint32_t bad[] = {1, 258};
    CHECK(error_is(titan_shard_writer_add_tokens(w, bad, 2), TITAN_ERR_USAGE, "outside the vocabulary", NULL));
    titan_shard_writer_free(w);
    CHECK(access(dir, F_OK) != 0);
    CHECK(titan_shard_writer_open(&w, dir, t, 0, 0) == TITAN_ERR_USAGE);
    titan_tokenizer_free(t);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/titan-test-shard-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_tokenizer();
    test_round_trip();
    test_damage();
    test_writer_rules();
    titan_fs_remove_tree(root);
    if (failures) {
        fprintf(stderr, "test_shard: %d failures\n", failures);
        return 1;
    }
    printf("test_shard: ok\n");
    return 0;
}
