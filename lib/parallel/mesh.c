/* mesh.c - a training job's ranks and their communicators. */
#include "parallel/mesh.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "parallel/group.h"

/* The resolved degrees for a world of `world` ranks. */
static titan_status resolve(const titan_job_config *cfg, int world, titan_layout *l) {
    l->dp_replicate = cfg->parallelism_data_parallel_replicate_degree;
    l->tp = cfg->parallelism_tensor_parallel_degree;
    l->cp = cfg->parallelism_context_parallel_degree;
    l->pp = cfg->parallelism_pipeline_parallel_degree;
    /* The stage split as far as the config tells it without the model:
     * 2 stages a rank for a multi-stage schedule until the model's layer
     * count gives the exact number (titan_pipeline_split). */
    int multi = cfg->parallelism_pp_schedule == TITAN_JOB_PP_INTERLEAVED_1F1B ||
                cfg->parallelism_pp_schedule == TITAN_JOB_PP_LOOPED_BFS ||
                cfg->parallelism_pp_schedule == TITAN_JOB_PP_INTERLEAVED_ZB ||
                cfg->parallelism_pp_schedule == TITAN_JOB_PP_MULTI || cfg->parallelism_pp_schedule == TITAN_JOB_PP_RUNTIME;
    /* the V's two stages a rank (with a CSV, the file's looped placement) */
    int vshape = (cfg->parallelism_pp_schedule == TITAN_JOB_PP_ZBV ||
                  cfg->parallelism_pp_schedule == TITAN_JOB_PP_DUALPIPEV) &&
                 !cfg->parallelism_pipeline_parallel_schedule_csv[0];
    multi |= cfg->parallelism_pp_schedule == TITAN_JOB_PP_ZBV || cfg->parallelism_pp_schedule == TITAN_JOB_PP_DUALPIPEV;
    int in = cfg->parallelism_pipeline_parallel_first_stage_less_layers;
    int out = cfg->parallelism_pipeline_parallel_last_stage_less_layers;
    if (l->pp > 1 && (multi || in != 1 || out != 1)) { /* else the default split: pp_v 0 */
        l->pp_v = multi ? 2 : 1;
        l->pp_first_less = in;
        l->pp_last_less = out;
        l->pp_vshape = vshape;
    }
    int rest = l->dp_replicate * l->tp * l->cp * l->pp;
    int s = cfg->parallelism_data_parallel_shard_degree;
    if (s == -1) {
        if (world % rest != 0) {
            titan_error(TITAN_ERR_USAGE, "parallelism: %d ranks cannot be split into data_parallel_replicate_degree %d "
                        "x tp %d x cp %d x pp %d", world, l->dp_replicate, l->tp, l->cp, l->pp);
            titan_error_hint("start a multiple of %d ranks, or change the degrees", rest);
            return TITAN_ERR_USAGE;
        }
        s = world / rest;
    }
    l->dp_shard = s;
    if (rest * s != world) {
        titan_error(TITAN_ERR_USAGE, "parallelism: degrees multiply to %d (dp_replicate %d x dp_shard %d x tp %d x cp %d "
                    "x pp %d) but the job has %d ranks", rest * s, l->dp_replicate, s, l->tp, l->cp, l->pp, world);
        titan_error_hint("start %d ranks (--nproc %d), or set parallelism.data_parallel_shard_degree = -1",
                         rest * s, rest * s);
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

titan_status titan_mesh_check(const titan_job_config *cfg, int world) {
    titan_layout l;
    return resolve(cfg, world, &l);
}

titan_status titan_mesh_layout(const titan_job_config *cfg, int world, titan_layout *l) {
    memset(l, 0, sizeof *l);
    return resolve(cfg, world, l);
}

titan_status titan_mesh_init(const titan_job_config *cfg, titan_mesh *m) {
    memset(m, 0, sizeof *m);
    TITAN_TRY(titan_dist_init(&m->dist));
    m->rank = titan_dist_rank(m->dist);
    m->world = titan_dist_world_size(m->dist);
    m->comm_timeout_s = cfg->comm_train_timeout_seconds;
    TITAN_TRY(titan_comm_backend_choice((titan_comm_backend)cfg->comm_backend_kind, &m->comm_backend));
    if (m->rank != 0) {
        static char prog[64];
        snprintf(prog, sizeof prog, "%s[rank %d]", titan_log_prog(), m->rank);
        titan_log_init(prog);
        if (titan_log_verbosity() < 2) titan_log_set_verbosity(0); /* warnings and errors only */
    }
    titan_status st = resolve(cfg, m->world, &m->layout);
    if (st != TITAN_OK) {
        if (m->rank != 0) titan_error_mute(); /* rank 0 says the same */
        return st;
    }
    titan_layout_format(&m->layout, m->layout_str, sizeof m->layout_str);
    titan_layout_coord c;
    titan_layout_coord_of(&m->layout, m->rank, &c);
    m->shard_rank = c.dp_shard;
    m->tp_rank = c.tp;
    m->cp_rank = c.cp;
    m->pp_rank = c.pp;
    m->dp_size = m->layout.dp_replicate * m->layout.dp_shard;
    m->dp_rank = c.dp_replicate * m->layout.dp_shard + c.dp_shard;
    return TITAN_OK;
}

enum { AXIS_PP = 1, AXIS_DP_REPLICATE = 2, AXIS_DP_SHARD = 4, AXIS_CP = 8, AXIS_TP = 16 };

/* The rank with c's coordinates along `axes` set to 0: the color of c's group over them. */
static int group_color(const titan_layout *l, titan_layout_coord c, unsigned axes) {
    if (axes & AXIS_PP) c.pp = 0;
    if (axes & AXIS_DP_REPLICATE) c.dp_replicate = 0;
    if (axes & AXIS_DP_SHARD) c.dp_shard = 0;
    if (axes & AXIS_CP) c.cp = 0;
    if (axes & AXIS_TP) c.tp = 0;
    return titan_layout_rank_of(l, &c);
}

titan_status titan_mesh_connect(titan_mesh *m, int nccl) {
    if (m->world == 1) return TITAN_OK;
    titan_layout_coord c;
    titan_layout_coord_of(&m->layout, m->rank, &c);
    titan_comm_backend be = m->comm_backend;
    if (be == TITAN_COMM_BACKEND_AUTO && nccl) be = TITAN_COMM_BACKEND_NCCL;
    if (be == TITAN_COMM_BACKEND_NCCL && !nccl) {
        titan_error(TITAN_ERR_USAGE, "comm.backend = nccl: this rank's device runs no NCCL");
        titan_error_hint("NCCL takes training.device = cuda, one GPU per rank and a libtitan-cuda.so "
                         "built with NCCL; comm.backend = auto picks shm or mpi otherwise");
        return TITAN_ERR_USAGE;
    }
    TITAN_TRY(titan_comm_backend_resolve(m->dist, be, &be));
    titan_comm_options o = {.timeout_s = m->comm_timeout_s, .chunk_bytes = 0, .name = "world",
                            .backend = be};
    if (be == TITAN_COMM_BACKEND_NCCL)
        TITAN_TRY(titan_comm_init_nccl(m->dist, -1, &o, &m->world_comm));
    else
        TITAN_TRY(titan_comm_init(m->dist, &o, &m->world_comm));
    /* A group is the ranks whose coordinates differ along its axes only:
     * its color, the rank with those coordinates set to 0. Each split is
     * collective, so every rank makes all of them. FSDP shards over
     * dp_shard x cp (torchtitan's dp_shard_cp). */
    const titan_layout *l = &m->layout;
    int shard_color = group_color(l, c, AXIS_DP_SHARD | AXIS_CP);
    int replicate_color = group_color(l, c, AXIS_DP_REPLICATE);
    int tp_color = group_color(l, c, AXIS_TP);
    int pp_color = group_color(l, c, AXIS_PP);
    int cp_color = group_color(l, c, AXIS_CP);
    titan_comm *sh = NULL, *rp = NULL, *tp = NULL, *pf = NULL, *pb = NULL, *cp = NULL, *wf = NULL, *wb = NULL;
    TITAN_TRY(titan_comm_split(m->world_comm, shard_color, c.dp_shard * m->layout.cp + c.cp, "shard", &sh));
    titan_status st = titan_comm_split(m->world_comm, replicate_color, c.dp_replicate, "replicate", &rp);
    if (st == TITAN_OK) st = titan_comm_split(m->world_comm, tp_color, c.tp, "tp", &tp);
    /* Two pipeline communicators, one a direction: activations and
     * gradients each move in order on their own, so a stage's queued send
     * one way never waits behind a receive the other way (and with NCCL
     * each has its own stream). */
    if (st == TITAN_OK) st = titan_comm_split(m->world_comm, pp_color, c.pp, "pp", &pf);
    if (st == TITAN_OK) st = titan_comm_split(m->world_comm, pp_color, c.pp, "pp-grad", &pb);
    if (st == TITAN_OK) st = titan_comm_split(m->world_comm, cp_color, c.cp, "cp", &cp);
    int wrap = m->layout.pp > 1 && m->layout.pp_v > 1;
    if (st == TITAN_OK && wrap) st = titan_comm_split(m->world_comm, pp_color, c.pp, "pp-wrap", &wf);
    if (st == TITAN_OK && wrap) st = titan_comm_split(m->world_comm, pp_color, c.pp, "pp-grad-wrap", &wb);
    m->pp_wrap_comm = wf;
    m->pp_grad_wrap_comm = wb;
    if (m->layout.dp_shard * m->layout.cp > 1) m->shard_comm = sh; else titan_comm_free(sh);
    if (m->layout.cp > 1) m->cp_comm = cp; else titan_comm_free(cp);
    if (m->layout.dp_replicate > 1) m->replicate_comm = rp; else titan_comm_free(rp);
    if (m->layout.tp > 1) m->tp_comm = tp; else titan_comm_free(tp);
    if (m->layout.pp > 1) {
        m->pp_comm = pf;
        m->pp_grad_comm = pb;
    } else {
        titan_comm_free(pf);
        titan_comm_free(pb);
    }
    titan_info("%d ranks (%s launch, %s communicators), layout %s", m->world,
               titan_dist_kind_name(titan_dist_kind_of(m->dist)),
               be == TITAN_COMM_BACKEND_SHM ? "shared-memory" : titan_comm_backend_name(be), m->layout_str);
    return st;
}

titan_status titan_mesh_groups(titan_mesh *m, const titan_backend *be) {
    TITAN_TRY(titan_parallel_group_create(&m->tp_group, m->tp_comm, be));
    return titan_parallel_group_create(&m->cp_group, m->cp_comm, be);
}

void titan_mesh_free(titan_mesh *m) {
    titan_parallel_group_free(m->tp_group);
    titan_parallel_group_free(m->cp_group);
    titan_comm_free(m->shard_comm);
    titan_comm_free(m->replicate_comm);
    titan_comm_free(m->tp_comm);
    titan_comm_free(m->cp_comm);
    titan_comm_free(m->pp_comm);
    titan_comm_free(m->pp_grad_comm);
    titan_comm_free(m->pp_wrap_comm);
    titan_comm_free(m->pp_grad_wrap_comm);
    titan_comm_free(m->world_comm);
    titan_dist_free(m->dist);
    memset(m, 0, sizeof *m);
}
