/* chrome.c - flight recorder dumps and op-profile traces merged into one
 * Chrome trace on the wall clock (chrome.h). */
#define _GNU_SOURCE /* nftw */
#include "trace/chrome.h"

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "comm/flight.h"
#include "trace/flight_read.h"
#include "trace/metrics_read.h"

#define STEPS_TID 1000 /* rank 0's thread of training steps (metrics.jsonl) */

struct titan_chrome {
    json_t *events; /* "ts" in absolute microseconds until written */
    json_t *meta;   /* process and thread names */
    size_t slices;
};

titan_status titan_chrome_new(titan_chrome **out) {
    titan_chrome *c = calloc(1, sizeof *c);
    if (c) {
        c->events = json_array();
        c->meta = json_array();
    }
    if (!c || !c->events || !c->meta) {
        titan_chrome_free(c);
        *out = NULL;
        return titan_error(TITAN_ERR_NOMEM, "chrome trace: out of memory");
    }
    *out = c;
    return TITAN_OK;
}

void titan_chrome_free(titan_chrome *c) {
    if (!c) return;
    json_decref(c->events);
    json_decref(c->meta);
    free(c);
}

static void name_meta(titan_chrome *c, const char *what, int pid, int tid, const char *name) {
    json_t *m = json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", what, "ph", "M", "pid", pid, "tid", tid, "args",
                          "name", name);
    if (m) json_array_append_new(c->meta, m);
}

static titan_status add_flight(titan_chrome *c, const char *path, json_t *root) {
    fl_dump d;
    TITAN_TRY(titan_flight_from_json(root, path, &d));
    char pname[320];
    snprintf(pname, sizeof pname, "rank %d (%s)", d.rank, d.host);
    name_meta(c, "process_name", d.rank, 0, pname);
    for (int k = 0; k < d.ncomms; k++) {
        char tname[96];
        snprintf(tname, sizeof tname, "comm %s", d.comms[k].name);
        name_meta(c, "thread_name", d.rank, 1 + k, tname);
    }
    for (size_t i = 0; i < d.nentries; i++) {
        const fl_entry *e = &d.entries[i];
        double t0 = e->t_started > 0 ? e->t_started : e->t_queued;
        double t1 = e->t_ended > 0 ? e->t_ended : d.time; /* unfinished: up to the dump */
        char name[64];
        if (e->seq)
            snprintf(name, sizeof name, "%s #%llu", e->op, (unsigned long long)e->seq);
        else
            snprintf(name, sizeof name, "%s", e->op);
        json_t *args = json_pack("{s:s, s:s, s:I, s:I, s:f}", "state", titan_flight_state_name(e->state), "dtype",
                                 e->dtype, "count", (json_int_t)e->count, "step", (json_int_t)e->step, "queued_us",
                                 (t0 - e->t_queued) * 1e6);
        if (args && e->peer >= 0) json_object_set_new(args, "peer", json_integer(e->peer));
        if (args && e->peer2 >= 0) json_object_set_new(args, "from", json_integer(e->peer2));
        if (args && e->error) json_object_set_new(args, "error", json_string(e->error));
        json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "name", name, "cat", "comm", "ph", "X",
                               "pid", d.rank, "tid", 1 + e->comm, "ts", t0 * 1e6, "dur",
                               (t1 > t0 ? t1 - t0 : 0) * 1e6, "args", args ? args : json_object());
        if (ev) {
            json_array_append_new(c->events, ev);
            c->slices++;
        }
    }
    titan_flight_dump_free(&d);
    return TITAN_OK;
}

static titan_status add_profile(titan_chrome *c, const char *path, json_t *root) {
    json_t *other = json_object_get(root, "otherData");
    json_t *start = json_object_get(other, "start_unix_s");
    if (!json_is_number(start))
        return titan_error(TITAN_ERR_FORMAT, "%s: an op-profile trace without otherData.start_unix_s (written by an "
                           "older titan-train): its times cannot be lined up", path);
    double base = json_number_value(start) * 1e6;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(root, "traceEvents"), i, ev) {
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        json_t *copy = json_deep_copy(ev);
        if (!copy || !ph) {
            json_decref(copy);
            continue;
        }
        if (!strcmp(ph, "M")) {
            json_array_append_new(c->meta, copy);
            continue;
        }
        json_object_set_new(copy, "ts", json_real(base + json_number_value(json_object_get(ev, "ts"))));
        json_array_append_new(c->events, copy);
        c->slices++;
    }
    return TITAN_OK;
}

static void slice(titan_chrome *c, const char *name, double t0_s, double dur_s, json_t *args) {
    json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "name", name, "cat", "step", "ph", "X", "pid", 0,
                           "tid", STEPS_TID, "ts", t0_s * 1e6, "dur", dur_s * 1e6, "args", args ? args : json_object());
    if (ev) {
        json_array_append_new(c->events, ev);
        c->slices++;
    }
}

/* The steps of metrics.jsonl (rank 0 writes it): a step from its start for
 * step_time_s, then its validation, then the checkpoint's stall, as the
 * training loop runs them. *steps: how many lines had a start time. */
static titan_status add_metrics(titan_chrome *c, const char *path, size_t *steps) {
    titan_metrics_file *m;
    TITAN_TRY(titan_metrics_read(path, &m));
    *steps = 0;
    for (size_t r = 0; r < titan_metrics_rows(m); r++) {
        double t0, dt, step = 0, v;
        if (!titan_metrics_get(m, r, "start_unix_s", &t0) || !titan_metrics_get(m, r, "step_time_s", &dt)) continue;
        titan_metrics_get(m, r, "step", &step);
        char name[64];
        snprintf(name, sizeof name, "step %.0f", step);
        json_t *args = json_object();
        static const char *const keys[] = {"loss", "grad_norm", "lr", "tokens_per_s", "mfu", "comm_exposed_s"};
        for (size_t k = 0; args && k < sizeof keys / sizeof keys[0]; k++)
            if (titan_metrics_get(m, r, keys[k], &v)) json_object_set_new(args, keys[k], json_real(v));
        slice(c, name, t0, dt, args);
        t0 += dt;
        if (titan_metrics_get(m, r, "val_time_s", &v)) {
            slice(c, "validation", t0, v, NULL);
            t0 += v;
        }
        if (titan_metrics_get(m, r, "ckpt_stall_s", &v)) slice(c, "checkpoint", t0, v, NULL);
        (*steps)++;
    }
    titan_metrics_file_free(m);
    if (*steps) name_meta(c, "thread_name", 0, STEPS_TID, "steps");
    return TITAN_OK;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

titan_status titan_chrome_add_file(titan_chrome *c, const char *path) {
    if (ends_with(path, ".jsonl")) {
        size_t steps;
        TITAN_TRY(add_metrics(c, path, &steps));
        if (!steps)
            return titan_error(TITAN_ERR_FORMAT, "%s: no line carries start_unix_s (written by an older titan-train): "
                               "its steps cannot be placed", path);
        return TITAN_OK;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (!titan_fs_exists(path)) return titan_error(TITAN_ERR_IO, "%s: no such file", path);
        return titan_error(TITAN_ERR_FORMAT, "%s:%d: not JSON: %s", path, jerr.line, jerr.text);
    }
    const char *format = json_string_value(json_object_get(root, "format"));
    titan_status st;
    if (format && !strcmp(format, TITAN_FLIGHT_FORMAT))
        st = add_flight(c, path, root);
    else if (json_is_array(json_object_get(root, "traceEvents")))
        st = add_profile(c, path, root);
    else
        st = titan_error(TITAN_ERR_FORMAT, "%s: neither a flight recorder dump nor an op-profile trace", path);
    json_decref(root);
    return st;
}

/* nftw has no user pointer: the walk's state (one walk at a time). */
static __thread struct {
    titan_chrome *c;
    int added;
    titan_status st;
} walk;

/* A flight recorder dump, or an op-profile trace (rankR_trace.json). */
static int trace_name(const char *base) {
    int n = 0;
    if (titan_flight_dump_rank(base) >= 0) return 1;
    return sscanf(base, "rank%*d_trace.json%n", &n) == 0 && n && base[n] == 0;
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb;
    if (type == FTW_F && ftw->level == 1 && !strcmp(path + ftw->base, "metrics.jsonl")) {
        size_t steps = 0;
        walk.st = add_metrics(walk.c, path, &steps); /* an older run's, without start times, adds nothing */
        if (walk.st != TITAN_OK) return 1;
        walk.added += steps > 0;
        return 0;
    }
    if (type != FTW_F || ftw->level > 3 || !trace_name(path + ftw->base)) return 0;
    walk.st = titan_chrome_add_file(walk.c, path);
    if (walk.st != TITAN_OK) return 1;
    walk.added++;
    return 0;
}

titan_status titan_chrome_add_dir(titan_chrome *c, const char *dir, int *added) {
    *added = 0;
    if (!titan_fs_is_dir(dir)) return titan_error(TITAN_ERR_IO, "%s: not a directory", dir);
    walk.c = c;
    walk.added = 0;
    walk.st = TITAN_OK;
    if (nftw(dir, visit, 16, FTW_PHYS) < 0 && walk.st == TITAN_OK)
        return titan_error(TITAN_ERR_IO, "%s: cannot walk the directory", dir);
    *added = walk.added;
    return walk.st;
}

titan_status titan_chrome_write(titan_chrome *c, const char *path, size_t *events) {
    double t0 = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(c->events, i, ev) {
        double ts = json_number_value(json_object_get(ev, "ts"));
        if (i == 0 || ts < t0) t0 = ts;
    }
    json_array_foreach(c->events, i, ev) {
        double ts = json_number_value(json_object_get(ev, "ts"));
        json_object_set_new(ev, "ts", json_real(ts - t0));
    }
    json_t *all = json_array();
    json_array_extend(all, c->meta);
    json_array_extend(all, c->events);
    json_t *root = json_pack("{s:s, s:{s:f}, s:o}", "displayTimeUnit", "ms", "otherData", "start_unix_s", t0 / 1e6,
                             "traceEvents", all);
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(root);
    if (!text) return titan_error(TITAN_ERR_NOMEM, "chrome trace: out of memory");
    size_t n = strlen(text);
    text[n] = '\n';
    titan_status st = TITAN_OK;
    if (!strcmp(path, "-")) {
        if (fwrite(text, 1, n + 1, stdout) != n + 1 || fflush(stdout) != 0)
            st = titan_error(TITAN_ERR_IO, "stdout: write failed");
    } else {
        st = titan_fs_write_atomic(path, text, n + 1);
    }
    free(text);
    *events = c->slices;
    return st;
}
