/* pipeline_read.h - the pipeline ranks' timelines (RUN/pipeline_traces/
 * rankR_trace.json, written by titan-train: train/pipeline_trace.h) read
 * back for titan-trace summary: each rank's measured bubble (the mean over
 * the run's steps), the bubble of a replay of its pipeline's last step on
 * a logical clock with each action's measured time
 * (titan_pp_schedule_replay; one rank per pipeline stage, the lowest world
 * rank of each), wall less blocked and CPU, and the schedule's theoretical
 * one; then each stage's median action times and each rank's sums. */
#ifndef TITAN_CMD_TRACE_PIPELINE_READ_H
#define TITAN_CMD_TRACE_PIPELINE_READ_H

#include <stdio.h>

#include "core/error.h"

/* Writes the table to out when run_dir has pipeline traces; *found: how
 * many ranks' (0: none, nothing written). */
titan_status titan_pipeline_summary(const char *run_dir, FILE *out, int *found);

#endif
