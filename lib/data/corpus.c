/* corpus.c - input texts to documents: files, directories, archives and
 * compressed files through libarchive, JSON and JSON Lines through jansson. */
#include "data/corpus.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

#define SNIFF_BYTES 8192
#define MAX_DEPTH 64
#define SOURCE_MAX (PATH_MAX + 512)      /* "archive:entry" */
#define WHERE_MAX (SOURCE_MAX + 32)      /* "archive:entry[index]" */

typedef enum { KIND_TEXT, KIND_JSON, KIND_JSONL, KIND_SKIP } source_kind;

typedef struct {
    const titan_corpus_opts *opts;
    titan_corpus_fn fn;
    void *ctx;
    titan_corpus_stats *stats;
    char *buf; /* one source's bytes */
    size_t cap;
    uint64_t consumed; /* input bytes of the streams already finished */
} reader;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

static source_kind kind_of(const char *name) {
    static const char *const skip[] = {".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx", ".map", ".css"};
    if (ends_with(name, ".json")) return KIND_JSON;
    if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson")) return KIND_JSONL;
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (ends_with(name, skip[i])) return KIND_SKIP;
    return KIND_TEXT;
}

/* The name a compressed single file stands for: "a.jsonl.zst" -> "a.jsonl". */
static void strip_compression(char *name) {
    static const char *const sfx[] = {".gz", ".zst", ".zstd", ".xz", ".bz2", ".lz4", ".lzma", ".lz", ".Z", ".lzo"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
        if (ends_with(name, sfx[i]) && strlen(name) > strlen(sfx[i])) {
            name[strlen(name) - strlen(sfx[i])] = '\0';
            return;
        }
}

static titan_status emit(reader *r, const char *source, const char *text, size_t n) {
    if (n == 0) return TITAN_OK;
    r->stats->documents++;
    r->stats->bytes += n;
    return r->fn(r->ctx, source, text, n);
}

static titan_status read_json(reader *r, const char *source, size_t n) {
    json_error_t jerr;
    json_t *root = json_loadb(r->buf, n, JSON_ALLOW_NUL, &jerr);
    if (!root)
        return titan_error(TITAN_ERR_FORMAT, "%s: line %d column %d: %s", source, jerr.line, jerr.column, jerr.text);
    size_t i;
    json_t *v;
    int strings = json_is_array(root);
    json_array_foreach(root, i, v) if (!json_is_string(v)) strings = 0;
    if (!strings) {
        titan_debug("%s: skipped: not a JSON array of strings", source);
        r->stats->skipped++;
        json_decref(root);
        return TITAN_OK;
    }
    titan_status st = TITAN_OK;
    size_t docs = 0;
    json_array_foreach(root, i, v) {
        char where[WHERE_MAX];
        snprintf(where, sizeof where, "%s[%zu]", source, i);
        st = emit(r, where, json_string_value(v), json_string_length(v));
        if (st != TITAN_OK) break;
        docs++;
    }
    json_decref(root);
    titan_debug("%s: %zu documents", source, docs);
    return st;
}

static titan_status read_jsonl(reader *r, const char *source, size_t n) {
    const char *field = r->opts && r->opts->field ? r->opts->field : "text";
    size_t line = 0, docs = 0;
    for (size_t pos = 0; pos < n;) {
        const char *s = r->buf + pos;
        const char *nl = memchr(s, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - s) : n - pos;
        pos += len + (nl ? 1 : 0);
        line++;
        size_t k = 0;
        while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
        if (k == len) continue; /* blank line */
        json_error_t jerr;
        json_t *obj = json_loadb(s, len, JSON_ALLOW_NUL, &jerr);
        if (!obj)
            return titan_error(TITAN_ERR_FORMAT, "%s: line %zu column %d: %s", source, line, jerr.column, jerr.text);
        json_t *v = json_object_get(obj, field);
        if (!json_is_string(v)) {
            json_decref(obj);
            titan_status st = titan_error(TITAN_ERR_FORMAT, "%s: line %zu: no string member \"%s\"", source, line, field);
            titan_error_hint("name the member that holds the text with --field NAME");
            return st;
        }
        char where[WHERE_MAX];
        snprintf(where, sizeof where, "%s:%zu", source, line);
        titan_status st = emit(r, where, json_string_value(v), json_string_length(v));
        json_decref(obj);
        TITAN_TRY(st);
        docs++;
    }
    titan_debug("%s: %zu documents", source, docs);
    return TITAN_OK;
}

/* Reads the current entry's data into r->buf. *binary is set (and the rest of
 * the entry left unread) when a text source shows a NUL in its first 8 KiB. */
static titan_status slurp(reader *r, struct archive *a, const char *source, source_kind kind,
                          size_t *out_n, int *binary) {
    size_t n = 0;
    *binary = 0;
    for (;;) {
        if (r->cap - n < 65536) {
            size_t cap = r->cap ? 2 * r->cap : 1 << 20;
            char *b = realloc(r->buf, cap);
            if (!b) return titan_error(TITAN_ERR_NOMEM, "%s: cannot hold %zu bytes", source, cap);
            r->buf = b;
            r->cap = cap;
        }
        la_ssize_t k = archive_read_data(a, r->buf + n, r->cap - n - 1);
        if (k < 0)
            return titan_error(TITAN_ERR_FORMAT, "%s: byte %zu: %s", source, n, archive_error_string(a));
        r->stats->input_bytes = r->consumed + (uint64_t)archive_filter_bytes(a, -1);
        if (r->opts && r->opts->tick) r->opts->tick(r->ctx);
        if (k == 0) break;
        size_t before = n;
        n += (size_t)k;
        if (kind == KIND_TEXT && before < SNIFF_BYTES) {
            size_t end = n < SNIFF_BYTES ? n : SNIFF_BYTES;
            if (memchr(r->buf + before, '\0', end - before)) {
                *binary = 1;
                return TITAN_OK;
            }
        }
    }
    r->buf[n] = '\0';
    *out_n = n;
    return TITAN_OK;
}

/* name: what a raw (single, maybe compressed) stream is called, for its kind. */
static titan_status read_archive(reader *r, struct archive *a, const char *label, const char *name_of_raw) {
    struct archive_entry *e;
    for (;;) {
        int rc = archive_read_next_header(a, &e);
        if (rc == ARCHIVE_EOF) return TITAN_OK;
        if (rc == ARCHIVE_WARN) titan_debug("%s: %s", label, archive_error_string(a));
        else if (rc != ARCHIVE_OK)
            return titan_error(TITAN_ERR_FORMAT, "%s: %s", label, archive_error_string(a));

        char source[SOURCE_MAX], name[PATH_MAX];
        int raw = archive_format(a) == ARCHIVE_FORMAT_RAW;
        if (raw) {
            const char *base = strrchr(name_of_raw, '/');
            snprintf(name, sizeof name, "%s", base ? base + 1 : name_of_raw);
            strip_compression(name);
            snprintf(source, sizeof source, "%s", label);
        } else {
            const char *p = archive_entry_pathname(e);
            snprintf(name, sizeof name, "%s", p ? p : "?");
            snprintf(source, sizeof source, "%s:%s", label, name);
            if (archive_entry_filetype(e) != AE_IFREG) {
                if (archive_entry_filetype(e) != AE_IFDIR) {
                    titan_debug("%s: skipped: not a regular file", source);
                    r->stats->skipped++;
                }
                continue;
            }
        }
        r->stats->sources++;
        source_kind kind = kind_of(name);
        if (kind == KIND_SKIP) {
            titan_debug("%s: skipped: program source, not text", source);
            r->stats->skipped++;
            continue;
        }
        size_t n = 0;
        int binary;
        TITAN_TRY(slurp(r, a, source, kind, &n, &binary));
        if (binary) {
            titan_debug("%s: skipped: binary (NUL byte in the first %d bytes)", source, SNIFF_BYTES);
            r->stats->skipped++;
            continue;
        }
        if (kind == KIND_JSON) TITAN_TRY(read_json(r, source, n));
        else if (kind == KIND_JSONL) TITAN_TRY(read_jsonl(r, source, n));
        else {
            if (n == 0) titan_debug("%s: skipped: empty", source);
            else titan_debug("%s: 1 document", source);
            TITAN_TRY(emit(r, source, r->buf, n));
        }
    }
}

/* Opens a file or stdin (path NULL) with every filter and format; mtree is
 * left out on purpose: a text file that looks like an mtree spec would make
 * libarchive read the local files it names. */
static titan_status read_stream(reader *r, const char *path, const char *label, const char *name_of_raw,
                                uint64_t size) {
    struct archive *a = archive_read_new();
    if (!a) return titan_error(TITAN_ERR_NOMEM, "%s: cannot create an archive reader", label);
    archive_read_support_filter_all(a);
    archive_read_support_format_7zip(a);
    archive_read_support_format_ar(a);
    archive_read_support_format_cab(a);
    archive_read_support_format_cpio(a);
    archive_read_support_format_empty(a);
    archive_read_support_format_iso9660(a);
    archive_read_support_format_lha(a);
    archive_read_support_format_rar(a);
    archive_read_support_format_rar5(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_warc(a);
    archive_read_support_format_xar(a);
    archive_read_support_format_zip(a);
    archive_read_support_format_raw(a);
    int rc = path ? archive_read_open_filename(a, path, 1 << 16) : archive_read_open_fd(a, 0, 1 << 16);
    titan_status st;
    if (rc != ARCHIVE_OK) {
        int err = archive_errno(a);
        st = titan_error(err == ENOENT || err == EACCES ? TITAN_ERR_IO : TITAN_ERR_FORMAT, "%s: %s", label,
                         archive_error_string(a) ? archive_error_string(a) : "cannot open");
    } else {
        st = read_archive(r, a, label, name_of_raw);
        /* A stream counts whole once read, whatever libarchive left unread. */
        uint64_t used = (uint64_t)archive_filter_bytes(a, -1);
        r->consumed += used > size ? used : size;
        r->stats->input_bytes = r->consumed;
    }
    archive_read_free(a);
    return st;
}

static int cmp_names(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static titan_status read_path(reader *r, const char *path, int depth);

static titan_status read_dir(reader *r, const char *path, int depth) {
    if (depth > MAX_DEPTH) return titan_error(TITAN_ERR_IO, "%s: directories nested deeper than %d", path, MAX_DEPTH);
    DIR *dp = opendir(path);
    if (!dp) return titan_error(TITAN_ERR_IO, "%s: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    titan_status st = TITAN_OK;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **g = realloc(names, cap * sizeof *g);
            if (!g) {
                st = titan_error(TITAN_ERR_NOMEM, "%s: cannot list", path);
                break;
            }
            names = g;
        }
        if (!(names[n] = strdup(e->d_name))) {
            st = titan_error(TITAN_ERR_NOMEM, "%s: cannot list", path);
            break;
        }
        n++;
    }
    closedir(dp);
    if (st == TITAN_OK) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; st == TITAN_OK && i < n; i++) {
        char child[PATH_MAX];
        if ((size_t)snprintf(child, sizeof child, "%s%s%s", path, ends_with(path, "/") ? "" : "/", names[i]) >= sizeof child)
            st = titan_error(TITAN_ERR_IO, "%s/%s: path too long", path, names[i]);
        else
            st = read_path(r, child, depth + 1);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

static titan_status read_path(reader *r, const char *path, int depth) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return titan_error(TITAN_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISLNK(sb.st_mode)) {
        if (stat(path, &sb) != 0) return titan_error(TITAN_ERR_IO, "%s: %s", path, strerror(errno));
        if (S_ISDIR(sb.st_mode) && depth > 0) { /* a linked directory could loop */
            titan_debug("%s: skipped: symbolic link to a directory", path);
            r->stats->skipped++;
            return TITAN_OK;
        }
    }
    if (S_ISDIR(sb.st_mode)) return read_dir(r, path, depth);
    /* A FIFO, socket or device found in a directory could block forever or
     * never end; one named on the command line is read like any stream. */
    if (!S_ISREG(sb.st_mode) && depth > 0) {
        titan_info("%s: skipped: %s, not a regular file (name it on the command line to read it)", path,
                   S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISSOCK(sb.st_mode) ? "a socket"
                   : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : "a special file");
        r->stats->skipped++;
        return TITAN_OK;
    }
    if (access(path, R_OK) != 0) return titan_error(TITAN_ERR_IO, "%s: %s", path, strerror(errno));
    return read_stream(r, path, path, path, (uint64_t)sb.st_size);
}

/* Follows read_path's walk: links to directories only at the top. */
static uint64_t size_of(const char *path, int depth) {
    struct stat sb;
    if (depth > MAX_DEPTH || stat(path, &sb) != 0) return 0;
    if (S_ISREG(sb.st_mode)) return (uint64_t)sb.st_size;
    if (!S_ISDIR(sb.st_mode)) return 0;
    struct stat lb;
    if (depth > 0 && (lstat(path, &lb) != 0 || S_ISLNK(lb.st_mode))) return 0;
    DIR *dp = opendir(path);
    if (!dp) return 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char child[PATH_MAX];
        if ((size_t)snprintf(child, sizeof child, "%s/%s", path, e->d_name) < sizeof child)
            total += size_of(child, depth + 1);
    }
    closedir(dp);
    return total;
}

uint64_t titan_corpus_size(const char *input) {
    if (strcmp(input, "-") == 0) {
        struct stat sb;
        if (fstat(STDIN_FILENO, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
        off_t at = lseek(STDIN_FILENO, 0, SEEK_CUR);
        return at >= 0 && at <= sb.st_size ? (uint64_t)(sb.st_size - at) : (uint64_t)sb.st_size;
    }
    return size_of(input, 0);
}

titan_status titan_corpus_check(const char *input) {
    if (strcmp(input, "-") == 0) return TITAN_OK;
    struct stat sb;
    if (stat(input, &sb) != 0) return titan_error(TITAN_ERR_IO, "%s: %s", input, strerror(errno));
    if (access(input, R_OK) != 0) return titan_error(TITAN_ERR_IO, "%s: %s", input, strerror(errno));
    return TITAN_OK;
}

titan_status titan_corpus_read(const char *input, const titan_corpus_opts *opts,
                               titan_corpus_fn fn, void *ctx, titan_corpus_stats *stats) {
    reader r = {.opts = opts, .fn = fn, .ctx = ctx, .stats = stats};
    const char *sname = opts && opts->stdin_name ? opts->stdin_name : "<stdin>";
    r.consumed = stats->input_bytes;
    titan_status st = strcmp(input, "-") == 0 ? read_stream(&r, NULL, "<stdin>", sname, 0) : read_path(&r, input, 0);
    free(r.buf);
    return st;
}

titan_status titan_corpus_read_all(char *const *inputs, int n, const titan_corpus_opts *opts,
                                   titan_corpus_fn fn, void *ctx, titan_corpus_stats *stats) {
    titan_status st = TITAN_OK;
    for (int i = 0; st == TITAN_OK && i < n; i++) {
        titan_debug("reading %s", inputs[i]);
        st = titan_corpus_read(inputs[i], opts, fn, ctx, stats);
    }
    if (st == TITAN_OK && stats->documents == 0) {
        st = titan_error(TITAN_ERR_FORMAT, "no documents in the input (%" PRIu64 " sources read, %" PRIu64 " skipped)",
                         stats->sources, stats->skipped);
        titan_error_hint("run with -v to see what was skipped");
    }
    return st;
}
