/* layout.h - a parallel layout: how the tensors of a Llama model are spread
 * over the ranks of a job (see titan-reshard(1), LAYOUTS).
 *
 * A layout is five degrees, as torchtitan's [parallelism] section names them:
 * dp_replicate (DDP/HSDP copies), dp_shard (FSDP), cp (context parallel),
 * tp (tensor parallel) and pp (pipeline stages); world = their product.
 * Rank r has coordinates in the mesh [pp, dp_replicate, dp_shard, cp, tp],
 * row-major, tp varying fastest (torchtitan's order).
 *
 * The box a rank holds of a tensor is built as torchtitan builds it:
 *   1. pp: the tensor lives on one stage (layers split as torchtitan's default
 *      split does, the embedding counting as a layer on the first stage and
 *      norm + output as one on the last); other stages hold nothing.
 *   2. tp: column-parallel weights (attention wq, wk, wv, feed_forward w1, w3,
 *      output) and the token embedding (row-wise parallel, which for an
 *      embedding shards the vocabulary) are split along dim 0; row-parallel
 *      weights (attention wo, feed_forward w2) along dim 1; norms are
 *      replicated. Which is which is the model catalog's titan_param.tp_dim,
 *      passed here as a titan_layout_place: this layer matches no names.
 *   3. FSDP (fully_shard over dp_shard x cp, Shard(0)) takes a dim-0 chunk of
 *      the tp-local box.
 *   4. dp_replicate copies.
 * Splits follow torch.chunk: pieces of ceil(n/k), so trailing ranks may hold
 * less, or nothing. Optimizer state (NAME:exp_avg, NAME:exp_avg_sq, any
 * "NAME:...") follows its parameter (its callers give it the same place).
 *
 * This sits below the checkpoint layer (which stores boxes and knows nothing
 * of ranks' roles) because the same plan decides what a rank trains with, not
 * only what it saves. */
#ifndef TITAN_TENSOR_LAYOUT_H
#define TITAN_TENSOR_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tensor/box.h"

#define TITAN_LAYOUT_MAX_WORLD (1 << 20)
/* Enough for any formatted layout. */
#define TITAN_LAYOUT_STR_MAX 512
/* Stages an explicit split (titan_stage_layers) may name. */
#define TITAN_LAYOUT_MAX_STAGES 64

/* An explicit stage split (parallelism.module_fqns_per_model_part): stage s
 * holds count[s] transformer layers, the ones after stage s - 1's, the
 * first stage the embedding too and the last the norm and the output; n
 * stages, 0: none (the split of the weights below). */
typedef struct {
    int n;
    short count[TITAN_LAYOUT_MAX_STAGES];
} titan_stage_layers;

typedef struct {
    int dp_replicate, dp_shard, cp, tp, pp;
    /* The pipeline's stage split (torchtitan's): pp_v stages per pp rank,
     * pp x pp_v in all, rank r holding stages r, r + pp, r + 2 pp, ...
     * (torch.distributed.pipelining's looped placement); the embedding
     * weighs pp_first_less layers, norm + output pp_last_less
     * (pipeline_parallel_first/last_stage_less_layers). pp_v 0: the
     * default split, one stage a rank and weights 1 and 1 (what a layout
     * made without these fields gets). pp_vshape 1: the V placement of
     * torch's ZBVZeroBubble and DualPipeV (generate_stage_to_rank_mapping,
     * style "v"; pp_v 2): rank r holds stages r and 2 pp - 1 - r, so the
     * first and the last stage are both rank 0's. pp_layers.n > 0 (= pp x
     * pp_v): the stages' layers as pp_layers says, the weights unused. */
    int pp_v, pp_first_less, pp_last_less, pp_vshape;
    titan_stage_layers pp_layers;
} titan_layout;

/* A rank's place in the mesh. */
typedef struct {
    int pp, dp_replicate, dp_shard, cp, tp;
} titan_layout_coord;

/* The one-rank layout (every degree 1). */
titan_layout titan_layout_single(void);

/* Parses "dp_shard=4,tp=2,pp=1": comma-separated key=value with keys
 * dp_replicate, dp_shard, cp, tp, pp (each at most once; missing keys are 1),
 * and pp_v, pp_first_less, pp_last_less (the stage split: missing, the
 * default; any of them given, the others default to 1), pp_vshape (0 or 1,
 * the placement; 1 needs pp_v=2), pp_layers (an explicit split: the
 * stages' layer counts joined by ':', pp x pp_v of them), or "single". Spaces around items are allowed. TITAN_ERR_USAGE names the bad
 * item; degrees must be >= 1 and the world at most TITAN_LAYOUT_MAX_WORLD. */
titan_status titan_layout_parse(const char *s, titan_layout *out);
/* "dp_replicate=1,dp_shard=4,cp=1,tp=2,pp=1" (all five, this order), then
 * ",pp_v=2,pp_first_less=1,pp_last_less=1" where the split is not the
 * default one (",pp_vshape=1" after it for the V placement, then
 * ",pp_layers=1:3:2:2" for an explicit split), or "single" for the one-rank layout; parse reads it back. */
void titan_layout_format(const titan_layout *l, char *out, size_t cap);
int titan_layout_world(const titan_layout *l);

void titan_layout_coord_of(const titan_layout *l, int rank, titan_layout_coord *c);
int titan_layout_rank_of(const titan_layout *l, const titan_layout_coord *c);

/* Piece i of n elements split into k as torch.chunk splits: pieces of
 * ceil(n/k); *len is 0 for pieces past the end. */
void titan_layout_chunk(int64_t n, int k, int i, int64_t *off, int64_t *len);

/* Where a tensor sits in the layout, as the model's parameter catalog says
 * (this layer knows no tensor names; the model fills one per parameter, and
 * optimizer state takes its parameter's):
 *   tp_dim  the dim tensor parallelism splits it along: 0 (column-parallel
 *           weights and the token embedding) or 1 (row-parallel weights), or
 *           -1 when tp replicates it (the norms);
 *   block   0 the token embedding, 1..n_layers transformer layer block - 1,
 *           n_layers + 1 the final norm and output head. */
typedef struct {
    int tp_dim, block;
} titan_layout_place;

/* The stage split of l with its defaults filled in (pp_v >= 1). */
void titan_layout_split(const titan_layout *l, int *v, int *first_less, int *last_less);
/* Pipeline stages in all: pp x pp_v. */
int titan_layout_stages(const titan_layout *l);
/* Checks the layout against a model of n_layers transformer layers: the
 * stages split the layers and the weights as torchtitan's
 * generate_llm_fqn_per_model_part allows (at most n_layers + weights
 * stages, no weight above the layers a stage gets; an explicit split: its
 * counts add up to n_layers and no stage but the first and the last is
 * empty; TITAN_ERR_USAGE otherwise). */
titan_status titan_layout_check(const titan_layout *l, int n_layers);
/* The pp rank that holds pipeline stage s (of titan_layout_stages): s %
 * pp, or in the V placement s for s < pp and 2 pp - 1 - s after. */
int titan_layout_stage_rank(const titan_layout *l, int s);
/* The global stage of pp rank r's local stage k (k < pp_v): r + k pp, or
 * in the V placement r and then 2 pp - 1 - r. */
int titan_layout_rank_stage(const titan_layout *l, int r, int k);
/* Transformer layers [*first, *end) of pipeline stage `stage` (of
 * titan_layout_stages; titan_layout_stage_rank says where it lives). */
void titan_layout_stage_layers(const titan_layout *l, int n_layers, int stage, int *first, int *end);
/* The pp rank that holds block `block` (titan_layout_place's numbering):
 * the embedding the first stage's, the head the last stage's, a layer its
 * stage's. */
int titan_layout_stage(const titan_layout *l, int n_layers, int block);

/* Context parallelism's load-balanced split of a sequence (torchtitan's and
 * Llama 3's): 2 x cp chunks of T / (2 x cp) tokens; rank c of the cp group
 * holds chunks c and 2 x cp - 1 - c, so every rank has as much causal
 * attention to compute. chunk[j] gets the first position of the rank's
 * j-th chunk (j = 0, 1). T must be a multiple of 2 x cp. */
void titan_layout_cp_chunks(int T, int cp, int c, int chunk[2]);

/* The box of a tensor placed at `place` (global shape[ndim]) that `rank` holds. Returns 1
 * and fills *box when it holds a non-empty one, else 0. *writes (may be NULL)
 * is 1 when this rank is the one that saves that box: the lowest rank holding
 * it (dp_replicate 0, and tp 0 where tp replicates). Over the ranks with
 * *writes = 1, the boxes cover the tensor exactly once. */
int titan_layout_box(const titan_layout *l, int n_layers, titan_layout_place place, int ndim,
                     const int64_t *shape, int rank, titan_box *box, int *writes);

#endif
