/* pipeline.h - pipeline parallelism: a local batch cut into micro-batches
 * and run through the stages (llama.h's pipeline stages: pp x v of them,
 * v a rank of the mesh's pp group) in a schedule's order
 * (pipeline_schedule.h: 1F1B, GPipe, Interleaved1F1B, LoopedBFS,
 * InterleavedZeroBubble, whose backwards run as I then, later, W: the
 * model's titan_llama_backward_input and _weight). Every rank's list is
 * checked before the first step (titan_pp_schedule_verify).
 *
 * Every stage but LoopedBFS's runs its backwards (Ws) in micro-batch order, so
 * gradients add in the same order as the micro-batches of one process do:
 * the schedule changes no bit of the gradients, only memory and idle time.
 * LoopedBFS, as torch's, runs them in reverse order: the same gradients up
 * to the order of the additions.
 *
 * Transfers: a stage sends its output (the rank's rows of the residual
 * stream, compute type) to the next stage on the mesh's pp communicator
 * and the gradient of its input to the previous one on pp_grad (one
 * communicator a direction, mesh.h); with several stages a rank, the
 * transfers between the last rank and the first (one loop's last stage
 * and the next loop's first) go on pp_wrap and pp_grad_wrap. Sends are
 * queued (a send's buffer is the slot's own output, or a host copy of it,
 * untouched until the slot's backward) and receives block, in the order
 * of the schedule, which is every rank's own order of the same (stage,
 * micro-batch) pairs: sends and receives between two ranks match in call
 * order. Communicators that move host memory only with a device backend
 * go through host copies. The time blocked in receives and waits, the
 * pipeline's bubble included, is reported as exposed communication
 * (titan_pipeline_take_wait_s). */
#ifndef TITAN_PARALLEL_PIPELINE_H
#define TITAN_PARALLEL_PIPELINE_H

#include <stdint.h>

#include "model/llama.h"
#include "parallel/fsdp.h"
#include "parallel/mesh.h"
#include "parallel/pipeline_schedule.h"

typedef struct titan_pipeline titan_pipeline;

/* Micro-batch slots the model of pp rank `rank` of `pp`, with v stages a
 * rank, needs for `micro` micro-batches a step (titan_llama_options.slots). */
int titan_pipeline_slots(titan_pp_schedule s, int pp, int rank, int v, int micro);

/* The V placement's hand-over buffers on its rank pp - 1 (stage pp's input
 * gradients waiting for stage pp - 1's backward: as many as micro-batches
 * ever wait there, each a stage message), 0 elsewhere. */
int titan_pipeline_hand_over(titan_pp_schedule s, int pp, int rank, int v, int micro);

/* The stage split of a job into *l (pp_v, pp_first_less, pp_last_less),
 * from parallelism.pipeline_parallel_layers_per_stage and the stage-less
 * layers keys, as torchtitan makes it (pipeline_parallel.py: stages =
 * ceil((n_layers + first_less + last_less) / layers_per_stage), a multiple
 * of pp; unset, 1 stage a rank, 2 for multi-stage schedules), or from
 * parallelism.module_fqns_per_model_part when set (titan_pipeline_fqn_split:
 * pp_layers), checked against the schedule and the model; TITAN_ERR_USAGE
 * names the keys. */
titan_status titan_pipeline_split(const titan_job_config *cfg, titan_pp_schedule s, int n_layers, int micro,
                                  titan_layout *l);
/* parallelism.module_fqns_per_model_part (the job config's spelling: a
 * part's FQNs joined by ',', the parts by ';') as layer counts a stage:
 * whole blocks only (tok_embeddings, layers.N, norm, output), every block
 * in exactly one part, the layers in order and a contiguous run a part,
 * the embedding in the first part, norm and output in the last;
 * TITAN_ERR_USAGE names the part and the FQN. titan_pipeline_split uses it
 * when the key is set: stages a rank = parts / pp. */
titan_status titan_pipeline_fqn_split(const char *parts, int n_layers, titan_stage_layers *out);

/* For the model of this rank's stages (made with the slots above, for
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
/* An action's times in its step (seconds from the step's start, titan_now_s
 * clock), the time it was blocked in transfers, and the process's CPU
 * time in it outside those (titan_cpu_s: its compute, which a core shared
 * with other ranks does not stretch). */
typedef struct {
    double t0, t1, blocked_s, cpu_s;
} titan_pp_span;
/* The last titan_pipeline_step's actions and spans (its start in *t0,
 * titan_now_s); returns their number, 0 before the first step. */
int titan_pipeline_last_step(const titan_pipeline *p, const titan_pp_action **acts, const titan_pp_span **spans,
                             double *t0);
/* The measured bubble over the steps so far but the first (warm-up): 1 -
 * (time in actions, less their blocked time) / (time in
 * titan_pipeline_step); *steps counts them. */
double titan_pipeline_bubble(const titan_pipeline *p, int *steps);
void titan_pipeline_shape(const titan_pipeline *p, titan_pp_schedule *s, int *pp, int *rank, int *v, int *micro);
/* Seconds blocked on transfers since the last call (then reset). */
double titan_pipeline_take_wait_s(titan_pipeline *p);

#endif
