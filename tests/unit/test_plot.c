/* test_plot.c - the plots' axes and smoothing (trace/plot_frame.h,
 * trace/plot.h): round ticks that cover the data over many random ranges,
 * labels that read back as the ticks, log ticks, and TensorBoard's EMA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace/plot.h"
#include "trace/plot_frame.h"

#include "check.h"

/* 1, 2 or 5 x 10^k */
static int round_step(double d) {
    double m = d / pow(10, floor(log10(d) + 1e-9));
    return fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6;
}

static void check_linear(double lo, double hi, int target) {
    plot_axis a;
    plot_axis_linear(&a, lo, hi, target);
    CHECK(a.nticks >= 2 && a.nticks <= 2 * target + 2, "[%g, %g]: %d ticks", lo, hi, a.nticks);
    if (a.nticks < 2) return;
    double d = a.ticks[1] - a.ticks[0];
    CHECK(d > 0 && round_step(d), "[%g, %g]: step %g", lo, hi, d);
    CHECK(a.lo == a.ticks[0] && a.hi == a.ticks[a.nticks - 1], "[%g, %g]: ends %g %g", lo, hi, a.lo, a.hi);
    CHECK(a.lo <= fmin(lo, hi) + 1e-9 * d && a.hi >= fmax(lo, hi) - 1e-9 * d, "[%g, %g] not inside [%g, %g]", lo, hi,
          a.lo, a.hi);
    /* not much wider than the data: one step either side at most */
    if (hi != lo)
        CHECK(a.hi - a.lo <= fabs(hi - lo) + 2 * d * (1 + 1e-9), "[%g, %g]: axis [%g, %g]", lo, hi, a.lo, a.hi);
    for (int t = 0; t < a.nticks; t++) {
        double v = a.ticks[t], read = strtod(a.labels[t], NULL);
        CHECK(fabs(v / d - round(v / d)) < 1e-6, "[%g, %g]: tick %.17g not a multiple of %g", lo, hi, v, d);
        CHECK(fabs(read - v) <= 1e-9 * fmax(fabs(v), d), "[%g, %g]: label '%s' for tick %.17g", lo, hi, a.labels[t], v);
        if (t) CHECK(fabs(a.ticks[t] - a.ticks[t - 1] - d) < 1e-9 * d, "[%g, %g]: uneven ticks", lo, hi);
    }
}

static void test_linear(void) {
    check_linear(0, 25.75, 5);
    check_linear(8.111, 8.9, 5);
    check_linear(3.2e-5, 4.9e-4, 5);
    check_linear(1, 1, 5);
    check_linear(0, 0, 5);
    check_linear(-3, 2, 5);
    check_linear(1.2e9, 1.9e9, 5);
    check_linear(1, 20, 7);
    srand(7);
    for (int i = 0; i < 20000; i++) {
        double scale = pow(10, rand() % 24 - 12), a = scale * (rand() / (double)RAND_MAX - 0.3),
               b = a + scale * rand() / (double)RAND_MAX;
        check_linear(a, b, 2 + rand() % 8);
    }
    plot_axis a;
    plot_axis_linear(&a, 0.00032, 0.00049, 5);
    CHECK(a.nticks >= 3 && a.labels[1][0], "labels of a small range");
}

static void test_log(void) {
    plot_axis a;
    plot_axis_log(&a, 3.2e-6, 8e-4, 5); /* decades: 1e-6 ... 1e-3 */
    CHECK(a.log && a.nticks == 4 && fabs(a.ticks[0] - 1e-6) < 1e-18 && fabs(a.ticks[3] - 1e-3) < 1e-15,
          "%d ticks from %g", a.nticks, a.ticks[0]);
    for (int t = 0; t < a.nticks; t++)
        CHECK(fabs(strtod(a.labels[t], NULL) - a.ticks[t]) < 1e-9 * a.ticks[t], "label %s", a.labels[t]);
    plot_axis_log(&a, 2.8, 10.5, 5); /* less than a decade: 1-2-5 or 1..9 times them */
    CHECK(a.log && a.nticks >= 3 && a.lo <= 2.8 && a.hi >= 10.5, "%d ticks [%g, %g]", a.nticks, a.lo, a.hi);
    for (int t = 0; t < a.nticks; t++) {
        double m = a.ticks[t] / pow(10, floor(log10(a.ticks[t]) + 1e-9));
        CHECK(fabs(m - round(m)) < 1e-9, "tick %g", a.ticks[t]);
    }
    plot_axis_log(&a, 5.31, 5.62, 5); /* a sliver: round linear ticks, placed by log */
    CHECK(a.log && a.nticks >= 2 && a.lo > 0 && a.lo <= 5.31 && a.hi >= 5.62, "%d ticks [%g, %g]", a.nticks, a.lo,
          a.hi);
    CHECK(fabs(plot_axis_frac(&a, a.lo)) < 1e-12 && fabs(plot_axis_frac(&a, a.hi) - 1) < 1e-12, "frac of the ends");
}

static void test_ema(void) {
    const double y[] = {4, 6, NAN, 3, 5, 9, 1};
    double out[7];
    titan_plot_ema(y, 7, 0.6, out);
    double last = 0, want;
    int k = 0;
    for (int i = 0; i < 7; i++) {
        if (isnan(y[i])) {
            CHECK(isnan(out[i]), "a NaN passes");
            continue;
        }
        last = 0.6 * last + 0.4 * y[i];
        k++;
        want = last / (1 - pow(0.6, k));
        CHECK(fabs(out[i] - want) < 1e-12, "point %d: %.17g, want %.17g", i, out[i], want);
    }
    CHECK(out[0] == 4, "debiased: the first point is itself (%g)", out[0]);
    const double flat[] = {2.5, 2.5, 2.5};
    titan_plot_ema(flat, 3, 0.9, out);
    CHECK(out[0] == 2.5 && out[1] == 2.5 && out[2] == 2.5, "a constant series is left alone");
    titan_plot_ema(y, 7, 0, out);
    CHECK(out[1] == 6 && out[6] == 1, "weight 0: the series itself");
}

int main(void) {
    test_linear();
    test_log();
    test_ema();
    if (failures) {
        fprintf(stderr, "test_plot: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_plot: ok\n");
    return 0;
}
