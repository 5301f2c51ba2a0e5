/* titan-trace - reads what training leaves behind (metrics.jsonl, flight
 * recorder dumps, op-profile traces) and prints summaries, finds the
 * operation a hung job waits in, draws plots, exports one Chrome trace. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "core/log.h"
#include "core/options.h"
#include "core/version.h"
#include "job/config.h"
#include "trace/chrome.h"
#include "trace/flight_read.h"
#include "trace/hang.h"
#include "trace/metrics_read.h"
#include "titan-trace/pipeline_read.h"
#include "trace/plot.h"

typedef struct {
    const char *cmd;
    char **pos;
    int npos;
    const char *keys, *svg, *out;
    long long width, height, last;
    double smooth;
    int log_y;
} opts;

static const titan_subcommand commands[] = {
    {"summary", "RUN|METRICS.jsonl", "steps, loss, tokens/s, MFU, memory, communication"},
    {"plot", "[-y KEY,...] [--svg OUT.svg] [--smooth W] [--log-y] RUN|METRICS.jsonl...",
     "metrics against the step (default: loss, and\nval_loss when validated), as text or an SVG file:\n"
     "a panel (y axis) a key, resumes marked; several\nruns share the panels (RUN:KEY)"},
    {"hang", "RUN|DIR", "the operation a hung job waits in, and the ranks\n"
     "that never reached it (flight recorder dumps)"},
    {"flight", "[-n N] RUN|DIR|RANK.json", "each rank's last N recorded operations (default 20)"},
    {"chrome", "[-o OUT.json] INPUT...", "one Chrome trace (chrome://tracing, ui.perfetto.dev)\n"
     "of runs, dump folders, dumps and op-profile traces"},
    {NULL},
};

/* --help's prose after the options the table generates. */
static const char footer[] =
    "RUN is a run directory: RUN/metrics.jsonl, RUN/<comm.save_traces_folder> (the\n"
    "flight recorder's rank-R.json), RUN/<profiling.save_traces_folder>.\n"
    "\n"
    "Exit status: 0 ok (hang: no operation waits), 1 hang: some operation waits, 2 usage\n"
    "error, 3 file missing or unreadable, 4 malformed input, 6 out of memory.\n"
    "See titan-trace(1).";

/* Parses argv into o; *done: --help or --version answered, or the usage
 * printed for no command (*code 2). */
static titan_status parse(int argc, char **argv, opts *o, titan_opt_result *r, int *done, int *code) {
    int verbosity = 1;
    const titan_option table[] = {
        {TITAN_OPT(STRING, NULL, 'y', &o->keys, "KEY[,KEY...]", "the metrics to plot"), .cmds = "plot"},
        {TITAN_OPT(STRING, "svg", 0, &o->svg, "OUT.svg", "draw into an SVG file"), .cmds = "plot"},
        {TITAN_OPT(DOUBLE, "smooth", 0, &o->smooth, "W", "EMA smoothing weight 0 to 0.999 (TensorBoard's)"),
         .cmds = "plot", .dmin = 0, .dmax = 0.999, .expected = "a weight 0 to 0.999"},
        {TITAN_OPT(FLAG, "log-y", 0, &o->log_y, NULL, "log y axes (panels with values <= 0 stay linear)"),
         .cmds = "plot"},
        {TITAN_OPT(INT, "width", 0, &o->width, "N", "text plot columns (default 72)"), .cmds = "plot", .min = 10,
         .max = 1000},
        {TITAN_OPT(INT, "height", 0, &o->height, "N", "text plot rows a panel (default 16)"), .cmds = "plot",
         .min = 4, .max = 500},
        {TITAN_OPT(INT, NULL, 'n', &o->last, "N", "operations per rank (default 20)"), .cmds = "flight", .min = 1,
         .max = 100000000},
        {TITAN_OPT(STRING, NULL, 'o', &o->out, "OUT.json", "the trace file (default: stdout)"), .cmds = "chrome"},
        {TITAN_OPT(SET_INT, "quiet", 'q', &verbosity, NULL, "only errors"), .value = 0},
        TITAN_OPTS_HELP_VERSION,
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-trace", .usage = "COMMAND [options] ARGS", .footer = footer, .opts = table, .cmds = commands,
    };
    *done = 0;
    titan_status st = titan_opt_parse(&spec, argc, argv, r);
    titan_log_set_verbosity(verbosity);
    if (st != TITAN_OK) return st;
    *done = r->help || r->version || !r->cmd;
    if (titan_opt_answer(&spec, r)) return TITAN_OK;
    if (!r->cmd) {
        titan_opt_help(&spec, stderr);
        *code = TITAN_ERR_USAGE;
        return TITAN_OK;
    }
    o->cmd = r->cmd;
    o->pos = r->pos;
    o->npos = r->npos;
    int want = !strcmp(o->cmd, "chrome") || !strcmp(o->cmd, "plot") ? -1 : 1;
    if ((want == 1 && o->npos != 1) || (want < 0 && o->npos < 1))
        return titan_error(TITAN_ERR_USAGE, "titan-trace %s: expected %s, got %d argument%s", o->cmd,
                           want == 1 ? "one argument" : "one or more inputs", o->npos, o->npos == 1 ? "" : "s");
    return TITAN_OK;
}

/* RUN/metrics.jsonl for a run directory, else the path itself. */
static titan_status metrics_path(const char *arg, char *out, size_t cap) {
    if (!titan_fs_exists(arg)) return titan_error(TITAN_ERR_IO, "%s: no such run directory or metrics file", arg);
    /* a run's metrics.jsonl, else a folder of TensorBoard event files (RUN/tb) */
    if (titan_fs_is_dir(arg)) {
        snprintf(out, cap, "%s/metrics.jsonl", arg);
        if (!titan_fs_exists(out)) snprintf(out, cap, "%s", arg);
    } else
        snprintf(out, cap, "%s", arg);
    return TITAN_OK;
}

/* The folder of flight recorder dumps: DIR itself when it holds them, else a
 * run directory's comm.save_traces_folder (its config.toml says). */
static titan_status dumps_dir(const char *arg, char *out, size_t cap) {
    char cfg_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.toml", arg);
    if (!titan_fs_exists(cfg_path)) {
        snprintf(out, cap, "%s", arg);
        return TITAN_OK;
    }
    titan_job_config *cfg = malloc(sizeof *cfg);
    if (!cfg) return titan_error(TITAN_ERR_NOMEM, "out of memory");
    titan_config_defaults(cfg);
    titan_status st = titan_config_load_file(cfg, cfg_path);
    if (st == TITAN_OK) snprintf(out, cap, "%s/%s", arg, cfg->comm_save_traces_folder);
    free(cfg);
    return st;
}

static titan_status cmd_summary(const opts *o) {
    char path[4200];
    TITAN_TRY(metrics_path(o->pos[0], path, sizeof path));
    titan_metrics_file *m;
    TITAN_TRY(titan_metrics_read(path, &m));
    printf("%s\n", path);
    titan_metrics_summary(m, stdout);
    titan_metrics_file_free(m);
    int ranks = 0; /* a pipeline run's per-rank bubbles */
    return titan_fs_is_dir(o->pos[0]) ? titan_pipeline_summary(o->pos[0], stdout, &ranks) : TITAN_OK;
}

#define MAX_SERIES 8
#define MAX_MARKERS 64

/* What one plot gathers from its inputs. */
typedef struct {
    titan_series s[MAX_SERIES];
    char names[MAX_SERIES][256];
    int ns;
    titan_plot_marker markers[MAX_MARKERS];
    char labels[MAX_MARKERS][256];
    int nmarkers;
} plot_input;

/* A layout as metrics.jsonl records it ("dp_replicate=1,dp_shard=2,cp=1,
 * tp=1,pp=1") without its degrees of 1: "dp_shard=2". */
static void short_layout(const char *layout, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (const char *p = layout; *p && k < cap;) {
        size_t len = strcspn(p, ",");
        if (len < 2 || strncmp(p + len - 2, "=1", 2)) /* a value of exactly 1 ends in "=1" */
            k += (size_t)snprintf(out + k, cap - k, "%s%.*s", k ? "," : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    if (!out[0]) snprintf(out, cap, "single");
}

/* A marker at each resume of the run: "resumed", with the layout and the
 * global batch when they changed (RUN: first when several runs share the plot). */
static void add_markers(const titan_metrics_file *m, const char *arg, int prefix, plot_input *in) {
    titan_metrics_segment *g;
    size_t n = titan_metrics_segments(m, &g);
    for (size_t i = 0; i < n && in->nmarkers < MAX_MARKERS; i++) {
        if (g[i].resumed_from <= 0) continue;
        const titan_metrics_segment *was = i > 0 ? &g[i - 1] : NULL;
        int layout = was && g[i].layout[0] && strcmp(g[i].layout, was->layout);
        int batch = was && g[i].global_batch && g[i].global_batch != was->global_batch;
        char *label = in->labels[in->nmarkers];
        char shown[128], as[140] = "", by[40] = "";
        short_layout(g[i].layout, shown, sizeof shown);
        if (layout) snprintf(as, sizeof as, " as %s", shown);
        if (batch) snprintf(by, sizeof by, ", batch %" PRId64, g[i].global_batch);
        /* one bounded write: the layout comes from the metrics file */
        snprintf(label, 256, "%.60s%sresumed%s%s", prefix ? arg : "", prefix ? ": " : "", as, by);
        in->markers[in->nmarkers++] = (titan_plot_marker){.x = (double)g[i].resumed_from, .label = label};
    }
    free(g);
}

/* The series of one input's keys, appended to in (named KEY, or RUN:KEY
 * when several inputs share the plot; a key's panel is the key, val_KEY's
 * KEY's), and its resumes. */
static titan_status add_series(const char *arg, const char *keys_opt, int prefix, plot_input *in) {
    char path[4200];
    TITAN_TRY(metrics_path(arg, path, sizeof path));
    titan_metrics_file *m;
    TITAN_TRY(titan_metrics_read(path, &m));
    char keys[1024];
    snprintf(keys, sizeof keys, "%s", keys_opt ? keys_opt : titan_metrics_has(m, "val_loss") ? "loss,val_loss" : "loss");
    titan_status st = TITAN_OK;
    for (char *save = NULL, *k = strtok_r(keys, ",", &save); k && st == TITAN_OK; k = strtok_r(NULL, ",", &save)) {
        if (in->ns == MAX_SERIES) {
            st = titan_error(TITAN_ERR_USAGE, "plot: at most %d series (inputs x keys)", MAX_SERIES);
            break;
        }
        double *x, *y;
        size_t n = titan_metrics_series(m, k, &x, &y);
        if (!n) {
            st = titan_error(TITAN_ERR_USAGE, "plot -y %s: %s has no numeric \"%s\" on any line", k, path, k);
            titan_error_hint("keys titan-train writes: loss, grad_norm, lr, tokens_per_s, mfu, step_time_s, "
                             "peak_rss_bytes, val_loss, comm_exposed_s, ckpt_stall_s, dev_peak_bytes");
            break;
        }
        char *name = in->names[in->ns];
        if (prefix)
            snprintf(name, 256, "%.200s:%.50s", arg, k);
        else
            snprintf(name, 256, "%.250s", k);
        const char *key = strrchr(name, ':') && prefix ? strrchr(name, ':') + 1 : name;
        in->s[in->ns] = (titan_series){.name = name, .panel = strncmp(key, "val_", 4) || !key[4] ? key : key + 4,
                                       .x = x, .y = y, .n = n};
        in->ns++;
    }
    if (st == TITAN_OK) add_markers(m, arg, prefix, in);
    titan_metrics_file_free(m);
    return st;
}

static titan_status cmd_plot(const opts *o) {
    plot_input *in = calloc(1, sizeof *in);
    if (!in) return titan_error(TITAN_ERR_NOMEM, "plot: out of memory");
    titan_status st = TITAN_OK;
    for (int i = 0; i < o->npos && st == TITAN_OK; i++) st = add_series(o->pos[i], o->keys, o->npos > 1, in);
    char title[4300];
    snprintf(title, sizeof title, "%s%s", o->pos[0], o->npos > 1 ? " and others" : "");
    titan_plot_opts po = {.title = title, .xlabel = "step", .smooth = o->smooth, .log_y = o->log_y,
                          .markers = in->markers, .nmarkers = in->nmarkers};
    if (st == TITAN_OK && o->svg) {
        st = titan_plot_svg(o->svg, in->s, in->ns, &po);
        if (st == TITAN_OK) titan_info("%s written", o->svg);
    } else if (st == TITAN_OK) {
        st = titan_plot_text(stdout, in->s, in->ns, &po, o->width ? (int)o->width : 72,
                             o->height ? (int)o->height : 16);
    }
    for (int i = 0; i < in->ns; i++) {
        free((void *)in->s[i].x);
        free((void *)in->s[i].y);
    }
    free(in);
    return st;
}

/* 0 nothing waits, 1 something does (the exit status), or an error. */
static titan_status cmd_hang(const opts *o, int *waits) {
    char dir[4300];
    TITAN_TRY(dumps_dir(o->pos[0], dir, sizeof dir));
    fl_dump *dumps;
    int n;
    TITAN_TRY(titan_flight_load_dir(dir, &dumps, &n));
    titan_hang_result r;
    titan_status st = titan_hang_report(dumps, n, stdout, &r);
    titan_flight_dumps_free(dumps, n);
    TITAN_TRY(st);
    *waits = r.stuck > 0;
    return TITAN_OK;
}

static void print_entries(const fl_dump *d, long last) {
    printf("rank %d (%s, pid %ld), step %" PRId64 ": %s", d->rank, d->host, d->pid, d->step,
           d->reason && d->reason[0] ? d->reason : "(no reason)");
    if (titan_flight_earlier_failure(d)) printf(", after it failed: %s", titan_flight_earlier_failure(d));
    printf("\n");
    printf("  %8s %6s %-12s %-16s %6s %-5s %12s %-8s %10s\n", "id", "step", "comm", "op", "seq", "dtype", "count",
           "state", "ms");
    size_t from = last > 0 && d->nentries > (size_t)last ? d->nentries - (size_t)last : 0;
    for (size_t i = from; i < d->nentries; i++) {
        const fl_entry *e = &d->entries[i];
        double t0 = e->t_started > 0 ? e->t_started : e->t_queued, t1 = e->t_ended > 0 ? e->t_ended : d->time;
        char seq[32], op[48];
        if (e->seq)
            snprintf(seq, sizeof seq, "#%" PRIu64, e->seq);
        else if (e->peer >= 0 || e->peer2 >= 0)
            snprintf(seq, sizeof seq, "%s%" PRIu64, e->peer >= 0 ? ">" : "<", e->peer >= 0 ? e->n : e->n2);
        else
            snprintf(seq, sizeof seq, "-");
        if (e->peer >= 0 && e->peer2 >= 0)
            snprintf(op, sizeof op, "%s %d<>%d", e->op, e->peer, e->peer2);
        else if (e->peer >= 0)
            snprintf(op, sizeof op, "%s %s%d", e->op, strcmp(e->op, "broadcast") ? "->" : "root ", e->peer);
        else if (e->peer2 >= 0)
            snprintf(op, sizeof op, "%s <-%d", e->op, e->peer2);
        else
            snprintf(op, sizeof op, "%s", e->op);
        printf("  %8" PRIu64 " %6" PRId64 " %-12s %-16s %6s %-5s %12" PRIu64 " %-8s %10.3f%s\n", e->id, e->step,
               d->comms[e->comm].name, op, seq, e->dtype, e->count ? e->count : e->count2,
               titan_flight_state_name(e->state), 1e3 * (t1 > t0 ? t1 - t0 : 0), e->t_ended > 0 ? "" : " (so far)");
    }
}

static titan_status cmd_flight(const opts *o) {
    const char *arg = o->pos[0];
    long last = o->last ? o->last : 20;
    if (!titan_fs_is_dir(arg)) {
        fl_dump d;
        TITAN_TRY(titan_flight_load(arg, &d));
        print_entries(&d, last);
        titan_flight_dump_free(&d);
        return TITAN_OK;
    }
    char dir[4300];
    TITAN_TRY(dumps_dir(arg, dir, sizeof dir));
    fl_dump *dumps;
    int n;
    TITAN_TRY(titan_flight_load_dir(dir, &dumps, &n));
    for (int i = 0; i < n; i++) {
        if (i) printf("\n");
        print_entries(&dumps[i], last);
    }
    titan_flight_dumps_free(dumps, n);
    return TITAN_OK;
}

static titan_status cmd_chrome(const opts *o) {
    titan_chrome *c;
    TITAN_TRY(titan_chrome_new(&c));
    titan_status st = TITAN_OK;
    int files = 0;
    for (int i = 0; i < o->npos && st == TITAN_OK; i++) {
        int added = 0;
        if (titan_fs_is_dir(o->pos[i])) {
            st = titan_chrome_add_dir(c, o->pos[i], &added);
            if (st == TITAN_OK && added == 0)
                st = titan_error(TITAN_ERR_IO, "%s: no flight recorder dumps or op-profile traces under it", o->pos[i]);
        } else {
            st = titan_chrome_add_file(c, o->pos[i]);
            added = 1;
        }
        files += added;
    }
    size_t events = 0;
    const char *out = o->out ? o->out : "-";
    if (st == TITAN_OK) st = titan_chrome_write(c, out, &events);
    if (st == TITAN_OK && strcmp(out, "-"))
        titan_info("%s: %zu events from %d file%s", out, events, files, files == 1 ? "" : "s");
    titan_chrome_free(c);
    return st;
}

int main(int argc, char **argv) {
    titan_log_init("titan-trace");
    opts o = {0};
    static titan_opt_result r; /* static: its lists live until exit, reachable (LeakSanitizer) */
    int done = 0, code = 0, waits = 0;
    titan_status st = parse(argc, argv, &o, &r, &done, &code);
    if (st == TITAN_OK && done) return code;
    if (st == TITAN_OK) {
        const char *cmd = o.cmd;
        if (!strcmp(cmd, "summary")) st = cmd_summary(&o);
        else if (!strcmp(cmd, "plot")) st = cmd_plot(&o);
        else if (!strcmp(cmd, "hang")) st = cmd_hang(&o, &waits);
        else if (!strcmp(cmd, "flight")) st = cmd_flight(&o);
        else st = cmd_chrome(&o);
    }
    titan_opt_result_free(&r);
    if (st != TITAN_OK) return titan_report(st);
    if (fflush(stdout) != 0) return titan_report(titan_error(TITAN_ERR_IO, "stdout: write failed"));
    return waits ? 1 : 0;
}
