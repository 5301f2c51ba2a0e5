/* device.h - the device titan-train computes on (training.device): opening
 * it for a job, whether its memory is host memory, and its peak FLOP/s for
 * MFU. */
#ifndef TITAN_TRAIN_DEVICE_H
#define TITAN_TRAIN_DEVICE_H

#include "backend/backend.h"
#include "comm/comm.h"
#include "job/config.h"

typedef struct {
    const titan_backend *be;
    /* The backend's buffers are host memory (the CPU backend): the state is
     * loaded and saved in place, without staging copies. */
    int host;
    /* Several ranks on cuda with NCCL: the job's communicators are nccl ones
     * (mesh.h), else shared memory (device data staged through the host). */
    int nccl;
    /* What was opened, for the info line: "NVIDIA H100 ..." (cuda), the
     * reason auto chose the cpu, or "". */
    char desc[512];
} titan_train_device;

/* Opens training.device for a job of `world` ranks: "cpu"; "cuda" (one
 * rank: GPU 0; several: the GPU of the rank's local rank, of `local_size`
 * ranks on this host; round-robin where the host has fewer GPUs, those
 * ranks then sharing a GPU over shared-memory communicators) or "cuda:N" (one
 * rank only: with several it would be every rank's GPU, a usage error);
 * "auto": cuda as above when it opens, else cpu; "cpu-guard" (backend.h).
 * A device that does not open is a usage error "training.device: cuda:
 * <cause>" with a hint. comm: the communicators the mesh chose (comm.backend
 * or TITAN_COMM): shm or mpi keeps several cuda ranks off NCCL.
 * deterministic (training.deterministic): kernels that repeat bit for bit
 * even where slower; else cuda may take cuDNN's attention, whose backward
 * does not. kind is device's choice (titan_config resolves it); device is
 * the string, which names the backend and goes into messages. */
titan_status titan_train_device_open(const char *device, titan_job_device kind, int deterministic, int world,
                                     int local_rank, int local_size, titan_comm_backend comm,
                                     titan_train_device *out);

/* One rank's peak FLOP/s for MFU and where it comes from (*source, for the
 * info line): configured (> 0) wins; on the CPU backends the best fp32 GEMM
 * measured now (bf16 compute widens to fp32 GEMMs there); on cuda the GPU's
 * dense datasheet peak for the compute type (fp32 without TF32, or bf16
 * tensor cores) when the GPU is in the table, else 0 (MFU unknown). */
double titan_train_device_peak(const titan_train_device *d, titan_dtype compute, double configured,
                               const char **source);

#endif
