/* test_config.c - job config: defaults, files, overrides, messages, round trip, torchtitan files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "job/config.h"
#include "train/setup.h"

#include "check.h"

/* ---- capturing titan_warn output (stderr) ---- */

static char captured[16384];
static int saved_fd = -1;
static FILE *cap_file;

static void capture_begin(void) {
    fflush(stderr);
    cap_file = tmpfile();
    saved_fd = dup(2);
    dup2(fileno(cap_file), 2);
}

static const char *capture_end(void) {
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    rewind(cap_file);
    size_t n = fread(captured, 1, sizeof captured - 1, cap_file);
    captured[n] = '\0';
    fclose(cap_file);
    return captured;
}

static titan_status load(titan_job_config *c, const char *text) {
    titan_config_defaults(c);
    return titan_config_load_string(c, text, "t.toml");
}

static void want_error(titan_status st, titan_status code, const char *msg, const char *hint) {
    CHECK(st == code, "status %d, want %d (%s)", st, code, titan_error_message());
    CHECK(strcmp(titan_error_message(), msg) == 0, "message\n  got:  %s\n  want: %s", titan_error_message(), msg);
    if (hint)
        CHECK(strstr(titan_error_hint_text(), hint) != NULL, "hint\n  got:  %s\n  want: ...%s...",
              titan_error_hint_text(), hint);
}

static void test_defaults(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    CHECK(strcmp(c.model_name, "llama3") == 0 && strcmp(c.model_flavor, "debugmodel") == 0, "model");
    CHECK(strcmp(c.model_tokenizer, "byte") == 0, "tokenizer");
    CHECK(c.model_dim == 0 && c.model_n_layers == 0 && c.model_ffn_dim_multiplier == -1 &&
              c.model_rope_scaling_factor == -1 && c.model_tie_embeddings == -1 && c.model_norm_eps == 0,
          "model overrides default to the flavor's");
    CHECK(strcmp(c.optimizer_name, "AdamW") == 0 && c.optimizer_lr == 8e-4 && c.optimizer_beta1 == 0.9 &&
              c.optimizer_beta2 == 0.95 && c.optimizer_eps == 1e-8 && c.optimizer_weight_decay == 0.1,
          "optimizer");
    CHECK(c.lr_scheduler_warmup_steps == 200 && c.lr_scheduler_decay_ratio == -1 &&
              strcmp(c.lr_scheduler_decay_type, "linear") == 0 && c.lr_scheduler_min_lr_factor == 0,
          "lr_scheduler");
    CHECK(c.training_local_batch_size == 8 && c.training_global_batch_size == -1 && c.training_seq_len == 2048 &&
              c.training_max_norm == 1.0 && c.training_steps == 10000 && c.training_seed == 0 &&
              c.training_deterministic == 0 && c.training_threads == 0,
          "training numbers");
    CHECK(strcmp(c.training_mixed_precision_param, "float32") == 0 &&
              strcmp(c.training_mixed_precision_reduce, "float32") == 0 && strcmp(c.training_device, "cpu") == 0 &&
              c.training_dataset_path[0] == '\0',
          "training strings");
    CHECK(c.parallelism_data_parallel_replicate_degree == 1 && c.parallelism_data_parallel_shard_degree == -1 &&
              c.parallelism_tensor_parallel_degree == 1 && c.parallelism_context_parallel_degree == 1 &&
              c.parallelism_pipeline_parallel_degree == 1,
          "parallelism");
    CHECK(c.checkpoint_enable == 1 && strcmp(c.checkpoint_folder, "checkpoint") == 0 &&
              c.checkpoint_interval == 500 && c.checkpoint_keep_latest_k == 10 &&
              strcmp(c.checkpoint_async_mode, "disabled") == 0 && c.checkpoint_initial_load_path[0] == '\0' &&
              c.checkpoint_initial_load_in_hf == 0 && c.checkpoint_initial_load_model_only == 1,
          "checkpoint");
    CHECK(c.metrics_log_freq == 10 && c.metrics_peak_flops == 0, "metrics");
    CHECK(strcmp(c.activation_checkpoint_mode, "none") == 0, "activation_checkpoint");
    CHECK(strcmp(c.job_dump_folder, "./outputs") == 0 && c.job_description[0] == '\0', "job");
    CHECK(titan_config_validate(&c) == TITAN_OK, "defaults validate: %s", titan_error_message());
    c.checkpoint_initial_load_in_hf = 1;
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE,
               "checkpoint.initial_load_in_hf = true: checkpoint.initial_load_path and model.hf_assets_path are empty", NULL);
    snprintf(c.checkpoint_initial_load_path, sizeof c.checkpoint_initial_load_path, "hf/Llama-3.2-1B");
    CHECK(titan_config_validate(&c) == TITAN_OK, "initial_load_in_hf with a path: %s", titan_error_message());
    c.checkpoint_initial_load_model_only = 0;
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE, "checkpoint.initial_load_model_only = false: starting from another run's "
               "whole training state (AdamW moments, step, data position) is not supported", "titan-reshard");
}

static void test_load(void) {
    titan_job_config c;
    const char *text =
        "[job]\ndescription = \"unit test\"\n"
        "[model]\nflavor = \"8B\"\nn_layers = 2\nffn_dim_multiplier = 1.3\ntie_embeddings = true\n"
        "[optimizer]\nlr = 3e-4\nweight_decay = 0  # integers are fine for floats\n"
        "[lr_scheduler]\ndecay_ratio = 0.5\ndecay_type = \"cosine\"\n"
        "[training]\nsteps = 1_000\nseed = -42\ndeterministic = true\ndataset_path = 'data/shards'\n"
        "global_batch_size = 32\n"
        "[checkpoint]\nenable = false\n"
        "[metrics]\npeak_flops = 1e15\n"
        "[activation_checkpoint]\nmode = \"full\"\n";
    titan_status st = load(&c, text);
    CHECK(st == TITAN_OK, "load: %s", titan_error_message());
    CHECK(strcmp(c.job_description, "unit test") == 0, "description");
    CHECK(strcmp(c.model_flavor, "8B") == 0 && c.model_n_layers == 2 && c.model_ffn_dim_multiplier == 1.3 &&
              c.model_tie_embeddings == 1,
          "model");
    CHECK(c.optimizer_lr == 3e-4 && c.optimizer_weight_decay == 0, "optimizer");
    CHECK(c.lr_scheduler_decay_ratio == 0.5 && strcmp(c.lr_scheduler_decay_type, "cosine") == 0, "scheduler");
    CHECK(c.training_steps == 1000 && c.training_seed == -42 && c.training_deterministic == 1 &&
              strcmp(c.training_dataset_path, "data/shards") == 0 && c.training_global_batch_size == 32,
          "training");
    CHECK(c.checkpoint_enable == 0 && c.metrics_peak_flops == 1e15, "checkpoint, metrics");
    CHECK(strcmp(c.activation_checkpoint_mode, "full") == 0, "ac");
    /* keys not in the file keep their defaults */
    CHECK(c.training_seq_len == 2048 && c.optimizer_beta2 == 0.95, "untouched keys");
    /* inline-table form of a section */
    st = load(&c, "training = { steps = 7, seq_len = 64 }\n");
    CHECK(st == TITAN_OK && c.training_steps == 7 && c.training_seq_len == 64, "inline section: %s",
          titan_error_message());
    st = load(&c, "training.steps = 9\n");
    CHECK(st == TITAN_OK && c.training_steps == 9, "dotted key at the root: %s", titan_error_message());

    CHECK(titan_config_load_file(&c, "/nonexistent/job.toml") == TITAN_ERR_IO, "missing file");
}

static void test_overrides(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    static const char *ok[] = {
        "--training.steps=20", "optimizer.lr=1e-3", "--model.flavor=8B", "--job.dump_folder=/tmp/run dir",
        "--checkpoint.enable=false", "--training.deterministic", "--job.description=\"quoted \\\"x\\\"\"",
        "--training.seed=-5", "-metrics.log_freq=3", "--lr_scheduler.decay_ratio=-1", "--model.tie_embeddings=false",
        "--job.description=", "--checkpoint.enable_checkpoint=true", "--training.dataset_path=true",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        CHECK(titan_config_override(&c, ok[i]) == TITAN_OK, "%s: %s", ok[i], titan_error_message());
    CHECK(c.training_steps == 20 && c.optimizer_lr == 1e-3 && strcmp(c.model_flavor, "8B") == 0, "values");
    CHECK(strcmp(c.job_dump_folder, "/tmp/run dir") == 0, "bare string with a space");
    CHECK(c.checkpoint_enable == 1 && c.training_deterministic == 1, "booleans");
    CHECK(c.job_description[0] == '\0', "last override wins");
    CHECK(strcmp(c.training_dataset_path, "true") == 0, "string key takes the raw text");
    CHECK(c.training_seed == -5 && c.metrics_log_freq == 3 && c.lr_scheduler_decay_ratio == -1 &&
              c.model_tie_embeddings == 0,
          "more values");
    CHECK(titan_config_override(&c, "--job.description=\"quoted \\\"x\\\"\"") == TITAN_OK &&
              strcmp(c.job_description, "quoted \"x\"") == 0,
          "quoted TOML string: %s", c.job_description);

    titan_job_config before;
    memcpy(&before, &c, sizeof c);
    want_error(titan_config_override(&c, "--training.stepz=3"), TITAN_ERR_USAGE,
               "command line: --training.stepz=3: unknown key 'training.stepz' in [training]",
               "did you mean 'steps'?");
    want_error(titan_config_override(&c, "--training.seq_len=abc"), TITAN_ERR_USAGE,
               "command line: --training.seq_len=abc: training.seq_len: expected a positive integer, got \"abc\"",
               NULL);
    want_error(titan_config_override(&c, "--training.steps=0"), TITAN_ERR_USAGE,
               "command line: --training.steps=0: training.steps: expected a positive integer, got 0", NULL);
    want_error(titan_config_override(&c, "--training.steps=2.5"), TITAN_ERR_USAGE,
               "command line: --training.steps=2.5: training.steps: expected a positive integer, got 2.5", NULL);
    want_error(titan_config_override(&c, "--trainig.steps=3"), TITAN_ERR_USAGE,
               "command line: --trainig.steps=3: unknown section [trainig]", "did you mean [training]?");
    want_error(titan_config_override(&c, "--steps=3"), TITAN_ERR_USAGE,
               "command line: --steps=3: expected --section.key=value", "did you mean --training.steps=3?");
    want_error(titan_config_override(&c, "--training.steps"), TITAN_ERR_USAGE,
               "command line: --training.steps: missing '=value'", "--training.steps=VALUE");
    want_error(titan_config_override(&c, "--lr_scheduler.decay_type=cosin"), TITAN_ERR_USAGE,
               "command line: --lr_scheduler.decay_type=cosin: lr_scheduler.decay_type: 'cosin' is not one of "
               "linear, sqrt, cosine",
               "did you mean 'cosine'?");
    want_error(titan_config_override(&c, "--job.description=\"unterminated"), TITAN_ERR_USAGE,
               "command line: --job.description=\"unterminated: value:1:1: unterminated string", NULL);
    want_error(titan_config_override(&c, "--optimizer.beta1=1"), TITAN_ERR_USAGE,
               "command line: --optimizer.beta1=1: optimizer.beta1: expected a number in [0, 1), got 1", NULL);
    want_error(titan_config_override(&c, "--optimizer.lr=nan"), TITAN_ERR_USAGE,
               "command line: --optimizer.lr=nan: optimizer.lr: expected a positive number, got nan", NULL);
    want_error(titan_config_override(&c, "--lr_scheduler.decay_ratio=1.5"), TITAN_ERR_USAGE,
               "command line: --lr_scheduler.decay_ratio=1.5: lr_scheduler.decay_ratio: expected -1 or a number in "
               "[0, 1], got 1.5",
               NULL);
    want_error(titan_config_override(&c, "--model.tie_embeddings=2"), TITAN_ERR_USAGE,
               "command line: --model.tie_embeddings=2: model.tie_embeddings: expected true, false or -1, got 2",
               NULL);
    want_error(titan_config_override(&c, "--compile.enable"), TITAN_ERR_USAGE,
               "command line: --compile.enable: missing '=value'", NULL);
    CHECK(memcmp(&before, &c, sizeof c) == 0, "failed overrides left the config unchanged");

    capture_begin();
    titan_status st = titan_config_override(&c, "--compile.enable=true");
    const char *err = capture_end();
    CHECK(st == TITAN_OK, "ignored key: %s", titan_error_message());
    CHECK(strstr(err, "command line: --compile.enable=true: compile.enable: ignored, meaningless here: titan's "
                      "kernels are compiled and fused ahead of time") != NULL,
          "warning: %s", err);
    CHECK(memcmp(&before, &c, sizeof c) == 0, "an ignored key changes nothing");
}

static void test_file_errors(void) {
    titan_job_config c;
    want_error(load(&c, "[training]\nsteps = 3\nstepz = 4\n"), TITAN_ERR_USAGE,
               "t.toml:3: unknown key 'training.stepz' in [training]", "did you mean 'steps'? keys of [training]: ");
    CHECK(strstr(titan_error_hint_text(), "local_batch_size") && strstr(titan_error_hint_text(), "seq_len"),
          "hint lists the section's keys: %s", titan_error_hint_text());
    want_error(load(&c, "[training]\n\nseq_len = \"abc\"\n"), TITAN_ERR_USAGE,
               "t.toml:3: training.seq_len: expected a positive integer, got \"abc\"", NULL);
    want_error(load(&c, "[lr_scheduler]\ndecay_type = \"cubic\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: lr_scheduler.decay_type: 'cubic' is not one of linear, sqrt, cosine", NULL);
    want_error(load(&c, "[model]\nflavor = \"7B\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: model.flavor: '7B' is not one of debugmodel, 1B, 3B, 8B, 70B, 405B", NULL);
    want_error(load(&c, "[model]\nname = \"llama2\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: model.name: 'llama2' is not one of llama3", "did you mean 'llama3'?");
    want_error(load(&c, "[optimizer]\nname = \"adamw\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: optimizer.name: 'adamw' is not one of AdamW, Adam, GaLore", "did you mean 'AdamW'?");
    want_error(load(&c, "[training]\ndevice = \"tpu\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: training.device: 'tpu' is not one of cpu, cuda, cuda:N, auto, cpu-guard", NULL);
    /* "cuda:N" stands for a GPU number */
    CHECK(load(&c, "[training]\ndevice = \"cuda:12\"\n") == TITAN_OK && strcmp(c.training_device, "cuda:12") == 0);
    CHECK(load(&c, "[training]\ndevice = \"auto\"\n") == TITAN_OK);
    CHECK(load(&c, "[training]\ndevice = \"cuda:N\"\n") == TITAN_ERR_USAGE, "cuda:N itself is no device");
    CHECK(load(&c, "[training]\ndevice = \"cuda:\"\n") == TITAN_ERR_USAGE);
    CHECK(load(&c, "[training]\ndevice = \"cuda:1x\"\n") == TITAN_ERR_USAGE);
    want_error(load(&c, "[training]\nmixed_precision_reduce = \"float16\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: training.mixed_precision_reduce: 'float16' is not one of float32, bfloat16", NULL);
    /* activation checkpointing: torchtitan's modes and selective options */
    CHECK(load(&c, "[activation_checkpoint]\nmode = \"selective\"\n") == TITAN_OK &&
              titan_setup_ac_mode(&c) == 2, "selective, default option \"2\": every 2nd layer");
    CHECK(load(&c, "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"op\"\n") ==
              TITAN_OK && titan_setup_ac_mode(&c) == TITAN_AC_OP, "selective op");
    CHECK(load(&c, "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = '1'\n") ==
              TITAN_OK && titan_setup_ac_mode(&c) == TITAN_AC_FULL, "selective every layer is full");
    CHECK(load(&c, "[activation_checkpoint]\nmode = \"none\"\nselective_ac_option = \"12\"\n") ==
              TITAN_OK && titan_setup_ac_mode(&c) == TITAN_AC_NONE, "the option is read in selective mode only");
    CHECK(load(&c, "[activation_checkpoint]\nmode = \"full\"\n") == TITAN_OK &&
          titan_setup_ac_mode(&c) == TITAN_AC_FULL);
    static const char *const bad_opts[] = {"0", "-2", "two", "", "07", "1000000000", "OP"};
    for (size_t i = 0; i < sizeof bad_opts / sizeof bad_opts[0]; i++) {
        char text[128], msg[160];
        snprintf(text, sizeof text, "[activation_checkpoint]\nselective_ac_option = \"%s\"\n", bad_opts[i]);
        snprintf(msg, sizeof msg, "t.toml:2: activation_checkpoint.selective_ac_option: '%s' is not one of op, N",
                 bad_opts[i]);
        want_error(load(&c, text), TITAN_ERR_USAGE, msg, NULL);
    }
    want_error(load(&c, "[activation_checkpoint]\nselective_ac_option = \"0\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: activation_checkpoint.selective_ac_option: '0' is not one of op, N",
               "N stands for a whole number from 1");
    want_error(load(&c, "[activation_checkpoint]\nmode = \"memory_budget\"\nmemory_budget = 0.5\n"),
               TITAN_ERR_USAGE,
               "t.toml:2: activation_checkpoint.mode: 'memory_budget': memory-budget checkpointing "
               "(torch.compile's min-cut partitioner) has no counterpart in titan",
               "use mode = \"selective\"");
    CHECK(load(&c, "[checkpoint]\nasync_mode = \"async\"\n") == TITAN_OK &&
          strcmp(c.checkpoint_async_mode, "async") == 0);
    want_error(load(&c, "[checkpoint]\nasync_mode = \"later\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: checkpoint.async_mode: 'later' is not one of disabled, async, async_with_pinned_mem", NULL);
    want_error(load(&c, "[trainig]\nsteps = 3\n"), TITAN_ERR_USAGE, "t.toml:1: unknown section [trainig]",
               "did you mean [training]? sections: [job], [model]");
    want_error(load(&c, "[bogus]\n"), TITAN_ERR_USAGE, "t.toml:1: unknown section [bogus]", "sections: [job]");
    want_error(load(&c, "steps = 3\n"), TITAN_ERR_USAGE, "t.toml:1: key 'steps' is outside any section",
               "put it under [training]");
    want_error(load(&c, "[training]\nfoo.bar = 1\n"), TITAN_ERR_USAGE, "t.toml:2: unknown key 'training.foo' in [training]",
               NULL);
    want_error(load(&c, "[optimizer]\nbeta2 = 1.0\n"), TITAN_ERR_USAGE,
               "t.toml:2: optimizer.beta2: expected a number in [0, 1), got 1.0", NULL);
    want_error(load(&c, "[optimizer]\neps = 0\n"), TITAN_ERR_USAGE,
               "t.toml:2: optimizer.eps: expected a positive number, got 0", NULL);
    want_error(load(&c, "[checkpoint]\nkeep_latest_k = -1\n"), TITAN_ERR_USAGE,
               "t.toml:2: checkpoint.keep_latest_k: expected a non-negative integer, got -1", NULL);
    want_error(load(&c, "[training]\nglobal_batch_size = 0\n"), TITAN_ERR_USAGE,
               "t.toml:2: training.global_batch_size: expected -1 or a positive integer, got 0", NULL);
    want_error(load(&c, "[training]\nsteps = 3000000000\n"), TITAN_ERR_USAGE,
               "t.toml:2: training.steps: expected a positive integer, got 3000000000", NULL);
    want_error(load(&c, "[training]\ndeterministic = 1\n"), TITAN_ERR_USAGE,
               "t.toml:2: training.deterministic: expected true or false, got 1", NULL);
    want_error(load(&c, "[job]\ndump_folder = \"\"\n"), TITAN_ERR_USAGE,
               "t.toml:2: job.dump_folder: expected a non-empty string, got \"\"", NULL);
    want_error(load(&c, "[checkpoint]\nenable = true\nenable_checkpoint = false\n"), TITAN_ERR_USAGE,
               "t.toml:3: checkpoint.enable_checkpoint: same key as checkpoint.enable, already set at line 2", NULL);
    /* torchtitan's older [float8] is [quantize.linear.float8] */
    CHECK(load(&c, "[float8]\nenable_fsdp_float8_all_gather = true\n") == TITAN_OK &&
          c.float8_enable_fsdp_float8_all_gather == 1);
    want_error(load(&c, "[float8]\nforce_recompute_fp8_weight_in_bwd = true\n"), TITAN_ERR_USAGE,
               "t.toml:2: float8.force_recompute_fp8_weight_in_bwd = true: not supported: torchao's recompute of the "
               "float8 weight in the backward (an FSDP memory trade) is not implemented: only false",
               "remove the key or set it to false");
    CHECK(load(&c, "[model]\nconverters = [\"float8\"]\n[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n"
                   "enable_fsdp_float8_all_gather = true\n") == TITAN_OK);
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE,
               "quantize.linear.float8.recipe_name = \"rowwise\" with enable_fsdp_float8_all_gather = true: not "
               "supported (torchtitan refuses it too)", "tensorwise only");
    want_error(load(&c, "[profiling]\nenable_profilng = true\n"), TITAN_ERR_USAGE,
               "t.toml:2: unknown key 'profiling.enable_profilng' in [profiling]",
               "did you mean 'enable_profiling'?");
    want_error(load(&c, "[training]\nsteps = 3\n[training]\n"), TITAN_ERR_USAGE,
               "t.toml:3:1: table [training] defined twice (first at line 1)", NULL);
    char longs[400] = "[job]\ndescription = \"";
    memset(longs + strlen(longs), 'x', 300);
    strcat(longs, "\"\n");
    want_error(load(&c, longs), TITAN_ERR_USAGE,
               "t.toml:2: job.description: string is 300 bytes, longer than the 255 allowed", NULL);

    /* a failed load leaves the config as it was */
    titan_job_config before;
    titan_config_defaults(&c);
    titan_config_override(&c, "--training.steps=77");
    memcpy(&before, &c, sizeof c);
    CHECK(titan_config_load_string(&c, "[training]\nseq_len = 16\nsteps = 5\nbad = 1\n", "t.toml") != TITAN_OK,
          "bad file accepted");
    CHECK(memcmp(&before, &c, sizeof c) == 0, "failed load modified the config");
}

static char *write_to_string(const titan_job_config *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(titan_config_write(c, f) == 0, "write failed");
    fclose(f);
    return buf;
}

static void round_trip(const titan_job_config *c, const char *what) {
    char *text = write_to_string(c);
    titan_job_config back;
    titan_config_defaults(&back);
    titan_config_override(&back, "--training.steps=12345"); /* the file must set every key */
    titan_config_override(&back, "--job.description=zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    capture_begin();
    titan_status st = titan_config_load_string(&back, text, "written.toml");
    const char *err = capture_end();
    CHECK(st == TITAN_OK, "%s: written config does not load: %s\n%s", what, titan_error_message(), text);
    CHECK(err[0] == '\0', "%s: loading the written config warned: %s", what, err);
    CHECK(memcmp(&back, c, sizeof back) == 0, "%s: round trip differs\n%s", what, text);
    free(text);
}

static void test_round_trip(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    round_trip(&c, "defaults");
    static const char *set[] = {
        "--job.description=\"tabs\\tquotes\\\" backslash\\\\ newline\\n unicode \\u00e9 ctl \\u0001\"",
        "--job.dump_folder=/scratch/runs/llama 8b", "--model.flavor=70B", "--model.dim=4096",
        "--model.n_kv_heads=2", "--model.ffn_dim_multiplier=1.3", "--model.norm_eps=1e-6",
        "--model.rope_theta=500000", "--model.rope_scaling_factor=8", "--model.tie_embeddings=true",
        "--optimizer.lr=0.00030000000000000003", "--optimizer.beta1=0.8999999999999999",
        "--optimizer.eps=1e-300", "--optimizer.weight_decay=0", "--lr_scheduler.warmup_steps=0",
        "--lr_scheduler.decay_ratio=0.1", "--lr_scheduler.decay_type=sqrt", "--lr_scheduler.min_lr_factor=1",
        "--training.dataset_path=data/shards", "--training.global_batch_size=64", "--training.max_norm=-1",
        "--training.seed=-9223372036854775808", "--training.deterministic=true", "--training.device=cuda",
        "--training.mixed_precision_param=bfloat16", "--training.threads=3",
        "--parallelism.tensor_parallel_degree=2", "--checkpoint.enable=false", "--checkpoint.keep_latest_k=0",
        "--metrics.peak_flops=989000000000000.1", "--activation_checkpoint.mode=full",
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        CHECK(titan_config_override(&c, set[i]) == TITAN_OK, "%s: %s", set[i], titan_error_message());
    round_trip(&c, "every key changed");

    /* the output is documented, sectioned TOML */
    char *text = write_to_string(&c);
    CHECK(strstr(text, "[training]\n") && strstr(text, "\n[activation_checkpoint]\n"), "sections");
    CHECK(strstr(text, "# optimizer steps to train\nsteps = 10000\n") != NULL, "doc comment before key:\n%s", text);
    CHECK(strstr(text, "(one of") == NULL && strstr(text, "(linear, sqrt, cosine)\ndecay_type = \"sqrt\"") != NULL,
          "choices listed:\n%s", text);
    CHECK(strstr(text, "tie_embeddings = true\n") && strstr(text, "ffn_dim_multiplier = 1.3\n"), "values");
    free(text);
}

static const char *fixture(void) {
    static char path[4096];
    const char *src = __FILE__; /* tests/unit/test_config.c */
    const char *slash = strrchr(src, '/');
    snprintf(path, sizeof path, "%.*s/../fixtures/torchtitan_debug.toml", slash ? (int)(slash - src) : 1,
             slash ? src : ".");
    if (access(path, R_OK) != 0) snprintf(path, sizeof path, "tests/fixtures/torchtitan_debug.toml");
    return path;
}

static void test_torchtitan_file(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    capture_begin();
    titan_status st = titan_config_load_file(&c, fixture());
    const char *err = capture_end();
    CHECK(st == TITAN_OK, "torchtitan file: %s (hint: %s)", titan_error_message(), titan_error_hint_text());
    CHECK(strstr(err, "torchtitan_debug.toml:21: profiling.enable_memory_snapshot: ignored, meaningless here: ") !=
              NULL,
          "warnings name file:line and key:\n%s", err);
    CHECK(strstr(err, "enable_profiling") == NULL && c.profiling_enable_profiling == 0 &&
              c.profiling_profile_freq == 10 && strcmp(c.profiling_save_traces_folder, "profile_trace") == 0,
          "[profiling] keys read:\n%s", err);
    CHECK(strstr(err, "float8") == NULL && strcmp(c.float8_filter_fqns, "output") == 0 && !titan_config_float8(&c),
          "[float8] read (torchtitan's older [quantize.linear.float8]):\n%s", err);
    CHECK(strstr(err, "compile.components: ignored") &&
              strstr(err, "comm.init_timeout_seconds: ignored") && !strstr(err, "model.hf_assets_path") &&
              strcmp(c.model_hf_assets_path, "./tests/assets/tokenizer") == 0 &&
              strcmp(c.training_dataset, "c4_test") == 0,
          "warnings:\n%s", err);
    CHECK(strstr(err, "trace_buf_size") == NULL && c.comm_trace_buf_size == 20000 &&
              c.comm_train_timeout_seconds == 100 && strcmp(c.comm_save_traces_folder, "comm_traces") == 0,
          "[comm] keys read (the flight recorder's, the timeout):\n%s", err);
    CHECK(strstr(err, "steps") == NULL || strstr(err, "training.steps") == NULL, "supported keys do not warn");
    CHECK(c.training_steps == 10 && c.metrics_log_freq == 1 && c.lr_scheduler_warmup_steps == 2 &&
              c.lr_scheduler_decay_ratio == 0.8 && c.checkpoint_enable == 0 && c.checkpoint_interval == 10 &&
              strcmp(c.job_description, "Llama 3 debug training") == 0 &&
              titan_setup_ac_mode(&c) == 2 && strcmp(c.training_mixed_precision_param, "bfloat16") == 0,
          "torchtitan values");
    CHECK(titan_config_validate(&c) == TITAN_OK, "validate: %s", titan_error_message());
}

static void test_validate(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    titan_config_override(&c, "--training.global_batch_size=16");
    CHECK(titan_config_validate(&c) == TITAN_OK, "16 = 2 x 8: %s", titan_error_message());
    titan_config_override(&c, "--training.global_batch_size=12");
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE,
               "training.global_batch_size = 12: not a multiple of training.local_batch_size (8) x data-parallel "
               "degree (1)",
               "use a multiple of 8");
    titan_config_defaults(&c);
    titan_config_override(&c, "--parallelism.tensor_parallel_degree=2");
    CHECK(titan_config_validate(&c) == TITAN_OK, "tp 2: %s", titan_error_message());
    titan_config_defaults(&c);
    titan_config_override(&c, "--parallelism.context_parallel_degree=2");
    CHECK(titan_config_validate(&c) == TITAN_OK, "cp 2: %s", titan_error_message());
    titan_config_override(&c, "--training.seq_len=2050");
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE,
               "parallelism.context_parallel_degree = 2: training.seq_len = 2050 does not split into 2 x 2 equal "
               "chunks",
               "make training.seq_len a multiple of 4");
    titan_config_defaults(&c);
    titan_config_override(&c, "--parallelism.data_parallel_shard_degree=1");
    CHECK(titan_config_validate(&c) == TITAN_OK, "dp_shard 1: %s", titan_error_message());
    titan_config_override(&c, "--parallelism.data_parallel_shard_degree=4");
    CHECK(titan_config_validate(&c) == TITAN_OK, "dp_shard 4: %s", titan_error_message());
    /* The global batch must split over local x dp (2 x 4 here). */
    titan_config_override(&c, "--training.local_batch_size=2");
    titan_config_override(&c, "--training.global_batch_size=12");
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE,
               "training.global_batch_size = 12: not a multiple of training.local_batch_size (2) x data-parallel "
               "degree (4)",
               "use a multiple of 8");
    /* Pipeline parallelism: the micro-batch size must divide the local batch. */
    titan_config_defaults(&c);
    titan_config_override(&c, "--parallelism.pipeline_parallel_degree=2");
    CHECK(titan_config_validate(&c) == TITAN_OK, "pp 2: %s", titan_error_message());
    CHECK(strcmp(c.parallelism_pipeline_parallel_schedule, "1F1B") == 0 &&
              c.parallelism_pipeline_parallel_microbatch_size == 1, "pp defaults");
    titan_config_override(&c, "--training.local_batch_size=4");
    titan_config_override(&c, "--parallelism.pipeline_parallel_microbatch_size=3");
    want_error(titan_config_validate(&c), TITAN_ERR_USAGE,
               "parallelism.pipeline_parallel_microbatch_size = 3 does not divide training.local_batch_size = 4",
               "multiple of the micro-batch size");
    titan_config_override(&c, "--parallelism.pipeline_parallel_microbatch_size=2");
    CHECK(titan_config_validate(&c) == TITAN_OK, "micro-batch 2 of 4: %s", titan_error_message());
    CHECK(titan_config_override(&c, "--parallelism.pipeline_parallel_schedule=GPipe") == TITAN_OK, "GPipe");
    CHECK(titan_config_override(&c, "--parallelism.pipeline_parallel_schedule=ZBVZeroBubble") == TITAN_OK, "ZBV");
    CHECK(c.parallelism_pp_schedule == TITAN_JOB_PP_ZBV, "ZBVZeroBubble's enum");
    CHECK(titan_config_override(&c, "--parallelism.pipeline_parallel_schedule=DualPipeV") == TITAN_OK &&
              c.parallelism_pp_schedule == TITAN_JOB_PP_DUALPIPEV, "DualPipeV");
    CHECK(titan_config_override(&c, "--parallelism.pipeline_parallel_schedule=ZeroBubbleH2") == TITAN_ERR_USAGE,
          "an unknown schedule refused");
    titan_config_defaults(&c);
    /* bf16 parameters on the CPU need FSDP: titan-train checks at start
     * (tests/cli/dist_train.sh), where the shard degree is known. */
    titan_config_override(&c, "--training.mixed_precision_param=bfloat16");
    CHECK(titan_config_validate(&c) == TITAN_OK, "bfloat16 on cpu: %s", titan_error_message());
    titan_config_override(&c, "--training.device=cuda");
    CHECK(titan_config_validate(&c) == TITAN_OK, "bfloat16 on cuda: %s", titan_error_message());
}

/* Keys with a list of choices resolve into enums once, when set; a failed
 * set leaves both the string and the enum as they were. */
static void test_enums(void) {
    titan_job_config c;
    titan_config_defaults(&c);
    CHECK(c.training_param_dtype == TITAN_JOB_FLOAT32 && c.training_reduce_dtype == TITAN_JOB_FLOAT32 &&
              c.training_device_kind == TITAN_JOB_DEVICE_CPU && c.parallelism_pp_schedule == TITAN_JOB_PP_1F1B &&
              c.parallelism_reshard_policy == TITAN_JOB_RESHARD_DEFAULT &&
              c.checkpoint_async == TITAN_JOB_ASYNC_DISABLED && c.activation_checkpoint_kind == TITAN_JOB_AC_NONE,
          "enum defaults");
    CHECK(load(&c, "[training]\nmixed_precision_param = \"bfloat16\"\nmixed_precision_reduce = \"bfloat16\"\n"
                   "device = \"cuda:3\"\n[parallelism]\npipeline_parallel_schedule = \"GPipe\"\n"
                   "fsdp_reshard_after_forward = \"never\"\n[checkpoint]\nasync_mode = \"async_with_pinned_mem\"\n"
                   "[activation_checkpoint]\nmode = \"selective\"\n") == TITAN_OK,
          "load: %s", titan_error_message());
    CHECK(c.training_param_dtype == TITAN_JOB_BFLOAT16 && c.training_reduce_dtype == TITAN_JOB_BFLOAT16 &&
              c.training_device_kind == TITAN_JOB_DEVICE_CUDA_N && c.parallelism_pp_schedule == TITAN_JOB_PP_GPIPE &&
              c.parallelism_reshard_policy == TITAN_JOB_RESHARD_NEVER &&
              c.checkpoint_async == TITAN_JOB_ASYNC_PINNED_MEM && c.activation_checkpoint_kind == TITAN_JOB_AC_SELECTIVE,
          "enums from a file");
    static const struct { const char *arg; titan_job_device kind; } dev[] = {
        {"cpu", TITAN_JOB_DEVICE_CPU}, {"cuda", TITAN_JOB_DEVICE_CUDA}, {"cuda:0", TITAN_JOB_DEVICE_CUDA_N},
        {"auto", TITAN_JOB_DEVICE_AUTO}, {"cpu-guard", TITAN_JOB_DEVICE_CPU_GUARD},
    };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        char arg[64];
        snprintf(arg, sizeof arg, "--training.device=%s", dev[i].arg);
        CHECK(titan_config_override(&c, arg) == TITAN_OK && c.training_device_kind == dev[i].kind, "%s", arg);
    }
    CHECK(titan_config_override(&c, "--parallelism.fsdp_reshard_after_forward=always") == TITAN_OK &&
              c.parallelism_reshard_policy == TITAN_JOB_RESHARD_ALWAYS, "override");
    CHECK(titan_config_override(&c, "--parallelism.fsdp_reshard_after_forward=sometimes") == TITAN_ERR_USAGE &&
              c.parallelism_reshard_policy == TITAN_JOB_RESHARD_ALWAYS &&
              strcmp(c.parallelism_fsdp_reshard_after_forward, "always") == 0, "a refused value changes nothing");
}

int main(void) {
    titan_log_init("test_config");
    test_defaults();
    test_load();
    test_overrides();
    test_file_errors();
    test_round_trip();
    test_torchtitan_file();
    test_validate();
    test_enums();
    if (failures) {
        fprintf(stderr, "test_config: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_config: ok\n");
    return 0;
}
