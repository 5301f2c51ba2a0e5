/* plot_text.c - the plot as text on a terminal (plot.h): a panel a y axis,
 * stacked over one step axis. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace/plot_frame.h"

#define LABEL_W 10 /* the y tick labels' column */

static int column(const plot_axis *x, double v, int width) {
    int c = (int)lround(plot_axis_frac(x, v) * (width - 1));
    return c < 0 ? 0 : c >= width ? width - 1 : c;
}

static int row(const plot_axis *y, double v, int height) {
    int r = (int)lround((1 - plot_axis_frac(y, v)) * (height - 1));
    return r < 0 ? 0 : r >= height ? height - 1 : r;
}

static char glyph(int place) { return plot_glyphs[place % (int)strlen(plot_glyphs)]; }

/* The panel's legend, above it: a glyph a series (and the faint raw points'). */
static void legend_line(FILE *f, const titan_series *s, int ns, const plot_frame *fr, int p, double smooth) {
    fprintf(f, "%*s %s:", LABEL_W, "", fr->panels[p].name);
    for (int k = 0, place = 0; k < ns; k++)
        if (fr->panel_of[k] == p) fprintf(f, "  %c %s", glyph(place++), s[k].name);
    if (smooth > 0) fprintf(f, "  (EMA %g; . raw)", smooth);
    fputc('\n', f);
}

/* One panel's rows: markers as ':' columns, the raw points faint ('.')
 * under the drawn ones. */
static void panel_rows(FILE *f, const titan_series *s, int ns, const plot_frame *fr, int p, const titan_plot_opts *o,
                       char *cells, int width, int height) {
    const plot_axis *y = &fr->panels[p].y;
    memset(cells, ' ', (size_t)width * (size_t)height);
    for (int i = 0; i < o->nmarkers; i++)
        for (int r = 0; r < height; r++) cells[r * width + column(&fr->x, o->markers[i].x, width)] = ':';
    for (int pass = o->smooth > 0 ? 0 : 1; pass < 2; pass++)
        for (int k = 0, place = 0; k < ns; k++) {
            if (fr->panel_of[k] != p) continue;
            const double *v = pass ? fr->drawn[k] : s[k].y;
            char g = pass ? glyph(place) : '.';
            place++;
            for (size_t i = 0; i < s[k].n; i++) {
                if (!isfinite(s[k].x[i]) || !isfinite(v[i]) || (y->log && v[i] <= 0)) continue;
                cells[row(y, v[i], height) * width + column(&fr->x, s[k].x[i], width)] = g;
            }
        }
    char(*labels)[24] = calloc((size_t)height, sizeof *labels);
    if (!labels) return;
    for (int t = 0; t < y->nticks; t++) {
        int r = row(y, y->ticks[t], height);
        if (!labels[r][0]) snprintf(labels[r], sizeof labels[r], "%s", y->labels[t]);
    }
    for (int r = 0; r < height; r++) {
        fprintf(f, "%*.*s |", LABEL_W, LABEL_W, labels[r]);
        fwrite(cells + (size_t)r * width, 1, (size_t)width, f);
        fputc('\n', f);
    }
    free(labels);
}

/* The axis line under a panel ('+' at the step ticks); under the last
 * one, the tick labels too, centred on their ticks where they fit. */
static void step_axis(FILE *f, const plot_axis *x, int width, int labelled) {
    char *line = malloc((size_t)width + 1);
    if (!line) return;
    memset(line, '-', (size_t)width);
    line[width] = 0;
    for (int t = 0; t < x->nticks; t++) line[column(x, x->ticks[t], width)] = '+';
    fprintf(f, "%*s +%s\n", LABEL_W, "", line);
    if (labelled) {
        int room = width + 24;
        char *text = malloc((size_t)room + 1);
        if (text) {
            memset(text, ' ', (size_t)room);
            int end = -2; /* where the last label ended */
            for (int t = 0; t < x->nticks; t++) {
                int len = (int)strlen(x->labels[t]), at = column(x, x->ticks[t], width) - len / 2;
                if (at < 0) at = 0;
                if (at <= end + 1 || at + len > room) continue;
                memcpy(text + at, x->labels[t], (size_t)len);
                end = at + len;
            }
            while (room > 0 && text[room - 1] == ' ') room--;
            text[room] = 0;
            fprintf(f, "%*s  %s\n", LABEL_W, "", text);
            free(text);
        }
    }
    free(line);
}

titan_status titan_plot_text(FILE *f, const titan_series *s, int ns, const titan_plot_opts *o, int width, int height) {
    if (width < 10) width = 10;
    if (height < 4) height = 4;
    plot_frame fr;
    TITAN_TRY(plot_frame_make(&fr, s, ns, o, width / 12 + 2, height / 4 + 2));
    char *cells = malloc((size_t)width * (size_t)height);
    if (cells) {
        for (int p = 0; p < fr.npanels; p++) {
            legend_line(f, s, ns, &fr, p, o->smooth);
            panel_rows(f, s, ns, &fr, p, o, cells, width, height);
            step_axis(f, &fr.x, width, p == fr.npanels - 1);
        }
        fprintf(f, "%*s  %*s\n", LABEL_W, "", width / 2 + (int)strlen(o->xlabel) / 2, o->xlabel);
        for (int i = 0; i < o->nmarkers; i++)
            fprintf(f, "%*s : %s %.0f: %s\n", LABEL_W, "", o->xlabel, o->markers[i].x, o->markers[i].label);
    }
    plot_frame_free(&fr);
    if (!cells) return titan_error(TITAN_ERR_NOMEM, "plot: out of memory");
    free(cells);
    return TITAN_OK;
}
