/* plot.c - the frame both plots draw in (plot_frame.h): series sorted into
 * panels, smoothing, the axes' ranges. */
#include "trace/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace/plot_frame.h"

const char plot_glyphs[] = "*o+x#@%&";
const char *const plot_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
int plot_ncolors(void) { return (int)(sizeof plot_colors / sizeof plot_colors[0]); }

void titan_plot_ema(const double *y, size_t n, double w, double *out) {
    int constant = 1;
    for (size_t i = 1; i < n && constant; i++) constant = y[i] == y[0];
    double last = 0;
    long finite = 0;
    for (size_t i = 0; i < n; i++) {
        double v = y[i];
        if (constant || !isfinite(v)) {
            out[i] = v;
            continue;
        }
        last = last * w + (1 - w) * v;
        finite++;
        out[i] = last / (w == 1 ? 1 : 1 - pow(w, (double)finite));
    }
}

/* The panel named name, added when new; -1 when there are too many. */
static int panel_index(plot_frame *fr, const char *name) {
    for (int p = 0; p < fr->npanels; p++)
        if (!strcmp(fr->panels[p].name, name)) return p;
    if (fr->npanels == PLOT_MAX_PANELS) return -1;
    fr->panels[fr->npanels].name = name;
    return fr->npanels++;
}

/* Grows [*lo, *hi] (*any: set already) by v when finite (and positive, for logs). */
static void widen(double v, int positive, double *lo, double *hi, int *any) {
    if (!isfinite(v) || (positive && v <= 0)) return;
    if (!*any || v < *lo) *lo = v;
    if (!*any || v > *hi) *hi = v;
    *any = 1;
}

/* Each panel's y axis over its series' raw and drawn values. */
static void panel_axes(plot_frame *fr, const titan_series *s, int ns, const titan_plot_opts *o, int yticks) {
    for (int p = 0; p < fr->npanels; p++) {
        double lo = 0, hi = 0, plo = 0, phi = 0;
        int any = 0, pany = 0, nonpositive = 0;
        for (int k = 0; k < ns; k++) {
            if (fr->panel_of[k] != p) continue;
            for (size_t i = 0; i < s[k].n; i++) {
                if (!isfinite(s[k].x[i])) continue;
                double ys[2] = {s[k].y[i], fr->drawn[k][i]};
                for (int j = 0; j < 2; j++) {
                    widen(ys[j], 0, &lo, &hi, &any);
                    widen(ys[j], 1, &plo, &phi, &pany);
                    if (isfinite(ys[j]) && ys[j] <= 0) nonpositive = 1;
                }
            }
        }
        if (o->log_y && pany && !nonpositive)
            plot_axis_log(&fr->panels[p].y, plo, phi, yticks);
        else
            plot_axis_linear(&fr->panels[p].y, any ? lo : 0, any ? hi : 1, yticks);
    }
}

titan_status plot_frame_make(plot_frame *fr, const titan_series *s, int ns, const titan_plot_opts *o, int xticks,
                             int yticks) {
    memset(fr, 0, sizeof *fr);
    size_t total = 0;
    for (int k = 0; k < ns; k++) total += s[k].n;
    fr->panel_of = calloc((size_t)ns + 1, sizeof *fr->panel_of);
    fr->drawn = calloc((size_t)ns + 1, sizeof *fr->drawn);
    fr->smoothed = o->smooth > 0 ? malloc((total + 1) * sizeof *fr->smoothed) : NULL;
    if (!fr->panel_of || !fr->drawn || (o->smooth > 0 && !fr->smoothed)) {
        plot_frame_free(fr);
        return titan_error(TITAN_ERR_NOMEM, "plot: out of memory");
    }
    double xlo = 0, xhi = 0;
    int xany = 0;
    size_t off = 0;
    for (int k = 0; k < ns; k++) {
        fr->panel_of[k] = panel_index(fr, s[k].panel ? s[k].panel : s[k].name);
        if (fr->panel_of[k] < 0) {
            plot_frame_free(fr);
            return titan_error(TITAN_ERR_USAGE, "plot: at most %d panels (distinct keys)", PLOT_MAX_PANELS);
        }
        fr->drawn[k] = s[k].y;
        if (fr->smoothed) {
            titan_plot_ema(s[k].y, s[k].n, o->smooth, fr->smoothed + off);
            fr->drawn[k] = fr->smoothed + off;
            off += s[k].n;
        }
        for (size_t i = 0; i < s[k].n; i++) {
            if (isfinite(s[k].y[i])) widen(s[k].x[i], 0, &xlo, &xhi, &xany); /* points: both finite */
        }
    }
    if (!xany) {
        plot_frame_free(fr);
        return titan_error(TITAN_ERR_USAGE, "plot: no finite points to plot");
    }
    for (int i = 0; i < o->nmarkers; i++) widen(o->markers[i].x, 0, &xlo, &xhi, &xany);
    /* steps are whole: a tick between two would be a fraction */
    if (xhi - xlo < 2) {
        xlo -= 1;
        xhi += 1;
    }
    plot_axis_linear(&fr->x, xlo, xhi, xhi - xlo + 1 < xticks ? (int)(xhi - xlo) + 1 : xticks);
    panel_axes(fr, s, ns, o, yticks);
    return TITAN_OK;
}

void plot_frame_free(plot_frame *fr) {
    free(fr->panel_of);
    free(fr->drawn);
    free(fr->smoothed);
    memset(fr, 0, sizeof *fr);
}
