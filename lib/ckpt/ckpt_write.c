/* ckpt_write.c - writing one checkpoint step: step-N.tmp/, data file, metadata, publish. */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt/ckpt_write_impl.h"
#include "core/fsutil.h"
#include "core/mem.h"

#define WBUF_SIZE ((size_t)8 << 20)
#define CHUNK_ALIGN 64 /* chunk offsets in a data file are multiples of this */
/* Compressed chunks wait (copied) until this many raw bytes are pending, so
 * that many of them compress in parallel; adds larger than this compress
 * straight from the caller's memory. */
#define ZBATCH_BYTES ((size_t)64 << 20)

static titan_status fail(titan_ckpt_writer *w, titan_status st) {
    if (w->failed == TITAN_OK) w->failed = st;
    return st;
}

/* Removes dir without replacing the error being reported. */
static void remove_quietly(const char *dir) {
    char msg[2048];
    titan_status code = titan_error_code();
    snprintf(msg, sizeof msg, "%s", titan_error_message());
    if (titan_fs_remove_tree(dir) != TITAN_OK) {
        if (code != TITAN_OK) titan_error(code, "%s", msg);
        else titan_error_clear();
    }
}

static titan_status flush_buf(titan_ckpt_writer *w) {
    if (w->buf_len == 0) return TITAN_OK;
    titan_status st = titan_fs_write_all(w->fd, w->buf, w->buf_len, w->datapath);
    w->buf_len = 0;
    return st;
}

/* Appends bytes to the data file: small pieces through the buffer, large ones directly. */
static titan_status append(titan_ckpt_writer *w, const void *p, size_t n) {
    if (w->buf_len + n <= WBUF_SIZE) {
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
    } else {
        TITAN_TRY(flush_buf(w));
        if (n >= WBUF_SIZE / 2) {
            TITAN_TRY(titan_fs_write_all(w->fd, p, n, w->datapath));
        } else {
            memcpy(w->buf, p, n);
            w->buf_len = n;
        }
    }
    w->file_off += n;
    return TITAN_OK;
}

/* ---- one data file per rank (titan_ckpt_add_rank) ---- */

/* Parked files kept open; past this many, a parked file is closed (and
 * reopened when its rank writes again) so a many-rank save stays under the
 * descriptor limit. */
#define MAX_PARKED_OPEN 128

static void close_parked(titan_ckpt_writer *w) {
    for (int i = 0; i < w->nfiles; i++)
        if (i != w->cur && w->files[i].fd >= 0) {
            close(w->files[i].fd);
            w->files[i].fd = -1;
        }
    free(w->files);
    free(w->slot);
    w->files = NULL;
    w->slot = NULL;
    w->nfiles = w->nslot = 0;
}

/* fsyncs and closes every parked data file (fsync through a new descriptor
 * flushes the file's pages too, so closed ones are reopened for it). */
static titan_status sync_parked(titan_ckpt_writer *w) {
    for (int i = 0; i < w->nfiles; i++) {
        wfile *f = &w->files[i];
        if (i == w->cur) continue;
        char path[PATH_MAX];
        TITAN_TRY(titan_fs_join(path, sizeof path, w->tmpdir, f->name));
        if (f->fd < 0 && (f->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            return titan_error(TITAN_ERR_IO, "%s: open: %s", path, strerror(errno));
        titan_status st = titan_fs_fsync_fd(f->fd, path);
        close(f->fd);
        f->fd = -1;
        TITAN_TRY(st);
    }
    return TITAN_OK;
}

static const char *chunk_file(const titan_ckpt_writer *w, const wchunk *c) {
    return w->nfiles ? w->files[c->file].name : w->dataname;
}

/* Index of rank's entry in w->files, adding one (file not yet created) when new. */
static titan_status file_slot(titan_ckpt_writer *w, int rank, int *idx) {
    if (rank >= w->nslot) {
        int n = w->nslot ? w->nslot : 8;
        while (n <= rank) n *= 2;
        int *ns = realloc(w->slot, (size_t)n * sizeof *ns);
        if (!ns) return titan_error(TITAN_ERR_NOMEM, "%s: rank files: out of memory", w->tmpdir);
        for (int i = w->nslot; i < n; i++) ns[i] = -1;
        w->slot = ns;
        w->nslot = n;
    }
    if (w->slot[rank] < 0) {
        if ((w->nfiles & (w->nfiles - 1)) == 0) { /* capacity: the next power of two */
            wfile *nf = realloc(w->files, (size_t)(w->nfiles ? 2 * w->nfiles : 1) * sizeof *nf);
            if (!nf) return titan_error(TITAN_ERR_NOMEM, "%s: rank files: out of memory", w->tmpdir);
            w->files = nf;
        }
        wfile *f = &w->files[w->nfiles];
        f->rank = rank;
        f->fd = -1;
        f->off = 0;
        f->part = 0;
        snprintf(f->name, sizeof f->name, "rank-%05d.bin", rank);
        w->slot[rank] = w->nfiles++;
    }
    *idx = w->slot[rank];
    return TITAN_OK;
}

titan_status titan_ckpt_writer_file_slot(titan_ckpt_writer *w, int rank, int *idx) {
    int i0;
    if (w->nfiles == 0) TITAN_TRY(file_slot(w, w->rank, &i0)); /* the own file becomes entry 0 */
    return file_slot(w, rank, idx);
}

/* Makes rank's data file the current one: later appends go there. Its file is
 * created on first use (rank 0's exists from begin). */
static titan_status select_rank(titan_ckpt_writer *w, int rank) {
    if (w->nfiles == 0) { /* the own file, opened by begin, becomes entry 0 */
        if (rank == w->rank) return TITAN_OK;
        int i0;
        TITAN_TRY(file_slot(w, w->rank, &i0));
        w->cur = i0;
    }
    if (w->files[w->cur].rank == rank) return TITAN_OK;
    int idx;
    TITAN_TRY(file_slot(w, rank, &idx));
    TITAN_TRY(flush_buf(w));
    wfile *old = &w->files[w->cur], *f = &w->files[idx];
    old->off = w->file_off;
    old->fd = w->fd;
    w->fd = -1;
    if (w->nopen >= MAX_PARKED_OPEN) {
        close(old->fd); /* unsynced: sync_parked reopens it */
        old->fd = -1;
    } else {
        w->nopen++;
    }
    char path[PATH_MAX];
    TITAN_TRY(titan_fs_join(path, sizeof path, w->tmpdir, f->name));
    if (f->fd >= 0) {
        w->nopen--;
    } else {
        /* The .tmp dir is this writer's own: a file there is one it made. */
        f->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (f->fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", path, strerror(errno));
        if (lseek(f->fd, (off_t)f->off, SEEK_SET) < 0) {
            titan_status st = titan_error(TITAN_ERR_IO, "%s: seek: %s", path, strerror(errno));
            close(f->fd);
            f->fd = -1;
            return st;
        }
    }
    w->fd = f->fd;
    f->fd = -1;
    w->file_off = f->off;
    w->cur = idx;
    snprintf(w->dataname, sizeof w->dataname, "%s", f->name);
    snprintf(w->datapath, sizeof w->datapath, "%s", path);
    return TITAN_OK;
}

static void drop_pending(titan_ckpt_writer *w) {
    for (int i = 0; i < w->npend; i++) {
        free(w->pend[i].copy);
        free(w->pend[i].job.out);
    }
    w->npend = 0;
    w->pend_bytes = 0;
}

void titan_ckpt_writer_free(titan_ckpt_writer *w) {
    if (!w) return;
    drop_pending(w);
    free(w->pend);
    if (w->fd >= 0) close(w->fd);
    for (int i = 0; i < w->ntensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].chunks);
    }
    free(w->tensors);
    close_parked(w);
    if (w->meta) json_decref(w->meta);
    titan_free(w->buf);
    free(w);
}

titan_status titan_ckpt_writer_open(titan_ckpt_writer **out, const char *root, int64_t step, int rank,
                                    int part) {
    *out = NULL;
    if (step < 0) return titan_error(TITAN_ERR_USAGE, "%s: checkpoint step %lld is negative", root, (long long)step);
    if (rank < 0 || rank > TITAN_CKPT_MAX_RANK)
        return titan_error(TITAN_ERR_USAGE, "%s: rank %d not in 0..%d", root, rank, TITAN_CKPT_MAX_RANK);
    titan_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w) return titan_error(TITAN_ERR_NOMEM, "%s: checkpoint writer: out of memory", root);
    w->fd = -1;
    w->step = step;
    w->rank = rank;
    titan_ckpt_default_compression(&w->comp, &w->level);
    char name[64], tmpname[80];
    titan_ckpt_step_name(name, sizeof name, step);
    snprintf(tmpname, sizeof tmpname, "%s.tmp", name);
    snprintf(w->dataname, sizeof w->dataname, "rank-%05d.bin", rank);
    titan_status st = TITAN_OK;
    if (strlen(root) >= sizeof w->root) st = titan_error(TITAN_ERR_USAGE, "%s: path too long", root);
    if (st == TITAN_OK) {
        strcpy(w->root, root);
        st = titan_fs_join(w->tmpdir, sizeof w->tmpdir, root, tmpname);
    }
    if (st == TITAN_OK) st = titan_fs_join(w->final, sizeof w->final, root, name);
    if (st == TITAN_OK) st = titan_fs_join(w->datapath, sizeof w->datapath, w->tmpdir, w->dataname);
    int made = 0;
    if (part) {
        if (st == TITAN_OK && !titan_fs_is_dir(w->tmpdir))
            st = titan_error(TITAN_ERR_IO, "%s: no such staging directory (its catalog writer starts it)", w->tmpdir);
    } else {
        if (st == TITAN_OK) st = titan_fs_mkdir_p(root);
        if (st == TITAN_OK) st = titan_fs_remove_tree(w->tmpdir); /* stale, from a crash */
        if (st == TITAN_OK) {
            if (mkdir(w->tmpdir, 0755) != 0)
                st = titan_error(TITAN_ERR_IO, "%s: mkdir: %s", w->tmpdir, strerror(errno));
            else
                made = 1;
        }
    }
    if (st == TITAN_OK) {
        w->fd = open(w->datapath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (w->fd < 0) st = titan_error(TITAN_ERR_IO, "%s: open: %s", w->datapath, strerror(errno));
    }
    if (st == TITAN_OK && !(w->buf = titan_alloc(WBUF_SIZE, "checkpoint write buffer")))
        st = TITAN_ERR_NOMEM;
    if (st == TITAN_OK && !(w->meta = json_object()))
        st = titan_error(TITAN_ERR_NOMEM, "%s: metadata: out of memory", w->tmpdir);
    if (st != TITAN_OK) {
        if (made) remove_quietly(w->tmpdir);
        else if (part && w->fd >= 0) unlink(w->datapath);
        titan_ckpt_writer_free(w);
        return st;
    }
    *out = w;
    return TITAN_OK;
}

titan_status titan_ckpt_begin(titan_ckpt_writer **out, const char *root, int64_t step) {
    return titan_ckpt_writer_open(out, root, step, 0, 0);
}

int titan_ckpt_writer_overlap(const wtensor *t, const titan_box *box) {
    titan_box r;
    for (int j = 0; j < t->nchunks; j++)
        if (titan_box_intersect(&t->chunks[j].box, box, &r) != 0) return j;
    return -1;
}

static titan_status check_add(titan_ckpt_writer *w, const char *name, titan_dtype dtype, int ndim,
                              const int64_t *shape, const titan_box *box) {
    if (!name || !*name) return titan_error(TITAN_ERR_USAGE, "%s: tensor with an empty name", w->tmpdir);
    if (ndim < 1 || ndim > TITAN_MAX_DIMS)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: ndim %d not in 1..%d", w->tmpdir, name,
                           ndim, TITAN_MAX_DIMS);
    if ((int)dtype < TITAN_DTYPE_F32 || dtype > TITAN_DTYPE_U32)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: unknown dtype %d", w->tmpdir, name, (int)dtype);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1)
            return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: shape[%d] = %lld", w->tmpdir, name,
                               d, (long long)shape[d]);
        if (box->ndim != ndim || box->offset[d] < 0 || box->size[d] < 1 ||
            box->offset[d] + box->size[d] > shape[d])
            return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: box outside the shape in dim %d",
                               w->tmpdir, name, d);
    }
    int64_t total = (int64_t)titan_dtype_size(dtype); /* readers refuse more than 2^60 bytes */
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(total, shape[d], &total) || total > ((int64_t)1 << 60))
            return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: shape too large", w->tmpdir, name);
    return TITAN_OK;
}

wtensor *titan_ckpt_writer_tensor(titan_ckpt_writer *w, const char *name, titan_dtype dtype, int ndim,
                                  const int64_t *shape, titan_status *st) {
    for (int i = 0; i < w->ntensors; i++) {
        wtensor *t = &w->tensors[i];
        if (strcmp(t->name, name) != 0) continue;
        int same = t->dtype == dtype && t->ndim == ndim;
        for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
        if (!same) {
            *st = titan_error(TITAN_ERR_USAGE, "%s: tensor %s: chunk disagrees with earlier chunks "
                              "on dtype or shape", w->tmpdir, name);
            return NULL;
        }
        return t;
    }
    if (w->ntensors == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        wtensor *nt = realloc(w->tensors, (size_t)cap * sizeof *nt);
        if (!nt) goto nomem;
        w->tensors = nt;
        w->cap = cap;
    }
    wtensor *t = &w->tensors[w->ntensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) goto nomem;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    w->ntensors++;
    return t;
nomem:
    *st = titan_error(TITAN_ERR_NOMEM, "%s: tensor %s: out of memory", w->tmpdir, name);
    return NULL;
}

wchunk *titan_ckpt_writer_new_chunk(titan_ckpt_writer *w, wtensor *t, titan_status *st) {
    if (t->nchunks == t->cap) {
        int cap = t->cap ? 2 * t->cap : 4;
        wchunk *nc = realloc(t->chunks, (size_t)cap * sizeof *nc);
        if (!nc) {
            *st = titan_error(TITAN_ERR_NOMEM, "%s: tensor %s: out of memory", w->tmpdir, t->name);
            return NULL;
        }
        t->chunks = nc;
        t->cap = cap;
    }
    wchunk *c = &t->chunks[t->nchunks];
    memset(c, 0, sizeof *c);
    return c;
}

/* Appends one chunk as stored (raw, or a zstd frame of nbytes raw bytes) and records it. */
static titan_status add_stored(titan_ckpt_writer *w, wtensor *t, const titan_box *box, const void *stored,
                               size_t stored_n, size_t nbytes, uint64_t checksum, titan_ckpt_compression comp) {
    static const unsigned char zeros[CHUNK_ALIGN];
    size_t pad = (CHUNK_ALIGN - w->file_off % CHUNK_ALIGN) % CHUNK_ALIGN;
    if (pad) TITAN_TRY(append(w, zeros, pad));
    titan_status st = TITAN_OK;
    wchunk *c = titan_ckpt_writer_new_chunk(w, t, &st);
    if (!c) return st;
    c->box = *box;
    c->offset = w->file_off;
    c->nbytes = nbytes;
    c->file = w->cur;
    c->checksum = checksum;
    c->stored = stored_n;
    c->comp = comp;
    TITAN_TRY(append(w, stored, stored_n));
    t->nchunks++;
    return TITAN_OK;
}

static titan_status add_chunk(titan_ckpt_writer *w, wtensor *t, const titan_box *box,
                              const void *data, size_t nbytes) {
    return add_stored(w, t, box, data, nbytes, nbytes, XXH3_64bits(data, nbytes), TITAN_CKPT_COMPRESS_NONE);
}

/* ---- compressed chunks ---- */

/* Compresses the pending chunks (in parallel) and appends them in the order added. */
static titan_status flush_pending(titan_ckpt_writer *w) {
    if (w->npend == 0) return TITAN_OK;
    titan_ckpt_zjob *jobs = malloc((size_t)w->npend * sizeof *jobs);
    titan_status st = jobs ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "%s: out of memory", w->tmpdir);
    for (int i = 0; i < w->npend && st == TITAN_OK; i++) jobs[i] = w->pend[i].job;
    if (st == TITAN_OK) st = titan_ckpt_zstd_run(jobs, w->npend, w->level, w->tmpdir);
    if (st == TITAN_OK)
        for (int i = 0; i < w->npend; i++) w->pend[i].job.out = jobs[i].out; /* owned: drop_pending frees */
    for (int i = 0; i < w->npend && st == TITAN_OK; i++) {
        const zpending *p = &w->pend[i];
        const titan_ckpt_zjob *j = &jobs[i];
        int z = j->comp == TITAN_CKPT_COMPRESS_ZSTD;
        st = add_stored(w, &w->tensors[p->tensor], &p->box, z ? j->out : j->src, z ? j->out_n : j->n, j->n,
                        j->checksum, j->comp);
    }
    free(jobs);
    drop_pending(w);
    return st;
}

titan_status titan_ckpt_writer_flush_pending(titan_ckpt_writer *w) {
    titan_status st = flush_pending(w);
    return st == TITAN_OK ? TITAN_OK : fail(w, st);
}

static titan_status push_pending(titan_ckpt_writer *w, int ti, const titan_box *box, const void *data,
                                 size_t n, int copy) {
    if (w->npend == w->pend_cap) {
        int cap = w->pend_cap ? 2 * w->pend_cap : 64;
        zpending *np = realloc(w->pend, (size_t)cap * sizeof *np);
        if (!np) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", w->tmpdir);
        w->pend = np;
        w->pend_cap = cap;
    }
    zpending *p = &w->pend[w->npend];
    memset(p, 0, sizeof *p);
    if (copy) {
        if (!(p->copy = malloc(n ? n : 1)))
            return titan_error(TITAN_ERR_NOMEM, "%s: tensor %s: cannot copy %zu bytes to compress", w->tmpdir,
                               w->tensors[ti].name, n);
        memcpy(p->copy, data, n);
        data = p->copy;
    }
    p->tensor = ti;
    p->box = *box;
    p->job.src = data;
    p->job.n = n;
    w->npend++;
    w->pend_bytes += n;
    return TITAN_OK;
}

/* The chunks of one add, compressed: a small add is copied and batched with
 * others; a large one is compressed from the caller's memory before return,
 * as many chunks at a time as there are threads. */
static titan_status add_compressed(titan_ckpt_writer *w, int ti, const titan_box *box, const unsigned char *p,
                                   int64_t rows_per, size_t row) {
    size_t total = (size_t)box->size[0] * row;
    int direct = total > ZBATCH_BYTES, group = omp_get_max_threads();
    if (w->pend_bytes + total > ZBATCH_BYTES || direct) TITAN_TRY(flush_pending(w));
    for (int64_t r0 = 0; r0 < box->size[0]; r0 += rows_per) {
        titan_box sub = *box;
        sub.offset[0] = box->offset[0] + r0;
        sub.size[0] = box->size[0] - r0 < rows_per ? box->size[0] - r0 : rows_per;
        size_t n = (size_t)sub.size[0] * row;
        TITAN_TRY(push_pending(w, ti, &sub, p, n, !direct));
        if (direct && w->npend >= group) TITAN_TRY(flush_pending(w));
        p += n;
    }
    return direct ? flush_pending(w) : TITAN_OK;
}

titan_status titan_ckpt_set_compression(titan_ckpt_writer *w, titan_ckpt_compression c, int level) {
    TITAN_TRY(titan_ckpt_check_compression(c, &level));
    if (w->failed != TITAN_OK)
        return titan_error(w->failed, "%s: writer failed earlier; abort it", w->tmpdir);
    w->comp = c;
    w->level = level;
    return TITAN_OK;
}

/* Adds to the current data file (select_rank). */
static titan_status add_here(titan_ckpt_writer *w, const char *name, titan_dtype dtype, int ndim,
                             const int64_t *shape, const titan_box *box, const void *data) {
    if (w->failed != TITAN_OK)
        return titan_error(w->failed, "%s: writer failed earlier; abort it", w->tmpdir);
    if (!data || !shape)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: no %s", w->tmpdir, name ? name : "?",
                           data ? "shape" : "data");
    titan_box whole = {.ndim = ndim};
    if (!box) {
        for (int d = 0; d < ndim && d < TITAN_MAX_DIMS; d++) whole.size[d] = shape[d];
        box = &whole;
    }
    /* Usage errors leave the writer usable: nothing was written yet. */
    TITAN_TRY(check_add(w, name, dtype, ndim, shape, box));
    titan_status st = TITAN_OK;
    wtensor *t = titan_ckpt_writer_tensor(w, name, dtype, ndim, shape, &st);
    if (!t) return st;
    int j = titan_ckpt_writer_overlap(t, box);
    if (j >= 0) return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: chunk overlaps chunk %d", w->tmpdir, name, j);

    /* Split along dim 0 so no chunk exceeds TITAN_CKPT_CHUNK_MAX (rows stay whole). */
    size_t esz = titan_dtype_size(dtype);
    size_t row = esz;
    for (int d = 1; d < ndim; d++) row *= (size_t)box->size[d];
    int64_t rows_per = (int64_t)(TITAN_CKPT_CHUNK_MAX / row);
    if (rows_per < 1) rows_per = 1;
    const unsigned char *p = data;
    if (w->comp == TITAN_CKPT_COMPRESS_ZSTD) {
        st = add_compressed(w, (int)(t - w->tensors), box, p, rows_per, row);
        return st == TITAN_OK ? TITAN_OK : fail(w, st);
    }
    for (int64_t r0 = 0; r0 < box->size[0]; r0 += rows_per) {
        titan_box sub = *box;
        sub.offset[0] = box->offset[0] + r0;
        sub.size[0] = box->size[0] - r0 < rows_per ? box->size[0] - r0 : rows_per;
        size_t n = (size_t)sub.size[0] * row;
        st = add_chunk(w, t, &sub, p, n);
        if (st != TITAN_OK) return fail(w, st);
        p += n;
    }
    return TITAN_OK;
}

titan_status titan_ckpt_add_rank(titan_ckpt_writer *w, int rank, const char *name, titan_dtype dtype,
                                 int ndim, const int64_t *shape, const titan_box *box, const void *data) {
    if (w->failed != TITAN_OK)
        return titan_error(w->failed, "%s: writer failed earlier; abort it", w->tmpdir);
    if (rank < 0 || rank > TITAN_CKPT_MAX_RANK)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: rank %d not in 0..%d", w->tmpdir,
                           name ? name : "?", rank, TITAN_CKPT_MAX_RANK);
    if (w->fd < 0) /* only titan_ckpt_sync leaves a writer that has not failed without a file */
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: the data files are synced already", w->tmpdir,
                           name ? name : "?");
    /* A part's file is its rank's: reopening it here would write over its chunks. */
    if (rank < w->nslot && w->slot[rank] >= 0 && w->files[w->slot[rank]].part)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: rank-%05d.bin came from that rank's part", w->tmpdir,
                           name ? name : "?", rank);
    /* Pending compressed chunks belong to the current rank's file. */
    titan_status st = w->npend && rank != (w->nfiles ? w->files[w->cur].rank : w->rank) ? flush_pending(w) : TITAN_OK;
    if (st == TITAN_OK) st = select_rank(w, rank);
    if (st != TITAN_OK) return fail(w, st);
    return add_here(w, name, dtype, ndim, shape, box, data);
}

titan_status titan_ckpt_add(titan_ckpt_writer *w, const char *name, titan_dtype dtype, int ndim,
                            const int64_t *shape, const titan_box *box, const void *data) {
    return titan_ckpt_add_rank(w, 0, name, dtype, ndim, shape, box, data);
}

static titan_status set_meta(titan_ckpt_writer *w, const char *key, json_t *v) {
    if (!v) return titan_error(TITAN_ERR_NOMEM, "%s: metadata %s: out of memory", w->tmpdir, key);
    if (!key || !*key) {
        json_decref(v);
        return titan_error(TITAN_ERR_USAGE, "%s: metadata key is empty", w->tmpdir);
    }
    if (json_object_set_new(w->meta, key, v) != 0)
        return titan_error(TITAN_ERR_USAGE, "%s: metadata key \"%s\" is not valid UTF-8", w->tmpdir, key);
    return TITAN_OK;
}

titan_status titan_ckpt_meta_i64(titan_ckpt_writer *w, const char *key, int64_t value) {
    return set_meta(w, key, json_integer((json_int_t)value));
}

titan_status titan_ckpt_meta_f64(titan_ckpt_writer *w, const char *key, double value) {
    if (!isfinite(value))
        return titan_error(TITAN_ERR_USAGE, "%s: metadata %s: value %g is not finite", w->tmpdir, key, value);
    return set_meta(w, key, json_real(value));
}

titan_status titan_ckpt_meta_str(titan_ckpt_writer *w, const char *key, const char *value) {
    json_t *v = json_string(value ? value : "");
    if (!v) return titan_error(TITAN_ERR_USAGE, "%s: metadata %s: value is not valid UTF-8", w->tmpdir, key);
    return set_meta(w, key, v);
}

static json_t *int_array(const int64_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

/* NULL on allocation failure (json_pack with an "o" of NULL fails too). */
json_t *titan_ckpt_writer_catalog(titan_ckpt_writer *w) {
    json_t *tensors = json_object();
    for (int i = 0; tensors && i < w->ntensors; i++) {
        const wtensor *t = &w->tensors[i];
        json_t *chunks = json_array();
        for (int j = 0; chunks && j < t->nchunks; j++) {
            const wchunk *c = &t->chunks[j];
            char sum[32];
            snprintf(sum, sizeof sum, "xxh3:%016llx", (unsigned long long)c->checksum);
            json_t *jc = json_pack("{s:s, s:I, s:I, s:{s:o, s:o}, s:s, s:s, s:I}", "file", chunk_file(w, c),
                                   "offset", (json_int_t)c->offset, "nbytes", (json_int_t)c->nbytes,
                                   "box", "offset", int_array(c->box.offset, t->ndim),
                                   "size", int_array(c->box.size, t->ndim),
                                   "checksum", sum, "compression", titan_ckpt_compression_name(c->comp),
                                   "stored_nbytes", (json_int_t)c->stored);
            if (!jc || json_array_append_new(chunks, jc) != 0) {
                json_decref(chunks);
                chunks = NULL;
            }
        }
        json_t *jt = chunks ? json_pack("{s:s, s:o, s:o}", "dtype", titan_dtype_name(t->dtype),
                                        "shape", int_array(t->shape, t->ndim), "chunks", chunks)
                            : NULL;
        if (!jt || json_object_set_new(tensors, t->name, jt) != 0) {
            json_decref(tensors);
            tensors = NULL;
        }
    }
    if (!tensors) return NULL;
    return json_pack("{s:s, s:i, s:I, s:O, s:o}", "format", TITAN_CKPT_FORMAT, "version",
                     TITAN_CKPT_VERSION, "step", (json_int_t)w->step, "meta", w->meta, "tensors", tensors);
}

titan_status titan_ckpt_writer_sync_data(titan_ckpt_writer *w) {
    TITAN_TRY(flush_pending(w)); /* into the current file, before it is synced */
    TITAN_TRY(sync_parked(w)); /* again after titan_ckpt_sync: parts taken since */
    if (w->fd < 0) return TITAN_OK; /* the own file, synced and closed by titan_ckpt_sync */
    TITAN_TRY(flush_buf(w));
    TITAN_TRY(titan_fs_fsync_fd(w->fd, w->datapath));
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) return titan_error(TITAN_ERR_IO, "%s: close: %s", w->datapath, strerror(errno));
    return TITAN_OK;
}

titan_status titan_ckpt_sync(titan_ckpt_writer *w) {
    if (w->failed != TITAN_OK) return titan_error(w->failed, "%s: writer failed earlier; abort it", w->tmpdir);
    titan_status st = titan_ckpt_writer_sync_data(w);
    return st == TITAN_OK ? TITAN_OK : fail(w, st);
}

/* Everything up to and including the rename of step-N.tmp to step-N. */
static titan_status publish(titan_ckpt_writer *w) {
    if (w->failed != TITAN_OK)
        return titan_error(w->failed, "%s: not committed: an earlier write failed", w->tmpdir);
    TITAN_TRY(titan_ckpt_writer_sync_data(w));

    json_t *root = titan_ckpt_writer_catalog(w);
    char *txt = root ? json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
    if (root) json_decref(root);
    if (!txt) return titan_error(TITAN_ERR_NOMEM, "%s: metadata.json: out of memory", w->tmpdir);
    char mpath[PATH_MAX];
    titan_status st = titan_fs_join(mpath, sizeof mpath, w->tmpdir, "metadata.json");
    if (st == TITAN_OK) st = titan_fs_write_file(mpath, txt, strlen(txt));
    free(txt);
    TITAN_TRY(st);
    TITAN_TRY(titan_fs_fsync_path(w->tmpdir));
    return titan_fs_replace_dir(w->tmpdir, w->final); /* fsyncs root */
}

titan_status titan_ckpt_commit(titan_ckpt_writer *w, int keep_latest_k) {
    if (keep_latest_k < 0) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "%s: keep_latest_k %d is negative", w->tmpdir, keep_latest_k);
        titan_ckpt_abort(w);
        return st;
    }
    titan_status st = publish(w);
    if (st != TITAN_OK) {
        remove_quietly(w->tmpdir);
        titan_ckpt_writer_free(w);
        return st;
    }
    st = titan_ckpt_set_latest(w->root, w->step);
    if (st == TITAN_OK && keep_latest_k > 0) st = titan_ckpt_prune(w->root, keep_latest_k, w->step);
    if (st != TITAN_OK) titan_error_context("%s: committed, but updating latest or pruning failed", w->final);
    titan_ckpt_writer_free(w);
    return st;
}

void titan_ckpt_abort(titan_ckpt_writer *w) {
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    remove_quietly(w->tmpdir);
    titan_ckpt_writer_free(w);
}
