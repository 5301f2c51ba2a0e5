/* metrics_read.c - metrics.jsonl read back, and its summary (metrics_read.h). */
#include "trace/metrics_read.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct titan_metrics_file {
    json_t **rows;
    size_t n;
};

titan_status titan_metrics_read(const char *path, titan_metrics_file **out) {
    *out = NULL;
    FILE *in = fopen(path, "r");
    if (!in) return titan_error(TITAN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    titan_metrics_file *m = calloc(1, sizeof *m);
    if (!m) {
        fclose(in);
        return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    }
    char *line = NULL;
    size_t cap = 0, rows_cap = 0;
    titan_status st = TITAN_OK;
    for (int lineno = 1; getline(&line, &cap, in) > 0; lineno++) {
        if (line[strspn(line, " \t\r\n")] == 0) continue;
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        if (!json_is_object(o) || !json_is_integer(json_object_get(o, "step"))) {
            json_decref(o);
            st = titan_error(TITAN_ERR_FORMAT, "%s:%d: not a metrics line (a JSON object with an integer \"step\")%s%s",
                             path, lineno, o ? "" : ": ", o ? "" : jerr.text);
            break;
        }
        if (m->n == rows_cap) {
            rows_cap = rows_cap ? 2 * rows_cap : 256;
            json_t **grown = realloc(m->rows, rows_cap * sizeof *grown);
            if (!grown) {
                json_decref(o);
                st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            m->rows = grown;
        }
        m->rows[m->n++] = o;
    }
    free(line);
    fclose(in);
    if (st != TITAN_OK) {
        titan_metrics_file_free(m);
        return st;
    }
    *out = m;
    return TITAN_OK;
}

void titan_metrics_file_free(titan_metrics_file *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) json_decref(m->rows[i]);
    free(m->rows);
    free(m);
}

size_t titan_metrics_rows(const titan_metrics_file *m) { return m->n; }

int titan_metrics_has(const titan_metrics_file *m, const char *key) {
    for (size_t i = 0; i < m->n; i++)
        if (json_is_number(json_object_get(m->rows[i], key))) return 1;
    return 0;
}

int titan_metrics_get(const titan_metrics_file *m, size_t row, const char *key, double *v) {
    json_t *x = row < m->n ? json_object_get(m->rows[row], key) : NULL;
    if (!json_is_number(x)) return 0;
    *v = json_number_value(x);
    return 1;
}

size_t titan_metrics_series(const titan_metrics_file *m, const char *key, double **x, double **y) {
    *x = *y = NULL;
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (json_is_number(json_object_get(m->rows[i], key))) k++;
    if (!k) return 0;
    *x = malloc(k * sizeof **x);
    *y = malloc(k * sizeof **y);
    if (!*x || !*y) {
        free(*x);
        free(*y);
        *x = *y = NULL;
        return 0;
    }
    k = 0;
    for (size_t i = 0; i < m->n; i++) {
        json_t *v = json_object_get(m->rows[i], key);
        if (!json_is_number(v)) continue;
        (*x)[k] = (double)json_integer_value(json_object_get(m->rows[i], "step"));
        (*y)[k++] = json_number_value(v);
    }
    return k;
}

size_t titan_metrics_segments(const titan_metrics_file *m, titan_metrics_segment **segs) {
    *segs = NULL;
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (json_is_integer(json_object_get(m->rows[i], "resumed_from"))) k++;
    if (!k || !(*segs = calloc(k, sizeof **segs))) return 0;
    k = 0;
    for (size_t i = 0; i < m->n; i++) {
        json_t *from = json_object_get(m->rows[i], "resumed_from");
        if (!json_is_integer(from)) continue;
        titan_metrics_segment *g = &(*segs)[k++];
        g->resumed_from = json_integer_value(from);
        json_t *batch = json_object_get(m->rows[i], "global_batch"), *layout = json_object_get(m->rows[i], "layout");
        if (json_is_integer(batch)) g->global_batch = json_integer_value(batch);
        if (json_is_string(layout)) snprintf(g->layout, sizeof g->layout, "%s", json_string_value(layout));
    }
    return k;
}

static int cmp_double(const void *a, const void *b) {
    double u = *(const double *)a, v = *(const double *)b;
    return u < v ? -1 : u > v;
}

/* Median and max of y[from..n) (sorts a copy). */
static int stats(const double *y, size_t n, size_t from, double *median, double *max, double *sum) {
    if (n <= from) return 0;
    size_t k = n - from;
    double *c = malloc(k * sizeof *c);
    if (!c) return 0;
    memcpy(c, y + from, k * sizeof *c);
    qsort(c, k, sizeof *c, cmp_double);
    *median = k % 2 ? c[k / 2] : 0.5 * (c[k / 2 - 1] + c[k / 2]);
    *max = c[k - 1];
    *sum = 0;
    for (size_t i = 0; i < k; i++) *sum += c[i];
    free(c);
    return 1;
}

static void mib_line(FILE *f, const titan_metrics_file *m, const char *key, const char *label) {
    double *x, *y, max = 0;
    size_t n = titan_metrics_series(m, key, &x, &y);
    for (size_t i = 0; i < n; i++)
        if (y[i] > max) max = y[i];
    if (n) fprintf(f, "%-12s %.0f MiB at most\n", label, max / (1024.0 * 1024.0));
    free(x);
    free(y);
}

void titan_metrics_summary(const titan_metrics_file *m, FILE *f) {
    double *x, *y, med, max, sum;
    size_t n = titan_metrics_series(m, "loss", &x, &y);
    if (!n) {
        fprintf(f, "no steps recorded\n");
        return;
    }
    fprintf(f, "%-12s %.0f to %.0f (%zu lines)\n", "steps", x[0], x[n - 1], n);
    size_t lo = 0;
    for (size_t i = 1; i < n; i++)
        if (y[i] < y[lo]) lo = i;
    fprintf(f, "%-12s first %.4f, last %.4f, lowest %.4f (step %.0f)\n", "loss", y[0], y[n - 1], y[lo], x[lo]);
    free(x);
    free(y);

    n = titan_metrics_series(m, "val_loss", &x, &y);
    if (n) fprintf(f, "%-12s %zu validations, last %.4f (step %.0f)\n", "val_loss", n, y[n - 1], x[n - 1]);
    free(x);
    free(y);

    /* Step 1 pays for first-touch memory and warm-up: left out when there are others. */
    n = titan_metrics_series(m, "tokens_per_s", &x, &y);
    size_t from = n > 1 ? 1 : 0;
    if (n && stats(y, n, from, &med, &max, &sum))
        fprintf(f, "%-12s median %.0f, best %.0f (steps %.0f to %.0f)\n", "tokens/s", med, max, x[from], x[n - 1]);
    free(x);
    free(y);
    n = titan_metrics_series(m, "mfu", &x, &y);
    double *px, *py;
    size_t np = titan_metrics_series(m, "peak_flops", &px, &py);
    if (n && stats(y, n, from, &med, &max, &sum))
        fprintf(f, "%-12s median %.2f%%, best %.2f%% of %.4g TFLOP/s (the job's peak)\n", "MFU", 100 * med, 100 * max,
                np ? py[np - 1] / 1e12 : 0.0);
    free(x);
    free(y);
    free(px);
    free(py);
    n = titan_metrics_series(m, "step_time_s", &x, &y);
    double total = 0; /* every step's, the first's too */
    for (size_t i = 0; i < n; i++) total += y[i];
    if (n && stats(y, n, from, &med, &max, &sum))
        fprintf(f, "%-12s median %.4f s, slowest %.4f s; %.1f s in all %zu steps\n", "step time", med, max, total, n);
    free(x);
    free(y);
    mib_line(f, m, "peak_rss_bytes", "host memory");
    mib_line(f, m, "dev_peak_bytes", "device peak");

    double *tx, *ty;
    n = titan_metrics_series(m, "comm_exposed_s", &x, &y);
    size_t nt = titan_metrics_series(m, "comm_total_s", &tx, &ty);
    if (n && nt == n) {
        double exposed = 0, total = 0;
        for (size_t i = 0; i < n; i++) {
            exposed += y[i];
            total += ty[i];
        }
        fprintf(f, "%-12s %.3f s of collectives, %.3f s of it exposed (%.1f%%)\n", "comm", total, exposed,
                total > 0 ? 100 * exposed / total : 0.0);
    }
    free(x);
    free(y);
    free(tx);
    free(ty);
    n = titan_metrics_series(m, "ckpt_stall_s", &x, &y);
    if (n && stats(y, n, 0, &med, &max, &sum))
        fprintf(f, "%-12s %zu saves, training waited %.3f s in all (longest %.3f s)\n", "checkpoints", n, sum, max);
    free(x);
    free(y);
}
