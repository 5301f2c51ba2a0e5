/* progress.h - one status line on stderr for a person watching a terminal,
 * rewritten in place with \r at most 4 times a second and blanked at the
 * end. Off (every call does nothing) unless stderr is a terminal and the
 * verbosity is normal: -q wants silence, and -v prints lines that would
 * tear it. Call from one thread. */
#ifndef TITAN_CORE_PROGRESS_H
#define TITAN_CORE_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int on;
    double t0, last; /* start, last line printed (monotonic seconds) */
    size_t shown;    /* length of the line on screen */
} titan_progress;

void titan_progress_init(titan_progress *p);
/* 1 when on and a quarter of a second has passed since the last line. */
int titan_progress_due(const titan_progress *p);
/* Prints "P% of <total> MB, <what>, R MB/s, ETA m:ss" (total known) or
 * "<done> MB read, <what>, R MB/s": done and total are input bytes (the
 * ETA assumes the pace so far), R is rate_bytes per second since init. */
void titan_progress_bytes(titan_progress *p, uint64_t done, uint64_t total, uint64_t rate_bytes, const char *what);
/* Blanks the line, so that what follows starts on a clean one. */
void titan_progress_clear(titan_progress *p);

#endif
