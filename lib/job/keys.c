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
#define LIST(sec, key, f, choices, doc) {sec, key, T_LIST, OFF(f), "", 0, choices, 0, 0, 0, doc, 0}

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
    STR("model", "hf_assets_path", model_hf_assets_path, "", NULL, 0,
        "a Hugging Face asset directory (torchtitan's): the tokenizer is its tokenizer.json unless "
        "model.tokenizer names another, and checkpoint.initial_load_in_hf reads its config.json and "
        "safetensors when checkpoint.initial_load_path is empty"),
    {"model", "tie_embeddings", T_TRI, OFF(model_tie_embeddings), NULL, -1, NULL, 0, 0, 0,
     "output head shares the token embedding; -1 = the flavor's", 0},
    LIST("model", "converters", model_converters, "quantize.linear.float8,float8",
         "model converters: \"quantize.linear.float8\" (or its alias \"float8\") trains the linears in "
         "float8 as torchao's Float8Linear, configured by [quantize.linear.float8]; [] = none"),

    STR("optimizer", "name", optimizer_name, "AdamW", "AdamW,Adam,GaLore", 0, "optimizer"),
    NUM("optimizer", "lr", optimizer_lr, 8e-4, 0, 0, F_LO | F_LO_OPEN, "peak learning rate"),
    NUM("optimizer", "beta1", optimizer_beta1, 0.9, 0, 1, F_LO | F_HI | F_HI_OPEN, "AdamW first-moment decay"),
    NUM("optimizer", "beta2", optimizer_beta2, 0.95, 0, 1, F_LO | F_HI | F_HI_OPEN, "AdamW second-moment decay"),
    NUM("optimizer", "eps", optimizer_eps, 1e-8, 0, 0, F_LO | F_LO_OPEN, "AdamW epsilon"),
    NUM("optimizer", "weight_decay", optimizer_weight_decay, 0.1, 0, 0, F_LO, "decoupled weight decay"),
    INT("optimizer", "rank", optimizer_rank, 128, 1, 0, "GaLore: rank of the gradient projection"),
    INT("optimizer", "update_proj_gap", optimizer_update_proj_gap, 200, 1, 0, "GaLore: steps between projector refreshes"),
    NUM("optimizer", "scale", optimizer_scale, 0.25, 0, 0, F_LO | F_LO_OPEN, "GaLore: scale of the back-projected update"),
    STR("optimizer", "proj_type", optimizer_proj_type, "std", "std,reverse_std,left,right", 0, "GaLore: projection side"),
    STR("optimizer", "galore_svd", optimizer_galore_svd, "randomized", "randomized,exact", 0, "GaLore: refresh SVD"),
    INT("optimizer", "oversampling", optimizer_oversampling, 8, 0, 0, "GaLore: randomized SVD oversampling"),
    INT("optimizer", "power_iters", optimizer_power_iters, 1, 0, 0, "GaLore: randomized SVD power iterations"),
    BOOL("optimizer", "overlap_with_forward", optimizer_overlap_with_forward, 1,
         "one process on a GPU: each block's AdamW update runs on a side stream while the next forward runs, "
         "a block's forward waiting for its own update (same bits; titan extension)"),
    BOOL("optimizer", "early_step_in_backward", optimizer_early_step_in_backward, 0,
         "FSDP: each unit's AdamW or GaLore update right after its reduce-scatter, its shard gradient memory "
         "reused by the next unit (no clipping, accumulation, pipeline, tensor parallelism or replicas)"),

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
    STR("training", "dataset", training_dataset, "", NULL, 0,
        "torchtitan's dataset name, or a shard directory: titan-init takes a directory as dataset_path "
        "when that is empty; a name titan cannot read is refused when training starts, saying how to "
        "make shards"),
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
    BOOL("parallelism", "enable_async_tensor_parallel", parallelism_enable_async_tensor_parallel, 0,
         "with tensor and sequence parallelism, run the all-gather before each column-parallel matmul and the "
         "reduce-scatter after each row-parallel one as collective matmuls (block by block, over the shm "
         "communicator's shared windows), forward and backward, so that compute runs while peers' blocks arrive; "
         "the same numbers (compile.enable_async_tensor_parallel is the same key)"),
    INT("parallelism", "context_parallel_degree", parallelism_context_parallel_degree, 1, 1, 0, "context parallel ranks"),
    ENUM("parallelism", "context_parallel_rotate_method", parallelism_context_parallel_rotate_method,
         parallelism_cp_ring, "allgather", "allgather,alltoall",
         "how context parallelism exchanges keys and values: allgather (the whole sequence's, then attention) or "
         "alltoall (a ring: each rank's block attended as it arrives, merged by online softmax; shm and cpu)"),
    INT("parallelism", "pipeline_parallel_degree", parallelism_pipeline_parallel_degree, 1, 1, 0,
        "pipeline stages (torchtitan's split: the embedding and the head weigh a layer each; untied embeddings)"),
    ENUM("parallelism", "pipeline_parallel_schedule", parallelism_pipeline_parallel_schedule, parallelism_pp_schedule,
         "1F1B",
         "1F1B,GPipe,Interleaved1F1B,LoopedBFS,InterleavedZeroBubble,PipelineScheduleSingle,PipelineScheduleMulti,"
         "_PipelineScheduleRuntime,"
         "ZBVZeroBubble,DualPipeV",
        "pipeline schedule (torch.distributed.pipelining's): 1F1B (one forward, one backward: at most pp "
        "micro-batches in flight), GPipe (all forwards, then all backwards), Interleaved1F1B (several stages a "
        "rank, depth first), LoopedBFS (several stages a rank, breadth first) or InterleavedZeroBubble (ZB1P: "
        "Interleaved1F1B with the backward split into input and weight gradients, the weight gradients "
        "deferred into the bubbles), ZBVZeroBubble (ZB-V: two stages a rank in a V, rank r holding stages r and "
        "2 pp - 1 - r, so rank 0 holds the first stage and the last; split backwards) or DualPipeV (DeepSeek-V3's "
        "DualPipe in the same V; at least 2 pp micro-batches); with pipeline_parallel_schedule_csv, any name: it "
        "sets the stages a rank (PipelineScheduleSingle one, PipelineScheduleMulti and _PipelineScheduleRuntime "
        "two, as the names above; the CSV's placement is the looped one)"),
    STR("parallelism", "pipeline_parallel_schedule_csv", parallelism_pipeline_parallel_schedule_csv, "", NULL, 0,
        "a schedule from a file in torch.distributed.pipelining's CSV format (a row a rank, cells such as 2F0, "
        "3I1, 3W1, 1B0; SEND/RECV, UNSHARD/RESHARD skipped), checked before the first step"),
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
    {"parallelism", "module_fqns_per_model_part", T_LISTS, OFF(parallelism_module_fqns_per_model_part), "", 0, NULL,
     0, 0, 0,
     "the pipeline stages by module name, a list of FQNs a stage, e.g. [[\"tok_embeddings\", \"layers.0\"], "
     "[\"layers.1\", \"norm\", \"output\"]]: whole blocks, the layers in order, the embedding in the first, norm "
     "and output in the last; stages a rank = parts / pipeline_parallel_degree; [] = the split by the counts above",
     0},
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
        "disabled: training waits for each save; async: a background thread writes a host copy while "
        "training goes on; async_with_pinned_mem: the same, the host copy in page-locked memory on CUDA "
        "(faster device-to-host copies; the same as async on the CPU)"),
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
    BOOL("checkpoint", "last_save_model_only", checkpoint_last_save_model_only, 0,
         "the final step's checkpoint (step = training.steps) holds the parameters only, in export_dtype: no "
         "AdamW moments, data position or LR state, so the run cannot go on from it (titan-train(1)); "
         "false by default (torchtitan: true), so that a run can be continued to more steps"),
    ENUM("checkpoint", "export_dtype", checkpoint_export_dtype, checkpoint_export_dtype_kind, "float32",
         "float32,bfloat16,float16",
         "dtype of the final step's parameters with last_save_model_only (and of its last_save_in_hf copy)"),
    BOOL("checkpoint", "last_save_in_hf", checkpoint_last_save_in_hf, 0,
         "also write the final step as a Hugging Face Llama directory, FOLDER/step-N-hf/ (config.json, "
         "safetensors, tokenizer files), as titan-ckpt convert --to hf does; needs last_save_model_only"),
    {"checkpoint", "exclude_from_loading", T_LIST, OFF(checkpoint_exclude_from_loading), "", 0,
     "model,optimizer,lr_scheduler,dataloader,train_state", 0, 0, 0,
     "parts of the checkpoint a resume does not restore: model (weights from training.seed's init), optimizer "
     "(fresh AdamW moments, step 0), lr_scheduler (the schedule starts over), dataloader (data from the "
     "start), train_state (step and tokens seen back to 0)", 0},
    {"checkpoint", "load_step", T_INT, OFF(checkpoint_load_step), NULL, -1, NULL, 0, 0, F_LO | F_MINUS1,
     "resume from this step's checkpoint instead of the latest; -1 = the latest", 0},
    BOOL("checkpoint", "enable_first_step_checkpoint", checkpoint_enable_first_step_checkpoint, 0,
         "also save after step 1 (to see saves work before interval steps have passed)"),
    BOOL("checkpoint", "load_only", checkpoint_load_only, 0, "resume as usual but save no checkpoint"),
    BOOL("checkpoint", "create_seed_checkpoint", checkpoint_create_seed_checkpoint, 0,
         "true is refused: titan-init writes the seed checkpoint (step 0) of every run"),

    BOOL("validation", "enable", validation_enable, 0, "compute the loss on held-out shards during training"),
    STR("validation", "dataset_path", validation_dataset_path, "", NULL, 0,
        "held-out shard directory (titan-shard --split writes one)"),
    STR("validation", "dataset", validation_dataset, "", NULL, 0,
        "torchtitan's held-out dataset name, or a shard directory (as training.dataset)"),
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

    BOOL("memory_estimation", "enable", memory_estimation_enable, 0,
         "print each rank's memory estimate (titan-train --dry-run's) at start and, at the end, each rank's "
         "measured peak beside it"),

    STR("quantize.linear.float8", "recipe_name", float8_recipe_name, "", NULL, 0,
        "torchao's float8 recipe: \"\" (absent: tensorwise, one scale per tensor, grad_output e5m2), "
        "\"rowwise\" (a power-of-two scale per row along each GEMM's inner dimension, all e4m3) or "
        "\"rowwise_with_gw_hp\" (rowwise, the weight-gradient GEMM in high precision)"),
    LIST("quantize.linear.float8", "filter_fqns", float8_filter_fqns, NULL,
         "linears whose name contains one of these stay in high precision (the jobs: [\"output\"]); linears with "
         "a dimension not a multiple of 16 always do; \"auto_filter_small_kn\" also skips the shapes torchao "
         "finds too small to gain (tensorwise and rowwise)"),
    BOOL("quantize.linear.float8", "enable_fsdp_float8_all_gather", float8_enable_fsdp_float8_all_gather, 0,
         "FSDP gathers the float8 linears' weights as float8 bytes, scaled by the whole tensor's amax "
         "(tensorwise only)"),
    BOOL("quantize.linear.float8", "precompute_float8_dynamic_scale_for_fsdp",
         float8_precompute_float8_dynamic_scale_for_fsdp, 0,
         "with the float8 all-gather, compute every weight's scale once per step after the optimizer (the same "
         "numbers)"),
    BOOL("quantize.linear.float8", "emulate", float8_emulate, 0,
         "emulate the float8 GEMMs (float8 operands dequantized, fp32 products: torchao's emulate); false runs "
         "them on float8 tensor cores (cuda, compute capability 8.9 and up); the cpu backend only emulates"),
};
const int titan_job_nkeys = (int)(sizeof titan_job_keys / sizeof titan_job_keys[0]);

const char *const titan_job_sections[] = {"job", "model", "optimizer", "lr_scheduler", "training",
                                       "parallelism", "checkpoint", "validation", "metrics", "profiling",
                                       "activation_checkpoint",
                                       "quantize.linear.float8"};
const int titan_job_nsections = (int)(sizeof titan_job_sections / sizeof titan_job_sections[0]);

/* Other spellings that mean a supported key. */
const key_alias titan_job_aliases[] = {
    {"checkpoint", "enable_checkpoint", "checkpoint", "enable"},
    {"checkpoint", "model_weights_only", "checkpoint", "last_save_model_only"},
    {"debug", "seed", "training", "seed"},
    {"debug", "deterministic", "training", "deterministic"},
    {"compile", "enable_async_tensor_parallel", "parallelism", "enable_async_tensor_parallel"},
};
const int titan_job_naliases = (int)(sizeof titan_job_aliases / sizeof titan_job_aliases[0]);

/* torchtitan's [float8] before its [quantize.*] sections. */
const section_alias titan_job_section_aliases[] = {
    {"float8", "quantize.linear.float8"},
};
const int titan_job_nsection_aliases = (int)(sizeof titan_job_section_aliases / sizeof titan_job_section_aliases[0]);

/* Values a supported key will have one day, refused with a reason. */
const key_not_yet titan_job_not_yet[] = {
    {"activation_checkpoint", "mode", "memory_budget",
     "memory-budget checkpointing (torch.compile's min-cut partitioner) has no counterpart in titan",
     "use mode = \"selective\" with selective_ac_option = \"op\" or a layer interval, or \"full\""},
    {"model", "converters", "quantize.linear.mx", "MX (mxfp8) training is not supported", "use \"quantize.linear.float8\""},
    {"model", "converters", "mx", "MX (mxfp8) training is not supported", "use \"quantize.linear.float8\""},
    {"model", "converters", "quantize.grouped_mm.float8", "titan's Llama has no grouped (MoE) GEMMs",
     "use \"quantize.linear.float8\""},
    {"model", "converters", "quantize.grouped_mm.mx", "titan's Llama has no grouped (MoE) GEMMs",
     "use \"quantize.linear.float8\""},
};
const int titan_job_nnot_yet = (int)(sizeof titan_job_not_yet / sizeof titan_job_not_yet[0]);

/* torchtitan keys that titan does not implement. Accepted with a warning when
 * their value is harmless: NULL = any value (it only affects speed, logging
 * or features off the training math), else the "|"-separated TOML values
 * that are (KEY_REFUSED: none). Key "*" accepts any key of the section.
 * schema.c says why, key by key. */
const key_ignored titan_job_ignored[] = {
    {"job", "config_file", NULL}, {"job", "use_for_integration_test", NULL}, {"job", "print_args", NULL},
    {"job", "print_config", NULL},
    {"job", "save_config_file", "\"\""},
    {"job", "custom_config_module", "\"\""},
    {"profiling", "profiler_active", "1"},
    {"profiling", "profiler_warmup", NULL},
    {"profiling", "enable_memory_snapshot", "false"},
    {"profiling", "save_memory_snapshot_folder", NULL},
    {"metrics", "disable_color_printing", NULL},
    {"metrics", "save_for_all_ranks", "false"},
    {"metrics", "rank_0_only", NULL},
    {"metrics", "enable_wandb", "false"},
    {"model", "tokenizer_path", KEY_REFUSED},
    {"model", "print_after_conversion", NULL}, {"model", "norm_type", "\"rmsnorm\""},
    {"optimizer", "implementation", NULL},
    {"lr_scheduler", "lr_min", "0|0.0"},
    {"training", "enable_cpu_offload", "false"},
    {"training", "dtype", "\"float32\""},
    {"training", "compile", NULL},
    {"training", "gc_freq", NULL}, {"training", "gc_debug", NULL},
    {"training.dataloader", "num_workers", NULL},
    {"training.dataloader", "persistent_workers", NULL},
    {"training.dataloader", "pin_memory", NULL},
    {"training.dataloader", "prefetch_factor", NULL},
    {"parallelism", "enable_compiled_autograd", NULL},
    {"parallelism", "disable_loss_parallel", "false"},
    {"parallelism", "pipeline_parallel_split_points", "[]"},
    {"parallelism", "pipeline_parallel_expert_parallel_overlap", NULL},
    {"parallelism", "context_parallel_load_balancer", "\"headtail\""},
    {"parallelism", "expert_parallel_comm_backend", NULL},
    {"parallelism", "expert_parallel_degree", "1"},
    {"parallelism", "expert_tensor_parallel_degree", "1"},
    {"checkpoint", "initial_load_in_hf_quantized", "false"},
    {"checkpoint", "enable_ft_dataloader_checkpoints", NULL},
    {"activation_checkpoint", "memory_budget", NULL}, {"activation_checkpoint", "visualize_memory_budget_pareto", NULL},
    {"activation_checkpoint", "per_op_sac_force_recompute_mm_shapes_by_fqns", "[\"moe.router.gate\"]|[]"},
    {"activation_checkpoint", "early_stop", NULL},
    {"activation_checkpoint", "preserve_rng_state", NULL},
    {"activation_checkpoint", "determinism_check", NULL},
    {"activation_checkpoint", "debug", NULL},
    {"compile", "enable", NULL}, {"compile", "components", NULL}, {"compile", "backend", NULL},
    {"float8", "force_recompute_fp8_weight_in_bwd", "false"},
    {"float8", "moe_fqns_prototype", "[]"},
    {"mx", "mxfp8_dim1_cast_kernel_choice", NULL}, {"mx", "recipe_name", NULL}, {"mx", "filter_fqns", NULL},
    {"mx", "moe_fqns_prototype", NULL},
    /* MX and grouped GEMMs: read only when model.converters names them, refused above */
    {"quantize.linear.mx", "mxfp8_dim1_cast_kernel_choice", NULL},
    {"quantize.linear.mx", "recipe_name", NULL},
    {"quantize.linear.mx", "filter_fqns", NULL},
    {"quantize.grouped_mm.float8", "fqns", NULL},
    {"quantize.grouped_mm.mx", "recipe_name", NULL},
    {"quantize.grouped_mm.mx", "fqns", NULL},
    {"comm", "init_timeout_seconds", NULL},
    {"comm", "save_traces_file_prefix", "\"rank_\""},
    {"comm", "mode", "\"default\""},
    {"memory_estimation", "disable_fake_mode", NULL},
    {"fault_tolerance", "enable", "false"},
    {"fault_tolerance", "process_group", NULL},
    {"fault_tolerance", "process_group_timeout_ms", NULL},
    {"fault_tolerance", "replica_id", NULL},
    {"fault_tolerance", "group_size", NULL},
    {"fault_tolerance", "min_replica_size", NULL},
    {"fault_tolerance", "semi_sync_method", NULL},
    {"experimental", "custom_import", "\"\""}, {"experimental", "custom_args_module", "\"\""},
    {"validation.dataloader", "num_workers", NULL},
    {"validation.dataloader", "persistent_workers", NULL},
    {"validation.dataloader", "pin_memory", NULL},
    {"validation.dataloader", "prefetch_factor", NULL},
    {"debug", "deterministic_warn_only", NULL},
    {"debug", "moe_force_load_balance", NULL},
};
const int titan_job_nignored = (int)(sizeof titan_job_ignored / sizeof titan_job_ignored[0]);
