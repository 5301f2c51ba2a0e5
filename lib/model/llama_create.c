/* llama_create.c - the model's buffers (llama.c's three allocations and
 * the activation arena's plan), its tensor- and context-parallel extras,
 * and the accessors the training loop and FSDP use. */
#include "model/llama.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "model/llama_impl.h"
#include "model/rope_freqs.h"
#include "tensor/layout.h"

titan_status titan_llama_create(titan_llama **out, const titan_llama_config *c, const titan_backend *be, int B,
                                int T, titan_ac_mode ac, titan_dtype dt) {
    return titan_llama_create_ex(out, c, be, B, T, ac, dt, NULL);
}

/* What the options ask for, resolved: the groups of more than one rank,
 * the tensor-parallel place, the pipeline stage, the slots. */
typedef struct {
    unsigned flags;
    const titan_group *tp, *cp; /* NULL: none */
    titan_llama_tp tpp;
    titan_llama_pp pp;
    int slots, sp, split, overlap, cp_ring;
} request;

/* The request from opt, checked before anything is allocated. */
static titan_status check_request(const titan_llama_config *c, int B, int T, titan_ac_mode ac, titan_dtype dt,
                                  const titan_llama_options *opt, request *r) {
    r->flags = opt ? opt->flags : 0;
    r->tp = opt && opt->tp && opt->tp->size > 1 ? opt->tp : NULL;
    r->tpp = (titan_llama_tp){r->tp ? r->tp->size : 1, r->tp ? r->tp->rank : 0};
    r->pp = (titan_llama_pp){opt && opt->pp_size > 1 ? opt->pp_size : 1, opt && opt->pp_size > 1 ? opt->pp_stage : 0,
                             0, 0, 0, 0, {0}};
    if (opt && opt->pp_size > 1 && opt->pp_v > 0) {
        r->pp.v = opt->pp_v;
        r->pp.first_less = opt->pp_first_less;
        r->pp.last_less = opt->pp_last_less;
        r->pp.vshape = opt->pp_vshape;
        r->pp.layers = opt->pp_layers;
    }
    r->slots = opt && opt->slots > 1 ? opt->slots : 1;
    r->cp = opt && opt->cp && opt->cp->size > 1 ? opt->cp : NULL;
    r->sp = r->tp && opt->sequence_parallel;
    r->split = opt && opt->split_backward;
    r->overlap = r->tp && opt->async_tensor_parallel;
    r->cp_ring = r->cp && opt->cp_ring;
    if (r->overlap && r->split)
        return titan_error(TITAN_ERR_USAGE, "model: async tensor parallelism with a zero-bubble pipeline schedule "
                           "(its backward split in two): not supported yet");
    if (r->overlap && !r->sp)
        return titan_error(TITAN_ERR_USAGE, "model: async tensor parallelism runs the sequence-parallel collectives as "
                           "collective matmuls: it needs sequence parallelism (parallelism.enable_sequence_parallel = "
                           "true)");
    TITAN_TRY(titan_llama_config_check(c));
    TITAN_TRY(titan_llama_tp_check(c, r->tpp.size));
    TITAN_TRY(titan_llama_pp_check(c, r->pp.size));
    int stage = opt ? opt->pp_stage : 0, cpn = r->cp ? r->cp->size : 1;
    if (stage != r->pp.stage || r->pp.stage < 0 || r->pp.stage >= r->pp.size)
        return titan_error(TITAN_ERR_USAGE, "model: pipeline stage %d of %d", stage, r->pp.size);
    titan_layout split = titan_llama_pp_layout(r->pp);
    TITAN_TRY(titan_layout_check(&split, c->n_layers));
    if (r->slots > 4096) return titan_error(TITAN_ERR_USAGE, "model: %d micro-batch slots (at most 4096)", r->slots);
    if (B <= 0 || T <= 0)
        return titan_error(TITAN_ERR_USAGE, "model: micro-batch %d x %d: both must be > 0", B, T);
    if ((long long)B * T > (1LL << 30) || (long long)B * T * c->vocab_size > (1LL << 40))
        return titan_error(TITAN_ERR_USAGE, "model: micro-batch %d x %d: too many tokens", B, T);
    if (r->cp && T % (2 * cpn) != 0)
        return titan_error(TITAN_ERR_USAGE, "model: context parallelism: a sequence of %d tokens does not split into "
                           "2 x %d equal chunks", T, cpn);
    if (ac < TITAN_AC_OP)
        return titan_error(TITAN_ERR_USAGE, "model: unknown activation checkpoint mode %d", ac);
    if (dt != TITAN_DTYPE_F32 && dt != TITAN_DTYPE_BF16)
        return titan_error(TITAN_ERR_USAGE, "model: compute type %s: only f32 and bf16 are supported",
                           titan_dtype_name(dt));
    return TITAN_OK;
}

/* The model's shapes (this rank's share of them) and its parameter catalog. */
static titan_status set_shapes(titan_llama *m, const titan_llama_config *c, int B, int T, titan_ac_mode ac,
                               titan_dtype dt, const request *r) {
    titan_llama_tp tp = r->tpp;
    titan_llama_pp pp = r->pp;
    int cpn = r->cp ? r->cp->size : 1, slots = r->slots;
    m->cfg = *c;
    m->ac = ac;
    m->dt = dt;
    m->B = B;
    m->T = T / cpn;
    m->N = B * m->T;
    m->sp = r->sp;
    m->overlap = r->overlap;
    m->NR = m->sp ? m->N / tp.size : m->N;
    if (m->sp && m->N % tp.size != 0) {
        return titan_error(TITAN_ERR_USAGE, "model: sequence parallelism: %d x %d tokens do not split over %d ranks",
                           B, m->T, tp.size);
    }
    m->C = c->dim;
    m->tp = r->tp;
    m->tpp = tp;
    m->NH = c->n_heads / tp.size;
    m->NKV = c->n_kv_heads / tp.size;
    m->HD = c->dim / c->n_heads;
    m->QD = m->NH * m->HD;
    m->KVD = m->NKV * m->HD;
    m->H = titan_llama_hidden_dim(c) / tp.size;
    int64_t v0, nv;
    titan_llama_tp_vocab(c, tp, &v0, &nv);
    m->v0 = (int)v0;
    m->V = (int)nv;
    m->L = c->n_layers;
    m->ppp = pp;
    m->nv = titan_llama_pp_local_stages(pp);
    m->vs = titan_alloc((size_t)m->nv * sizeof *m->vs, "model stages");
    if (!m->vs) return TITAN_ERR_NOMEM;
    memset(m->vs, 0, (size_t)m->nv * sizeof *m->vs);
    for (int k = 0; k < m->nv; k++) {
        struct vstage *v = &m->vs[k];
        int g = titan_llama_pp_global_stage(pp, k);
        titan_llama_pp_stage_layers(c, pp, k, &v->l0, &v->l1);
        v->embed = g == 0;
        v->head = g == pp.size * m->nv - 1;
        if (v->l1 - v->l0 > m->LLmax) m->LLmax = v->l1 - v->l0;
        m->any_embed |= v->embed;
        m->any_head |= v->head;
    }
    titan_llama_set_stage(m, 0);
    m->slots = slots;
    m->have_targets = titan_alloc((size_t)slots, "model slot flags");
    m->dlogits_scale = titan_alloc((size_t)slots * sizeof(float), "model slot scales");
    if (!m->have_targets || !m->dlogits_scale) return TITAN_ERR_NOMEM;
    memset(m->have_targets, 0, (size_t)slots);
    memset(m->dlogits_scale, 0, (size_t)slots * sizeof(float));

    m->n_param_tensors = titan_llama_params_local(c, tp, pp, NULL);
    m->catalog = titan_alloc((size_t)m->n_param_tensors * sizeof(titan_param), "model catalog");
    m->copy_current = titan_alloc((size_t)m->n_param_tensors, "model compute copy flags");
    if (!m->catalog || !m->copy_current) return TITAN_ERR_NOMEM;
    titan_llama_params_local(c, tp, pp, m->catalog);
    memset(m->copy_current, 0, (size_t)m->n_param_tensors);
    const titan_param *lastp = &m->catalog[m->n_param_tensors - 1];
    m->nparams = lastp->offset + lastp->numel;
    return TITAN_OK;
}

/* Sizes of the activation table's entries; returns the arena's bytes. */
static size_t plan_activations(titan_llama *m) {
    size_t N = (size_t)m->N, C = (size_t)m->C, QD = (size_t)m->QD, KVD = (size_t)m->KVD;
    size_t H = (size_t)m->H, V = (size_t)m->V;
    size_t *s = m->act_size;
    size_t NR = (size_t)m->NR; /* the residual stream's rows on this rank */
    s[A_RESID] = NR * C;
    s[A_N1] = N * C;
    s[A_RSTD1] = NR;
    s[A_QPRE] = N * QD;
    s[A_Q] = N * QD;
    s[A_K] = N * KVD;
    s[A_V] = N * KVD;
    s[A_ATT] = N * QD;
    s[A_LSE] = N * (size_t)m->NH; /* [B, NH, T] */
    s[A_H] = NR * C;
    s[A_N2] = N * C;
    s[A_RSTD2] = NR;
    s[A_H1] = N * H;
    s[A_H3] = N * H;
    s[A_SW] = N * H;
    size_t head = (size_t)m->any_head; /* the head's activations: last stage only */
    s[A_XF] = head * N * C;
    s[A_RSTDF] = head * NR;
    s[A_LOGITS] = head * N * V;
    s[A_LOSSES] = head * N;
    s[A_LSEV] = m->tp ? head * N : 0;
    s[A_FULL] = m->sp ? N * C : 0;
    s[A_DNORM] = m->sp ? C : 0;
    s[A_DRESID] = NR * C;
    s[A_DN] = N * C;
    s[A_DQ] = N * QD;
    s[A_DK] = N * KVD;
    s[A_DV] = N * KVD;
    s[A_DATT] = N * QD;
    s[A_DKR] = N * KVD;
    s[A_DH1] = N * H;
    s[A_DH3] = N * H;
    s[A_DSW] = N * H;
    s[A_COS] = (size_t)m->T * (size_t)(m->HD / 2);
    s[A_SIN] = (size_t)m->T * (size_t)(m->HD / 2);
    s[A_TOKENS] = m->any_embed ? N : 0; /* uint32 in float-sized slots; with tp, ids in the rank's vocabulary */
    s[A_TARGETS] = head * N;
    size_t total = 0, per_slot = 0;
    for (int i = 0; i < A_COUNT; i++) {
        m->act_bytes[i] = round64(s[i] * (act_is_fp32(i) ? sizeof(float) : titan_dtype_size(m->dt)));
        if (act_per_slot(i)) per_slot += act_copies(m, i) * m->act_bytes[i];
        else total += act_copies(m, i) * m->act_bytes[i];
        total += shared_copies(m, i) * m->act_bytes[i];
    }
    m->slot_stride = per_slot;
    total += (size_t)m->slots * per_slot;
    m->arena_bytes = total;
    return total;
}

/* The split backward's stash (llama_impl.h's WS_*): its entries' sizes and
 * the bytes of a slot's. */
static size_t plan_stash(titan_llama *m) {
    size_t N = (size_t)m->N, C = (size_t)m->C, QD = (size_t)m->QD, KVD = (size_t)m->KVD, H = (size_t)m->H;
    size_t e[WS_COUNT] = {
        [WS_DRES_OUT] = N * C, [WS_DH1] = N * H, [WS_DH3] = N * H, [WS_DRES_MID] = N * C, [WS_DQ] = N * QD,
        [WS_DK] = N * KVD,     [WS_DV] = N * KVD, [WS_N1] = N * C, [WS_ATT] = N * QD,      [WS_N2] = N * C,
        [WS_SW] = N * H,       [WS_EMBED] = m->any_embed ? N * C : 0,
    };
    size_t per_slot = 0;
    for (int i = 0; i < WS_COUNT; i++) m->ws_bytes[i] = round64(e[i] * titan_dtype_size(m->dt));
    for (int j = 0; j < m->LLmax; j++)
        for (int i = 0; i < WS_EMBED; i++) per_slot += ws_has(m->ac, i, j) ? m->ws_bytes[i] : 0;
    return per_slot + m->ws_bytes[WS_EMBED];
}

static titan_status alloc_stash(titan_llama *m) {
    m->wstash_stride = plan_stash(m);
    size_t bytes = (size_t)m->slots * m->wstash_stride;
    m->wstash = m->be->alloc(bytes ? bytes : 1);
    m->w_pending = titan_alloc((size_t)m->slots, "model: split backward flags");
    if (!m->wstash || !m->w_pending)
        return titan_error(TITAN_ERR_NOMEM, "model: cannot allocate %zu bytes of %s memory for the split "
                           "backward's stash (%d slots)", bytes, m->be->name, m->slots);
    memset(m->w_pending, 0, (size_t)m->slots);
    return TITAN_OK;
}

/* Parameters, gradients, the compute copy and the arena, carved. */
static titan_status alloc_buffers(titan_llama *m, unsigned flags, size_t total) {
    const titan_backend *be = m->be;
    titan_dtype dt = m->dt;
    size_t pbytes = m->nparams * sizeof(float);
    size_t lpbytes = dt == TITAN_DTYPE_F32 ? 0 : m->nparams * titan_dtype_size(dt);
    void *(*state_alloc)(size_t) = flags & TITAN_LLAMA_RELEASABLE ? be->alloc_releasable : be->alloc;
    m->params = state_alloc(pbytes);
    m->grads = m->params ? state_alloc(pbytes) : NULL;
    m->params_lp = m->grads && lpbytes ? state_alloc(lpbytes) : NULL;
    m->arena = m->grads && (m->params_lp || !lpbytes) ? be->alloc(total) : NULL;
    if (!m->arena) {
        return titan_error(TITAN_ERR_NOMEM,
                           "model: cannot allocate %zu bytes of %s memory (parameters, gradients, "
                           "%s activations for %d x %d tokens)",
                           2 * pbytes + lpbytes + total, be->name, titan_dtype_name(dt), m->B, m->T);
    }
    /* The scratch and tables first, then slot 0's activations (slot k's
     * k x slot_stride bytes on). */
    char *p = m->arena;
    for (int i = 0; i < A_COUNT; i++) {
        if (!shared_copies(m, i)) continue;
        m->act_shared[i] = p;
        p += m->act_bytes[i];
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < A_COUNT; i++) {
            if (act_per_slot(i) != pass) continue;
            m->act[i] = m->act_base[i] = p;
            p += act_copies(m, i) * m->act_bytes[i];
        }
    return TITAN_OK;
}

/* RoPE's cos and sin tables into the arena. */
static titan_status upload_rope(titan_llama *m, const titan_llama_config *c, int T, const titan_group *cp) {
    const titan_backend *be = m->be;
    int cpn = cp ? cp->size : 1;
    /* RoPE tables for positions 0..T-1 of the whole sequence, built on the host once; under
     * context parallelism the rows of the rank's two chunks (its tokens'
     * positions, in the order it holds them). */
    size_t row = (size_t)(m->HD / 2) * sizeof(float), tb = (size_t)T * row;
    float *cs = malloc(2 * tb);
    if (!cs) return titan_error(TITAN_ERR_NOMEM, "model: rope tables: cannot allocate %zu bytes", 2 * tb);
    float *sn = cs + tb / sizeof(float);
    titan_rope_tables(cs, sn, T, m->HD, c->rope_theta, c->rope_scaling_factor, c->rope_low_freq_factor,
                      c->rope_high_freq_factor, c->rope_original_context);
    int chunk[2] = {0, 0}, len = cp ? m->T / 2 : m->T;
    if (cp) titan_layout_cp_chunks(T, cpn, cp->rank, chunk);
    for (int j = 0; j < (cp ? 2 : 1); j++) {
        be->to_device((char *)m->act[A_COS] + (size_t)j * len * row, (char *)cs + (size_t)chunk[j] * row, len * row);
        be->to_device((char *)m->act[A_SIN] + (size_t)j * len * row, (char *)sn + (size_t)chunk[j] * row, len * row);
    }
    free(cs);
    return TITAN_OK;
}

/* The cp attention's rotate method: the ring's buffers or the all-gather's, never both. */
static titan_attention_cp_method cp_method(const request *r) {
    return r->cp_ring ? TITAN_ATTENTION_CP_RING : TITAN_ATTENTION_CP_ALLGATHER;
}

/* Tensor parallelism's largest collective: an [N, C] activation. */
static size_t tp_reserve_bytes(const titan_llama *m) {
    return (size_t)m->N * (size_t)m->C * titan_dtype_size(m->dt);
}

/* The host copy of the losses, context-parallel attention, tensor
 * parallelism's host buffers and staging. */
static titan_status alloc_extras(titan_llama *m, int B, int T, const request *r) {
    const titan_backend *be = m->be;
    size_t N = (size_t)m->N;
    if (!be->host) {
        m->loss_host = titan_alloc((size_t)N * sizeof(float), "model: host copy of the losses");
        if (!m->loss_host) return TITAN_ERR_NOMEM;
    }
    if (r->cp) {
        TITAN_TRY(titan_attention_cp_create(&m->cpa, r->cp, be, cp_method(r), m->dt, B, T, m->NH, m->NKV, m->HD));
    }
    if (r->tp) {
        m->ids_host = titan_alloc(2 * (size_t)N * sizeof(uint32_t), "model: tensor parallel token ids");
        m->lse_host = titan_alloc((size_t)r->tpp.size * (size_t)N * sizeof(float), "model: tensor parallel log-sum-exps");
        /* the largest collective: an [N, C] activation */
        titan_status st = !m->ids_host || !m->lse_host ? TITAN_ERR_NOMEM
                                                       : r->tp->reserve(r->tp->ctx, tp_reserve_bytes(m));
        if (st != TITAN_OK) return st;
        /* every collective matmul's block is NR rows of the residual stream (collective) */
        if (r->overlap) TITAN_TRY(r->tp->overlap_reserve(r->tp->ctx, (size_t)m->NR * (size_t)m->C * titan_dtype_size(m->dt)));
    }
    return TITAN_OK;
}

titan_status titan_llama_async_tp_refusal(int windows) {
    if (windows) return TITAN_OK;
    titan_error(TITAN_ERR_USAGE, "model: async tensor parallelism needs a tp group whose ranks address each "
                "other's buffers: the shm communicator with host buffers (cpu) or with device buffers the "
                "peers map (cuda); this one's communicator (nccl, mpi) or backend (cpu-guard) has no shared "
                "windows");
    titan_error_hint("with the cuda backend and ranks on one host, TITAN_COMM=shm gives the tp group shared "
                     "windows over CUDA IPC");
    return TITAN_ERR_USAGE;
}

titan_status titan_llama_create_ex(titan_llama **out, const titan_llama_config *c,
                                   const titan_backend *be, int B, int T, titan_ac_mode ac,
                                   titan_dtype dt, const titan_llama_options *opt) {
    *out = NULL;
    request r;
    TITAN_TRY(check_request(c, B, T, ac, dt, opt, &r));
    /* (a memory plan needs the groups' places only: these are checked here) */
    if (r.cp_ring) TITAN_TRY(titan_attention_cp_ring_check(r.cp, be));
    if (r.overlap) TITAN_TRY(titan_llama_async_tp_refusal(r.tp->all_gather_each != NULL));
    titan_llama *m = titan_alloc(sizeof *m, "model");
    if (!m) return TITAN_ERR_NOMEM;
    m->be = be;
    titan_status st = set_shapes(m, c, B, T, ac, dt, &r);
    if (st == TITAN_OK) st = alloc_buffers(m, r.flags, plan_activations(m));
    if (st == TITAN_OK) st = upload_rope(m, c, T, r.cp);
    if (st == TITAN_OK) st = alloc_extras(m, B, T, &r);
    if (st == TITAN_OK && r.split) st = alloc_stash(m);
    if (st != TITAN_OK) {
        titan_llama_free(m);
        return st;
    }
    *out = m;
    return TITAN_OK;
}

titan_status titan_llama_plan_memory(const titan_llama_config *c, int B, int T, titan_ac_mode ac, titan_dtype dt,
                                     const titan_llama_options *opt, int host_backend, titan_llama_memory *out) {
    memset(out, 0, sizeof *out);
    request r;
    TITAN_TRY(check_request(c, B, T, ac, dt, opt, &r));
    titan_llama *m = titan_alloc(sizeof *m, "model plan");
    if (!m) return TITAN_ERR_NOMEM;
    titan_status st = set_shapes(m, c, B, T, ac, dt, &r); /* host tables only: no backend */
    if (st == TITAN_OK) {
        out->arena_bytes = plan_activations(m);
        /* the split backward's stash counts with the activations (alloc_stash) */
        if (r.split) out->arena_bytes += (size_t)m->slots * plan_stash(m);
        out->nparams = m->nparams;
        out->params_bytes = m->nparams * sizeof(float);
        out->compute_copy_bytes = dt == TITAN_DTYPE_F32 ? 0 : m->nparams * titan_dtype_size(dt);
        out->slot_bytes = m->slot_stride;
        out->slots = m->slots;
        out->stage_io_bytes = (size_t)m->NR * (size_t)m->C * titan_dtype_size(dt);
        out->loss_host_bytes = host_backend ? 0 : (size_t)m->N * sizeof(float);
        if (r.cp) { /* the ring's window counts as the tp one below */
            size_t ring_block;
            out->cp_bytes = titan_attention_cp_plan_bytes(cp_method(&r), dt, B, T, m->NH, m->NKV, m->HD, r.cp->size,
                                                          &out->cp_reserve_bytes, &ring_block);
            if (r.cp_ring && !host_backend) out->cp_window_bytes = titan_group_window_bytes(r.cp->size, ring_block);
        }
        if (r.tp) out->tp_reserve_bytes = tp_reserve_bytes(m);
        /* async tp's window: blocks of NR rows; host memory (the shm
         * segment) on a host backend */
        if (r.overlap && !host_backend)
            out->tp_window_bytes =
                titan_group_window_bytes(r.tpp.size, (size_t)m->NR * (size_t)m->C * titan_dtype_size(dt));
    }
    titan_llama_free(m);
    return st;
}

void titan_llama_free(titan_llama *m) {
    if (!m) return;
    if (m->arena) m->be->free(m->arena);
    if (m->wstash) m->be->free(m->wstash);
    titan_free(m->w_pending);
    if (m->params_lp) m->be->free(m->params_lp);
    if (m->grads) m->be->free(m->grads);
    if (m->params) m->be->free(m->params);
    titan_free(m->catalog);
    titan_free(m->vs);
    titan_free(m->copy_current);
    titan_llama_fp8_free(m);
    titan_free(m->have_targets);
    titan_free(m->dlogits_scale);
    titan_free(m->loss_host);
    titan_free(m->ids_host);
    titan_free(m->lse_host);
    titan_attention_cp_free(m->cpa);
    titan_free(m);
}

const titan_llama_config *titan_llama_get_config(const titan_llama *m) { return &m->cfg; }
titan_llama_tp titan_llama_get_tp(const titan_llama *m) { return m->tpp; }
titan_llama_pp titan_llama_get_pp(const titan_llama *m) { return m->ppp; }
int titan_llama_slots(const titan_llama *m) { return m->slots; }
int titan_llama_stages(const titan_llama *m) { return m->nv; }
void titan_llama_set_stage(titan_llama *m, int k) {
    TITAN_ASSERT(k >= 0 && k < m->nv);
    const struct vstage *v = &m->vs[k];
    m->vstage = k;
    m->l0 = v->l0;
    m->l1 = v->l1;
    m->LL = v->l1 - v->l0;
    m->embed = v->embed;
    m->head = v->head;
}
void titan_llama_set_slot(titan_llama *m, int slot) {
    TITAN_ASSERT(slot >= 0 && slot < m->slots);
    m->slot = slot;
    for (int i = 0; i < A_COUNT; i++)
        if (act_per_slot(i)) m->act[i] = (char *)m->act_base[i] + (size_t)slot * m->slot_stride;
}
void *titan_llama_stage_input(titan_llama *m) { return resid(m, m->l0); }
const void *titan_llama_stage_output(const titan_llama *m) { return resid(m, m->l1); }
void *titan_llama_stage_grad(titan_llama *m) { return m->act[A_DRESID]; }
size_t titan_llama_stage_io_count(const titan_llama *m) { return (size_t)m->NR * (size_t)m->C; }
const titan_group *titan_llama_tp_group(const titan_llama *m) { return m->tp; }
const titan_param *titan_llama_catalog(const titan_llama *m, int *n) {
    *n = m->n_param_tensors;
    return m->catalog;
}
double titan_llama_take_comm_s(titan_llama *m) {
    return (m->tp ? m->tp->take_comm_s(m->tp->ctx) : 0.0) + (m->cpa ? titan_attention_cp_take_comm_s(m->cpa) : 0.0);
}
double titan_llama_take_exposed_s(titan_llama *m) {
    return (m->tp ? m->tp->take_exposed_s(m->tp->ctx) : 0.0) +
           (m->cpa ? titan_attention_cp_take_exposed_s(m->cpa) : 0.0);
}
titan_status titan_llama_take_error(titan_llama *m) {
    titan_status st = m->err;
    m->err = TITAN_OK;
    return st;
}
const titan_backend *titan_llama_backend(const titan_llama *m) { return m->be; }
float *titan_llama_params_data(titan_llama *m) { return m->params; }
float *titan_llama_grads_data(titan_llama *m) { return m->grads; }
size_t titan_llama_params_count(const titan_llama *m) { return m->nparams; }
size_t titan_llama_activation_bytes(const titan_llama *m) {
    return m->arena_bytes + (m->cpa ? titan_attention_cp_bytes(m->cpa) : 0);
}
size_t titan_llama_compute_copy_bytes(const titan_llama *m) {
    return m->params_lp ? m->nparams * titan_dtype_size(m->dt) : 0;
}
void *titan_llama_compute_copy(titan_llama *m) { return m->params_lp; }
void titan_llama_set_copy_current(titan_llama *m, size_t off, size_t n, int current) {
    for (int i = 0; i < m->n_param_tensors; i++)
        if (m->catalog[i].offset >= off && m->catalog[i].offset + m->catalog[i].numel <= off + n)
            m->copy_current[i] = (unsigned char)(current && m->params_lp);
}
titan_dtype titan_llama_compute_dtype(const titan_llama *m) { return m->dt; }
static titan_status commit(titan_llama *m, void *p, size_t bytes, const char *what) {
    if (m->be->commit(p, bytes) == 0) return TITAN_OK;
    titan_error_context("model: %s", what);
    return TITAN_ERR_NOMEM;
}

titan_status titan_llama_commit_params(titan_llama *m, size_t off, size_t n) {
    titan_llama_set_copy_current(m, off, n, 0); /* FSDP's gathers write the parameters */
    TITAN_TRY(commit(m, m->params + off, n * sizeof(float), "parameters"));
    size_t e = titan_dtype_size(m->dt);
    return m->params_lp ? commit(m, (char *)m->params_lp + off * e, n * e, "compute copy") : TITAN_OK;
}

titan_status titan_llama_commit_copy(titan_llama *m, size_t off, size_t n) {
    size_t e = titan_dtype_size(m->dt);
    return m->params_lp ? commit(m, (char *)m->params_lp + off * e, n * e, "compute copy") : TITAN_OK;
}

void titan_llama_release_params(titan_llama *m, size_t off, size_t n) {
    titan_llama_set_copy_current(m, off, n, 0);
    m->be->release(m->params + off, n * sizeof(float));
    size_t e = titan_dtype_size(m->dt);
    if (m->params_lp) m->be->release((char *)m->params_lp + off * e, n * e);
}

titan_status titan_llama_commit_grads(titan_llama *m, size_t off, size_t n) {
    return commit(m, m->grads + off, n * sizeof(float), "gradients");
}

void titan_llama_release_grads(titan_llama *m, size_t off, size_t n) {
    m->be->release(m->grads + off, n * sizeof(float));
}
const float *titan_llama_logits(const titan_llama *m) {
    TITAN_ASSERT(m->dt == TITAN_DTYPE_F32 && m->head); /* others: titan_llama_logits_host */
    return m->act[A_LOGITS];
}

titan_status titan_llama_logits_host(const titan_llama *m, float *dst) {
    TITAN_ASSERT(m->head);
    size_t n = (size_t)m->N * (size_t)m->V;
    if (m->dt == TITAN_DTYPE_F32) {
        m->be->to_host(dst, m->act[A_LOGITS], n * sizeof(float));
        return TITAN_OK;
    }
    size_t esz = titan_dtype_size(m->dt);
    void *tmp = titan_alloc(n * esz, "model: host copy of the logits");
    if (!tmp) return TITAN_ERR_NOMEM;
    m->be->to_host(tmp, m->act[A_LOGITS], n * esz);
    titan_dtype_convert(dst, TITAN_DTYPE_F32, tmp, m->dt, n);
    titan_free(tmp);
    return TITAN_OK;
}

void titan_llama_set_hooks(titan_llama *m, const titan_llama_hooks *h) {
    if (h) m->hooks = *h;
    else memset(&m->hooks, 0, sizeof m->hooks);
}
int titan_llama_blocks(const titan_llama *m) { return m->L + 2; }

void titan_llama_zero_grads(titan_llama *m) {
    for (int k = 0; k < m->nv; k++) m->vs[k].grads_fresh = m->vs[k].norms_fresh = 1;
}
size_t titan_llama_stash_bytes(const titan_llama *m) { return m->wstash ? (size_t)m->slots * m->wstash_stride : 0; }

