/* args.c - "--section.key=value" overrides on the command line. */
#include "job/args.h"

#include <string.h>

int titan_args_is_override(const char *arg) {
    if (strncmp(arg, "--", 2) != 0) return 0;
    const char *eq = strchr(arg, '='), *dot = strchr(arg, '.');
    return eq && dot && dot < eq;
}

titan_status titan_args_apply_overrides(titan_job_config *cfg, int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (titan_args_is_override(argv[i])) TITAN_TRY(titan_config_override(cfg, argv[i]));
    return TITAN_OK;
}
