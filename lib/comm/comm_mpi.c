/* comm_mpi.c - the mpi backend (comm.h): comm.c's backend table over MPI
 * point-to-point messages, the MPI calls themselves in libtitan-mpi.so
 * (comm_mpi_api.h), opened here on first use so that no tool links MPI.
 *
 * Protocol, per communicator (an MPI communicator of its own, so that
 * communicators never match each other's messages). A collective first
 * sends its signature (operation, dtype, count, root, reduction and
 * sequence number) to every other rank and receives theirs: a mismatch
 * fails on every rank before any data moves, and a rank whose signature
 * does not come is the one named when the wait times out. Then:
 *   reduce_scatter  rounds of chunk_bytes per part: each rank sends every
 *                   other rank that rank's slice of the round and reduces
 *                   the slices it receives of its own part with its own,
 *                   in rank order (comm_reduce.c, as shm does: the same bits)
 *   all_reduce      reduce_scatter over balanced parts, then all_gather
 *   all_gather      each rank sends its part to every other rank
 *   all_to_all      block q to rank q
 *   broadcast       the root sends to every other rank
 *   barrier         the signatures alone
 * Sends and receives (tag TAG_P2P) carry a header (bytes, message number
 * per pair and direction) checked before the data is received. Messages
 * over TITAN_MPI_MSG_MAX go in pieces. Every wait polls its requests
 * until a deadline counted from the last request that completed, and
 * watches its family's failure channel (a world and its splits share one):
 * a failing rank sends its reason there (TAG_ABORT) to every other rank, so
 * they stop at once, whichever communicator they wait on, instead of each
 * waiting out its own timeout. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_impl.h"
#include "comm_mpi_api.h"
#include "core/clock.h"
#include "core/plugin.h"

#define MPI_LIB "libtitan-mpi.so"
#define MSG_CAP 1024

enum { TAG_COLL = 1, TAG_P2P = 2, TAG_ABORT = 3 };

typedef struct {
    titan_mpi_comm *h;
    int n, me;
    uint64_t *sent, *recvd;       /* p2p messages per peer and direction */
    /* requests of the operation under way */
    titan_mpi_req **reqs;
    int *req_peer;
    size_t nreq, cap_req;
    comm_sig mine, *theirs;        /* [n] */
    uint64_t hdr_out[2], hdr_in[2];
    size_t *off, *len;            /* [n] parts of an all_reduce */
    const unsigned char **src;    /* [n] */
    unsigned char *scratch;
    size_t scratch_bytes;
    char *missing;                /* [n] */
    struct mpi_family *fam;       /* shared with its world and splits */
} mpi_state;

/* One operation under way: for messages. */
typedef struct {
    titan_comm *c;
    mpi_state *s;
    const comm_op *op;
    uint64_t seq;
    int in_sigs;       /* waiting for the signatures */
    char what[192];    /* "all_reduce #7 (f32 x 1048576, sum)" */
} mpi_ctx;

static const comm_backend mpi_backend;
static const titan_mpi_api *api;
static atomic_int any_failed; /* skip MPI_Finalize: a dead peer may never match our requests */

/* A family: a world communicator and every communicator split from it,
 * which fail together, as the shm backend's do. Each has a failure channel
 * of its own: an MPI communicator over the world's ranks, apart from the
 * family's (which may be freed, or never include the rank that failed).
 * The family's first failure in a process (a communicator's, or
 * titan_comm_exiting's) sends its reason to every other rank there; a
 * receive posted on it since the world began brings theirs. Either stops
 * every communicator of the family in this process. */
typedef struct mpi_family {
    int refs;                   /* its communicators, and `current` */
    titan_mpi_comm *h;
    int n, me;
    titan_mpi_req *rx, **tx;    /* [n] */
    char in[MSG_CAP], out[MSG_CAP];
    int stopped;                /* a failure here, or a notice came */
    const mpi_state *origin;    /* the communicator that failed here (it reports itself) */
    char why[MSG_CAP + 64];     /* "world rank 2 failed: ..." / "comm tp failed: ..." */
} mpi_family;

static pthread_mutex_t family_lock = PTHREAD_MUTEX_INITIALIZER; /* any thread may fail or poll */
static mpi_family *current; /* the newest world's, for titan_comm_exiting */
static void family_release(mpi_family *f);

/* ---- the library ---------------------------------------------------------------------- */

/* RTLD_GLOBAL: MPI libraries open components of their own that resolve
 * the library's symbols through the global scope. */
static void *open_lib(const char *name) {
    char what[128];
    snprintf(what, sizeof what, "comm %s: mpi", name);
    const titan_plugin mpi = {
        .file = MPI_LIB, .env = "TITAN_MPI_LIB", .what = what, .missing = "MPI communicator",
        .hint = "build where mpicc is installed (Debian: libopenmpi-dev, scripts/install-deps.sh), or "
                "set TITAN_MPI_LIB to the library",
        .flags = RTLD_NOW | RTLD_GLOBAL};
    return titan_plugin_open(&mpi);
}

static const titan_mpi_api *load_api(const char *name) {
    if (api) return api;
    void *h = open_lib(name);
    if (!h) return NULL;
    titan_mpi_api_fn fn = (titan_mpi_api_fn)dlsym(h, TITAN_MPI_API_SYMBOL);
    if (!fn) {
        titan_error(TITAN_ERR_USAGE, "comm %s: mpi: %s has no %s", name, MPI_LIB, TITAN_MPI_API_SYMBOL);
        return NULL;
    }
    const titan_mpi_api *a = fn();
    if (a->size != sizeof *a) {
        titan_error(TITAN_ERR_USAGE, "comm %s: mpi: %s was built from another comm_mpi_api.h "
                    "(table of %zu bytes, this program's has %zu): rebuild both", name, MPI_LIB,
                    a->size, sizeof *a);
        return NULL;
    }
    api = a;
    return api;
}

static void finalize_at_exit(void) {
    if (!api || atomic_load(&any_failed)) return; /* a failed peer would never join MPI_Finalize */
    pthread_mutex_lock(&family_lock);
    family_release(current);
    current = NULL;
    pthread_mutex_unlock(&family_lock);
    api->finalize();
}

/* ---- the failure channel (family) ------------------------------------------------------ */

/* Under family_lock. A stopped family stays: a peer that failed may never
 * match its requests. */
static void family_release(mpi_family *f) {
    if (!f || --f->refs > 0 || f->stopped) return;
    if (f->rx) api->cancel(&f->rx);
    if (f->h) api->comm_free(f->h);
    free(f->tx);
    free(f);
}

/* A new world's family (a collective: every rank is there). */
static titan_status family_open(int me, int n, const char *name, mpi_family **out) {
    char msg[MSG_CAP] = "out of memory";
    mpi_family *f = calloc(1, sizeof *f);
    int ok = f && (f->tx = calloc((size_t)n, sizeof *f->tx)) && api->world(me, &f->h, msg, sizeof msg) == 0 &&
             (n == 1 || api->irecv(f->h, f->in, sizeof f->in, -1, TAG_ABORT, &f->rx, msg, sizeof msg) == 0);
    if (!ok) {
        if (f && f->h) api->comm_free(f->h);
        if (f) free(f->tx);
        free(f);
        return titan_error(TITAN_ERR_COMM, "comm %s (rank %d of %d, mpi): failure channel: %s", name, me, n,
                           msg);
    }
    f->me = me;
    f->n = n;
    f->refs = 2; /* the world's state, and current */
    pthread_mutex_lock(&family_lock);
    family_release(current);
    current = f;
    pthread_mutex_unlock(&family_lock);
    *out = f;
    return TITAN_OK;
}

/* A peer's notice, if one came. Under family_lock. */
static void poll_family(mpi_family *f) {
    if (!f->rx || f->stopped) return;
    size_t got = 0;
    int from = -1;
    char msg[MSG_CAP];
    int rc = api->test(&f->rx, &got, &from, msg, sizeof msg);
    if (rc == 0) return;
    f->stopped = 1;
    f->origin = NULL;
    f->in[sizeof f->in - 1] = '\0';
    if (rc < 0) snprintf(f->why, sizeof f->why, "watching for the other ranks' failures failed: %s", msg);
    else snprintf(f->why, sizeof f->why, "world rank %d failed: %s", from, f->in);
}

/* The family's first failure in this process (origin: the communicator it
 * happened on, named comm_name; NULL for the process itself): every other
 * rank is told why. */
static void tell_family(mpi_family *f, const mpi_state *origin, const char *text, const char *comm_name) {
    atomic_store(&any_failed, 1);
    pthread_mutex_lock(&family_lock);
    poll_family(f); /* told first: the failure is theirs, not ours to announce */
    if (!f->stopped) {
        f->stopped = 1;
        f->origin = origin;
        if (comm_name) snprintf(f->why, sizeof f->why, "comm %s failed: %s", comm_name, text);
        else snprintf(f->why, sizeof f->why, "%s", text);
        snprintf(f->out, sizeof f->out, "%s", text);
        char msg[MSG_CAP];
        for (int r = 0; r < f->n; r++)
            if (r != f->me)
                api->isend(f->h, f->out, strlen(f->out) + 1, r, TAG_ABORT, &f->tx[r], msg, sizeof msg);
    }
    pthread_mutex_unlock(&family_lock);
}

/* Drives the notices out before the process exits (MPI moves messages
 * inside its calls), for at most `seconds`. */
static void flush_family(mpi_family *f, double seconds) {
    double end = titan_now_s() + seconds;
    for (;;) {
        int left = 0;
        pthread_mutex_lock(&family_lock);
        for (int r = 0; r < f->n; r++) {
            char msg[MSG_CAP];
            if (f->tx[r] && api->test(&f->tx[r], NULL, NULL, msg, sizeof msg) == 0) left++;
        }
        pthread_mutex_unlock(&family_lock);
        if (!left || titan_now_s() >= end) return;
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
}

void comm_mpi_exiting(titan_status st) {
    pthread_mutex_lock(&family_lock);
    mpi_family *f = current;
    pthread_mutex_unlock(&family_lock);
    if (st == TITAN_OK || !f) return;
    const char *msg = titan_error_message();
    char text[MSG_CAP];
    snprintf(text, sizeof text, "rank %d exits with status %d%s%s", f->me, (int)st, msg[0] ? ": " : "",
             msg);
    tell_family(f, NULL, text, NULL);
    flush_family(f, 2.0);
}

/* ---- messages, waits, failure --------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static titan_status fail(mpi_ctx *x, const char *fmt, ...) {
    mpi_state *s = x->s;
    char cause[MSG_CAP - 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cause, sizeof cause, fmt, ap);
    va_end(ap);
    atomic_store(&any_failed, 1);
    titan_error(TITAN_ERR_COMM, "%s on comm %s (rank %d of %d, mpi): %s", x->what, x->c->name,
                s->me, s->n, cause);
    tell_family(s->fam, s, titan_error_message(), x->c->name);
    if (strstr(cause, "timed out"))
        titan_error_hint("titan-trace hang RUN names the rank that never called it from every rank's "
                         "flight recorder dump (written as the ranks fail or are stopped)");
    return TITAN_ERR_COMM;
}

static titan_status post(mpi_ctx *x, int send, const void *buf, size_t bytes, int peer, int tag) {
    mpi_state *s = x->s;
    const unsigned char *p = buf;
    do { /* pieces of at most TITAN_MPI_MSG_MAX; an empty message is one piece */
        size_t k = bytes < TITAN_MPI_MSG_MAX ? bytes : TITAN_MPI_MSG_MAX;
        if (s->nreq == s->cap_req) {
            size_t cap = s->cap_req ? 2 * s->cap_req : 64;
            titan_mpi_req **r = realloc(s->reqs, cap * sizeof *r);
            if (r) s->reqs = r;
            int *q = r ? realloc(s->req_peer, cap * sizeof *q) : NULL;
            if (!q) return fail(x, "out of memory for requests");
            s->req_peer = q;
            s->cap_req = cap;
        }
        char msg[MSG_CAP];
        titan_mpi_req **slot = &s->reqs[s->nreq];
        int rc = send ? api->isend(s->h, p, k, peer, tag, slot, msg, sizeof msg)
                      : api->irecv(s->h, (void *)p, k, peer, tag, slot, msg, sizeof msg);
        if (rc) return fail(x, "%s rank %d: %s", send ? "send to" : "receive from", peer, msg);
        s->req_peer[s->nreq++] = peer;
        p += k;
        bytes -= k;
    } while (bytes);
    return TITAN_OK;
}

static titan_status send_to(mpi_ctx *x, const void *buf, size_t bytes, int peer, int tag) {
    return post(x, 1, buf, bytes, peer, tag);
}
static titan_status recv_from(mpi_ctx *x, void *buf, size_t bytes, int peer, int tag) {
    return post(x, 0, buf, bytes, peer, tag);
}

/* A failure elsewhere (another rank's notice, or another communicator of
 * this process): this operation stops with its reason. */
static titan_status check_told(mpi_ctx *x) {
    mpi_state *s = x->s;
    mpi_family *f = s->fam;
    pthread_mutex_lock(&family_lock);
    poll_family(f);
    int stop = f->stopped && f->origin != s;
    char why[sizeof f->why];
    if (stop) snprintf(why, sizeof why, "%s", f->why);
    pthread_mutex_unlock(&family_lock);
    if (!stop) return TITAN_OK;
    atomic_store(&any_failed, 1);
    return titan_error(TITAN_ERR_COMM, "%s on comm %s (rank %d of %d, mpi): stopped because %s", x->what,
                       x->c->name, s->me, s->n, why);
}

static void describe_missing(mpi_ctx *x, char *buf, size_t cap) {
    mpi_state *s = x->s;
    size_t used = 0;
    int k = 0;
    for (int r = 0; r < s->n; r++) k += s->missing[r];
    used += (size_t)snprintf(buf, cap, "rank%s ", k > 1 ? "s" : "");
    for (int r = 0, i = 0; r < s->n && used < cap; r++)
        if (s->missing[r]) used += (size_t)snprintf(buf + used, cap - used, "%s%d", i++ ? ", " : "", r);
    if (used >= cap) return;
    if (x->in_sigs)
        snprintf(buf + used, cap - used, " (%s not started #%llu)", k > 1 ? "they have" : "it has",
                 (unsigned long long)x->seq);
    else if (x->op->kind != COMM_SEND && x->op->kind != COMM_RECV && x->op->kind != COMM_SEND_RECV)
        snprintf(buf + used, cap - used, " (inside #%llu, behind)", (unsigned long long)x->seq);
}

/* Waits for requests first.. of the operation; all of them done (first 0):
 * the list is emptied. The deadline counts from the last completion. */
static titan_status wait_from(mpi_ctx *x, size_t first) {
    mpi_state *s = x->s;
    double timeout = x->c->timeout_s, deadline = titan_now_s() + timeout;
    unsigned idle = 0;
    for (;;) {
        /* a stopped family fails every wait, even one whose messages came:
         * the ranks may pair different calls by now */
        TITAN_TRY(check_told(x));
        size_t left = 0;
        int moved = 0;
        for (size_t i = first; i < s->nreq; i++) {
            if (!s->reqs[i]) continue;
            char msg[MSG_CAP];
            int rc = api->test(&s->reqs[i], NULL, NULL, msg, sizeof msg);
            if (rc < 0) return fail(x, "a message with rank %d failed: %s", s->req_peer[i], msg);
            if (rc > 0) moved = 1;
            else left++;
        }
        if (!left) break;
        double now = titan_now_s();
        if (moved) {
            deadline = now + timeout;
            idle = 0;
            continue;
        }
        if (now >= deadline) {
            memset(s->missing, 0, (size_t)s->n);
            for (size_t i = first; i < s->nreq; i++)
                if (s->reqs[i]) s->missing[s->req_peer[i]] = 1;
            char who[512];
            describe_missing(x, who, sizeof who);
            return fail(x, "timed out after %.1f s waiting for %s", timeout, who);
        }
        /* MPI progresses inside its calls: poll, then back off to at most
         * 200 us between polls (ranks may outnumber the cores). */
        if (++idle > 64) {
            unsigned us = idle < 1000 ? 20 : 200;
            struct timespec ts = {0, (long)us * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (first == 0) s->nreq = 0;
    return TITAN_OK;
}

static titan_status wait_all(mpi_ctx *x) { return wait_from(x, 0); }

/* ---- collectives ----------------------------------------------------------------------- */

/* Every rank's signature against this one's. */
static titan_status exchange_sigs(mpi_ctx *x) {
    mpi_state *s = x->s;
    s->mine = comm_sig_of(x->op, x->seq, s->n);
    x->in_sigs = 1;
    for (int r = 0; r < s->n; r++)
        if (r != s->me) {
            TITAN_TRY(recv_from(x, &s->theirs[r], sizeof(comm_sig), r, TAG_COLL));
            TITAN_TRY(send_to(x, &s->mine, sizeof(comm_sig), r, TAG_COLL));
        }
    TITAN_TRY(wait_all(x));
    x->in_sigs = 0;
    for (int r = 0; r < s->n; r++) {
        const comm_sig *o = &s->theirs[r];
        if (r == s->me || memcmp(o, &s->mine, sizeof *o) == 0) continue;
        char theirs[192];
        comm_sig_describe(o, theirs, sizeof theirs);
        if (o->counts_hash != s->mine.counts_hash && o->kind == s->mine.kind && o->count == s->mine.count)
            snprintf(theirs + strlen(theirs), sizeof theirs - strlen(theirs), " with other counts");
        return fail(x, "rank %d called %s instead: every rank must make the same collective calls in "
                    "the same order", r, theirs);
    }
    return TITAN_OK;
}

static size_t piece(size_t total, size_t start, size_t p) {
    return start >= total ? 0 : total - start < p ? total - start : p;
}

static titan_status need_scratch(mpi_ctx *x, size_t bytes) {
    mpi_state *s = x->s;
    if (bytes <= s->scratch_bytes) return TITAN_OK;
    unsigned char *p = realloc(s->scratch, bytes);
    if (!p) return fail(x, "out of memory for %zu bytes of scratch", bytes);
    s->scratch = p;
    s->scratch_bytes = bytes;
    return TITAN_OK;
}

/* Part q of send is len[q] elements at off[q]; this rank's part, reduced
 * over the ranks in rank order, goes to out. Rounds of p elements a part. */
static titan_status reduce_parts(mpi_ctx *x, const unsigned char *send, unsigned char *out) {
    mpi_state *s = x->s;
    const comm_op *op = x->op;
    int n = s->n, me = s->me;
    size_t es = titan_dtype_size(op->dtype), maxlen = 0;
    size_t p = x->c->chunk_bytes / es;
    if (p == 0) p = 1;
    for (int q = 0; q < n; q++) maxlen = s->len[q] > maxlen ? s->len[q] : maxlen;
    if (maxlen < p) p = maxlen ? maxlen : 1;
    TITAN_TRY(need_scratch(x, (size_t)n * p * es));
    for (size_t start = 0; start < maxlen; start += p) {
        size_t mine = piece(s->len[me], start, p);
        for (int q = 0; q < n; q++) {
            if (q == me) continue;
            size_t k = piece(s->len[q], start, p);
            if (k) TITAN_TRY(send_to(x, send + (s->off[q] + start) * es, k * es, q, TAG_COLL));
            if (mine) TITAN_TRY(recv_from(x, s->scratch + (size_t)q * p * es, mine * es, q, TAG_COLL));
        }
        TITAN_TRY(wait_all(x));
        for (int q = 0; q < n; q++) s->src[q] = s->scratch + (size_t)q * p * es;
        s->src[me] = send + (s->off[me] + start) * es;
        comm_reduce_ranks(s->src, n, mine, op->dtype, op->redop == TITAN_COMM_AVG,
                          out + start * es, NULL);
    }
    return TITAN_OK;
}

/* recv holds this rank's part at off[me]; every other rank's part arrives. */
static titan_status gather_parts(mpi_ctx *x, unsigned char *recv, size_t es) {
    mpi_state *s = x->s;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me) continue;
        if (s->len[s->me]) TITAN_TRY(send_to(x, recv + s->off[s->me] * es, s->len[s->me] * es, q, TAG_COLL));
        if (s->len[q]) TITAN_TRY(recv_from(x, recv + s->off[q] * es, s->len[q] * es, q, TAG_COLL));
    }
    return wait_all(x);
}

static void parts_from_counts(mpi_state *s, const size_t *counts) {
    size_t o = 0;
    for (int q = 0; q < s->n; q++) {
        s->off[q] = o;
        s->len[q] = counts[q];
        o += counts[q];
    }
}

static titan_status all_reduce(mpi_ctx *x) {
    mpi_state *s = x->s;
    const comm_op *op = x->op;
    size_t es = titan_dtype_size(op->dtype), base = op->count / (size_t)s->n, rem = op->count % (size_t)s->n;
    for (int q = 0; q < s->n; q++) { /* balanced parts in rank order, as shm's */
        s->off[q] = (size_t)q * base + ((size_t)q < rem ? (size_t)q : rem);
        s->len[q] = base + ((size_t)q < rem);
    }
    unsigned char *recv = op->recv;
    TITAN_TRY(reduce_parts(x, op->send, recv + s->off[s->me] * es));
    return gather_parts(x, recv, es);
}

static titan_status run_collective(mpi_ctx *x) {
    mpi_state *s = x->s;
    const comm_op *op = x->op;
    size_t es = titan_dtype_size(op->dtype);
    TITAN_TRY(exchange_sigs(x));
    switch (op->kind) {
    case COMM_ALL_REDUCE: return all_reduce(x);
    case COMM_REDUCE_SCATTER:
        parts_from_counts(s, op->counts);
        return reduce_parts(x, op->send, op->recv);
    case COMM_ALL_GATHER: {
        parts_from_counts(s, op->counts);
        unsigned char *mine = (unsigned char *)op->recv + s->off[s->me] * es;
        if (mine != (const unsigned char *)op->send && s->len[s->me])
            memmove(mine, op->send, s->len[s->me] * es);
        return gather_parts(x, op->recv, es);
    }
    case COMM_ALL_TO_ALL: {
        size_t b = op->count * es;
        const unsigned char *send = op->send;
        unsigned char *recv = op->recv;
        if (b) memcpy(recv + (size_t)s->me * b, send + (size_t)s->me * b, b);
        for (int q = 0; q < s->n && b; q++) {
            if (q == s->me) continue;
            TITAN_TRY(send_to(x, send + (size_t)q * b, b, q, TAG_COLL));
            TITAN_TRY(recv_from(x, recv + (size_t)q * b, b, q, TAG_COLL));
        }
        return wait_all(x);
    }
    case COMM_BROADCAST: {
        size_t b = op->count * es;
        if (!b) return TITAN_OK;
        if (s->me == op->peer) {
            for (int q = 0; q < s->n; q++)
                if (q != s->me) TITAN_TRY(send_to(x, op->send, b, q, TAG_COLL));
        } else {
            TITAN_TRY(recv_from(x, op->recv, b, op->peer, TAG_COLL));
        }
        return wait_all(x);
    }
    default: return TITAN_OK; /* barrier: the signatures were it */
    }
}

/* ---- point to point ---------------------------------------------------------------------- */

static titan_status run_p2p(mpi_ctx *x) {
    mpi_state *s = x->s;
    const comm_op *op = x->op;
    size_t es = titan_dtype_size(op->dtype);
    const char *dt = titan_dtype_name(op->dtype);
    int nsend = op->kind == COMM_SEND || op->kind == COMM_SEND_RECV;
    int nrecv = op->kind == COMM_RECV || op->kind == COMM_SEND_RECV;
    char tx[96] = "", rx[96] = "";
    uint64_t txno = nsend ? s->sent[op->peer] + 1 : 0, rxno = nrecv ? s->recvd[op->peer2] + 1 : 0;
    if (nsend)
        snprintf(tx, sizeof tx, "send #%llu to rank %d (%s x %zu)", (unsigned long long)txno, op->peer, dt,
                 op->count);
    if (nrecv)
        snprintf(rx, sizeof rx, "recv #%llu from rank %d (%s x %zu)", (unsigned long long)rxno, op->peer2,
                 dt, op->count2);
    snprintf(x->what, sizeof x->what, "%.92s%s%.92s", tx, nsend && nrecv ? " with " : "", rx); /* fits 192 */
    if (nsend) {
        s->hdr_out[0] = op->count * es;
        s->hdr_out[1] = txno;
        TITAN_TRY(send_to(x, s->hdr_out, sizeof s->hdr_out, op->peer, TAG_P2P));
        TITAN_TRY(send_to(x, op->send, op->count * es, op->peer, TAG_P2P));
    }
    if (nrecv) {
        /* the header alone first: the sends may wait for the peer's receive */
        size_t first = s->nreq;
        TITAN_TRY(recv_from(x, s->hdr_in, sizeof s->hdr_in, op->peer2, TAG_P2P));
        TITAN_TRY(wait_from(x, first));
        if (s->hdr_in[0] != op->count2 * es || s->hdr_in[1] != rxno)
            return fail(x, "rank %d's message #%llu has %llu bytes, this recv takes %zu: sends and recvs "
                        "between two ranks must match in order and size", op->peer2,
                        (unsigned long long)s->hdr_in[1], (unsigned long long)s->hdr_in[0], op->count2 * es);
        TITAN_TRY(recv_from(x, op->recv, op->count2 * es, op->peer2, TAG_P2P));
    }
    TITAN_TRY(wait_all(x));
    if (nsend) s->sent[op->peer]++;
    if (nrecv) s->recvd[op->peer2]++;
    return TITAN_OK;
}

/* ---- communicators ------------------------------------------------------------------------- */

/* Frees s and its MPI communicator h, and lets go of its family. */
static void state_free(mpi_state *s, titan_mpi_comm *h) {
    if (s) {
        pthread_mutex_lock(&family_lock);
        family_release(s->fam);
        pthread_mutex_unlock(&family_lock);
        free(s->sent), free(s->recvd), free(s->theirs), free(s->off);
        free(s->len), free(s->src), free(s->missing), free(s->reqs), free(s->req_peer), free(s->scratch);
        free(s);
    }
    if (h) api->comm_free(h);
}

/* The family's reference passes to the new state (freed with it on failure). */
static titan_status make_comm(titan_mpi_comm *h, mpi_family *fam, const char *name, int rank, int size,
                              double timeout_s, size_t chunk, titan_comm **out) {
    mpi_state *s = calloc(1, sizeof *s);
    titan_comm *c = NULL;
    size_t n = (size_t)size;
    if (!s) {
        pthread_mutex_lock(&family_lock);
        family_release(fam);
        pthread_mutex_unlock(&family_lock);
    } else {
        s->fam = fam;
        s->h = h;
        s->n = size;
        s->me = rank;
        s->sent = calloc(n, sizeof *s->sent);
        s->recvd = calloc(n, sizeof *s->recvd);
        s->theirs = calloc(n, sizeof *s->theirs);
        s->off = calloc(n, sizeof *s->off);
        s->len = calloc(n, sizeof *s->len);
        s->src = calloc(n, sizeof *s->src);
        s->missing = calloc(n, 1);
    }
    int ok = s && s->sent && s->recvd && s->theirs && s->off && s->len && s->src && s->missing;
    if (ok) c = comm_new(name, rank, size, timeout_s, chunk, &mpi_backend, s);
    if (!c) {
        state_free(s, h);
        return titan_error(TITAN_ERR_NOMEM, "comm %s (mpi): out of memory", name);
    }
    *out = c;
    return TITAN_OK;
}

static titan_status mpi_split(titan_comm *c, mpi_ctx *x) {
    mpi_state *s = c->impl;
    const comm_op *op = x->op;
    snprintf(x->what, sizeof x->what, "split #%llu", (unsigned long long)x->seq);
    /* every rank is here (MPI_Comm_split itself cannot time out) */
    TITAN_TRY(exchange_sigs(x));
    atomic_store(&c->seq, x->seq);
    titan_mpi_comm *h = NULL;
    int rank = -1, size = 0;
    char msg[MSG_CAP];
    if (api->split(s->h, op->color, op->key, &h, &rank, &size, msg, sizeof msg))
        return fail(x, "into %s: %s", op->name, msg);
    if (!h) return TITAN_OK; /* color < 0: in no group */
    pthread_mutex_lock(&family_lock);
    s->fam->refs++;
    pthread_mutex_unlock(&family_lock);
    return make_comm(h, s->fam, op->name, rank, size, c->timeout_s, c->chunk_bytes, op->out);
}

static titan_status mpi_run(titan_comm *c, const comm_op *op) {
    mpi_ctx x = {.c = c, .s = c->impl, .op = op, .seq = atomic_load(&c->seq) + 1};
    mpi_state *s = c->impl;
    if (op->kind == COMM_SPLIT) return mpi_split(c, &x);
    if (op->kind == COMM_SEND || op->kind == COMM_RECV || op->kind == COMM_SEND_RECV) return run_p2p(&x);
    comm_describe_op(op, x.seq, s->n, x.what, sizeof x.what);
    TITAN_TRY(run_collective(&x));
    atomic_store(&c->seq, x.seq);
    return TITAN_OK;
}

/* A failed communicator is left to MPI as it is: requests a dead or
 * stopped peer will never match may still read or write its buffers. */
static void mpi_free(titan_comm *c) {
    mpi_state *s = c->impl;
    if (!s || c->failed) return;
    pthread_mutex_lock(&family_lock);
    int stopped = s->fam->stopped;
    pthread_mutex_unlock(&family_lock);
    if (!stopped) state_free(s, s->h);
}

static const comm_backend mpi_backend = {"mpi", mpi_run, mpi_free, 0, NULL, NULL, NULL, NULL}; /* no shared windows */

/* ---- the world communicator ------------------------------------------------------------------ */

/* This rank's part before MPI starts: the launcher and the library. */
static titan_status prepare(titan_dist *d, const char *name) {
    if (titan_dist_kind_of(d) != TITAN_DIST_PMIX) {
        titan_error(TITAN_ERR_USAGE, "comm %s: mpi: the %d rank%s of this job %s not MPI processes (%s "
                    "launch)", name, titan_dist_world_size(d), titan_dist_world_size(d) == 1 ? "" : "s",
                    titan_dist_world_size(d) == 1 ? "is" : "are", titan_dist_kind_name(titan_dist_kind_of(d)));
        titan_error_hint("start the ranks with mpirun or srun --mpi=pmix, or use comm.backend = shm "
                         "(titan-train --nproc: one host)");
        return TITAN_ERR_USAGE;
    }
    return load_api(name) ? TITAN_OK : titan_error_code();
}

titan_status comm_mpi_init_world(titan_dist *d, const char *name, double timeout_s, size_t chunk_bytes,
                                 titan_comm **out) {
    static unsigned inits; /* per process; the same count on every rank */
    static int started;
    *out = NULL;
    int me = titan_dist_rank(d), n = titan_dist_world_size(d);
    char key[64];
    snprintf(key, sizeof key, "titan.mpi%u.status", inits++);
    TITAN_TRY(comm_agree_join(d, key, prepare(d, name), name));
    char msg[MSG_CAP], lib[256];
    if (!started) {
        int rank = -1, size = 0;
        if (api->init(&rank, &size, lib, sizeof lib, msg, sizeof msg))
            return titan_error(TITAN_ERR_COMM, "comm %s (rank %d of %d, mpi): %s", name, me, n, msg);
        if (size != n) {
            titan_error(TITAN_ERR_USAGE, "comm %s: MPI's world has %d ranks, the job %d (rank %d: MPI "
                        "rank %d)", name, size, n, me, rank);
            titan_error_hint("the launcher that started the ranks must be the MPI's own (%s)", lib);
            return TITAN_ERR_USAGE;
        }
        started = 1;
        atexit(finalize_at_exit);
    }
    mpi_family *fam = NULL;
    TITAN_TRY(family_open(me, n, name, &fam));
    titan_mpi_comm *h = NULL;
    if (api->world(me, &h, msg, sizeof msg)) {
        pthread_mutex_lock(&family_lock);
        family_release(fam);
        pthread_mutex_unlock(&family_lock);
        return titan_error(TITAN_ERR_COMM, "comm %s (rank %d of %d, mpi): %s", name, me, n, msg);
    }
    return make_comm(h, fam, name, me, n, timeout_s, chunk_bytes, out);
}
