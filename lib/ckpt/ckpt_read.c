/* ckpt_read.c - opening a checkpoint step, validating its catalog, planned reads. */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "core/fsutil.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint data is little-endian; this reader assumes a little-endian host"
#endif

#define METADATA_MAX ((size_t)1 << 30)

typedef struct {
    int file; /* index into ck->files */
    uint64_t offset, nbytes, checksum;
    uint64_t stored; /* bytes in the file */
    int xxh3;
    titan_ckpt_compression comp;
    titan_box box;
} rchunk;

typedef struct {
    const char *name; /* key in ck->root */
    titan_dtype dtype;
    int ndim;
    int64_t shape[TITAN_MAX_DIMS];
    rchunk *chunks;
    int nchunks;
} rtensor;

typedef struct {
    const char *name;
    char path[PATH_MAX];
    int fd; /* opened on first read */
    uint64_t size;
} rfile;

typedef struct {
    void *zbuf; /* compressed bytes of the chunk being read */
    size_t zcap;
    ZSTD_DCtx *dctx;
} rscratch;

struct titan_ckpt {
    char dir[PATH_MAX];
    char mpath[PATH_MAX]; /* metadata.json, named in catalog errors */
    int64_t step;
    json_t *root;
    json_t *meta;
    rtensor *tensors;
    int ntensors;
    rfile *files;
    int nfiles;
    int detached; /* parsed from memory: no data files */
    rscratch z;
};

static void fmt_box(char *out, size_t n, const titan_box *b) {
    int k = snprintf(out, n, "offset [");
    for (int d = 0; d < b->ndim && k > 0 && (size_t)k < n; d++)
        k += snprintf(out + k, n - (size_t)k, "%s%lld", d ? "," : "", (long long)b->offset[d]);
    if (k > 0 && (size_t)k < n) k += snprintf(out + k, n - (size_t)k, "] size [");
    for (int d = 0; d < b->ndim && k > 0 && (size_t)k < n; d++)
        k += snprintf(out + k, n - (size_t)k, "%s%lld", d ? "," : "", (long long)b->size[d]);
    if (k > 0 && (size_t)k < n) snprintf(out + k, n - (size_t)k, "]");
}

/* ---- catalog parsing and validation ---- */

static titan_status bad(const titan_ckpt *ck, const char *tname, const char *what) {
    if (tname) return titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: %s", ck->mpath, tname, what);
    return titan_error(TITAN_ERR_FORMAT, "%s: %s", ck->mpath, what);
}

/* An integer array of length ndim with every value in [lo, INT64_MAX]. */
static int get_dims(json_t *a, int ndim, int64_t lo, int64_t *out) {
    if (!json_is_array(a) || (int)json_array_size(a) != ndim) return -1;
    for (int d = 0; d < ndim; d++) {
        json_t *v = json_array_get(a, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < lo) return -1;
        out[d] = json_integer_value(v);
    }
    return 0;
}

static int parse_checksum(const char *s, uint64_t *v, int *xxh3) {
    const char *hex;
    if (!strncmp(s, "xxh3:", 5)) { *xxh3 = 1; hex = s + 5; }
    else if (!strncmp(s, "xxh64:", 6)) { *xxh3 = 0; hex = s + 6; }
    else return -1;
    if (strlen(hex) != 16 || strspn(hex, "0123456789abcdefABCDEF") != 16) return -1;
    *v = strtoull(hex, NULL, 16);
    return 0;
}

/* Index of the data file `name` in ck->files, adding (and stat'ing) it when new. */
static titan_status file_index(titan_ckpt *ck, const char *tname, const char *name, int *idx) {
    for (int i = 0; i < ck->nfiles; i++)
        if (!strcmp(ck->files[i].name, name)) { *idx = i; return TITAN_OK; }
    if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > NAME_MAX)
        return bad(ck, tname, "chunk file is not a plain file name");
    rfile *nf = realloc(ck->files, (size_t)(ck->nfiles + 1) * sizeof *nf);
    if (!nf) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", ck->mpath);
    ck->files = nf;
    rfile *f = &ck->files[ck->nfiles];
    f->name = name;
    f->fd = -1;
    f->size = 0;
    TITAN_TRY(titan_fs_join(f->path, sizeof f->path, ck->dir, name));
    *idx = ck->nfiles++;
    return TITAN_OK;
}

/* After the catalog parsed: every data file it names exists (else IO: a
 * file is missing) and holds every byte range of its chunks (else CORRUPT:
 * the file was cut short). */
static titan_status check_files(titan_ckpt *ck) {
    for (int i = 0; i < ck->nfiles; i++) {
        rfile *f = &ck->files[i];
        struct stat st;
        int rc = stat(f->path, &st);
        const char *why = rc != 0 ? strerror(errno) : S_ISREG(st.st_mode) ? NULL : "not a regular file";
        if (why) {
            for (int a = 0; a < ck->ntensors; a++)
                for (int j = 0; j < ck->tensors[a].nchunks; j++)
                    if (ck->tensors[a].chunks[j].file == i)
                        return titan_error(TITAN_ERR_IO, "%s: tensor %s: chunk %d: data file %s: %s", ck->mpath,
                                           ck->tensors[a].name, j, f->path, why);
            return titan_error(TITAN_ERR_IO, "%s: data file %s: %s", ck->mpath, f->path, why);
        }
        f->size = (uint64_t)st.st_size;
    }
    for (int a = 0; a < ck->ntensors; a++) {
        const rtensor *t = &ck->tensors[a];
        for (int j = 0; j < t->nchunks; j++) {
            const rchunk *c = &t->chunks[j];
            const rfile *f = &ck->files[c->file];
            if (c->offset > f->size || c->stored > f->size - c->offset)
                return titan_error(TITAN_ERR_CORRUPT, "%s: byte %llu: truncated: the file has %llu bytes, "
                                   "tensor %s (chunk %d) needs bytes %llu..%llu (%s)", f->path,
                                   (unsigned long long)f->size, (unsigned long long)f->size, t->name, j,
                                   (unsigned long long)c->offset, (unsigned long long)(c->offset + c->stored),
                                   ck->mpath);
        }
    }
    return TITAN_OK;
}

typedef struct { int64_t lo, hi; int idx; } span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Saved boxes must not overlap: sweep over dim 0 and compare only chunks whose rows meet. */
static titan_status check_overlaps(const titan_ckpt *ck, const rtensor *t) {
    if (t->nchunks < 2) return TITAN_OK;
    span *s = malloc((size_t)t->nchunks * sizeof *s);
    if (!s) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", ck->mpath);
    for (int j = 0; j < t->nchunks; j++)
        s[j] = (span){t->chunks[j].box.offset[0], t->chunks[j].box.offset[0] + t->chunks[j].box.size[0], j};
    qsort(s, (size_t)t->nchunks, sizeof *s, cmp_span);
    for (int a = 0; a < t->nchunks; a++)
        for (int b = a + 1; b < t->nchunks && s[b].lo < s[a].hi; b++) {
            titan_box r;
            if (titan_box_intersect(&t->chunks[s[a].idx].box, &t->chunks[s[b].idx].box, &r)) {
                int i = s[a].idx < s[b].idx ? s[a].idx : s[b].idx;
                int j = s[a].idx < s[b].idx ? s[b].idx : s[a].idx;
                free(s);
                return titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: chunks %d and %d overlap",
                                   ck->mpath, t->name, i, j);
            }
        }
    free(s);
    return TITAN_OK;
}

static titan_status parse_chunk(titan_ckpt *ck, rtensor *t, int j, json_t *jc) {
    rchunk *c = &t->chunks[j];
    char what[256];
    json_t *file = json_object_get(jc, "file"), *off = json_object_get(jc, "offset");
    json_t *nb = json_object_get(jc, "nbytes"), *box = json_object_get(jc, "box");
    json_t *sum = json_object_get(jc, "checksum"), *comp = json_object_get(jc, "compression");
    snprintf(what, sizeof what, "chunk %d: missing or malformed field", j);
    if (!json_is_string(file) || !json_is_integer(off) || json_integer_value(off) < 0 ||
        !json_is_integer(nb) || json_integer_value(nb) < 0 || !json_is_object(box) || !json_is_string(sum))
        return bad(ck, t->name, what);
    c->comp = TITAN_CKPT_COMPRESS_NONE;
    if (comp && (!json_is_string(comp) || titan_ckpt_compression_parse(json_string_value(comp), &c->comp))) {
        snprintf(what, sizeof what, "chunk %d: compression \"%.32s\" is not supported (none, zstd)", j,
                 json_is_string(comp) ? json_string_value(comp) : "?");
        return bad(ck, t->name, what);
    }
    c->offset = (uint64_t)json_integer_value(off);
    c->nbytes = (uint64_t)json_integer_value(nb);
    json_t *sn = json_object_get(jc, "stored_nbytes");
    if (sn && (!json_is_integer(sn) || json_integer_value(sn) < 0)) {
        snprintf(what, sizeof what, "chunk %d: stored_nbytes is not a non-negative integer", j);
        return bad(ck, t->name, what);
    }
    if (!sn && c->comp != TITAN_CKPT_COMPRESS_NONE) {
        snprintf(what, sizeof what, "chunk %d: a compressed chunk needs stored_nbytes", j);
        return bad(ck, t->name, what);
    }
    c->stored = sn ? (uint64_t)json_integer_value(sn) : c->nbytes;
    if (parse_checksum(json_string_value(sum), &c->checksum, &c->xxh3)) {
        snprintf(what, sizeof what, "chunk %d: checksum \"%.40s\" is not xxh3:<16 hex> or xxh64:<16 hex>",
                 j, json_string_value(sum));
        return bad(ck, t->name, what);
    }
    c->box.ndim = t->ndim;
    if (get_dims(json_object_get(box, "offset"), t->ndim, 0, c->box.offset) ||
        get_dims(json_object_get(box, "size"), t->ndim, 1, c->box.size)) {
        snprintf(what, sizeof what, "chunk %d: box is not %d non-negative offsets and positive sizes", j, t->ndim);
        return bad(ck, t->name, what);
    }
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (c->box.size[d] > t->shape[d] || c->box.offset[d] > t->shape[d] - c->box.size[d]) {
            char b[160];
            fmt_box(b, sizeof b, &c->box);
            snprintf(what, sizeof what, "chunk %d: box %s outside the shape in dim %d", j, b, d);
            return bad(ck, t->name, what);
        }
        numel *= (uint64_t)c->box.size[d];
    }
    if (c->nbytes != numel * titan_dtype_size(t->dtype)) {
        snprintf(what, sizeof what, "chunk %d: nbytes %llu, expected %llu for its box", j,
                 (unsigned long long)c->nbytes, (unsigned long long)(numel * titan_dtype_size(t->dtype)));
        return bad(ck, t->name, what);
    }
    /* A zstd frame of n bytes is never longer than ZSTD_compressBound(n); the
     * bound also keeps the reader's scratch buffer sane. */
    uint64_t most = c->comp == TITAN_CKPT_COMPRESS_NONE ? c->nbytes : ZSTD_compressBound((size_t)c->nbytes);
    if (c->comp == TITAN_CKPT_COMPRESS_NONE ? c->stored != c->nbytes : (c->stored < 1 || c->stored > most)) {
        snprintf(what, sizeof what, "chunk %d: stored_nbytes %llu is impossible for %llu bytes compressed with %s",
                 j, (unsigned long long)c->stored, (unsigned long long)c->nbytes, titan_ckpt_compression_name(c->comp));
        return bad(ck, t->name, what);
    }
    if (c->offset > INT64_MAX - c->stored) {
        snprintf(what, sizeof what, "chunk %d: offset %llu is absurd", j, (unsigned long long)c->offset);
        return bad(ck, t->name, what);
    }
    return file_index(ck, t->name, json_string_value(file), &c->file);
}

static titan_status parse_tensor(titan_ckpt *ck, rtensor *t, const char *name, json_t *jt) {
    t->name = name;
    json_t *dt = json_object_get(jt, "dtype"), *shape = json_object_get(jt, "shape");
    json_t *chunks = json_object_get(jt, "chunks");
    if (!json_is_object(jt) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(chunks))
        return bad(ck, name, "missing or malformed dtype, shape or chunks");
    if (titan_dtype_parse(json_string_value(dt), &t->dtype))
        return bad(ck, name, "unknown dtype");
    t->ndim = (int)json_array_size(shape);
    if (t->ndim < 1 || t->ndim > TITAN_MAX_DIMS || get_dims(shape, t->ndim, 1, t->shape))
        return bad(ck, name, "shape is not 1 to 4 positive integers");
    /* Bound the byte size so no product below can overflow (boxes lie within the shape). */
    int64_t total = (int64_t)titan_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        if (__builtin_mul_overflow(total, t->shape[d], &total) || total > ((int64_t)1 << 60))
            return bad(ck, name, "shape too large");
    size_t n = json_array_size(chunks);
    if (n == 0 || n > INT_MAX) return bad(ck, name, "no chunks");
    if (!(t->chunks = calloc(n, sizeof *t->chunks)))
        return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", ck->mpath);
    t->nchunks = (int)n;
    for (int j = 0; j < t->nchunks; j++)
        TITAN_TRY(parse_chunk(ck, t, j, json_array_get(chunks, (size_t)j)));
    return check_overlaps(ck, t);
}

static titan_status parse_catalog(titan_ckpt *ck, const char *txt, size_t len) {
    json_error_t je;
    ck->root = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &je);
    if (!ck->root)
        return titan_error(TITAN_ERR_FORMAT, "%s: line %d column %d: %s", ck->mpath, je.line, je.column, je.text);
    json_t *fmt = json_object_get(ck->root, "format"), *ver = json_object_get(ck->root, "version");
    json_t *step = json_object_get(ck->root, "step"), *tensors = json_object_get(ck->root, "tensors");
    ck->meta = json_object_get(ck->root, "meta");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), TITAN_CKPT_FORMAT))
        return bad(ck, NULL, "not a titan checkpoint (\"format\" is not \"" TITAN_CKPT_FORMAT "\")");
    if (!json_is_integer(ver))
        return bad(ck, NULL, "missing \"version\"");
    if (json_integer_value(ver) != TITAN_CKPT_VERSION)
        return titan_error(TITAN_ERR_FORMAT, "%s: format version %lld is not supported (this titan reads %d)",
                           ck->mpath, (long long)json_integer_value(ver), TITAN_CKPT_VERSION);
    if (!json_is_integer(step) || json_integer_value(step) < 0)
        return bad(ck, NULL, "missing or negative \"step\"");
    ck->step = json_integer_value(step);
    if (ck->meta && !json_is_object(ck->meta)) return bad(ck, NULL, "\"meta\" is not an object");
    if (!json_is_object(tensors)) return bad(ck, NULL, "missing \"tensors\" object");
    size_t n = json_object_size(tensors);
    if (n > INT_MAX) return bad(ck, NULL, "too many tensors");
    if (n && !(ck->tensors = calloc(n, sizeof *ck->tensors)))
        return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", ck->mpath);
    const char *key;
    json_t *jt;
    json_object_foreach(tensors, key, jt) {
        rtensor *t = &ck->tensors[ck->ntensors++]; /* counted first: close frees its chunks */
        TITAN_TRY(parse_tensor(ck, t, key, jt));
    }
    return TITAN_OK;
}

static titan_status load_catalog(titan_ckpt *ck) {
    char *txt;
    size_t len;
    TITAN_TRY(titan_fs_read_regular(ck->mpath, &txt, &len, METADATA_MAX));
    titan_status st = parse_catalog(ck, txt, len);
    free(txt);
    TITAN_TRY(st);
    return check_files(ck);
}

titan_status titan_ckpt_parse(titan_ckpt **out, const char *json, size_t len, const char *label) {
    *out = NULL;
    titan_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", label);
    ck->detached = 1;
    snprintf(ck->mpath, sizeof ck->mpath, "%s", label);
    titan_status st = parse_catalog(ck, json, len);
    if (st != TITAN_OK) {
        titan_ckpt_close(ck);
        return st;
    }
    *out = ck;
    return TITAN_OK;
}

titan_status titan_ckpt_open(titan_ckpt **out, const char *path) {
    *out = NULL;
    titan_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    titan_status st = titan_fs_join(ck->mpath, sizeof ck->mpath, path, "metadata.json");
    if (st == TITAN_OK) {
        if (titan_fs_exists(ck->mpath)) {
            snprintf(ck->dir, sizeof ck->dir, "%s", path);
        } else if (titan_fs_is_dir(path)) {
            st = titan_ckpt_resolve(path, ck->dir, sizeof ck->dir, NULL, 1);
            if (st == TITAN_OK) st = titan_fs_join(ck->mpath, sizeof ck->mpath, ck->dir, "metadata.json");
        } else {
            st = titan_error(TITAN_ERR_IO, "%s: %s", path,
                             titan_fs_exists(path) ? "not a checkpoint directory" : strerror(ENOENT));
        }
    }
    if (st == TITAN_OK) st = load_catalog(ck);
    if (st != TITAN_OK) {
        titan_ckpt_close(ck);
        return st;
    }
    *out = ck;
    return TITAN_OK;
}

void titan_ckpt_close(titan_ckpt *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->ntensors; i++) free(ck->tensors[i].chunks);
    free(ck->tensors);
    for (int i = 0; i < ck->nfiles; i++)
        if (ck->files[i].fd >= 0) close(ck->files[i].fd);
    free(ck->files);
    if (ck->root) json_decref(ck->root);
    free(ck->z.zbuf);
    ZSTD_freeDCtx(ck->z.dctx);
    free(ck);
}

/* ---- accessors ---- */

int64_t titan_ckpt_step(const titan_ckpt *ck) { return ck->step; }
const char *titan_ckpt_path(const titan_ckpt *ck) { return ck->dir; }
int titan_ckpt_num_tensors(const titan_ckpt *ck) { return ck->ntensors; }

static json_t *meta_get(const titan_ckpt *ck, const char *key, titan_status *st) {
    json_t *v = ck->meta ? json_object_get(ck->meta, key) : NULL;
    if (!v) *st = titan_error(TITAN_ERR_FORMAT, "%s: meta key \"%s\": missing", ck->mpath, key);
    return v;
}

int titan_ckpt_meta_has(const titan_ckpt *ck, const char *key) {
    return ck->meta && json_object_get(ck->meta, key) != NULL;
}

titan_status titan_ckpt_meta_get_i64(const titan_ckpt *ck, const char *key, int64_t *out) {
    titan_status st = TITAN_OK;
    json_t *v = meta_get(ck, key, &st);
    if (!v) return st;
    if (!json_is_integer(v))
        return titan_error(TITAN_ERR_FORMAT, "%s: meta key \"%s\": not an integer", ck->mpath, key);
    *out = json_integer_value(v);
    return TITAN_OK;
}

titan_status titan_ckpt_meta_get_f64(const titan_ckpt *ck, const char *key, double *out) {
    titan_status st = TITAN_OK;
    json_t *v = meta_get(ck, key, &st);
    if (!v) return st;
    if (!json_is_number(v))
        return titan_error(TITAN_ERR_FORMAT, "%s: meta key \"%s\": not a number", ck->mpath, key);
    *out = json_number_value(v);
    return TITAN_OK;
}

titan_status titan_ckpt_meta_get_str(const titan_ckpt *ck, const char *key, const char **out) {
    titan_status st = TITAN_OK;
    json_t *v = meta_get(ck, key, &st);
    if (!v) return st;
    if (!json_is_string(v))
        return titan_error(TITAN_ERR_FORMAT, "%s: meta key \"%s\": not a string", ck->mpath, key);
    *out = json_string_value(v);
    return TITAN_OK;
}

const char *titan_ckpt_meta_key(const titan_ckpt *ck, int i) {
    if (!ck->meta || i < 0) return NULL;
    const char *key;
    json_t *v;
    int k = 0;
    json_object_foreach(ck->meta, key, v) {
        (void)v;
        if (k++ == i) return key;
    }
    return NULL;
}

static rtensor *find(const titan_ckpt *ck, const char *name) {
    for (int i = 0; i < ck->ntensors; i++)
        if (!strcmp(ck->tensors[i].name, name)) return &ck->tensors[i];
    return NULL;
}

static void fill_info(const rtensor *t, titan_ckpt_tensor *out) {
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memset(out->shape, 0, sizeof out->shape);
    memcpy(out->shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    out->nchunks = t->nchunks;
}

titan_status titan_ckpt_tensor_info(const titan_ckpt *ck, int i, titan_ckpt_tensor *out) {
    if (i < 0 || i >= ck->ntensors)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor index %d not in 0..%d", ck->mpath, i, ck->ntensors - 1);
    fill_info(&ck->tensors[i], out);
    return TITAN_OK;
}

titan_status titan_ckpt_tensor_find(const titan_ckpt *ck, const char *name, titan_ckpt_tensor *out) {
    const rtensor *t = find(ck, name);
    if (!t) return titan_error(TITAN_ERR_FORMAT, "%s: no tensor %s", ck->mpath, name);
    fill_info(t, out);
    return TITAN_OK;
}

int titan_ckpt_has_tensor(const titan_ckpt *ck, const char *name) { return find(ck, name) != NULL; }

titan_status titan_ckpt_chunk_info(const titan_ckpt *ck, const char *name, int j, titan_ckpt_chunk *out) {
    const rtensor *t = find(ck, name);
    if (!t) return titan_error(TITAN_ERR_FORMAT, "%s: no tensor %s", ck->mpath, name);
    if (j < 0 || j >= t->nchunks)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: chunk index %d not in 0..%d", ck->mpath,
                           name, j, t->nchunks - 1);
    const rchunk *c = &t->chunks[j];
    *out = (titan_ckpt_chunk){.file = ck->files[c->file].name, .offset = c->offset, .nbytes = c->nbytes,
                              .box = c->box, .checksum = c->checksum, .checksum_xxh3 = c->xxh3,
                              .compression = c->comp, .stored_nbytes = c->stored};
    return TITAN_OK;
}

/* ---- reading data ---- */

/* Reads the stored bytes of chunk c into the scratch buffer and decompresses them into buf. */
static titan_status read_zstd(titan_ckpt *ck, rfile *f, const rtensor *t, int j, void *buf) {
    const rchunk *c = &t->chunks[j];
    if (c->stored > ck->z.zcap) {
        free(ck->z.zbuf);
        ck->z.zcap = 0;
        if (!(ck->z.zbuf = malloc((size_t)c->stored)))
            return titan_error(TITAN_ERR_NOMEM, "%s: tensor %s (chunk %d): cannot allocate %llu bytes", f->path,
                               t->name, j, (unsigned long long)c->stored);
        ck->z.zcap = (size_t)c->stored;
    }
    if (!ck->z.dctx && !(ck->z.dctx = ZSTD_createDCtx()))
        return titan_error(TITAN_ERR_NOMEM, "%s: zstd: out of memory", f->path);
    titan_status st = titan_fs_pread_all(f->fd, ck->z.zbuf, (size_t)c->stored, (off_t)c->offset, f->path);
    if (st != TITAN_OK) return st;
    size_t r = ZSTD_decompressDCtx(ck->z.dctx, buf, (size_t)c->nbytes, ck->z.zbuf, (size_t)c->stored);
    if (ZSTD_isError(r))
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %llu: zstd frame of tensor %s (chunk %d) does not "
                           "decode: %s", f->path, (unsigned long long)c->offset, t->name, j, ZSTD_getErrorName(r));
    if (r != c->nbytes)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %llu: zstd frame of tensor %s (chunk %d) decodes to %zu "
                           "bytes, the catalog says %llu", f->path, (unsigned long long)c->offset, t->name, j, r,
                           (unsigned long long)c->nbytes);
    return TITAN_OK;
}

/* Reads chunk j of t into buf (nbytes, decompressed) and checks its checksum. */
static titan_status read_chunk(titan_ckpt *ck, const rtensor *t, int j, void *buf) {
    const rchunk *c = &t->chunks[j];
    rfile *f = &ck->files[c->file];
    if (ck->detached)
        return titan_error(TITAN_ERR_IO, "%s: tensor %s: a catalog parsed from memory has no data files",
                           ck->mpath, t->name);
    if (f->fd < 0) {
        f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", f->path, strerror(errno));
    }
    titan_status st = c->comp == TITAN_CKPT_COMPRESS_ZSTD
                          ? read_zstd(ck, f, t, j, buf)
                          : titan_fs_pread_all(f->fd, buf, (size_t)c->nbytes, (off_t)c->offset, f->path);
    if (st == TITAN_ERR_FORMAT) { /* pread: the file shrank since open, so the data is cut short */
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", titan_error_message());
        st = titan_error(TITAN_ERR_CORRUPT, "%s in tensor %s (chunk %d)", msg, t->name, j);
    }
    if (st != TITAN_OK) return st;
    uint64_t got = c->xxh3 ? XXH3_64bits(buf, (size_t)c->nbytes) : XXH64(buf, (size_t)c->nbytes, 0);
    if (got != c->checksum)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %llu: checksum mismatch in tensor %s (chunk %d): "
                           "expected %s:%016llx, got %016llx", f->path, (unsigned long long)c->offset,
                           t->name, j, c->xxh3 ? "xxh3" : "xxh64", (unsigned long long)c->checksum,
                           (unsigned long long)got);
    return TITAN_OK;
}

static int same_box(const titan_box *a, const titan_box *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->offset[d] != b->offset[d] || a->size[d] != b->size[d]) return 0;
    return 1;
}

titan_status titan_ckpt_read(titan_ckpt *ck, const char *name, titan_dtype dtype,
                             const titan_box *want, void *dst) {
    const rtensor *t = find(ck, name);
    if (!t) return titan_error(TITAN_ERR_FORMAT, "%s: no tensor %s", ck->mpath, name);
    if (dtype != t->dtype && !(titan_dtype_is_float(dtype) && titan_dtype_is_float(t->dtype)))
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s is stored as %s and cannot be read as %s",
                           ck->mpath, name, titan_dtype_name(t->dtype), titan_dtype_name(dtype));
    titan_box whole = {.ndim = t->ndim};
    for (int d = 0; d < t->ndim; d++) whole.size[d] = t->shape[d];
    if (!want) want = &whole;
    char wb[160];
    fmt_box(wb, sizeof wb, want);
    if (want->ndim != t->ndim)
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: requested box has %d dims, tensor has %d",
                           ck->mpath, name, want->ndim, t->ndim);
    for (int d = 0; d < t->ndim; d++)
        if (want->offset[d] < 0 || want->size[d] < 0 || want->offset[d] + want->size[d] > t->shape[d])
            return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: requested box %s outside the shape",
                               ck->mpath, name, wb);
    /* Plan: the saved boxes do not overlap, so the intersections cover `want`
     * exactly when their sizes add up to it. */
    int64_t need = titan_box_numel(want), covered = 0;
    size_t scratch_need = 0, conv_need = 0, esz = titan_dtype_size(dtype);
    for (int j = 0; j < t->nchunks; j++) {
        titan_box r;
        if (!titan_box_intersect(want, &t->chunks[j].box, &r)) continue;
        covered += titan_box_numel(&r);
        if (same_box(want, &t->chunks[j].box) && dtype == t->dtype) continue; /* read in place */
        if (t->chunks[j].nbytes > scratch_need) scratch_need = t->chunks[j].nbytes;
        size_t cn = (size_t)titan_box_numel(&t->chunks[j].box) * esz;
        if (dtype != t->dtype && cn > conv_need) conv_need = cn;
    }
    if (covered != need)
        return titan_error(TITAN_ERR_FORMAT, "%s: tensor %s: box %s not covered by the saved chunks "
                           "(%lld of %lld elements)", ck->mpath, name, wb, (long long)covered, (long long)need);
    unsigned char *scratch = scratch_need ? malloc(scratch_need) : NULL;
    unsigned char *conv = conv_need ? malloc(conv_need) : NULL;
    titan_status st = TITAN_OK;
    if ((scratch_need && !scratch) || (conv_need && !conv))
        st = titan_error(TITAN_ERR_NOMEM, "%s: tensor %s: cannot allocate %zu bytes of read buffers",
                         ck->mpath, name, scratch_need + conv_need);
    for (int j = 0; j < t->nchunks && st == TITAN_OK; j++) {
        const rchunk *c = &t->chunks[j];
        titan_box r;
        if (!titan_box_intersect(want, &c->box, &r)) continue;
        if (same_box(want, &c->box) && dtype == t->dtype) {
            st = read_chunk(ck, t, j, dst);
            continue;
        }
        /* Whole chunk, so its checksum can be checked (chunks are bounded by the writer). */
        st = read_chunk(ck, t, j, scratch);
        if (st != TITAN_OK) break;
        const void *src = scratch;
        if (dtype != t->dtype) {
            titan_dtype_convert(conv, dtype, scratch, t->dtype, (size_t)titan_box_numel(&c->box)); /* pair checked above */
            src = conv;
        }
        titan_box_copy(dst, want, src, &c->box, &r, esz);
    }
    free(scratch);
    free(conv);
    return st;
}

titan_status titan_ckpt_verify(titan_ckpt *ck) {
    size_t cap = 0;
    void *buf = NULL;
    titan_status st = TITAN_OK;
    for (int i = 0; i < ck->ntensors && st == TITAN_OK; i++) {
        const rtensor *t = &ck->tensors[i];
        for (int j = 0; j < t->nchunks && st == TITAN_OK; j++) {
            if (t->chunks[j].nbytes > cap) {
                free(buf);
                cap = t->chunks[j].nbytes;
                if (!(buf = malloc(cap))) {
                    st = titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", ck->mpath, cap);
                    break;
                }
            }
            st = read_chunk(ck, t, j, buf);
        }
    }
    free(buf);
    return st;
}
