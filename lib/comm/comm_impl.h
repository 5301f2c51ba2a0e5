/* comm_impl.h - what comm.c (argument checks, ordering, the progress
 * thread, requests) and a backend (comm_shm.c) share. Not a public header.
 *
 * comm.c hands a backend one operation at a time, in call order, from
 * whichever thread runs it (the caller's for a blocking call, the progress
 * thread for a queued one); the backend blocks until the operation is done
 * on this rank. Arguments are checked before: a backend sees valid ranks,
 * dtypes and buffers. */
#ifndef TITAN_COMM_COMM_IMPL_H
#define TITAN_COMM_COMM_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"

typedef enum {
    COMM_ALL_REDUCE = 1,
    COMM_REDUCE_SCATTER,
    COMM_ALL_GATHER,
    COMM_ALL_TO_ALL,
    COMM_BROADCAST,
    COMM_BARRIER,
    COMM_SEND,
    COMM_RECV,
    COMM_SEND_RECV,
    COMM_SPLIT,
} comm_kind;

typedef struct {
    comm_kind kind;
    titan_dtype dtype;
    titan_comm_redop redop;
    const void *send;
    void *recv;
    size_t count;          /* all_reduce; all_to_all per block; broadcast; send; send_recv's send */
    size_t count2;         /* send_recv's recv; recv */
    const size_t *counts;  /* reduce_scatter, all_gather: one per rank */
    int peer;              /* broadcast root; send dst; recv src; send_recv dst */
    int peer2;             /* send_recv src */
    int color, key;        /* split (count: the halves' bytes, 0 the parent's) */
    const char *name;      /* split */
    titan_comm **out;      /* split */
} comm_op;

typedef struct {
    const char *name;
    titan_status (*run)(titan_comm *c, const comm_op *op);
    void (*free)(titan_comm *c);
    int device_buffers; /* takes GPU memory (titan_comm_device_buffers) */
    /* Shared windows (comm.h), on the communicator a COMM_SPLIT with
     * count = the half's bytes made; NULL where the backend has none. */
    void *(*window_buf)(titan_comm *w, int rank, int half);
    void (*window_post)(titan_comm *w, uint64_t value);
    titan_status (*window_wait)(titan_comm *w, int rank, uint64_t value, const char *what);
    /* A cleanup's wait, blind to a stopped communicator: up to seconds
     * for rank's flag to carry COMM_WINDOW_CLOSED, or for its process to
     * be gone. 1 when either, 0 on the deadline. */
    int (*window_closed)(titan_comm *w, int rank, double seconds);
} comm_backend;

/* A window flag's top bit: its rank closed the window (comm_window.c),
 * the other bits its last value posted; callers' values stay below it.
 * window_wait for a value above that last one fails, naming the rank. */
#define COMM_WINDOW_CLOSED (1ull << 63)

struct titan_comm {
    char name[64];
    int rank, size;
    double timeout_s;
    size_t chunk_bytes;
    const comm_backend *be;
    void *impl;
    atomic_ullong seq; /* collective operations completed; the backend counts */

    /* ordering: one operation at a time, in call order */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    titan_comm_req *qhead, *qtail;
    int busy, stop, has_thread;
    pthread_t thread;
    int failed;
    char fail_msg[1024];

    /* the flight recorder's numbering (flight.h), under mu */
    int flight_id;         /* -1: not recorded */
    uint64_t flight_seq;   /* collectives called */
    uint64_t *flight_p2p;  /* [2 * size]: sends to, receives from each rank */
};

/* A communicator shell around a backend's state (comm.c). */
titan_comm *comm_new(const char *name, int rank, int size, double timeout_s, size_t chunk_bytes,
                     const comm_backend *be, void *impl);
const char *comm_kind_name(comm_kind k);
/* comm.c: runs op to completion in c's call order (a blocking call's
 * path); comm_window.c's splits, which must not be recorded. */
titan_status comm_run(titan_comm *c, const comm_op *op);

/* comm_sig.c: a collective's signature, what every rank's call must agree
 * on (the shm backend keeps it in shared memory: a fixed layout). */
typedef struct {
    uint64_t seq, count, counts_hash;
    uint32_t kind, dtype, redop;
    int32_t root;
} comm_sig;
comm_sig comm_sig_of(const comm_op *op, uint64_t seq, int size);
/* "all_reduce #7 (f32 x 1048576, sum)" */
void comm_sig_describe(const comm_sig *g, char *buf, size_t cap);
void comm_describe_op(const comm_op *op, uint64_t seq, int size, char *buf, size_t cap);
/* Records a new communicator *c in the flight recorder (when it is on),
 * its members' world ranks gathered over it (collective). On failure *c
 * is freed and set to NULL, so a maker ends with `return
 * comm_flight_register(out)`. */
titan_status comm_flight_register(titan_comm **c);

/* comm_shm.c: the bytes of the shared-memory segment of n ranks (a
 * memory estimate's; titan_comm_shm_segment_bytes). */
size_t comm_shm_segment_bytes(int n, size_t chunk_bytes);
/* comm_shm.c: the world communicator over shared memory. */
titan_status comm_shm_init_world(titan_dist *d, const char *name, double timeout_s,
                                 size_t chunk_bytes, titan_comm **out);
/* comm_mpi.c: the world communicator over MPI. */
titan_status comm_mpi_init_world(titan_dist *d, const char *name, double timeout_s,
                                 size_t chunk_bytes, titan_comm **out);
void comm_mpi_exiting(titan_status st); /* titan_comm_exiting */

/* comm.c: a backend's world begins with every rank saying whether it can
 * join (mine: its own verdict, its error recorded when not TITAN_OK) under
 * key, and one bootstrap fence: then all of them stop together, each with
 * the first rank's reason, instead of leaving the others to wait for a rank
 * that never comes. Puts made before it go out with the same fence. */
titan_status comm_agree_join(titan_dist *d, const char *key, titan_status mine, const char *name);

/* comm_reduce.c: out1[i] (and out2[i] when not NULL) = src[0][i] + ... +
 * src[n-1][i] in that order in f32 (bf16 widened, the sum rounded once),
 * / n for avg; m elements of dt (f32 or bf16). out1 and out2 may each be
 * one of the sources. */
void comm_reduce_ranks(const unsigned char *const *src, int n, size_t m, titan_dtype dt, int avg,
                       void *out1, void *out2);

#endif
