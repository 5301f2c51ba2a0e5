/* run_paths.c - the file paths in a run's config, so that a run works from
 * any working directory (a Slurm job starts wherever its script was).
 *
 * titan-init writes them absolute: a relative path given to it (in
 * CONFIG.toml or on its command line) is taken against the directory it ran
 * in. A config written before that may hold relative paths: titan-train
 * takes each against the run directory first, then against the current
 * directory (the old rule, with a warning). model.hf_assets_path's
 * tokenizer.json, when it stands for model.tokenizer, is written there as
 * model.tokenizer. A tokenizer file found nowhere
 * (a run unpacked on another machine) is replaced by the copy the run's
 * latest checkpoint carries. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "interchange/ckpt_tokenizer.h"
#include "train/train.h"

typedef struct {
    const char *key;
    size_t off;
    int spec; /* a tokenizer spec: the path follows "kind:" */
} path_key;

static const path_key keys[] = {
    {"model.tokenizer", offsetof(titan_job_config, model_tokenizer), 1},
    {"training.dataset_path", offsetof(titan_job_config, training_dataset_path), 0},
    {"validation.dataset_path", offsetof(titan_job_config, validation_dataset_path), 0},
    {"checkpoint.initial_load_path", offsetof(titan_job_config, checkpoint_initial_load_path), 0},
    {"model.hf_assets_path", offsetof(titan_job_config, model_hf_assets_path), 0},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static char *field(titan_job_config *cfg, const path_key *k) { return (char *)cfg + k->off; }
static const char *cfield(const titan_job_config *cfg, const path_key *k) { return (const char *)cfg + k->off; }

/* The path inside a value ("" for none: an empty value, "byte"). */
static const char *path_of(const path_key *k, const char *value) {
    if (!k->spec) return value;
    const char *colon = strchr(value, ':');
    return colon ? colon + 1 : "";
}

/* Writes prefix + path into k's field of cfg; TITAN_ERR_USAGE when it does not fit. */
static titan_status set_path(titan_job_config *cfg, const path_key *k, const char *dir, const char *path) {
    char *v = field(cfg, k), out[TITAN_STR];
    size_t kind = (size_t)(path_of(k, v) - v);
    while (path[0] == '.' && path[1] == '/') path += 2;
    int n = snprintf(out, sizeof out, "%.*s%s%s%s", (int)kind, v, dir, dir[0] ? "/" : "", path);
    if (n < 0 || (size_t)n >= sizeof out)
        return titan_error(TITAN_ERR_USAGE, "%s = %.*s%s/%s: longer than %d bytes", k->key, (int)kind, v, dir, path,
                           TITAN_STR - 1);
    memcpy(v, out, (size_t)n + 1);
    return TITAN_OK;
}

/* torchtitan's training.dataset (validation.dataset) naming a directory
 * stands for dataset_path when that is empty; a name stays a name. */
static void dataset_as_path(char *path, const char *dataset) {
    struct stat sb;
    if (!path[0] && dataset[0] && stat(dataset, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(path, TITAN_STR, "%s", dataset);
}

titan_status titan_run_absolute_paths(titan_job_config *cfg) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return titan_error(TITAN_ERR_IO, "getcwd: %s", strerror(errno));
    dataset_as_path(cfg->training_dataset_path, cfg->training_dataset);
    dataset_as_path(cfg->validation_dataset_path, cfg->validation_dataset);
    /* the tokenizer hf_assets_path stands for, named: the run keeps it */
    char spec[TITAN_STR + 32];
    titan_config_tokenizer_spec(cfg, spec, sizeof spec);
    if (strlen(spec) >= TITAN_STR)
        return titan_error(TITAN_ERR_USAGE, "model.hf_assets_path = %s: longer than %d bytes with /tokenizer.json",
                           cfg->model_hf_assets_path, TITAN_STR - 1);
    memcpy(cfg->model_tokenizer, spec, strlen(spec) + 1);
    for (size_t i = 0; i < N_KEYS; i++) {
        char path[TITAN_STR];
        snprintf(path, sizeof path, "%s", path_of(&keys[i], field(cfg, &keys[i])));
        if (path[0] && path[0] != '/') TITAN_TRY(set_path(cfg, &keys[i], cwd, path));
    }
    return TITAN_OK;
}

/* The spec of the tokenizer copy in the run's latest checkpoint, into spec. */
static int checkpoint_tokenizer(const titan_job_config *cfg, const char *run_dir, char *spec, size_t cap) {
    char root[PATH_MAX], dir[PATH_MAX];
    int64_t step;
    titan_ckpt *ck = NULL;
    int ok = titan_fs_join(root, sizeof root, run_dir, cfg->checkpoint_folder) == TITAN_OK &&
             titan_ckpt_resolve(root, dir, sizeof dir, &step, 0) == TITAN_OK && titan_ckpt_open(&ck, dir) == TITAN_OK &&
             titan_ckpt_tokenizer_spec(ck, spec, cap) == TITAN_OK && strcmp(spec, "byte");
    titan_ckpt_close(ck);
    titan_error_clear();
    return ok;
}

titan_status titan_run_resolve_paths(titan_job_config *cfg, const char *run_dir) {
    for (size_t i = 0; i < N_KEYS; i++) {
        const path_key *k = &keys[i];
        char path[TITAN_STR], in_run[PATH_MAX + TITAN_STR];
        snprintf(path, sizeof path, "%s", path_of(k, field(cfg, k)));
        if (!path[0]) continue;
        int here = titan_fs_exists(path);
        if (path[0] != '/') {
            snprintf(in_run, sizeof in_run, "%s/%s", run_dir, path);
            if (titan_fs_exists(in_run)) {
                TITAN_TRY(set_path(cfg, k, run_dir, path));
                continue;
            }
            if (here)
                titan_warn("%s/config.toml: %s = %s: relative, found in the current directory, not in the run "
                           "directory (titan-init now writes absolute paths; make it absolute or relative to the "
                           "run)", run_dir, k->key, field(cfg, k));
        }
        char spec[PATH_MAX + 32];
        if (!here && k->spec && checkpoint_tokenizer(cfg, run_dir, spec, sizeof spec)) {
            titan_warn("%s/config.toml: %s = %s: not found; using the copy in the run's checkpoint (%s)", run_dir,
                       k->key, field(cfg, k), spec);
            if (strlen(spec) >= TITAN_STR) return titan_error(TITAN_ERR_USAGE, "%s: longer than %d bytes", spec,
                                                              TITAN_STR - 1);
            memcpy(field(cfg, k), spec, strlen(spec) + 1); /* fits: checked above */
        }
    }
    return TITAN_OK;
}

titan_status titan_run_check_paths(const titan_job_config *cfg, const titan_job_config *saved, const char *source) {
    for (size_t i = 0; i < N_KEYS; i++) {
        const path_key *k = &keys[i];
        const char *v = cfield(cfg, k), *path = path_of(k, v);
        /* titan-init's inputs: the run holds what it took from them */
        if (!path[0] || k->off == offsetof(titan_job_config, checkpoint_initial_load_path) ||
            k->off == offsetof(titan_job_config, model_hf_assets_path))
            continue;
        if (k->off == offsetof(titan_job_config, validation_dataset_path) && !cfg->validation_enable) continue;
        struct stat sb;
        if (stat(path, &sb) == 0) continue;
        int err = errno;
        int from_file = !strcmp(v, cfield(saved, k));
        if (from_file) titan_error(TITAN_ERR_IO, "%s: %s = %s: %s", source, k->key, v, strerror(err));
        else titan_error(TITAN_ERR_IO, "--%s=%s: %s", k->key, v, strerror(err));
        if (path[0] != '/' && from_file)
            titan_error_hint("a relative path in a run's config is looked up in the run directory, then in the "
                             "current directory");
        else if (from_file)
            titan_error_hint("fix it in %s, or override it: --%s=...", source, k->key);
        return TITAN_ERR_IO;
    }
    return TITAN_OK;
}
