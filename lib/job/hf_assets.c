/* hf_assets.c - model.hf_assets_path, torchtitan's Hugging Face asset
 * directory: what it stands in for when the job names nothing else (the
 * tokenizer file, the weights titan-init seeds from). */
#include <stdio.h>
#include <string.h>

#include "job/config.h"

void titan_config_tokenizer_spec(const titan_job_config *cfg, char *out, size_t cap) {
    const char *assets = cfg->model_hf_assets_path;
    if (assets[0] && strcmp(cfg->model_tokenizer, "byte") == 0) {
        size_t len = strlen(assets);
        while (len > 1 && assets[len - 1] == '/') len--;
        snprintf(out, cap, "hf:%.*s/tokenizer.json", (int)len, assets);
    } else {
        snprintf(out, cap, "%s", cfg->model_tokenizer);
    }
}

const char *titan_config_initial_load_path(const titan_job_config *cfg) {
    if (cfg->checkpoint_initial_load_path[0]) return cfg->checkpoint_initial_load_path;
    return cfg->checkpoint_initial_load_in_hf ? cfg->model_hf_assets_path : "";
}
