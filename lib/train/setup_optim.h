/* setup_optim.h - the optimizer of a job: its config from [optimizer], and
 * the parameters it sees on a rank (FSDP's shard pieces). Training creates
 * the optimizer from these, and the memory plan (memory_estimate.h) sizes
 * it from the same, so the two hold the same bytes. */
#ifndef TITAN_TRAIN_SETUP_OPTIM_H
#define TITAN_TRAIN_SETUP_OPTIM_H

#include "job/config.h"
#include "model/llama.h"
#include "optim/optim.h"
#include "parallel/fsdp.h"
#include "tensor/layout.h"

/* optimizer.name and its keys; GaLore under cp, tp or pp is refused here
 * (it trains under data parallelism only). */
titan_status titan_setup_optim_config(const titan_job_config *cfg, const titan_layout *lay, titan_optim_config *out);

/* The rank's parameters as the optimizer sees them (pieces: its shard
 * plan), GaLore projecting the 2-D weights of attention and MLP; the
 * embedding, norms and output stay on AdamW. *ps_out (the catalog, which
 * the names point into) and *op_out are the caller's to free (free and
 * titan_free). */
titan_status titan_setup_optim_params(const titan_llama_config *mc, const titan_shard_piece *pieces,
                                      titan_param **ps_out, titan_optim_param **op_out, int *np);

#endif
