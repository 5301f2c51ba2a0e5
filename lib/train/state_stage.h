/* state_stage.h - checkpoints of a one-process job whose backend memory the
 * host cannot read (cuda, cpu-guard): loads and saves go through host copies
 * made with the backend's to_device / to_host. On the CPU backend (memory
 * already on the host) they are the plain load and save, without copies.
 * Several ranks on a device are refused at start (device.h), so these
 * handle world = 1 only. */
#ifndef TITAN_TRAIN_STATE_STAGE_H
#define TITAN_TRAIN_STATE_STAGE_H

#include "train/async_save.h"
#include "train/fsdp.h"
#include "train/state.h"

/* titan_state_load_shards into backend memory: the checkpoint is read into
 * host buffers (parameters and both moments: 3 x titan_adamw_numel(adam)
 * floats, freed before returning), then copied to shard and adam's moments. */
titan_status titan_state_load_staged(const titan_backend *be, const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *progress, char *ckpt_path_out, size_t cap);

/* Host copies of n floats of parameters and of each AdamW moment, made by
 * every save of a device job (allocated at the first). */
typedef struct titan_state_stage titan_state_stage;
titan_status titan_state_stage_create(titan_state_stage **out, const titan_backend *be, size_t n);
void titan_state_stage_free(titan_state_stage *s);

/* Saves the state that v points to (backend memory, one process): copies it
 * to the host (the training stall), then writes it as titan_state_save_view
 * does, or hands it to saver (async_save.h; NULL: write now). *stall_s gets
 * the seconds the caller was held, copies included. */
titan_status titan_state_save_staged(titan_state_stage *s, titan_async_saver *saver, const char *root,
                                     const titan_llama_config *mc, const titan_state_view *v,
                                     const titan_train_progress *progress, const char *tokenizer_id,
                                     int keep_latest_k, double *stall_s);

#endif
