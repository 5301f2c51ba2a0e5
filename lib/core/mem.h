/* mem.h - aligned allocation that reports failure instead of exiting. */
#ifndef TITAN_CORE_MEM_H
#define TITAN_CORE_MEM_H

#include <stddef.h>

/* 64-byte aligned, zero-filled. NULL (with titan_error NOMEM naming `what`) on failure. */
void *titan_alloc(size_t nbytes, const char *what);
void titan_free(void *p);
/* Page-backed buffers for large state whose residency should follow use
 * (model parameters, gradients, activations, optimizer moments): mapped
 * anonymous memory, page-aligned, zero-filled, and resident only once
 * touched, so allocating the full model on an FSDP rank costs address
 * space, not memory. Free only with titan_free_pages. */
void *titan_alloc_pages(size_t nbytes, const char *what);
void titan_free_pages(void *p);
/* The range [p, p + nbytes) reads as zeros afterwards; the whole pages
 * inside it go back to the operating system (madvise MADV_DONTNEED) and are
 * faulted in again, zeroed, when next touched; the partial pages at its ends
 * are zeroed in place (they may hold neighbouring data). For page-backed or
 * other private anonymous memory. */
void titan_mem_release_zero(void *p, size_t nbytes);
/* Bytes in a page. */
size_t titan_page_size(void);

/* Peak resident set size of this process in bytes (getrusage). */
size_t titan_peak_rss(void);

#endif
