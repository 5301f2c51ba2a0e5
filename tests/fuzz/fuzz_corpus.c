/* fuzz_corpus.c - fuzz target: the corpus readers (JSON arrays, JSON Lines,
 * plain text, and every archive and compression libarchive reads).
 *
 * Input: a flags byte, then the file. Bits 0-1 name the file (doc.json,
 * doc.jsonl, doc.txt, doc.ndjson.gz), which sets how a plain stream is read;
 * an archive is found by its bytes whatever the name. Bit 2 reads JSON Lines
 * text from member "body" in place of "text". titan-shard reads inputs this
 * way; every document handed over is read to its last byte, and the counts
 * must add up. Built with libFuzzer by `make fuzz`; replayed over
 * tests/fuzz/corpus/corpus by `make check` (build/tests/test_fuzz_corpus). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/corpus.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint64_t docs, bytes;
    unsigned sum;
} seen;

static titan_status take(void *ctx, const char *source, const char *text, size_t n) {
    seen *s = ctx;
    if (!source || !source[0] || !text || n == 0) abort(); /* empty documents are skipped, not handed over */
    for (size_t i = 0; i < n; i++) s->sum += (unsigned char)text[i];
    s->docs++;
    s->bytes += n;
    return TITAN_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"doc.json", "doc.jsonl", "doc.txt", "doc.ndjson.gz"};
    titan_log_set_verbosity(0);
    if (size < 1) return 0;
    const char *dir = fuzz_scratch("corpus");
    const char *name = names[data[0] & 3];
    fuzz_write(dir, name, data + 1, size - 1);
    char path[512];
    fuzz_join(path, sizeof path, dir, name);
    titan_corpus_opts opts = {.field = data[0] & 4 ? "body" : NULL};
    titan_corpus_stats stats = {0};
    seen s = {0};
    if (titan_corpus_size(path) != size - 1) abort();
    titan_status st = titan_corpus_read(path, &opts, take, &s, &stats);
    if (st != TITAN_OK && !titan_error_message()[0]) abort(); /* a failure says why */
    if (stats.documents != s.docs || stats.bytes != s.bytes) abort();
    titan_error_clear();
    return 0;
}
