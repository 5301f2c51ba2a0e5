/* pipeline.c - pipeline schedules over the stages of a mesh's pp group. */
#include "parallel/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"

/* Where a local stage's input comes from and its output goes, and its
 * gradients the other way: pp ranks (prev, next; -1: none, the first or
 * the last stage; the rank itself: a hand-over between its own stages)
 * and their communicators, one a direction and a stream of stages. */
typedef struct {
    titan_comm *fwd_in, *fwd_out, *bwd_in, *bwd_out;
    int prev, next;
} stage_link;

struct titan_pipeline {
    titan_llama *model;
    const titan_backend *be;
    stage_link *link;            /* per local stage */
    titan_pp_schedule sched;
    int rank, pp, v, vshape, stages, micro, slots;
    /* The V placement's hand-over on rank pp - 1 (stage pp - 1 to stage pp,
     * both its own): the gradients of stage pp's input waiting for stage
     * pp - 1's backward, micro-batch mb's in buffer mb mod nhand. */
    void *hand;
    int nhand;
    int *slot0, *nslot;          /* per local stage: its first slot, its slots */
    titan_pp_action *acts;       /* the schedule: titan_pp_schedule_count actions */
    int nacts;
    int B, T;
    titan_dtype dt;
    size_t count, bytes;         /* a transfer: count elements of dt */
    /* Host copies for communicators that move host memory only (NULL when
     * the transfers take backend memory): a slot's output each, the input,
     * the incoming gradient, a slot's outgoing gradient each. */
    char *out_host, *in_host, *gin_host, *gout_host;
    /* Outgoing input gradients, a slot's each (backend memory; NULL with
     * the host copies): the model's gradient buffer takes the next
     * backward's incoming gradient at once, so a send may wait for its
     * receiver as long as the schedule needs (the interleaved schedules'
     * sends of one rank can wait for actions that rank still has to do). */
    void *gout;
    titan_comm_req **out_req;    /* per slot: the queued send of its output */
    titan_comm_req **gout_req;   /* per slot: the queued send of its input gradient */
    double wait_s, wait_cpu_s; /* wall and CPU time in transfers' waits */
    /* The last step's spans of its actions (titan_pipeline_last_step) and
     * the sums over the steps so far: wall time, time computing. */
    titan_pp_span *spans;
    double step_t0, sum_step_s, sum_busy_s;
    int steps, calls;
};

int titan_pipeline_slots(titan_pp_schedule s, int pp, int rank, int v, int micro) {
    return titan_pp_schedule_slots_total(s, pp, rank, v, micro);
}

/* The parts of module_fqns_per_model_part against pp and
 * pipeline_parallel_layers_per_stage (per > 0: the stages it makes,
 * ceil(eff / per), must be the parts'). */
static titan_status fqn_stages(const titan_stage_layers *sl, int pp, int per, int eff) {
    if (sl->n % pp != 0) {
        titan_error(TITAN_ERR_USAGE, "parallelism.module_fqns_per_model_part: %d parts for pipeline_parallel_degree %d: "
                    "a rank holds parts / pipeline_parallel_degree stages", sl->n, pp);
        titan_error_hint("give a multiple of %d parts", pp);
        return TITAN_ERR_USAGE;
    }
    if (per > 0 && (eff + per - 1) / per != sl->n) {
        titan_error(TITAN_ERR_USAGE, "parallelism.module_fqns_per_model_part has %d parts, "
                    "pipeline_parallel_layers_per_stage = %d makes %d stages", sl->n, per, (eff + per - 1) / per);
        titan_error_hint("leave pipeline_parallel_layers_per_stage at -1 (the parts make the stages)");
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

/* A schedule's refusal of the parts' stages a rank, said in their terms. */
static titan_status fqn_context(const titan_stage_layers *sl, int pp) {
    titan_error_context("parallelism.module_fqns_per_model_part: %d parts over pipeline_parallel_degree %d make %d "
                        "stages a rank", sl->n, pp, sl->n / pp);
    return TITAN_ERR_USAGE;
}

titan_status titan_pipeline_split(const titan_job_config *cfg, titan_pp_schedule s, int n_layers, int micro,
                                  titan_layout *l) {
    int pp = l->pp, in = cfg->parallelism_pipeline_parallel_first_stage_less_layers;
    int out = cfg->parallelism_pipeline_parallel_last_stage_less_layers;
    int per = cfg->parallelism_pipeline_parallel_layers_per_stage, v = titan_pp_schedule_multi(s) ? 2 : 1;
    titan_stage_layers by_name = {0};
    if (cfg->parallelism_module_fqns_per_model_part[0]) {
        TITAN_TRY(titan_pipeline_fqn_split(cfg->parallelism_module_fqns_per_model_part, n_layers, &by_name));
        TITAN_TRY(fqn_stages(&by_name, pp, per, n_layers + in + out));
        v = by_name.n / pp;
        per = 0; /* the parts make the stages */
        TITAN_TRY(titan_pp_schedule_check(s, pp, v, micro) == TITAN_OK ? TITAN_OK : fqn_context(&by_name, pp));
    }
    if (per > 0) {
        int stages = (n_layers + in + out + per - 1) / per;
        if (stages % pp != 0) {
            titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_layers_per_stage = %d: %d layers + %d + %d "
                        "(pipeline_parallel_first/last_stage_less_layers) make %d stages, not a multiple of "
                        "pipeline_parallel_degree %d", per, n_layers, in, out, stages, pp);
            titan_error_hint("pick layers_per_stage so that ceil(%d / it) is a multiple of %d", n_layers + in + out, pp);
            return TITAN_ERR_USAGE;
        }
        v = stages / pp;
    }
    TITAN_TRY(titan_pp_schedule_check(s, pp, v, micro));
    if (v != 1 || in != 1 || out != 1 || by_name.n) { /* else the default split (pp_v 0) */
        l->pp_v = v;
        l->pp_first_less = in;
        l->pp_last_less = out;
        l->pp_vshape = titan_pp_schedule_vshape(s);
        l->pp_layers = by_name;
    }
    titan_status st = titan_layout_check(l, n_layers);
    if (st != TITAN_OK)
        titan_error_context("parallelism: pipeline_parallel_degree %d x %d stages a rank, "
                            "pipeline_parallel_first_stage_less_layers %d, pipeline_parallel_last_stage_less_layers %d",
                            pp, v, in, out);
    return st;
}

/* Every rank's list checked as a whole before the first step (each rank
 * computes them all: a few actions each): a micro-batch left undone or a
 * deadlock is an error here rather than a hang. */
static titan_status verify_all(const titan_pipeline *p) {
    int cap = titan_pp_schedule_count(p->sched, p->v, p->micro);
    titan_pp_action *all = titan_alloc((size_t)p->pp * cap * sizeof *all, "pipeline schedule check");
    titan_pp_action **lists = titan_alloc((size_t)p->pp * sizeof *lists, "pipeline schedule check");
    int *n = titan_alloc((size_t)p->pp * sizeof *n, "pipeline schedule check");
    titan_status st = all && lists && n ? TITAN_OK : TITAN_ERR_NOMEM;
    for (int r = 0; r < p->pp && st == TITAN_OK; r++) {
        lists[r] = all + (size_t)r * cap;
        n[r] = titan_pp_schedule_actions(p->sched, p->pp, r, p->v, p->micro, lists[r]);
    }
    if (st == TITAN_OK) st = titan_pp_schedule_verify(p->pp, p->v, p->vshape, p->micro, lists, n, NULL);
    if (st == TITAN_ERR_USAGE)
        titan_error_context("parallelism.pipeline_parallel_schedule = \"%s\"", titan_pp_schedule_name(p->sched));
    titan_free(all);
    titan_free(lists);
    titan_free(n);
    return st;
}

/* Local stage k's neighbours and communicators. Looped: every stage's
 * input from rank r - 1 and output to r + 1 on pp (gradients back on
 * pp_grad), the wrap communicators between the last rank and the first.
 * V: stage r's as the looped first loop's (its output to itself on rank
 * pp - 1); stage 2 pp - 1 - r's the other way, input from rank r + 1 (or
 * itself) and output to r - 1, on the wrap communicators: each
 * communicator carries one stream of stages one way. */
static void link_stages(titan_pipeline *p, const titan_mesh *mesh) {
    int r = p->rank, pp = p->pp;
    for (int k = 0; k < p->v; k++) {
        stage_link *l = &p->link[k];
        int g = titan_pp_global_stage(p->vshape, pp, r, k);
        l->prev = g == 0 ? -1 : titan_pp_stage_rank(p->vshape, pp, g - 1);
        l->next = g == p->stages - 1 ? -1 : titan_pp_stage_rank(p->vshape, pp, g + 1);
        if (p->vshape) {
            int up = k == 1; /* activations toward rank 0 */
            l->fwd_in = l->fwd_out = up ? mesh->pp_wrap_comm : mesh->pp_comm;
            l->bwd_in = l->bwd_out = up ? mesh->pp_grad_wrap_comm : mesh->pp_grad_comm;
            continue;
        }
        l->fwd_in = r == 0 ? mesh->pp_wrap_comm : mesh->pp_comm;
        l->fwd_out = r == pp - 1 ? mesh->pp_wrap_comm : mesh->pp_comm;
        l->bwd_in = r == pp - 1 ? mesh->pp_grad_wrap_comm : mesh->pp_grad_comm;
        l->bwd_out = r == 0 ? mesh->pp_grad_wrap_comm : mesh->pp_grad_comm;
    }
}

int titan_pipeline_hand_over(titan_pp_schedule s, int pp, int rank, int v, int micro) {
    if (!titan_pp_schedule_vshape(s) || rank != pp - 1) return 0;
    titan_pp_action *a = malloc((size_t)titan_pp_schedule_count(s, v, micro) * sizeof *a);
    TITAN_ASSERT(a);
    int n = titan_pp_schedule_actions(s, pp, rank, v, micro, a), most = 0, now = 0;
    for (int i = 0; i < n; i++) { /* stage pp's backwards (local 1) in, stage pp - 1's (local 0) out */
        if (a[i].op != TITAN_PP_B && a[i].op != TITAN_PP_I) continue;
        now += a[i].stage == 1 ? 1 : -1;
        if (now > most) most = now;
    }
    free(a);
    return most;
}

/* The hand-over's buffers (the V's rank pp - 1): as many as micro-batches
 * ever wait between stage pp's backward (B or I) and stage pp - 1's; both
 * run in micro-batch order, so mb mod that many is free. */
static titan_status plan_hand_over(titan_pipeline *p) {
    int most = titan_pipeline_hand_over(p->sched, p->pp, p->rank, p->v, p->micro);
    if (most == 0) return TITAN_OK;
    TITAN_ASSERT(p->link[1].prev == p->rank && p->link[0].next == p->rank);
    p->nhand = most;
    p->hand = p->be->alloc((size_t)most * p->bytes);
    return p->hand ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "pipeline: %d hand-over gradients of %zu bytes", most,
                                            p->bytes);
}

/* The schedule's actions and each local stage's slots. */
static titan_status plan(titan_pipeline *p) {
    p->acts = titan_alloc((size_t)titan_pp_schedule_count(p->sched, p->v, p->micro) * sizeof *p->acts,
                          "pipeline schedule");
    p->spans = titan_alloc((size_t)titan_pp_schedule_count(p->sched, p->v, p->micro) * sizeof *p->spans,
                           "pipeline spans");
    if (!p->spans) return TITAN_ERR_NOMEM;
    p->slot0 = titan_alloc((size_t)2 * p->v * sizeof *p->slot0, "pipeline slots");
    if (!p->acts || !p->slot0) return TITAN_ERR_NOMEM;
    p->nslot = p->slot0 + p->v;
    p->nacts = titan_pp_schedule_actions(p->sched, p->pp, p->rank, p->v, p->micro, p->acts);
    TITAN_TRY(verify_all(p));
    int sum = 0;
    for (int k = 0; k < p->v; k++) {
        p->slot0[k] = sum;
        p->nslot[k] = titan_pp_schedule_slots(p->sched, p->pp, p->rank, p->v, p->micro, k);
        sum += p->nslot[k];
    }
    TITAN_ASSERT(p->slots >= sum);
    return plan_hand_over(p);
}

titan_status titan_pipeline_create(titan_pipeline **out, titan_mesh *mesh, titan_llama *model,
                                   titan_pp_schedule sched, int micro, int B, int T) {
    *out = NULL;
    titan_llama_pp pp = titan_llama_get_pp(model);
    int v = titan_llama_stages(model);
    TITAN_ASSERT(pp.size == mesh->layout.pp && pp.stage == mesh->pp_rank && mesh->pp_comm);
    TITAN_ASSERT(v == 1 || (mesh->pp_wrap_comm && mesh->pp_grad_wrap_comm));
    titan_pipeline *p = titan_alloc(sizeof *p, "pipeline");
    if (!p) return TITAN_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->model = model;
    p->be = titan_llama_backend(model);
    p->sched = sched;
    p->rank = pp.stage;
    p->pp = pp.size;
    p->v = v;
    p->vshape = pp.vshape;
    TITAN_ASSERT(p->vshape == titan_pp_schedule_vshape(sched) && (!p->vshape || v == 2));
    p->stages = pp.size * v;
    p->link = titan_alloc((size_t)v * sizeof *p->link, "pipeline stage links");
    if (p->link) link_stages(p, mesh);
    p->micro = micro;
    p->slots = titan_llama_slots(model);
    p->B = B;
    p->T = T;
    p->dt = titan_llama_compute_dtype(model);
    p->count = titan_llama_stage_io_count(model);
    p->bytes = p->count * titan_dtype_size(p->dt);
    p->out_req = titan_alloc(2 * (size_t)p->slots * sizeof *p->out_req, "pipeline send requests");
    if (p->out_req) {
        memset(p->out_req, 0, 2 * (size_t)p->slots * sizeof *p->out_req);
        p->gout_req = p->out_req + p->slots;
    }
    int mirror = !p->be->host && !titan_comm_device_buffers(mesh->pp_comm);
    size_t per_slot = (size_t)p->slots * p->bytes;
    if (mirror) {
        p->out_host = titan_alloc_pages(2 * per_slot, "pipeline: host copies of the stage outputs and gradients");
        p->in_host = titan_alloc_pages(2 * p->bytes, "pipeline: host copies of the stage input and gradient");
        if (p->out_host) p->gout_host = p->out_host + per_slot;
        if (p->in_host) p->gin_host = p->in_host + p->bytes;
    } else {
        p->gout = p->be->alloc(per_slot ? per_slot : 1);
    }
    titan_status st = !p->link || !p->out_req || (mirror ? !p->out_host || !p->in_host : !p->gout) ? TITAN_ERR_NOMEM : plan(p);
    if (st != TITAN_OK) {
        titan_pipeline_free(p);
        return st;
    }
    *out = p;
    return TITAN_OK;
}

/* Waits for a queued send (if any), its time blocked counted. */
static titan_status wait_req(titan_pipeline *p, titan_comm_req **req) {
    if (!*req) return TITAN_OK;
    double t0 = titan_now_s(), c0 = titan_cpu_s();
    titan_status st = titan_comm_wait(*req);
    *req = NULL;
    p->wait_s += titan_now_s() - t0;
    p->wait_cpu_s += titan_cpu_s() - c0;
    return st;
}

void titan_pipeline_free(titan_pipeline *p) {
    if (!p) return;
    for (int k = 0; p->out_req && k < 2 * p->slots; k++) (void)wait_req(p, &p->out_req[k]);
    titan_free(p->out_req);
    if (p->gout) p->be->free(p->gout);
    if (p->hand) p->be->free(p->hand);
    titan_free(p->link);
    titan_free(p->acts);
    titan_free(p->spans);
    titan_free(p->slot0);
    titan_free_pages(p->out_host);
    titan_free_pages(p->in_host);
    titan_free(p);
}

int titan_pipeline_last_step(const titan_pipeline *p, const titan_pp_action **acts, const titan_pp_span **spans,
                             double *t0) {
    *acts = p->acts;
    *spans = p->spans;
    *t0 = p->step_t0;
    return p->steps > 0 ? p->nacts : 0;
}

double titan_pipeline_bubble(const titan_pipeline *p, int *steps) {
    *steps = p->steps;
    return p->sum_step_s > 0.0 ? 1.0 - p->sum_busy_s / p->sum_step_s : 0.0;
}

void titan_pipeline_shape(const titan_pipeline *p, titan_pp_schedule *s, int *pp, int *rank, int *v, int *micro) {
    *s = p->sched, *pp = p->pp, *rank = p->rank, *v = p->v, *micro = p->micro;
}

double titan_pipeline_take_wait_s(titan_pipeline *p) {
    double s = p->wait_s;
    p->wait_s = 0.0;
    return s;
}

static titan_status failed(titan_pipeline *p, titan_status st, const char *what, int mb, int stage, int peer) {
    titan_error_context("pipeline stage %d of %d (pp rank %d): %s micro-batch %d (peer: stage %d)", stage,
                        p->stages, p->rank, what, mb, peer);
    return st;
}

/* Blocking receive of count elements into dst (backend memory) from peer. */
static titan_status recv_into(titan_pipeline *p, titan_comm *c, void *dst, char *host, int peer) {
    double t0 = titan_now_s(), c0 = titan_cpu_s();
    titan_status st = titan_comm_recv(c, host ? host : dst, p->count, p->dt, peer, NULL);
    p->wait_s += titan_now_s() - t0;
    p->wait_cpu_s += titan_cpu_s() - c0;
    if (st == TITAN_OK && host) p->be->to_device(dst, host, p->bytes);
    return st;
}

/* Queued send of src (backend memory) to peer, through host when set. */
static titan_status send_from(titan_pipeline *p, titan_comm *c, const void *src, char *host, int peer,
                              titan_comm_req **req) {
    if (host) p->be->to_host(host, src, p->bytes);
    return titan_comm_send(c, host ? host : src, p->count, p->dt, peer, req);
}

/* Local stage k's micro-batch mb: its slot, made current with the stage. */
static int enter(titan_pipeline *p, int k, int mb) {
    int slot = p->slot0[k] + mb % p->nslot[k];
    titan_llama_set_stage(p->model, k);
    titan_llama_set_slot(p->model, slot);
    return slot;
}
static char *out_host(const titan_pipeline *p, int k) { return p->out_host ? p->out_host + (size_t)k * p->bytes : NULL; }

/* Micro-batch mb's forward on local stage k: its input from the previous
 * stage (or its tokens), its output to the next (or its loss). */
static titan_status forward_mb(titan_pipeline *p, int k, const uint32_t *inputs, const uint32_t *targets, int mb,
                               float loss_scale, double *loss) {
    const stage_link *l = &p->link[k];
    int g = titan_pp_global_stage(p->vshape, p->pp, p->rank, k), slot;
    titan_status st = TITAN_OK;
    if (l->prev == p->rank) { /* the V's hand-over: stage k - 1's output, kept in its slot until its backward */
        enter(p, k - 1, mb);
        const void *src = titan_llama_stage_output(p->model);
        slot = enter(p, k, mb);
        p->be->convert(titan_llama_stage_input(p->model), p->dt, src, p->dt, p->count);
    } else {
        slot = enter(p, k, mb);
    }
    /* The slot's output may still be on its way from an earlier micro-batch. */
    st = wait_req(p, &p->out_req[slot]);
    if (st != TITAN_OK) return failed(p, st, "send of", mb - p->nslot[k], g, g + 1);
    if (l->prev >= 0 && l->prev != p->rank) {
        st = recv_into(p, l->fwd_in, titan_llama_stage_input(p->model), p->in_host, l->prev);
        if (st != TITAN_OK) return failed(p, st, "receive of", mb, g, g - 1);
    }
    size_t off = (size_t)mb * (size_t)p->B * (size_t)p->T;
    float loss_mb = 0.0f;
    if (loss_scale > 0.0f)
        st = titan_llama_forward_train(p->model, inputs + off, targets + off, loss_scale, &loss_mb);
    else
        st = titan_llama_forward(p->model, inputs + off, targets + off, &loss_mb);
    if (st != TITAN_OK) return st;
    *loss += loss_mb;
    if (l->next >= 0 && l->next != p->rank) {
        st = send_from(p, l->fwd_out, titan_llama_stage_output(p->model), out_host(p, slot), l->next,
                       &p->out_req[slot]);
        if (st != TITAN_OK) return failed(p, st, "send of", mb, g, g + 1);
    }
    return TITAN_OK;
}

/* The gradient of local stage k's output for micro-batch mb into grad:
 * from the next stage's rank, or the V's hand-over. */
static titan_status grad_in(titan_pipeline *p, int k, int mb, int g, void *grad) {
    const stage_link *l = &p->link[k];
    if (l->next == p->rank) {
        TITAN_ASSERT(p->nhand > 0);
        const char *src = (const char *)p->hand + (size_t)(mb % p->nhand) * p->bytes;
        p->be->convert(grad, p->dt, src, p->dt, p->count);
        return TITAN_OK;
    }
    titan_status st = recv_into(p, l->bwd_in, grad, p->gin_host, l->next);
    return st == TITAN_OK ? st : failed(p, st, "receive of the gradient of", mb, g, g + 1);
}

/* The gradient of local stage k's input (grad, after its backward) to the
 * previous stage: queued from the slot's staging, or the V's hand-over. */
static titan_status grad_out(titan_pipeline *p, int k, int mb, int g, int slot, const void *grad) {
    const stage_link *l = &p->link[k];
    if (l->prev == p->rank) {
        TITAN_ASSERT(p->nhand > 0);
        p->be->convert((char *)p->hand + (size_t)(mb % p->nhand) * p->bytes, p->dt, grad, p->dt, p->count);
        return TITAN_OK;
    }
    /* the slot's staging may still be on its way from an earlier micro-batch */
    titan_status st = wait_req(p, &p->gout_req[slot]);
    if (st != TITAN_OK) return failed(p, st, "send of the gradient of", mb - p->nslot[k], g, g - 1);
    char *host = p->gout_host ? p->gout_host + (size_t)slot * p->bytes : NULL;
    const void *src = grad;
    if (!host) {
        void *staging = (char *)p->gout + (size_t)slot * p->bytes;
        p->be->convert(staging, p->dt, grad, p->dt, p->count);
        src = staging;
    }
    st = send_from(p, l->bwd_out, src, host, l->prev, &p->gout_req[slot]);
    return st == TITAN_OK ? st : failed(p, st, "send of the gradient of", mb, g, g - 1);
}

/* Micro-batch mb's backward (B) or its input part (I) on local stage k:
 * the gradient of its output from the next stage, the gradient of its
 * input to the previous one. last: the stage's last backward of the
 * step's last batch (fsdp starts the reductions of its blocks; for I,
 * the W does). */
static titan_status backward_mb(titan_pipeline *p, int k, int mb, float loss_scale, int op, int last,
                                titan_fsdp *fsdp) {
    int g = titan_pp_global_stage(p->vshape, p->pp, p->rank, k), slot = enter(p, k, mb);
    void *grad = titan_llama_stage_grad(p->model);
    if (p->link[k].next >= 0) TITAN_TRY(grad_in(p, k, mb, g, grad));
    if (fsdp) titan_fsdp_set_sync(fsdp, op == TITAN_PP_B && last);
    if (op == TITAN_PP_B) titan_llama_backward(p->model, loss_scale);
    else titan_llama_backward_input(p->model, loss_scale);
    TITAN_TRY(titan_llama_take_error(p->model)); /* a tensor-parallel collective's failure */
    if (p->link[k].prev >= 0) TITAN_TRY(grad_out(p, k, mb, g, slot, grad));
    return TITAN_OK;
}

titan_status titan_pipeline_step(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets,
                                 float loss_scale, int sync, titan_fsdp *fsdp, double *loss) {
    double sum = 0.0;
    /* per stage: backwards (B or W) done, which tells the last */
    int *nb = titan_alloc((size_t)p->v * sizeof *nb, "pipeline step");
    if (!nb) return TITAN_ERR_NOMEM;
    memset(nb, 0, (size_t)p->v * sizeof *nb);
    titan_status st = TITAN_OK;
    p->step_t0 = titan_now_s();
    double busy = 0.0;
    for (int i = 0; i < p->nacts && st == TITAN_OK; i++) {
        const titan_pp_action *a = &p->acts[i];
        double t0 = titan_now_s(), w0 = p->wait_s, c0 = titan_cpu_s(), wc0 = p->wait_cpu_s;
        int last = a->op != TITAN_PP_I && a->op != TITAN_PP_F && sync && ++nb[a->stage] == p->micro;
        switch ((titan_pp_op)a->op) {
        case TITAN_PP_F: st = forward_mb(p, a->stage, inputs, targets, a->mb, loss_scale, &sum); break;
        case TITAN_PP_B:
        case TITAN_PP_I: st = backward_mb(p, a->stage, a->mb, loss_scale, a->op, last, fsdp); break;
        case TITAN_PP_W:
            enter(p, a->stage, a->mb);
            if (fsdp) titan_fsdp_set_sync(fsdp, last);
            titan_llama_backward_weight(p->model);
            break;
        }
        p->spans[i] = (titan_pp_span){t0 - p->step_t0, titan_now_s() - p->step_t0, p->wait_s - w0,
                                      titan_cpu_s() - c0 - (p->wait_cpu_s - wc0)};
        busy += p->spans[i].t1 - p->spans[i].t0 - p->spans[i].blocked_s;
    }
    if (st == TITAN_OK && p->calls++ > 0) { /* the first pays for warm-up */
        p->sum_step_s += titan_now_s() - p->step_t0;
        p->sum_busy_s += busy;
        p->steps++;
    }
    titan_free(nb);
    *loss = sum / p->micro;
    return st;
}

titan_status titan_pipeline_eval(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets,
                                 double *loss) {
    double sum = 0.0;
    /* The schedule's forwards in its order; each waits for its slot's last
     * send first, as in training. */
    for (int i = 0; i < p->nacts; i++)
        if (p->acts[i].op == TITAN_PP_F)
            TITAN_TRY(forward_mb(p, p->acts[i].stage, inputs, targets, p->acts[i].mb, 0.0f, &sum));
    *loss = sum / p->micro;
    return TITAN_OK;
}
