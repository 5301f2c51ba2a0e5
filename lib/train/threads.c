/* threads.c - CPU threads per rank: the cores of the affinity set, shared
 * out among the local ranks that have the same cores. */
#define _GNU_SOURCE
#include "train/threads.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

/* What a rank tells the others: its host and its cores. */
typedef struct {
    char host[64];
    cpu_set_t cpus;
} placement;

static int overlap(const cpu_set_t *a, const cpu_set_t *b) {
    cpu_set_t both;
    CPU_AND(&both, a, b);
    return CPU_COUNT(&both) > 0;
}

/* How many local ranks (this one included) have cores in common with me. */
static titan_status count_sharing(titan_dist *d, const placement *me, int *sharing) {
    TITAN_TRY(titan_dist_put(d, "cpu-placement", me, sizeof *me));
    TITAN_TRY(titan_dist_commit(d));
    TITAN_TRY(titan_dist_fence(d));
    int world = titan_dist_world_size(d), rank = titan_dist_rank(d), others = titan_dist_local_size(d) - 1;
    *sharing = 1;
    for (int r = 0; r < world && others > 0; r++) {
        if (r == rank) continue;
        placement p;
        size_t n = 0;
        TITAN_TRY(titan_dist_get(d, r, "cpu-placement", &p, sizeof p, &n));
        if (n != sizeof p || strncmp(p.host, me->host, sizeof p.host) != 0) continue;
        others--; /* the local ranks found: the search stops with the last */
        if (overlap(&p.cpus, &me->cpus)) (*sharing)++;
    }
    return TITAN_OK;
}

titan_status titan_train_threads_pick(titan_dist *d, int configured, titan_train_threads *out) {
    placement me;
    memset(&me, 0, sizeof me);
    if (sched_getaffinity(0, sizeof me.cpus, &me.cpus) != 0) {
        /* more CPUs than a cpu_set_t holds: all of them, as before */
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (online > 0 ? online : 1) && c < CPU_SETSIZE; c++) CPU_SET((int)c, &me.cpus);
    }
    out->cores = CPU_COUNT(&me.cpus);
    out->sharing = 1;
    if (configured > 0) {
        out->threads = configured;
        return TITAN_OK;
    }
    if (titan_dist_local_size(d) > 1) {
        if (gethostname(me.host, sizeof me.host - 1) != 0) strcpy(me.host, "?");
        TITAN_TRY(count_sharing(d, &me, &out->sharing));
    }
    out->threads = out->cores / out->sharing;
    if (out->threads < 1) out->threads = 1;
    return TITAN_OK;
}
