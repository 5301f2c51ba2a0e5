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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"

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

/* One local launch: the ranks' processes and what became of them. */
typedef struct {
    int n, started, alive;
    pid_t *pids; /* 0 once reaped */
    int *wst;    /* wait statuses */
    char ***envs;
    sigset_t wait_set, old_set;
} launch;

#define LAUNCHER_FILE "launcher" /* in a rendezvous directory: "PID JOB\n" of its launcher */

/* Rendezvous directories of this user under tmp whose launcher is gone (it
 * was killed with SIGKILL, the one exit it cannot clean up after), and
 * their jobs' shared-memory segments: removed, each with a note. */
static void remove_stale_rendezvous(const char *tmp) {
    DIR *dir = opendir(tmp);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, "titan-rdv-", 10) != 0) continue;
        char path[PATH_MAX], file[PATH_MAX + 16], line[128] = "";
        if (snprintf(path, sizeof path, "%s/%s", tmp, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
        snprintf(file, sizeof file, "%s/" LAUNCHER_FILE, path);
        FILE *f = fopen(file, "r");
        if (!f) continue; /* another version's, or one being made: left alone */
        int got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        long pid = 0;
        char job[64] = "";
        if (!got || sscanf(line, "%ld %63s", &pid, job) != 2 || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its launcher lives */
        titan_info("spawn: removing %s, left by launcher %ld (killed)", path, pid);
        titan_fs_remove_tree(path);
        remove_stale_segments(job);
    }
    closedir(dir);
}

/* A rendezvous directory under TMPDIR (or opt->tmp_dir) and a job name for
 * the shared-memory segments; stale ones of earlier launches go first. */
static titan_status make_rendezvous(const titan_dist_spawn_options *opt, char *rdv, size_t cap, char *job,
                                    size_t jcap) {
    const char *tmp = opt->tmp_dir ? opt->tmp_dir : getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    remove_stale_rendezvous(tmp);
    if (snprintf(rdv, cap, "%s/titan-rdv-XXXXXX", tmp) >= (int)cap - 1)
        return titan_error(TITAN_ERR_USAGE, "spawn: %s: path too long", tmp);
    if (!mkdtemp(rdv)) return titan_error(TITAN_ERR_IO, "spawn: rendezvous directory %s: %s", rdv, strerror(errno));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(job, jcap, "L%ld-%lx", (long)getpid(),
             (unsigned long)((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)) & 0xffffffu);
    char file[PATH_MAX + 16], line[128];
    snprintf(file, sizeof file, "%s/" LAUNCHER_FILE, rdv);
    int n = snprintf(line, sizeof line, "%ld %s\n", (long)getpid(), job);
    /* best effort: without it a later launch leaves this directory alone */
    if (titan_fs_write_atomic(file, line, (size_t)n) != TITAN_OK) titan_error_clear();
    return TITAN_OK;
}

/* Forks and execs rank 0..n-1 with their environments; SIGCHLD and the
 * signals passed on are blocked here (sigtimedwait takes them). On a
 * failure the ranks started so far are in l->started. */
static titan_status start_ranks(launch *l, char *const argv[]) {
    sigemptyset(&l->wait_set);
    sigaddset(&l->wait_set, SIGCHLD);
    sigaddset(&l->wait_set, SIGINT);
    sigaddset(&l->wait_set, SIGTERM);
    sigaddset(&l->wait_set, SIGHUP);
    sigaddset(&l->wait_set, SIGUSR1); /* passed on: every rank's flight recorder dumps */
    pthread_sigmask(SIG_BLOCK, &l->wait_set, &l->old_set);
    pid_t self = getpid();
    for (int r = 0; r < l->n; r++) {
        pid_t pid = fork();
        if (pid < 0) return titan_error(TITAN_ERR_FAIL, "spawn: fork of rank %d: %s", r, strerror(errno));
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != self) _exit(129); /* the launcher died before the prctl */
            pthread_sigmask(SIG_SETMASK, &l->old_set, NULL);
            execvpe(argv[0], argv, l->envs[r]);
            dprintf(2, "titan: spawn: rank %d: cannot run %s: %s\n", r, argv[0], strerror(errno));
            _exit(127);
        }
        l->pids[r] = pid;
        l->started++;
        l->alive++;
    }
    return TITAN_OK;
}

/* Sends sig to every rank still running. */
static void signal_ranks(const launch *l, int sig) {
    for (int r = 0; r < l->started; r++)
        if (l->pids[r]) kill(l->pids[r], sig);
}

/* Waits for every started rank. The first to fail (or stop_now: a failed
 * start) starts the grace period, after which the rest get SIGTERM, then
 * SIGKILL; SIGINT, SIGTERM and SIGHUP are passed on (*signalled), SIGUSR1
 * too. Returns the failed rank that is the cause, -1 when none: the first
 * to fail other than with status 8 (another rank failed) before the
 * launcher signalled any, else the first to fail. (A rank that sees a
 * peer die can exit before the launcher reaps the peer.) */
static int wait_ranks(launch *l, double grace, int stop_now, int *signalled) {
    int first = -1, cause = -1;
    double term_at = stop_now ? titan_now_s() : 0, kill_at = 0;
    while (l->alive > 0) {
        for (int r = 0; r < l->started; r++) {
            if (!l->pids[r] || waitpid(l->pids[r], &l->wst[r], WNOHANG) != l->pids[r]) continue;
            l->pids[r] = 0;
            l->alive--;
            int code = code_of(l->wst[r]);
            if (code != 0 && cause < 0 && code != TITAN_ERR_COMM && kill_at == 0 && !*signalled) cause = r;
            if (code != 0 && first < 0) {
                first = r;
                if (term_at == 0) term_at = titan_now_s() + grace;
            }
        }
        if (l->alive == 0) break;
        double t = titan_now_s();
        if (term_at > 0 && t >= term_at && kill_at == 0) {
            signal_ranks(l, SIGTERM);
            kill_at = t + KILL_AFTER_TERM_S;
        } else if (kill_at > 0 && t >= kill_at) {
            signal_ranks(l, SIGKILL);
            kill_at = t + 3600; /* once */
        }
        struct timespec slice = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&l->wait_set, NULL, &slice);
        if (sig == SIGUSR1) {
            signal_ranks(l, SIGUSR1);
        } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            *signalled = sig;
            signal_ranks(l, sig);
            if (term_at == 0) term_at = titan_now_s() + grace;
        }
    }
    pthread_sigmask(SIG_SETMASK, &l->old_set, NULL);
    return cause >= 0 ? cause : first;
}

/* "rank 2 of 4 was killed by signal 9 (Killed); then ranks 0, 1, 3 failed
 * (status 8)": the first is the cause, the rest its echo (each with its
 * status where they differ). */
static titan_status report_failure(const launch *l, int first) {
    char how[128], rest[256] = "", codes[32] = "";
    describe(how, sizeof how, l->wst[first]);
    int others = 0, code = -1, same = 1;
    for (int r = 0; r < l->n; r++) {
        int c = code_of(l->wst[r]);
        if (r == first || c == 0) continue;
        if (code >= 0 && c != code) same = 0;
        code = c;
        others++;
    }
    size_t used = 0;
    for (int r = 0, k = 0; r < l->n; r++) {
        int c = code_of(l->wst[r]);
        if (r == first || c == 0 || used + 32 >= sizeof rest) continue;
        used += (size_t)snprintf(rest + used, sizeof rest - used, same ? "%s%d" : "%s%d (status %d)",
                                 k++ ? ", " : "", r, c);
    }
    if (others && same) snprintf(codes, sizeof codes, " (status %d)", code);
    if (others)
        return titan_error(TITAN_ERR_FAIL, "spawn: rank %d of %d %s; then rank%s %s failed%s", first, l->n, how,
                           others > 1 ? "s" : "", rest, codes);
    return titan_error(TITAN_ERR_FAIL, "spawn: rank %d of %d %s", first, l->n, how);
}

titan_status titan_dist_spawn_local(char *const argv[], const titan_dist_spawn_options *opt,
                                    int *first_code) {
    int n = opt->nproc;
    if (first_code) *first_code = 0;
    if (n < 1 || n > 1024)
        return titan_error(TITAN_ERR_USAGE, "spawn: %d ranks: want 1..1024", n);
    if (!argv || !argv[0]) return titan_error(TITAN_ERR_USAGE, "spawn: no program");
    double grace = opt->grace_s > 0 ? opt->grace_s : 30.0;
    char rdv[PATH_MAX], job[48];
    TITAN_TRY(make_rendezvous(opt, rdv, sizeof rdv, job, sizeof job));

    launch l = {.n = n};
    l.pids = calloc((size_t)n, sizeof *l.pids);
    l.wst = calloc((size_t)n, sizeof *l.wst);
    l.envs = calloc((size_t)n, sizeof *l.envs);
    titan_status st = TITAN_OK;
    if (!l.pids || !l.wst || !l.envs) st = titan_error(TITAN_ERR_NOMEM, "spawn: out of memory");
    for (int r = 0; st == TITAN_OK && r < n; r++)
        if (!(l.envs[r] = rank_env(r, n, rdv, job))) st = titan_error(TITAN_ERR_NOMEM, "spawn: out of memory");
    int signalled = 0, first = -1;
    if (st == TITAN_OK) {
        st = start_ranks(&l, argv);
        /* could not start them all: stop the started ones */
        first = wait_ranks(&l, grace, st != TITAN_OK, &signalled);
    }

    char saved[1024] = "";
    if (st != TITAN_OK) snprintf(saved, sizeof saved, "%s", titan_error_message());
    titan_fs_remove_tree(rdv); /* best effort: a leftover in TMPDIR is no failure */
    remove_stale_segments(job);
    titan_error_clear();
    if (st != TITAN_OK) titan_error(st, "%s", saved);

    if (opt->interrupted) *opt->interrupted = signalled;
    if (opt->exit_codes)
        for (int r = 0; r < n; r++) opt->exit_codes[r] = r < l.started ? code_of(l.wst[r]) : 255;
    if (st == TITAN_OK && first >= 0) {
        st = report_failure(&l, first);
        if (first_code) *first_code = code_of(l.wst[first]);
    }
    if (st == TITAN_OK && signalled) {
        st = titan_error(TITAN_ERR_FAIL, "spawn: interrupted by signal %d (%s); ranks stopped",
                         signalled, strsignal(signalled));
        if (first_code) *first_code = 128 + signalled;
    }
    for (int r = 0; l.envs && r < n; r++) free_env(l.envs[r]);
    free(l.envs);
    free(l.pids);
    free(l.wst);
    return st;
}
