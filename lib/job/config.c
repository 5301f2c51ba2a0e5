/* config.c - the job configuration: one table of keys drives defaults,
 * loading, overrides, checks, messages and --print-config. */
#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/toml.h"

typedef enum { T_STR, T_INT, T_INT64, T_DOUBLE, T_BOOL, T_TRI } key_type;

enum {
    F_LO = 1,        /* lo is a bound */
    F_HI = 2,        /* hi is a bound */
    F_LO_OPEN = 4,   /* value > lo (else >= lo) */
    F_HI_OPEN = 8,   /* value < hi (else <= hi) */
    F_MINUS1 = 16,   /* -1 is also allowed ("unset" / "the flavor's") */
    F_NONEMPTY = 32, /* strings: "" is refused */
};

typedef struct {
    const char *section, *key;
    key_type type;
    size_t off;
    const char *sdef;    /* default of a string key */
    double ndef;         /* default of any other key */
    const char *choices; /* "a,b,c" or NULL */
    double lo, hi;
    unsigned flags;
    const char *doc;
} key_def;

#define OFF(f) offsetof(titan_job_config, f)
#define STR(sec, key, f, def, choices, flags, doc) {sec, key, T_STR, OFF(f), def, 0, choices, 0, 0, flags, doc}
#define INT(sec, key, f, def, lo, flags, doc) {sec, key, T_INT, OFF(f), NULL, def, NULL, lo, 0, F_LO | (flags), doc}
#define NUM(sec, key, f, def, lo, hi, flags, doc) {sec, key, T_DOUBLE, OFF(f), NULL, def, NULL, lo, hi, flags, doc}
#define BOOL(sec, key, f, def, doc) {sec, key, T_BOOL, OFF(f), NULL, def, NULL, 0, 0, 0, doc}

/* Defaults follow torchtitan's JobConfig where the key exists there. */
static const key_def KEYS[] = {
    STR("job", "description", job_description, "", NULL, 0, "free text describing the run"),
    STR("job", "dump_folder", job_dump_folder, "./outputs", NULL, F_NONEMPTY,
        "run directory: titan-init creates it, titan-train writes checkpoints and metrics there"),

    STR("model", "name", model_name, "llama3", "llama3", 0, "model family"),
    STR("model", "flavor", model_flavor, "debugmodel", "debugmodel,1B,3B,8B,70B,405B", 0,
        "size preset; the keys below override single dimensions of it"),
    STR("model", "tokenizer", model_tokenizer, "byte", NULL, F_NONEMPTY,
        "tokenizer: \"byte\" (raw bytes plus specials) is the one built in"),
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
     "output head shares the token embedding; -1 = the flavor's"},

    STR("optimizer", "name", optimizer_name, "AdamW", "AdamW", 0, "optimizer"),
    NUM("optimizer", "lr", optimizer_lr, 8e-4, 0, 0, F_LO | F_LO_OPEN, "peak learning rate"),
    NUM("optimizer", "beta1", optimizer_beta1, 0.9, 0, 1, F_LO | F_HI | F_HI_OPEN, "AdamW first-moment decay"),
    NUM("optimizer", "beta2", optimizer_beta2, 0.95, 0, 1, F_LO | F_HI | F_HI_OPEN, "AdamW second-moment decay"),
    NUM("optimizer", "eps", optimizer_eps, 1e-8, 0, 0, F_LO | F_LO_OPEN, "AdamW epsilon"),
    NUM("optimizer", "weight_decay", optimizer_weight_decay, 0.1, 0, 0, F_LO, "decoupled weight decay"),

    INT("lr_scheduler", "warmup_steps", lr_scheduler_warmup_steps, 200, 0, 0,
        "linear warmup steps (capped at training.steps)"),
    NUM("lr_scheduler", "decay_ratio", lr_scheduler_decay_ratio, -1, 0, 1, F_LO | F_HI | F_MINUS1,
        "fraction of steps that decay at the end (-1 = all steps after warmup; between, the LR stays at peak)"),
    STR("lr_scheduler", "decay_type", lr_scheduler_decay_type, "linear", "linear,sqrt,cosine", 0, "decay curve"),
    NUM("lr_scheduler", "min_lr_factor", lr_scheduler_min_lr_factor, 0, 0, 1, F_LO | F_HI,
        "final LR as a fraction of the peak"),

    STR("training", "dataset_path", training_dataset_path, "", NULL, 0,
        "directory of token shards written by titan-shard"),
    INT("training", "local_batch_size", training_local_batch_size, 8, 1, 0, "sequences per step per data-parallel rank"),
    {"training", "global_batch_size", T_INT, OFF(training_global_batch_size), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "sequences per optimizer step; -1 = local_batch_size x data-parallel degree (no gradient accumulation)"},
    INT("training", "seq_len", training_seq_len, 2048, 1, 0, "tokens per sequence"),
    NUM("training", "max_norm", training_max_norm, 1.0, 0, 0, 0, "gradient clipping max global norm; <= 0 disables"),
    INT("training", "steps", training_steps, 10000, 1, 0, "optimizer steps to train"),
    {"training", "seed", T_INT64, OFF(training_seed), NULL, 0, NULL, 0, 0, 0,
     "seed of weight init and data order (titan always seeds)"},
    BOOL("training", "deterministic", training_deterministic, 0, "bitwise-repeatable kernels even where slower (cuda: titan's attention, not cuDNN's)"),
    STR("training", "mixed_precision_param", training_mixed_precision_param, "float32", "float32,bfloat16", 0,
        "compute dtype (torchtitan's meaning): bfloat16 computes with bf16 activations and weights while "
        "parameters, gradients and AdamW stay float32 (FSDP then gathers bf16 parameters); float32 by "
        "default (torchtitan: bfloat16)"),
    STR("training", "mixed_precision_reduce", training_mixed_precision_reduce, "float32", "float32,bfloat16", 0,
        "dtype of gradient reductions (reduce-scatter and all-reduce) between ranks"),
    STR("training", "device", training_device, "cpu", "cpu,cuda,cuda:N,auto,cpu-guard", 0,
        "where to train: cpu; cuda (with several ranks, each on the GPU of its local rank) or cuda:N (GPU N, "
        "one rank); auto (cuda if a GPU opens, else cpu); cpu-guard (tests: the CPU under a GPU's memory "
        "rules)"),
    INT("training", "threads", training_threads, 0, 0, 0, "CPU threads; 0 = all cores"),
    BOOL("training", "shuffle", training_shuffle, 0,
         "visit each epoch's samples in a random order drawn from training.seed (titan extension)"),

    INT("parallelism", "data_parallel_replicate_degree", parallelism_data_parallel_replicate_degree, 1, 1, 0,
        "DDP/HSDP replicas"),
    {"parallelism", "data_parallel_shard_degree", T_INT, OFF(parallelism_data_parallel_shard_degree), NULL, -1, NULL,
     1, 0, F_LO | F_MINUS1, "FSDP shards; -1 = the ranks the other degrees leave"},
    INT("parallelism", "tensor_parallel_degree", parallelism_tensor_parallel_degree, 1, 1, 0, "tensor parallel ranks (Megatron split: must divide n_kv_heads and the FFN hidden size)"),
    BOOL("parallelism", "enable_sequence_parallel", parallelism_enable_sequence_parallel, 1,
         "with tensor parallelism, split the residual stream and the norms by rows (Megatron's sequence "
         "parallelism, which torchtitan always uses with tp): the same numbers, 1/tp of the residual stream's "
         "memory; local_batch_size x seq_len must split over the tp ranks (titan extension)"),
    INT("parallelism", "context_parallel_degree", parallelism_context_parallel_degree, 1, 1, 0, "context parallel ranks"),
    INT("parallelism", "pipeline_parallel_degree", parallelism_pipeline_parallel_degree, 1, 1, 0,
        "pipeline stages (torchtitan's split: the embedding and the head weigh a layer each; untied embeddings)"),
    STR("parallelism", "pipeline_parallel_schedule", parallelism_pipeline_parallel_schedule, "1F1B", "1F1B,GPipe", 0,
        "pipeline schedule: 1F1B (one forward, one backward: at most pp micro-batches in flight) or GPipe (all "
        "forwards, then all backwards)"),
    INT("parallelism", "pipeline_parallel_microbatch_size", parallelism_pipeline_parallel_microbatch_size, 1, 1, 0,
        "sequences per pipeline micro-batch; local_batch_size must be a multiple"),
    STR("parallelism", "fsdp_reshard_after_forward", parallelism_fsdp_reshard_after_forward, "default",
        "default,always,never", 0,
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
    STR("checkpoint", "async_mode", checkpoint_async_mode, "disabled", "disabled,async,async_with_pinned_mem", 0,
        "disabled: training waits for each save; async (and async_with_pinned_mem, the same on the CPU): a "
        "background thread writes a host copy while training goes on"),
    STR("checkpoint", "compression", checkpoint_compression, "none", "none,zstd", 0,
        "how chunks are stored: none (raw), or zstd (each chunk its own frame; see titan-checkpoint(5))"),
    {"checkpoint", "compression_level", T_INT, OFF(checkpoint_compression_level), NULL, 3, NULL, 1, 19,
     F_LO | F_HI, "zstd level when compression = \"zstd\""},
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
     F_LO | F_MINUS1, "sequences per validation batch per rank; -1 = training.local_batch_size (must equal it)"},
    {"validation", "seq_len", T_INT, OFF(validation_seq_len), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "tokens per validation sequence; -1 = training.seq_len (must equal it)"},
    INT("validation", "freq", validation_freq, 10, 1, 0, "validate every this many steps (and after the last)"),
    {"validation", "steps", T_INT, OFF(validation_steps), NULL, -1, NULL, 1, 0, F_LO | F_MINUS1,
     "batches per validation; -1 = every sample of the held-out set once"},

    INT("metrics", "log_freq", metrics_log_freq, 10, 1, 0, "log metrics every this many steps"),
    NUM("metrics", "peak_flops", metrics_peak_flops, 0, 0, 0, F_LO,
        "peak FLOP/s of the device for MFU; 0 = measure with a GEMM probe"),

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
     "out when the job fails or is signalled (SIGUSR1, SIGTERM); 0 = off"},
    STR("comm", "save_traces_folder", comm_save_traces_folder, "comm_traces", NULL, F_NONEMPTY,
        "where the flight recorder's dumps go, relative to the run directory: FOLDER/rank-R.json "
        "(titan-trace hang reads them)"),

    STR("activation_checkpoint", "mode", activation_checkpoint_mode, "none", "none,full,selective", 0,
        "recompute activations in backward (the same numbers, less memory, more compute): none; full "
        "(every layer keeps only its input); selective (as selective_ac_option says)"),
    STR("activation_checkpoint", "selective_ac_option", activation_checkpoint_selective_ac_option, "2", "op,N", 0,
        "in selective mode: N = every Nth layer keeps only its input, the others everything; op = every "
        "layer keeps the outputs of attention and of every other matmul (wq, wv, w1) and recomputes the "
        "norms, wk, RoPE, wo, w3 and SwiGLU"),
};
#define NKEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

static const char *const SECTIONS[] = {"job", "model", "optimizer", "lr_scheduler", "training",
                                       "parallelism", "checkpoint", "validation", "metrics", "profiling",
                                       "activation_checkpoint"};
#define NSECTIONS ((int)(sizeof SECTIONS / sizeof SECTIONS[0]))

/* Old spellings that mean a supported key. */
static const struct { const char *section, *key, *target; } ALIASES[] = {
    {"checkpoint", "enable_checkpoint", "enable"},
};

/* Values a supported key will have one day, refused with a reason. */
static const struct { const char *section, *key, *value, *why, *hint; } NOT_YET[] = {
    {"activation_checkpoint", "mode", "memory_budget",
     "memory-budget checkpointing (torch.compile's min-cut partitioner) has no counterpart in titan",
     "use mode = \"selective\" with selective_ac_option = \"op\" or a layer interval, or \"full\""},
};

/* torchtitan keys that titan does not implement. Accepted with a warning when
 * their value is harmless: NULL = any value (it only affects speed, logging
 * or features off the training math), else the "|"-separated TOML values
 * that are. Key "*" accepts any key of the section. */
static const struct { const char *section, *key, *harmless; } IGNORED[] = {
    {"job", "config_file", NULL}, {"job", "use_for_integration_test", NULL}, {"job", "print_args", NULL},
    {"job", "print_config", NULL},
    {"profiling", "profiler_active", NULL}, {"profiling", "profiler_warmup", NULL},
    {"profiling", "enable_memory_snapshot", NULL}, {"profiling", "save_memory_snapshot_folder", NULL},
    {"metrics", "enable_tensorboard", NULL}, {"metrics", "disable_color_printing", NULL},
    {"metrics", "save_tb_folder", NULL}, {"metrics", "save_for_all_ranks", NULL}, {"metrics", "rank_0_only", NULL},
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
    {"parallelism", "pipeline_parallel_first_stage_less_layers", NULL},
    {"parallelism", "pipeline_parallel_last_stage_less_layers", NULL},
    {"parallelism", "pipeline_parallel_layers_per_stage", NULL},
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
#define NIGNORED ((int)(sizeof IGNORED / sizeof IGNORED[0]))

/* ---- lookups ---- */

static const key_def *find_key(const char *section, const char *key) {
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(KEYS[i].section, section) == 0 && strcmp(KEYS[i].key, key) == 0) return &KEYS[i];
    return NULL;
}

static const key_def *find_alias(const char *section, const char *key) {
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        if (strcmp(ALIASES[i].section, section) == 0 && strcmp(ALIASES[i].key, key) == 0)
            return find_key(section, ALIASES[i].target);
    return NULL;
}

static int find_ignored(const char *section, const char *key) {
    for (int i = 0; i < NIGNORED; i++)
        if (strcmp(IGNORED[i].section, section) == 0 &&
            (strcmp(IGNORED[i].key, key) == 0 || strcmp(IGNORED[i].key, "*") == 0))
            return i;
    return -1;
}

static int section_supported(const char *s) {
    for (int i = 0; i < NSECTIONS; i++)
        if (strcmp(SECTIONS[i], s) == 0) return 1;
    return 0;
}

static int section_known(const char *s) {
    if (section_supported(s)) return 1;
    for (int i = 0; i < NIGNORED; i++)
        if (strcmp(IGNORED[i].section, s) == 0) return 1;
    return 0;
}

/* The sections that have a key of this name, "[a]", "[a] or [b]" style
 * joined by fmt: returns how many. */
static int key_homes(const char *key, const char *homes[], int max) {
    int n = 0;
    for (int j = 0; j < NKEYS && n < max; j++)
        if (strcmp(KEYS[j].key, key) == 0) homes[n++] = KEYS[j].section;
    return n;
}

/* ---- suggestions ---- */

static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

typedef struct {
    const char *word, *best;
    int dist;
} suggest;

static void suggest_try(suggest *s, const char *cand) {
    int d = edit_distance(s->word, cand);
    int limit = ((int)strlen(s->word) + 2) / 3;
    if (limit < 1) limit = 1;
    if (d <= limit && (!s->best || d < s->dist)) s->best = cand, s->dist = d;
}

/* Appends "a, b, c" of the supported keys of section (or its known ignored
 * keys when the whole section is unsupported). */
static void list_keys(const char *section, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    int any = section_supported(section);
    for (int i = 0; i < (any ? NKEYS : NIGNORED); i++) {
        const char *sec = any ? KEYS[i].section : IGNORED[i].section;
        const char *key = any ? KEYS[i].key : IGNORED[i].key;
        if (strcmp(sec, section) != 0 || strcmp(key, "*") == 0) continue;
        int w = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", key);
        if (w < 0 || (size_t)w >= cap - used) return;
        used += (size_t)w;
    }
}

static void list_sections(char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < NSECTIONS; i++) {
        int w = snprintf(out + used, cap - used, "%s[%s]", i ? ", " : "", SECTIONS[i]);
        if (w < 0 || (size_t)w >= cap - used) return;
        used += (size_t)w;
    }
}

static titan_status unknown_key(const char *place, const char *section, const char *key) {
    suggest s = {key, NULL, 0};
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(KEYS[i].section, section) == 0) suggest_try(&s, KEYS[i].key);
    for (int i = 0; i < NIGNORED; i++)
        if (strcmp(IGNORED[i].section, section) == 0 && strcmp(IGNORED[i].key, "*") != 0)
            suggest_try(&s, IGNORED[i].key);
    char keys[2048];
    list_keys(section, keys, sizeof keys);
    titan_error(TITAN_ERR_USAGE, "%s: unknown key '%s.%s' in [%s]", place, section, key, section);
    if (s.best)
        titan_error_hint("did you mean '%s'? keys of [%s]: %s", s.best, section, keys);
    else
        titan_error_hint("keys of [%s]: %s", section, keys);
    return TITAN_ERR_USAGE;
}

static titan_status unknown_section(const char *place, const char *section) {
    suggest s = {section, NULL, 0};
    for (int i = 0; i < NSECTIONS; i++) suggest_try(&s, SECTIONS[i]);
    for (int i = 0; i < NIGNORED; i++) suggest_try(&s, IGNORED[i].section);
    char secs[1024];
    list_sections(secs, sizeof secs);
    titan_error(TITAN_ERR_USAGE, "%s: unknown section [%s]", place, section);
    if (s.best)
        titan_error_hint("did you mean [%s]? sections: %s", s.best, secs);
    else
        titan_error_hint("sections: %s", secs);
    return TITAN_ERR_USAGE;
}

/* ---- setting one key ---- */

static void value_text(const titan_toml_value *v, char *out, size_t cap) {
    int n = titan_toml_format_value(out, cap, v);
    if (n >= (int)cap && cap > 4) strcpy(out + cap - 4, "...");
}

/* "a positive integer", "a number in [0, 1)", ... for messages. */
static void describe(const key_def *k, char *out, size_t cap) {
    const char *pre = (k->flags & F_MINUS1) ? "-1 or " : "";
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%g", k->lo);
    snprintf(hi, sizeof hi, "%g", k->hi);
    const char *noun = k->type == T_DOUBLE ? "number" : "integer";
    int has_lo = k->flags & F_LO, has_hi = k->flags & F_HI;
    switch (k->type) {
    case T_STR: snprintf(out, cap, "%s", (k->flags & F_NONEMPTY) ? "a non-empty string" : "a string"); return;
    case T_BOOL: snprintf(out, cap, "true or false"); return;
    case T_TRI: snprintf(out, cap, "true, false or -1"); return;
    case T_INT64: snprintf(out, cap, "an integer"); return;
    default: break;
    }
    if (has_lo && has_hi)
        snprintf(out, cap, "%sa %s in %s%s, %s%s", pre, noun, (k->flags & F_LO_OPEN) ? "(" : "[", lo, hi,
                 (k->flags & F_HI_OPEN) ? ")" : "]");
    else if (has_lo && k->lo == 0 && (k->flags & F_LO_OPEN))
        snprintf(out, cap, "%sa positive %s", pre, noun);
    else if (has_lo && k->lo == 1 && k->type == T_INT)
        snprintf(out, cap, "%sa positive integer", pre);
    else if (has_lo && k->lo == 0)
        snprintf(out, cap, "%sa non-negative %s", pre, noun);
    else if (has_lo)
        snprintf(out, cap, "%san %s %s %s", pre, noun, (k->flags & F_LO_OPEN) ? ">" : ">=", lo);
    else
        snprintf(out, cap, "%s%s", pre, k->type == T_DOUBLE ? "a finite number" : "an integer");
}

static titan_status bad_value(const key_def *k, const char *place, const titan_toml_value *v) {
    char want[128], got[96];
    describe(k, want, sizeof want);
    value_text(v, got, sizeof got);
    return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: expected %s, got %s", place, k->section, k->key, want, got);
}

static int in_range(const key_def *k, double x) {
    if ((k->flags & F_MINUS1) && x == -1) return 1;
    if (k->flags & F_LO) {
        if ((k->flags & F_LO_OPEN) ? !(x > k->lo) : !(x >= k->lo)) return 0;
    }
    if (k->flags & F_HI) {
        if ((k->flags & F_HI_OPEN) ? !(x < k->hi) : !(x <= k->hi)) return 0;
    }
    return 1;
}

static titan_status check_choice(const key_def *k, const char *place, const char *s) {
    for (size_t i = 0; i < sizeof NOT_YET / sizeof NOT_YET[0]; i++)
        if (strcmp(NOT_YET[i].section, k->section) == 0 && strcmp(NOT_YET[i].key, k->key) == 0 &&
            strcmp(NOT_YET[i].value, s) == 0) {
            titan_error(TITAN_ERR_USAGE, "%s: %s.%s: '%s': %s", place, k->section, k->key, s, NOT_YET[i].why);
            titan_error_hint("%s", NOT_YET[i].hint);
            return TITAN_ERR_USAGE;
        }
    if (!k->choices) return TITAN_OK;
    char list[256], *save = NULL;
    snprintf(list, sizeof list, "%s", k->choices);
    suggest sg = {s, NULL, 0};
    int any_n = 0;
    for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        /* "name:N" stands for name:0, name:1, ...; "N" alone for 1, 2, ... */
        size_t cl = strlen(c);
        if (strcmp(c, "N") == 0) {
            size_t sl = strlen(s);
            any_n = 1;
            if (sl > 0 && sl <= 9 && s[0] != '0' && strspn(s, "0123456789") == sl) return TITAN_OK;
            continue;
        }
        if (cl > 2 && strcmp(c + cl - 2, ":N") == 0) {
            if (strncmp(s, c, cl - 1) == 0 && s[cl - 1] && strspn(s + cl - 1, "0123456789") == strlen(s + cl - 1))
                return TITAN_OK;
        } else if (strcmp(c, s) == 0) {
            return TITAN_OK;
        }
        suggest_try(&sg, c);
    }
    char pretty[256], best[64] = "";
    size_t used = 0;
    for (const char *c = k->choices; *c && used + 3 < sizeof pretty; c++) {
        if (*c == ',') pretty[used++] = ',', pretty[used++] = ' ';
        else pretty[used++] = *c;
    }
    pretty[used] = '\0';
    if (sg.best) snprintf(best, sizeof best, "%.*s", (int)strcspn(sg.best, ","), sg.best);
    titan_error(TITAN_ERR_USAGE, "%s: %s.%s: '%s' is not one of %s", place, k->section, k->key, s, pretty);
    if (best[0]) titan_error_hint("did you mean '%s'?", best);
    else if (any_n) titan_error_hint("N stands for a whole number from 1 to 999999999, such as \"2\"");
    return TITAN_ERR_USAGE;
}

static titan_status set_key(titan_job_config *cfg, const key_def *k, const titan_toml_value *v, const char *place) {
    void *field = (char *)cfg + k->off;
    switch (k->type) {
    case T_STR: {
        if (v->type != TITAN_TOML_STRING) return bad_value(k, place, v);
        if (v->u.str.len >= TITAN_STR)
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: string is %zu bytes, longer than the %d allowed", place,
                               k->section, k->key, v->u.str.len, TITAN_STR - 1);
        if (strlen(v->u.str.ptr) != v->u.str.len)
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: string contains a NUL character", place, k->section,
                               k->key);
        if ((k->flags & F_NONEMPTY) && v->u.str.len == 0) return bad_value(k, place, v);
        TITAN_TRY(check_choice(k, place, v->u.str.ptr));
        memset(field, 0, TITAN_STR); /* whole buffer, so configs compare with memcmp */
        memcpy(field, v->u.str.ptr, v->u.str.len);
        return TITAN_OK;
    }
    case T_INT:
        if (v->type != TITAN_TOML_INT || v->u.i < INT_MIN || v->u.i > INT_MAX || !in_range(k, (double)v->u.i))
            return bad_value(k, place, v);
        *(int *)field = (int)v->u.i;
        return TITAN_OK;
    case T_INT64:
        if (v->type != TITAN_TOML_INT) return bad_value(k, place, v);
        *(int64_t *)field = v->u.i;
        return TITAN_OK;
    case T_DOUBLE: {
        double x;
        if (v->type == TITAN_TOML_INT) x = (double)v->u.i;
        else if (v->type == TITAN_TOML_FLOAT) x = v->u.f;
        else return bad_value(k, place, v);
        if (!isfinite(x) || !in_range(k, x)) return bad_value(k, place, v);
        *(double *)field = x;
        return TITAN_OK;
    }
    case T_BOOL:
        if (v->type != TITAN_TOML_BOOL) return bad_value(k, place, v);
        *(int *)field = v->u.b;
        return TITAN_OK;
    case T_TRI:
        if (v->type == TITAN_TOML_BOOL) *(int *)field = v->u.b;
        else if (v->type == TITAN_TOML_INT && v->u.i == -1) *(int *)field = -1;
        else return bad_value(k, place, v);
        return TITAN_OK;
    }
    return TITAN_OK;
}

/* A torchtitan key titan ignores: warn, or refuse a value that would matter. */
static titan_status ignored_key(int idx, const char *place, const char *section, const char *key,
                                const titan_toml_value *v) {
    const char *harmless = IGNORED[idx].harmless;
    if (harmless) {
        char list[256], *save = NULL, pretty[256] = "";
        snprintf(list, sizeof list, "%s", harmless);
        int ok = 0;
        for (char *alt = strtok_r(list, "|", &save); alt; alt = strtok_r(NULL, "|", &save)) {
            titan_toml_value hv;
            if (titan_toml_parse_value(alt, "harmless", &hv) != TITAN_OK) continue;
            ok |= titan_toml_value_equal(&hv, v);
            titan_toml_value_free(&hv);
            size_t used = strlen(pretty);
            snprintf(pretty + used, sizeof pretty - used, "%s%s", used ? " or " : "", alt);
        }
        titan_error_clear();
        if (!ok) {
            char got[96];
            value_text(v, got, sizeof got);
            titan_error(TITAN_ERR_USAGE, "%s: %s.%s = %s: not supported yet", place, section, key, got);
            titan_error_hint("remove the key or set it to %s", pretty);
            return TITAN_ERR_USAGE;
        }
    }
    titan_warn("%s: %s.%s: ignored: not supported yet", place, section, key);
    return TITAN_OK;
}

/* line_of[i]: where key i was set in this file (0 = not yet); NULL for
 * overrides, where a key may repeat and the last one wins. */
static titan_status apply(titan_job_config *cfg, int *line_of, const char *section, const char *key, const titan_toml_value *v,
                          const char *place, int line) {
    const key_def *k = find_key(section, key);
    if (!k) k = find_alias(section, key);
    if (k) {
        int idx = (int)(k - KEYS);
        if (line_of && line_of[idx])
            return titan_error(TITAN_ERR_USAGE, "%s: %s.%s: same key as %s.%s, already set at line %d", place,
                               section, key, k->section, k->key, line_of[idx]);
        TITAN_TRY(set_key(cfg, k, v, place));
        if (line_of) line_of[idx] = line;
        return TITAN_OK;
    }
    int ig = find_ignored(section, key);
    if (ig >= 0) return ignored_key(ig, place, section, key, v);
    return unknown_key(place, section, key);
}

static titan_status apply_table(titan_job_config *cfg, int *line_of, const char *name, const char *section, const titan_toml_table *t) {
    for (int i = 0; i < t->n; i++) {
        const titan_toml_entry *e = &t->items[i];
        char place[512];
        snprintf(place, sizeof place, "%s:%d", name, e->line);
        if (e->value.type == TITAN_TOML_TABLE) {
            char sub[300];
            titan_toml_format_key(sub, sizeof sub, e->key);
            return unknown_key(place, section, sub); /* no config key is a table */
        }
        TITAN_TRY(apply(cfg, line_of, section, e->key, &e->value, place, e->line));
    }
    return TITAN_OK;
}

static titan_status apply_doc(titan_job_config *cfg, const titan_toml_doc *doc) {
    int line_of[NKEYS] = {0};
    titan_status st = TITAN_OK;
    for (int i = 0; st == TITAN_OK && i < doc->root.n; i++) {
        const titan_toml_entry *e = &doc->root.items[i];
        char place[512];
        snprintf(place, sizeof place, "%s:%d", doc->name, e->line);
        if (e->value.type != TITAN_TOML_TABLE) {
            char secs[1024];
            list_sections(secs, sizeof secs);
            st = titan_error(TITAN_ERR_USAGE, "%s: key '%s' is outside any section", place, e->key);
            const char *homes[2];
            int nh = key_homes(e->key, homes, 2);
            if (nh == 1)
                titan_error_hint("put it under [%s]", homes[0]);
            else if (nh == 2) /* e.g. steps: [training] and [validation] */
                titan_error_hint("put it under [%s] (or [%s])", homes[0], homes[1]);
            else
                titan_error_hint("keys live in sections: %s", secs);
        } else if (!section_known(e->key)) {
            st = unknown_section(place, e->key);
        } else {
            st = apply_table(cfg, line_of, doc->name, e->key, e->value.u.table);
        }
    }
    return st;
}

/* ---- public ---- */

void titan_config_defaults(titan_job_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < NKEYS; i++) {
        const key_def *k = &KEYS[i];
        void *field = (char *)cfg + k->off;
        switch (k->type) {
        case T_STR: snprintf(field, TITAN_STR, "%s", k->sdef); break;
        case T_INT: case T_BOOL: case T_TRI: *(int *)field = (int)k->ndef; break;
        case T_INT64: *(int64_t *)field = (int64_t)k->ndef; break;
        case T_DOUBLE: *(double *)field = k->ndef; break;
        }
    }
}

/* TOML syntax errors in a job file are config errors (exit 2), not corrupt data. */
static titan_status as_usage(titan_status st) {
    if (st != TITAN_ERR_FORMAT) return st;
    char msg[2048], hint[2048];
    snprintf(msg, sizeof msg, "%s", titan_error_message());
    snprintf(hint, sizeof hint, "%s", titan_error_hint_text());
    titan_error(TITAN_ERR_USAGE, "%s", msg);
    if (hint[0]) titan_error_hint("%s", hint);
    return TITAN_ERR_USAGE;
}

static titan_status load_doc(titan_job_config *cfg, titan_toml_doc *doc) {
    titan_job_config *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        titan_toml_free(doc);
        return titan_error(TITAN_ERR_NOMEM, "out of memory");
    }
    memcpy(tmp, cfg, sizeof *tmp);
    titan_status st = apply_doc(tmp, doc);
    if (st == TITAN_OK) memcpy(cfg, tmp, sizeof *tmp); /* all or nothing */
    free(tmp);
    titan_toml_free(doc);
    return st;
}

titan_status titan_config_load_file(titan_job_config *cfg, const char *path) {
    titan_toml_doc *doc;
    TITAN_TRY(as_usage(titan_toml_parse_file(path, &doc)));
    return load_doc(cfg, doc);
}

titan_status titan_config_load_string(titan_job_config *cfg, const char *text, const char *name) {
    titan_toml_doc *doc;
    TITAN_TRY(as_usage(titan_toml_parse(text, strlen(text), name ? name : "<string>", &doc)));
    return load_doc(cfg, doc);
}

titan_status titan_config_override(titan_job_config *cfg, const char *arg) {
    char place[600];
    snprintf(place, sizeof place, "command line: %s", arg);
    const char *a = arg;
    while (*a == '-') a++;
    size_t nlen = strcspn(a, "=");
    const char *dot = memchr(a, '.', nlen);
    char name[256];
    if (nlen >= sizeof name) return titan_error(TITAN_ERR_USAGE, "%s: key name too long", place);
    memcpy(name, a, nlen);
    name[nlen] = '\0';
    if (!dot || dot == a) {
        titan_error(TITAN_ERR_USAGE, "%s: expected --section.key=value", place);
        const char *homes[2];
        int nh = key_homes(name, homes, 2);
        if (nh == 1) titan_error_hint("did you mean --%s.%s%s?", homes[0], name, a + nlen);
        if (nh == 2)
            titan_error_hint("did you mean --%s.%s%s? (or --%s.%s%s)", homes[0], name, a + nlen, homes[1], name,
                             a + nlen);
        return TITAN_ERR_USAGE;
    }
    name[dot - a] = '\0';
    const char *section = name, *key = name + (dot - a) + 1;
    if (!section_known(section)) return unknown_section(place, section);
    const key_def *k = find_key(section, key);
    if (!k) k = find_alias(section, key);

    titan_toml_value v;
    memset(&v, 0, sizeof v);
    if (a[nlen] != '=') {
        if (!k || k->type != T_BOOL) {
            if (!k && find_ignored(section, key) < 0) return unknown_key(place, section, key);
            titan_error(TITAN_ERR_USAGE, "%s: missing '=value'", place);
            titan_error_hint("write --%s.%s=VALUE", section, key);
            return TITAN_ERR_USAGE;
        }
        v.type = TITAN_TOML_BOOL; /* a bare --section.flag means true */
        v.u.b = 1;
    } else {
        const char *text = a + nlen + 1;
        int quoted = text[0] == '"' || text[0] == '\'';
        titan_status st = TITAN_ERR_FAIL;
        if (!(k && k->type == T_STR) || quoted) {
            st = titan_toml_parse_value(text, "value", &v);
            if (st != TITAN_OK && quoted) {
                st = as_usage(st);
                titan_error_context("%s", place);
                return st;
            }
        }
        if (st != TITAN_OK) { /* not a TOML value: a bare string */
            titan_error_clear();
            v.type = TITAN_TOML_STRING;
            v.u.str.len = strlen(text);
            v.u.str.ptr = strdup(text);
            if (!v.u.str.ptr) return titan_error(TITAN_ERR_NOMEM, "out of memory");
        }
    }
    titan_job_config *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        titan_toml_value_free(&v);
        return titan_error(TITAN_ERR_NOMEM, "out of memory");
    }
    memcpy(tmp, cfg, sizeof *tmp);
    titan_status st = apply(tmp, NULL, section, key, &v, place, 0);
    if (st == TITAN_OK) memcpy(cfg, tmp, sizeof *tmp);
    free(tmp);
    titan_toml_value_free(&v);
    return st;
}

titan_status titan_config_validate(const titan_job_config *c) {
    if (!c->checkpoint_initial_load_model_only) {
        titan_error(TITAN_ERR_USAGE, "checkpoint.initial_load_model_only = false: starting from another run's "
                    "whole training state (AdamW moments, step, data position) is not supported");
        titan_error_hint("copy that step directory into the run's checkpoint folder (or titan-reshard it there) "
                         "to go on with its state");
        return TITAN_ERR_USAGE;
    }
    if (c->checkpoint_initial_load_in_hf && !c->checkpoint_initial_load_path[0]) {
        titan_error(TITAN_ERR_USAGE, "checkpoint.initial_load_in_hf = true: checkpoint.initial_load_path is empty");
        titan_error_hint("set checkpoint.initial_load_path to the Hugging Face model's directory");
        return TITAN_ERR_USAGE;
    }
    /* Context parallelism cuts each sequence into 2 x cp equal chunks. */
    int cp = c->parallelism_context_parallel_degree;
    if (cp > 1 && c->training_seq_len % (2 * cp) != 0) {
        titan_error(TITAN_ERR_USAGE, "parallelism.context_parallel_degree = %d: training.seq_len = %d does not split "
                    "into 2 x %d equal chunks", cp, c->training_seq_len, cp);
        titan_error_hint("make training.seq_len a multiple of %d", 2 * cp);
        return TITAN_ERR_USAGE;
    }
    int mbs = c->parallelism_pipeline_parallel_microbatch_size;
    if (c->parallelism_pipeline_parallel_degree > 1 && c->training_local_batch_size % mbs != 0) {
        titan_error(TITAN_ERR_USAGE, "parallelism.pipeline_parallel_microbatch_size = %d does not divide "
                    "training.local_batch_size = %d", mbs, c->training_local_batch_size);
        titan_error_hint("make local_batch_size a multiple of the micro-batch size (torchtitan's rule)");
        return TITAN_ERR_USAGE;
    }
    /* With dp_shard = -1 the degree depends on the job's size: checked at start. */
    int dp = c->parallelism_data_parallel_replicate_degree;
    if (c->parallelism_data_parallel_shard_degree > 0) dp *= c->parallelism_data_parallel_shard_degree;
    int per_step = c->training_local_batch_size * dp;
    if (c->training_global_batch_size != -1 &&
        (c->training_global_batch_size <= 0 || per_step <= 0 || c->training_global_batch_size % per_step != 0)) {
        titan_error(TITAN_ERR_USAGE,
                    "training.global_batch_size = %d: not a multiple of training.local_batch_size (%d) "
                    "x data-parallel degree (%d)",
                    c->training_global_batch_size, c->training_local_batch_size, dp);
        titan_error_hint("use a multiple of %d (gradient accumulation), or -1 for no accumulation", per_step);
        return TITAN_ERR_USAGE;
    }
    if (c->validation_enable) {
        /* Validation runs through the training model's buffers. */
        if (c->validation_local_batch_size != -1 && c->validation_local_batch_size != c->training_local_batch_size) {
            titan_error(TITAN_ERR_USAGE, "validation.local_batch_size = %d: must equal training.local_batch_size (%d)",
                        c->validation_local_batch_size, c->training_local_batch_size);
            titan_error_hint("leave validation.local_batch_size at -1");
            return TITAN_ERR_USAGE;
        }
        if (c->validation_seq_len != -1 && c->validation_seq_len != c->training_seq_len) {
            titan_error(TITAN_ERR_USAGE, "validation.seq_len = %d: must equal training.seq_len (%d)",
                        c->validation_seq_len, c->training_seq_len);
            titan_error_hint("leave validation.seq_len at -1");
            return TITAN_ERR_USAGE;
        }
        if (!c->validation_dataset_path[0]) {
            titan_error(TITAN_ERR_USAGE, "validation.enable = true: validation.dataset_path is not set");
            titan_error_hint("make a held-out shard directory with titan-shard --split and set validation.dataset_path");
            return TITAN_ERR_USAGE;
        }
    }
    return TITAN_OK;
}

int titan_config_write(const titan_job_config *cfg, FILE *f) {
    const char *section = NULL;
    for (int i = 0; i < NKEYS; i++) {
        const key_def *k = &KEYS[i];
        const void *field = (const char *)cfg + k->off;
        if (!section || strcmp(section, k->section) != 0) {
            fprintf(f, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        fprintf(f, "# %s", k->doc);
        if (k->choices) {
            fputs(" (", f);
            for (const char *c = k->choices; *c; c++) {
                if (*c == ',') fputc(',', f), fputc(' ', f);
                else fputc(*c, f);
            }
            fputc(')', f);
        }
        fprintf(f, "\n%s = ", k->key);
        char buf[6 * TITAN_STR + 16]; /* worst case: every byte a \uXXXX escape */
        switch (k->type) {
        case T_STR: {
            const char *s = field;
            titan_toml_format_string(buf, sizeof buf, s, strnlen(s, TITAN_STR));
            fputs(buf, f);
            break;
        }
        case T_INT: fprintf(f, "%d", *(const int *)field); break;
        case T_INT64: fprintf(f, "%lld", (long long)*(const int64_t *)field); break;
        case T_DOUBLE: titan_toml_format_double(buf, sizeof buf, *(const double *)field); fputs(buf, f); break;
        case T_BOOL: fputs(*(const int *)field ? "true" : "false", f); break;
        case T_TRI: {
            int t = *(const int *)field;
            fputs(t < 0 ? "-1" : t ? "true" : "false", f);
            break;
        }
        }
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}
