/* clock.h - one monotonic clock for timings and deadlines, and the wall
 * clock for stamps that line up across processes and hosts (traces). */
#ifndef TITAN_CORE_CLOCK_H
#define TITAN_CORE_CLOCK_H

/* Seconds on CLOCK_MONOTONIC: only differences mean anything (never wall time). */
double titan_now_s(void);
/* Seconds since the Unix epoch on CLOCK_REALTIME (may jump: stamps, not durations). */
double titan_wall_s(void);
/* CPU seconds the process has run, all its threads (CLOCK_PROCESS_CPUTIME_ID):
 * what a span cost in compute, whatever the time other processes held the
 * cores meanwhile. */
double titan_cpu_s(void);

#endif
