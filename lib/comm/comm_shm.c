/* comm_shm.c - the shared-memory backend: segments, waiting, failures,
 * world creation and split (layout and protocol: comm_shm.h). */
#define _GNU_SOURCE
#include "comm_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define SLEEP_SLICE_S 0.1
#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

static const comm_backend shm_backend;

/* ---- the bell ---------------------------------------------------------------- */

void shm_ring_bell(shm_state *s) {
    atomic_fetch_add(&s->hdr->bell, 1);
    if (atomic_load(&s->hdr->waiters))
        syscall(SYS_futex, (uint32_t *)&s->hdr->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void bell_sleep(shm_state *s, unsigned seen, double max_s) {
    struct timespec ts = {(time_t)max_s, (long)((max_s - (double)(time_t)max_s) * 1e9)};
    atomic_fetch_add(&s->hdr->waiters, 1);
    /* Returns at once if the bell moved since `seen` was read. */
    syscall(SYS_futex, (uint32_t *)&s->hdr->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub(&s->hdr->waiters, 1);
}

/* Copies src into dst (cap bytes), cut if needed, always terminated. */
static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- failures ------------------------------------------------------------------ */

static void vfail_text(shm_ctx *x, char *out, size_t cap, const char *fmt, va_list ap) {
    char cause[1024];
    vsnprintf(cause, sizeof cause, fmt, ap);
    snprintf(out, cap, "%s on comm %s (rank %d of %d): %s", x->what, x->c->name, x->s->me,
             x->s->n, cause);
}

/* Stops s's communicator (unless another rank did first), saying why. */
static void post_abort(shm_state *s, const char *text) {
    shm_header *h = s->hdr;
    unsigned zero = 0;
    if (atomic_compare_exchange_strong(&h->abort_claim, &zero, (unsigned)s->me + 1)) {
        copy_str(h->abort_msg, sizeof h->abort_msg, text);
        atomic_store(&h->abort_by, (unsigned)s->me + 1);
        shm_ring_bell(s);
    }
}

titan_status shm_fail(shm_ctx *x, const char *fmt, ...) {
    char text[1536];
    va_list ap;
    va_start(ap, fmt);
    vfail_text(x, text, sizeof text, fmt, ap);
    va_end(ap);
    post_abort(x->s, text);
    if (x->s->world) post_abort(x->s->world, text); /* its whole family stops */
    return titan_error(TITAN_ERR_COMM, "%s", text);
}

/* "1, 3" from a mask. */
static void rank_list(uint64_t mask, char *out, size_t cap, int *count) {
    size_t used = 0;
    int k = 0;
    out[0] = '\0';
    for (int r = 0; r < 64 && used + 8 < cap; r++)
        if (mask >> r & 1)
            used += (size_t)snprintf(out + used, cap - used, "%s%d", k++ ? ", " : "", r);
    *count = k;
}

/* Gone: no such process, or a zombie its parent has not reaped yet (a
 * launcher that waits for all its children only at the end). */
static int process_gone(int32_t pid) {
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
    return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

titan_status shm_wait(shm_ctx *x, shm_missing_fn missing, void *arg, shm_describe_fn describe) {
    shm_state *s = x->s;
    shm_header *h = s->hdr;
    int spins = 0;
    double next_pid_check = 0;
    /* The timeout counts from the start of this wait, so an operation may
     * take long as long as the ranks keep moving; a stuck one is found
     * within the timeout of its last step. */
    x->deadline = titan_now_s() + x->c->timeout_s;
    for (;;) {
        unsigned seen = atomic_load(&h->bell);
        /* A stopped communicator fails every wait, even one whose condition
         * holds: the ranks' phases may pair different calls by now. */
        unsigned by = atomic_load(&h->abort_by);
        if (by) /* not shm_fail: the reason is already posted */
            return titan_error(TITAN_ERR_COMM, "%s on comm %s (rank %d of %d): stopped because "
                               "rank %u failed: %s", x->what, x->c->name, s->me, s->n, by - 1,
                               h->abort_msg);
        /* Its world stopped: another communicator of the job failed (the
         * world's rank numbers). */
        unsigned wby = s->world ? atomic_load(&s->world->hdr->abort_by) : 0;
        if (wby)
            return titan_error(TITAN_ERR_COMM, "%s on comm %s (rank %d of %d): stopped because "
                               "world rank %u failed: %s", x->what, x->c->name, s->me, s->n, wby - 1,
                               s->world->hdr->abort_msg);
        uint64_t miss = missing(x, arg);
        if (!miss) return TITAN_OK;
        if (spins < s->spin) {
            spins++;
            __builtin_ia32_pause();
            continue;
        }
        double now = titan_now_s();
        if (s->pid_check && now >= next_pid_check) {
            for (int r = 0; r < s->n; r++) {
                if (!(miss >> r & 1) || !process_gone(s->ranks[r].pid)) continue;
                /* It may have done its part, then exited, since miss was read. */
                if (!(missing(x, arg) >> r & 1)) continue;
                return shm_fail(x, "rank %d (pid %d) exited or was killed", r, (int)s->ranks[r].pid);
            }
            next_pid_check = now + SLEEP_SLICE_S;
        }
        if (now >= x->deadline) {
            char list[256], detail[768] = "";
            int k;
            rank_list(miss, list, sizeof list, &k);
            size_t used = 0;
            for (int r = 0; r < s->n && describe && used + 64 < sizeof detail; r++) {
                if (!(miss >> r & 1)) continue;
                char d[160];
                describe(x, r, d, sizeof d);
                used += (size_t)snprintf(detail + used, sizeof detail - used, "%s%s",
                                         used ? "; " : " (", d);
            }
            if (used) snprintf(detail + used, sizeof detail - used, ")");
            return shm_fail(x, "timed out after %.1f s waiting for rank%s %s%s", x->c->timeout_s,
                            k > 1 ? "s" : "", list, detail);
        }
        double left = x->deadline - now;
        bell_sleep(s, seen, left < SLEEP_SLICE_S ? left : SLEEP_SLICE_S);
    }
}

/* ---- segments ------------------------------------------------------------------- */

static size_t layout(shm_header *h, int n, size_t half) {
    h->nranks = (uint32_t)n;
    h->half_bytes = half;
    /* send/recv rings: 256 KiB per pair, less with many ranks (n*n of them) */
    size_t ring = ((size_t)8 << 20) / ((size_t)n * (size_t)n);
    ring = ring > SHM_RING_BYTES ? SHM_RING_BYTES : ring < 16384 ? 16384 : ring / 4096 * 4096;
    h->ring_bytes = ring;
    h->rank_off = ALIGN_UP(sizeof(shm_header), 4096);
    h->chan_off = ALIGN_UP(h->rank_off + (size_t)n * sizeof(shm_rank), 4096);
    h->slot_off = ALIGN_UP(h->chan_off + (size_t)n * (size_t)n * sizeof(shm_chan), 4096);
    h->ring_off = ALIGN_UP(h->slot_off + (size_t)n * 2 * half, 4096);
    h->seg_bytes = h->ring_off + (size_t)n * (size_t)n * ring;
    return h->seg_bytes;
}

size_t comm_shm_segment_bytes(int n, size_t chunk_bytes) {
    shm_header proto;
    memset(&proto, 0, sizeof proto);
    return layout(&proto, n, chunk_bytes);
}

static void state_bind(shm_state *s, void *base, size_t bytes, int me) {
    s->hdr = base;
    s->bytes = bytes;
    s->ranks = (shm_rank *)((char *)base + s->hdr->rank_off);
    s->chans = (shm_chan *)((char *)base + s->hdr->chan_off);
    s->slots = (unsigned char *)base + s->hdr->slot_off;
    s->rings = (unsigned char *)base + s->hdr->ring_off;
    s->me = me;
    s->n = (int)s->hdr->nranks;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* Spinning only helps when every rank has a core; oversubscribed, it
     * steals the core of the rank being waited for. */
    s->spin = cpus >= 2L * s->n ? 2000 : 0;
    shm_rank *r = &s->ranks[me];
    r->pid = (int32_t)getpid();
    gethostname(r->host, sizeof r->host - 1);
}

static titan_status seg_create(shm_state *s, const char *name, int n, size_t half, int me) {
    shm_header proto;
    memset(&proto, 0, sizeof proto);
    size_t bytes = layout(&proto, n, half);
    snprintf(s->seg, sizeof s->seg, "%s", name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return titan_error(TITAN_ERR_IO, "shared memory %s: create: %s", name, strerror(errno));
    int rc = posix_fallocate(fd, 0, (off_t)bytes);
    if (rc != 0) {
        close(fd);
        shm_unlink(name);
        titan_error(TITAN_ERR_NOMEM, "shared memory %s: reserving %zu bytes for %d ranks: %s",
                    name, bytes, n, strerror(rc));
        titan_error_hint("/dev/shm is too small: enlarge it (docker --shm-size) or lower the "
                         "communicator's chunk_bytes");
        return TITAN_ERR_NOMEM;
    }
    void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        shm_unlink(name);
        return titan_error(TITAN_ERR_NOMEM, "shared memory %s: mmap %zu bytes: %s", name, bytes,
                           strerror(errno));
    }
    memcpy(base, &proto, sizeof proto); /* fallocate left the rest zero */
    ((shm_header *)base)->magic = SHM_MAGIC;
    ((shm_header *)base)->version = SHM_VERSION;
    state_bind(s, base, bytes, me);
    return TITAN_OK;
}

static titan_status seg_open(shm_state *s, const char *name, int n, int me) {
    snprintf(s->seg, sizeof s->seg, "%s", name);
    s->unlinked = 1; /* not ours to unlink */
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return titan_error(TITAN_ERR_IO, "shared memory %s: open: %s", name, strerror(errno));
    struct stat sb;
    void *base = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= sizeof(shm_header))
        base = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return titan_error(TITAN_ERR_IO, "shared memory %s: map: %s", name, strerror(errno));
    shm_header *h = base;
    if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || (int)h->nranks != n ||
        h->seg_bytes != (uint64_t)sb.st_size) {
        munmap(base, (size_t)sb.st_size);
        return titan_error(TITAN_ERR_FORMAT, "shared memory %s: not a titan segment for %d ranks",
                           name, n);
    }
    state_bind(s, base, (size_t)sb.st_size, me);
    return TITAN_OK;
}

static void seg_unlink(shm_state *s) {
    if (!s->unlinked && s->seg[0]) shm_unlink(s->seg);
    s->unlinked = 1;
}

/* A split's state goes with its communicator and lets go of its world; a
 * world's goes with the last of its communicator and the splits. */
static void state_free(shm_state *s) {
    if (!s) return;
    seg_unlink(s);
    shm_state *w = s->world;
    if (!w && atomic_fetch_sub(&s->refs, 1) > 1) return;
    if (s->hdr) munmap(s->hdr, s->bytes);
    free(s);
    if (w) state_free(w);
}

/* After every rank has mapped: watch peers' pids only if all are visible
 * (a peer in another pid namespace would look dead). */
static void enable_pid_check(shm_state *s) {
    s->pid_check = 1;
    for (int r = 0; r < s->n; r++)
        if (r != s->me && (s->ranks[r].pid <= 0 || process_gone(s->ranks[r].pid))) s->pid_check = 0;
}

static titan_status make_comm(shm_state *s, const char *name, double timeout, size_t chunk,
                              titan_comm **out) {
    titan_comm *c = comm_new(name, s->me, s->n, timeout, chunk, &shm_backend, s);
    if (!c) return titan_error(TITAN_ERR_NOMEM, "comm %s: out of memory", name);
    *out = c;
    return TITAN_OK;
}

/* ---- the world communicator ---------------------------------------------------------- */

static int world_inits; /* world communicators made by this process; the same count on every rank */

/* Every rank puts its status; after a fence all know whether all succeeded. */
static titan_status agree(titan_dist *d, const char *key, titan_status mine, const char *comm) {
    char val[640], msg[600];
    copy_str(msg, sizeof msg, mine == TITAN_OK ? "" : titan_error_message());
    snprintf(val, sizeof val, "%d %s", (int)mine, msg);
    titan_status st = titan_dist_put(d, key, val, strlen(val) + 1);
    if (st == TITAN_OK) st = titan_dist_commit(d);
    if (st == TITAN_OK) st = titan_dist_fence(d);
    if (st != TITAN_OK) return st;
    if (mine != TITAN_OK) return titan_error(mine, "%s", msg);
    for (int r = 0; r < titan_dist_world_size(d); r++) {
        size_t n;
        if ((st = titan_dist_get(d, r, key, val, sizeof val - 1, &n)) != TITAN_OK) return st;
        val[n] = '\0';
        if (atoi(val) != 0)
            return titan_error(TITAN_ERR_COMM, "comm %s: rank %d failed to join: %s", comm, r,
                               strchr(val, ' ') ? strchr(val, ' ') + 1 : val);
    }
    return TITAN_OK;
}

titan_status comm_shm_init_world(titan_dist *d, const char *name, double timeout_s,
                                 size_t chunk_bytes, titan_comm **out) {
    int me = titan_dist_rank(d), n = titan_dist_world_size(d);
    if (n > SHM_MAX_RANKS)
        return titan_error(TITAN_ERR_USAGE, "comm %s: %d ranks: the shared-memory backend takes "
                           "at most %d", name, n, SHM_MAX_RANKS);
    shm_state *s = calloc(1, sizeof *s);
    if (!s) return titan_error(TITAN_ERR_NOMEM, "comm %s: out of memory", name);
    atomic_init(&s->refs, 1);
    unsigned k = (unsigned)world_inits++;
    char key[64], seg[128], host[64] = "";
    gethostname(host, sizeof host - 1);

    /* 1: hosts, and the segment rank 0 made */
    titan_status mine = TITAN_OK;
    snprintf(seg, sizeof seg, "/titan-%s-w%u-%lx", titan_dist_job_id(d), k,
             (unsigned long)getpid() & 0xfffff);
    if (me == 0) mine = seg_create(s, seg, n, chunk_bytes, 0);
    snprintf(key, sizeof key, "titan.comm%u.host", k);
    titan_status st = titan_dist_put(d, key, host, strlen(host) + 1);
    snprintf(key, sizeof key, "titan.comm%u.seg", k);
    if (st == TITAN_OK) st = titan_dist_put(d, key, seg, strlen(seg) + 1);
    snprintf(key, sizeof key, "titan.comm%u.created", k);
    if (st == TITAN_OK) st = agree(d, key, mine, name);
    for (int r = 0; st == TITAN_OK && r < n; r++) {
        char other[64];
        snprintf(key, sizeof key, "titan.comm%u.host", k);
        if ((st = titan_dist_get(d, r, key, other, sizeof other, NULL)) != TITAN_OK) break;
        if (strcmp(other, host) != 0) {
            st = titan_error(TITAN_ERR_USAGE, "comm %s: rank %d runs on %s, rank %d on %s: the "
                             "shared-memory backend needs all ranks on one host", name, r, other,
                             me, host);
        }
    }
    /* 2: everyone maps it */
    if (st == TITAN_OK) {
        mine = TITAN_OK;
        snprintf(key, sizeof key, "titan.comm%u.seg", k);
        if (me != 0) mine = titan_dist_get(d, 0, key, seg, sizeof seg, NULL);
        if (me != 0 && mine == TITAN_OK) mine = seg_open(s, seg, n, me);
        snprintf(key, sizeof key, "titan.comm%u.mapped", k);
        st = agree(d, key, mine, name);
    }
    /* 3: all mapped (or gave up): the name is no longer needed */
    seg_unlink(s);
    if (st == TITAN_OK) {
        enable_pid_check(s);
        st = make_comm(s, name, timeout_s, chunk_bytes, out);
    }
    if (st != TITAN_OK) state_free(s);
    return st;
}

/* ---- split ------------------------------------------------------------------------------ */

/* An all_gather of one int per rank over c, run inline (we are c's running operation). */
static titan_status gather_ints(titan_comm *c, const int *mine, int per_rank, int *all) {
    size_t counts[SHM_MAX_RANKS];
    for (int r = 0; r < c->size; r++) counts[r] = (size_t)per_rank;
    comm_op op = {.kind = COMM_ALL_GATHER, .dtype = TITAN_DTYPE_U32, .send = mine, .recv = all,
                  .counts = counts};
    return shm_backend.run(c, &op);
}

static titan_status shm_split(titan_comm *c, const comm_op *op) {
    shm_state *ps = c->impl;
    int n = c->size, me = c->rank;
    int mine[2] = {op->color, op->key}, all[2 * SHM_MAX_RANKS];
    TITAN_TRY(gather_ints(c, mine, 2, all));
    unsigned split_no = ps->splits++;

    /* members of my color, by (key, parent rank) */
    int members[SHM_MAX_RANKS], m = 0, newrank = -1;
    if (op->color >= 0) {
        for (int r = 0; r < n; r++)
            if (all[2 * r] == op->color) members[m++] = r;
        for (int i = 1; i < m; i++) /* insertion sort: stable, so ties keep rank order */
            for (int j = i; j > 0 && all[2 * members[j - 1] + 1] > all[2 * members[j] + 1]; j--) {
                int t = members[j];
                members[j] = members[j - 1];
                members[j - 1] = t;
            }
        for (int i = 0; i < m; i++)
            if (members[i] == me) newrank = i;
    }
    shm_state *s = NULL;
    char seg[128] = "";
    titan_status st = TITAN_OK;
    if (op->color >= 0) {
        s = calloc(1, sizeof *s);
        if (!s) st = titan_error(TITAN_ERR_NOMEM, "split of comm %s: out of memory", c->name);
        /* Unique per parent, split call and group: the parent's name is. */
        char base[96];
        snprintf(base, sizeof base, "%.95s", ps->seg);
        snprintf(seg, sizeof seg, "%s.%u.%d", base, split_no, members[0]);
        if (st == TITAN_OK && newrank == 0)
            st = seg_create(s, seg, m, op->count ? ALIGN_UP(op->count, 4096) : ps->hdr->half_bytes, 0);
    }
    /* creation, then mapping, each followed by an agreement over the parent */
    for (int round = 0; round < 2; round++) {
        if (round == 1 && st == TITAN_OK && s && newrank > 0) st = seg_open(s, seg, m, newrank);
        int ok = st == TITAN_OK, oks[SHM_MAX_RANKS];
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", titan_error_message());
        titan_status gst = gather_ints(c, &ok, 1, oks);
        if (gst != TITAN_OK) {
            state_free(s);
            return gst;
        }
        if (st != TITAN_OK) {
            state_free(s);
            return titan_error(st, "%s", msg);
        }
        for (int r = 0; r < n; r++)
            if (!oks[r]) {
                state_free(s);
                return titan_error(TITAN_ERR_COMM, "split of comm %s: rank %d could not %s its "
                                   "group's shared memory (see its message)", c->name, r,
                                   round == 0 ? "create" : "map");
            }
    }
    if (!s) return TITAN_OK; /* color < 0: in no group */
    seg_unlink(s);
    enable_pid_check(s);
    s->world = ps->world ? ps->world : ps;
    atomic_fetch_add(&s->world->refs, 1);
    st = make_comm(s, op->name, c->timeout_s, c->chunk_bytes, op->out);
    if (st != TITAN_OK) state_free(s);
    return st;
}

/* ---- the backend table --------------------------------------------------------------------- */

static titan_status shm_run(titan_comm *c, const comm_op *op) {
    if (op->kind == COMM_SPLIT) return shm_split(c, op);
    shm_state *s = c->impl;
    shm_ctx x = {.c = c, .s = s, .op = op};
    int p2p = op->kind == COMM_SEND || op->kind == COMM_RECV || op->kind == COMM_SEND_RECV;
    if (p2p) return shm_run_p2p(&x);
    x.seq = atomic_load(&c->seq) + 1;
    comm_describe_op(op, x.seq, s->n, x.what, sizeof x.what);
    titan_status st = shm_run_collective(&x);
    if (st == TITAN_OK) atomic_store(&c->seq, x.seq);
    return st;
}

static void shm_free(titan_comm *c) { state_free(c->impl); }

/* ---- shared windows: a split's slots are the buffers, its progress words the flags ---- */

static void *shm_window_buf(titan_comm *w, int rank, int half) { return shm_slot(w->impl, rank, half); }

static void shm_window_post(titan_comm *w, uint64_t value) {
    shm_state *s = w->impl;
    atomic_store_explicit(&s->ranks[s->me].progress, value, memory_order_release);
    shm_ring_bell(s);
}

typedef struct {
    int rank;
    uint64_t value;
} window_want;

/* Reached, or closed short of it: either ends the wait (the caller tells which). */
static uint64_t window_missing(shm_ctx *x, void *arg) {
    const window_want *w = arg;
    uint64_t v = atomic_load_explicit(&x->s->ranks[w->rank].progress, memory_order_acquire);
    return (v & ~COMM_WINDOW_CLOSED) >= w->value || (v & COMM_WINDOW_CLOSED) ? 0 : (uint64_t)1 << w->rank;
}

static void window_describe(shm_ctx *x, int r, char *buf, size_t cap) {
    snprintf(buf, cap, "rank %d posted %llu", r,
             (unsigned long long)atomic_load(&x->s->ranks[r].progress));
}

/* Its communicator or its world stopped (shm_wait then says why). */
static int stopped(const shm_state *s) {
    return atomic_load(&s->hdr->abort_by) || (s->world && atomic_load(&s->world->hdr->abort_by));
}

static titan_status shm_window_wait(titan_comm *w, int rank, uint64_t value, const char *what) {
    shm_state *s = w->impl;
    window_want want = {rank, value};
    uint64_t v = atomic_load_explicit(&s->ranks[rank].progress, memory_order_acquire);
    if (v < value || stopped(s)) { /* else the common case: reached, nothing stopped (no clock read) */
        shm_ctx x = {.c = w, .s = s};
        snprintf(x.what, sizeof x.what, "%s (window value %llu of rank %d)", what, (unsigned long long)value, rank);
        TITAN_TRY(shm_wait(&x, window_missing, &want, window_describe));
        v = atomic_load_explicit(&s->ranks[rank].progress, memory_order_acquire);
    }
    if ((v & ~COMM_WINDOW_CLOSED) < value) /* a rank that failed and freed its window: its block never came */
        return titan_error(TITAN_ERR_COMM, "%s (window value %llu of rank %d) on comm %s (rank %d of %d): rank %d "
                           "closed its window at value %llu", what, (unsigned long long)value, rank, w->name, s->me,
                           s->n, rank, (unsigned long long)(v & ~COMM_WINDOW_CLOSED));
    return TITAN_OK;
}

static int shm_window_closed(titan_comm *w, int rank, double seconds) {
    shm_state *s = w->impl;
    double deadline = titan_now_s() + seconds;
    for (;;) {
        unsigned seen = atomic_load(&s->hdr->bell);
        if (atomic_load_explicit(&s->ranks[rank].progress, memory_order_acquire) & COMM_WINDOW_CLOSED) return 1;
        if (s->pid_check && process_gone(s->ranks[rank].pid)) return 1; /* its mappings went with it */
        double now = titan_now_s();
        if (now >= deadline) return 0;
        double left = deadline - now;
        bell_sleep(s, seen, left < SLEEP_SLICE_S ? left : SLEEP_SLICE_S);
    }
}

static const comm_backend shm_backend = {"shm", shm_run, shm_free, 0, shm_window_buf, shm_window_post,
                                         shm_window_wait, shm_window_closed};
