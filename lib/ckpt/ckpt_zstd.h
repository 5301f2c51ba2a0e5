/* ckpt_zstd.h - compressing checkpoint chunks (internal to lib/ckpt). */
#ifndef TITAN_CKPT_CKPT_ZSTD_H
#define TITAN_CKPT_CKPT_ZSTD_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

/* One chunk to compress: src/n in; the rest out. */
typedef struct {
    const void *src;
    size_t n;
    void *out;      /* the zstd frame (malloc'd) when comp is zstd, else NULL: store src */
    size_t out_n;
    uint64_t checksum; /* XXH3_64bits of the raw bytes */
    titan_ckpt_compression comp;
} titan_ckpt_zjob;

/* Compresses every job independently (zstd `level`, one frame each, content
 * size recorded) on the OpenMP threads, and checksums the raw bytes. A chunk
 * that does not shrink keeps comp = none. The result does not depend on the
 * thread count. `what` names the checkpoint in messages. */
titan_status titan_ckpt_zstd_run(titan_ckpt_zjob *jobs, int n, int level, const char *what);

/* TITAN_ERR_USAGE unless c is known and *level in 1..19 (0 becomes the default level). */
titan_status titan_ckpt_check_compression(titan_ckpt_compression c, int *level);

/* The process default set by titan_ckpt_set_default_compression. */
void titan_ckpt_default_compression(titan_ckpt_compression *c, int *level);

#endif
