/* device.c - training.device: which backend a job computes on, and the peak
 * its MFU is relative to. */
#include "train/device.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

titan_status titan_train_device_open(const char *device, int world, titan_train_device *d) {
    memset(d, 0, sizeof *d);
    int gpu = strncmp(device, "cuda", 4) == 0 || strcmp(device, "cpu-guard") == 0;
    if (gpu && world > 1) {
        /* Sharded state would need the FSDP staging buffers on the device and a
         * GPU communicator; refused before any rank touches a GPU. */
        titan_error(TITAN_ERR_USAGE,
                    "training.device = \"%s\" with %d ranks: %s with several ranks needs the nccl communicator: "
                    "not yet", device, world, strcmp(device, "cpu-guard") == 0 ? "cpu-guard" : "cuda");
        titan_error_hint("train on one GPU as one process (no --nproc, mpirun or srun), or use "
                         "--training.device=cpu for data parallelism");
        return TITAN_ERR_USAGE;
    }
    const char *name = device;
    if (strcmp(device, "auto") == 0 && world > 1) name = "cpu";
    titan_status st = titan_backend_open_desc(name, &d->be, d->desc, sizeof d->desc);
    if (st != TITAN_OK) {
        titan_error_context("training.device");
        titan_error_hint("use --training.device=cpu");
        return st;
    }
    if (name != device)
        snprintf(d->desc, sizeof d->desc, "auto: %d ranks (cuda with several ranks needs the nccl communicator: not yet)",
                 world);
    d->host = d->be == titan_backend_cpu();
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
    if (strncmp(d->be->name, "cpu", 3) == 0) {
        *source = "measured fp32 GEMM";
        return titan_backend_cpu_peak_flops();
    }
    /* A MIG slice has a fraction of the GPU: the datasheet would flatter. */
    if (strcmp(d->be->name, "cuda") == 0 && !strstr(d->desc, "MIG")) {
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
