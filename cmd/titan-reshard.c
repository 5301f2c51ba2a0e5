/* titan-reshard - rewrite a checkpoint for another parallel layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interchange/inspect.h"
#include "ckpt/reshard.h"
#include "model/llama_config.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/version.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: titan-reshard [options] CKPT --to LAYOUT OUT\n"
            "\n"
            "Rewrites the checkpoint CKPT (a step directory, a checkpoint root: its latest\n"
            "step, or a run directory) so that each rank of LAYOUT finds its boxes in its own\n"
            "data file, into OUT (a checkpoint root, a step-N directory, or a run directory),\n"
            "atomically. Training state is copied: titan-train resumes from OUT as from CKPT.\n"
            "\n"
            "  --to LAYOUT         e.g. \"dp_shard=4,tp=2,pp=1\"; keys dp_replicate, dp_shard,\n"
            "                      cp, tp, pp (missing ones are 1), or \"single\"\n"
            "  --dtype TYPE        f32, bf16, f16 or keep (default keep) for float tensors\n"
            "  --compression C     none, zstd or keep (default keep: zstd if the input has\n"
            "                      compressed chunks)\n"
            "  --force             replace the step in OUT if it exists\n"
            "  -q, --quiet         only errors\n"
            "  -v, --verbose       more detail\n"
            "  -h, --help          this help\n"
            "  --version           print the version\n"
            "\n"
            "Exit status: 0 ok, 1 failure, 2 usage error (bad layout, OUT exists), 3 file\n"
            "missing or unreadable, 4 malformed or foreign checkpoint, 6 out of memory,\n"
            "7 damaged checkpoint data. See titan-reshard(1).\n");
}

static void on_progress(void *ctx, uint64_t done, uint64_t total, const char *tensor) {
    titan_progress *p = ctx;
    if (titan_progress_due(p)) titan_progress_bytes(p, done, total, done, tensor);
}

int main(int argc, char **argv) {
    titan_log_init("titan-reshard");
    const char *pos[2] = {NULL, NULL}, *to = NULL, *dtype = NULL, *comp = NULL;
    int npos = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            printf("titan-reshard %s\n", TITAN_VERSION);
            return 0;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        size_t nl = a[0] == '-' && eq ? (size_t)(eq - a) : strlen(a);
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            titan_log_set_verbosity(0);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            titan_log_set_verbosity(2);
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if ((nl == 4 && !strncmp(a, "--to", 4)) || (nl == 7 && !strncmp(a, "--dtype", 7)) ||
                   (nl == 13 && !strncmp(a, "--compression", 13))) {
            const char *v = eq && a[0] == '-' ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) {
                titan_error(TITAN_ERR_USAGE, "%.*s needs a value", (int)nl, a);
                return titan_report(TITAN_ERR_USAGE);
            }
            if (nl == 4) to = v;
            else if (nl == 7) dtype = v;
            else comp = v;
        } else if (a[0] == '-' && a[1]) {
            titan_error(TITAN_ERR_USAGE, "unknown option '%.*s'", (int)nl, a);
            titan_error_hint("titan-reshard --help lists the options");
            return titan_report(TITAN_ERR_USAGE);
        } else if (npos == 2) {
            titan_error(TITAN_ERR_USAGE, "unexpected argument '%s'", a);
            titan_error_hint("usage: titan-reshard CKPT --to LAYOUT OUT");
            return titan_report(TITAN_ERR_USAGE);
        } else {
            pos[npos++] = a;
        }
    }
    if (npos != 2 || !to) {
        titan_error(TITAN_ERR_USAGE, npos != 2 ? "expected CKPT and OUT" : "--to LAYOUT is required");
        titan_error_hint("usage: titan-reshard CKPT --to LAYOUT OUT");
        return titan_report(TITAN_ERR_USAGE);
    }
    titan_reshard_opts o = {.dtype = -1, .force = force, .compression = -1, .place = titan_llama_param_place};
    titan_status st = titan_layout_parse(to, &o.layout);
    if (st != TITAN_OK) {
        titan_error_context("--to");
        return titan_report(st);
    }
    if (dtype && strcmp(dtype, "keep")) {
        titan_dtype d;
        if (titan_dtype_parse(dtype, &d) || d == TITAN_DTYPE_U32) {
            titan_error(TITAN_ERR_USAGE, "--dtype: '%s' is not f32, bf16, f16 or keep", dtype);
            return titan_report(TITAN_ERR_USAGE);
        }
        o.dtype = (int)d;
    }
    if (comp && strcmp(comp, "keep")) {
        titan_ckpt_compression c;
        if (titan_ckpt_compression_parse(comp, &c)) {
            titan_error(TITAN_ERR_USAGE, "--compression: '%s' is not none, zstd or keep", comp);
            return titan_report(TITAN_ERR_USAGE);
        }
        o.compression = (int)c;
    }
    char src[4096];
    st = titan_ckpt_resolve_arg(pos[0], src, sizeof src);
    if (st != TITAN_OK) return titan_report(st);

    titan_progress prog;
    titan_progress_init(&prog);
    o.progress = on_progress;
    o.ctx = &prog;
    double t0 = titan_now_s();
    titan_reshard_stats s;
    st = titan_ckpt_reshard(src, pos[1], &o, &s);
    titan_progress_clear(&prog);
    if (st != TITAN_OK) return titan_report(st);
    double dt = titan_now_s() - t0;
    char layout[TITAN_LAYOUT_STR_MAX];
    titan_layout_format(&o.layout, layout, sizeof layout);
    titan_info("%s: step %lld, layout %s -> %s: %d tensors, %.1f MB in %d rank files (world %d), %.2f s",
               s.out_dir, (long long)s.step, s.from_layout, layout, s.ntensors, 1e-6 * (double)s.bytes,
               s.nfiles, titan_layout_world(&o.layout), dt);
    titan_debug("read %s; piece and chunk buffers %.1f MB", s.src_dir, 1e-6 * (double)s.buf_bytes);
    return 0;
}
