/* train.c - the training loop, one process per rank (one rank or many).
 *
 * One optimizer step = accum micro-batches of local_batch_size x seq_len on
 * every data-parallel rank: forward, backward (gradients accumulate, each
 * scaled 1/accum), a finiteness check, gradient averaging over the ranks and
 * sharding (fsdp.h), global-norm clipping, the LR schedule, AdamW on this
 * rank's shard, and the all-gather of the updated parameters. Everything is a pure
 * function of (checkpoint, config, data), so a resumed run repeats an
 * uninterrupted one bit for bit. Validation (forward only, on held-out
 * shards) and checkpoint saves (optionally in a background thread) run
 * between steps and never touch the training state. */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "interchange/hf_convert.h"
#include "optim/optim.h"
#include "tensor/layout.h"
#include "trace/metrics.h"
#include "train/async_save.h"
#include "train/device.h"
#include "parallel/pipeline.h"
#include "train/pipeline_trace.h"
#include "train/sample.h"
#include "train/state.h"
#include "train/state_dist.h"
#include "train/state_stage.h"
#include "train/train.h"
#include "train/trainer.h"

/* What the model reads of the B sequences in t->inputs and t->targets:
 * them, or under context parallelism this rank's two chunks of each
 * (*in, *tg point at it). */
static void model_view(trainer *t, const uint32_t **in, const uint32_t **tg) {
    int B = t->cfg->training_local_batch_size, T = t->cfg->training_seq_len, cp = t->mesh.layout.cp;
    *in = t->inputs;
    *tg = t->targets;
    if (cp == 1) return;
    int chunk[2], len = T / (2 * cp);
    titan_layout_cp_chunks(T, cp, t->mesh.cp_rank, chunk);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 2; j++) {
            size_t from = (size_t)b * T + (size_t)chunk[j], to = ((size_t)b * 2 + (size_t)j) * len;
            memcpy(t->cp_inputs + to, t->inputs + from, (size_t)len * sizeof(uint32_t));
            memcpy(t->cp_targets + to, t->targets + from, (size_t)len * sizeof(uint32_t));
        }
    *in = t->cp_inputs;
    *tg = t->cp_targets;
}

/* The next B sequences of a loader into t->inputs and t->targets, and
 * what the model reads of them. */
static titan_status next_batch(trainer *t, titan_loader *l, const uint32_t **in, const uint32_t **tg) {
    TITAN_TRY(titan_loader_next(l, t->inputs, t->targets, t->cfg->training_local_batch_size));
    model_view(t, in, tg);
    return TITAN_OK;
}

/* The step's global gradient norm and the clipping factor the update
 * applies (1: none). */
static titan_status grad_norm(trainer *t, double *norm, float *clip) {
    double max_norm = t->cfg->training_max_norm;
    if (t->overlap) { /* the partial sums the backward took, added in block order */
        *norm = titan_overlap_norm(t->overlap);
        *clip = titan_clip_coef(*norm, max_norm);
        return TITAN_OK;
    }
    if (t->early) { /* the units' sums, taken before their updates (no clipping) */
        TITAN_TRY(titan_early_step_error(t->early));
        double ss = titan_early_step_sumsq(t->early);
        TITAN_TRY(titan_comm_sum_double(t->mesh.shard_comm, ss, &ss));
        *norm = sqrt(ss);
        return TITAN_OK;
    }
    return titan_fsdp_clip(t->fsdp, max_norm, norm, clip);
}

/* One optimizer step. Parameters change only after every check passed
 * (but under optimizer.early_step_in_backward, which updates them in the
 * backward). */
static titan_status train_step(trainer *t, titan_step_metrics *sm) {
    const titan_job_config *cfg = t->cfg;
    int B = cfg->training_local_batch_size, T = cfg->training_seq_len;
    int64_t step = t->pr.step + 1;
    double loss_sum = 0.0;
    /* LambdaLR semantics: the factor of step s-1 drives optimizer step s. */
    double lr = titan_lr_at(&t->sched, &t->lr, step - 1 - t->pr.lr_origin);
    TITAN_TRY(titan_fsdp_zero_grads(t->fsdp));
    /* GaLore's own collectives, this step's (in the backward when it steps there) */
    double oc_s = t->opt_comm ? t->opt_comm->seconds : 0.0;
    uint64_t oc_bytes = t->opt_comm ? t->opt_comm->bytes : 0;
    if (t->early) titan_early_step_begin(t->early, (float)lr); /* each unit updated as it is reduced */
    for (int a = 0; a < t->accum; a++) {
        const uint32_t *in, *tg;
        titan_flight_phase("data");
        TITAN_TRY(next_batch(t, t->loader, &in, &tg));
        float loss = 0.0f;
        float scale = 1.0f / (float)t->accum;
        if (t->pipe) { /* every micro-batch through the stages, forward and backward */
            double l = 0.0;
            titan_flight_phase("pipeline schedule");
            TITAN_TRY(titan_pipeline_step(t->pipe, in, tg, scale / (float)t->micro,
                                          a == t->accum - 1, t->fsdp, &l));
            loss = (float)l;
        } else {
            /* a hook's comm failure too */
            titan_flight_phase("forward");
            TITAN_TRY(titan_llama_forward_train(t->model, in, tg, scale, &loss));
            /* The last micro-batch's backward starts the gradient reductions
             * (one process: takes the clipping norm's partial sums). */
            titan_fsdp_set_sync(t->fsdp, a == t->accum - 1);
            if (t->overlap) titan_overlap_set_last(t->overlap, a == t->accum - 1);
            titan_flight_phase("backward");
            titan_llama_backward(t->model, scale);
            TITAN_TRY(titan_llama_take_error(t->model)); /* a tensor-parallel collective's failure */
        }
        loss_sum += loss;
    }
    /* The loss reported is the mean over every rank's micro-batches (the
     * last stage's: the others add 0). */
    titan_flight_phase("gradients");
    /* Every reduction first: stepping in the backward, a rank may be inside
     * a unit's update, in GaLore's collectives, until its peers finish
     * theirs, so no collective of another group may come between. */
    TITAN_TRY(titan_fsdp_sync_grads(t->fsdp));
    TITAN_TRY(titan_comm_sum_double(t->mesh.world_comm, loss_sum, &loss_sum));
    loss_sum /= t->mesh.world / t->mesh.layout.pp;
    double norm = 0.0;
    float clip = 1.0f; /* applied by the optimizer step as it reads the gradients */
    TITAN_TRY(grad_norm(t, &norm, &clip));
    titan_fsdp_comm_times(t->fsdp, &sm->comm_exposed_s, &sm->comm_total_s);
    /* blocking collectives: all exposed (the pipeline's bubble included);
     * the collective matmuls: their waits on peers */
    double pipe_s = t->pipe ? titan_pipeline_take_wait_s(t->pipe) : 0.0;
    sm->comm_exposed_s += titan_llama_take_exposed_s(t->model) + pipe_s;
    sm->comm_total_s += titan_llama_take_comm_s(t->model) + pipe_s;
    sm->has_comm = t->mesh.world > 1;
    sm->has_fp8 = titan_config_float8(cfg);
    sm->fp8_gemms = titan_llama_take_fp8_gemms(t->model);
    /* Checked on the sum, so every rank refuses the step alike (a pipeline's
     * loss is its last stage's; the other stages hold 0). */
    const char *taken = t->early ? "parameters already updated in the backward (optimizer.early_step_in_backward)"
                                 : "step refused, parameters unchanged";
    if (!isfinite(loss_sum)) {
        titan_error(TITAN_ERR_NUMERIC, "step %" PRId64 ": loss is not finite (%g); %s", step, loss_sum, taken);
        titan_error_hint("lower optimizer.lr or set training.max_norm; the run resumes from its last checkpoint");
        return TITAN_ERR_NUMERIC;
    }
    if (!isfinite(norm)) {
        titan_error(TITAN_ERR_NUMERIC, "step %" PRId64 ": gradient norm is not finite (%g); %s", step, norm, taken);
        titan_error_hint("lower optimizer.lr or set training.max_norm; the run resumes from its last checkpoint");
        return TITAN_ERR_NUMERIC;
    }
    /* Unsharded, the optimizer updates the model's own parameters: it also
     * writes their bf16 compute copy in the same pass, and the forwards
     * skip their casts. */
    float *params = titan_fsdp_params(t->fsdp);
    void *copy = params == titan_llama_params_data(t->model) &&
                         titan_llama_compute_dtype(t->model) == TITAN_DTYPE_BF16
                     ? titan_llama_compute_copy(t->model)
                     : NULL;
    titan_flight_phase("optimizer");
    double opt_t0 = titan_now_s();
    if (t->early) /* done in the backward: its time is the updates' own */
        opt_t0 -= titan_early_step_seconds(t->early);
    else if (t->overlap) /* block by block; deferred: on the side stream, each block's forward waits for its own */
        titan_overlap_update(t->overlap, t->adam, params, copy, titan_fsdp_grads(t->fsdp), clip, (float)lr);
    else {
        if (!titan_optim_writes_copy(t->opt)) copy = NULL; /* the forwards cast */
        TITAN_TRY(titan_optim_step(t->opt, params, copy, titan_fsdp_grads(t->fsdp), clip, (float)lr));
    }
    if (t->opt_comm && titan_optim_get_kind(t->opt) == TITAN_OPTIM_GALORE) {
        sm->has_optim_comm = 1;
        sm->optim_comm_s = t->opt_comm->seconds - oc_s;
        sm->optim_comm_bytes = t->opt_comm->bytes - oc_bytes;
    }
    titan_llama_set_copy_current(t->model, 0, titan_llama_params_count(t->model), copy != NULL);
    /* A device queues its work: step_time_s is this step's. A deferred
     * update is the next step's, hidden behind its forward where it can
     * be (the main stream was idle since the norm was read back). */
    if (!t->overlap || !titan_overlap_deferred(t->overlap)) {
        t->be->sync();
        sm->has_optimizer = 1;
        sm->optimizer_s = titan_now_s() - opt_t0;
    }
    /* The next forward gathers block by block. */
    TITAN_TRY(titan_fsdp_params_updated(t->fsdp));

    titan_loader_get_state(t->loader, &t->pr.loader);
    t->pr.step = step;
    t->pr.tokens_seen += (uint64_t)B * T * t->accum * t->mesh.dp_size;
    sm->step = step;
    sm->loss = loss_sum / t->accum;
    sm->grad_norm = norm;
    sm->lr = lr;
    sm->tokens_seen = t->pr.tokens_seen;
    return TITAN_OK;
}

/* Whether the step just taken is saved: every interval steps, at the stop,
 * after step 1 with enable_first_step_checkpoint; never with load_only. */
static int save_due(const trainer *t, int64_t stop) {
    const titan_job_config *cfg = t->cfg;
    if (!cfg->checkpoint_enable || cfg->checkpoint_load_only) return 0;
    int64_t s = t->pr.step;
    return s % cfg->checkpoint_interval == 0 || s == stop || (s == 1 && cfg->checkpoint_enable_first_step_checkpoint);
}

/* The final step (training.steps, not an earlier --stop-at) saved as a
 * model-only checkpoint (checkpoint.last_save_model_only). */
static int final_model_only(const trainer *t) {
    return t->cfg->checkpoint_last_save_model_only && t->pr.step == t->cfg->training_steps;
}

/* checkpoint.last_save_in_hf: rank 0 converts the final step's checkpoint,
 * once it is published, with titan-ckpt convert --to hf's code into
 * ROOT/step-N-hf (written as step-N-hf.tmp, then renamed); every rank
 * learns the outcome. */
static titan_status save_hf(trainer *t) {
    titan_status st = TITAN_OK;
    char name[64], step_dir[4096 + 80], out[4096 + 96];
    titan_ckpt_step_name(name, sizeof name, t->pr.step);
    snprintf(step_dir, sizeof step_dir, "%s/%s", t->ckpt_root, name);
    snprintf(out, sizeof out, "%s-hf", step_dir);
    if (t->mesh.rank == 0) {
        titan_hf_export_opts o = {.dtype = (titan_dtype)t->cfg->checkpoint_export_dtype_kind, .force = 1};
        double t0 = titan_now_s();
        st = titan_hf_export(step_dir, out, &o);
        if (st == TITAN_OK)
            titan_info("checkpoint: step %" PRId64 " also written as a Hugging Face directory, %s (%s, %.2f s)",
                       t->pr.step, out, t->cfg->checkpoint_export_dtype, titan_now_s() - t0);
        else
            titan_error_context("checkpoint.last_save_in_hf: step %" PRId64, t->pr.step);
    }
    if (t->mesh.world == 1) return st;
    uint32_t code = (uint32_t)st;
    /* the others wait for rank 0's export, which may take longer than any
     * collective: a day's timeout for this one wait */
    double timeout = titan_comm_timeout(t->mesh.world_comm);
    titan_comm_set_timeout(t->mesh.world_comm, timeout > 86400 ? timeout : 86400);
    titan_status bst = titan_comm_broadcast(t->mesh.world_comm, &code, 1, TITAN_DTYPE_U32, 0, NULL);
    titan_comm_set_timeout(t->mesh.world_comm, timeout);
    TITAN_TRY(bst);
    if (t->mesh.rank != 0 && code != TITAN_OK)
        return titan_error((titan_status)code, "checkpoint.last_save_in_hf: step %" PRId64 ": %s not written "
                           "(rank 0 says why)", t->pr.step, out);
    return st;
}

/* Saves the state after the current step; *stall_s = seconds training waited. */
static titan_status save(trainer *t, double *stall_s) {
    if (t->overlap) titan_overlap_join(t->overlap); /* the step's updates before any copy of them */
    int model_only = final_model_only(t);
    titan_state_view v = { /* several ranks: the packed shard (async_save.h) */
        .params = t->mesh.world > 1 ? titan_fsdp_params(t->fsdp) : titan_llama_params_data(t->model),
        .exp_avg = model_only ? NULL : titan_adamw_m(t->adam),
        .exp_avg_sq = model_only ? NULL : titan_adamw_v(t->adam),
        .adam_step = titan_adamw_get_step(t->adam),
        .model_only = model_only,
        .dtype = (titan_dtype)t->cfg->checkpoint_export_dtype_kind,
    };
    if (model_only && t->mesh.rank == 0)
        titan_info("checkpoint: step %" PRId64 " is the last: saving the model only, in %s "
                   "(checkpoint.last_save_model_only)", t->pr.step, t->cfg->checkpoint_export_dtype);
    if (!model_only) titan_state_view_optim(&v, t->opt); /* the model alone: no optimizer state */
    const titan_tokenizer *tok = t->tok;
    int keep = t->cfg->checkpoint_keep_latest_k;
    if (t->saver) /* snapshots v (from the device too), then writes in the background */
        return titan_async_save_start(t->saver, t->ckpt_root, &t->mc, &v, &t->pr, tok, keep, stall_s);
    double t0 = titan_now_s();
    if (t->stage) /* backend memory: saved from a host copy (part of the stall) */
        TITAN_TRY(titan_state_stage_copy(t->stage, &v, &v));
    titan_status st = titan_state_save_shards(&t->mesh, titan_fsdp_pieces(t->fsdp), &v, t->ckpt_root, &t->mc, &t->pr, tok, keep);
    *stall_s = titan_now_s() - t0;
    if (st == TITAN_OK) titan_info("checkpoint: step %" PRId64 " saved in %.2f s", t->pr.step, *stall_s);
    return st;
}

/* The step's save, and after the final one its Hugging Face copy (which
 * needs the save published: an async one is waited for). */
static titan_status save_step(trainer *t, double *stall_s) {
    TITAN_TRY(save(t, stall_s));
    if (!t->cfg->checkpoint_last_save_in_hf || !final_model_only(t)) return TITAN_OK;
    if (t->saver) TITAN_TRY(titan_async_save_wait(t->saver));
    return save_hf(t);
}

/* This rank's held-out sequences in validation batch i (rows 0..k-1; the
 * loader gives rank r of dp slots i B dp + b dp + r, b < B), of the first
 * val_sequences slots. */
static int val_rows(const trainer *t, int64_t i) {
    int B = t->cfg->training_local_batch_size, dp = t->mesh.dp_size;
    int64_t left = t->val_sequences - i * B * dp - t->mesh.dp_rank;
    if (left <= 0) return 0;
    int64_t k = (left + dp - 1) / dp;
    return k < B ? (int)k : B;
}

/* Row 0 of t->inputs and t->targets copied over rows from..B-1. */
static void repeat_row0(trainer *t, int from) {
    int B = t->cfg->training_local_batch_size, T = t->cfg->training_seq_len;
    for (int b = from; b < B; b++) {
        memcpy(t->inputs + (size_t)b * T, t->inputs, (size_t)T * sizeof(uint32_t));
        memcpy(t->targets + (size_t)b * T, t->targets, (size_t)T * sizeof(uint32_t));
    }
}

/* The mean loss of the B sequences in t->inputs and t->targets (0 on a
 * pipeline stage other than the last). */
static titan_status val_forward(trainer *t, float *loss) {
    const uint32_t *in, *tg;
    model_view(t, &in, &tg);
    if (!t->pipe) return titan_llama_forward(t->model, in, tg, loss);
    double l = 0.0;
    TITAN_TRY(titan_pipeline_eval(t->pipe, in, tg, &l));
    *loss = (float)l;
    return TITAN_OK;
}

/* Mean loss over the first val_sequences held-out sequences, whatever the
 * layout: each sequence's mean token loss, averaged. Every rank runs the
 * same forwards (their collectives); a last batch that holds only k < B of
 * a rank's sequences has its other rows filled with copies of its row 0,
 * and one more forward of B copies of that row gives the loss to take back
 * out (k sequences = B x batch loss - (B - k) x row 0's). The forwards reuse
 * the training buffers; gradients, optimizer and the training loader are
 * untouched. */
static titan_status validate(trainer *t, titan_step_metrics *sm) {
    int B = t->cfg->training_local_batch_size, T = t->cfg->training_seq_len;
    int64_t per = (int64_t)B * t->mesh.dp_size, batches = (t->val_sequences + per - 1) / per;
    double t0 = titan_now_s(), sum = 0.0, partial = 0.0;
    int partial_rows = 0;
    titan_loader_state start = {0};
    titan_loader_set_state(t->val_loader, &start);
    for (int64_t i = 0; i < batches; i++) {
        TITAN_TRY(titan_loader_next(t->val_loader, t->inputs, t->targets, B));
        int k = val_rows(t, i);
        if (k > 0 && k < B) repeat_row0(t, k);
        float loss = 0.0f;
        TITAN_TRY(val_forward(t, &loss));
        if (k == B) sum += (double)B * loss;
        else if (k > 0) partial = loss, partial_rows = k; /* only the last batch can be */
    }
    if (t->val_sequences % per != 0) { /* some rank's last batch was partial: its row 0 alone */
        repeat_row0(t, 1);
        float row0 = 0.0f;
        TITAN_TRY(val_forward(t, &row0));
        if (partial_rows) sum += (double)B * partial - (double)(B - partial_rows) * row0;
    }
    TITAN_TRY(titan_comm_sum_double(t->mesh.world_comm, sum, &sum));
    /* Its collectives (tp sums, FSDP gathers) are in val_time_s: none of
     * them may count as the next step's communication. */
    double unused;
    titan_fsdp_comm_times(t->fsdp, &unused, &unused);
    (void)titan_llama_take_comm_s(t->model);
    (void)titan_llama_take_exposed_s(t->model);
    if (t->pipe) (void)titan_pipeline_take_wait_s(t->pipe);
    sm->has_val = 1;
    /* every rank of a tp or cp group added its group's sequences (of a
     * pipeline, the last stage only) */
    sm->val_loss = sum / (double)t->val_sequences / (t->mesh.layout.tp * t->mesh.layout.cp);
    sm->val_tokens = (uint64_t)t->val_sequences * (uint64_t)T;
    sm->val_time_s = titan_now_s() - t0;
    if (!isfinite(sm->val_loss))
        titan_warn("step %" PRId64 ": validation loss is not finite (%g)", sm->step, sm->val_loss);
    return TITAN_OK;
}

/* After a profiled step: this rank's Chrome trace and op table under
 * FOLDER/iteration_STEP/, and one line on the costliest op. */
static titan_status profile_report(trainer *t, double step_s) {
    char dir[4096 + 64], path[4096 + 128];
    snprintf(dir, sizeof dir, "%s/iteration_%" PRId64, t->prof_root, t->pr.step);
    TITAN_TRY(titan_fs_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/rank%d_trace.json", dir, t->mesh.rank);
    TITAN_TRY(titan_op_profile_write_trace(t->prof, path, t->mesh.rank, t->pr.step));
    snprintf(path, sizeof path, "%s/rank%d_ops.txt", dir, t->mesh.rank);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return titan_error(TITAN_ERR_NOMEM, "op profile %s: out of memory", path);
    fprintf(f, "step %" PRId64 ", rank %d, backend %s\n", t->pr.step, t->mesh.rank, t->be->name);
    titan_op_profile_summary(t->prof, f, step_s);
    titan_status st = fclose(f) == 0 ? titan_fs_write_atomic(path, buf, len)
                                     : titan_error(TITAN_ERR_NOMEM, "op profile %s: out of memory", path);
    free(buf);
    TITAN_TRY(st);
    const char *top = NULL;
    double top_s = 0, all = titan_op_profile_total_s(t->prof, &top, &top_s);
    if (t->mesh.rank == 0)
        titan_info("profile: step %" PRId64 ": ops %.1f ms of the step's %.1f ms (each op waited for), "
                   "costliest %s %.1f%%; %s/rank%d_{trace.json,ops.txt}",
                   t->pr.step, 1e3 * all, 1e3 * step_s, top ? top : "-", all > 0 ? 100 * top_s / all : 0.0,
                   dir, t->mesh.rank);
    return TITAN_OK;
}

/* TITAN_TEST_STALL=RANK:STEP: that rank stops before that step as if stuck
 * in a kernel (it still takes signals), so tests can hang a job on purpose
 * and check what the flight recorder and titan-trace hang say. */
static void test_stall(const trainer *t) {
    static int rank = -2; /* -2: the variable not read yet (once: this runs every step) */
    static long long step = -1;
    if (rank == -2) {
        const char *v = getenv("TITAN_TEST_STALL");
        if (!v || sscanf(v, "%d:%lld", &rank, &step) != 2) rank = -1;
    }
    if (rank != t->mesh.rank || step != t->pr.step + 1) return;
    titan_warn("TITAN_TEST_STALL: rank %d stops before step %lld", rank, step);
    for (;;) pause();
}

/* TITAN_TEST_KILL=RANK:STEP[:ATTEMPTS]: that rank kills itself with
 * SIGKILL before that step in the job's first ATTEMPTS starts (default 1:
 * not again after an elastic restart), so tests can lose a rank at a
 * chosen step and check the restart. */
static void test_kill(const trainer *t) {
    static int rank = -2; /* as test_stall */
    static long long step = -1;
    static int attempts = 1;
    if (rank == -2) {
        const char *v = getenv("TITAN_TEST_KILL");
        if (!v || sscanf(v, "%d:%lld:%d", &rank, &step, &attempts) < 2) rank = -1;
    }
    if (rank != t->mesh.rank || step != t->pr.step + 1 || t->restart >= attempts) return;
    titan_warn("TITAN_TEST_KILL: rank %d kills itself before step %lld", rank, step);
    kill(getpid(), SIGKILL);
}

/* The step's metrics line, also after its save failed: a save published
 * before a later part of it failed (a rank lost after the commit) keeps
 * its step's line, the resume from it continuing the curve, and one not
 * published has the line dropped at the resume (titan_metrics_open).
 * Returns the save's failure first. */
static titan_status log_step(trainer *t, const titan_step_metrics *sm, int print, titan_status saved) {
    if (!t->metrics) return saved;
    if (saved == TITAN_OK) return titan_metrics_log(t->metrics, sm, print);
    char msg[2048], hint[1024];
    int muted = titan_error_muted();
    snprintf(msg, sizeof msg, "%s", titan_error_message());
    snprintf(hint, sizeof hint, "%s", titan_error_hint_text());
    titan_metrics_log(t->metrics, sm, print); /* the save's error is the one to report */
    titan_error(saved, "%s", msg);
    if (hint[0]) titan_error_hint("%s", hint);
    if (muted) titan_error_mute();
    return saved;
}

static titan_status loop(trainer *t) {
    const titan_job_config *cfg = t->cfg;
    double tokens_per_step = (double)cfg->training_local_batch_size * cfg->training_seq_len * t->accum *
                             t->mesh.dp_size;
    int64_t stop = titan_trainer_stop(t);
    /* The ETA: the wall time per step since this run's first step ended
     * (that one pays for warm-up), validation and checkpoints included. */
    int64_t first_step = t->pr.step + 1;
    double first_end = 0;
    while (t->pr.step < stop) {
        titan_step_metrics sm = {0};
        titan_flight_set_step(t->pr.step + 1);
        titan_flight_phase("step start");
        test_stall(t);
        test_kill(t);
        /* Several ranks commit a finished background save here (a short
         * collective wait, counted in the step's time). */
        double t0 = titan_now_s();
        sm.start_unix_s = titan_wall_s();
        if (t->saver) TITAN_TRY(titan_async_save_poll(t->saver)); /* a failed background save stops the run */
        t->be->memory(NULL, NULL, NULL, 1); /* the step's own peak */
        int profiled = t->prof && (t->pr.step + 1) % cfg->profiling_profile_freq == 0;
        if (profiled) titan_op_profile_record(t->prof, 1);
        titan_status st = train_step(t, &sm);
        if (profiled) titan_op_profile_record(t->prof, 0);
        TITAN_TRY(st);
        size_t peak = 0, used = 0;
        t->be->memory(NULL, &peak, &used, 0);
        if (peak > t->mem_peak) t->mem_peak = peak;
        if (!t->dev.host) {
            sm.has_dev_mem = 1;
            sm.dev_peak_bytes = peak;
            sm.dev_used_bytes = used;
        }
        sm.step_time_s = titan_now_s() - t0;
        sm.tokens_per_s = tokens_per_step / sm.step_time_s;
        sm.peak_flops = t->peak_flops;
        sm.mfu = t->peak_flops > 0 ? t->flops_per_token * sm.tokens_per_s / t->peak_flops : 0.0;
        if (profiled) TITAN_TRY(profile_report(t, sm.step_time_s));
        if (t->val_loader && (t->pr.step % cfg->validation_freq == 0 || t->pr.step == stop)) {
            titan_flight_phase("validation");
            TITAN_TRY(validate(t, &sm));
        }
        titan_status saved = TITAN_OK;
        if (save_due(t, stop)) {
            titan_flight_phase("checkpoint");
            saved = save_step(t, &sm.ckpt_stall_s);
            sm.has_ckpt = 1;
        }
        sm.peak_rss_bytes = titan_peak_rss();
        double projected = 0.0;
        sm.has_optim = 1;
        sm.optim_state_bytes = (uint64_t)titan_optim_state_bytes(t->opt, &projected);
        sm.optim_projected_bytes = (uint64_t)projected;
        sm.total_steps = cfg->training_steps;
        sm.eta_step = stop;
        double now = titan_now_s();
        if (sm.step == first_step) first_end = now;
        double per_step = sm.step > first_step ? (now - first_end) / (double)(sm.step - first_step) : now - t0;
        sm.eta_s = (double)(stop - sm.step) * per_step;
        int print = titan_log_verbosity() >= 1 &&
                    (sm.step % cfg->metrics_log_freq == 0 || sm.step == 1 || sm.step == stop ||
                     sm.has_val);
        TITAN_TRY(log_step(t, &sm, print, saved));
    }
    if (t->overlap) titan_overlap_join(t->overlap); /* the last step's updates, before sampling reads them */
    /* Full parameters for sampling, which follows on one rank (or its tp
     * group); otherwise each rank ends holding only its shard. */
    if (t->sample) TITAN_TRY(titan_fsdp_gather_params(t->fsdp));
    return t->saver ? titan_async_save_wait(t->saver) : TITAN_OK;
}

static void teardown(trainer *t) {
    titan_overlap_free(t->overlap); /* waits for its updates; before what they write is freed */
    titan_early_step_free(t->early);
    titan_free(t->inputs);
    titan_free(t->targets);
    titan_free(t->cp_inputs);
    titan_free(t->cp_targets);
    titan_metrics_close(t->metrics);
    titan_optim_free(t->opt);
    titan_free(t->opt_comm);
    titan_free(t->opt_host);
    if (t->optim_group != t->mesh.shard_comm) titan_comm_free(t->optim_group);
    /* FSDP drains its queued gathers into the model's memory, the pipeline
     * its queued sends from it: they go first. */
    titan_pipeline_free(t->pipe);
    titan_pp_schedule_set_custom(NULL);
    titan_pp_csv_free(t->pp_csv);
    titan_fsdp_free(t->fsdp);
    titan_llama_free(t->model);
    titan_async_saver_free(t->saver);
    titan_state_stage_free(t->stage);
    titan_loader_free(t->loader);
    titan_loader_free(t->val_loader);
    titan_shard_dir_close(t->data);
    titan_shard_dir_close(t->val_data);
    titan_tokenizer_free(t->tok);
    titan_mesh_free(&t->mesh);
    titan_op_profile_free(t->prof);
    titan_flight_disable();
}

/* A failed rank writes down its last communication (the error stays the run's). */
static void flight_dump_on_failure(void) {
    if (!titan_flight_enabled()) return;
    titan_status code = titan_error_code();
    char msg[1024], hint[256];
    snprintf(msg, sizeof msg, "%s", titan_error_message());
    snprintf(hint, sizeof hint, "%s", titan_error_hint_text());
    if (titan_flight_dump_failure(msg) != TITAN_OK)
        titan_warn("flight recorder: %s", titan_error_message());
    titan_error(code, "%s", msg);
    if (hint[0]) titan_error_hint("%s", hint);
}

/* memory_estimation.enable: every rank's measured peak beside its estimate
 * (each rank says it: the others' verbosity is lowered by default). */
static void memory_report(const trainer *t) {
    double m = (double)t->mem_peak, mib = 1.0 / (1024.0 * 1024.0);
    int was = titan_log_verbosity();
    if (was < 1) titan_log_set_verbosity(1);
    titan_info("memory: rank %d: peak %.1f MiB measured (the %s allocator's count, the largest step's), "
               "%.1f MiB estimated (%+.1f%%)%s; bytes: %zu measured, %.0f estimated", t->mesh.rank, m * mib,
               t->be->name, t->mem_estimate * mib, 100.0 * (t->mem_estimate - m) / m,
               t->dev.host && t->mesh.layout.dp_shard * t->mesh.layout.cp > 1
                   ? "; the cpu allocator counts FSDP's full buffers whole, the estimate what is resident" : "",
               t->mem_peak, t->mem_estimate);
    titan_log_set_verbosity(was);
}

titan_status titan_train(const titan_job_config *cfg, const titan_train_opts *opts) {
    trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    t.stop_at = opts->stop_at;
    t.sample = opts->sample_tokens > 0;
    t.restart = opts->restart;
    titan_status st = titan_trainer_setup(&t, opts);
    int64_t stop = titan_trainer_stop(&t);
    if (st == TITAN_OK && t.pr.step >= stop && !t.sample)
        titan_info("nothing to train: the run is at step %" PRId64 " (%s %" PRId64 ")", t.pr.step,
                   stop < cfg->training_steps ? "--stop-at" : "training.steps", stop);
    else if (st == TITAN_OK && t.pr.step >= stop)
        titan_info("sampling from step %" PRId64 " (nothing left to train)", t.pr.step);
    if (st == TITAN_OK) st = loop(&t);
    if (st == TITAN_OK && cfg->memory_estimation_enable && t.mem_peak > 0) memory_report(&t);
    if (st == TITAN_OK && t.pipe) st = titan_pipeline_trace_write(t.pipe, opts->run_dir, t.mesh.rank);
    /* rank 0 samples; under tp its group gathers the whole model with it
     * (the other ranks of its cp group hold the same parameters) */
    if (st == TITAN_OK && opts->sample_tokens > 0 && t.mesh.dp_rank == 0 && t.mesh.cp_rank == 0)
        st = titan_sample(t.model, t.tok, opts->prompt, opts->sample_tokens, opts->temperature,
                          (uint64_t)cfg->training_seed, stdout);
    if (st != TITAN_OK) flight_dump_on_failure();
    teardown(&t);
    return st;
}
