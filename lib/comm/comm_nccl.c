/* comm_nccl.c - the nccl backend (comm.h): comm.c's backend table over the
 * GPU half in libtitan-cuda.so (kernels/comm_nccl.cu), reached through the
 * plain-C table of comm_nccl_api.h so that libtitan.a links neither CUDA
 * nor NCCL. World creation: every rank checks that it can take part, rank 0
 * makes the NCCL unique id, and one bootstrap fence carries both (so a rank
 * without a GPU stops every rank at once instead of leaving the others in
 * NCCL's init until the timeout); then ncclCommInitRankConfig. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm_impl.h"
#include "comm_nccl_api.h"

#define MSG_CAP 1024

typedef struct {
    const titan_nccl_api *api;
    titan_nccl_comm *h;
} nccl_state;

static const comm_backend nccl_backend;

/* The GPU half's table, looked up once; NULL with a TITAN_ERR_USAGE error. */
static const titan_nccl_api *load_api(const char *comm) {
    static const titan_nccl_api *api;
    if (api) return api;
    titan_nccl_api_fn fn = (titan_nccl_api_fn)titan_backend_cuda_symbol(TITAN_NCCL_API_SYMBOL);
    if (!fn) {
        titan_error_context("comm %s: nccl", comm);
        titan_error_hint("build where nvcc and NCCL (nccl.h, libnccl) are installed, or set "
                         "TITAN_CUDA_LIB to a libtitan-cuda.so built with NCCL");
        return NULL;
    }
    const titan_nccl_api *a = fn();
    if (a->size != sizeof *a) {
        titan_error(TITAN_ERR_USAGE, "comm %s: nccl: libtitan-cuda.so was built from another "
                    "comm_nccl_api.h (table of %zu bytes, this program's has %zu): rebuild both",
                    comm, a->size, sizeof *a);
        return NULL;
    }
    api = a;
    return api;
}

static titan_status make_comm(const titan_nccl_api *api, titan_nccl_comm *h, const char *name,
                              int rank, int size, double timeout_s, size_t chunk,
                              titan_comm **out) {
    nccl_state *s = calloc(1, sizeof *s);
    titan_comm *c = s ? comm_new(name, rank, size, timeout_s, chunk, &nccl_backend, s) : NULL;
    if (!c) {
        free(s);
        api->destroy(h, timeout_s);
        return titan_error(TITAN_ERR_NOMEM, "comm %s: out of memory", name);
    }
    s->api = api;
    s->h = h;
    *out = c;
    return TITAN_OK;
}

/* ---- the world communicator ------------------------------------------------------- */

static unsigned nccl_inits; /* per process; the same count on every rank */

/* This rank's part before NCCL starts: the library, the GPU, and (rank 0)
 * the unique id. */
static titan_status prepare(const char *name, int me, int device, const titan_nccl_api **api,
                            unsigned char id[TITAN_NCCL_ID_BYTES]) {
    char msg[MSG_CAP];
    int count = 0;
    if (!(*api = load_api(name))) return titan_error_code();
    if ((*api)->device_count(&count, msg, sizeof msg) != TITAN_OK)
        return titan_error(TITAN_ERR_USAGE, "comm %s: nccl: %s", name, msg);
    if (device >= count)
        return titan_error(TITAN_ERR_USAGE, "comm %s: nccl: GPU %d requested, %d visible (0..%d)",
                           name, device, count, count - 1);
    if (me == 0 && (*api)->unique_id(id, msg, sizeof msg) != TITAN_OK)
        return titan_error(TITAN_ERR_COMM, "comm %s: nccl: %s", name, msg);
    return TITAN_OK;
}

/* Every rank says whether it can join, rank 0 also gives the id; after one
 * fence all know whether all can go on, and the id. */
static titan_status agree(titan_dist *d, unsigned k, titan_status mine, const char *name,
                          unsigned char id[TITAN_NCCL_ID_BYTES]) {
    char key[64];
    snprintf(key, sizeof key, "titan.nccl%u.id", k);
    if (titan_dist_rank(d) == 0 && mine == TITAN_OK) TITAN_TRY(titan_dist_put(d, key, id, TITAN_NCCL_ID_BYTES));
    char status[64];
    snprintf(status, sizeof status, "titan.nccl%u.status", k);
    TITAN_TRY(comm_agree_join(d, status, mine, name));
    size_t n = 0;
    TITAN_TRY(titan_dist_get(d, 0, key, id, TITAN_NCCL_ID_BYTES, &n));
    if (n != TITAN_NCCL_ID_BYTES)
        return titan_error(TITAN_ERR_COMM, "comm %s: rank 0's NCCL id has %zu bytes, want %d",
                           name, n, TITAN_NCCL_ID_BYTES);
    return TITAN_OK;
}

titan_status titan_comm_init_nccl(titan_dist *d, int device, const titan_comm_options *opt,
                                  titan_comm **out) {
    *out = NULL;
    double timeout = opt && opt->timeout_s > 0 ? opt->timeout_s : titan_dist_env_timeout();
    const char *name = opt && opt->name ? opt->name : "world";
    int me = titan_dist_rank(d), n = titan_dist_world_size(d);
    if (device < 0) device = titan_dist_local_rank(d);
    unsigned k = nccl_inits++;

    const titan_nccl_api *api = NULL;
    unsigned char id[TITAN_NCCL_ID_BYTES] = {0};
    titan_status mine = prepare(name, me, device, &api, id);
    TITAN_TRY(agree(d, k, mine, name, id));

    char msg[MSG_CAP];
    titan_nccl_comm *h = NULL;
    titan_status st = api->init_rank(device, n, me, id, name, timeout, &h, msg, sizeof msg);
    if (st != TITAN_OK) {
        titan_error(st, "comm %s (rank %d of %d, nccl, GPU %d): %s", name, me, n, device, msg);
        titan_error_hint("NCCL_DEBUG=WARN (or INFO) prints NCCL's own account");
        return st;
    }
    TITAN_TRY(make_comm(api, h, name, me, n, timeout, 0, out));
    return comm_flight_register(out);
}

/* ---- operations ---------------------------------------------------------------------- */

/* "all_reduce #7 (f32 x 1048576, sum)": collectives in the shm backend's
 * words (comm_describe_op); point-to-point with its peers. */
static void describe(const comm_op *op, unsigned long long seq, int n, char *buf, size_t cap) {
    const char *dt = titan_dtype_name(op->dtype);
    switch (op->kind) {
    case COMM_SEND: snprintf(buf, cap, "send to rank %d (%s x %zu)", op->peer, dt, op->count); break;
    case COMM_RECV:
        snprintf(buf, cap, "recv from rank %d (%s x %zu)", op->peer2, dt, op->count2);
        break;
    case COMM_SEND_RECV:
        snprintf(buf, cap, "send to rank %d (%s x %zu) with recv from rank %d (%s x %zu)", op->peer,
                 dt, op->count, op->peer2, dt, op->count2);
        break;
    default: comm_describe_op(op, seq, n, buf, cap); break;
    }
}

static titan_nccl_kind kind_of(comm_kind k) {
    switch (k) {
    case COMM_ALL_REDUCE: return TITAN_NCCL_ALL_REDUCE;
    case COMM_REDUCE_SCATTER: return TITAN_NCCL_REDUCE_SCATTER;
    case COMM_ALL_GATHER: return TITAN_NCCL_ALL_GATHER;
    case COMM_ALL_TO_ALL: return TITAN_NCCL_ALL_TO_ALL;
    case COMM_BROADCAST: return TITAN_NCCL_BROADCAST;
    case COMM_SEND: return TITAN_NCCL_SEND;
    case COMM_RECV: return TITAN_NCCL_RECV;
    case COMM_SEND_RECV: return TITAN_NCCL_SEND_RECV;
    case COMM_BARRIER:
    case COMM_SPLIT: break;
    }
    return TITAN_NCCL_BARRIER;
}

static titan_status nccl_split(titan_comm *c, const comm_op *op) {
    nccl_state *s = c->impl;
    char msg[MSG_CAP];
    titan_nccl_comm *h = NULL;
    int rank = -1, size = 0;
    titan_status st = s->api->split(s->h, op->color, op->key, c->timeout_s, &h, &rank, &size, msg,
                                    sizeof msg);
    if (st != TITAN_OK)
        return titan_error(st, "split of comm %s (rank %d of %d, nccl) into %s: %s", c->name,
                           c->rank, c->size, op->name, msg);
    if (!h) return TITAN_OK; /* color < 0: in no group */
    return make_comm(s->api, h, op->name, rank, size, c->timeout_s, c->chunk_bytes, op->out);
}

static titan_status nccl_run(titan_comm *c, const comm_op *op) {
    if (op->kind == COMM_SPLIT) return nccl_split(c, op);
    nccl_state *s = c->impl;
    int p2p = op->kind == COMM_SEND || op->kind == COMM_RECV || op->kind == COMM_SEND_RECV;
    unsigned long long seq = atomic_load(&c->seq) + 1;
    titan_nccl_op o = {
        .kind = kind_of(op->kind), .dtype = op->dtype, .avg = op->redop == TITAN_COMM_AVG,
        .send = op->send, .recv = op->recv, .count = op->count, .count2 = op->count2,
        .counts = op->counts, .peer = op->peer, .peer2 = op->peer2,
    };
    char msg[MSG_CAP] = "";
    titan_status st = s->api->enqueue(s->h, &o, c->timeout_s, msg, sizeof msg);
    if (st == TITAN_OK) st = s->api->wait(s->h, msg, sizeof msg);
    if (st != TITAN_OK) {
        char what[256];
        describe(op, seq, c->size, what, sizeof what);
        titan_error(st, "%s on comm %s (rank %d of %d, nccl): %s", what, c->name, c->rank, c->size,
                    msg);
        if (strstr(msg, "timed out"))
            titan_error_hint("titan-trace hang RUN names the rank that never called it from every "
                             "rank's flight recorder dump (written as the ranks fail or are stopped); "
                             "NCCL_DEBUG=WARN prints NCCL's own account");
        return st;
    }
    if (!p2p) atomic_store(&c->seq, seq);
    return TITAN_OK;
}

/* A failed communicator is aborted, not finalized: its peers may be gone. */
static void nccl_free(titan_comm *c) {
    nccl_state *s = c->impl;
    if (!s) return;
    if (c->failed) s->api->abort(s->h);
    s->api->destroy(s->h, c->timeout_s);
    free(s);
}

static const comm_backend nccl_backend = {"nccl", nccl_run, nccl_free, 1, NULL, NULL, NULL, NULL}; /* no shared windows yet */
