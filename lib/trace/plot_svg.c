/* plot_svg.c - the plot as an SVG image (plot.h): panels stacked over one
 * step axis, each legend in a column right of its panel, marker labels in
 * rows above the first panel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "trace/plot_frame.h"

/* The image's geometry, in pixels. */
typedef struct {
    double left, width;     /* the data areas' x and width */
    double top, height;     /* the first panel's y; each panel's height */
    double gap;             /* between panels */
    double legend_x, legend_w;
    double marker_y;        /* the first row of marker labels */
    double total_w, total_h;
} geometry;

#define CHAR_W 6.6          /* a character of the 12 px sans-serif, about */
#define LEGEND_CHARS 44     /* longer names keep their tail ("...runs/a:loss") */
#define MARKER_ROWS 8
#define SPARSE 30         /* series of this many points or fewer get dots */

/* XML-safe text (metric names are plain, but a title or path may not be). */
static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* A legend name cut to its last LEGEND_CHARS characters. */
static void legend_name(FILE *f, const char *name) {
    size_t len = strlen(name);
    if (len > LEGEND_CHARS) {
        fputs("...", f);
        name += len - (LEGEND_CHARS - 3);
    }
    xml_text(f, name);
}

/* Where a marker's label runs: right of its line, or left of it where it
 * would leave the image (a resume near the last step). */
static double label_start(const titan_plot_marker *m, double x, const geometry *g, double *end) {
    double w = 5.6 * (double)strlen(m->label);
    if (x + 3 + w > g->legend_x + g->legend_w && x - 3 - w >= 0) {
        *end = x - 3;
        return x - 3 - w;
    }
    *end = x + 3 + w;
    return x + 3;
}

static double marker_x(const titan_plot_opts *o, int i, const plot_frame *fr, const geometry *g) {
    return g->left + plot_axis_frac(&fr->x, o->markers[i].x) * g->width;
}

/* Rows for the marker labels so that none covers another, left to right
 * (the first row with room): the row of each, and how many rows. */
static int marker_rows(const titan_plot_opts *o, const plot_frame *fr, const geometry *g, int *rows) {
    double end[MARKER_ROWS];
    int used = 0, placed = 0;
    while (placed < o->nmarkers) {
        int next = -1; /* the leftmost unplaced one (rows[] < 0) */
        for (int i = 0; i < o->nmarkers; i++)
            if (rows[i] < 0 && (next < 0 || o->markers[i].x < o->markers[next].x)) next = i;
        double stop, start = label_start(&o->markers[next], marker_x(o, next, fr, g), g, &stop);
        int r = 0;
        while (r < used && start < end[r] + 6) r++;
        if (r == MARKER_ROWS) r = MARKER_ROWS - 1;
        if (r == used) used++;
        end[r] = stop;
        rows[next] = r;
        placed++;
    }
    return used;
}

static void set_geometry(geometry *g, const titan_series *s, int ns, const plot_frame *fr, double smooth,
                         int marker_lines) {
    size_t longest = smooth > 0 ? 16 : 0; /* "EMA 0.999, raw faint" from the box's edge */
    for (int k = 0; k < ns; k++) {
        size_t len = strlen(s[k].name);
        longest = len > longest ? len : longest;
    }
    if (longest > LEGEND_CHARS) longest = LEGEND_CHARS;
    g->left = 90;
    g->width = 560;
    g->legend_x = g->left + g->width + 16;
    g->legend_w = 40 + CHAR_W * (double)(longest < 8 ? 8 : longest);
    g->marker_y = 50;
    g->top = g->marker_y + 14.0 * marker_lines + (marker_lines ? 4 : -6);
    g->height = fr->npanels == 1 ? 300 : 170;
    g->gap = 26;
    g->total_w = g->legend_x + g->legend_w + 12;
    g->total_h = g->top + fr->npanels * g->height + (fr->npanels - 1) * g->gap + 56;
}

static double panel_top(const geometry *g, int p) { return g->top + p * (g->height + g->gap); }

/* The panel's box, gridlines, y tick labels and its name along the axis. */
static void panel_frame(FILE *f, const plot_frame *fr, int p, const geometry *g) {
    const plot_panel *pn = &fr->panels[p];
    double top = panel_top(g, p);
    for (int t = 0; t < pn->y.nticks; t++) {
        double y = top + (1 - plot_axis_frac(&pn->y, pn->y.ticks[t])) * g->height;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", g->left, y,
                g->left + g->width, y);
        fprintf(f, "<text class=\"ytick\" data-panel=\"");
        xml_text(f, pn->name);
        fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", g->left - 6, y + 4, pn->y.labels[t]);
    }
    for (int t = 0; t < fr->x.nticks; t++) {
        double x = g->left + plot_axis_frac(&fr->x, fr->x.ticks[t]) * g->width;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", x, top, x,
                top + g->height);
    }
    fprintf(f, "<rect class=\"plot-area\" data-panel=\"");
    xml_text(f, pn->name);
    fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", g->left,
            top, g->width, g->height);
    fprintf(f, "<text class=\"panel-label\" x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 18 %.1f)\">", top + g->height / 2, top + g->height / 2);
    xml_text(f, pn->name);
    fprintf(f, "</text>\n");
}

/* One polyline of a series' values (v: raw or drawn), skipping the points
 * the axis cannot place. */
static void polyline(FILE *f, const titan_series *s, const double *v, const plot_axis *x, const plot_axis *y,
                     double left, double top, const geometry *g, const char *cls, const char *color, double opacity) {
    fprintf(f, "<polyline class=\"%s\" data-name=\"", cls);
    xml_text(f, s->name);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-opacity=\"%g\" points=\"", color, opacity);
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(v[i]) || (y->log && v[i] <= 0)) continue;
        fprintf(f, "%.2f,%.2f ", left + plot_axis_frac(x, s->x[i]) * g->width,
                top + (1 - plot_axis_frac(y, v[i])) * g->height);
    }
    fprintf(f, "\"/>\n");
}

/* A dot on each point of a sparse series (a validation every N steps; a
 * single point, which a polyline does not show). */
static void dots(FILE *f, const titan_series *s, const double *v, const plot_axis *x, const plot_axis *y, double top,
                 const geometry *g, const char *color) {
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(v[i]) || (y->log && v[i] <= 0)) continue;
        fprintf(f, "<circle class=\"dot\" cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n",
                g->left + plot_axis_frac(x, s->x[i]) * g->width, top + (1 - plot_axis_frac(y, v[i])) * g->height,
                color);
    }
}

/* The panel's series (raw ones faint beneath when smoothed) and its legend box. */
static void panel_series(FILE *f, const titan_series *s, int ns, const plot_frame *fr, int p, const geometry *g,
                         double smooth) {
    double top = panel_top(g, p);
    int entries = 0;
    for (int k = 0; k < ns; k++) {
        if (fr->panel_of[k] != p) continue;
        const char *color = plot_colors[entries++ % plot_ncolors()];
        if (smooth > 0)
            polyline(f, &s[k], s[k].y, &fr->x, &fr->panels[p].y, g->left, top, g, "raw", color, 0.25);
        polyline(f, &s[k], fr->drawn[k], &fr->x, &fr->panels[p].y, g->left, top, g, "series", color, 1);
        if (s[k].n <= SPARSE) dots(f, &s[k], fr->drawn[k], &fr->x, &fr->panels[p].y, top, g, color);
    }
    double h = 10 + 16.0 * (entries + (smooth > 0));
    fprintf(f, "<g class=\"legend\">\n<rect class=\"legend-box\" data-panel=\"");
    xml_text(f, fr->panels[p].name);
    fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" stroke=\"#bbb\"/>\n",
            g->legend_x, top, g->legend_w, h);
    for (int k = 0, place = 0; k < ns; k++) {
        if (fr->panel_of[k] != p) continue;
        double y = top + 17 + 16.0 * place;
        const char *color = plot_colors[place++ % plot_ncolors()];
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                g->legend_x + 8, y - 4, g->legend_x + 26, y - 4, color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", g->legend_x + 32, y);
        legend_name(f, s[k].name);
        fprintf(f, "</text>\n");
    }
    if (smooth > 0)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">EMA %g, raw faint</text>\n", g->legend_x + 8,
                top + 17 + 16.0 * entries, smooth);
    fprintf(f, "</g>\n");
}

/* The markers: a dashed line from its label down through every panel. */
static void markers(FILE *f, const titan_plot_opts *o, const plot_frame *fr, const geometry *g, const int *rows) {
    double bottom = panel_top(g, fr->npanels - 1) + g->height;
    for (int i = 0; i < o->nmarkers; i++) {
        double x = marker_x(o, i, fr, g), y = g->marker_y + 14.0 * rows[i], stop;
        double start = label_start(&o->markers[i], x, g, &stop);
        fprintf(f, "<line class=\"marker\" data-step=\"%.0f\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
                   "stroke=\"#555\" stroke-dasharray=\"4 3\"/>\n", o->markers[i].x, x, y + 3, x, bottom);
        fprintf(f, "<text class=\"marker-label\" data-step=\"%.0f\" x=\"%.2f\" y=\"%.1f\" font-size=\"11\" "
                   "fill=\"#333\">", o->markers[i].x, start, y);
        xml_text(f, o->markers[i].label);
        fprintf(f, "</text>\n");
    }
}

/* The whole image into f. */
static void draw(FILE *f, const titan_series *s, int ns, const titan_plot_opts *o, const plot_frame *fr, int *rows) {
    geometry g;
    set_geometry(&g, s, ns, fr, o->smooth, 0);
    for (int i = 0; i < o->nmarkers; i++) rows[i] = -1;
    set_geometry(&g, s, ns, fr, o->smooth, marker_rows(o, fr, &g, rows));
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", g.total_w, g.total_h, g.total_w, g.total_h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"24\" "
               "text-anchor=\"middle\" font-size=\"15\">", g.left + g.width / 2);
    xml_text(f, o->title);
    fprintf(f, "</text>\n");
    for (int p = 0; p < fr->npanels; p++) panel_frame(f, fr, p, &g);
    double bottom = panel_top(&g, fr->npanels - 1) + g.height;
    for (int t = 0; t < fr->x.nticks; t++)
        fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                g.left + plot_axis_frac(&fr->x, fr->x.ticks[t]) * g.width, bottom + 18, fr->x.labels[t]);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", g.left + g.width / 2, bottom + 40);
    xml_text(f, o->xlabel);
    fprintf(f, "</text>\n");
    markers(f, o, fr, &g, rows);
    for (int p = 0; p < fr->npanels; p++) panel_series(f, s, ns, fr, p, &g, o->smooth);
    fprintf(f, "</svg>\n");
}

titan_status titan_plot_svg(const char *path, const titan_series *s, int ns, const titan_plot_opts *o) {
    plot_frame fr;
    titan_status st = plot_frame_make(&fr, s, ns, o, 6, 5);
    if (st != TITAN_OK) {
        titan_error_context("%s", path);
        return st;
    }
    char *buf = NULL;
    size_t len = 0;
    int *rows = calloc((size_t)o->nmarkers + 1, sizeof *rows);
    FILE *f = rows ? open_memstream(&buf, &len) : NULL;
    if (f) {
        draw(f, s, ns, o, &fr, rows);
        if (fclose(f) != 0) {
            free(buf);
            buf = NULL;
        }
    }
    free(rows);
    plot_frame_free(&fr);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    st = titan_fs_write_atomic(path, buf, len);
    free(buf);
    return st;
}
