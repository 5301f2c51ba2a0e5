/* async_save.h - checkpoints written by a background thread.
 *
 * A save copies parameters and AdamW moments into a host snapshot (the only
 * time the training loop waits, besides waiting for a previous save still
 * running), then a thread writes the snapshot with the usual commit protocol
 * while training goes on. Only one save runs at a time: a second waits for
 * the first. A failed background save is reported by the next poll (every
 * step) or wait, never dropped. The snapshot costs one more copy of the state
 * in host memory.
 *
 * A multi-rank job (titan_async_saver_create_sharded) saves the same way,
 * each rank its own shard into its own data file (state_dist.h); the
 * catalog is committed once every rank's thread is done. That needs the
 * ranks together, so start, poll and wait are then collective over the
 * job's world communicator (call them at the same points on every rank):
 * poll asks every rank whether its thread is done (one small all-gather
 * per step while a save is in flight) and, when all are, commits the step
 * there (rank 0 writes the catalog; the others wait for its outcome). A
 * save still in flight at the next start or at wait is committed there. */
#ifndef TITAN_TRAIN_ASYNC_SAVE_H
#define TITAN_TRAIN_ASYNC_SAVE_H

#include <stddef.h>

#include "core/error.h"
#include "parallel/fsdp.h"
#include "train/state.h"

typedef struct titan_async_saver titan_async_saver;

/* n floats per array (parameters, and each AdamW moment); start's view
 * points to be's memory (a device's too: the snapshot is its to_host). */
titan_status titan_async_saver_create(titan_async_saver **out, const titan_backend *be, size_t n);
/* The saver of a multi-rank job: pieces are this rank's (titan_fsdp_pieces,
 * n floats of packed shard; kept by reference), and start's view holds the
 * packed shard arrays (moments required). A rank that saves no box keeps no
 * snapshot. Not collective. */
titan_status titan_async_saver_create_sharded(titan_async_saver **out, titan_mesh *mesh, const titan_backend *be,
                                              const titan_llama_config *mc, const titan_shard_piece *pieces,
                                              size_t n);
/* Before the first save: each moment's snapshot holds nm floats (an
 * optimizer whose moments are packed, GaLore's: titan_optim_moment_numel)
 * rather than n; start's views then give moment_numel nm. */
titan_status titan_async_saver_set_moment_numel(titan_async_saver *s, size_t nm);
/* Waits for (and frees) a running save; its error is lost only if the caller
 * ignores titan_async_save_wait before this. A sharded save not yet
 * committed is dropped (rank 0 removes its staging dir). Not collective. */
void titan_async_saver_free(titan_async_saver *s);
/* checkpoint.async_mode = "async_with_pinned_mem": the snapshot moves to
 * the backend's page-locked host memory (be->host_alloc), so the copies
 * out of a GPU run at the link's full speed. 1 when it is pinned; 0 when
 * the backend has none (the CPU: its memory is the host's already) or
 * gave none, the snapshot staying pageable. Before the first save. */
int titan_async_saver_pin(titan_async_saver *s);

/* Waits for the previous save (returning its error, if it failed, without
 * starting a new one), snapshots v and progress, and starts writing them to
 * root. *stall_s gets the seconds the caller was held (wait + copy, and for
 * a sharded save the collective start). v->model_only: the parameters only
 * (as v->dtype), the moments neither copied nor written. */
titan_status titan_async_save_start(titan_async_saver *s, const char *root, const titan_llama_config *mc,
                                    const titan_state_view *v, const titan_train_progress *progress,
                                    const titan_tokenizer *tokenizer, int keep_latest_k, double *stall_s);
/* The error of a save that finished and failed (once), else TITAN_OK. One
 * process: never blocks. Sharded: commits a save every rank has written
 * (blocking for that). */
titan_status titan_async_save_poll(titan_async_saver *s);
/* Blocks until no save runs (sharded: and the last one is committed);
 * returns the error of a failed one. */
titan_status titan_async_save_wait(titan_async_saver *s);

#endif
