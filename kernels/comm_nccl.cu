/* comm_nccl.cu - the NCCL communicator's GPU half: the table of
 * lib/comm/comm_nccl_api.h (read it first), exported as
 * titan_cuda_nccl_api. lib/comm/comm_nccl.c is the other half.
 *
 * Every communicator is non-blocking (ncclConfig_t.blocking = 0): NCCL
 * calls return ncclInProgress instead of stalling inside a bootstrap or a
 * connection handshake, and we poll ncclCommGetAsyncError against a
 * deadline. That is what lets a missing rank end in a timeout and an
 * ncclCommAbort rather than a process stuck forever. NCCL's rule for that
 * mode: after ncclInProgress, issue nothing on the communicator (nor on its
 * stream) until the state leaves ncclInProgress.
 *
 * NCCL cannot tell which peer is missing, so a timeout names none.
 *
 * Host buffers are staged through two device buffers of the communicator
 * (stage[0] for the send side, stage[1] for recv): copied in on the stream
 * before the NCCL call, and the output copied out in wait() once the NCCL
 * work is done. Not at enqueue: a copy to pageable memory returns only when
 * it has run, that is when the peers have arrived, which would hold enqueue
 * past its deadline. The stages come from the stream-ordered allocator
 * where the GPU has one: cudaMalloc and cudaFree synchronize the whole
 * device, so they would wait on NCCL kernels of another communicator that
 * may be waiting on this rank. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <new>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/comm_nccl_api.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the nccl communicator needs NCCL 2.14 or newer (non-blocking communicators)"
#endif

struct titan_nccl_comm {
    ncclComm_t comm;     /* NULL once aborted or destroyed */
    cudaStream_t stream; /* ours alone: cudaStreamNonBlocking */
    cudaEvent_t ready;   /* recorded on the legacy default stream: inputs are computed */
    cudaEvent_t done;    /* recorded on stream after the operation */
    float *scratch;      /* the barrier's operand */
    void *stage[2];      /* host buffers' device copies: send, recv (grown on demand) */
    size_t stage_cap[2];
    int pools;           /* stages from cudaMallocAsync (else cudaMalloc) */
    void *copy_back;     /* host recv buffer that wait() fills from stage[1], or NULL */
    size_t copy_bytes;
    int device, rank, size;
    double deadline;     /* of the operation under way */
    double timeout_s;    /* the one it was given */
    char why[256];       /* why it was aborted */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spin a little (short collectives finish in microseconds), then sleep in
 * 50 us steps so a long wait costs no core. */
static void pause_step(int i) {
    if (i < 200) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* Makes the communicator's GPU the calling thread's current device, and
 * leaves it so. Not put back on purpose: since CUDA 12 cudaSetDevice creates
 * the primary context of the device it names, so restoring a thread's
 * default device 0 (comm.c's progress thread never chose one) would create
 * a context on GPU 0 from every rank of the node. A titan process drives
 * one GPU: its compute and its communicator are on the same one. */
static cudaError_t use_device(int device) {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == device) return cudaSuccess;
    return cudaSetDevice(device);
}

static titan_status cuda_fail(char *msg, size_t cap, const char *what, cudaError_t e) {
    snprintf(msg, cap, "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError(); /* clear a non-sticky error */
    return TITAN_ERR_COMM;
}

static titan_status nccl_fail(char *msg, size_t cap, const char *what, ncclResult_t r,
                              ncclComm_t comm) {
    const char *last = ncclGetLastError(comm);
    snprintf(msg, cap, "%s: %s%s%s", what, ncclGetErrorString(r), last && *last ? ": " : "",
             last ? last : "");
    return TITAN_ERR_COMM;
}

static void abort_comm(titan_nccl_comm *c, const char *why) {
    if (!c->comm) return;
    ncclCommAbort(c->comm);
    c->comm = NULL;
    snprintf(c->why, sizeof c->why, "%s", why);
}

static titan_status timed_out(char *msg, size_t cap, double timeout_s, const char *stage) {
    snprintf(msg, cap, "timed out after %.1f s %s (NCCL cannot tell which rank is missing); "
             "the communicator is aborted", timeout_s, stage);
    return TITAN_ERR_COMM;
}

/* Polls until comm leaves ncclInProgress. TITAN_ERR_COMM on an error or at
 * the deadline (the caller aborts). */
static titan_status settle(ncclComm_t comm, double deadline, double timeout_s, const char *stage,
                           char *msg, size_t cap) {
    for (int i = 0;; i++) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return nccl_fail(msg, cap, "ncclCommGetAsyncError", r, comm);
        if (state == ncclSuccess) return TITAN_OK;
        if (state != ncclInProgress) return nccl_fail(msg, cap, stage, state, comm);
        if (now_s() >= deadline) return timed_out(msg, cap, timeout_s, stage);
        pause_step(i);
    }
}

/* ---- creation ------------------------------------------------------------------ */

static titan_status api_device_count(int *n, char *msg, size_t cap) {
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) return cuda_fail(msg, cap, "cudaGetDeviceCount", e);
    if (*n <= 0) {
        snprintf(msg, cap, "cudaGetDeviceCount: 0 devices");
        return TITAN_ERR_COMM;
    }
    return TITAN_OK;
}

static titan_status api_unique_id(unsigned char id[TITAN_NCCL_ID_BYTES], char *msg, size_t cap) {
    static_assert(sizeof(ncclUniqueId) == TITAN_NCCL_ID_BYTES, "ncclUniqueId is 128 bytes");
    ncclUniqueId uid;
    ncclResult_t r = ncclGetUniqueId(&uid);
    if (r != ncclSuccess) return nccl_fail(msg, cap, "ncclGetUniqueId", r, NULL);
    memcpy(id, &uid, sizeof uid);
    return TITAN_OK;
}

/* Frees what new_shell made; the NCCL communicator must be gone already. */
static void free_shell(titan_nccl_comm *c) {
    for (int k = 0; k < 2; k++)
        if (c->stage[k]) {
            if (c->pools) cudaFreeAsync(c->stage[k], c->stream);
            else cudaFree(c->stage[k]);
        }
    if (c->done) cudaEventDestroy(c->done);
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->scratch) cudaFree(c->scratch);
    delete c;
}

/* The stream, events and scratch word, on the current device. */
static titan_nccl_comm *new_shell(int device, char *msg, size_t cap) {
    titan_nccl_comm *c = new (std::nothrow) titan_nccl_comm();
    if (!c) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    c->device = device;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->scratch, sizeof(float));
    if (e == cudaSuccess) e = cudaMemset(c->scratch, 0, sizeof(float));
    cudaDeviceAttr pools = cudaDevAttrMemoryPoolsSupported;
    if (e == cudaSuccess && cudaDeviceGetAttribute(&c->pools, pools, device) != cudaSuccess) {
        cudaGetLastError(); /* no answer: plain cudaMalloc */
        c->pools = 0;
    }
    if (e != cudaSuccess) {
        cuda_fail(msg, cap, "creating the communicator's stream and events", e);
        free_shell(c);
        return NULL;
    }
    return c;
}

static titan_status api_init_rank(int device, int nranks, int rank,
                                  const unsigned char id[TITAN_NCCL_ID_BYTES], const char *name,
                                  double timeout_s, titan_nccl_comm **out, char *msg, size_t cap) {
    *out = NULL;
    double deadline = now_s() + timeout_s;
    cudaError_t de = use_device(device);
    if (de != cudaSuccess) return cuda_fail(msg, cap, "cudaSetDevice", de);
    titan_nccl_comm *c = new_shell(device, msg, cap);
    if (!c) return TITAN_ERR_COMM;
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 3)
    cfg.commName = name;
#endif
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, nranks, uid, rank, &cfg);
    titan_status st = TITAN_OK;
    if (r != ncclSuccess && r != ncclInProgress)
        st = nccl_fail(msg, cap, "ncclCommInitRankConfig", r, c->comm);
    else
        st = settle(c->comm, deadline, timeout_s, "in ncclCommInitRankConfig", msg, cap);
    if (st != TITAN_OK) {
        abort_comm(c, msg);
        free_shell(c);
        return st;
    }
    c->rank = rank;
    c->size = nranks;
    *out = c;
    return TITAN_OK;
}

static titan_status api_split(titan_nccl_comm *parent, int color, int key, double timeout_s,
                              titan_nccl_comm **out, int *rank, int *size, char *msg,
                              size_t cap) {
    *out = NULL;
    *rank = -1;
    *size = 0;
    if (!parent->comm) {
        snprintf(msg, cap, "the communicator was aborted earlier: %s", parent->why);
        return TITAN_ERR_COMM;
    }
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 1)
    snprintf(msg, cap, "split needs NCCL 2.18.1 or newer (ncclCommSplit); built with %d",
             NCCL_VERSION_CODE);
    return TITAN_ERR_USAGE;
#else
    double deadline = now_s() + timeout_s;
    cudaError_t de = use_device(parent->device);
    if (de != cudaSuccess) return cuda_fail(msg, cap, "cudaSetDevice", de);
    titan_nccl_comm *c = NULL;
    if (color >= 0 && !(c = new_shell(parent->device, msg, cap))) return TITAN_ERR_COMM;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t child = NULL;
    ncclResult_t r = ncclCommSplit(parent->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key,
                                   &child, &cfg);
    titan_status st = TITAN_OK;
    if (r != ncclSuccess && r != ncclInProgress)
        st = nccl_fail(msg, cap, "ncclCommSplit", r, parent->comm);
    /* The split runs as a job of the parent: the child handle appears once
     * the parent settles; then the child finishes its own setup. */
    if (st == TITAN_OK)
        st = settle(parent->comm, deadline, timeout_s, "in ncclCommSplit", msg, cap);
    if (st == TITAN_OK && child)
        st = settle(child, deadline, timeout_s, "setting up the split communicator", msg, cap);
    if (st == TITAN_OK && color >= 0 && !child) {
        snprintf(msg, cap, "ncclCommSplit gave no communicator for color %d", color);
        st = TITAN_ERR_COMM;
    }
    if (st == TITAN_OK && child) {
        ncclResult_t a = ncclCommUserRank(child, rank), b = ncclCommCount(child, size);
        if (a != ncclSuccess || b != ncclSuccess)
            st = nccl_fail(msg, cap, "ncclCommUserRank/ncclCommCount", a ? a : b, child);
    }
    if (st != TITAN_OK) {
        /* The parent first: its abort joins the split job, which may still
         * write the child's handle into `child`. */
        abort_comm(parent, msg); /* its ranks are out of step now */
        if (child) ncclCommAbort(child);
        if (c) free_shell(c);
        return st;
    }
    if (c) {
        c->comm = child;
        c->rank = *rank;
        c->size = *size;
    }
    *out = c;
    return TITAN_OK;
#endif
}

/* ---- operations ------------------------------------------------------------------ */

static ncclDataType_t nccl_type(titan_dtype t) {
    switch (t) {
    case TITAN_DTYPE_BF16: return ncclBfloat16;
    case TITAN_DTYPE_F16: return ncclFloat16;
    case TITAN_DTYPE_U32: return ncclUint32;
    case TITAN_DTYPE_U8: return ncclUint8;
    case TITAN_DTYPE_F32: break;
    }
    return ncclFloat32;
}

static size_t type_size(titan_dtype t) {
    return t == TITAN_DTYPE_U8 ? 1 : t == TITAN_DTYPE_BF16 || t == TITAN_DTYPE_F16 ? 2 : 4;
}

static int all_equal(const size_t *counts, int n) {
    for (int r = 1; r < n; r++)
        if (counts[r] != counts[0]) return 0;
    return 1;
}

static size_t total(const size_t *counts, int n) {
    size_t s = 0;
    for (int r = 0; r < n; r++) s += counts[r];
    return s;
}

/* What an operation reads and writes: bytes of each side, and which sides
 * are host memory to be staged. */
struct sides {
    size_t sb, rb;
    int host_send, host_recv;
};

/* Device (or managed) memory of this GPU, used as it is, or host memory
 * (pinned or pageable), staged (*host = 1); both ends the same kind. */
static titan_status check_buf(const titan_nccl_comm *c, const void *p, size_t bytes,
                              const char *which, int *host, char *msg, size_t cap) {
    *host = 0;
    if (!bytes) return TITAN_OK;
    const char *ends[2] = {(const char *)p, (const char *)p + bytes - 1};
    int on_host[2];
    for (int k = 0; k < 2; k++) {
        cudaPointerAttributes a;
        cudaError_t e = cudaPointerGetAttributes(&a, ends[k]);
        if (e != cudaSuccess) {
            cudaGetLastError();
            a.type = cudaMemoryTypeUnregistered;
        }
        on_host[k] = a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
        if (a.type == cudaMemoryTypeDevice && a.device != c->device) {
            snprintf(msg, cap, "%s buffer %p is on GPU %d, the communicator's is GPU %d", which, p,
                     a.device, c->device);
            return TITAN_ERR_USAGE;
        }
    }
    if (on_host[0] != on_host[1]) {
        snprintf(msg, cap, "%s buffer %p (%zu bytes) starts in %s memory and ends in %s memory",
                 which, p, bytes, on_host[0] ? "host" : "GPU", on_host[1] ? "host" : "GPU");
        return TITAN_ERR_USAGE;
    }
    *host = on_host[0];
    return TITAN_OK;
}

static titan_status check_bufs(const titan_nccl_comm *c, const titan_nccl_op *op, int n, int me,
                               sides *sd, char *msg, size_t cap) {
    size_t es = type_size(op->dtype), sb = 0, rb = 0;
    switch (op->kind) {
    case TITAN_NCCL_ALL_REDUCE: sb = rb = op->count * es; break;
    case TITAN_NCCL_REDUCE_SCATTER:
        sb = total(op->counts, n) * es;
        rb = op->counts[me] * es;
        break;
    case TITAN_NCCL_ALL_GATHER:
        sb = op->counts[me] * es;
        rb = total(op->counts, n) * es;
        break;
    case TITAN_NCCL_ALL_TO_ALL: sb = rb = op->count * (size_t)n * es; break;
    case TITAN_NCCL_BROADCAST: rb = op->count * es; break;
    case TITAN_NCCL_SEND: sb = op->count * es; break;
    case TITAN_NCCL_RECV: rb = op->count2 * es; break;
    case TITAN_NCCL_SEND_RECV:
        sb = op->count * es;
        rb = op->count2 * es;
        break;
    case TITAN_NCCL_BARRIER: break;
    }
    sd->sb = sb;
    sd->rb = rb;
    titan_status st = check_buf(c, op->send, sb, "send", &sd->host_send, msg, cap);
    return st != TITAN_OK ? st : check_buf(c, op->recv, rb, "recv", &sd->host_recv, msg, cap);
}

/* Stage k (0 send, 1 recv) of at least `need` bytes, in stream order: the
 * old one (nothing of this communicator is in flight) is freed first. */
static cudaError_t grow_stage(titan_nccl_comm *c, int k, size_t need) {
    if (need <= c->stage_cap[k]) return cudaSuccess;
    size_t want = 64 << 10; /* loss sums and status words fit the first one */
    while (want < need) want *= 2;
    if (c->stage[k]) {
        cudaError_t e = c->pools ? cudaFreeAsync(c->stage[k], c->stream) : cudaFree(c->stage[k]);
        c->stage[k] = NULL;
        c->stage_cap[k] = 0;
        if (e != cudaSuccess) return e;
    }
    cudaError_t e = c->pools ? cudaMallocAsync(&c->stage[k], want, c->stream)
                             : cudaMalloc(&c->stage[k], want);
    if (e != cudaSuccess) {
        c->stage[k] = NULL;
        return e;
    }
    c->stage_cap[k] = want;
    return cudaSuccess;
}

/* Points o's host sides at the stages and queues the copies in: the send
 * side, and for broadcast (in place on recv) the root's recv side. An
 * in-place all_reduce of a host buffer uses the recv stage alone; the other
 * in-place forms become out of place, which NCCL takes as well. */
static cudaError_t stage_in(titan_nccl_comm *c, const titan_nccl_op *op, const sides *sd, int me,
                            titan_nccl_op *o) {
    cudaError_t e = cudaSuccess;
    int shared = op->kind == TITAN_NCCL_ALL_REDUCE && sd->host_send && sd->host_recv &&
                 op->send == op->recv;
    if (sd->host_recv) {
        if ((e = grow_stage(c, 1, sd->rb)) != cudaSuccess) return e;
        o->recv = c->stage[1];
    }
    if (sd->host_send) {
        if (!shared && (e = grow_stage(c, 0, sd->sb)) != cudaSuccess) return e;
        void *to = c->stage[shared ? 1 : 0];
        o->send = to;
        e = cudaMemcpyAsync(to, op->send, sd->sb, cudaMemcpyHostToDevice, c->stream);
        if (e != cudaSuccess) return e;
    }
    if (sd->host_recv && op->kind == TITAN_NCCL_BROADCAST && me == op->peer)
        e = cudaMemcpyAsync(o->recv, op->recv, sd->rb, cudaMemcpyHostToDevice, c->stream);
    return e;
}

/* The NCCL calls of one operation, between ncclGroupStart and ncclGroupEnd.
 * Zero-sized pieces are left out: every rank knows the counts, so all
 * leave out the same ones. */
static ncclResult_t issue(titan_nccl_comm *c, const titan_nccl_op *op, int n, int me) {
    ncclComm_t m = c->comm;
    cudaStream_t s = c->stream;
    ncclDataType_t t = nccl_type(op->dtype);
    ncclRedOp_t red = op->avg ? ncclAvg : ncclSum;
    size_t es = type_size(op->dtype);
    const char *send = (const char *)op->send;
    char *recv = (char *)op->recv;
    ncclResult_t r = ncclSuccess;
    switch (op->kind) {
    case TITAN_NCCL_ALL_REDUCE:
        if (op->count) r = ncclAllReduce(send, recv, op->count, t, red, m, s);
        break;
    case TITAN_NCCL_REDUCE_SCATTER:
        if (all_equal(op->counts, n)) {
            if (op->counts[0]) r = ncclReduceScatter(send, recv, op->counts[0], t, red, m, s);
            break;
        }
        for (size_t q = 0, at = 0; q < (size_t)n && r == ncclSuccess; at += op->counts[q++])
            if (op->counts[q])
                r = ncclReduce(send + at * es, (int)q == me ? recv : NULL, op->counts[q], t, red,
                               (int)q, m, s);
        break;
    case TITAN_NCCL_ALL_GATHER:
        if (all_equal(op->counts, n)) {
            if (op->counts[0]) r = ncclAllGather(send, recv, op->counts[0], t, m, s);
            break;
        }
        for (size_t q = 0, at = 0; q < (size_t)n && r == ncclSuccess; at += op->counts[q++])
            if (op->counts[q])
                r = ncclBroadcast((int)q == me ? (const void *)send : recv + at * es, recv + at * es,
                                  op->counts[q], t, (int)q, m, s);
        break;
    case TITAN_NCCL_ALL_TO_ALL:
        for (int q = 0; q < n && op->count && r == ncclSuccess; q++) {
            size_t at = (size_t)q * op->count * es;
            r = ncclSend(send + at, op->count, t, q, m, s);
            if (r == ncclSuccess) r = ncclRecv(recv + at, op->count, t, q, m, s);
        }
        break;
    case TITAN_NCCL_BROADCAST:
        if (op->count) r = ncclBroadcast(recv, recv, op->count, t, op->peer, m, s);
        break;
    case TITAN_NCCL_SEND:
        if (op->count) r = ncclSend(send, op->count, t, op->peer, m, s);
        break;
    case TITAN_NCCL_RECV:
        if (op->count2) r = ncclRecv(recv, op->count2, t, op->peer2, m, s);
        break;
    case TITAN_NCCL_SEND_RECV:
        if (op->count) r = ncclSend(send, op->count, t, op->peer, m, s);
        if (r == ncclSuccess && op->count2) r = ncclRecv(recv, op->count2, t, op->peer2, m, s);
        break;
    case TITAN_NCCL_BARRIER:
        r = ncclAllReduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum, m, s);
        break;
    }
    return r;
}

static titan_status api_enqueue(titan_nccl_comm *c, const titan_nccl_op *op, double timeout_s,
                                char *msg, size_t cap) {
    c->deadline = now_s() + timeout_s;
    c->timeout_s = timeout_s;
    if (!c->comm) {
        snprintf(msg, cap, "the communicator was aborted earlier: %s", c->why);
        return TITAN_ERR_COMM;
    }
    cudaError_t de = use_device(c->device);
    if (de != cudaSuccess) return cuda_fail(msg, cap, "cudaSetDevice", de);
    int n = c->size, me = c->rank;
    sides sd;
    TITAN_TRY(check_bufs(c, op, n, me, &sd, msg, cap)); /* nothing started: still usable */
    c->copy_back = NULL;
    c->copy_bytes = 0;

    /* The inputs are written by kernels on the legacy default stream (the
     * compute backend's); our non-blocking stream must wait for them. */
    cudaError_t e = cudaEventRecord(c->ready, cudaStreamLegacy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(c->stream, c->ready, 0);
    if (e != cudaSuccess) {
        titan_status st = cuda_fail(msg, cap, "ordering after the default stream", e);
        abort_comm(c, msg);
        return st;
    }
    titan_nccl_op o = *op;
    if ((sd.host_send || sd.host_recv) && (e = stage_in(c, op, &sd, me, &o)) != cudaSuccess) {
        titan_status st = cuda_fail(msg, cap, "staging host buffers on the GPU", e);
        abort_comm(c, msg);
        return st;
    }
    titan_status st = TITAN_OK;
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) {
        ncclResult_t ri = issue(c, &o, n, me);
        r = ncclGroupEnd(); /* always: closes the group even after a failed call */
        if (ri != ncclSuccess) r = ri;
    }
    if (r != ncclSuccess && r != ncclInProgress)
        st = nccl_fail(msg, cap, "enqueueing", r, c->comm);
    else
        st = settle(c->comm, c->deadline, timeout_s, "enqueueing (connecting to the peers)", msg, cap);
    if (st == TITAN_OK && (e = cudaEventRecord(c->done, c->stream)) != cudaSuccess)
        st = cuda_fail(msg, cap, "cudaEventRecord", e);
    if (st != TITAN_OK) {
        abort_comm(c, msg);
        return st;
    }
    if (sd.host_recv) {
        c->copy_back = op->recv;
        c->copy_bytes = sd.rb;
    }
    return TITAN_OK;
}

/* The host recv buffer's copy out of its stage, once the NCCL work is done:
 * quick by then, so a plain copy and a wait on the stream. */
static titan_status finish_copy_back(titan_nccl_comm *c, char *msg, size_t cap) {
    void *to = c->copy_back;
    size_t bytes = c->copy_bytes;
    c->copy_back = NULL;
    c->copy_bytes = 0;
    if (!to) return TITAN_OK;
    cudaError_t e = cudaMemcpyAsync(to, c->stage[1], bytes, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) return TITAN_OK;
    titan_status st = cuda_fail(msg, cap, "copying the result to the host buffer", e);
    abort_comm(c, msg);
    return st;
}

static int api_query(titan_nccl_comm *c) {
    if (!c->comm) return -1;
    (void)use_device(c->device);
    cudaError_t e = cudaEventQuery(c->done);
    return e == cudaSuccess ? 1 : e == cudaErrorNotReady ? 0 : -1;
}

static titan_status api_wait(titan_nccl_comm *c, char *msg, size_t cap) {
    if (!c->comm) {
        snprintf(msg, cap, "the communicator was aborted earlier: %s", c->why);
        return TITAN_ERR_COMM;
    }
    cudaError_t de = use_device(c->device);
    if (de != cudaSuccess) return cuda_fail(msg, cap, "cudaSetDevice", de);
    titan_status st = TITAN_OK;
    for (int i = 0;; i++) {
        cudaError_t e = cudaEventQuery(c->done);
        if (e == cudaSuccess) return finish_copy_back(c, msg, cap);
        if (e != cudaErrorNotReady) {
            st = cuda_fail(msg, cap, "cudaEventQuery", e);
            break;
        }
        ncclResult_t state = ncclSuccess, r = ncclCommGetAsyncError(c->comm, &state);
        if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
            st = nccl_fail(msg, cap, "NCCL reported", r != ncclSuccess ? r : state, c->comm);
            break;
        }
        double t = now_s();
        if (t >= c->deadline) {
            st = timed_out(msg, cap, c->timeout_s, "waiting for the operation to complete");
            break;
        }
        pause_step(i);
    }
    c->copy_back = NULL; /* the stage holds no result */
    c->copy_bytes = 0;
    abort_comm(c, msg);
    return st;
}

static void api_abort(titan_nccl_comm *c) {
    if (!c) return;
    (void)use_device(c->device);
    abort_comm(c, "aborted by its owner");
}

static void api_destroy(titan_nccl_comm *c, double timeout_s) {
    if (!c) return;
    (void)use_device(c->device);
    if (c->comm) {
        /* Finalize flushes outstanding work and waits for the peers to be
         * quiescent: bounded here, so a vanished peer cannot hang a free. */
        char msg[256];
        ncclResult_t r = ncclCommFinalize(c->comm);
        int clean = (r == ncclSuccess || r == ncclInProgress) &&
                    settle(c->comm, now_s() + timeout_s, timeout_s, "finalizing", msg,
                           sizeof msg) == TITAN_OK;
        if (clean) ncclCommDestroy(c->comm);
        else ncclCommAbort(c->comm);
        c->comm = NULL;
    }
    free_shell(c);
}

/* ---- the table --------------------------------------------------------------------- */

extern "C" __attribute__((visibility("default"))) const titan_nccl_api *titan_cuda_nccl_api(void) {
    static titan_nccl_api api = {
        sizeof(titan_nccl_api), 0,           api_device_count, api_unique_id, api_init_rank,
        api_split,              api_enqueue, api_query,        api_wait,      api_abort,
        api_destroy,
    };
    int v = 0;
    if (ncclGetVersion(&v) == ncclSuccess) api.nccl_version = v;
    return &api;
}
