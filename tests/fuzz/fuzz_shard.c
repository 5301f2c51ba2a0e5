/* fuzz_shard.c - fuzz target: a shard directory (index.json and shard files).
 *
 * Input: a flags byte, then a little-endian u16 length and that many bytes of
 * index.json, then the bytes of shard-00000.bin. The flags make checksums
 * right so that the fuzzer gets past them: bit 0 writes the payload's XXH64
 * into the header, bit 1 the header's XXH32, bit 2 replaces "$XXH64" in the
 * index by the payload's XXH64 in hex. The directory is opened as
 * titan-train's loader opens it; one that opens must give every token in
 * the vocabulary and refuse a read past its end. Built with libFuzzer by
 * `make fuzz`; replayed over tests/fuzz/corpus/shard by `make check`
 * (build/tests/test_fuzz_shard). */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/log.h"
#include "data/shard.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { OFF_PAYSUM = 32, OFF_HEADSUM = 60 }; /* titan-shard(5) */

static void put_le(unsigned char *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The index with each "$XXH64" replaced by hex (malloc'd, NUL-terminated). */
static char *index_text(const uint8_t *s, size_t n, const char *hex) {
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) abort();
    for (size_t i = 0; i < n;) {
        if (hex && n - i >= 6 && memcmp(s + i, "$XXH64", 6) == 0) {
            memcpy(o, hex, 16), o += 16, i += 6;
        } else {
            *o++ = (char)s[i++];
        }
    }
    *o = 0;
    return out;
}

static void read_back(const titan_shard_dir *d) {
    uint64_t total = titan_shard_dir_tokens(d);
    uint32_t vocab = (uint32_t)titan_shard_dir_vocab_size(d), buf[64];
    size_t n = total < 64 ? (size_t)total : 64;
    if (titan_shard_dir_read(d, 0, buf, n) != TITAN_OK) abort();
    for (size_t i = 0; i < n; i++)
        if (buf[i] >= vocab) abort(); /* the reader promises every token is in the vocabulary */
    if (total > 0 && titan_shard_dir_read(d, total - 1, buf, 1) != TITAN_OK) abort();
    if (titan_shard_dir_read(d, total, buf, 1) == TITAN_OK) abort(); /* past the end */
    uint64_t sum = 0;
    for (int i = 0; i < titan_shard_dir_files(d); i++) sum += titan_shard_dir_file_tokens(d, i);
    if (sum != total || !titan_shard_dir_tokenizer(d)[0]) abort();
    titan_error_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    const char *dir = fuzz_scratch("shard");
    const uint8_t *idx, *bin;
    size_t in, bn;
    if (size < 1 || !fuzz_split(data + 1, size - 1, &idx, &in, &bin, &bn)) return 0;
    int flags = data[0];
    unsigned char *shard = malloc(bn ? bn : 1);
    if (!shard) abort();
    memcpy(shard, bin, bn);
    uint64_t xxh = XXH64(bn > TITAN_SHARD_HEADER_SIZE ? shard + TITAN_SHARD_HEADER_SIZE : shard,
                         bn > TITAN_SHARD_HEADER_SIZE ? bn - TITAN_SHARD_HEADER_SIZE : 0, 0);
    if (bn >= TITAN_SHARD_HEADER_SIZE) {
        if (flags & 1) put_le(shard + OFF_PAYSUM, xxh, 8);
        if (flags & 2) put_le(shard + OFF_HEADSUM, XXH32(shard, OFF_HEADSUM, 0), 4);
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, xxh);
    char *index = index_text(idx, in, flags & 4 ? hex : NULL);
    fuzz_write(dir, "shard-00000.bin", shard, bn);
    fuzz_write(dir, "index.json", index, strlen(index));
    free(index);
    free(shard);
    titan_shard_dir *d = NULL;
    titan_status st = titan_shard_dir_open(&d, dir);
    if (st == TITAN_OK) {
        read_back(d);
        titan_shard_dir_close(d);
    } else if (d || !titan_error_message()[0]) {
        abort();
    }
    titan_error_clear();
    return 0;
}
