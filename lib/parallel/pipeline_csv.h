/* pipeline_csv.h - a pipeline schedule from a file in
 * torch.distributed.pipelining's CSV format (its _load_csv, format
 * "compute_only" or "compute_comms"; torchtitan's
 * parallelism.pipeline_parallel_schedule_csv): row r is pp rank r's
 * actions in order, one a cell, written as torch's _Action prints them:
 * STAGE TYPE MICROBATCH ("2F0", "3I1", "3W1", "1B0"; STAGE the global
 * stage). F forward, B full backward, I its input-gradient part, W its
 * weight-gradient part; SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD
 * and REDUCE_GRAD are read and skipped (titan's runtime derives its
 * transfers from the compute actions, and FSDP gathers and reduces on
 * its own hooks); an empty cell is an idle step. Stages must sit where
 * titan puts them: stage s on rank s mod pp (torch's looped placement). */
#ifndef TITAN_PARALLEL_PIPELINE_CSV_H
#define TITAN_PARALLEL_PIPELINE_CSV_H

#include "parallel/pipeline_schedule.h"

/* Reads and checks path for pp ranks, v stages a rank and micro
 * micro-batches: the text (TITAN_ERR_FORMAT naming the row, the column and
 * the cell), then the schedule as a whole (titan_pp_schedule_verify:
 * TITAN_ERR_USAGE naming the row and column and the cause: a deadlock, a
 * micro-batch left undone or done twice). TITAN_ERR_IO: unreadable. */
titan_status titan_pp_csv_load(const char *path, int pp, int v, int micro, titan_pp_custom **out);
void titan_pp_csv_free(titan_pp_custom *c);

#endif
