/* mem.h - aligned allocation that reports failure instead of exiting. */
#ifndef TITAN_CORE_MEM_H
#define TITAN_CORE_MEM_H

#include <stddef.h>

/* 64-byte aligned, zero-filled. NULL (with titan_error NOMEM naming `what`) on failure. */
void *titan_alloc(size_t nbytes, const char *what);
void titan_free(void *p);
/* Peak resident set size of this process in bytes (getrusage). */
size_t titan_peak_rss(void);

#endif
