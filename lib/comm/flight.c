/* flight.c - the flight recorder (see flight.h): a ring of the last
 * operations under one lock, its JSON dump, the signal watcher. */
#define _GNU_SOURCE /* pipe2 */
#include "flight.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"

const char *titan_flight_state_name(int state) {
    static const char *const names[] = {"queued", "running", "done", "failed"};
    return state >= TITAN_FLIGHT_QUEUED && state <= TITAN_FLIGHT_FAILED ? names[state] : "?";
}

int titan_flight_dump_rank(const char *name) {
    int r = -1, end = 0;
    if (strncmp(name, "rank-", 5) != 0 || name[5] < '0' || name[5] > '9') return -1;
    if (sscanf(name, "rank-%d.json%n", &r, &end) != 1 || !end || name[end]) return -1;
    return r;
}

typedef struct {
    uint64_t id; /* 0: an empty slot */
    titan_flight_op op;
    int64_t step;
    const char *phase;
    double t_queued, t_started, t_ended; /* wall clock, seconds; 0 = not yet */
    int state;
    char err[256];
} entry;

typedef struct {
    char name[64];
    int rank, size;
    int *world_ranks; /* NULL: unknown */
} comm_info;

static struct {
    pthread_mutex_t mu;
    pthread_mutex_t dump_mu; /* one dump at a time (the main thread's and the watcher's share a temp file) */
    int on;
    char path[4200];
    char failure[1024];      /* the error a failure dump gave; later dumps keep it */
    int world_rank, world_size;
    entry *ring;
    size_t cap;
    uint64_t next_id;
    int64_t step;
    const char *phase;
    comm_info *comms;
    int ncomms;
    char (*hosts)[TITAN_FLIGHT_HOST_MAX]; /* [world_size], or NULL */
    /* the signal watcher */
    int pipe_fd[2];
    int watching;
    pthread_t watcher;
    struct sigaction old_usr1, old_term; /* put back by titan_flight_disable */
} fr = {.mu = PTHREAD_MUTEX_INITIALIZER, .dump_mu = PTHREAD_MUTEX_INITIALIZER, .pipe_fd = {-1, -1}};

/* Cuts s (cut by snprintf at some byte) back to whole UTF-8 characters:
 * jansson takes only valid UTF-8, and a key it refuses would go missing. */
static void utf8_trim(char *s) {
    size_t n = strlen(s), i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--; /* continuation bytes */
    if (i == 0) return;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (n - (i - 1) < want) s[i - 1] = 0;
}

/* A JSON string of s, or of a placeholder when s is not UTF-8. */
static json_t *jstr(const char *s) {
    json_t *v = json_string(s);
    return v ? v : json_string("(not UTF-8)");
}

/* Dumps of an earlier job in dir: this rank's (it writes its own anew), and
 * with rank 0, those of ranks this job does not have (a run resumed on fewer
 * ranks), so titan-trace never reads another job's dump as this one's. */
static void remove_stale(const char *dir, int world_rank, int world_size) {
    char path[4300];
    snprintf(path, sizeof path, "%s/rank-%d.json", dir, world_rank);
    unlink(path);
    DIR *dh = world_rank == 0 ? opendir(dir) : NULL;
    struct dirent *de;
    while (dh && (de = readdir(dh))) {
        if (titan_flight_dump_rank(de->d_name) >= world_size) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    if (dh) closedir(dh);
}

titan_status titan_flight_enable(const char *dir, int world_rank, int world_size, int capacity) {
    if (capacity <= 0) return titan_error(TITAN_ERR_USAGE, "flight recorder: capacity %d: want > 0", capacity);
    pthread_mutex_lock(&fr.mu);
    if (fr.on) {
        pthread_mutex_unlock(&fr.mu);
        return TITAN_OK;
    }
    fr.ring = calloc((size_t)capacity, sizeof *fr.ring);
    if (!fr.ring) {
        pthread_mutex_unlock(&fr.mu);
        return titan_error(TITAN_ERR_NOMEM, "flight recorder: out of memory for %d entries", capacity);
    }
    fr.cap = (size_t)capacity;
    fr.next_id = 1;
    fr.world_rank = world_rank;
    fr.world_size = world_size;
    fr.step = 0;
    fr.phase = NULL;
    fr.failure[0] = 0;
    snprintf(fr.path, sizeof fr.path, "%s/rank-%d.json", dir, world_rank);
    fr.on = 1;
    pthread_mutex_unlock(&fr.mu);
    remove_stale(dir, world_rank, world_size);
    return TITAN_OK;
}

int titan_flight_enabled(void) {
    pthread_mutex_lock(&fr.mu);
    int on = fr.on;
    pthread_mutex_unlock(&fr.mu);
    return on;
}

int titan_flight_world_rank(void) {
    pthread_mutex_lock(&fr.mu);
    int r = fr.world_rank;
    pthread_mutex_unlock(&fr.mu);
    return r;
}

void titan_flight_set_step(int64_t step) {
    pthread_mutex_lock(&fr.mu);
    fr.step = step;
    pthread_mutex_unlock(&fr.mu);
}

void titan_flight_phase(const char *phase) {
    pthread_mutex_lock(&fr.mu);
    fr.phase = phase;
    pthread_mutex_unlock(&fr.mu);
}

int titan_flight_comm(const char *name, int rank, int size, const int *world_ranks) {
    pthread_mutex_lock(&fr.mu);
    int id = -1;
    comm_info *grown = fr.on ? realloc(fr.comms, (size_t)(fr.ncomms + 1) * sizeof *grown) : NULL;
    if (grown) {
        fr.comms = grown;
        comm_info *ci = &fr.comms[fr.ncomms];
        memset(ci, 0, sizeof *ci);
        snprintf(ci->name, sizeof ci->name, "%s", name);
        ci->rank = rank;
        utf8_trim(ci->name);
        ci->size = size;
        if (world_ranks && (ci->world_ranks = malloc((size_t)size * sizeof(int))))
            memcpy(ci->world_ranks, world_ranks, (size_t)size * sizeof(int));
        id = fr.ncomms++;
    }
    pthread_mutex_unlock(&fr.mu);
    return id;
}

int titan_flight_wants_hosts(int size) {
    pthread_mutex_lock(&fr.mu);
    int yes = fr.on && !fr.hosts && size == fr.world_size;
    pthread_mutex_unlock(&fr.mu);
    return yes;
}

void titan_flight_hosts(const char *hosts, size_t stride, int n) {
    pthread_mutex_lock(&fr.mu);
    if (fr.on && !fr.hosts && n == fr.world_size && (fr.hosts = calloc((size_t)n, sizeof *fr.hosts)))
        for (int r = 0; r < n; r++) {
            size_t k = strnlen(hosts + (size_t)r * stride, stride);
            if (k >= TITAN_FLIGHT_HOST_MAX) k = TITAN_FLIGHT_HOST_MAX - 1;
            memcpy(fr.hosts[r], hosts + (size_t)r * stride, k);
            utf8_trim(fr.hosts[r]);
        }
    pthread_mutex_unlock(&fr.mu);
}

/* The entry of id, if the ring still holds it (called under the lock). */
static entry *find(uint64_t id) {
    if (!fr.on || id == 0) return NULL;
    entry *e = &fr.ring[(id - 1) % fr.cap];
    return e->id == id ? e : NULL;
}

uint64_t titan_flight_queued(const titan_flight_op *op) {
    if (op->id < 0) return 0;
    pthread_mutex_lock(&fr.mu);
    uint64_t id = 0;
    if (fr.on) {
        id = fr.next_id++;
        entry *e = &fr.ring[(id - 1) % fr.cap];
        /* every field but the message buffer, which is read only once set */
        e->id = id;
        e->op = *op;
        e->step = fr.step;
        e->phase = fr.phase;
        e->t_queued = titan_wall_s();
        e->t_started = e->t_ended = 0;
        e->state = TITAN_FLIGHT_QUEUED;
        e->err[0] = '\0';
    }
    pthread_mutex_unlock(&fr.mu);
    return id;
}

void titan_flight_started(uint64_t id) {
    if (!id) return;
    pthread_mutex_lock(&fr.mu);
    entry *e = find(id);
    if (e) {
        e->t_started = titan_wall_s();
        e->state = TITAN_FLIGHT_RUNNING;
    }
    pthread_mutex_unlock(&fr.mu);
}

void titan_flight_ended(uint64_t id, titan_status st, const char *msg) {
    if (!id) return;
    pthread_mutex_lock(&fr.mu);
    entry *e = find(id);
    if (e) {
        e->t_ended = titan_wall_s();
        e->state = st == TITAN_OK ? TITAN_FLIGHT_DONE : TITAN_FLIGHT_FAILED;
        if (st != TITAN_OK) {
            snprintf(e->err, sizeof e->err, "%s", msg ? msg : "");
            utf8_trim(e->err);
        }
    }
    pthread_mutex_unlock(&fr.mu);
}

/* ---- the dump ---------------------------------------------------------------------------- */

static int set(json_t *o, const char *k, json_t *v) { return json_object_set_new(o, k, v); }

static json_t *entry_json(const entry *e) {
    const titan_flight_op *op = &e->op;
    json_t *o = json_object();
    set(o, "id", json_integer((json_int_t)e->id));
    set(o, "comm", json_integer(op->id));
    set(o, "comm_name", jstr(op->id < fr.ncomms ? fr.comms[op->id].name : "?"));
    set(o, "op", json_string(op->op));
    if (op->seq) set(o, "seq", json_integer((json_int_t)op->seq));
    set(o, "dtype", json_string(op->dtype));
    if (op->redop) set(o, "redop", json_string(op->redop));
    set(o, "count", json_integer((json_int_t)op->count));
    if (op->peer >= 0) set(o, "peer", json_integer(op->peer));
    if (op->n) set(o, "n", json_integer((json_int_t)op->n));
    if (op->peer2 >= 0) {
        set(o, "peer2", json_integer(op->peer2));
        set(o, "n2", json_integer((json_int_t)op->n2));
        set(o, "count2", json_integer((json_int_t)op->count2));
    }
    set(o, "step", json_integer(e->step));
    if (e->phase) set(o, "phase", json_string(e->phase));
    set(o, "state", json_string(titan_flight_state_name(e->state)));
    set(o, "t_queued", json_real(e->t_queued));
    if (e->t_started > 0) set(o, "t_started", json_real(e->t_started));
    if (e->t_ended > 0) set(o, "t_ended", json_real(e->t_ended));
    if (e->err[0]) set(o, "error", jstr(e->err));
    return o;
}

/* The dump as text (called under the lock: a snapshot of one moment). */
static char *dump_text(const char *reason) {
    json_t *root = json_object();
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    set(root, "format", json_string(TITAN_FLIGHT_FORMAT));
    set(root, "rank", json_integer(fr.world_rank));
    set(root, "world_size", json_integer(fr.world_size));
    set(root, "host", json_string(host));
    set(root, "pid", json_integer((json_int_t)getpid()));
    set(root, "time", json_real(titan_wall_s()));
    set(root, "step", json_integer(fr.step));
    if (fr.phase) set(root, "phase", json_string(fr.phase));
    set(root, "reason", jstr(reason ? reason : ""));
    if (fr.failure[0]) set(root, "failure", jstr(fr.failure));
    set(root, "capacity", json_integer((json_int_t)fr.cap));
    set(root, "recorded", json_integer((json_int_t)(fr.next_id - 1)));
    if (fr.hosts) {
        json_t *h = json_array();
        for (int r = 0; r < fr.world_size; r++) json_array_append_new(h, jstr(fr.hosts[r]));
        set(root, "hosts", h);
    }
    json_t *comms = json_array();
    for (int i = 0; i < fr.ncomms; i++) {
        const comm_info *ci = &fr.comms[i];
        json_t *c = json_object();
        set(c, "id", json_integer(i));
        set(c, "name", jstr(ci->name));
        set(c, "rank", json_integer(ci->rank));
        set(c, "size", json_integer(ci->size));
        if (ci->world_ranks) {
            json_t *w = json_array();
            for (int r = 0; r < ci->size; r++) json_array_append_new(w, json_integer(ci->world_ranks[r]));
            set(c, "world_ranks", w);
        }
        json_array_append_new(comms, c);
    }
    set(root, "comms", comms);
    json_t *entries = json_array();
    uint64_t last = fr.next_id - 1, first = last >= fr.cap ? last - fr.cap + 1 : 1;
    for (uint64_t id = first; id >= 1 && id <= last; id++) {
        const entry *e = find(id);
        if (e) json_array_append_new(entries, entry_json(e));
    }
    set(root, "entries", entries);
    char *text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(root);
    return text;
}

static titan_status dump_locked(const char *reason);

titan_status titan_flight_dump_failure(const char *error) {
    pthread_mutex_lock(&fr.mu);
    snprintf(fr.failure, sizeof fr.failure, "%s", error ? error : "");
    utf8_trim(fr.failure);
    pthread_mutex_unlock(&fr.mu);
    return titan_flight_dump(error);
}

titan_status titan_flight_dump(const char *reason) {
    pthread_mutex_lock(&fr.dump_mu);
    titan_status st = dump_locked(reason);
    pthread_mutex_unlock(&fr.dump_mu);
    return st;
}

static titan_status dump_locked(const char *reason) {
    pthread_mutex_lock(&fr.mu);
    if (!fr.on) {
        pthread_mutex_unlock(&fr.mu);
        return TITAN_OK;
    }
    char path[sizeof fr.path];
    memcpy(path, fr.path, sizeof path);
    char *text = dump_text(reason);
    pthread_mutex_unlock(&fr.mu);
    if (!text) return titan_error(TITAN_ERR_NOMEM, "flight recorder %s: out of memory", path);
    char dir[sizeof path];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    titan_status st = slash ? titan_fs_mkdir_p(dir) : TITAN_OK;
    if (st == TITAN_OK) {
        size_t n = strlen(text);
        text[n] = '\n'; /* json_dumps ends in NUL: the newline takes its place */
        st = titan_fs_write_atomic(path, text, n + 1);
    }
    free(text);
    if (st == TITAN_OK) titan_info("flight recorder: %s written (%s)", path, reason ? reason : "");
    return st;
}

/* ---- signals ----------------------------------------------------------------------------- */

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(fr.pipe_fd[1], &b, 1) < 0) { /* nothing to do about it in a handler */
    }
    errno = saved;
}

static void *watcher_main(void *arg) {
    (void)arg;
    for (;;) {
        unsigned char b;
        ssize_t n = read(fr.pipe_fd[0], &b, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || b == 0) break; /* closed, or told to stop */
        const char *name = b == SIGTERM ? "SIGTERM" : b == SIGUSR1 ? "SIGUSR1" : "signal";
        titan_status st = titan_flight_dump(name);
        if (st != TITAN_OK) titan_warn("flight recorder: dump on %s failed: %s", name, titan_error_message());
        if (b == SIGTERM) {
            /* Die of it as without the recorder: the default action, raised again. */
            signal(SIGTERM, SIG_DFL);
            kill(getpid(), SIGTERM);
            break;
        }
    }
    return NULL;
}

titan_status titan_flight_watch_signals(void) {
    if (fr.watching) return TITAN_OK;
    if (pipe2(fr.pipe_fd, O_CLOEXEC) != 0)
        return titan_error(TITAN_ERR_FAIL, "flight recorder: pipe: %s", strerror(errno));
    /* The handler must never block: a full pipe drops the byte (a dump is pending anyway). */
    fcntl(fr.pipe_fd[1], F_SETFL, fcntl(fr.pipe_fd[1], F_GETFL) | O_NONBLOCK);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the watcher takes no signals */
    int rc = pthread_create(&fr.watcher, NULL, watcher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(fr.pipe_fd[0]);
        close(fr.pipe_fd[1]);
        fr.pipe_fd[0] = fr.pipe_fd[1] = -1;
        return titan_error(TITAN_ERR_FAIL, "flight recorder: cannot start its signal thread: %s", strerror(rc));
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, &fr.old_usr1);
    sigaction(SIGTERM, &sa, &fr.old_term);
    fr.watching = 1;
    return TITAN_OK;
}

void titan_flight_disable(void) {
    if (fr.watching) {
        /* as before (titan-train ignores SIGUSR1): a late signal does what it did without the recorder */
        sigaction(SIGUSR1, &fr.old_usr1, NULL);
        sigaction(SIGTERM, &fr.old_term, NULL);
        unsigned char stop = 0;
        if (write(fr.pipe_fd[1], &stop, 1) == 1) pthread_join(fr.watcher, NULL);
        else pthread_detach(fr.watcher);
        close(fr.pipe_fd[0]);
        close(fr.pipe_fd[1]);
        fr.pipe_fd[0] = fr.pipe_fd[1] = -1;
        fr.watching = 0;
    }
    pthread_mutex_lock(&fr.mu);
    fr.on = 0;
    free(fr.ring);
    fr.ring = NULL;
    for (int i = 0; i < fr.ncomms; i++) free(fr.comms[i].world_ranks);
    free(fr.comms);
    free(fr.hosts);
    fr.hosts = NULL;
    fr.comms = NULL;
    fr.ncomms = 0;
    pthread_mutex_unlock(&fr.mu);
}
