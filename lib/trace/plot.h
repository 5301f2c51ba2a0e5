/* plot.h - line plots of metric series against the step: as text on a
 * terminal, or as an SVG file (a browser, a report, a notebook shows it).
 *
 * Small multiples: series with the same panel share one y axis, each panel
 * its own, stacked over one shared step axis (loss and grad_norm never
 * share a scale). Ticks fall on round numbers (1, 2 or 5 x 10^k; on a log
 * axis, powers of ten first). The legend stands outside the data area.
 * Markers (resumes, layout changes) are vertical lines across every panel
 * with their label above the plot. Optional smoothing is TensorBoard's
 * debiased EMA, the raw series drawn faint beneath. */
#ifndef TITAN_TRACE_PLOT_H
#define TITAN_TRACE_PLOT_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

typedef struct {
    const char *name;  /* the legend's */
    const char *panel; /* series with the same panel share a y axis, labelled with it */
    const double *x, *y;
    size_t n;
} titan_series;

typedef struct {
    double x;          /* the step it marks */
    const char *label; /* "resumed", "resumed as tp=2, batch 8" */
} titan_plot_marker;

typedef struct {
    const char *title, *xlabel;
    double smooth; /* EMA weight in [0, 1): 0 draws the series as they are */
    int log_y;     /* log y axes (a panel with a value <= 0 stays linear) */
    const titan_plot_marker *markers;
    int nmarkers;
} titan_plot_opts;

/* Each panel width x height character cells, y tick labels to its left,
 * its legend above it (one glyph a series), the step ticks below the last;
 * markers are columns of ':' named below. TITAN_ERR_USAGE when no point is
 * finite. */
titan_status titan_plot_text(FILE *f, const titan_series *s, int ns, const titan_plot_opts *o, int width, int height);

/* The same as an SVG image, written whole to path (a temp file, renamed).
 * Its parts carry classes a test can find: plot-area and legend-box
 * rectangles (data-panel), ytick and xtick labels, marker lines and
 * marker-label texts (data-step), series and raw polylines (data-name). */
titan_status titan_plot_svg(const char *path, const titan_series *s, int ns, const titan_plot_opts *o);

/* TensorBoard's smoothing: last = w*last + (1-w)*y over the finite
 * points from last = 0, each divided by 1 - w^k (k finite points so far)
 * to remove the bias towards 0; a non-finite point passes as it is, and a
 * constant series is left alone. out may be y. */
void titan_plot_ema(const double *y, size_t n, double w, double *out);

#endif
