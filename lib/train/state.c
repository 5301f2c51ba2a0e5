/* state.c - the training state in a checkpoint. */
#include "train/state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "interchange/ckpt_tokenizer.h"
#include "model/llama_ckpt.h"
#include "core/log.h"
#include "core/mem.h"


unsigned titan_state_parts_parse(const char *list) {
    static const char *const names[] = {"model", "optimizer", "lr_scheduler", "dataloader", "train_state"};
    unsigned parts = 0;
    for (const char *c = list; *c;) {
        size_t len = strcspn(c, ",");
        for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i]) == len && !strncmp(c, names[i], len)) parts |= 1u << i;
        c += len + (c[len] == ',');
    }
    return parts;
}

const void *titan_state_cast(const float *src, size_t n, titan_dtype dtype, void **tmp) {
    *tmp = NULL;
    if (dtype == TITAN_DTYPE_F32) return src;
    *tmp = malloc(n ? n * titan_dtype_size(dtype) : 1);
    if (!*tmp) return NULL;
    titan_dtype_convert(*tmp, dtype, src, TITAN_DTYPE_F32, n);
    return *tmp;
}

/* moff (NULL: the parameters' own offsets): where each tensor starts in base. */
static titan_status save_tensors(titan_ckpt_writer *w, const titan_param *ps, int np,
                                 const float *base, const char *suffix, titan_dtype dtype,
                                 const unsigned char *mask, const size_t *moff) {
    for (int i = 0; i < np; i++) {
        if (mask && !mask[i]) continue;
        char name[128];
        void *tmp;
        snprintf(name, sizeof name, "%s%s", ps[i].name, suffix);
        const float *src = base + (moff ? moff[i] : ps[i].offset);
        const void *data = titan_state_cast(src, (size_t)ps[i].numel, dtype, &tmp);
        titan_status st = data ? titan_ckpt_add(w, name, dtype, ps[i].ndim, ps[i].shape, NULL, data)
                               : titan_error(TITAN_ERR_NOMEM, "%s as %s: out of memory", name, titan_dtype_name(dtype));
        free(tmp);
        TITAN_TRY(st);
    }
    return TITAN_OK;
}

/* The schedule's inputs under their config keys' names. */
static titan_status write_lr(titan_ckpt_writer *w, const titan_lr_inputs *lr) {
    TITAN_TRY(titan_ckpt_meta_f64(w, "optimizer.lr", lr->lr));
    TITAN_TRY(titan_ckpt_meta_i64(w, "training.steps", lr->training_steps));
    TITAN_TRY(titan_ckpt_meta_i64(w, "lr_scheduler.total_steps", lr->total_steps));
    TITAN_TRY(titan_ckpt_meta_i64(w, "lr_scheduler.warmup_steps", lr->warmup_steps));
    TITAN_TRY(titan_ckpt_meta_f64(w, "lr_scheduler.decay_ratio", lr->decay_ratio));
    TITAN_TRY(titan_ckpt_meta_str(w, "lr_scheduler.decay_type", titan_lr_decay_name(lr->decay)));
    return titan_ckpt_meta_f64(w, "lr_scheduler.min_lr_factor", lr->min_lr_factor);
}

/* Checkpoints older than these keys (and seed checkpoints) lack them: lr->set stays 0. */
static titan_status read_lr(titan_ckpt *ck, titan_lr_inputs *lr) {
    memset(lr, 0, sizeof *lr);
    if (titan_ckpt_meta_get_i64(ck, "training.steps", &lr->training_steps) != TITAN_OK) {
        titan_error_clear();
        return TITAN_OK;
    }
    const char *decay;
    titan_status st = titan_ckpt_meta_get_f64(ck, "optimizer.lr", &lr->lr);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_i64(ck, "lr_scheduler.total_steps", &lr->total_steps);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_i64(ck, "lr_scheduler.warmup_steps", &lr->warmup_steps);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_f64(ck, "lr_scheduler.decay_ratio", &lr->decay_ratio);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_f64(ck, "lr_scheduler.min_lr_factor", &lr->min_lr_factor);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_str(ck, "lr_scheduler.decay_type", &decay);
    if (st == TITAN_OK && titan_lr_decay_parse(decay, &lr->decay) != TITAN_OK)
        st = titan_error(TITAN_ERR_FORMAT, "%s: lr_scheduler.decay_type \"%s\" is not linear, sqrt or cosine",
                         titan_ckpt_path(ck), decay);
    lr->set = st == TITAN_OK;
    return st;
}

/* The batch shape under the config keys' names where there is one
 * (training.global_batch_size: the sequences each step took, never -1). */
static titan_status write_batch(titan_ckpt_writer *w, const titan_batch_shape *b) {
    TITAN_TRY(titan_ckpt_meta_i64(w, "training.local_batch_size", b->local_batch_size));
    TITAN_TRY(titan_ckpt_meta_i64(w, "training.seq_len", b->seq_len));
    TITAN_TRY(titan_ckpt_meta_i64(w, "train.accum_steps", b->accum_steps));
    TITAN_TRY(titan_ckpt_meta_i64(w, "training.global_batch_size", b->global_batch_size));
    if (b->pp_schedule[0]) TITAN_TRY(titan_ckpt_meta_str(w, "parallelism.pipeline_parallel_schedule", b->pp_schedule));
    if (b->val_sequences <= 0) return TITAN_OK;
    TITAN_TRY(titan_ckpt_meta_i64(w, "validation.sequences", b->val_sequences));
    return titan_ckpt_meta_i64(w, "validation.steps", b->val_steps);
}

/* Checkpoints older than these keys (and seed checkpoints) lack them:
 * b->set stays 0. The layout, where it is recorded, into layout. */
static titan_status read_batch(titan_ckpt *ck, titan_batch_shape *b, char *layout, size_t cap) {
    const char *s;
    memset(b, 0, sizeof *b);
    layout[0] = '\0';
    if (titan_ckpt_meta_get_str(ck, "layout", &s) == TITAN_OK) snprintf(layout, cap, "%s", s);
    titan_error_clear();
    if (titan_ckpt_meta_get_i64(ck, "training.global_batch_size", &b->global_batch_size) != TITAN_OK) {
        titan_error_clear();
        return TITAN_OK;
    }
    titan_status st = titan_ckpt_meta_get_i64(ck, "training.local_batch_size", &b->local_batch_size);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_i64(ck, "training.seq_len", &b->seq_len);
    if (st == TITAN_OK) st = titan_ckpt_meta_get_i64(ck, "train.accum_steps", &b->accum_steps);
    if (st != TITAN_OK) return st;
    /* Sizes from a file: bounded before any product of them is taken. */
    if (b->local_batch_size < 1 || b->local_batch_size > INT32_MAX || b->seq_len < 1 || b->seq_len > INT32_MAX ||
        b->accum_steps < 1 || b->accum_steps > INT32_MAX || b->global_batch_size < 1 ||
        b->global_batch_size > INT32_MAX || b->global_batch_size % (b->local_batch_size * b->accum_steps) != 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: training.global_batch_size %" PRId64 " is not a multiple of "
                           "training.local_batch_size %" PRId64 " x train.accum_steps %" PRId64, titan_ckpt_path(ck),
                           b->global_batch_size, b->local_batch_size, b->accum_steps);
    /* Optional: a pipeline's schedule, a validation's size */
    if (titan_ckpt_meta_get_str(ck, "parallelism.pipeline_parallel_schedule", &s) == TITAN_OK)
        snprintf(b->pp_schedule, sizeof b->pp_schedule, "%s", s);
    titan_error_clear();
    if (titan_ckpt_meta_get_i64(ck, "validation.sequences", &b->val_sequences) == TITAN_OK)
        TITAN_TRY(titan_ckpt_meta_get_i64(ck, "validation.steps", &b->val_steps));
    else
        b->val_sequences = 0;
    titan_error_clear();
    b->set = 1;
    return TITAN_OK;
}

titan_status titan_state_write_meta(titan_ckpt_writer *w, const titan_llama_config *mc,
                                    const titan_train_progress *pr, const titan_tokenizer *tokenizer,
                                    const char *layout) {
    titan_status st = TITAN_OK;
#define PUT_I(f) if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "model." #f, mc->f);
#define PUT_F(f) if (st == TITAN_OK) st = titan_ckpt_meta_f64(w, "model." #f, mc->f);
    TITAN_LLAMA_INT_FIELDS(PUT_I)
    TITAN_LLAMA_FLT_FIELDS(PUT_F)
    if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "model.name", "llama3");
    if (st == TITAN_OK) st = titan_ckpt_put_tokenizer(w, tokenizer);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "train.step", pr->step);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "train.tokens_seen", (int64_t)pr->tokens_seen);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "loader.position", (int64_t)pr->loader.position);
    if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "layout", layout);
    if (st == TITAN_OK && pr->lr.set) st = write_lr(w, &pr->lr);
    if (st == TITAN_OK && pr->lr_origin) st = titan_ckpt_meta_i64(w, "train.lr_origin", pr->lr_origin);
    if (st == TITAN_OK && pr->batch.set) st = write_batch(w, &pr->batch);
    return st;
}

titan_status titan_state_write_meta_model_only(titan_ckpt_writer *w, const titan_llama_config *mc,
                                               const titan_train_progress *pr, const titan_tokenizer *tokenizer,
                                               const char *layout, titan_dtype dtype) {
    titan_status st = TITAN_OK;
    TITAN_LLAMA_INT_FIELDS(PUT_I)
    TITAN_LLAMA_FLT_FIELDS(PUT_F)
    if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "model.name", "llama3");
    if (st == TITAN_OK) st = titan_ckpt_put_tokenizer(w, tokenizer);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "train.step", pr->step);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "train.tokens_seen", (int64_t)pr->tokens_seen);
    if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "layout", layout);
    if (st == TITAN_OK) st = titan_ckpt_meta_i64(w, "checkpoint.model_only", 1);
    if (st == TITAN_OK) st = titan_ckpt_meta_str(w, "checkpoint.dtype", titan_dtype_name(dtype));
    return st;
}

titan_status titan_state_save_view(const char *root, const titan_llama_config *mc, const titan_state_view *v,
                                   const titan_train_progress *pr, const titan_tokenizer *tokenizer,
                                   int keep_latest_k) {
    int np;
    titan_param *ps = titan_llama_params_new(mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    titan_ckpt_writer *w = NULL;
    titan_status st = titan_ckpt_begin(&w, root, pr->step);
    if (st != TITAN_OK) {
        free(ps);
        return st;
    }
    titan_dtype dt = v->model_only ? v->dtype : TITAN_DTYPE_F32;
    st = v->model_only ? titan_state_write_meta_model_only(w, mc, pr, tokenizer, "single", dt)
                       : titan_state_write_meta(w, mc, pr, tokenizer, "single");
    if (st == TITAN_OK) st = save_tensors(w, ps, np, v->params, "", dt, NULL, NULL);
    if (st == TITAN_OK && v->exp_avg && !v->model_only) {
        st = titan_ckpt_meta_i64(w, "optim.adamw.step", v->adam_step);
        if (st == TITAN_OK) st = save_tensors(w, ps, np, v->exp_avg, ":exp_avg", dt, v->flat_mask, v->moment_off);
        if (st == TITAN_OK) st = save_tensors(w, ps, np, v->exp_avg_sq, ":exp_avg_sq", dt, v->flat_mask, v->moment_off);
        for (int a = 0; a < v->n_aux && st == TITAN_OK; a++)
            st = titan_ckpt_add(w, v->aux[a].name, TITAN_DTYPE_F32, 2, v->aux[a].shape, NULL, v->aux_data + v->aux[a].off);
    }
    free(ps);
    if (st == TITAN_OK) return titan_ckpt_commit(w, keep_latest_k);
    titan_ckpt_abort(w);
    return st;
}

titan_status titan_state_save(const char *root, const titan_llama_config *mc, const float *params,
                              titan_adamw *adam, const titan_train_progress *pr,
                              const titan_tokenizer *tokenizer, int keep_latest_k) {
    titan_state_view v = {.params = params};
    if (adam) {
        v.exp_avg = titan_adamw_m(adam);
        v.exp_avg_sq = titan_adamw_v(adam);
        v.adam_step = titan_adamw_get_step(adam);
    }
    return titan_state_save_view(root, mc, &v, pr, tokenizer, keep_latest_k);
}

static titan_status check_model(titan_ckpt *ck, const titan_llama_config *mc) {
    int64_t iv;
    double fv;
#define CHK_I(f) \
    TITAN_TRY(titan_ckpt_meta_get_i64(ck, "model." #f, &iv)); \
    if (iv != mc->f) \
        return titan_error(TITAN_ERR_USAGE, "%s: model." #f " is %" PRId64 " in the checkpoint but %d in the config", \
                           titan_ckpt_path(ck), iv, mc->f);
#define CHK_F(f) \
    TITAN_TRY(titan_ckpt_meta_get_f64(ck, "model." #f, &fv)); \
    if ((float)fv != mc->f) \
        return titan_error(TITAN_ERR_USAGE, "%s: model." #f " is %g in the checkpoint but %g in the config", \
                           titan_ckpt_path(ck), fv, (double)mc->f);
    TITAN_LLAMA_INT_FIELDS(CHK_I)
    TITAN_LLAMA_FLT_FIELDS(CHK_F)
    return TITAN_OK;
}

static titan_status load_tensors(titan_ckpt *ck, const titan_param *ps, int np, float *base,
                                 const char *suffix) {
    for (int i = 0; i < np; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", ps[i].name, suffix);
        TITAN_TRY(titan_ckpt_read(ck, name, TITAN_DTYPE_F32, NULL, base + ps[i].offset));
    }
    return TITAN_OK;
}

titan_status titan_state_read_meta(titan_ckpt *ck, const titan_llama_config *mc, titan_train_progress *pr) {
    TITAN_TRY(check_model(ck, mc));
    TITAN_TRY(titan_llama_ckpt_check(ck, mc)); /* the tensors are the model's: reads fill buffers of its shapes */
    int64_t v;
    memset(pr, 0, sizeof *pr);
    TITAN_TRY(titan_ckpt_meta_get_i64(ck, "train.step", &v));
    pr->step = v;
    TITAN_TRY(titan_ckpt_meta_get_i64(ck, "train.tokens_seen", &v));
    pr->tokens_seen = (uint64_t)v;
    if (titan_ckpt_meta_has(ck, "checkpoint.model_only")) { /* the parameters alone */
        TITAN_TRY(titan_ckpt_meta_get_i64(ck, "checkpoint.model_only", &v));
        pr->model_only = v != 0;
    }
    if (pr->model_only) {
        const char *s;
        if (titan_ckpt_meta_get_str(ck, "layout", &s) == TITAN_OK) snprintf(pr->layout, sizeof pr->layout, "%s", s);
        titan_error_clear();
        return TITAN_OK;
    }
    TITAN_TRY(titan_ckpt_meta_get_i64(ck, "loader.position", &v));
    if (v < 0) return titan_error(TITAN_ERR_FORMAT, "%s: loader.position %" PRId64 " is negative", titan_ckpt_path(ck), v);
    pr->loader.position = (uint64_t)v;
    if (titan_ckpt_meta_has(ck, "train.lr_origin")) TITAN_TRY(titan_ckpt_meta_get_i64(ck, "train.lr_origin", &pr->lr_origin));
    TITAN_TRY(read_batch(ck, &pr->batch, pr->layout, sizeof pr->layout));
    return read_lr(ck, &pr->lr);
}

titan_status titan_state_read_adam_step(titan_ckpt *ck, const char *first_param,
                                        const titan_train_progress *pr, titan_adamw *adam, int *has) {
    char first[128];
    snprintf(first, sizeof first, "%s:exp_avg", first_param);
    *has = titan_ckpt_has_tensor(ck, first);
    if (!*has) {
        if (pr->step != 0 && !pr->model_only) /* a model-only one: the caller decides */
            return titan_error(TITAN_ERR_FORMAT, "%s: step %" PRId64 " has no optimizer state (%s)",
                               titan_ckpt_path(ck), pr->step, first);
        titan_adamw_set_step(adam, 0); /* seed checkpoint: fresh moments */
        return TITAN_OK;
    }
    int64_t v;
    TITAN_TRY(titan_ckpt_meta_get_i64(ck, "optim.adamw.step", &v));
    titan_adamw_set_step(adam, v);
    return TITAN_OK;
}

static titan_status load_all(titan_ckpt *ck, const titan_llama_config *mc, float *params,
                             titan_adamw *adam, titan_train_progress *pr) {
    TITAN_TRY(titan_state_read_meta(ck, mc, pr));
    int np, has = 0;
    titan_param *ps = titan_llama_params_new(mc, &np);
    if (!ps) return TITAN_ERR_NOMEM;
    titan_status st = load_tensors(ck, ps, np, params, "");
    if (st == TITAN_OK && adam) st = titan_state_read_adam_step(ck, ps[0].name, pr, adam, &has);
    if (st == TITAN_OK && has) st = load_tensors(ck, ps, np, titan_adamw_m(adam), ":exp_avg");
    if (st == TITAN_OK && has) st = load_tensors(ck, ps, np, titan_adamw_v(adam), ":exp_avg_sq");
    free(ps);
    return st;
}

titan_status titan_state_load(const char *path, const titan_llama_config *mc, float *params,
                              titan_adamw *adam, titan_train_progress *pr, char *ckpt_path_out, size_t cap) {
    titan_ckpt *ck = NULL;
    TITAN_TRY(titan_ckpt_open(&ck, path));
    if (ckpt_path_out) snprintf(ckpt_path_out, cap, "%s", titan_ckpt_path(ck));
    titan_status st = load_all(ck, mc, params, adam, pr);
    titan_ckpt_close(ck);
    return st;
}

void titan_state_view_optim(titan_state_view *v, titan_optim *o) {
    v->flat_mask = titan_optim_flat_mask(o);
    v->moment_off = titan_optim_moment_offsets(o);
    v->moment_numel = v->moment_off ? titan_optim_moment_numel(o) : 0;
    v->aux = titan_optim_aux_tensors(o, &v->n_aux);
    v->aux_data = titan_optim_aux(o);
}

titan_status titan_state_aux_to_host(const titan_backend *be, const titan_state_view *v, float **buf, size_t *cap,
                                     const char *what, const float **out) {
    size_t numel = 0;
    for (int a = 0; a < v->n_aux; a++) {
        size_t end = v->aux[a].off + (size_t)(v->aux[a].rows * v->aux[a].shape[1]);
        if (end > numel) numel = end;
    }
    *out = NULL;
    if (!numel) return TITAN_OK;
    if (numel > *cap) {
        titan_free(*buf);
        *cap = 0;
        if (!(*buf = titan_alloc(numel * sizeof(float), what))) return TITAN_ERR_NOMEM;
        *cap = numel;
    }
    be->to_host(*buf, v->aux_data, numel * sizeof(float));
    *out = *buf;
    return TITAN_OK;
}

titan_status titan_state_load_aux(titan_ckpt *ck, titan_optim *o) {
    int n;
    const titan_optim_tensor *t = titan_optim_aux_tensors(o, &n);
    for (int a = 0; a < n; a++) {
        titan_ckpt_tensor info = {0};
        int found = 0, nt = titan_ckpt_num_tensors(ck);
        for (int i = 0; i < nt && !found; i++)
            found = titan_ckpt_tensor_info(ck, i, &info) == TITAN_OK && !strcmp(info.name, t[a].name);
        if (!found) {
            titan_error(TITAN_ERR_USAGE, "%s: tensor %s (GaLore state) is not in the checkpoint", titan_ckpt_path(ck),
                        t[a].name);
            titan_error_hint("GaLore resumes from GaLore checkpoints of the same optimizer.rank and proj_type");
            return TITAN_ERR_USAGE;
        }
        if (info.ndim != 2 || info.shape[0] != t[a].shape[0] || info.shape[1] != t[a].shape[1]) {
            titan_error(TITAN_ERR_USAGE, "%s: tensor %s is [%lld x %lld] in the checkpoint, but this optimizer "
                        "(optimizer.rank, proj_type) keeps it as [%lld x %lld]", titan_ckpt_path(ck), t[a].name,
                        (long long)info.shape[0], (long long)(info.ndim > 1 ? info.shape[1] : 0),
                        (long long)t[a].shape[0], (long long)t[a].shape[1]);
            return TITAN_ERR_USAGE;
        }
        titan_box rows = {.ndim = 2, .offset = {t[a].row0, 0}, .size = {t[a].rows, t[a].shape[1]}};
        if (t[a].sharded && !t[a].rows) continue;
        TITAN_TRY(titan_ckpt_read(ck, t[a].name, TITAN_DTYPE_F32, t[a].sharded ? &rows : NULL,
                                  titan_optim_aux(o) + t[a].off));
    }
    return TITAN_OK;
}
