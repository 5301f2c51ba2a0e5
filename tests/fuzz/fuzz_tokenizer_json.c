/* fuzz_tokenizer_json.c - fuzz target: a Hugging Face tokenizer.json (hf:PATH).
 *
 * The input is the file, written to a scratch directory and opened as the
 * tools open it. A file that loads encodes a fixed text and the input's
 * first bytes (ids in the vocabulary, decoding within bounds; not exact: an
 * added token may take the id of a regular one, and decodes as itself), and
 * is written as llama.cpp's vocabulary (titan_gguf_put_vocab reads the file
 * again for its strings and merges), what `titan-ckpt export --format gguf`
 * does with it. Built with libFuzzer by `make fuzz`; replayed over
 * tests/fuzz/corpus/tokenizer_json by `make check`
 * (build/tests/test_fuzz_tokenizer_json). */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    return fuzz_tokenizer_file("tokjson", "tokenizer.json", "hf", data, size, 0);
}
