/* gguf.c - the GGUF writer: key/values and tensor infos planned in memory,
 * tensor data streamed to PATH.tmp, renamed into place when complete. */
#include "interchange/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fsutil.h"

typedef struct {
    char *name;
    uint32_t type, ndim;
    uint64_t ne[4];   /* ggml order: innermost first */
    uint64_t offset;  /* into the data section */
    uint64_t nbytes;
} gtensor;

struct titan_gguf_writer {
    uint8_t *kv;            /* the serialised key/value section */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;            /* for the duplicate check */
    titan_gguf_value_type arr_type;
    uint64_t arr_left;      /* elements still owed to the open array */
    const char *arr_key;
    gtensor *t;
    int n, cap;
    uint64_t data_bytes;
    int fd, next;
    uint64_t at;            /* bytes of the data section written */
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    titan_status failed;    /* a failed plan step: begin refuses */
};

titan_status titan_gguf_writer_new(titan_gguf_writer **out) {
    titan_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return titan_error(TITAN_ERR_NOMEM, "gguf writer: out of memory");
    w->fd = -1;
    *out = w;
    return TITAN_OK;
}

void titan_gguf_writer_free(titan_gguf_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp[0]) unlink(w->tmp);
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    free(w->kv);
    free(w);
}

static titan_status fail(titan_gguf_writer *w, titan_status st) {
    if (!w->failed) w->failed = st;
    return st;
}

static titan_status put(titan_gguf_writer *w, const void *p, size_t n) {
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) cap *= 2;
        uint8_t *b = realloc(w->kv, cap);
        if (!b) return fail(w, titan_error(TITAN_ERR_NOMEM, "gguf: metadata: out of memory (%zu bytes)", cap));
        w->kv = b;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return TITAN_OK;
}

/* GGUF integers are little-endian; store them byte by byte so the host's order never matters. */
static titan_status put_le(titan_gguf_writer *w, uint64_t v, int bytes) {
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    return put(w, b, (size_t)bytes);
}

static titan_status put_str(titan_gguf_writer *w, const char *s, size_t n) {
    TITAN_TRY(put_le(w, n, 8));
    return put(w, s, n);
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Starts a key: no array may be open, the key must be new. */
static titan_status key(titan_gguf_writer *w, const char *k, titan_gguf_value_type type) {
    if (w->arr_left)
        return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: key %s: array %s still owes %llu elements", k,
                                   w->arr_key, (unsigned long long)w->arr_left));
    if (w->fd >= 0) return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: key %s added after begin", k));
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], k)) return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: key %s given twice", k));
    char **nk = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *nk);
    if (!nk) return fail(w, titan_error(TITAN_ERR_NOMEM, "gguf: out of memory"));
    w->keys = nk;
    if (!(w->keys[w->n_kv] = strdup(k))) return fail(w, titan_error(TITAN_ERR_NOMEM, "gguf: out of memory"));
    w->n_kv++;
    TITAN_TRY(put_str(w, k, strlen(k)));
    return put_le(w, (uint64_t)type, 4);
}

titan_status titan_gguf_kv_u32(titan_gguf_writer *w, const char *k, uint32_t v) {
    TITAN_TRY(key(w, k, TITAN_GGUF_U32));
    return put_le(w, v, 4);
}

titan_status titan_gguf_kv_i64(titan_gguf_writer *w, const char *k, int64_t v) {
    TITAN_TRY(key(w, k, TITAN_GGUF_I64));
    return put_le(w, (uint64_t)v, 8);
}

titan_status titan_gguf_kv_f32(titan_gguf_writer *w, const char *k, float v) {
    TITAN_TRY(key(w, k, TITAN_GGUF_F32));
    return put_le(w, f32_bits(v), 4);
}

titan_status titan_gguf_kv_bool(titan_gguf_writer *w, const char *k, int v) {
    TITAN_TRY(key(w, k, TITAN_GGUF_BOOL));
    return put_le(w, v ? 1 : 0, 1);
}

titan_status titan_gguf_kv_str(titan_gguf_writer *w, const char *k, const char *v) {
    TITAN_TRY(key(w, k, TITAN_GGUF_STRING));
    return put_str(w, v, strlen(v));
}

titan_status titan_gguf_kv_array(titan_gguf_writer *w, const char *k, titan_gguf_value_type elem, uint64_t n) {
    if (elem != TITAN_GGUF_U32 && elem != TITAN_GGUF_I32 && elem != TITAN_GGUF_F32 && elem != TITAN_GGUF_STRING)
        return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: key %s: arrays of type %d are not supported", k, elem));
    TITAN_TRY(key(w, k, TITAN_GGUF_ARRAY));
    TITAN_TRY(put_le(w, (uint64_t)elem, 4));
    TITAN_TRY(put_le(w, n, 8));
    w->arr_type = elem;
    w->arr_left = n;
    w->arr_key = w->keys[w->n_kv - 1];
    return TITAN_OK;
}

static titan_status element(titan_gguf_writer *w, titan_gguf_value_type type) {
    if (w->arr_left == 0 || w->arr_type != type)
        return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: array element of type %d does not fit the open array",
                                   type));
    w->arr_left--;
    return TITAN_OK;
}

titan_status titan_gguf_arr_str(titan_gguf_writer *w, const char *s, size_t len) {
    TITAN_TRY(element(w, TITAN_GGUF_STRING));
    return put_str(w, s, len);
}

titan_status titan_gguf_arr_i32(titan_gguf_writer *w, int32_t v) {
    TITAN_TRY(element(w, TITAN_GGUF_I32));
    return put_le(w, (uint32_t)v, 4);
}

titan_status titan_gguf_arr_f32(titan_gguf_writer *w, float v) {
    TITAN_TRY(element(w, TITAN_GGUF_F32));
    return put_le(w, f32_bits(v), 4);
}

static uint64_t pad(uint64_t x) { return (x + TITAN_GGUF_ALIGNMENT - 1) / TITAN_GGUF_ALIGNMENT * TITAN_GGUF_ALIGNMENT; }

titan_status titan_gguf_add_tensor(titan_gguf_writer *w, const char *name, titan_dtype dtype, int ndim,
                                   const int64_t *shape) {
    uint32_t type = dtype == TITAN_DTYPE_F32 ? TITAN_GGML_TYPE_F32 : dtype == TITAN_DTYPE_F16 ? TITAN_GGML_TYPE_F16
                  : dtype == TITAN_DTYPE_BF16 ? TITAN_GGML_TYPE_BF16 : UINT32_MAX;
    if (type == UINT32_MAX)
        return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: tensor %s: dtype %s has no ggml type here", name,
                                   titan_dtype_name(dtype)));
    if (strlen(name) > TITAN_GGUF_NAME_MAX)
        return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: tensor name %s: longer than %d bytes", name,
                                   TITAN_GGUF_NAME_MAX));
    if (ndim < 1 || ndim > 4 || w->fd >= 0)
        return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: tensor %s: %d dims%s", name, ndim,
                                   w->fd >= 0 ? " added after begin" : ""));
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name)) return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: tensor %s given twice", name));
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        gtensor *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return fail(w, titan_error(TITAN_ERR_NOMEM, "gguf: out of memory"));
        w->t = nt;
        w->cap = cap;
    }
    gtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0 || (uint64_t)shape[d] > (UINT64_MAX >> 4) / numel)
            return fail(w, titan_error(TITAN_ERR_USAGE, "gguf: tensor %s: bad shape", name));
        t->ne[d] = (uint64_t)shape[ndim - 1 - d];
        numel *= (uint64_t)shape[d];
    }
    if (!(t->name = strdup(name))) return fail(w, titan_error(TITAN_ERR_NOMEM, "gguf: out of memory"));
    t->type = type;
    t->ndim = (uint32_t)ndim;
    t->nbytes = numel * titan_dtype_size(dtype);
    t->offset = w->data_bytes;
    w->data_bytes += pad(t->nbytes);
    w->n++;
    return TITAN_OK;
}

uint64_t titan_gguf_data_bytes(const titan_gguf_writer *w) { return w->data_bytes; }

static titan_status write_zeros(titan_gguf_writer *w, uint64_t n) {
    static const uint8_t zeros[TITAN_GGUF_ALIGNMENT];
    TITAN_ASSERT(n <= sizeof zeros);
    return titan_fs_write_all(w->fd, zeros, (size_t)n, w->tmp);
}

titan_status titan_gguf_begin(titan_gguf_writer *w, const char *path) {
    if (w->failed) return w->failed;
    if (w->arr_left)
        return titan_error(TITAN_ERR_USAGE, "gguf: array %s still owes %llu elements", w->arr_key,
                           (unsigned long long)w->arr_left);
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path)
        return titan_error(TITAN_ERR_USAGE, "%s: path too long", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    /* The fixed header, then the tensor infos appended after the key/values. */
    uint8_t head[24];
    memcpy(head, "GGUF", 4);
    uint64_t fields[3] = {TITAN_GGUF_VERSION, (uint64_t)w->n, w->n_kv};
    for (int i = 0; i < 4; i++) head[4 + i] = (uint8_t)(fields[0] >> (8 * i));
    for (int i = 0; i < 8; i++) head[8 + i] = (uint8_t)(fields[1] >> (8 * i));
    for (int i = 0; i < 8; i++) head[16 + i] = (uint8_t)(fields[2] >> (8 * i));
    size_t kv_end = w->kv_len;
    titan_status st = TITAN_OK;
    for (int i = 0; i < w->n && st == TITAN_OK; i++) {
        const gtensor *t = &w->t[i];
        st = put_str(w, t->name, strlen(t->name));
        if (st == TITAN_OK) st = put_le(w, t->ndim, 4);
        for (uint32_t d = 0; d < t->ndim && st == TITAN_OK; d++) st = put_le(w, t->ne[d], 8);
        if (st == TITAN_OK) st = put_le(w, t->type, 4);
        if (st == TITAN_OK) st = put_le(w, t->offset, 8);
    }
    if (st != TITAN_OK) {
        w->kv_len = kv_end;
        w->tmp[0] = 0;
        return st;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        st = titan_error(TITAN_ERR_IO, "%s: create: %s", w->tmp, strerror(errno));
        w->tmp[0] = 0;
        return st;
    }
    st = titan_fs_write_all(w->fd, head, sizeof head, w->tmp);
    if (st == TITAN_OK) st = titan_fs_write_all(w->fd, w->kv, w->kv_len, w->tmp);
    if (st == TITAN_OK) st = write_zeros(w, pad(sizeof head + w->kv_len) - (sizeof head + w->kv_len));
    w->kv_len = kv_end;
    w->next = 0;
    w->at = 0;
    return st;
}

titan_status titan_gguf_write(titan_gguf_writer *w, const void *data) {
    if (w->fd < 0 || w->next >= w->n)
        return titan_error(TITAN_ERR_USAGE, "gguf: %s: write of tensor %d of %d", w->path, w->next + 1, w->n);
    const gtensor *t = &w->t[w->next];
    TITAN_TRY(write_zeros(w, t->offset - w->at));
    TITAN_TRY(titan_fs_write_all(w->fd, data, (size_t)t->nbytes, w->tmp));
    w->at = t->offset + t->nbytes;
    w->next++;
    return TITAN_OK;
}

titan_status titan_gguf_finish(titan_gguf_writer *w) {
    if (w->fd < 0 || w->next != w->n)
        return titan_error(TITAN_ERR_USAGE, "gguf: %s: %d of %d tensors written", w->path, w->next, w->n);
    /* ggml pads the last tensor too: readers may expect data_bytes in the file. */
    TITAN_TRY(write_zeros(w, w->data_bytes - w->at));
    int fd = w->fd;
    w->fd = -1;
    TITAN_TRY(titan_fs_publish_fd(fd, w->tmp, w->path));
    w->tmp[0] = 0;
    return TITAN_OK;
}
