/* reshard.h - rewriting a checkpoint for another parallel layout (titan-reshard).
 *
 * Every checkpoint loads under any layout already (readers intersect boxes);
 * resharding rewrites the chunks so that each rank of the new layout finds
 * its own boxes in its own data file, as if that job had saved it. The free
 * metadata (training state, model, tokenizer) is copied, so training resumes
 * from the output exactly as from the input. */
#ifndef TITAN_CKPT_RESHARD_H
#define TITAN_CKPT_RESHARD_H

#include <limits.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "core/error.h"
#include "tensor/layout.h"
#include "tensor/dtype.h"

typedef struct {
    titan_layout layout;
    int dtype; /* -1: keep each tensor's dtype; else a float titan_dtype for float tensors */
    int force; /* replace an existing step in OUT */
    /* -1: keep (zstd when any input chunk is zstd), else a titan_ckpt_compression
     * (at TITAN_CKPT_ZSTD_LEVEL). */
    int compression;
    /* Called after each piece written (may be NULL): tensor bytes done of total. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total, const char *tensor);
    void *ctx;
    /* Where each tensor goes in the layout (required): the model's catalog
     * knows, this layer stores tensors whatever they are
     * (titan_llama_param_place). Fills *out for tensor `name` of a model of
     * n_layers layers; its return value is not used. */
    int (*place)(const char *name, int n_layers, titan_layout_place *out);
} titan_reshard_opts;

typedef struct {
    int64_t step;
    char src_dir[PATH_MAX]; /* the step dir read */
    char out_dir[PATH_MAX]; /* the step dir written */
    char from_layout[TITAN_LAYOUT_STR_MAX]; /* the input's "layout" meta, "-" if none */
    int ntensors;
    int nfiles;      /* data files written (ranks holding a box they save) */
    uint64_t bytes;  /* tensor bytes written */
    size_t buf_bytes; /* the piece and cached input chunk buffers, at their largest */
} titan_reshard_stats;

/* Reads the checkpoint at src (a step dir or a root: its latest) and writes
 * it under layout o->layout to out: a checkpoint root (created if needed;
 * gets step-N/ with N the input's step, and `latest`), a step dir named
 * step-N (its parent is the root; N must be the input's step), or a run
 * directory (holding config.toml: its checkpoint/ root). Writes atomically
 * (step-N.tmp, then rename). An existing step-N is TITAN_ERR_USAGE unless
 * o->force. Memory, whatever the model size: the piece being written (at
 * most TITAN_CKPT_CHUNK_MAX bytes, or one row of dim 0 when that is larger),
 * the last input chunk read (kept: neighbouring boxes share it) and the
 * reader's and writer's buffers. The "layout" meta key of the output names
 * the new layout. */
titan_status titan_ckpt_reshard(const char *src, const char *out, const titan_reshard_opts *o,
                                titan_reshard_stats *stats);

/* The number of transformer layers of an open checkpoint: its model.n_layers,
 * or one more than the highest layers.N in its tensor names. */
int titan_ckpt_num_layers(const titan_ckpt *ck);

#endif
