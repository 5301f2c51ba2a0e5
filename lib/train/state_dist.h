/* state_dist.h - training checkpoints of a data-parallel job: each rank's
 * boxes (fsdp.h's shard plan) saved by that rank as its own data file (in
 * parallel; rank 0 writes the catalog), and each rank loading only its own
 * boxes from a checkpoint of any layout. */
#ifndef TITAN_TRAIN_STATE_DIST_H
#define TITAN_TRAIN_STATE_DIST_H

#include "parallel/fsdp.h"
#include "train/state.h"

/* Collective over the mesh: writes ROOT/step-N with the parameters and AdamW
 * moments of every rank that saves a box (layout.h's `writes`), each rank
 * its own rank-RRRRR.bin, all at once, and "layout" metadata: the three
 * steps below in a row. Every rank returns the outcome (a failure on any
 * rank fails all). pieces: this rank's (titan_fsdp_pieces); v: its packed
 * shard arrays, host memory (state_stage.h copies a device's). */
titan_status titan_state_save_shards(titan_mesh *mesh, const titan_shard_piece *pieces, const titan_state_view *v,
                                     const char *root, const titan_llama_config *mc,
                                     const titan_train_progress *progress, const titan_tokenizer *tokenizer,
                                     int keep_latest_k);

/* A sharded save in three steps, so that the middle one, the writing, can
 * run in a background thread (async_save.h). Nothing is visible to readers
 * before finish publishes the step; a save that fails or is dropped leaves
 * at most ROOT/step-N.tmp/, which the next writer of step N removes. */
typedef struct titan_shard_save titan_shard_save;

/* Collective over mesh->world_comm: rank 0 creates ROOT/step-N.tmp/ (N =
 * progress->step; a stale one is removed) with its own data file and the
 * catalog's metadata, then every rank learns whether that worked (rank 0's
 * error message becomes theirs). pieces: this rank's (titan_fsdp_pieces),
 * kept by reference until finish. v: its adam_step, and whether the save
 * is model-only (its arrays are given to write). */
titan_status titan_shard_save_begin(titan_shard_save **out, titan_mesh *mesh, const titan_shard_piece *pieces,
                                    const char *root, const titan_llama_config *mc,
                                    const titan_train_progress *progress, const titan_tokenizer *tokenizer,
                                    const titan_state_view *v);
/* Not collective, any thread: writes this rank's boxes of the packed shard
 * arrays (parameters, exp_avg, exp_avg_sq) into its data file and fsyncs it.
 * The outcome (and error message) is kept for finish; returned too. */
titan_status titan_shard_save_write(titan_shard_save *s, const float *params, const float *exp_avg,
                                    const float *exp_avg_sq);
/* Before write: the optimizer's mask and aux tensors of v (state.h), kept
 * by reference; without it every parameter's moments are saved and no aux. */
void titan_shard_save_set_optim(titan_shard_save *s, const titan_state_view *v);
/* Collective, after write on every rank: rank 0 learns every rank's outcome
 * and the index of every data file, then publishes the step (or, when any
 * rank failed, removes the staging dir); every rank returns the outcome:
 * "checkpoint step N not saved: rank R: <R's error>". Frees s. */
titan_status titan_shard_save_finish(titan_shard_save *s, int keep_latest_k);
/* Not collective: drops a save that will not be finished (an error path on
 * the way out); rank 0 removes the staging dir. NULL is fine. */
void titan_shard_save_abort(titan_shard_save *s);

/* What a resume leaves out (checkpoint.exclude_from_loading), and where
 * the memory lies. */
typedef struct {
    unsigned exclude; /* TITAN_PART_*: MODEL and OPTIMIZER are honoured here, the rest by the caller */
    uint64_t seed;    /* MODEL: the weights drawn as titan-init draws them from this seed */
    /* non-NULL: shard and the moments are this backend's memory; each box
     * goes through one host buffer of the largest box (titan_state_load_shards
     * only: the _optim variant takes host memory) */
    const titan_backend *dev;
} titan_load_opts;

/* Loads this rank's boxes (pieces, from titan_shard_plan) of the parameters
 * into shard and of the AdamW moments into adam (a seed checkpoint, or a
 * model-only one, has none: fresh moments), from path (a step dir, or a
 * root: its latest), whatever layout saved it. o (NULL: everything): the
 * parts left out. */
titan_status titan_state_load_shards(const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *progress, char *ckpt_path_out, size_t cap,
                                     const titan_load_opts *o);
/* The same for optimizer opt: only the flat moments it keeps, and its aux
 * tensors (GaLore's low-rank state) whole. */
titan_status titan_state_load_shards_optim(const char *path, const titan_llama_config *mc,
                                           const titan_shard_piece *pieces, float *shard, titan_optim *opt,
                                           titan_train_progress *pr, char *ckpt_path_out, size_t cap,
                                           const titan_load_opts *o);

#endif
