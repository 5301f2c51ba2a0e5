/* tokenizer.h - text <-> token ids, behind one API for every tokenizer.
 *
 * A tokenizer is chosen by a spec string: "byte", "tiktoken:PATH" or
 * "hf:PATH" (byte-level BPE, see tokenizer_bpe.c). Its id (at most TITAN_TOKENIZER_ID_MAX bytes) is recorded in
 * shard headers and checkpoints so that data and model never disagree.
 * Encoding never adds <|begin_of_text|>/<|end_of_text|>: framing documents is
 * the shard writer's job. */
#ifndef TITAN_DATA_TOKENIZER_H
#define TITAN_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TITAN_TOKENIZER_ID_MAX 16

typedef struct titan_tokenizer titan_tokenizer;

/* Opens the tokenizer named by spec. Unknown spec: TITAN_ERR_USAGE, the
 * message lists the choices. */
titan_status titan_tokenizer_open(titan_tokenizer **out, const char *spec);
void titan_tokenizer_free(titan_tokenizer *t);

/* The spec forms this build knows ("byte, tiktoken:PATH, hf:PATH"). */
const char *titan_tokenizer_choices(void);

const char *titan_tokenizer_id(const titan_tokenizer *t);  /* "byte" */
int titan_tokenizer_vocab_size(const titan_tokenizer *t);  /* byte: 258 */
uint32_t titan_tokenizer_bos(const titan_tokenizer *t);    /* <|begin_of_text|> */
uint32_t titan_tokenizer_eos(const titan_tokenizer *t);    /* <|end_of_text|> */

/* The file the tokenizer was opened from, for a copy that travels with a
 * model (checkpoints, exports): its kind ("tiktoken" or "hf"; "byte" has no
 * file and returns NULL) and its bytes, exactly as read. The id's hash is
 * of these bytes, so opening a copy gives the same id. */
const char *titan_tokenizer_file(const titan_tokenizer *t, const char **data, size_t *len);

/* Llama 3's pre-tokenizer pattern, as its tokenizer.json writes it: the BPE
 * tokenizers split text into pre-tokens with it. */
extern const char titan_bpe_llama3_pattern[];

/* Encodes n bytes of text. Returns the number of tokens of the whole text and
 * stores the first min(count, cap) of them in out (out may be NULL when cap is
 * 0). Every tokenizer yields at most n tokens for n bytes, so cap = n always
 * suffices. */
size_t titan_tokenizer_encode(const titan_tokenizer *t, const char *text, size_t n,
                              uint32_t *out, size_t cap);

/* Decodes n ids, like snprintf: returns the length of the whole text and
 * writes at most cap-1 bytes plus a NUL. Special tokens decode to their names
 * ("<|end_of_text|>"); ids outside the vocabulary decode to "<|unk|>". */
size_t titan_tokenizer_decode(const titan_tokenizer *t, const uint32_t *ids, size_t n,
                              char *out, size_t cap);

#endif
