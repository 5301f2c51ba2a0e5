/* memory_estimate.c - the memory dry run (memory_estimate.h): each rank's
 * buffers from the plan code the run sets up with, and the peak of a step
 * from FSDP's schedule (fsdp.h: which units are gathered, which gradients
 * wait for their reduce-scatter, how many staging buffers are in flight). */
#include "train/memory_estimate.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/log.h"
#include "core/mem.h"
#include "data/tokenizer.h"
#include "model/attention_cp.h"
#include "model/llama.h"
#include "parallel/fsdp.h"
#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "train/setup.h"
#include "train/setup_optim.h"

/* A GPU's mapping granule for releasable memory (cuMemGetAllocationGranularity's
 * recommended size on current NVIDIA GPUs). */
#define CUDA_GRANULE ((size_t)2 << 20)

titan_status titan_memory_device_of(const titan_job_config *cfg, titan_memory_device *out) {
    titan_comm_backend comm;
    TITAN_TRY(titan_comm_backend_choice((titan_comm_backend)cfg->comm_backend_kind, &comm));
    titan_memory_device d = {.host = 1, .device_comm = 1, .granule = titan_page_size(), .name = "cpu"};
    int shm = comm == TITAN_COMM_BACKEND_SHM || comm == TITAN_COMM_BACKEND_MPI;
    switch (cfg->training_device_kind) {
    case TITAN_JOB_DEVICE_CPU: break;
    case TITAN_JOB_DEVICE_CPU_GUARD: /* a GPU's rules on the CPU: shm communicators take host memory */
        d = (titan_memory_device){.host = 0, .device_comm = 0, .granule = titan_page_size(), .name = "cpu-guard"};
        break;
    case TITAN_JOB_DEVICE_CUDA:
    case TITAN_JOB_DEVICE_CUDA_N:
    case TITAN_JOB_DEVICE_AUTO: /* what auto opens where a GPU is */
        d = (titan_memory_device){.host = 0, .device_comm = !shm, .granule = CUDA_GRANULE, .name = "cuda"};
        break;
    }
    d.comm = (titan_job_comm)comm;
    /* cpu-guard has neither; auto takes nccl on cuda, shm on one host otherwise */
    int guard = cfg->training_device_kind == TITAN_JOB_DEVICE_CPU_GUARD;
    d.block_attention = !guard;
    d.windows = !guard && (comm == TITAN_COMM_BACKEND_SHM || (comm == TITAN_COMM_BACKEND_AUTO && d.host));
    *out = d;
    return TITAN_OK;
}

/* The plans of rank `rank`: its model's, FSDP's, and the step's shape. */
typedef struct {
    titan_layout lay;
    titan_setup_shape sh;
    titan_llama_memory mm;
    titan_fsdp_options fo;
    titan_fsdp_memory fm;
    int accum;
} plans;

static titan_status plan_rank(const titan_job_config *cfg, const titan_llama_config *mc, int world, int rank,
                              const titan_memory_device *dev, plans *p) {
    TITAN_TRY(titan_mesh_layout(cfg, world, &p->lay));
    TITAN_TRY(titan_setup_shape_of(cfg, mc->n_layers, &p->lay, &p->sh));
    titan_layout_coord c;
    titan_layout_coord_of(&p->lay, rank, &c);
    titan_llama_options mo = titan_setup_model_options(cfg, &p->sh, &p->lay, c.pp);
    /* the model's plan needs the groups' places only */
    titan_group tp = {.rank = c.tp, .size = p->lay.tp}, cp = {.rank = c.cp, .size = p->lay.cp};
    mo.tp = p->lay.tp > 1 ? &tp : NULL;
    mo.cp = p->lay.cp > 1 ? &cp : NULL;
    TITAN_TRY(titan_llama_plan_memory(mc, p->sh.mb, cfg->training_seq_len, p->sh.ac, p->sh.compute, &mo, dev->host,
                                      &p->mm));
    int nb = mc->n_layers + 2;
    int *units = titan_alloc((size_t)nb * sizeof *units, "communication plan");
    if (!units) return TITAN_ERR_NOMEM;
    titan_status st = titan_setup_fsdp_options(cfg, &p->sh, &p->lay, nb, units, &p->fo);
    if (st == TITAN_OK) st = titan_fsdp_plan_memory(&p->lay, mc, rank, &p->fo, &p->fm);
    titan_free(units);
    TITAN_TRY(st);
    return titan_setup_accum_steps(cfg, p->lay.dp_replicate * p->lay.dp_shard, &p->accum);
}

/* What a step adds under FSDP (fsdp.h's schedule): the gathered units, the
 * full gradients not yet reduce-scattered; and the staging buffers, held
 * from setup on. */
static void fsdp_step(const titan_llama_config *mc, const plans *p, const titan_memory_device *dev,
                      int fp8_gather, titan_memory_rank *r) {
    const titan_fsdp_memory *fm = &p->fm;
    size_t pe = titan_dtype_size(p->fo.param_dtype);
    int sharded = fm->nshards > 1, replicate = p->lay.dp_replicate > 1;
    if (sharded) {
        /* Gathers in the compute type land in the compute copy alone
         * (direct); else the fp32 parameters, with the copy cast from them. */
        int direct = p->fo.param_dtype != TITAN_DTYPE_F32 && p->fo.param_dtype == p->sh.compute;
        double per = direct ? (double)pe : 4.0 + (p->sh.compute != TITAN_DTYPE_F32 ? 2.0 : 0.0);
        double nparams = (double)p->mm.nparams;
        /* The unit in use (the head's backward also reads the embedding's
         * unit when they are tied); the prefetched one waits in its staging
         * buffer (below) until the unit in use is done with. */
        double in_use = (double)fm->unit_max;
        if (mc->tie_embeddings && fm->last_unit + fm->first_unit > fm->unit_max)
            in_use = (double)(fm->last_unit + fm->first_unit);
        /* Without resharding every unit stays gathered from its forward to its backward. */
        r->fsdp_gathered = (p->fo.reshard_after_forward ? in_use : nparams) * per;
        /* Later micro-batches add into every unit's full gradient: reduced
         * after the last one only; else the unit in backward's. */
        int keeps_all = p->accum * p->sh.micro > 1;
        r->fsdp_grads = (keeps_all ? nparams : (double)fm->unit_max) * sizeof(float);
        if (dev->granule > titan_page_size()) /* a GPU: the end granules of each unit stay mapped */
            r->granules = (double)(fm->nunits - 1) * (double)dev->granule * 2.0;
    }
    /* Staging (fsdp.c): a prefetched gather and the reductions in flight
     * at most, allocated at setup, all of the largest collective's size. */
    int mirror = !dev->device_comm && !dev->host, n;
    int staged = replicate && (p->fo.reduce_dtype != TITAN_DTYPE_F32 || mirror);
    size_t bytes;
    titan_fsdp_staging(fm, p->fo.param_dtype, p->fo.reduce_dtype, staged, fp8_gather, &n, &bytes);
    r->fsdp_buffers = (double)n * (double)bytes;
    if (mirror) r->host_mirrors += r->fsdp_buffers;
}

/* Float8 linears (model.converters): the scratch one call holds at most,
 * over the linears that train in float8 at this rank's tp shard: each
 * GEMM's two float8 operands (a byte an element) with their scales (a
 * float per row at most, 256-byte aligned); emulated, their fp32
 * dequantized copies too, and an fp32 product where the compute type is
 * not. Under tp the amax buffers (fp8_amax per cast, the group's on the
 * host) are held from setup on. */
static titan_status float8_bytes(const titan_job_config *cfg, const titan_llama_config *mc, const plans *p,
                                 const titan_memory_device *dev, titan_memory_rank *r) {
    if (!titan_config_float8(cfg)) return TITAN_OK;
    titan_fp8_recipe rc;
    const char *name = cfg->float8_recipe_name[0] ? cfg->float8_recipe_name : "tensorwise";
    if (titan_fp8_recipe_from_name(name, &rc) != 0) return TITAN_OK; /* the run refuses it */
    int n = mc->n_layers * 7 + 1, tp = p->lay.tp;
    unsigned char *on = titan_alloc((size_t)n, "memory estimate (float8 plan)");
    if (!on) return TITAN_ERR_NOMEM;
    titan_llama_float8_plan(mc, &rc, cfg->float8_filter_fqns, on);
    double N = (double)p->sh.mb * (double)(cfg->training_seq_len / p->lay.cp), most = 0;
    int emulated = cfg->float8_emulate || dev->host;
    double cdt = (double)titan_dtype_size(p->sh.compute);
    /* the cuda backend casts dy's two tensorwise layouts in one pass
     * (kernels/fp8_matmul.cu), so grad_w's dy^T is held through grad_in */
    int gw8 = rc.format[TITAN_FP8_GO_GW] != TITAN_FP8_NONE && rc.format[TITAN_FP8_X_GW] != TITAN_FP8_NONE;
    int dy_both = !dev->host && gw8 && !rc.rowwise[TITAN_FP8_GO_GI] && !rc.rowwise[TITAN_FP8_GO_GW] &&
                  rc.format[TITAN_FP8_GO_GI] == rc.format[TITAN_FP8_GO_GW];
    for (int i = 0; i < n; i++) {
        if (!on[i]) continue;
        int oc, ic, k = i % 7, l0 = i - k;
        /* wk, wv after wq, w3 after w1: the backward's shared cast of x^T
         * (kernels/fp8_matmul.cu, cpu/fp8_matmul.c: dequantized in fp32
         * on the cpu) is held through their grad_in */
        int held = gw8 && i < mc->n_layers * 7 && (((k == 1 || k == 2) && (on[l0] || (k == 2 && on[l0 + 1]))) ||
                                             (k == 6 && on[l0 + 4]));
        titan_llama_float8_shape(mc, i, &oc, &ic);
        /* column-parallel: the output rows; wo, w2: the input columns */
        if (i < mc->n_layers * 7 && (k == 3 || k == 5)) ic = (ic + tp - 1) / tp;
        else oc = (oc + tp - 1) / tp;
        /* each GEMM's operand pair [rows, K] and [cols, K], its product [rows, cols] */
        const double g[3][3] = {{N, oc, ic}, {N, ic, oc}, {oc, ic, N}};
        for (int j = 0; j < 3; j++) {
            double a = g[j][0] * g[j][2], b = g[j][1] * g[j][2], out = g[j][0] * g[j][1];
            double bytes = a + b + 2.0 * (g[j][0] + g[j][1] + 64.0) * sizeof(float);
            if (j == 1 && dy_both) bytes += a + (1.0 + 64.0) * sizeof(float);
            if (j == 1 && held) bytes += N * ic * (dev->host ? sizeof(float) : 1.0) + (ic + 64.0) * sizeof(float);
            /* emulated: fp32 operands; out and grad_in in fp32 first where the
             * compute type is not (the cpu widens a residual too); grad_w
             * writes the fp32 gradient itself */
            if (emulated && j < 2 && cdt != 4.0) bytes += out * sizeof(float) * (dev->host && j == 0 ? 2.0 : 1.0);
            if (emulated) bytes += (a + b) * sizeof(float);
            if (bytes > most) most = bytes;
        }
    }
    titan_free(on);
    r->fp8_scratch = most;
    /* the forward's amaxes of w and x kept for the backward (llama_fp8.c) */
    if (most > 0)
        r->fp8_amaxes += (double)(titan_llama_fp8_wamax_floats(&rc, mc->n_layers) +
                                    titan_llama_fp8_xamax_floats(&rc, mc->n_layers, p->mm.slots)) * sizeof(float);
    if (tp > 1 && most > 0) /* the model's amax buffers */
        r->fp8_amaxes += (double)TITAN_FP8_NCASTS * sizeof(float) *
                           (double)titan_llama_fp8_tp_amax_floats(mc, tp, (int)N);
    return TITAN_OK;
}

/* The optimizer's state and buffers over the rank's shard: AdamW's two
 * moments; GaLore's from the layout the run's optimizer takes
 * (setup_optim.h, titan_optim_plan_bytes). */
static titan_status optimizer_bytes(const titan_job_config *cfg, const titan_llama_config *mc, const plans *p,
                                    int rank, titan_memory_rank *r) {
    titan_optim_config oc;
    TITAN_TRY(titan_setup_optim_config(cfg, &p->lay, &oc));
    if (oc.kind != TITAN_OPTIM_GALORE) {
        r->optimizer = 2.0 * (double)(p->fm.nshard ? p->fm.nshard : 1) * sizeof(float);
        return TITAN_OK;
    }
    int np = titan_llama_params(mc, NULL);
    titan_shard_piece *pieces = titan_alloc((size_t)np * sizeof *pieces, "memory estimate (shard plan)");
    if (!pieces) return TITAN_ERR_NOMEM;
    size_t nshard = 0;
    titan_param *ps = NULL;
    titan_optim_param *op = NULL;
    titan_optim_bytes b;
    titan_status st = titan_shard_plan(&p->lay, mc, rank, pieces, &nshard);
    if (st == TITAN_OK) st = titan_setup_optim_params(mc, pieces, &ps, &op, &np);
    if (st == TITAN_OK) st = titan_optim_plan_bytes(nshard, op, np, &oc, &b);
    if (st == TITAN_OK) {
        r->optimizer = b.state;
        r->optimizer_projected = b.projected;
        r->optimizer_work = b.work;
    }
    titan_free(op);
    free(ps);
    titan_free(pieces);
    return st;
}

titan_status titan_memory_estimate(const titan_job_config *cfg, const titan_llama_config *mc, int world, int rank,
                                   const titan_memory_device *dev, titan_memory_rank *r) {
    memset(r, 0, sizeof *r);
    plans p;
    TITAN_TRY(plan_rank(cfg, mc, world, rank, dev, &p));
    r->rank = rank;
    titan_layout_coord_of(&p.lay, rank, &r->c);
    const titan_llama_memory *mm = &p.mm;
    int sharded = p.fm.nshards > 1, mirror = !dev->device_comm && !dev->host;
    r->nparams = mm->nparams;
    r->params = r->grads = (double)mm->params_bytes;
    r->compute_copy = (double)mm->compute_copy_bytes;
    r->activations = (double)mm->arena_bytes;
    r->act_slot = (double)mm->slot_bytes;
    r->slots = mm->slots;
    r->cp = (double)mm->cp_bytes;
    r->tp_window = (double)mm->tp_window_bytes + (double)mm->cp_window_bytes;
    /* shard parameters and gradients; stepping in the backward, the
     * gradients a unit's shard at a time (fsdp.h's unit-done callback) */
    if (sharded)
        r->shard = ((double)(p.fm.nshard + 1) +
                    (double)((cfg->optimizer_early_step_in_backward ? p.fm.unit_shard_max : p.fm.nshard) + 1)) *
                   sizeof(float);
    TITAN_TRY(optimizer_bytes(cfg, mc, &p, rank, r));
    if (p.lay.pp > 1) { /* pipeline.c: per slot, an outgoing gradient (or host copies of both messages) */
        double per_slot = (double)mm->slots * (double)mm->stage_io_bytes;
        if (mirror) r->host_mirrors += 2.0 * per_slot + 2.0 * (double)mm->stage_io_bytes;
        else r->pipeline = per_slot > 0 ? per_slot : 1;
        int v, a, b; /* the V's hand-over (backend memory either way) */
        titan_layout_split(&p.lay, &v, &a, &b);
        r->pipeline += (double)titan_pipeline_hand_over(p.sh.sched, p.lay.pp, r->c.pp, v, p.sh.micro) *
                       (double)mm->stage_io_bytes;
    }
    if (mirror) r->host_mirrors += (double)mm->tp_reserve_bytes + (double)mm->cp_reserve_bytes;
    fsdp_step(mc, &p, dev, titan_config_float8(cfg) && cfg->float8_enable_fsdp_float8_all_gather, r);
    TITAN_TRY(float8_bytes(cfg, mc, &p, dev, r));
    /* FSDP's full buffers are releasable: held a unit at a time where the
     * device maps memory on use, wholly where it cannot. */
    double full = r->params + r->grads + r->compute_copy;
    int by_unit = r->by_unit = sharded && dev->granule > 0;
    r->held = (by_unit ? 0.0 : full) + r->shard + r->optimizer + r->optimizer_work + r->activations + r->cp +
              r->pipeline + r->tp_window + r->fsdp_buffers + r->fp8_amaxes;
    double step = by_unit ? r->fsdp_gathered + r->fsdp_grads + r->granules : 0.0;
    r->peak = r->held + step + r->fp8_scratch;
    /* checkpoints: an async snapshot (host), or the staging of a device's saves */
    double state = (double)p.fm.nshard * sizeof(float) + r->optimizer; /* parameters, moments, GaLore's state */
    if (cfg->checkpoint_enable && cfg->checkpoint_async != TITAN_JOB_ASYNC_DISABLED) r->host_ckpt = state;
    else if (!dev->host) r->host_ckpt = state;
    int shm = !dev->device_comm || dev->host;
    if (world > 1 && shm && dev->comm != TITAN_JOB_COMM_MPI)
        r->shm_segment = (double)titan_comm_shm_segment_bytes(world);
    return TITAN_OK;
}

static double mib(double b) { return b / (1024.0 * 1024.0); }

/* Ranks whose group is g, as ranges ("0-6,8-14"), cut short with "..." and
 * their count when long. */
static void rank_list(const int *group, int world, int g, char *out, size_t cap) {
    size_t used = 0;
    int count = 0, cut = 0;
    out[0] = '\0';
    for (int r = 0; r < world; r++) {
        if (group[r] != g) continue;
        count++;
        if (r > 0 && group[r - 1] == g) continue; /* inside a range */
        int e = r;
        while (e + 1 < world && group[e + 1] == g) e++;
        char item[32];
        if (e == r) snprintf(item, sizeof item, "%s%d", used ? "," : "", r);
        else snprintf(item, sizeof item, "%s%d-%d", used ? "," : "", r, e);
        if (cut || used + strlen(item) + 24 > cap) {
            cut = 1;
            continue;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s", item);
    }
    if (cut) snprintf(out + used, cap - used, ",... (%d ranks)", count);
}

/* One line of the table: a group of ranks with the same figures. */
static void print_row(FILE *f, const titan_memory_rank *r, const char *ranks) {
    double full = r->by_unit ? 0.0 : r->params + r->grads, copy = r->by_unit ? 0.0 : r->compute_copy;
    fprintf(f, "%3d %10.1f %8.1f %8.1f %8.1f %8.1f %3d %9.1f %9.1f %9.1f %9.1f %9.1f  %s\n", r->c.pp, mib(full),
            mib(copy), mib(r->optimizer), mib(r->shard), mib(r->act_slot), r->slots, mib(r->activations),
            mib(r->cp + r->pipeline + r->tp_window + r->fsdp_buffers + r->fp8_amaxes), mib(r->fsdp_gathered + r->fsdp_grads + r->granules),
            mib(r->held), mib(r->peak), ranks);
}

/* Whether two ranks' figures are the same (one line for both). */
static int same_figures(const titan_memory_rank *a, const titan_memory_rank *b) {
    return a->params == b->params && a->compute_copy == b->compute_copy && a->optimizer == b->optimizer &&
           a->optimizer_work == b->optimizer_work &&
           a->shard == b->shard && a->activations == b->activations && a->act_slot == b->act_slot &&
           a->slots == b->slots && a->cp == b->cp && a->pipeline == b->pipeline && a->tp_window == b->tp_window &&
           a->fsdp_gathered == b->fsdp_gathered && a->fsdp_grads == b->fsdp_grads &&
           a->fp8_amaxes == b->fp8_amaxes && a->fsdp_buffers == b->fsdp_buffers && a->fp8_scratch == b->fp8_scratch && a->held == b->held && a->peak == b->peak && a->c.pp == b->c.pp;
}

static const char *ac_name(titan_ac_mode ac, char *buf, size_t cap) {
    if (ac == TITAN_AC_NONE) return "none";
    if (ac == TITAN_AC_FULL) return "full";
    if (ac == TITAN_AC_OP) return "selective op";
    snprintf(buf, cap, "selective, every %dth layer", ac);
    return buf;
}

/* The job's line: layout, device, types, the step's shape; rank 0's plan
 * first, with the run's refusals. */
static titan_status print_header(const titan_job_config *cfg, const titan_llama_config *mc, int world,
                                 const titan_memory_device *dev, FILE *f) {
    plans p;
    TITAN_TRY(plan_rank(cfg, mc, world, 0, dev, &p));
    /* the run refuses the ring after the model's own checks (titan_llama_create_ex) */
    if (cfg->parallelism_cp_ring && p.lay.cp > 1)
        TITAN_TRY(titan_attention_cp_ring_refusal(dev->name, dev->host, dev->block_attention,
                                                  dev->windows && p.lay.cp <= TITAN_SUM_RANKS_MAX));
    /* and async tp where its tp group has no shared windows */
    if (cfg->parallelism_enable_async_tensor_parallel && p.lay.tp > 1)
        TITAN_TRY(titan_llama_async_tp_refusal(dev->windows && p.lay.tp <= TITAN_SUM_RANKS_MAX));
    char lay[256], acb[64];
    titan_layout_format(&p.lay, lay, sizeof lay);
    fprintf(f, "memory estimate: %d rank%s (%s), device %s%s, model %s (%zu parameters), micro-batch %d x %d, "
               "%d micro-batch%s a step, %d accumulation step%s\n",
            world, world == 1 ? "" : "s", lay, dev->name,
            dev->granule > titan_page_size() ? " (FSDP memory mapped in 2 MiB granules)" : "", cfg->model_flavor,
            titan_llama_num_params(mc), p.sh.mb, cfg->training_seq_len / p.lay.cp, p.sh.micro,
            p.sh.micro == 1 ? "" : "es", p.accum, p.accum == 1 ? "" : "s");
    fprintf(f, "  compute %s, FSDP gathers %s, reduces %s, %s; activation checkpointing %s; %s\n",
            titan_dtype_name(p.sh.compute), titan_dtype_name(p.fo.param_dtype), titan_dtype_name(p.fo.reduce_dtype),
            p.fm.nshards > 1 ? (p.fo.reshard_after_forward ? "resharding after forward" : "no reshard after forward")
                             : "no FSDP sharding",
            ac_name(p.sh.ac, acb, sizeof acb),
            p.lay.pp > 1 ? titan_pp_schedule_name(p.sh.sched) : "no pipeline");
    return TITAN_OK;
}

/* Ranks with the same figures share a line; at most this many lines. */
#define MAX_GROUPS 256

titan_status titan_memory_dry_run(const titan_job_config *cfg, const titan_llama_config *mc, int world,
                                  const titan_memory_device *dev, FILE *f) {
    TITAN_TRY(print_header(cfg, mc, world, dev, f));
    titan_memory_rank *figs = titan_alloc(MAX_GROUPS * sizeof *figs, "memory estimate");
    int *group = titan_alloc((size_t)world * sizeof *group, "memory estimate");
    titan_status st = figs && group ? TITAN_OK : TITAN_ERR_NOMEM;
    titan_memory_rank cur, host = {0};
    int ngroups = 0;
    double top = 0;
    for (int rank = 0; rank < world && st == TITAN_OK; rank++) {
        st = titan_memory_estimate(cfg, mc, world, rank, dev, &cur);
        if (st != TITAN_OK) break;
        if (cur.peak > top) top = cur.peak;
        if (cur.host_mirrors + cur.host_ckpt > host.host_mirrors + host.host_ckpt) host = cur;
        int g = 0;
        while (g < ngroups && !same_figures(&figs[g], &cur)) g++;
        if (g == ngroups && ngroups < MAX_GROUPS) figs[ngroups++] = cur;
        group[rank] = g < MAX_GROUPS ? g : MAX_GROUPS - 1; /* past the cap: the last line's */
    }
    if (st == TITAN_OK) {
        fprintf(f, "  backend memory in MiB (what the %s allocator counts%s); act/mb: activations a micro-batch in "
                   "flight keeps, x: micro-batches in flight\n",
                dev->name, dev->host ? "; under FSDP what is resident" : "");
        fprintf(f, "%3s %10s %8s %8s %8s %8s %3s %9s %9s %9s %9s %9s  %s\n", "pp", "param+grad", "bf16copy", "optim",
                "shard", "act/mb", "x", "act.arena", "comm.bufs", "fsdp.step", "held", "peak", "ranks");
        for (int g = 0; g < ngroups; g++) {
            char ranks[160];
            rank_list(group, world, g, ranks, sizeof ranks);
            print_row(f, &figs[g], ranks);
        }
        if (figs[0].optimizer_projected > 0) /* GaLore: the state's parts, rank 0's */
            fprintf(f, "  optim (%s, rank 0): state %.0f bytes: %.1f MiB of AdamW moments (the parameters GaLore "
                       "leaves on AdamW), %.1f MiB of low-rank state (projectors and moments); its step buffers "
                       "add %.1f MiB (in held)\n", cfg->optimizer_name, figs[0].optimizer,
                    mib(figs[0].optimizer - figs[0].optimizer_projected), mib(figs[0].optimizer_projected),
                    mib(figs[0].optimizer_work));
        if (figs[0].fp8_scratch > 0)
            fprintf(f, "  float8 (rank 0): casts of the largest float8 linear, %.1f MiB a call%s (in peak)\n",
                    mib(figs[0].fp8_scratch), cfg->float8_emulate || dev->host ? " with the emulated fp32 operands" : "");
        fprintf(f, "  peak of the job's ranks: %.1f MiB of backend memory\n", mib(top));
        fprintf(f, "  host memory a rank adds at most: %.1f MiB of collective mirrors, %.1f MiB of checkpoint "
                   "staging; shared memory: %.1f MiB for the world communicator\n",
                mib(host.host_mirrors), mib(host.host_ckpt), mib(cur.shm_segment));
    }
    titan_free(figs);
    titan_free(group);
    return st;
}

titan_status titan_memory_dry_run_job(const titan_job_config *cfg, int world, FILE *f) {
    titan_tokenizer *tok;
    char spec[TITAN_STR + 32];
    titan_config_tokenizer_spec(cfg, spec, sizeof spec); /* hf_assets_path's tokenizer.json too */
    TITAN_TRY(titan_tokenizer_open(&tok, spec));
    titan_llama_config mc;
    titan_status st = titan_setup_model_config(cfg, titan_tokenizer_vocab_size(tok), &mc);
    titan_tokenizer_free(tok);
    TITAN_TRY(st);
    TITAN_TRY(titan_mesh_check(cfg, world));
    if (cfg->parallelism_pipeline_parallel_schedule_csv[0])
        titan_warn("parallelism.pipeline_parallel_schedule_csv: the estimate keeps %s's micro-batches in flight "
                   "(the CSV's own order is not replayed here)", cfg->parallelism_pipeline_parallel_schedule);
    titan_memory_device dev;
    TITAN_TRY(titan_memory_device_of(cfg, &dev));
    return titan_memory_dry_run(cfg, &mc, world, &dev, f);
}
