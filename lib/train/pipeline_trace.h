/* pipeline_trace.h - a pipeline rank's timeline of its last step and its
 * bubble, as RUN/pipeline_traces/rankR_trace.json: a Chrome trace (the op
 * profiler's format, so titan-trace chrome lines it up with the others)
 * with a slice per action (F, B, I, W: "F 2/0" is stage 2's forward of
 * micro-batch 0; args: its time blocked in transfers and its CPU time
 * outside them, blocked_ms and cpu_ms) and, in otherData.pipeline, the schedule, the measured
 * bubble (mean over the steps) and the schedule's theoretical one
 * (titan_pp_schedule_bubble), which titan-trace summary prints. */
#ifndef TITAN_TRAIN_PIPELINE_TRACE_H
#define TITAN_TRAIN_PIPELINE_TRACE_H

#include "parallel/pipeline.h"

titan_status titan_pipeline_trace_write(const titan_pipeline *p, const char *run_dir, int world_rank);

#endif
