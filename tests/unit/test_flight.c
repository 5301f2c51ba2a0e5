/* test_flight.c - the flight recorder (comm/flight.h) and what titan-trace
 * reads from it (trace/flight_read.h, trace/hang.h).
 *
 * Recording: two ranks (the local launcher) run collectives, a split,
 * sends and receives, queued and blocking, and dump; the parent reads the
 * dumps back: every operation is there with its state, collectives carry
 * the numbers the backend counts (the same on both ranks, splits and the
 * split's own gathers included), sends and receives their per-peer number,
 * the split communicator its members' world ranks; a small ring keeps the
 * last entries and counts the rest; nothing waits, says the analysis.
 *
 * Analysis: hand-written dumps of hung jobs (a rank that never called the
 * collective, two ranks that called different ones under one number, a
 * receive whose send never came, a rank without a dump) get the report
 * that names the operation and the likely cause; bad dumps are refused
 * with the file named. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/spawn.h"
#include "trace/flight_read.h"
#include "trace/hang.h"

#include "check.h"
#include "shm_probe.h"

static char dir[256];

/* ---- one rank of the recording test ---------------------------------------------------- */

static int run_rank(void) {
    titan_dist *d;
    if (titan_dist_init(&d) != TITAN_OK) return 1;
    int me = titan_dist_rank(d), n = titan_dist_world_size(d);
    titan_status st = titan_flight_enable(dir, me, n, 64);
    titan_comm *w = NULL, *sub = NULL;
    if (st == TITAN_OK) st = titan_comm_init(d, NULL, &w);
    float x[8] = {(float)me}, y[8];
    if (st == TITAN_OK) titan_flight_set_step(1);
    titan_flight_phase("forward");
    if (st == TITAN_OK) st = titan_comm_all_reduce(w, x, y, 8, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
    if (st == TITAN_OK) st = titan_comm_split(w, 0, n - me, "rev", &sub); /* ranks reversed */
    titan_comm_req *q = NULL;
    if (st == TITAN_OK) st = titan_comm_all_gather(w, x, y, 1, TITAN_DTYPE_F32, &q);
    if (st == TITAN_OK) st = titan_comm_wait(q);
    if (st == TITAN_OK) titan_flight_set_step(2);
    titan_flight_phase("pipeline");
    for (int i = 0; i < 2 && st == TITAN_OK; i++)
        st = me == 0 ? titan_comm_send(sub, x, 4, TITAN_DTYPE_F32, 0, NULL) /* world rank 1 is rev's 0 */
                     : titan_comm_recv(sub, y, 4, TITAN_DTYPE_F32, 1, NULL);
    if (st == TITAN_OK) st = titan_comm_broadcast(sub, x, 2, TITAN_DTYPE_F32, 1, NULL);
    if (st == TITAN_OK) st = titan_flight_dump("test");
    if (st != TITAN_OK) fprintf(stderr, "rank %d: %s\n", me, titan_error_message());
    titan_comm_free(sub);
    titan_comm_free(w);
    titan_flight_disable();
    titan_dist_free(d);
    return st != TITAN_OK;
}

static const fl_entry *nth(const fl_dump *d, const char *op, int k) {
    for (size_t i = 0; i < d->nentries; i++)
        if (!strcmp(d->entries[i].op, op) && k-- == 0) return &d->entries[i];
    return NULL;
}

static void test_recording(void) {
    char *argv[] = {"/proc/self/exe", NULL};
    titan_dist_spawn_options o = {.nproc = 2};
    setenv("FLIGHT_TEST_DIR", dir, 1);
    CHECK(titan_dist_spawn_local(argv, &o, NULL) == TITAN_OK, "two recording ranks");
    fl_dump *dumps = NULL;
    int n = 0;
    CHECK(titan_flight_load_dir(dir, &dumps, &n) == TITAN_OK && n == 2, "both dumps read back (%d)", n);
    if (n != 2) return;
    for (int r = 0; r < 2; r++) {
        const fl_dump *d = &dumps[r];
        CHECK(d->rank == r && d->world_size == 2 && d->reason && !strcmp(d->reason, "test") && d->step == 2 &&
                  !strcmp(d->phase, "pipeline"),
              "rank %d: header", r);
        CHECK(d->ncomms == 2 && !strcmp(d->comms[0].name, "world") && !strcmp(d->comms[1].name, "rev"),
              "rank %d: world and the split communicator", r);
        /* "rev" ordered its members by key n - me: world rank 1 first */
        CHECK(d->comms[1].world_ranks && d->comms[1].world_ranks[0] == 1 && d->comms[1].world_ranks[1] == 0 &&
                  d->comms[1].rank == 1 - r,
              "rank %d: the split's members by world rank", r);
        const fl_entry *ar = nth(d, "all_reduce", 0), *sp = nth(d, "split", 0), *ag = nth(d, "all_gather", 0);
        /* world: #1 the recorder's own gather of world ranks, #2 the all_reduce,
         * then the split's three protocol gathers, so the queued all_gather is #6 */
        CHECK(ar && ar->seq == 2 && ar->state == TITAN_FLIGHT_DONE && ar->count == 8 && !strcmp(ar->redop, "sum") &&
                  ar->step == 1 && !strcmp(ar->phase, "forward") && ar->t_ended >= ar->t_started && ar->t_started >= ar->t_queued,
              "rank %d: all_reduce #2, done, timed", r);
        CHECK(sp && sp->seq == 0 && sp->state == TITAN_FLIGHT_DONE, "rank %d: the split, unnumbered", r);
        CHECK(ag && ag->seq == 6 && ag->comm == 0 && ag->state == TITAN_FLIGHT_DONE, "rank %d: the queued all_gather is #%llu",
              r, ag ? (unsigned long long)ag->seq : 0ull);
        const char *p2p = r == 0 ? "send" : "recv";
        const fl_entry *p0 = nth(d, p2p, 0), *p1 = nth(d, p2p, 1);
        CHECK(p0 && p1 && p0->comm == 1 && p1->step == 2 && !strcmp(p1->phase, "pipeline") &&
                  (r == 0 ? p0->peer == 0 && p0->n == 1 && p1->n == 2 : p0->peer2 == 1 && p0->n2 == 1 && p1->n2 == 2),
              "rank %d: %s #1 and #2 to/from the other's rank in rev", r, p2p);
        const fl_entry *bc = nth(d, "broadcast", 0);
        /* rev: the recorder's gather is #1; sends and receives take no number */
        CHECK(bc && bc->seq == 2 && bc->peer == 1, "rank %d: broadcast #2 on rev, root 1", r);
    }
    FILE *f = tmpfile();
    titan_hang_result res;
    titan_hang_report(dumps, n, f, &res);
    CHECK(res.stuck == 0 && res.culprits == 0, "a finished job: nothing waits");
    fclose(f);
    titan_flight_dumps_free(dumps, n);
}

static void test_ring(void) {
    char path[300], old[400];
    snprintf(path, sizeof path, "%s/ring", dir);
    /* an earlier job's dumps: this rank's, and one of a rank this job lacks */
    titan_fs_mkdir_p(path);
    snprintf(old, sizeof old, "%s/rank-0.json", path);
    titan_fs_write_file(old, "{}", 2);
    snprintf(old, sizeof old, "%s/rank-5.json", path); /* this job: ranks 0 and 1 */
    titan_fs_write_file(old, "{}", 2);
    signal(SIGUSR1, SIG_IGN); /* as titan-train starts */
    CHECK(titan_flight_enable(path, 0, 2, 4) == TITAN_OK);
    CHECK(!titan_fs_exists(old), "an earlier job's dump of a rank this job lacks is removed");
    CHECK(titan_flight_watch_signals() == TITAN_OK);
    int c = titan_flight_comm("solo", 0, 2, (const int[]){0, 1});
    for (int i = 1; i <= 10; i++) {
        titan_flight_op op = {.id = c, .op = "all_reduce", .dtype = "f32", .seq = (uint64_t)i, .peer = -1, .peer2 = -1};
        uint64_t e = titan_flight_queued(&op);
        titan_flight_started(e);
        if (i < 10) titan_flight_ended(e, TITAN_OK, NULL);
    }
    CHECK(titan_flight_dump_failure("all_reduce #10 … timed out") == TITAN_OK); /* a UTF-8 character in it */
    CHECK(titan_flight_dump("ring") == TITAN_OK);
    titan_flight_disable();
    raise(SIGUSR1); /* ignored again, as before the recorder: the test goes on */
    fl_dump d;
    snprintf(path, sizeof path, "%s/ring/rank-0.json", dir);
    CHECK(titan_flight_load(path, &d) == TITAN_OK);
    CHECK(d.reason && !strcmp(d.reason, "ring") && d.failure && !strcmp(d.failure, "all_reduce #10 … timed out"),
          "a later dump keeps the failure");
    CHECK(titan_flight_earlier_failure(&d) == d.failure, "a failure other than the reason is an earlier one");
    free(d.reason);
    d.reason = strdup(d.failure);
    CHECK(titan_flight_earlier_failure(&d) == NULL, "the failure's own dump has no earlier failure");
    CHECK(d.nentries == 4 && d.recorded == 10 && d.capacity == 4 && d.entries[0].seq == 7 &&
              d.entries[3].seq == 10 && d.entries[3].state == TITAN_FLIGHT_RUNNING && d.entries[2].state == TITAN_FLIGHT_DONE,
          "the last 4 of 10, oldest first, the last still running");
    titan_flight_dump_free(&d);
}

/* ---- hand-written dumps of hung jobs ------------------------------------------------------ */

/* A dump: rank r of world, one communicator "world" of `size` ranks, entries as given. */
static void write_dump(const char *sub, int r, int world, const char *comms, const char *entries) {
    char path[400], text[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    titan_fs_mkdir_p(path);
    snprintf(path, sizeof path, "%s/%s/rank-%d.json", dir, sub, r);
    snprintf(text, sizeof text,
             "{\"format\":\"titan-flight-1\",\"rank\":%d,\"world_size\":%d,\"host\":\"h%d\",\"pid\":%d,"
             "\"time\":1000.0,\"step\":7,\"reason\":\"SIGUSR1\",\"capacity\":100,\"recorded\":3,"
             "\"comms\":[%s],\"entries\":[%s]}\n",
             r, world, r, 100 + r, comms, entries);
    titan_fs_write_file(path, text, strlen(text));
}

#define WORLD2 "{\"id\":0,\"name\":\"world\",\"rank\":%d,\"size\":2,\"world_ranks\":[0,1]}"
#define DONE(seq, op) \
    "{\"id\":" #seq ",\"comm\":0,\"op\":\"" op "\",\"seq\":" #seq ",\"dtype\":\"f32\",\"count\":8,\"step\":7," \
    "\"state\":\"done\",\"t_queued\":990,\"t_started\":990,\"t_ended\":991}"
#define WAIT(seq, op) \
    "{\"id\":" #seq ",\"comm\":0,\"op\":\"" op "\",\"seq\":" #seq ",\"dtype\":\"f32\",\"count\":8,\"step\":7," \
    "\"state\":\"running\",\"t_queued\":995,\"t_started\":995}"

/* The report on the dumps under dir/sub. */
static char *report(const char *sub, titan_hang_result *res) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    fl_dump *dumps;
    int n;
    memset(res, 0, sizeof *res);
    if (titan_flight_load_dir(path, &dumps, &n) != TITAN_OK) return strdup(titan_error_message());
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    titan_hang_report(dumps, n, f, res);
    fclose(f);
    titan_flight_dumps_free(dumps, n);
    return buf;
}

static void comm_json(char *out, size_t cap, int r) { snprintf(out, cap, WORLD2, r); }

static void test_hangs(void) {
    char c0[200], c1[200];
    comm_json(c0, sizeof c0, 0);
    comm_json(c1, sizeof c1, 1);
    titan_hang_result res;

    /* rank 1 never called all_reduce #3: it is busy elsewhere */
    write_dump("never", 0, 2, c0, DONE(2, "all_gather") "," WAIT(3, "all_reduce"));
    write_dump("never", 1, 2, c1, DONE(2, "all_gather"));
    char *r = report("never", &res);
    CHECK(res.stuck == 1 && res.culprits == 1 && strstr(r, "stuck: all_reduce #3 on comm world") &&
              strstr(r, "rank 0 (h0, pid 100): waiting in it, 5.0 s before its dump") &&
              strstr(r, "rank 1 (h1, pid 101): NEVER CALLED IT (its last on comm world: #2)") &&
              strstr(r, "is in no communication") && strstr(r, "likely cause: rank 1 (h1, pid 101)"),
          "never called:\n%s", r);
    free(r);

    /* different collectives under one number */
    write_dump("mismatch", 0, 2, c0, WAIT(3, "all_reduce"));
    write_dump("mismatch", 1, 2, c1, WAIT(3, "all_gather"));
    r = report("mismatch", &res);
    CHECK(res.mismatch == 1 && strstr(r, "MISMATCH: called all_gather #3") && strstr(r, "called different collectives"),
          "mismatch:\n%s", r);
    free(r);

    /* rank 0 waits for receive #3 from rank 1, which sent two */
    const char *send =
        "{\"id\":%d,\"comm\":0,\"op\":\"send\",\"dtype\":\"f32\",\"count\":4,\"peer\":0,\"n\":%d,\"step\":7,"
        "\"state\":\"done\",\"t_queued\":990,\"t_started\":990,\"t_ended\":990.5}";
    char e1[1024], a[400], b[400];
    snprintf(a, sizeof a, send, 1, 1);
    snprintf(b, sizeof b, send, 2, 2);
    snprintf(e1, sizeof e1, "%s,%s", a, b);
    write_dump("p2p", 0, 2, c0,
               "{\"id\":9,\"comm\":0,\"op\":\"recv\",\"dtype\":\"f32\",\"count\":0,\"peer2\":1,\"n2\":3,\"count2\":4,"
               "\"step\":7,\"state\":\"running\",\"t_queued\":996,\"t_started\":996}");
    write_dump("p2p", 1, 2, c1, e1);
    r = report("p2p", &res);
    CHECK(res.stuck == 1 && res.culprits == 1 && strstr(r, "recv #3 from rank 1 of comm world") &&
              strstr(r, "NEVER CALLED the matching send #3 (it called 2)") && strstr(r, "likely cause: rank 1"),
          "p2p:\n%s", r);
    free(r);

    /* three ranks, rank 2 left no dump; 0 and 1 wait in #4 */
    const char *w3 = "{\"id\":0,\"name\":\"world\",\"rank\":%d,\"size\":3,\"world_ranks\":[0,1,2]}";
    char d0[200], d1[200];
    snprintf(d0, sizeof d0, w3, 0);
    snprintf(d1, sizeof d1, w3, 1);
    write_dump("nodump", 0, 3, d0, WAIT(4, "barrier"));
    write_dump("nodump", 1, 3, d1, WAIT(4, "barrier"));
    r = report("nodump", &res);
    CHECK(res.stuck == 1 && res.culprits == 1 && strstr(r, "none from rank 2") && strstr(r, "rank 2: no dump") &&
              strstr(r, "likely cause: rank 2: others wait for it, and it left no dump"),
          "no dump:\n%s", r);
    free(r);

    /* rank 1's ring wrapped past every operation of world: unknown, not blamed */
    char c1w[300];
    snprintf(c1w, sizeof c1w, "%s,{\"id\":1,\"name\":\"tp\",\"rank\":0,\"size\":1,\"world_ranks\":[1]}", c1);
    write_dump("wrapped", 0, 2, c0, WAIT(3, "all_reduce"));
    write_dump("wrapped", 1, 2, c1w,
               "{\"id\":50,\"comm\":1,\"op\":\"barrier\",\"seq\":9,\"dtype\":\"f32\",\"count\":0,\"step\":7,"
               "\"state\":\"done\",\"t_queued\":999,\"t_started\":999,\"t_ended\":999}");
    r = report("wrapped", &res);
    CHECK(res.stuck == 1 && res.culprits == 0 && strstr(r, "unknown: its ring no longer holds any operation of comm world"),
          "wrapped ring:\n%s", r);
    free(r);

    /* all done */
    write_dump("fine", 0, 2, c0, DONE(2, "all_gather"));
    write_dump("fine", 1, 2, c1, DONE(2, "all_gather"));
    r = report("fine", &res);
    CHECK(res.stuck == 0 && strstr(r, "no operation is waiting"), "finished:\n%s", r);
    free(r);
}

static void test_bad_dumps(void) {
    char path[400];
    fl_dump d;
    snprintf(path, sizeof path, "%s/bad.json", dir);
    titan_fs_write_file(path, "{\"format\":\"other\"}\n", 19);
    CHECK(titan_flight_load(path, &d) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "bad.json") &&
              strstr(titan_error_message(), "not a flight recorder dump"),
          "a foreign file is refused, named");
    titan_fs_write_file(path, "{\"format\":", 10);
    CHECK(titan_flight_load(path, &d) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "not JSON"), "cut short");
    snprintf(path, sizeof path, "%s/none.json", dir);
    CHECK(titan_flight_load(path, &d) == TITAN_ERR_IO, "missing file");
    snprintf(path, sizeof path, "%s/empty", dir);
    titan_fs_mkdir_p(path);
    fl_dump *dumps;
    int n;
    CHECK(titan_flight_load_dir(path, &dumps, &n) == TITAN_ERR_IO && strstr(titan_error_message(), "no flight recorder"),
          "a folder without dumps");
    char c0[200];
    comm_json(c0, sizeof c0, 0);
    write_dump("mixed", 0, 2, c0, DONE(2, "all_gather"));
    write_dump("mixed", 1, 3, c0, DONE(2, "all_gather")); /* world size 3, and rank 0's comm */
    snprintf(path, sizeof path, "%s/mixed", dir);
    CHECK(titan_flight_load_dir(path, &dumps, &n) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "different jobs"),
          "dumps of two jobs");
    write_dump("badentry", 0, 2, c0,
               "{\"id\":1,\"comm\":5,\"op\":\"barrier\",\"dtype\":\"f32\",\"state\":\"done\",\"t_queued\":1}");
    snprintf(path, sizeof path, "%s/badentry/rank-0.json", dir);
    CHECK(titan_flight_load(path, &d) == TITAN_ERR_FORMAT && strstr(titan_error_message(), "unknown communicator"),
          "an entry of a communicator the dump lacks");
}

int main(void) {
    setvbuf(stderr, NULL, _IOLBF, 0);
    const char *child = getenv("FLIGHT_TEST_DIR");
    if (child && getenv("TITAN_RANK")) {
        snprintf(dir, sizeof dir, "%s", child);
        return run_rank();
    }
    snprintf(dir, sizeof dir, "%s/titan-flight-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    if (shm_works())
        test_recording();
    else
        fprintf(stderr, "no shared memory: the recording test is left out\n");
    test_ring();
    test_hangs();
    test_bad_dumps();
    titan_fs_remove_tree(dir);
    if (!failures) printf("test_flight: ok\n");
    return failures != 0;
}
