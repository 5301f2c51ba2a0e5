/* spawn.c - the local launcher (see spawn.h). */
#define _GNU_SOURCE
#include "spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fsutil.h"

extern char **environ;

#define KILL_AFTER_TERM_S 5.0

/* The environment of one rank: ours without PMIX_* and TITAN_<job vars>,
 * plus the job variables. Built before fork (no malloc in the child). */
static char **rank_env(int rank, int n, const char *rdv, const char *job) {
    size_t count = 0;
    while (environ[count]) count++;
    char **env = calloc(count + 8, sizeof *env);
    if (!env) return NULL;
    static const char *drop[] = {"PMIX_", "TITAN_RANK=", "TITAN_WORLD_SIZE=", "TITAN_LOCAL_RANK=",
                                 "TITAN_LOCAL_SIZE=", "TITAN_RENDEZVOUS=", "TITAN_JOB_ID="};
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        int keep = 1;
        for (size_t j = 0; j < sizeof drop / sizeof drop[0]; j++)
            if (strncmp(environ[i], drop[j], strlen(drop[j])) == 0) keep = 0;
        if (keep) env[k++] = environ[i];
    }
    char buf[PATH_MAX + 32];
    const char *fmt[] = {"TITAN_RANK=%d", "TITAN_WORLD_SIZE=%d", "TITAN_LOCAL_RANK=%d",
                         "TITAN_LOCAL_SIZE=%d"};
    int val[] = {rank, n, rank, n};
    for (int j = 0; j < 4; j++) {
        snprintf(buf, sizeof buf, fmt[j], val[j]);
        env[k++] = strdup(buf);
    }
    snprintf(buf, sizeof buf, "TITAN_RENDEZVOUS=%s", rdv);
    env[k++] = strdup(buf);
    snprintf(buf, sizeof buf, "TITAN_JOB_ID=%s", job);
    env[k++] = strdup(buf);
    for (size_t j = k - 6; j < k; j++)
        if (!env[j]) return NULL; /* leaks a few bytes on a failure that ends the launch */
    return env;
}

static void free_env(char **env) {
    if (!env) return;
    size_t n = 0;
    while (env[n]) n++;
    for (size_t j = n >= 6 ? n - 6 : 0; j < n; j++) free(env[j]);
    free(env);
}

/* Segments of this job that a crashed rank did not get to unlink. */
static void remove_stale_segments(const char *job) {
    DIR *dir = opendir("/dev/shm");
    if (!dir) return;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "titan-%s-", job);
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char name[NAME_MAX + 2];
        snprintf(name, sizeof name, "/%s", e->d_name);
        shm_unlink(name);
    }
    closedir(dir);
}

static int code_of(int wstatus) {
    if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
    return 255;
}

static void describe(char *out, size_t cap, int wstatus) {
    if (WIFSIGNALED(wstatus))
        snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(wstatus),
                 strsignal(WTERMSIG(wstatus)));
    else
        snprintf(out, cap, "exited with status %d", code_of(wstatus));
}

titan_status titan_dist_spawn_local(char *const argv[], const titan_dist_spawn_options *opt,
                                    int *first_code) {
    int n = opt->nproc;
    if (first_code) *first_code = 0;
    if (n < 1 || n > 1024)
        return titan_error(TITAN_ERR_USAGE, "spawn: %d ranks: want 1..1024", n);
    if (!argv || !argv[0]) return titan_error(TITAN_ERR_USAGE, "spawn: no program");
    double grace = opt->grace_s > 0 ? opt->grace_s : 30.0;

    const char *tmp = opt->tmp_dir ? opt->tmp_dir : getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char rdv[PATH_MAX];
    if (snprintf(rdv, sizeof rdv, "%s/titan-rdv-XXXXXX", tmp) >= (int)sizeof rdv - 1)
        return titan_error(TITAN_ERR_USAGE, "spawn: %s: path too long", tmp);
    if (!mkdtemp(rdv))
        return titan_error(TITAN_ERR_IO, "spawn: rendezvous directory %s: %s", rdv, strerror(errno));
    char job[48];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(job, sizeof job, "L%ld-%lx", (long)getpid(),
             (unsigned long)((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)) & 0xffffffu);

    pid_t *pids = calloc((size_t)n, sizeof *pids);
    int *wst = calloc((size_t)n, sizeof *wst);
    char ***envs = calloc((size_t)n, sizeof *envs);
    titan_status st = TITAN_OK;
    if (!pids || !wst || !envs) st = titan_error(TITAN_ERR_NOMEM, "spawn: out of memory");
    for (int r = 0; st == TITAN_OK && r < n; r++)
        if (!(envs[r] = rank_env(r, n, rdv, job)))
            st = titan_error(TITAN_ERR_NOMEM, "spawn: out of memory");

    sigset_t wait_set, old_set;
    sigemptyset(&wait_set);
    sigaddset(&wait_set, SIGCHLD);
    sigaddset(&wait_set, SIGINT);
    sigaddset(&wait_set, SIGTERM);
    sigaddset(&wait_set, SIGHUP);
    sigaddset(&wait_set, SIGUSR1); /* passed on: every rank's flight recorder dumps */
    pthread_sigmask(SIG_BLOCK, &wait_set, &old_set);

    pid_t self = getpid();
    int started = 0, alive = 0;
    for (int r = 0; st == TITAN_OK && r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            st = titan_error(TITAN_ERR_FAIL, "spawn: fork of rank %d: %s", r, strerror(errno));
            break;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != self) _exit(129); /* the launcher died before the prctl */
            pthread_sigmask(SIG_SETMASK, &old_set, NULL);
            execvpe(argv[0], argv, envs[r]);
            dprintf(2, "titan: spawn: rank %d: cannot run %s: %s\n", r, argv[0], strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
        started++;
        alive++;
    }

    /* Wait for all; on the first failure start the grace period. */
    int first = -1, signalled = 0;
    double term_at = 0, kill_at = 0;
    if (st != TITAN_OK) term_at = titan_now_s(); /* could not start them all: stop the started ones */
    while (alive > 0) {
        for (int r = 0; r < started; r++) {
            if (!pids[r]) continue;
            pid_t w = waitpid(pids[r], &wst[r], WNOHANG);
            if (w != pids[r]) continue;
            pids[r] = 0;
            alive--;
            if (code_of(wst[r]) != 0 && first < 0) {
                first = r;
                if (term_at == 0) term_at = titan_now_s() + grace;
            }
        }
        if (alive == 0) break;
        double t = titan_now_s();
        if (term_at > 0 && t >= term_at && kill_at == 0) {
            for (int r = 0; r < started; r++)
                if (pids[r]) kill(pids[r], SIGTERM);
            kill_at = t + KILL_AFTER_TERM_S;
        } else if (kill_at > 0 && t >= kill_at) {
            for (int r = 0; r < started; r++)
                if (pids[r]) kill(pids[r], SIGKILL);
            kill_at = t + 3600; /* once */
        }
        struct timespec slice = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&wait_set, NULL, &slice);
        if (sig == SIGUSR1) {
            for (int r = 0; r < started; r++)
                if (pids[r]) kill(pids[r], SIGUSR1);
        } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            signalled = sig;
            for (int r = 0; r < started; r++)
                if (pids[r]) kill(pids[r], sig);
            if (term_at == 0) term_at = titan_now_s() + grace;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);

    char saved[1024] = "";
    if (st != TITAN_OK) snprintf(saved, sizeof saved, "%s", titan_error_message());
    titan_fs_remove_tree(rdv); /* best effort: a leftover in TMPDIR is no failure */
    remove_stale_segments(job);
    titan_error_clear();
    if (st != TITAN_OK) titan_error(st, "%s", saved);

    if (opt->exit_codes)
        for (int r = 0; r < n; r++) opt->exit_codes[r] = r < started ? code_of(wst[r]) : 255;
    if (st == TITAN_OK && first >= 0) {
        /* "rank 2 of 4 was killed by signal 9 (Killed); then ranks 0, 1, 3
         * failed (status 8)": the first is the cause, the rest its echo. */
        char how[128], rest[256] = "", codes[32] = "";
        describe(how, sizeof how, wst[first]);
        size_t used = 0;
        int others = 0, code = -1, same = 1;
        for (int r = 0; r < n; r++) {
            int c = code_of(wst[r]);
            if (r == first || c == 0) continue;
            if (code >= 0 && c != code) same = 0;
            code = c;
            if (used + 16 < sizeof rest)
                used += (size_t)snprintf(rest + used, sizeof rest - used, "%s%d",
                                         others ? ", " : "", r);
            others++;
        }
        if (others && same) snprintf(codes, sizeof codes, " (status %d)", code);
        if (others)
            st = titan_error(TITAN_ERR_FAIL, "spawn: rank %d of %d %s; then rank%s %s failed%s",
                             first, n, how, others > 1 ? "s" : "", rest, codes);
        else
            st = titan_error(TITAN_ERR_FAIL, "spawn: rank %d of %d %s", first, n, how);
        if (first_code) *first_code = code_of(wst[first]);
    }
    if (st == TITAN_OK && signalled) {
        st = titan_error(TITAN_ERR_FAIL, "spawn: interrupted by signal %d (%s); ranks stopped",
                         signalled, strsignal(signalled));
        if (first_code) *first_code = 128 + signalled;
    }
    for (int r = 0; envs && r < n; r++) free_env(envs[r]);
    free(envs);
    free(pids);
    free(wst);
    return st;
}
