/* ckpt.h - the checkpoint format (see titan-checkpoint(5)).
 *
 * A checkpoint root holds step-NNNNNNNN/ directories and a `latest` file. A
 * step directory holds metadata.json (format version, step, free metadata and a
 * catalog of tensors; each tensor is a set of chunks: file, byte range, box
 * within the global tensor, checksum) and the data files the ranks wrote.
 * Readers intersect the boxes they need with the saved boxes and read only
 * those chunks, so any layout loads any other layout's checkpoint.
 *
 * Writes go to step-N.tmp/, are fsynced, then renamed to step-N/; `latest` is
 * replaced atomically afterwards. A crash at any point leaves the previous
 * checkpoint loadable. */
#ifndef TITAN_CKPT_CKPT_H
#define TITAN_CKPT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tensor/box.h"
#include "tensor/dtype.h"

#define TITAN_CKPT_FORMAT "titan-checkpoint"
#define TITAN_CKPT_VERSION 1
/* The writer splits a box larger than this along its first dimension into
 * several chunks, so a partial read never needs more than about this much
 * scratch memory per chunk (one row of dim 0 is never split). */
#define TITAN_CKPT_CHUNK_MAX ((size_t)64 << 20)

/* ---- writing ---- */

typedef struct titan_ckpt_writer titan_ckpt_writer;

/* How a chunk is stored in its data file (the catalog's "compression"). */
typedef enum {
    TITAN_CKPT_COMPRESS_NONE = 0, /* the raw bytes */
    TITAN_CKPT_COMPRESS_ZSTD = 1, /* one zstd frame per chunk */
} titan_ckpt_compression;
#define TITAN_CKPT_ZSTD_LEVEL 3 /* default level; levels 1..19 are accepted */

/* "none" / "zstd"; parse returns 0, or -1 for another name. */
const char *titan_ckpt_compression_name(titan_ckpt_compression c);
int titan_ckpt_compression_parse(const char *s, titan_ckpt_compression *out);
/* The compression titan_ckpt_begin gives new writers in this process
 * (initially none); level 0 = TITAN_CKPT_ZSTD_LEVEL. TITAN_ERR_USAGE for a
 * level outside 1..19. Tools call it once, from their config. */
titan_status titan_ckpt_set_default_compression(titan_ckpt_compression c, int level);
/* Compression of the chunks added to w from now on. Each chunk is compressed
 * on its own (a partial read decompresses only the chunks it needs), on the
 * OpenMP threads; the output does not depend on the thread count. A chunk
 * that zstd does not make smaller is stored raw ("none"). */
titan_status titan_ckpt_set_compression(titan_ckpt_writer *w, titan_ckpt_compression c, int level);

/* Starts root/step-N.tmp/ (root is created if needed; a stale step-N.tmp is
 * removed) with the data file rank-00000.bin. */
titan_status titan_ckpt_begin(titan_ckpt_writer **w, const char *root, int64_t step);
/* Appends one chunk of tensor `name` (global shape `shape`, ndim 1..4): the
 * dense row-major elements of `box` (NULL = the whole tensor) in host memory.
 * Adding the same name again adds another chunk; dtype and shape must agree
 * and boxes must not overlap (TITAN_ERR_USAGE). Data is copied or written
 * before return. After a failed add the writer only accepts abort (commit
 * fails and removes the .tmp dir). */
titan_status titan_ckpt_add(titan_ckpt_writer *w, const char *name, titan_dtype dtype, int ndim,
                            const int64_t *shape, const titan_box *box, const void *data);
/* Like titan_ckpt_add (which is rank 0), but the chunk goes to the data file
 * of `rank` (rank-RRRRR.bin, created on first use), as if that rank had
 * written it: one process can save what every rank of a sharded run saves
 * (see tensor/layout.h for which boxes each rank holds). Ranks may come in
 * any order; the catalog records each chunk's file. */
#define TITAN_CKPT_MAX_RANK ((1 << 20) - 1)
titan_status titan_ckpt_add_rank(titan_ckpt_writer *w, int rank, const char *name, titan_dtype dtype,
                                 int ndim, const int64_t *shape, const titan_box *box, const void *data);
/* Free metadata (training state, config values). Setting a key again replaces it. */
titan_status titan_ckpt_meta_i64(titan_ckpt_writer *w, const char *key, int64_t value);
titan_status titan_ckpt_meta_f64(titan_ckpt_writer *w, const char *key, double value); /* finite */
titan_status titan_ckpt_meta_str(titan_ckpt_writer *w, const char *key, const char *value);
/* Writes metadata.json, fsyncs, publishes step-N/ (replacing an existing one
 * atomically), points `latest` at it, then removes the oldest complete steps
 * beyond keep_latest_k (0 = keep all; the step just written is always kept).
 * Always frees w. On failure before publishing, the .tmp dir is removed. */
titan_status titan_ckpt_commit(titan_ckpt_writer *w, int keep_latest_k);
/* Removes the .tmp dir and frees w (NULL is fine). */
void titan_ckpt_abort(titan_ckpt_writer *w);
/* Writes out, fsyncs and closes the data files written so far, so that
 * commit has only the catalog left: a save can do the slow part away from
 * its commit (another thread). Adding chunks is refused after it
 * (TITAN_ERR_USAGE); titan_ckpt_add_part and the metadata are not. */
titan_status titan_ckpt_sync(titan_ckpt_writer *w);

/* ---- writing in parallel: one part per rank (ckpt_part.c) ----
 *
 * Each rank of a sharded job writes its own data file, a "part", while one
 * writer (titan_ckpt_begin, usually rank 0's) owns the staging dir and the
 * catalog. The order: the catalog writer begins (creating step-N.tmp/);
 * then every other rank begins its part, adds its chunks and finishes
 * (fsyncs its file and gets its index: a catalog of that one file in the
 * metadata.json format, {"rank": R} as its meta); the catalog writer takes
 * every part's index with titan_ckpt_add_part and commits. The result is
 * the checkpoint titan_ckpt_add_rank would write for the same chunks. */
typedef struct titan_ckpt_part titan_ckpt_part;

/* Starts rank's data file rank-RRRRR.bin in root/step-N.tmp/, which must
 * exist (TITAN_ERR_IO otherwise) and not hold that file yet. rank >= 1:
 * rank 0's file is the catalog writer's own. Compression is the process
 * default (titan_ckpt_set_default_compression). */
titan_status titan_ckpt_part_begin(titan_ckpt_part **p, const char *root, int64_t step, int rank);
/* titan_ckpt_add, into the part's file (same rules, chunking and compression). */
titan_status titan_ckpt_part_add(titan_ckpt_part *p, const char *name, titan_dtype dtype, int ndim,
                                 const int64_t *shape, const titan_box *box, const void *data);
/* Writes out and fsyncs the data file, then gives its index (malloc'd JSON
 * text, *len bytes, no NUL counted) for the catalog writer. Always frees p;
 * on failure the data file is removed. */
titan_status titan_ckpt_part_finish(titan_ckpt_part *p, char **index, size_t *len);
/* Closes and removes the part's data file, frees p (NULL is fine). The
 * staging dir stays: it is the catalog writer's. */
void titan_ckpt_part_abort(titan_ckpt_part *p);
/* Catalog writer: records the chunks of `rank`'s finished part (index from
 * titan_ckpt_part_finish on that rank), checked like a catalog on open, for
 * this writer's step and `rank`, and against the chunks recorded so far
 * (dtype, shape, no overlap). TITAN_ERR_FORMAT for an index that is not
 * one; TITAN_ERR_USAGE when it disagrees or that rank's file is already in
 * the checkpoint. The writer stays usable after a failed call. The file is
 * fsynced again before commit publishes. */
titan_status titan_ckpt_add_part(titan_ckpt_writer *w, int rank, const char *index, size_t len);

/* ---- reading ---- */

typedef struct titan_ckpt titan_ckpt;

/* Carried files (ckpt_files.c): a step dir may hold small files besides
 * metadata.json and its data files (titan training saves the tokenizer's
 * file). add_file writes one into the staging dir (name: a plain file name,
 * not metadata.json nor rank-RRRRR.bin, else TITAN_ERR_USAGE); it is
 * published with the step. copy_files adds every such file of ck's step
 * dir to w (resharding keeps them). is_own_file: 1 for the names the
 * format itself uses. */
titan_status titan_ckpt_add_file(titan_ckpt_writer *w, const char *name, const void *data, size_t n);
titan_status titan_ckpt_copy_files(const titan_ckpt *ck, titan_ckpt_writer *w);
int titan_ckpt_is_own_file(const char *name);

typedef struct {
    const char *name; /* valid until titan_ckpt_close */
    titan_dtype dtype;
    int ndim;
    int64_t shape[TITAN_MAX_DIMS];
    int nchunks;
} titan_ckpt_tensor;

typedef struct {
    const char *file; /* name within the step dir; valid until titan_ckpt_close */
    uint64_t offset;  /* bytes */
    uint64_t nbytes;  /* the raw (decompressed) bytes of the box */
    titan_box box;
    uint64_t checksum; /* of the raw bytes */
    int checksum_xxh3; /* 1: XXH3_64bits, 0: XXH64 seed 0 */
    titan_ckpt_compression compression;
    uint64_t stored_nbytes; /* bytes in the file: nbytes when not compressed */
} titan_ckpt_chunk;

/* path: a step dir (holds metadata.json), or a root: follows `latest`; if that
 * is missing or names a missing dir, takes the highest complete step-N dir
 * (step-N.tmp ignored) and warns. Validates the whole catalog (see the man
 * page): TITAN_ERR_FORMAT when it is malformed, TITAN_ERR_IO when it or a data
 * file it names is missing or unreadable, TITAN_ERR_CORRUPT when a data file
 * is shorter than its chunks. */
titan_status titan_ckpt_open(titan_ckpt **out, const char *path);
void titan_ckpt_close(titan_ckpt *ck);
/* Parses and validates a metadata.json held in memory (label names it in
 * messages) without touching any file: data files are neither checked nor
 * readable (titan_ckpt_read fails with TITAN_ERR_IO). For tests and fuzzing. */
titan_status titan_ckpt_parse(titan_ckpt **out, const char *json, size_t len, const char *label);

int64_t titan_ckpt_step(const titan_ckpt *ck);
const char *titan_ckpt_path(const titan_ckpt *ck); /* the step dir */

int titan_ckpt_meta_has(const titan_ckpt *ck, const char *key); /* 1 if the key is there, of any type */
/* TITAN_ERR_FORMAT when the key is missing or of another type (f64 accepts integers).
 * The string stays valid until titan_ckpt_close. */
titan_status titan_ckpt_meta_get_i64(const titan_ckpt *ck, const char *key, int64_t *out);
titan_status titan_ckpt_meta_get_f64(const titan_ckpt *ck, const char *key, double *out);
titan_status titan_ckpt_meta_get_str(const titan_ckpt *ck, const char *key, const char **out);
/* The i-th free metadata key in saved order (0-based), NULL past the end;
 * valid until titan_ckpt_close. */
const char *titan_ckpt_meta_key(const titan_ckpt *ck, int i);

int titan_ckpt_num_tensors(const titan_ckpt *ck);
/* By index (0 <= i < num_tensors, catalog order) or by name (TITAN_ERR_FORMAT if absent). */
titan_status titan_ckpt_tensor_info(const titan_ckpt *ck, int i, titan_ckpt_tensor *out);
titan_status titan_ckpt_tensor_find(const titan_ckpt *ck, const char *name, titan_ckpt_tensor *out);
int titan_ckpt_has_tensor(const titan_ckpt *ck, const char *name);
titan_status titan_ckpt_chunk_info(const titan_ckpt *ck, const char *name, int j,
                                   titan_ckpt_chunk *out);

/* Reads the region `want` (NULL = whole tensor) of tensor `name` into dst, a
 * dense row-major buffer over `want` of `dtype` elements. Reads only the chunks
 * that intersect `want`, decompresses them, verifies each one's checksum,
 * converts f32/bf16/f16 as needed. TITAN_ERR_FORMAT if `want` is not fully
 * covered by the saved chunks; TITAN_ERR_CORRUPT for a checksum mismatch, a
 * data file cut short or an undecodable zstd frame. */
titan_status titan_ckpt_read(titan_ckpt *ck, const char *name, titan_dtype dtype,
                             const titan_box *want, void *dst);
/* Reads every chunk and checks its checksum. */
titan_status titan_ckpt_verify(titan_ckpt *ck);

/* ---- the checkpoint root ---- */

/* "step-00000100" (8 digits, more when the step needs them). */
void titan_ckpt_step_name(char *out, size_t outsz, int64_t step);
/* 0 and *step for "step-<digits>" exactly, else -1. */
int titan_ckpt_parse_step_name(const char *name, int64_t *step);
/* Complete steps (step-N dirs holding metadata.json), ascending; at most max
 * stored, *count gets the total found. */
titan_status titan_ckpt_list_steps(const char *root, int64_t *steps, int max, int *count);
/* The step `latest` names, or the highest complete one; TITAN_ERR_IO
 * "no checkpoint in ROOT" when there is none. */
titan_status titan_ckpt_latest_step(const char *root, int64_t *step);
/* Like latest_step, also giving the step dir path; warn: log when `latest` is
 * missing or stale and a fallback was taken. */
titan_status titan_ckpt_resolve(const char *root, char *dir, size_t dirsz, int64_t *step, int warn);
/* What a CKPT argument of a tool names, as something titan_ckpt_open
 * accepts: a step dir or a root stay as they are; a run dir (holding
 * checkpoint/) becomes RUN/checkpoint. TITAN_ERR_IO when it is missing. */
titan_status titan_ckpt_resolve_arg(const char *arg, char *out, size_t cap);
/* Points root/latest at step-N atomically (write latest.tmp, fsync, rename, fsync root). */
titan_status titan_ckpt_set_latest(const char *root, int64_t step);
/* Removes the oldest complete steps beyond keep (keep > 0), never `keep_step`;
 * also removes leftovers of interrupted writes and removals (step-N.old,
 * step-N.del, and step-N.tmp for N < keep_step). Each step dir is renamed to
 * step-N.del before it is removed, so a crash never leaves half a step-N. */
titan_status titan_ckpt_prune(const char *root, int keep, int64_t keep_step);

#endif
