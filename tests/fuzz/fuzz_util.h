/* fuzz_util.h - what the fuzz targets that need files share: one scratch
 * directory per process (in /dev/shm when it can be written, so inputs never
 * touch a disk), removed at exit, and writing an input's parts into it. */
#ifndef TITAN_FUZZ_UTIL_H
#define TITAN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fsutil.h"

static char fuzz_dir[128];

static inline void fuzz_cleanup(void) {
    if (fuzz_dir[0]) titan_fs_remove_tree(fuzz_dir);
}

/* The process's scratch directory, made on first use. */
static inline const char *fuzz_scratch(const char *tag) {
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/titan-fuzz-%s-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", tag);
        if (!mkdtemp(fuzz_dir)) abort();
        atexit(fuzz_cleanup);
    }
    return fuzz_dir;
}

/* dir/name into out (abort when it does not fit: the names are the target's own). */
static inline void fuzz_join(char *out, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) abort();
}

/* Writes n bytes as dir/name; a target that cannot write its own scratch file is broken. */
static inline void fuzz_write(const char *dir, const char *name, const void *data, size_t n) {
    char p[512];
    fuzz_join(p, sizeof p, dir, name);
    if (titan_fs_write_file(p, data, n) != TITAN_OK) abort();
}

/* Little-endian u16 length prefix: splits data into a part of at most that
 * many bytes and the rest. Returns 0 when data is too short for the prefix. */
static inline int fuzz_split(const uint8_t *data, size_t size, const uint8_t **a, size_t *an,
                             const uint8_t **b, size_t *bn) {
    if (size < 2) return 0;
    size_t len = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2, size -= 2;
    if (len > size) len = size;
    *a = data, *an = len, *b = data + len, *bn = size - len;
    return 1;
}

#endif
