/* titan-init - job config -> run directory with a seed checkpoint. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/options.h"
#include "core/version.h"
#include "job/args.h"
#include "train/train.h"

/* --help's prose around the options the table generates. */
static const char intro[] =
    "Creates the run directory RUN: RUN/config.toml (the resolved job) and the\n"
    "seed checkpoint RUN/checkpoint/step-00000000 (weights as the reference inits them,\n"
    "or those of checkpoint.initial_load_path: a titan checkpoint, or with\n"
    "checkpoint.initial_load_in_hf=true a Hugging Face Llama directory).";
static const char footer[] =
    "Exit status: 0 ok, 1 failure, 2 usage or config error, 3 file missing or\n"
    "unreadable, 4 malformed input, 6 out of memory, 7 damaged data. See titan-init(1).";

int main(int argc, char **argv) {
    titan_log_init("titan-init");
    int force = 0, print = 0, verbosity = 1;
    titan_args keys = {0};
    const titan_option table[] = {
        {TITAN_OPT(FLAG, "force", 'f', &force, NULL,
                   "start over in an existing RUN (removes its checkpoints and metrics)")},
        {TITAN_OPT(FLAG, "print-config", 0, &print, NULL, "print the resolved config and exit")},
        TITAN_OPTS_STANDARD(&verbosity),
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-init", .usage = "[options] CONFIG.toml RUN [--section.key=value ...]",
        .intro = intro, .footer = footer, .opts = table, .key_fn = titan_args_collect, .key_ctx = &keys,
    };
    titan_opt_result r;
    int code = titan_opt_main(&spec, argc, argv, &r, &verbosity);
    if (code >= 0) return code;
    titan_status st;
    if (r.npos > 2) {
        titan_error(TITAN_ERR_USAGE, "unexpected argument '%s'", r.pos[2]);
        return titan_report(TITAN_ERR_USAGE);
    }
    if (r.npos < (print ? 1 : 2)) {
        titan_opt_help(&spec, stderr);
        return 2;
    }
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    st = titan_config_load_file(&cfg, r.pos[0]);
    if (st == TITAN_OK) st = titan_args_apply(&cfg, &keys);
    if (st == TITAN_OK) st = titan_config_validate(&cfg);
    titan_args_free(&keys);
    if (st != TITAN_OK) return titan_report(st);
    if (print) {
        titan_config_write(&cfg, stdout);
        return 0;
    }
    return titan_report(titan_run_init(&cfg, r.pos[1], force));
}
