/* llama.h - the Llama 3 model on a backend: forward and explicit backward. */
#ifndef TITAN_MODEL_LLAMA_H
#define TITAN_MODEL_LLAMA_H

#include "backend/backend.h"
#include "model/group.h"
#include "model/llama_config.h"

typedef struct titan_llama titan_llama;

/* Activation checkpointing: which intermediates a layer keeps from its
 * forward for its backward, and which the backward recomputes first from
 * the layer's input and what it kept. Every op is deterministic, so the
 * recomputed values, the loss and the gradients are bitwise those of
 * TITAN_AC_NONE.
 *   TITAN_AC_NONE (0)  every layer keeps everything;
 *   TITAN_AC_FULL (1)  every layer keeps only its input;
 *   n >= 2             layers n-1, 2n-1, ... (counting from 0) keep only
 *                      their input, the others everything (torchtitan's
 *                      selective layer checkpointing, selective_ac_option
 *                      = "n"; n > n_layers is none);
 *   TITAN_AC_OP (-1)   every layer keeps the outputs of attention and of
 *                      every other matmul in block order (wq before RoPE,
 *                      wv, w1; w2's output is the layer's output) and
 *                      recomputes the norms, wk, RoPE, wo and the residual
 *                      add, w3 and SwiGLU (torchtitan's selective_ac_option
 *                      = "op"). */
typedef int titan_ac_mode;
enum { TITAN_AC_OP = -1, TITAN_AC_NONE = 0, TITAN_AC_FULL = 1 };

/* Allocates parameters, gradients and activations for micro-batches of B x T
 * (under context parallelism, B x T / cp on this rank: see cp below).
 * dt is the compute type: TITAN_DTYPE_F32, or TITAN_DTYPE_BF16 for mixed
 * precision (bf16 activations and a bf16 compute copy of the parameters,
 * cast from the fp32 parameters before each block runs; parameters,
 * gradients and everything the optimizer sees stay fp32). */
titan_status titan_llama_create(titan_llama **out, const titan_llama_config *c,
                                const titan_backend *be, int B, int T, titan_ac_mode ac,
                                titan_dtype dt);
/* The same with options:
 *   flags TITAN_LLAMA_RELEASABLE puts parameters, gradients and the compute
 *     copy in releasable memory (backend.h), nothing of it committed: the
 *     caller (FSDP) commits each range before anything touches it and
 *     releases it after (the functions below);
 *   tp, a group of more than one rank (model/group.h: its collectives,
 *     which lib/parallel makes from a communicator): tensor parallelism over it
 *     (Megatron's, as torchtitan's plan for Llama without sequence
 *     parallelism): the model holds its rank's shard (llama_config.h,
 *     titan_llama_tp), inputs and targets are whole on every rank of tp,
 *     activations between blocks are whole (replicated), and the model
 *     sums the partial results of the row-parallel wo, w2 and of the
 *     vocabulary-sharded embedding over tp in forward, and the partial
 *     input gradients of the column-parallel wq/wk/wv, w1/w3 and output in
 *     backward (all-reduce, rank order: every rank of tp gets the same
 *     bits). The loss is vocabulary-parallel: the logits stay sharded, each
 *     row's log-sum-exp is combined over tp. Every rank of tp makes the
 *     same calls in the same order. The norms' gradients come out the same
 *     on every rank of tp. NULL or one rank: the whole model. */
enum { TITAN_LLAMA_RELEASABLE = 1 };
typedef struct {
    unsigned flags;
    const titan_group *tp;
    /* With tp: sequence parallelism (Megatron's, torchtitan's default with
     * tp): the residual stream between the matmuls is split by rows (rank
     * r holds tokens [r, r + 1) x N/tp of the micro-batch, N a multiple of
     * tp), the norms run on those rows, their outputs are all-gathered
     * before the column-parallel matmuls, and the row-parallel outputs are
     * reduce-scattered instead of all-reduced; the norms' weight gradients
     * are summed over tp. The same numbers up to summation order, 1/tp of
     * the residual stream's memory. */
    int sequence_parallel;
    /* With tp and sequence parallelism: async tensor parallelism (torchtitan's
     * enable_async_tensor_parallel): the all-gather before a column-parallel
     * matmul and the reduce-scatter after a row-parallel one run as
     * collective matmuls (model/group.h's all_gather_each and
     * reduce_scatter_each), block by block, so that compute runs on the
     * blocks in hand while the others arrive; forward and backward. The same
     * sums in the same order as the blocking collectives; the products are
     * cut by rows, which OpenBLAS may round differently (it picks kernels by
     * shape): fp32 losses seen within 4e-8 of the blocking run's, none of
     * it a regrouped sum. Refused (TITAN_ERR_USAGE) without
     * sequence parallelism or where the tp group has no collective matmuls. */
    int async_tensor_parallel;
    /* With cp: the ring instead of the all-gather of keys and values
     * (TITAN_ATTENTION_CP_RING; torchtitan's rotate method "alltoall"):
     * its buffers and window only, none of the all-gather's. */
    int cp_ring;
    /* Pipeline parallelism: the model is stage pp_stage of pp_size
     * (llama_config.h, titan_llama_pp; 0 or 1: the whole model). A stage
     * runs its own blocks: the first embeds tokens, the others start from
     * titan_llama_stage_input; the last computes the loss, the others end
     * at titan_llama_stage_output; a backward on a stage other than the
     * last starts from the gradient the caller put in titan_llama_stage_grad,
     * and on a stage other than the first leaves the input's gradient
     * there. Hooks run for the stage's blocks only. pp_v > 1: the rank
     * holds pp_v stages, pp_stage + k x pp_size (k < pp_v, of pp_size x
     * pp_v; the split's weights pp_first_less, pp_last_less: titan_layout's
     * fields), one catalog and one set of buffers for all of them; forwards
     * and backwards run the stage titan_llama_set_stage chose. pp_v 0: one
     * stage, the default split. pp_vshape 1 (pp_v 2): the V placement,
     * stages pp_stage and 2 pp_size - 1 - pp_stage (titan_layout's). */
    int pp_size, pp_stage;
    int pp_v, pp_first_less, pp_last_less, pp_vshape;
    titan_stage_layers pp_layers; /* with pp_v > 0: titan_layout's explicit split */
    /* Context parallelism over cp, a group of more than one rank
     * (NULL or one rank: none): T is the whole sequence (a multiple of 2 x
     * cp's size); the model holds the rank's two chunks of each sequence
     * (tensor/layout.h, titan_layout_cp_chunks), T / cp tokens: tokens
     * and targets are [B, T / cp], each sequence's first chunk then its
     * second, and every per-token op and the loss see those rows only.
     * Attention gathers the whole sequence's keys and values over cp
     * (model/attention_cp.h). The loss is the mean over the rank's tokens;
     * parameter gradients are the rank's share (the caller sums or averages
     * them over cp, as over data parallel ranks). Every rank of cp makes
     * the same calls in the same order. Composes with tp (cp groups hold
     * the same tp rank), sequence parallelism and pipeline stages. */
    const titan_group *cp;
    /* Micro-batch slots (a pipeline schedule's micro-batches in flight):
     * each keeps one forward's activations until its backward
     * (titan_llama_set_slot); 0 or 1: one. */
    int slots;
    /* 1: the backward may run in two parts (titan_llama_backward_input and
     * titan_llama_backward_weight, for zero-bubble pipeline schedules): a
     * stash per slot keeps what the weight part reads, about one more set
     * of a slot's per-layer activations (titan_llama_stash_bytes). */
    int split_backward;
} titan_llama_options;
titan_status titan_llama_create_ex(titan_llama **out, const titan_llama_config *c,
                                   const titan_backend *be, int B, int T, titan_ac_mode ac,
                                   titan_dtype dt, const titan_llama_options *opt);
void titan_llama_free(titan_llama *m);
/* What titan_llama_create_ex would allocate for the same arguments, worked
 * out by the same code without allocating a byte of backend memory (a
 * memory dry run): opt->tp and opt->cp need only their rank and size.
 * Sizes in bytes; the same checks and errors as create. */
typedef struct {
    size_t nparams;            /* this rank's parameters (elements) */
    size_t params_bytes;       /* fp32 parameters; the gradients are the same size */
    size_t compute_copy_bytes; /* the bf16 copy, 0 in fp32 */
    size_t arena_bytes;        /* the activation arena: every slot, the scratch, the tables */
    size_t slot_bytes;         /* what one micro-batch in flight keeps from forward to backward */
    int slots;                 /* micro-batches in flight (pipeline schedules) */
    size_t cp_bytes;           /* context parallelism's buffers (the all-gather's whole-sequence keys and
                                * values, or the ring's own: titan_attention_cp_plan_bytes) */
    size_t tp_reserve_bytes;   /* the largest tensor-parallel collective */
    size_t cp_reserve_bytes;   /* the largest context-parallel collective (the all-gather's; 0 with the ring) */
    size_t tp_window_bytes;    /* async tp on a device backend: the shared window's buffer (backend memory) */
    size_t cp_window_bytes;    /* the cp ring on a device backend: the cp group's shared window (backend memory) */
    size_t stage_io_bytes;     /* a pipeline stage's output (or its gradient) */
    size_t loss_host_bytes;    /* host memory: the losses' copy (device backends) */
} titan_llama_memory;
titan_status titan_llama_plan_memory(const titan_llama_config *c, int B, int T, titan_ac_mode ac, titan_dtype dt,
                                     const titan_llama_options *opt, int host_backend, titan_llama_memory *out);

const titan_llama_config *titan_llama_get_config(const titan_llama *m);
/* The model's tensor-parallel place ({1, 0} without) and the catalog of what
 * it holds (titan_llama_params_tp: local shapes, offsets into the buffers
 * below); *n gets the number of tensors. */
titan_llama_tp titan_llama_get_tp(const titan_llama *m);
const titan_param *titan_llama_catalog(const titan_llama *m, int *n);
/* The model's pipeline stage ({1, 0} without) and micro-batch slots. */
titan_llama_pp titan_llama_get_pp(const titan_llama *m);
int titan_llama_slots(const titan_llama *m);
/* The rank's stages (1, or pp_v) and the one the following forwards and
 * backwards run (0 at first): k is local, global stage pp_stage + k x
 * pp_size (titan_llama_pp_global_stage: the V placement's otherwise). Slots are shared by the stages: the caller gives each (stage,
 * micro-batch) in flight a slot of its own; stage_input, stage_output and
 * stage_grad below are the current stage's. */
int titan_llama_stages(const titan_llama *m);
void titan_llama_set_stage(titan_llama *m, int k);
/* The slot the following forwards and backwards use (0 at first). A
 * forward into a slot replaces what that slot kept; a backward needs the
 * slot's forward. Parameter gradients add over slots as over successive
 * micro-batches. */
void titan_llama_set_slot(titan_llama *m, int slot);
/* Pipeline stage boundaries (backend memory, titan_llama_stage_io_count
 * elements of the compute type: the rank's rows of the residual stream,
 * [N, dim], or its sequence-parallel rows). input: the current slot's
 * stage input, written by the caller before a forward on a stage other
 * than the first; output: the current slot's stage output after a forward;
 * grad: before a backward on a stage other than the last, d(loss x
 * loss_scale)/d(output) (written by the caller), after it on a stage
 * other than the first d(loss x loss_scale)/d(input), which stays until
 * the next backward. */
void *titan_llama_stage_input(titan_llama *m);
const void *titan_llama_stage_output(const titan_llama *m);
void *titan_llama_stage_grad(titan_llama *m);
size_t titan_llama_stage_io_count(const titan_llama *m);
/* The first failure of a tensor-parallel collective since the last call
 * (then cleared), TITAN_OK if none. A forward returns its own; a backward
 * cannot stop, so it keeps going (the failed communicator refuses the
 * rest at once) and leaves the failure here for its caller. */
titan_status titan_llama_take_error(titan_llama *m);
/* The tensor-parallel group (NULL without). */
const titan_group *titan_llama_tp_group(const titan_llama *m);
/* Collective over the tp group (every rank of it calls): the whole model's
 * fp32 parameters (titan_llama_params of its config: catalog order, whole
 * shapes) into host memory dst, each tensor put together from the ranks'
 * pieces. Without tp, a copy of the parameters. dst NULL: the rank takes
 * part and keeps nothing (a rank that needs no copy, or that failed to make
 * room for one: the group still completes). A rank out of memory here
 * fails the call on every rank of the group, before any gather. */
titan_status titan_llama_gather_whole(titan_llama *m, float *dst);
/* Seconds spent in tensor- and context-parallel collectives since the last
 * call (then reset; they block, so all of it is exposed); 0 without. */
double titan_llama_take_comm_s(titan_llama *m);
/* Of those, the seconds blocked waiting on peers (then 0). */
double titan_llama_take_exposed_s(titan_llama *m);
const titan_backend *titan_llama_backend(const titan_llama *m); /* whose memory the buffers are */
float *titan_llama_params_data(titan_llama *m); /* flat, catalog order, backend memory */
float *titan_llama_grads_data(titan_llama *m);  /* same layout */
size_t titan_llama_params_count(const titan_llama *m);
size_t titan_llama_activation_bytes(const titan_llama *m);
size_t titan_llama_compute_copy_bytes(const titan_llama *m); /* the bf16 parameter copy; 0 for f32 */
titan_dtype titan_llama_compute_dtype(const titan_llama *m);
/* The compute copy itself (catalog order, backend memory, nparams elements
 * of the compute dtype), or NULL for an fp32 model: for an optimizer step
 * that writes it with the parameters (titan_adamw_step_cast). */
void *titan_llama_compute_copy(titan_llama *m);
/* current = 1: the caller has just written the compute copy of the tensors
 * wholly inside elements [off, off + n) (from the fp32 parameters, or
 * gathered), so blocks skip casting them until this is set to 0. A write
 * of their fp32 parameters that does not also write the copy must set 0
 * (the default; commit_params and release_params do it). */
void titan_llama_set_copy_current(titan_llama *m, size_t off, size_t n, int current);
/* Residency of elements [off, off + n) (catalog order) of a model made
 * with TITAN_LLAMA_RELEASABLE (backend.h's commit and release): the
 * parameters with their compute copy, or the gradients. commit makes them
 * usable (zero where they were released; TITAN_ERR_NOMEM when the device
 * is full); release makes them read as zeros and gives their memory back
 * (the compute copy is cast afresh when the block next runs). */
titan_status titan_llama_commit_params(titan_llama *m, size_t off, size_t n);
void titan_llama_release_params(titan_llama *m, size_t off, size_t n);
titan_status titan_llama_commit_grads(titan_llama *m, size_t off, size_t n);
/* The compute copy alone, for a gather that writes it directly (the fp32
 * parameters of the range stay released). */
titan_status titan_llama_commit_copy(titan_llama *m, size_t off, size_t n);
void titan_llama_release_grads(titan_llama *m, size_t off, size_t n);

/* Forward over tokens[B*T]; with targets, returns the mean cross-entropy in
 * *loss and keeps what backward needs. Without targets (NULL) it only
 * computes logits (see titan_llama_logits). Pipeline stages: tokens are
 * read by the first stage only (may be NULL elsewhere), targets by the
 * last; *loss is 0 on the others (the loss is the last stage's). */
titan_status titan_llama_forward(titan_llama *m, const uint32_t *tokens, const uint32_t *targets,
                                 float *loss);
/* A forward with targets that a backward with the same loss_scale follows:
 * the cross-entropy pass also writes d(loss * loss_scale)/dlogits over the
 * logits, one pass over them instead of two (the logits are then gone). */
titan_status titan_llama_forward_train(titan_llama *m, const uint32_t *tokens,
                                       const uint32_t *targets, float loss_scale, float *loss);
/* Backward of the last forward: grads += d(loss * loss_scale)/dparams.
 * loss_scale = 1 / gradient-accumulation steps. */
void titan_llama_backward(titan_llama *m, float loss_scale);
/* The same backward in two parts on the current stage and slot, for
 * zero-bubble pipeline schedules (a model made with split_backward):
 * backward_input computes the gradient of the stage input (of every
 * activation) and the norms' weight gradients, and keeps in the slot's
 * stash what the rest needs; backward_weight, later (other slots'
 * forwards and input parts may come between), computes every matmul's
 * and the embedding's weight gradient from it. input then weight gives
 * the bits of titan_llama_backward (the same ops on the same values, each
 * gradient added once); each slot's weight parts must follow its input
 * parts in the same order on a stage as their micro-batches (so that the
 * gradients add in the same order). Hooks: before_backward of a block in
 * the input part, after_backward in the weight part (the embedding's both
 * in the weight part), so FSDP reduces the gradients after the last
 * weight part. */
void titan_llama_backward_input(titan_llama *m, float loss_scale);
void titan_llama_backward_weight(titan_llama *m);
/* Bytes of the split backward's stash (all slots); 0 without. */
size_t titan_llama_stash_bytes(const titan_llama *m);
/* The gradients are zero from here: the next backward writes them rather
 * than adding, without a zero fill (the buffer keeps its old values until
 * then, so read the gradients only after a backward). */
void titan_llama_zero_grads(titan_llama *m);
/* Logits [B*T, V] of the last forward (backend memory); f32 models only,
 * last pipeline stage only.
 * With tensor parallelism, V is the rank's vocabulary shard. */
const float *titan_llama_logits(const titan_llama *m);
/* The same as fp32 in host memory dst[B*T*V], whatever the compute type. */
titan_status titan_llama_logits_host(const titan_llama *m, float *dst);

/* The plan of titan_llama_set_float8 without a model: on[L x 7 + 1] (as
 * titan_llama_fp8_param_linear indexes the linears) 1 for a linear that
 * trains in float8; returns how many. titan_llama_float8_shape: linear
 * lin's whole weight [out, in]. */
int titan_llama_float8_plan(const titan_llama_config *c, const titan_fp8_recipe *r, const char *filter_fqns,
                            unsigned char *on);
void titan_llama_float8_shape(const titan_llama_config *c, int lin, int *out, int *in);
/* Under tensor parallelism (tp > 1) the model holds, for its float8 casts'
 * group amaxes, TITAN_FP8_NCASTS x this many floats of backend memory (and
 * tp x this many on the host); N: tokens a micro-batch. */
size_t titan_llama_fp8_tp_amax_floats(const titan_llama_config *c, int tp, int N);
/* The amaxes a float8 model keeps from each forward's casts of x for its
 * backward's (tensorwise x casts: one per micro-batch slot, layer and
 * distinct input, and the output's), in floats of backend memory; 0 where
 * the recipe's x casts are not both tensorwise. */
size_t titan_llama_fp8_xamax_floats(const titan_fp8_recipe *r, int n_layers, int slots);
/* The same for w (one per linear; 0 where the recipe's w casts are not
 * both tensorwise). */
size_t titan_llama_fp8_wamax_floats(const titan_fp8_recipe *r, int n_layers);
/* Async tensor parallelism's refusal where the tp group has no shared
 * windows (its ranks cannot address each other's buffers): TITAN_OK when
 * windows, else TITAN_ERR_USAGE with the error and a hint set. The run
 * (titan_llama_create_ex) and the memory plan ask it alike. */
titan_status titan_llama_async_tp_refusal(int windows);
/* Float8 training: the linears run as torchao's Float8Linear with recipe
 * r (tensor/fp8.h; the backend's fp8_matmul_* ops), those torchtitan's
 * float8 converter would convert (components/quantization/utils.py,
 * module_filter_fn): every attention and FFN projection and the output,
 * but those whose name ("layers.L.attention.wq" .. ".wo",
 * "layers.L.feed_forward.w1" .. ".w3", "output") contains one of the
 * comma-joined filter_fqns, and those with a dimension of the whole
 * weight not a multiple of 16. auto_filter_small_kn in filter_fqns also
 * skips what torchao's _auto_filter_for_recipe skips (tensorwise: K <=
 * 4096 and N <= 1024; rowwise: N <= 2048, K <= 1024, or N <= 4096 and K <=
 * 2048; weight [N, K]). r NULL turns float8 off. *converted gets the
 * number of linears that run in float8 (of *total). TITAN_ERR_USAGE when
 * the backend has no float8 ops. */
titan_status titan_llama_set_float8(titan_llama *m, const titan_fp8_recipe *r, const char *filter_fqns,
                                    int *converted, int *total);
/* Whether layer l's linear k (0..6: wq, wk, wv, wo, w1, w2, w3; l =
 * n_layers: the output) runs in float8. */
int titan_llama_float8_linear(const titan_llama *m, int l, int k);
/* GEMMs run from float8 operands (as the backend's fp8 ops reported) since
 * the last call, then reset. */
int64_t titan_llama_take_fp8_gemms(titan_llama *m);
/* FSDP's float8 all-gather (tensorwise): the float8 linear (its index, l x
 * 7 + k, the output L x 7) whose weight is parameter tensor i of the
 * catalog, or -1 (not a float8 linear's weight; the embedding, also when
 * tied, is read in high precision). */
int titan_llama_fp8_param_linear(const titan_llama *m, int i);
/* The whole weights' amax per float8 linear (host, indexed as above), which
 * their casts then scale from instead of the weights' own: the all-gather
 * casts the shards with them, so the gathered bytes are the cast's.
 * NULL: back to the weights' own. */
titan_status titan_llama_set_fp8_weight_amax(titan_llama *m, const float *amax);

/* Per-block hooks, for parallelism that moves parameters and gradients while
 * the model computes (FSDP gathers, gradient reductions). Blocks: 0 = token
 * embedding, 1..n_layers = transformer layer block-1, n_layers + 1 = final
 * norm and output head (which, with tied embeddings, also reads and adds
 * gradients into block 0's tok_embeddings.weight). Forward runs blocks
 * 0..n_layers+1, backward n_layers+1..0; with activation checkpointing
 * the recomputation of a layer happens after its before_backward.
 * before_forward and before_backward run before the block reads its
 * parameters, after_forward once it no longer needs them in this forward,
 * after_backward once its parameter gradients are final for this backward.
 * A failing forward hook stops the forward with its status; backward hooks
 * cannot stop the backward, so their owner must keep the failure. Any hook
 * may be NULL. */
typedef struct {
    void *ctx;
    titan_status (*before_forward)(void *ctx, int block);
    titan_status (*after_forward)(void *ctx, int block);
    titan_status (*before_backward)(void *ctx, int block);
    titan_status (*after_backward)(void *ctx, int block);
    /* 1 when before_backward may have replaced a block's parameters since
     * its forward (FSDP's re-gather): the compute copy is cast again. */
    int regathers;
} titan_llama_hooks;

/* Installs hooks (copied); NULL removes them. */
void titan_llama_set_hooks(titan_llama *m, const titan_llama_hooks *h);
/* Number of blocks: n_layers + 2. */
int titan_llama_blocks(const titan_llama *m);

#endif
