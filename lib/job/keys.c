/* keys.c - the job config's key table: the one source of every key's
 * default, check, choices and doc line (keys.h). */
#include "keys.h"

/* Enum fields are written through an int. */
_Static_assert(sizeof(titan_job_dtype) == sizeof(int) && sizeof(titan_job_device) == sizeof(int) &&
                   sizeof(titan_job_pp_schedule) == sizeof(int) && sizeof(titan_job_reshard) == sizeof(int) &&
                   sizeof(titan_job_async) == sizeof(int) && sizeof(titan_job_ac) == sizeof(int),
               "enum fields are int-sized");

#define OFF(f) offsetof(titan_job_config, f)
#define STR(sec, key, f, def, choices, flags, doc) {sec, key, T_STR, OFF(f), def, 0, choices, 0, 0, flags, doc, 0}
#define INT(sec, key, f, def, lo, flags, doc) {sec, key, T_INT, OFF(f), NULL, def, NULL, lo, 0, F_LO | (flags), doc, 0}
#define NUM(sec, key, f, def, lo, hi, flags, doc) {sec, key, T_DOUBLE, OFF(f), NULL, def, NULL, lo, hi, flags, doc, 0}
#define BOOL(sec, key, f, def, doc) {sec, key, T_BOOL, OFF(f), NULL, def, NULL, 0, 0, 0, doc, 0}

/* A string key with a fixed list of choices, resolved into enum field ef
 * (its values follow the order of choices). */
#define ENUM(sec, key, f, ef, def, choices, doc) {sec, key, T_STR, OFF(f), def, 0, choices, 0, 0, F_ENUM, doc, OFF(ef)}

/* Defaults follow torchtitan's JobConfig where the key exists there. */
const key_def titan_job_keys[] = {
    STR("job", "description", job_description, "", NULL, 0, "free text describing the run"),
    STR("job", "dump_folder", job_dump_folder, "./outputs", NULL, F_NONEMPTY,
        "run directory: titan-init creates it, titan-train writes checkpoints and metrics there"),

    STR("model", "name", model_name, "llama3", "llama3", 0, "model family"),
    STR("model", "flavor", model_flavor, "debugmodel", "debugmodel,1B,3B,8B,70B,405B", 0,
        "size preset; the keys below override single dimensions of it"),
    STR("model", "tokenizer", model_tokenizer, "byte", NULL, F_NONEMPTY,
        "tokenizer: \"byte\" (raw bytes plus specials), \"tiktoken:PATH\" or \"hf:PATH\" (titan-init writes PATH "
        "absolute; every checkpoint carries a copy of the file)"),
    INT("model", "dim", model_dim, 0, 0, 0, "model width; 0 = the flavor's"),
    INT("model", "n_layers", model_n_layers, 0, 0, 0, "transformer blocks; 0 = the flavor's"),
    INT("model", "n_heads", model_n_heads, 0, 0, 0, "attention heads; 0 = the flavor's"),
    INT("model", "n_kv_heads", model_n_kv_heads, 0, 0, 0,
        "key/value heads (GQA); 0 = the flavor's, or n_heads when n_heads is set"),
    INT("model", "multiple_of", model_multiple_of, 0, 0, 0, "FFN hidden size rounds up to this; 0 = the flavor's"),
    NUM("model", "ffn_dim_multiplier", model_ffn_dim_multiplier, -1, 0, 0, F_LO | F_MINUS1,
        "FFN hidden size multiplier; -1 = the flavor's, 0 = none"),
    NUM("model", "norm_eps", model_norm_eps, 0, 0, 0, F_LO, "RMSNorm epsilon; 0 = the flavor's"),
    NUM("model", "rope_theta", model_rope_theta, 0, 0, 0, F_LO, "RoPE base frequency; 0 = the flavor's"),
    NUM("model", "rope_scaling_factor", model_rope_scaling_factor, -1, 0, 0, F_LO | F_MINUS1,
        "Llama 3.1 RoPE scaling factor; -1 = the flavor's, 0 = no scaling"),
    {"model", "tie_embeddings", T_TRI, OFF(model_tie_embeddings), NULL, -1, NULL, 0, 0, 0,
     "output head shares the token embedding; -1 = the flavor's", 0},

    STR("optimizer", "name", optimizer_name, "AdamW", "AdamW", 0, "optimizer"),
    NUM("optimizer", "lr", optimizer_lr, 8e-4, 0, 0, F_LO | F_LO_OPEN, "peak learning rate"),
    NUM("optimizer", "beta1", optimizer_beta1, 0.9, 0, 1, F_LO | F_HI | F_HI_OPEN, "AdamW first-moment decay"),
    NUM("optimizer", "beta2", optimizer_beta2, 0.95, 0, 1, F_LO | F_HI | F_HI_OPEN, "AdamW second-moment decay"),
    NUM("optimizer", "eps", optimizer_eps, 1e-8, 0, 0, F_LO | F_LO_OPEN, "AdamW epsilon"),
    NUM("optimizer", "weight_decay", optimizer_weight_decay, 0.1, 0, 0, F_LO, "decoupled weight decay"),
    BOOL("optimizer", "overlap_with_forward", optimizer_overlap_with_forward, 1,
         "one process on a GPU: each block's AdamW update runs on a side stream while the next forward runs, "
         "a block's forward waiting for its own update (same bits; titan extension)"),

    INT("lr_scheduler", "total_steps", lr_scheduler_total_steps, 0, 0, 0,
        "steps the schedule spans (warmup, stable, decay), whatever training.steps is: a run stopped "
        "and continued to a larger training.steps keeps one curve; 0 = training.steps (past it the LR "
        "stays at min_lr_factor x lr)"),
    INT("lr_scheduler", "warmup_steps", lr_scheduler_warmup_steps, 200, 0, 0,
        "linear warmup steps (capped at the schedule's length)"),
    NUM("lr_scheduler", "decay_ratio", lr_scheduler_decay_ratio, -1, 0, 1, F_LO | F_HI | F_MINUS1,
        "fraction of steps that decay at the end (-1 = all steps after warmup; between, the LR stays at peak)"),
    STR("lr_scheduler", "decay_type", lr_scheduler_decay_type, "linear", "linear,sqrt,cosine", 0, "decay curve"),
    NUM("lr_scheduler", "min_lr_factor", lr_scheduler_min_lr_factor, 0, 0, 1, F_LO | F_HI,
        "final LR as a fraction of the peak"),

    STR("training", "dataset_path", training_dataset_path, "", NULL, 0,
        "directory of token shards written by titan-shard"),
    INT("training", "local_batch_size", training_local_batch_size, 8, 1, 0, "sequences per step per data-parallel rank"),
    {"training", "global_batch_size", T_INT, OFF(training_global_batch_size), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "sequences per optimizer step; -1 = local_batch_size x data-parallel degree (no gradient accumulation), "
     "or a resumed run's saved global batch (accumulation makes it under another layout); set, it overrides that",
     0},
    INT("training", "seq_len", training_seq_len, 2048, 1, 0, "tokens per sequence"),
    NUM("training", "max_norm", training_max_norm, 1.0, 0, 0, 0, "gradient clipping max global norm; <= 0 disables"),
    INT("training", "steps", training_steps, 10000, 1, 0, "optimizer steps to train"),
    {"training", "seed", T_INT64, OFF(training_seed), NULL, 0, NULL, 0, 0, 0,
     "seed of weight init and data order (titan always seeds)", 0},
    BOOL("training", "deterministic", training_deterministic, 0, "bitwise-repeatable kernels even where slower (cuda: titan's attention, not cuDNN's)"),
    ENUM("training", "mixed_precision_param", training_mixed_precision_param, training_param_dtype, "float32",
         "float32,bfloat16",
        "compute dtype (torchtitan's meaning): bfloat16 computes with bf16 activations and weights while "
        "parameters, gradients and AdamW stay float32 (FSDP then gathers bf16 parameters); float32 by "
        "default (torchtitan: bfloat16)"),
    ENUM("training", "mixed_precision_reduce", training_mixed_precision_reduce, training_reduce_dtype, "float32",
         "float32,bfloat16",
        "dtype of gradient reductions (reduce-scatter and all-reduce) between ranks"),
    ENUM("training", "device", training_device, training_device_kind, "cpu", "cpu,cuda,cuda:N,auto,cpu-guard",
        "where to train: cpu; cuda (with several ranks, each on the GPU of its local rank) or cuda:N (GPU N, "
        "one rank); auto (cuda if a GPU opens, else cpu); cpu-guard (tests: the CPU under a GPU's memory "
        "rules)"),
    INT("training", "threads", training_threads, 0, 0, 0, "CPU threads per rank; 0 = the cores of the rank's affinity set divided among the ranks of its host "
        "that share them (at least 1)"),
    BOOL("training", "shuffle", training_shuffle, 0,
         "visit each epoch's samples in a random order drawn from training.seed (titan extension)"),

    INT("parallelism", "data_parallel_replicate_degree", parallelism_data_parallel_replicate_degree, 1, 1, 0,
        "DDP/HSDP replicas"),
    {"parallelism", "data_parallel_shard_degree", T_INT, OFF(parallelism_data_parallel_shard_degree), NULL, -1, NULL,
     1, 0, F_LO | F_MINUS1, "FSDP shards; -1 = the ranks the other degrees leave", 0},
    INT("parallelism", "tensor_parallel_degree", parallelism_tensor_parallel_degree, 1, 1, 0, "tensor parallel ranks (Megatron split: must divide n_kv_heads and the FFN hidden size)"),
    BOOL("parallelism", "enable_sequence_parallel", parallelism_enable_sequence_parallel, 1,
         "with tensor parallelism, split the residual stream and the norms by rows (Megatron's sequence "
         "parallelism, which torchtitan always uses with tp): the same numbers, 1/tp of the residual stream's "
         "memory; local_batch_size x seq_len must split over the tp ranks (titan extension)"),
    INT("parallelism", "context_parallel_degree", parallelism_context_parallel_degree, 1, 1, 0, "context parallel ranks"),
    INT("parallelism", "pipeline_parallel_degree", parallelism_pipeline_parallel_degree, 1, 1, 0,
        "pipeline stages (torchtitan's split: the embedding and the head weigh a layer each; untied embeddings)"),
    ENUM("parallelism", "pipeline_parallel_schedule", parallelism_pipeline_parallel_schedule, parallelism_pp_schedule,
         "1F1B", "1F1B,GPipe,Interleaved1F1B,LoopedBFS",
        "pipeline schedule (torch.distributed.pipelining's): 1F1B (one forward, one backward: at most pp "
        "micro-batches in flight), GPipe (all forwards, then all backwards), Interleaved1F1B (several stages a "
        "rank, depth first) or LoopedBFS (several stages a rank, breadth first)"),
    INT("parallelism", "pipeline_parallel_microbatch_size", parallelism_pipeline_parallel_microbatch_size, 1, 1, 0,
        "sequences per pipeline micro-batch; local_batch_size must be a multiple"),
    {"parallelism", "pipeline_parallel_layers_per_stage", T_INT, OFF(parallelism_pipeline_parallel_layers_per_stage),
     NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "layers a pipeline stage holds: ceil((n_layers + the two weights below) / it) stages in all, a multiple of "
     "pipeline_parallel_degree; -1 = one stage a rank, two for Interleaved1F1B and LoopedBFS", 0},
    INT("parallelism", "pipeline_parallel_first_stage_less_layers",
        parallelism_pipeline_parallel_first_stage_less_layers, 1, 0, 0,
        "layers the first pipeline stage holds fewer than the others: the embedding's weight"),
    INT("parallelism", "pipeline_parallel_last_stage_less_layers", parallelism_pipeline_parallel_last_stage_less_layers,
        1, 0, 0, "layers the last pipeline stage holds fewer than the others: the output's weight"),
    ENUM("parallelism", "fsdp_reshard_after_forward", parallelism_fsdp_reshard_after_forward,
         parallelism_reshard_policy, "default", "default,always,never",
        "FSDP: free each block's gathered parameters after its forward and gather them again for its backward "
        "(default = always without pipeline parallelism); never keeps them from forward to backward"),
    STR("parallelism", "comm_bucket_plan", parallelism_comm_bucket_plan, "auto", NULL, F_NONEMPTY,
        "how blocks (0 = embedding, 1..n_layers, n_layers+1 = norm and output) group into communication units "
        "(titan extension): auto (FSDP one per block, DDP 25 MB), blocks, whole, size:MB, or a unit id per "
        "block such as \"0,1,1,2\""),

    BOOL("checkpoint", "enable", checkpoint_enable, 1, "save checkpoints (and resume from the latest)"),
    STR("checkpoint", "folder", checkpoint_folder, "checkpoint", NULL, F_NONEMPTY,
        "checkpoint directory, relative to the run directory"),
    INT("checkpoint", "interval", checkpoint_interval, 500, 1, 0, "save every this many steps (and at the end)"),
    INT("checkpoint", "keep_latest_k", checkpoint_keep_latest_k, 10, 0, 0, "checkpoints kept; 0 = keep all"),
    ENUM("checkpoint", "async_mode", checkpoint_async_mode, checkpoint_async, "disabled",
         "disabled,async,async_with_pinned_mem",
        "disabled: training waits for each save; async (and async_with_pinned_mem, the same on the CPU): a "
        "background thread writes a host copy while training goes on"),
    STR("checkpoint", "compression", checkpoint_compression, "none", "none,zstd", 0,
        "how chunks are stored: none (raw), or zstd (each chunk its own frame; see titan-checkpoint(5))"),
    {"checkpoint", "compression_level", T_INT, OFF(checkpoint_compression_level), NULL, 3, NULL, 1, 19,
     F_LO | F_HI, "zstd level when compression = \"zstd\"", 0},
    STR("checkpoint", "initial_load_path", checkpoint_initial_load_path, "", NULL, 0,
        "titan-init takes the seed checkpoint's weights from here (a titan checkpoint, step or run directory; "
        "or a Hugging Face Llama directory with initial_load_in_hf) instead of a fresh init; titan-train "
        "ignores it"),
    BOOL("checkpoint", "initial_load_in_hf", checkpoint_initial_load_in_hf, 0,
         "initial_load_path is a Hugging Face Llama directory (config.json and safetensors)"),
    BOOL("checkpoint", "initial_load_model_only", checkpoint_initial_load_model_only, 1,
         "take only the weights from initial_load_path (the only choice: training starts at step 0 with fresh "
         "AdamW moments)"),

    BOOL("validation", "enable", validation_enable, 0, "compute the loss on held-out shards during training"),
    STR("validation", "dataset_path", validation_dataset_path, "", NULL, 0,
        "held-out shard directory (titan-shard --split writes one)"),
    {"validation", "local_batch_size", T_INT, OFF(validation_local_batch_size), NULL, -1, NULL, 1, 0,
     F_LO | F_MINUS1, "sequences per validation batch per rank; -1 = training.local_batch_size (must equal it)", 0},
    {"validation", "seq_len", T_INT, OFF(validation_seq_len), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "tokens per validation sequence; -1 = training.seq_len (must equal it)", 0},
    INT("validation", "freq", validation_freq, 10, 1, 0, "validate every this many steps (and after the last)"),
    {"validation", "steps", T_INT, OFF(validation_steps), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "batches per validation on each data-parallel rank (a resume under another layout keeps the sequences "
     "they made); -1 = every sample of the held-out set once", 0},
    {"validation", "sequences", T_INT, OFF(validation_sequences), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "held-out sequences per validation whatever the layout (titan extension; overrides steps); -1 = from steps",
     0},

    INT("metrics", "log_freq", metrics_log_freq, 10, 1, 0, "log metrics every this many steps"),
    NUM("metrics", "peak_flops", metrics_peak_flops, 0, 0, 0, F_LO,
        "peak FLOP/s of the device for MFU; 0 = measure with a GEMM probe"),
    BOOL("metrics", "enable_tensorboard", metrics_enable_tensorboard, 0,
         "also write every step's metrics as TensorBoard scalars (torchtitan's tags)"),
    STR("metrics", "save_tb_folder", metrics_save_tb_folder, "tb", NULL, F_NONEMPTY,
        "TensorBoard event files go to RUN/save_tb_folder/YYYYmmdd-HHMM/"),

    BOOL("profiling", "enable_profiling", profiling_enable_profiling, 0,
         "time every backend op of one step in profile_freq (each op waits for the device: that step "
         "runs slower) and write a Chrome trace and a per-op table"),
    STR("profiling", "save_traces_folder", profiling_save_traces_folder, "profile_traces", NULL, F_NONEMPTY,
        "where the traces go, relative to the run directory: FOLDER/iteration_STEP/rankR_trace.json"),
    INT("profiling", "profile_freq", profiling_profile_freq, 10, 1, 0,
        "profile the steps that are a multiple of this"),

    NUM("comm", "train_timeout_seconds", comm_train_timeout_seconds, 0, 0, 0, F_LO,
        "seconds a collective or send/receive may wait for the other ranks before the job fails with "
        "exit status 8; 0 = $TITAN_COMM_TIMEOUT, else 300"),
    {"comm", "trace_buf_size", T_INT, OFF(comm_trace_buf_size), NULL, 2000, NULL, 0, 0, F_LO,
     "the flight recorder keeps this many last communication operations per rank and writes them "
     "out when the job fails or is signalled (SIGUSR1, SIGTERM); 0 = off", 0},
    STR("comm", "save_traces_folder", comm_save_traces_folder, "comm_traces", NULL, F_NONEMPTY,
        "where the flight recorder's dumps go, relative to the run directory: FOLDER/rank-R.json "
        "(titan-trace hang reads them)"),
    ENUM("comm", "backend", comm_backend, comm_backend_kind, "auto", "auto,shm,mpi,nccl",
         "the communicators of a job of several ranks: auto (nccl on GPUs with NCCL, else shm when every "
         "rank runs on one host, else mpi); shm (shared memory, one host); mpi (libtitan-mpi.so, ranks "
         "started by mpirun or srun --mpi=pmix, any hosts); nccl (GPUs); $TITAN_COMM overrides it"),

    ENUM("activation_checkpoint", "mode", activation_checkpoint_mode, activation_checkpoint_kind, "none",
         "none,full,selective",
        "recompute activations in backward (the same numbers, less memory, more compute): none; full "
        "(every layer keeps only its input); selective (as selective_ac_option says)"),
    STR("activation_checkpoint", "selective_ac_option", activation_checkpoint_selective_ac_option, "2", "op,N", 0,
        "in selective mode: N = every Nth layer keeps only its input, the others everything; op = every "
        "layer keeps the outputs of attention and of every other matmul (wq, wv, w1) and recomputes the "
        "norms, wk, RoPE, wo, w3 and SwiGLU"),
};
const int titan_job_nkeys = (int)(sizeof titan_job_keys / sizeof titan_job_keys[0]);

const char *const titan_job_sections[] = {"job", "model", "optimizer", "lr_scheduler", "training",
                                       "parallelism", "checkpoint", "validation", "metrics", "profiling",
                                       "activation_checkpoint"};
const int titan_job_nsections = (int)(sizeof titan_job_sections / sizeof titan_job_sections[0]);

/* Old spellings that mean a supported key. */
const key_alias titan_job_aliases[] = {
    {"checkpoint", "enable_checkpoint", "enable"},
};
const int titan_job_naliases = (int)(sizeof titan_job_aliases / sizeof titan_job_aliases[0]);

/* Values a supported key will have one day, refused with a reason. */
const key_not_yet titan_job_not_yet[] = {
    {"activation_checkpoint", "mode", "memory_budget",
     "memory-budget checkpointing (torch.compile's min-cut partitioner) has no counterpart in titan",
     "use mode = \"selective\" with selective_ac_option = \"op\" or a layer interval, or \"full\""},
};
const int titan_job_nnot_yet = (int)(sizeof titan_job_not_yet / sizeof titan_job_not_yet[0]);

/* torchtitan keys that titan does not implement. Accepted with a warning when
 * their value is harmless: NULL = any value (it only affects speed, logging
 * or features off the training math), else the "|"-separated TOML values
 * that are. Key "*" accepts any key of the section. */
const key_ignored titan_job_ignored[] = {
    {"job", "config_file", NULL}, {"job", "use_for_integration_test", NULL}, {"job", "print_args", NULL},
    {"job", "print_config", NULL},
    {"profiling", "profiler_active", NULL}, {"profiling", "profiler_warmup", NULL},
    {"profiling", "enable_memory_snapshot", NULL}, {"profiling", "save_memory_snapshot_folder", NULL},
    {"metrics", "disable_color_printing", NULL},
    {"metrics", "save_for_all_ranks", NULL}, {"metrics", "rank_0_only", NULL},
    {"metrics", "enable_wandb", NULL},
    {"model", "tokenizer_path", NULL}, {"model", "hf_assets_path", NULL}, {"model", "converters", "[]"},
    {"model", "print_after_conversion", NULL}, {"model", "norm_type", "\"rmsnorm\""},
    {"optimizer", "implementation", NULL}, {"optimizer", "early_step_in_backward", "false"},
    {"lr_scheduler", "lr_min", "0|0.0"},
    {"training", "dataset", NULL}, {"training", "enable_cpu_offload", NULL}, {"training", "compile", NULL},
    {"training", "gc_freq", NULL}, {"training", "gc_debug", NULL},
    {"parallelism", "enable_compiled_autograd", NULL},
    {"parallelism", "disable_loss_parallel", NULL}, {"parallelism", "enable_async_tensor_parallel", NULL},
    {"parallelism", "pipeline_parallel_split_points", "[]"}, {"parallelism", "module_fqns_per_model_part", NULL},
    {"parallelism", "pipeline_parallel_schedule_csv", "\"\""},
    {"parallelism", "context_parallel_rotate_method", NULL}, {"parallelism", "expert_parallel_degree", "1"},
    {"parallelism", "expert_tensor_parallel_degree", "1"},
    {"checkpoint", "last_save_model_only", NULL},
    {"checkpoint", "last_save_in_hf", "false"}, {"checkpoint", "model_weights_only", NULL},
    {"checkpoint", "export_dtype", "\"float32\""}, {"checkpoint", "load_step", "-1"},
    {"checkpoint", "exclude_from_loading", "[]"}, {"checkpoint", "enable_first_step_checkpoint", "false"},
    {"checkpoint", "create_seed_checkpoint", "false"}, {"checkpoint", "load_only", "false"},
    {"activation_checkpoint", "memory_budget", NULL}, {"activation_checkpoint", "visualize_memory_budget_pareto", NULL},
    {"activation_checkpoint", "per_op_sac_force_recompute_mm_shapes_by_fqns", NULL},
    {"activation_checkpoint", "early_stop", NULL},
    {"compile", "enable", NULL}, {"compile", "components", NULL}, {"compile", "backend", NULL},
    {"float8", "enable_fsdp_float8_all_gather", "false"}, {"float8", "precompute_float8_dynamic_scale_for_fsdp", "false"},
    {"float8", "force_recompute_fp8_weight_in_bwd", "false"}, {"float8", "recipe_name", NULL},
    {"float8", "filter_fqns", NULL}, {"float8", "emulate", NULL}, {"float8", "moe_fqns_prototype", NULL},
    {"mx", "mxfp8_dim1_cast_kernel_choice", NULL}, {"mx", "recipe_name", NULL}, {"mx", "filter_fqns", NULL},
    {"mx", "moe_fqns_prototype", NULL},
    {"comm", "init_timeout_seconds", NULL},
    {"memory_estimation", "enable", "false"}, {"memory_estimation", "disable_fake_mode", NULL},
    {"fault_tolerance", "enable", "false"}, {"fault_tolerance", "*", NULL},
    {"experimental", "custom_import", "\"\""}, {"experimental", "custom_args_module", "\"\""},
    {"validation", "dataset", NULL},
};
const int titan_job_nignored = (int)(sizeof titan_job_ignored / sizeof titan_job_ignored[0]);
