/* comm.h - communicators: collective and point-to-point operations between
 * the ranks of a job (bootstrap.h), the layer FSDP and friends are built on.
 *
 * Backends (a table each, comm_impl.h); this interface is what callers see:
 *   shm   shared memory (comm_shm.c), ranks on one host, host buffers
 *   mpi   MPI point-to-point messages (comm_mpi.c, through libtitan-mpi.so:
 *         comm_mpi_api.h), ranks on any hosts, host buffers; the ranks must
 *         have been started by an MPI launcher that serves PMIx (mpirun,
 *         srun --mpi=pmix), which also takes the job down when a rank
 *         dies. It keeps every promise below, with these differences: a
 *         dead rank is seen by the launcher, not here (the peers wait
 *         until the launcher stops them or their timeout), but a rank
 *         that exits on an error of its own says so first
 *         (titan_comm_exiting) and its peers stop at once; a timeout names
 *         the missing ranks and the last operation each began, not how
 *         many it completed; collectives are linear (every rank exchanges
 *         with every other directly: fine for tens of ranks, not
 *         thousands) and each begins with an exchange of the calls'
 *         signatures (a round trip of latency) that detects mismatches.
 *   nccl  NCCL on GPUs (comm_nccl.c, titan_comm_init_nccl): buffers are
 *         device pointers of the communicator's GPU, or host memory staged
 *         through the communicator's device scratch buffers (meant for
 *         small host data such as loss sums and checkpoint status: a large
 *         host buffer costs two copies); an operation runs on the
 *         communicator's own stream after the work queued on the default
 *         stream, and returns (or completes its request) once finished,
 *         host outputs filled. Its differences from what follows:
 *         reductions add in NCCL's order (bf16 rounded per step), not the
 *         serial rank-order sum; mismatched calls and send/recv sizes are
 *         not detected (they hang until the timeout); the timeout counts
 *         from the start of the operation, NCCL cannot tell which rank is
 *         missing, and the peers of a failed rank stop on an NCCL error or
 *         their own timeout.
 *
 * Operations. Buffers are arrays of `count` elements of dtype (host
 * memory, or for nccl device memory as well).
 *   all_reduce      recv[i] = op over ranks of send[i]
 *   reduce_scatter  recv (counts[rank] elements) = op over ranks of rank's
 *                   part of send, the parts laid end to end in rank order
 *                   (send holds sum(counts) elements; counts may differ,
 *                   `_v` form; the even form takes one count for all)
 *   all_gather      recv = every rank's send laid end to end in rank order
 *                   (counts[r] elements from rank r; even form: count each)
 *   all_to_all      block q (count elements) of send goes to rank q, and
 *                   arrives as block r of q's recv, r = the sender
 *   broadcast       buf of root is copied to every rank's buf
 *   send / recv     point to point, matched in call order per pair of ranks;
 *                   the sizes must agree (checked)
 *   send_recv       a send and a recv at once (exchanges without deadlock)
 *   barrier
 * Reductions take f32 or bf16; bf16 is reduced in f32 and rounded once at
 * the end. Data movement takes any dtype. In place is allowed where FSDP
 * wants it: all_reduce with send == recv, reduce_scatter with recv == send +
 * (its own part's offset), all_gather with send == recv + (its own part's
 * offset); other buffers must not overlap.
 *
 * Ordering and determinism. Every rank must call the collective operations
 * of a communicator in the same order with the same arguments; a mismatch
 * (another operation, dtype, count, root or reduction at the same sequence
 * number) is detected and reported on every rank. A reduction adds the
 * ranks' contributions in rank order 0, 1, ..., N-1 in f32 (then divides by
 * N for avg), each element by exactly one rank, and that sum is what all
 * ranks receive: results are bitwise identical on all ranks and do not
 * depend on timing, chunk sizes or which rank computed which element. A
 * serial loop adding in rank order reproduces them bit for bit.
 *
 * Asynchrony. Every operation takes a last argument `req`: NULL runs it to
 * completion before returning; non-NULL queues it on the communicator's
 * progress thread and returns at once with a handle for titan_comm_wait
 * (which frees it) or titan_comm_test. Operations of one communicator run
 * one at a time in call order (blocking and queued alike); different
 * communicators run independently. Buffers of a queued operation belong to
 * it until it completes. Wait for every request before titan_comm_free.
 *
 * Failure. Every operation has a timeout (titan_comm_options.timeout_s,
 * else TITAN_COMM_TIMEOUT from the environment, else 300 s), counted from
 * the last step the awaited ranks made (a long operation that keeps moving
 * does not time out). A rank that does not arrive in time, or that exits
 * (seen within 0.1 s where the ranks share a pid namespace), gives
 * TITAN_ERR_COMM with a message naming the
 * operation, its sequence number, the communicator and the missing ranks,
 * e.g. "all_reduce #7 (f32 x 1048576) on comm world (rank 0 of 4): timed
 * out after 300.0 s waiting for rank 3 (it completed 6 operations)". The
 * rank that finds the failure marks the communicator failed in shared
 * memory, so the others stop at once with its reason instead of each
 * waiting out its own timeout; the shared-memory backend also stops the
 * world it belongs to and every communicator split from that world (a rank
 * waiting in another of them would otherwise wait a second timeout for the
 * same missing rank). A failed communicator refuses later
 * operations; free it (and usually exit with status TITAN_ERR_COMM).
 * Usage errors (bad rank, dtype, count) are TITAN_ERR_USAGE and leave the
 * communicator usable. */
#ifndef TITAN_COMM_COMM_H
#define TITAN_COMM_COMM_H

#include <stddef.h>

#include "bootstrap.h"
#include "core/error.h"
#include "tensor/dtype.h"

typedef enum {
    TITAN_COMM_SUM = 0,
    TITAN_COMM_AVG = 1,
} titan_comm_redop;

typedef struct titan_comm titan_comm;
typedef struct titan_comm_req titan_comm_req;

typedef enum {
    TITAN_COMM_BACKEND_AUTO = 0, /* shm when every rank is on one host, else mpi */
    TITAN_COMM_BACKEND_SHM,
    TITAN_COMM_BACKEND_MPI,
    TITAN_COMM_BACKEND_NCCL,
} titan_comm_backend;

typedef struct {
    double timeout_s;    /* per operation; <= 0: TITAN_COMM_TIMEOUT, else 300 */
    size_t chunk_bytes;  /* shm: bytes a rank stages per pipeline step; mpi: elements
                          * of this many bytes a reduction takes per round; 0: 1 MiB */
    const char *name;    /* for messages; NULL: "world" */
    /* titan_comm_init's backend (not nccl: titan_comm_init_nccl); auto:
     * $TITAN_COMM when it names shm or mpi, else titan_comm_backend_resolve */
    titan_comm_backend backend;
} titan_comm_options;

/* Collective over all ranks of d: the world communicator. opt may be NULL.
 * Creating communicators (init, split) is collective: call from one thread,
 * in the same order on every rank. */
titan_status titan_comm_init(titan_dist *d, const titan_comm_options *opt, titan_comm **out);

/* "auto", "shm", "mpi", "nccl" */
const char *titan_comm_backend_name(titan_comm_backend b);
/* The shared memory (bytes, on the host: /dev/shm) of a shm communicator
 * of n ranks with the default chunk size; 0 for one rank. */
size_t titan_comm_shm_segment_bytes(int n);
/* The backend TITAN_COMM names ("auto", "shm", "mpi" or "nccl"), else
 * `configured` when it is unset or empty; another word is TITAN_ERR_USAGE. */
titan_status titan_comm_backend_choice(titan_comm_backend configured, titan_comm_backend *out);
/* What auto means without NCCL: shm when every rank of d runs on one host
 * (the same hostname: a local launch always does), else mpi. Collective
 * (one bootstrap fence) for a PMIx job of several ranks. Another want is
 * returned as it is. */
titan_status titan_comm_backend_resolve(titan_dist *d, titan_comm_backend want,
                                        titan_comm_backend *out);
/* The backend c runs on: "shm", "mpi" or "nccl". */
const char *titan_comm_backend_of(const titan_comm *c);

/* The same over NCCL (see above): GPU `device` (< 0: the dist's local
 * rank), a unique id from rank 0 through the bootstrap, a non-blocking
 * ncclComm_t. TITAN_ERR_USAGE when libtitan-cuda.so, its NCCL part or the
 * GPU is missing (on every rank: the ranks agree before NCCL starts);
 * opt->chunk_bytes is ignored. */
titan_status titan_comm_init_nccl(titan_dist *d, int device, const titan_comm_options *opt,
                                  titan_comm **out);

/* Collective over c: ranks passing the same color >= 0 form a new
 * communicator, ranked by key, then by rank in c; color < 0 takes part in
 * the call but joins none (*out = NULL). name may be NULL ("<c>.<color>").
 * For a mesh of rows x cols ranks, split(color = rank / cols) gives the row
 * communicators and split(color = rank % cols) the column ones. The new
 * communicator inherits c's timeout and chunk size. */
titan_status titan_comm_split(titan_comm *c, int color, int key, const char *name,
                              titan_comm **out);

/* Stops the progress thread and unmaps; not collective. NULL is fine. */
void titan_comm_free(titan_comm *c);

/* This process is about to exit with st (its error already reported). On
 * a failure the peers of its MPI communicators are told why, so they stop
 * at once instead of waiting out their timeouts, and MPI_Finalize is
 * skipped (it would wait for ranks that may never come). The shm backend
 * needs nothing: its peers see the process end. Call it from any rank's
 * exit path; it does nothing where no MPI communicator was made. */
void titan_comm_exiting(titan_status st);

int titan_comm_rank(const titan_comm *c);
int titan_comm_size(const titan_comm *c);
const char *titan_comm_name(const titan_comm *c);
/* 1 when c moves GPU memory itself (nccl), 0 when its buffers must be host
 * memory (shm): callers holding data on a device copy it to the host first. */
int titan_comm_device_buffers(const titan_comm *c);
void titan_comm_set_timeout(titan_comm *c, double seconds);
double titan_comm_timeout(const titan_comm *c);
/* Collective operations completed so far (the next one has this + 1). */
unsigned long long titan_comm_seq(const titan_comm *c);

titan_status titan_comm_all_reduce(titan_comm *c, const void *send, void *recv, size_t count,
                                   titan_dtype dt, titan_comm_redop op, titan_comm_req **req);
titan_status titan_comm_reduce_scatter(titan_comm *c, const void *send, void *recv,
                                       size_t recv_count, titan_dtype dt, titan_comm_redop op,
                                       titan_comm_req **req);
titan_status titan_comm_reduce_scatter_v(titan_comm *c, const void *send, void *recv,
                                         const size_t *counts, titan_dtype dt,
                                         titan_comm_redop op, titan_comm_req **req);
titan_status titan_comm_all_gather(titan_comm *c, const void *send, void *recv,
                                   size_t send_count, titan_dtype dt, titan_comm_req **req);
titan_status titan_comm_all_gather_v(titan_comm *c, const void *send, void *recv,
                                     const size_t *counts, titan_dtype dt, titan_comm_req **req);
titan_status titan_comm_all_to_all(titan_comm *c, const void *send, void *recv, size_t count,
                                   titan_dtype dt, titan_comm_req **req);
titan_status titan_comm_broadcast(titan_comm *c, void *buf, size_t count, titan_dtype dt,
                                  int root, titan_comm_req **req);
titan_status titan_comm_send(titan_comm *c, const void *buf, size_t count, titan_dtype dt,
                             int peer, titan_comm_req **req);
titan_status titan_comm_recv(titan_comm *c, void *buf, size_t count, titan_dtype dt, int peer,
                             titan_comm_req **req);
titan_status titan_comm_send_recv(titan_comm *c, const void *send, size_t send_count,
                                  int dst, void *recv, size_t recv_count, int src,
                                  titan_dtype dt, titan_comm_req **req);
titan_status titan_comm_barrier(titan_comm *c, titan_comm_req **req);

/* Waits for a queued operation, frees the handle, and returns the
 * operation's status (its message is then this thread's error). */
titan_status titan_comm_wait(titan_comm_req *req);
/* 1 when the operation has completed (wait then returns at once), else 0. */
int titan_comm_test(const titan_comm_req *req);
/* titan_comm_wait, also giving when the operation started and ended
 * running on the progress thread (titan_now_s, core/clock.h): its own
 * running time, not its wait in the queue. start or end may be NULL. */
titan_status titan_comm_wait_timed(titan_comm_req *req, double *start, double *end);

const char *titan_comm_redop_name(titan_comm_redop op); /* "sum", "avg" */

/* Shared windows (symmetric memory): every rank of a window owns a buffer
 * of two halves of `bytes` each, which every rank of the group can read and
 * write directly (a peer's buffer is addressed, not copied), and a 64-bit
 * flag per rank that only grows. The owner publishes with post (release:
 * what it wrote before is visible to whoever then sees the value); a
 * reader waits on a flag (acquire) with the communicator's timeout and
 * failure detection. What the halves and the values mean is the caller's
 * protocol (lib/parallel/group_overlap.c). Backends: shm (the flags live in
 * one shared segment); mpi and nccl have none yet (TITAN_ERR_USAGE: check
 * titan_comm_has_windows first).
 *
 * The buffers are host memory in the shm segment when create is given no
 * backend or a host one (cpu), and device memory of a backend with
 * ipc_export (cuda) otherwise: each rank allocates its buffer there and
 * exports it, the handles go round over the communicator, and each rank
 * maps its peers' (CUDA IPC: ranks on one GPU, or on GPUs that reach each
 * other, NVLink or PCIe peer access). The flags stay in host shared memory.
 * On a device window, post publishes once every op queued on the backend
 * before it has finished (backend.h's host_call: the caller does not
 * wait), and a wait is the host's: work that reads a peer's block is
 * queued after the wait returns. Device buffers are read and written with
 * the backend's ops only (copy, sum_ranks, kernels), never by the host.
 * NCCL's registered windows would be another way, behind the same calls. */
typedef struct titan_comm_window titan_comm_window;
struct titan_backend;
/* 1 when titan_comm_window_create works on c. */
int titan_comm_has_windows(const titan_comm *c);
/* Collective over c (a split: the same call on every rank, in order). be:
 * whose memory the buffers are (above); NULL: host memory. A device
 * window's failure on any rank (no memory, export or mapping refused)
 * fails it on every rank, naming the rank and the cause. */
titan_status titan_comm_window_create(titan_comm *c, size_t bytes, const struct titan_backend *be,
                                      titan_comm_window **out);
/* 1 when w's buffers are device memory. */
int titan_comm_window_device(const titan_comm_window *w);
/* Rank r's half h (0 or 1): bytes of memory this process may read and
 * write (a device window's: with the backend's ops). */
void *titan_comm_window_buf(titan_comm_window *w, int rank, int half);
/* This rank's flag = value (>= its previous value); on a device window
 * once the backend's queued work is done. */
void titan_comm_window_post(titan_comm_window *w, unsigned long long value);
/* Until rank r's flag >= value (values below 2^63); TITAN_ERR_COMM
 * (named) on the timeout, a dead peer, a stopped communicator, or a device
 * window that rank r freed before posting value ("rank r closed its
 * window"). `what` names the step for messages. */
titan_status titan_comm_window_wait(titan_comm_window *w, int rank, unsigned long long value, const char *what);
/* Not collective for a host window. A device window's free waits for the
 * queued work, unmaps the peers' buffers, posts "closed" and frees this
 * rank's buffer once every peer has closed too or exited, even on a
 * stopped communicator (its peers may still read it); a peer that does
 * neither within 10 s (or the timeout, if shorter) leaves the buffer to
 * process exit. */
void titan_comm_window_free(titan_comm_window *w);
/* out[m] = src[0] + ... + src[n-1] element by element, added as the
 * reductions add (rank order, f32, bf16 rounded once): the same bits as a
 * reduce_scatter of the same parts. out may be one of the sources. */
void titan_comm_sum_ranks(const void *const *src, int n, size_t m, titan_dtype dt, void *out);

/* Sum of one double per rank of c, added in rank order in double (the same
 * on every rank: loss sums, norms); c NULL: x. Collective (an all-gather). */
titan_status titan_comm_sum_double(titan_comm *c, double x, double *out);

#endif
