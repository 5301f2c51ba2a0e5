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
#include <stdlib.h>

#include "core/log.h"
#include "data/tokenizer.h"
#include "fuzz_tokenizer.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    const char *dir = fuzz_scratch("tokjson");
    fuzz_write(dir, "tokenizer.json", data, size);
    char spec[512];
    if ((size_t)snprintf(spec, sizeof spec, "hf:%s/tokenizer.json", dir) >= sizeof spec) abort();
    titan_tokenizer *t = NULL;
    if (titan_tokenizer_open(&t, spec) != TITAN_OK) {
        if (t || !titan_error_message()[0]) abort();
        titan_error_clear();
        return 0;
    }
    fuzz_exercise_tokenizer(t, data, size, 0);
    fuzz_gguf_vocab(t);
    titan_tokenizer_free(t);
    titan_error_clear();
    return 0;
}
