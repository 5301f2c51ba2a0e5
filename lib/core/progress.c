/* progress.c - the status line of progress.h. */
#include "core/progress.h"

#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

#define PERIOD_S 0.25

void titan_progress_init(titan_progress *p) {
    p->on = titan_log_verbosity() == 1 && isatty(STDERR_FILENO);
    p->t0 = titan_now_s();
    p->last = p->t0; /* the first line after a quarter second: short runs print none */
    p->shown = 0;
}

int titan_progress_due(const titan_progress *p) { return p->on && titan_now_s() - p->last >= PERIOD_S; }

/* A line longer than the terminal would wrap, and \r would then rewrite only
 * its last row. */
static size_t columns(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col - 1;
    return 79;
}

void titan_progress_bytes(titan_progress *p, uint64_t done, uint64_t total, uint64_t rate_bytes, const char *what) {
    if (!p->on) return;
    double t = titan_now_s(), dt = t - p->t0, rate = dt > 0 ? 1e-6 * (double)rate_bytes / dt : 0;
    char line[512];
    if (total > 0 && done > 0 && done <= total) {
        /* The rest at the pace so far. */
        long s = (long)(dt * (double)(total - done) / (double)done + 0.5);
        char eta[32];
        if (s >= 3600) snprintf(eta, sizeof eta, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
        else snprintf(eta, sizeof eta, "%ld:%02ld", s / 60, s % 60);
        snprintf(line, sizeof line, "%s: %d%% of %.1f MB, %s, %.1f MB/s, ETA %s", titan_log_prog(),
                 (int)(100.0 * (double)done / (double)total), 1e-6 * (double)total, what, rate, eta);
    } else {
        snprintf(line, sizeof line, "%s: %.1f MB read, %s, %.1f MB/s", titan_log_prog(), 1e-6 * (double)done, what,
                 rate);
    }
    size_t len = 0, cols = columns();
    while (line[len] && len < cols) len++;
    line[len] = '\0';
    /* Spaces blank what is left of a longer previous line. */
    fprintf(stderr, "\r%s%*s", line, p->shown > len ? (int)(p->shown - len) : 0, "");
    fflush(stderr);
    p->shown = len;
    p->last = t;
}

void titan_progress_clear(titan_progress *p) {
    if (!p->on || p->shown == 0) return;
    fprintf(stderr, "\r%*s\r", (int)p->shown, "");
    fflush(stderr);
    p->shown = 0;
}
