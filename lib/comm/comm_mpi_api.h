/* comm_mpi_api.h - the MPI communicator's library half as a table of plain
 * C entry points. lib/comm/mpi/libtitan_mpi.c fills it inside
 * libtitan-mpi.so (which links the MPI library it was built with);
 * lib/comm/comm_mpi.c dlopens that and finds the table with dlsym, so
 * libtitan.a and the tools never link MPI (README, Layout). Not a public
 * header: comm.h is.
 *
 * Only point-to-point messages cross this line: the collectives, their
 * ordering checks, timeouts and reductions are comm_mpi.c's, built on
 * nonblocking sends and receives that it polls, so that a missing rank is
 * named and a wait can end at a deadline (a blocking MPI collective can do
 * neither). No MPI types cross it either: communicators and requests are
 * opaque handles; a message is at most TITAN_MPI_MSG_MAX bytes (the caller
 * cuts larger ones), sent as MPI_BYTE.
 *
 * Every call that can fail returns 0 or, on failure, nonzero with MPI's
 * words for the cause in msg. The communicators are made with
 * MPI_ERRORS_RETURN, so a failed call comes back instead of ending the
 * process. Any thread may call (MPI_THREAD_MULTIPLE; one thread at a time
 * per communicator, which comm.c guarantees). */
#ifndef TITAN_COMM_COMM_MPI_API_H
#define TITAN_COMM_COMM_MPI_API_H

#include <stddef.h>

#define TITAN_MPI_API_SYMBOL "titan_mpi_table"
#define TITAN_MPI_MSG_MAX ((size_t)1 << 30)

typedef struct titan_mpi_comm titan_mpi_comm;
typedef struct titan_mpi_req titan_mpi_req;

typedef struct {
    size_t size; /* sizeof(titan_mpi_api) as the library was built: a stale library differs */
    /* MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is initialized
     * already; MPI_COMM_WORLD's rank and size; lib: MPI's version string.
     * Fails when the library grants less than MPI_THREAD_MULTIPLE. Call
     * once per process, from one thread. */
    int (*init)(int *rank, int *size, char *lib, size_t lib_cap, char *msg, size_t cap);
    /* A communicator over MPI_COMM_WORLD's ranks, ordered by key (collective). */
    int (*world)(int key, titan_mpi_comm **out, char *msg, size_t cap);
    /* MPI_Comm_split of c (collective): ranked by key, then by rank in c;
     * color < 0: *out = NULL. The new one's rank and size in *rank, *size. */
    int (*split)(titan_mpi_comm *c, int color, int key, titan_mpi_comm **out, int *rank,
                 int *size, char *msg, size_t cap);
    void (*comm_free)(titan_mpi_comm *c);
    int (*isend)(titan_mpi_comm *c, const void *buf, size_t bytes, int peer, int tag,
                 titan_mpi_req **out, char *msg, size_t cap);
    /* peer < 0: from any rank */
    int (*irecv)(titan_mpi_comm *c, void *buf, size_t bytes, int peer, int tag,
                 titan_mpi_req **out, char *msg, size_t cap);
    /* 1: done (*r freed and set to NULL; a receive's byte count and source
     * in *bytes and *source, each may be NULL), 0: not yet, -1: failed
     * (msg; *r freed and NULL). */
    int (*test)(titan_mpi_req **r, size_t *bytes, int *source, char *msg, size_t cap);
    /* Cancels a receive that is not done and frees it. */
    void (*cancel)(titan_mpi_req **r);
    /* MPI_Finalize, once, at the process's end (when no operation failed:
     * a failed one may leave requests a dead peer will never match). */
    void (*finalize)(void);
} titan_mpi_api;

typedef const titan_mpi_api *(*titan_mpi_api_fn)(void);

#endif
