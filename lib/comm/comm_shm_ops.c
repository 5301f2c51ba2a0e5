/* comm_shm_ops.c - the shared-memory backend's operations: collectives as
 * pipelines of phase-synchronized steps, reductions in rank order, and
 * send/recv over per-pair byte rings (protocol: comm_shm.h). */
#include "comm_shm.h"

#include <stdio.h>
#include <string.h>

static size_t piece(size_t total, size_t start, size_t p) {
    return start >= total ? 0 : total - start < p ? total - start : p;
}

static void copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

/* ---- collectives: phases ---------------------------------------------------------- */

typedef struct {
    shm_ctx *x;
    comm_sig sig;
    int checked;
} coll;

static uint64_t miss_progress(shm_ctx *x, void *arg) {
    uint64_t target = *(const uint64_t *)arg, miss = 0;
    for (int r = 0; r < x->s->n; r++)
        if (atomic_load_explicit(&x->s->ranks[r].progress, memory_order_acquire) < target)
            miss |= 1ull << r;
    return miss;
}

static void describe_rank(shm_ctx *x, int r, char *buf, size_t cap) {
    shm_rank *k = &x->s->ranks[r];
    unsigned long long cur = atomic_load(&k->op_cur), done = atomic_load(&k->ops_done);
    if (cur == x->seq)
        snprintf(buf, cap, "rank %d is inside this operation, behind", r);
    else
        snprintf(buf, cap, "rank %d completed %llu operation%s and has not started #%llu", r, done,
                 done == 1 ? "" : "s", (unsigned long long)x->seq);
}

static titan_status wait_all(shm_ctx *x, uint64_t target) {
    return shm_wait(x, miss_progress, &target, describe_rank);
}

static void arrive(shm_state *s) {
    s->phase++;
    atomic_store_explicit(&s->ranks[s->me].progress, s->phase, memory_order_release);
    shm_ring_bell(s);
}

static titan_status check_sigs(coll *k) {
    shm_state *s = k->x->s;
    for (int r = 0; r < s->n; r++) {
        const comm_sig *o = &s->ranks[r].sig[k->sig.seq & 1];
        if (memcmp(o, &k->sig, sizeof *o) == 0) continue;
        char theirs[192];
        comm_sig_describe(o, theirs, sizeof theirs);
        if (o->counts_hash != k->sig.counts_hash && o->kind == k->sig.kind && o->count == k->sig.count)
            snprintf(theirs + strlen(theirs), sizeof theirs - strlen(theirs), " with other counts");
        return shm_fail(k->x, "rank %d called %s instead: every rank must make the same "
                        "collective calls in the same order", r, theirs);
    }
    return TITAN_OK;
}

/* Publish, wait for everyone; the first time in an operation, compare calls. */
static titan_status sync_all(coll *k) {
    arrive(k->x->s);
    TITAN_TRY(wait_all(k->x, k->x->s->phase));
    if (k->checked) return TITAN_OK;
    k->checked = 1;
    return check_sigs(k);
}

/* A pipeline step writes half steps % 2 of its slot, once everyone is done
 * reading that half from the step before last. */
static titan_status step_begin(coll *k, int *half) {
    shm_state *s = k->x->s;
    *half = (int)(s->steps & 1);
    return wait_all(k->x, s->half_free[*half]);
}

static void step_end(coll *k, int half) {
    shm_state *s = k->x->s;
    arrive(s); /* "done reading": nobody waits for it now, the next user of the half does */
    s->half_free[half] = s->phase;
    s->steps++;
}

/* ---- the collectives ------------------------------------------------------------------- */

/* Rank q's part of an all_reduce of count elements: balanced, in rank order. */
static size_t part_off(size_t count, int n, int q) {
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)q * base + ((size_t)q < rem ? (size_t)q : rem);
}
static size_t part_len(size_t count, int n, int q) {
    return count / (size_t)n + ((size_t)q < count % (size_t)n);
}

static size_t steps_for(size_t maxlen, size_t p) { return maxlen ? (maxlen + p - 1) / p : 1; }

static titan_status all_reduce(coll *k) {
    shm_state *s = k->x->s;
    const comm_op *op = k->x->op;
    int n = s->n, me = s->me, avg = op->redop == TITAN_COMM_AVG;
    size_t es = titan_dtype_size(op->dtype), count = op->count;
    size_t p = s->hdr->half_bytes / es / (size_t)n; /* elements of each part per step */
    const unsigned char *send = op->send, *src[SHM_MAX_RANKS];
    unsigned char *recv = op->recv;
    size_t nsteps = steps_for(part_len(count, n, 0), p);
    for (size_t st = 0; st < nsteps; st++) {
        size_t start = st * p;
        int h;
        TITAN_TRY(step_begin(k, &h));
        unsigned char *mine = shm_slot(s, me, h);
        for (int q = 0; q < n; q++) /* my own part is read from send directly */
            if (q != me)
                copy(mine + (size_t)q * p * es, send + (part_off(count, n, q) + start) * es,
                     piece(part_len(count, n, q), start, p) * es);
        TITAN_TRY(sync_all(k));
        for (int j = 0; j < n; j++) src[j] = shm_slot(s, j, h) + (size_t)me * p * es;
        src[me] = send + (part_off(count, n, me) + start) * es;
        comm_reduce_ranks(src, n, piece(part_len(count, n, me), start, p), op->dtype, avg,
               recv + (part_off(count, n, me) + start) * es, mine + (size_t)me * p * es);
        TITAN_TRY(sync_all(k));
        for (int q = 0; q < n; q++)
            if (q != me)
                copy(recv + (part_off(count, n, q) + start) * es,
                     shm_slot(s, q, h) + (size_t)q * p * es, piece(part_len(count, n, q), start, p) * es);
        step_end(k, h);
    }
    return TITAN_OK;
}

/* off[q] = counts[0] + ... + counts[q-1]: where rank q's block starts. */
static void offsets(const size_t *counts, int n, size_t *off) {
    off[0] = 0;
    for (int q = 0; q < n; q++) off[q + 1] = off[q] + counts[q];
}

static size_t max_count(const size_t *counts, int n) {
    size_t m = 0;
    for (int r = 0; r < n; r++) m = counts[r] > m ? counts[r] : m;
    return m;
}

static titan_status reduce_scatter(coll *k) {
    shm_state *s = k->x->s;
    const comm_op *op = k->x->op;
    int n = s->n, me = s->me;
    size_t es = titan_dtype_size(op->dtype), off[SHM_MAX_RANKS + 1];
    offsets(op->counts, n, off);
    size_t p = s->hdr->half_bytes / es / (size_t)n;
    const unsigned char *send = op->send, *src[SHM_MAX_RANKS];
    unsigned char *recv = op->recv;
    size_t nsteps = steps_for(max_count(op->counts, n), p);
    for (size_t st = 0; st < nsteps; st++) {
        size_t start = st * p;
        int h;
        TITAN_TRY(step_begin(k, &h));
        unsigned char *mine = shm_slot(s, me, h);
        for (int q = 0; q < n; q++)
            if (q != me)
                copy(mine + (size_t)q * p * es, send + (off[q] + start) * es,
                     piece(op->counts[q], start, p) * es);
        TITAN_TRY(sync_all(k));
        for (int j = 0; j < n; j++) src[j] = shm_slot(s, j, h) + (size_t)me * p * es;
        src[me] = send + (off[me] + start) * es;
        comm_reduce_ranks(src, n, piece(op->counts[me], start, p), op->dtype, op->redop == TITAN_COMM_AVG,
               recv + start * es, NULL);
        step_end(k, h);
    }
    return TITAN_OK;
}

static titan_status all_gather(coll *k) {
    shm_state *s = k->x->s;
    const comm_op *op = k->x->op;
    int n = s->n, me = s->me;
    size_t es = titan_dtype_size(op->dtype), off[SHM_MAX_RANKS + 1];
    offsets(op->counts, n, off);
    size_t p = s->hdr->half_bytes / es;
    const unsigned char *send = op->send;
    unsigned char *recv = op->recv;
    size_t nsteps = steps_for(max_count(op->counts, n), p);
    for (size_t st = 0; st < nsteps; st++) {
        size_t start = st * p;
        int h;
        TITAN_TRY(step_begin(k, &h));
        copy(shm_slot(s, me, h), send + start * es, piece(op->counts[me], start, p) * es);
        TITAN_TRY(sync_all(k));
        for (int q = 0; q < n; q++)
            copy(recv + (off[q] + start) * es, shm_slot(s, q, h), piece(op->counts[q], start, p) * es);
        step_end(k, h);
    }
    return TITAN_OK;
}

static titan_status all_to_all(coll *k) {
    shm_state *s = k->x->s;
    const comm_op *op = k->x->op;
    int n = s->n, me = s->me;
    size_t es = titan_dtype_size(op->dtype), count = op->count;
    size_t p = s->hdr->half_bytes / es / (size_t)n;
    const unsigned char *send = op->send;
    unsigned char *recv = op->recv;
    size_t nsteps = steps_for(count, p);
    for (size_t st = 0; st < nsteps; st++) {
        size_t start = st * p, len = piece(count, start, p) * es;
        int h;
        TITAN_TRY(step_begin(k, &h));
        unsigned char *mine = shm_slot(s, me, h);
        for (int q = 0; q < n; q++)
            copy(mine + (size_t)q * p * es, send + ((size_t)q * count + start) * es, len);
        TITAN_TRY(sync_all(k));
        for (int q = 0; q < n; q++)
            copy(recv + ((size_t)q * count + start) * es, shm_slot(s, q, h) + (size_t)me * p * es, len);
        step_end(k, h);
    }
    return TITAN_OK;
}

static titan_status broadcast(coll *k) {
    shm_state *s = k->x->s;
    const comm_op *op = k->x->op;
    int root = op->peer;
    size_t es = titan_dtype_size(op->dtype);
    size_t p = s->hdr->half_bytes / es;
    unsigned char *buf = op->recv;
    size_t nsteps = steps_for(op->count, p);
    for (size_t st = 0; st < nsteps; st++) {
        size_t start = st * p, len = piece(op->count, start, p) * es;
        int h;
        TITAN_TRY(step_begin(k, &h));
        if (s->me == root) copy(shm_slot(s, root, h), buf + start * es, len);
        TITAN_TRY(sync_all(k));
        if (s->me != root) copy(buf + start * es, shm_slot(s, root, h), len);
        step_end(k, h);
    }
    return TITAN_OK;
}

titan_status shm_run_collective(shm_ctx *x) {
    shm_state *s = x->s;
    coll k = {.x = x, .sig = comm_sig_of(x->op, x->seq, s->n)};
    shm_rank *mine = &s->ranks[s->me];
    mine->sig[x->seq & 1] = k.sig; /* published by the first arrive */
    atomic_store(&mine->op_cur, x->seq);
    titan_status st = TITAN_OK;
    switch (x->op->kind) {
    case COMM_ALL_REDUCE: st = all_reduce(&k); break;
    case COMM_REDUCE_SCATTER: st = reduce_scatter(&k); break;
    case COMM_ALL_GATHER: st = all_gather(&k); break;
    case COMM_ALL_TO_ALL: st = all_to_all(&k); break;
    case COMM_BROADCAST: st = broadcast(&k); break;
    case COMM_BARRIER: st = sync_all(&k); break;
    default: st = titan_error(TITAN_ERR_FAIL, "comm shm: operation %d is not a collective", x->op->kind);
    }
    if (st == TITAN_OK) {
        atomic_store(&mine->ops_done, x->seq);
        atomic_store(&mine->op_cur, 0);
    }
    return st;
}

/* ---- send / recv ---------------------------------------------------------------------------- */

/* One direction of a message: the stream is a 16-byte header (payload bytes,
 * message number), the payload, and padding to a multiple of 16. */
typedef struct {
    int active, peer;
    unsigned char *buf; /* send: source (const in spirit); recv: destination */
    size_t bytes, total, pos;
    uint64_t msgno, hdr[2];
} flow;

static void flow_init(flow *f, int peer, void *buf, size_t bytes, uint64_t msgno) {
    f->active = 1;
    f->peer = peer;
    f->buf = buf;
    f->bytes = bytes;
    f->total = SHM_MSG_HDR + (bytes + 15) / 16 * 16;
    f->pos = 0;
    f->msgno = msgno;
    f->hdr[0] = bytes;
    f->hdr[1] = msgno;
}

/* Copies stream bytes [pos, pos+n) between the flow and ring offset `at`. */
static void stream_copy(flow *f, unsigned char *ring, size_t R, uint64_t at, size_t n, int to_ring) {
    while (n > 0) {
        size_t r = (size_t)(at % R), chunk = R - r < n ? R - r : n;
        /* split at the header and payload ends */
        size_t lim = f->pos < SHM_MSG_HDR ? SHM_MSG_HDR - f->pos
                     : f->pos < SHM_MSG_HDR + f->bytes ? SHM_MSG_HDR + f->bytes - f->pos : chunk;
        if (chunk > lim) chunk = lim;
        if (f->pos < SHM_MSG_HDR) {
            if (to_ring) memcpy(ring + r, (unsigned char *)f->hdr + f->pos, chunk);
            /* a receiver reads the header separately, before taking the message */
        } else if (f->pos < SHM_MSG_HDR + f->bytes) {
            unsigned char *user = f->buf + (f->pos - SHM_MSG_HDR);
            if (to_ring) memcpy(ring + r, user, chunk);
            else memcpy(user, ring + r, chunk);
        } /* padding: nothing to copy */
        at += chunk;
        f->pos += chunk;
        n -= chunk;
    }
}

static size_t send_step(shm_state *s, flow *f) {
    shm_chan *ch = shm_chan_of(s, s->me, f->peer);
    size_t R = s->hdr->ring_bytes;
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_acquire);
    size_t room = R - (size_t)(head - tail), n = f->total - f->pos;
    if (n > room) n = room;
    if (!n) return 0;
    stream_copy(f, shm_ring_of(s, s->me, f->peer), R, head, n, 1);
    atomic_store_explicit(&ch->head, head + n, memory_order_release);
    if (f->pos == f->total) {
        atomic_store(&ch->sent, f->msgno);
        f->active = 0;
    }
    shm_ring_bell(s);
    return n;
}

static titan_status recv_step(shm_ctx *x, flow *f, size_t *moved) {
    shm_state *s = x->s;
    shm_chan *ch = shm_chan_of(s, f->peer, s->me);
    size_t R = s->hdr->ring_bytes;
    unsigned char *ring = shm_ring_of(s, f->peer, s->me);
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_acquire);
    size_t n = (size_t)(head - tail), want = f->total - f->pos;
    *moved = 0;
    if (!n) return TITAN_OK;
    if (f->pos == 0) { /* header: always whole, 16-aligned in the ring */
        uint64_t h[2];
        memcpy(h, ring + tail % R, sizeof h);
        if (h[0] != f->bytes || h[1] != f->msgno)
            return shm_fail(x, "rank %d's message #%llu has %llu bytes, this recv takes %zu: sends "
                            "and recvs between two ranks must match in order and size", f->peer,
                            (unsigned long long)h[1], (unsigned long long)h[0], f->bytes);
    }
    if (n > want) n = want;
    stream_copy(f, ring, R, tail, n, 0);
    atomic_store_explicit(&ch->tail, tail + n, memory_order_release);
    if (f->pos == f->total) {
        atomic_store(&ch->recvd, f->msgno);
        f->active = 0;
    }
    shm_ring_bell(s);
    *moved = n;
    return TITAN_OK;
}

typedef struct {
    flow tx, rx;
} p2p;

static uint64_t miss_p2p(shm_ctx *x, void *arg) {
    p2p *pp = arg;
    shm_state *s = x->s;
    uint64_t miss = 0;
    if (pp->tx.active) {
        shm_chan *ch = shm_chan_of(s, s->me, pp->tx.peer);
        if (atomic_load(&ch->head) - atomic_load(&ch->tail) < s->hdr->ring_bytes) return 0;
        miss |= 1ull << pp->tx.peer;
    }
    if (pp->rx.active) {
        shm_chan *ch = shm_chan_of(s, pp->rx.peer, s->me);
        if (atomic_load(&ch->head) != atomic_load(&ch->tail)) return 0;
        miss |= 1ull << pp->rx.peer;
    }
    return miss;
}

static void describe_p2p(shm_ctx *x, int r, char *buf, size_t cap) {
    shm_state *s = x->s;
    unsigned long long got = atomic_load(&shm_chan_of(s, s->me, r)->recvd);
    unsigned long long sent = atomic_load(&shm_chan_of(s, r, s->me)->sent);
    snprintf(buf, cap, "rank %d has received %llu message%s from this rank and sent it %llu", r,
             got, got == 1 ? "" : "s", sent);
}

titan_status shm_run_p2p(shm_ctx *x) {
    shm_state *s = x->s;
    const comm_op *op = x->op;
    size_t es = titan_dtype_size(op->dtype);
    const char *dt = titan_dtype_name(op->dtype);
    p2p pp;
    memset(&pp, 0, sizeof pp);
    int nsend = op->kind == COMM_SEND || op->kind == COMM_SEND_RECV;
    int nrecv = op->kind == COMM_RECV || op->kind == COMM_SEND_RECV;
    char tx[88] = "", rx[88] = ""; /* both, and " with ", fit x->what */
    if (nsend) {
        flow_init(&pp.tx, op->peer, (void *)op->send, op->count * es, s->sent[op->peer] + 1);
        snprintf(tx, sizeof tx, "send #%llu to rank %d (%s x %zu)",
                 (unsigned long long)pp.tx.msgno, op->peer, dt, op->count);
    }
    if (nrecv) {
        flow_init(&pp.rx, op->peer2, op->recv, op->count2 * es, s->recvd[op->peer2] + 1);
        snprintf(rx, sizeof rx, "recv #%llu from rank %d (%s x %zu)",
                 (unsigned long long)pp.rx.msgno, op->peer2, dt, op->count2);
    }
    snprintf(x->what, sizeof x->what, "%s%s%s", tx, nsend && nrecv ? " with " : "", rx);
    while (pp.tx.active || pp.rx.active) {
        size_t moved = 0, got = 0;
        if (pp.tx.active) moved = send_step(s, &pp.tx);
        if (pp.rx.active) TITAN_TRY(recv_step(x, &pp.rx, &got));
        if (moved || got || (!pp.tx.active && !pp.rx.active)) continue;
        TITAN_TRY(shm_wait(x, miss_p2p, &pp, describe_p2p));
    }
    if (nsend) s->sent[op->peer]++;
    if (nrecv) s->recvd[op->peer2]++;
    return TITAN_OK;
}
