/* flight_read.c - the flight recorder's dumps, read back (flight_read.h). */
#include "trace/flight_read.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "comm/flight.h"

static titan_status bad(const char *path, const char *what) {
    return titan_error(TITAN_ERR_FORMAT, "%s: not a flight recorder dump (%s): %s", path, TITAN_FLIGHT_FORMAT, what);
}

static int64_t int_of(json_t *o, const char *k, int64_t def) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static double num_of(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void str_of(json_t *o, const char *k, char *out, size_t cap) {
    json_t *v = json_object_get(o, k);
    snprintf(out, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static char *dup_of(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static titan_status load_comms(json_t *arr, fl_dump *d) {
    if (!json_is_array(arr)) return bad(d->path, "no \"comms\" array");
    d->ncomms = (int)json_array_size(arr);
    d->comms = calloc((size_t)d->ncomms + 1, sizeof *d->comms);
    if (!d->comms) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", d->path);
    for (int i = 0; i < d->ncomms; i++) {
        json_t *c = json_array_get(arr, (size_t)i);
        fl_comm *fc = &d->comms[i];
        fc->id = (int)int_of(c, "id", i);
        str_of(c, "name", fc->name, sizeof fc->name);
        fc->rank = (int)int_of(c, "rank", -1);
        fc->size = (int)int_of(c, "size", 0);
        if (fc->size <= 0 || fc->size > d->world_size || fc->rank < 0 || fc->rank >= fc->size || fc->id != i)
            return bad(d->path, "a communicator without a valid id, rank and size");
        json_t *w = json_object_get(c, "world_ranks");
        if (json_is_array(w)) {
            if ((int)json_array_size(w) != fc->size) return bad(d->path, "world_ranks of another length than size");
            fc->world_ranks = malloc((size_t)fc->size * sizeof(int));
            if (!fc->world_ranks) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", d->path);
            for (int r = 0; r < fc->size; r++) {
                json_t *v = json_array_get(w, (size_t)r);
                json_int_t wr = json_is_integer(v) ? json_integer_value(v) : -1;
                if (wr < 0 || wr >= d->world_size) return bad(d->path, "a world rank outside the job");
                fc->world_ranks[r] = (int)wr;
            }
        }
    }
    return TITAN_OK;
}

static titan_status load_entries(json_t *arr, fl_dump *d) {
    if (!json_is_array(arr)) return bad(d->path, "no \"entries\" array");
    d->nentries = json_array_size(arr);
    d->entries = calloc(d->nentries + 1, sizeof *d->entries);
    if (!d->entries) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", d->path);
    for (size_t i = 0; i < d->nentries; i++) {
        json_t *o = json_array_get(arr, i);
        fl_entry *e = &d->entries[i];
        e->id = (uint64_t)int_of(o, "id", 0);
        e->comm = (int)int_of(o, "comm", -1);
        if (e->comm < 0 || e->comm >= d->ncomms) return bad(d->path, "an entry of an unknown communicator");
        str_of(o, "op", e->op, sizeof e->op);
        str_of(o, "dtype", e->dtype, sizeof e->dtype);
        str_of(o, "redop", e->redop, sizeof e->redop);
        e->seq = (uint64_t)int_of(o, "seq", 0);
        e->count = (uint64_t)int_of(o, "count", 0);
        e->count2 = (uint64_t)int_of(o, "count2", 0);
        e->peer = (int)int_of(o, "peer", -1);
        e->peer2 = (int)int_of(o, "peer2", -1);
        e->n = (uint64_t)int_of(o, "n", 0);
        e->n2 = (uint64_t)int_of(o, "n2", 0);
        e->step = int_of(o, "step", 0);
        str_of(o, "phase", e->phase, sizeof e->phase);
        char st[16];
        str_of(o, "state", st, sizeof st);
        e->state = -1;
        for (int s = TITAN_FLIGHT_QUEUED; s <= TITAN_FLIGHT_FAILED; s++)
            if (!strcmp(st, titan_flight_state_name(s))) e->state = s;
        if (e->state < 0 || !e->op[0]) return bad(d->path, "an entry without an op or a known state");
        e->t_queued = num_of(o, "t_queued");
        e->t_started = num_of(o, "t_started");
        e->t_ended = num_of(o, "t_ended");
        e->error = dup_of(o, "error");
    }
    return TITAN_OK;
}

titan_status titan_flight_load(const char *path, fl_dump *d) {
    memset(d, 0, sizeof *d);
    char *text = NULL;
    size_t len = 0;
    if (!titan_fs_exists(path)) return titan_error(TITAN_ERR_IO, "%s: no such file", path);
    TITAN_TRY(titan_fs_read_file(path, &text, &len, (size_t)1 << 32));
    titan_status st = titan_flight_parse(text, len, path, d);
    free(text);
    return st;
}

titan_status titan_flight_parse(const char *text, size_t len, const char *path, fl_dump *d) {
    memset(d, 0, sizeof *d);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root) return titan_error(TITAN_ERR_FORMAT, "%s:%d: not JSON: %s", path, jerr.line, jerr.text);
    titan_status st = titan_flight_from_json(root, path, d);
    json_decref(root);
    return st;
}

/* "hosts": optional (older dumps lack it); one per world rank, else ignored. */
static void load_hosts(json_t *a, fl_dump *d) {
    if (!json_is_array(a) || (int)json_array_size(a) != d->world_size) return;
    d->hosts = calloc((size_t)d->world_size, sizeof *d->hosts);
    if (!d->hosts) return;
    d->nhosts = d->world_size;
    for (int r = 0; r < d->nhosts; r++) {
        const char *h = json_string_value(json_array_get(a, (size_t)r));
        snprintf(d->hosts[r], sizeof d->hosts[r], "%s", h ? h : "");
    }
}

titan_status titan_flight_from_json(json_t *root, const char *path, fl_dump *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    titan_status st = TITAN_OK;
    char format[32];
    str_of(root, "format", format, sizeof format);
    if (strcmp(format, TITAN_FLIGHT_FORMAT) != 0) st = bad(path, "its \"format\" is not " TITAN_FLIGHT_FORMAT);
    if (st == TITAN_OK) {
        d->rank = (int)int_of(root, "rank", -1);
        d->world_size = (int)int_of(root, "world_size", 0);
        if (d->rank < 0 || d->world_size <= 0 || d->world_size > TITAN_FLIGHT_MAX_WORLD || d->rank >= d->world_size)
            st = bad(path, "no valid rank and world_size");
    }
    if (st == TITAN_OK) {
        str_of(root, "host", d->host, sizeof d->host);
        d->pid = (long)int_of(root, "pid", 0);
        d->time = num_of(root, "time");
        d->step = int_of(root, "step", 0);
        str_of(root, "phase", d->phase, sizeof d->phase);
        d->reason = dup_of(root, "reason");
        d->failure = dup_of(root, "failure");
        d->capacity = (uint64_t)int_of(root, "capacity", 0);
        d->recorded = (uint64_t)int_of(root, "recorded", 0);
        st = load_comms(json_object_get(root, "comms"), d);
    }
    if (st == TITAN_OK) load_hosts(json_object_get(root, "hosts"), d);
    if (st == TITAN_OK) st = load_entries(json_object_get(root, "entries"), d);
    if (st != TITAN_OK) titan_flight_dump_free(d);
    return st;
}

const char *titan_flight_earlier_failure(const fl_dump *d) {
    if (!d->failure || !d->failure[0]) return NULL;
    return d->reason && !strcmp(d->failure, d->reason) ? NULL : d->failure;
}

void titan_flight_dump_free(fl_dump *d) {
    for (int i = 0; i < d->ncomms && d->comms; i++) free(d->comms[i].world_ranks);
    for (size_t i = 0; i < d->nentries && d->entries; i++) free(d->entries[i].error);
    free(d->comms);
    free(d->hosts);
    d->hosts = NULL;
    d->nhosts = 0;
    free(d->entries);
    free(d->reason);
    free(d->failure);
    d->failure = NULL;
    d->comms = NULL;
    d->entries = NULL;
    d->reason = NULL;
}

void titan_flight_dumps_free(fl_dump *dumps, int n) {
    for (int i = 0; i < n; i++) titan_flight_dump_free(&dumps[i]);
    free(dumps);
}

static int by_rank(const void *a, const void *b) {
    return ((const fl_dump *)a)->rank - ((const fl_dump *)b)->rank;
}

titan_status titan_flight_load_dir(const char *dir, fl_dump **out, int *nout) {
    *out = NULL;
    *nout = 0;
    DIR *dh = opendir(dir);
    if (!dh) {
        titan_error(TITAN_ERR_IO, "%s: no flight recorder dumps (cannot open the directory: %s)", dir, strerror(errno));
        titan_error_hint("ranks dump when training fails or on SIGUSR1 or SIGTERM, with more than one rank and "
                         "comm.trace_buf_size > 0");
        return TITAN_ERR_IO;
    }
    fl_dump *dumps = NULL;
    int n = 0;
    titan_status st = TITAN_OK;
    struct dirent *de;
    while (st == TITAN_OK && (de = readdir(dh))) {
        if (titan_flight_dump_rank(de->d_name) < 0) continue;
        fl_dump *grown = realloc(dumps, (size_t)(n + 1) * sizeof *dumps);
        if (!grown) {
            st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        dumps = grown;
        char path[4096 + 300];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        st = titan_flight_load(path, &dumps[n]);
        if (st == TITAN_OK) n++;
    }
    closedir(dh);
    if (st == TITAN_OK && n == 0)
        st = titan_error(TITAN_ERR_IO, "%s: no flight recorder dumps (rank-R.json) here", dir);
    if (st == TITAN_OK) {
        qsort(dumps, (size_t)n, sizeof *dumps, by_rank);
        for (int i = 0; i < n && st == TITAN_OK; i++) {
            if (dumps[i].world_size != dumps[0].world_size)
                st = titan_error(TITAN_ERR_FORMAT, "%s: world size %d, but %s says %d: dumps of different jobs",
                                 dumps[i].path, dumps[i].world_size, dumps[0].path, dumps[0].world_size);
            else if (i > 0 && dumps[i].rank == dumps[i - 1].rank)
                st = titan_error(TITAN_ERR_FORMAT, "%s and %s: two dumps of rank %d", dumps[i - 1].path,
                                 dumps[i].path, dumps[i].rank);
        }
    }
    if (st != TITAN_OK) {
        titan_flight_dumps_free(dumps, n);
        return st;
    }
    *out = dumps;
    *nout = n;
    return TITAN_OK;
}
