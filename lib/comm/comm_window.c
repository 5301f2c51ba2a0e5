/* comm_window.c - shared windows (comm.h's titan_comm_window_*): host
 * windows are a split's shm slots; device windows are buffers of a
 * backend with ipc_export that every rank maps, their flags in the split's
 * host shared memory. */
#include "comm_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"

/* How long a device window's free waits for its peers to close it: on
 * the way out of a failure a peer may be stuck elsewhere; its buffer is
 * then left to process exit rather than freed under its reads. */
#define WINDOW_CLOSE_WAIT_S 10.0
/* The most ranks of a window: the shm communicator's and sum_ranks'. */
#define WINDOW_MAX_RANKS TITAN_SUM_RANKS_MAX

struct titan_comm_window {
    titan_comm *w; /* the split whose backend state holds the flags (and a host window's buffers) */
    /* a device window: the backend, this rank's buffer (two halves of
     * bytes), and every rank's buffer as addressed here (mine for itself,
     * ipc_open's mapping for a peer) */
    const titan_backend *be;
    size_t bytes;
    unsigned long long last; /* the last value given to post */
    void *mine;
    void *peer[WINDOW_MAX_RANKS];
};

int titan_comm_has_windows(const titan_comm *c) { return c->be->window_buf != NULL; }

int titan_comm_window_device(const titan_comm_window *win) { return win->be != NULL; }

/* Why a rank failed, carried in the exchanges so that every rank names
 * the cause (bytes, cut). */
#define WINDOW_WHY_BYTES 128

/* What each rank says in a device window's exchanges: its verdict
 * (ok; mapped: 0 when a peer's buffer did not map, the peer access
 * case), why not, and in the first its buffer's handle. */
typedef struct {
    uint32_t ok, mapped;
    char why[WINDOW_WHY_BYTES];
} window_verdict;
typedef struct {
    window_verdict v;
    unsigned char handle[TITAN_IPC_HANDLE_BYTES];
} window_handle;

/* The first rank whose word in all (n of them) is 0, else -1. */
static int first_failed(const uint32_t *all, size_t stride, int n) {
    for (int r = 0; r < n; r++)
        if (!all[(size_t)r * stride]) return r;
    return -1;
}

/* Closes the peers' mappings, posts "closed", then frees this rank's
 * buffer once every peer has closed its mapping of it or exited. A peer
 * that does neither in time (WINDOW_CLOSE_WAIT_S or the communicator's
 * timeout, whichever is shorter; a stopped communicator does not cut the
 * wait short: that is the failure path, where peers still map the buffer
 * and may have kernels reading it) keeps the buffer alive: it is left to
 * this process's exit, which frees it. */
static void window_unmap(titan_comm_window *win) {
    const titan_backend *be = win->be;
    titan_comm *w = win->w;
    int n = w->size, me = w->rank;
    be->sync(); /* the flag posts queued by host_call, and the reads of the peers' buffers */
    for (int r = 0; r < n; r++)
        if (r != me && win->peer[r]) be->ipc_close(win->peer[r]);
    /* "closed" keeps the last value: a peer's wait for what was posted
     * before still passes, a wait for more fails naming this rank */
    w->be->window_post(w, COMM_WINDOW_CLOSED | win->last);
    double bound = w->timeout_s < WINDOW_CLOSE_WAIT_S ? w->timeout_s : WINDOW_CLOSE_WAIT_S;
    double deadline = titan_now_s() + bound;
    int closed = 1;
    for (int r = 0; r < n && closed; r++)
        if (r != me) {
            double left = deadline - titan_now_s();
            closed = w->be->window_closed(w, r, left > 0 ? left : 0);
        }
    if (win->mine && closed) be->free(win->mine);
}

/* The device buffers of a window whose split (the flags) is made: every
 * rank allocates and exports its buffer, the handles go round over c, and
 * each maps its peers'. Collective; a failure on any rank fails all, and
 * every rank enters every exchange whatever failed before it (failed:
 * this rank's cause so far, or NULL), so no peer waits out its timeout. */
static titan_status window_map(titan_comm *c, titan_comm_window *win, const char *failed) {
    const titan_backend *be = win->be;
    int n = c->size, me = c->rank;
    window_handle mine = {.v = {.mapped = 1}}, all[WINDOW_MAX_RANKS];
    char why[512] = "";
    if (failed)
        snprintf(why, sizeof why, "%s", failed);
    else if (!(win->mine = be->alloc(2 * win->bytes)))
        snprintf(why, sizeof why, "no device memory for its buffer of %zu bytes", 2 * win->bytes);
    else if (be->ipc_export(win->mine, mine.handle) != 0)
        snprintf(why, sizeof why, "%s", titan_error_message());
    mine.v.ok = why[0] == 0;
    snprintf(mine.v.why, sizeof mine.v.why, "%.*s", (int)sizeof mine.v.why - 1, why); /* cut to the field */
    /* the handles (and every rank's verdict) as u32 words */
    titan_status st = titan_comm_all_gather(c, &mine, all, sizeof mine / 4, TITAN_DTYPE_U32, NULL);
    int bad = st == TITAN_OK ? first_failed(&all[0].v.ok, sizeof *all / 4, n) : -1;
    window_verdict opened = {.ok = 1, .mapped = 1}, verdicts[WINDOW_MAX_RANKS];
    for (int r = 0; st == TITAN_OK && bad < 0 && r < n; r++) {
        win->peer[r] = r == me ? win->mine : be->ipc_open(all[r].handle);
        if (!win->peer[r] && opened.ok) {
            snprintf(why, sizeof why, "mapping rank %d's buffer: %s", r, titan_error_message());
            snprintf(opened.why, sizeof opened.why, "%.*s", (int)sizeof opened.why - 1, why);
            opened.ok = opened.mapped = 0;
        }
    }
    const window_verdict *said = bad >= 0 ? &all[bad].v : NULL;
    if (st == TITAN_OK && bad < 0) { /* did every rank map every peer? */
        st = titan_comm_all_gather(c, &opened, verdicts, sizeof opened / 4, TITAN_DTYPE_U32, NULL);
        if (st == TITAN_OK) bad = first_failed(&verdicts[0].ok, sizeof *verdicts / 4, n);
        said = bad >= 0 ? &verdicts[bad] : NULL;
    }
    if (st == TITAN_OK && bad < 0) return TITAN_OK;
    if (st != TITAN_OK) snprintf(why, sizeof why, "%s", titan_error_message()); /* the exchange's own failure */
    window_unmap(win); /* every rank: the peers wait for its "closed" */
    win->mine = NULL;
    if (st != TITAN_OK) return titan_error(st, "%s", why);
    char cause[WINDOW_WHY_BYTES];
    snprintf(cause, sizeof cause, "%.*s", (int)sizeof cause - 1, said->why); /* terminated whatever came */
    titan_error(TITAN_ERR_FAIL, "comm %s: a shared window of device memory (%s backend): rank %d: %s", c->name,
                be->name, bad, bad == me ? why : cause);
    if (!said->mapped) /* CUDA IPC between GPUs needs peer access (NVLink or PCIe P2P) */
        titan_error_hint("async tp and the cp ring read the peers' buffers in place, which needs peer access "
                         "between the ranks' GPUs; set parallelism.enable_async_tensor_parallel = false (tp) or "
                         "parallelism.context_parallel_rotate_method = \"allgather\" (cp)");
    return TITAN_ERR_FAIL;
}

titan_status titan_comm_window_create(titan_comm *c, size_t bytes, const titan_backend *be,
                                      titan_comm_window **out) {
    *out = NULL;
    if (!titan_comm_has_windows(c))
        return titan_error(TITAN_ERR_USAGE, "comm %s: the %s backend has no shared windows (symmetric memory)",
                           c->name, c->be->name);
    if (bytes == 0) return titan_error(TITAN_ERR_USAGE, "comm %s: a shared window of 0 bytes", c->name);
    int device = be && !be->host;
    if (device && !be->ipc_export)
        return titan_error(TITAN_ERR_USAGE, "comm %s: the %s backend has no device memory that other processes "
                           "map (backend.h's ipc_export): no shared windows on its buffers", c->name, be->name);
    if (c->size > WINDOW_MAX_RANKS)
        return titan_error(TITAN_ERR_USAGE, "comm %s: a shared window of %d ranks: at most %d", c->name, c->size,
                           WINDOW_MAX_RANKS);
    /* Out of memory for the window itself: this rank still takes part in
     * the split and a device window's exchanges (on a stack copy), failing
     * them, so that no peer waits out its timeout. */
    titan_comm_window spare, *win = calloc(1, sizeof *win);
    int lost = !win;
    if (lost) {
        memset(&spare, 0, sizeof spare);
        win = &spare;
    }
    char name[64];
    snprintf(name, sizeof name, "%.40s.window", c->name);
    /* Not titan_comm_split: the flight recorder's registration would run a
     * collective on it, and its flags are the window's own. A device
     * window's split holds the flags only. */
    comm_op o = {.kind = COMM_SPLIT, .dtype = TITAN_DTYPE_F32, .color = 0, .key = c->rank, .name = name,
                 .out = &win->w, .count = device ? 64 : bytes};
    titan_status st = comm_run(c, &o);
    if (st == TITAN_OK && device) {
        win->be = be, win->bytes = bytes;
        st = window_map(c, win, lost ? "out of memory for the window" : NULL);
        if (st != TITAN_OK) titan_comm_free(win->w);
    } else if (st == TITAN_OK && lost) { /* a host window has no exchange of its own to fail */
        titan_comm_free(win->w);
        st = titan_error(TITAN_ERR_NOMEM, "comm %s: out of memory for a shared window", c->name);
    }
    if (st != TITAN_OK) {
        if (!lost) free(win);
        return st;
    }
    *out = win;
    return TITAN_OK;
}

void *titan_comm_window_buf(titan_comm_window *win, int rank, int half) {
    if (win->be) return (char *)win->peer[rank] + (size_t)half * win->bytes;
    return win->w->be->window_buf(win->w, rank, half);
}

typedef struct {
    titan_comm *w;
    uint64_t value;
} window_post_call;

static void window_post_now(void *arg) {
    window_post_call *p = arg;
    p->w->be->window_post(p->w, p->value);
    free(p);
}

void titan_comm_window_post(titan_comm_window *win, unsigned long long value) {
    win->last = value;
    window_post_call *p = win->be ? malloc(sizeof *p) : NULL;
    if (!p) {
        if (win->be) win->be->sync(); /* no memory for the call: post once the device is done, waiting */
        win->w->be->window_post(win->w, value);
        return;
    }
    *p = (window_post_call){win->w, value};
    win->be->host_call(window_post_now, p); /* once the device work queued before it is done */
}

titan_status titan_comm_window_wait(titan_comm_window *win, int rank, unsigned long long value, const char *what) {
    return win->w->be->window_wait(win->w, rank, value, what);
}

void titan_comm_window_free(titan_comm_window *win) {
    if (!win) return;
    if (win->be) window_unmap(win);
    titan_comm_free(win->w);
    free(win);
}
