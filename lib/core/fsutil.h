/* fsutil.h - file-system helpers for crash-safe output: mkdir -p, whole-file
 * read/write, atomic replace, fsync of files and directories, remove tree.
 *
 * Every function returns a titan_status; messages name the path and the
 * cause (strerror text), e.g. "run/ckpt/latest: rename: Permission denied". */
#ifndef TITAN_CORE_FSUTIL_H
#define TITAN_CORE_FSUTIL_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Joins a and b with one '/' into out (size outsz); TITAN_ERR_USAGE if too long. */
titan_status titan_fs_join(char *out, size_t outsz, const char *a, const char *b);

int titan_fs_exists(const char *path); /* 1 if path exists (any type) */
int titan_fs_is_dir(const char *path); /* 1 if path is a directory */

/* Creates path and its missing parents (mode 0755); existing dirs are fine.
 * Each directory it creates is made durable (its parent fsynced), so a file
 * published in it later cannot vanish with it on a power loss. */
titan_status titan_fs_mkdir_p(const char *path);

/* Loops over short writes and EINTR. path is only used in messages. */
titan_status titan_fs_write_all(int fd, const void *buf, size_t n, const char *path);
/* Reads exactly n bytes at off; a short file is TITAN_ERR_FORMAT ("truncated"). */
titan_status titan_fs_pread_all(int fd, void *buf, size_t n, off_t off, const char *path);

/* Reads a whole file (at most max bytes, else TITAN_ERR_FORMAT) into a malloc'd,
 * NUL-terminated buffer. *len (optional) gets the size without the NUL. */
titan_status titan_fs_read_file(const char *path, char **data, size_t *len, size_t max);
/* For files found inside an input directory (a catalog, a config.json, a data
 * file), where a FIFO, socket or device is not the user's choice: opens path
 * for reading (fd blocking, as usual) or reads it whole as titan_fs_read_file;
 * anything but a regular file is refused (TITAN_ERR_IO), without waiting on it. */
titan_status titan_fs_open_regular(const char *path, int *fd);
titan_status titan_fs_read_regular(const char *path, char **data, size_t *len, size_t max);
/* Creates/truncates path, writes data and fsyncs it (not atomic: use for files
 * inside a directory that is itself published by rename). */
titan_status titan_fs_write_file(const char *path, const void *data, size_t n);
/* Writes path.tmp, fsyncs it, renames it over path and fsyncs the parent:
 * a reader sees either the old or the new content, never a mix. */
titan_status titan_fs_write_atomic(const char *path, const void *data, size_t n);

/* Publishes a file written through fd as tmp: fsync, close (always, even on
 * error), rename to path, fsync path's directory. The streaming writers'
 * counterpart of titan_fs_write_atomic; tmp is left behind on error. */
titan_status titan_fs_publish_fd(int fd, const char *tmp, const char *path);
/* The same for a stdio stream: fflush, fsync, fclose (always), rename, fsync
 * path's directory; tmp is left behind on error. */
titan_status titan_fs_publish_file(FILE *f, const char *tmp, const char *path);
/* Writes path.tmp (mode 0600) and renames it over path, without fsync: a
 * reader sees the whole file or none, but a crash may lose it. Only for
 * scratch files that live no longer than the job (the rendezvous's). */
titan_status titan_fs_write_scratch(const char *path, const void *data, size_t n);

titan_status titan_fs_fsync_fd(int fd, const char *path);
titan_status titan_fs_fsync_path(const char *path);   /* file or directory */
titan_status titan_fs_fsync_parent(const char *path); /* the directory holding path */

titan_status titan_fs_rename(const char *from, const char *to);
/* Moves directory src to dst. If dst exists it is replaced atomically where
 * the file system can exchange names (renameat2 RENAME_EXCHANGE), else by
 * renaming it away first; the old content is then removed. The parent is
 * fsynced before the old tree is removed. */
titan_status titan_fs_replace_dir(const char *src, const char *dst);
/* rm -rf path (does not follow symlinks); a missing path is not an error. */
titan_status titan_fs_remove_tree(const char *path);

#endif
