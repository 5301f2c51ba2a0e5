/* overlap.h - the step's fixed costs beside the model's own work, in one
 * process (no FSDP hooks on the model): the clipping norm's partial sums
 * taken as each block's gradients finish in the backward, and each block's
 * AdamW update on the backend's side stream while the next forward runs,
 * a block's forward waiting (an event) for its own update only.
 *
 * Exactness: the norm is the sum, in block order in double, of each
 * block's sum of squares (backend.h's sumsq_into, one read-back for all),
 * whether the updates are deferred or not; no update is queued before the
 * norm is known (the clip factor is in it), the updates are elementwise
 * (titan_adamw_step_range: the bits of one whole step), and every reader of
 * a block's parameters comes after that block's update on the device: its
 * forward through the event, the rest (backward, saves, validation,
 * sampling) after it or after titan_overlap_join. So deferring changes no
 * bit, on any backend; without a side stream (cpu) the updates simply run
 * in order. */
#ifndef TITAN_TRAIN_OVERLAP_H
#define TITAN_TRAIN_OVERLAP_H

#include "model/llama.h"
#include "optim/optim.h"

typedef struct titan_overlap titan_overlap;

/* Installs its hooks on model (which must have none). defer: updates on
 * the side stream where the backend has one (optimizer.overlap_with_forward). */
titan_status titan_overlap_create(titan_overlap **out, titan_llama *model, int defer);
void titan_overlap_free(titan_overlap *o);
/* Whether updates go on the side stream (defer asked and the backend has one). */
int titan_overlap_deferred(const titan_overlap *o);
/* Whether the coming backward is the step's last micro-batch, whose
 * after-backward hooks take the partial sums (default 1). */
void titan_overlap_set_last(titan_overlap *o, int last);
/* The global gradient norm from the last backward's partial sums (waits for them). */
double titan_overlap_norm(titan_overlap *o);
/* Queues the step's update block by block in forward order (params, the
 * bf16 copy or NULL, grads: the model's buffers; clip: the factor applied
 * as the gradients are read), each block's followed by its event. */
void titan_overlap_update(titan_overlap *o, titan_adamw *adam, float *params, void *copy,
                          const float *grads, float clip, float lr);
/* Everything the main stream queues from here comes after every update
 * (before host copies of the parameters or the optimizer state). */
void titan_overlap_join(titan_overlap *o);

#endif
