/* llama_ckpt.h - whether a checkpoint's catalog holds the model its metadata names. */
#ifndef TITAN_MODEL_LLAMA_CKPT_H
#define TITAN_MODEL_LLAMA_CKPT_H

#include "ckpt/ckpt.h"
#include "model/llama_config.h"

/* The checkpoint's catalog is exactly the model mc: every parameter of its
 * catalog, with its shape and a float dtype, and nothing else but optimizer
 * state (NAME:exp_avg, NAME:exp_avg_sq) of those parameters in their shapes,
 * and GaLore's (NAME:galore_proj, :galore_exp_avg, :galore_exp_avg_sq) 2-D of any shape.
 * TITAN_ERR_FORMAT naming the checkpoint, the tensor and the contradiction
 * otherwise. Linear in the number of tensors: every reader of a model runs
 * it before sizing buffers by the metadata. */
titan_status titan_llama_ckpt_check(const titan_ckpt *ck, const titan_llama_config *mc);

#endif
