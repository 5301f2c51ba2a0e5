/* flight.h - the flight recorder: the last communication operations of
 * this process, kept in a ring and written out as JSON when the job fails,
 * when it is signalled (SIGUSR1: dump and go on; SIGTERM: dump, then die of
 * it as before), or when asked. `titan-trace hang` reads every rank's dump
 * and names the operation a hung job waits in and the ranks that never
 * reached it: what NCCL cannot say, and what a job killed by its time
 * limit leaves behind.
 *
 * comm.c records every operation of every communicator: when it is called
 * (queued), when it starts and when it ends, with its communicator, its
 * number there (collectives are numbered per communicator in call order,
 * the same on every member; sends and receives per peer and direction) and
 * its arguments. One lock and a few stores an operation; nothing while off.
 *
 * The dump's format (titan-trace(1), FILES) is "titan-flight-1": one JSON
 * object with the rank, the reason, the communicators (name, rank, size,
 * the world ranks of their members) and the entries, oldest first. */
#ifndef TITAN_COMM_FLIGHT_H
#define TITAN_COMM_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define TITAN_FLIGHT_FORMAT "titan-flight-1"
#define TITAN_FLIGHT_HOST_MAX 64 /* bytes of a hostname a dump keeps, with the NUL */

/* An entry's state, as the dump spells it (titan_flight_state_name). */
enum { TITAN_FLIGHT_QUEUED, TITAN_FLIGHT_RUNNING, TITAN_FLIGHT_DONE, TITAN_FLIGHT_FAILED };
const char *titan_flight_state_name(int state); /* "queued", ...; "?" for another */
/* The rank R of a dump's file name "rank-R.json"; -1 for another name. */
int titan_flight_dump_rank(const char *name);

/* Starts recording, keeping the last `capacity` operations; dumps go to
 * DIR/rank-R.json (R = world_rank), written whole (a temp file, renamed).
 * An earlier job's dump there of this rank is removed, and rank 0 removes
 * those of ranks >= world_size: the folder holds this job's dumps only.
 * Calling it again changes nothing (one recorder a process). */
titan_status titan_flight_enable(const char *dir, int world_rank, int world_size, int capacity);
int titan_flight_enabled(void);
int titan_flight_world_rank(void); /* enable's world_rank */
/* Stops the signal watcher and frees the ring (a test's cleanup). */
void titan_flight_disable(void);

/* The training step the entries recorded from now on belong to, and the
 * part of it training is in ("data", "forward", "backward", "optimizer",
 * "checkpoint", ...: a static string), so a dump of a rank stuck outside
 * communication still says where. */
void titan_flight_set_step(int64_t step);
void titan_flight_phase(const char *phase);

/* Writes the dump now; reason says why (an error message, "SIGUSR1"). One
 * dump at a time; each replaces the rank's last. */
titan_status titan_flight_dump(const char *reason);
/* The same for a rank that failed with error: its later dumps (a SIGTERM
 * while it stops) keep the error as "failure". */
titan_status titan_flight_dump_failure(const char *error);

/* SIGUSR1 dumps and training goes on; SIGTERM dumps and the process then
 * dies of SIGTERM as it would have. The handler only writes a byte to a
 * pipe: a thread of the recorder's own writes the dump, so a rank whose
 * main thread is stuck (in a kernel, a loop, a collective) still dumps. */
titan_status titan_flight_watch_signals(void);

/* ---- for comm.c ---- */

typedef struct {
    int id;              /* titan_flight_comm's answer */
    const char *op;      /* "all_reduce", ... (a static string) */
    const char *dtype;   /* static */
    const char *redop;   /* static, or NULL */
    uint64_t seq;        /* collectives: the number on the communicator (as in its error
                          * messages), from 1; 0 for splits, sends and receives */
    size_t count;        /* elements sent (collectives: this rank's input) */
    size_t count2;       /* elements received by a recv or send_recv */
    int peer, peer2;     /* send's destination / broadcast's root; recv's source; -1 none */
    uint64_t n, n2;      /* the number of this send to peer / receive from peer2, from 1 */
} titan_flight_op;

/* Registers a communicator (its members' world ranks, in its rank order;
 * NULL when unknown); returns its id for titan_flight_op, -1 when off. */
int titan_flight_comm(const char *name, int rank, int size, const int *world_ranks);
/* 1 when the recorder wants the world's hostnames from a communicator of
 * `size` ranks (on, none recorded yet, size = the world's): the same
 * answer on every rank that registers the same communicators. */
int titan_flight_wants_hosts(int size);
/* The hostname of each world rank, n NUL-padded names `stride` bytes
 * apart: a dump then lists them ("hosts"), so that titan-trace names the
 * host of a rank that left no dump of its own. */
void titan_flight_hosts(const char *hosts, size_t stride, int n);
/* An operation was called: its entry, to mark started and ended (0 when off). */
uint64_t titan_flight_queued(const titan_flight_op *op);
void titan_flight_started(uint64_t entry);
/* st != TITAN_OK: the entry keeps the error message. */
void titan_flight_ended(uint64_t entry, titan_status st, const char *msg);

#endif
