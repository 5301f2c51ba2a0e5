/* fsdp.h - data-parallel training state: DDP, FSDP (ZeRO-3 along dp_shard,
 * times cp under context parallelism: the mesh's shard group)
 * and HSDP (both), one mechanism for all three and for one process.
 *
 * Each rank owns the dim-0 chunk of every parameter that the layout gives it
 * (titan_layout_box: torch FSDP2's chunks), packed end to end in catalog order
 * into its shard: shard parameters, shard gradients, and the AdamW moments
 * over them. With dp_shard = 1 the shard is the whole model and aliases the
 * model's own buffers (DDP, or one process).
 *
 * A step runs block by block (llama.h hooks; blocks are grouped into
 * communication units, see titan_fsdp_options). Each unit's communication
 * is one collective over one contiguous staging buffer laid out rank by
 * rank (packing to and from the model's tensor-by-tensor layout is a copy,
 * or a cast for bf16). FSDP: a unit's parameters are all-gathered from the
 * shards (in the parameter dtype) just before its first block's forward,
 * the next unit's gather queued meanwhile so it runs while this one
 * computes; with reshard_after_forward the unit is freed after its forward
 * and gathered again (the previous unit prefetched) during backward, and
 * freed again after its backward. As soon as a unit's last block (in
 * backward order) is done on the last micro-batch, its gradients are
 * reduce-scattered (average, in the reduce dtype) over the shard group,
 * asynchronously, and the full gradient freed; for DDP/HSDP each finished
 * unit's shard gradient is then all-reduced (average, reduce dtype) over
 * the replicate group. titan_fsdp_sync_grads waits for all of it;
 * titan_fsdp_clip takes the global norm (sums of squares added over the
 * shard group in rank order); AdamW updates the fp32 shard;
 * titan_fsdp_params_updated marks every unit stale (and queues the first
 * unit's gather for the next step).
 *
 * Every collective is issued in the same order on every rank and every
 * reduction adds in rank order, element by element, so neither the unit
 * plan, nor resharding, nor timing changes a bit of the results: per-block
 * and whole-model gathers train identically.
 *
 * Memory: the model's full parameter, gradient and compute-copy buffers are
 * releasable memory (llama.h's TITAN_LLAMA_RELEASABLE, backend.h): a unit's
 * range is committed when its gather lands (parameters) or its backward
 * starts (gradients), and released when it is resharded or reduced, so a
 * rank holds its fp32 shard (parameters, gradients, and AdamW's two
 * moments: 4/(dp_shard x cp) model sizes) plus the units in use: the gathered
 * parameters of the current and prefetched units, the full gradients of
 * units not yet reduced, and up to three staging buffers of the largest
 * unit each (allocated at setup, titan_fsdp_staging). On
 * the host that is pages (mem.h); on a GPU, mapping granules (the partial
 * ones at a unit's ends stay, zeroed). With reshard_after_forward = never,
 * every unit stays gathered from its forward to its backward. Set
 * TITAN_FSDP_POISON=1 to fill freed units with NaN instead, which proves no
 * block reads parameters it did not gather (cpu-guard faults on released
 * memory itself).
 *
 * Devices: shards, staging buffers and AdamW live in the backend's memory
 * (packing is the backend's convert). An nccl communicator takes them as
 * they are; a host-only one (shared memory, with cpu-guard or with a cuda
 * build without NCCL) gets host mirrors of the staging buffers, copied with
 * to_host before a collective and to_device after it.
 *
 * Mixed precision: param_dtype bf16 gathers bf16 copies of the fp32 shard
 * (half the bytes). When the model computes in bf16 too, the gather lands
 * straight in its bf16 compute copy, the values a cast would give: the
 * unit's full fp32 parameters are neither committed nor cast (4 bytes a
 * parameter less held, 8 less moved per gather); with an fp32 model it
 * fills the fp32 buffer. reduce_dtype bf16 casts gradients to bf16 for the
 * reduce-scatter and all-reduce (each reduction still adds in fp32 and
 * rounds once, comm.h). Master weights, optimizer state and the shard
 * gradient stay fp32. */
#ifndef TITAN_PARALLEL_FSDP_H
#define TITAN_PARALLEL_FSDP_H

#include <stddef.h>

#include "model/llama.h"
#include "parallel/mesh.h"

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
 * rank's packed shard size in elements). TITAN_ERR_NOMEM when the catalogs
 * it reads do not fit. */
titan_status titan_shard_plan(const titan_layout *l, const titan_llama_config *mc, int rank,
                              titan_shard_piece *pieces, size_t *nshard);

typedef struct titan_fsdp titan_fsdp;

/* The communication plan. Units are runs of consecutive blocks (llama.h
 * numbering); each unit's parameters are gathered together and its
 * gradients reduced together. */
typedef struct {
    int reshard_after_forward;  /* FSDP: free a unit after forward, gather again for backward */
    /* unit_of_block[n_layers + 2]: unit ids, 0 for block 0, each the same as
     * or one more than the previous block's; NULL: automatic by size. */
    const int *unit_of_block;
    /* Automatic plan: consecutive blocks share a unit while it stays within
     * this many bytes of parameters (a larger block is a unit alone);
     * 0: one unit per block. */
    size_t bucket_bytes;
    titan_dtype param_dtype;    /* gathered parameters: F32 (default) or BF16 */
    titan_dtype reduce_dtype;   /* gradient reductions: F32 (default) or BF16 */
} titan_fsdp_options;

/* Parses parallelism.comm_bucket_plan for a model of n_blocks blocks into
 * opt (unit_of_block points into units[n_blocks]): "auto" (FSDP one unit
 * per block, DDP 25 MB buckets), "blocks" (one unit per block), "whole" (one
 * unit), "size:MB" (automatic, MB per unit) or a comma-separated unit id per
 * block ("0,1,1,2"). */
titan_status titan_fsdp_parse_plan(const char *s, int n_blocks, int sharded, int *units, titan_fsdp_options *opt);

/* What a rank of layout l holds under FSDP's plan opt, without a model or
 * a communicator (a memory dry run): its shard (titan_shard_plan's) and
 * its units' sizes (titan_fsdp_create's units), in elements of the rank's
 * tp-local model. */
typedef struct {
    int nshards;            /* the shard group's ranks (dp_shard x cp); 1: no FSDP */
    size_t nshard;          /* the rank's shard: AdamW's size too */
    int nunits, nonempty;   /* units; those with parameters on this rank (its pipeline stages') */
    size_t unit_max;        /* the largest unit */
    size_t unit_shard_max;  /* the rank's largest shard of a unit */
    size_t first_unit, last_unit;
    int unit_tensors_max;   /* the most tensors in a unit with parameters */
} titan_fsdp_memory;
titan_status titan_fsdp_plan_memory(const titan_layout *l, const titan_llama_config *mc, int rank,
                                    const titan_fsdp_options *opt, titan_fsdp_memory *out);
/* The staging buffers a rank of plan fm allocates at setup, all of the
 * same size, none growing in training (so the bytes held do not depend on
 * the collectives' timing): *count buffers (at most 3: a prefetched
 * gather and the reductions in flight; one a unit with parameters at
 * most, each such unit having one collective in flight at a time) of
 * *bytes each, the largest unit's gather (parameter dtype pd, or
 * fp8_gather's float8 all-gather layout: at most 15 padding bytes a
 * tensor and rank more) or reduction (reduce dtype rd). Without sharding
 * only all-reduces over replicas stage (replicate_staged: in a reduce
 * dtype other than fp32, or through host mirrors); else none: 0, 0. */
void titan_fsdp_staging(const titan_fsdp_memory *fm, titan_dtype pd, titan_dtype rd, int replicate_staged,
                        int fp8_gather, int *count, size_t *bytes);

/* A unit whose shard gradient became final during the step (its
 * reduce-scatter completed, in a hook of the backward or in sync_grads):
 * catalog parameters [p0, p1), elements [off, off + len) of
 * titan_fsdp_params (len 0 where this rank holds none of them), their
 * gradient in grad[0 .. len). grad is valid until the call returns (the
 * next unit's gradient reuses the memory: kernels queued on it by the
 * callback run first, in stream order). Every rank of the shard group is
 * called for the same units in the same order. */
typedef struct {
    int p0, p1;
    size_t off, len;
    const float *grad;
} titan_fsdp_unit_grad;
typedef void (*titan_fsdp_unit_done_fn)(void *ctx, const titan_fsdp_unit_grad *g);

/* FSDP's float8 all-gather (quantize.linear.float8.
 * enable_fsdp_float8_all_gather; tensorwise float8 linears set on the
 * model): the float8 linears' weights gather as float8 bytes, their scales
 * from the whole tensors' amax reduced once a step (fsdp_fp8.c). No-op
 * without sharding. *saved: bytes a gather of every unit saves. */
titan_status titan_fsdp_set_float8_gather(titan_fsdp *f, size_t *saved);
/* Installs its hooks on the model when the job has more than one rank. */
titan_status titan_fsdp_create(titan_fsdp **out, titan_mesh *mesh, titan_llama *model,
                               const titan_fsdp_options *opt);
void titan_fsdp_free(titan_fsdp *f);

size_t titan_fsdp_numel(const titan_fsdp *f);   /* shard elements */
int titan_fsdp_units(const titan_fsdp *f);       /* communication units */
float *titan_fsdp_params(titan_fsdp *f);        /* packed shard parameters */
float *titan_fsdp_grads(titan_fsdp *f);         /* packed shard gradients; NULL once a unit-done callback was set */
const titan_shard_piece *titan_fsdp_pieces(const titan_fsdp *f);

/* Zeroes the model's gradients before a step (sharded: gives their pages
 * back; they are refilled by backward). */
titan_status titan_fsdp_zero_grads(titan_fsdp *f);
/* Collective: full fp32 parameters into the model from every rank's shard
 * (each stale unit, at once), e.g. for sampling after training. Training
 * gathers in bf16 write only the model's bf16 compute copy; from this call
 * on, gathers write the fp32 parameters again. With the float8 all-gather
 * the float8 linears' weights are the dequantized float8 codes (their
 * casts give back those codes: sampling is the run's own forward). */
titan_status titan_fsdp_gather_params(titan_fsdp *f);
/* Whether the coming backward is the step's last micro-batch, whose
 * after-backward hooks start the gradient reductions (default 1). */
void titan_fsdp_set_sync(titan_fsdp *f, int sync);
/* fn (NULL: none) is called for each unit as its shard gradient is final
 * (optimizer.early_step_in_backward: the unit's update right after its
 * reduce-scatter). From the first fn on the shard gradients are transient:
 * one buffer of the largest unit's shard serves every unit in turn, in
 * place of the whole shard's, which is never held (titan_fsdp_grads is
 * NULL). fn NULL stops the calls (before the callback's state is freed). FSDP over one shard group only: the caller refuses replicas
 * (HSDP, DDP), whose gradients are final after an all-reduce. */
titan_status titan_fsdp_set_unit_done(titan_fsdp *f, titan_fsdp_unit_done_fn fn, void *ctx);
/* Collective: averaged gradients of this rank's shard into titan_fsdp_grads
 * (waits for the reductions the backward started; starts any it did not).
 * Also returns any failure a hook kept. */
titan_status titan_fsdp_sync_grads(titan_fsdp *f);
/* The shard parameters changed (optimizer step): every unit is stale; the
 * first unit's gather is queued for the next forward. */
titan_status titan_fsdp_params_updated(titan_fsdp *f);
/* Communication time since the last call (then reset): *total_s, the
 * operations' own running time (comm.h's titan_comm_wait_timed, summed over
 * operations and communicators); *exposed_s, the part of it the caller
 * spent blocked waiting (so exposed <= total). Both 0 for one process. */
void titan_fsdp_comm_times(titan_fsdp *f, double *exposed_s, double *total_s);
/* Collective: the global gradient norm (before clipping) into *norm, and
 * into *coef the factor torch.nn.utils.clip_grad_norm_ would scale the
 * gradients by (titan_clip_coef; 1 when it would not). The shard gradients
 * are left as they are: the optimizer step applies *coef as it reads them. */
titan_status titan_fsdp_clip(titan_fsdp *f, double max_norm, double *norm, float *coef);

#endif
