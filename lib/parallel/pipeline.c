/* pipeline.c - pipeline schedules over the stages of a mesh's pp group. */
#include "parallel/pipeline.h"

#include <string.h>

#include "core/clock.h"
#include "core/mem.h"

struct titan_pipeline {
    titan_llama *model;
    const titan_backend *be;
    titan_comm *fwd, *bwd;       /* activations to the next stage, gradients to the previous */
    titan_pp_schedule sched;
    int stage, stages, micro, slots;
    int B, T;
    titan_dtype dt;
    size_t count, bytes;         /* a transfer: count elements of dt */
    /* Host copies for communicators that move host memory only (NULL when
     * the transfers take backend memory): a slot's output each, the input,
     * the incoming and the outgoing gradient. */
    char *out_host, *in_host, *gin_host, *gout_host;
    titan_comm_req **out_req;    /* per slot: the queued send of its output */
    titan_comm_req *gout_req;    /* the queued send of the last input gradient */
    double wait_s;
};

int titan_pipeline_slots(titan_pp_schedule s, int stages, int stage, int micro) {
    if (s == TITAN_PP_GPIPE) return micro;
    int k = stages - stage;
    return k < micro ? k : micro;
}

titan_status titan_pipeline_create(titan_pipeline **out, titan_mesh *mesh, titan_llama *model,
                                   titan_pp_schedule sched, int micro, int B, int T) {
    *out = NULL;
    titan_llama_pp pp = titan_llama_get_pp(model);
    TITAN_ASSERT(pp.size == mesh->layout.pp && pp.stage == mesh->pp_rank && mesh->pp_comm);
    titan_pipeline *p = titan_alloc(sizeof *p, "pipeline");
    if (!p) return TITAN_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->model = model;
    p->be = titan_llama_backend(model);
    p->fwd = mesh->pp_comm;
    p->bwd = mesh->pp_grad_comm;
    p->sched = sched;
    p->stage = pp.stage;
    p->stages = pp.size;
    p->micro = micro;
    p->slots = titan_llama_slots(model);
    TITAN_ASSERT(p->slots >= titan_pipeline_slots(sched, pp.size, pp.stage, micro));
    p->B = B;
    p->T = T;
    p->dt = titan_llama_compute_dtype(model);
    p->count = titan_llama_stage_io_count(model);
    p->bytes = p->count * titan_dtype_size(p->dt);
    p->out_req = titan_alloc((size_t)p->slots * sizeof *p->out_req, "pipeline send requests");
    int mirror = !p->be->host && !titan_comm_device_buffers(p->fwd);
    if (mirror) {
        p->out_host = titan_alloc_pages((size_t)p->slots * p->bytes, "pipeline: host copies of the stage outputs");
        p->in_host = titan_alloc_pages(3 * p->bytes, "pipeline: host copies of the stage input and gradients");
        if (p->in_host) {
            p->gin_host = p->in_host + p->bytes;
            p->gout_host = p->in_host + 2 * p->bytes;
        }
    }
    if (!p->out_req || (mirror && (!p->out_host || !p->in_host))) {
        titan_pipeline_free(p);
        return TITAN_ERR_NOMEM;
    }
    memset(p->out_req, 0, (size_t)p->slots * sizeof *p->out_req);
    *out = p;
    return TITAN_OK;
}

/* Waits for a queued send (if any), its time blocked counted. */
static titan_status wait_req(titan_pipeline *p, titan_comm_req **req) {
    if (!*req) return TITAN_OK;
    double t0 = titan_now_s();
    titan_status st = titan_comm_wait(*req);
    *req = NULL;
    p->wait_s += titan_now_s() - t0;
    return st;
}

void titan_pipeline_free(titan_pipeline *p) {
    if (!p) return;
    for (int k = 0; p->out_req && k < p->slots; k++) (void)wait_req(p, &p->out_req[k]);
    (void)wait_req(p, &p->gout_req);
    titan_free(p->out_req);
    titan_free_pages(p->out_host);
    titan_free_pages(p->in_host);
    titan_free(p);
}

double titan_pipeline_take_wait_s(titan_pipeline *p) {
    double s = p->wait_s;
    p->wait_s = 0.0;
    return s;
}

static titan_status failed(titan_pipeline *p, titan_status st, const char *what, int mb, int peer) {
    titan_error_context("pipeline stage %d of %d: %s micro-batch %d (peer: stage %d)", p->stage, p->stages, what,
                        mb, peer);
    return st;
}

/* Blocking receive of count elements into dst (backend memory) from peer. */
static titan_status recv_into(titan_pipeline *p, titan_comm *c, void *dst, char *host, int peer) {
    double t0 = titan_now_s();
    titan_status st = titan_comm_recv(c, host ? host : dst, p->count, p->dt, peer, NULL);
    p->wait_s += titan_now_s() - t0;
    if (st == TITAN_OK && host) p->be->to_device(dst, host, p->bytes);
    return st;
}

/* Queued send of src (backend memory) to peer, through host when set. */
static titan_status send_from(titan_pipeline *p, titan_comm *c, const void *src, char *host, int peer,
                              titan_comm_req **req) {
    if (host) p->be->to_host(host, src, p->bytes);
    return titan_comm_send(c, host ? host : src, p->count, p->dt, peer, req);
}

static int slot_of(const titan_pipeline *p, int mb) { return mb % p->slots; }
static char *out_host(const titan_pipeline *p, int k) { return p->out_host ? p->out_host + (size_t)k * p->bytes : NULL; }

/* Micro-batch mb's forward: its input from the previous stage (or its
 * tokens), its output to the next (or its loss). */
static titan_status forward_mb(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets, int mb,
                               float loss_scale, double *loss) {
    int k = slot_of(p, mb);
    titan_llama_set_slot(p->model, k);
    /* The slot's output may still be on its way from an earlier micro-batch. */
    titan_status st = wait_req(p, &p->out_req[k]);
    if (st != TITAN_OK) return failed(p, st, "send of", mb - p->slots, p->stage + 1);
    if (p->stage > 0) {
        st = recv_into(p, p->fwd, titan_llama_stage_input(p->model), p->in_host, p->stage - 1);
        if (st != TITAN_OK) return failed(p, st, "receive of", mb, p->stage - 1);
    }
    size_t off = (size_t)mb * (size_t)p->B * (size_t)p->T;
    float l = 0.0f;
    if (loss_scale > 0.0f)
        st = titan_llama_forward_train(p->model, inputs + off, targets + off, loss_scale, &l);
    else
        st = titan_llama_forward(p->model, inputs + off, targets + off, &l);
    if (st != TITAN_OK) return st;
    *loss += l;
    if (p->stage + 1 < p->stages) {
        st = send_from(p, p->fwd, titan_llama_stage_output(p->model), out_host(p, k), p->stage + 1,
                       &p->out_req[k]);
        if (st != TITAN_OK) return failed(p, st, "send of", mb, p->stage + 1);
    }
    return TITAN_OK;
}

/* Micro-batch mb's backward: the gradient of its output from the next
 * stage, the gradient of its input to the previous one. */
static titan_status backward_mb(titan_pipeline *p, int mb, float loss_scale, int last, titan_fsdp *fsdp) {
    titan_llama_set_slot(p->model, slot_of(p, mb));
    void *grad = titan_llama_stage_grad(p->model);
    /* The gradient buffer is the last send's source. */
    titan_status st = wait_req(p, &p->gout_req);
    if (st != TITAN_OK) return failed(p, st, "send of the gradient of", mb - 1, p->stage - 1);
    if (p->stage + 1 < p->stages) {
        st = recv_into(p, p->bwd, grad, p->gin_host, p->stage + 1);
        if (st != TITAN_OK) return failed(p, st, "receive of the gradient of", mb, p->stage + 1);
    }
    if (fsdp) titan_fsdp_set_sync(fsdp, last);
    titan_llama_backward(p->model, loss_scale);
    TITAN_TRY(titan_llama_take_error(p->model)); /* a tensor-parallel collective's failure */
    if (p->stage > 0) {
        st = send_from(p, p->bwd, grad, p->gout_host, p->stage - 1, &p->gout_req);
        if (st != TITAN_OK) return failed(p, st, "send of the gradient of", mb, p->stage - 1);
    }
    return TITAN_OK;
}

titan_status titan_pipeline_step(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets,
                                 float loss_scale, int sync, titan_fsdp *fsdp, double *loss) {
    double sum = 0.0;
    int M = p->micro, f = 0, b = 0;
    int warm = p->sched == TITAN_PP_GPIPE ? M : p->stages - p->stage - 1;
    if (warm > M) warm = M;
    for (; f < warm; f++) TITAN_TRY(forward_mb(p, inputs, targets, f, loss_scale, &sum));
    for (; f < M; f++, b++) { /* 1F1B's steady state */
        TITAN_TRY(forward_mb(p, inputs, targets, f, loss_scale, &sum));
        TITAN_TRY(backward_mb(p, b, loss_scale, sync && b == M - 1, fsdp));
    }
    for (; b < M; b++) TITAN_TRY(backward_mb(p, b, loss_scale, sync && b == M - 1, fsdp));
    *loss = sum / M;
    return TITAN_OK;
}

titan_status titan_pipeline_eval(titan_pipeline *p, const uint32_t *inputs, const uint32_t *targets,
                                 double *loss) {
    double sum = 0.0;
    /* Each forward waits for its slot's last send first, as in training. */
    for (int mb = 0; mb < p->micro; mb++) TITAN_TRY(forward_mb(p, inputs, targets, mb, 0.0f, &sum));
    *loss = sum / p->micro;
    return TITAN_OK;
}
