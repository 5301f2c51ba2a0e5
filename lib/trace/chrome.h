/* chrome.h - one Chrome trace (JSON trace event format: chrome://tracing,
 * ui.perfetto.dev) from several inputs, lined up on the wall clock:
 * flight recorder dumps (each rank a process, each communicator a thread,
 * an operation a slice from its start to its end, or to the dump when it
 * never ended) and the op profiler's per-rank traces (thread 0 of the
 * rank's process). */
#ifndef TITAN_TRACE_CHROME_H
#define TITAN_TRACE_CHROME_H

#include <stddef.h>

#include "core/error.h"

typedef struct titan_chrome titan_chrome;

titan_status titan_chrome_new(titan_chrome **out);
void titan_chrome_free(titan_chrome *c);

/* Adds a file: a flight recorder dump or an op-profile trace (told apart by
 * content), or a run's metrics.jsonl (by its name: every step, with its
 * validation and checkpoint stall, a slice on rank 0's "steps" thread);
 * anything else is TITAN_ERR_FORMAT naming it. */
titan_status titan_chrome_add_file(titan_chrome *c, const char *path);
/* Adds every dump and op-profile trace under a run directory or a folder
 * of them (RUN/comm_traces/rank-R.json, RUN/<profile folder>/iteration_N/
 * rankR_trace.json), and its metrics.jsonl when its lines carry their
 * start time; *added counts them. */
titan_status titan_chrome_add_dir(titan_chrome *c, const char *dir, int *added);

/* Writes the merged trace to path ("-": stdout), whole or not at all;
 * *events counts the slices. */
titan_status titan_chrome_write(titan_chrome *c, const char *path, size_t *events);

#endif
