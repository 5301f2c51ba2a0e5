/* hf_convert.h - titan checkpoints <-> Hugging Face Llama (safetensors + config.json).
 *
 * Export writes LlamaForCausalLM weights under HF names, with the rows of the
 * q and k projections permuted per head from Meta's interleaved RoPE pairs
 * (2i, 2i+1) to HF's rotate-half halves (i, i + hd/2); import undoes it.
 * Only parameters travel; optimizer state stays behind. */
#ifndef TITAN_INTERCHANGE_HF_CONVERT_H
#define TITAN_INTERCHANGE_HF_CONVERT_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "data/tokenizer.h"
#include "model/llama_config.h"

/* HF writes shards of at most 5 GB (decimal). */
#define TITAN_HF_SHARD_BYTES ((uint64_t)5000000000)

/* The model a checkpoint records in its meta keys (model.dim, ...), which
 * its catalog must hold exactly (titan_llama_ckpt_check): TITAN_ERR_FORMAT
 * otherwise. */
titan_status titan_ckpt_model_config(const titan_ckpt *ck, titan_llama_config *mc);
/* Reads every parameter of mc (catalog order, as f32) into params
 * (titan_llama_num_params(mc) floats). */
titan_status titan_ckpt_load_params(titan_ckpt *ck, const titan_llama_config *mc, float *params);

/* The HF name of a titan parameter name ("layers.0.attention.wq.weight" ->
 * "model.layers.0.self_attn.q_proj.weight"); -1 when it has none. */
int titan_hf_name(const char *titan_name, char *out, size_t cap);

/* Permutes the rows of a q or k weight [n_heads * head_dim, cols]: to_hf
 * moves Meta row 2i+j of each head to HF row j*hd/2 + i; !to_hf inverts. */
void titan_hf_permute_rows(float *dst, const float *src, int n_heads, int head_dim, int64_t cols,
                           int to_hf);

typedef struct {
    titan_dtype dtype;        /* f32, bf16 or f16 */
    uint64_t max_shard_bytes; /* 0: TITAN_HF_SHARD_BYTES */
    const char *tokenizer;    /* spec overriding the checkpoint's own (ckpt_tokenizer.h); NULL: its own */
    int64_t max_position;     /* 0: rope_original_context (times the scaling factor when scaled) */
    int force;                /* replace a non-empty outdir */
} titan_hf_export_opts;

/* Writes outdir (created; written as outdir.tmp then renamed): config.json,
 * model.safetensors or model-0000k-of-0000N.safetensors +
 * model.safetensors.index.json, and with the tokenizer (the checkpoint's,
 * or o->tokenizer) its files (titan_hf_write_tokenizer),
 * generation_config.json and the bos/eos ids in config.json. A checkpoint
 * that carries no tokenizer and names none this build opens ("byte") is
 * exported without them, with a warning (bos/eos null). */
titan_status titan_hf_export(const char *ckpt_path, const char *outdir, const titan_hf_export_opts *o);

/* Writes t as Hugging Face tokenizer files into dir (hf_tokenizer.c):
 * tokenizer.json, tokenizer_config.json (model_max_length = max_length)
 * and special_tokens_map.json. */
titan_status titan_hf_write_tokenizer(const titan_tokenizer *t, const char *dir, int64_t max_length);

typedef struct {
    const char *tokenizer;    /* spec, recorded and carried (ckpt_tokenizer.h); NULL: id "hf-import" */
    int multiple_of;          /* 0: found from intermediate_size */
    float ffn_dim_multiplier; /* < 0: found from intermediate_size */
    int force;                /* write into a root that already holds checkpoints */
} titan_hf_import_opts;

/* The model a config.json's text txt[0..len) describes (path names it in
 * messages): TITAN_ERR_FORMAT naming the key when it is not a Llama titan
 * takes, TITAN_ERR_USAGE when o's multiple_of does not give its FFN size. */
titan_status titan_hf_parse_config(const char *txt, size_t len, const char *path, const titan_hf_import_opts *o,
                                   titan_llama_config *mc);

/* Reads hfdir (config.json + model.safetensors or its index) and writes a
 * titan checkpoint, step 0, f32, under outroot; *step_dir (optional) gets its path. */
titan_status titan_hf_import(const char *hfdir, const char *outroot, const titan_hf_import_opts *o,
                             char *step_dir, size_t cap);

/* Reads hfdir's weights into params (titan_llama_num_params(want) floats,
 * catalog order, f32) for the model want, which config.json and the tensors
 * must give exactly (the FFN by its size): else TITAN_ERR_USAGE naming the
 * first difference. titan-init seeds a run this way. */
titan_status titan_hf_load_params(const char *hfdir, const titan_llama_config *want, float *params);

#endif
