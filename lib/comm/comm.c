/* comm.c - communicator front end: argument checks, running operations one
 * at a time in call order, the progress thread, requests (see comm.h). */
#include "comm_impl.h"

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "flight.h"

#define DEFAULT_CHUNK (1u << 20)
#define MSG_MAX 2048

struct titan_comm_req {
    comm_op op;
    titan_comm *c;
    atomic_int done;
    uint64_t flight; /* its flight recorder entry */
    double t_start, t_end; /* titan_now_s() around the backend's run */
    titan_status st;
    char msg[MSG_MAX];
    char hint[256];
    titan_comm_req *next;
    size_t counts[]; /* a copy of op.counts, which the caller may free */
};

const char *titan_comm_redop_name(titan_comm_redop op) {
    return op == TITAN_COMM_AVG ? "avg" : op == TITAN_COMM_SUM ? "sum" : "?";
}

const char *comm_kind_name(comm_kind k) {
    switch (k) {
    case COMM_ALL_REDUCE: return "all_reduce";
    case COMM_REDUCE_SCATTER: return "reduce_scatter";
    case COMM_ALL_GATHER: return "all_gather";
    case COMM_ALL_TO_ALL: return "all_to_all";
    case COMM_BROADCAST: return "broadcast";
    case COMM_BARRIER: return "barrier";
    case COMM_SEND: return "send";
    case COMM_RECV: return "recv";
    case COMM_SEND_RECV: return "send_recv";
    case COMM_SPLIT: return "split";
    }
    return "?";
}

titan_comm *comm_new(const char *name, int rank, int size, double timeout_s, size_t chunk_bytes,
                     const comm_backend *be, void *impl) {
    titan_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = rank;
    c->size = size;
    c->timeout_s = timeout_s;
    c->chunk_bytes = chunk_bytes;
    c->be = be;
    c->impl = impl;
    c->flight_id = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

titan_status titan_comm_init(titan_dist *d, const titan_comm_options *opt, titan_comm **out) {
    *out = NULL;
    double timeout = opt && opt->timeout_s > 0 ? opt->timeout_s : titan_dist_env_timeout();
    size_t chunk = opt && opt->chunk_bytes ? opt->chunk_bytes : DEFAULT_CHUNK;
    const char *name = opt && opt->name ? opt->name : "world";
    if (chunk < 4096 || chunk > ((size_t)1 << 30))
        return titan_error(TITAN_ERR_USAGE, "comm %s: chunk_bytes %zu: want 4 KiB..1 GiB", name,
                           chunk);
    titan_comm_backend be = opt ? opt->backend : TITAN_COMM_BACKEND_AUTO;
    if (be == TITAN_COMM_BACKEND_AUTO) TITAN_TRY(titan_comm_backend_choice(be, &be));
    TITAN_TRY(titan_comm_backend_resolve(d, be, &be));
    if (be == TITAN_COMM_BACKEND_NCCL)
        return titan_error(TITAN_ERR_USAGE, "comm %s: nccl communicators take a GPU: "
                           "titan_comm_init_nccl", name);
    if (be == TITAN_COMM_BACKEND_MPI)
        TITAN_TRY(comm_mpi_init_world(d, name, timeout, chunk, out));
    else
        TITAN_TRY(comm_shm_init_world(d, name, timeout, chunk, out));
    return comm_flight_register(out);
}

static const char *const BACKEND_NAMES[] = {"auto", "shm", "mpi", "nccl"};

const char *titan_comm_backend_name(titan_comm_backend b) {
    return (unsigned)b < 4 ? BACKEND_NAMES[b] : "?";
}

const char *titan_comm_backend_of(const titan_comm *c) { return c->be->name; }

titan_status titan_comm_backend_choice(titan_comm_backend configured, titan_comm_backend *out) {
    const char *env = getenv("TITAN_COMM");
    *out = configured;
    if (!env || !*env) return TITAN_OK;
    for (int b = 0; b < 4; b++)
        if (strcmp(env, BACKEND_NAMES[b]) == 0) {
            *out = (titan_comm_backend)b;
            return TITAN_OK;
        }
    return titan_error(TITAN_ERR_USAGE, "TITAN_COMM=%s: want auto, shm, mpi or nccl", env);
}

/* 1 when every rank of d has this rank's hostname (collective: a fence). */
static titan_status one_host(titan_dist *d, int *yes) {
    static unsigned calls; /* per process; the same count on every rank */
    char key[64], host[256] = "", other[256];
    gethostname(host, sizeof host - 1);
    snprintf(key, sizeof key, "titan.hosts%u", calls++);
    TITAN_TRY(titan_dist_put(d, key, host, strlen(host) + 1));
    TITAN_TRY(titan_dist_commit(d));
    TITAN_TRY(titan_dist_fence(d));
    *yes = 1;
    for (int r = 0; r < titan_dist_world_size(d) && *yes; r++) {
        size_t n = 0;
        TITAN_TRY(titan_dist_get(d, r, key, other, sizeof other - 1, &n));
        other[n < sizeof other ? n : sizeof other - 1] = '\0';
        *yes = strcmp(other, host) == 0;
    }
    return TITAN_OK;
}

titan_status titan_comm_backend_resolve(titan_dist *d, titan_comm_backend want,
                                        titan_comm_backend *out) {
    *out = want;
    if (want != TITAN_COMM_BACKEND_AUTO) return TITAN_OK;
    *out = TITAN_COMM_BACKEND_SHM;
    /* A local launch forks on this host; a PMIx one may span several. */
    if (titan_dist_kind_of(d) != TITAN_DIST_PMIX || titan_dist_world_size(d) < 2) return TITAN_OK;
    int yes = 1;
    TITAN_TRY(one_host(d, &yes));
    if (!yes) *out = TITAN_COMM_BACKEND_MPI;
    return TITAN_OK;
}

/* What each member tells the others when a communicator is recorded. */
typedef struct {
    uint32_t world_rank;
    char host[TITAN_FLIGHT_HOST_MAX - 4];
} member_info;

titan_status comm_flight_register(titan_comm **out) {
    titan_comm *c = *out;
    if (!titan_flight_enabled()) return TITAN_OK;
    /* every member's world rank (the flight recorder's own rank) and host,
     * in one gather (so that it stays collective #1) */
    member_info *info = titan_alloc((size_t)c->size * sizeof *info, "member ranks");
    int *all = info ? titan_alloc((size_t)c->size * sizeof(int), "world ranks") : NULL;
    member_info mine;
    memset(&mine, 0, sizeof mine);
    mine.world_rank = (uint32_t)titan_flight_world_rank();
    gethostname(mine.host, sizeof mine.host - 1);
    titan_status st = all ? titan_comm_all_gather(c, &mine, info, sizeof mine / 4, TITAN_DTYPE_U32, NULL)
                          : TITAN_ERR_NOMEM;
    if (st == TITAN_OK) {
        for (int r = 0; r < c->size; r++) all[r] = (int)info[r].world_rank;
        if (titan_flight_wants_hosts(c->size)) {
            /* by world rank: a world communicator's members are all of them */
            char (*hosts)[TITAN_FLIGHT_HOST_MAX] = calloc((size_t)c->size, sizeof *hosts);
            for (int r = 0; hosts && r < c->size; r++)
                if (all[r] >= 0 && all[r] < c->size) memcpy(hosts[all[r]], info[r].host, sizeof info[r].host);
            if (hosts) titan_flight_hosts(hosts[0], sizeof hosts[0], c->size);
            free(hosts);
        }
    }
    titan_free(info);
    if (st != TITAN_OK) {
        titan_free(all);
        titan_comm_free(c);
        *out = NULL;
        return st;
    }
    uint64_t *p2p = calloc(2 * (size_t)c->size, sizeof *p2p);
    int id = p2p ? titan_flight_comm(c->name, c->rank, c->size, all) : -1; /* else unrecorded: no failure */
    titan_free(all);
    pthread_mutex_lock(&c->mu);
    if (id >= 0) {
        c->flight_p2p = p2p;
        c->flight_id = id;
        c->flight_seq = atomic_load(&c->seq); /* the gather above */
    } else {
        free(p2p);
    }
    pthread_mutex_unlock(&c->mu);
    return TITAN_OK;
}

/* Numbers op and records that it was called (under c->mu). Collectives are
 * numbered as the backend numbers them in its messages (c->seq counts
 * those completed): one more than the last called. */
static uint64_t flight_queued(titan_comm *c, const comm_op *op) {
    if (c->flight_id < 0) return 0;
    titan_flight_op f = {.id = c->flight_id, .op = comm_kind_name(op->kind), .dtype = titan_dtype_name(op->dtype),
                         .peer = -1, .peer2 = -1};
    switch (op->kind) {
    case COMM_SEND:
        f.peer = op->peer;
        f.n = ++c->flight_p2p[op->peer];
        f.count = op->count;
        break;
    case COMM_RECV:
        f.peer2 = op->peer2;
        f.n2 = ++c->flight_p2p[c->size + op->peer2];
        f.count2 = op->count2;
        break;
    case COMM_SEND_RECV:
        f.peer = op->peer;
        f.n = ++c->flight_p2p[op->peer];
        f.count = op->count;
        f.peer2 = op->peer2;
        f.n2 = ++c->flight_p2p[c->size + op->peer2];
        f.count2 = op->count2;
        break;
    case COMM_SPLIT: /* unnumbered: the backend's protocol may take collectives for it */
        break;
    case COMM_REDUCE_SCATTER: /* its input: every rank's part */
        f.seq = ++c->flight_seq;
        for (int r = 0; r < c->size; r++) f.count += op->counts[r];
        f.redop = titan_comm_redop_name(op->redop);
        break;
    default: /* this rank's input */
        f.seq = ++c->flight_seq;
        f.count = op->counts ? op->counts[c->rank] : op->count;
        if (op->kind == COMM_ALL_REDUCE) f.redop = titan_comm_redop_name(op->redop);
        if (op->kind == COMM_BROADCAST) f.peer = op->peer;
        break;
    }
    return titan_flight_queued(&f);
}

int titan_comm_rank(const titan_comm *c) { return c->rank; }
int titan_comm_size(const titan_comm *c) { return c->size; }
const char *titan_comm_name(const titan_comm *c) { return c->name; }
int titan_comm_device_buffers(const titan_comm *c) { return c->be->device_buffers; }
void titan_comm_set_timeout(titan_comm *c, double s) { c->timeout_s = s > 0 ? s : titan_dist_env_timeout(); }
double titan_comm_timeout(const titan_comm *c) { return c->timeout_s; }
unsigned long long titan_comm_seq(const titan_comm *c) { return atomic_load(&c->seq); }

/* ---- running operations in order ------------------------------------------ */

/* Runs op on this thread; a failure other than a usage error breaks the
 * communicator (its ranks are out of step now). */
static titan_status execute(titan_comm *c, const comm_op *op) {
    pthread_mutex_lock(&c->mu);
    int failed = c->failed;
    char msg[sizeof c->fail_msg];
    if (failed) memcpy(msg, c->fail_msg, sizeof msg);
    pthread_mutex_unlock(&c->mu);
    if (failed)
        return titan_error(TITAN_ERR_COMM, "%s on comm %s: the communicator failed earlier: %s",
                           comm_kind_name(op->kind), c->name, msg);
    titan_status st = c->be->run(c, op);
    if (st != TITAN_OK && st != TITAN_ERR_USAGE) {
        pthread_mutex_lock(&c->mu);
        if (!c->failed) {
            c->failed = 1;
            snprintf(c->fail_msg, sizeof c->fail_msg, "%s", titan_error_message());
        }
        pthread_mutex_unlock(&c->mu);
    }
    return st;
}

static void *progress_main(void *arg) {
    titan_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && (!c->qhead || c->busy)) pthread_cond_wait(&c->cv, &c->mu);
        if (!c->qhead) break; /* stop, and nothing left */
        titan_comm_req *r = c->qhead;
        c->qhead = r->next;
        if (!c->qhead) c->qtail = NULL;
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);

        titan_error_clear();
        r->t_start = titan_now_s();
        titan_flight_started(r->flight);
        r->st = execute(c, &r->op);
        titan_flight_ended(r->flight, r->st, titan_error_message());
        r->t_end = titan_now_s();
        if (r->st != TITAN_OK) {
            snprintf(r->msg, sizeof r->msg, "%s", titan_error_message());
            snprintf(r->hint, sizeof r->hint, "%s", titan_error_hint_text());
        }

        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        atomic_store(&r->done, 1);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Blocking: wait until nothing is queued or running, run here. Queued: copy
 * the operation (and its counts) into a request for the progress thread. */
static titan_status submit(titan_comm *c, const comm_op *op, titan_comm_req **req) {
    if (!req) {
        pthread_mutex_lock(&c->mu);
        uint64_t fl = flight_queued(c, op);
        while (c->qhead || c->busy) pthread_cond_wait(&c->cv, &c->mu);
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        titan_flight_started(fl);
        titan_status st = execute(c, op);
        titan_flight_ended(fl, st, titan_error_message());
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return st;
    }
    *req = NULL;
    size_t nc = op->counts ? (size_t)c->size : 0;
    titan_comm_req *r = calloc(1, sizeof *r + nc * sizeof(size_t));
    if (!r)
        return titan_error(TITAN_ERR_NOMEM, "%s on comm %s: out of memory for the request",
                           comm_kind_name(op->kind), c->name);
    r->op = *op;
    r->c = c;
    if (nc) {
        memcpy(r->counts, op->counts, nc * sizeof(size_t));
        r->op.counts = r->counts;
    }
    pthread_mutex_lock(&c->mu);
    if (!c->has_thread) {
        /* The thread takes no signals: those are the main program's. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int rc = pthread_create(&c->thread, NULL, progress_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            pthread_mutex_unlock(&c->mu);
            free(r);
            return titan_error(TITAN_ERR_FAIL, "comm %s: cannot start its progress thread: %s",
                               c->name, strerror(rc));
        }
        c->has_thread = 1;
    }
    r->flight = flight_queued(c, &r->op);
    if (c->qtail)
        c->qtail->next = r;
    else
        c->qhead = r;
    c->qtail = r;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    *req = r;
    return TITAN_OK;
}

titan_status comm_run(titan_comm *c, const comm_op *op) { return submit(c, op, NULL); }

titan_status titan_comm_wait(titan_comm_req *r) { return titan_comm_wait_timed(r, NULL, NULL); }

titan_status titan_comm_wait_timed(titan_comm_req *r, double *start, double *end) {
    if (!r) return titan_error(TITAN_ERR_USAGE, "comm wait: no request");
    titan_comm *c = r->c;
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&r->done)) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (start) *start = r->t_start;
    if (end) *end = r->t_end;
    titan_status st = r->st;
    if (st != TITAN_OK) {
        titan_error(st, "%s", r->msg);
        if (r->hint[0]) titan_error_hint("%s", r->hint);
    }
    free(r);
    return st;
}

int titan_comm_test(const titan_comm_req *r) { return r && atomic_load(&r->done); }


void titan_comm_exiting(titan_status st) { comm_mpi_exiting(st); }

titan_status comm_agree_join(titan_dist *d, const char *key, titan_status mine, const char *name) {
    char val[700], why[600], hint[256];
    snprintf(why, sizeof why, "%s", mine == TITAN_OK ? "" : titan_error_message());
    snprintf(hint, sizeof hint, "%s", mine == TITAN_OK ? "" : titan_error_hint_text());
    snprintf(val, sizeof val, "%d %s", (int)mine, why);
    TITAN_TRY(titan_dist_put(d, key, val, strlen(val) + 1));
    TITAN_TRY(titan_dist_commit(d));
    TITAN_TRY(titan_dist_fence(d));
    if (mine != TITAN_OK) {
        titan_error(mine, "%s", why);
        if (hint[0]) titan_error_hint("%s", hint);
        return mine;
    }
    for (int r = 0; r < titan_dist_world_size(d); r++) {
        size_t n = 0;
        TITAN_TRY(titan_dist_get(d, r, key, val, sizeof val - 1, &n));
        val[n] = '\0';
        int code = atoi(val);
        if (code != TITAN_OK) {
            const char *cause = strchr(val, ' ') ? strchr(val, ' ') + 1 : val;
            return titan_error(code == TITAN_ERR_USAGE ? TITAN_ERR_USAGE : TITAN_ERR_COMM,
                               "comm %s: rank %d cannot join: %s", name, r, cause);
        }
    }
    return TITAN_OK;
}

void titan_comm_free(titan_comm *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    while (c->qhead || c->busy) pthread_cond_wait(&c->cv, &c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->has_thread) pthread_join(c->thread, NULL);
    if (c->be && c->be->free) c->be->free(c);
    free(c->flight_p2p);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---- argument checks ------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static titan_status bad(const titan_comm *c, comm_kind k,
                                                              const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return titan_error(TITAN_ERR_USAGE, "%s on comm %s (rank %d of %d): %s", comm_kind_name(k),
                       c->name, c->rank, c->size, what);
}

static titan_status check_dtype(const titan_comm *c, comm_kind k, titan_dtype dt, int reduce,
                                titan_comm_redop op) {
    if (titan_dtype_size(dt) == 0 || (unsigned)dt > TITAN_DTYPE_U8)
        return bad(c, k, "unknown dtype %d", (int)dt);
    if (reduce && dt != TITAN_DTYPE_F32 && dt != TITAN_DTYPE_BF16)
        return bad(c, k, "dtype %s: reductions take f32 or bf16", titan_dtype_name(dt));
    if (reduce && op != TITAN_COMM_SUM && op != TITAN_COMM_AVG)
        return bad(c, k, "unknown reduction %d", (int)op);
    return TITAN_OK;
}

static titan_status check_buf(const titan_comm *c, comm_kind k, const void *p, size_t count,
                              titan_dtype dt, const char *which) {
    if (count > (SIZE_MAX / 8) / (titan_dtype_size(dt) ? titan_dtype_size(dt) : 1))
        return bad(c, k, "%s count %zu is too large", which, count);
    if (count && !p) return bad(c, k, "%s buffer is NULL for %zu elements", which, count);
    return TITAN_OK;
}

static titan_status check_rank(const titan_comm *c, comm_kind k, int r, const char *which,
                               int self_ok) {
    if (r < 0 || r >= c->size) return bad(c, k, "%s %d is not a rank of the communicator", which, r);
    if (!self_ok && r == c->rank) return bad(c, k, "%s %d is this rank itself", which, r);
    return TITAN_OK;
}

static titan_status check_counts(const titan_comm *c, comm_kind k, const size_t *counts,
                                 titan_dtype dt, size_t *total) {
    if (!counts) return bad(c, k, "counts is NULL");
    size_t sum = 0;
    for (int r = 0; r < c->size; r++) {
        if (counts[r] > SIZE_MAX / 16 - sum) return bad(c, k, "counts[%d] is too large", r);
        sum += counts[r];
    }
    *total = sum;
    return check_buf(c, k, (const void *)1, sum, dt, "total");
}

/* ---- operations ------------------------------------------------------------- */

titan_status titan_comm_all_reduce(titan_comm *c, const void *send, void *recv, size_t count,
                                   titan_dtype dt, titan_comm_redop op, titan_comm_req **req) {
    TITAN_TRY(check_dtype(c, COMM_ALL_REDUCE, dt, 1, op));
    TITAN_TRY(check_buf(c, COMM_ALL_REDUCE, send, count, dt, "send"));
    TITAN_TRY(check_buf(c, COMM_ALL_REDUCE, recv, count, dt, "recv"));
    comm_op o = {.kind = COMM_ALL_REDUCE, .dtype = dt, .redop = op, .send = send, .recv = recv,
                 .count = count};
    return submit(c, &o, req);
}

titan_status titan_comm_reduce_scatter_v(titan_comm *c, const void *send, void *recv,
                                         const size_t *counts, titan_dtype dt,
                                         titan_comm_redop op, titan_comm_req **req) {
    size_t total = 0;
    TITAN_TRY(check_dtype(c, COMM_REDUCE_SCATTER, dt, 1, op));
    TITAN_TRY(check_counts(c, COMM_REDUCE_SCATTER, counts, dt, &total));
    TITAN_TRY(check_buf(c, COMM_REDUCE_SCATTER, send, total, dt, "send"));
    TITAN_TRY(check_buf(c, COMM_REDUCE_SCATTER, recv, counts[c->rank], dt, "recv"));
    comm_op o = {.kind = COMM_REDUCE_SCATTER, .dtype = dt, .redop = op, .send = send,
                 .recv = recv, .counts = counts};
    return submit(c, &o, req);
}

/* The even forms: counts all equal, built here (the request copies them). */
static size_t *even_counts(titan_comm *c, size_t n) {
    size_t *counts = malloc((size_t)c->size * sizeof *counts);
    if (counts)
        for (int r = 0; r < c->size; r++) counts[r] = n;
    return counts;
}

titan_status titan_comm_reduce_scatter(titan_comm *c, const void *send, void *recv,
                                       size_t recv_count, titan_dtype dt, titan_comm_redop op,
                                       titan_comm_req **req) {
    size_t *counts = even_counts(c, recv_count);
    if (!counts) return titan_error(TITAN_ERR_NOMEM, "reduce_scatter on comm %s: out of memory", c->name);
    titan_status st = titan_comm_reduce_scatter_v(c, send, recv, counts, dt, op, req);
    free(counts);
    return st;
}

titan_status titan_comm_all_gather_v(titan_comm *c, const void *send, void *recv,
                                     const size_t *counts, titan_dtype dt, titan_comm_req **req) {
    size_t total = 0;
    TITAN_TRY(check_dtype(c, COMM_ALL_GATHER, dt, 0, TITAN_COMM_SUM));
    TITAN_TRY(check_counts(c, COMM_ALL_GATHER, counts, dt, &total));
    TITAN_TRY(check_buf(c, COMM_ALL_GATHER, send, counts[c->rank], dt, "send"));
    TITAN_TRY(check_buf(c, COMM_ALL_GATHER, recv, total, dt, "recv"));
    comm_op o = {.kind = COMM_ALL_GATHER, .dtype = dt, .send = send, .recv = recv,
                 .counts = counts};
    return submit(c, &o, req);
}

titan_status titan_comm_all_gather(titan_comm *c, const void *send, void *recv,
                                   size_t send_count, titan_dtype dt, titan_comm_req **req) {
    size_t *counts = even_counts(c, send_count);
    if (!counts) return titan_error(TITAN_ERR_NOMEM, "all_gather on comm %s: out of memory", c->name);
    titan_status st = titan_comm_all_gather_v(c, send, recv, counts, dt, req);
    free(counts);
    return st;
}

titan_status titan_comm_all_to_all(titan_comm *c, const void *send, void *recv, size_t count,
                                   titan_dtype dt, titan_comm_req **req) {
    TITAN_TRY(check_dtype(c, COMM_ALL_TO_ALL, dt, 0, TITAN_COMM_SUM));
    if (count > SIZE_MAX / 16 / (size_t)c->size)
        return bad(c, COMM_ALL_TO_ALL, "count %zu is too large", count);
    TITAN_TRY(check_buf(c, COMM_ALL_TO_ALL, send, count * (size_t)c->size, dt, "send"));
    TITAN_TRY(check_buf(c, COMM_ALL_TO_ALL, recv, count * (size_t)c->size, dt, "recv"));
    comm_op o = {.kind = COMM_ALL_TO_ALL, .dtype = dt, .send = send, .recv = recv, .count = count};
    return submit(c, &o, req);
}

titan_status titan_comm_broadcast(titan_comm *c, void *buf, size_t count, titan_dtype dt,
                                  int root, titan_comm_req **req) {
    TITAN_TRY(check_dtype(c, COMM_BROADCAST, dt, 0, TITAN_COMM_SUM));
    TITAN_TRY(check_rank(c, COMM_BROADCAST, root, "root", 1));
    TITAN_TRY(check_buf(c, COMM_BROADCAST, buf, count, dt, "buf"));
    comm_op o = {.kind = COMM_BROADCAST, .dtype = dt, .send = buf, .recv = buf, .count = count,
                 .peer = root};
    return submit(c, &o, req);
}

titan_status titan_comm_send(titan_comm *c, const void *buf, size_t count, titan_dtype dt,
                             int peer, titan_comm_req **req) {
    TITAN_TRY(check_dtype(c, COMM_SEND, dt, 0, TITAN_COMM_SUM));
    TITAN_TRY(check_rank(c, COMM_SEND, peer, "destination", 0));
    TITAN_TRY(check_buf(c, COMM_SEND, buf, count, dt, "send"));
    comm_op o = {.kind = COMM_SEND, .dtype = dt, .send = buf, .count = count, .peer = peer};
    return submit(c, &o, req);
}

titan_status titan_comm_recv(titan_comm *c, void *buf, size_t count, titan_dtype dt, int peer,
                             titan_comm_req **req) {
    TITAN_TRY(check_dtype(c, COMM_RECV, dt, 0, TITAN_COMM_SUM));
    TITAN_TRY(check_rank(c, COMM_RECV, peer, "source", 0));
    TITAN_TRY(check_buf(c, COMM_RECV, buf, count, dt, "recv"));
    comm_op o = {.kind = COMM_RECV, .dtype = dt, .recv = buf, .count2 = count, .peer2 = peer};
    return submit(c, &o, req);
}

titan_status titan_comm_send_recv(titan_comm *c, const void *send, size_t send_count, int dst,
                                  void *recv, size_t recv_count, int src, titan_dtype dt,
                                  titan_comm_req **req) {
    TITAN_TRY(check_dtype(c, COMM_SEND_RECV, dt, 0, TITAN_COMM_SUM));
    TITAN_TRY(check_rank(c, COMM_SEND_RECV, dst, "destination", 0));
    TITAN_TRY(check_rank(c, COMM_SEND_RECV, src, "source", 0));
    TITAN_TRY(check_buf(c, COMM_SEND_RECV, send, send_count, dt, "send"));
    TITAN_TRY(check_buf(c, COMM_SEND_RECV, recv, recv_count, dt, "recv"));
    comm_op o = {.kind = COMM_SEND_RECV, .dtype = dt, .send = send, .count = send_count,
                 .peer = dst, .recv = recv, .count2 = recv_count, .peer2 = src};
    return submit(c, &o, req);
}

titan_status titan_comm_barrier(titan_comm *c, titan_comm_req **req) {
    comm_op o = {.kind = COMM_BARRIER, .dtype = TITAN_DTYPE_F32};
    return submit(c, &o, req);
}

titan_status titan_comm_split(titan_comm *c, int color, int key, const char *name,
                              titan_comm **out) {
    *out = NULL;
    char auto_name[64];
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "%.40s.%d", c->name, color);
        name = auto_name;
    }
    comm_op o = {.kind = COMM_SPLIT, .dtype = TITAN_DTYPE_F32, .color = color, .key = key,
                 .name = name, .out = out};
    TITAN_TRY(submit(c, &o, NULL));
    pthread_mutex_lock(&c->mu);
    c->flight_seq = atomic_load(&c->seq); /* numbered as the backend counts, after the split's own */
    pthread_mutex_unlock(&c->mu);
    return *out ? comm_flight_register(out) : TITAN_OK;
}

titan_status titan_comm_sum_double(titan_comm *c, double x, double *out) {
    if (!c) {
        *out = x;
        return TITAN_OK;
    }
    int n = titan_comm_size(c);
    double *all = titan_alloc((size_t)n * sizeof(double), "per-rank values");
    if (!all) return TITAN_ERR_NOMEM;
    /* Doubles travel as pairs of u32 (data movement takes any dtype). */
    titan_status st = titan_comm_all_gather(c, &x, all, 2, TITAN_DTYPE_U32, NULL);
    double s = 0.0;
    for (int i = 0; i < n; i++) s += all[i];
    titan_free(all);
    *out = s;
    return st;
}

size_t titan_comm_shm_segment_bytes(int n) { return n > 1 ? comm_shm_segment_bytes(n, DEFAULT_CHUNK) : 0; }
