/* clock.h - one monotonic clock for timings and deadlines. */
#ifndef TITAN_CORE_CLOCK_H
#define TITAN_CORE_CLOCK_H

/* Seconds on CLOCK_MONOTONIC: only differences mean anything (never wall time). */
double titan_now_s(void);

#endif
