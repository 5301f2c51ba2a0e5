/* titan-train - trains a run directory, one process per rank: alone, as N
 * local ranks it spawns itself (--nproc N), or under mpirun/srun (PMIx). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cpu_env.h"
#include "core/log.h"
#include "core/version.h"
#include "comm/spawn.h"
#include "job/args.h"
#include "train/setup.h"
#include "train/train.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: titan-train [options] RUN [--section.key=value ...]\n"
            "       titan-train --print-config RUN|CONFIG.toml [--section.key=value ...]\n"
            "\n"
            "Trains the run directory RUN (made by titan-init) from its latest checkpoint\n"
            "up to training.steps, checkpointing every checkpoint.interval steps.\n"
            "\n"
            "  --data DIR          shard directory (same as --training.dataset_path=DIR)\n"
            "  --device DEV        cpu, cuda, cuda:N or auto (same as --training.device=DEV)\n"
            "  --nproc N           start N local ranks of titan-train and wait for them\n"
            "                      (mpirun/srun start the ranks themselves)\n"
            "  --print-config      print the resolved config and exit\n"
            "  --stop-at STEP      stop after STEP with a checkpoint; the LR schedule still\n"
            "                      runs to training.steps (for jobs cut by a time limit)\n"
            "  --sample N          after training, generate N tokens to stdout\n"
            "  --prompt TEXT       prompt for --sample (default: none)\n"
            "  --temperature T     sampling temperature, 0 = greedy (default 0)\n"
            "  -q, --quiet         only errors\n"
            "  -v, --verbose       more detail\n"
            "  -h, --help          this help\n"
            "  --version           print the version\n"
            "\n"
            "Exit status: 0 ok, 1 failure, 2 usage or config error, 3 file missing or\n"
            "unreadable, 4 corrupt input, 5 non-finite loss or gradient, 6 out of memory,\n"
            "8 another rank failed or timed out.\n"
            "See titan-train(1).\n");
}

/* --nproc N: runs this program as N ranks (argv without --nproc) and
 * exits with the first failed rank's status. */
static int spawn_ranks(int argc, char **argv, int nproc) {
    char **av = calloc((size_t)argc + 1, sizeof *av);
    int *codes = calloc((size_t)nproc, sizeof *codes);
    if (!av || !codes) return titan_report(titan_error(TITAN_ERR_NOMEM, "--nproc: out of memory"));
    int k = 0;
    av[k++] = "/proc/self/exe";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nproc")) i++;
        else av[k++] = argv[i];
    }
    titan_dist_spawn_options o = {.nproc = nproc, .grace_s = 30, .exit_codes = codes};
    int first = 0;
    titan_status st = titan_dist_spawn_local(av, &o, &first);
    if (st != TITAN_OK) {
        for (int r = 0; r < nproc; r++)
            if (codes[r]) fprintf(stderr, "titan-train: rank %d exited with status %d\n", r, codes[r]);
        titan_report(st);
    }
    free(av);
    free(codes);
    return st == TITAN_OK ? 0 : first > 0 && first < 128 ? first : (int)TITAN_ERR_COMM;
}

static int need_value(int i, int argc, const char *opt) {
    if (i + 1 < argc) return 1;
    titan_error(TITAN_ERR_USAGE, "option '%s' needs a value", opt);
    return 0;
}

/* An integer option value in [lo, hi]; 0 (error recorded) otherwise. */
static int int_value(const char *opt, const char *s, long long lo, long long hi, const char *expected,
                     long long *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi) {
        titan_error(TITAN_ERR_USAGE, "%s: expected %s, got '%s'", opt, expected, s);
        return 0;
    }
    *out = v;
    return 1;
}

int main(int argc, char **argv) {
    /* SIGUSR1 asks for the flight recorder's dump: harmless before it
     * records (or with it off), passed on to the ranks by --nproc. */
    signal(SIGUSR1, SIG_IGN);
    titan_cpu_env_setup(argv);
    titan_log_init("titan-train");
    const char *pos = NULL, *data = NULL, *device = NULL;
    int print = 0;
    titan_train_opts opts = {.prompt = "", .temperature = 0.0};
    int nproc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (titan_args_is_override(a)) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("titan-train %s\n", TITAN_VERSION);
            return 0;
        } else if (!strcmp(a, "--print-config")) {
            print = 1;
        } else if (!strcmp(a, "--data")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            data = argv[++i];
        } else if (!strcmp(a, "--device")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            device = argv[++i];
        } else if (!strcmp(a, "--nproc")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            long long v;
            if (!int_value(a, argv[++i], 1, 1024, "a rank count 1..1024", &v)) return titan_report(TITAN_ERR_USAGE);
            nproc = (int)v;
        } else if (!strcmp(a, "--sample")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            long long v;
            if (!int_value(a, argv[++i], 0, 1000000, "a token count", &v)) return titan_report(TITAN_ERR_USAGE);
            opts.sample_tokens = (int)v;
        } else if (!strcmp(a, "--stop-at")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            long long v;
            if (!int_value(a, argv[++i], 1, LLONG_MAX, "a step number >= 1", &v)) return titan_report(TITAN_ERR_USAGE);
            opts.stop_at = v;
        } else if (!strcmp(a, "--prompt")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            opts.prompt = argv[++i];
        } else if (!strcmp(a, "--temperature")) {
            if (!need_value(i, argc, a)) return titan_report(TITAN_ERR_USAGE);
            char *end;
            opts.temperature = strtod(argv[++i], &end);
            if (*end || opts.temperature < 0) {
                titan_error(TITAN_ERR_USAGE, "--temperature: expected a number >= 0, got '%s'", argv[i]);
                return titan_report(TITAN_ERR_USAGE);
            }
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            titan_log_set_verbosity(0);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            titan_log_set_verbosity(2);
        } else if (a[0] == '-' && a[1]) {
            titan_error(TITAN_ERR_USAGE, "unknown option '%s'", a);
            titan_error_hint("titan-train --help lists the options; config keys are --section.key=value");
            return titan_report(TITAN_ERR_USAGE);
        } else if (!pos) {
            pos = a;
        } else {
            titan_error(TITAN_ERR_USAGE, "unexpected argument '%s' (one run directory expected)", a);
            return titan_report(TITAN_ERR_USAGE);
        }
    }
    if (!pos) {
        usage(stderr);
        return 2;
    }
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    struct stat sb;
    titan_status st;
    if (print && stat(pos, &sb) == 0 && S_ISREG(sb.st_mode))
        st = titan_config_load_file(&cfg, pos);
    else
        st = titan_run_load_config(&cfg, pos);
    if (st == TITAN_OK && data) snprintf(cfg.training_dataset_path, sizeof cfg.training_dataset_path, "%s", data);
    if (st == TITAN_OK && device) {
        char kv[TITAN_STR + 32];
        snprintf(kv, sizeof kv, "--training.device=%s", device);
        st = titan_config_override(&cfg, kv);
    }
    if (st == TITAN_OK) st = titan_args_apply_overrides(&cfg, argc - 1, argv + 1);
    if (st == TITAN_OK) st = titan_config_validate(&cfg);
    if (st != TITAN_OK) return titan_report(st);
    if (print) {
        titan_config_write(&cfg, stdout);
        return 0;
    }
    if (nproc > 0) {
        if (getenv("TITAN_RANK") || getenv("PMIX_NAMESPACE")) {
            titan_error(TITAN_ERR_USAGE, "--nproc: this process is already a rank of a job (%s)",
                        getenv("TITAN_RANK") ? "spawned by --nproc" : "started by a PMIx launcher");
            titan_error_hint("use either --nproc or mpirun/srun, not both");
            return titan_report(TITAN_ERR_USAGE);
        }
        /* A model the degrees cannot split fails once, here, not in every rank. */
        if ((st = titan_setup_check_model(&cfg)) != TITAN_OK) return titan_report(st);
        return spawn_ranks(argc, argv, nproc);
    }
    opts.run_dir = pos;
    return titan_report(titan_train(&cfg, &opts));
}
