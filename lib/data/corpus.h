/* corpus.h - reads input texts as documents, through libarchive.
 *
 * An input is a file, a directory (walked recursively in byte order of the
 * names, so the result never depends on the file system), an archive or
 * compressed file (tar, zip, 7z, cpio, iso, .tgz, .gz, .zst, .xz, .bz2 ...),
 * or "-" for stdin. Every file or archive entry is a source:
 *   *.json            a JSON array of strings: one document per string
 *   *.jsonl, *.ndjson one JSON object per line: one document per line, the
 *                     text in member "text" (or opts.field)
 *   anything else     one document per file
 * A compressed single file is named by its name without the compression
 * suffix (notes.jsonl.zst is JSON Lines). Skipped, with a debug message:
 * entries that are not regular files, binaries (a NUL byte in the first
 * 8 KiB), JavaScript/TypeScript sources, source maps and style sheets (which
 * npm packages carry beside their data), .json files that are not an array of
 * strings, and empty documents. Entries are read in archive order. A FIFO,
 * socket or device inside a directory is skipped with a note (reading it
 * could block forever); one named as an input is read like any stream. */
#ifndef TITAN_DATA_CORPUS_H
#define TITAN_DATA_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct {
    const char *field;      /* JSON Lines member holding the text; NULL means "text" */
    const char *stdin_name; /* the file name stdin stands for ("x.jsonl"), which sets
                               its kind; NULL: plain text (or an archive) */
    void (*tick)(void *ctx);  /* when set, called with the callback's ctx after each
                                 block of input read, inside large files too (for a
                                 progress line: stats.input_bytes has moved) */
} titan_corpus_opts;

typedef struct {
    uint64_t sources;   /* files and archive entries read */
    uint64_t skipped;   /* sources skipped (see above) */
    uint64_t documents; /* documents handed to the callback */
    uint64_t bytes;     /* their bytes of text */
    uint64_t input_bytes; /* bytes of the input files consumed so far, as stored
                             (compressed); for progress against titan_corpus_size */
} titan_corpus_stats;

/* Receives one document; source names it ("c.tgz:pkg/doc-3.json[17]"). A
 * status other than TITAN_OK stops the reading and is returned. */
typedef titan_status (*titan_corpus_fn)(void *ctx, const char *source, const char *text, size_t n);

/* Checks that an input exists and can be read, before any output is made:
 * TITAN_ERR_IO naming the path otherwise. "-" always passes. */
titan_status titan_corpus_check(const char *input);

/* The bytes an input holds as stored: a file's size, the sum over the
 * regular files of a directory (walked as titan_corpus_read walks it), the
 * size of stdin when it is a regular file. 0 when not known (a pipe) or on
 * any error, which titan_corpus_read reports in its turn. */
uint64_t titan_corpus_size(const char *input);

/* Reads one input and calls fn for each document, in a fixed order. stats is
 * added to (not reset). Unreadable input: TITAN_ERR_IO; corrupt archive or
 * JSON: TITAN_ERR_FORMAT naming the source and the place. */
titan_status titan_corpus_read(const char *input, const titan_corpus_opts *opts,
                               titan_corpus_fn fn, void *ctx, titan_corpus_stats *stats);

/* titan_corpus_read over n inputs in turn, stopping at the first error. No
 * document in any of them (stats->documents still 0 at the end) is
 * TITAN_ERR_FORMAT, counting the sources read and skipped. */
titan_status titan_corpus_read_all(char *const *inputs, int n, const titan_corpus_opts *opts,
                                   titan_corpus_fn fn, void *ctx, titan_corpus_stats *stats);

#endif
