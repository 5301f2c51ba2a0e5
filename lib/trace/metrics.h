/* metrics.h - per-step training metrics: a line on stderr and JSON Lines in the run dir. */
#ifndef TITAN_TRACE_METRICS_H
#define TITAN_TRACE_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

typedef struct {
    int64_t step;
    double loss;
    double grad_norm;
    double lr;
    double tokens_per_s;
    double mfu;            /* fraction of peak, 0..1 */
    double peak_flops;     /* the peak MFU is relative to */
    uint64_t peak_rss_bytes;
    double step_time_s;
    double start_unix_s;   /* when the step began, on the wall clock (0: not known) */
    uint64_t tokens_seen;  /* total, after this step */
    int has_val;           /* a validation ran after this step: */
    double val_loss;       /*   mean loss over the held-out batches */
    uint64_t val_tokens;   /*   tokens it covered (all ranks) */
    double val_time_s;
    int has_ckpt;          /* a checkpoint was saved after this step: */
    double ckpt_stall_s;   /*   seconds training waited for it */
    int has_comm;          /* more than one rank: */
    double comm_total_s;   /*   running time of the step's parameter and gradient collectives */
    double comm_exposed_s; /*   of which training waited (not hidden behind compute) */
    int has_optimizer;     /* the optimizer ran in order, at the step's end (not on a side stream): */
    double optimizer_s;    /*   its time, the device's work waited for (the AdamW update) */
    int has_dev_mem;           /* a device backend (not host memory): */
    uint64_t dev_peak_bytes;   /*   most bytes held in its buffers during the step */
    uint64_t dev_used_bytes;   /*   the device's used memory after the step (context, workspaces, others) */
    int has_fp8;           /* float8 training (model.converters): */
    int64_t fp8_gemms;     /*   GEMMs this rank ran from float8 operands in the step */
    int has_optim;             /* the optimizer's state on this rank (rank 0's in the file): */
    uint64_t optim_state_bytes;     /*   all of it (moments, GaLore's projectors) */
    uint64_t optim_projected_bytes; /*   the part serving GaLore's projected matrices */
    int has_optim_comm;             /* GaLore under FSDP: the step's own collectives */
    double optim_comm_s;            /*   their time (refresh: all-gathers; left projections: all-reduces) */
    uint64_t optim_comm_bytes;      /*   bytes this rank sent in them */
    int64_t total_steps;   /* training.steps, for "step N/TOTAL" (0: not shown) */
    double eta_s;          /* seconds until this run stops, from its steps so far (0: none) */
    int64_t eta_step;      /*   the step it stops at (--stop-at when before total_steps) */
} titan_step_metrics;

typedef struct titan_metrics titan_metrics;

/* Opens RUN/metrics.jsonl for appending. Lines for steps after resume_step
 * (left by a run that died after its last checkpoint) are dropped first so
 * the file reads as one clean curve. */
titan_status titan_metrics_open(titan_metrics **out, const char *path, int64_t resume_step);
/* The run segment this process trains (from its resume step on): its first
 * JSON line carries "resumed_from" (the checkpoint's step, 0 for a new
 * run), "layout" ("dp_shard=2,tp=2", "single") and "global_batch"
 * (sequences a step), so a plot can mark resumes and layout changes. */
void titan_metrics_set_segment(titan_metrics *m, const char *layout, int64_t global_batch);
/* The segment is restart number `restart` (> 0) of an elastic job, after
 * cause ("rank 2 of 4 was killed by signal 9 (Killed)"): its first line
 * also carries "restart", "restart_cause" and "steps_redone" (the lines of
 * steps after the checkpoint that titan_metrics_open dropped: work lost to
 * the failure, trained again; a step rank 0 did not finish is not counted). */
void titan_metrics_set_restart(titan_metrics *m, int restart, const char *cause);
/* Also writes every step's scalars into a new TensorBoard event file in dir
 * (tensorboard.h) whose first step is first_step; world: the job's ranks. */
titan_status titan_metrics_open_tensorboard(titan_metrics *m, const char *dir, int64_t first_step, int world);
/* Writes the JSON line (always), the TensorBoard scalars (when open) and
 * the stderr line (when print is set). */
titan_status titan_metrics_log(titan_metrics *m, const titan_step_metrics *s, int print);
void titan_metrics_close(titan_metrics *m);
/* Formats the human stderr line into buf. */
void titan_metrics_format(const titan_step_metrics *s, char *buf, size_t cap);

#endif
