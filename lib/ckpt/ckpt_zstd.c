/* ckpt_zstd.c - chunk compression: names, the process default, parallel compression. */
#include "ckpt/ckpt_zstd.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

static titan_ckpt_compression default_comp = TITAN_CKPT_COMPRESS_NONE;
static int default_level = TITAN_CKPT_ZSTD_LEVEL;

const char *titan_ckpt_compression_name(titan_ckpt_compression c) {
    return c == TITAN_CKPT_COMPRESS_ZSTD ? "zstd" : "none";
}

int titan_ckpt_compression_parse(const char *s, titan_ckpt_compression *out) {
    if (!strcmp(s, "none")) *out = TITAN_CKPT_COMPRESS_NONE;
    else if (!strcmp(s, "zstd")) *out = TITAN_CKPT_COMPRESS_ZSTD;
    else return -1;
    return 0;
}

static titan_status check_level(titan_ckpt_compression c, int *level) {
    if (c != TITAN_CKPT_COMPRESS_NONE && c != TITAN_CKPT_COMPRESS_ZSTD)
        return titan_error(TITAN_ERR_USAGE, "checkpoint compression %d is not none or zstd", (int)c);
    if (*level == 0) *level = TITAN_CKPT_ZSTD_LEVEL;
    /* 20..22 need --ultra-sized windows (hundreds of MB per thread) for no gain on weights. */
    if (*level < 1 || *level > 19)
        return titan_error(TITAN_ERR_USAGE, "checkpoint compression level %d is not in 1..19", *level);
    return TITAN_OK;
}

titan_status titan_ckpt_set_default_compression(titan_ckpt_compression c, int level) {
    TITAN_TRY(check_level(c, &level));
    default_comp = c;
    default_level = level;
    return TITAN_OK;
}

void titan_ckpt_default_compression(titan_ckpt_compression *c, int *level) {
    *c = default_comp;
    *level = default_level;
}

titan_status titan_ckpt_check_compression(titan_ckpt_compression c, int *level) { return check_level(c, level); }

/* Compresses one job with cctx; returns 0, or the zstd error code. */
static size_t run_one(ZSTD_CCtx *cctx, titan_ckpt_zjob *j, int level) {
    j->checksum = XXH3_64bits(j->src, j->n);
    j->comp = TITAN_CKPT_COMPRESS_NONE;
    j->out = NULL;
    j->out_n = 0;
    size_t cap = ZSTD_compressBound(j->n);
    void *out = malloc(cap ? cap : 1);
    if (!out) return (size_t)-ZSTD_error_memory_allocation;
    /* Single-threaded per frame, content size and no frame checksum (the
     * catalog's checksum covers the raw bytes): the frame is a function of
     * the bytes and the level only. */
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
    size_t r = ZSTD_compress2(cctx, out, cap, j->src, j->n);
    if (ZSTD_isError(r)) {
        free(out);
        return r;
    }
    if (r >= j->n) { /* did not shrink: store the raw bytes */
        free(out);
        return 0;
    }
    void *fit = realloc(out, r); /* gives back the compressBound slack */
    j->out = fit ? fit : out;
    j->out_n = r;
    j->comp = TITAN_CKPT_COMPRESS_ZSTD;
    return 0;
}

titan_status titan_ckpt_zstd_run(titan_ckpt_zjob *jobs, int n, int level, const char *what) {
    size_t err = 0;
#pragma omp parallel
    {
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            size_t r = cctx ? run_one(cctx, &jobs[i], level) : (size_t)-ZSTD_error_memory_allocation;
            if (ZSTD_isError(r)) {
#pragma omp critical(titan_ckpt_zstd_err)
                if (!err) err = r;
            }
        }
        ZSTD_freeCCtx(cctx);
    }
    if (!err) return TITAN_OK;
    for (int i = 0; i < n; i++) {
        free(jobs[i].out);
        jobs[i].out = NULL;
    }
    if (ZSTD_getErrorCode(err) == ZSTD_error_memory_allocation)
        return titan_error(TITAN_ERR_NOMEM, "%s: zstd compression: out of memory", what);
    return titan_error(TITAN_ERR_FAIL, "%s: zstd compression: %s", what, ZSTD_getErrorName(err));
}
