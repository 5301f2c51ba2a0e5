/* memory_estimate.h - the memory dry run: what every rank of a job holds,
 * worked out from the same plan code that sets the run up (setup.h's
 * shape and options, the model's titan_llama_plan_memory, FSDP's
 * titan_fsdp_plan_memory, the pipeline's slots), without allocating any of
 * it: on a machine without a GPU too, for any world size.
 *
 * Backend memory is what the backend's allocator counts (backend.h's
 * memory(): cudaMalloc'd bytes and committed granules on cuda, committed
 * pages on cpu-guard, buffers on cpu); host memory (staging copies,
 * checkpoint snapshots, shared-memory segments) is listed apart. */
#ifndef TITAN_TRAIN_MEMORY_ESTIMATE_H
#define TITAN_TRAIN_MEMORY_ESTIMATE_H

#include <stdio.h>

#include "job/config.h"
#include "model/llama_config.h"
#include "tensor/layout.h"

/* How the device keeps memory. */
typedef struct {
    int host;          /* the backend's memory is host memory (cpu) */
    int device_comm;   /* collectives take backend memory (nccl; any comm on cpu): no host mirrors */
    /* FSDP's releasable buffers are held by this unit (host pages, a GPU's
     * mapping granules); 0: wholly, from the start (a GPU without VMM, the
     * CUDA emulator) */
    size_t granule;
    const char *name;  /* for the report */
    titan_job_comm comm; /* comm.backend, or TITAN_COMM where it is set (as the run's mesh takes it) */
    /* what the cp ring needs (titan_attention_cp_ring_refusal's facts):
     * block attention (cpu, cuda; not cpu-guard), and communicators with
     * shared windows over the backend's buffers (shm, or auto on cpu: one
     * host; not nccl, mpi or cpu-guard) */
    int block_attention, windows;
} titan_memory_device;

/* The device of a job's training.device and comm.backend, as the run
 * would open it (auto: cuda, over nccl); TITAN_ERR_USAGE where TITAN_COMM
 * names no communicator. */
titan_status titan_memory_device_of(const titan_job_config *cfg, titan_memory_device *out);

/* One rank's estimate, bytes. */
typedef struct {
    int rank;
    titan_layout_coord c;
    size_t nparams;          /* this rank's share of the model (tp shard, pp stages) */
    /* backend memory, held from setup on */
    double params, grads;    /* fp32; under FSDP committed a unit at a time (fsdp_* below) */
    double compute_copy;     /* the bf16 copy of the parameters (0 in fp32) */
    double shard;            /* FSDP: the rank's fp32 shard of parameters and gradients */
    double optimizer;        /* optimizer state: AdamW's two fp32 moments over the shard; GaLore's
                              * packed moments of the parameters on AdamW, projectors, low-rank moments */
    double optimizer_projected; /* of it, GaLore's low-rank state */
    double optimizer_work;   /* GaLore's step buffers (held from setup on) */
    double activations;      /* the arena: every slot, scratch, RoPE tables */
    double act_slot;         /* what one micro-batch in flight keeps */
    int slots;               /* micro-batches in flight */
    double cp;               /* context parallelism: the all-gather's whole-sequence keys and values, or
                              * the ring's own buffers */
    double pipeline;         /* outgoing stage gradients, a slot's each (device comm) */
    double tp_window;        /* shared windows over device memory: async tp's (2 x N x C x dtype) and the
                              * cp ring's (2 x cp x the rank's keys and values) */
    double fsdp_buffers;     /* FSDP's staging buffers (titan_fsdp_staging, in comm.bufs) */
    double fp8_amaxes;       /* float8's amax buffers, allocated with the recipe: those the forward's
                              * casts keep for the backward, tp's group reductions (in comm.bufs) */
    /* backend memory a step adds (FSDP) */
    double fsdp_gathered;    /* gathered parameters held at once */
    double fsdp_grads;       /* full gradients held before their reduce-scatter */
    double fp8_scratch;      /* float8: the largest linear's casts (and emulated operands) a call,
                              * with tp's amax buffers (in comm.bufs) */
    double granules;         /* partial granules left mapped at the units' ends */
    int by_unit;             /* FSDP: the full buffers are held a unit at a time (fsdp_* below) */
    double held;             /* after setup */
    double peak;             /* during a step */
    /* host memory */
    double host_mirrors;     /* host copies of collectives' buffers (host-only communicators) */
    double host_ckpt;        /* checkpoint staging or async snapshot */
    double shm_segment;      /* the world communicator's shared-memory segment (shared by a host's ranks) */
} titan_memory_rank;

/* Rank `rank` of a job of `world` ranks of cfg on dev, for model mc. */
titan_status titan_memory_estimate(const titan_job_config *cfg, const titan_llama_config *mc, int world, int rank,
                                   const titan_memory_device *dev, titan_memory_rank *out);

/* The dry run's report: the layout, then every rank (ranks with the same
 * figures on one line), then the host memory, to f. A cp ring that dev
 * cannot run is refused as the run refuses it (TITAN_ERR_USAGE, the same
 * message). */
titan_status titan_memory_dry_run(const titan_job_config *cfg, const titan_llama_config *mc, int world,
                                  const titan_memory_device *dev, FILE *f);

/* The dry run of job cfg for `world` ranks: its tokenizer's vocabulary
 * for the model, the layout checked, the report to f. */
titan_status titan_memory_dry_run_job(const titan_job_config *cfg, int world, FILE *f);

#endif
