/* pipeline_schedule.h - the order of a pipeline rank's forwards and
 * backwards: torch.distributed.pipelining's schedules, by their names,
 * as lists of actions (pipeline.c runs them).
 *
 * With pp ranks and v stages a rank, the model is cut into pp x v stages
 * and rank r holds stages r, r + pp, r + 2 pp, ... (local stages 0, 1, ...;
 * torch's looped placement). M micro-batches a step.
 *   1F1B            (v = 1) min(pp - r - 1, M) forwards, then one forward
 *                   and one backward in turn, then the backwards left
 *                   (torch's Schedule1F1B).
 *   GPipe           (v = 1) every forward, then every backward.
 *   Interleaved1F1B (v >= 2) torch's ScheduleInterleaved1F1B (Narayanan et
 *                   al. 2021, "depth first"): rounds = max(1, M / pp) of
 *                   M / rounds micro-batches (M a multiple of rounds);
 *                   warm-up min((v - 1) x M/rounds + 2 (pp - 1 - r), v M)
 *                   forwards, then a forward and a backward in turn, then
 *                   the backwards; forward op i runs local stage (i /
 *                   (M/rounds)) mod v, backward op j local stage v - 1 -
 *                   (j / (M/rounds)) mod v, each stage's micro-batches in
 *                   order (torch's _get_1f1b_rank_ops without its idle
 *                   steps).
 *   LoopedBFS       (v >= 2) torch's ScheduleLoopedBFS (Lamy-Poirier 2022,
 *                   "breadth first"): every micro-batch's forward on local
 *                   stage 0, then on stage 1, ...; then the backwards from
 *                   the last local stage down, each over micro-batches
 *                   M - 1 down to 0 (torch's order: the gradients add in
 *                   reverse micro-batch order, which changes their last
 *                   bits against one process's, not their value).
 *   InterleavedZeroBubble (v >= 2) torch's ScheduleInterleavedZeroBubble,
 *                   the ZB1P schedule of Qi et al. 2023 ("Zero Bubble
 *                   Pipeline Parallelism", arXiv 2401.10241): the
 *                   backward split into I (input gradients, on the critical
 *                   path) and W (weight gradients, deferred); Interleaved1F1B's
 *                   order with warm-up min((v - 1) x M/rounds + pp - 1 - r,
 *                   v M) forwards, each backward an I, and from the
 *                   (r + 1)-th I of the steady state on, one W after each I
 *                   (the oldest I's), the W left at the end (torch's
 *                   _get_1f1b_rank_ops with enable_zero_bubble; its
 *                   _add_bubbles_to_actions only aligns a timeline).
 *   ZBVZeroBubble   (v = 2, V placement: rank r holds stages r and 2 pp -
 *                   1 - r, so stage pp - 1 hands its output to stage pp on
 *                   the same rank and rank 0 holds the loss) the ZB-V
 *                   schedule of Qi et al. section 6: torch's
 *                   ScheduleZBVZeroBubble (zbv() in the .c spells out its
 *                   phases); every W right after its I but in the
 *                   cool-down.
 *   DualPipeV       (v = 2, V placement, M >= 2 pp) DeepSeek-V3's DualPipe
 *                   (arXiv 2412.19437) folded into a V, torch's
 *                   ScheduleDualPipeV: its overlapped forward-backward
 *                   pairs run one after the other (as torch's runtime
 *                   runs them); full backwards (B) in the middle, the last
 *                   ones split into I and a W from a queue of pending Ws.
 * Matched against torch/distributed/pipelining/schedules.py (PyTorch 2.11:
 * ScheduleZBVZeroBubble._calculate_single_rank_operations,
 * ScheduleDualPipeV._calculate_single_rank_operations,
 * ScheduleInterleaved1F1B._calculate_single_rank_operations,
 * _get_warmup_ops, _get_1f1b_rank_ops, ScheduleLoopedBFS,
 * ScheduleInterleavedZeroBubble._calculate_single_rank_operations). */
#ifndef TITAN_PARALLEL_PIPELINE_SCHEDULE_H
#define TITAN_PARALLEL_PIPELINE_SCHEDULE_H

#include "core/error.h"

typedef enum {
    TITAN_PP_1F1B = 0,
    TITAN_PP_GPIPE = 1,
    TITAN_PP_INTERLEAVED_1F1B = 2,
    TITAN_PP_LOOPED_BFS = 3,
    TITAN_PP_INTERLEAVED_ZB = 4,
    TITAN_PP_CSV = 5, /* the process's custom schedule (titan_pp_schedule_set_custom) */
    TITAN_PP_ZBV = 6,
    TITAN_PP_DUALPIPEV = 7,
} titan_pp_schedule;

/* What an action runs (torch's _ComputationType): F forward, B the whole
 * backward, I its input-gradient part, W its weight-gradient part. */
typedef enum { TITAN_PP_F = 0, TITAN_PP_B = 1, TITAN_PP_I = 2, TITAN_PP_W = 3 } titan_pp_op;

/* One step of a rank's schedule: micro-batch mb's op on local stage
 * `stage`. */
typedef struct {
    int stage, mb, op;
} titan_pp_action;

/* A schedule read from a file (pipeline_csv.h): rank r's n[r] actions
 * acts[r], each from column col[r][i] of the file's row r; split: some
 * rank runs I and W. */
typedef struct {
    int pp, v, micro, split;
    titan_pp_action **acts;
    int *n, **col;
} titan_pp_custom;
/* The lists TITAN_PP_CSV stands for in this process (one pipeline a
 * process; c must outlive its use); NULL drops them. */
void titan_pp_schedule_set_custom(const titan_pp_custom *c);

/* torch's name of s ("1F1B", "GPipe", "Interleaved1F1B", "LoopedBFS"). */
const char *titan_pp_schedule_name(titan_pp_schedule s);
/* Whether s runs several stages a rank (torch's PipelineScheduleMulti). */
int titan_pp_schedule_multi(titan_pp_schedule s);
/* Whether s places its two stages a rank in a V (ZBVZeroBubble,
 * DualPipeV: tensor/layout.h's pp_vshape) rather than looped. */
int titan_pp_schedule_vshape(titan_pp_schedule s);
/* The global stage of rank r's local stage k (of pp ranks) in the looped
 * placement (vshape 0: r + k pp) or the V (r, then 2 pp - 1 - r); and the
 * rank of global stage g. */
int titan_pp_global_stage(int vshape, int pp, int r, int k);
int titan_pp_stage_rank(int vshape, int pp, int g);
/* Whether s splits backwards into I and W (the model needs split_backward). */
int titan_pp_schedule_split(titan_pp_schedule s);
/* The actions of a rank's list: 2 v M, or 3 v M for a split schedule (at
 * most: DualPipeV's whole backwards count one). */
int titan_pp_schedule_count(titan_pp_schedule s, int v, int micro);
/* TITAN_ERR_USAGE, naming the keys, when s cannot run v stages a rank over
 * pp ranks with M micro-batches. */
titan_status titan_pp_schedule_check(titan_pp_schedule s, int pp, int v, int micro);
/* Rank r's actions in order into out (which holds
 * titan_pp_schedule_count of them); returns their number. */
int titan_pp_schedule_actions(titan_pp_schedule s, int pp, int r, int v, int micro, titan_pp_action *out);
/* Micro-batch slots local stage k of rank r needs (its most micro-batches
 * between forward and backward, B or W) such that micro-batch mb can take slot mb
 * mod slots; slots_total: the sum over the rank's v stages. */
int titan_pp_schedule_slots(titan_pp_schedule s, int pp, int r, int v, int micro, int k);
int titan_pp_schedule_slots_total(titan_pp_schedule s, int pp, int r, int v, int micro);

/* Checks every rank's list (acts[r], n[r] actions: local stage k of rank
 * r is titan_pp_global_stage(vshape, pp, r, k)) before a step runs: each (stage,
 * micro-batch) has one F and either one B or one I then one W, after its
 * F; and the lists run to the end when sends are queued and receives
 * block (a forward waits for the previous stage's forward of its
 * micro-batch, a B or I for the next stage's B or I), simulated step by
 * step. TITAN_ERR_USAGE names the rank, the action (0-based index into
 * its list) and the cause: a micro-batch's op missing or twice, out of
 * order, or every rank waiting (deadlock: each waiting rank's action).
 * col: NULL, or a CSV's column of each action (messages then name "row R
 * (rank R-1), column C" as a spreadsheet numbers them). */
titan_status titan_pp_schedule_verify(int pp, int v, int vshape, int micro, titan_pp_action *const *acts,
                                      const int *n, const int *const *col);

/* Every rank's list (passing titan_pp_schedule_verify) on a logical
 * clock: an action starts when its rank is free and its input is there
 * (F: the previous stage's F of its micro-batch ended; B and I: the next
 * stage's B or I; W: its rank runs it after its I) and lasts cost[r][i]
 * (cost NULL: F 1, I 1, W 1, B 2, the Zero Bubble paper's unit times).
 * busy[r] gets the sum of rank r's times; returns the makespan, so rank
 * r's bubble is 1 - busy[r] / makespan. Transfers take no time. */
double titan_pp_schedule_replay(int pp, int v, int vshape, int micro, titan_pp_action *const *acts, const int *n,
                                const double *const *cost, double *busy);
/* The bubble of s for rank r with the unit times above (pp x v stages, M
 * micro-batches; built-in schedules and TITAN_PP_CSV). */
double titan_pp_schedule_bubble(titan_pp_schedule s, int pp, int r, int v, int micro);
#endif
