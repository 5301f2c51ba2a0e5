/* hang.h - what a hung job waits for, from every rank's flight recorder
 * dump (flight_read.h).
 *
 * Communicators are matched across dumps by name and members (their world
 * ranks). In each, the lowest-numbered collective some member has not
 * finished is the one the group is stuck in; its members are sorted into
 * those waiting in it, those past it, and those that never called it (or
 * called another operation under its number: a mismatch). A send or
 * receive that has not finished is checked against its peer's dump: did
 * the peer post the matching receive or send? A rank others wait for that
 * waits for nothing itself (or left no dump) is named as the likely cause.
 * A rank whose ring has dropped every operation of the communicator (or
 * peer) in question is reported as unknown, never blamed. */
#ifndef TITAN_TRACE_HANG_H
#define TITAN_TRACE_HANG_H

#include <stdio.h>

#include "trace/flight_read.h"

typedef struct {
    int stuck;     /* operations found waiting */
    int mismatch;  /* collectives called differently by the ranks */
    int culprits;  /* ranks named as the likely cause */
} titan_hang_result;

/* Writes the report for n dumps (sorted by rank, of one job) to f;
 * TITAN_ERR_NOMEM (nothing written) when its tables do not fit. */
titan_status titan_hang_report(const fl_dump *dumps, int n, FILE *f, titan_hang_result *res);

#endif
