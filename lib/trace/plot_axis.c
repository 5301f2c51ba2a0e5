/* plot_axis.c - axes with round ticks (plot_frame.h): "nice numbers",
 * a step of 1, 2 or 5 x 10^k, and labels that print them exactly. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trace/plot_frame.h"

/* The round step nearest above raw: 1, 2, 5 or 10 x 10^k. */
static double nice_step(double raw, int *exp10) {
    if (!(raw > 0) || !isfinite(raw)) raw = 1; /* never from a finite range; a guard for any other */
    int e = (int)floor(log10(raw));
    double f = raw / pow(10, e);
    double m = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    if (m == 10) {
        m = 1;
        e++;
    }
    *exp10 = e;
    return m * pow(10, e);
}

/* k x 10^e without the error of k * 1e-4 (0.00030000000000000003). */
static double scaled(double k, int e) { return e < 0 ? k / pow(10, -e) : k * pow(10, e); }

/* Fixed decimals for a step of 10^e while the numbers stay short, else
 * mantissa and exponent ("3.5e-4", "1.2e9"): as many digits as the step
 * has, so a label reads as the tick's exact value. */
static void label_linear(char *out, size_t cap, double v, double amax, int e) {
    if (v == 0) {
        snprintf(out, cap, "0");
    } else if (e >= -4 && amax < 1e7) {
        snprintf(out, cap, "%.*f", e < 0 ? -e : 0, v);
    } else {
        int ve = (int)floor(log10(fabs(v)) + 1e-9);
        snprintf(out, cap, "%.*fe%d", ve - e > 0 ? ve - e : 0, v / pow(10, ve), ve);
    }
}

void plot_axis_linear(plot_axis *a, double lo, double hi, int target) {
    if (target < 2) target = 2;
    if (hi < lo) {
        double t = lo;
        lo = hi;
        hi = t;
    }
    if (hi == lo) { /* flat: a little room either side */
        double pad = lo != 0 ? 0.05 * fabs(lo) : 1;
        lo -= pad;
        hi += pad;
    }
    int e;
    double raw = (hi - lo) / (target - 1);
    if (!isfinite(raw)) raw = hi / (target - 1) - lo / (target - 1); /* values near +-DBL_MAX */
    double step = nice_step(raw, &e);
    double m = step / pow(10, e); /* 1, 2 or 5 */
    double k0 = floor(lo / step + 1e-9), k1 = ceil(hi / step - 1e-9);
    if (k1 <= k0) k1 = k0 + 1;
    a->log = 0;
    a->lo = scaled(k0 * m, e);
    a->hi = scaled(k1 * m, e);
    double amax = fmax(fabs(a->lo), fabs(a->hi));
    a->nticks = 0;
    for (double k = k0; k <= k1 + 0.5 && a->nticks < PLOT_MAX_TICKS; k++) {
        double v = k == 0 ? 0 : scaled(k * m, e);
        a->ticks[a->nticks] = v;
        label_linear(a->labels[a->nticks], sizeof a->labels[0], v, amax, e);
        a->nticks++;
    }
}

/* Ticks m x 10^k for the mantissas ms; the ends moved out to the nearest
 * of them. Returns the share of the axis (in log) the data spans. */
static double log_candidate(plot_axis *a, double lo, double hi, const int *ms, int nm, int stride) {
    int k0 = (int)floor(log10(lo)) - 1, k1 = (int)ceil(log10(hi)) + 1;
    double below = 0, above = 0;
    a->nticks = 0;
    for (int k = k0; k <= k1; k++) {
        if (((k % stride) + stride) % stride) continue;
        for (int i = 0; i < nm; i++) {
            double v = scaled(ms[i], k);
            if (v <= lo * (1 + 1e-12)) below = v; /* the last at or below lo */
            if (v >= hi * (1 - 1e-12) && above == 0) above = v;
        }
    }
    if (below <= 0 || above <= 0) return 0;
    a->lo = below;
    a->hi = above;
    for (int k = k0; k <= k1; k++) {
        if (((k % stride) + stride) % stride) continue;
        for (int i = 0; i < nm && a->nticks < PLOT_MAX_TICKS; i++) {
            double v = scaled(ms[i], k);
            if (v < below * (1 - 1e-12) || v > above * (1 + 1e-12)) continue;
            a->ticks[a->nticks] = v;
            snprintf(a->labels[a->nticks], sizeof a->labels[0], "%g", v);
            a->nticks++;
        }
    }
    /* one style an axis: "1e-5, 1e-4, 1e-3", not "1e-05, 0.0001, 0.001" */
    if (a->lo < 1e-3 || a->hi >= 1e5)
        for (int t = 0; t < a->nticks; t++) {
            int e = (int)floor(log10(a->ticks[t]) + 1e-9);
            snprintf(a->labels[t], sizeof a->labels[0], "%.0fe%d", a->ticks[t] / pow(10, e), e);
        }
    return log10(hi / lo) / log10(a->hi / a->lo);
}

void plot_axis_log(plot_axis *a, double lo, double hi, int target) {
    static const int one[] = {1}, three[] = {1, 2, 5}, nine[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    if (hi <= lo * (1 + 1e-9)) {
        lo /= 1.1;
        hi *= 1.1;
    }
    double span = log10(hi) - log10(lo); /* hi / lo may overflow */
    int decades = isfinite(span) && span < 1e4 ? (int)ceil(span) : 10000;
    int stride = decades > 2 * target ? (decades + target - 1) / target : 1;
    struct {
        const int *ms;
        int nm;
    } sets[] = {{one, 1}, {three, 3}, {nine, 9}};
    for (int i = 0; i < 3; i++) {
        if (i > 0 && stride > 1) break;
        double share = log_candidate(a, lo, hi, sets[i].ms, sets[i].nm, stride);
        if (share >= 0.5 && a->nticks >= 3 && a->nticks <= 2 * target + 1) {
            a->log = 1;
            return;
        }
    }
    /* less than a factor of ~2: round linear ticks, placed by log */
    plot_axis_linear(a, lo, hi, target);
    if (a->lo <= 0) { /* the ends stay positive: drop ticks at or below 0 */
        int k = 0;
        for (int i = 0; i < a->nticks; i++)
            if (a->ticks[i] > 0) {
                a->ticks[k] = a->ticks[i];
                if (k != i) memcpy(a->labels[k], a->labels[i], sizeof a->labels[0]);
                k++;
            }
        a->nticks = k;
        a->lo = k && a->ticks[0] < lo ? a->ticks[0] : lo;
    }
    a->log = 1;
}

double plot_axis_frac(const plot_axis *a, double v) {
    if (a->log) return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    return (v - a->lo) / (a->hi - a->lo);
}
