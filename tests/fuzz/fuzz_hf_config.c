/* fuzz_hf_config.c - fuzz target: a Hugging Face config.json, as
 * `titan-ckpt convert --from hf` and titan-init (checkpoint.initial_load_in_hf)
 * read it (titan_hf_parse_config). A config that is accepted must describe
 * a model titan_llama_config_check takes, with an FFN size; its parameter
 * catalog is built when it is small enough to build cheaply, and must add
 * up. The same text is parsed again with --multiple-of 256. Built with
 * libFuzzer by `make fuzz`; replayed over tests/fuzz/corpus/hf_config by
 * `make check` (build/tests/test_fuzz_hf_config). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"
#include "interchange/hf_convert.h"
#include "model/llama_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_model(const titan_llama_config *mc) {
    if (titan_llama_config_check(mc) != TITAN_OK || titan_llama_hidden_dim(mc) <= 0) abort();
    if (mc->n_layers > 64) return;
    int n = 0;
    titan_param *ps = titan_llama_params_new(mc, &n);
    if (!ps) abort();
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ps[i].offset != total) abort(); /* the catalog is one flat buffer, in order */
        total += ps[i].numel;
    }
    if (total != titan_llama_num_params(mc)) abort();
    free(ps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    const titan_hf_import_opts opts[2] = {{NULL, 0, -1.0f, 0}, {NULL, 256, -1.0f, 0}};
    for (int i = 0; i < 2; i++) {
        titan_llama_config mc;
        titan_status st = titan_hf_parse_config((const char *)data, size, "fuzz/config.json", &opts[i], &mc);
        if (st == TITAN_OK) check_model(&mc);
        else if (!titan_error_message()[0]) abort();
        titan_error_clear();
    }
    return 0;
}
