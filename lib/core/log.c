/* log.c - messages for people, on stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static const char *log_prog = "titan";
static int log_level = 1;

void titan_log_init(const char *prog) { log_prog = prog; }
const char *titan_log_prog(void) { return log_prog; }
void titan_log_set_verbosity(int level) { log_level = level; }
int titan_log_verbosity(void) { return log_level; }

static void vlog(const char *tag, const char *fmt, va_list ap) {
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    if (tag)
        fprintf(stderr, "%s: %s: %s\n", log_prog, tag, line);
    else
        fprintf(stderr, "%s: %s\n", log_prog, line);
}

void titan_info(const char *fmt, ...) {
    if (log_level < 1) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(NULL, fmt, ap);
    va_end(ap);
}

void titan_debug(const char *fmt, ...) {
    if (log_level < 2) return;
    va_list ap;
    va_start(ap, fmt);
    vlog("debug", fmt, ap);
    va_end(ap);
}

void titan_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("warning", fmt, ap);
    va_end(ap);
}

int titan_report(titan_status st) {
    if (st == TITAN_OK) return 0;
    if (titan_error_muted()) return (int)st;
    const char *msg = titan_error_message();
    fprintf(stderr, "%s: error: %s\n", log_prog, msg[0] ? msg : "unknown failure");
    const char *hint = titan_error_hint_text();
    if (hint[0]) fprintf(stderr, "hint: %s\n", hint);
    return (int)st;
}
