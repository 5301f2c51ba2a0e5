/* options.h - the tools' command lines: each tool declares its options in a
 * table, one parser reads argv against it, and --help is generated from it
 * (git's parse-options is the model of the design).
 *
 * Syntax: --name=value and --name value; -x value, -xvalue; short flags
 * combine (-qv, -fj4); -- ends the options; "-" is a positional. Options and
 * positionals mix in any order; positionals are kept in order. A long name
 * with a dot (--section.key=value, --section.key value) is a job config key:
 * the spec's key_fn decides whether it exists and takes a value.
 * Every error is TITAN_ERR_USAGE (exit status 2, titan(7)). */
#ifndef TITAN_CORE_OPTIONS_H
#define TITAN_CORE_OPTIONS_H

#include <stdio.h>

#include "core/error.h"

typedef enum {
    TITAN_OPT_END = 0,  /* ends a table */
    TITAN_OPT_FLAG,     /* int *: set to 1 */
    TITAN_OPT_SET_INT,  /* int *: set to .value (-q and -v share one verbosity) */
    TITAN_OPT_INT,      /* long long *: an integer in [.min, .max] */
    TITAN_OPT_DOUBLE,   /* double *: a finite number in [.dmin, .dmax] */
    TITAN_OPT_STRING,   /* const char **: any text */
    TITAN_OPT_PATH,     /* const char **: a path, not empty */
    TITAN_OPT_CHOICE,   /* const char **: one of .choices ("none,zstd,keep") */
    TITAN_OPT_CALLBACK, /* .fn(opt, as typed, value): a value when .arg is set, else NULL */
    TITAN_OPT_HELP,     /* sets the result's help: the tool prints titan_opt_help */
    TITAN_OPT_VERSION,  /* sets the result's version */
} titan_opt_kind;

typedef struct titan_option titan_option;
/* The tool's own parse of a value; `as` is the option as typed ("-j",
 * "--threads") for its messages. */
typedef titan_status (*titan_opt_fn)(const titan_option *opt, const char *as, const char *value);

struct titan_option {
    titan_opt_kind kind;
    const char *name;     /* long name without "--", or NULL */
    char short_name;      /* 0: none */
    void *target;         /* what the kind says; the callback's own data */
    const char *arg;      /* placeholder of the value in --help ("N", "DIR") */
    const char *help;     /* one line; '\n' continues it under itself */
    const char *cmds;     /* the subcommands that take it ("diff convert"); NULL: all */
    long long min, max;   /* TITAN_OPT_INT; both 0: any integer */
    double dmin, dmax;    /* TITAN_OPT_DOUBLE; both 0: any finite number */
    const char *expected; /* INT/DOUBLE: what messages say it is ("a rank count 1..1024") */
    const char *choices;  /* TITAN_OPT_CHOICE: "a,b,c" */
    int value;            /* TITAN_OPT_SET_INT */
    titan_opt_fn fn;      /* TITAN_OPT_CALLBACK */
};

/* The fields every entry has, designated so that an entry adds only what
 * its kind uses: {TITAN_OPT(INT, "nproc", 0, &n, "N", "ranks"), .min = 1, .max = 64}. */
#define TITAN_OPT(kind_, long_, short_, target_, arg_, help_)                                          \
    .kind = TITAN_OPT_##kind_, .name = (long_), .short_name = (short_), .target = (target_), .arg = (arg_), \
    .help = (help_)

/* The table entries every tool shares: --help and --version; with -q and
 * -v setting *verbosity_ (0 only errors, 2 more detail: core/log.h). */
#define TITAN_OPTS_HELP_VERSION                                   \
    {TITAN_OPT(HELP, "help", 'h', NULL, NULL, "this help")},      \
    {TITAN_OPT(VERSION, "version", 0, NULL, NULL, "print the version")}
#define TITAN_OPTS_STANDARD(verbosity_)                                                    \
    {TITAN_OPT(SET_INT, "quiet", 'q', (verbosity_), NULL, "only errors"), .value = 0},    \
    {TITAN_OPT(SET_INT, "verbose", 'v', (verbosity_), NULL, "more detail"), .value = 2}, \
    TITAN_OPTS_HELP_VERSION

/* A subcommand (titan-ckpt ls, titan-trace plot). Entries may repeat a name
 * to show several forms in --help; the first word on the command line that
 * is not an option names it. */
typedef struct {
    const char *name;
    const char *args; /* shown after the name in --help: "[--json] CKPT" */
    const char *help; /* '\n' continues it under itself */
} titan_subcommand;

/* A --section.key[=value] argument: checks the key, and takes next (NULL at
 * the end of argv) as its value when the key needs one (setting *took_next). */
typedef titan_status (*titan_opt_key_fn)(void *ctx, const char *arg, const char *next, int *took_next);

typedef struct {
    const char *prog;              /* "titan-shard": help and hints */
    const char *usage;             /* after "usage: PROG "; '\n' starts another form */
    const char *intro;             /* prose between the usage and the options, or NULL */
    const char *footer;            /* prose after the options (exit status), or NULL */
    const titan_option *opts;      /* ended by TITAN_OPT_END */
    const titan_subcommand *cmds;  /* ended by a NULL name; NULL: no subcommands */
    titan_opt_key_fn key_fn;       /* config keys; NULL: a dotted name is unknown */
    void *key_ctx;
} titan_opt_spec;

typedef struct {
    const char *cmd; /* the subcommand; NULL when none was given */
    char **pos;      /* the positionals in order (into argv) */
    int npos;
    int help, version; /* --help / --version were given (parsing stopped there) */
} titan_opt_result;

/* Parses argv[1..argc) against spec. On an error the message (and a "did
 * you mean" hint where one is close) is recorded; free r either way. */
titan_status titan_opt_parse(const titan_opt_spec *spec, int argc, char **argv, titan_opt_result *r);
void titan_opt_result_free(titan_opt_result *r);
/* The --help text: usage forms, intro, subcommands, options (aligned), footer. */
void titan_opt_help(const titan_opt_spec *spec, FILE *f);
/* When r asked for --help or --version: prints the help (stdout) or
 * "PROG VERSION" and returns 1 (the tool then exits 0); else 0. */
int titan_opt_answer(const titan_opt_spec *spec, const titan_opt_result *r);
/* A tool's start: parses argv, sets the log's verbosity from *verbosity
 * (when not NULL) and answers --help and --version. Returns -1 when the
 * tool goes on with r, else its exit status (0 after an answer, the
 * reported error's after a usage error). */
int titan_opt_main(const titan_opt_spec *spec, int argc, char **argv, titan_opt_result *r, const int *verbosity);
/* Case-insensitive edit distance (99 past 63 characters): the hints'. */
int titan_opt_edit_distance(const char *a, const char *b);

#endif
