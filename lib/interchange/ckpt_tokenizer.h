/* ckpt_tokenizer.h - the tokenizer travels with the model: a checkpoint
 * records its tokenizer's id ("tokenizer" metadata) and, for a tokenizer
 * made from a file, carries a copy of that file in the step dir
 * ("tokenizer.file" metadata names it: tokenizer.tiktoken or
 * tokenizer.json; see titan-checkpoint(5)). Exports and tools open the
 * tokenizer from the checkpoint alone. */
#ifndef TITAN_INTERCHANGE_CKPT_TOKENIZER_H
#define TITAN_INTERCHANGE_CKPT_TOKENIZER_H

#include <stddef.h>

#include "ckpt/ckpt.h"
#include "data/tokenizer.h"

/* The carried file's name for a tokenizer kind ("tiktoken" -> "tokenizer.tiktoken",
 * "hf" -> "tokenizer.json"); NULL for a kind without a file. */
const char *titan_ckpt_tokenizer_file_name(const char *kind);

/* Records t in w: its id, and its file (when it has one) as a carried file. */
titan_status titan_ckpt_put_tokenizer(titan_ckpt_writer *w, const titan_tokenizer *t);

/* The same for a spec: opened, recorded and closed; NULL: only the id
 * `none` is recorded (an import that names no tokenizer). */
titan_status titan_ckpt_put_tokenizer_spec(titan_ckpt_writer *w, const char *spec, const char *none);

/* The spec that opens ck's tokenizer ("byte", "tiktoken:STEP/tokenizer.tiktoken",
 * "hf:STEP/tokenizer.json") into spec. TITAN_ERR_USAGE when the checkpoint
 * records another id and carries no copy (written before checkpoints
 * carried their tokenizer, or an HF import without one): the message says
 * to pass the file. */
titan_status titan_ckpt_tokenizer_spec(const titan_ckpt *ck, char *spec, size_t cap);

/* Opens ck's tokenizer: override (a spec, e.g. --tokenizer) when given,
 * which must have the id the checkpoint records (any id for an HF import
 * that recorded none); else the carried copy, whose id must be the
 * recorded one (TITAN_ERR_CORRUPT otherwise). */
titan_status titan_ckpt_open_tokenizer(const titan_ckpt *ck, const char *override, titan_tokenizer **out);

/* For exports: titan_ckpt_open_tokenizer, except that a checkpoint that
 * carries no tokenizer (and none is given) gives *out NULL and a warning. */
titan_status titan_ckpt_tokenizer_if_any(const titan_ckpt *ck, const char *override, titan_tokenizer **out);

#endif
