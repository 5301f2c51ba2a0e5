/* flight_read.h - reading the flight recorder's dumps (comm/flight.h) back:
 * one rank's file, or a directory of them (RUN/comm_traces). */
#ifndef TITAN_TRACE_FLIGHT_READ_H
#define TITAN_TRACE_FLIGHT_READ_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "comm/flight.h"

#define TITAN_FLIGHT_MAX_WORLD (1 << 20) /* ranks a dump may claim */

typedef struct {
    int id;
    char name[64];
    int rank, size;
    int *world_ranks; /* [size], NULL when the dump does not say */
} fl_comm;

typedef struct {
    uint64_t id;
    int comm;          /* index into the dump's comms */
    char op[24], dtype[8], redop[8];
    uint64_t seq;      /* collectives; 0 for splits and point to point */
    uint64_t count, count2;
    int peer, peer2;   /* -1: none */
    uint64_t n, n2;
    int64_t step;
    char phase[24];    /* the part of the step, "" when not said */
    int state;         /* TITAN_FLIGHT_* (comm/flight.h) */
    double t_queued, t_started, t_ended; /* wall clock; 0 = not yet */
    char *error;       /* NULL when none */
} fl_entry;

typedef struct {
    char path[4096];
    int rank, world_size;
    char host[256];
    long pid;
    double time;       /* when it was written */
    int64_t step;
    char phase[24];    /* where in the step the rank was when it dumped */
    char *reason;
    char *failure;     /* the error the rank failed with, when a later dump (a SIGTERM) replaced that one's */
    uint64_t capacity, recorded;
    fl_comm *comms;
    int ncomms;
    fl_entry *entries; /* oldest first */
    size_t nentries;
    char (*hosts)[64]; /* every world rank's hostname ("hosts"), or NULL */
    int nhosts;
} fl_dump;

/* Reads one dump; a file that is not one is TITAN_ERR_FORMAT naming it and
 * the field. */
titan_status titan_flight_load(const char *path, fl_dump *d);
/* The same from text in memory; path names it in messages. */
titan_status titan_flight_parse(const char *text, size_t len, const char *path, fl_dump *d);
/* The same from a parsed JSON document (jansson's; root stays the caller's). */
struct json_t;
titan_status titan_flight_from_json(struct json_t *root, const char *path, fl_dump *d);
void titan_flight_dump_free(fl_dump *d);
/* The error of a failure before this dump (kept by a later dump, written on
 * the launcher's SIGTERM say), or NULL when there was none or it is the reason. */
const char *titan_flight_earlier_failure(const fl_dump *d);

/* Every rank-R.json under dir, sorted by rank (*dumps: n of them, free with
 * titan_flight_dumps_free). A directory without any is TITAN_ERR_IO;
 * two files of one rank, or ranks of different world sizes, TITAN_ERR_FORMAT. */
titan_status titan_flight_load_dir(const char *dir, fl_dump **dumps, int *n);
void titan_flight_dumps_free(fl_dump *dumps, int n);

#endif
