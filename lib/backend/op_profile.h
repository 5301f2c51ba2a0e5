/* op_profile.h - where a training step's time goes, op by op.
 *
 * The profiler wraps a backend's op table. While it records, every op first
 * waits for the device (sync), then runs, then waits again, and its
 * interval on the host clock is kept with its name, its shape and the
 * floating-point operations it does (matmuls and attention; 0 for the rest).
 * An op's time is then its own: its kernels plus their launch. The step
 * itself gets slower (nothing overlaps), so a recorded step's tokens/s are
 * not the run's. Not recording, the wrapped ops only forward the call.
 *
 * One profiler per process (the table's ops have no context pointer). Ops
 * may be called from any thread; events are kept under a lock. */
#ifndef TITAN_BACKEND_OP_PROFILE_H
#define TITAN_BACKEND_OP_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "core/error.h"

typedef struct titan_op_profile titan_op_profile;

/* Wraps inner; *table is the table to hand to the model, optimizer and FSDP
 * in its place (its name, host flag and memory ops are inner's). Fails when
 * a profiler exists already. */
titan_status titan_op_profile_create(const titan_backend *inner, titan_op_profile **out,
                                     const titan_backend **table);
void titan_op_profile_free(titan_op_profile *p);

/* Starts a new recording (the events of the last are dropped) or stops it. */
void titan_op_profile_record(titan_op_profile *p, int on);

/* The recording as a Chrome trace (JSON trace event format: chrome://tracing,
 * ui.perfetto.dev): one complete event per op on process `rank`, times in
 * microseconds from the recording's start (otherData.start_unix_s: that
 * start on the wall clock, for lining up with other traces). Written whole or not at all
 * (NAME.tmp, then rename). */
titan_status titan_op_profile_write_trace(const titan_op_profile *p, const char *path, int rank,
                                          int64_t step);

/* A table of the recording, one row per op name, the costliest first: calls,
 * total milliseconds, share of the ops' time, milliseconds per call,
 * TFLOP/s where the op counts its flops. Then the ops' total against
 * step_s (the recorded step's wall time; <= 0 leaves that line out). */
void titan_op_profile_summary(const titan_op_profile *p, FILE *f, double step_s);

/* The recording's op time in seconds and its costliest op (NULL if none). */
double titan_op_profile_total_s(const titan_op_profile *p, const char **top, double *top_s);

#endif
