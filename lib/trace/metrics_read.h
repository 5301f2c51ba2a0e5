/* metrics_read.h - a run's metrics.jsonl (metrics.h) read back: its
 * series, and the summary titan-trace prints. */
#ifndef TITAN_TRACE_METRICS_READ_H
#define TITAN_TRACE_METRICS_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

typedef struct titan_metrics_file titan_metrics_file;

/* Reads every line; one that is not a JSON object with an integer "step"
 * is TITAN_ERR_FORMAT naming path:line. An empty file is no error. */
titan_status titan_metrics_read(const char *path, titan_metrics_file **out);
void titan_metrics_file_free(titan_metrics_file *m);
size_t titan_metrics_rows(const titan_metrics_file *m);

/* The steps and values of the lines that carry key as a number, in file
 * order; *x and *y are malloc'd (free them), NULL when n is 0. */
size_t titan_metrics_series(const titan_metrics_file *m, const char *key, double **x, double **y);
/* 1 if some line carries key as a number. */
int titan_metrics_has(const titan_metrics_file *m, const char *key);
/* Line `row`'s value of key: 1 and *v when it carries key as a number, else 0. */
int titan_metrics_get(const titan_metrics_file *m, size_t row, const char *key, double *v);

/* A run segment (metrics.h: titan_metrics_set_segment): one process's
 * training from a checkpoint on, as its first line records it. */
typedef struct {
    int64_t resumed_from;  /* the checkpoint's step; 0: a new run */
    int64_t global_batch;  /* sequences a step; 0 when not recorded */
    char layout[128];      /* "dp_shard=2,tp=2", "single"; "" when not recorded */
} titan_metrics_segment;

/* The segments the lines record, in file order (*segs malloc'd, free it;
 * NULL when none: files of older runs record none). */
size_t titan_metrics_segments(const titan_metrics_file *m, titan_metrics_segment **segs);

/* The run in a few lines: steps, loss (first, last, lowest), validation,
 * throughput and MFU (medians over the steps after the first, which pays
 * for warm-up), step time, memory, communication, checkpoint stalls. */
void titan_metrics_summary(const titan_metrics_file *m, FILE *f);

#endif
