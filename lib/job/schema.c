/* schema.c - torchtitan's TOML job schema, key by key: its last release
 * (job_config.py before torchtitan moved to Python configs; the key list is
 * tests/fixtures/torchtitan_schema.txt) and the older keys titan still
 * reads. Whether titan implements a key, accepts it as meaningless here or
 * refuses it follows from keys.c's tables; this one says why, and gives
 * torchtitan's default where titan's may differ (titan-train --print-keys,
 * titan-train(1)'s key table). */
#include "keys.h"

#include <string.h>

#define LAST(sec, key, def, why) {sec, key, 0, def, why}
#define OLDER(sec, key, why) {sec, key, 1, NULL, why}

static const char compile_why[] =
    "titan's kernels are compiled and fused ahead of time (C, BLAS, CUDA): there is nothing to compile";
static const char dataloader_why[] =
    "titan reads memory-mapped token shards in the training process: no loader workers, pinned staging or "
    "prefetch queue to configure";
static const char ft_why[] = "only with fault_tolerance.enable, which titan refuses";
static const char mx_why[] =
    "read only when model.converters names MX (mxfp8) or grouped (MoE) GEMMs, which titan refuses";

const key_schema titan_job_schema[] = {
    LAST("job", "config_file", NULL,
         "--job.config_file on titan-init's and titan-train's command line names the job file; inside one it "
         "would name itself"),
    LAST("job", "dump_folder", "\"./outputs\"", NULL),
    LAST("job", "description", NULL, NULL),
    LAST("job", "print_config", NULL,
         "output only: titan-train --print-config prints the resolved job, and RUN/config.toml holds it"),
    LAST("job", "save_config_file", NULL,
         "titan writes the resolved job to RUN/config.toml, not to another file; copy it from there"),
    LAST("job", "custom_config_module", NULL, "a Python module extending the schema: titan runs no Python"),

    LAST("profiling", "enable_profiling", "false", NULL),
    LAST("profiling", "save_traces_folder", "\"profile_traces\"", NULL),
    LAST("profiling", "profile_freq", "10", NULL),
    LAST("profiling", "profiler_active", NULL, "titan profiles one step in each profile_freq: only 1 is meant"),
    LAST("profiling", "profiler_warmup", NULL,
         "titan's op timer has no start-up cost to skip: it needs no warmup steps"),
    LAST("profiling", "enable_memory_snapshot", NULL,
         "the CUDA caching allocator's snapshot (a pickle for PyTorch's viewer) has no counterpart: titan plans "
         "its memory ahead and logs it each step"),
    LAST("profiling", "save_memory_snapshot_folder", NULL, "only with enable_memory_snapshot, which titan refuses"),

    LAST("metrics", "log_freq", "10", NULL),
    LAST("metrics", "enable_tensorboard", "false", NULL),
    LAST("metrics", "disable_color_printing", NULL, "titan prints no colours"),
    LAST("metrics", "save_tb_folder", "\"tb\"", NULL),
    LAST("metrics", "save_for_all_ranks", NULL,
         "titan's metrics are reduced over the ranks and written once, by rank 0"),
    LAST("metrics", "enable_wandb", NULL,
         "Weights & Biases' client is not built in; wandb sync --sync-tensorboard uploads titan's TensorBoard files"),

    LAST("model", "name", "\"llama3\"", NULL),
    LAST("model", "flavor", "\"debugmodel\"", NULL),
    LAST("model", "hf_assets_path", NULL,
         "torchtitan's default is a folder of its own repository; titan's is none (the byte tokenizer)"),
    LAST("model", "tokenizer_path", NULL,
         "torchtitan's deprecated tokenizer path: use model.hf_assets_path (a folder with tokenizer.json) or "
         "model.tokenizer (tiktoken:FILE, hf:FILE)"),
    LAST("model", "converters", "[]", NULL),
    LAST("model", "print_after_conversion", NULL, "output only, and titan converts no model"),

    LAST("optimizer", "name", "\"AdamW\"", NULL),
    LAST("optimizer", "lr", "0.0008", NULL),
    LAST("optimizer", "beta1", "0.9", NULL),
    LAST("optimizer", "beta2", "0.95", NULL),
    LAST("optimizer", "eps", "1e-08", NULL),
    LAST("optimizer", "weight_decay", "0.1", NULL),
    LAST("optimizer", "implementation", NULL,
         "PyTorch's three code paths (for-loop, foreach, fused) of one AdamW update: titan has one fused kernel"),
    LAST("optimizer", "early_step_in_backward", "false",
         "AdamW under FSDP only (see Optimizer step in the backward)"),

    LAST("lr_scheduler", "warmup_steps", "200", NULL),
    LAST("lr_scheduler", "total_steps", "0", "torchtitan's None (training.steps) is titan's 0"),
    LAST("lr_scheduler", "decay_ratio", "-1", "torchtitan's None (decay after warmup) is titan's -1"),
    LAST("lr_scheduler", "decay_type", "\"linear\"", NULL),
    LAST("lr_scheduler", "min_lr_factor", "0", NULL),

    LAST("training", "dataset", NULL,
         "torchtitan's names (c4, c4_test) are its Hugging Face loaders: titan reads token shards, so a name "
         "that is no shard directory is refused when training starts, saying how to make one"),
    LAST("training", "dataset_path", "\"\"", NULL),
    LAST("training", "local_batch_size", "8", NULL),
    LAST("training", "global_batch_size", "-1", NULL),
    LAST("training", "seq_len", "2048", NULL),
    LAST("training", "max_norm", "1.0", NULL),
    LAST("training", "steps", "10000", NULL),
    LAST("training", "enable_cpu_offload", NULL,
         "FSDP's offload of parameters, gradients and AdamW state to host memory is not implemented: shard "
         "over more ranks, or recompute activations"),
    LAST("training", "dtype", NULL,
         "parameters, gradients and AdamW state are always float32 here; bfloat16 storage without float32 "
         "master weights is not implemented (mixed_precision_param = \"bfloat16\" computes in bf16)"),
    LAST("training", "mixed_precision_param", "\"bfloat16\"",
         "titan's default is float32: on the CPU bf16 buys little, and float32 runs match the reference "
         "exactly"),
    LAST("training", "mixed_precision_reduce", "\"float32\"", NULL),
    LAST("training", "gc_freq", NULL, "Python's garbage collector: titan has none"),
    LAST("training", "gc_debug", NULL, "Python's garbage collector: titan has none"),
    LAST("training.dataloader", "num_workers", NULL, dataloader_why),
    LAST("training.dataloader", "persistent_workers", NULL, dataloader_why),
    LAST("training.dataloader", "pin_memory", NULL, dataloader_why),
    LAST("training.dataloader", "prefetch_factor", NULL, dataloader_why),

    LAST("parallelism", "data_parallel_replicate_degree", "1", NULL),
    LAST("parallelism", "data_parallel_shard_degree", "-1", NULL),
    LAST("parallelism", "fsdp_reshard_after_forward", "\"default\"", NULL),
    LAST("parallelism", "tensor_parallel_degree", "1", NULL),
    LAST("parallelism", "disable_loss_parallel", NULL,
         "titan's tensor-parallel loss is always vocabulary-parallel; gathering the whole logits is not "
         "implemented"),
    LAST("parallelism", "enable_async_tensor_parallel", "false", NULL),
    LAST("parallelism", "pipeline_parallel_degree", "1", NULL),
    LAST("parallelism", "module_fqns_per_model_part", "[]",
         "torchtitan's None is titan's []; whole blocks only (tok_embeddings, layers.N, norm, output)"),
    LAST("parallelism", "pipeline_parallel_first_stage_less_layers", "1", NULL),
    LAST("parallelism", "pipeline_parallel_last_stage_less_layers", "1", NULL),
    LAST("parallelism", "pipeline_parallel_layers_per_stage", "-1", "torchtitan's None is titan's -1"),
    LAST("parallelism", "pipeline_parallel_schedule", "\"1F1B\"", NULL),
    LAST("parallelism", "pipeline_parallel_schedule_csv", "\"\"", NULL),
    LAST("parallelism", "pipeline_parallel_microbatch_size", "1", NULL),
    LAST("parallelism", "pipeline_parallel_expert_parallel_overlap", NULL,
         "Llama 3 has no experts: nothing to overlap"),
    LAST("parallelism", "context_parallel_degree", "1", NULL),
    LAST("parallelism", "context_parallel_load_balancer", NULL,
         "titan's context parallelism always balances head to tail (rank r holds chunks r and 2cp-1-r); "
         "other balancers are not implemented"),
    LAST("parallelism", "context_parallel_rotate_method", "\"allgather\"", NULL),
    LAST("parallelism", "expert_parallel_degree", NULL, "Llama 3 has no experts: only 1 is meant"),
    LAST("parallelism", "expert_tensor_parallel_degree", NULL, "Llama 3 has no experts: only 1 is meant"),
    LAST("parallelism", "expert_parallel_comm_backend", NULL, "Llama 3 has no experts"),

    LAST("checkpoint", "enable", "false",
         "titan's default is true: a run always resumes from its latest checkpoint"),
    LAST("checkpoint", "enable_ft_dataloader_checkpoints", NULL, ft_why),
    LAST("checkpoint", "folder", "\"checkpoint\"", NULL),
    LAST("checkpoint", "interval", "500", NULL),
    LAST("checkpoint", "initial_load_path", "\"\"", "read by titan-init, which writes the run's seed checkpoint"),
    LAST("checkpoint", "initial_load_model_only", "true", "false (a whole training state) is refused"),
    LAST("checkpoint", "initial_load_in_hf", "false", NULL),
    LAST("checkpoint", "initial_load_in_hf_quantized", NULL,
         "quantized Hugging Face weights are not read: initial_load_in_hf reads fp32, bf16 and fp16 safetensors"),
    LAST("checkpoint", "last_save_model_only", "true",
         "titan's default is false: a run that reached training.steps can still be continued"),
    LAST("checkpoint", "last_save_in_hf", "false", NULL),
    LAST("checkpoint", "export_dtype", "\"float32\"", NULL),
    LAST("checkpoint", "async_mode", "\"disabled\"", NULL),
    LAST("checkpoint", "keep_latest_k", "10", NULL),
    LAST("checkpoint", "load_step", "-1", NULL),
    LAST("checkpoint", "exclude_from_loading", "[]", NULL),
    LAST("checkpoint", "enable_first_step_checkpoint", "false", NULL),
    LAST("checkpoint", "create_seed_checkpoint", "false",
         "titan-init writes every run's seed checkpoint (step 0): true is refused"),
    LAST("checkpoint", "load_only", "false", NULL),

    LAST("activation_checkpoint", "mode", "\"selective\"",
         "titan's default is none (the fastest); memory_budget is refused"),
    LAST("activation_checkpoint", "selective_ac_option", "\"2\"", NULL),
    LAST("activation_checkpoint", "per_op_sac_force_recompute_mm_shapes_by_fqns", NULL,
         "the default names the MoE router, which Llama 3 lacks; other matmuls forced to recompute are not "
         "implemented"),
    LAST("activation_checkpoint", "early_stop", NULL, "speed only: titan recomputes one block at a time"),
    LAST("activation_checkpoint", "memory_budget", NULL, "only with mode = \"memory_budget\", which titan refuses"),
    LAST("activation_checkpoint", "visualize_memory_budget_pareto", NULL,
         "only with mode = \"memory_budget\", which titan refuses"),
    LAST("activation_checkpoint", "preserve_rng_state", NULL, "titan's forward draws no random numbers (no dropout)"),
    LAST("activation_checkpoint", "determinism_check", NULL,
         "PyTorch's check of recomputed tensors' metadata: titan recomputes with the same kernels"),
    LAST("activation_checkpoint", "debug", NULL, "PyTorch's recompute logging"),

    LAST("compile", "enable", NULL, compile_why),
    LAST("compile", "components", NULL, compile_why),
    LAST("compile", "backend", NULL, compile_why),

    LAST("quantize.linear.float8", "enable_fsdp_float8_all_gather", "false", NULL),
    LAST("quantize.linear.float8", "precompute_float8_dynamic_scale_for_fsdp", "false", NULL),
    LAST("quantize.linear.float8", "recipe_name", NULL, NULL),
    LAST("quantize.linear.float8", "filter_fqns", "[]", NULL),
    LAST("quantize.linear.float8", "emulate", "false", NULL),
    LAST("quantize.linear.mx", "mxfp8_dim1_cast_kernel_choice", NULL, mx_why),
    LAST("quantize.linear.mx", "recipe_name", NULL, mx_why),
    LAST("quantize.linear.mx", "filter_fqns", NULL, mx_why),
    LAST("quantize.grouped_mm.float8", "fqns", NULL, mx_why),
    LAST("quantize.grouped_mm.mx", "recipe_name", NULL, mx_why),
    LAST("quantize.grouped_mm.mx", "fqns", NULL, mx_why),

    LAST("comm", "init_timeout_seconds", NULL,
         "titan's ranks meet within comm.train_timeout_seconds (or $TITAN_COMM_TIMEOUT)"),
    LAST("comm", "train_timeout_seconds", "100", "titan's default is 300 s ($TITAN_COMM_TIMEOUT overrides it)"),
    LAST("comm", "trace_buf_size", "20000", NULL),
    LAST("comm", "save_traces_folder", "\"comm_traces\"", NULL),
    LAST("comm", "save_traces_file_prefix", NULL,
         "titan names its dumps rank-R.json, which titan-trace hang reads; only torchtitan's default is meant"),
    LAST("comm", "mode", NULL,
         "a fake or local-tensor backend, to check a layout without GPUs, is not implemented"),

    LAST("memory_estimation", "enable", NULL, "the memory dry run is not implemented yet"),
    LAST("memory_estimation", "disable_fake_mode", NULL, "only with memory_estimation.enable"),

    LAST("fault_tolerance", "enable", NULL,
         "torchft's replica groups (a lighthouse, per-step quorums) are not implemented: titan restarts the "
         "whole job from its latest checkpoint (titan-train --max-restarts, or a Slurm loop)"),
    LAST("fault_tolerance", "process_group", NULL, ft_why),
    LAST("fault_tolerance", "process_group_timeout_ms", NULL, ft_why),
    LAST("fault_tolerance", "replica_id", NULL, ft_why),
    LAST("fault_tolerance", "group_size", NULL, ft_why),
    LAST("fault_tolerance", "min_replica_size", NULL, ft_why),
    LAST("fault_tolerance", "semi_sync_method", NULL, ft_why),

    LAST("experimental", "custom_import", NULL, "a Python module to import: titan runs no Python"),
    LAST("experimental", "custom_args_module", NULL, "a Python module extending the schema: titan runs no Python"),

    LAST("validation", "enable", "false", NULL),
    LAST("validation", "dataset", NULL, "as training.dataset"),
    LAST("validation", "dataset_path", "\"\"", NULL),
    LAST("validation", "local_batch_size", "8", "titan's -1 takes training.local_batch_size, which it must equal"),
    LAST("validation", "seq_len", "2048", "titan's -1 takes training.seq_len, which it must equal"),
    LAST("validation", "freq", "10", NULL),
    LAST("validation", "steps", "-1", NULL),
    LAST("validation.dataloader", "num_workers", NULL, dataloader_why),
    LAST("validation.dataloader", "persistent_workers", NULL, dataloader_why),
    LAST("validation.dataloader", "pin_memory", NULL, dataloader_why),
    LAST("validation.dataloader", "prefetch_factor", NULL, dataloader_why),

    LAST("debug", "seed", NULL,
         "titan's training.seed: weight init and data order; unset, torchtitan draws a random seed and titan "
         "uses 0"),
    LAST("debug", "deterministic", "false", "titan's training.deterministic; titan's CPU kernels are always "
         "deterministic, this also picks repeatable CUDA attention"),
    LAST("debug", "deterministic_warn_only", NULL,
         "no titan kernel is nondeterministic under training.deterministic: nothing to warn about"),
    LAST("debug", "moe_force_load_balance", NULL, "Llama 3 has no experts"),

    OLDER("job", "use_for_integration_test", "torchtitan's test marker"),
    OLDER("job", "print_args", "output only"),
    OLDER("metrics", "rank_0_only", "titan's metrics are written by rank 0"),
    OLDER("model", "norm_type", "titan's Llama uses RMSNorm: only \"rmsnorm\" is meant"),
    OLDER("lr_scheduler", "lr_min", "the older min_lr_factor: only 0 is meant"),
    OLDER("training", "seed", "the seed of weight init and data order (torchtitan's debug.seed)"),
    OLDER("training", "deterministic", "repeatable kernels (torchtitan's debug.deterministic)"),
    OLDER("training", "compile", compile_why),
    OLDER("compile", "enable_async_tensor_parallel",
          "torchtitan's later spelling of parallelism.enable_async_tensor_parallel"),
    OLDER("parallelism", "enable_compiled_autograd", compile_why),
    OLDER("parallelism", "pipeline_parallel_split_points", "the older module_fqns_per_model_part: only [] is meant"),
    OLDER("checkpoint", "enable_checkpoint", "the older checkpoint.enable"),
    OLDER("checkpoint", "model_weights_only", "the older last_save_model_only"),
    OLDER("float8", "enable_fsdp_float8_all_gather", NULL),
    OLDER("float8", "precompute_float8_dynamic_scale_for_fsdp", NULL),
    OLDER("float8", "force_recompute_fp8_weight_in_bwd",
          "torchao's recompute of the float8 weight in the backward (an FSDP memory trade) is not implemented: "
          "only false"),
    OLDER("float8", "recipe_name", NULL),
    OLDER("float8", "filter_fqns", NULL),
    OLDER("float8", "emulate", NULL),
    OLDER("float8", "moe_fqns_prototype", "titan's Llama has no MoE layers: only []"),
    OLDER("mx", "mxfp8_dim1_cast_kernel_choice", mx_why),
    OLDER("mx", "recipe_name", mx_why),
    OLDER("mx", "filter_fqns", mx_why),
    OLDER("mx", "moe_fqns_prototype", mx_why),
};
const int titan_job_nschema = (int)(sizeof titan_job_schema / sizeof titan_job_schema[0]);

const key_schema *titan_job_find_schema(const char *section, const char *key) {
    for (int i = 0; i < titan_job_nschema; i++)
        if (!strcmp(titan_job_schema[i].section, section) && !strcmp(titan_job_schema[i].key, key))
            return &titan_job_schema[i];
    return NULL;
}
