/* elastic.c - titan-train's local launcher and its restarts (elastic.h). */
#include "elastic.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "comm/spawn.h"
#include "core/log.h"
#include "parallel/mesh.h"

#define MAX_PAUSE_S 30

/* The launcher's own options, which its ranks must not see. */
static int launcher_option(const char *arg, int *takes_next) {
    static const char *const names[] = {"--nproc", "--max-restarts", "--min-nproc"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t len = strlen(names[i]);
        if (strncmp(arg, names[i], len) != 0) continue;
        if (arg[len] == '\0') *takes_next = 1;
        if (arg[len] == '\0' || arg[len] == '=') return 1;
    }
    return 0;
}

/* The ranks' command line: this program, argv without the launcher's
 * options, and extra (job keys of a recomputed layout) where they win over
 * the command line's: after its keys, before a "--". NULL: out of memory. */
static char **rank_argv(int argc, char **argv, char *const extra[], int nextra) {
    char **av = calloc((size_t)argc + (size_t)nextra + 1, sizeof *av);
    if (!av) return NULL;
    int k = 0, added = 0;
    av[k++] = "/proc/self/exe";
    for (int i = 1; i < argc; i++) {
        int takes_next = 0;
        if (!strcmp(argv[i], "--") && !added) {
            for (int j = 0; j < nextra; j++) av[k++] = extra[j];
            added = 1;
        }
        if (launcher_option(argv[i], &takes_next)) i += takes_next;
        else av[k++] = argv[i];
    }
    for (int j = 0; !added && j < nextra; j++) av[k++] = extra[j];
    return av;
}

/* One start of the job on `ranks` ranks: the spawn's status, the exit
 * status to end with, every rank's code, and the launcher's signal. */
typedef struct {
    titan_status st;
    int status;
    int *codes;
    int interrupted;
} start_result;

static void start_job(int argc, char **argv, int ranks, char *const extra[], int nextra, start_result *r) {
    char **av = rank_argv(argc, argv, extra, nextra);
    r->codes = calloc((size_t)ranks, sizeof *r->codes);
    r->interrupted = 0;
    if (!av || !r->codes) {
        free(av);
        r->st = titan_error(TITAN_ERR_NOMEM, "--nproc: out of memory");
        r->status = TITAN_ERR_NOMEM;
        return;
    }
    titan_dist_spawn_options o = {.nproc = ranks, .grace_s = 30, .exit_codes = r->codes,
                                  .interrupted = &r->interrupted};
    int first = 0;
    r->st = titan_dist_spawn_local(av, &o, &first);
    free(av);
    r->status = r->st == TITAN_OK ? 0 : first > 0 && first < 128 ? first : (int)TITAN_ERR_COMM;
    if (r->st != TITAN_OK && r->interrupted) r->status = 128 + r->interrupted; /* as if it had died of it */
}

/* What an exit status of a rank says about the job, for the statuses a
 * restart would only meet again. */
static const char *status_meaning(int code) {
    switch (code) {
    case TITAN_ERR_FAIL: return "an internal failure";
    case TITAN_ERR_USAGE: return "a usage or config error";
    case TITAN_ERR_IO: return "a missing or unwritable file";
    case TITAN_ERR_FORMAT: return "malformed input";
    case TITAN_ERR_NUMERIC: return "a non-finite loss or gradient";
    case TITAN_ERR_NOMEM: return "out of memory";
    case TITAN_ERR_CORRUPT: return "damaged data";
    case 127: return "the program could not be run";
    default: return "not a lost rank";
    }
}

/* NULL when the start failed as a lost rank does: every failed rank was
 * killed by a signal or stopped because another rank failed (status 8),
 * and the launcher was not told to stop. Otherwise why not, in why. */
static const char *not_restartable(const start_result *r, int ranks, char *why, size_t cap) {
    if (r->interrupted) {
        snprintf(why, cap, "the launcher was sent signal %d (%s)", r->interrupted, strsignal(r->interrupted));
        return why;
    }
    for (int i = 0; i < ranks; i++) {
        int c = r->codes[i];
        if (c == 0 || c == TITAN_ERR_COMM || (c > 128 && c < 255)) continue;
        snprintf(why, cap, "rank %d exited with status %d (%s), which a restart would meet again", i, c,
                 status_meaning(c));
        return why;
    }
    return NULL;
}

/* The run's latest checkpoint: its step (-1: none) and the global batch
 * its steps were trained with (0: not recorded, as in a seed checkpoint). */
typedef struct {
    int64_t step, global_batch;
    struct timespec latest_mtime; /* of ROOT/latest (0: none): a save since changes it */
} latest_ckpt;

static latest_ckpt latest_checkpoint(const titan_train_launch *l) {
    latest_ckpt out = {-1, 0, {0, 0}};
    char root[PATH_MAX], latest[PATH_MAX + 8];
    struct stat sb;
    snprintf(root, sizeof root, "%s/%s", l->run, l->cfg->checkpoint_folder);
    snprintf(latest, sizeof latest, "%s/latest", root);
    if (stat(latest, &sb) == 0) out.latest_mtime = sb.st_mtim;
    titan_ckpt *ck = NULL;
    if (titan_ckpt_open(&ck, root) != TITAN_OK) {
        titan_error_clear(); /* the ranks will say what is wrong with it */
        return out;
    }
    out.step = titan_ckpt_step(ck);
    if (titan_ckpt_meta_get_i64(ck, "training.global_batch_size", &out.global_batch) != TITAN_OK) {
        titan_error_clear();
        out.global_batch = 0;
    }
    titan_ckpt_close(ck);
    return out;
}

/* Ranks a layout has besides its data-parallel ones. */
static int model_ranks(const titan_job_config *cfg) {
    return cfg->parallelism_tensor_parallel_degree * cfg->parallelism_context_parallel_degree *
           cfg->parallelism_pipeline_parallel_degree;
}

/* Whether `ranks` can train the job with global batch g: the degrees
 * recomputed (data_parallel_shard_degree takes the ranks the others
 * leave) and g a multiple of local batch x data-parallel degree, as
 * titan_trainer_resume_shape requires. why: the reason when not. */
static int layout_fits(const titan_job_config *cfg, int ranks, int64_t g, char *why, size_t cap) {
    titan_job_config c = *cfg;
    c.parallelism_data_parallel_shard_degree = -1;
    if (titan_mesh_check(&c, ranks) != TITAN_OK) {
        snprintf(why, cap, "%s", titan_error_message());
        titan_error_clear();
        return 0;
    }
    int dp = ranks / model_ranks(cfg), B = cfg->training_local_batch_size;
    if (g % ((int64_t)B * dp) != 0) {
        snprintf(why, cap, "the global batch of %" PRId64 " sequences is not a multiple of local batch %d x %d dp", g,
                 B, dp);
        return 0;
    }
    return 1;
}

/* The most ranks, at most avail and at least l->min_nproc, that fit the
 * job with global batch g; each count skipped gets a line saying why. 0:
 * none does. */
static int pick_ranks(const titan_train_launch *l, int avail, int64_t g) {
    char why[1024];
    for (int c = avail; c >= l->min_nproc && c >= 1; c--) {
        if (layout_fits(l->cfg, c, g, why, sizeof why)) return c;
        titan_warn("restart: %d ranks skipped: %s", c, why);
    }
    return 0;
}

/* TITAN_TEST_LOST_RANKS=K: every failed start counts K ranks as lost; -1 unset. */
static int test_lost_ranks(void) {
    const char *v = getenv("TITAN_TEST_LOST_RANKS");
    int k = v ? atoi(v) : -1;
    return k >= 0 ? k : -1;
}

/* "rank 2 of 4 was killed by signal 9 (Killed)": the spawn's message
 * without its prefix and the ranks that only followed the first. */
static void failure_cause(char *out, size_t cap) {
    const char *m = titan_error_message();
    if (!strncmp(m, "spawn: ", 7)) m += 7;
    size_t len = strcspn(m, ";");
    snprintf(out, cap, "%.*s", (int)len, m);
}

/* The keys that make the job's layout and global batch on `ranks` ranks
 * when they differ from the first start's: the shard degree recomputed,
 * and the global batch kept (the config's, or what the checkpoint was
 * trained with, or the first start's). Returns how many. */
static int layout_keys(const titan_train_launch *l, int ranks, int64_t g, char keys[2][64], char *extra[2]) {
    if (ranks == l->nproc) return 0;
    int k = 0;
    if (l->cfg->parallelism_data_parallel_shard_degree != -1)
        snprintf(keys[k++], sizeof keys[0], "--parallelism.data_parallel_shard_degree=-1");
    if (l->cfg->training_global_batch_size <= 0)
        snprintf(keys[k++], sizeof keys[0], "--training.global_batch_size=%" PRId64, g);
    for (int i = 0; i < k; i++) extra[i] = keys[i];
    return k;
}

/* The global batch every start keeps: training.global_batch_size when
 * set, else what the checkpoint was trained with, else the first start's
 * (local batch x data-parallel degree, no accumulation). */
static int64_t kept_global_batch(const titan_train_launch *l, const latest_ckpt *at) {
    const titan_job_config *cfg = l->cfg;
    if (cfg->training_global_batch_size > 0) return cfg->training_global_batch_size;
    if (at->global_batch > 0) return at->global_batch;
    return (int64_t)cfg->training_local_batch_size * (l->nproc / model_ranks(cfg));
}

/* The ranks of the next start after a failed one on `ranks`: a start that
 * saved no newer checkpoint than it began from counts one rank as lost
 * (TITAN_TEST_LOST_RANKS: K whatever it saved); with --min-nproc below
 * ranks, the next start takes the most ranks that fit. */
static int next_ranks(const titan_train_launch *l, int ranks, int progressed, int64_t g) {
    int lost = test_lost_ranks();
    if (lost < 0) lost = progressed ? 0 : 1;
    if (lost == 0 || l->min_nproc >= ranks) return ranks;
    int avail = ranks - lost < l->min_nproc ? l->min_nproc : ranks - lost;
    int c = pick_ranks(l, avail, g);
    if (c) return c;
    titan_warn("restart: no rank count from %d down to --min-nproc %d fits the job; again on %d", avail, l->min_nproc,
               ranks);
    return ranks;
}

int titan_train_launch_local(int argc, char **argv, const titan_train_launch *l) {
    int ranks = l->nproc;
    latest_ckpt at = latest_checkpoint(l), first = at;
    int64_t g = kept_global_batch(l, &at);
    for (int restart = 0;; restart++) {
        char keys[2][64], *extra[2], why[512], cause[512], num[16];
        int nextra = layout_keys(l, ranks, g, keys, extra);
        start_result r;
        start_job(argc, argv, ranks, extra, nextra, &r);
        if (r.st == TITAN_OK) {
            free(r.codes);
            return 0;
        }
        const char *no = not_restartable(&r, ranks, why, sizeof why);
        free(r.codes);
        if (no || restart >= l->max_restarts) {
            if (l->max_restarts > 0 && no) titan_error_hint("not restarted: %s", no);
            else if (l->max_restarts > 0)
                titan_error_hint("not restarted: all %d restarts (--max-restarts) are spent", l->max_restarts);
            titan_report(r.st);
            return r.status;
        }
        failure_cause(cause, sizeof cause);
        titan_error_clear();
        latest_ckpt now = latest_checkpoint(l);
        int next = next_ranks(l, ranks, now.step > at.step, g);
        int pause = restart < 5 ? 1 << restart : MAX_PAUSE_S;
        if (pause > MAX_PAUSE_S) pause = MAX_PAUSE_S;
        titan_warn("restart %d of %d in %d s: %s; resuming from step %" PRId64 " on %d rank%s%s", restart + 1,
                   l->max_restarts, pause, cause, now.step < 0 ? 0 : now.step, next, next == 1 ? "" : "s",
                   now.step > at.step ? "" : " (no checkpoint since the last start)");
        sleep((unsigned)pause);
        snprintf(num, sizeof num, "%d", restart + 1);
        setenv("TITAN_RESTART", num, 1);
        setenv("TITAN_RESTART_CAUSE", cause, 1);
        /* Whether the job saved since its first start: then checkpoint.load_step and
         * exclude_from_loading, which chose where it started, are not applied again. */
        int saved = now.step != first.step || now.latest_mtime.tv_sec != first.latest_mtime.tv_sec ||
                    now.latest_mtime.tv_nsec != first.latest_mtime.tv_nsec;
        setenv("TITAN_RESTART_SAVED", saved ? "1" : "0", 1);
        at = now;
        ranks = next;
    }
}
