/* state_dist.h - training checkpoints of a data-parallel job: each rank's
 * boxes (fsdp.h's shard plan) saved as that rank's data file, and each rank
 * loading only its own boxes from a checkpoint of any layout. */
#ifndef TITAN_TRAIN_STATE_DIST_H
#define TITAN_TRAIN_STATE_DIST_H

#include "train/fsdp.h"
#include "train/state.h"

/* Collective over the mesh: writes ROOT/step-N with the parameters and AdamW
 * moments of every rank that saves a box (layout.h's `writes`), each into its
 * rank-RRRRR.bin, and "layout" metadata. Rank 0 runs the writer: the others
 * send it their shards in turn (so rank 0 holds one other shard at a time).
 * Every rank returns the outcome (a failure on rank 0 fails all). */
titan_status titan_state_save_shards(titan_mesh *mesh, titan_fsdp *f, titan_adamw *adam, const char *root,
                                     const titan_llama_config *mc, const titan_train_progress *progress,
                                     const char *tokenizer_id, int keep_latest_k);

/* Loads this rank's boxes (pieces, from titan_shard_plan) of the parameters
 * into shard and of the AdamW moments into adam (a seed checkpoint has none:
 * fresh moments), from path (a step dir, or a root: its latest), whatever
 * layout saved it. */
titan_status titan_state_load_shards(const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *progress, char *ckpt_path_out, size_t cap);

#endif
