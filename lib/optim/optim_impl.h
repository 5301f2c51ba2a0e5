/* optim_impl.h - the optimizer interface's state, shared by optimizer.c
 * (AdamW, Adam, dispatch) and galore.c (the projected matrices). Private
 * to lib/optim. */
#ifndef TITAN_OPTIM_IMPL_H
#define TITAN_OPTIM_IMPL_H

#include "optim/optim.h"

/* One projected matrix: its place in the flat arrays, shape, side and rank,
 * and where its projector and low-rank moments lie in the arena. */
typedef struct {
    size_t off;
    int64_t m, n;      /* this rank's rows (m) of the whole m_full */
    int64_t m_full, row0;
    int r, right;
    uint64_t stream;   /* randomized SVD's rng stream (from the name) */
    size_t proj, exp_avg, exp_avg_sq; /* arena offsets */
    size_t low_numel;  /* right: m x r; left: r x n */
} titan_galore_mat;

struct titan_optim {
    titan_optim_config cfg;
    const titan_backend *be;
    titan_adamw *adam;          /* flat moments and the step count */
    int np;
    unsigned char *flat;        /* GaLore: per parameter, 1 when on AdamW */
    /* GaLore: the ranges the AdamW kernel serves, each at flat_off in the
     * parameters and at flat_moff in the packed moments (flat_len 0 ends
     * the list); moment_off per parameter (catalog order), and the packed
     * moments' length */
    size_t *flat_off, *flat_len, *flat_moff;
    size_t *moment_off;
    size_t flat_numel;
    /* GaLore */
    int nmat;
    titan_galore_mat *mats;
    titan_optim_tensor *tensors; /* 3 a matrix */
    float *arena;
    size_t arena_numel;
    titan_optim_comm *comm;     /* row-sharded matrices: their group */
    int sharded;                /* some matrix is */
    float *gathered;            /* a refresh's whole gradient (sharded) */
    size_t gathered_numel;
    /* the scaled gradient, the full update, the low-rank update, a
     * refresh's SVD workspace (svd.h), backend memory */
    float *scratch;
    size_t scratch_full, scratch_low, scratch_svd;
};

/* galore.c: the matrices' layout (mats, tensors, arena and buffer sizes)
 * from ps, flat[i] cleared for those it projects; allocates no state. */
titan_status titan_galore_layout(titan_optim *o, const titan_optim_param *ps, int np);
/* The layout's arena (zeroed) and step buffers, in backend memory. */
titan_status titan_galore_alloc(titan_optim *o);
/* Floats of the step buffers (the scaled gradient, the full and the
 * low-rank update, a refresh's SVD workspace; its gathered gradient). */
size_t titan_galore_work_numel(const titan_optim *o);
/* One GaLore step of every projected matrix; t is the step count after
 * the increment (1 on the first step). */
titan_status titan_galore_step(titan_optim *o, float *params, const float *grads, float gscale, float lr, int64_t t);
/* GaLore's flat moments: AdamW over the packed ranges' parts inside
 * [off, off + len) of params (len SIZE_MAX: to the end), their gradients
 * span (span[0] is element off) times gscale (step_groups.c). */
void titan_optim_flat_step(titan_optim *o, size_t off, size_t len, float *params, const float *span, float gscale,
                           float lr, int64_t t);
/* The same for the matrices among parameters [p0, p1), whose elements
 * lie in [off, off + len) of params, their gradients in span (no
 * clipping; step_groups.c). */
titan_status titan_galore_step_params(titan_optim *o, int p0, int p1, size_t off, size_t len, float *params,
                                      const float *span, float lr, int64_t t);

#endif
