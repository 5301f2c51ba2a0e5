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
 *      weights (attention wo, feed_forward w2) along dim 1; norms and unknown
 *      names are replicated.
 *   3. FSDP (fully_shard over dp_shard x cp, Shard(0)) takes a dim-0 chunk of
 *      the tp-local box.
 *   4. dp_replicate copies.
 * Splits follow torch.chunk: pieces of ceil(n/k), so trailing ranks may hold
 * less, or nothing. Optimizer state (NAME:exp_avg, NAME:exp_avg_sq, any
 * "NAME:...") follows its parameter.
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
#define TITAN_LAYOUT_STR_MAX 128

typedef struct {
    int dp_replicate, dp_shard, cp, tp, pp;
} titan_layout;

/* A rank's place in the mesh. */
typedef struct {
    int pp, dp_replicate, dp_shard, cp, tp;
} titan_layout_coord;

/* The one-rank layout (every degree 1). */
titan_layout titan_layout_single(void);

/* Parses "dp_shard=4,tp=2,pp=1": comma-separated key=value with keys
 * dp_replicate, dp_shard, cp, tp, pp (each at most once; missing keys are 1),
 * or "single". Spaces around items are allowed. TITAN_ERR_USAGE names the bad
 * item; degrees must be >= 1 and the world at most TITAN_LAYOUT_MAX_WORLD. */
titan_status titan_layout_parse(const char *s, titan_layout *out);
/* "dp_replicate=1,dp_shard=4,cp=1,tp=2,pp=1" (all five, this order), or
 * "single" for the one-rank layout; parse reads it back. */
void titan_layout_format(const titan_layout *l, char *out, size_t cap);
int titan_layout_world(const titan_layout *l);

void titan_layout_coord_of(const titan_layout *l, int rank, titan_layout_coord *c);
int titan_layout_rank_of(const titan_layout *l, const titan_layout_coord *c);

/* Piece i of n elements split into k as torch.chunk splits: pieces of
 * ceil(n/k); *len is 0 for pieces past the end. */
void titan_layout_chunk(int64_t n, int k, int i, int64_t *off, int64_t *len);

/* The dim tensor parallelism splits tensor `name` along (0 or 1), or -1 when
 * it is replicated over tp. A ":suffix" (optimizer state) is ignored. */
int titan_layout_tp_dim(const char *name);

/* Checks the layout against a model of n_layers transformer layers: at most
 * n_layers + 2 pipeline stages (TITAN_ERR_USAGE otherwise). */
titan_status titan_layout_check(const titan_layout *l, int n_layers);
/* Transformer layers [*first, *end) of pipeline stage `stage`. */
void titan_layout_stage_layers(const titan_layout *l, int n_layers, int stage, int *first, int *end);
/* The stage that holds tensor `name`: tok_embeddings.* the first, norm.* and
 * output.* the last, layers.N.* their layer's, anything else the first. */
int titan_layout_stage(const titan_layout *l, int n_layers, const char *name);

/* Context parallelism's load-balanced split of a sequence (torchtitan's and
 * Llama 3's): 2 x cp chunks of T / (2 x cp) tokens; rank c of the cp group
 * holds chunks c and 2 x cp - 1 - c, so every rank has as much causal
 * attention to compute. chunk[j] gets the first position of the rank's
 * j-th chunk (j = 0, 1). T must be a multiple of 2 x cp. */
void titan_layout_cp_chunks(int T, int cp, int c, int chunk[2]);

/* The box of tensor `name` (global shape[ndim]) that `rank` holds. Returns 1
 * and fills *box when it holds a non-empty one, else 0. *writes (may be NULL)
 * is 1 when this rank is the one that saves that box: the lowest rank holding
 * it (dp_replicate 0, and tp 0 where tp replicates). Over the ranks with
 * *writes = 1, the boxes cover the tensor exactly once. */
int titan_layout_box(const titan_layout *l, int n_layers, const char *name, int ndim,
                     const int64_t *shape, int rank, titan_box *box, int *writes);

#endif
