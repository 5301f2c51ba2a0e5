/* titan-init - job config -> run directory with a seed checkpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/options.h"
#include "core/version.h"
#include "job/args.h"
#include "train/train.h"

/* --help's prose around the options the table generates. */
static const char intro[] =
    "Creates the run directory RUN (default: the job's job.dump_folder): RUN/config.toml\n"
    "(the resolved job) and the seed checkpoint RUN/checkpoint/step-00000000\n"
    "(weights as the reference inits them,\n"
    "or those of checkpoint.initial_load_path: a titan checkpoint, or with\n"
    "checkpoint.initial_load_in_hf=true a Hugging Face Llama directory).";
static const char footer[] =
    "Exit status: 0 ok, 1 failure, 2 usage or config error, 3 file missing or\n"
    "unreadable, 4 malformed input, 6 out of memory, 7 damaged data. See titan-init(1).";

int main(int argc, char **argv) {
    titan_log_init("titan-init");
    int force = 0, print = 0, verbosity = 1;
    static titan_args keys; /* static, as r below: reachable until exit */
    const titan_option table[] = {
        {TITAN_OPT(FLAG, "force", 'f', &force, NULL,
                   "start over in an existing RUN (removes its checkpoints and metrics)")},
        {TITAN_OPT(FLAG, "print-config", 0, &print, NULL, "print the resolved config and exit")},
        TITAN_OPTS_STANDARD(&verbosity),
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-init", .usage = "[options] CONFIG.toml [RUN] [--section.key=value ...]\n"
                 "[options] --job.config_file CONFIG.toml [RUN] [--section.key=value ...]",
        .intro = intro, .footer = footer, .opts = table, .key_fn = titan_args_collect, .key_ctx = &keys,
    };
    static titan_opt_result r; /* static: its lists live until exit, reachable (LeakSanitizer) */
    int code = titan_opt_main(&spec, argc, argv, &r, &verbosity);
    if (code >= 0) return code;
    /* torchtitan's spelling of the job file, and its run directory when RUN is left out */
    static char *config_file; /* reachable until exit */
    config_file = titan_args_take(&keys, "job.config_file");
    int max_pos = config_file ? 1 : 2;
    if (r.npos > max_pos) {
        titan_error(TITAN_ERR_USAGE, "unexpected argument '%s'%s", r.pos[max_pos],
                    config_file ? " (--job.config_file names the job; RUN may follow)" : "");
        free(config_file);
        titan_args_free(&keys);
        return titan_report(TITAN_ERR_USAGE);
    }
    const char *config = config_file ? config_file : r.npos > 0 ? r.pos[0] : NULL;
    if (!config) {
        titan_opt_help(&spec, stderr);
        titan_args_free(&keys);
        return 2;
    }
    const char *run = r.npos > max_pos - 1 ? r.pos[max_pos - 1] : NULL;
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    titan_status st = titan_config_load_file(&cfg, config);
    if (st == TITAN_OK) st = titan_args_apply(&cfg, &keys);
    if (st == TITAN_OK) st = titan_config_validate(&cfg);
    titan_args_free(&keys);
    if (st == TITAN_OK) titan_config_note_defaults(config, &cfg);
    if (st == TITAN_OK && print) titan_config_write(&cfg, stdout);
    else if (st == TITAN_OK) {
        if (!run) titan_info("RUN: %s (job.dump_folder)", run = cfg.job_dump_folder);
        st = titan_run_init(&cfg, run, force);
    }
    free(config_file);
    return titan_report(st);
}
