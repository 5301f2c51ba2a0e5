/* gguf.h - writing GGUF files (ggml / llama.cpp), and titan checkpoints as GGUF.
 *
 * A GGUF file (version 3, little-endian) is: "GGUF", u32 version, u64 tensor
 * count, u64 key/value count; the key/value pairs (u64-length strings as keys,
 * a u32 value type, the value; arrays are a u32 element type, a u64 count and
 * the elements); per tensor its name, u32 n_dims, the dims innermost first
 * (ggml's ne[], the reverse of a row-major shape), u32 ggml type and u64
 * offset into the data section; zero padding to the alignment (32); then the
 * data, each tensor starting at a multiple of the alignment.
 *
 * The writer plans the whole header first (keys, then tensors), then streams
 * the data tensor by tensor, so a model never has to fit in memory twice. The
 * file appears under its name only when finished (PATH.tmp, fsync, rename). */
#ifndef TITAN_INTERCHANGE_GGUF_H
#define TITAN_INTERCHANGE_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/tokenizer.h"
#include "tensor/dtype.h"

#define TITAN_GGUF_VERSION 3
#define TITAN_GGUF_ALIGNMENT 32
#define TITAN_GGUF_NAME_MAX 63 /* ggml keeps tensor names in char[64] */

/* Value types of the key/value section. */
typedef enum {
    TITAN_GGUF_U8 = 0, TITAN_GGUF_I8 = 1, TITAN_GGUF_U16 = 2, TITAN_GGUF_I16 = 3,
    TITAN_GGUF_U32 = 4, TITAN_GGUF_I32 = 5, TITAN_GGUF_F32 = 6, TITAN_GGUF_BOOL = 7,
    TITAN_GGUF_STRING = 8, TITAN_GGUF_ARRAY = 9, TITAN_GGUF_U64 = 10, TITAN_GGUF_I64 = 11,
    TITAN_GGUF_F64 = 12,
} titan_gguf_value_type;

/* ggml tensor types titan writes. */
#define TITAN_GGML_TYPE_F32 0
#define TITAN_GGML_TYPE_F16 1
#define TITAN_GGML_TYPE_BF16 30

/* llama.cpp's token types (tokenizer.ggml.token_type). */
enum { TITAN_GGUF_TOKEN_NORMAL = 1, TITAN_GGUF_TOKEN_CONTROL = 3, TITAN_GGUF_TOKEN_USER_DEFINED = 4,
       TITAN_GGUF_TOKEN_UNUSED = 5 };

/* ---- the format ---- */

typedef struct titan_gguf_writer titan_gguf_writer;

titan_status titan_gguf_writer_new(titan_gguf_writer **out);
/* Frees w; a file begun and not finished is removed. NULL is fine. */
void titan_gguf_writer_free(titan_gguf_writer *w);

/* Key/value pairs, in the order added. A key may appear once. */
titan_status titan_gguf_kv_u32(titan_gguf_writer *w, const char *key, uint32_t v);
titan_status titan_gguf_kv_i64(titan_gguf_writer *w, const char *key, int64_t v);
titan_status titan_gguf_kv_f32(titan_gguf_writer *w, const char *key, float v);
titan_status titan_gguf_kv_bool(titan_gguf_writer *w, const char *key, int v);
titan_status titan_gguf_kv_str(titan_gguf_writer *w, const char *key, const char *v);
/* An array of n elements of type elem (U32, I32, F32 or STRING): follow with
 * exactly n calls of the matching titan_gguf_arr_* before the next key. */
titan_status titan_gguf_kv_array(titan_gguf_writer *w, const char *key, titan_gguf_value_type elem, uint64_t n);
titan_status titan_gguf_arr_str(titan_gguf_writer *w, const char *s, size_t len);
titan_status titan_gguf_arr_i32(titan_gguf_writer *w, int32_t v);
titan_status titan_gguf_arr_f32(titan_gguf_writer *w, float v);

/* A tensor of `dtype` (f32, f16 or bf16) with a row-major shape (ndim 1..4). */
titan_status titan_gguf_add_tensor(titan_gguf_writer *w, const char *name, titan_dtype dtype, int ndim,
                                   const int64_t *shape);
/* Bytes of the data section (padding included), known once every tensor is added. */
uint64_t titan_gguf_data_bytes(const titan_gguf_writer *w);

/* Writes PATH.tmp: the header and the tensor infos. */
titan_status titan_gguf_begin(titan_gguf_writer *w, const char *path);
/* data: the dense row-major elements of the next tensor, in its dtype. */
titan_status titan_gguf_write(titan_gguf_writer *w, const void *data);
/* Pads, fsyncs, renames PATH.tmp to PATH and fsyncs the directory. */
titan_status titan_gguf_finish(titan_gguf_writer *w);

/* ---- tokenizers as llama.cpp vocabularies (gguf_vocab.c) ---- */

/* Writes the tokenizer.ggml.* keys for t as a "gpt2" (byte-level BPE)
 * vocabulary of n_vocab tokens (n_vocab >= the tokenizer's size: the rest
 * are unused "[PADn]" tokens). byte: the 256 bytes as GPT-2's byte-to-unicode
 * characters and no merges, so llama.cpp tokenizes text byte by byte as titan
 * does; tiktoken:PATH: the merges follow from the ranks; hf:PATH: the merges
 * and added tokens are those of the tokenizer.json it was opened from. */
titan_status titan_gguf_put_vocab(titan_gguf_writer *w, const titan_tokenizer *t, int n_vocab);

/* ---- titan checkpoints as GGUF (gguf_export.c) ---- */

typedef struct {
    titan_dtype dtype;          /* f32, bf16 or f16 for the matrices; 1-D tensors stay f32 */
    const char *tokenizer;      /* spec overriding the checkpoint's own (ckpt_tokenizer.h); NULL: its own */
    int64_t context_length;     /* 0: rope_original_context (times the scaling factor when scaled) */
    int force;                  /* replace an existing file */
} titan_gguf_export_opts;

/* Writes the checkpoint's parameters as a llama.cpp "llama" model: the
 * hyperparameters as llama.* keys, the tokenizer, Llama 3.1 RoPE scaling as a
 * rope_freqs.weight tensor of frequency divisors. titan keeps q and k in
 * Meta's interleaved RoPE layout, which is the one llama.cpp's "llama"
 * architecture rotates, so they are written as they are. */
titan_status titan_gguf_export(const char *ckpt_path, const char *out_path, const titan_gguf_export_opts *o);

#endif
