/* ckpt_files.c - files a checkpoint carries beside its data: a step dir may
 * hold small files of any name other than metadata.json and rank-RRRRR.bin
 * (the model's tokenizer, titan-checkpoint(5)). They are written into the
 * staging dir before commit, so they appear with the step or not at all,
 * and travel wherever the step dir goes (pack, reshard). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_write_impl.h"
#include "core/fsutil.h"

#define FILE_MAX ((size_t)1 << 30)

int titan_ckpt_is_own_file(const char *name) {
    if (!strcmp(name, "metadata.json")) return 1;
    unsigned rank;
    int used = 0;
    return sscanf(name, "rank-%5u.bin%n", &rank, &used) == 1 && used > 0 && name[used] == 0;
}

titan_status titan_ckpt_add_file(titan_ckpt_writer *w, const char *name, const void *data, size_t n) {
    if (w->failed != TITAN_OK) return titan_error(w->failed, "%s: writer failed earlier; abort it", w->tmpdir);
    if (!name || !name[0] || name[0] == '.' || strchr(name, '/') || strlen(name) > 200 || titan_ckpt_is_own_file(name))
        return titan_error(TITAN_ERR_USAGE, "%s: \"%s\" cannot be the name of a carried file", w->tmpdir,
                           name ? name : "");
    char path[PATH_MAX];
    TITAN_TRY(titan_fs_join(path, sizeof path, w->tmpdir, name));
    return titan_fs_write_file(path, data, n); /* fsynced; publish fsyncs the dir */
}

titan_status titan_ckpt_copy_files(const titan_ckpt *ck, titan_ckpt_writer *w) {
    const char *dir = titan_ckpt_path(ck);
    DIR *d = opendir(dir);
    if (!d) return titan_error(TITAN_ERR_IO, "%s: open: %s", dir, strerror(errno));
    struct dirent *e;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK && (e = readdir(d))) {
        char path[PATH_MAX];
        struct stat sb;
        if (e->d_name[0] == '.' || titan_ckpt_is_own_file(e->d_name)) continue;
        if ((st = titan_fs_join(path, sizeof path, dir, e->d_name)) != TITAN_OK) break;
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue; /* no links followed out of the step */
        char *data;
        size_t len;
        if ((st = titan_fs_read_regular(path, &data, &len, FILE_MAX)) != TITAN_OK) break;
        st = titan_ckpt_add_file(w, e->d_name, data, len);
        free(data);
    }
    closedir(d);
    return st;
}
