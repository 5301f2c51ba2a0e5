/* fsutil.c - file-system helpers for crash-safe output. */
#define _GNU_SOURCE /* renameat2 */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

titan_status titan_fs_join(char *out, size_t outsz, const char *a, const char *b) {
    size_t la = strlen(a);
    int slash = la > 0 && a[la - 1] != '/';
    int n = snprintf(out, outsz, "%s%s%s", a, slash ? "/" : "", b);
    if (n < 0 || (size_t)n >= outsz)
        return titan_error(TITAN_ERR_USAGE, "%s/%s: path too long", a, b);
    return TITAN_OK;
}

int titan_fs_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

int titan_fs_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

titan_status titan_fs_mkdir_p(const char *path) {
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0) return titan_error(TITAN_ERR_USAGE, "mkdir: empty path");
    if (n >= sizeof buf) return titan_error(TITAN_ERR_USAGE, "%s: path too long", path);
    memcpy(buf, path, n + 1);
    /* Create each prefix ending before a '/', then the whole path; the
     * parent of each one made is fsynced (its new entry). */
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) == 0) TITAN_TRY(titan_fs_fsync_parent(buf));
        else if (errno != EEXIST) return titan_error(TITAN_ERR_IO, "%s: mkdir: %s", buf, strerror(errno));
        buf[i] = c;
    }
    if (!titan_fs_is_dir(path))
        return titan_error(TITAN_ERR_IO, "%s: exists and is not a directory", path);
    return TITAN_OK;
}

titan_status titan_fs_write_all(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n > 0) {
        size_t step = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(fd, p, step);
        if (w < 0) {
            if (errno == EINTR) continue;
            return titan_error(TITAN_ERR_IO, "%s: write: %s", path, strerror(errno));
        }
        if (w == 0) return titan_error(TITAN_ERR_IO, "%s: write: no progress", path);
        p += w;
        n -= (size_t)w;
    }
    return TITAN_OK;
}

titan_status titan_fs_pread_all(int fd, void *buf, size_t n, off_t off, const char *path) {
    char *p = buf;
    while (n > 0) {
        size_t step = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pread(fd, p, step, off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return titan_error(TITAN_ERR_IO, "%s: byte %lld: read: %s", path, (long long)off,
                               strerror(errno));
        }
        if (r == 0)
            return titan_error(TITAN_ERR_FORMAT, "%s: byte %lld: truncated (%zu bytes missing)",
                               path, (long long)off, n);
        p += r;
        off += r;
        n -= (size_t)r;
    }
    return TITAN_OK;
}

/* Reads fd to EOF into a growing buffer (NUL-terminated), at most max bytes. */
static titan_status read_stream(int fd, const char *path, char **data, size_t *len, size_t max) {
    size_t n = 0, cap = 65536;
    char *buf = malloc(cap + 1);
    if (!buf) return titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, cap + 1);
    for (;;) {
        if (n == cap) {
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                return titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, ncap + 1);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return titan_error(TITAN_ERR_IO, "%s: read: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n > max) {
            free(buf);
            return titan_error(TITAN_ERR_FORMAT, "%s: too large (more than %zu bytes)", path, max);
        }
    }
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return TITAN_OK;
}

/* Reads the file open as fd (closed here), as titan_fs_read_file. */
static titan_status read_fd(int fd, const char *path, char **data, size_t *len, size_t max) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return titan_error(TITAN_ERR_IO, "%s: stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { /* a pipe or device: its size is unknown, read to EOF */
        titan_status s = read_stream(fd, path, data, len, max);
        close(fd);
        return s;
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return titan_error(TITAN_ERR_FORMAT, "%s: too large (%lld bytes, limit %zu)", path,
                           (long long)st.st_size, max);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return titan_error(TITAN_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    titan_status s = titan_fs_pread_all(fd, buf, n, 0, path);
    close(fd);
    if (s != TITAN_OK) {
        free(buf);
        return s;
    }
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return TITAN_OK;
}

titan_status titan_fs_read_file(const char *path, char **data, size_t *len, size_t max) {
    *data = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", path, strerror(errno));
    return read_fd(fd, path, data, len, max);
}

titan_status titan_fs_open_regular(const char *path, int *fd) {
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", path, strerror(errno));
    struct stat st;
    int e = fstat(*fd, &st) != 0 ? errno : 0;
    if (e || !S_ISREG(st.st_mode) || fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        close(*fd);
        *fd = -1;
        return titan_error(TITAN_ERR_IO, "%s: %s", path, e ? strerror(e) : "not a regular file");
    }
    return TITAN_OK;
}

titan_status titan_fs_read_regular(const char *path, char **data, size_t *len, size_t max) {
    *data = NULL;
    int fd;
    TITAN_TRY(titan_fs_open_regular(path, &fd));
    return read_fd(fd, path, data, len, max);
}

/* Writes path (created with mode), fsync'ing it when durable. */
static titan_status write_file(const char *path, const void *data, size_t n, mode_t mode, int durable) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", path, strerror(errno));
    titan_status s = titan_fs_write_all(fd, data, n, path);
    if (s == TITAN_OK && durable) s = titan_fs_fsync_fd(fd, path);
    if (close(fd) != 0 && s == TITAN_OK)
        s = titan_error(TITAN_ERR_IO, "%s: close: %s", path, strerror(errno));
    return s;
}

/* Writes path.tmp and renames it over path; durable: fsync the file before
 * and path's directory after. path.tmp is removed on error. */
static titan_status write_replace(const char *path, const void *data, size_t n, mode_t mode, int durable) {
    char tmp[PATH_MAX];
    int k = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (k < 0 || (size_t)k >= sizeof tmp) return titan_error(TITAN_ERR_USAGE, "%s: path too long", path);
    titan_status s = write_file(tmp, data, n, mode, durable);
    if (s == TITAN_OK) s = titan_fs_rename(tmp, path);
    if (s != TITAN_OK) {
        unlink(tmp);
        return s;
    }
    return durable ? titan_fs_fsync_parent(path) : TITAN_OK;
}

/* The publishers' tail: s is the status of syncing and closing tmp. */
static titan_status publish_tail(titan_status s, const char *tmp, const char *path) {
    if (s == TITAN_OK) s = titan_fs_rename(tmp, path);
    if (s == TITAN_OK) s = titan_fs_fsync_parent(path);
    return s;
}

titan_status titan_fs_write_file(const char *path, const void *data, size_t n) {
    return write_file(path, data, n, 0644, 1);
}

titan_status titan_fs_write_atomic(const char *path, const void *data, size_t n) {
    return write_replace(path, data, n, 0644, 1);
}

titan_status titan_fs_write_scratch(const char *path, const void *data, size_t n) {
    return write_replace(path, data, n, 0600, 0);
}

titan_status titan_fs_publish_fd(int fd, const char *tmp, const char *path) {
    titan_status s = titan_fs_fsync_fd(fd, tmp);
    if (close(fd) != 0 && s == TITAN_OK) s = titan_error(TITAN_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    return publish_tail(s, tmp, path);
}

titan_status titan_fs_publish_file(FILE *f, const char *tmp, const char *path) {
    titan_status s = TITAN_OK;
    /* ferror: an earlier write may have failed while this flush succeeds */
    if (fflush(f) != 0 || ferror(f)) s = titan_error(TITAN_ERR_IO, "%s: write: %s", tmp, strerror(errno));
    if (s == TITAN_OK) s = titan_fs_fsync_fd(fileno(f), tmp);
    if (fclose(f) != 0 && s == TITAN_OK) s = titan_error(TITAN_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    return publish_tail(s, tmp, path);
}

titan_status titan_fs_fsync_fd(int fd, const char *path) {
    if (fsync(fd) != 0)
        return titan_error(TITAN_ERR_IO, "%s: fsync: %s", path, strerror(errno));
    return TITAN_OK;
}

titan_status titan_fs_fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", path, strerror(errno));
    titan_status s = titan_fs_fsync_fd(fd, path);
    close(fd);
    return s;
}

titan_status titan_fs_fsync_parent(const char *path) {
    char dir[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof dir) return titan_error(TITAN_ERR_USAGE, "%s: path too long", path);
    memcpy(dir, path, n + 1);
    while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0'; /* "a/b/" names b */
    char *slash = strrchr(dir, '/');
    if (!slash) return titan_fs_fsync_path(".");
    if (slash == dir) return titan_fs_fsync_path("/");
    *slash = '\0';
    return titan_fs_fsync_path(dir);
}

titan_status titan_fs_rename(const char *from, const char *to) {
    if (rename(from, to) != 0)
        return titan_error(TITAN_ERR_IO, "%s: rename to %s: %s", from, to, strerror(errno));
    return TITAN_OK;
}

titan_status titan_fs_replace_dir(const char *src, const char *dst) {
    if (!titan_fs_exists(dst)) {
        TITAN_TRY(titan_fs_rename(src, dst));
        return titan_fs_fsync_parent(dst);
    }
    /* Exchange: dst never goes missing, even for an instant. src then holds the old tree. */
    if (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_EXCHANGE) == 0) {
        TITAN_TRY(titan_fs_fsync_parent(dst));
        return titan_fs_remove_tree(src);
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return titan_error(TITAN_ERR_IO, "%s: exchange with %s: %s", src, dst, strerror(errno));
    /* No exchange here: move the old tree aside first (a crash in between leaves
     * dst missing but both trees on disk under their names). */
    char old[PATH_MAX];
    int k = snprintf(old, sizeof old, "%s.old", dst);
    if (k < 0 || (size_t)k >= sizeof old) return titan_error(TITAN_ERR_USAGE, "%s: path too long", dst);
    TITAN_TRY(titan_fs_remove_tree(old));
    TITAN_TRY(titan_fs_rename(dst, old));
    TITAN_TRY(titan_fs_rename(src, dst));
    TITAN_TRY(titan_fs_fsync_parent(dst));
    return titan_fs_remove_tree(old);
}

/* nftw passes no user pointer: the first failure is kept per thread. */
static _Thread_local int rm_errno;
static _Thread_local char rm_path[PATH_MAX];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    int r = (flag == FTW_DP || flag == FTW_D) ? rmdir(p) : unlink(p);
    if (r != 0 && errno != ENOENT) {
        rm_errno = errno;
        snprintf(rm_path, sizeof rm_path, "%s", p);
        return 1;
    }
    return 0;
}

titan_status titan_fs_remove_tree(const char *path) {
    if (!titan_fs_exists(path)) return TITAN_OK;
    rm_errno = 0;
    rm_path[0] = '\0';
    int r = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (r != 0) {
        if (rm_errno)
            return titan_error(TITAN_ERR_IO, "%s: remove: %s", rm_path, strerror(rm_errno));
        return titan_error(TITAN_ERR_IO, "%s: remove: %s", path, strerror(errno));
    }
    return TITAN_OK;
}
