/* inspect.c - ls, info, verify, diff and eval of checkpoints: titan-ckpt's
 * own printing and evaluation (cmd/titan-ckpt/: linked into that tool alone). */
#include "inspect.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "interchange/hf_convert.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/mem.h"
#include "model/llama.h"

/* Rows of dim 0 read at once when comparing, so memory stays bounded. */
#define BLOCK_BYTES ((size_t)64 << 20)


static void human(char *b, size_t n, uint64_t v) {
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)v;
    int k = 0;
    while (x >= 1024 && k < 4) { x /= 1024; k++; }
    if (k == 0) snprintf(b, n, "%llu B", (unsigned long long)v);
    else snprintf(b, n, "%.1f %s", x, u[k]);
}

/* Sum of the sizes of the regular files in dir (a step dir holds no subdirs). */
static uint64_t dir_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    uint64_t sum = 0;
    struct dirent *de;
    char p[PATH_MAX];
    struct stat sb;
    while ((de = readdir(d)))
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p && lstat(p, &sb) == 0 &&
            S_ISREG(sb.st_mode))
            sum += (uint64_t)sb.st_size;
    closedir(d);
    return sum;
}

/* ---- ls ---- */

typedef struct {
    char name[64];
    int64_t step;
    int tmp;
} ls_entry;

static int cmp_ls(const void *a, const void *b) {
    const ls_entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return x->tmp - y->tmp;
}

static titan_status list_root(const char *root, ls_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d) return titan_error(TITAN_ERR_IO, "%s: open: %s", root, strerror(errno));
    ls_entry *e = NULL;
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char base[64];
        size_t l = strlen(de->d_name);
        int tmp = l > 4 && !strcmp(de->d_name + l - 4, ".tmp");
        if (l >= sizeof base) continue;
        memcpy(base, de->d_name, l + 1);
        if (tmp) base[l - 4] = 0;
        int64_t step;
        if (titan_ckpt_parse_step_name(base, &step)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ls_entry *ne = realloc(e, (size_t)cap * sizeof *ne);
            if (!ne) { free(e); closedir(d); return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", root); }
            e = ne;
        }
        _Static_assert(sizeof e[*n].name == sizeof base, "a name that fits base fits the entry");
        memcpy(e[*n].name, de->d_name, l + 1);
        e[*n].step = step;
        e[*n].tmp = tmp;
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(e, (size_t)*n, sizeof *e, cmp_ls);
    *out = e;
    return TITAN_OK;
}

titan_status titan_ckpt_ls(const char *arg, int json, FILE *out) {
    char root[PATH_MAX];
    TITAN_TRY(titan_ckpt_resolve_arg(arg, root, sizeof root));
    ls_entry *e;
    int n;
    TITAN_TRY(list_root(root, &e, &n));
    int64_t latest = -1;
    if (n) {
        char dir[PATH_MAX];
        titan_status st = titan_ckpt_resolve(root, dir, sizeof dir, &latest, 1); /* a bad `latest` is named */
        if (st != TITAN_OK) { titan_error_clear(); latest = -1; }
    }
    json_t *arr = json_array();
    if (!json) fprintf(out, "%-14s %10s %14s  %s\n", "STEP", "SIZE", "TOKENS", "STATE");
    for (int i = 0; i < n; i++) {
        char dir[PATH_MAX], sz[32], tok[32] = "-";
        if (titan_fs_join(dir, sizeof dir, root, e[i].name) != TITAN_OK) {
            titan_warn("%s", titan_error_message());
            titan_error_clear();
            continue;
        }
        uint64_t bytes = dir_bytes(dir);
        human(sz, sizeof sz, bytes);
        const char *state = "incomplete";
        int64_t tokens = -1;
        if (!e[i].tmp) {
            titan_ckpt *ck = NULL;
            if (titan_ckpt_open(&ck, dir) == TITAN_OK) {
                state = "complete";
                if (titan_ckpt_meta_get_i64(ck, "train.tokens_seen", &tokens) != TITAN_OK) tokens = -1;
                titan_ckpt_close(ck);
            } else {
                titan_status code = titan_error_code();
                state = code == TITAN_ERR_FORMAT || code == TITAN_ERR_CORRUPT ? "corrupt" : "unreadable";
                titan_warn("%s", titan_error_message());
            }
            titan_error_clear();
        }
        int is_latest = !e[i].tmp && e[i].step == latest;
        if (tokens >= 0) snprintf(tok, sizeof tok, "%" PRId64, tokens);
        if (json) {
            json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:o, s:s, s:b}", "name", e[i].name, "step",
                                                 (json_int_t)e[i].step, "bytes", (json_int_t)bytes,
                                                 "tokens_seen", tokens >= 0 ? json_integer(tokens) : json_null(),
                                                 "state", state, "latest", is_latest));
        } else {
            fprintf(out, "%-14s %10s %14s  %s%s\n", e[i].name, sz, tok, state, is_latest ? " (latest)" : "");
        }
    }
    if (json) {
        json_t *o = json_pack("{s:s, s:o}", "root", root, "checkpoints", arr);
        json_dumpf(o, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', out);
        json_decref(o);
    } else {
        json_decref(arr);
        if (!n) titan_warn("%s: no checkpoints", root);
    }
    free(e);
    return TITAN_OK;
}

/* ---- info ---- */

/* The free metadata as a JSON object, from the catalog open already parsed
 * (the writer stores only integers, numbers and strings). */
static json_t *load_meta(const titan_ckpt *ck) {
    json_t *m = json_object();
    const char *k;
    for (int i = 0; m && (k = titan_ckpt_meta_key(ck, i)); i++) {
        int64_t iv;
        double fv;
        const char *sv;
        json_t *v = titan_ckpt_meta_get_i64(ck, k, &iv) == TITAN_OK   ? json_integer(iv)
                    : titan_ckpt_meta_get_f64(ck, k, &fv) == TITAN_OK ? json_real(fv)
                    : titan_ckpt_meta_get_str(ck, k, &sv) == TITAN_OK ? json_string(sv)
                                                                      : json_null();
        json_object_set_new(m, k, v);
    }
    titan_error_clear();
    return m ? m : json_object();
}

static void shape_str(char *b, size_t n, const titan_ckpt_tensor *t) {
    int k = snprintf(b, n, "[");
    for (int d = 0; d < t->ndim && k > 0 && (size_t)k < n; d++)
        k += snprintf(b + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k > 0 && (size_t)k < n) snprintf(b + k, n - (size_t)k, "]");
}

static uint64_t tensor_bytes(const titan_ckpt_tensor *t) {
    uint64_t n = titan_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

/* Bytes the chunks of t take in the data files, and how many are zstd frames. */
static uint64_t tensor_stored(const titan_ckpt *ck, const titan_ckpt_tensor *t, int *nzstd) {
    uint64_t n = 0;
    *nzstd = 0;
    for (int j = 0; j < t->nchunks; j++) {
        titan_ckpt_chunk c;
        if (titan_ckpt_chunk_info(ck, t->name, j, &c) != TITAN_OK) continue;
        n += c.stored_nbytes;
        *nzstd += c.compression == TITAN_CKPT_COMPRESS_ZSTD;
    }
    return n;
}

static const char *compression_label(int nzstd, int nchunks) {
    return nzstd == 0 ? "none" : nzstd == nchunks ? "zstd" : "mixed";
}

static void print_meta_value(FILE *out, json_t *v) {
    if (json_is_string(v)) fprintf(out, "%s", json_string_value(v));
    else if (json_is_integer(v)) fprintf(out, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) fprintf(out, "%.9g", json_real_value(v));
    else fprintf(out, "?");
}

titan_status titan_ckpt_info(const char *arg, int json, FILE *out) {
    char path[PATH_MAX];
    TITAN_TRY(titan_ckpt_resolve_arg(arg, path, sizeof path));
    titan_ckpt *ck;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    titan_llama_config mc;
    int64_t dim;
    int have_model = titan_ckpt_model_config(ck, &mc) == TITAN_OK;
    if (!have_model && titan_ckpt_meta_get_i64(ck, "model.dim", &dim) == TITAN_OK)
        titan_warn("%s", titan_error_message()); /* a model's checkpoint that contradicts itself */
    titan_error_clear();
    json_t *meta = load_meta(ck);
    int nt = titan_ckpt_num_tensors(ck), nparam_t = 0, nopt_t = 0, nzstd_all = 0, nchunks_all = 0;
    uint64_t total = 0, nparams = 0, stored_total = 0;
    json_t *jt = json_array();
    for (int i = 0; i < nt; i++) {
        titan_ckpt_tensor t;
        titan_ckpt_tensor_info(ck, i, &t);
        uint64_t b = tensor_bytes(&t);
        int nz;
        uint64_t sb = tensor_stored(ck, &t, &nz);
        total += b;
        stored_total += sb;
        nzstd_all += nz;
        nchunks_all += t.nchunks;
        if (strchr(t.name, ':')) nopt_t++;
        else { nparam_t++; nparams += b / titan_dtype_size(t.dtype); }
        if (json) {
            json_t *sh = json_array();
            for (int d = 0; d < t.ndim; d++) json_array_append_new(sh, json_integer(t.shape[d]));
            json_array_append_new(jt, json_pack("{s:s, s:s, s:o, s:i, s:I, s:I, s:s}", "name", t.name, "dtype",
                                                titan_dtype_name(t.dtype), "shape", sh, "chunks", t.nchunks,
                                                "bytes", (json_int_t)b, "stored_bytes", (json_int_t)sb,
                                                "compression", compression_label(nz, t.nchunks)));
        }
    }
    json_t *tok = json_object_get(meta, "train.tokens_seen"), *layout = json_object_get(meta, "layout");
    if (json) {
        json_t *o = json_pack("{s:s, s:I, s:O, s:O, s:I, s:I, s:i, s:i}", "path", titan_ckpt_path(ck), "step",
                              (json_int_t)titan_ckpt_step(ck), "tokens_seen", tok ? tok : json_null(),
                              "layout", layout ? layout : json_null(), "total_bytes", (json_int_t)total,
                              "num_params", (json_int_t)nparams, "num_param_tensors", nparam_t,
                              "num_optimizer_tensors", nopt_t);
        json_object_set_new(o, "stored_bytes", json_integer((json_int_t)stored_total));
        json_object_set_new(o, "compression", json_string(compression_label(nzstd_all, nchunks_all)));
        if (have_model)
            json_object_set_new(o, "model", json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "dim", mc.dim,
                                                      "n_layers", mc.n_layers, "n_heads", mc.n_heads,
                                                      "n_kv_heads", mc.n_kv_heads, "ffn_dim",
                                                      titan_llama_hidden_dim(&mc), "vocab_size", mc.vocab_size,
                                                      "tie_embeddings", mc.tie_embeddings));
        json_object_set(o, "meta", meta);
        json_object_set(o, "tensors", jt);
        json_dumpf(o, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        fputc('\n', out);
        json_decref(o);
    } else {
        char hb[32];
        human(hb, sizeof hb, total);
        fprintf(out, "checkpoint   %s\nstep         %" PRId64 "\ntokens seen  ", titan_ckpt_path(ck), titan_ckpt_step(ck));
        if (tok) print_meta_value(out, tok); else fprintf(out, "-");
        fprintf(out, "\nlayout       ");
        if (layout) print_meta_value(out, layout); else fprintf(out, "-");
        fprintf(out, "\n");
        if (have_model)
            fprintf(out, "model        llama3: dim %d, %d layers, %d heads, %d kv heads, ffn %d, vocab %d%s\n"
                         "             rope theta %g, scaling %g, norm eps %g\n",
                    mc.dim, mc.n_layers, mc.n_heads, mc.n_kv_heads, titan_llama_hidden_dim(&mc), mc.vocab_size,
                    mc.tie_embeddings ? ", tied embeddings" : "", (double)mc.rope_theta,
                    (double)mc.rope_scaling_factor, (double)mc.norm_eps);
        fprintf(out, "parameters   %llu in %d tensors; %d optimizer-state tensors\n", (unsigned long long)nparams,
                nparam_t, nopt_t);
        fprintf(out, "size         %llu bytes (%s)\n", (unsigned long long)total, hb);
        human(hb, sizeof hb, stored_total);
        fprintf(out, "on disk      %llu bytes (%s) in chunks, compression %s, ratio %.3f\nmeta\n",
                (unsigned long long)stored_total, hb, compression_label(nzstd_all, nchunks_all),
                stored_total ? (double)total / (double)stored_total : 1.0);
        const char *k;
        json_t *v;
        json_object_foreach(meta, k, v) {
            fprintf(out, "  %-28s ", k);
            print_meta_value(out, v);
            fputc('\n', out);
        }
        fprintf(out, "tensors\n  %-44s %-5s %-16s %6s %12s %12s\n", "NAME", "DTYPE", "SHAPE", "CHUNKS", "BYTES",
                "ON DISK");
        for (int i = 0; i < nt; i++) {
            titan_ckpt_tensor t;
            char sh[96];
            int nz;
            titan_ckpt_tensor_info(ck, i, &t);
            shape_str(sh, sizeof sh, &t);
            fprintf(out, "  %-44s %-5s %-16s %6d %12llu %12llu\n", t.name, titan_dtype_name(t.dtype), sh, t.nchunks,
                    (unsigned long long)tensor_bytes(&t), (unsigned long long)tensor_stored(ck, &t, &nz));
        }
    }
    json_decref(jt);
    json_decref(meta);
    titan_ckpt_close(ck);
    return TITAN_OK;
}

/* ---- verify ---- */

titan_status titan_ckpt_verify_all(const char *arg, FILE *out, int *nbad) {
    *nbad = 0;
    char path[PATH_MAX];
    TITAN_TRY(titan_ckpt_resolve_arg(arg, path, sizeof path));
    titan_ckpt *ck;
    TITAN_TRY(titan_ckpt_open(&ck, path)); /* validates the catalog: boxes in shape, no overlaps */
    /* A model's checkpoint: its metadata and its catalog agree. */
    titan_llama_config mc;
    if (titan_ckpt_meta_has(ck, "model.dim")) { /* of any type: a string there is an error, not "no model" */
        titan_status ms = titan_ckpt_model_config(ck, &mc);
        if (ms != TITAN_OK) {
            titan_ckpt_close(ck);
            return ms;
        }
    }
    titan_error_clear();
    int nt = titan_ckpt_num_tensors(ck), nchunks = 0, ncorrupt = 0;
    uint64_t bytes = 0, stored = 0;
    void *buf = NULL;
    size_t cap = 0;
    titan_status st = TITAN_OK;
    for (int i = 0; i < nt && st == TITAN_OK; i++) {
        titan_ckpt_tensor t;
        titan_ckpt_tensor_info(ck, i, &t);
        int64_t covered = 0, numel = 1;
        for (int d = 0; d < t.ndim; d++) numel *= t.shape[d];
        for (int j = 0; j < t.nchunks && st == TITAN_OK; j++) {
            titan_ckpt_chunk c;
            if ((st = titan_ckpt_chunk_info(ck, t.name, j, &c)) != TITAN_OK) break;
            covered += titan_box_numel(&c.box);
            if (c.nbytes > cap) {
                free(buf);
                cap = c.nbytes;
                if (!(buf = malloc(cap))) {
                    st = titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, cap);
                    break;
                }
            }
            /* The box of one chunk meets only that chunk (no overlaps): reads and checks it alone. */
            titan_status rs = titan_ckpt_read(ck, t.name, t.dtype, &c.box, buf);
            nchunks++;
            bytes += c.nbytes;
            stored += c.stored_nbytes;
            if (rs == TITAN_ERR_FORMAT || rs == TITAN_ERR_CORRUPT) {
                titan_warn("%s", titan_error_message());
                titan_error_clear();
                (*nbad)++;
                ncorrupt += rs == TITAN_ERR_CORRUPT;
            } else if (rs != TITAN_OK) {
                st = rs;
            }
        }
        if (st == TITAN_OK && covered != numel) {
            titan_warn("%s/metadata.json: tensor %s: chunks cover %lld of %lld elements", titan_ckpt_path(ck),
                       t.name, (long long)covered, (long long)numel);
            (*nbad)++;
        }
    }
    free(buf);
    /* A catalog problem (chunks not covering a tensor) outranks damaged data:
     * the exit status says 4 when the description is wrong, 7 when only bytes are. */
    if (st == TITAN_OK && *nbad)
        st = titan_error(*nbad > ncorrupt ? TITAN_ERR_FORMAT : TITAN_ERR_CORRUPT,
                         "%s: %d problem%s in %d chunks of %d tensors (%d corrupt chunk%s)", titan_ckpt_path(ck),
                         *nbad, *nbad == 1 ? "" : "s", nchunks, nt, ncorrupt, ncorrupt == 1 ? "" : "s");
    if (st == TITAN_OK)
        fprintf(out, "%s: ok: %d tensors, %d chunks, %llu bytes (%llu on disk), every checksum matches\n",
                titan_ckpt_path(ck), nt, nchunks, (unsigned long long)bytes, (unsigned long long)stored);
    titan_ckpt_close(ck);
    return st;
}

/* ---- diff ---- */

static double elem(const void *p, size_t i, titan_dtype t) {
    switch (t) {
    case TITAN_DTYPE_F32: return ((const float *)p)[i];
    case TITAN_DTYPE_BF16: return titan_bf16_to_f32(((const uint16_t *)p)[i]);
    case TITAN_DTYPE_F16: return titan_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const uint32_t *)p)[i];
    }
}

typedef struct {
    double max_abs, max_rel;
    int64_t ndiff, nout; /* elements that differ; of those, outside the tolerance */
    int identical;
} cmp_result;

static titan_status compare_tensor(titan_ckpt *a, titan_ckpt *b, const titan_ckpt_tensor *ta,
                                   const titan_ckpt_tensor *tb, const titan_ckpt_diff_opts *o, cmp_result *r) {
    memset(r, 0, sizeof *r);
    r->identical = ta->dtype == tb->dtype;
    size_t ea = titan_dtype_size(ta->dtype), eb = titan_dtype_size(tb->dtype);
    int64_t row = 1;
    for (int d = 1; d < ta->ndim; d++) row *= ta->shape[d];
    size_t esz = ea > eb ? ea : eb;
    int64_t rows = (int64_t)(BLOCK_BYTES / esz) / row;
    if (rows < 1) rows = 1;
    if (rows > ta->shape[0]) rows = ta->shape[0];
    void *pa = malloc((size_t)(rows * row) * ea), *pb = malloc((size_t)(rows * row) * eb);
    titan_status st = pa && pb ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "tensor %s: out of memory", ta->name);
    for (int64_t r0 = 0; r0 < ta->shape[0] && st == TITAN_OK; r0 += rows) {
        titan_box box = {.ndim = ta->ndim};
        box.offset[0] = r0;
        box.size[0] = r0 + rows <= ta->shape[0] ? rows : ta->shape[0] - r0;
        for (int d = 1; d < ta->ndim; d++) box.size[d] = ta->shape[d];
        if ((st = titan_ckpt_read(a, ta->name, ta->dtype, &box, pa)) != TITAN_OK) break;
        if ((st = titan_ckpt_read(b, tb->name, tb->dtype, &box, pb)) != TITAN_OK) break;
        size_t n = (size_t)titan_box_numel(&box);
        if (r->identical && !memcmp(pa, pb, n * ea)) continue;
        r->identical = 0;
        for (size_t i = 0; i < n; i++) {
            double x = elem(pa, i, ta->dtype), y = elem(pb, i, tb->dtype);
            if (x == y || (isnan(x) && isnan(y))) continue;
            r->ndiff++;
            double ad = fabs(x - y), m = fmax(fabs(x), fabs(y));
            if (isnan(ad)) ad = INFINITY;
            double rel = m > 0 && isfinite(m) ? ad / m : INFINITY;
            if (ad > r->max_abs) r->max_abs = ad;
            if (rel > r->max_rel) r->max_rel = rel;
            /* written so that NaN against a number is outside, as in allclose */
            if (!(ad <= o->atol + o->rtol * fabs(y))) r->nout++;
        }
    }
    free(pa);
    free(pb);
    return st;
}

static int same_shape(const titan_ckpt_tensor *a, const titan_ckpt_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static titan_status diff_open(titan_ckpt *c[2], const char *a, const char *b) {
    char p[PATH_MAX];
    c[0] = c[1] = NULL;
    TITAN_TRY(titan_ckpt_resolve_arg(a, p, sizeof p));
    TITAN_TRY(titan_ckpt_open(&c[0], p));
    titan_status st = titan_ckpt_resolve_arg(b, p, sizeof p);
    if (st == TITAN_OK) st = titan_ckpt_open(&c[1], p);
    if (st != TITAN_OK) titan_ckpt_close(c[0]);
    return st;
}

static void diff_line(FILE *out, json_t *arr, const char *name, const char *status, const cmp_result *r,
                      const char *note, int tol) {
    if (arr) {
        json_t *o = json_pack("{s:s, s:s}", "name", name, "status", status);
        if (r) {
            json_object_set_new(o, "max_abs", isfinite(r->max_abs) ? json_real(r->max_abs) : json_string("inf"));
            json_object_set_new(o, "max_rel", isfinite(r->max_rel) ? json_real(r->max_rel) : json_string("inf"));
            json_object_set_new(o, "ndiff", json_integer(r->ndiff));
            if (tol) json_object_set_new(o, "noutside", json_integer(r->nout));
        }
        if (note) json_object_set_new(o, "note", json_string(note));
        json_array_append_new(arr, o);
        return;
    }
    if (r && strcmp(status, "identical") && tol)
        fprintf(out, "%-10s %-48s max_abs %.6g  max_rel %.6g  (%lld elements differ, %lld outside the tolerance)\n",
                status, name, r->max_abs, r->max_rel, (long long)r->ndiff, (long long)r->nout);
    else if (r && strcmp(status, "identical"))
        fprintf(out, "%-10s %-48s max_abs %.6g  max_rel %.6g  (%lld elements differ)\n", status, name,
                r->max_abs, r->max_rel, (long long)r->ndiff);
    else
        fprintf(out, "%-10s %-48s%s%s\n", status, name, note ? " " : "", note ? note : "");
}

titan_status titan_ckpt_diff(const char *a, const char *b, const titan_ckpt_diff_opts *o, FILE *out, int *differ) {
    *differ = 0;
    titan_ckpt *c[2];
    TITAN_TRY(diff_open(c, a, b));
    json_t *arr = o->json ? json_array() : NULL;
    int nsame = 0, nclose = 0, ndiff = 0, nonly[2] = {0, 0}, tol = o->tolerance;
    int64_t nout = 0, nelem_diff = 0;
    titan_status st = TITAN_OK;
    for (int side = 0; side < 2 && st == TITAN_OK; side++) {
        titan_ckpt *x = c[side], *y = c[1 - side];
        for (int i = 0; i < titan_ckpt_num_tensors(x) && st == TITAN_OK; i++) {
            titan_ckpt_tensor ta, tb;
            titan_ckpt_tensor_info(x, i, &ta);
            if (o->params_only && strchr(ta.name, ':')) continue;
            if (!titan_ckpt_has_tensor(y, ta.name)) {
                nonly[side]++;
                diff_line(out, arr, ta.name, side ? "only_b" : "only_a", NULL, side ? "only in B" : "only in A", tol);
                continue;
            }
            if (side == 1) continue; /* common tensors are compared once */
            titan_ckpt_tensor_find(y, ta.name, &tb);
            char note[160];
            if (!same_shape(&ta, &tb) || titan_dtype_is_float(ta.dtype) != titan_dtype_is_float(tb.dtype)) {
                char sa[64], sb[64];
                shape_str(sa, sizeof sa, &ta);
                shape_str(sb, sizeof sb, &tb);
                snprintf(note, sizeof note, "%s %s vs %s %s", titan_dtype_name(ta.dtype), sa,
                         titan_dtype_name(tb.dtype), sb);
                ndiff++;
                diff_line(out, arr, ta.name, "mismatch", NULL, note, tol);
                continue;
            }
            cmp_result r;
            if ((st = compare_tensor(x, y, &ta, &tb, o, &r)) != TITAN_OK) break;
            nout += r.nout;
            nelem_diff += r.ndiff;
            if (r.identical) {
                nsame++;
                if (arr || o->verbose) diff_line(out, arr, ta.name, "identical", &r, NULL, tol);
            } else if (tol && r.nout == 0) {
                /* every difference within the tolerance (another dtype's values too) */
                nclose++;
                if (arr || o->verbose)
                    diff_line(out, arr, ta.name, "close", &r, r.ndiff ? NULL : "same values, other dtype", tol);
            } else {
                ndiff++;
                diff_line(out, arr, ta.name, r.ndiff ? "differ" : "dtype", &r,
                          r.ndiff ? NULL : "same values, other dtype", tol);
            }
        }
    }
    if (st == TITAN_OK) {
        *differ = ndiff || nonly[0] || nonly[1];
        if (arr) {
            json_t *j = json_pack("{s:b, s:i, s:i, s:i, s:i, s:o}", "identical", !*differ, "num_identical", nsame,
                                  "num_differ", ndiff, "num_only_a", nonly[0], "num_only_b", nonly[1], "tensors", arr);
            arr = NULL;
            if (tol) {
                json_object_set_new(j, "atol", json_real(o->atol));
                json_object_set_new(j, "rtol", json_real(o->rtol));
                json_object_set_new(j, "num_close", json_integer(nclose));
                json_object_set_new(j, "num_elements_outside", json_integer(nout));
            }
            json_dumpf(j, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            fputc('\n', out);
            json_decref(j);
        } else if (tol) {
            fprintf(out, "%d identical, %d close, %d differ, %d only in A, %d only in B; %lld of %lld differing "
                         "elements outside atol %g rtol %g\n", nsame, nclose, ndiff, nonly[0], nonly[1],
                    (long long)nout, (long long)nelem_diff, o->atol, o->rtol);
        } else {
            fprintf(out, "%d identical, %d differ, %d only in A, %d only in B\n", nsame, ndiff, nonly[0], nonly[1]);
        }
    }
    if (arr) json_decref(arr);
    titan_ckpt_close(c[0]);
    titan_ckpt_close(c[1]);
    return st;
}

/* ---- eval ---- */

titan_status titan_ckpt_eval(const char *arg, const uint32_t *tokens, int T, FILE *out) {
    char path[PATH_MAX];
    TITAN_TRY(titan_ckpt_resolve_arg(arg, path, sizeof path));
    titan_ckpt *ck;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    titan_llama_config mc;
    titan_status st = titan_ckpt_model_config(ck, &mc);
    for (int t = 0; t < T && st == TITAN_OK; t++)
        if (tokens[t] >= (uint32_t)mc.vocab_size)
            st = titan_error(TITAN_ERR_USAGE, "--tokens: token %u at position %d is not below the vocabulary "
                             "size %d", tokens[t], t, mc.vocab_size);
    size_t np = titan_llama_num_params(&mc);
    float *host = st == TITAN_OK ? titan_alloc(np * sizeof(float), "parameters") : NULL;
    if (st == TITAN_OK && !host) st = TITAN_ERR_NOMEM;
    if (st == TITAN_OK) st = titan_ckpt_load_params(ck, &mc, host);
    titan_ckpt_close(ck);
    const titan_backend *be = titan_backend_cpu();
    titan_llama *m = NULL;
    if (st == TITAN_OK) st = titan_llama_create(&m, &mc, be, 1, T, TITAN_AC_NONE, TITAN_DTYPE_F32);
    float *logits = NULL;
    size_t nl = (size_t)T * (size_t)mc.vocab_size;
    if (st == TITAN_OK) {
        be->to_device(titan_llama_params_data(m), host, np * sizeof(float));
        st = titan_llama_forward(m, tokens, NULL, NULL);
    }
    if (st == TITAN_OK && !(logits = titan_alloc(nl * sizeof(float), "logits"))) st = TITAN_ERR_NOMEM;
    if (st == TITAN_OK) st = titan_llama_logits_host(m, logits);
    if (st == TITAN_OK) {
        for (int t = 0; t < T; t++)
            for (int v = 0; v < mc.vocab_size; v++)
                fprintf(out, "%.9g%c", (double)logits[(size_t)t * mc.vocab_size + v], v + 1 < mc.vocab_size ? ' ' : '\n');
    }
    titan_free(logits);
    if (m) titan_llama_free(m);
    titan_free(host);
    return st;
}
