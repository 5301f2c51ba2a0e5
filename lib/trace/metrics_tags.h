/* metrics_tags.h - the TensorBoard tags of titan's step metrics, one table
 * for the writer (metrics.c) and the reader (metrics_read.c), so a tag
 * renamed on one side cannot drop a series on the other. torchtitan's tags
 * where it has one for the same quantity, titan/... where not. */
#ifndef TITAN_TRACE_METRICS_TAGS_H
#define TITAN_TRACE_METRICS_TAGS_H

typedef enum {
    TITAN_TB_LOSS,
    TITAN_TB_GRAD_NORM,
    TITAN_TB_LR,
    TITAN_TB_TOKENS_SEEN,
    TITAN_TB_THROUGHPUT, /* per rank, as torchtitan's */
    TITAN_TB_TFLOPS,     /* per rank */
    TITAN_TB_MFU,
    TITAN_TB_STEP_TIME,
    TITAN_TB_PEAK_RSS,
    TITAN_TB_DEV_PEAK,
    TITAN_TB_OPTIM_STATE,
    TITAN_TB_VAL_LOSS,
    TITAN_TB_CKPT_STALL,
    TITAN_TB_COMM_EXPOSED,
    TITAN_TB_FP8_GEMMS,
    TITAN_TB_TOKENS_PER_S, /* the job's, as metrics.jsonl */
    TITAN_TB_PEAK_FLOPS,
    TITAN_TB_NTAGS
} titan_tb_tag;

typedef struct {
    const char *tag; /* "loss_metrics/global_avg_loss" */
    const char *key; /* metrics.jsonl's key for it; NULL: derived, not read back */
    double scale;    /* the key's value = the tag's value x scale */
} titan_tb_tag_info;

extern const titan_tb_tag_info titan_tb_tags[TITAN_TB_NTAGS];

#endif
