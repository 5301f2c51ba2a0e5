/* run_dir.c - creating a run directory: the resolved config and a seed checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "interchange/hf_convert.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/mem.h"
#include "data/tokenizer.h"
#include "train/setup.h"
#include "train/state.h"
#include "train/train.h"

static int dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 1;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

titan_status titan_run_load_config(titan_job_config *cfg, const char *run_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.toml", run_dir);
    struct stat sb;
    if (stat(run_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        titan_error(TITAN_ERR_IO, "%s: no such run directory", run_dir);
        titan_error_hint("create it with: titan-init CONFIG.toml %s", run_dir);
        return TITAN_ERR_IO;
    }
    if (access(path, R_OK) != 0) {
        titan_error(TITAN_ERR_IO, "%s: not a run directory (cannot read config.toml: %s)", run_dir,
                    strerror(errno));
        titan_error_hint("create it with: titan-init CONFIG.toml %s", run_dir);
        return TITAN_ERR_IO;
    }
    titan_config_defaults(cfg);
    TITAN_TRY(titan_config_load_file(cfg, path));
    return titan_run_resolve_paths(cfg, run_dir);
}

/* Writes RUN/config.toml with absolute paths: the run works from any directory. */
static titan_status write_config(const titan_job_config *job, const char *run_dir) {
    titan_job_config abs = *job;
    const titan_job_config *cfg = &abs;
    TITAN_TRY(titan_run_absolute_paths(&abs));
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/config.toml", run_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return titan_error(TITAN_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    fprintf(f, "# titan job config, resolved by titan-init. titan-train reads this file;\n"
               "# change it here or override keys on the command line (--section.key=value).\n");
    titan_status st = titan_config_write(cfg, f) != 0
                          ? titan_error(TITAN_ERR_IO, "%s: write failed: %s", tmp, strerror(errno))
                          : TITAN_OK;
    if (st != TITAN_OK) fclose(f);
    /* the run directory's own entry is made durable too (fsync of its parent) */
    if (st == TITAN_OK) st = titan_fs_publish_file(f, tmp, path);
    if (st != TITAN_OK) unlink(tmp);
    return st;
}

/* The seed's weights: checkpoint.initial_load_path's, which must be the
 * job's model, else torchtitan's init from training.seed. */
static titan_status seed_params(const titan_job_config *cfg, const titan_llama_config *mc, const char *tokenizer_id,
                                float *params) {
    const char *from = titan_config_initial_load_path(cfg);
    if (!from[0]) {
        return titan_llama_init_weights(mc, params, (uint64_t)cfg->training_seed);
    }
    titan_status st;
    if (cfg->checkpoint_initial_load_in_hf) {
        st = titan_hf_load_params(from, mc, params);
        if (st == TITAN_OK) titan_info("seed weights from %s (Hugging Face Llama)", from);
    } else {
        char path[4096];
        titan_ckpt *ck = NULL;
        titan_train_progress pr;
        const char *theirs;
        st = titan_ckpt_resolve_arg(from, path, sizeof path);
        if (st == TITAN_OK) st = titan_ckpt_open(&ck, path);
        if (st == TITAN_OK) st = titan_state_read_meta(ck, mc, &pr); /* the model must be the job's */
        if (st == TITAN_OK) st = titan_ckpt_load_params(ck, mc, params);
        if (st == TITAN_OK) {
            titan_info("seed weights from %s (its step %" PRId64 "; training starts at step 0 with fresh AdamW "
                       "moments)", titan_ckpt_path(ck), pr.step);
            /* The vocabulary size matched; another tokenizer of that size would still scramble the ids. */
            if (titan_ckpt_meta_get_str(ck, "tokenizer", &theirs) == TITAN_OK && strcmp(theirs, tokenizer_id))
                titan_warn("%s was trained with tokenizer %s; this job's is %s", titan_ckpt_path(ck), theirs,
                           tokenizer_id);
            titan_error_clear(); /* a checkpoint without a tokenizer key is no error here */
        }
        titan_ckpt_close(ck);
    }
    if (st != TITAN_OK)
        titan_error_context("%s", cfg->checkpoint_initial_load_path[0] ? "checkpoint.initial_load_path"
                                                                        : "model.hf_assets_path (initial_load_in_hf)");
    return st;
}

titan_status titan_run_init(const titan_job_config *cfg, const char *run_dir, int force) {
    TITAN_TRY(titan_config_validate(cfg));
    TITAN_TRY(titan_setup_ckpt_compression(cfg));
    titan_tokenizer *tok = NULL;
    char spec[TITAN_STR + 32];
    titan_config_tokenizer_spec(cfg, spec, sizeof spec);
    titan_status st = titan_tokenizer_open(&tok, spec);
    if (st != TITAN_OK && strcmp(spec, cfg->model_tokenizer) != 0) {
        titan_error_context("model.hf_assets_path = %s (its tokenizer.json)", cfg->model_hf_assets_path);
        return st;
    }
    if (st != TITAN_OK) {
        titan_error_context("model.tokenizer = %s", cfg->model_tokenizer);
        return st;
    }
    titan_llama_config mc;
    st = titan_setup_model_config(cfg, titan_tokenizer_vocab_size(tok), &mc);
    if (st != TITAN_OK) {
        titan_tokenizer_free(tok);
        return st;
    }
    struct stat sb;
    if (stat(run_dir, &sb) == 0 && !dir_is_empty(run_dir) && !force) {
        titan_tokenizer_free(tok);
        titan_error(TITAN_ERR_USAGE, "%s: run directory exists and is not empty", run_dir);
        titan_error_hint("choose a new directory, or pass --force to start this run over");
        return TITAN_ERR_USAGE;
    }
    /* The weights first: a source that fails leaves RUN as it was. */
    size_t n = titan_llama_num_params(&mc);
    float *params = titan_alloc(n * sizeof(float), "seed checkpoint parameters");
    if (!params) {
        titan_tokenizer_free(tok);
        return TITAN_ERR_NOMEM;
    }
    if ((st = seed_params(cfg, &mc, titan_tokenizer_id(tok), params)) != TITAN_OK) goto out;
    char root[4096];
    snprintf(root, sizeof root, "%s/%s", run_dir, cfg->checkpoint_folder);
    if (force) {
        if ((st = titan_fs_remove_tree(root)) != TITAN_OK) goto out;
        char metrics[4096];
        snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", run_dir);
        unlink(metrics);
    }
    if ((st = titan_fs_mkdir_p(run_dir)) != TITAN_OK) goto out;
    if ((st = write_config(cfg, run_dir)) != TITAN_OK) goto out;
    titan_train_progress pr = {0};
    st = titan_state_save(root, &mc, params, NULL, &pr, tok, 0);
    if (st == TITAN_OK)
        titan_info("%s: llama3 %s, %zu parameters (dim %d, %d layers, %d heads, %d kv heads, ffn %d, vocab %d)",
                   run_dir, cfg->model_flavor, n, mc.dim, mc.n_layers, mc.n_heads, mc.n_kv_heads,
                   titan_llama_hidden_dim(&mc), mc.vocab_size);
out:
    titan_free(params);
    titan_tokenizer_free(tok);
    return st;
}
