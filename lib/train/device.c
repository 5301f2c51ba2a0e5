/* device.c - training.device: which backend a job computes on, and the peak
 * its MFU is relative to. */
#include "train/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

/* Whether the ranks' collectives may go over NCCL: the backend's library
 * carries the nccl communicator, and the communicators chosen (comm.backend
 * or TITAN_COMM, resolved by the mesh) are auto or nccl. */
static int use_nccl(const titan_backend *be, titan_comm_backend comm) {
    if (comm != TITAN_COMM_BACKEND_AUTO && comm != TITAN_COMM_BACKEND_NCCL) return 0;
    return (be->caps & TITAN_CAP_NCCL) != 0;
}

/* The GPU of local rank `local_rank` of `local_size`: its own where there are
 * enough, else round-robin over the `count` visible ones; *sharing: how
 * many ranks of this host land on that GPU. */
static int gpu_of(int local_rank, int local_size, int count, int *sharing) {
    int gpu = local_rank % count;
    *sharing = local_size / count + (gpu < local_size % count);
    return gpu;
}

titan_status titan_train_device_open(const char *device, titan_job_device kind, int deterministic, int world,
                                     int local_rank, int local_size, titan_comm_backend comm,
                                     titan_train_device *d) {
    memset(d, 0, sizeof *d);
    int sharing = 1; /* ranks of this host on this rank's GPU */
    /* Several ranks: one GPU each, by local rank (CUDA_VISIBLE_DEVICES picks
     * which); a fixed GPU would put every rank of a node on it. */
    char name[32];
    snprintf(name, sizeof name, "%s", device);
    if (world > 1 && kind == TITAN_JOB_DEVICE_CUDA_N) {
        titan_error(TITAN_ERR_USAGE, "training.device = \"%s\" with %d ranks: every rank would use that GPU",
                    device, world);
        titan_error_hint("use --training.device=cuda: each rank takes the GPU of its local rank (choose the GPUs "
                         "with CUDA_VISIBLE_DEVICES)");
        return TITAN_ERR_USAGE;
    }
    int gpus = 0;
    if (world > 1 && (kind == TITAN_JOB_DEVICE_CUDA || kind == TITAN_JOB_DEVICE_AUTO) &&
        titan_backend_cuda_device_count(&gpus) == TITAN_OK) {
        snprintf(name, sizeof name, "cuda:%d", gpu_of(local_rank, local_size, gpus, &sharing));
    } else if (world > 1 && kind == TITAN_JOB_DEVICE_CUDA) {
        titan_error_context("training.device");
        titan_error_hint("use --training.device=cpu");
        return titan_error_code();
    } else if (world > 1 && kind == TITAN_JOB_DEVICE_AUTO) {
        titan_error_clear(); /* below, auto opens "auto": the cpu, with the reason */
    }
    titan_status st = titan_backend_open_desc(name, &d->be, d->desc, sizeof d->desc);
    if (st != TITAN_OK && kind == TITAN_JOB_DEVICE_AUTO) {
        /* auto: every rank of the job falls back alike (the same install) */
        snprintf(d->desc, sizeof d->desc, "auto: %s", titan_error_message());
        titan_error_clear();
        d->be = titan_backend_cpu();
        st = TITAN_OK;
    }
    if (st != TITAN_OK) {
        titan_error_context("training.device%s", world > 1 ? " (this rank's GPU: its local rank)" : "");
        titan_error_hint("use --training.device=cpu");
        return st;
    }
    d->host = d->be->host;
    /* cuDNN's fused attention is the faster on Hopper but its backward adds
     * with atomics: the backend takes it unless the run must repeat bit for bit. */
    if (d->be->caps & TITAN_CAP_ATTENTION_CUDNN)
        d->be->set_option(TITAN_OPT_ATTENTION_CUDNN, !deterministic);
    /* NCCL refuses two ranks on one GPU: ranks that share one talk through
     * shared memory, staged through the host, each held to its share of
     * the GPU's memory. */
    int shared = world > 1 && gpus > 0 && (d->be->caps & TITAN_CAP_GPU) && local_size > gpus;
    if (shared) d->be->set_option(TITAN_OPT_DEVICE_SHARE, sharing);
    d->nccl = world > 1 && !shared && use_nccl(d->be, comm);
    if (shared) {
        if (local_rank == 0)
            titan_info("%d ranks on %d GPU%s of this host, round-robin: shared-memory communicators through host copies, "
                   "each rank held to its share of its GPU's memory; a test and development mode, not for speed "
                   "(NCCL needs a GPU per rank)", local_size, gpus, gpus == 1 ? "" : "s");
    } else if (world > 1 && (d->be->caps & TITAN_CAP_GPU) && !d->nccl)
        titan_warn("%s: data parallelism over %s through host copies (%s%s): slow", name,
                   comm == TITAN_COMM_BACKEND_MPI ? "MPI" : "shared memory",
                   comm == TITAN_COMM_BACKEND_AUTO ? "libtitan-cuda.so was built without NCCL" : "comm.backend = ",
                   comm == TITAN_COMM_BACKEND_AUTO ? "" : titan_comm_backend_name(comm));
    return TITAN_OK;
}

/* Dense peaks from NVIDIA's datasheets (without sparsity), by a piece of the
 * name cudaGetDeviceProperties reports; the first match wins. fp32: CUDA
 * cores, no TF32 (the fp32 kernels use none); bf16: tensor cores. */
static const struct {
    const char *has, *also; /* also: NULL or a second piece the name must hold */
    double fp32, bf16;
} PEAK[] = {
    {"H100", "PCIe", 51e12, 756e12}, {"H100", "NVL", 60e12, 835e12},
    {"H100", NULL, 67e12, 989e12}, /* SXM: "H100 80GB HBM3" */
    {"H200", "NVL", 60e12, 835e12},  {"H200", NULL, 67e12, 989e12}, /* GH200 too */
    {"A100", NULL, 19.5e12, 312e12}, {"L40S", NULL, 91.6e12, 362e12},
};

double titan_train_device_peak(const titan_train_device *d, titan_dtype compute, double configured,
                               const char **source) {
    if (configured > 0) {
        *source = "from config";
        return configured;
    }
    /* bf16 on the CPU widens to fp32 GEMMs: the fp32 peak is its ceiling. */
    if (d->be->caps & TITAN_CAP_CPU) {
        *source = "measured fp32 GEMM";
        return titan_backend_cpu_peak_flops();
    }
    /* A MIG slice has a fraction of the GPU: the datasheet would flatter. */
    if ((d->be->caps & TITAN_CAP_GPU) && !strstr(d->desc, "MIG")) {
        int bf16 = compute == TITAN_DTYPE_BF16;
        for (size_t i = 0; i < sizeof PEAK / sizeof PEAK[0]; i++) {
            if (!strstr(d->desc, PEAK[i].has)) continue;
            if (PEAK[i].also && !strstr(d->desc, PEAK[i].also)) continue;
            *source = bf16 ? "dense bf16 tensor-core datasheet peak of this GPU"
                           : "fp32 datasheet peak of this GPU";
            return bf16 ? PEAK[i].bf16 : PEAK[i].fp32;
        }
    }
    *source = "unknown for this device: MFU not computed; set metrics.peak_flops";
    return 0.0;
}
