/* test_dist.c - bootstrap, local launcher and shared-memory communicator.
 *
 *   test_dist                    run alone: the rank suite as a singleton, then
 *                                the same under the local launcher with 2, 3 and
 *                                4 ranks, a 2x2 mesh, the timeout (also across a
 *                                split), kill and launcher-failure cases
 *   mpirun -n N test_dist        the rank suite on N ranks bootstrapped by PMIx
 *                                (TITAN_COMM=mpi: over the mpi communicator)
 *   test_dist --suite NAME       one rank of a job (what the launcher starts)
 *   test_dist --bench [CHUNK]    all-reduce bus bandwidth, 2 and 4 ranks, 1..64 MB; latency
 *                                with and without the flight recorder
 *
 * Every collective is compared bit for bit with a serial reference that adds
 * the ranks' values in rank order (comm.h promises exactly that). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/spawn.h"
#include "tensor/dtype.h"

#include "check.h"
#include "model_test.h"
#include "shm_probe.h"

static int me, nr; /* rank, ranks */

/* Rank r's value i of test `seed`: mixed magnitudes, so the order of the
 * additions shows in the bits. */
static float val(int r, size_t i, unsigned seed) {
    uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull ^
                 (uint64_t)seed * 0x94d049bb133111ebull;
    h ^= h >> 31;
    h *= 0xd6e8feb86659fd39ull;
    h ^= h >> 29;
    float m = (float)(h & 0xffffff) / 16777216.0f - 0.5f;
    return m * (float)(1u << (h >> 40) % 12);
}

static void fill(void *buf, titan_dtype dt, int r, size_t off, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        float v = val(r, off + i, seed);
        if (dt == TITAN_DTYPE_F32) ((float *)buf)[i] = v;
        else ((uint16_t *)buf)[i] = titan_f32_to_bf16(v);
    }
}

static float as_f32(titan_dtype dt, int r, size_t i, unsigned seed) {
    float v = val(r, i, seed);
    return dt == TITAN_DTYPE_F32 ? v : titan_bf16_to_f32(titan_f32_to_bf16(v));
}

/* The serial reference: element i of the reduction over ranks 0..n-1 in order. */
static uint32_t ref_bits(titan_dtype dt, int n, size_t i, unsigned seed, titan_comm_redop op,
                         const int *ranks) {
    float acc = as_f32(dt, ranks ? ranks[0] : 0, i, seed);
    for (int r = 1; r < n; r++) acc += as_f32(dt, ranks ? ranks[r] : r, i, seed);
    if (op == TITAN_COMM_AVG) acc /= (float)n;
    if (dt == TITAN_DTYPE_BF16) return titan_f32_to_bf16(acc);
    uint32_t u;
    memcpy(&u, &acc, 4);
    return u;
}

static uint32_t bits_at(const void *buf, titan_dtype dt, size_t i) {
    if (dt == TITAN_DTYPE_BF16) return ((const uint16_t *)buf)[i];
    uint32_t u;
    memcpy(&u, (const float *)buf + i, 4);
    return u;
}

/* ---- collectives against the reference ------------------------------------------ */

static void test_all_reduce(titan_comm *c, const int *ranks, size_t max_count) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    int world_r = ranks ? ranks[r] : r;
    const size_t sizes[] = {0, 1, 7, 3 * 64 + 1, 20011, 300007};
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 2; o++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && sizes[k] <= max_count; k++) {
                titan_dtype dt = d ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
                titan_comm_redop op = o ? TITAN_COMM_AVG : TITAN_COMM_SUM;
                size_t cnt = sizes[k], es = titan_dtype_size(dt);
                unsigned seed = (unsigned)(k * 4 + d * 2 + o);
                unsigned char *send = xalloc(cnt * es), *recv = xalloc(cnt * es);
                fill(send, dt, world_r, 0, cnt, seed);
                int in_place = k % 2;
                titan_status st = titan_comm_all_reduce(c, send, in_place ? send : recv, cnt, dt, op, NULL);
                CHECK(st == TITAN_OK, "all_reduce %s %s x %zu", titan_dtype_name(dt),
                      titan_comm_redop_name(op), cnt);
                const unsigned char *out = in_place ? send : recv;
                size_t bad = 0;
                for (size_t i = 0; i < cnt; i++)
                    if (bits_at(out, dt, i) != ref_bits(dt, n, i, seed, op, ranks)) bad++;
                CHECK(bad == 0, "all_reduce %s %s x %zu on %s: %zu elements differ from the serial sum",
                      titan_dtype_name(dt), titan_comm_redop_name(op), cnt, titan_comm_name(c), bad);
                free(send);
                free(recv);
            }
}

static void test_reduce_scatter(titan_comm *c) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    size_t counts[64], off[65] = {0};
    for (int uneven = 0; uneven < 2; uneven++)
        for (int d = 0; d < 2; d++) {
            titan_dtype dt = d ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
            for (int q = 0; q < n; q++) {
                counts[q] = uneven ? (size_t)(q == 1 ? 0 : 5000 + 3 * q) : 4099;
                off[q + 1] = off[q] + counts[q];
            }
            size_t es = titan_dtype_size(dt);
            unsigned seed = 100u + (unsigned)(uneven * 2 + d);
            unsigned char *send = xalloc(off[n] * es), *recv = xalloc(counts[r] * es);
            fill(send, dt, r, 0, off[n], seed);
            titan_status st = uneven
                ? titan_comm_reduce_scatter_v(c, send, recv, counts, dt, TITAN_COMM_AVG, NULL)
                : titan_comm_reduce_scatter(c, send, recv, counts[0], dt, TITAN_COMM_AVG, NULL);
            CHECK(st == TITAN_OK, "reduce_scatter uneven=%d %s", uneven, titan_dtype_name(dt));
            size_t bad = 0;
            for (size_t i = 0; i < counts[r]; i++)
                if (bits_at(recv, dt, i) != ref_bits(dt, n, off[r] + i, seed, TITAN_COMM_AVG, NULL)) bad++;
            CHECK(bad == 0, "reduce_scatter uneven=%d %s: %zu elements differ", uneven,
                  titan_dtype_name(dt), bad);
            free(send);
            free(recv);
        }
    /* in place: recv is this rank's own part of send */
    unsigned char *buf = xalloc(off[n] * 2);
    fill(buf, TITAN_DTYPE_BF16, r, 0, off[n], 104);
    CHECK(titan_comm_reduce_scatter_v(c, buf, buf + off[r] * 2, counts, TITAN_DTYPE_BF16,
                                      TITAN_COMM_SUM, NULL) == TITAN_OK);
    size_t bad = 0;
    for (size_t i = 0; i < counts[r]; i++)
        bad += bits_at(buf + off[r] * 2, TITAN_DTYPE_BF16, i) !=
               ref_bits(TITAN_DTYPE_BF16, n, off[r] + i, 104, TITAN_COMM_SUM, NULL);
    CHECK(bad == 0, "reduce_scatter in place: %zu elements differ", bad);
    free(buf);
}

static void test_all_gather_and_all_to_all(titan_comm *c, size_t scale) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    size_t counts[64], off[65] = {0};
    for (int uneven = 0; uneven < 2; uneven++) {
        for (int q = 0; q < n; q++) {
            counts[q] = uneven ? (size_t)(q == 0 ? 0 : 70001 * q % 9973 + 60000 * scale * (q == n - 1)) : 1000;
            off[q + 1] = off[q] + counts[q];
        }
        float *send = xalloc(counts[r] * 4), *recv = xalloc(off[n] * 4);
        fill(send, TITAN_DTYPE_F32, r, off[r], counts[r], 7);
        titan_status st = uneven ? titan_comm_all_gather_v(c, send, recv, counts, TITAN_DTYPE_F32, NULL)
                                 : titan_comm_all_gather(c, send, recv, counts[0], TITAN_DTYPE_F32, NULL);
        CHECK(st == TITAN_OK, "all_gather uneven=%d", uneven);
        size_t bad = 0;
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < counts[q]; i++)
                if (recv[off[q] + i] != val(q, off[q] + i, 7)) bad++;
        CHECK(bad == 0, "all_gather uneven=%d: %zu elements differ", uneven, bad);
        /* in place: send is this rank's part of recv */
        memset(recv, 0, off[n] * 4);
        fill(recv + off[r], TITAN_DTYPE_F32, r, off[r], counts[r], 7);
        CHECK(titan_comm_all_gather_v(c, recv + off[r], recv, counts, TITAN_DTYPE_F32, NULL) == TITAN_OK);
        bad = 0;
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < counts[q]; i++)
                if (recv[off[q] + i] != val(q, off[q] + i, 7)) bad++;
        CHECK(bad == 0, "all_gather in place uneven=%d: %zu elements differ", uneven, bad);
        free(send);
        free(recv);
    }
    /* all_to_all: block q of rank r holds val(r, q*cnt + i); rank q receives it as block r */
    size_t cnt = 10003 * scale;
    uint16_t *s2 = xalloc(cnt * (size_t)n * 2), *r2 = xalloc(cnt * (size_t)n * 2);
    fill(s2, TITAN_DTYPE_BF16, r, 0, cnt * (size_t)n, 9);
    CHECK(titan_comm_all_to_all(c, s2, r2, cnt, TITAN_DTYPE_BF16, NULL) == TITAN_OK);
    size_t bad = 0;
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < cnt; i++)
            if (r2[(size_t)q * cnt + i] != titan_f32_to_bf16(val(q, (size_t)r * cnt + i, 9))) bad++;
    CHECK(bad == 0, "all_to_all: %zu elements differ", bad);
    free(s2);
    free(r2);
}

static void test_broadcast_barrier(titan_comm *c) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    size_t cnt = 300001;
    float *buf = xalloc(cnt * 4);
    for (int root = 0; root < n; root++) {
        fill(buf, TITAN_DTYPE_F32, r, 0, cnt, 11);
        CHECK(titan_comm_broadcast(c, buf, cnt, TITAN_DTYPE_F32, root, NULL) == TITAN_OK);
        size_t bad = 0;
        for (size_t i = 0; i < cnt; i++) bad += buf[i] != val(root, i, 11);
        CHECK(bad == 0, "broadcast from %d: %zu elements differ", root, bad);
    }
    free(buf);
    unsigned long long before = titan_comm_seq(c);
    CHECK(titan_comm_barrier(c, NULL) == TITAN_OK);
    CHECK(titan_comm_seq(c) == before + 1);
    /* usage errors leave the communicator usable */
    float x = 1;
    CHECK(titan_comm_broadcast(c, &x, 1, TITAN_DTYPE_F32, n, NULL) == TITAN_ERR_USAGE &&
          has("root"));
    CHECK(titan_comm_all_reduce(c, &x, &x, 1, TITAN_DTYPE_U32, TITAN_COMM_SUM, NULL) ==
          TITAN_ERR_USAGE && has("f32 or bf16"));
    CHECK(titan_comm_barrier(c, NULL) == TITAN_OK);
}

static void test_p2p(titan_comm *c) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    if (n < 2) {
        float x = 0;
        CHECK(titan_comm_send(c, &x, 1, TITAN_DTYPE_F32, 0, NULL) == TITAN_ERR_USAGE);
        return;
    }
    /* a ring exchange: to r+1, from r-1, larger than the pair's ring buffer */
    size_t cnt = 200003;
    float *a = xalloc(cnt * 4), *b = xalloc(cnt * 4);
    fill(a, TITAN_DTYPE_F32, r, 0, cnt, 21);
    int to = (r + 1) % n, from = (r + n - 1) % n;
    CHECK(titan_comm_send_recv(c, a, cnt, to, b, cnt, from, TITAN_DTYPE_F32, NULL) == TITAN_OK);
    size_t bad = 0;
    for (size_t i = 0; i < cnt; i++) bad += b[i] != val(from, i, 21);
    CHECK(bad == 0, "send_recv: %zu elements differ", bad);
    /* pairs (0,1), (2,3): even sends first, odd receives first; two messages in a row */
    int peer = r ^ 1;
    if (peer < n) {
        for (int m = 0; m < 2; m++) {
            size_t k = m ? 5 : cnt;
            if (r % 2 == 0) {
                CHECK(titan_comm_send(c, a, k, TITAN_DTYPE_F32, peer, NULL) == TITAN_OK);
                CHECK(titan_comm_recv(c, b, k, TITAN_DTYPE_F32, peer, NULL) == TITAN_OK);
            } else {
                CHECK(titan_comm_recv(c, b, k, TITAN_DTYPE_F32, peer, NULL) == TITAN_OK);
                CHECK(titan_comm_send(c, a, k, TITAN_DTYPE_F32, peer, NULL) == TITAN_OK);
            }
            bad = 0;
            for (size_t i = 0; i < k; i++) bad += b[i] != val(peer, i, 21);
            CHECK(bad == 0, "send/recv message %d: %zu elements differ", m, bad);
        }
    }
    free(a);
    free(b);
    CHECK(titan_comm_barrier(c, NULL) == TITAN_OK);
}

/* Queued operations complete in order, and a queued one runs while this
 * thread computes: rank 0 submits at once, the others 300 ms later. */
static void test_async(titan_comm *c) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    enum { K = 4 };
    size_t cnt = 65537;
    float *buf[K];
    titan_comm_req *req[K + 1];
    if (r != 0) usleep(300 * 1000);
    double t0 = titan_now_s();
    for (int k = 0; k < K; k++) {
        buf[k] = xalloc(cnt * 4);
        fill(buf[k], TITAN_DTYPE_F32, r, 0, cnt, 30u + (unsigned)k);
        CHECK(titan_comm_all_reduce(c, buf[k], buf[k], cnt, TITAN_DTYPE_F32, TITAN_COMM_SUM,
                                    &req[k]) == TITAN_OK);
    }
    CHECK(titan_comm_barrier(c, &req[K]) == TITAN_OK);
    double submitted = titan_now_s() - t0;
    if (r == 0 && n > 1) {
        CHECK(submitted < 0.1, "queueing took %.3f s: it should not wait for the peers", submitted);
        CHECK(!titan_comm_test(req[0]), "all_reduce done before the peers joined");
        volatile double work = 0; /* "compute" while the peers are late */
        while (titan_now_s() - t0 < 0.1) work += 1;
    }
    for (int k = 0; k <= K; k++) CHECK(titan_comm_wait(req[k]) == TITAN_OK);
    for (int k = 0; k < K; k++) {
        size_t bad = 0;
        for (size_t i = 0; i < cnt; i++)
            bad += bits_at(buf[k], TITAN_DTYPE_F32, i) !=
                   ref_bits(TITAN_DTYPE_F32, n, i, 30u + (unsigned)k, TITAN_COMM_SUM, NULL);
        CHECK(bad == 0, "async all_reduce %d: %zu elements differ", k, bad);
        free(buf[k]);
    }
    /* a blocking call after queued ones runs after them */
    float one = 1, sum = 0;
    CHECK(titan_comm_all_reduce(c, &one, &sum, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    CHECK(sum == (float)n);
}

/* Sub-communicators: parity groups with reversed keys, one rank in none,
 * and on 4 ranks the rows and columns of a 2x2 mesh. */
static void test_split(titan_comm *c) {
    int n = titan_comm_size(c), r = titan_comm_rank(c);
    titan_comm *par = NULL;
    int color = (n > 2 && r == n - 1) ? -1 : r % 2;
    CHECK(titan_comm_split(c, color, -r, "parity", &par) == TITAN_OK);
    if (color < 0) {
        CHECK(par == NULL);
    } else if (par) {
        int members[64], m = 0;
        for (int q = n - 1; q >= 0; q--) /* by key -q: highest rank first */
            if (q % 2 == color && !(n > 2 && q == n - 1)) members[m++] = q;
        CHECK(titan_comm_size(par) == m);
        CHECK(members[titan_comm_rank(par)] == r, "rank %d in parity group", titan_comm_rank(par));
        test_all_reduce(par, members, 20011);
        titan_comm_free(par);
    }
    if (n != 4) return;
    titan_comm *row = NULL, *col = NULL;
    CHECK(titan_comm_split(c, r / 2, r, "row", &row) == TITAN_OK && row);
    CHECK(titan_comm_split(c, r % 2, r, "col", &col) == TITAN_OK && col);
    if (!row || !col) return;
    CHECK(titan_comm_size(row) == 2 && titan_comm_rank(row) == r % 2);
    CHECK(titan_comm_size(col) == 2 && titan_comm_rank(col) == r / 2);
    int row_ranks[2] = {r / 2 * 2, r / 2 * 2 + 1}, col_ranks[2] = {r % 2, r % 2 + 2};
    /* both at once, queued: independent communicators progress independently */
    size_t cnt = 50001;
    float *a = xalloc(cnt * 4), *b = xalloc(cnt * 4);
    fill(a, TITAN_DTYPE_F32, r, 0, cnt, 40);
    fill(b, TITAN_DTYPE_F32, r, 0, cnt, 41);
    titan_comm_req *ra, *rb;
    CHECK(titan_comm_all_reduce(row, a, a, cnt, TITAN_DTYPE_F32, TITAN_COMM_SUM, &ra) == TITAN_OK);
    CHECK(titan_comm_all_reduce(col, b, b, cnt, TITAN_DTYPE_F32, TITAN_COMM_SUM, &rb) == TITAN_OK);
    CHECK(titan_comm_wait(rb) == TITAN_OK && titan_comm_wait(ra) == TITAN_OK);
    size_t bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        bad += bits_at(a, TITAN_DTYPE_F32, i) != ref_bits(TITAN_DTYPE_F32, 2, i, 40, TITAN_COMM_SUM, row_ranks);
        bad += bits_at(b, TITAN_DTYPE_F32, i) != ref_bits(TITAN_DTYPE_F32, 2, i, 41, TITAN_COMM_SUM, col_ranks);
    }
    CHECK(bad == 0, "mesh row/col all_reduce: %zu elements differ", bad);
    test_all_reduce(col, col_ranks, 20011);
    free(a);
    free(b);
    titan_comm_free(row);
    titan_comm_free(col);
}

/* Different calls at the same sequence number fail on every rank. */
static void test_mismatch(titan_dist *d) {
    titan_comm *c;
    titan_comm_options o = {.timeout_s = 5, .name = "mismatch"};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "init of comm mismatch");
        return;
    }
    float x[11] = {0};
    size_t cnt = me == nr - 1 ? 11 : 10;
    titan_status st = titan_comm_all_reduce(c, x, x, cnt, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
    if (nr > 1) {
        CHECK(st == TITAN_ERR_COMM && has("all_reduce #1") && has("instead"), "mismatch: %d", st);
        CHECK(titan_comm_barrier(c, NULL) == TITAN_ERR_COMM && has("failed earlier"));
    }
    titan_comm_free(c);
    if (nr < 2) return;
    /* send and recv sizes differ: the receiver says so, the others stop */
    o.name = "p2p-mismatch";
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "init of comm p2p-mismatch");
        return;
    }
    if (me == 0) CHECK(titan_comm_send(c, x, 10, TITAN_DTYPE_F32, 1, NULL) == TITAN_OK);
    if (me == 1)
        CHECK(titan_comm_recv(c, x, 11, TITAN_DTYPE_F32, 0, NULL) == TITAN_ERR_COMM &&
              has("recv #1 from rank 0") && has("message #1 has 40 bytes, this recv takes 44"),
              "%s", titan_error_message());
    CHECK(titan_comm_barrier(c, NULL) == TITAN_ERR_COMM);
    titan_comm_free(c);
}

static void test_bootstrap(titan_dist *d) {
    CHECK(me >= 0 && me < nr);
    CHECK(titan_dist_local_rank(d) >= 0 && titan_dist_local_rank(d) < titan_dist_local_size(d));
    char key[32], v[64];
    snprintf(v, sizeof v, "value of rank %d", me);
    CHECK(titan_dist_put(d, "test.v", v, strlen(v) + 1) == TITAN_OK);
    CHECK(titan_dist_commit(d) == TITAN_OK && titan_dist_fence(d) == TITAN_OK);
    for (int r = 0; r < nr; r++) {
        char want[64], got[64] = "";
        size_t n = 0;
        snprintf(want, sizeof want, "value of rank %d", r);
        CHECK(titan_dist_get(d, r, "test.v", got, sizeof got, &n) == TITAN_OK);
        CHECK(strcmp(got, want) == 0 && n == strlen(want) + 1, "rank %d's value '%s'", r, got);
    }
    CHECK(titan_dist_get(d, 0, "test.none", v, sizeof v, NULL) == TITAN_ERR_FAIL && has("not found"));
    snprintf(key, sizeof key, "bad key!");
    CHECK(titan_dist_put(d, key, v, 1) == TITAN_ERR_USAGE);
}

static void suite_all(titan_dist *d) {
    test_bootstrap(d);
    titan_comm *c;
    titan_comm_options o = {.timeout_s = 60};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "comm init");
        return;
    }
    CHECK(titan_comm_size(c) == nr && titan_comm_rank(c) == me);
    /* A failed mpi communicator makes the process end without
     * MPI_Finalize (its launcher then stops the job): the failure cases
     * are suites of their own there. */
    int mpi = strcmp(titan_comm_backend_of(c), "mpi") == 0;
    test_all_reduce(c, NULL, SIZE_MAX);
    test_reduce_scatter(c);
    test_all_gather_and_all_to_all(c, 10);
    test_broadcast_barrier(c);
    test_p2p(c);
    test_async(c);
    test_split(c);
    titan_comm_free(c);
    /* small pipeline steps: many steps and uneven last pieces */
    titan_comm_options small = {.timeout_s = 60, .chunk_bytes = 4096, .name = "small"};
    if (titan_comm_init(d, &small, &c) == TITAN_OK) {
        test_all_reduce(c, NULL, 20011);
        test_reduce_scatter(c);
        test_all_gather_and_all_to_all(c, 1);
        titan_comm_free(c);
    } else
        CHECK(0, "comm init (small chunks)");
    if (!mpi) test_mismatch(d);
}

/* The last rank skips the second all_reduce: the others fail within the
 * timeout naming it; it later finds the communicator stopped. */
static void suite_timeout(titan_dist *d) {
    titan_comm *c;
    const double T = 1.0;
    /* A long timeout until every rank is up (start-up skew on a loaded
     * machine can exceed T), then the short one under test. */
    titan_comm_options o = {.timeout_s = 60};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "comm init");
        return;
    }
    float x = 1, y;
    CHECK(titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    titan_comm_set_timeout(c, T);
    char who[32];
    snprintf(who, sizeof who, "rank %d", nr - 1);
    if (me == nr - 1) {
        usleep((useconds_t)(3 * T * 1e6));
        titan_status st = titan_comm_barrier(c, NULL);
        CHECK(st == TITAN_ERR_COMM && has("stopped because") && has("timed out"), "skipper: %s",
              titan_error_message());
    } else {
        double t0 = titan_now_s();
        titan_status st;
        if (me == 0) { /* the failure also comes back through a queued operation */
            titan_comm_req *req;
            CHECK(titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, &req) == TITAN_OK);
            st = titan_comm_wait(req);
        } else
            st = titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
        double dt = titan_now_s() - t0;
        /* mpi names the operation the missing rank has not begun instead */
        CHECK(st == TITAN_ERR_COMM && has("all_reduce #2") && has("timed out after 1.0 s") &&
              has(who) && (has("completed 1 operation") || has("has not started #2")), "waiter: %s",
              titan_error_message());
        CHECK(dt < T + 2.0, "failed after %.2f s", dt);
        fprintf(stderr, "rank %d got, as expected: %s\n", me, titan_error_message());
    }
    titan_comm_free(c);
}

/* A communicator and the one split from it fail together: rank 0's queued
 * operation on the split times out waiting for the last rank while rank 0
 * waits in the world for it too (started later); the world's wait stops
 * with the split's failure instead of waiting out its own timeout. */
static void suite_family(titan_dist *d) {
    titan_comm *c, *sub = NULL;
    const double T = 1.5, LATER = 1.4; /* the world's wait starts LATER s after the split's */
    titan_comm_options o = {.timeout_s = 60};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "comm init");
        return;
    }
    float x = 1, y;
    CHECK(titan_comm_split(c, 0, me, "sub", &sub) == TITAN_OK && sub);
    if (!sub) {
        titan_comm_free(c);
        return;
    }
    CHECK(titan_comm_all_reduce(sub, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    CHECK(titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    titan_comm_set_timeout(c, T);
    titan_comm_set_timeout(sub, T);
    if (me == nr - 1) {
        usleep((useconds_t)(3 * T * 1e6));
        CHECK(titan_comm_barrier(sub, NULL) == TITAN_ERR_COMM && has("stopped because"), "skipper, sub: %s",
              titan_error_message());
        CHECK(titan_comm_barrier(c, NULL) == TITAN_ERR_COMM && has("stopped because"), "skipper, world: %s",
              titan_error_message());
    } else if (me == 0) {
        titan_comm_req *req;
        double t0 = titan_now_s();
        CHECK(titan_comm_all_reduce(sub, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, &req) == TITAN_OK);
        usleep((useconds_t)(LATER * 1e6));
        titan_status st = titan_comm_barrier(c, NULL);
        double dt = titan_now_s() - t0;
        CHECK(st == TITAN_ERR_COMM && has("barrier #") && has("stopped because") &&
              has("on comm sub") && has("timed out after 1.5 s"), "world: %s", titan_error_message());
        /* halfway between the split's timeout (T) and the world's own (LATER + T) */
        CHECK(dt < T + LATER / 2, "the world's wait ended %.2f s after the split's began", dt);
        fprintf(stderr, "rank 0 got, %.2f s after the split's wait began: %s\n", dt, titan_error_message());
        CHECK(titan_comm_wait(req) == TITAN_ERR_COMM && has("all_reduce #2") && has("timed out after 1.5 s"),
              "sub: %s", titan_error_message());
    } else { /* then stays: rank 0 must not learn of the failure from its exit */
        CHECK(titan_comm_all_reduce(sub, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_ERR_COMM,
              "sub: %s", titan_error_message());
        usleep((useconds_t)(2 * T * 1e6));
    }
    titan_comm_free(sub);
    titan_comm_free(c);
}

/* The last rank dies: the others fail at once (long timeout), naming it. */
static void suite_kill(titan_dist *d) {
    titan_comm *c;
    titan_comm_options o = {.timeout_s = 30};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "comm init");
        return;
    }
    float x = 1, y;
    CHECK(titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    /* every rank is past #1 before the death: a slow one would fail in #1 */
    CHECK(titan_dist_fence(d) == TITAN_OK, "fence: %s", titan_error_message());
    if (me == nr - 1) raise(SIGKILL);
    double t0 = titan_now_s();
    titan_status st = titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
    double dt = titan_now_s() - t0;
    char who[32];
    snprintf(who, sizeof who, "rank %d (pid", nr - 1);
    CHECK(st == TITAN_ERR_COMM && has("all_reduce #2") && has(who) && has("exited or was killed"),
          "survivor: %s", titan_error_message());
    CHECK(dt < 2.0, "noticed after %.2f s", dt);
    fprintf(stderr, "rank %d got, as expected: %s\n", me, titan_error_message());
    titan_comm_free(c);
}

/* The last rank fails outside any communicator (an I/O error, say) and
 * exits while the others wait on communicators it is in (the world) and
 * one it is not in (a pair of ranks 0 and 1): both stop at once, long
 * before their timeout, naming it and its reason (titan_comm_exiting). */
static void suite_exiting(titan_dist *d) {
    titan_comm *c, *pair = NULL;
    titan_comm_options o = {.timeout_s = 30};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "comm init");
        return;
    }
    float x = 1, y;
    CHECK(titan_comm_split(c, me < 2 ? 0 : 1, me, "pair", &pair) == TITAN_OK && pair);
    CHECK(titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    if (me == nr - 1) {
        usleep(300 * 1000);
        titan_status st = titan_error(TITAN_ERR_IO, "checkpoint/step-7: disk full (a test's failure)");
        titan_comm_exiting(st);
        usleep(3000 * 1000); /* the notice, not the exit, must stop them */
        return;
    }
    double t0 = titan_now_s();
    titan_status st = me == 0 ? titan_comm_barrier(pair, NULL)
                              : titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
    double dt = titan_now_s() - t0;
    char who[32];
    snprintf(who, sizeof who, "world rank %d failed", nr - 1);
    CHECK(st == TITAN_ERR_COMM && has("stopped because") && has(who) && has("disk full") &&
          has(me == 0 ? "on comm pair" : "on comm world"), "waiter: %s", titan_error_message());
    CHECK(dt < 2.5, "stopped after %.2f s", dt);
    fprintf(stderr, "rank %d got, after %.2f s: %s\n", me, dt, titan_error_message());
}

/* The last rank never reaches the bootstrap fence. */
static void suite_fence_timeout(titan_dist *d) {
    if (me == nr - 1) return;
    titan_dist_set_timeout(d, 0.3);
    CHECK(titan_dist_fence(d) == TITAN_ERR_COMM && has("fence #1") && has("timed out"));
}

/* all_reduce bus bandwidth, as nccl-tests defines it: bytes/time * 2(n-1)/n. */
static void suite_bench(titan_dist *d, size_t chunk) {
    titan_comm *c;
    titan_comm_options o = {.timeout_s = 120, .chunk_bytes = chunk};
    if (titan_comm_init(d, &o, &c) != TITAN_OK) {
        CHECK(0, "comm init");
        return;
    }
    for (int k = 0; k < 2; k++) { /* latency: a barrier, a 1-element all_reduce */
        float x = 1, y;
        int iters = 2000;
        titan_comm_barrier(c, NULL);
        double t0 = titan_now_s();
        for (int i = 0; i < iters; i++)
            CHECK((k ? titan_comm_all_reduce(c, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL)
                     : titan_comm_barrier(c, NULL)) == TITAN_OK);
        double t = (titan_now_s() - t0) / iters;
        if (me == 0)
            printf("%-4s %-24s ranks %d  %8.1f us\n", titan_comm_backend_of(c), k ? "all_reduce f32 x 1" : "barrier",
                   nr, t * 1e6);
    }
    /* The flight recorder's cost (titan-train records by default): 1-element
     * all_reduces on a communicator it records and on one it does not, in
     * turns, the best of 5 rounds each. */
    titan_comm *rec = NULL;
    if (titan_flight_enable("/nonexistent/never-dumped", me, nr, 2000) == TITAN_OK &&
        titan_comm_init(d, &o, &rec) == TITAN_OK) {
        double best[2] = {1e9, 1e9};
        for (int round = 0; round < 10; round++) {
            titan_comm *cc = round % 2 ? rec : c;
            float x = 1, y;
            int iters = 1000;
            titan_comm_barrier(cc, NULL);
            double t0 = titan_now_s();
            for (int i = 0; i < iters; i++)
                CHECK(titan_comm_all_reduce(cc, &x, &y, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
            double t = (titan_now_s() - t0) / iters;
            if (t < best[round % 2]) best[round % 2] = t;
        }
        if (me == 0)
            printf("%-4s all_reduce f32 x 1       ranks %d  %8.1f us recorded (flight recorder), %.1f us not\n",
                   titan_comm_backend_of(c), nr, best[1] * 1e6, best[0] * 1e6);
    }
    titan_comm_free(rec);
    titan_flight_disable();
    size_t maxb = (size_t)64 << 20;
    float *a = xalloc(maxb), *b = xalloc(maxb);
    fill(a, TITAN_DTYPE_F32, me, 0, maxb / 4, 1);
    for (size_t bytes = (size_t)1 << 20; bytes <= maxb; bytes *= 2) {
        size_t cnt = bytes / 4;
        int iters = (int)((size_t)(256 << 20) / bytes);
        iters = iters < 3 ? 3 : iters > 40 ? 40 : iters;
        for (int w = 0; w < 2; w++)
            titan_comm_all_reduce(c, a, b, cnt, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL);
        titan_comm_barrier(c, NULL);
        double t0 = titan_now_s();
        for (int i = 0; i < iters; i++)
            CHECK(titan_comm_all_reduce(c, a, b, cnt, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
        titan_comm_barrier(c, NULL);
        double t = (titan_now_s() - t0) / iters, alg = (double)bytes / t / 1e9;
        if (me == 0)
            printf("%-4s all_reduce f32  ranks %d  %5zu MB  %8.3f ms  algbw %6.2f GB/s  busbw %6.2f GB/s\n",
                   titan_comm_backend_of(c), nr, bytes >> 20, t * 1e3, alg, alg * 2.0 * (nr - 1) / nr);
    }
    fflush(stdout);
    free(a);
    free(b);
    titan_comm_free(c);
}

static int run_rank(const char *suite, size_t chunk) {
    titan_dist *d;
    if (!join_job(&d, &me, &nr)) return 1;
    titan_dist_kind kind = titan_dist_kind_of(d);
    CHECK(kind == (getenv("PMIX_NAMESPACE") ? TITAN_DIST_PMIX
                   : getenv("TITAN_RANK")   ? TITAN_DIST_LOCAL
                                            : TITAN_DIST_SINGLETON));
    if (strcmp(suite, "all") == 0) suite_all(d);
    else if (strcmp(suite, "timeout") == 0) suite_timeout(d);
    else if (strcmp(suite, "mismatch") == 0) test_mismatch(d);
    else if (strcmp(suite, "kill") == 0) suite_kill(d);
    else if (strcmp(suite, "family") == 0) suite_family(d);
    else if (strcmp(suite, "exiting") == 0) suite_exiting(d);
    else if (strcmp(suite, "fence-timeout") == 0) suite_fence_timeout(d);
    else if (strcmp(suite, "bench") == 0) suite_bench(d, chunk);
    else if (strcmp(suite, "exit3") == 0) {
        if (me == 1) exit(3);
    } else {
        fprintf(stderr, "unknown suite %s\n", suite);
        failures++;
    }
    if (failures)
        fprintf(stderr, "rank %d of %d (%s): %d failure(s)\n", me, nr, titan_dist_kind_name(kind),
                failures);
    else if (me == 0 && strcmp(suite, "bench") != 0)
        printf("suite %s: %d rank%s via %s: ok\n", suite, nr, nr > 1 ? "s" : "",
               titan_dist_kind_name(kind));
    fflush(stdout);
    titan_dist_free(d);
    return failures != 0;
}

/* ---- the launcher side ---------------------------------------------------------------- */

static titan_status spawn(const char *suite, int n, int *codes, int *first) {
    char *argv[] = {"/proc/self/exe", "--suite", (char *)suite, NULL};
    titan_dist_spawn_options o = {.nproc = n, .grace_s = 10, .exit_codes = codes};
    return titan_dist_spawn_local(argv, &o, first);
}

static int leftover_segments(void) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "titan-L%ld-", (long)getpid());
    DIR *dir = opendir("/dev/shm");
    int n = 0;
    struct dirent *e;
    while (dir && (e = readdir(dir)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    if (dir) closedir(dir);
    return n;
}

static void launcher_tests(void) {
    int codes[8], first = -1;
    for (int n = 2; n <= 4; n++) {
        double t0 = titan_now_s();
        titan_status st = spawn("all", n, codes, &first);
        CHECK(st == TITAN_OK, "suite on %d ranks", n);
        fprintf(stderr, "suite on %d ranks: %s (%.2f s)\n", n, st ? "FAILED" : "ok", titan_now_s() - t0);
    }
    CHECK(spawn("timeout", 3, codes, &first) == TITAN_OK, "timeout suite");
    CHECK(spawn("family", 3, codes, &first) == TITAN_OK, "family suite");
    titan_status st = spawn("kill", 3, codes, &first);
    CHECK(st == TITAN_ERR_FAIL && has("rank 2 of 3 was killed by signal 9") && first == 137 &&
          codes[0] == 0 && codes[1] == 0 && codes[2] == 137, "kill: %d %d %d", codes[0], codes[1],
          codes[2]);
    CHECK(spawn("fence-timeout", 2, codes, &first) == TITAN_OK, "bootstrap fence timeout");
    st = spawn("exit3", 3, codes, &first);
    CHECK(st == TITAN_ERR_FAIL && has("rank 1 of 3 exited with status 3") && first == 3);
    char *nope[] = {"/nonexistent/titan-nothing", NULL};
    titan_dist_spawn_options o = {.nproc = 2, .exit_codes = codes};
    CHECK(titan_dist_spawn_local(nope, &o, &first) == TITAN_ERR_FAIL && first == 127);
    CHECK(leftover_segments() == 0, "shared memory segments left in /dev/shm");
}

static void bench(size_t chunk) {
    /* the reference: one process copying the same bytes */
    size_t maxb = (size_t)64 << 20;
    char *a = xalloc(maxb), *b = xalloc(maxb);
    memset(a, 1, maxb);
    memcpy(b, a, maxb);
    for (size_t bytes = (size_t)1 << 20; bytes <= maxb; bytes *= 4) {
        int iters = 20;
        double t0 = titan_now_s();
        for (int i = 0; i < iters; i++) {
            memcpy(b, a, bytes);
            __asm__ volatile("" : : "r"(b) : "memory"); /* the copy is used */
        }
        double t = (titan_now_s() - t0) / iters;
        printf("reference: memcpy %5zu MB in one process: %6.2f GB/s\n", bytes >> 20, bytes / t / 1e9);
    }
    free(a);
    free(b);
    fflush(stdout);
    char cs[32];
    snprintf(cs, sizeof cs, "%zu", chunk);
    for (int n = 2; n <= 4; n += 2) {
        char *argv[] = {"/proc/self/exe", "--suite", "bench", cs, NULL};
        titan_dist_spawn_options o = {.nproc = n};
        if (titan_dist_spawn_local(argv, &o, NULL) != TITAN_OK)
            fprintf(stderr, "bench: %s\n", titan_error_message()), failures++;
    }
}

int main(int argc, char **argv) {
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "--suite") == 0)
        return run_rank(argv[2], argc >= 4 ? strtoull(argv[3], NULL, 10) : 0);
    if (argc >= 2 && strcmp(argv[1], "--bench") == 0) {
        bench(argc >= 3 ? strtoull(argv[2], NULL, 10) : 0);
        return failures != 0;
    }
    if (getenv("PMIX_NAMESPACE") || getenv("TITAN_RANK")) return run_rank("all", 0);
    /* alone: singleton, then the launcher; without POSIX shared memory
     * (no /dev/shm in some sandboxes) there is nothing to test */
    if (!shm_works()) return 77;
    int rc = run_rank("all", 0);
    if (rc) return rc;
    launcher_tests();
    return failures != 0;
}
