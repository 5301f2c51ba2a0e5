/* optim.h - AdamW, the learning-rate schedule, global-norm gradient clipping. */
#ifndef TITAN_OPTIM_H
#define TITAN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/error.h"

/* ---- AdamW (PyTorch semantics, decoupled weight decay on every parameter) ---- */

typedef struct {
    float beta1, beta2, eps, weight_decay;
} titan_adamw_config;

typedef struct titan_adamw titan_adamw;

/* State for n fp32 parameters: m and v (zeroed, backend memory), step 0.
 * cfg NULL takes torchtitan's defaults (0.9, 0.95, 1e-8, 0.1). */
titan_status titan_adamw_create(titan_adamw **out, const titan_backend *be, size_t n,
                                const titan_adamw_config *cfg);
void titan_adamw_free(titan_adamw *o);
/* Increments the step count (the first step uses t = 1), then updates params. */
void titan_adamw_step(titan_adamw *o, float *params, const float *grads, float lr);
/* The same, also writing params_bf16 (n bf16, backend memory), the compute
 * copy, from the new parameters in the same pass (NULL: none), and using
 * grads[i] * gscale (titan_clip_coef's clipping; 1: none) without a pass
 * of its own over the gradients. */
void titan_adamw_step_cast(titan_adamw *o, float *params, void *params_bf16, const float *grads,
                           float gscale, float lr);

/* One step in ranges (block by block): begin_step increments the step
 * count, then each step_range updates elements [off, off + n) of params,
 * grads, the moments and params_bf16 (the whole buffers' bases; NULL: no
 * copy) with it. Ranges covering every element once give the bits of one
 * titan_adamw_step_cast (the update is elementwise). */
void titan_adamw_begin_step(titan_adamw *o);
void titan_adamw_step_range(titan_adamw *o, size_t off, size_t n, float *params, void *params_bf16,
                            const float *grads, float gscale, float lr);

/* State for checkpoints. m and v are backend memory of titan_adamw_numel() floats. */
float *titan_adamw_m(titan_adamw *o);
float *titan_adamw_v(titan_adamw *o);
size_t titan_adamw_numel(const titan_adamw *o);
int64_t titan_adamw_get_step(const titan_adamw *o);
void titan_adamw_set_step(titan_adamw *o, int64_t step);
const titan_adamw_config *titan_adamw_get_config(const titan_adamw *o);

/* ---- learning-rate schedule: torchtitan's linear warmup, stable, decay ---- */

typedef enum {
    TITAN_LR_DECAY_LINEAR = 0,
    TITAN_LR_DECAY_SQRT = 1,
    TITAN_LR_DECAY_COSINE = 2,
} titan_lr_decay;

typedef struct {
    int64_t warmup_steps, stable_steps, decay_steps;
    titan_lr_decay decay;
    double min_lr_factor;
} titan_lr_schedule;

/* "linear", "sqrt", "cosine"; TITAN_ERR_USAGE otherwise. */
titan_status titan_lr_decay_parse(const char *name, titan_lr_decay *out);
const char *titan_lr_decay_name(titan_lr_decay d);

/* As torchtitan's build_lr_schedulers: decay_steps = round(training_steps *
 * decay_ratio) (decay_ratio < 0 = unset: every step after warmup decays), cut
 * so warmup + decay <= training_steps; the rest is stable. */
titan_status titan_lr_schedule_init(titan_lr_schedule *s, int64_t training_steps,
                                    int64_t warmup_steps, double decay_ratio, const char *decay_type,
                                    double min_lr_factor);
/* Multiplier of optimizer.lr for the optimizer step that follows `step`
 * completed steps (what torch's LambdaLR passes: 0 for the first step). */
double titan_lr_factor(const titan_lr_schedule *s, int64_t step);

/* What a schedule is made of: the job's keys, which a checkpoint keeps so
 * that a resume can tell whether its schedule changed. */
typedef struct {
    int set;                 /* 0: unknown (the seed, or a checkpoint older than these keys) */
    double lr;               /* optimizer.lr, the peak */
    int64_t training_steps;  /* training.steps */
    int64_t total_steps;     /* lr_scheduler.total_steps; 0 = training_steps */
    int64_t warmup_steps;
    double decay_ratio;
    titan_lr_decay decay;
    double min_lr_factor;
} titan_lr_inputs;

/* The steps the schedule spans: total_steps, or training_steps when 0. */
int64_t titan_lr_inputs_length(const titan_lr_inputs *in);
titan_status titan_lr_schedule_from(titan_lr_schedule *s, const titan_lr_inputs *in);
/* The learning rate of the optimizer step after `step` completed ones. */
double titan_lr_at(const titan_lr_schedule *s, const titan_lr_inputs *in, int64_t step);
/* Whether the schedules of was and now differ; if so, writes the keys that
 * make the difference as "key old -> new, ..." into buf. training.steps
 * counts only where it sets the length (total_steps 0). */
int titan_lr_inputs_diff(const titan_lr_inputs *was, const titan_lr_inputs *now, char *buf, size_t cap);

/* ---- gradient clipping (torch.nn.utils.clip_grad_norm_) ---- */

/* Global L2 norm of grads[0..n) (sum of squares in double, fixed order). */
double titan_grad_norm(const titan_backend *be, const float *grads, size_t n);
/* Returns the norm before clipping; when max_norm > 0 and the norm is finite,
 * scales grads by max_norm / (norm + 1e-6) if that is < 1. */
double titan_clip_grad_norm(const titan_backend *be, float *grads, size_t n, double max_norm);
/* The scaling step alone, for a norm computed elsewhere (over shards of
 * several ranks): grads[0..n) is this rank's part of the gradient. */
void titan_clip_scale(const titan_backend *be, float *grads, size_t n, double norm, double max_norm);
/* The factor clipping multiplies the gradients by: max_norm / (norm + 1e-6)
 * in fp32 when max_norm > 0, the norm is finite and that is < 1; else 1. */
float titan_clip_coef(double norm, double max_norm);

#endif
