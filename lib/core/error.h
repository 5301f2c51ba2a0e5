/* error.h - status codes, the per-thread error message, invariant checks.
 *
 * The library never exits: a function that fails records a message with
 * titan_error() and returns its status. Status values are the documented
 * exit codes of every titan tool (see titan(7), EXIT STATUS). */
#ifndef TITAN_CORE_ERROR_H
#define TITAN_CORE_ERROR_H

typedef enum {
    TITAN_OK = 0,
    TITAN_ERR_FAIL = 1,    /* internal or otherwise unclassified failure */
    TITAN_ERR_USAGE = 2,   /* bad option, bad config key or value */
    TITAN_ERR_IO = 3,      /* a file is missing, unreadable or unwritable */
    TITAN_ERR_FORMAT = 4,  /* input exists but is malformed or foreign (its description: header, catalog) */
    TITAN_ERR_NUMERIC = 5, /* training refused a non-finite loss or gradient */
    TITAN_ERR_NOMEM = 6,   /* an allocation failed */
    TITAN_ERR_CORRUPT = 7, /* well-described data is damaged: checksum mismatch, cut short, undecodable */
    TITAN_ERR_COMM = 8,    /* another rank failed, exited or timed out (lib/comm) */
} titan_status;

/* Records "object: place: cause" style text for the calling thread and
 * returns code, so callers write `return titan_error(TITAN_ERR_IO, ...)`. */
titan_status titan_error(titan_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Adds a "hint:" line to the current error (a known fix). */
void titan_error_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefixes the current message with more context: "ctx: old message". */
void titan_error_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *titan_error_message(void); /* "" when none */
const char *titan_error_hint_text(void); /* "" when none */
titan_status titan_error_code(void);
void titan_error_clear(void);
/* Marks the current error as one another process reports: the same config
 * error on every rank of a job is printed by rank 0 alone. titan_report then
 * returns its status without a word. A new titan_error() unmarks it. */
void titan_error_mute(void);
int titan_error_muted(void);

/* Broken invariants (programming errors, never bad input) abort with file:line. */
void titan_panic(const char *file, int line, const char *what) __attribute__((noreturn));
#define TITAN_ASSERT(cond) \
    do { if (!(cond)) titan_panic(__FILE__, __LINE__, #cond); } while (0)

/* Propagate a non-OK status. */
#define TITAN_TRY(expr) \
    do { titan_status _st = (expr); if (_st != TITAN_OK) return _st; } while (0)

#endif
