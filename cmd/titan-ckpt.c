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
#include "interchange/inspect.h"
#include "ckpt/pack.h"
#include "core/log.h"
#include "core/version.h"
#include "data/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: titan-ckpt COMMAND [options] ARGS\n"
            "\n"
            "  ls [--json] RUN|ROOT                 the checkpoints of a run\n"
            "  info [--json] CKPT                   tensors, model, step, tokens seen, size\n"
            "  verify CKPT                          every checksum; chunks cover each tensor once\n"
            "  diff [--params-only] [--json] [-v] [--atol A] [--rtol R] A B\n"
            "                                       per-tensor max abs / max rel difference;\n"
            "                                       with a tolerance, elements outside\n"
            "                                       |a-b| <= A + R*|b| (default: exact)\n"
            "  convert --to hf CKPT OUTDIR [--dtype f32|bf16|f16] [--shard-size BYTES] [--max-position N]\n"
            "  convert --to gguf CKPT OUT.gguf [--dtype f32|bf16|f16] [--tokenizer SPEC] [--max-position N]\n"
            "  convert --from hf HFDIR OUTROOT [--tokenizer ID] [--multiple-of N] [--ffn-dim-multiplier X]\n"
            "  pack CKPT OUT.tar.zst                one checkpoint (and its run's config.toml) as a\n"
            "                                       pax tar, zstd-compressed\n"
            "  unpack IN.tar.zst OUTDIR             back into a run directory (with a config.toml)\n"
            "                                       or a checkpoint root\n"
            "  eval CKPT --tokens 1,2,3             print the model's logits (debugging aid)\n"
            "\n"
            "CKPT is a step directory, a checkpoint root (its latest step) or a run directory.\n"
            "\n"
            "  --force             replace or add to existing output\n"
            "  --threads N         CPU threads for eval (0 = all cores)\n"
            "  -q, --quiet         only errors\n"
            "  -v, --verbose       more detail\n"
            "  -h, --help          this help\n"
            "  --version           print the version\n"
            "\n"
            "Exit status: 0 ok (diff: identical), 1 diff: they differ, 2 usage error, 3 file\n"
            "missing or unreadable, 4 malformed or foreign input (catalog, header), 6 out of memory,\n"
            "7 damaged data (checksum, file cut short, zstd frame). See titan-ckpt(1).\n");
}

typedef struct {
    const char *cmd;
    const char *pos[3];
    int npos;
    int json, params_only, force, verbose;
    const char *to, *from, *dtype, *tokenizer, *tokens;
    long long shard_size, max_position, multiple_of, threads;
    double ffn_mult;
    int tolerance; /* --atol or --rtol given */
    double atol, rtol;
} opts;

/* Options taking a value, and the commands that accept each option. */
static const struct {
    const char *name;
    int has_value;
    const char *cmds;
} known[] = {
    {"--json", 0, "ls info diff"},
    {"--params-only", 0, "diff"},
    {"--atol", 1, "diff"},
    {"--rtol", 1, "diff"},
    {"--force", 0, "convert unpack"},
    {"--to", 1, "convert"},
    {"--from", 1, "convert"},
    {"--dtype", 1, "convert"},
    {"--shard-size", 1, "convert"},
    {"--max-position", 1, "convert"},
    {"--tokenizer", 1, "convert"},
    {"--multiple-of", 1, "convert"},
    {"--ffn-dim-multiplier", 1, "convert"},
    {"--tokens", 1, "eval"},
    {"--threads", 1, "eval"},
};

static int cmd_accepts(const char *cmds, const char *cmd) {
    size_t l = strlen(cmd);
    for (const char *p = cmds; (p = strstr(p, cmd)); p += l)
        if ((p == cmds || p[-1] == ' ') && (p[l] == ' ' || !p[l])) return 1;
    return 0;
}

static titan_status parse_ll(const char *opt, const char *v, long long lo, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo)
        return titan_error(TITAN_ERR_USAGE, "%s: '%s' is not an integer >= %lld", opt, v, lo);
    *out = x;
    return TITAN_OK;
}

static titan_status set_value(opts *o, const char *name, const char *v) {
    if (!strcmp(name, "--to")) o->to = v;
    else if (!strcmp(name, "--from")) o->from = v;
    else if (!strcmp(name, "--dtype")) o->dtype = v;
    else if (!strcmp(name, "--tokenizer")) o->tokenizer = v;
    else if (!strcmp(name, "--tokens")) o->tokens = v;
    else if (!strcmp(name, "--shard-size")) return parse_ll(name, v, 1, &o->shard_size);
    else if (!strcmp(name, "--max-position")) return parse_ll(name, v, 1, &o->max_position);
    else if (!strcmp(name, "--multiple-of")) return parse_ll(name, v, 1, &o->multiple_of);
    else if (!strcmp(name, "--threads")) return parse_ll(name, v, 0, &o->threads);
    else if (!strcmp(name, "--atol") || !strcmp(name, "--rtol")) {
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end || !(x >= 0) || isinf(x))
            return titan_error(TITAN_ERR_USAGE, "%s: '%s' is not a finite number >= 0", name, v);
        *(name[2] == 'a' ? &o->atol : &o->rtol) = x;
        o->tolerance = 1;
    } else if (!strcmp(name, "--ffn-dim-multiplier")) {
        char *end;
        o->ffn_mult = strtod(v, &end);
        if (end == v || *end || !(o->ffn_mult >= 0))
            return titan_error(TITAN_ERR_USAGE, "%s: '%s' is not a number >= 0", name, v);
    }
    return TITAN_OK;
}

static titan_status parse(opts *o, int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o->verbose = 1;
            titan_log_set_verbosity(2);
            continue;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            titan_log_set_verbosity(0);
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            if (o->npos == 3) return titan_error(TITAN_ERR_USAGE, "%s: unexpected argument '%s'", o->cmd, a);
            o->pos[o->npos++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        size_t k = 0, nk = sizeof known / sizeof known[0];
        while (k < nk && !(strlen(known[k].name) == nl && !strncmp(known[k].name, a, nl))) k++;
        if (k == nk || !cmd_accepts(known[k].cmds, o->cmd)) {
            titan_error(TITAN_ERR_USAGE, "%s: unknown option '%.*s'", o->cmd, (int)nl, a);
            titan_error_hint("titan-ckpt --help lists the options of each command");
            return TITAN_ERR_USAGE;
        }
        if (!known[k].has_value) {
            if (eq) return titan_error(TITAN_ERR_USAGE, "%s takes no value", known[k].name);
            if (!strcmp(a, "--json")) o->json = 1;
            else if (!strcmp(a, "--params-only")) o->params_only = 1;
            else if (!strcmp(a, "--force")) o->force = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return titan_error(TITAN_ERR_USAGE, "%s needs a value", known[k].name);
        TITAN_TRY(set_value(o, known[k].name, v));
    }
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
    titan_hf_export_opts eo = {TITAN_DTYPE_F32, (uint64_t)o->shard_size, -1, -1, o->max_position, o->force};
    if (o->dtype && (titan_dtype_parse(o->dtype, &eo.dtype) || eo.dtype == TITAN_DTYPE_U32))
        return titan_error(TITAN_ERR_USAGE, "--dtype: '%s' is not f32, bf16 or f16", o->dtype);
    char path[4096];
    TITAN_TRY(titan_ckpt_resolve_arg(o->pos[0], path, sizeof path));
    /* bos/eos come from the tokenizer the checkpoint names, when this build knows it. */
    titan_ckpt *ck;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    const char *tid;
    titan_tokenizer *tok = NULL;
    if (titan_ckpt_meta_get_str(ck, "tokenizer", &tid) == TITAN_OK && titan_tokenizer_open(&tok, tid) == TITAN_OK) {
        eo.bos_id = titan_tokenizer_bos(tok);
        eo.eos_id = titan_tokenizer_eos(tok);
        titan_tokenizer_free(tok);
    } else {
        titan_debug("tokenizer unknown here: bos/eos ids left null");
    }
    titan_error_clear();
    titan_ckpt_close(ck);
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
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("titan-ckpt %s\n", TITAN_VERSION);
        return 0;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    opts o = {.cmd = argv[1], .ffn_mult = -1, .threads = -1};
    titan_status st = parse(&o, argc, argv);
    int code = 0;
    if (st == TITAN_OK) st = run(&o, &code);
    if (st != TITAN_OK) return titan_report(st);
    if (fflush(stdout) != 0) {
        titan_error(TITAN_ERR_IO, "stdout: %s", strerror(errno));
        return titan_report(TITAN_ERR_IO);
    }
    return code;
}
