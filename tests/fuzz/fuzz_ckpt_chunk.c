/* fuzz_ckpt_chunk.c - fuzz target: reading a checkpoint chunk from a data file.
 *
 * The input is the stored bytes of the only chunk of a one-tensor checkpoint
 * (f32 [64], the raw bytes all zero): byte 0 picks the catalog's compression
 * (even: zstd, odd: none) and whether the catalog claims 8 bytes more than the
 * file holds; the rest is written to rank-00000.bin. The checkpoint must open
 * (or be refused as cut short: TITAN_ERR_CORRUPT), and reading must give the
 * zeros or TITAN_ERR_CORRUPT, never anything else. Exercises the data-file
 * checks at open, pread, zstd decoding and the checksum. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt/ckpt.h"
#include "core/error.h"
#include "core/fsutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N = 64, RAW = N * 4 };
static char dir[64];

static void cleanup(void) {
    if (dir[0]) titan_fs_remove_tree(dir);
}

static int write_step(const uint8_t *stored, size_t n, int zstd, size_t claim) {
    static const float zeros[N];
    char p[128], meta[1024];
    snprintf(p, sizeof p, "%s/rank-00000.bin", dir);
    if (titan_fs_write_file(p, stored, n) != TITAN_OK) return -1;
    int len = snprintf(meta, sizeof meta,
                       "{\"format\": \"titan-checkpoint\", \"version\": 1, \"step\": 1, \"tensors\": {\"w\": "
                       "{\"dtype\": \"f32\", \"shape\": [%d], \"chunks\": [{\"file\": \"rank-00000.bin\", "
                       "\"offset\": 0, \"nbytes\": %d, \"box\": {\"offset\": [0], \"size\": [%d]}, "
                       "\"checksum\": \"xxh3:%016llx\", \"compression\": \"%s\", \"stored_nbytes\": %zu}]}}}",
                       N, RAW, N, (unsigned long long)XXH3_64bits(zeros, RAW), zstd ? "zstd" : "none", claim);
    snprintf(p, sizeof p, "%s/metadata.json", dir);
    return titan_fs_write_file(p, meta, (size_t)len) == TITAN_OK ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/titan-fuzz-chunk-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
    }
    if (size < 1) return 0;
    int zstd = !(data[0] & 1), longer = (data[0] & 2) != 0;
    const uint8_t *stored = data + 1;
    size_t n = size - 1;
    if (!zstd) n = n < RAW ? n : RAW; /* a raw chunk's stored size is its size */
    size_t claim = zstd ? (n ? n : 1) + (longer ? 8 : 0) : RAW;
    if (write_step(stored, n, zstd, claim) != 0) abort();
    titan_ckpt *ck = NULL;
    titan_status st = titan_ckpt_open(&ck, dir);
    if (st != TITAN_OK) {
        /* The catalog is well formed; only a file shorter than it says, or a
         * zstd frame longer than any frame of 256 bytes can be, is refused. */
        if (st != TITAN_ERR_CORRUPT && st != TITAN_ERR_FORMAT) abort();
        titan_error_clear();
        return 0;
    }
    float out[N];
    memset(out, 0xff, sizeof out);
    st = titan_ckpt_read(ck, "w", TITAN_DTYPE_F32, NULL, out);
    if (st == TITAN_OK) {
        for (int i = 0; i < N; i++)
            if (out[i] != 0.0f) abort(); /* the checksum let wrong data through */
    } else if (st != TITAN_ERR_CORRUPT) {
        abort();
    }
    titan_box half = {.ndim = 1, .offset = {N / 2}, .size = {N / 4}};
    st = titan_ckpt_read(ck, "w", TITAN_DTYPE_BF16, &half, out);
    if (st != TITAN_OK && st != TITAN_ERR_CORRUPT) abort();
    titan_ckpt_close(ck);
    titan_error_clear();
    return 0;
}
