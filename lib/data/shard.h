/* shard.h - the token shard directory (see titan-shard(5)).
 *
 * A shard directory holds shard-NNNNN.bin files, each a 64-byte header and a
 * payload of little-endian uint32 tokens, and an index.json listing them in
 * order. Documents are framed <|begin_of_text|> text <|end_of_text|> and the
 * shards together form one token stream; a document may continue from one
 * shard into the next. Files are written NAME.tmp, synced, renamed; the index
 * is written last, so a reader never sees half a directory. */
#ifndef TITAN_DATA_SHARD_H
#define TITAN_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/tokenizer.h"

#define TITAN_SHARD_MAGIC "TITANSHD"
#define TITAN_SHARD_VERSION 1
#define TITAN_SHARD_HEADER_SIZE 64
#define TITAN_SHARD_INDEX "index.json"
#define TITAN_SHARD_DEFAULT_TOKENS 16777216ull

/* The header of one .bin file, decoded. Byte layout in titan-shard(5). */
typedef struct {
    uint32_t version;       /* TITAN_SHARD_VERSION */
    uint32_t header_size;   /* TITAN_SHARD_HEADER_SIZE */
    uint64_t tokens;        /* payload length in tokens */
    uint64_t documents;     /* documents that start in this shard */
    uint64_t payload_xxh64; /* XXH64 (seed 0) of the payload bytes */
    uint32_t vocab_size;    /* every token is < vocab_size */
    char tokenizer[TITAN_TOKENIZER_ID_MAX + 1];
} titan_shard_header;

/* Writes the 64 header bytes, magic and header checksum included. */
void titan_shard_header_encode(const titan_shard_header *h, unsigned char out[TITAN_SHARD_HEADER_SIZE]);
/* Checks magic, version, size and checksum of n header bytes; errors are
 * TITAN_ERR_FORMAT naming `name` and the byte offset. */
titan_status titan_shard_header_decode(titan_shard_header *h, const unsigned char *buf, size_t n,
                                       const char *name);

/* ---- reading ---- */

typedef struct titan_shard_dir titan_shard_dir;

/* Reads the index and every header, maps the files, and verifies header
 * checksums, file sizes, tokenizer and vocabulary agreement, payload checksums
 * and token ranges. Missing directory or index: TITAN_ERR_IO with a hint;
 * anything inconsistent: TITAN_ERR_FORMAT naming the file and byte offset. */
titan_status titan_shard_dir_open(titan_shard_dir **out, const char *dir);
void titan_shard_dir_close(titan_shard_dir *d);

uint64_t titan_shard_dir_tokens(const titan_shard_dir *d);
uint64_t titan_shard_dir_documents(const titan_shard_dir *d);
const char *titan_shard_dir_tokenizer(const titan_shard_dir *d);
int titan_shard_dir_vocab_size(const titan_shard_dir *d);
int titan_shard_dir_files(const titan_shard_dir *d);           /* number of .bin files */
uint64_t titan_shard_dir_file_tokens(const titan_shard_dir *d, int i);

/* Copies tokens [offset, offset+n) of the whole stream (the shards in index
 * order) into out. A range past the end is TITAN_ERR_USAGE. */
titan_status titan_shard_dir_read(const titan_shard_dir *d, uint64_t offset, uint32_t *out, size_t n);

/* 1 when path holds shard files (index.json, shard-*.bin, *.tmp) and nothing
 * else, so that overwriting it with --force loses nothing; 0 otherwise. */
int titan_shard_dir_is_shard_dir(const char *path);

/* ---- writing ---- */

typedef struct titan_shard_writer titan_shard_writer;

typedef struct {
    uint64_t documents;
    uint64_t tokens;      /* framing tokens included */
    uint64_t text_bytes;  /* bytes of text given to titan_shard_writer_add_text */
    int files;
} titan_shard_stats;

/* Prepares dir: creates it when missing; accepts an empty directory; an
 * existing shard directory only with force (its index is removed at once, old
 * shard files once the new index is in place); refuses anything else
 * (TITAN_ERR_USAGE). Each .bin holds shard_tokens tokens (the last fewer). */
titan_status titan_shard_writer_open(titan_shard_writer **out, const char *dir,
                                     const titan_tokenizer *tok, uint64_t shard_tokens, int force);
/* Encodes one document with the writer's tokenizer and appends it framed. */
titan_status titan_shard_writer_add_text(titan_shard_writer *w, const char *text, size_t n);
/* Appends one already-encoded document, framed; ids must be < vocab size. */
titan_status titan_shard_writer_add_tokens(titan_shard_writer *w, const uint32_t *ids, size_t n);
/* Appends one document encoded with the writer's tokenizer (by another
 * thread, see shard_pipeline.h), framed; the ids are trusted, not checked.
 * text_bytes: the length of its text, for the statistics. */
titan_status titan_shard_writer_add_encoded(titan_shard_writer *w, const uint32_t *ids, size_t n,
                                           size_t text_bytes);
/* Closes the last shard and writes the index. */
titan_status titan_shard_writer_finish(titan_shard_writer *w, titan_shard_stats *stats);
/* Frees the writer; one that was not finished removes every file it wrote
 * (and the directory when it created it). */
void titan_shard_writer_free(titan_shard_writer *w);

#endif
