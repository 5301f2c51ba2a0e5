/* libtitan_mpi.c - libtitan-mpi.so: the MPI calls of the mpi communicator
 * (comm_mpi_api.h), the only code of titan that includes <mpi.h>. Built
 * with mpicc where an MPI is installed (Debian: libopenmpi-dev) and opened
 * by lib/comm/comm_mpi.c on first use; never part of libtitan.a. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_mpi_api.h"

struct titan_mpi_comm {
    MPI_Comm comm;
};

struct titan_mpi_req {
    MPI_Request req;
};

static int fail(int rc, const char *what, char *msg, size_t cap) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    snprintf(msg, cap, "%s: %s", what, s);
    return 1;
}

static int init(int *rank, int *size, char *lib, size_t lib_cap, char *msg, size_t cap) {
    int inited = 0, provided = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Init_thread", msg, cap);
    } else {
        MPI_Query_thread(&provided);
    }
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(v, &vlen);
    char *nl = strchr(v, '\n'); /* the first line: its name and version */
    if (nl) *nl = '\0';
    snprintf(lib, lib_cap, "%s", v);
    if (provided < MPI_THREAD_MULTIPLE) {
        snprintf(msg, cap, "%s grants thread level %d, not MPI_THREAD_MULTIPLE (communicators "
                 "progress on threads of their own)", lib, provided);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

static int wrap(MPI_Comm comm, titan_mpi_comm **out, char *msg, size_t cap) {
    titan_mpi_comm *c = malloc(sizeof *c);
    if (!c) {
        MPI_Comm_free(&comm);
        snprintf(msg, cap, "out of memory");
        return 1;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    c->comm = comm;
    *out = c;
    return 0;
}

static int world(int key, titan_mpi_comm **out, char *msg, size_t cap) {
    MPI_Comm comm;
    *out = NULL;
    int rc = MPI_Comm_split(MPI_COMM_WORLD, 0, key, &comm);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_split of MPI_COMM_WORLD", msg, cap);
    return wrap(comm, out, msg, cap);
}

static int split(titan_mpi_comm *c, int color, int key, titan_mpi_comm **out, int *rank,
                 int *size, char *msg, size_t cap) {
    MPI_Comm comm;
    *out = NULL;
    int rc = MPI_Comm_split(c->comm, color < 0 ? MPI_UNDEFINED : color, key, &comm);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_split", msg, cap);
    if (comm == MPI_COMM_NULL) return 0;
    MPI_Comm_rank(comm, rank);
    MPI_Comm_size(comm, size);
    return wrap(comm, out, msg, cap);
}

static void comm_free(titan_mpi_comm *c) {
    if (!c) return;
    MPI_Comm_free(&c->comm);
    free(c);
}

static int post(int send, titan_mpi_comm *c, void *buf, size_t bytes, int peer, int tag,
                titan_mpi_req **out, char *msg, size_t cap) {
    *out = NULL;
    if (bytes > TITAN_MPI_MSG_MAX) {
        snprintf(msg, cap, "a message of %zu bytes (at most %zu)", bytes, TITAN_MPI_MSG_MAX);
        return 1;
    }
    titan_mpi_req *r = malloc(sizeof *r);
    if (!r) {
        snprintf(msg, cap, "out of memory");
        return 1;
    }
    int rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->comm, &r->req)
                  : MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer < 0 ? MPI_ANY_SOURCE : peer, tag,
                              c->comm, &r->req);
    if (rc != MPI_SUCCESS) {
        free(r);
        return fail(rc, send ? "MPI_Isend" : "MPI_Irecv", msg, cap);
    }
    *out = r;
    return 0;
}

static int isend(titan_mpi_comm *c, const void *buf, size_t bytes, int peer, int tag,
                 titan_mpi_req **out, char *msg, size_t cap) {
    return post(1, c, (void *)buf, bytes, peer, tag, out, msg, cap);
}

static int irecv(titan_mpi_comm *c, void *buf, size_t bytes, int peer, int tag,
                 titan_mpi_req **out, char *msg, size_t cap) {
    return post(0, c, buf, bytes, peer, tag, out, msg, cap);
}

static int test(titan_mpi_req **r, size_t *bytes, int *source, char *msg, size_t cap) {
    int done = 0;
    MPI_Status status;
    int rc = MPI_Test(&(*r)->req, &done, &status);
    if (rc == MPI_SUCCESS && !done) return 0;
    free(*r);
    *r = NULL;
    if (rc != MPI_SUCCESS) {
        if (rc == MPI_ERR_IN_STATUS) rc = status.MPI_ERROR;
        fail(rc, "MPI_Test", msg, cap);
        return -1;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (bytes) *bytes = count < 0 ? 0 : (size_t)count;
    if (source) *source = status.MPI_SOURCE;
    return 1;
}

static void cancel(titan_mpi_req **r) {
    if (!*r) return;
    MPI_Cancel(&(*r)->req);
    MPI_Wait(&(*r)->req, MPI_STATUS_IGNORE);
    free(*r);
    *r = NULL;
}

static void finalize(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Finalize();
}

static const titan_mpi_api API = {
    sizeof(titan_mpi_api), init, world, split, comm_free, isend, irecv, test, cancel, finalize,
};

__attribute__((visibility("default"))) const titan_mpi_api *titan_mpi_table(void) { return &API; }
