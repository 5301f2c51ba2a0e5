/* shard_writer.c - writes a shard directory: shard files as NAME.tmp, synced
 * and renamed one by one, then index.json the same way, last. */
#include "data/shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/fsutil.h"
#include "core/mem.h"

#define BUF_TOKENS (1u << 16)

typedef struct {
    uint64_t tokens, documents, xxh64;
} done_file;

struct titan_shard_writer {
    char dir[PATH_MAX];
    const titan_tokenizer *tok;
    uint64_t shard_tokens;
    int created_dir, finished, force;
    /* the shard being written; fd < 0 when none is open */
    int fd;
    uint64_t cur_tokens, cur_docs;
    XXH64_state_t *xs;
    unsigned char *buf; /* BUF_TOKENS little-endian tokens */
    size_t buf_n;
    /* the shards already renamed into place */
    done_file *files;
    int n_files, cap_files;
    uint32_t *scratch; /* encoded text of one document */
    size_t scratch_cap;
    titan_shard_stats stats;
};

static void file_name(char *out, size_t cap, const titan_shard_writer *w, int i, int tmp) {
    snprintf(out, cap, "%s/shard-%05d.bin%s", w->dir, i, tmp ? ".tmp" : "");
}

static titan_status write_all(int fd, const void *p, size_t n, off_t at, const char *path) {
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t k = at >= 0 ? pwrite(fd, c, n, at) : write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return titan_error(TITAN_ERR_IO, "%s: write: %s", path, k < 0 ? strerror(errno) : "no progress");
        c += k;
        n -= (size_t)k;
        if (at >= 0) at += k;
    }
    return TITAN_OK;
}

static titan_status prepare_dir(titan_shard_writer *w) {
    struct stat sb;
    if (stat(w->dir, &sb) != 0) {
        if (errno != ENOENT) return titan_error(TITAN_ERR_IO, "%s: %s", w->dir, strerror(errno));
        TITAN_TRY(titan_fs_mkdir_p(w->dir)); /* parents too, like mkdir -p */
        w->created_dir = 1;
        return TITAN_OK;
    }
    if (!S_ISDIR(sb.st_mode)) return titan_error(TITAN_ERR_USAGE, "%s: exists and is not a directory", w->dir);
    DIR *dp = opendir(w->dir);
    if (!dp) return titan_error(TITAN_ERR_IO, "%s: %s", w->dir, strerror(errno));
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) entries++;
    closedir(dp);
    if (entries == 0) return TITAN_OK;
    if (!titan_shard_dir_is_shard_dir(w->dir)) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "%s: not empty and not a shard directory; refusing to write there", w->dir);
        titan_error_hint("give a new or empty directory with -o");
        return st;
    }
    if (!w->force) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "%s: already holds shards", w->dir);
        titan_error_hint("add --force to replace them");
        return st;
    }
    /* No reader may pair the old index with new shard files. */
    char ipath[PATH_MAX + 16];
    snprintf(ipath, sizeof ipath, "%s/%s", w->dir, TITAN_SHARD_INDEX);
    if (unlink(ipath) != 0 && errno != ENOENT) return titan_error(TITAN_ERR_IO, "%s: %s", ipath, strerror(errno));
    return titan_fs_fsync_path(w->dir);
}

titan_status titan_shard_writer_open(titan_shard_writer **out, const char *dir,
                                     const titan_tokenizer *tok, uint64_t shard_tokens, int force) {
    *out = NULL;
    if (shard_tokens == 0) return titan_error(TITAN_ERR_USAGE, "shard size: must be at least 1 token");
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    if (len == 0 || len >= PATH_MAX - 32) return titan_error(TITAN_ERR_USAGE, "'%s': bad output directory name", dir);
    titan_shard_writer *w = titan_alloc(sizeof *w, "shard writer");
    if (!w) return TITAN_ERR_NOMEM;
    memcpy(w->dir, dir, len);
    w->tok = tok;
    w->shard_tokens = shard_tokens;
    w->force = force;
    w->fd = -1;
    w->finished = 1; /* nothing to clean up until the directory is ours */
    w->buf = titan_alloc(BUF_TOKENS * 4, "shard buffer");
    w->xs = XXH64_createState();
    titan_status st = !w->buf ? TITAN_ERR_NOMEM : !w->xs ? titan_error(TITAN_ERR_NOMEM, "xxh64 state") : TITAN_OK;
    if (st == TITAN_OK) st = prepare_dir(w);
    if (st != TITAN_OK) {
        titan_shard_writer_free(w);
        return st;
    }
    w->finished = 0;
    *out = w;
    return TITAN_OK;
}

static titan_status flush_buf(titan_shard_writer *w) {
    if (w->buf_n == 0) return TITAN_OK;
    char path[PATH_MAX + 32];
    file_name(path, sizeof path, w, w->n_files, 1);
    TITAN_TRY(write_all(w->fd, w->buf, w->buf_n * 4, -1, path));
    XXH64_update(w->xs, w->buf, w->buf_n * 4);
    w->buf_n = 0;
    return TITAN_OK;
}

static titan_status shard_begin(titan_shard_writer *w) {
    if (w->n_files == w->cap_files) {
        int cap = w->cap_files ? 2 * w->cap_files : 16;
        done_file *f = realloc(w->files, (size_t)cap * sizeof *f);
        if (!f) return titan_error(TITAN_ERR_NOMEM, "shard list: cannot grow to %d", cap);
        w->files = f;
        w->cap_files = cap;
    }
    char path[PATH_MAX + 32];
    file_name(path, sizeof path, w, w->n_files, 1);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return titan_error(TITAN_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char zero[TITAN_SHARD_HEADER_SIZE] = {0};
    TITAN_TRY(write_all(w->fd, zero, sizeof zero, -1, path));
    XXH64_reset(w->xs, 0);
    w->cur_tokens = w->cur_docs = 0;
    w->buf_n = 0;
    return TITAN_OK;
}

static titan_status shard_end(titan_shard_writer *w) {
    char tmp[PATH_MAX + 32], path[PATH_MAX + 32];
    file_name(tmp, sizeof tmp, w, w->n_files, 1);
    file_name(path, sizeof path, w, w->n_files, 0);
    TITAN_TRY(flush_buf(w));
    titan_shard_header h = {
        .version = TITAN_SHARD_VERSION,
        .header_size = TITAN_SHARD_HEADER_SIZE,
        .tokens = w->cur_tokens,
        .documents = w->cur_docs,
        .payload_xxh64 = XXH64_digest(w->xs),
        .vocab_size = (uint32_t)titan_tokenizer_vocab_size(w->tok),
    };
    snprintf(h.tokenizer, sizeof h.tokenizer, "%s", titan_tokenizer_id(w->tok));
    unsigned char head[TITAN_SHARD_HEADER_SIZE];
    titan_shard_header_encode(&h, head);
    TITAN_TRY(write_all(w->fd, head, sizeof head, 0, tmp));
    int fd = w->fd;
    w->fd = -1; /* closed by the publish, whatever happens */
    titan_status st = titan_fs_publish_fd(fd, tmp, path);
    if (st != TITAN_OK) {
        unlink(tmp); /* the writer's cleanup no longer sees it: fd is gone */
        return st;
    }
    w->files[w->n_files++] = (done_file){h.tokens, h.documents, h.payload_xxh64};
    w->stats.files = w->n_files;
    return TITAN_OK;
}

/* Appends tokens to the stream, opening and closing shard files as they fill. */
static titan_status emit(titan_shard_writer *w, const uint32_t *ids, size_t n, int doc_start) {
    while (n > 0) {
        if (w->fd < 0) TITAN_TRY(shard_begin(w));
        if (doc_start) {
            w->cur_docs++;
            doc_start = 0;
        }
        uint64_t room = w->shard_tokens - w->cur_tokens;
        size_t m = n < room ? n : (size_t)room;
        if (m > BUF_TOKENS - w->buf_n) m = BUF_TOKENS - w->buf_n;
        unsigned char *p = w->buf + 4 * w->buf_n;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(p, ids, m * 4);
#else
        for (size_t i = 0; i < m; i++) {
            uint32_t v = ids[i];
            p[4 * i] = (unsigned char)v;
            p[4 * i + 1] = (unsigned char)(v >> 8);
            p[4 * i + 2] = (unsigned char)(v >> 16);
            p[4 * i + 3] = (unsigned char)(v >> 24);
        }
#endif
        w->buf_n += m;
        w->cur_tokens += m;
        w->stats.tokens += m;
        ids += m;
        n -= m;
        if (w->buf_n == BUF_TOKENS) TITAN_TRY(flush_buf(w));
        if (w->cur_tokens == w->shard_tokens) TITAN_TRY(shard_end(w));
    }
    return TITAN_OK;
}

static titan_status emit_doc(titan_shard_writer *w, const uint32_t *ids, size_t n) {
    uint32_t bos = titan_tokenizer_bos(w->tok), eos = titan_tokenizer_eos(w->tok);
    TITAN_TRY(emit(w, &bos, 1, 1));
    TITAN_TRY(emit(w, ids, n, 0));
    TITAN_TRY(emit(w, &eos, 1, 0));
    w->stats.documents++;
    return TITAN_OK;
}

titan_status titan_shard_writer_add_tokens(titan_shard_writer *w, const uint32_t *ids, size_t n) {
    TITAN_ASSERT(!w->finished);
    uint32_t vocab = (uint32_t)titan_tokenizer_vocab_size(w->tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= vocab)
            return titan_error(TITAN_ERR_USAGE, "document %" PRIu64 ": token %zu is %" PRIu32 ", outside the vocabulary (size %" PRIu32 ")",
                               w->stats.documents, i, ids[i], vocab);
    return emit_doc(w, ids, n);
}

titan_status titan_shard_writer_add_encoded(titan_shard_writer *w, const uint32_t *ids, size_t n,
                                           size_t text_bytes) {
    TITAN_ASSERT(!w->finished);
    w->stats.text_bytes += text_bytes;
    return emit_doc(w, ids, n);
}

titan_status titan_shard_writer_add_text(titan_shard_writer *w, const char *text, size_t n) {
    TITAN_ASSERT(!w->finished);
    if (n > w->scratch_cap) {
        size_t cap = n > 2 * w->scratch_cap ? n : 2 * w->scratch_cap;
        if (cap > SIZE_MAX / 4) return titan_error(TITAN_ERR_NOMEM, "document of %zu bytes: too large", n);
        uint32_t *s = realloc(w->scratch, cap * 4);
        if (!s) return titan_error(TITAN_ERR_NOMEM, "document of %zu bytes: cannot allocate its tokens", n);
        w->scratch = s;
        w->scratch_cap = cap;
    }
    size_t k = titan_tokenizer_encode(w->tok, text, n, w->scratch, w->scratch_cap);
    TITAN_ASSERT(k <= n);
    return titan_shard_writer_add_encoded(w, w->scratch, k, n);
}

static titan_status write_index(titan_shard_writer *w) {
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return titan_error(TITAN_ERR_NOMEM, "index: out of memory");
    }
    json_object_set_new(root, "format", json_string("titan-shard"));
    json_object_set_new(root, "version", json_integer(TITAN_SHARD_VERSION));
    json_object_set_new(root, "tokenizer", json_string(titan_tokenizer_id(w->tok)));
    json_object_set_new(root, "vocab_size", json_integer(titan_tokenizer_vocab_size(w->tok)));
    json_object_set_new(root, "bos", json_integer(titan_tokenizer_bos(w->tok)));
    json_object_set_new(root, "eos", json_integer(titan_tokenizer_eos(w->tok)));
    json_object_set_new(root, "documents", json_integer((json_int_t)w->stats.documents));
    json_object_set_new(root, "tokens", json_integer((json_int_t)w->stats.tokens));
    for (int i = 0; i < w->n_files; i++) {
        char name[32], hex[17];
        snprintf(name, sizeof name, "shard-%05d.bin", i);
        snprintf(hex, sizeof hex, "%016" PRIx64, w->files[i].xxh64);
        json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:s}", "file", name,
                                             "tokens", (json_int_t)w->files[i].tokens,
                                             "documents", (json_int_t)w->files[i].documents, "xxh64", hex));
    }
    json_object_set_new(root, "shards", arr);
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!text) return titan_error(TITAN_ERR_NOMEM, "index: out of memory");
    size_t len = strlen(text);
    char *withnl = realloc(text, len + 2);
    if (!withnl) {
        free(text);
        return titan_error(TITAN_ERR_NOMEM, "index: out of memory");
    }
    memcpy(withnl + len, "\n", 2);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", w->dir, TITAN_SHARD_INDEX);
    titan_status st = titan_fs_write_atomic(path, withnl, len + 1); /* and syncs the directory */
    free(withnl);
    return st;
}

/* After the new index is in place: old shard files beyond the new ones and
 * leftover .tmp files go. */
static void remove_stale(titan_shard_writer *w) {
    DIR *dp = opendir(w->dir);
    if (!dp) return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        const char *s = e->d_name;
        size_t n = strlen(s);
        int stale = n > 4 && strcmp(s + n - 4, ".tmp") == 0;
        if (n > 10 && strncmp(s, "shard-", 6) == 0 && strcmp(s + n - 4, ".bin") == 0) {
            char *end;
            long idx = strtol(s + 6, &end, 10);
            if (end == s + n - 4 && idx >= w->n_files) stale = 1;
        }
        if (stale) {
            char path[PATH_MAX + 300];
            snprintf(path, sizeof path, "%s/%s", w->dir, s);
            unlink(path);
        }
    }
    closedir(dp);
}

titan_status titan_shard_writer_finish(titan_shard_writer *w, titan_shard_stats *stats) {
    TITAN_ASSERT(!w->finished);
    if (w->fd >= 0) TITAN_TRY(shard_end(w));
    TITAN_TRY(titan_fs_fsync_path(w->dir)); /* shard renames are durable before the index names them */
    TITAN_TRY(write_index(w));
    w->finished = 1;
    if (w->force) remove_stale(w);
    if (stats) *stats = w->stats;
    return TITAN_OK;
}

void titan_shard_writer_free(titan_shard_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (!w->finished) {
        char path[PATH_MAX + 32];
        if (w->fd >= 0) {
            file_name(path, sizeof path, w, w->n_files, 1);
            unlink(path);
        }
        for (int i = 0; i < w->n_files; i++) {
            file_name(path, sizeof path, w, i, 0);
            unlink(path);
        }
        if (w->created_dir) rmdir(w->dir);
    }
    if (w->xs) XXH64_freeState(w->xs);
    free(w->files);
    free(w->scratch);
    titan_free(w->buf);
    titan_free(w);
}
