/* safetensors.h - reading and writing the safetensors format (Hugging Face).
 *
 * A file is: an 8-byte little-endian header length N, N bytes of JSON
 * {"NAME": {"dtype": "F32"|"BF16"|"F16", "shape": [...], "data_offsets": [b, e]},
 *  "__metadata__": {"key": "string", ...}}, then the data; offsets are relative
 * to the start of the data. Only the float dtypes titan uses are understood.
 * The reader checks the whole header on open (length, JSON, dtypes, shapes
 * against byte ranges, ranges inside the file, alignment, no overlaps), so a
 * malformed file is one clear TITAN_ERR_FORMAT (a file shorter than its
 * header's data: TITAN_ERR_CORRUPT), never a crash. */
#ifndef TITAN_INTERCHANGE_SAFETENSORS_H
#define TITAN_INTERCHANGE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tensor/box.h"
#include "tensor/dtype.h"

/* Headers longer than this are refused as absurd. */
#define TITAN_ST_HEADER_MAX ((uint64_t)100 << 20)

typedef struct {
    const char *name; /* valid until close */
    titan_dtype dtype;
    int ndim; /* 0..TITAN_MAX_DIMS (0 = scalar) */
    int64_t shape[TITAN_MAX_DIMS];
    uint64_t begin, end; /* byte range within the data section */
} titan_st_tensor;

/* ---- reading ---- */

typedef struct titan_st_file titan_st_file;

titan_status titan_st_open(titan_st_file **out, const char *path);
/* Validates the header of a whole file held in memory (label names it in
 * messages); tensors can be listed, not read. For tests and fuzzing. */
titan_status titan_st_parse(titan_st_file **out, const void *data, size_t len, const char *label);
void titan_st_close(titan_st_file *f);

int titan_st_num_tensors(const titan_st_file *f);
const titan_st_tensor *titan_st_tensor_at(const titan_st_file *f, int i); /* header order */
const titan_st_tensor *titan_st_find(const titan_st_file *f, const char *name); /* NULL if absent */
/* A string of "__metadata__", or NULL. */
const char *titan_st_metadata(const titan_st_file *f, const char *key);
/* Reads tensor t whole into dst as `dtype` (float dtypes convert into each other). */
titan_status titan_st_read(titan_st_file *f, const titan_st_tensor *t, titan_dtype dtype, void *dst);

/* "F32", "BF16", "F16" (NULL for dtypes safetensors files from titan never hold). */
const char *titan_st_dtype_name(titan_dtype t);

/* ---- writing ---- */

typedef struct titan_st_writer titan_st_writer;

/* Plans a file: add every tensor (and metadata), then begin, then write each
 * tensor's data in the order added, then finish. The file appears under its
 * name only at finish (written as PATH.tmp, fsynced, renamed). */
titan_status titan_st_writer_new(titan_st_writer **out);
titan_status titan_st_writer_add(titan_st_writer *w, const char *name, titan_dtype dtype, int ndim,
                                 const int64_t *shape);
titan_status titan_st_writer_meta(titan_st_writer *w, const char *key, const char *value);
uint64_t titan_st_writer_data_bytes(const titan_st_writer *w);
titan_status titan_st_writer_begin(titan_st_writer *w, const char *path);
/* data: the dense elements of the next tensor, in its dtype. */
titan_status titan_st_writer_write(titan_st_writer *w, const void *data);
titan_status titan_st_writer_finish(titan_st_writer *w);
/* Frees w; a file begun and not finished is removed. NULL is fine. */
void titan_st_writer_free(titan_st_writer *w);

#endif
