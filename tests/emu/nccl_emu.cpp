/* nccl_emu.cpp - the NCCL calls of kernels/comm_nccl.cu on the host, between
 * the rank processes of one machine, for libtitan-cuda-emu.so (cuda_emu.h):
 * with it the nccl communicator (lib/comm/comm_nccl.c + comm_nccl.cu) and
 * titan-train's data parallelism over NCCL run without a GPU.
 * <nccl.h> declares every function, so the compiler checks each definition
 * against the real API.
 *
 * A communicator is a POSIX shared memory segment named by its unique id
 * (ncclGetUniqueId makes the name; a split derives its children's names
 * from the parent's and a per-parent split counter): a barrier, a 1 MiB
 * slot per rank for collectives, and a 1 MiB mailbox per ordered pair of
 * ranks for send/recv. Every call completes before it returns (a
 * non-blocking communicator may do so), so streams and events need no
 * emulation. Calls between ncclGroupStart and ncclGroupEnd are queued and
 * run at ncclGroupEnd in order: a collective chunk by chunk (publish to the
 * own slot, barrier, combine every rank's slot in rank order, barrier), a
 * run of sends and receives together, each moving a chunk whenever its
 * mailbox allows, so a group whose ranks send to each other first does not
 * deadlock. Sums run in rank order in the type's arithmetic (fp32 for
 * bf16 and fp16, rounded once), so results repeat run to run.
 *
 * Limits: one machine (or hosts that share TITAN_EMU_NCCL_DIR); a wait
 * longer than TITAN_EMU_NCCL_TIMEOUT seconds (default 120) or a peer's
 * ncclCommAbort ends the call with ncclRemoteError; a rank that dies mid-collective leaves the others to
 * that timeout. Not modelled: NCCL's own algorithms, channels, its summation
 * order, ncclInProgress (never returned). */
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <nccl.h>

#include "cuda_emu.h"

namespace {
enum { MAX_RANKS = 16 };
constexpr size_t CHUNK = 1 << 20;

struct Mailbox {
    std::atomic<int> full; /* 1: bytes of data wait for the receiver */
    size_t bytes, total;   /* this chunk's, and the whole message's */
};

struct Shared {
    std::atomic<int> attached, aborted;
    std::atomic<unsigned> bar_count, bar_gen;
    int color_key[MAX_RANKS][2]; /* ncclCommSplit's exchange */
    Mailbox box[MAX_RANKS][MAX_RANKS]; /* [from][to] */
};

size_t segment_bytes(int n) {
    return sizeof(Shared) + (size_t)n * CHUNK + (size_t)n * n * CHUNK;
}

struct Op {
    enum Kind { ALL_REDUCE, REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, SEND, RECV } kind;
    const unsigned char *send;
    unsigned char *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t red;
    int peer; /* root, or the other rank */
};

thread_local int g_group_depth;
thread_local std::vector<std::pair<ncclComm_t, Op>> g_group;

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double timeout_s() {
    const char *e = getenv("TITAN_EMU_NCCL_TIMEOUT");
    return e && *e ? atof(e) : 120.0;
}

void pause_step(long i) {
    if (i < 1000) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, nullptr);
}

size_t type_bytes(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

template <typename T, typename A>
void combine_as(unsigned char *out, const unsigned char *const *in, int n, size_t count,
                ncclRedOp_t red, A (*get)(T), T (*put)(A)) {
    for (size_t i = 0; i < count; i++) {
        T v;
        memcpy(&v, in[0] + i * sizeof(T), sizeof v);
        A acc = get(v);
        for (int r = 1; r < n; r++) {
            memcpy(&v, in[r] + i * sizeof(T), sizeof v);
            const A x = get(v);
            switch (red) {
            case ncclProd: acc = acc * x; break;
            case ncclMax: acc = x > acc ? x : acc; break;
            case ncclMin: acc = x < acc ? x : acc; break;
            default: acc = acc + x; break; /* sum, avg */
            }
        }
        if (red == ncclAvg) acc = acc / (A)n;
        v = put(acc);
        memcpy(out + i * sizeof(T), &v, sizeof v);
    }
}

template <typename T>
T same(T x) { return x; }
float bf16_get(__nv_bfloat16 x) { return __bfloat162float(x); }
__nv_bfloat16 bf16_put(float x) { return __float2bfloat16_rn(x); }
float f16_get(__half x) { return __half2float(x); }
__half f16_put(float x) { return __float2half_rn(x); }

/* out = red over the n inputs, elementwise */
bool combine(unsigned char *out, const unsigned char *const *in, int n, size_t count,
             ncclDataType_t t, ncclRedOp_t red) {
    switch (t) {
    case ncclFloat32: combine_as<float, float>(out, in, n, count, red, same, same); return true;
    case ncclFloat64: combine_as<double, double>(out, in, n, count, red, same, same); return true;
    case ncclBfloat16:
        combine_as<__nv_bfloat16, float>(out, in, n, count, red, bf16_get, bf16_put);
        return true;
    case ncclFloat16:
        combine_as<__half, float>(out, in, n, count, red, f16_get, f16_put);
        return true;
    case ncclInt32: combine_as<int32_t, int32_t>(out, in, n, count, red, same, same); return true;
    case ncclUint32:
        combine_as<uint32_t, uint32_t>(out, in, n, count, red, same, same);
        return true;
    case ncclInt64: combine_as<int64_t, int64_t>(out, in, n, count, red, same, same); return true;
    case ncclUint64:
        combine_as<uint64_t, uint64_t>(out, in, n, count, red, same, same);
        return true;
    case ncclUint8: combine_as<uint8_t, uint8_t>(out, in, n, count, red, same, same); return true;
    case ncclInt8: combine_as<int8_t, int8_t>(out, in, n, count, red, same, same); return true;
    default: return false;
    }
}
} /* namespace */

struct ncclComm {
    std::string name;
    int rank, size;
    Shared *sh;
    unsigned char *slots; /* size x CHUNK, then size x size mailboxes' data */
    unsigned splits;      /* children made so far: names the next one */
    ncclResult_t error;
    std::string last;

    unsigned char *slot(int r) { return slots + (size_t)r * CHUNK; }
    unsigned char *box_data(int from, int to) {
        return slots + (size_t)size * CHUNK + ((size_t)from * size + to) * CHUNK;
    }
    ncclResult_t fail(const char *why) {
        last = why;
        error = ncclRemoteError;
        return error;
    }
    /* every rank of the communicator meets here; false on timeout or abort */
    bool barrier() {
        const double deadline = now_s() + timeout_s();
        const unsigned gen = sh->bar_gen.load();
        if (sh->bar_count.fetch_add(1) + 1 == (unsigned)size) {
            sh->bar_count.store(0);
            sh->bar_gen.fetch_add(1);
            return true;
        }
        for (long i = 0; sh->bar_gen.load() == gen; i++) {
            if (sh->aborted.load() || now_s() > deadline) return false;
            pause_step(i);
        }
        return true;
    }
};

namespace {
/* publishes n bytes at src (device memory, or nothing) into this rank's slot */
void publish(ncclComm_t c, const unsigned char *src, size_t n) {
    if (!src || !n) return;
    emu::DeviceScope scope;
    memcpy(c->slot(c->rank), src, n);
}

ncclResult_t run_collective(ncclComm_t c, const Op &o) {
    const size_t es = type_bytes(o.type), per = CHUNK / es;
    const int n = c->size, me = c->rank;
    std::vector<const unsigned char *> in(n);
    for (int r = 0; r < n; r++) in[r] = c->slot(r);
    std::vector<unsigned char> tmp(CHUNK);
    /* segments: REDUCE_SCATTER reduces segment q of every rank's input into
     * rank q's output; the others have one */
    const int segments = o.kind == Op::REDUCE_SCATTER ? n : 1;
    for (int q = 0; q < segments; q++)
        for (size_t at = 0; at < o.count; at += per) {
            const size_t k = o.count - at < per ? o.count - at : per, bytes = k * es;
            const size_t src_at = (o.kind == Op::REDUCE_SCATTER ? q * o.count + at : at) * es;
            switch (o.kind) {
            case Op::BROADCAST:
                if (me == o.peer) publish(c, o.send + src_at, bytes);
                break;
            default: publish(c, o.send + src_at, bytes); break;
            }
            if (!c->barrier()) return c->fail("a peer did not arrive (timeout or abort)");
            {
                emu::DeviceScope scope;
                switch (o.kind) {
                case Op::ALL_REDUCE:
                    if (!combine(tmp.data(), in.data(), n, k, o.type, o.red))
                        return ncclInvalidArgument;
                    memcpy(o.recv + at * es, tmp.data(), bytes);
                    break;
                case Op::REDUCE:
                case Op::REDUCE_SCATTER:
                    if (me == (o.kind == Op::REDUCE ? o.peer : q)) {
                        if (!combine(tmp.data(), in.data(), n, k, o.type, o.red))
                            return ncclInvalidArgument;
                        memcpy(o.recv + at * es, tmp.data(), bytes);
                    }
                    break;
                case Op::ALL_GATHER:
                    for (int r = 0; r < n; r++)
                        memcpy(o.recv + (r * o.count + at) * es, in[r], bytes);
                    break;
                case Op::BROADCAST: memcpy(o.recv + at * es, in[o.peer], bytes); break;
                default: break;
                }
            }
            if (!c->barrier()) return c->fail("a peer did not arrive (timeout or abort)");
        }
    return ncclSuccess;
}

/* Sends and receives together: each moves a chunk whenever its mailbox
 * allows. Operations on one (communicator, direction, peer) go in issue
 * order, as NCCL matches them; a send is done when its last chunk has been
 * taken (an unmatched send never completes, as on NCCL). */
ncclResult_t run_p2p(std::vector<std::pair<ncclComm_t, Op>> &ops, size_t first, size_t end) {
    std::vector<size_t> done(end - first, 0);
    std::vector<char> finished(end - first, 0);
    const double deadline = now_s() + timeout_s();
    for (long spin = 0;; spin++) {
        bool all = true, moved = false;
        for (size_t i = first; i < end; i++) {
            if (finished[i - first]) continue;
            all = false;
            ncclComm_t c = ops[i].first;
            const Op &o = ops[i].second;
            bool behind = false; /* an earlier unfinished op on the same channel */
            for (size_t j = first; j < i && !behind; j++)
                behind = !finished[j - first] && ops[j].first == c &&
                         ops[j].second.kind == o.kind && ops[j].second.peer == o.peer;
            if (behind) continue;
            const size_t total = o.count * type_bytes(o.type);
            if (total == 0) { /* nothing to move */
                finished[i - first] = 1, moved = true;
                continue;
            }
            size_t &d = done[i - first];
            const int from = o.kind == Op::SEND ? c->rank : o.peer;
            const int to = o.kind == Op::SEND ? o.peer : c->rank;
            Mailbox &mb = c->sh->box[from][to];
            const size_t k = total - d < CHUNK ? total - d : CHUNK;
            if (o.kind == Op::SEND && d >= total) {
                if (!mb.full.load()) finished[i - first] = 1, moved = true; /* taken */
            } else if (o.kind == Op::SEND && !mb.full.load()) {
                emu::DeviceScope scope;
                memcpy(c->box_data(from, to), o.send + d, k);
                mb.bytes = k;
                mb.total = total;
                mb.full.store(1);
                d += k, moved = true;
            } else if (o.kind == Op::RECV && mb.full.load()) {
                if (mb.total != total || mb.bytes != k)
                    return c->fail("send and recv sizes differ");
                emu::DeviceScope scope;
                memcpy(o.recv + d, c->box_data(from, to), k);
                mb.full.store(0);
                d += k, moved = true;
                if (d >= total) finished[i - first] = 1;
            }
        }
        if (all) return ncclSuccess;
        if (!moved) {
            for (size_t i = first; i < end; i++)
                if (ops[i].first->sh->aborted.load() || now_s() > deadline)
                    return ops[i].first->fail("a peer did not arrive (timeout or abort)");
            pause_step(spin);
        }
    }
}

ncclResult_t run_group(std::vector<std::pair<ncclComm_t, Op>> &ops) {
    for (size_t i = 0; i < ops.size();) {
        const bool p2p = ops[i].second.kind == Op::SEND || ops[i].second.kind == Op::RECV;
        size_t j = i + 1;
        while (p2p && j < ops.size() &&
               (ops[j].second.kind == Op::SEND || ops[j].second.kind == Op::RECV))
            j++;
        const ncclResult_t r =
            p2p ? run_p2p(ops, i, j) : run_collective(ops[i].first, ops[i].second);
        if (r != ncclSuccess) return r;
        i = j;
    }
    return ncclSuccess;
}

/* checks the arguments, then queues (in a group) or runs the operation */
ncclResult_t submit(ncclComm_t c, const Op &o) {
    if (!c || !c->sh) return ncclInvalidArgument;
    if (c->error != ncclSuccess) return c->error;
    if (!type_bytes(o.type)) return ncclInvalidArgument;
    const bool rooted = o.kind == Op::REDUCE || o.kind == Op::BROADCAST || o.kind == Op::SEND ||
                        o.kind == Op::RECV;
    if (rooted && (o.peer < 0 || o.peer >= c->size)) return ncclInvalidArgument;
    const size_t es = type_bytes(o.type), n = (size_t)c->size;
    size_t send_n = o.count, recv_n = o.count;
    if (o.kind == Op::REDUCE_SCATTER) send_n = o.count * n;
    if (o.kind == Op::ALL_GATHER) recv_n = o.count * n;
    const bool sends = o.kind != Op::RECV && !(o.kind == Op::BROADCAST && c->rank != o.peer);
    const bool recvs = o.kind != Op::SEND && !(o.kind == Op::REDUCE && c->rank != o.peer);
    if (o.count && sends) emu::check_device(o.send, send_n * es, "nccl send buffer");
    if (o.count && recvs) emu::check_device(o.recv, recv_n * es, "nccl recv buffer");
    g_group.emplace_back(c, o);
    if (g_group_depth > 0) return ncclSuccess;
    std::vector<std::pair<ncclComm_t, Op>> ops;
    ops.swap(g_group);
    return run_group(ops);
}

/* TITAN_EMU_NCCL_DIR: segments are files there instead of POSIX shared
 * memory, so that ranks on "hosts" that share no /dev/shm but see one
 * directory (tests/cli/dist_2node.sh's namespaces) can still form a
 * communicator; the ids still travel through titan's PMIx bootstrap. */
std::string segment_path(const std::string &name) {
    const char *dir = getenv("TITAN_EMU_NCCL_DIR");
    return dir && *dir ? std::string(dir) + name : name;
}

int open_segment(const std::string &name) {
    const char *dir = getenv("TITAN_EMU_NCCL_DIR");
    if (dir && *dir) return open(segment_path(name).c_str(), O_RDWR | O_CREAT, 0600);
    return shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
}

void unlink_segment(const std::string &name) {
    const char *dir = getenv("TITAN_EMU_NCCL_DIR");
    if (dir && *dir) unlink(segment_path(name).c_str());
    else shm_unlink(name.c_str());
}

/* the segment of name for n ranks, mapped; nullptr on failure */
Shared *attach(const std::string &name, int n) {
    const int fd = open_segment(name);
    if (fd < 0) return nullptr;
    const size_t bytes = segment_bytes(n);
    void *p = ftruncate(fd, (off_t)bytes) == 0
                  ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    close(fd);
    return p == MAP_FAILED ? nullptr : (Shared *)p;
}

/* rank `rank` of n joins the communicator called name */
ncclResult_t join(ncclComm_t *out, const std::string &name, int n, int rank) {
    *out = nullptr;
    if (n < 1 || n > MAX_RANKS || rank < 0 || rank >= n) return ncclInvalidArgument;
    Shared *sh = attach(name, n);
    if (!sh) return ncclSystemError;
    ncclComm_t c = new ncclComm{name, rank, n, sh, (unsigned char *)(sh + 1), 0, ncclSuccess, ""};
    sh->attached.fetch_add(1);
    const double deadline = now_s() + timeout_s();
    for (long i = 0; sh->attached.load() < n; i++) {
        if (now_s() > deadline) {
            *out = c;
            return c->fail("not every rank joined (timeout)");
        }
        pause_step(i);
    }
    if (!c->barrier()) {
        *out = c;
        return c->fail("not every rank joined (timeout)");
    }
    if (rank == 0) unlink_segment(name); /* every rank has it mapped */
    *out = c;
    return ncclSuccess;
}
} /* namespace */

/* ----------------------------------------------------------- the NCCL API */

ncclResult_t ncclGetVersion(int *version) {
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    static std::atomic<unsigned> serial;
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "/titan-nccl-emu-%d-%ld-%u", (int)getpid(),
             (long)(now_s() * 1e6), serial.fetch_add(1));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *) {
    id.internal[sizeof id.internal - 1] = '\0';
    if (id.internal[0] != '/') return ncclInvalidArgument;
    return join(comm, id.internal, nranks, rank);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *) {
    *newcomm = nullptr;
    if (!comm || !comm->sh) return ncclInvalidArgument;
    comm->sh->color_key[comm->rank][0] = color;
    comm->sh->color_key[comm->rank][1] = key;
    if (!comm->barrier()) return comm->fail("a peer did not arrive at the split");
    int pos = 0, count = 0;
    for (int r = 0; r < comm->size; r++) {
        const int *ck = comm->sh->color_key[r];
        if (color == NCCL_SPLIT_NOCOLOR || ck[0] != color) continue;
        count++;
        if (ck[1] < key || (ck[1] == key && r < comm->rank)) pos++;
    }
    const unsigned serial = comm->splits++;
    if (!comm->barrier()) return comm->fail("a peer did not arrive at the split");
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    /* POSIX shm names stay short: nested splits hash the parent's name */
    char child[64];
    snprintf(child, sizeof child, "/titan-nccl-emu-%016llx-s%u-c%d",
             (unsigned long long)std::hash<std::string>()(comm->name), serial, color);
    return join(newcomm, child, count, pos);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
    *async_error = comm ? comm->error : ncclInvalidArgument;
    return ncclSuccess;
}

const char *ncclGetLastError(ncclComm_t comm) { return comm ? comm->last.c_str() : ""; }

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }

static ncclResult_t release(ncclComm_t comm, bool aborting) {
    if (!comm) return ncclSuccess;
    if (comm->sh) {
        if (aborting) comm->sh->aborted.store(1); /* the peers' waits end now */
        munmap(comm->sh, segment_bytes(comm->size));
    }
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release(comm, false); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return release(comm, true); }

ncclResult_t ncclGroupStart() {
    g_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (g_group_depth == 0) return ncclInvalidUsage;
    if (--g_group_depth > 0) return ncclSuccess;
    std::vector<std::pair<ncclComm_t, Op>> ops;
    ops.swap(g_group);
    return run_group(ops);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
    return submit(comm, {Op::ALL_REDUCE, (const unsigned char *)send, (unsigned char *)recv, count,
                         t, op, 0});
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t) {
    return submit(comm, {Op::REDUCE, (const unsigned char *)send, (unsigned char *)recv, count, t,
                         op, root});
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
    return submit(comm, {Op::REDUCE_SCATTER, (const unsigned char *)send, (unsigned char *)recv,
                         recvcount, t, op, 0});
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t) {
    return submit(comm, {Op::ALL_GATHER, (const unsigned char *)send, (unsigned char *)recv,
                         sendcount, t, ncclSum, 0});
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t) {
    return submit(comm, {Op::BROADCAST, (const unsigned char *)send, (unsigned char *)recv, count,
                         t, ncclSum, root});
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t) {
    return submit(comm, {Op::SEND, (const unsigned char *)send, nullptr, count, t, ncclSum, peer});
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t) {
    return submit(comm, {Op::RECV, nullptr, (unsigned char *)recv, count, t, ncclSum, peer});
}
