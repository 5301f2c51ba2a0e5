/* plot.h - line plots of metric series: as text on a terminal, or as an
 * SVG file (a browser, a report, a notebook shows it). */
#ifndef TITAN_TRACE_PLOT_H
#define TITAN_TRACE_PLOT_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

typedef struct {
    const char *name;
    const double *x, *y;
    size_t n;
} titan_series;

/* width x height character cells of plot area, y labels to the left, the
 * x range below, one glyph a series (a legend names them). */
void titan_plot_text(FILE *f, const titan_series *s, int ns, int width, int height, const char *xlabel);

/* The same as an SVG image, written whole to path (a temp file, renamed). */
titan_status titan_plot_svg(const char *path, const titan_series *s, int ns, const char *title, const char *xlabel);

#endif
