/* fsdp.h - data-parallel training state: DDP, FSDP (ZeRO-3 along dp_shard)
 * and HSDP (both), one mechanism for all three and for one process.
 *
 * Each rank owns the dim-0 chunk of every parameter that the layout gives it
 * (titan_layout_box: torch FSDP2's chunks), packed end to end in catalog order
 * into its shard: shard parameters, shard gradients, and the AdamW moments
 * over them. With dp_shard = 1 the shard is the whole model and aliases the
 * model's own buffers (DDP, or one process).
 *
 * A step: forward and backward on full parameters into full gradients;
 * titan_fsdp_sync_grads reduce-scatters the gradients (average) over the
 * shard group, packs this rank's chunks into the shard gradient and
 * all-reduces that (average) over the replicate group in 25 MB buckets;
 * titan_fsdp_clip takes the global norm (sums of squares added over the shard
 * group in rank order); AdamW updates the shard; titan_fsdp_gather_params
 * all-gathers the parameters back into the model for the next forward.
 *
 * Memory: the model keeps full parameter and gradient buffers (the whole
 * model is gathered between steps, not layer by layer), so FSDP saves the
 * optimizer state and the shard copies: per rank 2 full + 4/dp_shard model
 * sizes of floats, against 4 for one process. All reductions add in rank
 * order, so a layout's results are deterministic. */
#ifndef TITAN_TRAIN_FSDP_H
#define TITAN_TRAIN_FSDP_H

#include <stddef.h>

#include "model/llama.h"
#include "train/mesh.h"

/* What `rank` holds of parameter i (which starts at param_off in the flat
 * model): its box, where that sits in the flat model (full_off) and in the
 * rank's packed shard (shard_off), len elements (0 when the rank holds none;
 * full_off is then the parameter's end), and whether the rank saves it. */
typedef struct {
    titan_box box;
    size_t param_off, full_off, shard_off, len;
    int writes;
} titan_shard_piece;

/* Fills pieces[np] (np = titan_llama_params(mc, NULL)) and *nshard (the
 * rank's packed shard size in elements). */
void titan_shard_plan(const titan_layout *l, const titan_llama_config *mc, int rank,
                      titan_shard_piece *pieces, size_t *nshard);

typedef struct titan_fsdp titan_fsdp;

titan_status titan_fsdp_create(titan_fsdp **out, titan_mesh *mesh, titan_llama *model);
void titan_fsdp_free(titan_fsdp *f);

size_t titan_fsdp_numel(const titan_fsdp *f);   /* shard elements */
float *titan_fsdp_params(titan_fsdp *f);        /* packed shard parameters */
float *titan_fsdp_grads(titan_fsdp *f);         /* packed shard gradients */
const titan_shard_piece *titan_fsdp_pieces(const titan_fsdp *f);

/* Collective: full parameters into the model from every rank's shard. */
titan_status titan_fsdp_gather_params(titan_fsdp *f);
/* Collective: averaged gradients of this rank's shard into titan_fsdp_grads. */
titan_status titan_fsdp_sync_grads(titan_fsdp *f);
/* Collective: the global gradient norm (before clipping) into *norm; when
 * max_norm > 0 and the norm is finite, scales the shard gradients as
 * torch.nn.utils.clip_grad_norm_ does. */
titan_status titan_fsdp_clip(titan_fsdp *f, double max_norm, double *norm);

#endif
