/* titan-init - job config -> run directory with a seed checkpoint. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/version.h"
#include "job/args.h"
#include "train/train.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: titan-init [options] CONFIG.toml RUN [--section.key=value ...]\n"
            "\n"
            "Creates the run directory RUN: RUN/config.toml (the resolved job) and the\n"
            "seed checkpoint RUN/checkpoint/step-00000000 (weights as the reference inits them,\n"
            "or those of checkpoint.initial_load_path: a titan checkpoint, or with\n"
            "checkpoint.initial_load_in_hf=true a Hugging Face Llama directory).\n"
            "\n"
            "  -f, --force         start over in an existing RUN (removes its checkpoints and metrics)\n"
            "  --print-config      print the resolved config and exit\n"
            "  -q, --quiet         only errors\n"
            "  -v, --verbose       more detail\n"
            "  -h, --help          this help\n"
            "  --version           print the version\n"
            "\n"
            "Exit status: 0 ok, 1 failure, 2 usage or config error, 3 file missing or\n"
            "unreadable, 4 malformed input, 6 out of memory, 7 damaged data. See titan-init(1).\n");
}

int main(int argc, char **argv) {
    titan_log_init("titan-init");
    const char *pos[2] = {NULL, NULL};
    int npos = 0, force = 0, print = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (titan_args_is_override(a)) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("titan-init %s\n", TITAN_VERSION);
            return 0;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--print-config")) {
            print = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            titan_log_set_verbosity(0);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            titan_log_set_verbosity(2);
        } else if (a[0] == '-' && a[1]) {
            titan_error(TITAN_ERR_USAGE, "unknown option '%s'", a);
            titan_error_hint("titan-init --help lists the options; config keys are --section.key=value");
            return titan_report(TITAN_ERR_USAGE);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            titan_error(TITAN_ERR_USAGE, "unexpected argument '%s'", a);
            return titan_report(TITAN_ERR_USAGE);
        }
    }
    if (npos < (print ? 1 : 2)) {
        usage(stderr);
        return 2;
    }
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    titan_status st = titan_config_load_file(&cfg, pos[0]);
    if (st == TITAN_OK) st = titan_args_apply_overrides(&cfg, argc - 1, argv + 1);
    if (st == TITAN_OK) st = titan_config_validate(&cfg);
    if (st != TITAN_OK) return titan_report(st);
    if (print) {
        titan_config_write(&cfg, stdout);
        return 0;
    }
    return titan_report(titan_run_init(&cfg, pos[1], force));
}
