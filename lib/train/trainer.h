/* trainer.h - the training loop's state, shared by train.c (the loop) and
 * train_setup.c (building it: device, model, parallel plan, resume).
 * Private to lib/train. */
#ifndef TITAN_TRAIN_TRAINER_H
#define TITAN_TRAIN_TRAINER_H

#include <stdint.h>

#include "backend/op_profile.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "optim/optim.h"
#include "parallel/pipeline.h"
#include "parallel/pipeline_csv.h"
#include "trace/metrics.h"
#include "train/async_save.h"
#include "train/device.h"
#include "train/early_step.h"
#include "train/overlap.h"
#include "train/state.h"
#include "train/state_stage.h"
#include "train/train.h"

typedef struct {
    const titan_job_config *cfg;
    const titan_backend *be;
    titan_train_device dev;    /* training.device; be = dev.be */
    titan_state_stage *stage;  /* host copies for saves when be's memory is not host memory */
    titan_tokenizer *tok;
    titan_shard_dir *data, *val_data;
    titan_loader *loader, *val_loader;
    int64_t val_sequences;     /* held-out sequences a validation, all ranks together */
    titan_async_saver *saver;  /* NULL: saves block */
    titan_llama_config mc;
    titan_llama *model;
    titan_optim *opt;          /* optimizer.name's */
    titan_adamw *adam;         /* opt's flat moments and step count */
    titan_optim_comm *opt_comm; /* GaLore's collectives under FSDP; NULL without */
    titan_comm *optim_group;    /* their group: the shard group, or a split of it (early step) */
    float *opt_host;            /* their host copies beside a device backend (kept, grown) */
    size_t opt_host_cap;
    titan_lr_schedule sched;
    titan_lr_inputs lr;        /* sched's inputs, recorded in every save */
    titan_metrics *metrics;    /* rank 0 only */
    titan_mesh mesh;
    titan_fsdp *fsdp;
    titan_pipeline *pipe;      /* pipeline parallelism; NULL without */
    titan_pp_custom *pp_csv;   /* parallelism.pipeline_parallel_schedule_csv's schedule; NULL without */
    titan_overlap *overlap;    /* one process: partial norms, side-stream AdamW (overlap.h); NULL with several */
    titan_early_step *early;   /* optimizer.early_step_in_backward (early_step.h); NULL without */
    int micro;                 /* pipeline micro-batches per local batch (1 without) */
    titan_train_progress pr;
    int accum;
    int64_t stop_at; /* stop after this step (0 = training.steps) */
    int sample;      /* --sample follows the loop: it needs the full parameters */
    int restart;     /* this job's elastic restarts before this start (titan_train_opts) */
    uint32_t *inputs, *targets;
    /* Context parallelism: this rank's two chunks of each sequence of
     * inputs and targets (NULL without) */
    uint32_t *cp_inputs, *cp_targets;
    double peak_flops, flops_per_token;
    char ckpt_root[4096];
    titan_op_profile *prof;    /* [profiling] enable_profiling: be is its table */
    /* memory_estimation.enable: this rank's estimated peak (bytes of backend
     * memory) and the largest step peak the backend's allocator counted */
    double mem_estimate;
    size_t mem_peak;
    char prof_root[4096];
} trainer;

/* Everything a run needs before its first step, in phases (train_setup.c):
 * the device and communicators, the inputs, the model, the parallel plan,
 * the device memory plan, the resume, the step buffers. What it built is
 * freed by the loop's teardown, also after a failure. */
titan_status titan_trainer_setup(trainer *t, const titan_train_opts *opts);

/* After the checkpoint ckpt is loaded (resume_shape.c): the saved global batch
 * kept by gradient accumulation unless training.global_batch_size is set
 * (refused when this layout cannot make it), the saved number of validation
 * sequences kept when only the layout changed, rank 0's lines on both
 * ("resume: saved as LAYOUT / BATCH at step N; resuming as LAYOUT /
 * BATCH"), and t->pr.batch set to what the next saves record. */
titan_status titan_trainer_resume_shape(trainer *t, const char *ckpt);

/* The step this invocation stops at: --stop-at when it comes before
 * training.steps, else training.steps. */
static inline int64_t titan_trainer_stop(const trainer *t) {
    return t->stop_at > 0 && t->stop_at < t->cfg->training_steps ? t->stop_at : t->cfg->training_steps;
}

#endif
