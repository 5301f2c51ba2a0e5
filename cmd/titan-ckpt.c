/* titan-ckpt - inspect, verify, compare, convert and pack checkpoints. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "interchange/gguf.h"
#include "interchange/hf_convert.h"
#include "titan-ckpt/inspect.h"
#include "ckpt/pack.h"
#include "core/log.h"
#include "core/options.h"
#include "core/version.h"
#include "data/tokenizer.h"

typedef struct {
    const char *cmd;
    char **pos;
    int npos;
    int json, params_only, force, verbose;
    const char *to, *from, *dtype, *tokenizer, *tokens;
    long long shard_size, max_position, multiple_of, threads;
    double ffn_mult;
    int tolerance; /* --atol or --rtol given */
    double atol, rtol;
} opts;

static const titan_subcommand commands[] = {
    {"ls", "[--json] RUN|ROOT", "the checkpoints of a run"},
    {"info", "[--json] CKPT", "tensors, model, step, tokens seen, size"},
    {"verify", "CKPT", "every checksum; chunks cover each tensor once"},
    {"diff", "[--params-only] [--json] [-v] [--atol A] [--rtol R] A B", "per-tensor max abs / max rel difference;\n"
     "with a tolerance, elements outside\n|a-b| <= A + R*|b| (default: exact)"},
    {"convert", "--to hf CKPT OUTDIR [--dtype f32|bf16|f16] [--tokenizer SPEC] [--shard-size BYTES] "
     "[--max-position N]", NULL},
    {"convert", "--to gguf CKPT OUT.gguf [--dtype f32|bf16|f16] [--tokenizer SPEC] [--max-position N]", NULL},
    {"convert", "--from hf HFDIR OUTROOT [--tokenizer SPEC] [--multiple-of N] [--ffn-dim-multiplier X]", NULL},
    {"pack", "CKPT OUT.tar.zst", "one checkpoint (and its run's config.toml) as a\npax tar, zstd-compressed"},
    {"unpack", "IN.tar.zst OUTDIR", "back into a run directory (with a config.toml)\nor a checkpoint root"},
    {"eval", "CKPT --tokens 1,2,3", "print the model's logits (debugging aid)"},
    {NULL},
};

/* --help's prose after the options the table generates. */
static const char footer[] =
    "CKPT is a step directory, a checkpoint root (its latest step) or a run directory.\n"
    "\n"
    "Exit status: 0 ok (diff: identical), 1 diff: they differ, 2 usage error, 3 file\n"
    "missing or unreadable, 4 malformed or foreign input (catalog, header), 6 out of memory,\n"
    "7 damaged data (checksum, file cut short, zstd frame). See titan-ckpt(1).";

/* Parses argv into o; *done: --help or --version answered (or the usage
 * printed for no command, *code 2). */
static titan_status parse(opts *o, int argc, char **argv, titan_opt_result *r, int *done, int *code) {
    int verbosity = 1;
    const titan_option table[] = {
        {TITAN_OPT(FLAG, "json", 0, &o->json, NULL, "machine-readable output"), .cmds = "ls info diff"},
        {TITAN_OPT(FLAG, "params-only", 0, &o->params_only, NULL, "compare the model parameters only"), .cmds = "diff"},
        {TITAN_OPT(DOUBLE, "atol", 0, &o->atol, "A", "absolute tolerance"), .cmds = "diff", .dmin = 0,
         .dmax = HUGE_VAL},
        {TITAN_OPT(DOUBLE, "rtol", 0, &o->rtol, "R", "relative tolerance"), .cmds = "diff", .dmin = 0,
         .dmax = HUGE_VAL},
        {TITAN_OPT(FLAG, "force", 0, &o->force, NULL, "replace or add to existing output"), .cmds = "convert unpack"},
        {TITAN_OPT(STRING, "to", 0, &o->to, "FMT", "hf or gguf"), .cmds = "convert"},
        {TITAN_OPT(STRING, "from", 0, &o->from, "FMT", "hf"), .cmds = "convert"},
        {TITAN_OPT(STRING, "dtype", 0, &o->dtype, "TYPE", "f32, bf16 or f16 (default f32)"), .cmds = "convert"},
        {TITAN_OPT(INT, "shard-size", 0, &o->shard_size, "BYTES", "largest safetensors file"), .cmds = "convert",
         .min = 1, .max = LLONG_MAX},
        {TITAN_OPT(INT, "max-position", 0, &o->max_position, "N", "the context length written"), .cmds = "convert",
         .min = 1, .max = LLONG_MAX},
        {TITAN_OPT(STRING, "tokenizer", 0, &o->tokenizer, "SPEC", "the tokenizer to write or record"),
         .cmds = "convert"},
        {TITAN_OPT(INT, "multiple-of", 0, &o->multiple_of, "N", "the FFN size's multiple, for --from hf"),
         .cmds = "convert", .min = 1, .max = LLONG_MAX},
        {TITAN_OPT(DOUBLE, "ffn-dim-multiplier", 0, &o->ffn_mult, "X", "the FFN size's multiplier, for --from hf"),
         .cmds = "convert", .dmin = 0, .dmax = HUGE_VAL},
        {TITAN_OPT(STRING, "tokens", 0, &o->tokens, "IDS", "token ids, comma-separated"), .cmds = "eval"},
        {TITAN_OPT(INT, "threads", 0, &o->threads, "N", "CPU threads (0 = all cores)"), .cmds = "eval", .min = 0,
         .max = LLONG_MAX},
        TITAN_OPTS_STANDARD(&verbosity),
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-ckpt", .usage = "COMMAND [options] ARGS", .footer = footer, .opts = table, .cmds = commands,
    };
    *done = 0;
    titan_status st = titan_opt_parse(&spec, argc, argv, r);
    titan_log_set_verbosity(verbosity);
    o->verbose = verbosity == 2;
    if (st != TITAN_OK) return st;
    *done = r->help || r->version || !r->cmd;
    if (!titan_opt_answer(&spec, r) && !r->cmd) { /* no command: the help, as a usage error */
        titan_opt_help(&spec, stderr);
        *code = 2;
    }
    o->cmd = r->cmd;
    o->pos = r->pos;
    o->npos = r->npos;
    o->tolerance = o->atol >= 0 || o->rtol >= 0;
    if (o->atol < 0) o->atol = 0;
    if (o->rtol < 0) o->rtol = 0;
    return TITAN_OK;
}

static titan_status need_pos(const opts *o, int n, const char *what) {
    if (o->npos == n) return TITAN_OK;
    titan_error(TITAN_ERR_USAGE, "%s: expected %s", o->cmd, what);
    titan_error_hint("usage: titan-ckpt %s %s", o->cmd, what);
    return TITAN_ERR_USAGE;
}

static titan_status parse_tokens(const char *s, uint32_t **out, int *n) {
    *n = 0;
    size_t cap = strlen(s) / 2 + 1;
    uint32_t *v = malloc(cap * sizeof *v);
    if (!v) return titan_error(TITAN_ERR_NOMEM, "--tokens: out of memory");
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long x = strtoul(p, &end, 10);
        if (end == p || errno || x > UINT32_MAX || (*end && *end != ',') || *p == '-') {
            free(v);
            return titan_error(TITAN_ERR_USAGE, "--tokens: '%s' is not a comma-separated list of token ids", s);
        }
        v[(*n)++] = (uint32_t)x;
        p = *end ? end + 1 : end;
    }
    if (!*n) {
        free(v);
        return titan_error(TITAN_ERR_USAGE, "--tokens: empty");
    }
    *out = v;
    return TITAN_OK;
}

/* convert --to gguf: one file for llama.cpp. --max-position sets its context length. */
static titan_status do_convert_gguf(const opts *o) {
    TITAN_TRY(need_pos(o, 2, "--to gguf CKPT OUT.gguf"));
    titan_gguf_export_opts go = {TITAN_DTYPE_F32, o->tokenizer, o->max_position, o->force};
    if (o->dtype && (titan_dtype_parse(o->dtype, &go.dtype) || go.dtype == TITAN_DTYPE_U32))
        return titan_error(TITAN_ERR_USAGE, "--dtype: '%s' is not f32, bf16 or f16", o->dtype);
    if (o->shard_size) return titan_error(TITAN_ERR_USAGE, "--shard-size: GGUF output is one file");
    char path[4096];
    TITAN_TRY(titan_ckpt_resolve_arg(o->pos[0], path, sizeof path));
    return titan_gguf_export(path, o->pos[1], &go);
}

static titan_status do_convert(const opts *o) {
    if ((o->to != NULL) == (o->from != NULL)) {
        titan_error(TITAN_ERR_USAGE, "convert: give exactly one of --to hf|gguf or --from hf");
        return TITAN_ERR_USAGE;
    }
    const char *fmt = o->to ? o->to : o->from;
    if (o->to && !strcmp(fmt, "gguf")) return do_convert_gguf(o);
    if (strcmp(fmt, "hf"))
        return titan_error(TITAN_ERR_USAGE, "convert: format '%s' is not supported (%s)", fmt,
                           o->to ? "hf, gguf" : "hf");
    if (o->from) {
        TITAN_TRY(need_pos(o, 2, "--from hf HFDIR OUTROOT"));
        titan_hf_import_opts io = {o->tokenizer, (int)o->multiple_of,
                                   o->ffn_mult >= 0 ? (float)o->ffn_mult : -1.0f, o->force};
        char dir[4096];
        TITAN_TRY(titan_hf_import(o->pos[0], o->pos[1], &io, dir, sizeof dir));
        titan_info("%s: imported from %s", dir, o->pos[0]);
        return TITAN_OK;
    }
    TITAN_TRY(need_pos(o, 2, "--to hf CKPT OUTDIR"));
    titan_hf_export_opts eo = {TITAN_DTYPE_F32, (uint64_t)o->shard_size, o->tokenizer, o->max_position, o->force};
    if (o->dtype && (titan_dtype_parse(o->dtype, &eo.dtype) || eo.dtype == TITAN_DTYPE_U32))
        return titan_error(TITAN_ERR_USAGE, "--dtype: '%s' is not f32, bf16 or f16", o->dtype);
    char path[4096];
    TITAN_TRY(titan_ckpt_resolve_arg(o->pos[0], path, sizeof path));
    return titan_hf_export(path, o->pos[1], &eo);
}

static titan_status run(opts *o, int *exit_code) {
    const char *c = o->cmd;
    *exit_code = 0;
    if (!strcmp(c, "ls")) {
        TITAN_TRY(need_pos(o, 1, "RUN|ROOT"));
        return titan_ckpt_ls(o->pos[0], o->json, stdout);
    }
    if (!strcmp(c, "info")) {
        TITAN_TRY(need_pos(o, 1, "CKPT"));
        return titan_ckpt_info(o->pos[0], o->json, stdout);
    }
    if (!strcmp(c, "verify")) {
        TITAN_TRY(need_pos(o, 1, "CKPT"));
        int nbad;
        return titan_ckpt_verify_all(o->pos[0], stdout, &nbad);
    }
    if (!strcmp(c, "diff")) {
        TITAN_TRY(need_pos(o, 2, "A B"));
        titan_ckpt_diff_opts d = {o->params_only, o->json, o->verbose, o->tolerance, o->atol, o->rtol};
        int differ;
        TITAN_TRY(titan_ckpt_diff(o->pos[0], o->pos[1], &d, stdout, &differ));
        *exit_code = differ;
        return TITAN_OK;
    }
    if (!strcmp(c, "convert")) return do_convert(o);
    if (!strcmp(c, "pack")) {
        TITAN_TRY(need_pos(o, 2, "CKPT OUT.tar.zst"));
        char path[4096];
        TITAN_TRY(titan_ckpt_resolve_arg(o->pos[0], path, sizeof path));
        return titan_ckpt_pack(path, o->pos[1]);
    }
    if (!strcmp(c, "unpack")) {
        TITAN_TRY(need_pos(o, 2, "IN.tar.zst OUTDIR"));
        return titan_ckpt_unpack(o->pos[0], o->pos[1], o->force);
    }
    if (!strcmp(c, "eval")) {
        TITAN_TRY(need_pos(o, 1, "CKPT --tokens 1,2,3"));
        if (!o->tokens) return titan_error(TITAN_ERR_USAGE, "eval: --tokens is required");
        uint32_t *tk = NULL;
        int n;
        TITAN_TRY(parse_tokens(o->tokens, &tk, &n));
        if (o->threads >= 0) titan_backend_cpu_set_threads((int)o->threads);
        titan_status st = titan_ckpt_eval(o->pos[0], tk, n, stdout);
        free(tk);
        return st;
    }
    titan_error(TITAN_ERR_USAGE, "unknown command '%s'", c);
    titan_error_hint("commands: ls, info, verify, diff, convert, pack, unpack, eval (titan-ckpt --help)");
    return TITAN_ERR_USAGE;
}

int main(int argc, char **argv) {
    titan_log_init("titan-ckpt");
    opts o = {.ffn_mult = -1, .threads = -1, .atol = -1, .rtol = -1};
    static titan_opt_result r; /* static: its lists live until exit, reachable (LeakSanitizer) */
    int done = 0, code = 0;
    titan_status st = parse(&o, argc, argv, &r, &done, &code);
    if (st == TITAN_OK && done) return code;
    if (st == TITAN_OK) st = run(&o, &code);
    titan_opt_result_free(&r);
    if (st != TITAN_OK) return titan_report(st);
    if (fflush(stdout) != 0) {
        titan_error(TITAN_ERR_IO, "stdout: %s", strerror(errno));
        return titan_report(TITAN_ERR_IO);
    }
    return code;
}
