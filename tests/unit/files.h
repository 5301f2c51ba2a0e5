/* files.h - file helpers the unit tests share. */
#ifndef TITAN_TESTS_FILES_H
#define TITAN_TESTS_FILES_H

#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

/* 1 when both files can be read (up to 1 GiB) and hold the same bytes. */
static inline int files_equal(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int eq = titan_fs_read_file(a, &x, &nx, (size_t)1 << 30) == TITAN_OK &&
             titan_fs_read_file(b, &y, &ny, (size_t)1 << 30) == TITAN_OK && nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return eq;
}

#endif
