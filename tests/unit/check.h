/* check.h - the assertion every unit test uses: count a failure, say where,
 * and go on, so one run reports every broken check. main() returns
 * failures != 0. Usage: CHECK(cond) or CHECK(cond, "fmt", args...). */
#ifndef TITAN_TESTS_CHECK_H
#define TITAN_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"

static int failures;

__attribute__((format(printf, 1, 2), unused)) static void check_detail(const char *fmt, ...) {
    if (fmt[1]) { /* fmt is " " + the caller's format */
        va_list ap;
        va_start(ap, fmt);
        fputs("\n ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    const char *err = titan_error_message();
    if (err[0]) fprintf(stderr, "\n  last error: %s", err);
    fputc('\n', stderr);
}

/* " " __VA_ARGS__ makes the message optional: it must be a string literal. */
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s", __FILE__, __LINE__, #cond);  \
            check_detail(" " __VA_ARGS__);                                  \
        }                                                                  \
    } while (0)

#endif
