/* ckpt_part.c - one rank's data file written by that rank, and the catalog
 * writer taking its index (see "writing in parallel" in ckpt.h).
 *
 * A part is a writer (ckpt_write_impl.h) whose own file is its rank's and
 * whose staging dir is another's: it shares chunking, compression and
 * buffering with every other write. Its index is the catalog it would
 * publish, so the catalog writer validates it with the reader's own checks
 * (titan_ckpt_parse) before taking any of it. */
#include "ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt_write_impl.h"

struct titan_ckpt_part {
    titan_ckpt_writer *w;
};

titan_status titan_ckpt_part_begin(titan_ckpt_part **out, const char *root, int64_t step, int rank) {
    *out = NULL;
    if (rank < 1)
        return titan_error(TITAN_ERR_USAGE, "%s: checkpoint part of rank %d: rank 0's file is the catalog writer's",
                           root, rank);
    titan_ckpt_part *p = calloc(1, sizeof *p);
    if (!p) return titan_error(TITAN_ERR_NOMEM, "%s: checkpoint part: out of memory", root);
    titan_status st = titan_ckpt_writer_open(&p->w, root, step, rank, 1);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(p->w, "rank", rank);
    if (st != TITAN_OK) {
        titan_ckpt_part_abort(p);
        return st;
    }
    *out = p;
    return TITAN_OK;
}

titan_status titan_ckpt_part_add(titan_ckpt_part *p, const char *name, titan_dtype dtype, int ndim,
                                 const int64_t *shape, const titan_box *box, const void *data) {
    return titan_ckpt_add_rank(p->w, p->w->rank, name, dtype, ndim, shape, box, data);
}

void titan_ckpt_part_abort(titan_ckpt_part *p) {
    if (!p) return;
    if (p->w) {
        if (p->w->fd >= 0) {
            close(p->w->fd);
            p->w->fd = -1;
            unlink(p->w->datapath); /* best effort: the staging dir goes anyway */
        }
        titan_ckpt_writer_free(p->w);
    }
    free(p);
}

titan_status titan_ckpt_part_finish(titan_ckpt_part *p, char **index, size_t *len) {
    *index = NULL;
    *len = 0;
    titan_ckpt_writer *w = p->w;
    titan_status st = w->failed == TITAN_OK
                          ? TITAN_OK
                          : titan_error(w->failed, "%s: part not finished: an earlier write failed", w->datapath);
    if (st == TITAN_OK) st = titan_ckpt_writer_sync_data(w);
    if (st == TITAN_OK) {
        json_t *cat = titan_ckpt_writer_catalog(w);
        *index = cat ? json_dumps(cat, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (cat) json_decref(cat);
        if (*index) *len = strlen(*index);
        else st = titan_error(TITAN_ERR_NOMEM, "%s: part index: out of memory", w->datapath);
    }
    if (st != TITAN_OK) unlink(w->datapath); /* closed by sync_data, or still open: abort closes it */
    titan_ckpt_part_abort(p);
    return st;
}

/* ---- the catalog writer's side ---- */

static wtensor *find_tensor(titan_ckpt_writer *w, const char *name) {
    for (int i = 0; i < w->ntensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return &w->tensors[i];
    return NULL;
}

/* Everything that can be wrong with the index, before anything is taken. */
static titan_status check_part(titan_ckpt_writer *w, int rank, titan_ckpt *ck, const char *label,
                               const char *fname) {
    int64_t r = -1;
    if (titan_ckpt_step(ck) != w->step)
        return titan_error(TITAN_ERR_USAGE, "%s: step %" PRId64 ", but the checkpoint is step %" PRId64, label,
                           titan_ckpt_step(ck), w->step);
    if (titan_ckpt_meta_get_i64(ck, "rank", &r) != TITAN_OK || r != rank)
        return titan_error(TITAN_ERR_FORMAT, "%s: meta.rank is not %d", label, rank);
    for (int i = 0; i < titan_ckpt_num_tensors(ck); i++) {
        titan_ckpt_tensor ti;
        TITAN_TRY(titan_ckpt_tensor_info(ck, i, &ti));
        const wtensor *t = find_tensor(w, ti.name);
        int same = !t || (t->dtype == ti.dtype && t->ndim == ti.ndim &&
                          memcmp(t->shape, ti.shape, (size_t)ti.ndim * sizeof *ti.shape) == 0);
        if (!same)
            return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: dtype or shape differs from the checkpoint's", label,
                               ti.name);
        for (int j = 0; j < ti.nchunks; j++) {
            titan_ckpt_chunk c;
            TITAN_TRY(titan_ckpt_chunk_info(ck, ti.name, j, &c));
            if (strcmp(c.file, fname) != 0)
                return titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: chunk %d is in %s, not %s", label, ti.name, j,
                                   c.file, fname);
            if (!c.checksum_xxh3)
                return titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: chunk %d: checksum is not xxh3", label, ti.name, j);
            int k = t ? titan_ckpt_writer_overlap(t, &c.box) : -1;
            if (k >= 0)
                return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: chunk %d overlaps chunk %d of the checkpoint",
                                   label, ti.name, j, k);
        }
    }
    return TITAN_OK;
}

static titan_status take_part(titan_ckpt_writer *w, int file, titan_ckpt *ck) {
    titan_status st = TITAN_OK;
    for (int i = 0; i < titan_ckpt_num_tensors(ck); i++) {
        titan_ckpt_tensor ti;
        TITAN_TRY(titan_ckpt_tensor_info(ck, i, &ti));
        wtensor *t = titan_ckpt_writer_tensor(w, ti.name, ti.dtype, ti.ndim, ti.shape, &st);
        if (!t) return st;
        for (int j = 0; j < ti.nchunks; j++) {
            titan_ckpt_chunk c;
            TITAN_TRY(titan_ckpt_chunk_info(ck, ti.name, j, &c));
            wchunk *wc = titan_ckpt_writer_new_chunk(w, t, &st);
            if (!wc) return st;
            wc->box = c.box;
            wc->offset = c.offset;
            wc->nbytes = c.nbytes;
            wc->checksum = c.checksum;
            wc->file = file;
            wc->stored = c.stored_nbytes;
            wc->comp = c.compression;
            t->nchunks++;
        }
    }
    return TITAN_OK;
}

titan_status titan_ckpt_add_part(titan_ckpt_writer *w, int rank, const char *index, size_t len) {
    if (w->failed != TITAN_OK)
        return titan_error(w->failed, "%s: writer failed earlier; abort it", w->tmpdir);
    char label[PATH_MAX + 64], fname[32];
    snprintf(label, sizeof label, "%s: index of rank %d", w->tmpdir, rank);
    snprintf(fname, sizeof fname, "rank-%05d.bin", rank);
    if (rank < 0 || rank > TITAN_CKPT_MAX_RANK)
        return titan_error(TITAN_ERR_USAGE, "%s: rank not in 0..%d", label, TITAN_CKPT_MAX_RANK);
    if (rank == w->rank || (rank < w->nslot && w->slot[rank] >= 0))
        return titan_error(TITAN_ERR_USAGE, "%s: %s is already in the checkpoint", label, fname);
    /* Chunks still waiting for compression go first: the catalog lists
     * chunks in the order they were added, as one writer would, and they
     * must be recorded to be checked for overlaps. */
    TITAN_TRY(titan_ckpt_writer_flush_pending(w));
    titan_ckpt *ck = NULL;
    titan_status st = titan_ckpt_parse(&ck, index ? index : "", index ? len : 0, label);
    if (st == TITAN_OK) st = check_part(w, rank, ck, label, fname);
    int file = -1;
    if (st == TITAN_OK) st = titan_ckpt_writer_file_slot(w, rank, &file);
    if (st == TITAN_OK) w->files[file].part = 1;
    /* Only running out of memory stops a take half way; that fails the writer. */
    if (st == TITAN_OK && (st = take_part(w, file, ck)) != TITAN_OK && w->failed == TITAN_OK) w->failed = st;
    titan_ckpt_close(ck);
    return st;
}
