/* args.h - the job config keys on a command line (--section.key=value,
 * --section.key value), for the tools that take a job config: the option
 * layer (core/options.h) hands each one to titan_args_collect while it
 * parses, and the tool applies them once its config is loaded. */
#ifndef TITAN_JOB_ARGS_H
#define TITAN_JOB_ARGS_H

#include "job/config.h"

/* The overrides of one command line, in order, each "--section.key=value"
 * (or a bare "--section.key" for a boolean). */
typedef struct {
    char **items;
    int n, cap;
} titan_args;

/* A titan_opt_key_fn (ctx: a titan_args): an unknown key fails now with
 * the override's message; a key that needs a value takes next unless the
 * value came after '=' (or next is another option), a boolean takes next
 * only when it is true or false. */
titan_status titan_args_collect(void *ctx, const char *arg, const char *next, int *took_next);
/* Adds one override (a tool's shorthand such as --device). */
titan_status titan_args_add(titan_args *a, const char *override);
/* Removes every override of key ("job.config_file") and returns the last
 * one's value (malloc'd, the caller frees it), or NULL when none set it. */
char *titan_args_take(titan_args *a, const char *key);
/* Applies them to cfg, in order. */
titan_status titan_args_apply(titan_job_config *cfg, const titan_args *a);
void titan_args_free(titan_args *a);

#endif
