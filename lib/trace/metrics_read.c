/* metrics_read.c - metrics.jsonl read back, and its summary (metrics_read.h). */
#include "trace/metrics_read.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace/metrics_tags.h"
#include "trace/tensorboard.h"

struct titan_metrics_file {
    json_t **rows;
    size_t n;
};

static titan_status add_row(titan_metrics_file *m, size_t *cap, json_t *o, const char *path) {
    if (m->n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        json_t **grown = realloc(m->rows, *cap * sizeof *grown);
        if (!grown) {
            json_decref(o);
            return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
        }
        m->rows = grown;
    }
    m->rows[m->n++] = o;
    return TITAN_OK;
}

/* TensorBoard scalars as metrics lines: a row per step holding every tag,
 * and titan's key beside the tags titan-train writes for it (metrics_tags.h). */
typedef struct {
    titan_metrics_file *m;
    size_t cap;
    const char *path;
} tb_ctx;

static titan_status tb_scalar(void *ctx, int64_t step, double wall, const char *tag, double value) {
    tb_ctx *c = ctx;
    titan_metrics_file *m = c->m;
    if (!tag) { /* SessionLog START: an earlier file's steps from here on were trained again */
        while (m->n && json_integer_value(json_object_get(m->rows[m->n - 1], "step")) >= step)
            json_decref(m->rows[--m->n]);
        return TITAN_OK;
    }
    json_t *row = m->n ? m->rows[m->n - 1] : NULL;
    if (!row || json_integer_value(json_object_get(row, "step")) != step) {
        if (!(row = json_object()) || json_object_set_new(row, "step", json_integer(step)))
            return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", c->path);
        TITAN_TRY(add_row(m, &c->cap, row, c->path));
    }
    (void)wall;
    json_object_set_new(row, tag, json_real(value));
    for (int i = 0; i < TITAN_TB_NTAGS; i++)
        if (titan_tb_tags[i].key && !strcmp(tag, titan_tb_tags[i].tag))
            json_object_set_new(row, titan_tb_tags[i].key, json_real(value * titan_tb_tags[i].scale));
    return TITAN_OK;
}

static int is_event_file(const char *name) { return strstr(name, "tfevents") != NULL; }

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The event files of a directory and of its subdirectories (one per start:
 * RUN/tb/YYYYmmdd-HHMM), in the order of their names (date, then the
 * file's seconds). */
static titan_status event_files(const char *dir, char ***files, size_t *n, size_t *cap, int depth) {
    DIR *d = opendir(dir);
    if (!d) return titan_error(TITAN_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    struct dirent *e;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && depth < 2) {
            st = event_files(path, files, n, cap, depth + 1);
        } else if (S_ISREG(sb.st_mode) && is_event_file(e->d_name)) {
            if (*n == *cap) {
                *cap = *cap ? 2 * *cap : 16;
                char **grown = realloc(*files, *cap * sizeof *grown);
                if (!grown) { st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", dir); break; }
                *files = grown;
            }
            if (!((*files)[*n] = strdup(path))) st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", dir);
            else (*n)++;
        }
    }
    closedir(d);
    return st;
}

static titan_status read_tensorboard(const char *path, titan_metrics_file *m) {
    tb_ctx c = {m, 0, path};
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) return titan_tb_read(path, tb_scalar, &c);
    char **files = NULL;
    size_t n = 0, cap = 0;
    titan_status st = event_files(path, &files, &n, &cap, 0);
    if (st == TITAN_OK && n == 0)
        st = titan_error(TITAN_ERR_IO, "%s: no metrics.jsonl and no TensorBoard event file", path);
    if (st == TITAN_OK) qsort(files, n, sizeof *files, by_name);
    for (size_t i = 0; i < n; i++) {
        if (st == TITAN_OK) st = titan_tb_read(files[i], tb_scalar, &c);
        free(files[i]);
    }
    free(files);
    return st;
}

titan_status titan_metrics_read(const char *path, titan_metrics_file **out) {
    *out = NULL;
    struct stat sb;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if ((stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) || is_event_file(base)) {
        titan_metrics_file *m = calloc(1, sizeof *m);
        if (!m) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
        titan_status st = read_tensorboard(path, m);
        if (st != TITAN_OK) {
            titan_metrics_file_free(m);
            return st;
        }
        *out = m;
        return TITAN_OK;
    }
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
        if ((st = add_row(m, &rows_cap, o, path)) != TITAN_OK) break;
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
