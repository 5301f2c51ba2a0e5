/* plot.c - text and SVG line plots (plot.h). */
#include "trace/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

static const char GLYPHS[] = "*o+x#@%&";
static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

typedef struct {
    double x0, x1, y0, y1;
} range;

/* The box around every finite point; a flat one is widened so it maps. */
static int bounds(const titan_series *s, int ns, range *r) {
    int any = 0;
    for (int k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            if (!any) {
                r->x0 = r->x1 = x;
                r->y0 = r->y1 = y;
                any = 1;
            }
            if (x < r->x0) r->x0 = x;
            if (x > r->x1) r->x1 = x;
            if (y < r->y0) r->y0 = y;
            if (y > r->y1) r->y1 = y;
        }
    if (!any) return 0;
    if (r->x1 == r->x0) r->x1 = r->x0 + 1;
    if (r->y1 == r->y0) {
        double pad = fabs(r->y0) > 0 ? 0.05 * fabs(r->y0) : 1;
        r->y0 -= pad;
        r->y1 += pad;
    }
    return 1;
}

void titan_plot_text(FILE *f, const titan_series *s, int ns, int width, int height, const char *xlabel) {
    range r;
    if (width < 10) width = 10;
    if (height < 4) height = 4;
    if (!bounds(s, ns, &r)) {
        fprintf(f, "(no finite points to plot)\n");
        return;
    }
    char *cells = malloc((size_t)width * (size_t)height);
    if (!cells) return;
    memset(cells, ' ', (size_t)width * (size_t)height);
    for (int k = 0; k < ns; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            int c = (int)lround((x - r.x0) / (r.x1 - r.x0) * (width - 1));
            int row = (int)lround((r.y1 - y) / (r.y1 - r.y0) * (height - 1));
            cells[row * width + c] = GLYPHS[k % (int)(sizeof GLYPHS - 1)];
        }
    for (int row = 0; row < height; row++) {
        double yv = r.y1 - (r.y1 - r.y0) * row / (height - 1);
        if (row == 0 || row == height - 1 || row == (height - 1) / 2)
            fprintf(f, "%10.4g |", yv);
        else
            fprintf(f, "%10s |", "");
        fwrite(cells + row * width, 1, (size_t)width, f);
        fputc('\n', f);
    }
    fprintf(f, "%10s +", "");
    for (int c = 0; c < width; c++) fputc('-', f);
    fprintf(f, "\n%11s %-*.6g%*.6g\n", "", width / 2, r.x0, width - width / 2, r.x1);
    fprintf(f, "%11s %s:", "", xlabel);
    for (int k = 0; k < ns; k++) fprintf(f, "  %c %s", GLYPHS[k % (int)(sizeof GLYPHS - 1)], s[k].name);
    fputc('\n', f);
    free(cells);
}

/* XML-safe text (metric names are plain, but a title may not be). */
static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

titan_status titan_plot_svg(const char *path, const titan_series *s, int ns, const char *title, const char *xlabel) {
    range r;
    if (!bounds(s, ns, &r)) return titan_error(TITAN_ERR_USAGE, "%s: no finite points to plot", path);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    const double W = 720, H = 420, L = 80, R = 20, T = 40, B = 60; /* image and margins */
    const double pw = W - L - R, ph = H - T - B;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"24\" "
               "text-anchor=\"middle\" font-size=\"15\">", W / 2);
    xml_text(f, title);
    fprintf(f, "</text>\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
            L, T, pw, ph);
    for (int t = 0; t <= 4; t++) { /* five ticks an axis, gridlines between */
        double yv = r.y0 + (r.y1 - r.y0) * t / 4, py = T + ph - ph * t / 4;
        double xv = r.x0 + (r.x1 - r.x0) * t / 4, px = L + pw * t / 4;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, py, L + pw, py);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L - 6, py + 4, yv);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n", px, T + ph + 18, xv);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", L + pw / 2, H - 18);
    xml_text(f, xlabel);
    fprintf(f, "</text>\n");
    for (int k = 0; k < ns; k++) {
        const char *color = COLORS[k % (int)(sizeof COLORS / sizeof COLORS[0])];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            fprintf(f, "%.2f,%.2f ", L + (x - r.x0) / (r.x1 - r.x0) * pw, T + ph - (y - r.y0) / (r.y1 - r.y0) * ph);
        }
        fprintf(f, "\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">", L + 10, T + 16 + 16.0 * k, color);
        xml_text(f, s[k].name);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", path);
    }
    titan_status st = titan_fs_write_atomic(path, buf, len);
    free(buf);
    return st;
}
