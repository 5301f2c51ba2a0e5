/* bootstrap_impl.h - the bootstrap's state, shared by bootstrap.c (kinds
 * singleton and local) and bootstrap_pmix.c (kind pmix). Not a public header. */
#ifndef TITAN_COMM_BOOTSTRAP_IMPL_H
#define TITAN_COMM_BOOTSTRAP_IMPL_H

#include <limits.h>
#include <stddef.h>

#include "bootstrap.h"

#define DIST_KEY_MAX 64          /* with the NUL */
#define DIST_VAL_MAX (64 * 1024)

typedef struct {
    char key[DIST_KEY_MAX];
    unsigned char *val;
    size_t n;
} dist_kv;

typedef struct {
    dist_kv *kv;
    size_t n, cap;
} dist_kv_set;

struct titan_dist {
    titan_dist_kind kind;
    int rank, size, local_rank, local_size;
    char job_id[48];
    double timeout_s;
    /* singleton and local: values put, and the snapshot the last commit took */
    dist_kv_set staged, committed;
    char rdv[PATH_MAX]; /* local: the rendezvous directory */
    unsigned epoch;     /* fences completed */
    void *pmix;         /* pmix: bootstrap_pmix.c's state */
};

/* bootstrap_pmix.c; without <pmix.h> at build time, init says so and fails. */
titan_status dist_pmix_init(titan_dist *d);
titan_status dist_pmix_put(titan_dist *d, const char *key, const void *val, size_t n);
titan_status dist_pmix_commit(titan_dist *d);
titan_status dist_pmix_fence(titan_dist *d);
titan_status dist_pmix_get(titan_dist *d, int rank, const char *key, void *buf, size_t cap,
                           size_t *n);
void dist_pmix_fini(titan_dist *d);

/* Keeps letters, digits, '-' and '.', maps anything else to '-', and
 * replaces a name longer than cap-1 by a 64-bit hash of it in hex. */
void dist_sanitize_id(char *out, size_t cap, const char *in);

#endif
