/* args.h - command-line handling shared by the tools that take a job config:
 * "--section.key=value" overrides mixed with the tool's own options. */
#ifndef TITAN_JOB_ARGS_H
#define TITAN_JOB_ARGS_H

#include "job/config.h"

/* True when arg looks like a config override: --section.key=value. */
int titan_args_is_override(const char *arg);
/* Applies, in order, every override in argv[0..argc). */
titan_status titan_args_apply_overrides(titan_job_config *cfg, int argc, char **argv);

#endif
