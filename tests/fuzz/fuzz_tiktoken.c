/* fuzz_tiktoken.c - fuzz target: a tiktoken ranks file (tiktoken:PATH).
 *
 * The input is the file, written to a scratch directory and opened as
 * titan-shard and titan-train open it. A file that loads encodes a fixed
 * text (words, digits, spaces, non-ASCII, invalid UTF-8) and the input's
 * first bytes: every id must be in the vocabulary, and decoding must give
 * the text back exactly (byte-level BPE loses nothing). Its vocabulary is
 * then written as llama.cpp's (titan_gguf_put_vocab: the merges found from
 * the ranks), what `titan-ckpt export --format gguf` does with it. Built
 * with libFuzzer by `make fuzz`; replayed over tests/fuzz/corpus/tiktoken by
 * `make check` (build/tests/test_fuzz_tiktoken). */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    return fuzz_tokenizer_file("tiktoken", "ranks.tiktoken", "tiktoken", data, size, 1);
}
