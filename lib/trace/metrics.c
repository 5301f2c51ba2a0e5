/* metrics.c - per-step training metrics: a line on stderr and JSON Lines. */
#include "trace/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/log.h"
#include "trace/metrics_tags.h"
#include "trace/tensorboard.h"

struct titan_metrics {
    FILE *f;
    char path[4096];
    titan_tb *tb; /* TensorBoard scalars too, when set */
    int world;    /* ranks: torchtitan's tps and tflops are per device */
    int64_t resume_step;  /* the checkpoint this run segment started from */
    int segment_pending;  /* the segment's keys go on its first line */
    char layout[128];
    int64_t global_batch;
    int64_t dropped;      /* lines after resume_step dropped at open: steps trained again */
    int restart;          /* > 0: the segment is an elastic restart (titan_metrics_set_restart) */
    char restart_cause[256];
};

/* Keeps only lines whose "step" is <= keep_step; rewrites through a temp
 * file. *dropped_out: how many it dropped. */
static titan_status truncate_after(const char *path, int64_t keep_step, int64_t *dropped_out) {
    FILE *in = fopen(path, "r");
    if (!in) return TITAN_OK; /* nothing yet */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return titan_error(TITAN_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    int dropped = 0;
    while (getline(&line, &cap, in) > 0) {
        const char *s = strstr(line, "\"step\":");
        int64_t step = s ? strtoll(s + 7, NULL, 10) : 0;
        if (step <= keep_step)
            fputs(line, out);
        else
            dropped++;
    }
    free(line);
    fclose(in);
    titan_status st = titan_fs_publish_file(out, tmp, path);
    if (st != TITAN_OK) {
        unlink(tmp);
        return st;
    }
    *dropped_out = dropped;
    if (dropped) titan_info("metrics: dropped %d lines after step %" PRId64 " (not checkpointed)", dropped, keep_step);
    return TITAN_OK;
}

titan_status titan_metrics_open(titan_metrics **out, const char *path, int64_t resume_step) {
    *out = NULL;
    int64_t dropped = 0;
    TITAN_TRY(truncate_after(path, resume_step, &dropped));
    titan_metrics *m = calloc(1, sizeof *m);
    if (!m) return titan_error(TITAN_ERR_NOMEM, "metrics: out of memory");
    m->dropped = dropped;
    snprintf(m->path, sizeof m->path, "%s", path);
    m->resume_step = resume_step;
    m->f = fopen(path, "a");
    if (!m->f) {
        free(m);
        return titan_error(TITAN_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    }
    *out = m;
    return TITAN_OK;
}

void titan_metrics_set_segment(titan_metrics *m, const char *layout, int64_t global_batch) {
    snprintf(m->layout, sizeof m->layout, "%s", layout);
    m->global_batch = global_batch;
    m->segment_pending = 1;
}

void titan_metrics_set_restart(titan_metrics *m, int restart, const char *cause) {
    m->restart = restart;
    snprintf(m->restart_cause, sizeof m->restart_cause, "%s", cause ? cause : "");
}

/* Appends text as a JSON string (layouts are plain; quotes and control
 * characters are escaped all the same). */
static int json_string(FILE *f, const char *text) {
    if (fputc('"', f) == EOF) return -1;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        int r = *c == '"' || *c == '\\' ? fprintf(f, "\\%c", *c) : *c < 0x20 ? fprintf(f, "\\u%04x", *c) : fputc(*c, f);
        if (r < 0) return -1;
    }
    return fputc('"', f) == EOF ? -1 : 1;
}

/* "42s", "3m07s", "5h03m", "2d04h": an ETA at the precision that matters. */
static void format_duration(char *out, size_t cap, double s) {
    long long t = (long long)(s + 0.5);
    if (s < 1) snprintf(out, cap, "<1s");
    else if (t < 60) snprintf(out, cap, "%llds", t);
    else if (t < 3600) snprintf(out, cap, "%lldm%02llds", t / 60, t % 60);
    else if (t < 86400) snprintf(out, cap, "%lldh%02lldm", t / 3600, t % 3600 / 60);
    else snprintf(out, cap, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
}

void titan_metrics_format(const titan_step_metrics *s, char *buf, size_t cap) {
    char step[48];
    if (s->total_steps > 0) {
        int width = snprintf(NULL, 0, "%" PRId64, s->total_steps);
        snprintf(step, sizeof step, "%*" PRId64 "/%" PRId64, width, s->step, s->total_steps);
    } else {
        snprintf(step, sizeof step, "%6" PRId64, s->step);
    }
    int n = snprintf(buf, cap,
                     "step %s | loss %8.4f | grad_norm %8.4f | lr %.3e | tok/s %9.0f | mfu %5.2f%% | mem %6.0f MiB",
                     step, s->loss, s->grad_norm, s->lr, s->tokens_per_s, 100.0 * s->mfu,
                     (double)s->peak_rss_bytes / (1024.0 * 1024.0));
    if (s->eta_s > 0 && n >= 0 && (size_t)n < cap) {
        char eta[32];
        format_duration(eta, sizeof eta, s->eta_s);
        if (s->eta_step > 0 && s->eta_step < s->total_steps)
            n += snprintf(buf + n, cap - (size_t)n, " | eta %s (to step %" PRId64 ")", eta, s->eta_step);
        else
            n += snprintf(buf + n, cap - (size_t)n, " | eta %s", eta);
    }
    if (s->has_val && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " | val_loss %8.4f", s->val_loss);
    if (s->has_comm && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " | comm exposed %.3f of %.3f s", s->comm_exposed_s,
                      s->comm_total_s);
    if (s->has_fp8 && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " | fp8 gemms %" PRId64, s->fp8_gemms);
    if (s->has_dev_mem && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " | dev mem %.0f MiB", (double)s->dev_peak_bytes / (1024.0 * 1024.0));
    /* the device's own count (0 from a test device in host memory) */
    if (s->has_dev_mem && s->dev_used_bytes && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " (used %.0f)", (double)s->dev_used_bytes / (1024.0 * 1024.0));
    if (s->has_ckpt && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " | ckpt stall %.3f s", s->ckpt_stall_s);
}

titan_status titan_metrics_open_tensorboard(titan_metrics *m, const char *dir, int64_t first_step, int world) {
    TITAN_TRY(titan_tb_open(&m->tb, dir, first_step));
    m->world = world > 0 ? world : 1;
    titan_info("tensorboard: %s", titan_tb_path(m->tb));
    return TITAN_OK;
}

/* A step's metrics as TensorBoard scalars (metrics_tags.h). */
static titan_status log_tensorboard(titan_metrics *m, const titan_step_metrics *s) {
    const char *tags[TITAN_TB_NTAGS];
    double v[TITAN_TB_NTAGS];
    int n = 0;
    /* the tag's value: the metrics.jsonl key's over the table's scale */
#define SCALAR(t, value) (tags[n] = titan_tb_tags[t].tag, v[n++] = (value) / titan_tb_tags[t].scale)
    SCALAR(TITAN_TB_LOSS, s->loss);
    SCALAR(TITAN_TB_GRAD_NORM, s->grad_norm);
    SCALAR(TITAN_TB_LR, s->lr);
    SCALAR(TITAN_TB_TOKENS_SEEN, (double)s->tokens_seen);
    SCALAR(TITAN_TB_THROUGHPUT, s->tokens_per_s / m->world);
    SCALAR(TITAN_TB_TFLOPS, s->mfu * s->peak_flops / m->world * 1e-12);
    SCALAR(TITAN_TB_MFU, s->mfu);
    SCALAR(TITAN_TB_STEP_TIME, s->step_time_s);
    SCALAR(TITAN_TB_PEAK_RSS, (double)s->peak_rss_bytes);
    if (s->has_dev_mem) SCALAR(TITAN_TB_DEV_PEAK, (double)s->dev_peak_bytes);
    if (s->has_optim) SCALAR(TITAN_TB_OPTIM_STATE, (double)s->optim_state_bytes);
    if (s->has_val) SCALAR(TITAN_TB_VAL_LOSS, s->val_loss);
    if (s->has_ckpt) SCALAR(TITAN_TB_CKPT_STALL, s->ckpt_stall_s);
    if (s->has_comm) SCALAR(TITAN_TB_COMM_EXPOSED, s->comm_exposed_s);
    if (s->has_fp8) SCALAR(TITAN_TB_FP8_GEMMS, (double)s->fp8_gemms);
    SCALAR(TITAN_TB_TOKENS_PER_S, s->tokens_per_s);
    SCALAR(TITAN_TB_PEAK_FLOPS, s->peak_flops);
#undef SCALAR
    double wall = s->start_unix_s > 0 ? s->start_unix_s + s->step_time_s : 0;
    return titan_tb_scalars(m->tb, s->step, wall, tags, v, n);
}

titan_status titan_metrics_log(titan_metrics *m, const titan_step_metrics *s, int print) {
    int n = fprintf(m->f,
                    "{\"step\":%" PRId64 ",\"loss\":%.9g,\"grad_norm\":%.9g,\"lr\":%.9g,"
                    "\"tokens_per_s\":%.6g,\"mfu\":%.6g,\"peak_flops\":%.6g,\"peak_rss_bytes\":%" PRIu64
                    ",\"step_time_s\":%.6g,\"tokens_seen\":%" PRIu64,
                    s->step, s->loss, s->grad_norm, s->lr, s->tokens_per_s, s->mfu, s->peak_flops,
                    s->peak_rss_bytes, s->step_time_s, s->tokens_seen);
    if (n >= 0 && s->start_unix_s > 0) n = fprintf(m->f, ",\"start_unix_s\":%.6f", s->start_unix_s);
    if (n >= 0 && s->has_val)
        n = fprintf(m->f, ",\"val_loss\":%.9g,\"val_tokens\":%" PRIu64 ",\"val_time_s\":%.6g", s->val_loss,
                    s->val_tokens, s->val_time_s);
    if (n >= 0 && s->has_ckpt) n = fprintf(m->f, ",\"ckpt_stall_s\":%.6g", s->ckpt_stall_s);
    if (n >= 0 && s->has_comm)
        n = fprintf(m->f, ",\"comm_total_s\":%.6g,\"comm_exposed_s\":%.6g", s->comm_total_s, s->comm_exposed_s);
    if (n >= 0 && s->has_fp8) n = fprintf(m->f, ",\"fp8_gemms\":%" PRId64, s->fp8_gemms);
    if (n >= 0 && s->has_optim)
        n = fprintf(m->f, ",\"optim_state_bytes\":%" PRIu64 ",\"optim_projected_bytes\":%" PRIu64, s->optim_state_bytes,
                    s->optim_projected_bytes);
    if (n >= 0 && s->has_optim_comm)
        n = fprintf(m->f, ",\"optim_comm_s\":%.6g,\"optim_comm_bytes\":%" PRIu64, s->optim_comm_s, s->optim_comm_bytes);
    if (n >= 0 && s->has_optimizer) n = fprintf(m->f, ",\"optimizer_s\":%.6g", s->optimizer_s);
    if (n >= 0 && s->has_dev_mem)
        n = fprintf(m->f, ",\"dev_peak_bytes\":%" PRIu64 ",\"dev_used_bytes\":%" PRIu64, s->dev_peak_bytes,
                    s->dev_used_bytes);
    if (n >= 0 && m->segment_pending) {
        n = fprintf(m->f, ",\"resumed_from\":%" PRId64 ",\"global_batch\":%" PRId64 ",\"layout\":", m->resume_step,
                    m->global_batch);
        if (n >= 0) n = json_string(m->f, m->layout);
        if (n >= 0 && m->restart > 0) {
            n = fprintf(m->f, ",\"restart\":%d,\"steps_redone\":%" PRId64 ",\"restart_cause\":", m->restart,
                        m->dropped);
            if (n >= 0) n = json_string(m->f, m->restart_cause);
        }
        m->segment_pending = 0;
    }
    if (n >= 0) n = fprintf(m->f, "}\n");
    if (n < 0 || fflush(m->f) != 0)
        return titan_error(TITAN_ERR_IO, "%s: write failed: %s", m->path, strerror(errno));
    if (m->tb && log_tensorboard(m, s) != TITAN_OK) { /* a side file: training goes on without it */
        titan_warn("tensorboard: %s; no more event records in this run (metrics.jsonl goes on)", titan_error_message());
        titan_error_clear();
        titan_tb_close(m->tb);
        m->tb = NULL;
    }
    if (print) {
        char line[512];
        titan_metrics_format(s, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    }
    return TITAN_OK;
}

void titan_metrics_close(titan_metrics *m) {
    if (!m) return;
    titan_tb_close(m->tb);
    if (m->f) fclose(m->f);
    free(m);
}
