/* attention_cp.h - causal attention under context parallelism, as Llama 3
 * trains long sequences: each rank of the cp group holds two chunks of every
 * sequence (titan_layout_cp_chunks: chunks c and 2cp - 1 - c of 2cp, which
 * balances the causal work), all-gathers the keys and values of the whole
 * sequence, and attends its own queries to them (backend.h's attention with
 * Tq < Tk). Backward gathers them again (nothing of the whole sequence is
 * kept between forward and backward), computes the whole sequence's dK and
 * dV partial over the rank's queries, and reduce-scatters them (sum) back to
 * the ranks that hold those positions. The ring (titan_attention_cp_use_ring)
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

/* For micro-batches of B sequences of T tokens (T a multiple of 2 x the
 * group's size) and this rank's heads. Allocates the whole-sequence
 * buffers (titan_attention_cp_bytes). */
titan_status titan_attention_cp_create(titan_attention_cp **out, const titan_group *cp, const titan_backend *be,
                                       titan_dtype dt, int B, int T, int NH, int NKV, int HD);
void titan_attention_cp_free(titan_attention_cp *a);
/* Collective over the group: the ring instead of the all-gather
 * (torchtitan's context_parallel_rotate_method = "alltoall"): keys and
 * values taken block by block, rank by rank, while attention runs on the
 * block in hand, merged by online softmax; backward likewise, the dK and
 * dV partials reduce-scattered block by block. Needs a group with
 * collective matmuls (model/group.h: the shm communicator's windows, over
 * host memory on cpu, over device memory the peers map on cuda) and a
 * backend with attention_forward_at, _backward_at and attention_merge:
 * else TITAN_ERR_USAGE. Every byte it touches is backend memory, moved by
 * backend ops (on a device, in stream order: a peer's block is read only
 * after its post). Allocates the ring's scratch and the group's window
 * (titan_attention_cp_ring_plan_bytes). */
titan_status titan_attention_cp_use_ring(titan_attention_cp *a);
/* use_ring's refusal alone, before anything is allocated (and for a memory
 * plan): TITAN_OK where the group and backend can run the ring. */
titan_status titan_attention_cp_ring_check(const titan_group *g, const titan_backend *be);
/* The backend memory the ring holds for a group of size ranks, in place of
 * create's whole-sequence buffers (the rank's [k | v] pack, the
 * reduce-scatter's [dk | dv] and the merge's scratch), and the group's
 * window block it reserves (*block; may be NULL: the window holds 2 x size
 * of them, on a device backend in its memory). */
size_t titan_attention_cp_ring_plan_bytes(titan_dtype dt, int B, int T, int NH, int NKV, int HD, int size,
                                          size_t *block);

/* Backend memory held (whole-sequence keys, values, their gradients and a
 * rank-order staging buffer; with the ring, its own buffers instead, not
 * the window). */
size_t titan_attention_cp_bytes(const titan_attention_cp *a);
/* The backend memory titan_attention_cp_create allocates for micro-batches
 * of B x T (the whole sequence) in dt, and the largest collective it
 * reserves on the group (*reserve; may be NULL), without allocating. */
size_t titan_attention_cp_plan_bytes(titan_dtype dt, int B, int T, int NKV, int HD, size_t *reserve);

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
