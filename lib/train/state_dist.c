/* state_dist.c - checkpoints of a data-parallel job (see state_dist.h). */
#include "train/state_dist.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/mem.h"

/* Adds the boxes rank r saves: arrays[3] are its packed parameters and moments. */
static titan_status add_rank_boxes(titan_ckpt_writer *w, int r, const titan_param *ps, int np,
                                   const titan_shard_piece *pc, const float *const arrays[3]) {
    static const char *suffix[3] = {"", ":exp_avg", ":exp_avg_sq"};
    for (int a = 0; a < 3; a++) {
        for (int i = 0; i < np; i++) {
            if (!pc[i].len || !pc[i].writes) continue;
            char name[128];
            snprintf(name, sizeof name, "%s%s", ps[i].name, suffix[a]);
            TITAN_TRY(titan_ckpt_add_rank(w, r, name, TITAN_DTYPE_F32, ps[i].ndim, ps[i].shape, &pc[i].box,
                                          arrays[a] + pc[i].shard_off));
        }
    }
    return TITAN_OK;
}

titan_status titan_state_save_shards(titan_mesh *mesh, titan_fsdp *f, titan_adamw *adam, const char *root,
                                     const titan_llama_config *mc, const titan_train_progress *pr,
                                     const char *tokenizer_id, int keep_latest_k) {
    int np = titan_llama_params(mc, NULL);
    titan_param ps[np];
    titan_llama_params(mc, ps);
    titan_shard_piece pc[np];
    titan_comm *c = mesh->world_comm;
    int me = mesh->rank;
    titan_ckpt_writer *w = NULL;
    titan_status st = TITAN_OK, cst = TITAN_OK; /* writer's, communication's */
    if (me == 0) {
        st = titan_ckpt_begin(&w, root, pr->step);
        if (st == TITAN_OK) st = titan_state_write_meta(w, mc, pr, tokenizer_id, mesh->layout_str);
        if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "optim.adamw.step", titan_adamw_get_step(adam));
    }
    const float *mine[3] = {titan_fsdp_params(f), titan_adamw_m(adam), titan_adamw_v(adam)};
    float *buf = NULL;
    for (int r = 0; r < mesh->world && cst == TITAN_OK; r++) {
        size_t n;
        titan_shard_plan(&mesh->layout, mc, r, pc, &n);
        int writes = 0;
        for (int i = 0; i < np; i++) writes |= pc[i].len && pc[i].writes;
        if (!writes || n == 0) continue;
        if (r == me && me != 0) {
            for (int a = 0; a < 3 && cst == TITAN_OK; a++)
                cst = titan_comm_send(c, mine[a], n, TITAN_DTYPE_F32, 0, NULL);
            continue;
        }
        if (me != 0) continue;
        const float *src[3] = {mine[0], mine[1], mine[2]};
        if (r != 0) {
            /* Receive even after a write error, so rank r is not left hanging. */
            titan_free(buf);
            buf = titan_alloc(3 * n * sizeof(float), "checkpoint shard from another rank");
            if (!buf) {
                cst = TITAN_ERR_NOMEM;
                break;
            }
            for (int a = 0; a < 3 && cst == TITAN_OK; a++) {
                cst = titan_comm_recv(c, buf + (size_t)a * n, n, TITAN_DTYPE_F32, r, NULL);
                src[a] = buf + (size_t)a * n;
            }
        }
        if (st == TITAN_OK && cst == TITAN_OK) st = add_rank_boxes(w, r, ps, np, pc, src);
    }
    titan_free(buf);
    if (cst != TITAN_OK) {
        titan_ckpt_abort(w);
        return cst;
    }
    if (me == 0) {
        if (st == TITAN_OK) st = titan_ckpt_commit(w, keep_latest_k);
        else titan_ckpt_abort(w);
    }
    if (!c) return st;
    /* Everyone learns how the write went, and no rank runs ahead of it. */
    uint32_t code = (uint32_t)st;
    TITAN_TRY(titan_comm_broadcast(c, &code, 1, TITAN_DTYPE_U32, 0, NULL));
    if (me != 0 && code != TITAN_OK)
        return titan_error((titan_status)code, "checkpoint step %" PRId64 ": rank 0 failed to write it (see its error)",
                           pr->step);
    return st;
}

static titan_status load_boxes(titan_ckpt *ck, const titan_param *ps, int np, const titan_shard_piece *pc,
                               float *dst, const char *suffix) {
    for (int i = 0; i < np; i++) {
        if (!pc[i].len) continue;
        char name[128];
        snprintf(name, sizeof name, "%s%s", ps[i].name, suffix);
        TITAN_TRY(titan_ckpt_read(ck, name, TITAN_DTYPE_F32, &pc[i].box, dst + pc[i].shard_off));
    }
    return TITAN_OK;
}

static titan_status load_all(titan_ckpt *ck, const titan_llama_config *mc, const titan_shard_piece *pc,
                             float *shard, titan_adamw *adam, titan_train_progress *pr) {
    TITAN_TRY(titan_state_read_meta(ck, mc, pr));
    int np = titan_llama_params(mc, NULL);
    titan_param ps[np];
    titan_llama_params(mc, ps);
    TITAN_TRY(load_boxes(ck, ps, np, pc, shard, ""));
    int has;
    TITAN_TRY(titan_state_read_adam_step(ck, ps[0].name, pr, adam, &has));
    if (!has) return TITAN_OK;
    TITAN_TRY(load_boxes(ck, ps, np, pc, titan_adamw_m(adam), ":exp_avg"));
    return load_boxes(ck, ps, np, pc, titan_adamw_v(adam), ":exp_avg_sq");
}

titan_status titan_state_load_shards(const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *pr, char *ckpt_path_out, size_t cap) {
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    if (ckpt_path_out) snprintf(ckpt_path_out, cap, "%s", titan_ckpt_path(ck));
    titan_status st = load_all(ck, mc, pieces, shard, adam, pr);
    titan_ckpt_close(ck);
    return st;
}
