/* comm_shm.h - the shared-memory backend's segment layout and waiting
 * machinery, shared by comm_shm.c (segments, waiting, failures, split) and
 * comm_shm_ops.c (the operations). Not a public header.
 *
 * Why shared memory: ranks on one host can read each other's data directly;
 * a collective is then a few memcpy passes at memory bandwidth, with no
 * sockets, no extra dependency and no daemon. It is the backend for CPU
 * training and the reference an NCCL backend will be tested against.
 *
 * One POSIX shm segment per communicator (/dev/shm/titan-<job id>-...).
 * Rank 0 (the lowest rank of a split group) creates it; its name travels
 * through the bootstrap's key/value exchange (world) or is derived from the
 * parent's name (split); every rank maps it, and the creator unlinks it as
 * soon as all have, so nothing is left behind however the job ends (the
 * local launcher also sweeps titan-<job id>-* after a crash in between).
 * Pages are reserved up front (posix_fallocate): a full /dev/shm fails at
 * init with a message, not with SIGBUS in the middle of training.
 *
 * Layout, each part aligned to 4 KiB:
 *   header     magic, sizes, the bell (futex word), the abort word + reason
 *   ranks[n]   per rank: progress (phases completed, its own cache line),
 *              operations completed, pid, and the signatures of its last two
 *              collective calls (for the mismatch check)
 *   chans[n*n] per ordered pair (src, dst): ring head/messages sent (written
 *              by src) and tail/messages received (written by dst)
 *   slots[n]   per rank: two halves of chunk_bytes, staging its data;
 *              pipeline step k uses half k % 2 so step k+1's copy-in overlaps
 *              the others' reading of step k
 *   rings[n*n] per ordered pair: a byte ring for send/recv; a message is a
 *              16-byte header (bytes, number) and its payload, padded to 16
 *
 * Ordering. Collective calls are numbered (sequence numbers, 1-based) and
 * made of phases; every rank runs the same phases in the same order, so a
 * rank's progress counter (phases completed) says exactly where it is: "all
 * ranks have progress >= P" is the only synchronization collectives need.
 * A step publishes its copy-in (progress++, release), waits for all ranks
 * (acquire), reads the others' slots, and so on. A half is rewritten only
 * after every rank's progress shows it has finished reading it. Reductions:
 * the element range is split in rank order; rank q adds everybody's values
 * of its part in rank order 0..n-1 and publishes the sum; so every element
 * is summed once, in a fixed order, and every rank copies the same bits.
 *
 * Waiting: check, spin briefly, then sleep on the bell (FUTEX_WAIT on a
 * shared word that every progress change increments; the ringer calls
 * FUTEX_WAKE only when someone sleeps). Sleeps last at most 100 ms, so a
 * waiter also notices its deadline, an aborted communicator, or a peer
 * process that no longer exists (kill(pid, 0), when the ranks share a pid
 * namespace, checked at init). */
#ifndef TITAN_COMM_COMM_SHM_H
#define TITAN_COMM_COMM_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#include "comm_impl.h"

#define SHM_MAGIC 0x6d68736e61746974ull /* "titanshm" */
#define SHM_VERSION 1u
#define SHM_MAX_RANKS 64
#define SHM_RING_BYTES (256u << 10) /* per pair, at most; fewer with many ranks */
#define SHM_MSG_HDR 16u

typedef struct {
    atomic_ullong progress; /* phases completed; the one word collectives wait on */
    char pad0[56];
    atomic_ullong ops_done; /* collective operations completed */
    atomic_ullong op_cur;   /* sequence number of the operation under way, 0 if none */
    int32_t pid;
    uint32_t pad1;
    comm_sig sig[2]; /* signature of call #s at [s % 2] */
    char host[64];
    char pad2[256 - 64 - 24 - 2 * sizeof(comm_sig) - 64];
} shm_rank;
_Static_assert(sizeof(shm_rank) == 256, "shm_rank is 256 bytes");

typedef struct {
    atomic_ullong head, sent; /* written by src */
    char pad0[48];
    atomic_ullong tail, recvd; /* written by dst */
    char pad1[48];
} shm_chan;

typedef struct {
    uint64_t magic;
    uint32_t version, nranks;
    uint64_t seg_bytes, half_bytes, ring_bytes;
    uint64_t rank_off, chan_off, slot_off, ring_off;
    char pad0[128 - 72];
    atomic_uint bell;    /* futex word: bumped on every change anyone waits for */
    atomic_uint waiters; /* sleepers on the bell: ring only when > 0 */
    atomic_uint abort_claim, abort_by; /* rank+1 that stopped the communicator */
    char pad1[128 - 16];
    char abort_msg[1024];
} shm_header;

typedef struct shm_state shm_state;
struct shm_state {
    shm_header *hdr;
    size_t bytes;
    shm_rank *ranks;
    shm_chan *chans;
    unsigned char *slots, *rings;
    int me, n;
    char seg[128];      /* segment name, "/titan-..." */
    int unlinked;       /* created by us and not yet unlinked: 0 */
    int pid_check;      /* peers' pids are visible: a vanished one means an exited rank */
    int spin;           /* checks before sleeping */
    unsigned splits;    /* split calls so far (names child segments) */
    uint64_t phase;     /* my progress, as published */
    uint64_t half_free[2]; /* progress all ranks need before half h may be rewritten */
    uint64_t steps;     /* pipeline steps so far; half = steps % 2 */
    uint64_t sent[SHM_MAX_RANKS], recvd[SHM_MAX_RANKS]; /* p2p messages per peer */
    /* A world and the communicators split from it (and from those) fail
     * together: the first failure posts its reason in the world's header
     * too, and a wait on any of them stops on it. Otherwise a rank waiting
     * in one communicator for a rank another one already timed out on would
     * wait a second timeout. */
    shm_state *world; /* the world split from; NULL for a world */
    atomic_int refs;  /* a world: itself and its splits (its mapping outlives its comm) */
};

/* One operation under way: for messages and the deadline. */
typedef struct {
    titan_comm *c;
    shm_state *s;
    const comm_op *op;
    uint64_t seq;          /* collective sequence number, or p2p message number */
    double deadline;       /* of the current wait */
    char what[192];        /* "all_reduce #7 (f32 x 1048576, sum)" */
} shm_ctx;

static inline unsigned char *shm_slot(const shm_state *s, int rank, int half) {
    return s->slots + ((size_t)rank * 2 + (size_t)half) * s->hdr->half_bytes;
}
static inline shm_chan *shm_chan_of(const shm_state *s, int src, int dst) {
    return &s->chans[(size_t)src * (size_t)s->n + (size_t)dst];
}
static inline unsigned char *shm_ring_of(const shm_state *s, int src, int dst) {
    return s->rings + ((size_t)src * (size_t)s->n + (size_t)dst) * s->hdr->ring_bytes;
}

/* Ranks (bit mask) whose state keeps the caller waiting; 0 ends the wait. */
typedef uint64_t (*shm_missing_fn)(shm_ctx *x, void *arg);
/* Appends what rank r is doing to buf (for a timeout message). */
typedef void (*shm_describe_fn)(shm_ctx *x, int r, char *buf, size_t cap);

/* comm_shm.c */
void shm_ring_bell(shm_state *s);
/* Waits until missing() is 0; TITAN_ERR_COMM on deadline, abort or a dead
 * peer (and then stops the communicator for the others). */
titan_status shm_wait(shm_ctx *x, shm_missing_fn missing, void *arg, shm_describe_fn describe);
/* Records a failure found here: stops the communicator for all ranks and
 * returns TITAN_ERR_COMM with "<what> on comm <name> (rank r of n): <cause>". */
titan_status shm_fail(shm_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* comm_shm_ops.c */
titan_status shm_run_collective(shm_ctx *x);
titan_status shm_run_p2p(shm_ctx *x);

#endif
