/* shard.c - the shard header and the shard directory reader. */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/fsutil.h"
#include "core/mem.h"

/* ---- little-endian fields ---- */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
#endif
}
static uint64_t get_u64(const unsigned char *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* Byte offsets of the header fields (titan-shard(5)). */
enum {
    OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HSIZE = 12, OFF_TOKENS = 16, OFF_DOCS = 24,
    OFF_PAYSUM = 32, OFF_VOCAB = 40, OFF_TOKENIZER = 44, OFF_HEADSUM = 60,
};

void titan_shard_header_encode(const titan_shard_header *h, unsigned char out[TITAN_SHARD_HEADER_SIZE]) {
    memset(out, 0, TITAN_SHARD_HEADER_SIZE);
    memcpy(out + OFF_MAGIC, TITAN_SHARD_MAGIC, 8);
    put_u32(out + OFF_VERSION, h->version);
    put_u32(out + OFF_HSIZE, h->header_size);
    put_u64(out + OFF_TOKENS, h->tokens);
    put_u64(out + OFF_DOCS, h->documents);
    put_u64(out + OFF_PAYSUM, h->payload_xxh64);
    put_u32(out + OFF_VOCAB, h->vocab_size);
    memcpy(out + OFF_TOKENIZER, h->tokenizer, strnlen(h->tokenizer, TITAN_TOKENIZER_ID_MAX));
    put_u32(out + OFF_HEADSUM, XXH32(out, OFF_HEADSUM, 0));
}

titan_status titan_shard_header_decode(titan_shard_header *h, const unsigned char *buf, size_t n,
                                       const char *name) {
    memset(h, 0, sizeof *h);
    if (n < TITAN_SHARD_HEADER_SIZE)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %zu: truncated header (file has %zu bytes, a header needs %d)",
                           name, n, n, TITAN_SHARD_HEADER_SIZE);
    if (memcmp(buf, TITAN_SHARD_MAGIC, 8) != 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte 0: bad magic (not a titan shard file)", name);
    h->version = get_u32(buf + OFF_VERSION);
    if (h->version != TITAN_SHARD_VERSION)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: format version %" PRIu32 " not supported (this build reads %d)",
                           name, OFF_VERSION, h->version, TITAN_SHARD_VERSION);
    h->header_size = get_u32(buf + OFF_HSIZE);
    if (h->header_size != TITAN_SHARD_HEADER_SIZE)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: header size %" PRIu32 " (version 1 has %d)",
                           name, OFF_HSIZE, h->header_size, TITAN_SHARD_HEADER_SIZE);
    uint32_t want = get_u32(buf + OFF_HEADSUM), got = XXH32(buf, OFF_HEADSUM, 0);
    if (want != got)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %d: header checksum mismatch (expected 0x%08" PRIx32 ", got 0x%08" PRIx32 ")",
                           name, OFF_HEADSUM, want, got);
    h->tokens = get_u64(buf + OFF_TOKENS);
    h->documents = get_u64(buf + OFF_DOCS);
    h->payload_xxh64 = get_u64(buf + OFF_PAYSUM);
    h->vocab_size = get_u32(buf + OFF_VOCAB);
    memcpy(h->tokenizer, buf + OFF_TOKENIZER, TITAN_TOKENIZER_ID_MAX);
    h->tokenizer[TITAN_TOKENIZER_ID_MAX] = '\0';
    if (h->vocab_size == 0 || h->tokenizer[0] == '\0')
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: no vocabulary size or tokenizer id", name, OFF_VOCAB);
    return TITAN_OK;
}

/* ---- the directory reader ---- */

typedef struct {
    char path[PATH_MAX];
    unsigned char *map;
    size_t map_len;
    uint64_t tokens, documents, start; /* start: global offset of its first token */
    uint64_t xxh64;                    /* the payload checksum index.json gives */
} shard_file;

struct titan_shard_dir {
    char dir[PATH_MAX];
    char tokenizer[TITAN_TOKENIZER_ID_MAX + 1];
    int vocab_size;
    uint64_t tokens, documents;
    int n_files;
    shard_file *files;
};

static titan_status io_missing(const char *what, const char *dir) {
    titan_status st = titan_error(TITAN_ERR_IO, "%s: %s", what, strerror(errno));
    titan_error_hint("run titan-shard first: titan-shard INPUT... -o %s", dir);
    return st;
}

static titan_status join(char *out, const char *dir, const char *name) {
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        return titan_error(TITAN_ERR_IO, "%s/%s: path too long", dir, name);
    return TITAN_OK;
}

/* Integer member >= 0 of an index object, or a FORMAT error naming it. */
static titan_status index_uint(const json_t *obj, const char *key, const char *where, uint64_t *out) {
    const json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: \"%s\" missing or not a non-negative integer", where, key);
    *out = (uint64_t)json_integer_value(v);
    return TITAN_OK;
}

static titan_status index_string(const json_t *obj, const char *key, const char *where, const char **out) {
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return titan_error(TITAN_ERR_FORMAT, "%s: \"%s\" missing or not a string", where, key);
    *out = json_string_value(v);
    return TITAN_OK;
}

/* Maps one file, checks it against its index entry, its payload checksum and
 * its token range. */
static titan_status verify_file(titan_shard_dir *d, shard_file *f, uint64_t want_xxh, int i) {
    /* a FIFO in a shard's place is refused, not waited on */
    int fd;
    if (titan_fs_open_regular(f->path, &fd) != TITAN_OK) {
        titan_error_context("listed in %s", TITAN_SHARD_INDEX);
        return titan_error_code();
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return titan_error(TITAN_ERR_IO, "%s: stat: %s", f->path, strerror(errno));
    }
    size_t size = (size_t)sb.st_size;
    if (size < TITAN_SHARD_HEADER_SIZE) {
        close(fd);
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %zu: truncated (file has %zu bytes, a header needs %d)",
                           f->path, size, size, TITAN_SHARD_HEADER_SIZE);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return titan_error(TITAN_ERR_IO, "%s: mmap: %s", f->path, strerror(errno));
    f->map = map;
    f->map_len = size;
    madvise(map, size, MADV_SEQUENTIAL);

    titan_shard_header h;
    TITAN_TRY(titan_shard_header_decode(&h, f->map, size, f->path));
    if (strcmp(h.tokenizer, d->tokenizer) != 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: tokenizer '%s' disagrees with %s ('%s')",
                           f->path, OFF_TOKENIZER, h.tokenizer, TITAN_SHARD_INDEX, d->tokenizer);
    if (h.vocab_size != (uint32_t)d->vocab_size)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: vocabulary size %" PRIu32 " disagrees with %s (%d)",
                           f->path, OFF_VOCAB, h.vocab_size, TITAN_SHARD_INDEX, d->vocab_size);
    if (h.tokens != f->tokens)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: %" PRIu64 " tokens disagree with %s shards[%d] (%" PRIu64 ")",
                           f->path, OFF_TOKENS, h.tokens, TITAN_SHARD_INDEX, i, f->tokens);
    if (h.documents != f->documents)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: %" PRIu64 " documents disagree with %s shards[%d] (%" PRIu64 ")",
                           f->path, OFF_DOCS, h.documents, TITAN_SHARD_INDEX, i, f->documents);
    if (h.payload_xxh64 != want_xxh)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %d: payload checksum %016" PRIx64 " disagrees with %s shards[%d] (%016" PRIx64 ")",
                           f->path, OFF_PAYSUM, h.payload_xxh64, TITAN_SHARD_INDEX, i, want_xxh);
    if (h.tokens > (SIZE_MAX - TITAN_SHARD_HEADER_SIZE) / 4)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %d: token count %" PRIu64 " too large", f->path, OFF_TOKENS, h.tokens);
    size_t want = TITAN_SHARD_HEADER_SIZE + (size_t)h.tokens * 4;
    if (size < want)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %zu: truncated (file has %zu bytes, header says %zu)",
                           f->path, size, size, want);
    if (size > want)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %zu: %zu bytes after the last token",
                           f->path, want, size - want);

    const unsigned char *payload = f->map + TITAN_SHARD_HEADER_SIZE;
    uint64_t got = XXH64(payload, (size_t)h.tokens * 4, 0);
    if (got != h.payload_xxh64)
        return titan_error(TITAN_ERR_CORRUPT, "%s: byte %d: payload checksum mismatch (expected %016" PRIx64 ", got %016" PRIx64 ")",
                           f->path, TITAN_SHARD_HEADER_SIZE, h.payload_xxh64, got);
    /* The range check runs in blocks whose max the compiler vectorises; only
     * a bad block is searched for the first offending token. */
    const uint64_t block = 1 << 16;
    for (uint64_t b = 0; b < h.tokens; b += block) {
        uint64_t e = b + block < h.tokens ? b + block : h.tokens;
        uint32_t mx = 0;
        for (uint64_t k = b; k < e; k++) {
            uint32_t v = get_u32(payload + 4 * k);
            mx = v > mx ? v : mx;
        }
        if (mx < (uint32_t)d->vocab_size) continue;
        for (uint64_t k = b; k < e; k++) {
            uint32_t v = get_u32(payload + 4 * k);
            if (v >= (uint32_t)d->vocab_size)
                return titan_error(TITAN_ERR_FORMAT, "%s: byte %" PRIu64 ": token %" PRIu32 " outside the vocabulary (size %d)",
                                   f->path, TITAN_SHARD_HEADER_SIZE + 4 * k, v, d->vocab_size);
        }
    }
    return TITAN_OK;
}

static titan_status parse_index(titan_shard_dir *d, const json_t *root, const char *ipath, json_t **shards) {
    if (!json_is_object(root)) return titan_error(TITAN_ERR_FORMAT, "%s: not a JSON object", ipath);
    const char *fmt = "", *tok = "";
    uint64_t version = 0, vocab = 0;
    TITAN_TRY(index_string(root, "format", ipath, &fmt));
    if (strcmp(fmt, "titan-shard") != 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: format '%s' (expected 'titan-shard')", ipath, fmt);
    TITAN_TRY(index_uint(root, "version", ipath, &version));
    if (version != TITAN_SHARD_VERSION)
        return titan_error(TITAN_ERR_FORMAT, "%s: version %" PRIu64 " not supported (this build reads %d)",
                           ipath, version, TITAN_SHARD_VERSION);
    TITAN_TRY(index_string(root, "tokenizer", ipath, &tok));
    if (!tok[0] || strlen(tok) > TITAN_TOKENIZER_ID_MAX)
        return titan_error(TITAN_ERR_FORMAT, "%s: tokenizer id '%s' empty or longer than %d bytes", ipath, tok,
                           TITAN_TOKENIZER_ID_MAX);
    strcpy(d->tokenizer, tok);
    TITAN_TRY(index_uint(root, "vocab_size", ipath, &vocab));
    if (vocab == 0 || vocab > UINT32_MAX)
        return titan_error(TITAN_ERR_FORMAT, "%s: vocab_size %" PRIu64 " out of range", ipath, vocab);
    d->vocab_size = (int)vocab;
    *shards = json_object_get(root, "shards");
    if (!json_is_array(*shards)) return titan_error(TITAN_ERR_FORMAT, "%s: \"shards\" missing or not an array", ipath);
    if (json_array_size(*shards) > 9999999)
        return titan_error(TITAN_ERR_FORMAT, "%s: too many shards", ipath);
    return TITAN_OK;
}

/* Reads shards[i] of index.json into f (its path, counts and checksum). */
static titan_status index_entry(titan_shard_dir *d, const json_t *e, const char *ipath, size_t i, shard_file *f) {
    char where[PATH_MAX + 32];
    snprintf(where, sizeof where, "%s: shards[%zu]", ipath, i);
    const char *name = "", *hex = "";
    if (!json_is_object(e)) return titan_error(TITAN_ERR_FORMAT, "%s: not an object", where);
    TITAN_TRY(index_string(e, "file", where, &name));
    if (!name[0] || name[0] == '.' || strchr(name, '/'))
        return titan_error(TITAN_ERR_FORMAT, "%s: file '%s' is not a plain file name", where, name);
    TITAN_TRY(index_uint(e, "tokens", where, &f->tokens));
    TITAN_TRY(index_uint(e, "documents", where, &f->documents));
    TITAN_TRY(index_string(e, "xxh64", where, &hex));
    char *end;
    errno = 0;
    f->xxh64 = strtoull(hex, &end, 16);
    if (strlen(hex) != 16 || *end || errno)
        return titan_error(TITAN_ERR_FORMAT, "%s: xxh64 '%s' is not 16 hex digits", where, hex);
    return join(f->path, d->dir, name);
}

static int path_cmp(const void *a, const void *b) {
    return strcmp((*(shard_file *const *)a)->path, (*(shard_file *const *)b)->path);
}

/* Before any file is read: no file is listed twice (a crafted index naming
 * one file a million times would make a reader verify it a million times). */
static titan_status index_unique(const titan_shard_dir *d, const char *ipath) {
    if (d->n_files < 2) return TITAN_OK;
    shard_file **by_name = titan_alloc((size_t)d->n_files * sizeof *by_name, "shard names");
    if (!by_name) return TITAN_ERR_NOMEM;
    for (int i = 0; i < d->n_files; i++) by_name[i] = &d->files[i];
    qsort(by_name, (size_t)d->n_files, sizeof *by_name, path_cmp);
    titan_status st = TITAN_OK;
    for (int i = 1; i < d->n_files && st == TITAN_OK; i++)
        if (strcmp(by_name[i - 1]->path, by_name[i]->path) == 0)
            st = titan_error(TITAN_ERR_FORMAT, "%s: file '%s' is listed more than once", ipath,
                             strrchr(by_name[i]->path, '/') + 1);
    titan_free(by_name);
    return st;
}

static titan_status dir_load(titan_shard_dir *d, const char *dir) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    if (len >= PATH_MAX - 32) return titan_error(TITAN_ERR_IO, "%s: path too long", dir);
    memcpy(d->dir, dir, len);
    d->dir[len] = '\0';

    struct stat sb;
    if (stat(d->dir, &sb) != 0) return io_missing(d->dir, d->dir);
    if (!S_ISDIR(sb.st_mode)) {
        titan_status st = titan_error(TITAN_ERR_IO, "%s: not a directory", d->dir);
        titan_error_hint("give the directory titan-shard wrote (-o DIR)");
        return st;
    }
    char ipath[PATH_MAX];
    TITAN_TRY(join(ipath, d->dir, TITAN_SHARD_INDEX));
    if (access(ipath, R_OK) != 0) return io_missing(ipath, d->dir);
    /* a FIFO in its place would block the reader forever */
    if (stat(ipath, &sb) != 0 || !S_ISREG(sb.st_mode))
        return titan_error(TITAN_ERR_IO, "%s: not a regular file", ipath);
    json_error_t jerr;
    json_t *root = json_load_file(ipath, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return titan_error(TITAN_ERR_FORMAT, "%s: line %d column %d: %s", ipath, jerr.line, jerr.column, jerr.text);

    json_t *shards = NULL;
    titan_status st = parse_index(d, root, ipath, &shards);
    size_t n = st == TITAN_OK ? json_array_size(shards) : 0;
    if (st == TITAN_OK && n > 0) {
        d->files = titan_alloc(n * sizeof *d->files, "shard list");
        if (!d->files) st = TITAN_ERR_NOMEM;
    }
    for (size_t i = 0; st == TITAN_OK && i < n; i++) {
        st = index_entry(d, json_array_get(shards, i), ipath, i, &d->files[i]);
        d->n_files = (int)i + 1;
    }
    if (st == TITAN_OK) st = index_unique(d, ipath);
    for (int i = 0; st == TITAN_OK && i < d->n_files; i++) {
        shard_file *f = &d->files[i];
        f->start = d->tokens;
        st = verify_file(d, f, f->xxh64, i);
        d->tokens += f->tokens;
        d->documents += f->documents;
    }
    if (st == TITAN_OK) {
        uint64_t t = 0, docs = 0;
        st = index_uint(root, "tokens", ipath, &t);
        if (st == TITAN_OK) st = index_uint(root, "documents", ipath, &docs);
        if (st == TITAN_OK && (t != d->tokens || docs != d->documents))
            st = titan_error(TITAN_ERR_FORMAT, "%s: totals (%" PRIu64 " tokens, %" PRIu64 " documents) disagree with "
                             "the shards (%" PRIu64 ", %" PRIu64 ")", ipath, t, docs, d->tokens, d->documents);
    }
    json_decref(root);
    return st;
}

titan_status titan_shard_dir_open(titan_shard_dir **out, const char *dir) {
    *out = NULL;
    titan_shard_dir *d = titan_alloc(sizeof *d, "shard directory");
    if (!d) return TITAN_ERR_NOMEM;
    titan_status st = dir_load(d, dir);
    if (st != TITAN_OK) {
        titan_shard_dir_close(d);
        return st;
    }
    *out = d;
    return TITAN_OK;
}

void titan_shard_dir_close(titan_shard_dir *d) {
    if (!d) return;
    for (int i = 0; i < d->n_files; i++)
        if (d->files[i].map) munmap(d->files[i].map, d->files[i].map_len);
    titan_free(d->files);
    titan_free(d);
}

uint64_t titan_shard_dir_tokens(const titan_shard_dir *d) { return d->tokens; }
uint64_t titan_shard_dir_documents(const titan_shard_dir *d) { return d->documents; }
const char *titan_shard_dir_tokenizer(const titan_shard_dir *d) { return d->tokenizer; }
int titan_shard_dir_vocab_size(const titan_shard_dir *d) { return d->vocab_size; }
int titan_shard_dir_files(const titan_shard_dir *d) { return d->n_files; }
uint64_t titan_shard_dir_file_tokens(const titan_shard_dir *d, int i) {
    TITAN_ASSERT(i >= 0 && i < d->n_files);
    return d->files[i].tokens;
}

titan_status titan_shard_dir_read(const titan_shard_dir *d, uint64_t offset, uint32_t *out, size_t n) {
    if (offset > d->tokens || n > d->tokens - offset)
        return titan_error(TITAN_ERR_USAGE, "%s: tokens [%" PRIu64 ", %" PRIu64 ") past the end (%" PRIu64 " tokens)",
                           d->dir, offset, offset + n, d->tokens);
    /* The last file whose start <= offset (empty files are skipped over). */
    int lo = 0, hi = d->n_files - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->files[mid].start <= offset) lo = mid;
        else hi = mid - 1;
    }
    for (int i = lo; n > 0; i++) {
        const shard_file *f = &d->files[i];
        uint64_t k = offset - f->start;
        if (k >= f->tokens) continue;
        size_t m = f->tokens - k < n ? (size_t)(f->tokens - k) : n;
        const unsigned char *p = f->map + TITAN_SHARD_HEADER_SIZE + 4 * k;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(out, p, m * 4);
#else
        for (size_t j = 0; j < m; j++) out[j] = get_u32(p + 4 * j);
#endif
        out += m;
        offset += m;
        n -= m;
    }
    return TITAN_OK;
}

static int is_shard_name(const char *s) {
    size_t n = strlen(s);
    if (n > 4 && strcmp(s + n - 4, ".tmp") == 0) return 1;
    return strncmp(s, "shard-", 6) == 0 && n > 10 && strcmp(s + n - 4, ".bin") == 0;
}

int titan_shard_dir_is_shard_dir(const char *path) {
    DIR *dp = opendir(path);
    if (!dp) return 0;
    int has_index = 0, entries = 0, others = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        entries++;
        if (strcmp(e->d_name, TITAN_SHARD_INDEX) == 0) has_index = 1;
        else if (!is_shard_name(e->d_name)) others++;
    }
    closedir(dp);
    return others == 0 && (has_index || entries > 0);
}
