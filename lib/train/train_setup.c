/* train_setup.c - building a training run (trainer.h): the job's ranks
 * and this rank's device, the tokenizer and data, the model, the parallel
 * plan and optimizer, the memory plan, the resume from the latest
 * checkpoint, the step's buffers and the start-up lines. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/op_profile.h"
#include "comm/flight.h"
#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/mem.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "optim/optim.h"
#include "tensor/layout.h"
#include "trace/metrics.h"
#include "train/async_save.h"
#include "train/device.h"
#include "parallel/pipeline.h"
#include "train/sample.h"
#include "train/setup.h"
#include "train/state.h"
#include "train/state_dist.h"
#include "train/state_stage.h"
#include "train/threads.h"
#include "train/trainer.h"


/* Opens a shard directory made with the model's tokenizer. */
static titan_status open_shards(trainer *t, const char *path, titan_shard_dir **out) {
    TITAN_TRY(titan_shard_dir_open(out, path));
    const char *want = titan_tokenizer_id(t->tok), *have = titan_shard_dir_tokenizer(*out);
    if (strcmp(want, have) != 0 || titan_shard_dir_vocab_size(*out) != t->mc.vocab_size) {
        titan_error(TITAN_ERR_USAGE, "%s: shards were made with tokenizer '%s' (vocab %d), the model uses '%s' (vocab %d)",
                    path, have, titan_shard_dir_vocab_size(*out), want, t->mc.vocab_size);
        titan_error_hint("re-shard the corpus with titan-shard --tokenizer %s", t->cfg->model_tokenizer);
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

static titan_status open_data(trainer *t) {
    const titan_job_config *cfg = t->cfg;
    const char *path = cfg->training_dataset_path;
    if (!path[0]) {
        titan_error(TITAN_ERR_USAGE, "training.dataset_path: not set");
        titan_error_hint("make shards with titan-shard and pass --training.dataset_path=DIR");
        return TITAN_ERR_USAGE;
    }
    TITAN_TRY(open_shards(t, path, &t->data));
    int dpr = t->mesh.dp_rank, dps = t->mesh.dp_size;
    TITAN_TRY(titan_loader_create(&t->loader, t->data, cfg->training_seq_len, dpr, dps));
    if (cfg->training_shuffle) titan_loader_set_shuffle(t->loader, (uint64_t)cfg->training_seed);
    if (!cfg->validation_enable) return TITAN_OK;

    /* Validation walks the held-out samples from the start every time, in
     * order, so its losses are comparable across steps and runs. */
    path = cfg->validation_dataset_path;
    titan_status st = open_shards(t, path, &t->val_data);
    /* Each rank validates its share; the losses are averaged over ranks. */
    if (st == TITAN_OK) st = titan_loader_create(&t->val_loader, t->val_data, cfg->training_seq_len, dpr, dps);
    if (st != TITAN_OK) {
        titan_error_context("validation.dataset_path");
        return st;
    }
    /* A fixed number of held-out sequences, whatever the layout (the resume
     * may keep its checkpoint's: titan_trainer_resume_shape). */
    if (cfg->validation_sequences > 0)
        t->val_sequences = cfg->validation_sequences;
    else if (cfg->validation_steps > 0) /* torchtitan's: batches on every data-parallel rank */
        t->val_sequences = (int64_t)cfg->validation_steps * cfg->training_local_batch_size * dps;
    else
        t->val_sequences = (int64_t)titan_loader_samples_per_epoch(t->val_loader);
    return TITAN_OK;
}

/* The schedule of lr_scheduler.* and optimizer.lr, over total_steps (or training.steps). */
static titan_status lr_schedule(trainer *t) {
    const titan_job_config *cfg = t->cfg;
    titan_lr_inputs *in = &t->lr;
    *in = (titan_lr_inputs){.set = 1, .lr = cfg->optimizer_lr, .training_steps = cfg->training_steps,
                            .total_steps = cfg->lr_scheduler_total_steps,
                            .warmup_steps = cfg->lr_scheduler_warmup_steps,
                            .decay_ratio = cfg->lr_scheduler_decay_ratio,
                            .min_lr_factor = cfg->lr_scheduler_min_lr_factor};
    TITAN_TRY(titan_lr_decay_parse(cfg->lr_scheduler_decay_type, &in->decay));
    return titan_lr_schedule_from(&t->sched, in);
}

/* A resume whose schedule differs from the one its checkpoint was trained
 * with gets a new curve from here on: one line says so, and where the LR
 * jumps (the last step's LR under the old schedule, the next under the new). */
static void lr_resume_warn(const trainer *t) {
    const titan_lr_inputs *was = &t->pr.lr;
    char diff[512];
    if (!was->set || t->pr.step == 0 || !titan_lr_inputs_diff(was, &t->lr, diff, sizeof diff)) return;
    titan_lr_schedule old;
    if (titan_lr_schedule_from(&old, was) != TITAN_OK) {
        titan_error_clear();
        return;
    }
    int64_t s = t->pr.step;
    titan_warn("LR schedule changed since step %" PRId64 " was saved (%s): recomputed from the new values, "
               "the LR goes from %.6g (step %" PRId64 ") to %.6g at step %" PRId64 " (the old schedule's: %.6g)",
               s, diff, titan_lr_at(&old, was, s - 1), s, titan_lr_at(&t->sched, &t->lr, s), s + 1,
               titan_lr_at(&old, was, s));
}

/* What the phases of setup decide and the later ones need. */
/* (The local batch and sequence are the config's, the cp and pp degrees
 * the mesh's layout.) */
typedef struct {
    int mb;           /* sequences a micro-batch (pipeline), else the local batch */
    int sharded;      /* FSDP shards over dp_shard x cp */
    titan_pp_schedule sched;
    titan_dtype compute;
} setup_shape;

static int async_saves(const titan_job_config *cfg) {
    return cfg->checkpoint_async != TITAN_JOB_ASYNC_DISABLED && cfg->checkpoint_enable;
}

/* Phase 1: the job's ranks, the flight recorder, this rank's device and
 * the communicators, its threads. */
static titan_status open_device(trainer *t, const titan_train_opts *opts) {
    const titan_job_config *cfg = t->cfg;
    TITAN_TRY(titan_config_validate(cfg));
    TITAN_TRY(titan_mesh_init(cfg, &t->mesh));
    /* The flight recorder, before the communicators it records. */
    if (t->mesh.world > 1 && cfg->comm_trace_buf_size > 0) {
        char dir[4096 + TITAN_STR + 2];
        snprintf(dir, sizeof dir, "%s/%s", opts->run_dir, cfg->comm_save_traces_folder);
        TITAN_TRY(titan_flight_enable(dir, t->mesh.rank, t->mesh.world, cfg->comm_trace_buf_size));
        TITAN_TRY(titan_flight_watch_signals());
    }
    /* Several ranks on GPUs: one each, by local rank; then the communicators. */
    TITAN_TRY(titan_train_device_open(cfg->training_device, cfg->training_device_kind, cfg->training_deterministic,
                                      t->mesh.world, titan_dist_local_rank(t->mesh.dist),
                                      titan_dist_local_size(t->mesh.dist), &t->dev));
    TITAN_TRY(titan_mesh_connect(&t->mesh, t->dev.nccl));
    t->be = t->dev.be;
    if (cfg->profiling_enable_profiling) {
        TITAN_TRY(titan_op_profile_create(t->dev.be, &t->prof, &t->be));
        snprintf(t->prof_root, sizeof t->prof_root, "%s/%s", opts->run_dir, cfg->profiling_save_traces_folder);
    }
    titan_info("device: %s%s%s%s", t->be->name, t->dev.desc[0] ? " (" : "", t->dev.desc, t->dev.desc[0] ? ")" : "");
    /* The CPU backend's and sampling's threads; the peak probe below runs on them
     * too, so each rank measures its own share of the cores. */
    titan_train_threads th;
    TITAN_TRY(titan_train_threads_pick(t->mesh.dist, cfg->training_threads, &th));
    titan_backend_cpu_set_threads(th.threads);
    if (cfg->training_threads > 0)
        titan_info("threads: %d per rank (training.threads)", th.threads);
    else
        titan_info("threads: %d per rank (%d core%s in the affinity set, %d rank%s on this host)", th.threads,
                   th.cores, th.cores == 1 ? "" : "s", th.sharing, th.sharing == 1 ? "" : "s");
    return TITAN_OK;
}

/* Phase 2: the tokenizer, the model's configuration, the data. */
static titan_status open_inputs(trainer *t) {
    const titan_job_config *cfg = t->cfg;
    TITAN_TRY(titan_setup_ckpt_compression(cfg));
    TITAN_TRY(titan_tokenizer_open(&t->tok, cfg->model_tokenizer));
    TITAN_TRY(titan_setup_model_config(cfg, titan_tokenizer_vocab_size(t->tok), &t->mc));
    TITAN_TRY(titan_setup_accum_steps(cfg, t->mesh.dp_size, &t->accum));
    TITAN_TRY(open_data(t));

    return TITAN_OK;
}

/* Phase 3: this rank's model (its tp shard, pp stage, cp chunks). */
static titan_status build_model(trainer *t, setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    int B = cfg->training_local_batch_size, T = cfg->training_seq_len;
    int cp = t->mesh.layout.cp;
    sh->sharded = t->mesh.layout.dp_shard * cp > 1; /* FSDP's group: dp_shard x cp */
    titan_ac_mode ac = titan_setup_ac_mode(cfg);
    /* Pipeline parallelism: the model is this rank's stage, run on
     * micro-batches of pipeline_parallel_microbatch_size sequences. */
    int pp = t->mesh.layout.pp;
    sh->mb = B;
    sh->sched = TITAN_PP_1F1B;
    t->micro = 1;
    if (pp > 1) {
        if (t->sample) {
            titan_error(TITAN_ERR_USAGE, "--sample with pipeline_parallel_degree %d: not yet supported", pp);
            titan_error_hint("train without --sample, then sample from its checkpoint with one process: "
                             "titan-train RUN --sample N");
            return TITAN_ERR_USAGE;
        }
        switch (cfg->parallelism_pp_schedule) {
        case TITAN_JOB_PP_1F1B: sh->sched = TITAN_PP_1F1B; break;
        case TITAN_JOB_PP_GPIPE: sh->sched = TITAN_PP_GPIPE; break;
        case TITAN_JOB_PP_INTERLEAVED_1F1B: sh->sched = TITAN_PP_INTERLEAVED_1F1B; break;
        case TITAN_JOB_PP_LOOPED_BFS: sh->sched = TITAN_PP_LOOPED_BFS; break;
        }
        sh->mb = cfg->parallelism_pipeline_parallel_microbatch_size;
        t->micro = B / sh->mb; /* titan_config_validate: mb divides B */
        /* The exact stage split now that the layer count is known (the
         * mesh made its communicators for the schedule's kind). */
        TITAN_TRY(titan_pipeline_split(cfg, sh->sched, t->mc.n_layers, t->micro, &t->mesh.layout));
        titan_layout_format(&t->mesh.layout, t->mesh.layout_str, sizeof t->mesh.layout_str);
    }
    titan_layout *lay = &t->mesh.layout;
    int v, first_less, last_less; /* stages a rank */
    titan_layout_split(lay, &v, &first_less, &last_less);
    /* mixed_precision_param is the compute type (torchtitan's meaning): bf16
     * activations and compute weights; parameters, gradients and AdamW stay fp32. */
    sh->compute = cfg->training_param_dtype == TITAN_JOB_BFLOAT16 ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
    /* the tp and cp collectives the model runs, on its backend's buffers */
    TITAN_TRY(titan_mesh_groups(&t->mesh, t->be));
    /* FSDP holds a unit's full parameters and gradients only while in use */
    titan_llama_options mo = {.flags = sh->sharded ? TITAN_LLAMA_RELEASABLE : 0,
                              .tp = t->mesh.tp_group,
                              .cp = t->mesh.cp_group,
                              .sequence_parallel = cfg->parallelism_enable_sequence_parallel,
                              .pp_size = pp, .pp_stage = t->mesh.pp_rank,
                              .pp_v = lay->pp_v, .pp_first_less = lay->pp_first_less,
                              .pp_last_less = lay->pp_last_less,
                              .slots = titan_pipeline_slots(sh->sched, pp, t->mesh.pp_rank, v, t->micro)};
    /* titan_setup_model_config has checked the tp and pp splits */
    TITAN_TRY(titan_llama_create_ex(&t->model, &t->mc, t->be, sh->mb, T, ac, sh->compute, &mo));
    return TITAN_OK;
}

/* Phase 4: the parallel plan around the model (FSDP's units, the pipeline
 * schedule) and the optimizer over the rank's shard. */
static titan_status build_parallel_plan(trainer *t, const setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    titan_adamw_config hp = {
        .beta1 = (float)cfg->optimizer_beta1, .beta2 = (float)cfg->optimizer_beta2,
        .eps = (float)cfg->optimizer_eps, .weight_decay = (float)cfg->optimizer_weight_decay,
    };
    int *units = titan_alloc((size_t)(t->mc.n_layers + 2) * sizeof *units, "communication plan");
    if (!units) return TITAN_ERR_NOMEM;
    titan_fsdp_options fo = {0};
    titan_status st = titan_fsdp_parse_plan(cfg->parallelism_comm_bucket_plan, t->mc.n_layers + 2, sh->sharded,
                               units, &fo);
    if (st != TITAN_OK) {
        titan_free(units);
        return st;
    }
    /* torchtitan's "default": reshard unless pipeline parallel (whose
     * micro-batches would gather every unit again for each). */
    switch (cfg->parallelism_reshard_policy) {
    case TITAN_JOB_RESHARD_DEFAULT: fo.reshard_after_forward = t->mesh.layout.pp == 1; break;
    case TITAN_JOB_RESHARD_ALWAYS: fo.reshard_after_forward = 1; break;
    case TITAN_JOB_RESHARD_NEVER: fo.reshard_after_forward = 0; break;
    }
    fo.param_dtype = sh->compute; /* FSDP gathers what the model computes with */
    fo.reduce_dtype = cfg->training_reduce_dtype == TITAN_JOB_BFLOAT16 ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
    st = titan_fsdp_create(&t->fsdp, &t->mesh, t->model, &fo);
    titan_free(units); /* make_units copied the plan */
    if (st != TITAN_OK) return st;
    if (t->mesh.layout.pp > 1)
        TITAN_TRY(titan_pipeline_create(&t->pipe, &t->mesh, t->model, sh->sched, t->micro, sh->mb,
                                        cfg->training_seq_len / t->mesh.layout.cp));
    TITAN_TRY(titan_adamw_create(&t->adam, t->be, titan_fsdp_numel(t->fsdp), &hp));
    if (t->mesh.world == 1) { /* one process: the model has no FSDP hooks (overlap.h) */
        TITAN_TRY(titan_overlap_create(&t->overlap, t->model, cfg->optimizer_overlap_with_forward));
        if (titan_overlap_deferred(t->overlap))
            titan_info("optimizer: AdamW block by block on a side stream, beside the next forward "
                       "(optimizer.overlap_with_forward)");
    }
    return TITAN_OK;
}

/* On a device: the staging of synchronous saves, and the memory plan
 * beside what the backend holds. */
static titan_status plan_device_memory(trainer *t, const setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    if (!t->dev.host) {
        /* Synchronous saves of backend memory go through host copies (an
         * async saver's snapshot is one already). */
        if (!async_saves(cfg)) TITAN_TRY(titan_state_stage_create(&t->stage, t->be, titan_fsdp_numel(t->fsdp)));
        /* Everything on the device is allocated by now, once: the analytic plan
         * beside what the backend holds (each step's peak is reported too). */
        double mib = 1.0 / (1024.0 * 1024.0), pg = 2.0 * sizeof(float) * (double)titan_llama_params_count(t->model);
        double lp = (double)titan_llama_compute_copy_bytes(t->model), act = (double)titan_llama_activation_bytes(t->model);
        double opt = 2.0 * sizeof(float) * (double)titan_adamw_numel(t->adam);
        /* FSDP: the rank's shard of parameters and gradients (staging buffers
         * come on top) */
        double shard = sh->sharded ? 2.0 * sizeof(float) * (double)titan_fsdp_numel(t->fsdp) : 0.0;
        size_t held = 0;
        t->be->memory(&held, NULL, NULL, 0);
        /* FSDP commits a unit's full parameters and gradients only while in
         * use (releasable memory): the full sizes are an upper bound then. */
        const char *bound = shard > 0 ? "at most " : "";
        titan_info("device memory: planned %s%.1f MiB (parameters and gradients %s%.1f, %s compute copy %s%.1f, "
                   "AdamW %.1f, activations %.1f, FSDP shard %.1f); held %.1f MiB",
                   bound, (pg + lp + act + opt + shard) * mib, bound, pg * mib, titan_dtype_name(sh->compute), bound,
                   lp * mib, opt * mib, act * mib, shard * mib, (double)held * mib);
    }
    return TITAN_OK;
}

/* Phase 5: the LR schedule, the latest checkpoint loaded (the seed's for a
 * new run), the async saver, the metrics file. */
static titan_status resume(trainer *t, const titan_train_opts *opts) {
    const titan_job_config *cfg = t->cfg;
    TITAN_TRY(lr_schedule(t));

    /* Resume from the latest checkpoint (the seed one for a new run). */
    snprintf(t->ckpt_root, sizeof t->ckpt_root, "%s/%s", opts->run_dir, cfg->checkpoint_folder);
    char loaded[4096];
    /* Each rank reads its own boxes, whatever layout saved them. */
    TITAN_TRY(titan_state_load_staged(t->be, t->ckpt_root, &t->mc, titan_fsdp_pieces(t->fsdp), titan_fsdp_params(t->fsdp),
                                      t->adam, &t->pr, loaded, sizeof loaded));
    /* Units are gathered block by block from the first forward on. */
    TITAN_TRY(titan_fsdp_params_updated(t->fsdp));
    titan_loader_set_state(t->loader, &t->pr.loader);
    /* One process snapshots its whole state; each rank of a job its shard. */
    if (async_saves(cfg)) {
        if (t->mesh.world > 1)
            TITAN_TRY(titan_async_saver_create_sharded(&t->saver, &t->mesh, t->be, &t->mc, titan_fsdp_pieces(t->fsdp),
                                                       titan_fsdp_numel(t->fsdp)));
        else
            TITAN_TRY(titan_async_saver_create(&t->saver, t->be, titan_llama_params_count(t->model)));
    }
    titan_info("resumed from %s (step %" PRId64 ", %" PRIu64 " tokens seen)", loaded, t->pr.step,
               t->pr.tokens_seen);
    TITAN_TRY(titan_trainer_resume_shape(t, loaded)); /* the global batch and validation kept, or refused */
    if (t->mesh.rank == 0) lr_resume_warn(t);
    t->pr.lr = t->lr; /* what the next saves record */

    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", opts->run_dir);
    if (t->mesh.rank == 0) {
        TITAN_TRY(titan_metrics_open(&t->metrics, mpath, t->pr.step));
        titan_metrics_set_segment(t->metrics, t->mesh.layout_str,
                                  (int64_t)cfg->training_local_batch_size * t->accum * t->mesh.dp_size);
        if (opts->restart > 0) titan_metrics_set_restart(t->metrics, opts->restart, opts->restart_cause);
    }
    if (t->metrics && t->cfg->metrics_enable_tensorboard) {
        /* torchtitan's place: RUN/save_tb_folder/YYYYmmdd-HHMM, one per start */
        char stamp[32], tb_dir[4400];
        time_t now = time(NULL);
        struct tm tm;
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M", localtime_r(&now, &tm));
        snprintf(tb_dir, sizeof tb_dir, "%s/%s/%s", opts->run_dir, t->cfg->metrics_save_tb_folder, stamp);
        TITAN_TRY(titan_metrics_open_tensorboard(t->metrics, tb_dir, t->pr.step + 1, t->mesh.world));
    }

    return TITAN_OK;
}

/* "pipeline: stage 0 of 2 (...)", or with several stages a rank "stages 0,
 * 2 of 4 (...)". */
static void pipeline_line(trainer *t, const setup_shape *sh) {
    int pp = t->mesh.layout.pp, v = titan_llama_stages(t->model);
    char list[128] = "";
    size_t k = 0;
    for (int i = 0; i < v && k + 16 < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", i ? ", " : "", t->mesh.pp_rank + i * pp);
    titan_info("pipeline: stage%s %s of %d (this rank's parameters: %zu), %s schedule, %d micro-batches of %d x %d, "
               "%d in flight", v == 1 ? "" : "s", list, pp * v, titan_llama_params_count(t->model),
               t->cfg->parallelism_pipeline_parallel_schedule, t->micro, sh->mb, t->cfg->training_seq_len, titan_llama_slots(t->model));
}

/* Phase 6: the step's token buffers, the FLOPs and the peak for MFU, and
 * the start-up lines. */
static titan_status prepare_steps(trainer *t, const setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    int B = cfg->training_local_batch_size, T = cfg->training_seq_len, cp = t->mesh.layout.cp;
    int pp = t->mesh.layout.pp;
    size_t n = (size_t)B * T;
    t->inputs = titan_alloc(n * sizeof(uint32_t), "input tokens");
    t->targets = titan_alloc(n * sizeof(uint32_t), "target tokens");
    if (!t->inputs || !t->targets) return TITAN_ERR_NOMEM;
    if (cp > 1) {
        t->cp_inputs = titan_alloc(n / cp * sizeof(uint32_t), "input tokens (context parallel chunks)");
        t->cp_targets = titan_alloc(n / cp * sizeof(uint32_t), "target tokens (context parallel chunks)");
        if (!t->cp_inputs || !t->cp_targets) return TITAN_ERR_NOMEM;
    }

    t->flops_per_token = titan_llama_flops_per_token(&t->mc, T);
    /* A finished run (sampling only) trains no step: no peak to measure for MFU. */
    int64_t stop = titan_trainer_stop(t);
    if (t->pr.step >= stop) return TITAN_OK;
    const char *peak_source;
    t->peak_flops = titan_train_device_peak(&t->dev, sh->compute, cfg->metrics_peak_flops, &peak_source);
    t->peak_flops *= t->mesh.world; /* MFU is the job's: every rank's peak */
    titan_info("model: %zu parameters (this rank: %zu), %.3g FLOPs/token; batch %d x %d x %d dp x %d accum; "
               "peak %.1f GFLOP/s (%s); %d threads",
               titan_llama_num_params(&t->mc), titan_llama_params_count(t->model), t->flops_per_token, B, T,
               t->mesh.dp_size, t->accum, t->peak_flops * 1e-9, peak_source, titan_backend_cpu_threads());
    if (pp > 1)
        pipeline_line(t, sh);
    if (cp > 1) {
        int chunk[2];
        titan_layout_cp_chunks(T, cp, t->mesh.cp_rank, chunk);
        titan_info("context parallel: rank %d of %d holds tokens [%d, %d) and [%d, %d) of each sequence", t->mesh.cp_rank,
                   cp, chunk[0], chunk[0] + T / (2 * cp), chunk[1], chunk[1] + T / (2 * cp));
    }
    return TITAN_OK;
}

titan_status titan_trainer_setup(trainer *t, const titan_train_opts *opts) {
    setup_shape sh;
    TITAN_TRY(open_device(t, opts));
    TITAN_TRY(open_inputs(t));
    TITAN_TRY(build_model(t, &sh));
    TITAN_TRY(build_parallel_plan(t, &sh));
    TITAN_TRY(plan_device_memory(t, &sh));
    TITAN_TRY(resume(t, opts));
    return prepare_steps(t, &sh);
}

