/* attention_cp.c - causal attention under context parallelism (attention_cp.h).
 *
 * The all-gather lands in rank order, [rank][b][chunk][L] rows; the
 * attention reads each sequence's keys in position order, so the blocks are
 * moved to [b][position] (2 x cp x B copies of L rows), and the backward's
 * whole-sequence gradients are moved back the same way before the
 * reduce-scatter. Keys and values are NKV / NH of the queries' size (GQA),
 * so this costs little next to the attention itself. */
#include "model/attention_cp.h"

#include <string.h>

#include "core/mem.h"
#include "tensor/layout.h"

struct titan_attention_cp {
    const titan_group *grp;
    const titan_backend *be;
    titan_dtype dt;
    size_t esz;
    int B, T, L, NH, NKV, HD, size, rank;
    int chunk[2];
    /* [B, T, NKV, HD] in position order: keys, values, their gradients */
    void *k, *v, *dk, *dv;
    void *stage; /* [cp][B][2][L][NKV, HD]: the collectives' rank-order buffer */
    size_t bytes;
};

/* Where the rank's chunk j of sequence b starts among its local rows. */
static size_t local_row(const titan_attention_cp *a, int b, int j) { return ((size_t)b * 2 + (size_t)j) * a->L; }

/* Block (r, b, j) of the rank-order buffer: rank r's chunk j of sequence b. */
static size_t stage_row(const titan_attention_cp *a, int r, int b, int j) {
    return (size_t)r * a->B * 2 * a->L + local_row(a, b, j);
}

/* Row of sequence b's position pos in a position-order buffer. */
static size_t seq_row(const titan_attention_cp *a, int b, int pos) { return (size_t)b * a->T + (size_t)pos; }

titan_status titan_attention_cp_create(titan_attention_cp **out, const titan_group *cp, const titan_backend *be,
                                       titan_dtype dt, int B, int T, int NH, int NKV, int HD) {
    *out = NULL;
    int n = cp->size;
    if (T % (2 * n) != 0)
        return titan_error(TITAN_ERR_USAGE, "model: context parallelism: a sequence of %d tokens does not split into "
                           "2 x %d equal chunks", T, n);
    titan_attention_cp *a = titan_alloc(sizeof *a, "context parallel attention");
    if (!a) return TITAN_ERR_NOMEM;
    memset(a, 0, sizeof *a);
    a->grp = cp;
    a->be = be;
    a->dt = dt;
    a->esz = titan_dtype_size(dt);
    a->B = B, a->T = T, a->L = T / (2 * n), a->NH = NH, a->NKV = NKV, a->HD = HD;
    a->size = n;
    a->rank = cp->rank;
    titan_layout_cp_chunks(T, n, a->rank, a->chunk);
    size_t whole = (size_t)B * T * NKV * HD * a->esz;
    titan_status st = cp->reserve(cp->ctx, whole);
    if (st != TITAN_OK) {
        titan_attention_cp_free(a);
        return st;
    }
    int nbufs = 5;
    void **bufs[5] = {&a->k, &a->v, &a->dk, &a->dv, &a->stage};
    for (int i = 0; i < nbufs; i++) {
        *bufs[i] = be->alloc(whole);
        if (!*bufs[i]) {
            titan_attention_cp_free(a);
            return titan_error(TITAN_ERR_NOMEM, "model: context parallelism: cannot allocate %d x %zu bytes of %s "
                               "memory for the whole sequence's keys and values", nbufs, whole, be->name);
        }
    }
    a->bytes = (size_t)nbufs * whole;
    *out = a;
    return TITAN_OK;
}

void titan_attention_cp_free(titan_attention_cp *a) {
    if (!a) return;
    void *bufs[5] = {a->k, a->v, a->dk, a->dv, a->stage};
    for (int i = 0; i < 5; i++)
        if (bufs[i]) a->be->free(bufs[i]);
    titan_free(a);
}

size_t titan_attention_cp_bytes(const titan_attention_cp *a) { return a->bytes; }

double titan_attention_cp_take_comm_s(titan_attention_cp *a) { return a->grp->take_comm_s(a->grp->ctx); }
double titan_attention_cp_take_exposed_s(titan_attention_cp *a) { return a->grp->take_exposed_s(a->grp->ctx); }

/* Moves L-row blocks between the rank-order buffer and a position-order
 * one: to_seq 1 from stage into seq, 0 the other way. */
static void permute(titan_attention_cp *a, void *seq, int to_seq) {
    const titan_backend *be = a->be;
    size_t row = (size_t)a->NKV * a->HD * a->esz, blk = (size_t)a->L * row;
    for (int r = 0; r < a->size; r++) {
        int chunk[2];
        titan_layout_cp_chunks(a->T, a->size, r, chunk);
        for (int b = 0; b < a->B; b++)
            for (int j = 0; j < 2; j++) {
                char *s = (char *)seq + seq_row(a, b, chunk[j]) * row;
                size_t off = stage_row(a, r, b, j) * row;
                if (to_seq) be->convert(s, a->dt, (char *)a->stage + off, a->dt, blk / a->esz);
                else be->convert((char *)a->stage + off, a->dt, s, a->dt, blk / a->esz);
            }
    }
}

/* The whole sequence of the ranks' local rows [B, 2, L, NKV, HD] into seq,
 * in position order. */
static titan_status gather(titan_attention_cp *a, const void *local, void *seq) {
    size_t n = (size_t)a->B * 2 * a->L * a->NKV * a->HD;
    titan_status st = a->grp->all_gather(a->grp->ctx, local, a->stage, n, a->dt);
    if (st != TITAN_OK) {
        titan_error_context("model: context parallel all-gather of keys and values");
        return st;
    }
    permute(a, seq, 1);
    return TITAN_OK;
}

/* The sum over the group of seq's rows at this rank's positions into local. */
static titan_status reduce_scatter(titan_attention_cp *a, const void *seq, void *local) {
    size_t n = (size_t)a->B * 2 * a->L * a->NKV * a->HD;
    permute(a, (void *)seq, 0);
    titan_status st = a->grp->reduce_scatter(a->grp->ctx, a->stage, local, n, a->dt);
    if (st != TITAN_OK) {
        titan_error_context("model: context parallel reduce-scatter of key and value gradients");
        return st;
    }
    return TITAN_OK;
}

/* Byte offset of local row r of a [rows, width] tensor of the compute type. */
static size_t at(const titan_attention_cp *a, size_t r, int width) { return r * (size_t)width * a->esz; }

titan_status titan_attention_cp_forward(titan_attention_cp *a, void *out, float *lse, const void *q,
                                        const void *k, const void *v) {
    TITAN_TRY(gather(a, k, a->k));
    TITAN_TRY(gather(a, v, a->v));
    int QD = a->NH * a->HD, KVD = a->NKV * a->HD;
    for (int b = 0; b < a->B; b++)
        for (int j = 0; j < 2; j++) {
            size_t r = local_row(a, b, j), kv = at(a, seq_row(a, b, 0), KVD);
            /* the chunk's queries against every key up to its last position */
            a->be->attention_forward(a->dt, (char *)out + at(a, r, QD), lse + r * a->NH, (const char *)q + at(a, r, QD),
                                     (char *)a->k + kv, (char *)a->v + kv, 1, a->L, a->chunk[j] + a->L, a->NH, a->NKV,
                                     a->HD);
        }
    return TITAN_OK;
}

titan_status titan_attention_cp_backward(titan_attention_cp *a, void *dq, void *dk, void *dv, const void *dout,
                                         const void *out, const float *lse, const void *q, const void *k,
                                         const void *v) {
    TITAN_TRY(gather(a, k, a->k));
    TITAN_TRY(gather(a, v, a->v));
    int QD = a->NH * a->HD, KVD = a->NKV * a->HD;
    size_t whole = (size_t)a->B * a->T * KVD * a->esz;
    /* The chunks' key ranges overlap (both start at position 0): the
     * gradients add up from zero. Keys after the rank's last query get none. */
    a->be->zero(a->dk, whole);
    a->be->zero(a->dv, whole);
    a->be->zero(dq, (size_t)a->B * 2 * a->L * QD * a->esz);
    for (int b = 0; b < a->B; b++)
        for (int j = 0; j < 2; j++) {
            size_t r = local_row(a, b, j), kv = at(a, seq_row(a, b, 0), KVD), qo = at(a, r, QD);
            a->be->attention_backward(a->dt, TITAN_ACC_DX, (char *)dq + qo, (char *)a->dk + kv, (char *)a->dv + kv,
                                      (const char *)dout + qo, (const char *)out + qo, lse + r * a->NH,
                                      (const char *)q + qo, (char *)a->k + kv, (char *)a->v + kv, 1, a->L,
                                      a->chunk[j] + a->L, a->NH, a->NKV, a->HD);
        }
    TITAN_TRY(reduce_scatter(a, a->dk, dk));
    return reduce_scatter(a, a->dv, dv);
}
