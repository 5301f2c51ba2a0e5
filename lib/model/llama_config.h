/* llama_config.h - Llama 3 model configuration, flavors and the parameter catalog. */
#ifndef TITAN_MODEL_LLAMA_CONFIG_H
#define TITAN_MODEL_LLAMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tensor/layout.h"

typedef struct {
    int dim, n_layers, n_heads, n_kv_heads, vocab_size, multiple_of;
    float ffn_dim_multiplier;      /* 0 = none */
    float norm_eps;                /* 1e-5 */
    float rope_theta;              /* 500000 */
    float rope_scaling_factor;     /* 0 = no scaling; 8 for 3.1, 32 for 3.2 */
    float rope_low_freq_factor;    /* 1 */
    float rope_high_freq_factor;   /* 4 */
    int rope_original_context;     /* 8192 */
    int tie_embeddings;            /* output shares tok_embeddings */
} titan_llama_config;

/* Fills out with a published flavor (vocab_size left 0: it comes from the
 * tokenizer). TITAN_ERR_USAGE listing the valid names if unknown. */
titan_status titan_llama_flavor(const char *name, titan_llama_config *out);
const char *titan_llama_flavor_names(void); /* "debugmodel, 1B, 3B, 8B, 70B, 405B" */
/* Meta's FeedForward hidden size. */
int titan_llama_hidden_dim(const titan_llama_config *c);
/* Dimensions that fit together (heads divide dim, kv heads divide heads, ...)
 * and sizes titan can count: at most TITAN_LLAMA_MAX_LAYERS layers and
 * TITAN_LLAMA_MAX_PARAMS parameters. */
titan_status titan_llama_config_check(const titan_llama_config *c);
/* The catalog has 9 tensors a layer and every tool holds it in memory (136
 * bytes a tensor, more in a checkpoint's catalog): a million layers is far
 * beyond any model and still fits. */
#define TITAN_LLAMA_MAX_LAYERS (1 << 20)
/* 2^50: byte counts of every buffer over the parameters stay far from
 * SIZE_MAX. */
#define TITAN_LLAMA_MAX_PARAMS ((double)(1ULL << 50))

/* What a parameter is, whatever its name. */
typedef enum {
    TITAN_PARAM_TOK_EMBEDDINGS,
    TITAN_PARAM_ATTENTION_NORM,
    TITAN_PARAM_WQ,
    TITAN_PARAM_WK,
    TITAN_PARAM_WV,
    TITAN_PARAM_WO,
    TITAN_PARAM_FFN_NORM,
    TITAN_PARAM_W1,
    TITAN_PARAM_W2,
    TITAN_PARAM_W3,
    TITAN_PARAM_NORM,   /* the final norm */
    TITAN_PARAM_OUTPUT, /* the output head (untied) */
} titan_param_role;

/* One parameter tensor. The catalog order is the order of the flat buffer.
 * Everything parallelism needs to know of a tensor is here, filled where
 * the catalog is built: nothing else matches parameter names. */
typedef struct {
    char name[80];       /* "layers.3.attention.wq.weight" */
    int ndim;            /* 1 or 2 */
    int64_t shape[2];
    size_t offset;       /* in elements, into the flat parameter buffer */
    size_t numel;
    titan_param_role role;
    /* place.tp_dim: the dim tensor parallelism splits it along (0 rows:
     * wq, wk, wv, w1, w3, the embedding's and head's vocabulary; 1 columns:
     * wo, w2), -1 when every tp rank holds it whole (the norms).
     * place.block: llama.h's block (0 the embedding, 1 + layer, n_layers + 1
     * the final norm and head): the unit the pipeline splits by
     * (titan_layout_stage gives its stage) and FSDP gathers by
     * (parallelism.comm_bucket_plan groups blocks into units). */
    titan_layout_place place;
} titan_param;

/* Number of parameter tensors; fills out[0..n) when out != NULL. */
int titan_llama_params(const titan_llama_config *c, titan_param *out);
/* The place of checkpoint tensor `name` (a ":suffix", optimizer state, takes
 * its parameter's) in a model of n_layers layers: the catalog's own names
 * read back. Returns 1, or 0 for a name not in the catalog (*out then
 * {-1, 0}: replicated, on the first stage). For callers that have only
 * names, such as resharding a checkpoint (titan_reshard_opts.place). */
int titan_llama_param_place(const char *name, int n_layers, titan_layout_place *out);
/* The catalog index of parameter `name` in the model c, or -1 for a name
 * not in its catalog (no ":suffix"). */
int titan_llama_param_index(const titan_llama_config *c, const char *name);
size_t titan_llama_num_params(const titan_llama_config *c);

/* A tensor-parallel shard of the model (Megatron's split, torchtitan's
 * plan, tensor/layout.h's boxes): rank `rank` of `size` holds query and
 * kv heads [rank, rank + 1) x n/size (wq, wk, wv rows; wo columns), the same
 * share of the FFN hidden units (w1, w3 rows; w2 columns), and vocabulary
 * rows chunk(vocab_size, size)[rank] of tok_embeddings and output (torch.chunk
 * pieces of ceil(V/size)); the norms are whole. {1, 0}: the whole model. */
typedef struct {
    int size, rank;
} titan_llama_tp;
/* TITAN_ERR_USAGE unless size divides n_kv_heads (so n_heads too) and the
 * FFN hidden size, and every rank gets vocabulary rows. */
titan_status titan_llama_tp_check(const titan_llama_config *c, int size);
/* The rank's vocabulary rows [*v0, *v0 + *nv). */
void titan_llama_tp_vocab(const titan_llama_config *c, titan_llama_tp tp, int64_t *v0, int64_t *nv);
/* The catalog of the rank's shard: the same names and order, local shapes,
 * offsets into the shard's own flat buffer. */
int titan_llama_params_tp(const titan_llama_config *c, titan_llama_tp tp, titan_param *out);

/* A pipeline rank's stages of the model (tensor/layout.h's split,
 * torchtitan's): `stage` is the rank of `size` pp ranks; it holds the v
 * stages stage, stage + size, ... (v = 0 or 1: one; first_less and
 * last_less the embedding's and the output's weights, titan_layout's
 * pp_first_less and pp_last_less; with v 0 the default, 1 and 1). Each
 * stage holds transformer layers [first, end), the token embedding when it
 * is the first stage and the final norm and output head when it is the
 * last. vshape 1 (v 2): the V placement, stages stage and 2 size - 1 -
 * stage (titan_layout's pp_vshape). {1, 0}: the whole model. */
typedef struct {
    int size, stage;
    int v, first_less, last_less, vshape;
    titan_stage_layers layers; /* an explicit split (titan_layout's pp_layers; n 0: none) */
} titan_llama_pp;
/* TITAN_ERR_USAGE unless 1 <= size <= n_layers + 2 and the embeddings are
 * untied or size is 1 (a tied head would live on two stages). */
titan_status titan_llama_pp_check(const titan_llama_config *c, int size);
/* The split of pp as a layout (pp ranks, nothing else) and its stages per rank. */
titan_layout titan_llama_pp_layout(titan_llama_pp pp);
int titan_llama_pp_local_stages(titan_llama_pp pp);
/* Layers [first, end) of the rank's local stage k (global stage
 * titan_llama_pp_global_stage); titan_llama_pp_layers: of its first. */
int titan_llama_pp_global_stage(titan_llama_pp pp, int k);
void titan_llama_pp_stage_layers(const titan_llama_config *c, titan_llama_pp pp, int k, int *first, int *end);
void titan_llama_pp_layers(const titan_llama_config *c, titan_llama_pp pp, int *first, int *end);
/* Whether block b (llama.h numbering: 0 embedding, 1..n_layers, n_layers + 1
 * head) is on one of the rank's stages. */
int titan_llama_pp_has_block(const titan_llama_config *c, titan_llama_pp pp, int b);
/* The catalog of what a rank of tensor-parallel place tp on stage pp holds:
 * every tensor of the model in the usual order (so catalog indices and
 * block numbers stay the whole model's), those of other stages empty (0
 * rows, numel 0), offsets into the rank's own flat buffer. */
int titan_llama_params_local(const titan_llama_config *c, titan_llama_tp tp, titan_llama_pp pp, titan_param *out);
/* titan_llama_params_local's catalog in an array of its own (*n entries;
 * free() it): NULL, with TITAN_ERR_NOMEM recorded, when it does not fit.
 * A catalog is sized by the layer count: never put one on the stack. */
titan_param *titan_llama_params_local_new(const titan_llama_config *c, titan_llama_tp tp, titan_llama_pp pp,
                                          int *n);
/* The same for the whole model (titan_llama_params). */
titan_param *titan_llama_params_new(const titan_llama_config *c, int *n);
/* Parameters not in the token embedding (the output head counts when untied). */
size_t titan_llama_num_params_nonembed(const titan_llama_config *c);
/* Training FLOPs per token: 6 * (nonembed + the head when tied: every
 * matmul parameter) + 12 * layers * dim * seq_len. */
double titan_llama_flops_per_token(const titan_llama_config *c, int seq_len);

/* Initialises the flat parameter buffer (host) as torchtitan's init_weights:
 * embeddings N(0,1); wq,wk,wv,w1 trunc-normal std 0.02; wo,w2,w3 std
 * 0.02/sqrt(2*(layer+1)); norms 1; output trunc-normal std dim^-0.5 cut at 3 std.
 * TITAN_ERR_NOMEM when its catalog does not fit. */
titan_status titan_llama_init_weights(const titan_llama_config *c, float *params, uint64_t seed);

/* The fields that define a model (X-macro lists over titan_llama_config
 * members): checkpoints record each as meta key "model.NAME", and a resume
 * or import compares or reads exactly these. */
#define TITAN_LLAMA_INT_FIELDS(X) \
    X(dim) X(n_layers) X(n_heads) X(n_kv_heads) X(vocab_size) X(multiple_of) X(tie_embeddings) \
    X(rope_original_context)
#define TITAN_LLAMA_FLT_FIELDS(X) \
    X(ffn_dim_multiplier) X(norm_eps) X(rope_theta) X(rope_scaling_factor) \
    X(rope_low_freq_factor) X(rope_high_freq_factor)

#endif
