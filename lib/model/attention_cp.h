/* attention_cp.h - causal attention under context parallelism, as Llama 3
 * trains long sequences: each rank of the cp group holds two chunks of every
 * sequence (titan_layout_cp_chunks: chunks c and 2cp - 1 - c of 2cp, which
 * balances the causal work), all-gathers the keys and values of the whole
 * sequence, and attends its own queries to them (backend.h's attention with
 * Tq < Tk). Backward gathers them again (nothing of the whole sequence is
 * kept between forward and backward), computes the whole sequence's dK and
 * dV partial over the rank's queries, and reduce-scatters them (sum) back to
 * the ranks that hold those positions. The ring (TITAN_ATTENTION_CP_RING)
 * passes the blocks instead, read in place while attention runs.
 *
 * Layouts (backend memory, the compute type): q, out [B, 2, L, NH, HD],
 * k, v [B, 2, L, NKV, HD], one sequence's two chunks after each other
 * (L = T / 2cp tokens each: the rank's [B, T/cp] rows in order); lse
 * [B, 2, NH, L] fp32. Every rank of the group makes the same calls in the
 * same order. Collectives run on the cp group (model/group.h), on the
 * whole-sequence buffers in backend memory. */
#ifndef TITAN_MODEL_ATTENTION_CP_H
#define TITAN_MODEL_ATTENTION_CP_H

#include "backend/backend.h"
#include "model/group.h"

typedef struct titan_attention_cp titan_attention_cp;

/* How the keys and values go round the group (torchtitan's
 * context_parallel_rotate_method). */
typedef enum {
    /* "allgather": the whole sequence's keys and values gathered, their
     * gradients reduce-scattered (any communicator) */
    TITAN_ATTENTION_CP_ALLGATHER,
    /* "alltoall", the ring: keys and values taken block by block, rank by
     * rank, while attention runs on the block in hand, merged by online
     * softmax; backward likewise, the dK and dV partials reduce-scattered
     * block by block. Needs a group with collective matmuls (model/group.h:
     * the shm communicator's windows, over host memory on cpu, over device
     * memory the peers map on cuda) and a backend with attention_forward_at,
     * _backward_at and attention_merge (titan_attention_cp_ring_check).
     * Every byte it touches is backend memory, moved by backend ops (on a
     * device, in stream order: a peer's block is read only after its post). */
    TITAN_ATTENTION_CP_RING,
} titan_attention_cp_method;

/* Collective over the group. For micro-batches of B sequences of T tokens
 * (T a multiple of 2 x the group's size) and this rank's heads, rotating
 * by `method`: allocates that method's buffers only and reserves that
 * method's collectives on the group (titan_attention_cp_plan_bytes): the
 * all-gather's whole-sequence buffers and the group's staging (reserve),
 * or the ring's own buffers and the group's window (overlap_reserve). The
 * ring's refusal (TITAN_ERR_USAGE, titan_attention_cp_ring_check) comes
 * before anything is allocated. */
titan_status titan_attention_cp_create(titan_attention_cp **out, const titan_group *cp, const titan_backend *be,
                                       titan_attention_cp_method method, titan_dtype dt, int B, int T, int NH,
                                       int NKV, int HD);
void titan_attention_cp_free(titan_attention_cp *a);
/* The ring's refusal alone, before anything is allocated: TITAN_OK where
 * the group and backend can run it, else TITAN_ERR_USAGE with the error
 * set (what the ring needs, what this run has, a hint). */
titan_status titan_attention_cp_ring_check(const titan_group *g, const titan_backend *be);
/* The same refusal from the facts it rests on, for a memory plan that has
 * neither group nor backend: the backend's name and whether its buffers
 * are host memory, whether it has block attention, and whether the cp
 * group has collective matmuls (shared windows its ranks address). */
titan_status titan_attention_cp_ring_refusal(const char *backend, int host, int block_attention, int windows);

/* Backend memory held (with the all-gather: whole-sequence keys, values,
 * their gradients and a rank-order staging buffer; with the ring: its own
 * buffers; not the ring's window). */
size_t titan_attention_cp_bytes(const titan_attention_cp *a);
/* What titan_attention_cp_create allocates for `method`, a group of size
 * ranks and micro-batches of B x T (the whole sequence) in dt, without
 * allocating: returns the backend memory it holds (titan_attention_cp_bytes);
 * *reserve: the largest collective it reserves on the group (the
 * all-gather's staging, a host mirror where the communicator moves host
 * memory only; 0 with the ring, which reserves none); *block: the block of
 * the group's shared window the ring reserves (0 with the all-gather; the
 * window holds 2 x size of them, on a device backend in its memory:
 * titan_group_window_bytes). reserve and block may be NULL. */
size_t titan_attention_cp_plan_bytes(titan_attention_cp_method method, titan_dtype dt, int B, int T, int NH, int NKV,
                                     int HD, int size, size_t *reserve, size_t *block);

titan_status titan_attention_cp_forward(titan_attention_cp *a, void *out, float *lse, const void *q,
                                        const void *k, const void *v);
/* With the ring, before the next forward or backward (k and v as it will
 * pass them; no other call of the cp group between): this rank's keys and
 * values go out to the peers now, so that the attention finds theirs
 * there instead of waiting for them: the model calls it before the
 * queries' projection, and at the start of the layer's backward (after
 * any recompute). Optional (forward and backward publish them themselves
 * when not called); nothing with the all-gather. */
titan_status titan_attention_cp_prepare(titan_attention_cp *a, const void *k, const void *v);
/* dq, dk, dv are written (not added). */
titan_status titan_attention_cp_backward(titan_attention_cp *a, void *dq, void *dk, void *dv, const void *dout,
                                         const void *out, const float *lse, const void *q, const void *k,
                                         const void *v);
/* The same in two parts: dq is written when _start returns, dk and dv
 * when _finish does (the ring sums the peers' partials of this rank's
 * keys and values there: compute put between the two hides their wait).
 * Nothing else of the cp group runs between the two. */
titan_status titan_attention_cp_backward_start(titan_attention_cp *a, void *dq, void *dk, void *dv, const void *dout,
                                               const void *out, const float *lse, const void *q, const void *k,
                                               const void *v);
titan_status titan_attention_cp_backward_finish(titan_attention_cp *a);
/* Seconds in the group's collectives since the last call (then reset). */
double titan_attention_cp_take_comm_s(titan_attention_cp *a);
/* Of those, the seconds blocked waiting on peers (then 0). */
double titan_attention_cp_take_exposed_s(titan_attention_cp *a);

#endif
