/* pipeline.h - pipeline parallelism: a local batch cut into micro-batches
 * and run through the stages (llama.h's pipeline stages, one a rank of the
 * mesh's pp group) in a schedule's order.
 *
 * Schedules (torchtitan's names):
 *   1F1B   stage s of P runs min(P - s - 1, M) forwards first, then
 *          alternates one forward and one backward, then the backwards
 *          left: at most P - s micro-batches in flight (its slots).
 *   GPipe  every forward, then every backward: M in flight.
 * Backwards run in micro-batch order on every stage, so gradients add in
 * the same order as the micro-batches of one process do: the schedule
 * changes no bit of the gradients, only memory and idle time.
 *
 * Transfers: a stage sends its output (the rank's rows of the residual
 * stream, compute type) to the next stage on the mesh's pp communicator
 * and the gradient of its input to the previous one on pp_grad (one
 * communicator a direction, mesh.h). Sends are queued (a send's buffer is
 * the slot's own output, or a host copy of it, untouched until the slot's
 * backward) and receives block; communicators that move host memory only
 * with a device backend go through host copies. The time blocked in
 * receives and waits, the pipeline's bubble included, is reported as
 * exposed communication (titan_pipeline_take_wait_s). */
#ifndef TITAN_PARALLEL_PIPELINE_H
#define TITAN_PARALLEL_PIPELINE_H

#include <stdint.h>

#include "model/llama.h"
#include "parallel/fsdp.h"
#include "parallel/mesh.h"

typedef enum { TITAN_PP_1F1B = 0, TITAN_PP_GPIPE = 1 } titan_pp_schedule;

typedef struct titan_pipeline titan_pipeline;

/* Micro-batch slots the model of stage `stage` of `stages` needs for `micro`
 * micro-batches a step (titan_llama_options.slots). */
int titan_pipeline_slots(titan_pp_schedule s, int stages, int stage, int micro);

/* For the model of this rank's stage (made with the slots above, for
 * micro-batches of B x T). */
titan_status titan_pipeline_create(titan_pipeline **out, titan_mesh *mesh, titan_llama *model,
                                   titan_pp_schedule sched, int micro, int B, int T);
void titan_pipeline_free(titan_pipeline *p); /* waits for queued sends */

/* One local batch: inputs and targets hold micro x B x T tokens (B x T per
 * micro-batch, the model's), every micro-batch's forward and backward (with
 * loss_scale) in schedule order. sync: this batch ends the optimizer step:
 * the last backward starts fsdp's gradient reductions. *loss: the mean of
 * the micro-batches' losses on the last stage, 0 on the others. A
 * non-finite loss stops nothing here (the caller checks *loss). */
titan_status titan_pipeline_step(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets,
                                 float loss_scale, int sync, titan_fsdp *fsdp, double *loss);
/* Forward only (validation), the same micro-batches; *loss as above. */
titan_status titan_pipeline_eval(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets,
                                 double *loss);
/* Seconds blocked on transfers since the last call (then reset). */
double titan_pipeline_take_wait_s(titan_pipeline *p);

#endif
