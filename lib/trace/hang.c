/* hang.c - the collective or send/receive a hung job waits in, and who it
 * waits for (hang.h). */
#include "trace/hang.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A communicator as the job knows it: its name and members, and where each
 * member's dump describes it. */
typedef struct {
    const char *name;
    int size;
    const int *world;  /* world rank of each member */
    int *dump;         /* [size]: index into dumps, -1 when that rank left none */
    int *comm;         /* [size]: that dump's comm index */
} group;

typedef struct {
    const fl_dump *dumps;
    int n, world;
    int *dump_of;      /* [world]: index into dumps, -1 */
    group *groups;
    int ngroups;
    char *blamed;      /* [world]: some waiting rank waits for this one */
    FILE *f;
    titan_hang_result *res;
} ctx;

static int same_members(const group *g, const fl_comm *c) {
    return g->size == c->size && !strcmp(g->name, c->name) && !memcmp(g->world, c->world_ranks, (size_t)c->size * sizeof(int));
}

static int build_groups(ctx *x) {
    for (int i = 0; i < x->n; i++) {
        const fl_dump *d = &x->dumps[i];
        for (int k = 0; k < d->ncomms; k++) {
            const fl_comm *c = &d->comms[k];
            if (c->size < 2 || !c->world_ranks) continue;
            group *g = NULL;
            for (int j = 0; j < x->ngroups && !g; j++)
                if (same_members(&x->groups[j], c)) g = &x->groups[j];
            if (!g) {
                group *grown = realloc(x->groups, (size_t)(x->ngroups + 1) * sizeof *grown);
                if (!grown) return 0;
                x->groups = grown;
                g = &x->groups[x->ngroups++];
                g->name = c->name;
                g->size = c->size;
                g->world = c->world_ranks;
                g->dump = malloc((size_t)c->size * sizeof(int));
                g->comm = malloc((size_t)c->size * sizeof(int));
                if (!g->dump || !g->comm) return 0;
                for (int r = 0; r < c->size; r++) g->dump[r] = g->comm[r] = -1;
            }
            g->dump[c->rank] = i;
            g->comm[c->rank] = k;
        }
    }
    return 1;
}

static void describe_op(const fl_dump *d, const fl_entry *e, char *buf, size_t cap) {
    const char *comm = d->comms[e->comm].name;
    if (e->seq)
        snprintf(buf, cap, "%s #%" PRIu64 " on comm %s (%s x %" PRIu64 "%s%s)", e->op, e->seq, comm, e->dtype,
                 e->count, e->redop[0] ? ", " : "", e->redop);
    else if (!strcmp(e->op, "send")) /* peers are ranks of the communicator */
        snprintf(buf, cap, "send #%" PRIu64 " to rank %d of comm %s (%s x %" PRIu64 ")", e->n, e->peer, comm,
                 e->dtype, e->count);
    else if (!strcmp(e->op, "recv"))
        snprintf(buf, cap, "recv #%" PRIu64 " from rank %d of comm %s (%s x %" PRIu64 ")", e->n2, e->peer2, comm,
                 e->dtype, e->count2);
    else if (!strcmp(e->op, "send_recv"))
        snprintf(buf, cap, "send_recv (send #%" PRIu64 " to rank %d, recv #%" PRIu64 " from rank %d) of comm %s",
                 e->n, e->peer, e->n2, e->peer2, comm);
    else
        snprintf(buf, cap, "%s on comm %s", e->op, comm);
}

static double since(const fl_dump *d, const fl_entry *e) {
    double t = e->t_started > 0 ? e->t_started : e->t_queued;
    return d->time > t ? d->time - t : 0.0;
}

/* The oldest unfinished operation of a dump (NULL: it waits for nothing). */
static const fl_entry *waiting_in(const fl_dump *d) {
    for (size_t i = 0; i < d->nentries; i++)
        if (d->entries[i].state != TITAN_FLIGHT_DONE) return &d->entries[i];
    return NULL;
}

/* "rank 1 (host, pid N)"; one without a dump: "rank 1 (host)"
 * where another rank's dump lists the hosts, else "rank 1". */
static void rank_name(const ctx *x, int w, char *buf, size_t cap) {
    int i = x->dump_of[w];
    const char *host = NULL;
    for (int j = 0; i < 0 && j < x->n && !host; j++)
        if (x->dumps[j].nhosts > w && x->dumps[j].hosts[w][0]) host = x->dumps[j].hosts[w];
    if (i < 0 && host)
        snprintf(buf, cap, "rank %d (%s)", w, host);
    else if (i < 0)
        snprintf(buf, cap, "rank %d", w);
    else
        snprintf(buf, cap, "rank %d (%s, pid %ld)", w, x->dumps[i].host, x->dumps[i].pid);
}

/* One line on what world rank w was doing when it dumped. */
static void doing(const ctx *x, int w, const char *indent) {
    int i = x->dump_of[w];
    if (i < 0) {
        fprintf(x->f, "%sleft no dump: it died, was killed before it could write, or never started recording\n",
                indent);
        return;
    }
    const fl_dump *d = &x->dumps[i];
    const fl_entry *e = waiting_in(d);
    char what[256];
    if (e) {
        describe_op(d, e, what, sizeof what);
        fprintf(x->f, "%sis itself %s %s (step %" PRId64 ", %.1f s before its dump)\n", indent,
                e->state == TITAN_FLIGHT_FAILED ? "failed in" : e->state == TITAN_FLIGHT_QUEUED ? "queued in" : "waiting in", what,
                e->step, since(d, e));
        return;
    }
    if (d->nentries == 0) {
        fprintf(x->f, "%sis in no communication, and recorded none (step %" PRId64 ")\n", indent, d->step);
        return;
    }
    const fl_entry *last = &d->entries[d->nentries - 1];
    describe_op(d, last, what, sizeof what);
    fprintf(x->f,
            "%sis in no communication: busy (or stuck) outside titan's collectives in step %" PRId64
            "%s%s%s; its last operation, %s, ended %.1f s before its dump\n",
            indent, d->step, d->phase[0] ? " (" : "", d->phase, d->phase[0] ? ")" : "", what,
            d->time > last->t_ended ? d->time - last->t_ended : 0.0);
}

static const fl_entry *find_seq(const fl_dump *d, int comm, uint64_t seq) {
    for (size_t i = 0; i < d->nentries; i++)
        if (d->entries[i].comm == comm && d->entries[i].seq == seq) return &d->entries[i];
    return NULL;
}

static uint64_t last_seq(const fl_dump *d, int comm) {
    uint64_t s = 0;
    for (size_t i = 0; i < d->nentries; i++)
        if (d->entries[i].comm == comm && d->entries[i].seq > s) s = d->entries[i].seq;
    return s;
}

/* The collective a group is stuck in, if any: the lowest number a member has not finished. */
static void check_group(ctx *x, const group *g) {
    uint64_t stuck = 0;
    int who = -1;
    for (int r = 0; r < g->size; r++) {
        if (g->dump[r] < 0) continue;
        const fl_dump *d = &x->dumps[g->dump[r]];
        for (size_t i = 0; i < d->nentries; i++) {
            const fl_entry *e = &d->entries[i];
            if (e->comm == g->comm[r] && e->seq && e->state != TITAN_FLIGHT_DONE && (!stuck || e->seq < stuck)) {
                stuck = e->seq;
                who = r;
            }
        }
    }
    if (!stuck) return;
    x->res->stuck++;
    const fl_dump *wd = &x->dumps[g->dump[who]];
    const fl_entry *we = find_seq(wd, g->comm[who], stuck);
    char what[256];
    describe_op(wd, we, what, sizeof what);
    fprintf(x->f, "\nstuck: %s, step %" PRId64 ", its %d ranks:\n", what, we->step, g->size);
    for (int r = 0; r < g->size; r++) {
        int w = g->world[r];
        char rn[400], rn2[320];
        rank_name(x, w, rn2, sizeof rn2);
        if (r != w) /* its rank in the group too, as the dumps' messages name it */
            snprintf(rn, sizeof rn, "%.300s [%d of comm %.63s]", rn2, r, g->name);
        else
            snprintf(rn, sizeof rn, "%.300s", rn2);
        if (g->dump[r] < 0) {
            fprintf(x->f, "  %s: no dump\n", rn);
            x->blamed[w] = 1;
            continue;
        }
        const fl_dump *d = &x->dumps[g->dump[r]];
        const fl_entry *e = find_seq(d, g->comm[r], stuck);
        uint64_t last = last_seq(d, g->comm[r]);
        if (e && (strcmp(e->op, we->op) || strcmp(e->dtype, we->dtype))) {
            char mine[256];
            describe_op(d, e, mine, sizeof mine);
            fprintf(x->f, "  %s: MISMATCH: called %s under that number\n", rn, mine);
            x->res->mismatch++;
        } else if (e && e->state == TITAN_FLIGHT_DONE) {
            fprintf(x->f, "  %s: finished it\n", rn);
        } else if (e) {
            fprintf(x->f, "  %s: %s, %.1f s before its dump%s%s\n", rn,
                    e->state == TITAN_FLIGHT_FAILED ? "failed in it" : e->state == TITAN_FLIGHT_QUEUED ? "queued it behind earlier operations" : "waiting in it",
                    since(d, e), e->error ? ": " : "", e->error ? e->error : "");
        } else if (last > stuck) {
            fprintf(x->f, "  %s: past it (no longer in its ring)\n", rn);
        } else if (last == 0 && d->recorded > d->nentries) {
            fprintf(x->f, "  %s: unknown: its ring no longer holds any operation of comm %s\n", rn, g->name);
        } else {
            fprintf(x->f, "  %s: NEVER CALLED IT (its last on comm %s: #%" PRIu64 ")\n", rn, g->name, last);
            doing(x, w, "    and ");
            x->blamed[w] = 1;
        }
    }
}

/* The group (and member index) of a dump's communicator. */
static const group *group_of(const ctx *x, int dump, int comm, int *member) {
    for (int j = 0; j < x->ngroups; j++)
        for (int r = 0; r < x->groups[j].size; r++)
            if (x->groups[j].dump[r] == dump && x->groups[j].comm[r] == comm) {
                *member = r;
                return &x->groups[j];
            }
    return NULL;
}

/* How many sends to `to` (recvs from `from`) a dump has called on its comm. */
static uint64_t p2p_called(const fl_dump *d, int comm, int to, int from) {
    uint64_t n = 0;
    for (size_t i = 0; i < d->nentries; i++) {
        const fl_entry *e = &d->entries[i];
        if (e->comm != comm) continue;
        if (to >= 0 && e->peer == to && e->n > n) n = e->n; /* a broadcast's root has no n */
        if (from >= 0 && e->peer2 == from && e->n2 > n) n = e->n2;
    }
    return n;
}

/* One side of an unfinished send or receive: did the peer call its half? */
static void check_p2p_side(ctx *x, int dump, const fl_entry *e, int is_send) {
    int me = -1;
    const group *g = group_of(x, dump, e->comm, &me);
    int peer = is_send ? e->peer : e->peer2;
    uint64_t n = is_send ? e->n : e->n2;
    if (!g || peer < 0 || peer >= g->size) return;
    int w = g->world[peer];
    char rn[320];
    rank_name(x, w, rn, sizeof rn);
    if (g->dump[peer] < 0) {
        fprintf(x->f, "  %s: no dump\n", rn);
        x->blamed[w] = 1;
        return;
    }
    const fl_dump *pd = &x->dumps[g->dump[peer]];
    uint64_t called = p2p_called(pd, g->comm[peer], is_send ? -1 : me, is_send ? me : -1);
    if (called == 0 && pd->recorded > pd->nentries) {
        fprintf(x->f, "  %s: unknown: its ring no longer holds its %ss to this rank\n", rn, is_send ? "recv" : "send");
    } else if (called >= n) {
        fprintf(x->f, "  %s called the matching %s (#%" PRIu64 ")\n", rn, is_send ? "recv" : "send", n);
    } else {
        fprintf(x->f, "  %s NEVER CALLED the matching %s #%" PRIu64 " (it called %" PRIu64 ")\n", rn,
                is_send ? "recv" : "send", n, called);
        doing(x, w, "    and ");
        x->blamed[w] = 1;
    }
}

static void check_p2p(ctx *x) {
    for (int i = 0; i < x->n; i++) {
        const fl_dump *d = &x->dumps[i];
        for (size_t k = 0; k < d->nentries; k++) {
            const fl_entry *e = &d->entries[k];
            if (e->seq || e->state == TITAN_FLIGHT_DONE || !strcmp(e->op, "split")) continue;
            x->res->stuck++;
            char what[256], rn[320];
            describe_op(d, e, what, sizeof what);
            rank_name(x, d->rank, rn, sizeof rn);
            fprintf(x->f, "\n%s: %s, step %" PRId64 ", %s for %.1f s before its dump\n", rn, what, e->step,
                    e->state == TITAN_FLIGHT_FAILED ? "failed" : "waiting", since(d, e));
            if (e->peer >= 0) check_p2p_side(x, i, e, 1);
            if (e->peer2 >= 0) check_p2p_side(x, i, e, 0);
        }
    }
}

titan_status titan_hang_report(const fl_dump *dumps, int n, FILE *f, titan_hang_result *res) {
    memset(res, 0, sizeof *res);
    ctx x = {.dumps = dumps, .n = n, .world = n ? dumps[0].world_size : 0, .f = f, .res = res};
    titan_status st = TITAN_OK;
    x.dump_of = malloc((size_t)(x.world + 1) * sizeof(int));
    x.blamed = calloc((size_t)x.world + 1, 1);
    if (!x.dump_of || !x.blamed || !build_groups(&x)) {
        st = titan_error(TITAN_ERR_NOMEM, "hang: out of memory for the tables of %d ranks", x.world);
        goto out;
    }
    for (int w = 0; w < x.world; w++) x.dump_of[w] = -1;
    for (int i = 0; i < n; i++) x.dump_of[dumps[i].rank] = i;

    double t0 = 0, t1 = 0;
    for (int i = 0; i < n; i++) {
        if (!i || dumps[i].time < t0) t0 = dumps[i].time;
        if (!i || dumps[i].time > t1) t1 = dumps[i].time;
    }
    fprintf(f, "%d dump%s of %d ranks, written within %.1f s of each other", n, n == 1 ? "" : "s", x.world, t1 - t0);
    int missing = 0;
    for (int w = 0; w < x.world; w++)
        if (x.dump_of[w] < 0) fprintf(f, "%s%d", missing++ ? ", " : "; none from rank ", w);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        const fl_dump *d = &dumps[i];
        fprintf(f, "  rank %d: step %" PRId64 ", %s", d->rank, d->step, d->reason && d->reason[0] ? d->reason : "(no reason)");
        if (titan_flight_earlier_failure(d)) fprintf(f, ", after it failed: %s", titan_flight_earlier_failure(d));
        if (d->recorded > d->nentries)
            fprintf(f, " [last %zu of %" PRIu64 " operations]", d->nentries, d->recorded);
        fprintf(f, "\n");
    }

    for (int j = 0; j < x.ngroups; j++) check_group(&x, &x.groups[j]);
    check_p2p(&x);

    if (!res->stuck) {
        fprintf(f, "\nno operation is waiting: every recorded collective and send/receive finished\n");
        goto out;
    }
    /* The likely cause: ranks others wait for that wait for nothing themselves. */
    fprintf(f, "\n");
    for (int w = 0; w < x.world; w++) {
        if (!x.blamed[w]) continue;
        int i = x.dump_of[w];
        if (i >= 0 && waiting_in(&dumps[i])) continue;
        char rn[320];
        rank_name(&x, w, rn, sizeof rn);
        fprintf(f, "likely cause: %s: others wait for it, and it %s\n", rn,
                i < 0 ? "left no dump" : "waits in no communication");
        res->culprits++;
    }
    if (res->mismatch)
        fprintf(f, "likely cause: ranks called different collectives under one number (see MISMATCH above)\n");
    if (!res->culprits && !res->mismatch)
        fprintf(f, "no rank stands out: every rank waits in communication (a cycle, or the transport itself: "
                   "NCCL_DEBUG=WARN)\n");
out:
    for (int j = 0; j < x.ngroups; j++) {
        free(x.groups[j].dump);
        free(x.groups[j].comm);
    }
    free(x.groups);
    free(x.dump_of);
    free(x.blamed);
    return st;
}
