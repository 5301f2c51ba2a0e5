/* group_impl.h - the state behind a titan_group over a communicator,
 * shared by group.c (the blocking collectives) and group_overlap.c (the
 * collective matmuls). Not a public header. */
#ifndef TITAN_PARALLEL_GROUP_IMPL_H
#define TITAN_PARALLEL_GROUP_IMPL_H

#include "parallel/group.h"

typedef struct {
    titan_group ops; /* first: ops.ctx is this */
    titan_comm *comm;
    const titan_backend *be;
    int staged;   /* through the mirror */
    char *mirror; /* host pages, mirror_bytes */
    size_t mirror_bytes;
    double comm_s, exposed_s;
    /* the collective matmuls' shared window: blocks of up to block_bytes,
     * size of them per half; the calls so far (numbering the flags) */
    titan_comm_window *win;
    size_t block_bytes;
    unsigned long long calls;
    unsigned long long published; /* the call of the last publish, while readable; 0 none */
    /* a reduce_scatter_start's call awaiting its finish (0 none), its
     * half, n and type */
    unsigned long long rs_call;
    int rs_half;
    size_t rs_n;
    titan_dtype rs_dt;
} group;

/* Fills in g's collective matmuls (model/group.h). */
void group_overlap_enable(group *g);
/* x[n] = its sum over the group through the window (made, and n values
 * fit one block): the blocking all_reduce's bits. */
titan_status group_overlap_all_reduce(group *g, void *x, size_t n, titan_dtype dt);

#endif
