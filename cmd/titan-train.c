/* titan-train - trains a run directory, one process per rank: alone, as N
 * local ranks it spawns itself (--nproc N), or under mpirun/srun (PMIx). */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cpu_env.h"
#include "core/log.h"
#include "core/options.h"
#include "core/version.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "parallel/mesh.h"
#include "job/args.h"
#include "train/memory_estimate.h"
#include "train/setup.h"
#include "train/train.h"

#include "titan-train/elastic.h"

/* --job.config_file F: F's job (with the command line's keys) trains in its
 * job.dump_folder, as torchtitan runs it. A new run is made there first, by
 * the launcher alone: ranks started by mpirun/srun find it made or stop. An
 * existing run resumes under F's keys; where they differ from the run's
 * config.toml, the first process says so. */
static titan_status open_job_run(const titan_job_config *cfg, const char *run, const char *file) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.toml", run);
    int rank_process = getenv("TITAN_RANK") || getenv("PMIX_NAMESPACE");
    if (access(path, F_OK) != 0) {
        if (rank_process) {
            titan_error(TITAN_ERR_IO, "%s: job.dump_folder of %s holds no run", run, file);
            titan_error_hint("make it before starting the ranks: titan-init --job.config_file %s", file);
            return TITAN_ERR_IO;
        }
        titan_info("%s: a new run of %s (job.dump_folder)", run, file);
        return titan_run_init(cfg, run, 0);
    }
    titan_job_config saved;
    TITAN_TRY(titan_run_load_config(&saved, run));
    char diff[1024];
    int count = titan_config_diff(&saved, cfg, diff, sizeof diff);
    if (count && !getenv("TITAN_RANK") && titan_dist_env_rank() == 0)
        titan_info("%s: resuming under %s, whose keys differ from %s in %d: %s", run, file, path, count, diff);
    return TITAN_OK;
}

/* --max-restarts and --min-nproc belong to --nproc's launcher; a restart
 * takes fewer ranks only when it may restart at all. */
static titan_status check_launch_options(long long nproc, long long max_restarts, long long min_nproc) {
    if ((max_restarts || min_nproc) && !nproc) {
        titan_error(TITAN_ERR_USAGE, "%s: only with --nproc (the local launcher restarts its ranks)",
                    max_restarts ? "--max-restarts" : "--min-nproc");
        titan_error_hint("under srun or mpirun, restart the launch in a loop: see titan-train(1), Launch");
        return TITAN_ERR_USAGE;
    }
    if (min_nproc > nproc)
        return titan_error(TITAN_ERR_USAGE, "--min-nproc %lld: more than --nproc %lld", min_nproc, nproc);
    if (min_nproc && min_nproc < nproc && !max_restarts) {
        titan_error(TITAN_ERR_USAGE, "--min-nproc %lld: no restart to take fewer ranks (--max-restarts 0)", min_nproc);
        titan_error_hint("add --max-restarts K");
        return TITAN_ERR_USAGE;
    }
    return TITAN_OK;
}

/* TITAN_RESTART and TITAN_RESTART_CAUSE: set by the launcher (elastic.h)
 * or a Slurm loop for a restarted job's ranks; metrics.jsonl records them.
 * TITAN_RESTART_SAVED=1: the job saved a checkpoint since its first start. */
static titan_status restart_env(titan_train_opts *opts) {
    const char *v = getenv("TITAN_RESTART");
    if (!v || !*v) return TITAN_OK;
    char *end;
    long k = strtol(v, &end, 10);
    if (*end || k < 0 || k > INT_MAX)
        return titan_error(TITAN_ERR_USAGE, "TITAN_RESTART=%s: not a restart count (0, 1, 2, ...)", v);
    opts->restart = (int)k;
    opts->restart_cause = getenv("TITAN_RESTART_CAUSE");
    if (!opts->restart_cause) opts->restart_cause = "";
    const char *saved = getenv("TITAN_RESTART_SAVED");
    opts->restart_saved = saved && !strcmp(saved, "1");
    return TITAN_OK;
}

/* A rank whose error rank 0 prints (titan_error_mute) lingers a moment
 * before it exits: mpirun and srun end the whole job at the first rank that
 * fails, which could stop rank 0 before it has said why. */
static int report_rank(titan_status st) {
    if (st != TITAN_OK && titan_error_muted()) sleep(2);
    int rc = titan_report(st);
    titan_comm_exiting(st); /* MPI peers stop now, not at their timeouts */
    return rc;
}

/* --print-keys [FILE]: torchtitan's schema key by key, or FILE's keys, each
 * with its status; exit 2 when FILE has a key titan refuses. */
static int keys_listing(const char *file, titan_args *keys) {
    if (keys->n) {
        titan_error(TITAN_ERR_USAGE, "--print-keys: lists a job file's keys as written; it takes no overrides");
        return titan_report(TITAN_ERR_USAGE);
    }
    if (!file) {
        titan_config_print_schema(stdout);
        return 0;
    }
    int refused = titan_config_print_keys(file, stdout);
    if (refused < 0) return titan_report(titan_error_code());
    if (refused) titan_error(TITAN_ERR_USAGE, "%s: %d key%s that titan refuses (listed above)", file, refused,
                             refused == 1 ? "" : "s");
    return refused ? titan_report(TITAN_ERR_USAGE) : 0;
}

/* --help's prose around the options the table generates. */
static const char intro[] =
    "Trains the run directory RUN (made by titan-init) from its latest checkpoint\n"
    "up to training.steps, checkpointing every checkpoint.interval steps.";
static const char footer[] =
    "Exit status: 0 ok, 1 failure, 2 usage or config error, 3 file missing or\n"
    "unreadable, 4 malformed input, 5 non-finite loss or gradient, 6 out of memory,\n"
    "7 damaged data (checksum, file cut short), 8 another rank failed or timed out.\n"
    "See titan-train(1).";

int main(int argc, char **argv) {
    /* SIGUSR1 asks for the flight recorder's dump: harmless before it
     * records (or with it off), passed on to the ranks by --nproc. */
    signal(SIGUSR1, SIG_IGN);
    titan_cpu_env_setup(argv);
    titan_log_init("titan-train");
    const char *data = NULL, *device = NULL;
    int print = 0, print_keys = 0, dry_run = 0, verbosity = 1;
    long long world_size = 0, nproc = 0, sample = 0, stop_at = 0, max_restarts = 0, min_nproc = 0;
    titan_train_opts opts = {.prompt = "", .temperature = 0.0};
    static titan_args keys; /* static, as r below: reachable until exit */
    const titan_option table[] = {
        {TITAN_OPT(PATH, "data", 0, &data, "DIR", "shard directory (same as --training.dataset_path=DIR)")},
        {TITAN_OPT(STRING, "device", 0, &device, "DEV", "cpu, cuda, cuda:N or auto (same as --training.device=DEV)")},
        {TITAN_OPT(INT, "nproc", 0, &nproc, "N", "start N local ranks of titan-train and wait for them\n"
         "(mpirun/srun start the ranks themselves)"), .min = 1, .max = 1024, .expected = "a rank count 1..1024"},
        {TITAN_OPT(INT, "max-restarts", 0, &max_restarts, "K", "with --nproc: start the ranks again from the latest\n"
         "checkpoint, up to K times, when the job loses one"), .min = 0, .max = 1000,
         .expected = "a restart count 0..1000"},
        {TITAN_OPT(INT, "min-nproc", 0, &min_nproc, "M", "with --max-restarts: a restart may take fewer ranks,\n"
         "at least M (default: --nproc's N)"), .min = 1, .max = 1024, .expected = "a rank count 1..1024"},
        {TITAN_OPT(FLAG, "print-config", 0, &print, NULL, "print the resolved config and exit")},
        {TITAN_OPT(FLAG, "print-keys", 0, &print_keys, NULL, "print what titan does with each key of torchtitan's\n"
         "job schema, or of CONFIG.toml's keys, and exit")},
        {TITAN_OPT(FLAG, "dry-run", 0, &dry_run, NULL, "print every rank's memory estimate (parameters, gradients,\n"
         "optimizer, activations, communication buffers, peak) without\n"
         "allocating it or starting ranks, and exit")},
        {TITAN_OPT(INT, "world-size", 0, &world_size, "N", "with --dry-run: the job's ranks (default: --nproc's N, else 1)"),
         .min = 1, .max = 1024, .expected = "a rank count 1..1024"},
        {TITAN_OPT(INT, "stop-at", 0, &stop_at, "STEP", "stop after STEP with a checkpoint; the LR schedule still\n"
         "runs to training.steps (for jobs cut by a time limit)"), .min = 1, .max = LLONG_MAX,
         .expected = "a step number >= 1"},
        {TITAN_OPT(INT, "sample", 0, &sample, "N", "after training, generate N tokens to stdout"), .min = 0,
         .max = 1000000, .expected = "a token count 0..1000000"},
        {TITAN_OPT(STRING, "prompt", 0, &opts.prompt, "TEXT", "prompt for --sample (default: none)")},
        {TITAN_OPT(DOUBLE, "temperature", 0, &opts.temperature, "T", "sampling temperature, 0 = greedy (default 0)"),
         .dmin = 0, .dmax = HUGE_VAL, .expected = "a number >= 0"},
        TITAN_OPTS_STANDARD(&verbosity),
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-train",
        .usage = "[options] RUN [--section.key=value ...]\n"
                 "[options] --job.config_file CONFIG.toml [--section.key=value ...]\n"
                 "--print-config RUN|CONFIG.toml [--section.key=value ...]\n"
                 "--print-keys [CONFIG.toml]",
        .intro = intro, .footer = footer, .opts = table, .key_fn = titan_args_collect, .key_ctx = &keys,
    };
    static titan_opt_result r; /* static: its lists live until exit, reachable (LeakSanitizer) */
    int code = titan_opt_main(&spec, argc, argv, &r, &verbosity);
    if (code >= 0) return code;
    /* torchtitan's --job.config_file: the job file names the run (job.dump_folder) */
    static char *config_file; /* reachable until exit */
    config_file = titan_args_take(&keys, "job.config_file");
    titan_status st;
    if (r.npos > (config_file ? 0 : 1)) {
        titan_error(TITAN_ERR_USAGE, "unexpected argument '%s' (%s)", r.pos[config_file ? 0 : 1],
                    config_file ? "--job.config_file names the job, and job.dump_folder its run directory"
                                : "one run directory expected");
        return titan_report(TITAN_ERR_USAGE);
    }
    if (print_keys) return keys_listing(r.npos ? r.pos[0] : NULL, &keys);
    if (!config_file && r.npos == 0) {
        titan_opt_help(&spec, stderr);
        return 2;
    }
    const char *pos = config_file ? config_file : r.pos[0];
    opts.sample_tokens = (int)sample;
    opts.stop_at = stop_at;
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    struct stat sb;
    int is_file = stat(pos, &sb) == 0 && S_ISREG(sb.st_mode);
    if (is_file && !config_file && !print) {
        titan_error(TITAN_ERR_USAGE, "%s: a job config, not a run directory", pos);
        titan_error_hint("titan-train --job.config_file %s trains it in its job.dump_folder; "
                         "or titan-init %s RUN, then titan-train RUN", pos, pos);
        return titan_report(TITAN_ERR_USAGE);
    }
    if (config_file || (print && is_file))
        st = titan_config_load_file(&cfg, pos);
    else
        st = titan_run_load_config(&cfg, pos);
    /* A job file's relative paths are this directory's, as the run's config will hold them. */
    if (st == TITAN_OK && config_file) st = titan_run_absolute_paths(&cfg);
    titan_job_config saved = cfg; /* as loaded: a path that differs came from the command line */
    if (st == TITAN_OK && data) snprintf(cfg.training_dataset_path, sizeof cfg.training_dataset_path, "%s", data);
    if (st == TITAN_OK && device) {
        char kv[TITAN_STR + 32];
        snprintf(kv, sizeof kv, "--training.device=%s", device);
        st = titan_config_override(&cfg, kv);
    }
    if (st == TITAN_OK) st = titan_args_apply(&cfg, &keys);
    titan_args_free(&keys);
    if (st == TITAN_OK) st = titan_config_validate(&cfg);
    /* Under mpirun/srun every rank reads the same job: rank 0 says what is wrong with it. */
    if (st == TITAN_ERR_USAGE && titan_dist_env_rank() > 0) titan_error_mute();
    if (st != TITAN_OK) return report_rank(st);
    /* A job file's defaults that are not torchtitan's, said once (not by every rank). */
    if ((config_file || (print && is_file)) && !getenv("TITAN_RANK") && titan_dist_env_rank() == 0)
        titan_config_note_defaults(pos, &cfg);
    if (print) {
        titan_config_write(&cfg, stdout);
        return 0;
    }
    if (world_size && !dry_run) {
        titan_error(TITAN_ERR_USAGE, "--world-size: only with --dry-run (a job's ranks come from --nproc or its launcher)");
        return titan_report(TITAN_ERR_USAGE);
    }
    if (dry_run) {
        int world = world_size ? (int)world_size : nproc ? (int)nproc : 1;
        return titan_report(titan_memory_dry_run_job(&cfg, world, stdout));
    }
    const char *run = config_file ? cfg.job_dump_folder : pos;
    if (config_file && (st = open_job_run(&cfg, run, config_file)) != TITAN_OK) return titan_report(st);
    char source[PATH_MAX];
    snprintf(source, sizeof source, "%s%s", pos, config_file ? "" : "/config.toml");
    if ((st = titan_run_check_paths(&cfg, &saved, source)) != TITAN_OK) return titan_report(st);
    if ((st = check_launch_options(nproc, max_restarts, min_nproc)) != TITAN_OK) return titan_report(st);
    if (nproc > 0) {
        if (getenv("TITAN_RANK") || getenv("PMIX_NAMESPACE")) {
            titan_error(TITAN_ERR_USAGE, "--nproc: this process is already a rank of a job (%s)",
                        getenv("TITAN_RANK") ? "spawned by --nproc" : "started by a PMIx launcher");
            titan_error_hint("use either --nproc or mpirun/srun, not both");
            return titan_report(TITAN_ERR_USAGE);
        }
        /* Degrees that do not fit N ranks, or a model they cannot split,
         * fail once, here, not in every rank. */
        if ((st = titan_mesh_check(&cfg, (int)nproc)) != TITAN_OK ||
            (st = titan_setup_check_model(&cfg)) != TITAN_OK)
            return titan_report(st);
        titan_train_launch launch = {.nproc = (int)nproc, .max_restarts = (int)max_restarts,
                                     .min_nproc = min_nproc ? (int)min_nproc : (int)nproc, .run = run, .cfg = &cfg};
        return titan_train_launch_local(argc, argv, &launch);
    }
    opts.run_dir = run;
    if ((st = restart_env(&opts)) != TITAN_OK) return titan_report(st);
    st = titan_train(&cfg, &opts);
    free(config_file);
    return report_rank(st);
}
