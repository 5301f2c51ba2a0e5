/* sync_trace.c - an LD_PRELOAD shim for the durability test (not part of
 * titan): it records the calls that decide what survives a power loss (the
 * writes, the syncs, the name changes) in $SYNC_TRACE_DIR/trace.PID, one
 * line per call, for tests/durability/check_sync.py. Built by the Makefile
 * into build/tests/sync_trace.so; tests/cli/durability.sh runs the tools
 * under it.
 *
 * A line: "T PID TID OP RET ERRNO FIELDS..." (key=value fields, paths) where
 * T is CLOCK_MONOTONIC in
 * ns taken when the call returned (a call that causally precedes another,
 * in any thread or process, returns before the other starts, so sorting on
 * T keeps every order that matters); paths are absolute, fd-based calls
 * name their file by /proc/self/fd (so a file renamed since it was opened
 * is named by its present name) and are left out when the fd is not a
 * file or directory. Each line is one write(2) to an O_APPEND file: lines
 * of several threads never interleave, and each process (--nproc ranks,
 * the launcher) has its own file, reopened after a fork.
 *
 * Writes of at most 64 bytes carry their bytes in hex (data=), and so do
 * opens of files of at most 64 bytes, so the checker can read what a small
 * file such as `latest` says, also one written before the trace. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 3072
#define DATA_BYTES 64

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static pid_t log_pid;
static __thread int inside; /* our own calls (realpath, readlink) are not recorded */

/* The real function behind name (resolved once per call site). */
#define REAL(type, name) \
    static __typeof__(type) real_##name; \
    if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* This process's log, opened on first use and again after a fork; -1 when
 * SYNC_TRACE_DIR is unset. */
static int trace_fd(void) {
    pid_t pid = getpid();
    if (log_fd >= 0 && log_pid == pid) return log_fd;
    const char *dir = getenv("SYNC_TRACE_DIR");
    if (!dir || !*dir) return -1;
    pthread_mutex_lock(&open_lock);
    if (log_fd < 0 || log_pid != pid) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/trace.%d", dir, (int)pid);
        /* the inherited descriptor is the parent's: leave it to the parent */
        log_fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        log_pid = pid;
    }
    pthread_mutex_unlock(&open_lock);
    return log_fd;
}

static void emit(const char *op, long ret, int err, const char *fmt, ...) {
    int fd = trace_fd();
    if (fd < 0) return;
    char line[LINE_MAX_BYTES];
    int k = snprintf(line, sizeof line, "%lld %d %ld %s %ld %d ", now_ns(), (int)getpid(),
                     (long)syscall(SYS_gettid), op, ret, ret < 0 ? err : 0);
    va_list ap;
    va_start(ap, fmt);
    k += vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    va_end(ap);
    if (k >= (int)sizeof line - 1) k = (int)sizeof line - 2;
    line[k++] = '\n';
    syscall(SYS_write, fd, line, (size_t)k); /* not write(): that one is ours */
}

/* Paths with spaces would split the line: they become '?' (titan's own
 * checkpoint paths have none). */
static void clean(char *p) {
    for (; *p; p++)
        if (*p == ' ' || *p == '\n') *p = '?';
}

/* The absolute path of fd's file; 0 when fd is no file or directory (a pipe,
 * a socket, /dev, /proc, shared memory). */
static int fd_path(int fd, char *out, size_t cap) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n <= 0 || out[0] != '/') return 0;
    out[n] = '\0';
    if (!strncmp(out, "/dev/", 5) || !strncmp(out, "/proc/", 6) || !strncmp(out, "/sys/", 5)) return 0;
    clean(out);
    return 1;
}

/* path made absolute without following its last component (which a rename
 * or unlink names, and which may not exist): the directory part is
 * resolved (realpath), relative to dirfd when not absolute. */
static void abs_path(int dirfd, const char *path, char *out, size_t cap) {
    char base[PATH_MAX], joined[2 * PATH_MAX + 2];
    if (!path) path = "";
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%s", path);
    } else {
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) snprintf(base, sizeof base, "?");
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0) n = 0;
            base[n] = '\0';
        }
        snprintf(joined, sizeof joined, "%s/%s", base, path);
    }
    size_t n = strlen(joined);
    while (n > 1 && joined[n - 1] == '/') joined[--n] = '\0';
    char *slash = strrchr(joined, '/');
    char dir[PATH_MAX];
    const char *name = slash ? slash + 1 : joined;
    if (slash && slash != joined) {
        *slash = '\0';
        if (!realpath(joined, dir)) snprintf(dir, sizeof dir, "%s", joined);
    } else {
        snprintf(dir, sizeof dir, "%s", slash ? "" : ".");
    }
    size_t ld = strnlen(dir, cap - 2), ln = strlen(name);
    if (ld + 1 + ln >= cap) ln = cap - 2 - ld; /* cut: such paths are not titan's */
    memcpy(out, dir, ld);
    out[ld] = '/';
    memcpy(out + ld + 1, name, ln);
    out[ld + 1 + ln] = '\0';
    clean(out);
}

/* "dev:ino type=d|f" of what fd names (a directory or not; "-" when it
 * cannot be told), or "dev:ino" of what path names. */
static void fd_ino(int fd, char *out, size_t cap) {
    struct stat sb;
    if (fstat(fd, &sb) == 0)
        snprintf(out, cap, "%lu:%lu type=%c", (unsigned long)sb.st_dev, (unsigned long)sb.st_ino,
                 S_ISDIR(sb.st_mode) ? 'd' : 'f');
    else snprintf(out, cap, "- type=-");
}
static void path_ino(const char *path, char *out, size_t cap) {
    struct stat sb;
    if (lstat(path, &sb) == 0) snprintf(out, cap, "%lu:%lu", (unsigned long)sb.st_dev, (unsigned long)sb.st_ino);
    else snprintf(out, cap, "-");
}

/* ---- recording ---- */

static void rec_fd(const char *op, long ret, int err, int fd) {
    char p[PATH_MAX], ino[64];
    if (inside || !fd_path(fd, p, sizeof p)) return;
    inside = 1;
    fd_ino(fd, ino, sizeof ino);
    emit(op, ret, err, "fd=%d ino=%s %s", fd, ino, p);
    inside = 0;
}

static void rec_write(long ret, int err, int fd, const void *buf, size_t n, long long off) {
    char p[PATH_MAX], ino[64];
    if (inside || !fd_path(fd, p, sizeof p)) return;
    inside = 1;
    char hex[2 * DATA_BYTES + 1] = "-";
    if (buf && n > 0 && n <= DATA_BYTES && ret > 0) {
        const unsigned char *b = buf;
        for (size_t i = 0; i < (size_t)ret; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
    }
    int fl = fcntl(fd, F_GETFL);
    int osync = fl >= 0 && (fl & (O_SYNC | O_DSYNC)) != 0;
    fd_ino(fd, ino, sizeof ino);
    emit("write", ret, err, "fd=%d ino=%s %s off=%lld osync=%d data=%s", fd, ino, p, off, osync, hex);
    inside = 0;
}

/* existed: whether path was there before an O_CREAT open (-1: not asked). */
static void rec_open(long ret, int err, int dirfd, const char *path, int flags, int existed) {
    if (inside) return;
    inside = 1;
    char p[PATH_MAX], ino[64];
    if (ret >= 0 && fd_path((int)ret, p, sizeof p)) {
        fd_ino((int)ret, ino, sizeof ino);
        /* a small file opened to read: what it says (`latest`, written before the trace) */
        char hex[2 * DATA_BYTES + 1] = "-";
        struct stat sb;
        unsigned char b[DATA_BYTES];
        if ((flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC) && fstat((int)ret, &sb) == 0 &&
            S_ISREG(sb.st_mode) && sb.st_size > 0 && sb.st_size <= DATA_BYTES) {
            ssize_t k = pread((int)ret, b, sizeof b, 0);
            for (ssize_t i = 0; i < k; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
        }
        emit("open", ret, err, "fd=%ld ino=%s %s flags=%#x new=%d data=%s", ret, ino, p, flags,
             (flags & O_CREAT) ? !existed : 0, hex);
    } else if (ret < 0 && (flags & O_CREAT)) {
        abs_path(dirfd, path, p, sizeof p);
        emit("open", ret, err, "fd=-1 ino=- %s flags=%#x new=0", p, flags);
    }
    inside = 0;
}

static int exists_at(int dirfd, const char *path) {
    return faccessat(dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static void rec_path(const char *op, long ret, int err, int dirfd, const char *path) {
    if (inside) return;
    inside = 1;
    char p[PATH_MAX], ino[64];
    abs_path(dirfd, path, p, sizeof p);
    path_ino(p, ino, sizeof ino);
    emit(op, ret, err, "ino=%s %s", ino, p);
    inside = 0;
}

/* After the call: ino is what `to` names now (the moved one), ino2 what
 * `from` names (after an exchange, the other one). */
static void rec_rename(long ret, int err, int fromfd, const char *from, int tofd, const char *to,
                       unsigned flags) {
    if (inside) return;
    inside = 1;
    char a[PATH_MAX], b[PATH_MAX], ia[64], ib[64];
    abs_path(fromfd, from, a, sizeof a);
    abs_path(tofd, to, b, sizeof b);
    path_ino(b, ib, sizeof ib);
    path_ino(a, ia, sizeof ia);
    emit("rename", ret, err, "ino=%s ino2=%s %s %s flags=%u", ib, ia, a, b, flags);
    inside = 0;
}

/* SYNC_TRACE_DROP=SUFFIX: an fsync or fdatasync of a file whose path ends
 * with SUFFIX does nothing and says it succeeded, as if the call were not
 * in the code (the test shows the checker catches it); a "dropped" line
 * says it happened. */
static int dropped(const char *op, int fd) {
    const char *suffix = getenv("SYNC_TRACE_DROP");
    char p[PATH_MAX];
    if (inside || !suffix || !*suffix || !fd_path(fd, p, sizeof p)) return 0;
    size_t n = strlen(p), m = strlen(suffix);
    if (n < m || strcmp(p + n - m, suffix) != 0) return 0;
    inside = 1;
    emit("dropped", 0, 0, "fd=%d ino=- %s %s", fd, p, op);
    inside = 0;
    return 1;
}

/* ---- the calls ---- */

static int open_common(const char *op, int dirfd, const char *path, int flags, mode_t mode) {
    REAL(int (*)(int, const char *, int, ...), openat);
    int existed = (flags & O_CREAT) && !inside ? exists_at(dirfd, path) : -1;
    int r = real_openat(dirfd, path, flags, mode);
    int e = errno;
    (void)op;
    rec_open(r, e, dirfd, path, flags, existed);
    errno = e;
    return r;
}

#define MODE_ARG(flags) \
    mode_t mode = 0; \
    if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
        va_list ap; \
        va_start(ap, flags); \
        mode = va_arg(ap, mode_t); \
        va_end(ap); \
    }

int open(const char *path, int flags, ...) {
    MODE_ARG(flags);
    return open_common("open", AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    MODE_ARG(flags);
    return open_common("open", AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags);
    return open_common("open", dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags);
    return open_common("open", dirfd, path, flags, mode);
}
/* _FORTIFY_SOURCE's forms of a two-argument open */
int __open_2(const char *path, int flags) { return open_common("open", AT_FDCWD, path, flags, 0); }
int __open64_2(const char *path, int flags) { return open_common("open", AT_FDCWD, path, flags, 0); }
int __openat_2(int dirfd, const char *path, int flags) { return open_common("open", dirfd, path, flags, 0); }
int __openat64_2(int dirfd, const char *path, int flags) { return open_common("open", dirfd, path, flags, 0); }
int creat(const char *path, mode_t mode) {
    return open_common("open", AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}
int creat64(const char *path, mode_t mode) {
    return open_common("open", AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

/* fopen's own open is inside libc, out of reach: recorded here, with the
 * flags its mode implies. */
static int mode_flags(const char *m) {
    int f = m[0] == 'r' ? 0 : m[0] == 'w' ? O_CREAT | O_TRUNC : O_CREAT | O_APPEND;
    if (strchr(m, 'x')) f |= O_EXCL;
    return f | (strchr(m, '+') ? O_RDWR : m[0] == 'r' ? O_RDONLY : O_WRONLY);
}
static FILE *fopen_common(const char *sym, const char *path, const char *m) {
    FILE *(*real)(const char *, const char *) = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, sym);
    int flags = mode_flags(m);
    int existed = (flags & O_CREAT) && !inside ? exists_at(AT_FDCWD, path) : -1;
    FILE *f = real(path, m);
    int e = errno;
    rec_open(f ? fileno(f) : -1, e, AT_FDCWD, path, flags, existed);
    errno = e;
    return f;
}
FILE *fopen(const char *path, const char *m) { return fopen_common("fopen", path, m); }
FILE *fopen64(const char *path, const char *m) { return fopen_common("fopen64", path, m); }

/* A stream's buffered bytes reach the file at its fflush or fclose (libc's
 * own write, out of reach): either records a write when bytes were
 * pending. fwrite and friends are not recorded themselves. */
static void rec_pending(FILE *f, int fd) {
    if (f && __fpending(f) > 0) rec_write((long)__fpending(f), 0, fd, NULL, __fpending(f), -1);
}
int fflush(FILE *f) {
    REAL(int (*)(FILE *), fflush);
    if (f) rec_pending(f, fileno(f));
    return real_fflush(f);
}
int fclose(FILE *f) {
    REAL(int (*)(FILE *), fclose);
    int fd = fileno(f);
    rec_pending(f, fd);
    rec_fd("close", 0, 0, fd);
    return real_fclose(f);
}

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(ssize_t (*)(int, const void *, size_t), write);
    ssize_t r = real_write(fd, buf, n);
    int e = errno;
    rec_write(r, e, fd, buf, n, -1);
    errno = e;
    return r;
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(ssize_t (*)(int, const void *, size_t, off_t), pwrite);
    ssize_t r = real_pwrite(fd, buf, n, off);
    int e = errno;
    rec_write(r, e, fd, buf, n, (long long)off);
    errno = e;
    return r;
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL(ssize_t (*)(int, const void *, size_t, off_t), pwrite64);
    ssize_t r = real_pwrite64(fd, buf, n, off);
    int e = errno;
    rec_write(r, e, fd, buf, n, (long long)off);
    errno = e;
    return r;
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(ssize_t (*)(int, const struct iovec *, int), writev);
    ssize_t r = real_writev(fd, iov, cnt);
    int e = errno;
    rec_write(r, e, fd, NULL, 0, -1);
    errno = e;
    return r;
}
int ftruncate(int fd, off_t len) {
    REAL(int (*)(int, off_t), ftruncate);
    int r = real_ftruncate(fd, len);
    int e = errno;
    rec_write(r, e, fd, NULL, 0, -1);
    errno = e;
    return r;
}

#define SYNC_FD(name)                              \
    int name(int fd) {                             \
        REAL(int (*)(int), name);                  \
        if (dropped(#name, fd)) return 0;          \
        int r = real_##name(fd);                   \
        int e = errno;                             \
        rec_fd(#name, r, e, fd);                   \
        errno = e;                                 \
        return r;                                  \
    }
SYNC_FD(fsync)
SYNC_FD(fdatasync)
SYNC_FD(syncfs) /* the whole file system: the checker takes it for a sync of everything */

int sync_file_range(int fd, off_t off, off_t n, unsigned flags) {
    REAL(int (*)(int, off_t, off_t, unsigned), sync_file_range);
    int r = real_sync_file_range(fd, off, n, flags);
    int e = errno;
    rec_fd("sync_file_range", r, e, fd);
    errno = e;
    return r;
}

void sync(void) {
    REAL(void (*)(void), sync);
    real_sync();
    if (!inside) emit("sync", 0, 0, "-");
}

int close(int fd) {
    REAL(int (*)(int), close);
    char p[PATH_MAX], ino[64];
    int named = !inside && fd_path(fd, p, sizeof p); /* before: after it the fd is gone */
    if (named) fd_ino(fd, ino, sizeof ino);
    int r = real_close(fd);
    int e = errno;
    if (named) {
        inside = 1;
        emit("close", r, e, "fd=%d ino=%s %s", fd, ino, p);
        inside = 0;
    }
    errno = e;
    return r;
}

int rename(const char *from, const char *to) {
    REAL(int (*)(const char *, const char *), rename);
    int r = real_rename(from, to);
    int e = errno;
    rec_rename(r, e, AT_FDCWD, from, AT_FDCWD, to, 0);
    errno = e;
    return r;
}
int renameat(int fromfd, const char *from, int tofd, const char *to) {
    REAL(int (*)(int, const char *, int, const char *), renameat);
    int r = real_renameat(fromfd, from, tofd, to);
    int e = errno;
    rec_rename(r, e, fromfd, from, tofd, to, 0);
    errno = e;
    return r;
}
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags) {
    REAL(int (*)(int, const char *, int, const char *, unsigned), renameat2);
    int r = real_renameat2(fromfd, from, tofd, to, flags);
    int e = errno;
    rec_rename(r, e, fromfd, from, tofd, to, flags);
    errno = e;
    return r;
}

int mkdir(const char *path, mode_t mode) {
    REAL(int (*)(const char *, mode_t), mkdir);
    int r = real_mkdir(path, mode);
    int e = errno;
    rec_path("mkdir", r, e, AT_FDCWD, path);
    errno = e;
    return r;
}
int mkdirat(int dirfd, const char *path, mode_t mode) {
    REAL(int (*)(int, const char *, mode_t), mkdirat);
    int r = real_mkdirat(dirfd, path, mode);
    int e = errno;
    rec_path("mkdir", r, e, dirfd, path);
    errno = e;
    return r;
}
int unlink(const char *path) {
    REAL(int (*)(const char *), unlink);
    char p[PATH_MAX], ino[64];
    abs_path(AT_FDCWD, path, p, sizeof p); /* before: what it names is still there */
    path_ino(p, ino, sizeof ino);
    int r = real_unlink(path);
    int e = errno;
    if (!inside) emit("unlink", r, e, "ino=%s %s", ino, p);
    errno = e;
    return r;
}
int unlinkat(int dirfd, const char *path, int flags) {
    REAL(int (*)(int, const char *, int), unlinkat);
    char p[PATH_MAX], ino[64];
    abs_path(dirfd, path, p, sizeof p);
    path_ino(p, ino, sizeof ino);
    int r = real_unlinkat(dirfd, path, flags);
    int e = errno;
    if (!inside) emit((flags & AT_REMOVEDIR) ? "rmdir" : "unlink", r, e, "ino=%s %s", ino, p);
    errno = e;
    return r;
}
int rmdir(const char *path) {
    REAL(int (*)(const char *), rmdir);
    char p[PATH_MAX], ino[64];
    abs_path(AT_FDCWD, path, p, sizeof p);
    path_ino(p, ino, sizeof ino);
    int r = real_rmdir(path);
    int e = errno;
    if (!inside) emit("rmdir", r, e, "ino=%s %s", ino, p);
    errno = e;
    return r;
}
int remove(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return rmdir(path);
    return unlink(path);
}
