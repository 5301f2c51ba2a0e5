/* comm_nccl_api.h - the NCCL communicator's GPU half as a table of plain C
 * entry points. kernels/comm_nccl.cu fills it inside libtitan-cuda.so (which
 * links CUDA and NCCL); lib/comm/comm_nccl.c finds it with dlsym, so
 * libtitan.a never links either. Not a public header: comm.h is.
 *
 * No CUDA types cross this line: a communicator is an opaque handle that
 * owns its ncclComm_t, a CUDA stream of its own (non-blocking, so NCCL
 * kernels never serialize with compute by accident) and two events; ids
 * are byte arrays. Buffers are device (or managed) memory of the
 * communicator's GPU, used as they are, or host memory (pageable or
 * pinned), staged: the communicator keeps two device scratch buffers, grown
 * on demand, copies a host input into one on its stream before the NCCL
 * call, and copies a host output back in wait(). Each side of an operation
 * is judged alone, so a host send with a device recv is fine; a staged
 * in-place form runs out of place. Meant for small host data (loss sums,
 * status words); a large host buffer costs two copies.
 *
 * Every call that can fail returns a titan_status and writes the cause
 * (without the operation's name, which the caller adds) into msg:
 *   TITAN_ERR_USAGE  nothing was started and the communicator is usable
 *                    (a buffer on another GPU, or one that starts in host
 *                    memory and ends in GPU memory or the reverse)
 *   TITAN_ERR_COMM   NCCL or CUDA failed, or the deadline passed; the
 *                    communicator has been aborted (ncclCommAbort) and
 *                    refuses further operations
 * Each call makes the communicator's GPU the calling thread's current
 * device and leaves it so (restoring a device the thread never used would
 * create a CUDA context there); any thread may call (one at a time per
 * communicator: comm.c guarantees it). */
#ifndef TITAN_COMM_COMM_NCCL_API_H
#define TITAN_COMM_COMM_NCCL_API_H

#include <stddef.h>

#include "core/error.h"
#include "tensor/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TITAN_NCCL_ID_BYTES 128                 /* sizeof(ncclUniqueId) */
#define TITAN_NCCL_API_SYMBOL "titan_cuda_nccl_api"

typedef struct titan_nccl_comm titan_nccl_comm;

typedef enum {
    TITAN_NCCL_ALL_REDUCE = 1,
    TITAN_NCCL_REDUCE_SCATTER, /* counts: equal -> ncclReduceScatter, else a group of ncclReduce */
    TITAN_NCCL_ALL_GATHER,     /* counts: equal -> ncclAllGather, else a group of ncclBroadcast */
    TITAN_NCCL_ALL_TO_ALL,     /* a group of ncclSend/ncclRecv, one pair per rank */
    TITAN_NCCL_BROADCAST,
    TITAN_NCCL_SEND,
    TITAN_NCCL_RECV,
    TITAN_NCCL_SEND_RECV,      /* ncclSend and ncclRecv in one group */
    TITAN_NCCL_BARRIER,        /* an all_reduce of one float */
} titan_nccl_kind;

/* One operation; the fields mean what comm_op's do (comm_impl.h). */
typedef struct {
    titan_nccl_kind kind;
    titan_dtype dtype;
    int avg;              /* reductions: 1 ncclAvg, 0 ncclSum */
    const void *send;
    void *recv;
    size_t count;         /* all_reduce; all_to_all per block; broadcast; send */
    size_t count2;        /* recv; send_recv's recv */
    const size_t *counts; /* reduce_scatter, all_gather: one per rank */
    int peer;             /* broadcast root; send destination */
    int peer2;            /* recv source */
} titan_nccl_op;

typedef struct {
    size_t size;      /* sizeof(titan_nccl_api) the library was built with */
    int nccl_version; /* ncclGetVersion of the NCCL loaded, e.g. 22809 */

    /* Visible GPUs (cudaGetDeviceCount); an error when there are none. */
    titan_status (*device_count)(int *n, char *msg, size_t cap);
    /* ncclGetUniqueId: one rank makes it, the others get it (bootstrap). */
    titan_status (*unique_id)(unsigned char id[TITAN_NCCL_ID_BYTES], char *msg, size_t cap);
    /* ncclCommInitRankConfig with blocking = 0 on GPU `device`, polled until
     * ready; aborted after timeout_s. name shows in NCCL's own logs. */
    titan_status (*init_rank)(int device, int nranks, int rank,
                              const unsigned char id[TITAN_NCCL_ID_BYTES], const char *name,
                              double timeout_s, titan_nccl_comm **out, char *msg, size_t cap);
    /* ncclCommSplit (color < 0: no new communicator, *out = NULL); the new
     * rank and size come back. A failure aborts the parent too. */
    titan_status (*split)(titan_nccl_comm *parent, int color, int key, double timeout_s,
                          titan_nccl_comm **out, int *rank, int *size, char *msg, size_t cap);
    /* Queues op on the communicator's stream after the work already queued
     * on the legacy default stream (the compute backend's), then records
     * the completion event. timeout_s counts from this call, and covers
     * wait() as well. */
    titan_status (*enqueue)(titan_nccl_comm *c, const titan_nccl_op *op, double timeout_s,
                            char *msg, size_t cap);
    /* 1 when the last enqueued operation's NCCL work has completed, 0 not
     * yet, -1 failed (wait() then says why). A host output is filled only
     * by wait(): call it after every enqueue, even once query gave 1. */
    int (*query)(titan_nccl_comm *c);
    /* Waits for the last enqueued operation, polling its event and NCCL's
     * asynchronous error, then copies a staged output to its host buffer;
     * on an error or at the deadline, aborts. */
    titan_status (*wait)(titan_nccl_comm *c, char *msg, size_t cap);
    /* ncclCommAbort now (kernels stop, peers see a remote error); the
     * handle stays valid for destroy. */
    void (*abort)(titan_nccl_comm *c);
    /* ncclCommFinalize polled up to timeout_s, then ncclCommDestroy (or
     * ncclCommAbort when it does not settle); frees the stream and events. */
    void (*destroy)(titan_nccl_comm *c, double timeout_s);
} titan_nccl_api;

/* The one symbol: NULL-free table, valid for the life of the process. */
typedef const titan_nccl_api *(*titan_nccl_api_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
