/* bootstrap.c - picking the bootstrap kind, the singleton, and the local
 * kind's key/value exchange through files in the rendezvous directory. */
#define _GNU_SOURCE
#include "bootstrap_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fsutil.h"

#define DEFAULT_TIMEOUT_S 300.0

void dist_sanitize_id(char *out, size_t cap, const char *in) {
    size_t n = strlen(in);
    if (n + 1 > cap) { /* FNV-1a: short, stable, and different for different long names */
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)in[i]) * 1099511628211ull;
        snprintf(out, cap, "%016llx", (unsigned long long)h);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.';
        out[i] = ok ? c : '-';
    }
    out[n] = '\0';
}

/* ---- key/value sets ------------------------------------------------------ */

static void kv_clear(dist_kv_set *s) {
    for (size_t i = 0; i < s->n; i++) free(s->kv[i].val);
    free(s->kv);
    memset(s, 0, sizeof *s);
}

static dist_kv *kv_find(dist_kv_set *s, const char *key) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->kv[i].key, key) == 0) return &s->kv[i];
    return NULL;
}

static titan_status kv_set(dist_kv_set *s, const char *key, const void *val, size_t n) {
    unsigned char *copy = malloc(n ? n : 1);
    if (!copy) return titan_error(TITAN_ERR_NOMEM, "bootstrap: key %s: out of memory", key);
    memcpy(copy, val, n);
    dist_kv *e = kv_find(s, key);
    if (!e) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 16;
            dist_kv *kv = realloc(s->kv, cap * sizeof *kv);
            if (!kv) {
                free(copy);
                return titan_error(TITAN_ERR_NOMEM, "bootstrap: key %s: out of memory", key);
            }
            s->kv = kv;
            s->cap = cap;
        }
        e = &s->kv[s->n++];
        snprintf(e->key, sizeof e->key, "%s", key);
        e->val = NULL;
    }
    free(e->val);
    e->val = copy;
    e->n = n;
    return TITAN_OK;
}

static titan_status kv_copy_out(const dist_kv *e, int rank, void *buf, size_t cap, size_t *n) {
    if (e->n > cap)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: rank %d's %s: %zu bytes, buffer holds %zu",
                           rank, e->key, e->n, cap);
    memcpy(buf, e->val, e->n);
    if (n) *n = e->n;
    return TITAN_OK;
}

/* ---- environment --------------------------------------------------------- */

static titan_status env_int(const char *name, int lo, int hi, int *out) {
    const char *s = getenv(name);
    if (!s || !*s)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: %s is not set (TITAN_RANK is)", name);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: %s=%s: want an integer in %d..%d", name, s,
                           lo, hi);
    *out = (int)v;
    return TITAN_OK;
}

double titan_dist_env_timeout(void) {
    const char *s = getenv("TITAN_COMM_TIMEOUT");
    if (s && *s) {
        char *end;
        double v = strtod(s, &end);
        if (!*end && v > 0) return v;
    }
    return DEFAULT_TIMEOUT_S;
}

static titan_status local_init(titan_dist *d) {
    TITAN_TRY(env_int("TITAN_WORLD_SIZE", 1, 1 << 20, &d->size));
    TITAN_TRY(env_int("TITAN_RANK", 0, d->size - 1, &d->rank));
    TITAN_TRY(env_int("TITAN_LOCAL_SIZE", 1, d->size, &d->local_size));
    TITAN_TRY(env_int("TITAN_LOCAL_RANK", 0, d->local_size - 1, &d->local_rank));
    const char *rdv = getenv("TITAN_RENDEZVOUS"), *job = getenv("TITAN_JOB_ID");
    if (!rdv || !*rdv)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: TITAN_RENDEZVOUS is not set (TITAN_RANK is)");
    if (!titan_fs_is_dir(rdv))
        return titan_error(TITAN_ERR_IO, "bootstrap: TITAN_RENDEZVOUS=%s: not a directory", rdv);
    if (strlen(rdv) >= sizeof d->rdv - 32)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: TITAN_RENDEZVOUS=%s: path too long", rdv);
    snprintf(d->rdv, sizeof d->rdv, "%s", rdv);
    /* Without a job id, the directory's inode number tells jobs apart. */
    char idbuf[64];
    if (!job || !*job) {
        struct stat sb;
        snprintf(idbuf, sizeof idbuf, "rdv%lx",
                 stat(rdv, &sb) == 0 ? (unsigned long)sb.st_ino : (unsigned long)getpid());
        job = idbuf;
    }
    dist_sanitize_id(d->job_id, sizeof d->job_id, job);
    return TITAN_OK;
}

int titan_dist_env_rank(void) {
    static const char *const vars[] = {"TITAN_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = getenv(vars[i]);
        char *end;
        long r = s ? strtol(s, &end, 10) : -1;
        if (s && *s && !*end && r >= 0 && r < (1L << 30)) return (int)r;
    }
    return 0;
}

titan_status titan_dist_init(titan_dist **out) {
    *out = NULL;
    titan_dist *d = calloc(1, sizeof *d);
    if (!d) return titan_error(TITAN_ERR_NOMEM, "bootstrap: out of memory");
    d->timeout_s = titan_dist_env_timeout();
    d->size = d->local_size = 1;
    titan_status st = TITAN_OK;
    if (getenv("PMIX_NAMESPACE")) {
        d->kind = TITAN_DIST_PMIX;
        st = dist_pmix_init(d);
    } else if (getenv("TITAN_RANK")) {
        d->kind = TITAN_DIST_LOCAL;
        st = local_init(d);
    } else {
        d->kind = TITAN_DIST_SINGLETON;
        snprintf(d->job_id, sizeof d->job_id, "p%ld", (long)getpid());
    }
    if (st != TITAN_OK) {
        free(d);
        return st;
    }
    *out = d;
    return TITAN_OK;
}

void titan_dist_free(titan_dist *d) {
    if (!d) return;
    if (d->kind == TITAN_DIST_PMIX) dist_pmix_fini(d);
    kv_clear(&d->staged);
    kv_clear(&d->committed);
    free(d);
}

titan_dist_kind titan_dist_kind_of(const titan_dist *d) { return d->kind; }
const char *titan_dist_kind_name(titan_dist_kind k) {
    switch (k) {
    case TITAN_DIST_SINGLETON: return "singleton";
    case TITAN_DIST_LOCAL: return "local";
    case TITAN_DIST_PMIX: return "pmix";
    }
    return "?";
}
int titan_dist_rank(const titan_dist *d) { return d->rank; }
int titan_dist_world_size(const titan_dist *d) { return d->size; }
int titan_dist_local_rank(const titan_dist *d) { return d->local_rank; }
int titan_dist_local_size(const titan_dist *d) { return d->local_size; }
const char *titan_dist_job_id(const titan_dist *d) { return d->job_id; }
void titan_dist_set_timeout(titan_dist *d, double seconds) {
    d->timeout_s = seconds > 0 ? seconds : DEFAULT_TIMEOUT_S;
}
double titan_dist_timeout(const titan_dist *d) { return d->timeout_s; }

/* ---- put / commit / fence / get ------------------------------------------- */

static titan_status check_key(const char *key) {
    size_t n = strlen(key);
    if (n == 0 || n >= DIST_KEY_MAX)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: key '%s': want 1..%d characters", key,
                           DIST_KEY_MAX - 1);
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return titan_error(TITAN_ERR_USAGE, "bootstrap: key '%s': character '%c' not allowed",
                               key, c);
    }
    return TITAN_OK;
}

titan_status titan_dist_put(titan_dist *d, const char *key, const void *val, size_t n) {
    TITAN_TRY(check_key(key));
    if (n > DIST_VAL_MAX)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: key %s: %zu bytes, at most %d", key, n,
                           DIST_VAL_MAX);
    if (d->kind == TITAN_DIST_PMIX) return dist_pmix_put(d, key, val, n);
    return kv_set(&d->staged, key, val, n);
}

titan_status titan_dist_commit(titan_dist *d) {
    if (d->kind == TITAN_DIST_PMIX) return dist_pmix_commit(d);
    for (size_t i = 0; i < d->staged.n; i++)
        TITAN_TRY(kv_set(&d->committed, d->staged.kv[i].key, d->staged.kv[i].val, d->staged.kv[i].n));
    return TITAN_OK;
}

static void kv_path(const titan_dist *d, char *out, size_t cap, unsigned epoch, int rank) {
    snprintf(out, cap, "%s/kv-%u-%d", d->rdv, epoch, rank);
}

/* File format: repeated [u32 key length][key][u32 value length][value]. */
static titan_status local_write_epoch(titan_dist *d, unsigned epoch) {
    size_t bytes = 0;
    for (size_t i = 0; i < d->committed.n; i++)
        bytes += 8 + strlen(d->committed.kv[i].key) + d->committed.kv[i].n;
    unsigned char *buf = malloc(bytes ? bytes : 1), *p = buf;
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "bootstrap: fence: out of memory");
    for (size_t i = 0; i < d->committed.n; i++) {
        const dist_kv *e = &d->committed.kv[i];
        uint32_t kl = (uint32_t)strlen(e->key), vl = (uint32_t)e->n;
        memcpy(p, &kl, 4), p += 4;
        memcpy(p, e->key, kl), p += kl;
        memcpy(p, &vl, 4), p += 4;
        memcpy(p, e->val, vl), p += vl;
    }
    char path[PATH_MAX + 32];
    kv_path(d, path, sizeof path, epoch, d->rank);
    /* published whole, without fsync: the directory is scratch space that
     * only lives as long as the job */
    titan_status st = titan_fs_write_scratch(path, buf, bytes);
    free(buf);
    return st;
}

static titan_status local_fence(titan_dist *d) {
    unsigned epoch = d->epoch + 1;
    TITAN_TRY(local_write_epoch(d, epoch));
    double deadline = titan_now_s() + d->timeout_s;
    useconds_t nap = 100;
    for (int next = 0;;) { /* ranks below `next` are known to have arrived */
        char path[PATH_MAX + 32];
        while (next < d->size) {
            kv_path(d, path, sizeof path, epoch, next);
            if (access(path, F_OK) != 0) break;
            next++;
        }
        if (next == d->size) break;
        if (titan_now_s() > deadline) {
            char missing[256] = "";
            size_t used = 0;
            int shown = 0;
            for (int r = next; r < d->size && used + 16 < sizeof missing; r++) {
                kv_path(d, path, sizeof path, epoch, r);
                if (access(path, F_OK) == 0) continue;
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d",
                                         shown++ ? ", " : "", r);
            }
            return titan_error(TITAN_ERR_COMM,
                               "bootstrap fence #%u (rendezvous %s, rank %d of %d): timed out "
                               "after %.1f s waiting for rank%s %s",
                               epoch, d->rdv, d->rank, d->size, d->timeout_s, shown > 1 ? "s" : "",
                               missing);
        }
        usleep(nap);
        if (nap < 20000) nap *= 2;
    }
    d->epoch = epoch;
    return TITAN_OK;
}

titan_status titan_dist_fence(titan_dist *d) {
    switch (d->kind) {
    case TITAN_DIST_PMIX: return dist_pmix_fence(d);
    case TITAN_DIST_LOCAL: return local_fence(d);
    case TITAN_DIST_SINGLETON: d->epoch++; return TITAN_OK;
    }
    return TITAN_OK;
}

static titan_status local_get(titan_dist *d, int rank, const char *key, void *buf, size_t cap,
                              size_t *n) {
    char path[PATH_MAX + 32];
    kv_path(d, path, sizeof path, d->epoch, rank);
    char *data;
    size_t len;
    TITAN_TRY(titan_fs_read_file(path, &data, &len, (size_t)64 << 20));
    const unsigned char *p = (const unsigned char *)data, *end = p + len;
    titan_status st = TITAN_ERR_FAIL;
    size_t klen = strlen(key);
    while (end - p >= 4) {
        uint32_t kl, vl;
        memcpy(&kl, p, 4);
        if ((size_t)(end - p) < 8 + (size_t)kl) break;
        const unsigned char *k = p + 4;
        memcpy(&vl, k + kl, 4);
        const unsigned char *v = k + kl + 4;
        if ((size_t)(end - v) < vl) break;
        if (kl == klen && memcmp(k, key, kl) == 0) {
            dist_kv e = {.val = (unsigned char *)v, .n = vl};
            snprintf(e.key, sizeof e.key, "%s", key);
            st = kv_copy_out(&e, rank, buf, cap, n);
            break;
        }
        p = v + vl;
    }
    free(data);
    if (st == TITAN_ERR_FAIL)
        titan_error(TITAN_ERR_FAIL, "bootstrap: rank %d's %s: not found (in %s)", rank, key, path);
    return st;
}

titan_status titan_dist_get(titan_dist *d, int rank, const char *key, void *buf, size_t cap,
                            size_t *n) {
    TITAN_TRY(check_key(key));
    if (rank < 0 || rank >= d->size)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: get %s from rank %d: ranks are 0..%d", key,
                           rank, d->size - 1);
    if (d->kind == TITAN_DIST_PMIX) return dist_pmix_get(d, rank, key, buf, cap, n);
    if (rank == d->rank || d->kind == TITAN_DIST_SINGLETON) {
        dist_kv *e = kv_find(&d->committed, key);
        if (!e) return titan_error(TITAN_ERR_FAIL, "bootstrap: rank %d's %s: not found", rank, key);
        return kv_copy_out(e, rank, buf, cap, n);
    }
    if (d->epoch == 0)
        return titan_error(TITAN_ERR_USAGE, "bootstrap: get %s from rank %d before any fence", key,
                           rank);
    return local_get(d, rank, key, buf, cap, n);
}
