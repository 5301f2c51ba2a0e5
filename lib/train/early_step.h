/* early_step.h - optimizer.early_step_in_backward (torchtitan's key): under
 * FSDP each unit's update (AdamW's, or GaLore's: its refreshes and
 * projections too) runs as soon as its reduce-scatter completed
 * (fsdp.h's unit-done callback, inside the backward), and FSDP reuses the
 * unit's shard gradient memory for the next unit's: the shard gradients
 * take the largest unit's shard instead of the whole shard, on every
 * backend, as the full gradients do under FSDP. The update is elementwise, so the steps are the
 * ordinary step's bits; the logged gradient norm adds the units' sums of
 * squares, taken before their updates. */
#ifndef TITAN_TRAIN_EARLY_STEP_H
#define TITAN_TRAIN_EARLY_STEP_H

#include "job/config.h"
#include "optim/optim.h"
#include "parallel/fsdp.h"
#include "tensor/layout.h"

/* Whether the job can step in the backward; the refusals name why:
 * global-norm clipping (training.max_norm > 0: the norm needs every
 * gradient before any update), gradient accumulation (accum > 1: the
 * gradients are final after the last micro-batch only), pipeline and
 * tensor parallelism, replicas (HSDP, DDP: final after an all-reduce),
 * one shard (no FSDP), an optimizer other than AdamW and GaLore. */
titan_status titan_early_step_check(const titan_job_config *cfg, const titan_layout *l, int accum);

typedef struct titan_early_step titan_early_step;
/* Installs the unit-done callback on f: opt's updates over f's shard (be:
 * its memory's backend). GaLore's collectives then run inside FSDP's
 * completions, whose timing differs from rank to rank: opt's communicator
 * must be a group of its own, not FSDP's shard group (titan_optim_set_comm). */
titan_status titan_early_step_create(titan_early_step **out, titan_fsdp *f, titan_optim *opt,
                                     const titan_backend *be);
void titan_early_step_free(titan_early_step *e);
/* Before the step's backward: the step count is incremented (AdamW's
 * begin_step) and every unit updated with lr as it is reduced. */
void titan_early_step_begin(titan_early_step *e, float lr);
/* After sync_grads: this rank's sum of squares of its shard gradient, and
 * the seconds the updates took (both since begin). */
double titan_early_step_sumsq(const titan_early_step *e);
double titan_early_step_seconds(const titan_early_step *e);
/* The step's first failed update (TITAN_OK: none), after sync_grads. */
titan_status titan_early_step_error(const titan_early_step *e);

#endif
