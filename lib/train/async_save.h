/* async_save.h - checkpoints written by a background thread.
 *
 * A save copies parameters and AdamW moments into a host snapshot (the only
 * time the training loop waits, besides waiting for a previous save still
 * running), then a thread writes the snapshot with the usual commit protocol
 * while training goes on. Only one save runs at a time: a second waits for
 * the first. A failed background save is reported by the next poll (every
 * step) or wait, never dropped. The snapshot costs one more copy of the state
 * in host memory. */
#ifndef TITAN_TRAIN_ASYNC_SAVE_H
#define TITAN_TRAIN_ASYNC_SAVE_H

#include <stddef.h>

#include "core/error.h"
#include "train/state.h"

typedef struct titan_async_saver titan_async_saver;

/* n floats per array (parameters, and each AdamW moment). */
titan_status titan_async_saver_create(titan_async_saver **out, size_t n);
/* Waits for (and frees) a running save; its error is lost only if the caller
 * ignores titan_async_save_wait before this. */
void titan_async_saver_free(titan_async_saver *s);

/* Waits for the previous save (returning its error, if it failed, without
 * starting a new one), snapshots v and progress, and starts writing them to
 * root. *stall_s gets the seconds the caller was held (wait + copy). */
titan_status titan_async_save_start(titan_async_saver *s, const char *root, const titan_llama_config *mc,
                                    const titan_state_view *v, const titan_train_progress *progress,
                                    const char *tokenizer_id, int keep_latest_k, double *stall_s);
/* Never blocks: the error of a save that finished and failed (once), else TITAN_OK. */
titan_status titan_async_save_poll(titan_async_saver *s);
/* Blocks until no save runs; returns the error of a failed one. */
titan_status titan_async_save_wait(titan_async_saver *s);

#endif
