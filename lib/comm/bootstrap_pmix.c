/* bootstrap_pmix.c - the pmix bootstrap kind: rank, sizes and key/value
 * exchange from the launcher's PMIx server. Its own translation unit because
 * PMIx is an optional dependency: built without <pmix.h>, titan still runs
 * singleton and local jobs, and a PMIx launch says what is missing. */
#include "bootstrap_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<pmix.h>)
#define HAVE_PMIX 1
#endif
#endif

#ifdef HAVE_PMIX
#include <pmix.h>

typedef struct {
    pmix_proc_t me;
} pmix_state;

static titan_status pmix_fail(pmix_status_t rc, const char *what, const char *detail) {
    return titan_error(rc == PMIX_ERR_TIMEOUT ? TITAN_ERR_COMM : TITAN_ERR_FAIL,
                       "bootstrap (PMIx %s): %s%s%s: %s", PMIx_Get_version(), what,
                       detail ? " " : "", detail ? detail : "", PMIx_Error_string(rc));
}

/* A job-level (rank = wildcard) or own value of an unsigned integer key. */
static titan_status get_uint(pmix_state *s, int job_level, const char *key, int *out) {
    pmix_proc_t p;
    PMIX_PROC_CONSTRUCT(&p);
    PMIX_LOAD_PROCID(&p, s->me.nspace, job_level ? PMIX_RANK_WILDCARD : s->me.rank);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&p, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS) return pmix_fail(rc, "get", key);
    long x = -1;
    switch (v->type) {
    case PMIX_UINT32: x = (long)v->data.uint32; break;
    case PMIX_UINT16: x = (long)v->data.uint16; break;
    case PMIX_INT: x = (long)v->data.integer; break;
    case PMIX_UINT: x = (long)v->data.uint; break;
    case PMIX_PROC_RANK: x = (long)v->data.rank; break;
    default: break;
    }
    PMIX_VALUE_RELEASE(v);
    if (x < 0 || x > (1L << 30))
        return titan_error(TITAN_ERR_FAIL, "bootstrap (PMIx): %s: unexpected value type or range",
                           key);
    *out = (int)x;
    return TITAN_OK;
}

titan_status dist_pmix_init(titan_dist *d) {
    pmix_state *s = calloc(1, sizeof *s);
    if (!s) return titan_error(TITAN_ERR_NOMEM, "bootstrap (PMIx): out of memory");
    pmix_status_t rc = PMIx_Init(&s->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        /* PMIX_ERR_UNREACH here means the launcher's server is gone or not
         * ours; running as a singleton would duplicate the job. */
        free(s);
        titan_status st = titan_error(
            TITAN_ERR_FAIL, "bootstrap: PMIX_NAMESPACE=%s is set (a PMIx launcher) but PMIx_Init "
            "failed: %s", getenv("PMIX_NAMESPACE"), PMIx_Error_string(rc));
        titan_error_hint("run under the launcher that set PMIX_*, or unset PMIX_NAMESPACE to run "
                         "as one process");
        return st;
    }
    d->pmix = s;
    titan_status st = get_uint(s, 1, PMIX_JOB_SIZE, &d->size);
    if (st == TITAN_OK) st = get_uint(s, 1, PMIX_LOCAL_SIZE, &d->local_size);
    if (st == TITAN_OK) st = get_uint(s, 0, PMIX_LOCAL_RANK, &d->local_rank);
    d->rank = (int)s->me.rank;
    if (st == TITAN_OK && (d->rank >= d->size || d->local_rank >= d->local_size))
        st = titan_error(TITAN_ERR_FAIL, "bootstrap (PMIx): rank %d of %d, local rank %d of %d: "
                         "inconsistent", d->rank, d->size, d->local_rank, d->local_size);
    if (st != TITAN_OK) {
        dist_pmix_fini(d);
        return st;
    }
    dist_sanitize_id(d->job_id, sizeof d->job_id, s->me.nspace);
    return TITAN_OK;
}

titan_status dist_pmix_put(titan_dist *d, const char *key, const void *val, size_t n) {
    (void)d;
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)val; /* PMIx_Put copies it */
    v.data.bo.size = n;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    return rc == PMIX_SUCCESS ? TITAN_OK : pmix_fail(rc, "put", key);
}

titan_status dist_pmix_commit(titan_dist *d) {
    (void)d;
    pmix_status_t rc = PMIx_Commit();
    return rc == PMIX_SUCCESS ? TITAN_OK : pmix_fail(rc, "commit", NULL);
}

titan_status dist_pmix_fence(titan_dist *d) {
    pmix_info_t info[2];
    bool collect = true;
    int timeout = d->timeout_s < 1 ? 1 : d->timeout_s > 1e6 ? 1000000 : (int)d->timeout_s;
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(NULL, 0, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "#%u (rank %d of %d)", d->epoch + 1, d->rank, d->size);
        return pmix_fail(rc, "fence", what);
    }
    d->epoch++;
    return TITAN_OK;
}

titan_status dist_pmix_get(titan_dist *d, int rank, const char *key, void *buf, size_t cap,
                           size_t *n) {
    pmix_state *s = d->pmix;
    pmix_proc_t p;
    PMIX_PROC_CONSTRUCT(&p);
    PMIX_LOAD_PROCID(&p, s->me.nspace, (pmix_rank_t)rank);
    /* Optional: after a collecting fence every value is local; do not ask
     * the server to wait for a key that was never put. */
    pmix_info_t info;
    bool yes = true;
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&p, key, &info, 1, &v);
    PMIX_INFO_DESTRUCT(&info);
    if (rc == PMIX_ERR_NOT_FOUND)
        return titan_error(TITAN_ERR_FAIL, "bootstrap: rank %d's %s: not found", rank, key);
    if (rc != PMIX_SUCCESS) {
        char what[DIST_KEY_MAX + 32];
        snprintf(what, sizeof what, "%s of rank %d", key, rank);
        return pmix_fail(rc, "get", what);
    }
    titan_status st = TITAN_OK;
    if (v->type != PMIX_BYTE_OBJECT)
        st = titan_error(TITAN_ERR_FAIL, "bootstrap: rank %d's %s: not a byte object", rank, key);
    else if (v->data.bo.size > cap)
        st = titan_error(TITAN_ERR_USAGE, "bootstrap: rank %d's %s: %zu bytes, buffer holds %zu",
                         rank, key, v->data.bo.size, cap);
    else {
        memcpy(buf, v->data.bo.bytes, v->data.bo.size);
        if (n) *n = v->data.bo.size;
    }
    PMIX_VALUE_RELEASE(v);
    return st;
}

void dist_pmix_fini(titan_dist *d) {
    if (!d->pmix) return;
    PMIx_Finalize(NULL, 0);
    free(d->pmix);
    d->pmix = NULL;
}

#else /* !HAVE_PMIX */

static titan_status no_pmix(void) {
    titan_error(TITAN_ERR_FAIL, "bootstrap: started by a PMIx launcher (PMIX_NAMESPACE=%s) but "
                "titan was built without PMIx", getenv("PMIX_NAMESPACE") ? getenv("PMIX_NAMESPACE") : "");
    titan_error_hint("install libpmix-dev (scripts/install-deps.sh) and rebuild");
    return TITAN_ERR_FAIL;
}
titan_status dist_pmix_init(titan_dist *d) { (void)d; return no_pmix(); }
titan_status dist_pmix_put(titan_dist *d, const char *k, const void *v, size_t n) {
    (void)d, (void)k, (void)v, (void)n;
    return no_pmix();
}
titan_status dist_pmix_commit(titan_dist *d) { (void)d; return no_pmix(); }
titan_status dist_pmix_fence(titan_dist *d) { (void)d; return no_pmix(); }
titan_status dist_pmix_get(titan_dist *d, int r, const char *k, void *b, size_t c, size_t *n) {
    (void)d, (void)r, (void)k, (void)b, (void)c, (void)n;
    return no_pmix();
}
void dist_pmix_fini(titan_dist *d) { (void)d; }

#endif
