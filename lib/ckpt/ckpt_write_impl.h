/* ckpt_write_impl.h - the checkpoint writer's state and the pieces of it
 * that ckpt_part.c shares with ckpt_write.c (internal to lib/ckpt).
 *
 * A writer owns data files in a staging dir: the one it opened first (rank
 * `rank`'s, the "own" file) and, through titan_ckpt_add_rank or merged part
 * indexes, other ranks'. A catalog writer (titan_ckpt_begin) also owns the
 * staging dir and publishes it; a part writer (ckpt_part.c) only writes its
 * own file into a staging dir another process made. */
#ifndef TITAN_CKPT_CKPT_WRITE_IMPL_H
#define TITAN_CKPT_CKPT_WRITE_IMPL_H

#include <jansson.h>
#include <limits.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_zstd.h"

typedef struct {
    titan_box box;
    uint64_t offset, nbytes, checksum;
    int file; /* index into w->files (0 while there is only the own file) */
    uint64_t stored; /* bytes in the file */
    titan_ckpt_compression comp;
} wchunk;

/* A chunk waiting to be compressed (into the current data file). */
typedef struct {
    int tensor; /* index: w->tensors may move */
    titan_box box;
    void *copy; /* owned copy of the raw bytes, or NULL when job.src is the caller's */
    titan_ckpt_zjob job;
} zpending;

/* A rank's data file (titan_ckpt_add_rank, or a merged part). The current
 * one's fd and offset live in the writer's fd and file_off; the others are
 * parked here. */
typedef struct {
    int rank;
    int fd; /* -1 when parked closed, or a part's */
    int part; /* written by another process (titan_ckpt_add_part) */
    uint64_t off;
    char name[32];
} wfile;

typedef struct {
    char *name;
    titan_dtype dtype;
    int ndim;
    int64_t shape[TITAN_MAX_DIMS];
    wchunk *chunks;
    int nchunks, cap;
} wtensor;

struct titan_ckpt_writer {
    char root[PATH_MAX];
    char tmpdir[PATH_MAX];
    char final[PATH_MAX];
    char datapath[PATH_MAX];
    char dataname[32];
    int64_t step;
    int rank; /* the own file's rank */
    int fd;
    uint64_t file_off; /* bytes written to the file, buffered ones included */
    unsigned char *buf;
    size_t buf_len;
    json_t *meta;
    wtensor *tensors;
    int ntensors, cap;
    titan_status failed; /* first failure; commit refuses after one */
    wfile *files; /* empty until another rank's file is written or merged */
    int nfiles, cur, nopen;
    int *slot; /* rank -> index into files, -1 when none; nslot entries */
    int nslot;
    titan_ckpt_compression comp;
    int level;
    zpending *pend;
    int npend, pend_cap;
    size_t pend_bytes;
};

/* Starts a writer of step `step` under root whose own file is rank's
 * rank-RRRRR.bin. part 0: (re)creates root/step-N.tmp/ (titan_ckpt_begin);
 * part 1: the staging dir must exist (another process made it) and the
 * file must not. */
titan_status titan_ckpt_writer_open(titan_ckpt_writer **out, const char *root, int64_t step, int rank,
                                    int part);
/* Frees w and closes its files; removes nothing. */
void titan_ckpt_writer_free(titan_ckpt_writer *w);
/* Writes out what is pending and buffered, fsyncs every data file this
 * writer wrote, and closes its own. Again after a first call (titan_ckpt_sync):
 * fsyncs the other files again, taken parts included. */
titan_status titan_ckpt_writer_sync_data(titan_ckpt_writer *w);
/* Compresses and appends the chunks waiting for compression, recording
 * them; a failure fails the writer. */
titan_status titan_ckpt_writer_flush_pending(titan_ckpt_writer *w);
/* The catalog (metadata.json's document); NULL when out of memory. */
json_t *titan_ckpt_writer_catalog(titan_ckpt_writer *w);
/* The entry of tensor `name`, added when new; TITAN_ERR_USAGE when an
 * earlier chunk disagrees on dtype or shape. NULL on error (*st set). */
wtensor *titan_ckpt_writer_tensor(titan_ckpt_writer *w, const char *name, titan_dtype dtype, int ndim,
                                  const int64_t *shape, titan_status *st);
/* A new chunk record at the end of t (the caller fills it in and counts it). */
wchunk *titan_ckpt_writer_new_chunk(titan_ckpt_writer *w, wtensor *t, titan_status *st);
/* The index of the chunk of t that meets box, or -1. */
int titan_ckpt_writer_overlap(const wtensor *t, const titan_box *box);
/* Index into w->files of rank's file, adding an entry (no file created)
 * when new. */
titan_status titan_ckpt_writer_file_slot(titan_ckpt_writer *w, int rank, int *idx);

#endif
