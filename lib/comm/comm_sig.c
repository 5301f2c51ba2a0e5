/* comm_sig.c - a collective's signature (comm_impl.h): what every rank's
 * call must agree on, compared before any data moves (shm in shared
 * memory, mpi in a message), and the words that describe it in errors. */
#include <stdio.h>
#include <string.h>

#include "comm_impl.h"

static uint64_t hash_counts(const size_t *counts, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int r = 0; r < n; r++) h = (h ^ (uint64_t)counts[r]) * 1099511628211ull;
    return h;
}

comm_sig comm_sig_of(const comm_op *op, uint64_t seq, int n) {
    comm_sig g;
    memset(&g, 0, sizeof g);
    g.seq = seq;
    g.kind = (uint32_t)op->kind;
    g.dtype = op->kind == COMM_BARRIER || op->kind == COMM_SPLIT ? 0 : (uint32_t)op->dtype;
    g.redop = (op->kind == COMM_ALL_REDUCE || op->kind == COMM_REDUCE_SCATTER) ? (uint32_t)op->redop : 0;
    g.root = op->kind == COMM_BROADCAST ? op->peer : -1;
    g.count = op->kind == COMM_SPLIT ? 0 : op->count;
    if (op->counts) {
        g.count = 0;
        for (int r = 0; r < n; r++) g.count += op->counts[r];
        g.counts_hash = hash_counts(op->counts, n);
    }
    return g;
}

void comm_sig_describe(const comm_sig *g, char *buf, size_t cap) {
    const char *k = comm_kind_name((comm_kind)g->kind), *dt = titan_dtype_name((titan_dtype)g->dtype);
    unsigned long long seq = (unsigned long long)g->seq, count = (unsigned long long)g->count;
    switch ((comm_kind)g->kind) {
    case COMM_ALL_REDUCE:
        snprintf(buf, cap, "%s #%llu (%s x %llu, %s)", k, seq, dt, count,
                 titan_comm_redop_name((titan_comm_redop)g->redop));
        break;
    case COMM_REDUCE_SCATTER:
        snprintf(buf, cap, "%s #%llu (%s x %llu in all, %s)", k, seq, dt, count,
                 titan_comm_redop_name((titan_comm_redop)g->redop));
        break;
    case COMM_ALL_GATHER: snprintf(buf, cap, "%s #%llu (%s x %llu in all)", k, seq, dt, count); break;
    case COMM_ALL_TO_ALL:
        snprintf(buf, cap, "%s #%llu (%s x %llu per rank)", k, seq, dt, count);
        break;
    case COMM_BROADCAST:
        snprintf(buf, cap, "%s #%llu (%s x %llu from rank %d)", k, seq, dt, count, (int)g->root);
        break;
    default: snprintf(buf, cap, "%s #%llu", k, seq); break;
    }
}

void comm_describe_op(const comm_op *op, uint64_t seq, int size, char *buf, size_t cap) {
    comm_sig g = comm_sig_of(op, seq, size);
    comm_sig_describe(&g, buf, cap);
}
