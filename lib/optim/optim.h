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
/* The same with the range's own gradients: span[0 .. n) are elements
 * [off, off + n) (a gradient held a range at a time). */
void titan_adamw_step_span(titan_adamw *o, size_t off, size_t n, float *params, void *params_bf16,
                           const float *span, float gscale, float lr);

/* State for checkpoints. m and v are backend memory of titan_adamw_numel() floats. */
float *titan_adamw_m(titan_adamw *o);
float *titan_adamw_v(titan_adamw *o);
size_t titan_adamw_numel(const titan_adamw *o);
int64_t titan_adamw_get_step(const titan_adamw *o);
void titan_adamw_set_step(titan_adamw *o, int64_t step);
const titan_adamw_config *titan_adamw_get_config(const titan_adamw *o);

/* ---- the optimizer interface: AdamW, Adam and GaLore-AdamW ----
 *
 * Every optimizer keeps one step count and flat moments exp_avg and
 * exp_avg_sq (titan_adamw: the AdamW kernel and its checkpoint names
 * NAME:exp_avg, NAME:exp_avg_sq). AdamW and Adam lay them out as the
 * rank's packed parameters. GaLore keeps the moments of the matrices it
 * projects in their low-rank subspace instead: the flat moments hold only
 * the parameters left on AdamW, packed end to end in catalog order
 * (titan_optim_moment_offsets), and its low-rank state is a list of
 * further tensors (titan_optim_tensor) in one arena of backend memory,
 * saved as NAME:galore_proj, NAME:galore_exp_avg and NAME:galore_exp_avg_sq. */

typedef enum { TITAN_OPTIM_ADAMW = 0, TITAN_OPTIM_ADAM = 1, TITAN_OPTIM_GALORE = 2 } titan_optim_kind;

/* Which side a matrix G (m x n) is projected on: std, right (G Q^T, Q:
 * r x n) when m >= n, else left (P^T G, P: m x r); reverse_std the other
 * way round; left and right always so (galore-torch's proj_type). */
typedef enum {
    TITAN_GALORE_STD = 0,
    TITAN_GALORE_REVERSE_STD = 1,
    TITAN_GALORE_LEFT = 2,
    TITAN_GALORE_RIGHT = 3,
} titan_galore_proj;

typedef struct {
    int rank;                /* r: columns of the projector (capped at min(m, n)) */
    int64_t update_proj_gap; /* T: the projector is refreshed when step % T == 0 (0-based) */
    float scale;             /* alpha: the back-projected update is multiplied by it */
    titan_galore_proj proj_type;
    int randomized;          /* 1: randomized SVD for the refresh; 0: exact (LAPACK dgesdd) */
    int oversampling;        /* randomized SVD: sketch columns beyond r */
    int power_iters;         /* randomized SVD: power iterations */
    uint64_t seed;           /* randomized SVD's test matrices (with the step and parameter) */
} titan_galore_config;

typedef struct {
    titan_optim_kind kind;
    titan_adamw_config adam;     /* betas, eps, weight_decay (Adam: L2 penalty, torch.optim.Adam) */
    titan_galore_config galore;  /* kind GALORE */
} titan_optim_config;

/* "AdamW", "Adam", "GaLore" (case as torchtitan's optimizer.name); TITAN_ERR_USAGE otherwise. */
titan_status titan_optim_kind_parse(const char *name, titan_optim_kind *out);
const char *titan_optim_kind_name(titan_optim_kind k);
/* "std", "reverse_std", "left", "right". */
titan_status titan_galore_proj_parse(const char *name, titan_galore_proj *out);
const char *titan_galore_proj_name(titan_galore_proj p);

/* A parameter as the optimizer sees it: its catalog name, where this
 * rank's part starts in the flat arrays, that part's shape as a matrix
 * (rows x cols; 1-D: 1 x n), whether GaLore projects it, and, for a matrix
 * sharded by rows (FSDP's dim-0 chunks), the first row this rank holds and
 * the whole matrix's rows (0: not sharded, rows are all of it). */
typedef struct {
    const char *name;
    size_t off;
    int64_t rows, cols;
    int project;
    int64_t row0, full_rows;
} titan_optim_param;

/* A state tensor beyond the flat moments: catalog name, whole 2-D shape,
 * where this rank's part lies in titan_optim_aux() (floats), its parameter
 * (index into the titan_optim_param list), and which rows this rank holds:
 * sharded tensors [row0, row0 + rows) of shape[0] (saved by the ranks that
 * save their parameter's box), the others whole (the same on every rank). */
typedef struct {
    char name[128];
    int64_t shape[2];
    size_t off;
    int param;
    int sharded;
    int64_t row0, rows;
} titan_optim_tensor;

/* The collectives GaLore needs over the group that shards its matrices by
 * rows (FSDP's shard group), in that group's rank order; ctx is the
 * caller's. all_gather_v: counts[size] floats from each rank, end to end
 * into recv; all_reduce_sum: x summed over the ranks, in place. Each call
 * adds its seconds to *seconds. */
typedef struct {
    void *ctx;
    int rank, size;
    titan_status (*all_gather_v)(void *ctx, const float *send, float *recv, const size_t *counts);
    titan_status (*all_reduce_sum)(void *ctx, float *x, size_t n);
    double seconds;
    uint64_t bytes; /* bytes this rank sent, all calls */
} titan_optim_comm;

typedef struct titan_optim titan_optim;

/* An optimizer over n packed fp32 parameters on backend be. ps[np] is
 * needed by GaLore (it projects those with .project), which runs on
 * backends with its ops (backend.h's galore_adam ... svd_signs: cpu,
 * cpu-guard, cuda); Adam with weight_decay > 0 on host memory only
 * (be->host). */
titan_status titan_optim_create(titan_optim **out, const titan_backend *be, size_t n, const titan_optim_param *ps,
                                int np, const titan_optim_config *cfg);
void titan_optim_free(titan_optim *o);
/* GaLore over row-sharded matrices (some ps[i].full_rows > rows) needs c
 * (kept by reference) before its first step. */
void titan_optim_set_comm(titan_optim *o, titan_optim_comm *c);
titan_optim_kind titan_optim_get_kind(const titan_optim *o);
/* One step (the step count incremented first), with the gradient grads[i] *
 * gscale (clipping). params_bf16: the compute copy to write in the same
 * pass, only where titan_optim_writes_copy says it can (else pass NULL). */
titan_status titan_optim_step(titan_optim *o, float *params, void *params_bf16, const float *grads, float gscale,
                              float lr);
int titan_optim_writes_copy(const titan_optim *o);
/* The same step a group of parameters at a time, as each group's gradient
 * becomes final (step_groups.c; optimizer.early_step_in_backward): begin
 * increments the step count, then step_params updates the parameters
 * [p0, p1) of the titan_optim_param list, whose elements are
 * [off, off + len) of params, with their gradients span[0 .. len) (no
 * clipping). Groups covering each parameter once give one
 * titan_optim_step's bits. GaLore's collectives (a row-sharded matrix's
 * refresh and left projection) run inside: every rank makes the same calls
 * in the same order, len 0 where it holds none of a group. Adam with
 * weight_decay > 0 has no step by groups. */
void titan_optim_begin_step(titan_optim *o);
titan_status titan_optim_step_params(titan_optim *o, int p0, int p1, size_t off, size_t len, float *params,
                                     const float *span, float lr);
/* The flat moments and the step count. */
titan_adamw *titan_optim_adamw(titan_optim *o);
/* Per parameter (catalog order): 1 when its moments are in the flat arrays
 * (saved as NAME:exp_avg/exp_avg_sq); NULL: every parameter's are. */
const unsigned char *titan_optim_flat_mask(const titan_optim *o);
/* The further state tensors (*count of them) and their arena (backend
 * memory, titan_optim_aux_numel floats); none for AdamW and Adam. */
const titan_optim_tensor *titan_optim_aux_tensors(const titan_optim *o, int *count);
float *titan_optim_aux(titan_optim *o);
size_t titan_optim_aux_numel(const titan_optim *o);
/* An optimizer of o's layout (kind, moments, GaLore's tensors) whose state
 * is host memory on the CPU backend, zeroed, step 0: a checkpoint of a
 * device job is read into it (titan_optim_copy_state then moves it). It
 * takes no step (no step buffers). */
titan_status titan_optim_host_twin(const titan_optim *o, titan_optim **twin);
/* dst's step count, flat moments and GaLore state = src's, one of them on
 * the host (a twin's), through to_device / to_host. */
titan_status titan_optim_copy_state(titan_optim *dst, const titan_optim *src);
/* Where parameter i's flat moments start in titan_adamw_m/v (catalog
 * order; a projected matrix has none: its entry is meaningless); NULL when
 * they lie as the parameters do (AdamW, Adam: at the parameter's offset). */
const size_t *titan_optim_moment_offsets(const titan_optim *o);
/* Floats in each flat moment array (titan_adamw_numel of titan_optim_adamw). */
size_t titan_optim_moment_numel(const titan_optim *o);

/* The memory of an optimizer, bytes: state = flat (both flat moments) +
 * projected (GaLore's projectors and low-rank moments); work: GaLore's step
 * buffers (the scaled gradient, the full and low-rank updates, a refresh's
 * SVD workspace and, under FSDP, its gathered gradient), held beside the
 * state. All of it is backend memory. */
typedef struct {
    double state, flat, projected, work;
} titan_optim_bytes;
/* What o holds. */
void titan_optim_get_bytes(const titan_optim *o, titan_optim_bytes *out);
/* What titan_optim_create(n, ps, np, cfg) would hold, without allocating
 * it (the memory plan): the same layout code. */
titan_status titan_optim_plan_bytes(size_t n, const titan_optim_param *ps, int np, const titan_optim_config *cfg,
                                    titan_optim_bytes *out);
/* titan_optim_get_bytes's state; *projected (may be NULL): its low-rank part. */
double titan_optim_state_bytes(const titan_optim *o, double *projected);

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
