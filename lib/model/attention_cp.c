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
    /* the all-gather's [B, T, NKV, HD] in position order: keys, values,
     * their gradients; the ring's k: the rank's [k | v] pack, dk: the
     * reduce-scatter's [dk | dv] (v, dv, stage NULL) */
    void *k, *v, *dk, *dv;
    void *stage; /* [cp][B][2][L][NKV, HD]: the collectives' rank-order buffer */
    size_t bytes;
    /* the ring (TITAN_ATTENTION_CP_RING): backend scratch for the
     * online-softmax merge (backend.h's attention_merge): the rank's out
     * [B, 2, L, QD] so far in fp32 (its lse so far is the caller's lse),
     * one block's out (compute type) and lse; merged[b * 2 + j]: query
     * chunk j of sequence b has its first block (host flags); published:
     * the backward's keys and values are out to the peers */
    int ring, published;
    void *pending_dk, *pending_dv; /* a ring backward started, its dk and dv not yet summed */
    float *acc, *part_lse;
    void *part;
    unsigned char *merged;
};

/* Where the rank's chunk j of sequence b starts among its local rows. */
static size_t local_row(const titan_attention_cp *a, int b, int j) { return ((size_t)b * 2 + (size_t)j) * a->L; }

/* Block (r, b, j) of the rank-order buffer: rank r's chunk j of sequence b. */
static size_t stage_row(const titan_attention_cp *a, int r, int b, int j) {
    return (size_t)r * a->B * 2 * a->L + local_row(a, b, j);
}

/* Values of the rank's keys (or values): [B, 2, L, NKV, HD]. */
static size_t local_count(const titan_attention_cp *a) { return (size_t)a->B * 2 * a->L * a->NKV * a->HD; }

/* Row of sequence b's position pos in a position-order buffer. */
static size_t seq_row(const titan_attention_cp *a, int b, int pos) { return (size_t)b * a->T + (size_t)pos; }

/* The sizes of a method's 5 backend buffers, in create's order: the plan
 * sums them, create allocates them. The all-gather: the whole sequence
 * [B, T, NKV, HD] of k, v, dk, dv and the rank-order stage. The ring: the
 * rank's [k | v] pack and the reduce-scatter's [dk | dv] ([B, 2, L, NKV,
 * HD] twice: a block of the group's window each), the merge's fp32 out
 * [B, 2, L, NH, HD], a block's out [L, NH, HD] and lse [NH, L]. */
static void buffer_sizes(titan_attention_cp_method method, titan_dtype dt, int B, int T, int NH, int NKV, int HD,
                         int size, size_t bytes[5]) {
    size_t esz = titan_dtype_size(dt), L = (size_t)T / (2 * (size_t)size), QD = (size_t)NH * HD;
    if (method != TITAN_ATTENTION_CP_RING) {
        for (int i = 0; i < 5; i++) bytes[i] = (size_t)B * T * NKV * HD * esz;
        return;
    }
    bytes[0] = bytes[1] = 2 * (size_t)B * 2 * L * NKV * HD * esz;
    bytes[2] = (size_t)B * 2 * L * QD * sizeof(float);
    bytes[3] = L * QD * esz;
    bytes[4] = L * NH * sizeof(float);
}

static titan_status alloc_buffers(titan_attention_cp *a) {
    const titan_backend *be = a->be;
    size_t bytes[5];
    void *p[5] = {NULL};
    buffer_sizes(a->ring ? TITAN_ATTENTION_CP_RING : TITAN_ATTENTION_CP_ALLGATHER, a->dt, a->B, a->T, a->NH, a->NKV,
                 a->HD, a->size, bytes);
    int i = 0;
    while (i < 5 && (p[i] = be->alloc(bytes[i]))) i++;
    if (a->ring) {
        a->k = p[0], a->dk = p[1], a->acc = p[2], a->part = p[3], a->part_lse = p[4];
        if (i < 5)
            return titan_error(TITAN_ERR_NOMEM, "model: context parallelism: cannot allocate %zu bytes of %s memory "
                               "for the ring's buffers", bytes[i], be->name);
        a->merged = titan_alloc((size_t)a->B * 2, "context parallel ring: the merge's flags");
        return a->merged ? TITAN_OK : TITAN_ERR_NOMEM;
    }
    a->k = p[0], a->v = p[1], a->dk = p[2], a->dv = p[3], a->stage = p[4];
    if (i < 5)
        return titan_error(TITAN_ERR_NOMEM, "model: context parallelism: cannot allocate 5 x %zu bytes of %s memory "
                           "for the whole sequence's keys and values", bytes[i], be->name);
    return TITAN_OK;
}

titan_status titan_attention_cp_create(titan_attention_cp **out, const titan_group *cp, const titan_backend *be,
                                       titan_attention_cp_method method, titan_dtype dt, int B, int T, int NH,
                                       int NKV, int HD) {
    *out = NULL;
    int n = cp->size, ring = method == TITAN_ATTENTION_CP_RING;
    if (T % (2 * n) != 0)
        return titan_error(TITAN_ERR_USAGE, "model: context parallelism: a sequence of %d tokens does not split into "
                           "2 x %d equal chunks", T, n);
    if (ring) TITAN_TRY(titan_attention_cp_ring_check(cp, be));
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
    a->ring = ring;
    titan_layout_cp_chunks(T, n, a->rank, a->chunk);
    size_t reserve, block;
    a->bytes = titan_attention_cp_plan_bytes(method, dt, B, T, NH, NKV, HD, n, &reserve, &block);
    /* the all-gather's staging on the group, or the ring's window */
    titan_status st = ring ? cp->overlap_reserve(cp->ctx, block) : cp->reserve(cp->ctx, reserve);
    if (st == TITAN_OK) st = alloc_buffers(a);
    if (st != TITAN_OK) {
        titan_attention_cp_free(a);
        return st;
    }
    *out = a;
    return TITAN_OK;
}

void titan_attention_cp_free(titan_attention_cp *a) {
    if (!a) return;
    titan_free(a->merged);
    void *bufs[8] = {a->k, a->v, a->dk, a->dv, a->stage, a->acc, a->part, a->part_lse};
    for (int i = 0; i < 8; i++)
        if (bufs[i]) a->be->free(bufs[i]);
    titan_free(a);
}

size_t titan_attention_cp_bytes(const titan_attention_cp *a) { return a->bytes; }

size_t titan_attention_cp_plan_bytes(titan_attention_cp_method method, titan_dtype dt, int B, int T, int NH, int NKV,
                                     int HD, int size, size_t *reserve, size_t *block) {
    size_t bytes[5];
    buffer_sizes(method, dt, B, T, NH, NKV, HD, size, bytes);
    int ring = method == TITAN_ATTENTION_CP_RING;
    /* the all-gather's largest collective is one whole-sequence buffer;
     * the ring's window block, its [k | v] pack */
    if (reserve) *reserve = ring ? 0 : bytes[0];
    if (block) *block = ring ? bytes[0] : 0;
    return bytes[0] + bytes[1] + bytes[2] + bytes[3] + bytes[4];
}

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

/* ---- the ring (rotate method "alltoall") ----------------------------------------------
 * Each rank's keys and values, packed [k | v] ([B, 2, L, NKV, HD] each),
 * go through the cp group's collective all-gather: the rank attends its
 * queries to its own block first, then to each peer's in ring order
 * (rank + 1, rank + 2, ...) as soon as that peer has published it, reading
 * it where it lies, and merges the blocks' outputs by their log-sum-exps
 * (online softmax). Query chunk at position pq and key chunk at pk: pk <
 * pq every key (attention_forward_at with off = L), pk = pq causal, pk >
 * pq nothing: the head-tail balance stays. Backward makes each rank's
 * partial dK and dV, block by block, straight into the group's window for
 * the collective reduce-scatter, peers' blocks first, its own last, each
 * from that rank's keys and values read where they lie. Those were
 * published (the group's publish) at the start of the layer's backward
 * (titan_attention_cp_prepare), so the peers' are there by the time the
 * attention needs them: a gather at the attention itself would wait on
 * whichever rank is late, with nothing to compute meanwhile (measured:
 * most of the ring's exposed time). Likewise the forward's, published
 * before the queries' projection. Nothing of the whole sequence is
 * copied or kept. */

titan_status titan_attention_cp_ring_refusal(const char *backend, int host, int block_attention, int windows) {
    if (block_attention && windows) return TITAN_OK;
    int guard = strcmp(backend, "cpu-guard") == 0;
    titan_error(TITAN_ERR_USAGE, "model: context parallelism: parallelism.context_parallel_rotate_method = "
                "\"alltoall\" (the ring) needs a cp group whose ranks address each other's buffers (the shm "
                "communicator's shared windows, for at most %d ranks: host buffers on cpu, device buffers the peers "
                "map on cuda) and a backend with block attention; this run has %s%s", TITAN_SUM_RANKS_MAX, backend,
                guard ? ", whose buffers the peers cannot map"
                : windows ? "" : " without shared windows (a nccl or mpi communicator, or more ranks)");
    if (!host && !guard && !windows)
        titan_error_hint("with the cuda backend and ranks on one host, TITAN_COMM=shm gives the cp group shared "
                         "windows over CUDA IPC");
    else
        titan_error_hint("parallelism.context_parallel_rotate_method = \"allgather\" runs on any communicator");
    return TITAN_ERR_USAGE;
}

titan_status titan_attention_cp_ring_check(const titan_group *g, const titan_backend *be) {
    return titan_attention_cp_ring_refusal(be->name, be->host,
                                           be->attention_forward_at && be->attention_backward_at && be->attention_merge,
                                           g->all_gather_each && g->publish && g->reduce_scatter_start);
}

typedef struct {
    titan_attention_cp *a;
    const void *q, *dout, *out;
    const float *lse;  /* the backward's: the forward's whole log-sum-exps */
    float *merged_lse; /* the forward's: the log-sum-exps merged so far (its output) */
    void *dq;
    titan_status st; /* a block's failure (the published keys unreadable) */
} ring_call;

/* off for query chunk j against key chunk pk: -1 none, 0 causal, L all. */
static int ring_off(const titan_attention_cp *a, int j, int pk) {
    return pk > a->chunk[j] ? -1 : pk == a->chunk[j] ? 0 : a->L;
}

/* Rank r's block [k | v] (backend memory: the rank's own, or a peer's in
 * the window, posted) against this rank's query chunks; each result is
 * merged into the chunk's so far on the backend (no host pass over it). */
static void ring_forward_block(void *arg, int r, void *kv) {
    ring_call *c = arg;
    titan_attention_cp *a = c->a;
    const titan_backend *be = a->be;
    int QD = a->NH * a->HD, KVD = a->NKV * a->HD, rchunk[2];
    titan_layout_cp_chunks(a->T, a->size, r, rchunk);
    const char *k = kv, *v = (const char *)kv + local_count(a) * a->esz;
    for (int b = 0; b < a->B; b++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < 2; i++) {
                int off = ring_off(a, j, rchunk[i]);
                if (off < 0) continue;
                size_t qr = local_row(a, b, j), kr = at(a, local_row(a, b, i), KVD);
                be->attention_forward_at(a->dt, a->part, a->part_lse, (const char *)c->q + at(a, qr, QD), k + kr,
                                         v + kr, 1, a->L, a->L, off, a->NH, a->NKV, a->HD);
                unsigned char *first = &a->merged[b * 2 + j];
                be->attention_merge(a->dt, a->acc + qr * QD, c->merged_lse + qr * a->NH, a->part, a->part_lse, 1, a->L,
                                    a->NH, a->HD, !*first);
                *first = 1;
            }
}

/* This rank's partial [dk | dv] of rank d's block into dst. */
static void ring_backward_block(void *arg, int d, void *dst) {
    ring_call *c = arg;
    titan_attention_cp *a = c->a;
    int QD = a->NH * a->HD, KVD = a->NKV * a->HD, dchunk[2];
    titan_layout_cp_chunks(a->T, a->size, d, dchunk);
    size_t n = local_count(a);
    const void *kv = NULL;
    a->be->zero(dst, 2 * n * a->esz);
    if (c->st == TITAN_OK) c->st = a->grp->published(a->grp->ctx, d, &kv);
    if (c->st != TITAN_OK) return;
    const char *k = kv, *v = k + n * a->esz;
    char *dk = dst, *dv = dk + n * a->esz;
    for (int b = 0; b < a->B; b++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < 2; i++) {
                int off = ring_off(a, j, dchunk[i]);
                if (off < 0) continue;
                size_t qr = local_row(a, b, j), qo = at(a, qr, QD), kr = at(a, local_row(a, b, i), KVD);
                a->be->attention_backward_at(a->dt, TITAN_ACC_DX, (char *)c->dq + qo, dk + kr, dv + kr,
                                             (const char *)c->dout + qo, (const char *)c->out + qo,
                                             c->lse + qr * a->NH, (const char *)c->q + qo, k + kr, v + kr, 1, a->L,
                                             a->L, off, a->NH, a->NKV, a->HD);
            }
}

/* [k | v] of the rank's rows into a->k (the ring's pack). */
static void *pack_kv(titan_attention_cp *a, const void *k, const void *v) {
    size_t n = local_count(a);
    a->be->convert(a->k, a->dt, k, a->dt, n);
    a->be->convert((char *)a->k + n * a->esz, a->dt, v, a->dt, n);
    return a->k;
}

static titan_status ring_failed(titan_status st, const char *what) {
    if (st != TITAN_OK) titan_error_context("model: context parallel ring %s", what);
    return st;
}

/* out from the merged fp32 rows; lse is merged in place (the first block
 * of each chunk writes it without reading it). */
static titan_status ring_forward(titan_attention_cp *a, void *out, float *lse, const void *q, const void *k,
                                 const void *v) {
    size_t rows = (size_t)a->B * 2 * a->L, QD = (size_t)a->NH * a->HD;
    memset(a->merged, 0, (size_t)a->B * 2);
    ring_call c = {.a = a, .q = q, .merged_lse = lse};
    const titan_group *g = a->grp;
    const void *mine = a->published ? NULL : pack_kv(a, k, v); /* NULL: titan_attention_cp_prepare's */
    a->published = 0;
    TITAN_TRY(ring_failed(g->all_gather_each(g->ctx, mine, NULL, 2 * local_count(a), a->dt, ring_forward_block, &c),
                          "forward"));
    a->be->convert(out, a->dt, a->acc, TITAN_DTYPE_F32, rows * QD);
    return TITAN_OK;
}

titan_status titan_attention_cp_prepare(titan_attention_cp *a, const void *k, const void *v) {
    if (!a->ring || a->published) return TITAN_OK;
    const titan_group *g = a->grp;
    TITAN_TRY(ring_failed(g->publish(g->ctx, pack_kv(a, k, v), 2 * local_count(a), a->dt), "publish"));
    a->published = 1;
    return TITAN_OK;
}

/* dq, and the partials of dk and dv out to their ranks; ring_backward_finish sums them. */
static titan_status ring_backward_start(titan_attention_cp *a, void *dq, void *dk, void *dv, const void *dout,
                                        const void *out, const float *lse, const void *q, const void *k,
                                        const void *v) {
    const titan_group *g = a->grp;
    TITAN_TRY(titan_attention_cp_prepare(a, k, v)); /* now, if the model did not earlier */
    a->published = 0;
    a->be->zero(dq, (size_t)a->B * 2 * a->L * a->NH * a->HD * a->esz);
    ring_call c = {.a = a, .q = q, .dout = dout, .out = out, .lse = lse, .dq = dq, .st = TITAN_OK};
    TITAN_TRY(ring_failed(g->reduce_scatter_start(g->ctx, 2 * local_count(a), a->dt, ring_backward_block, &c),
                          "backward reduce-scatter"));
    a->pending_dk = dk, a->pending_dv = dv;
    return ring_failed(c.st, "backward: a rank's published keys and values");
}

static titan_status ring_backward_finish(titan_attention_cp *a) {
    size_t n = local_count(a);
    const titan_group *g = a->grp;
    void *dk = a->pending_dk, *dv = a->pending_dv;
    if (!dk) return TITAN_OK; /* the start failed: its error is out already */
    a->pending_dk = a->pending_dv = NULL;
    TITAN_TRY(ring_failed(g->reduce_scatter_finish(g->ctx, a->dk), "backward reduce-scatter"));
    a->be->convert(dk, a->dt, a->dk, a->dt, n);
    a->be->convert(dv, a->dt, (char *)a->dk + n * a->esz, a->dt, n);
    return TITAN_OK;
}

titan_status titan_attention_cp_forward(titan_attention_cp *a, void *out, float *lse, const void *q,
                                        const void *k, const void *v) {
    if (a->ring) return ring_forward(a, out, lse, q, k, v);
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
    TITAN_TRY(titan_attention_cp_backward_start(a, dq, dk, dv, dout, out, lse, q, k, v));
    return titan_attention_cp_backward_finish(a);
}

titan_status titan_attention_cp_backward_finish(titan_attention_cp *a) {
    return a->ring ? ring_backward_finish(a) : TITAN_OK;
}

titan_status titan_attention_cp_backward_start(titan_attention_cp *a, void *dq, void *dk, void *dv, const void *dout,
                                               const void *out, const float *lse, const void *q, const void *k,
                                               const void *v) {
    if (a->ring) return ring_backward_start(a, dq, dk, dv, dout, out, lse, q, k, v);
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
