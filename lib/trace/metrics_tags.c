/* metrics_tags.c - the TensorBoard tag table (metrics_tags.h). */
#include <stddef.h>

#include "trace/metrics_tags.h"

const titan_tb_tag_info titan_tb_tags[TITAN_TB_NTAGS] = {
    [TITAN_TB_LOSS] = {"loss_metrics/global_avg_loss", "loss", 1},
    [TITAN_TB_GRAD_NORM] = {"grad_norm", "grad_norm", 1},
    [TITAN_TB_LR] = {"lr", "lr", 1},
    [TITAN_TB_TOKENS_SEEN] = {"ntokens_seen", "tokens_seen", 1},
    [TITAN_TB_THROUGHPUT] = {"throughput(tps)", NULL, 1},
    [TITAN_TB_TFLOPS] = {"tflops", NULL, 1},
    [TITAN_TB_MFU] = {"mfu(%)", "mfu", 0.01},
    [TITAN_TB_STEP_TIME] = {"time_metrics/end_to_end(s)", "step_time_s", 1},
    [TITAN_TB_PEAK_RSS] = {"memory/peak_rss(GiB)", "peak_rss_bytes", 1073741824.0},
    [TITAN_TB_DEV_PEAK] = {"memory/max_active(GiB)", "dev_peak_bytes", 1073741824.0},
    [TITAN_TB_OPTIM_STATE] = {"memory/optimizer_state(GiB)", "optim_state_bytes", 1073741824.0},
    [TITAN_TB_VAL_LOSS] = {"validation_metrics/loss", "val_loss", 1},
    [TITAN_TB_CKPT_STALL] = {"titan/ckpt_stall(s)", "ckpt_stall_s", 1},
    [TITAN_TB_COMM_EXPOSED] = {"titan/comm_exposed(s)", "comm_exposed_s", 1},
    [TITAN_TB_FP8_GEMMS] = {"titan/fp8_gemms", "fp8_gemms", 1},
    [TITAN_TB_TOKENS_PER_S] = {"titan/tokens_per_s", "tokens_per_s", 1},
    [TITAN_TB_PEAK_FLOPS] = {"titan/peak_flops", "peak_flops", 1},
};
