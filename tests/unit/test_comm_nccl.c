/* test_comm_nccl.c - the nccl communicator (comm.h over NCCL): device
 * buffers, host buffers (staged through the communicator's device scratch
 * buffers), and operations mixing the two.
 *
 *   test_comm_nccl           first the suite on 2 ranks (local launcher, GPU =
 *                            local rank; the ranks exit 77 together when there
 *                            are fewer than 2 GPUs), then in this process on a
 *                            1-rank communicator
 *   test_comm_nccl --suite   one rank of the 2-rank job
 *
 * Every operation is checked against a host reference, bit for bit: values
 * are multiples of 1/4 in [-4, 4], so any sum or average over 1 or 2 ranks
 * is exact in f32 and bf16 in whatever order NCCL adds. Without
 * libtitan-cuda.so, its NCCL part or a GPU it prints "no GPU: <why>" and
 * exits 77. The timeout and a lost peer need ranks that stall or die on
 * separate GPUs; they are not tested here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "comm/comm_nccl_api.h"
#include "comm/spawn.h"
#include "tensor/dtype.h"

#include "check.h"

#define SKIP 77

static int me, nr;                /* rank, ranks */
static const titan_backend *gpu;  /* device memory of this rank's GPU */
static int on_host;               /* 1: the tests' buffers are host memory (staged) */

static int has(const char *frag) { return strstr(titan_error_message(), frag) != NULL; }

static float val(int r, size_t i, unsigned seed) {
    return (float)((int)((i * 7 + (size_t)r * 13 + seed * 5) % 33) - 16) * 0.25f;
}

/* Element i of rank r's data as dt's bit pattern. */
static uint32_t bits(titan_dtype dt, int r, size_t i, unsigned seed) {
    float v = val(r, i, seed);
    uint32_t u;
    switch (dt) {
    case TITAN_DTYPE_BF16: return titan_f32_to_bf16(v);
    case TITAN_DTYPE_F16: return titan_f32_to_f16(v);
    case TITAN_DTYPE_U32: return (uint32_t)r * 1000003u + (uint32_t)i * 7u + seed;
    case TITAN_DTYPE_U8: return ((uint32_t)r * 31u + (uint32_t)i * 7u + seed) & 0xffu;
    case TITAN_DTYPE_F32: break;
    }
    memcpy(&u, &v, 4);
    return u;
}

/* The reduction of element i over all ranks, as dt's bits. */
static uint32_t reduced(titan_dtype dt, size_t i, unsigned seed, titan_comm_redop op) {
    float acc = 0;
    for (int r = 0; r < nr; r++) acc += val(r, i, seed);
    if (op == TITAN_COMM_AVG) acc /= (float)nr;
    if (dt == TITAN_DTYPE_BF16) return titan_f32_to_bf16(acc);
    uint32_t u;
    memcpy(&u, &acc, 4);
    return u;
}

static uint32_t at(const void *h, titan_dtype dt, size_t i) {
    if (titan_dtype_size(dt) == 2) return ((const uint16_t *)h)[i];
    uint32_t u;
    memcpy(&u, (const char *)h + 4 * i, 4);
    return u;
}

static void put(void *h, titan_dtype dt, size_t i, uint32_t b) {
    if (titan_dtype_size(dt) == 2) ((uint16_t *)h)[i] = (uint16_t)b;
    else memcpy((char *)h + 4 * i, &b, 4);
}

/* The tests' buffers: device memory of gpu, or host memory when on_host. */
static void *acquire(size_t bytes) { return on_host ? calloc(1, bytes + 1) : gpu->alloc(bytes); }

static void release(void *p) {
    if (on_host) free(p);
    else gpu->free(p);
}

static void upload(void *d, const void *h, size_t bytes) {
    if (on_host) memcpy(d, h, bytes);
    else gpu->to_device(d, h, bytes);
}

static void download(void *h, const void *d, size_t bytes) {
    if (on_host) memcpy(h, d, bytes);
    else gpu->to_host(h, d, bytes);
}

/* A device (on_host: host) buffer of n elements: rank r's data from
 * element `off`, or filled with a marker when r < 0. */
static void *dev(titan_dtype dt, int r, size_t off, size_t n, unsigned seed) {
    size_t es = titan_dtype_size(dt);
    void *h = malloc(n * es + 1), *d = acquire(n * es);
    for (size_t i = 0; i < n; i++) put(h, dt, i, r < 0 ? 0x7f7fu : bits(dt, r, off + i, seed));
    upload(d, h, n * es);
    free(h);
    return d;
}

static void *host(const void *d, titan_dtype dt, size_t n) {
    void *h = malloc(n * titan_dtype_size(dt) + 1);
    download(h, d, n * titan_dtype_size(dt));
    return h;
}

/* First mismatch of h against want(i) over [0, n), or -1. */
#define FIRST_BAD(h, dt, n, want_expr)                                  \
    ({                                                                  \
        long bad_ = -1;                                                 \
        for (size_t i = 0; i < (n) && bad_ < 0; i++)                    \
            if (at(h, dt, i) != (uint32_t)(want_expr)) bad_ = (long)i;  \
        bad_;                                                           \
    })

static void test_all_reduce(titan_comm *c, titan_dtype dt, titan_comm_redop op, size_t n,
                            int inplace, unsigned seed) {
    void *s = dev(dt, me, 0, n, seed), *r = inplace ? s : dev(dt, -1, 0, n, 0);
    CHECK(titan_comm_all_reduce(c, s, r, n, dt, op, NULL) == TITAN_OK);
    void *h = host(r, dt, n);
    long bad = FIRST_BAD(h, dt, n, reduced(dt, i, seed, op));
    CHECK(bad < 0, "all_reduce %s %s n=%zu%s: element %ld", titan_dtype_name(dt),
          titan_comm_redop_name(op), n, inplace ? " in place" : "", bad);
    free(h);
    release(s);
    if (!inplace) release(r);
}

static size_t sum(const size_t *counts) {
    size_t t = 0;
    for (int q = 0; q < nr; q++) t += counts[q];
    return t;
}

static void test_reduce_scatter(titan_comm *c, titan_dtype dt, titan_comm_redop op,
                                const size_t *counts, int inplace, unsigned seed) {
    size_t total = sum(counts), off = 0;
    for (int q = 0; q < me; q++) off += counts[q];
    void *s = dev(dt, me, 0, total, seed);
    char *r = inplace ? (char *)s + off * titan_dtype_size(dt) : dev(dt, -1, 0, counts[me], 0);
    CHECK(titan_comm_reduce_scatter_v(c, s, r, counts, dt, op, NULL) == TITAN_OK);
    void *h = host(r, dt, counts[me]);
    long bad = FIRST_BAD(h, dt, counts[me], reduced(dt, off + i, seed, op));
    CHECK(bad < 0, "reduce_scatter %s %s%s: element %ld", titan_dtype_name(dt),
          titan_comm_redop_name(op), inplace ? " in place" : "", bad);
    free(h);
    release(s);
    if (!inplace) release(r);
}

static void test_all_gather(titan_comm *c, titan_dtype dt, const size_t *counts, int inplace,
                            unsigned seed) {
    size_t total = sum(counts), off = 0;
    for (int q = 0; q < me; q++) off += counts[q];
    size_t es = titan_dtype_size(dt);
    char *r = dev(dt, -1, 0, total, 0);
    void *s = dev(dt, me, off, counts[me], seed);
    if (inplace) { /* my part already in place, as FSDP has it */
        void *h = host(s, dt, counts[me]);
        release(s);
        s = r + off * es;
        upload(s, h, counts[me] * es);
        free(h);
    }
    CHECK(titan_comm_all_gather_v(c, s, r, counts, dt, NULL) == TITAN_OK);
    /* element i of the result comes from the rank whose part holds it */
    int *owner = malloc(total * sizeof *owner + 1);
    for (size_t q = 0, k = 0; q < (size_t)nr; q++)
        for (size_t j = 0; j < counts[q]; j++) owner[k++] = (int)q;
    void *h = host(r, dt, total);
    long bad = FIRST_BAD(h, dt, total, bits(dt, owner[i], i, seed));
    CHECK(bad < 0, "all_gather %s%s: element %ld", titan_dtype_name(dt),
          inplace ? " in place" : "", bad);
    free(h);
    free(owner);
    release(r);
    if (!inplace) release(s);
}

static void test_all_to_all(titan_comm *c, titan_dtype dt, size_t n, unsigned seed) {
    void *s = dev(dt, me, 0, n * (size_t)nr, seed), *r = dev(dt, -1, 0, n * (size_t)nr, 0);
    CHECK(titan_comm_all_to_all(c, s, r, n, dt, NULL) == TITAN_OK);
    /* block q of my recv is block `me` of rank q's send */
    void *h = host(r, dt, n * (size_t)nr);
    long bad = FIRST_BAD(h, dt, n * (size_t)nr, bits(dt, (int)(i / n), me * n + i % n, seed));
    CHECK(bad < 0, "all_to_all %s: element %ld", titan_dtype_name(dt), bad);
    free(h);
    release(s);
    release(r);
}

/* Ranks of c (which may be a split): root holds data "of rank root". */
static void test_broadcast(titan_comm *c, titan_dtype dt, size_t n, int root, unsigned seed) {
    void *b = dev(dt, titan_comm_rank(c) == root ? root : -1, 0, n, seed);
    CHECK(titan_comm_broadcast(c, b, n, dt, root, NULL) == TITAN_OK);
    void *h = host(b, dt, n);
    long bad = FIRST_BAD(h, dt, n, bits(dt, root, i, seed));
    CHECK(bad < 0, "broadcast %s from %d: element %ld", titan_dtype_name(dt), root, bad);
    free(h);
    release(b);
}

/* Ring exchange, then rank 0 -> 1 by send and recv (2 ranks and more). */
static void test_p2p(titan_comm *c, size_t n) {
    titan_dtype dt = TITAN_DTYPE_F32;
    int to = (me + 1) % nr, from = (me + nr - 1) % nr;
    void *s = dev(dt, me, 0, n, 7), *r = dev(dt, -1, 0, n, 0);
    CHECK(titan_comm_send_recv(c, s, n, to, r, n, from, dt, NULL) == TITAN_OK);
    void *h = host(r, dt, n);
    CHECK(FIRST_BAD(h, dt, n, bits(dt, from, i, 7)) < 0, "send_recv from %d", from);
    free(h);
    if (me == 0) CHECK(titan_comm_send(c, s, n, dt, 1, NULL) == TITAN_OK);
    if (me == 1) {
        CHECK(titan_comm_recv(c, r, n, dt, 0, NULL) == TITAN_OK);
        h = host(r, dt, n);
        CHECK(FIRST_BAD(h, dt, n, bits(dt, 0, i, 7)) < 0, "recv from 0");
        free(h);
    }
    release(s);
    release(r);
}

/* Queued operations complete in order; each result is the reference. */
static void test_requests(titan_comm *c) {
    enum { K = 3 };
    size_t n = 4099;
    void *b[K];
    titan_comm_req *q[K];
    for (int k = 0; k < K; k++) {
        b[k] = dev(TITAN_DTYPE_F32, me, 0, n, 20u + (unsigned)k);
        CHECK(titan_comm_all_reduce(c, b[k], b[k], n, TITAN_DTYPE_F32, TITAN_COMM_SUM, &q[k]) ==
              TITAN_OK);
    }
    for (int k = 0; k < K; k++) {
        CHECK(titan_comm_wait(q[k]) == TITAN_OK, "request %d", k);
        void *h = host(b[k], TITAN_DTYPE_F32, n);
        CHECK(FIRST_BAD(h, TITAN_DTYPE_F32, n,
                        reduced(TITAN_DTYPE_F32, i, 20u + (unsigned)k, TITAN_COMM_SUM)) < 0,
              "queued all_reduce %d", k);
        free(h);
        release(b[k]);
    }
}

/* Usage errors leave the communicator usable; a host buffer on the stack
 * is no usage error. */
static void test_usage(titan_comm *c) {
    unsigned long long seq = titan_comm_seq(c);
    void *d = dev(TITAN_DTYPE_U32, me, 0, 16, 0);
    CHECK(titan_comm_all_reduce(c, d, d, 16, TITAN_DTYPE_U32, TITAN_COMM_SUM, NULL) ==
          TITAN_ERR_USAGE && has("f32 or bf16") && has("on comm"));
    release(d);
    CHECK(titan_comm_seq(c) == seq, "failed calls are not counted");
    float stack[16];
    for (int i = 0; i < 16; i++) stack[i] = val(me, (size_t)i, 9);
    CHECK(titan_comm_all_reduce(c, stack, stack, 16, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) ==
          TITAN_OK);
    CHECK(FIRST_BAD(stack, TITAN_DTYPE_F32, 16, reduced(TITAN_DTYPE_F32, i, 9, TITAN_COMM_SUM)) < 0,
          "all_reduce of a stack buffer");
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, 100, 0, 9);
    CHECK(titan_comm_seq(c) == seq + 2, "seq %llu, want %llu", titan_comm_seq(c), seq + 2);
}

/* One side on the host, the other on the GPU: each side staged or not on
 * its own. */
static void test_mixed(titan_comm *c) {
    titan_dtype f = TITAN_DTYPE_F32, u = TITAN_DTYPE_U32;
    size_t n = 5000;
    /* all_reduce: host send, device recv */
    on_host = 1;
    void *hs = dev(f, me, 0, n, 30);
    on_host = 0;
    void *dr = dev(f, -1, 0, n, 0);
    CHECK(titan_comm_all_reduce(c, hs, dr, n, f, TITAN_COMM_SUM, NULL) == TITAN_OK);
    void *h = host(dr, f, n);
    CHECK(FIRST_BAD(h, f, n, reduced(f, i, 30, TITAN_COMM_SUM)) < 0, "all_reduce host -> device");
    free(h);
    free(hs);
    release(dr);

    /* all_gather: device send, host recv (uneven: ncclBroadcast per rank) */
    size_t counts[2] = {7, 2}, total = sum(counts), off = me ? counts[0] : 0;
    void *ds = dev(u, me, off, counts[me], 31);
    on_host = 1;
    void *hr = dev(u, -1, 0, total, 0);
    on_host = 0;
    CHECK(titan_comm_all_gather_v(c, ds, hr, counts, u, NULL) == TITAN_OK);
    CHECK(FIRST_BAD(hr, u, total, bits(u, i < counts[0] ? 0 : 1, i, 31)) < 0,
          "all_gather device -> host");
    release(ds);
    free(hr);

    /* send_recv around the ring: host send, device recv */
    if (nr >= 2) {
        int to = (me + 1) % nr, from = (me + nr - 1) % nr;
        on_host = 1;
        hs = dev(u, me, 0, 33, 32);
        on_host = 0;
        dr = dev(u, -1, 0, 33, 0);
        CHECK(titan_comm_send_recv(c, hs, 33, to, dr, 33, from, u, NULL) == TITAN_OK);
        h = host(dr, u, 33);
        CHECK(FIRST_BAD(h, u, 33, bits(u, from, i, 32)) < 0, "send_recv host -> device");
        free(h);
        free(hs);
        release(dr);
    }
}

/* Host buffers, staged through the communicator's device buffers: the
 * small data a trainer moves (a loss sum, status words, a status message)
 * and sizes that grow the stages past their first 64 KiB. */
static void suite_host(titan_comm *c) {
    on_host = 1;
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, 2, 0, 11);
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, 2, 1, 12);
    test_all_reduce(c, TITAN_DTYPE_BF16, TITAN_COMM_AVG, 100003, 1, 13);
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_AVG, 1000003, 0, 14);
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, 0, 0, 0);
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, 3, 1, 15); /* after the large ones */
    size_t even[2] = {4096, 4096}, uneven[2] = {1000, 3}, words[2] = {2, 2};
    test_reduce_scatter(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, uneven, 1, 16);
    test_reduce_scatter(c, TITAN_DTYPE_BF16, TITAN_COMM_AVG, even, 0, 17);
    test_all_gather(c, TITAN_DTYPE_U32, words, 0, 18);
    test_all_gather(c, TITAN_DTYPE_U32, uneven, 0, 19);
    test_all_gather(c, TITAN_DTYPE_U32, uneven, 1, 20);
    test_all_gather(c, TITAN_DTYPE_BF16, uneven, 1, 21);
    test_all_to_all(c, TITAN_DTYPE_U32, 5, 22);
    test_broadcast(c, TITAN_DTYPE_U32, 37, 0, 23);
    test_broadcast(c, TITAN_DTYPE_BF16, 10001, nr - 1, 24);
    if (nr >= 2) test_p2p(c, 65537);
    if (nr >= 2) test_p2p(c, 3);
    test_requests(c);
    on_host = 0;
    test_mixed(c);
}

static void test_split(titan_comm *c) {
    titan_comm *rev = NULL, *none = (titan_comm *)1;
    CHECK(titan_comm_split(c, 0, -me, "rev", &rev) == TITAN_OK && rev);
    if (rev) {
        CHECK(titan_comm_rank(rev) == nr - 1 - me && titan_comm_size(rev) == nr,
              "rank %d of %d in the reversed split", titan_comm_rank(rev), titan_comm_size(rev));
        CHECK(strcmp(titan_comm_name(rev), "rev") == 0);
        test_broadcast(rev, TITAN_DTYPE_F32, 1000, 0, 4); /* root 0 of rev = rank nr-1 of c */
        titan_comm_free(rev);
    }
    CHECK(titan_comm_split(c, -1, 0, NULL, &none) == TITAN_OK && none == NULL, "no color");
    if (nr >= 2) {
        titan_comm *solo = NULL;
        CHECK(titan_comm_split(c, me, 0, NULL, &solo) == TITAN_OK && solo &&
              titan_comm_size(solo) == 1 && titan_comm_rank(solo) == 0);
        if (solo) {
            void *b = dev(TITAN_DTYPE_BF16, me, 0, 300, 3), *h;
            CHECK(titan_comm_all_reduce(solo, b, b, 300, TITAN_DTYPE_BF16, TITAN_COMM_AVG, NULL) ==
                  TITAN_OK);
            h = host(b, TITAN_DTYPE_BF16, 300);
            CHECK(FIRST_BAD(h, TITAN_DTYPE_BF16, 300, bits(TITAN_DTYPE_BF16, me, i, 3)) < 0,
                  "all_reduce over a 1-rank split");
            free(h);
            release(b);
            titan_comm_free(solo);
        }
    }
}

static void suite(titan_comm *c) {
    const titan_dtype red[2] = {TITAN_DTYPE_F32, TITAN_DTYPE_BF16};
    for (int k = 0; k < 2; k++)
        for (int op = 0; op < 2; op++) {
            test_all_reduce(c, red[k], (titan_comm_redop)op, 1000003, 0, 1);
            test_all_reduce(c, red[k], (titan_comm_redop)op, 777, 1, 2);
        }
    test_all_reduce(c, TITAN_DTYPE_F32, TITAN_COMM_SUM, 0, 0, 0);
    size_t even[2] = {4096, 4096}, uneven[2] = {1000, 3};
    for (int k = 0; k < 2; k++) {
        test_reduce_scatter(c, red[k], TITAN_COMM_AVG, even, 0, 3);
        test_reduce_scatter(c, red[k], TITAN_COMM_SUM, uneven, 1, 4);
        test_reduce_scatter(c, red[k], TITAN_COMM_AVG, uneven, 0, 5);
    }
    const titan_dtype any[4] = {TITAN_DTYPE_F32, TITAN_DTYPE_BF16, TITAN_DTYPE_F16, TITAN_DTYPE_U32};
    for (int k = 0; k < 4; k++) {
        test_all_gather(c, any[k], even, 0, 6);
        test_all_gather(c, any[k], uneven, 1, 7);
        test_all_to_all(c, any[k], 513, 8);
        test_broadcast(c, any[k], 10001, nr - 1, 9);
    }
    test_all_gather(c, TITAN_DTYPE_BF16, uneven, 0, 10);
    if (nr >= 2) test_p2p(c, 65537);
    CHECK(titan_comm_barrier(c, NULL) == TITAN_OK);
    test_requests(c);
    test_usage(c);
    suite_host(c);
    test_split(c);
}

/* One rank: the communicator, then the suite. SKIP when this rank (or,
 * through the agreement, any rank) has no GPU for it. */
static int run_rank(void) {
    titan_dist *d;
    if (titan_dist_init(&d) != TITAN_OK) {
        fprintf(stderr, "bootstrap: %s\n", titan_error_message());
        return 1;
    }
    titan_dist_set_timeout(d, 120);
    me = titan_dist_rank(d);
    nr = titan_dist_world_size(d);
    titan_comm_options opt = {.timeout_s = 120, .name = "world"};
    titan_comm *c = NULL;
    titan_status st = titan_comm_init_nccl(d, -1, &opt, &c);
    if (st == TITAN_ERR_USAGE) {
        printf("no GPU: %s\n", titan_error_message());
        titan_dist_free(d);
        return SKIP;
    }
    CHECK(st == TITAN_OK, "init on %d ranks", nr);
    char dev_name[32];
    snprintf(dev_name, sizeof dev_name, "cuda:%d", titan_dist_local_rank(d));
    if (st == TITAN_OK && titan_backend_open(dev_name, &gpu) == TITAN_OK) {
        CHECK(titan_comm_rank(c) == me && titan_comm_size(c) == nr);
        suite(c);
    } else if (st == TITAN_OK) {
        CHECK(0, "open %s", dev_name);
    }
    titan_comm_free(c);
    if (failures) fprintf(stderr, "rank %d of %d: %d failure(s)\n", me, nr, failures);
    else if (me == 0) printf("suite: %d rank%s: ok\n", nr, nr > 1 ? "s" : "");
    fflush(stdout);
    titan_dist_free(d);
    return failures != 0;
}

int main(int argc, char **argv) {
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "--suite") == 0) return run_rank();
    /* Only dlopen here, no CUDA yet: the launcher is to fork before CUDA
     * and NCCL start their threads. */
    if (!titan_backend_cuda_symbol(TITAN_NCCL_API_SYMBOL)) {
        printf("no GPU: %s\n", titan_error_message());
        return SKIP;
    }
    int codes[2] = {0, 0}, first = 0;
    char *rank_argv[] = {"/proc/self/exe", "--suite", NULL};
    titan_dist_spawn_options o = {.nproc = 2, .grace_s = 10, .exit_codes = codes};
    titan_status st = titan_dist_spawn_local(rank_argv, &o, &first);
    if (codes[0] == SKIP && codes[1] == SKIP)
        printf("2 ranks: skipped (each rank needs its own GPU)\n");
    else
        CHECK(st == TITAN_OK, "2-rank suite: exit codes %d %d", codes[0], codes[1]);
    fflush(stdout);
    int rc = run_rank();
    if (rc == SKIP || failures) return rc == SKIP && !failures ? SKIP : 1;
    return rc;
}
