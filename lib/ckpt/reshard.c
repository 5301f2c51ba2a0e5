/* reshard.c - rewriting a checkpoint for another parallel layout, one piece at a time. */
#include "ckpt/reshard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "core/log.h"

int titan_ckpt_num_layers(const titan_ckpt *ck) {
    int64_t v;
    int n = 0;
    if (titan_ckpt_meta_get_i64(ck, "model.n_layers", &v) == TITAN_OK && v > 0 && v < 1000000) n = (int)v;
    titan_error_clear();
    for (int i = 0; i < titan_ckpt_num_tensors(ck); i++) {
        titan_ckpt_tensor t;
        if (titan_ckpt_tensor_info(ck, i, &t) != TITAN_OK) continue;
        int l;
        if (sscanf(t.name, "layers.%d.", &l) == 1 && l >= n && l < 1000000) n = l + 1;
    }
    return n;
}

/* Where OUT puts the step: the root and the step dir. */
static titan_status resolve_out(const char *out, int64_t step, int force, char *root, size_t rootsz,
                                char *dir, size_t dirsz) {
    char p[PATH_MAX], name[64];
    TITAN_TRY(titan_fs_join(p, sizeof p, out, "config.toml"));
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    int64_t n;
    if (titan_fs_is_dir(out) && titan_fs_exists(p)) { /* a run directory */
        TITAN_TRY(titan_fs_join(root, rootsz, out, "checkpoint"));
    } else if (*base && titan_ckpt_parse_step_name(base, &n) == 0) {
        if (n != step) {
            titan_error(TITAN_ERR_USAGE, "%s: names step %lld, but the checkpoint is step %lld", out,
                        (long long)n, (long long)step);
            titan_error_hint("give the checkpoint root instead; the step keeps its number");
            return TITAN_ERR_USAGE;
        }
        size_t k = (size_t)(base - out);
        while (k > 1 && out[k - 1] == '/') k--;
        if (k == 0) snprintf(root, rootsz, ".");
        else if (snprintf(root, rootsz, "%.*s", (int)k, out) >= (int)rootsz)
            return titan_error(TITAN_ERR_USAGE, "%s: path too long", out);
    } else {
        TITAN_TRY(titan_fs_join(p, sizeof p, out, "metadata.json"));
        if (titan_fs_exists(p)) {
            titan_error(TITAN_ERR_USAGE, "%s: a checkpoint step not named step-N", out);
            titan_error_hint("give its parent directory or a new checkpoint root");
            return TITAN_ERR_USAGE;
        }
        if (snprintf(root, rootsz, "%s", out) >= (int)rootsz)
            return titan_error(TITAN_ERR_USAGE, "%s: path too long", out);
    }
    titan_ckpt_step_name(name, sizeof name, step);
    TITAN_TRY(titan_fs_join(dir, dirsz, root, name));
    if (titan_fs_exists(dir) && !force) {
        titan_error(TITAN_ERR_USAGE, "%s: exists", dir);
        titan_error_hint("--force replaces it");
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

/* Copies every free metadata key in its order, "layout" replaced (or added
 * last). Values are integers, numbers or strings (titan-checkpoint(5));
 * anything else is a corrupt catalog. */
static titan_status copy_meta(const titan_ckpt *ck, titan_ckpt_writer *w, const char *layout) {
    const char *key;
    int had = 0;
    for (int i = 0; (key = titan_ckpt_meta_key(ck, i)); i++) {
        if (!strcmp(key, "layout")) {
            TITAN_TRY(titan_ckpt_meta_str(w, key, layout));
            had = 1;
            continue;
        }
        int64_t iv;
        double fv;
        const char *sv;
        if (titan_ckpt_meta_get_i64(ck, key, &iv) == TITAN_OK) {
            TITAN_TRY(titan_ckpt_meta_i64(w, key, iv));
        } else if (titan_ckpt_meta_get_f64(ck, key, &fv) == TITAN_OK) {
            TITAN_TRY(titan_ckpt_meta_f64(w, key, fv));
        } else if (titan_ckpt_meta_get_str(ck, key, &sv) == TITAN_OK) {
            TITAN_TRY(titan_ckpt_meta_str(w, key, sv));
        } else {
            return titan_error(TITAN_ERR_FORMAT, "%s/metadata.json: meta key \"%s\": not a string or number",
                               titan_ckpt_path(ck), key);
        }
    }
    titan_error_clear();
    return had ? TITAN_OK : titan_ckpt_meta_str(w, "layout", layout);
}

/* A growable buffer. */
typedef struct {
    unsigned char *p;
    size_t cap;
} buffer;

static titan_status reserve(buffer *b, size_t n, const char *tensor) {
    if (n <= b->cap) return TITAN_OK;
    free(b->p);
    b->cap = 0;
    if (!(b->p = malloc(n))) return titan_error(TITAN_ERR_NOMEM, "tensor %s: cannot allocate %zu bytes", tensor, n);
    b->cap = n;
    return TITAN_OK;
}

typedef struct {
    titan_ckpt *ck;
    titan_ckpt_writer *w;
    const titan_reshard_opts *o;
    titan_reshard_stats *stats;
    buffer piece;  /* the piece being written */
    buffer cached; /* the last input chunk read whole (cache_tensor, cache_chunk) */
    int cache_tensor, cache_chunk;
    titan_ckpt_chunk *chunks; /* the current tensor's input chunks */
    int nchunks, chunks_cap;
    uint64_t total; /* tensor bytes to write; stats->bytes counts those done */
    char *wrote; /* per rank: has a data file */
} job;

static titan_dtype out_dtype(const titan_reshard_opts *o, titan_dtype src) {
    return o->dtype >= 0 && titan_dtype_is_float(src) ? (titan_dtype)o->dtype : src;
}

/* Fills j->piece with region `piece` of tensor ti. Input chunks are read
 * whole (their checksums need it), so the last one is kept: the boxes of
 * neighbouring ranks mostly fall in the same input chunk, and without the
 * cache a 16-rank reshard of a single-file checkpoint read it 16 times. */
static titan_status fill_piece(job *j, int ti, const titan_ckpt_tensor *t, titan_dtype dt, const titan_box *piece) {
    size_t esz = titan_dtype_size(dt);
    int64_t covered = 0;
    for (int c = 0; c < j->nchunks; c++) {
        const titan_box *cb = &j->chunks[c].box;
        titan_box r;
        if (!titan_box_intersect(piece, cb, &r)) continue;
        if (titan_box_numel(&r) == titan_box_numel(piece) && titan_box_numel(cb) == titan_box_numel(piece))
            return titan_ckpt_read(j->ck, t->name, dt, piece, j->piece.p); /* the chunk itself */
        if (j->cache_tensor != ti || j->cache_chunk != c) {
            j->cache_tensor = -1;
            TITAN_TRY(reserve(&j->cached, (size_t)titan_box_numel(cb) * esz, t->name));
            TITAN_TRY(titan_ckpt_read(j->ck, t->name, dt, cb, j->cached.p));
            j->cache_tensor = ti;
            j->cache_chunk = c;
        }
        titan_box_copy(j->piece.p, piece, j->cached.p, cb, &r, esz);
        covered += titan_box_numel(&r);
    }
    if (covered != titan_box_numel(piece)) /* open validated the chunks; a gap is still possible */
        return titan_ckpt_read(j->ck, t->name, dt, piece, j->piece.p); /* names the gap */
    return TITAN_OK;
}

/* Reads box of t from the input and adds it for rank, in pieces of whole
 * dim-0 rows of at most TITAN_CKPT_CHUNK_MAX bytes (the writer's own chunk
 * size, so the chunks come out as a direct save would make them). */
static titan_status copy_box(job *j, int ti, const titan_ckpt_tensor *t, int rank, const titan_box *box) {
    titan_dtype dt = out_dtype(j->o, t->dtype);
    size_t row = titan_dtype_size(dt);
    for (int d = 1; d < t->ndim; d++) row *= (size_t)box->size[d];
    int64_t rows_per = (int64_t)(TITAN_CKPT_CHUNK_MAX / row);
    if (rows_per < 1) rows_per = 1;
    if (rows_per > box->size[0]) rows_per = box->size[0];
    TITAN_TRY(reserve(&j->piece, (size_t)rows_per * row, t->name));
    for (int64_t r0 = 0; r0 < box->size[0]; r0 += rows_per) {
        titan_box piece = *box;
        piece.offset[0] = box->offset[0] + r0;
        piece.size[0] = box->size[0] - r0 < rows_per ? box->size[0] - r0 : rows_per;
        TITAN_TRY(fill_piece(j, ti, t, dt, &piece));
        TITAN_TRY(titan_ckpt_add_rank(j->w, rank, t->name, dt, t->ndim, t->shape, &piece, j->piece.p));
        j->stats->bytes += (uint64_t)piece.size[0] * row;
        if (j->o->progress) j->o->progress(j->o->ctx, j->stats->bytes, j->total, t->name);
    }
    size_t held = j->piece.cap + j->cached.cap;
    if (held > j->stats->buf_bytes) j->stats->buf_bytes = held;
    if (!j->wrote[rank]) {
        j->wrote[rank] = 1;
        j->stats->nfiles++;
    }
    return TITAN_OK;
}

/* The input chunks of tensor t, into j->chunks. */
static titan_status load_chunks(job *j, const titan_ckpt_tensor *t) {
    if (t->nchunks > j->chunks_cap) {
        titan_ckpt_chunk *nc = realloc(j->chunks, (size_t)t->nchunks * sizeof *nc);
        if (!nc) return titan_error(TITAN_ERR_NOMEM, "tensor %s: out of memory", t->name);
        j->chunks = nc;
        j->chunks_cap = t->nchunks;
    }
    for (int c = 0; c < t->nchunks; c++) TITAN_TRY(titan_ckpt_chunk_info(j->ck, t->name, c, &j->chunks[c]));
    j->nchunks = t->nchunks;
    return TITAN_OK;
}

/* Tensor by tensor (catalog order kept), each rank's saved box. */
static titan_status copy_tensors(job *j, int n_layers) {
    const titan_layout *l = &j->o->layout;
    int world = titan_layout_world(l), nt = titan_ckpt_num_tensors(j->ck);
    for (int i = 0; i < nt; i++) {
        titan_ckpt_tensor t;
        TITAN_TRY(titan_ckpt_tensor_info(j->ck, i, &t));
        int64_t numel = 1;
        for (int d = 0; d < t.ndim; d++) numel *= t.shape[d];
        j->total += (uint64_t)numel * titan_dtype_size(out_dtype(j->o, t.dtype));
    }
    for (int i = 0; i < nt; i++) {
        titan_ckpt_tensor t;
        TITAN_TRY(titan_ckpt_tensor_info(j->ck, i, &t));
        TITAN_TRY(load_chunks(j, &t));
        titan_layout_place place;
        j->o->place(t.name, n_layers, &place);
        for (int r = 0; r < world; r++) {
            titan_box box;
            int writes;
            if (!titan_layout_box(l, n_layers, place, t.ndim, t.shape, r, &box, &writes) || !writes) continue;
            titan_status st = copy_box(j, i, &t, r, &box);
            if (st != TITAN_OK) {
                titan_error_context("reshard");
                return st;
            }
        }
        j->stats->ntensors++;
    }
    return TITAN_OK;
}

/* The output's compression: as asked, or zstd when the input has any zstd chunk. */
static titan_status pick_compression(const titan_ckpt *ck, int asked, titan_ckpt_compression *out) {
    *out = TITAN_CKPT_COMPRESS_NONE;
    if (asked >= 0) {
        *out = (titan_ckpt_compression)asked;
        return TITAN_OK;
    }
    for (int i = 0; i < titan_ckpt_num_tensors(ck); i++) {
        titan_ckpt_tensor t;
        TITAN_TRY(titan_ckpt_tensor_info(ck, i, &t));
        for (int c = 0; c < t.nchunks; c++) {
            titan_ckpt_chunk ch;
            TITAN_TRY(titan_ckpt_chunk_info(ck, t.name, c, &ch));
            if (ch.compression != TITAN_CKPT_COMPRESS_NONE) {
                *out = ch.compression;
                return TITAN_OK;
            }
        }
    }
    return TITAN_OK;
}

/* A layout a trainer could not run (tp not dividing the heads) still stores
 * fine; say so once. */
static void warn_heads(const titan_ckpt *ck, const titan_layout *l) {
    int64_t h, kv;
    if (l->tp > 1 && titan_ckpt_meta_get_i64(ck, "model.n_heads", &h) == TITAN_OK &&
        titan_ckpt_meta_get_i64(ck, "model.n_kv_heads", &kv) == TITAN_OK && (h % l->tp || kv % l->tp))
        titan_warn("tp=%d does not divide the model's %lld heads / %lld kv heads: the checkpoint is "
                   "valid, but a tensor-parallel trainer needs it to", l->tp, (long long)h, (long long)kv);
    titan_error_clear();
}

titan_status titan_ckpt_reshard(const char *src, const char *out, const titan_reshard_opts *o,
                                titan_reshard_stats *stats) {
    memset(stats, 0, sizeof *stats);
    if (!o->place) return titan_error(TITAN_ERR_USAGE, "reshard: no tensor placement given (titan_reshard_opts.place)");
    if (o->dtype >= 0 && !titan_dtype_is_float((titan_dtype)o->dtype))
        return titan_error(TITAN_ERR_USAGE, "reshard: output dtype must be f32, bf16 or f16");
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, src));
    job j = {.ck = ck, .o = o, .stats = stats, .cache_tensor = -1};
    stats->step = titan_ckpt_step(ck);
    snprintf(stats->src_dir, sizeof stats->src_dir, "%s", titan_ckpt_path(ck));
    const char *from;
    if (titan_ckpt_meta_get_str(ck, "layout", &from) != TITAN_OK) from = "-";
    titan_error_clear();
    snprintf(stats->from_layout, sizeof stats->from_layout, "%s", from);

    char root[PATH_MAX], layout[TITAN_LAYOUT_STR_MAX];
    int n_layers = titan_ckpt_num_layers(ck);
    titan_layout_format(&o->layout, layout, sizeof layout);
    titan_status st = titan_layout_check(&o->layout, n_layers);
    if (st == TITAN_OK)
        st = resolve_out(out, stats->step, o->force, root, sizeof root, stats->out_dir, sizeof stats->out_dir);
    if (st == TITAN_OK && !(j.wrote = calloc((size_t)titan_layout_world(&o->layout), 1)))
        st = titan_error(TITAN_ERR_NOMEM, "reshard: out of memory");
    if (st == TITAN_OK) {
        warn_heads(ck, &o->layout);
        st = titan_ckpt_begin(&j.w, root, stats->step);
    }
    titan_ckpt_compression comp = TITAN_CKPT_COMPRESS_NONE;
    if (st == TITAN_OK) st = pick_compression(ck, o->compression, &comp);
    if (st == TITAN_OK) st = titan_ckpt_set_compression(j.w, comp, 0);
    if (st == TITAN_OK) st = copy_meta(ck, j.w, layout);
    if (st == TITAN_OK) st = titan_ckpt_copy_files(ck, j.w); /* the tokenizer travels along */
    if (st == TITAN_OK) st = copy_tensors(&j, n_layers);
    free(j.piece.p);
    free(j.cached.p);
    free(j.chunks);
    free(j.wrote);
    if (st == TITAN_OK) st = titan_ckpt_commit(j.w, 0); /* keep every step OUT had */
    else titan_ckpt_abort(j.w);
    titan_ckpt_close(ck);
    return st;
}
