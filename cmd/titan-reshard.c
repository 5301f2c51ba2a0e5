/* titan-reshard - rewrite a checkpoint for another parallel layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/reshard.h"
#include "interchange/hf_convert.h"
#include "model/llama_config.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/options.h"
#include "core/progress.h"
#include "core/version.h"

/* --help's prose around the options the table generates. */
static const char intro[] =
    "Rewrites the checkpoint CKPT (a step directory, a checkpoint root: its latest\n"
    "step, or a run directory) so that each rank of LAYOUT finds its boxes in its own\n"
    "data file, into OUT (a checkpoint root, a step-N directory, or a run directory),\n"
    "atomically. Training state is copied: titan-train resumes from OUT as from CKPT.";
static const char footer[] =
    "Exit status: 0 ok, 1 failure, 2 usage error (bad layout, OUT exists), 3 file\n"
    "missing or unreadable, 4 malformed or foreign checkpoint, 6 out of memory,\n"
    "7 damaged checkpoint data. See titan-reshard(1).";

static void on_progress(void *ctx, uint64_t done, uint64_t total, const char *tensor) {
    titan_progress *p = ctx;
    if (titan_progress_due(p)) titan_progress_bytes(p, done, total, done, tensor);
}

/* A model's checkpoint: its metadata agrees with its catalog (as titan-ckpt
 * verify checks) before its tensors are laid out again and the metadata
 * copied into the output. */
static titan_status check_model(const char *src) {
    titan_ckpt *ck;
    TITAN_TRY(titan_ckpt_open(&ck, src));
    titan_llama_config mc;
    titan_status st = titan_ckpt_meta_has(ck, "model.dim") ? titan_ckpt_model_config(ck, &mc) : TITAN_OK;
    titan_ckpt_close(ck);
    return st;
}

int main(int argc, char **argv) {
    titan_log_init("titan-reshard");
    const char *to = NULL, *dtype = NULL, *comp = NULL;
    int force = 0, verbosity = 1;
    const titan_option table[] = {
        {TITAN_OPT(STRING, "to", 0, &to, "LAYOUT", "e.g. \"dp_shard=4,tp=2,pp=1\"; keys dp_replicate, dp_shard,\n"
         "cp, tp, pp (missing ones are 1), or \"single\"")},
        {TITAN_OPT(STRING, "dtype", 0, &dtype, "TYPE", "f32, bf16, f16 or keep (default keep) for float tensors")},
        {TITAN_OPT(CHOICE, "compression", 0, &comp, "C", "none, zstd or keep (default keep: zstd if the input has\n"
         "compressed chunks)"), .choices = "none,zstd,keep"},
        {TITAN_OPT(FLAG, "force", 0, &force, NULL, "replace the step in OUT if it exists")},
        TITAN_OPTS_STANDARD(&verbosity),
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-reshard", .usage = "[options] CKPT --to LAYOUT OUT", .intro = intro, .footer = footer,
        .opts = table,
    };
    static titan_opt_result r; /* static: its lists live until exit, reachable (LeakSanitizer) */
    int code = titan_opt_main(&spec, argc, argv, &r, &verbosity);
    if (code >= 0) return code;
    titan_status st;
    if (r.npos > 2) {
        titan_error(TITAN_ERR_USAGE, "unexpected argument '%s'", r.pos[2]);
        titan_error_hint("usage: titan-reshard CKPT --to LAYOUT OUT");
        return titan_report(TITAN_ERR_USAGE);
    }
    if (r.npos != 2 || !to) {
        titan_error(TITAN_ERR_USAGE, r.npos != 2 ? "expected CKPT and OUT" : "--to LAYOUT is required");
        titan_error_hint("usage: titan-reshard CKPT --to LAYOUT OUT");
        return titan_report(TITAN_ERR_USAGE);
    }
    const char *pos[2] = {r.pos[0], r.pos[1]};
    titan_reshard_opts o = {.dtype = -1, .force = force, .compression = -1, .place = titan_llama_param_place};
    st = titan_layout_parse(to, &o.layout);
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

    st = check_model(src);
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
