/* state_dist.c - checkpoints of a data-parallel job (see state_dist.h). */
#include "train/state_dist.h"

#include "core/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0's save: the catalog and its own data file; the other ranks' parts
 * reach it as indexes (ckpt.h, "writing in parallel"). */
struct titan_shard_save {
    titan_comm *comm; /* world; NULL for one rank */
    int rank, world;
    int64_t step;
    char root[4096];
    const titan_shard_piece *pieces;
    titan_llama_config mc;
    int model_only;       /* the parameters alone, as dtype (titan_state_view) */
    titan_dtype dtype;
    titan_ckpt_writer *w; /* rank 0 */
    titan_status status;  /* this rank's write */
    char *payload;        /* its index, or its error message when it failed */
    size_t payload_len;
    titan_state_view optim; /* its mask and aux tensors (titan_shard_save_set_optim) */
};

/* Longest error message passed between ranks (error.c keeps 2048 bytes). */
#define MSG_WORDS 512

/* Rank 0's status and message, to every rank (the others take the message
 * as their error). One fixed-size broadcast: no second round for a length. */
static titan_status share_outcome(titan_comm *c, int me, titan_status st) {
    if (!c) return st;
    uint32_t buf[1 + MSG_WORDS] = {(uint32_t)st};
    if (me == 0 && st != TITAN_OK) snprintf((char *)(buf + 1), MSG_WORDS * 4, "%s", titan_error_message());
    TITAN_TRY(titan_comm_broadcast(c, buf, 1 + MSG_WORDS, TITAN_DTYPE_U32, 0, NULL));
    ((char *)(buf + 1))[MSG_WORDS * 4 - 1] = '\0';
    if (me != 0 && buf[0] != TITAN_OK) return titan_error((titan_status)buf[0], "%s", (char *)(buf + 1));
    return (titan_status)buf[0];
}

static void free_save(titan_shard_save *s) {
    free(s->payload);
    free(s);
}

void titan_shard_save_abort(titan_shard_save *s) {
    if (!s) return;
    titan_ckpt_abort(s->w);
    free_save(s);
}

titan_status titan_shard_save_begin(titan_shard_save **out, titan_mesh *mesh, const titan_shard_piece *pieces,
                                    const char *root, const titan_llama_config *mc, const titan_train_progress *pr,
                                    const titan_tokenizer *tokenizer, const titan_state_view *v) {
    *out = NULL;
    titan_shard_save *s = calloc(1, sizeof *s);
    titan_status st = s ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "checkpoint step %" PRId64 ": out of memory", pr->step);
    if (s) {
        s->comm = mesh->world_comm;
        s->rank = mesh->rank;
        s->world = mesh->world;
        s->step = pr->step;
        s->pieces = pieces;
        s->mc = *mc;
        s->model_only = v->model_only;
        s->dtype = v->model_only ? v->dtype : TITAN_DTYPE_F32;
        snprintf(s->root, sizeof s->root, "%s", root);
    }
    if (st == TITAN_OK && mesh->rank == 0) {
        st = titan_ckpt_begin(&s->w, root, pr->step);
        if (st == TITAN_OK && v->model_only)
            st = titan_state_write_meta_model_only(s->w, mc, pr, tokenizer, mesh->layout_str, v->dtype);
        else if (st == TITAN_OK) st = titan_state_write_meta(s->w, mc, pr, tokenizer, mesh->layout_str);
        if (st == TITAN_OK && !v->model_only) st = titan_ckpt_meta_i64(s->w, "optim.adamw.step", v->adam_step);
        if (st != TITAN_OK) titan_error_context("checkpoint step %" PRId64 " not saved: rank 0", pr->step);
    }
    /* A rank without memory for s still takes part here; it fails the
     * others at finish (they see it leave). */
    titan_status shared = share_outcome(mesh->world_comm, mesh->rank, st);
    if (!s) return st;
    if (shared != TITAN_OK) {
        titan_shard_save_abort(s);
        return shared;
    }
    *out = s;
    return TITAN_OK;
}

/* The boxes this rank saves, into rank 0's writer or this rank's part. */
static titan_status add_boxes(titan_shard_save *s, titan_ckpt_part *p, const float *const arrays[3]) {
    static const char *suffix[3] = {"", ":exp_avg", ":exp_avg_sq"};
    int np;
    titan_param *ps = titan_llama_params_new(&s->mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    const titan_shard_piece *pc = s->pieces;
    titan_status st = TITAN_OK;
    const unsigned char *mask = s->optim.flat_mask;
    for (int a = 0; a < (s->model_only ? 1 : 3) && st == TITAN_OK; a++) {
        for (int i = 0; i < np && st == TITAN_OK; i++) {
            if (!pc[i].len || !pc[i].writes || (a > 0 && mask && !mask[i])) continue;
            char name[128];
            void *tmp;
            snprintf(name, sizeof name, "%s%s", ps[i].name, suffix[a]);
            size_t at = a > 0 && s->optim.moment_off ? s->optim.moment_off[i] : pc[i].shard_off;
            const void *src = titan_state_cast(arrays[a] + at, pc[i].len, s->dtype, &tmp);
            if (!src) st = titan_error(TITAN_ERR_NOMEM, "%s as %s: out of memory", name, titan_dtype_name(s->dtype));
            else if (p) st = titan_ckpt_part_add(p, name, s->dtype, ps[i].ndim, ps[i].shape, &pc[i].box, src);
            else st = titan_ckpt_add(s->w, name, s->dtype, ps[i].ndim, ps[i].shape, &pc[i].box, src);
            free(tmp);
        }
    }
    /* GaLore's low-rank state: tensors sharded by rows go with their
     * parameter's box; whole ones (the same on every rank) rank 0 saves */
    const titan_state_view *o = &s->optim;
    for (int a = 0; a < o->n_aux && st == TITAN_OK; a++) {
        const titan_optim_tensor *x = &o->aux[a];
        const float *src = o->aux_data + x->off;
        if (!x->sharded) {
            if (!p) st = titan_ckpt_add(s->w, x->name, TITAN_DTYPE_F32, 2, x->shape, NULL, src);
            continue;
        }
        if (!x->rows || !pc[x->param].writes) continue;
        titan_box b = {.ndim = 2, .offset = {x->row0, 0}, .size = {x->rows, x->shape[1]}};
        st = p ? titan_ckpt_part_add(p, x->name, TITAN_DTYPE_F32, 2, x->shape, &b, src)
               : titan_ckpt_add(s->w, x->name, TITAN_DTYPE_F32, 2, x->shape, &b, src);
    }
    free(ps);
    return st;
}

static size_t words(size_t bytes) { return (bytes + 3) / 4; }

/* Keeps text as this rank's payload, in whole u32 words (the communicator's
 * unit) ending in zeros. */
static titan_status set_payload(titan_shard_save *s, const char *text, size_t len) {
    free(s->payload);
    s->payload_len = 0;
    if (len > UINT32_MAX - 8 || !(s->payload = calloc(words(len) + 1, 4)))
        return titan_error(TITAN_ERR_NOMEM, "checkpoint step %" PRId64 ": rank %d: %zu bytes of index: out of memory",
                           s->step, s->rank, len);
    memcpy(s->payload, text, len);
    s->payload_len = len;
    return TITAN_OK;
}

void titan_shard_save_set_optim(titan_shard_save *s, const titan_state_view *v) {
    s->optim.flat_mask = v->flat_mask;
    s->optim.moment_off = v->moment_off;
    s->optim.moment_numel = v->moment_numel;
    s->optim.aux = v->aux;
    s->optim.n_aux = v->n_aux;
    s->optim.aux_data = v->aux_data;
}

titan_status titan_shard_save_write(titan_shard_save *s, const float *params, const float *exp_avg,
                                    const float *exp_avg_sq) {
    const float *arrays[3] = {params, exp_avg, exp_avg_sq};
    int np = titan_llama_params(&s->mc, NULL), writes = 0;
    for (int i = 0; i < np; i++) writes |= s->pieces[i].len && s->pieces[i].writes;
    titan_status st = TITAN_OK;
    if (s->rank == 0) {
        st = add_boxes(s, NULL, arrays);
        if (st == TITAN_OK) st = titan_ckpt_sync(s->w); /* here, not in finish's collective commit */
    } else if (writes) {
        titan_ckpt_part *p = NULL;
        char *index = NULL;
        size_t len = 0;
        st = titan_ckpt_part_begin(&p, s->root, s->step, s->rank);
        if (st == TITAN_OK) st = add_boxes(s, p, arrays);
        if (st == TITAN_OK) st = titan_ckpt_part_finish(p, &index, &len);
        else titan_ckpt_part_abort(p);
        if (st == TITAN_OK) st = set_payload(s, index, len);
        free(index);
    }
    s->status = st;
    if (st != TITAN_OK) { /* finish (maybe on another thread) passes the message on */
        char msg[MSG_WORDS * 4]; /* a copy: set_payload's own failure would replace it */
        snprintf(msg, sizeof msg, "%s", titan_error_message());
        if (set_payload(s, msg, strlen(msg)) != TITAN_OK) titan_error(st, "%s", msg);
    }
    return st;
}

/* Whether rank r sends its payload to rank 0 in finish: the first failed
 * rank its message, or, when none failed, every rank its index. */
static int sends(const uint32_t *all, int failed, int r) {
    return r != 0 && all[2 * r + 1] != 0 && (failed < 0 || failed == r);
}

/* Rank 0: receives what the ranks send, then publishes or drops the step. */
static titan_status collect(titan_shard_save *s, const uint32_t *all, int failed, int keep, titan_status *cst_out) {
    size_t max = 0;
    for (int r = 1; r < s->world; r++)
        if (sends(all, failed, r) && all[2 * r + 1] > max) max = all[2 * r + 1];
    char *buf = calloc(words(max) + 1, 4);
    titan_status st = TITAN_OK;
    titan_status cst = buf ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "checkpoint step %" PRId64 ": %zu bytes of "
                                                    "rank indexes: out of memory", s->step, max);
    for (int r = 1; r < s->world && cst == TITAN_OK; r++) {
        if (!sends(all, failed, r)) continue;
        size_t len = all[2 * r + 1];
        if ((cst = titan_comm_recv(s->comm, buf, words(len), TITAN_DTYPE_U32, r, NULL)) != TITAN_OK) break;
        buf[len] = '\0';
        if (r == failed)
            st = titan_error((titan_status)all[2 * r], "checkpoint step %" PRId64 " not saved: rank %d: %s", s->step,
                             r, buf);
        else if (st == TITAN_OK && (st = titan_ckpt_add_part(s->w, r, buf, len)) != TITAN_OK)
            titan_error_context("checkpoint step %" PRId64 " not saved", s->step);
    }
    free(buf);
    *cst_out = cst;
    if (cst == TITAN_OK && failed == 0)
        st = titan_error(s->status, "checkpoint step %" PRId64 " not saved: rank 0: %s", s->step,
                         s->payload ? s->payload : "(no message)");
    else if (cst == TITAN_OK && failed > 0 && st == TITAN_OK) /* it had no memory left for its message */
        st = titan_error((titan_status)all[2 * failed], "checkpoint step %" PRId64 " not saved: rank %d failed",
                         s->step, failed);
    if (cst != TITAN_OK || st != TITAN_OK)
        titan_ckpt_abort(s->w);
    else if ((st = titan_ckpt_commit(s->w, keep)) != TITAN_OK)
        titan_error_context("checkpoint step %" PRId64, s->step);
    s->w = NULL;
    return st;
}

titan_status titan_shard_save_finish(titan_shard_save *s, int keep) {
    if (!s->comm) { /* one rank */
        titan_status st = s->status;
        if (st != TITAN_OK) {
            titan_error(st, "checkpoint step %" PRId64 " not saved: %s", s->step, s->payload ? s->payload : "");
            titan_ckpt_abort(s->w);
        } else {
            st = titan_ckpt_commit(s->w, keep);
        }
        free_save(s);
        return st;
    }
    /* Everyone's outcome and payload size; then the first failed rank sends
     * its message, or, when none failed, every rank its index. */
    uint32_t mine[2] = {(uint32_t)s->status, (uint32_t)s->payload_len};
    uint32_t *all = malloc((size_t)s->world * sizeof mine);
    titan_status cst = all ? titan_comm_all_gather(s->comm, mine, all, 2, TITAN_DTYPE_U32, NULL)
                           : titan_error(TITAN_ERR_NOMEM, "checkpoint step %" PRId64 ": outcomes of %d ranks: out of memory",
                                         s->step, s->world);
    titan_status st = TITAN_OK;
    int failed = -1;
    for (int r = 0; cst == TITAN_OK && r < s->world && failed < 0; r++)
        if (all[2 * r] != TITAN_OK) failed = r;
    if (cst == TITAN_OK && sends(all, failed, s->rank))
        cst = titan_comm_send(s->comm, s->payload, words(s->payload_len), TITAN_DTYPE_U32, 0, NULL);
    if (cst == TITAN_OK && s->rank == 0) st = collect(s, all, failed, keep, &cst);
    titan_comm *c = s->comm;
    int me = s->rank;
    titan_ckpt_abort(s->w); /* rank 0 after a communication failure: the staging dir goes */
    free_save(s);
    free(all);
    return cst != TITAN_OK ? cst : share_outcome(c, me, st);
}

titan_status titan_state_save_shards(titan_mesh *mesh, const titan_shard_piece *pieces, const titan_state_view *v,
                                     const char *root, const titan_llama_config *mc, const titan_train_progress *pr,
                                     const titan_tokenizer *tokenizer, int keep_latest_k) {
    titan_shard_save *s = NULL;
    TITAN_TRY(titan_shard_save_begin(&s, mesh, pieces, root, mc, pr, tokenizer, v));
    /* Its failure is passed on by finish, on every rank. */
    titan_shard_save_set_optim(s, v);
    titan_shard_save_write(s, v->params, v->exp_avg, v->exp_avg_sq);
    return titan_shard_save_finish(s, keep_latest_k);
}

/* Where boxes land: host memory, or a backend's through a host buffer of
 * the largest box. A device load once read the whole shard and both
 * moments into host copies first: 3 x 18 GB of fresh pages for an 8B
 * model's 16 layers, every page a fault. */
typedef struct {
    const titan_backend *dev; /* NULL: dst is host memory */
    float *stage;             /* dev: the largest box's floats */
} box_sink;

static titan_status sink_open(box_sink *k, const titan_backend *dev, const titan_shard_piece *pc, int np) {
    k->dev = dev && !dev->host ? dev : NULL;
    k->stage = NULL;
    if (!k->dev) return TITAN_OK;
    size_t most = 1;
    for (int i = 0; i < np; i++)
        if (pc[i].len > most) most = pc[i].len;
    k->stage = titan_alloc_pages(most * sizeof(float), "host buffer of the checkpoint load");
    return k->stage ? TITAN_OK : TITAN_ERR_NOMEM;
}

static void sink_close(box_sink *k) { titan_free_pages(k->stage); }

/* moff (NULL: the pieces' own offsets): where each box lands in dst. */
static titan_status load_boxes(titan_ckpt *ck, const titan_param *ps, int np, const titan_shard_piece *pc,
                               float *dst, const char *suffix, const unsigned char *mask, const size_t *moff,
                               const box_sink *k) {
    for (int i = 0; i < np; i++) {
        if (!pc[i].len || (mask && !mask[i])) continue;
        char name[128];
        snprintf(name, sizeof name, "%s%s", ps[i].name, suffix);
        float *at = dst + (moff ? moff[i] : pc[i].shard_off);
        TITAN_TRY(titan_ckpt_read(ck, name, TITAN_DTYPE_F32, &pc[i].box, k->dev ? k->stage : at));
        if (k->dev) k->dev->to_device(at, k->stage, pc[i].len * sizeof(float));
    }
    return TITAN_OK;
}

/* exclude_from_loading "model": this rank's boxes of the weights
 * titan-init draws from seed (the whole model is drawn on the host). */
static titan_status init_boxes(const titan_llama_config *mc, const titan_param *ps, int np,
                               const titan_shard_piece *pc, float *shard, uint64_t seed, const box_sink *k) {
    size_t n = titan_llama_num_params(mc);
    float *full = malloc(n ? n * sizeof *full : 1);
    if (!full) return titan_error(TITAN_ERR_NOMEM, "fresh weights (exclude_from_loading model): %zu floats: out of "
                                  "memory", n);
    titan_status st = titan_llama_init_weights(mc, full, seed);
    for (int i = 0; st == TITAN_OK && i < np; i++) {
        if (!pc[i].len) continue;
        titan_box whole = {.ndim = ps[i].ndim};
        for (int d = 0; d < ps[i].ndim; d++) whole.size[d] = ps[i].shape[d];
        float *at = shard + pc[i].shard_off;
        titan_box_copy(k->dev ? k->stage : at, &pc[i].box, full + ps[i].offset, &whole, &pc[i].box, sizeof(float));
        if (k->dev) k->dev->to_device(at, k->stage, pc[i].len * sizeof(float));
    }
    free(full);
    return st;
}

static titan_status load_all(titan_ckpt *ck, const titan_llama_config *mc, const titan_shard_piece *pc,
                             float *shard, titan_adamw *adam, titan_optim *opt, titan_train_progress *pr,
                             const titan_load_opts *o) {
    const unsigned char *mask = opt ? titan_optim_flat_mask(opt) : NULL;
    const size_t *moff = opt ? titan_optim_moment_offsets(opt) : NULL;
    TITAN_TRY(titan_state_read_meta(ck, mc, pr));
    unsigned skip = o ? o->exclude : 0;
    int np, has = 0;
    titan_param *ps = titan_llama_params_new(mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    box_sink k;
    titan_status st = sink_open(&k, o && !opt ? o->dev : NULL, pc, np);
    if (st == TITAN_OK)
        st = skip & TITAN_PART_MODEL ? init_boxes(mc, ps, np, pc, shard, o->seed, &k)
                                     : load_boxes(ck, ps, np, pc, shard, "", NULL, NULL, &k);
    if (st == TITAN_OK && !(skip & TITAN_PART_OPTIMIZER))
        st = titan_state_read_adam_step(ck, ps[0].name, pr, adam, &has);
    else if (st == TITAN_OK)
        titan_adamw_set_step(adam, 0); /* fresh moments: the caller's optimizer is new */
    if (st == TITAN_OK && has) st = load_boxes(ck, ps, np, pc, titan_adamw_m(adam), ":exp_avg", mask, moff, &k);
    if (st == TITAN_OK && has) st = load_boxes(ck, ps, np, pc, titan_adamw_v(adam), ":exp_avg_sq", mask, moff, &k);
    if (st == TITAN_OK && has && opt) st = titan_state_load_aux(ck, opt);
    if (st == TITAN_OK && !has && !opt) {
        /* No update has run: zeros, whatever the device held. On the host
         * the pages are zeros already; written now, the first step's read
         * then write of them is no copy-on-write fault and TLB shootdown a
         * page (a 542M-parameter model's first cpu step: 17 s -> 14 s on a
         * 2-core VM). GaLore's host twin (opt) stays untouched. */
        const titan_backend *z = k.dev ? k.dev : titan_backend_cpu();
        size_t n = titan_adamw_numel(adam) * sizeof(float);
        z->zero(titan_adamw_m(adam), n);
        z->zero(titan_adamw_v(adam), n);
    }
    sink_close(&k);
    free(ps);
    return st;
}

titan_status titan_state_load_shards(const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *pr, char *ckpt_path_out, size_t cap,
                                     const titan_load_opts *o) {
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    if (ckpt_path_out) snprintf(ckpt_path_out, cap, "%s", titan_ckpt_path(ck));
    titan_status st = load_all(ck, mc, pieces, shard, adam, NULL, pr, o);
    titan_ckpt_close(ck);
    return st;
}

titan_status titan_state_load_shards_optim(const char *path, const titan_llama_config *mc,
                                           const titan_shard_piece *pieces, float *shard, titan_optim *opt,
                                           titan_train_progress *pr, char *ckpt_path_out, size_t cap,
                                           const titan_load_opts *o) {
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    if (ckpt_path_out) snprintf(ckpt_path_out, cap, "%s", titan_ckpt_path(ck));
    titan_status st = load_all(ck, mc, pieces, shard, titan_optim_adamw(opt), opt, pr, o);
    titan_ckpt_close(ck);
    return st;
}
