/* state.h - the training state in a checkpoint: parameters, AdamW moments,
 * step, tokens seen, data-loader position, and the model it belongs to. */
#ifndef TITAN_TRAIN_STATE_H
#define TITAN_TRAIN_STATE_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "data/tokenizer.h"
#include "data/loader.h"
#include "model/llama.h"
#include "optim/optim.h"
#include "tensor/layout.h"

/* The shape of the steps a checkpoint was trained with, and of its
 * validation: what a resume under another layout keeps (train_setup.c). */
typedef struct {
    int set;                   /* 0: unknown (a seed checkpoint, or one older than these keys) */
    int64_t local_batch_size;  /* sequences a micro-batch on each data-parallel rank */
    int64_t seq_len;
    int64_t accum_steps;       /* micro-batches a rank per optimizer step */
    int64_t global_batch_size; /* sequences per optimizer step: local x dp x accum */
    char pp_schedule[32];      /* parallelism.pipeline_parallel_schedule; "" without pp */
    int64_t val_sequences;     /* held-out sequences a validation; 0: no validation */
    int64_t val_steps;         /* validation.steps that chose them (-1: the whole set) */
} titan_batch_shape;

/* The parts of a training checkpoint, as checkpoint.exclude_from_loading
 * names them (torchtitan's state keys). */
enum {
    TITAN_PART_MODEL = 1,        /* the parameters */
    TITAN_PART_OPTIMIZER = 2,    /* AdamW moments and step */
    TITAN_PART_LR_SCHEDULER = 4, /* where the LR schedule is (progress.lr_origin) */
    TITAN_PART_DATALOADER = 8,   /* the loader's position */
    TITAN_PART_TRAIN_STATE = 16, /* step and tokens seen */
};
/* "model,optimizer,..." (the config's list) -> TITAN_PART_* bits; unknown names are skipped
 * (the config checked them). */
unsigned titan_state_parts_parse(const char *list);

typedef struct {
    int64_t step;          /* optimizer steps completed */
    uint64_t tokens_seen;  /* training tokens consumed (all ranks) */
    titan_loader_state loader;
    titan_lr_inputs lr;    /* the LR schedule the steps were trained with (lr.set 0: unknown) */
    titan_batch_shape batch; /* the steps' shape (batch.set 0: unknown) */
    /* The step the LR schedule counts from: optimizer step s takes the
     * schedule's factor of s - 1 - lr_origin. 0 but after a resume that
     * left out the lr_scheduler or the train_state (exclude_from_loading). */
    int64_t lr_origin;
    /* Read only: the checkpoint holds the parameters only (last_save_model_only):
     * no AdamW moments, loader position, LR or batch state. */
    int model_only;
    /* Read only: the layout that saved the checkpoint ("" when it does not
     * say); writers take theirs as an argument. */
    char layout[TITAN_LAYOUT_STR_MAX];
} titan_train_progress;

/* Writes ROOT/step-N/ (N = progress->step) atomically; adam may be NULL (seed
 * checkpoint). Parameters are named as the reference; AdamW moments sit
 * beside them as NAME:exp_avg and NAME:exp_avg_sq. */
titan_status titan_state_save(const char *root, const titan_llama_config *mc, const float *params,
                              titan_adamw *adam, const titan_train_progress *progress,
                              const titan_tokenizer *tokenizer, int keep_latest_k);

/* The arrays a save reads (host memory, catalog order): a live model and
 * optimizer, or a snapshot of them (async save). exp_avg NULL: no optimizer
 * state (seed checkpoint). */
typedef struct {
    const float *params, *exp_avg, *exp_avg_sq;
    int64_t adam_step;
    /* 1: a model-only checkpoint (checkpoint.last_save_model_only): the
     * parameters alone, stored as dtype (f32, bf16 or f16), moments ignored */
    int model_only;
    titan_dtype dtype;
    /* The optimizer's layout (optim.h): flat_mask[i] 0 when parameter i's
     * moments are not in exp_avg/exp_avg_sq (NULL: all are); aux[n_aux]
     * further tensors, saved whole by rank 0, their floats in aux_data. */
    const unsigned char *flat_mask;
    /* moment_off[i]: where parameter i's moments (this rank's piece) start
     * in exp_avg/exp_avg_sq, moment_numel their length (packed, GaLore);
     * NULL and 0: at the parameter's own offset, as long as params */
    const size_t *moment_off;
    size_t moment_numel;
    const titan_optim_tensor *aux;
    int n_aux;
    const float *aux_data;
} titan_state_view;
/* The view's optimizer fields from o (host memory). */
void titan_state_view_optim(titan_state_view *v, titan_optim *o);
/* v's aux tensors' floats (be's memory) copied into the host buffer *buf
 * of *cap floats, grown to fit (what: the buffer's name in an out-of-memory
 * error); *out the copy, NULL when there are none. */
titan_status titan_state_aux_to_host(const titan_backend *be, const titan_state_view *v, float **buf, size_t *cap,
                                     const char *what, const float **out);
/* Reads the aux tensors of o (GaLore's) from ck whole. */
titan_status titan_state_load_aux(titan_ckpt *ck, titan_optim *o);

/* src (n floats) as dtype: src itself for f32, else a converted copy in
 * *tmp (malloc'd, the caller frees it; NULL when out of memory). */
const void *titan_state_cast(const float *src, size_t n, titan_dtype dtype, void **tmp);
titan_status titan_state_save_view(const char *root, const titan_llama_config *mc, const titan_state_view *v,
                                   const titan_train_progress *progress, const titan_tokenizer *tokenizer, int keep_latest_k);

/* Loads the checkpoint at path (a step dir, or a root: its latest) into
 * params (host, catalog order) and adam (moments absent in a seed checkpoint
 * leave adam zeroed at step 0). The checkpoint's model must equal mc. */
titan_status titan_state_load(const char *path, const titan_llama_config *mc, float *params,
                              titan_adamw *adam, titan_train_progress *progress, char *ckpt_path_out,
                              size_t cap);

/* The metadata every training checkpoint carries (model, tokenizer, step,
 * tokens, loader position, layout string, the LR schedule's inputs and the
 * batch shape when progress has them), for writers of sharded saves; the
 * tokenizer's file too (interchange/ckpt_tokenizer.h). */
titan_status titan_state_write_meta(titan_ckpt_writer *w, const titan_llama_config *mc,
                                    const titan_train_progress *progress, const titan_tokenizer *tokenizer,
                                    const char *layout);
/* The metadata of a model-only checkpoint (view.model_only): the model, the
 * tokenizer, the step, tokens seen and layout, "checkpoint.model_only" = 1
 * and "checkpoint.dtype"; no loader, LR or batch state. */
titan_status titan_state_write_meta_model_only(titan_ckpt_writer *w, const titan_llama_config *mc,
                                               const titan_train_progress *progress,
                                               const titan_tokenizer *tokenizer, const char *layout,
                                               titan_dtype dtype);
/* Checks the checkpoint's model (its metadata, and its catalog against the
 * metadata: titan_llama_ckpt_check) against mc and reads the progress. */
titan_status titan_state_read_meta(titan_ckpt *ck, const titan_llama_config *mc, titan_train_progress *progress);
/* Whether the checkpoint holds AdamW moments (first_param:exp_avg): yes sets
 * adam's step from it; no is a seed checkpoint (adam at step 0) unless
 * progress says steps were taken, which is a format error. */
titan_status titan_state_read_adam_step(titan_ckpt *ck, const char *first_param,
                                        const titan_train_progress *progress, titan_adamw *adam,
                                        int *has_moments);

#endif
