/* state_stage.h - checkpoints of a job whose backend memory the host cannot
 * read (cuda, cpu-guard): loads and synchronous saves go through host
 * copies made with the backend's to_device / to_host (an async saver's
 * snapshot is its own copy, async_save.h). On the CPU backend (memory
 * already on the host) the load is the plain one, without copies. One
 * process or one rank's shard alike (the pieces say which). */
#ifndef TITAN_TRAIN_STATE_STAGE_H
#define TITAN_TRAIN_STATE_STAGE_H

#include "train/async_save.h"
#include "parallel/fsdp.h"
#include "train/state.h"
#include "train/state_dist.h"

/* titan_state_load_shards into backend memory: each box is read into one
 * host buffer of the largest box, then copied to shard or adam's moments;
 * moments the checkpoint lacks (a seed) are zeroed on the device. */
titan_status titan_state_load_staged(const titan_backend *be, const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *progress, char *ckpt_path_out, size_t cap,
                                     const titan_load_opts *o);

/* The same for an optimizer with packed moments and GaLore's state
 * (titan_state_load_shards_optim): read into host copies (n floats of
 * parameters, the optimizer's host twin), then copied to shard and opt. */
titan_status titan_state_load_staged_optim(const titan_backend *be, const char *path, const titan_llama_config *mc,
                                           const titan_shard_piece *pieces, float *shard, size_t n, titan_optim *opt,
                                           titan_train_progress *progress, char *ckpt_path_out, size_t cap,
                                           const titan_load_opts *o);

/* Host copies of n floats of parameters and of each AdamW moment, made by
 * every save of a device job (reserved here, resident from the first). */
typedef struct titan_state_stage titan_state_stage;
titan_status titan_state_stage_create(titan_state_stage **out, const titan_backend *be, size_t n);
void titan_state_stage_free(titan_state_stage *s);

/* Copies the state that v points to (backend memory) into s's host copies
 * and points *host at them (adam_step, model_only and dtype too); exp_avg
 * NULL in v stays NULL; GaLore's state (aux_data) goes to a host copy made
 * at the first save (TITAN_ERR_NOMEM when it cannot be).
 * The caller then saves *host as it would a CPU job's state. */
titan_status titan_state_stage_copy(titan_state_stage *s, const titan_state_view *v, titan_state_view *host);

#endif
