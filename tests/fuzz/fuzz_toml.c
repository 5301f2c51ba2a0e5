/* fuzz_toml.c - fuzz target: the TOML reader and the job schema.
 *
 * The input is a config.toml. It is parsed (titan_toml_parse) and every
 * value walked and formatted; then loaded as a job over the defaults
 * (titan_config_load_string), validated, and the model it names resolved
 * (titan_setup_model_config, byte tokenizer's 258 ids) as titan-train does.
 * A job that loads must write itself (titan_config_write) as TOML that loads
 * back to the same job (titan_config_diff finds nothing). Lines starting
 * with "--" are also applied as command-line overrides. Built with libFuzzer
 * by `make fuzz`; replayed over tests/fuzz/corpus/toml by `make check`
 * (build/tests/test_fuzz_toml). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/toml.h"
#include "job/config.h"
#include "train/setup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static titan_status visit(void *ctx, const char *table, const char *key, const titan_toml_value *v, int line) {
    char buf[256];
    if (!table || !key || line < 1) abort(); /* every value has a place */
    int need = titan_toml_format_value(buf, sizeof buf, v);
    if (need < 0) abort();
    *(int *)ctx += 1;
    return TITAN_OK;
}

static void toml_only(const char *text, size_t size) {
    titan_toml_doc *doc = NULL;
    titan_status st = titan_toml_parse(text, size, "fuzz.toml", &doc);
    if (st != TITAN_OK) {
        if (doc || !titan_error_message()[0]) abort(); /* a failure leaves nothing and says why */
        titan_error_clear();
        return;
    }
    int count = 0;
    if (titan_toml_walk(doc, visit, &count) != TITAN_OK) abort();
    titan_toml_get(doc, "training.steps");
    titan_toml_get(doc, "model.flavor");
    titan_toml_free(doc);
}

/* A loaded job writes itself as TOML that reads back to the same job. */
static void round_trip(const titan_job_config *cfg) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    titan_config_write(cfg, f);
    fclose(f);
    titan_job_config back;
    titan_config_defaults(&back);
    char diff[512];
    if (titan_config_load_string(&back, text, "written.toml") != TITAN_OK) {
        fprintf(stderr, "fuzz_toml: written config does not load: %s\n%s\n", titan_error_message(), text);
        abort();
    }
    if (titan_config_diff(cfg, &back, diff, sizeof diff) != 0) {
        fprintf(stderr, "fuzz_toml: written config reads back different: %s\n", diff);
        abort();
    }
    free(text);
}

static void job(const char *text) {
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    if (titan_config_load_string(&cfg, text, "fuzz.toml") == TITAN_OK) {
        round_trip(&cfg);
        titan_llama_config mc;
        if (titan_config_validate(&cfg) == TITAN_OK) titan_setup_model_config(&cfg, 258, &mc);
    } else if (!titan_error_message()[0]) {
        abort();
    }
    titan_error_clear();
    /* The lines that look like options, as overrides of the defaults. */
    titan_config_defaults(&cfg);
    for (const char *p = text; *p;) {
        size_t l = strcspn(p, "\n");
        if (l > 2 && l < 1024 && p[0] == '-' && p[1] == '-') {
            char arg[1024];
            memcpy(arg, p, l);
            arg[l] = 0;
            int is_bool;
            titan_config_key_check(arg, &is_bool);
            titan_config_override(&cfg, arg);
            titan_error_clear();
        }
        p += l + (p[l] == '\n');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    toml_only((const char *)data, size);
    char *text = malloc(size + 1); /* the job loader takes a C string */
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    job(text);
    free(text);
    titan_error_clear();
    return 0;
}
