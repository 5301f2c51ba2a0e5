/* safetensors.c - the safetensors reader (validating) and writer. */
#include "interchange/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fsutil.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code assumes a little-endian host"
#endif

struct titan_st_file {
    char path[PATH_MAX];
    int fd;
    uint64_t data_start, data_size;
    json_t *root;
    json_t *meta;
    titan_st_tensor *t;
    int n;
};

const char *titan_st_dtype_name(titan_dtype t) {
    switch (t) {
    case TITAN_DTYPE_F32: return "F32";
    case TITAN_DTYPE_BF16: return "BF16";
    case TITAN_DTYPE_F16: return "F16";
    default: return NULL;
    }
}

static int parse_dtype(const char *s, titan_dtype *out) {
    if (!strcmp(s, "F32")) *out = TITAN_DTYPE_F32;
    else if (!strcmp(s, "BF16")) *out = TITAN_DTYPE_BF16;
    else if (!strcmp(s, "F16")) *out = TITAN_DTYPE_F16;
    else return -1;
    return 0;
}

static titan_status bad(const titan_st_file *f, const char *name, const char *fmt, const char *a) {
    char what[256];
    snprintf(what, sizeof what, fmt, a);
    if (name) return titan_error(TITAN_ERR_FORMAT, "%s: header: tensor %s: %s", f->path, name, what);
    return titan_error(TITAN_ERR_FORMAT, "%s: header: %s", f->path, what);
}

static titan_status parse_tensor(titan_st_file *f, titan_st_tensor *t, const char *name, json_t *jt) {
    t->name = name;
    json_t *dt = json_object_get(jt, "dtype"), *shape = json_object_get(jt, "shape");
    json_t *offs = json_object_get(jt, "data_offsets");
    if (!json_is_object(jt) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return bad(f, name, "missing or malformed dtype, shape or data_offsets%s", "");
    if (parse_dtype(json_string_value(dt), &t->dtype))
        return bad(f, name, "dtype \"%.20s\" is not supported (F32, BF16, F16)", json_string_value(dt));
    size_t nd = json_array_size(shape);
    if (nd > TITAN_MAX_DIMS) return bad(f, name, "more than 4 dimensions%s", "");
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t d = 0; d < nd; d++) {
        json_t *v = json_array_get(shape, d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return bad(f, name, "shape is not a list of non-negative integers%s", "");
        t->shape[d] = json_integer_value(v);
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel) || numel > ((uint64_t)1 << 58))
            return bad(f, name, "shape too large%s", "");
    }
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(e) ||
        json_integer_value(b) < 0 || json_integer_value(e) < json_integer_value(b))
        return bad(f, name, "data_offsets is not [begin, end] with 0 <= begin <= end%s", "");
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    char what[200];
    if (t->end > f->data_size) /* the header is fine as far as it goes: the file was cut short */
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %llu: truncated: tensor %s needs data bytes %llu..%llu, "
                           "the file holds %llu", f->path, (unsigned long long)(f->data_start + f->data_size),
                           name, (unsigned long long)t->begin, (unsigned long long)t->end,
                           (unsigned long long)f->data_size);
    size_t es = titan_dtype_size(t->dtype);
    if (t->begin % es) {
        snprintf(what, sizeof what, "data offset %llu not aligned to the %s element size %zu",
                 (unsigned long long)t->begin, json_string_value(dt), es);
        return bad(f, name, "%s", what);
    }
    if (numel * es != t->end - t->begin) {
        snprintf(what, sizeof what, "shape holds %llu bytes of %s but data_offsets span %llu",
                 (unsigned long long)(numel * es), json_string_value(dt),
                 (unsigned long long)(t->end - t->begin));
        return bad(f, name, "%s", what);
    }
    return TITAN_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const titan_st_tensor *x = *(titan_st_tensor *const *)a, *y = *(titan_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static titan_status check_overlaps(titan_st_file *f) {
    if (f->n < 2) return TITAN_OK;
    titan_st_tensor **s = malloc((size_t)f->n * sizeof *s);
    if (!s) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++) s[i] = &f->t[i];
    qsort(s, (size_t)f->n, sizeof *s, cmp_begin);
    titan_status st = TITAN_OK;
    const titan_st_tensor *prev = NULL;
    for (int i = 0; i < f->n && st == TITAN_OK; i++) {
        if (s[i]->begin == s[i]->end) continue; /* empty tensors take no bytes */
        if (prev && s[i]->begin < prev->end)
            st = titan_error(TITAN_ERR_FORMAT, "%s: header: tensors %s and %s overlap (bytes %llu..%llu "
                             "and %llu..%llu)", f->path, prev->name, s[i]->name,
                             (unsigned long long)prev->begin, (unsigned long long)prev->end,
                             (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end);
        prev = s[i];
    }
    free(s);
    return st;
}

/* The header of a file of `size` bytes: from f->fd, or from mem (the whole file) when f->fd < 0. */
static titan_status parse_header(titan_st_file *f, uint64_t size, const unsigned char *mem) {
    if (size < 8)
        return titan_error(TITAN_ERR_FORMAT, "%s: %llu bytes: too short for a safetensors file",
                           f->path, (unsigned long long)size);
    unsigned char lb[8];
    if (mem) memcpy(lb, mem, 8);
    else TITAN_TRY(titan_fs_pread_all(f->fd, lb, 8, 0, f->path));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lb[i];
    if (hlen > TITAN_ST_HEADER_MAX || hlen > size - 8)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte 0: header length %llu is absurd (file has %llu "
                           "bytes, limit %llu)", f->path, (unsigned long long)hlen,
                           (unsigned long long)size, (unsigned long long)TITAN_ST_HEADER_MAX);
    if (hlen < 2) return titan_error(TITAN_ERR_FORMAT, "%s: header: empty", f->path);
    json_error_t je;
    if (mem) {
        f->root = json_loadb((const char *)mem + 8, hlen, JSON_REJECT_DUPLICATES, &je);
    } else {
        char *txt = malloc(hlen);
        if (!txt) return titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate the header", f->path);
        titan_status st = titan_fs_pread_all(f->fd, txt, hlen, 8, f->path);
        if (st != TITAN_OK) { free(txt); return st; }
        f->root = json_loadb(txt, hlen, JSON_REJECT_DUPLICATES, &je);
        free(txt);
    }
    if (!f->root)
        return titan_error(TITAN_ERR_FORMAT, "%s: header: byte %d: %s", f->path, je.position + 8, je.text);
    if (!json_is_object(f->root)) return titan_error(TITAN_ERR_FORMAT, "%s: header: not a JSON object", f->path);
    f->data_start = 8 + hlen;
    f->data_size = size - f->data_start;
    f->meta = json_object_get(f->root, "__metadata__");
    if (f->meta) {
        const char *k;
        json_t *v;
        if (!json_is_object(f->meta)) return bad(f, NULL, "__metadata__ is not an object%s", "");
        json_object_foreach(f->meta, k, v)
            if (!json_is_string(v)) return bad(f, NULL, "__metadata__ value of \"%.60s\" is not a string", k);
    }
    size_t n = json_object_size(f->root) - (f->meta ? 1 : 0);
    if (n > INT_MAX / 2) return bad(f, NULL, "too many tensors%s", "");
    if (n && !(f->t = calloc(n, sizeof *f->t))) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", f->path);
    const char *key;
    json_t *jt;
    json_object_foreach(f->root, key, jt) {
        if (!strcmp(key, "__metadata__")) continue;
        TITAN_TRY(parse_tensor(f, &f->t[f->n], key, jt));
        f->n++;
    }
    return check_overlaps(f);
}

titan_status titan_st_open(titan_st_file **out, const char *path) {
    *out = NULL;
    titan_st_file *f = calloc(1, sizeof *f);
    if (!f) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    titan_status ost = titan_fs_open_regular(path, &f->fd); /* a FIFO there is refused, not waited on */
    if (ost != TITAN_OK) {
        free(f);
        return ost;
    }
    struct stat sb;
    titan_status st = fstat(f->fd, &sb) == 0 ? parse_header(f, (uint64_t)sb.st_size, NULL)
                                             : titan_error(TITAN_ERR_IO, "%s: stat: %s", path, strerror(errno));
    if (st != TITAN_OK) {
        titan_st_close(f);
        return st;
    }
    *out = f;
    return TITAN_OK;
}

titan_status titan_st_parse(titan_st_file **out, const void *data, size_t len, const char *label) {
    *out = NULL;
    titan_st_file *f = calloc(1, sizeof *f);
    if (!f) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", label);
    snprintf(f->path, sizeof f->path, "%s", label);
    f->fd = -1;
    titan_status st = parse_header(f, len, data);
    if (st != TITAN_OK) {
        titan_st_close(f);
        return st;
    }
    *out = f;
    return TITAN_OK;
}

void titan_st_close(titan_st_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->root) json_decref(f->root);
    free(f->t);
    free(f);
}

int titan_st_num_tensors(const titan_st_file *f) { return f->n; }

const titan_st_tensor *titan_st_tensor_at(const titan_st_file *f, int i) {
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const titan_st_tensor *titan_st_find(const titan_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *titan_st_metadata(const titan_st_file *f, const char *key) {
    json_t *v = f->meta ? json_object_get(f->meta, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

titan_status titan_st_read(titan_st_file *f, const titan_st_tensor *t, titan_dtype dtype, void *dst) {
    if (!titan_st_dtype_name(dtype))
        return titan_error(TITAN_ERR_USAGE, "%s: tensor %s: cannot read as %s", f->path, t->name,
                           titan_dtype_name(dtype));
    size_t nbytes = (size_t)(t->end - t->begin), n = nbytes / titan_dtype_size(t->dtype);
    if (dtype == t->dtype) {
        titan_status st = titan_fs_pread_all(f->fd, dst, nbytes, (off_t)(f->data_start + t->begin), f->path);
        if (st != TITAN_OK) titan_error_context("tensor %s", t->name);
        return st;
    }
    void *raw = malloc(nbytes ? nbytes : 1);
    if (!raw) return titan_error(TITAN_ERR_NOMEM, "%s: tensor %s: cannot allocate %zu bytes", f->path, t->name, nbytes);
    titan_status st = titan_fs_pread_all(f->fd, raw, nbytes, (off_t)(f->data_start + t->begin), f->path);
    if (st == TITAN_OK) titan_dtype_convert(dst, dtype, raw, t->dtype, n); /* both float types */
    else titan_error_context("tensor %s", t->name);
    free(raw);
    return st;
}

/* ---- writing ---- */

typedef struct {
    char *name;
    titan_dtype dtype;
    int ndim;
    int64_t shape[TITAN_MAX_DIMS];
    uint64_t begin, end;
} wtensor;

struct titan_st_writer {
    wtensor *t;
    int n, cap, next;
    uint64_t data_bytes;
    json_t *meta;
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int fd;
};

titan_status titan_st_writer_new(titan_st_writer **out) {
    titan_st_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->meta = json_object())) {
        free(w);
        return titan_error(TITAN_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->fd = -1;
    *out = w;
    return TITAN_OK;
}

titan_status titan_st_writer_add(titan_st_writer *w, const char *name, titan_dtype dtype, int ndim,
                                 const int64_t *shape) {
    if (!titan_st_dtype_name(dtype) || ndim < 0 || ndim > TITAN_MAX_DIMS || w->fd >= 0 || !strcmp(name, "__metadata__"))
        return titan_error(TITAN_ERR_USAGE, "safetensors writer: tensor %s: bad dtype, rank or name", name);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name))
            return titan_error(TITAN_ERR_USAGE, "safetensors writer: tensor %s added twice", name);
    if (w->n == w->cap) {
        int nc = w->cap ? 2 * w->cap : 64;
        wtensor *nt = realloc(w->t, (size_t)nc * sizeof *nt);
        if (!nt) return titan_error(TITAN_ERR_NOMEM, "safetensors writer: out of memory");
        w->t = nt;
        w->cap = nc;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return titan_error(TITAN_ERR_NOMEM, "safetensors writer: out of memory");
    t->dtype = dtype;
    t->ndim = ndim;
    uint64_t bytes = titan_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        bytes *= (uint64_t)shape[d];
    }
    /* Keep every tensor aligned to its element size when dtypes are mixed. */
    uint64_t es = titan_dtype_size(dtype);
    w->data_bytes = (w->data_bytes + es - 1) / es * es;
    t->begin = w->data_bytes;
    t->end = t->begin + bytes;
    w->data_bytes = t->end;
    w->n++;
    return TITAN_OK;
}

titan_status titan_st_writer_meta(titan_st_writer *w, const char *key, const char *value) {
    if (json_object_set_new(w->meta, key, json_string(value)))
        return titan_error(TITAN_ERR_USAGE, "safetensors writer: metadata %s: not UTF-8", key);
    return TITAN_OK;
}

uint64_t titan_st_writer_data_bytes(const titan_st_writer *w) { return w->data_bytes; }

static titan_status pad_to(titan_st_writer *w, uint64_t pos, uint64_t *at) {
    static const char zeros[8] = {0};
    if (pos > *at) TITAN_TRY(titan_fs_write_all(w->fd, zeros, (size_t)(pos - *at), w->tmp));
    *at = pos;
    return TITAN_OK;
}

titan_status titan_st_writer_begin(titan_st_writer *w, const char *path) {
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path)
        return titan_error(TITAN_ERR_USAGE, "%s: path too long", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    json_t *h = json_object();
    if (!h) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    if (json_object_size(w->meta)) json_object_set(h, "__metadata__", w->meta);
    for (int i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        json_t *sh = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(sh, json_integer(t->shape[d]));
        json_object_set_new(h, t->name, json_pack("{s:s, s:o, s:[I,I]}", "dtype", titan_st_dtype_name(t->dtype),
                                                  "shape", sh, "data_offsets", (json_int_t)t->begin,
                                                  (json_int_t)t->end));
    }
    char *txt = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!txt) return titan_error(TITAN_ERR_NOMEM, "%s: cannot format the header", path);
    size_t len = strlen(txt), padded = (len + 7) / 8 * 8; /* data starts 8-aligned, as HF pads with spaces */
    char *buf = malloc(8 + padded);
    if (!buf) { free(txt); return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path); }
    for (int i = 0; i < 8; i++) buf[i] = (char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, txt, len);
    memset(buf + 8 + len, ' ', padded - len);
    free(txt);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    titan_status st = w->fd < 0 ? titan_error(TITAN_ERR_IO, "%s: create: %s", w->tmp, strerror(errno))
                                : titan_fs_write_all(w->fd, buf, 8 + padded, w->tmp);
    free(buf);
    w->next = 0;
    return st;
}

titan_status titan_st_writer_write(titan_st_writer *w, const void *data) {
    TITAN_ASSERT(w->fd >= 0 && w->next < w->n);
    const wtensor *t = &w->t[w->next];
    uint64_t at = w->next ? w->t[w->next - 1].end : 0;
    TITAN_TRY(pad_to(w, t->begin, &at));
    TITAN_TRY(titan_fs_write_all(w->fd, data, (size_t)(t->end - t->begin), w->tmp));
    w->next++;
    return TITAN_OK;
}

titan_status titan_st_writer_finish(titan_st_writer *w) {
    if (w->fd < 0 || w->next != w->n)
        return titan_error(TITAN_ERR_USAGE, "%s: %d of %d tensors written", w->path, w->next, w->n);
    int fd = w->fd;
    w->fd = -1;
    TITAN_TRY(titan_fs_publish_fd(fd, w->tmp, w->path));
    w->tmp[0] = 0;
    return TITAN_OK;
}

void titan_st_writer_free(titan_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp[0]) unlink(w->tmp);
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    json_decref(w->meta);
    free(w);
}
