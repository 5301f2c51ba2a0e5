/* train_setup.c - building a training run (trainer.h): the job's ranks
 * and this rank's device, the tokenizer and data, the model, the parallel
 * plan and optimizer, the memory plan, the resume from the latest
 * checkpoint, the step's buffers and the start-up lines. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#include "train/setup_optim.h"
#include "tensor/layout.h"
#include "trace/metrics.h"
#include "train/async_save.h"
#include "train/device.h"
#include "train/memory_estimate.h"
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

/* The data a job names must be a shard directory: a torchtitan dataset
 * name, a corpus file or a folder of text is told how to make one. */
static titan_status need_shard_dir(const char *section, const char *path, const char *dataset) {
    struct stat sb;
    char index[4096];
    snprintf(index, sizeof index, "%s/%s", path, TITAN_SHARD_INDEX);
    if (path[0] && stat(path, &sb) == 0 && (!S_ISDIR(sb.st_mode) || access(index, F_OK) != 0)) {
        titan_error(TITAN_ERR_IO, "%s.dataset_path = %s: not a directory of token shards (%s)", section, path,
                    S_ISDIR(sb.st_mode) ? "no index.json" : "a file");
        titan_error_hint("titan reads token shards: make them with titan-shard -o DIR %s (text, JSON, JSONL or "
                         "archives), then set %s.dataset_path = DIR", path, section);
        return TITAN_ERR_IO;
    }
    if (path[0]) return TITAN_OK; /* missing: the shard reader names it */
    if (dataset[0]) {
        titan_error(TITAN_ERR_USAGE, "%s.dataset = \"%s\": not a shard directory (titan has no named datasets; "
                    "torchtitan's are its Hugging Face loaders)", section, dataset);
        titan_error_hint("make shards of the corpus with titan-shard -o DIR PATH..., then set %s.dataset_path = DIR%s",
                         section, strcmp(section, "training") ? "" : " (or titan-train --data DIR)");
        return TITAN_ERR_USAGE;
    }
    titan_error(TITAN_ERR_USAGE, "%s.dataset_path: not set", section);
    titan_error_hint("make shards with titan-shard -o DIR PATH... and pass --%s.dataset_path=DIR", section);
    return TITAN_ERR_USAGE;
}

static titan_status open_data(trainer *t) {
    const titan_job_config *cfg = t->cfg;
    const char *path = cfg->training_dataset_path;
    TITAN_TRY(need_shard_dir("training", path, cfg->training_dataset));
    TITAN_TRY(open_shards(t, path, &t->data));
    int dpr = t->mesh.dp_rank, dps = t->mesh.dp_size;
    TITAN_TRY(titan_loader_create(&t->loader, t->data, cfg->training_seq_len, dpr, dps));
    if (cfg->training_shuffle) titan_loader_set_shuffle(t->loader, (uint64_t)cfg->training_seed);
    if (!cfg->validation_enable) return TITAN_OK;

    /* Validation walks the held-out samples from the start every time, in
     * order, so its losses are comparable across steps and runs. */
    path = cfg->validation_dataset_path;
    TITAN_TRY(need_shard_dir("validation", path, cfg->validation_dataset));
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
    if (!was->set || t->pr.step == 0 || t->pr.lr_origin != 0 || !titan_lr_inputs_diff(was, &t->lr, diff, sizeof diff))
        return;
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

/* What the phases of setup decide and the later ones need (setup.h). (The
 * local batch and sequence are the config's, the cp and pp degrees the
 * mesh's layout.) */
typedef titan_setup_shape setup_shape;

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
                                      titan_dist_local_size(t->mesh.dist), t->mesh.comm_backend, &t->dev));
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
    char spec[TITAN_STR + 32];
    titan_config_tokenizer_spec(cfg, spec, sizeof spec);
    TITAN_TRY(titan_tokenizer_open(&t->tok, spec));
    TITAN_TRY(titan_setup_model_config(cfg, titan_tokenizer_vocab_size(t->tok), &t->mc));
    TITAN_TRY(titan_setup_accum_steps(cfg, t->mesh.dp_size, &t->accum));
    TITAN_TRY(open_data(t));

    return TITAN_OK;
}

/* Float8 training (model.converters): torchtitan's float8 converter's
 * checks, then the linears it would convert (titan_llama_set_float8). */
static titan_status setup_float8(trainer *t, int sharded) {
    const titan_job_config *cfg = t->cfg;
    if (!titan_config_float8(cfg)) return TITAN_OK;
    if (!cfg->float8_emulate && !(t->be->caps & TITAN_CAP_FP8_GEMM)) {
        titan_error(TITAN_ERR_USAGE, "model.converters = float8 with quantize.linear.float8.emulate = false: "
                    "the %s backend has no float8 GEMMs (they need a GPU of compute capability 8.9 or later, as "
                    "torchtitan's float8 does)", t->be->name);
        titan_error_hint("set quantize.linear.float8.emulate = true: float8 casts, products of the dequantized "
                         "operands (torchao's emulate), or train with training.device = cuda on an H100");
        return TITAN_ERR_USAGE;
    }
    const char *name = cfg->float8_recipe_name[0] ? cfg->float8_recipe_name : "tensorwise";
    titan_fp8_recipe r;
    if (titan_fp8_recipe_from_name(name, &r) != 0) /* titan_config_validate checked it */
        return titan_error(TITAN_ERR_USAGE, "quantize.linear.float8.recipe_name \"%s\": unknown", name);
    r.emulate = (unsigned char)(cfg->float8_emulate != 0);
    int conv = 0, total = 0;
    TITAN_TRY(titan_llama_set_float8(t->model, &r, cfg->float8_filter_fqns, &conv, &total));
    if (cfg->float8_enable_fsdp_float8_all_gather && !sharded)
        titan_info("quantize.linear.float8.enable_fsdp_float8_all_gather: nothing to gather (no FSDP sharding)");
    titan_info("float8: recipe %s (%s), %d of %d linears; GEMMs in float8: forward and grad_input%s", name,
               r.emulate ? "emulated: float8 operands, fp32 products" : "float8 tensor cores through cuBLASLt", conv,
               total,
               titan_fp8_recipe_gemms(&r) == 3 ? " and grad_weight" : ", grad_weight in high precision");
    return TITAN_OK;
}

/* parallelism.pipeline_parallel_schedule_csv read and checked for this
 * rank's pipeline (every rank reads it: a schedule that would deadlock
 * stops each with the same message before the first step). */
static titan_status load_csv(trainer *t, setup_shape *sh) {
    int v, first_less, last_less;
    titan_layout_split(&t->mesh.layout, &v, &first_less, &last_less);
    TITAN_TRY(titan_pp_csv_load(t->cfg->parallelism_pipeline_parallel_schedule_csv, t->mesh.layout.pp, v, t->micro,
                                &t->pp_csv));
    titan_pp_schedule_set_custom(t->pp_csv);
    sh->sched = TITAN_PP_CSV;
    return TITAN_OK;
}

/* Phase 3: this rank's model (its tp shard, pp stage, cp chunks). */
static titan_status build_model(trainer *t, setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    int T = cfg->training_seq_len, pp = t->mesh.layout.pp;
    if (pp > 1 && t->sample) {
        titan_error(TITAN_ERR_USAGE, "--sample with pipeline_parallel_degree %d: not yet supported", pp);
        titan_error_hint("train without --sample, then sample from its checkpoint with one process: "
                         "titan-train RUN --sample N");
        return TITAN_ERR_USAGE;
    }
    /* the exact stage split (the mesh made its communicators for the schedule's kind) */
    TITAN_TRY(titan_setup_shape_of(cfg, t->mc.n_layers, &t->mesh.layout, sh));
    t->micro = sh->micro;
    if (pp > 1 && cfg->parallelism_pipeline_parallel_schedule_csv[0]) TITAN_TRY(load_csv(t, sh));
    if (pp > 1) titan_layout_format(&t->mesh.layout, t->mesh.layout_str, sizeof t->mesh.layout_str);
    /* the tp and cp collectives the model runs, on its backend's buffers */
    TITAN_TRY(titan_mesh_groups(&t->mesh, t->be));
    titan_llama_options mo = titan_setup_model_options(cfg, sh, &t->mesh.layout, t->mesh.pp_rank);
    mo.tp = t->mesh.tp_group;
    mo.cp = t->mesh.cp_group;
    /* titan_setup_model_config has checked the tp and pp splits */
    TITAN_TRY(titan_llama_create_ex(&t->model, &t->mc, t->be, sh->mb, T, sh->ac, sh->compute, &mo));
    return setup_float8(t, sh->sharded);
}

/* GaLore's collectives over the shard group (optim.h's titan_optim_comm),
 * on the optimizer's buffers (backend memory). A communicator that takes
 * host memory only (shm, mpi) beside a device backend (cuda, cpu-guard)
 * gets host copies, as FSDP's staging mirrors. */
static int galore_staged(const trainer *t) {
    return !t->be->host && !titan_comm_device_buffers(t->optim_group);
}

/* The host copy's buffer, kept and grown: n floats. */
static float *galore_host(trainer *t, size_t n) {
    if (n <= t->opt_host_cap) return t->opt_host;
    titan_free(t->opt_host);
    t->opt_host_cap = 0;
    if (!(t->opt_host = titan_alloc(n * sizeof(float), "GaLore's collectives (host copy)"))) return NULL;
    t->opt_host_cap = n;
    return t->opt_host;
}

static titan_status galore_gather(void *ctx, const float *send, float *recv, const size_t *counts) {
    trainer *t = ctx;
    titan_optim_comm *oc = t->opt_comm;
    double t0 = titan_now_s();
    titan_status st;
    if (galore_staged(t)) { /* one buffer: this rank's part, then the whole */
        size_t total = 0, mine = counts[oc->rank];
        for (int r = 0; r < oc->size; r++) total += counts[r];
        float *h = galore_host(t, mine + total + 1);
        st = h ? TITAN_OK : TITAN_ERR_NOMEM;
        if (st == TITAN_OK) {
            t->be->to_host(h, send, mine * sizeof(float));
            st = titan_comm_all_gather_v(t->optim_group, h, h + mine, counts, TITAN_DTYPE_F32, NULL);
        }
        if (st == TITAN_OK) t->be->to_device(recv, h + mine, total * sizeof(float));
    } else {
        st = titan_comm_all_gather_v(t->optim_group, send, recv, counts, TITAN_DTYPE_F32, NULL);
    }
    oc->seconds += titan_now_s() - t0;
    oc->bytes += counts[oc->rank] * sizeof(float);
    return st;
}

static titan_status galore_sum(void *ctx, float *x, size_t n) {
    trainer *t = ctx;
    titan_optim_comm *oc = t->opt_comm;
    double t0 = titan_now_s();
    titan_status st;
    if (galore_staged(t)) {
        float *h = galore_host(t, n + 1);
        st = h ? TITAN_OK : TITAN_ERR_NOMEM;
        if (st == TITAN_OK) {
            t->be->to_host(h, x, n * sizeof(float));
            st = titan_comm_all_reduce(t->optim_group, h, h, n, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
        }
        if (st == TITAN_OK) t->be->to_device(x, h, n * sizeof(float));
    } else {
        st = titan_comm_all_reduce(t->optim_group, x, x, n, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
    }
    oc->seconds += titan_now_s() - t0;
    oc->bytes += n * sizeof(float);
    return st;
}

/* The optimizer over the rank's shard (optimizer.name, setup_optim.h):
 * GaLore projects the 2-D weights of attention and MLP; the embedding,
 * norms and output stay on AdamW. Under FSDP it projects each rank's rows
 * of a matrix (galore.c); tensor, pipeline and context parallelism are
 * refused. */
static titan_status create_optimizer(trainer *t) {
    const titan_job_config *cfg = t->cfg;
    titan_optim_config oc;
    TITAN_TRY(titan_setup_optim_config(cfg, &t->mesh.layout, &oc));
    int np = 0;
    titan_param *ps = NULL;
    titan_optim_param *op = NULL;
    TITAN_TRY(titan_setup_optim_params(&t->mc, titan_fsdp_pieces(t->fsdp), &ps, &op, &np));
    titan_status st = titan_optim_create(&t->opt, t->be, titan_fsdp_numel(t->fsdp), op, np, &oc);
    titan_free(op);
    free(ps);
    if (st != TITAN_OK) return st;
    t->adam = titan_optim_adamw(t->opt);
    if (t->mesh.shard_comm) {
        /* Stepping in the backward, GaLore's collectives run inside FSDP's
         * completions, at times that differ from rank to rank: on the shard
         * group they would interleave with FSDP's own differently on each
         * rank, so they take a group of their own. */
        t->optim_group = t->mesh.shard_comm;
        if (cfg->optimizer_early_step_in_backward && oc.kind == TITAN_OPTIM_GALORE)
            TITAN_TRY(titan_comm_split(t->mesh.shard_comm, 0, titan_comm_rank(t->mesh.shard_comm), "optimizer",
                                       &t->optim_group));
        t->opt_comm = titan_alloc(sizeof *t->opt_comm, "optimizer communication");
        if (!t->opt_comm) return TITAN_ERR_NOMEM;
        *t->opt_comm = (titan_optim_comm){.ctx = t, .rank = titan_comm_rank(t->mesh.shard_comm),
                                          .size = titan_comm_size(t->mesh.shard_comm),
                                          .all_gather_v = galore_gather, .all_reduce_sum = galore_sum};
        titan_optim_set_comm(t->opt, t->opt_comm);
    }
    if (t->mesh.rank == 0 && oc.kind != TITAN_OPTIM_ADAMW) {
        titan_optim_bytes b;
        titan_optim_get_bytes(t->opt, &b);
        double mib = 1.0 / 1048576.0;
        titan_info("optimizer: %s; state %.2f MiB a rank (%.2f MiB of AdamW moments, %.2f MiB of low-rank GaLore "
                   "state), step buffers %.2f MiB", cfg->optimizer_name, b.state * mib, b.flat * mib,
                   b.projected * mib, b.work * mib);
    }
    return TITAN_OK;
}

/* Phase 4: the parallel plan around the model (FSDP's units, the pipeline
 * schedule) and the optimizer over the rank's shard. */
static titan_status build_parallel_plan(trainer *t, const setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    int *units = titan_alloc((size_t)(t->mc.n_layers + 2) * sizeof *units, "communication plan");
    if (!units) return TITAN_ERR_NOMEM;
    titan_fsdp_options fo;
    titan_status st = titan_setup_fsdp_options(cfg, sh, &t->mesh.layout, t->mc.n_layers + 2, units, &fo);
    if (st == TITAN_OK) st = titan_fsdp_create(&t->fsdp, &t->mesh, t->model, &fo);
    titan_free(units); /* make_units copied the plan */
    if (st != TITAN_OK) return st;
    if (titan_config_float8(cfg) && cfg->float8_enable_fsdp_float8_all_gather) {
        size_t saved;
        TITAN_TRY(titan_fsdp_set_float8_gather(t->fsdp, &saved));
        if (saved && t->mesh.rank == 0)
            titan_info("float8: FSDP gathers the float8 linears' weights in float8 (%.2f MiB less a full gather, "
                       "scales from one amax reduction a step)", (double)saved / 1048576.0);
    }
    if (t->mesh.layout.pp > 1)
        TITAN_TRY(titan_pipeline_create(&t->pipe, &t->mesh, t->model, sh->sched, t->micro, sh->mb,
                                        cfg->training_seq_len / t->mesh.layout.cp));
    TITAN_TRY(create_optimizer(t));
    TITAN_TRY(titan_early_step_check(cfg, &t->mesh.layout, t->accum));
    if (cfg->optimizer_early_step_in_backward) {
        TITAN_TRY(titan_early_step_create(&t->early, t->fsdp, t->opt, t->be));
        if (t->mesh.rank == 0)
            titan_info("optimizer: %s steps each FSDP unit right after its reduce-scatter, in the backward "
                       "(optimizer.early_step_in_backward)", cfg->optimizer_name);
    }
    /* one process, AdamW: the model has no FSDP hooks (overlap.h) */
    if (t->mesh.world == 1 && titan_optim_get_kind(t->opt) == TITAN_OPTIM_ADAMW) {
        TITAN_TRY(titan_overlap_create(&t->overlap, t->model, cfg->optimizer_overlap_with_forward));
        if (titan_overlap_deferred(t->overlap))
            titan_info("optimizer: AdamW block by block on a side stream, beside the next forward "
                       "(optimizer.overlap_with_forward)");
    }
    return TITAN_OK;
}

/* This rank's memory estimate (the dry run's, memory_estimate.h), on the
 * device and communicators it opened. */
static titan_status estimate_memory(trainer *t, titan_memory_rank *r) {
    titan_memory_device dev;
    TITAN_TRY(titan_memory_device_of(t->cfg, &dev));
    dev.host = t->dev.host;
    dev.device_comm = t->dev.host || t->dev.nccl;
    TITAN_TRY(titan_memory_estimate(t->cfg, &t->mc, t->mesh.world, t->mesh.rank, &dev, r));
    t->mem_estimate = r->peak;
    return TITAN_OK;
}

/* memory_estimation.enable: every rank says its estimate (the others'
 * verbosity is lowered by default). */
static void estimate_line(const trainer *t, const titan_memory_rank *r) {
    double mib = 1.0 / (1024.0 * 1024.0);
    int was = titan_log_verbosity();
    if (was < 1) titan_log_set_verbosity(1);
    titan_info("memory estimate: rank %d: peak %.1f MiB (held %.1f: parameters and gradients %.1f, compute copy "
               "%.1f, optimizer state %.1f + step buffers %.1f, FSDP shard %.1f, activations %.1f = %d x %.1f a "
               "micro-batch + scratch, communication %.1f; a step adds %.1f gathered, %.1f gradients)",
               t->mesh.rank, r->peak * mib, r->held * mib, r->by_unit ? 0.0 : (r->params + r->grads) * mib,
               r->by_unit ? 0.0 : r->compute_copy * mib, r->optimizer * mib, r->optimizer_work * mib, r->shard * mib,
               r->activations * mib,
               r->slots, r->act_slot * mib, (r->cp + r->pipeline + r->fsdp_buffers + r->fp8_amaxes) * mib,
               r->fsdp_gathered * mib, r->fsdp_grads * mib);
    titan_log_set_verbosity(was);
}

/* On a device: the staging of synchronous saves, and the memory plan
 * beside what the backend holds. */
static titan_status plan_device_memory(trainer *t, const setup_shape *sh) {
    const titan_job_config *cfg = t->cfg;
    titan_memory_rank r;
    if (cfg->memory_estimation_enable || !t->dev.host) TITAN_TRY(estimate_memory(t, &r));
    if (cfg->memory_estimation_enable) estimate_line(t, &r);
    if (!t->dev.host) {
        /* Synchronous saves of backend memory go through host copies (an
         * async saver's snapshot is one already). */
        if (!async_saves(cfg)) TITAN_TRY(titan_state_stage_create(&t->stage, t->be, titan_fsdp_numel(t->fsdp)));
        /* Everything on the device is allocated by now, once: the plan
         * beside what the backend holds (each step's peak is reported too). */
        double mib = 1.0 / (1024.0 * 1024.0);
        size_t held = 0;
        t->be->memory(&held, NULL, NULL, 0);
        titan_info("device memory: planned %.1f MiB, %.1f at a step's peak (parameters and gradients %.1f, %s "
                   "compute copy %.1f, optimizer %.1f, activations %.1f, FSDP shard %.1f, communication %.1f); "
                   "held %.1f MiB; bytes: %zu held, %.0f planned", r.held * mib, r.peak * mib,
                   r.by_unit ? 0.0 : (r.params + r.grads) * mib, titan_dtype_name(sh->compute),
                   r.by_unit ? 0.0 : r.compute_copy * mib, (r.optimizer + r.optimizer_work) * mib, r.activations * mib,
                   r.shard * mib, (r.cp + r.pipeline + r.fsdp_buffers + r.fp8_amaxes) * mib, (double)held * mib, held, r.held);
    }
    return TITAN_OK;
}

/* "0, 5, 10" of the complete steps in root (at most the last 16). */
static void steps_present(const char *root, char *out, size_t cap) {
    int64_t steps[256];
    int count = 0;
    out[0] = '\0';
    if (titan_ckpt_list_steps(root, steps, 256, &count) != TITAN_OK) {
        titan_error_clear();
        snprintf(out, cap, "none");
        return;
    }
    int have = count < 256 ? count : 256;
    size_t used = 0;
    for (int i = have > 16 ? have - 16 : 0; i < have && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%" PRId64, used ? ", " : "", steps[i]);
    if (!count) snprintf(out, cap, "none");
}

/* What a resume reads: ROOT (its latest), or with checkpoint.load_step that
 * step, which must be there; *step: which step that is (-1: unknown). */
static titan_status resume_path(trainer *t, char *path, size_t cap, int64_t *step, int restart_saved) {
    int64_t want = restart_saved ? -1 : t->cfg->checkpoint_load_step;
    *step = -1;
    if (want < 0) { /* the latest; unresolved, the load says why */
        snprintf(path, cap, "%s", t->ckpt_root);
        if (titan_ckpt_latest_step(t->ckpt_root, step) != TITAN_OK) titan_error_clear(), *step = -1;
        return TITAN_OK;
    }
    *step = want;
    char name[64], have[512];
    titan_ckpt_step_name(name, sizeof name, want);
    snprintf(path, cap, "%s/%s", t->ckpt_root, name);
    char meta[4300];
    snprintf(meta, sizeof meta, "%s/metadata.json", path);
    if (titan_fs_exists(meta)) return TITAN_OK;
    steps_present(t->ckpt_root, have, sizeof have);
    titan_error(TITAN_ERR_IO, "checkpoint.load_step = %" PRId64 ": %s has no checkpoint of step %" PRId64
                " (steps present: %s)", want, t->ckpt_root, want, have);
    titan_error_hint("set checkpoint.load_step to one of the steps present, or -1 for the latest");
    return TITAN_ERR_IO;
}

/* The parts of the loaded state left out (checkpoint.exclude_from_loading;
 * the model and the optimizer were left out by the load itself), and a
 * model-only checkpoint (last_save_model_only) refused where training
 * would need what it lacks. */
static titan_status apply_exclusions(trainer *t, unsigned ex, const char *loaded) {
    titan_train_progress *pr = &t->pr;
    int64_t saved = pr->step, pos = pr->step - pr->lr_origin; /* the schedule's place */
    if (ex & TITAN_PART_DATALOADER) memset(&pr->loader, 0, sizeof pr->loader);
    if (ex & TITAN_PART_TRAIN_STATE) pr->step = 0, pr->tokens_seen = 0;
    if (ex & TITAN_PART_LR_SCHEDULER) pos = 0;
    pr->lr_origin = pr->step - pos;
    if (ex && t->mesh.rank == 0) {
        static const char *const what[] = {"model (weights drawn from training.seed)", "optimizer (fresh AdamW moments)",
                                           "lr_scheduler", "dataloader (data from the start)", "train_state"};
        char list[256] = "";
        size_t used = 0;
        for (int i = 0; i < 5; i++)
            if (ex & (1u << i)) used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", what[i]);
        titan_info("resume: step %" PRId64 " without (checkpoint.exclude_from_loading) %s: resuming at step %" PRId64
                   ", the LR schedule at its step %" PRId64, saved, list, pr->step, pos);
    }
    if ((ex & TITAN_PART_TRAIN_STATE) && saved > 0 && t->mesh.rank == 0)
        titan_warn("resume: training starts over at step 0 in %s, beside the steps up to %" PRId64 " saved there: "
                   "saves replace steps of the same number and keep_latest_k prunes the lowest numbers",
                   t->ckpt_root, saved);
    if (!pr->model_only) return TITAN_OK;
    unsigned lacks = (TITAN_PART_OPTIMIZER | TITAN_PART_LR_SCHEDULER | TITAN_PART_DATALOADER | TITAN_PART_TRAIN_STATE) & ~ex;
    if (!lacks || pr->step >= titan_trainer_stop(t)) return TITAN_OK; /* nothing left to train: the weights do */
    static const char *const part[] = {"model", "optimizer", "lr_scheduler", "dataloader", "train_state"};
    char have[512], list[128] = "";
    size_t used = 0;
    for (int i = 1; i < 5; i++)
        if (lacks & (1u << i)) used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", part[i]);
    steps_present(t->ckpt_root, have, sizeof have);
    titan_error(TITAN_ERR_USAGE, "%s holds the model only (checkpoint.last_save_model_only): it has no %s to train "
                "on from to step %" PRId64 " (and they are not in checkpoint.exclude_from_loading)", loaded, list,
                titan_trainer_stop(t));
    titan_error_hint("train on from these weights as a new run from step 0 with checkpoint.exclude_from_loading = "
                     "[\"optimizer\", \"lr_scheduler\", \"dataloader\", \"train_state\"], or resume a full "
                     "checkpoint with checkpoint.load_step (steps present: %s)", have);
    return TITAN_ERR_USAGE;
}

/* Phase 5: the LR schedule, the latest checkpoint loaded (the seed's for a
 * new run), the async saver, the metrics file. */
static titan_status resume(trainer *t, const titan_train_opts *opts) {
    const titan_job_config *cfg = t->cfg;
    TITAN_TRY(lr_schedule(t));

    /* Resume from the latest checkpoint (the seed one for a new run). */
    snprintf(t->ckpt_root, sizeof t->ckpt_root, "%s/%s", opts->run_dir, cfg->checkpoint_folder);
    char loaded[4096], path[4200];
    int64_t step;
    /* A restart of a job that saved since it started goes on from its own
     * latest: load_step and the exclusions chose where it started. */
    int again = opts->restart > 0 && opts->restart_saved;
    if (again && t->mesh.rank == 0 && (cfg->checkpoint_load_step >= 0 || cfg->checkpoint_exclude_from_loading[0]))
        titan_info("restart: the job saved since it started: resuming from its latest checkpoint "
                   "(checkpoint.load_step and exclude_from_loading applied at its first start only)");
    TITAN_TRY(resume_path(t, path, sizeof path, &step, again));
    /* The seed checkpoint (step 0) is loaded whole, as torchtitan loads step 0 (its model) */
    titan_load_opts lo = {.exclude = step > 0 && !again ? titan_state_parts_parse(cfg->checkpoint_exclude_from_loading) : 0,
                          .seed = (uint64_t)cfg->training_seed};
    /* Each rank reads its own boxes, whatever layout saved them. */
    if (titan_optim_aux_numel(t->opt) || titan_optim_flat_mask(t->opt)) /* GaLore: packed moments, its state */
        TITAN_TRY(titan_state_load_staged_optim(t->be, path, &t->mc, titan_fsdp_pieces(t->fsdp),
                                                titan_fsdp_params(t->fsdp), titan_fsdp_numel(t->fsdp), t->opt, &t->pr,
                                                loaded, sizeof loaded, &lo));
    else
        TITAN_TRY(titan_state_load_staged(t->be, path, &t->mc, titan_fsdp_pieces(t->fsdp),
                                          titan_fsdp_params(t->fsdp), t->adam, &t->pr, loaded, sizeof loaded, &lo));
    TITAN_TRY(apply_exclusions(t, lo.exclude, loaded));
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
        /* packed moments (GaLore): a snapshot of their length */
        if (titan_optim_moment_offsets(t->opt))
            TITAN_TRY(titan_async_saver_set_moment_numel(t->saver, titan_optim_moment_numel(t->opt)));
        if (cfg->checkpoint_async == TITAN_JOB_ASYNC_PINNED_MEM && !t->dev.host && t->mesh.rank == 0)
            titan_info("checkpoint: async_with_pinned_mem: %s", titan_async_saver_pin(t->saver)
                           ? "the snapshot is in page-locked host memory"
                           : "no page-locked memory from the backend: the snapshot stays pageable");
        else if (cfg->checkpoint_async == TITAN_JOB_ASYNC_PINNED_MEM && !t->dev.host)
            titan_async_saver_pin(t->saver);
    }
    titan_info("resumed from %s (step %" PRId64 ", %" PRIu64 " tokens seen)", loaded, t->pr.step,
               t->pr.tokens_seen);
    TITAN_TRY(titan_trainer_resume_shape(t, loaded)); /* the global batch and validation kept, or refused */
    /* a kept global batch may need accumulation, which stepping in the backward cannot take */
    TITAN_TRY(titan_early_step_check(cfg, &t->mesh.layout, t->accum));
    t->pr.model_only = 0; /* the next saves are full ones */
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
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", i ? ", " : "", titan_layout_rank_stage(&t->mesh.layout, t->mesh.pp_rank, i));
    const char *csv = t->cfg->parallelism_pipeline_parallel_schedule_csv;
    /* memory in flight: the slots' activations, and a split backward's stash */
    char stash[64] = "";
    size_t sb = titan_llama_stash_bytes(t->model);
    if (sb) snprintf(stash, sizeof stash, " (+ %.1f MiB of weight-gradient stash)", (double)sb / (1 << 20));
    titan_info("pipeline: stage%s %s of %d (this rank's parameters: %zu), %s schedule%s%s, %d micro-batches of %d x "
               "%d, %d in flight, %.1f MiB of activations%s", v == 1 ? "" : "s", list, pp * v,
               titan_llama_params_count(t->model), t->cfg->parallelism_pipeline_parallel_schedule, csv[0] ? " from " : "",
               csv, t->micro, sh->mb, t->cfg->training_seq_len, titan_llama_slots(t->model),
               (double)titan_llama_activation_bytes(t->model) / (1 << 20), stash);
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

