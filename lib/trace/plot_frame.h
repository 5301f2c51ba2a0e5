/* plot_frame.h - what the text and SVG plots share (plot.c, plot_axis.c;
 * internal to lib/trace): axes with round ticks, and the frame of panels
 * the series fall into. */
#ifndef TITAN_TRACE_PLOT_FRAME_H
#define TITAN_TRACE_PLOT_FRAME_H

#include "trace/plot.h"

#define PLOT_MAX_TICKS 24
#define PLOT_MAX_PANELS 16

typedef struct {
    double lo, hi; /* the axis' ends: ticks themselves, around the data */
    int log;       /* positions by log10 */
    int nticks;
    double ticks[PLOT_MAX_TICKS];
    char labels[PLOT_MAX_TICKS][24];
} plot_axis;

/* Round ticks over [lo, hi], about target of them: a step of 1, 2 or 5 x
 * 10^k, the ends moved out to ticks. A flat range is widened first. */
void plot_axis_linear(plot_axis *a, double lo, double hi, int target);
/* The same on a log scale (0 < lo): powers of ten, else 1-2-5 or 1..9
 * times them, whichever leaves the data most of the axis; else linear
 * round ticks placed by log. */
void plot_axis_log(plot_axis *a, double lo, double hi, int target);
/* Where v falls: 0 at lo, 1 at hi. */
double plot_axis_frac(const plot_axis *a, double v);

typedef struct {
    const char *name; /* the series' panel */
    plot_axis y;
} plot_panel;

typedef struct {
    int npanels;
    plot_panel panels[PLOT_MAX_PANELS];
    int *panel_of;        /* [ns]: each series' panel */
    const double **drawn; /* [ns]: the values to draw (smoothed, or the series' own) */
    double *smoothed;     /* the smoothed values, all series end to end */
    plot_axis x;
} plot_frame;

/* Sorts series into panels (by first appearance) and sets the axes: the
 * step axis over every point and marker, each panel's y over its series'
 * raw values. TITAN_ERR_USAGE when no point is finite or there are more
 * panels than PLOT_MAX_PANELS; TITAN_ERR_NOMEM. */
titan_status plot_frame_make(plot_frame *fr, const titan_series *s, int ns, const titan_plot_opts *o, int xticks,
                             int yticks);
void plot_frame_free(plot_frame *fr);

/* Glyphs (text) and colours (SVG) of the series in a panel, by their place in it. */
extern const char plot_glyphs[];
extern const char *const plot_colors[];
int plot_ncolors(void);

#endif
