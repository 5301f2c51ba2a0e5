/* error.c - the per-thread error message. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_MAX 2048

static _Thread_local char err_msg[MSG_MAX];
static _Thread_local char err_hint[MSG_MAX];
static _Thread_local titan_status err_code;
static _Thread_local int err_muted;

titan_status titan_error(titan_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    err_hint[0] = '\0';
    err_code = code;
    err_muted = 0;
    return code;
}

void titan_error_mute(void) { err_muted = 1; }
int titan_error_muted(void) { return err_muted; }

void titan_error_hint(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_hint, sizeof err_hint, fmt, ap);
    va_end(ap);
}

void titan_error_context(const char *fmt, ...) {
    char ctx[MSG_MAX], old[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    memcpy(old, err_msg, sizeof old);
    /* ctx + ": " + old, cut to fit (built by hand: snprintf would warn of truncation) */
    size_t lc = strnlen(ctx, MSG_MAX - 3), lo = strnlen(old, MSG_MAX);
    if (lc + 2 + lo > MSG_MAX - 1) lo = MSG_MAX - 1 - lc - 2;
    memcpy(err_msg, ctx, lc);
    memcpy(err_msg + lc, ": ", 2);
    memcpy(err_msg + lc + 2, old, lo);
    err_msg[lc + 2 + lo] = '\0';
}

const char *titan_error_message(void) { return err_msg; }
const char *titan_error_hint_text(void) { return err_hint; }
titan_status titan_error_code(void) { return err_code; }

void titan_error_clear(void) {
    err_msg[0] = '\0';
    err_hint[0] = '\0';
    err_code = TITAN_OK;
    err_muted = 0;
}

void titan_panic(const char *file, int line, const char *what) {
    fprintf(stderr, "titan: internal error at %s:%d: %s\n", file, line, what);
    abort();
}
