/* test_options.c - the option layer (core/options.h): both value syntaxes,
 * short options, --, ranges, choices, unknown options and their hints,
 * subcommands, config keys passed to lib/job, and the generated --help. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/options.h"
#include "job/args.h"

#include "check.h"

/* What one parse sets: a fresh copy per case. */
typedef struct {
    int force, verbosity, seen_cb;
    long long n;
    double t;
    const char *out, *mode, *cb_value;
} vals;

static vals v;
static titan_args keys;

static titan_status cb(const titan_option *o, const char *as, const char *value) {
    v.seen_cb++;
    v.cb_value = value;
    if (value && !strcmp(value, "bad")) return titan_error(TITAN_ERR_USAGE, "%s: bad", as);
    return TITAN_OK;
}

static const titan_option table[] = {
    {TITAN_OPT(FLAG, "force", 'f', &v.force, NULL, "replace what is there")},
    {TITAN_OPT(INT, "count", 'n', &v.n, "N", "how many\nat most 100"), .min = 1, .max = 100},
    {TITAN_OPT(DOUBLE, "temperature", 0, &v.t, "T", "sampling temperature"), .dmin = 0, .dmax = HUGE_VAL},
    {TITAN_OPT(PATH, "output", 'o', &v.out, "DIR", "where it goes")},
    {TITAN_OPT(CHOICE, "mode", 0, &v.mode, "M", "fast or slow"), .choices = "fast,slow,keep"},
    {TITAN_OPT(CALLBACK, "hook", 0, NULL, "X", "the tool's own parse"), .fn = cb},
    {TITAN_OPT(SET_INT, "quiet", 'q', &v.verbosity, NULL, "only errors"), .value = 0},
    {TITAN_OPT(SET_INT, "verbose", 'v', &v.verbosity, NULL, "more detail"), .value = 2},
    {TITAN_OPT(HELP, "help", 'h', NULL, NULL, "this help")},
    {TITAN_OPT(VERSION, "version", 0, NULL, NULL, "print the version")},
    {0},
};

static const titan_opt_spec spec = {
    .prog = "tool", .usage = "[options] IN...\n--other FORM", .intro = "Does a thing.",
    .footer = "Exit status: 0 ok, 2 usage error.", .opts = table,
};

/* Parses a NULL-ended argument list (argv[0] added). */
static titan_status parse_with(const titan_opt_spec *s, titan_opt_result *r, const char **args) {
    char *argv[32] = {"tool"};
    int argc = 1;
    while (args[argc - 1]) argv[argc] = (char *)args[argc - 1], argc++;
    v = (vals){.verbosity = 1};
    titan_error_clear();
    titan_opt_result_free(r);
    return titan_opt_parse(s, argc, argv, r);
}
#define PARSE(r, ...) parse_with(&spec, r, (const char *[]){__VA_ARGS__, NULL})

static void test_values(void) {
    titan_opt_result r = {0};
    CHECK(PARSE(&r, "--count=7", "--output", "d", "a", "b") == TITAN_OK && v.n == 7 && !strcmp(v.out, "d"));
    CHECK(r.npos == 2 && !strcmp(r.pos[0], "a") && !strcmp(r.pos[1], "b"), "positionals in order");
    CHECK(PARSE(&r, "--count", "8", "--temperature=0.5") == TITAN_OK && v.n == 8 && v.t == 0.5);
    CHECK(PARSE(&r, "x", "-n", "3", "y", "-n4", "-o", "out") == TITAN_OK && v.n == 4 && !strcmp(v.out, "out") &&
          r.npos == 2, "short options with and without a space, mixed with positionals");
    CHECK(PARSE(&r, "-fqn5") == TITAN_OK && v.force && v.verbosity == 0 && v.n == 5, "combined short flags");
    CHECK(PARSE(&r, "-q", "-v") == TITAN_OK && v.verbosity == 2, "the last of -q/-v wins");
    CHECK(PARSE(&r, "--", "-f", "--count=2", "-") == TITAN_OK && !v.force && v.n == 0 && r.npos == 3 &&
          !strcmp(r.pos[0], "-f") && !strcmp(r.pos[2], "-"), "-- ends the options");
    CHECK(PARSE(&r, "-") == TITAN_OK && r.npos == 1, "- is a positional");
    CHECK(PARSE(&r, "--output", "-f") == TITAN_OK && !strcmp(v.out, "-f") && !v.force, "a value may start with -");
    CHECK(PARSE(&r, "--hook", "x", "--hook=bad") == TITAN_ERR_USAGE && v.seen_cb == 2 &&
          strstr(titan_error_message(), "--hook: bad"), "callbacks see the value and the option as typed");
    CHECK(PARSE(&r, "--help", "--bogus") == TITAN_OK && r.help, "--help stops parsing");
    CHECK(PARSE(&r, "-h") == TITAN_OK && r.help);
    CHECK(PARSE(&r, "--version") == TITAN_OK && r.version);
    titan_opt_result_free(&r);
}

static void test_errors(void) {
    titan_opt_result r = {0};
    CHECK(PARSE(&r, "--count=0") == TITAN_ERR_USAGE && strstr(titan_error_message(), "'0' is not an integer 1..100"));
    CHECK(PARSE(&r, "-n", "101") == TITAN_ERR_USAGE && strstr(titan_error_message(), "-n: '101'"),
          "the message names the option as typed");
    CHECK(PARSE(&r, "--count=12x") == TITAN_ERR_USAGE);
    CHECK(PARSE(&r, "--count=") == TITAN_ERR_USAGE);
    CHECK(PARSE(&r, "--count=99999999999999999999") == TITAN_ERR_USAGE, "overflow");
    CHECK(PARSE(&r, "--temperature", "-1") == TITAN_ERR_USAGE &&
          strstr(titan_error_message(), "is not a finite number >= 0"));
    CHECK(PARSE(&r, "--temperature", "inf") == TITAN_ERR_USAGE);
    CHECK(PARSE(&r, "--count") == TITAN_ERR_USAGE && strstr(titan_error_message(), "needs a value"));
    CHECK(PARSE(&r, "-fn") == TITAN_ERR_USAGE && strstr(titan_error_message(), "'-n' needs a value"));
    CHECK(PARSE(&r, "--force=1") == TITAN_ERR_USAGE && strstr(titan_error_message(), "takes no value"));
    CHECK(PARSE(&r, "--output=") == TITAN_ERR_USAGE && strstr(titan_error_message(), "empty"));
    CHECK(PARSE(&r, "--mode", "slow") == TITAN_OK && !strcmp(v.mode, "slow"));
    CHECK(PARSE(&r, "--mode=medium") == TITAN_ERR_USAGE &&
          strstr(titan_error_message(), "--mode: 'medium' is not fast, slow or keep"), "choices listed");
    CHECK(PARSE(&r, "--forse") == TITAN_ERR_USAGE && strstr(titan_error_message(), "unknown option '--forse'") &&
          strstr(titan_error_hint_text(), "did you mean --force?"), "a close name is suggested");
    CHECK(PARSE(&r, "--temp=1") == TITAN_ERR_USAGE && strstr(titan_error_hint_text(), "--temperature"),
          "a prefix of one name is suggested");
    CHECK(PARSE(&r, "--zzzzzz") == TITAN_ERR_USAGE && strstr(titan_error_hint_text(), "tool --help"),
          "nothing close: the help is named");
    CHECK(PARSE(&r, "-x") == TITAN_ERR_USAGE && strstr(titan_error_message(), "unknown option '-x'"));
    CHECK(PARSE(&r, "--a.b=1") == TITAN_ERR_USAGE && strstr(titan_error_message(), "unknown option '--a.b'"),
          "a dotted name without a key_fn is an unknown option");
    titan_opt_result_free(&r);
}

static titan_status cmd_fn_probe(const titan_option *o, const char *as, const char *value) {
    return TITAN_OK;
}

static void test_subcommands(void) {
    int json = 0, quiet = 1;
    const char *tol = NULL;
    const titan_option t[] = {
        {TITAN_OPT(FLAG, "json", 0, &json, NULL, "JSON out"), .cmds = "ls info"},
        {TITAN_OPT(STRING, "tol", 0, &tol, "T", "tolerance"), .cmds = "diff"},
        {TITAN_OPT(CALLBACK, "probe", 0, NULL, NULL, "a flag-like callback"), .fn = cmd_fn_probe},
        {TITAN_OPT(SET_INT, "quiet", 'q', &quiet, NULL, "only errors"), .value = 0},
        {0},
    };
    const titan_subcommand cmds[] = {
        {"ls", "[--json] RUN", "list"}, {"info", "CKPT", "describe"}, {"diff", "A B", "compare"}, {NULL},
    };
    const titan_opt_spec s = {.prog = "tool", .usage = "COMMAND [options] ARGS", .opts = t, .cmds = cmds};
    titan_opt_result r = {0};
    CHECK(parse_with(&s, &r, (const char *[]){"-q", "ls", "--json", "run", NULL}) == TITAN_OK && r.cmd &&
          !strcmp(r.cmd, "ls") && json && !quiet && r.npos == 1 && !strcmp(r.pos[0], "run"));
    CHECK(parse_with(&s, &r, (const char *[]){"diff", "--json", NULL}) == TITAN_ERR_USAGE &&
          strstr(titan_error_message(), "diff: unknown option '--json'") &&
          strstr(titan_error_hint_text(), "--json is an option of tool ls and info"), "an option of other commands");
    CHECK(parse_with(&s, &r, (const char *[]){"lss", NULL}) == TITAN_ERR_USAGE &&
          strstr(titan_error_message(), "unknown command 'lss'") && strstr(titan_error_hint_text(), "'ls'"));
    CHECK(parse_with(&s, &r, (const char *[]){"--probe", NULL}) == TITAN_OK && !r.cmd, "no command given");
    titan_opt_result_free(&r);
}

/* --section.key=value and --section.key value reach lib/job, which knows the keys. */
static void test_config_keys(void) {
    titan_opt_spec s = spec;
    s.key_fn = titan_args_collect;
    s.key_ctx = &keys;
    titan_opt_result r = {0};
    CHECK(parse_with(&s, &r, (const char *[]){"run", "--training.steps", "101", "--optimizer.lr=0.5",
                                              "--checkpoint.enable", "false", "--validation.enable", "x",
                                              "--training.seed", "-3", "-f", NULL}) == TITAN_OK);
    CHECK(r.npos == 2 && !strcmp(r.pos[0], "run") && !strcmp(r.pos[1], "x") && v.force,
          "a boolean key takes only true or false after it");
    CHECK(keys.n == 5 && !strcmp(keys.items[0], "--training.steps=101") && !strcmp(keys.items[1], "--optimizer.lr=0.5") &&
          !strcmp(keys.items[2], "--checkpoint.enable=false") && !strcmp(keys.items[3], "--validation.enable") &&
          !strcmp(keys.items[4], "--training.seed=-3"), "collected as overrides");
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    CHECK(titan_args_apply(&cfg, &keys) == TITAN_OK && cfg.training_steps == 101 && !cfg.checkpoint_enable &&
          cfg.validation_enable);
    titan_args_free(&keys);
    CHECK(parse_with(&s, &r, (const char *[]){"--training.stepz", "5", NULL}) == TITAN_ERR_USAGE &&
          strstr(titan_error_message(), "command line: --training.stepz: unknown key 'training.stepz'") &&
          strstr(titan_error_hint_text(), "did you mean 'steps'?"), "an unknown key: lib/job's error, at once");
    titan_args_free(&keys);
    CHECK(parse_with(&s, &r, (const char *[]){"--trainin.steps=5", NULL}) == TITAN_ERR_USAGE &&
          strstr(titan_error_message(), "unknown section [trainin]"));
    titan_args_free(&keys);
    CHECK(parse_with(&s, &r, (const char *[]){"--training.steps", "--force", NULL}) == TITAN_OK && v.force &&
          keys.n == 1, "an option after a key is not its value");
    titan_config_defaults(&cfg);
    CHECK(titan_args_apply(&cfg, &keys) == TITAN_ERR_USAGE && strstr(titan_error_message(), "missing '=value'"));
    titan_args_free(&keys);
    titan_opt_result_free(&r);
}

static void test_help(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    titan_opt_spec s = spec;
    s.key_fn = titan_args_collect;
    titan_opt_help(&s, f);
    fclose(f);
    CHECK(strstr(text, "usage: tool [options] IN...\n       tool --other FORM\n") == text, "usage lines first");
    CHECK(strstr(text, "\nDoes a thing.\n"), "intro");
    CHECK(strstr(text, "  -f, --force          replace what is there\n"), "short and long, aligned");
    CHECK(strstr(text, "  -n, --count N        how many\n                       at most 100\n"),
          "a help of two lines continues under itself");
    CHECK(strstr(text, "      --temperature T  sampling temperature\n"), "long-only names align after the shorts");
    CHECK(strstr(text, "--SECTION.KEY VALUE"), "config keys are mentioned");
    CHECK(strstr(text, "\nExit status: 0 ok, 2 usage error.\n"), "footer last");
    free(text);
}

int main(void) {
    titan_log_init("test_options");
    test_values();
    test_errors();
    test_subcommands();
    test_config_keys();
    test_help();
    CHECK(titan_opt_edit_distance("Force", "force") == 0 && titan_opt_edit_distance("forse", "force") == 1);
    if (failures) {
        fprintf(stderr, "test_options: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_options: ok\n");
    return 0;
}
