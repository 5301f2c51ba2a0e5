/* pack.c - checkpoint <-> tar.zst through libarchive (pax format, zstd filter). */
#include "ckpt/pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "job/config.h"

#define IO_BLOCK ((size_t)1 << 20)
#define CONFIG_MAX ((size_t)1 << 20) /* a config.toml is a few KiB */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files of dir, sorted (so archives of the same step are alike). */
static titan_status list_files(const char *dir, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return titan_error(TITAN_ERR_IO, "%s: open: %s", dir, strerror(errno));
    char **v = NULL;
    int cap = 0;
    struct dirent *de;
    titan_status st = TITAN_OK;
    while (st == TITAN_OK && (de = readdir(d))) {
        char p[PATH_MAX];
        struct stat sb;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if ((st = titan_fs_join(p, sizeof p, dir, de->d_name)) != TITAN_OK) break;
        if (lstat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: not a regular file (a step dir holds only files)", p);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) { st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", dir); break; }
            v = nv;
        }
        if (!(v[*n] = strdup(de->d_name))) { st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", dir); break; }
        (*n)++;
    }
    closedir(d);
    if (st != TITAN_OK) {
        for (int i = 0; i < *n; i++) free(v[i]);
        free(v);
        *n = 0;
        return st;
    }
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    *out = v;
    return st;
}

/* fsyncs the files of a step dir and the dir itself: libarchive writes
 * without fsync, and the dir is about to be renamed into place. */
static titan_status sync_step(const char *dir) {
    char **files;
    int n;
    TITAN_TRY(list_files(dir, &files, &n));
    titan_status st = TITAN_OK;
    for (int i = 0; i < n && st == TITAN_OK; i++) {
        char p[PATH_MAX];
        st = titan_fs_join(p, sizeof p, dir, files[i]);
        if (st == TITAN_OK) st = titan_fs_fsync_path(p);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    return st == TITAN_OK ? titan_fs_fsync_path(dir) : st;
}

static titan_status ar_fail(struct archive *a, const char *path, const char *what) {
    return titan_error(TITAN_ERR_IO, "%s: %s: %s", path, what, archive_error_string(a) ? archive_error_string(a) : "failed");
}

static titan_status add_entry(struct archive *a, const char *out_path, const char *name, mode_t type,
                              const struct stat *sb, const void *mem, size_t memlen, const char *file) {
    struct archive_entry *e = archive_entry_new();
    if (!e) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", out_path);
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
    archive_entry_set_size(e, type == AE_IFDIR ? 0 : (file ? sb->st_size : (la_int64_t)memlen));
    if (sb) archive_entry_set_mtime(e, sb->st_mtime, 0);
    titan_status st = TITAN_OK;
    if (archive_write_header(a, e) != ARCHIVE_OK) st = ar_fail(a, out_path, name);
    archive_entry_free(e);
    if (st != TITAN_OK || type == AE_IFDIR) return st;
    if (!file) {
        if (archive_write_data(a, mem, memlen) != (la_ssize_t)memlen) st = ar_fail(a, out_path, name);
        return st;
    }
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return titan_error(TITAN_ERR_IO, "%s: open: %s", file, strerror(errno));
    char *buf = malloc(IO_BLOCK);
    if (!buf) st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", out_path);
    off_t left = sb->st_size, off = 0;
    while (st == TITAN_OK && left > 0) {
        size_t n = (size_t)left < IO_BLOCK ? (size_t)left : IO_BLOCK;
        if ((st = titan_fs_pread_all(fd, buf, n, off, file)) != TITAN_OK) break;
        if (archive_write_data(a, buf, n) != (la_ssize_t)n) st = ar_fail(a, out_path, name);
        off += (off_t)n;
        left -= (off_t)n;
    }
    free(buf);
    close(fd);
    return st;
}

/* The config.toml of the run that holds the checkpoint root `root`: the
 * nearest directory above it (checkpoint.folder may be nested) whose
 * config.toml names root as its checkpoint.folder. 0 when there is none (a
 * bare root, e.g. from convert --from hf). */
static int find_run_config(const char *root, char *out, size_t cap) {
    char want[PATH_MAX], dir[PATH_MAX], got[PATH_MAX], p[PATH_MAX];
    if (!realpath(root, want)) return 0;
    snprintf(dir, sizeof dir, "%s", want);
    for (int up = 0; up < 8; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) return 0;
        *slash = 0;
        if (titan_fs_join(p, sizeof p, dir, "config.toml") != TITAN_OK || !titan_fs_exists(p)) continue;
        titan_job_config cfg;
        titan_config_defaults(&cfg);
        int log = titan_log_verbosity();
        titan_log_set_verbosity(0); /* its warnings (ignored keys) belong to titan-train */
        titan_status st = titan_config_load_file(&cfg, p);
        titan_log_set_verbosity(log);
        char folder[PATH_MAX];
        if (st == TITAN_OK && titan_fs_join(folder, sizeof folder, dir, cfg.checkpoint_folder) == TITAN_OK &&
            realpath(folder, got) && !strcmp(got, want))
            return snprintf(out, cap, "%s", p) < (int)cap;
        titan_error_clear();
    }
    return 0;
}

static titan_status pack_step(titan_ckpt *ck, const char *out_path, const char *tmp, const char *config) {
    const char *dir = titan_ckpt_path(ck);
    char sname[64];
    titan_ckpt_step_name(sname, sizeof sname, titan_ckpt_step(ck));
    char **files;
    int n;
    TITAN_TRY(list_files(dir, &files, &n));
    struct archive *a = archive_write_new();
    titan_status st = a ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "%s: out of memory", out_path);
    if (st == TITAN_OK && (archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
                           archive_write_set_format_pax_restricted(a) != ARCHIVE_OK))
        st = ar_fail(a, out_path, "zstd or pax not available in libarchive");
    if (st == TITAN_OK && archive_write_open_filename(a, tmp) != ARCHIVE_OK) st = ar_fail(a, tmp, "create");
    struct stat dsb;
    if (st == TITAN_OK && stat(dir, &dsb) != 0) st = titan_error(TITAN_ERR_IO, "%s: stat: %s", dir, strerror(errno));
    struct stat csb;
    if (st == TITAN_OK && config && stat(config, &csb) != 0)
        st = titan_error(TITAN_ERR_IO, "%s: stat: %s", config, strerror(errno));
    /* first, so that unpack knows where the steps go before it meets them */
    if (st == TITAN_OK && config) st = add_entry(a, out_path, "config.toml", AE_IFREG, &csb, NULL, 0, config);
    if (st == TITAN_OK) st = add_entry(a, out_path, sname, AE_IFDIR, &dsb, NULL, 0, NULL);
    for (int i = 0; i < n && st == TITAN_OK; i++) {
        char path[PATH_MAX], name[PATH_MAX];
        struct stat sb;
        st = titan_fs_join(path, sizeof path, dir, files[i]);
        if (st == TITAN_OK) st = titan_fs_join(name, sizeof name, sname, files[i]);
        if (st == TITAN_OK && stat(path, &sb) != 0) st = titan_error(TITAN_ERR_IO, "%s: stat: %s", path, strerror(errno));
        if (st == TITAN_OK) st = add_entry(a, out_path, name, AE_IFREG, &sb, NULL, 0, path);
    }
    char latest[80];
    int ll = snprintf(latest, sizeof latest, "%s\n", sname);
    if (st == TITAN_OK) st = add_entry(a, out_path, "latest", AE_IFREG, &dsb, latest, (size_t)ll, NULL);
    if (a && archive_write_close(a) != ARCHIVE_OK && st == TITAN_OK) st = ar_fail(a, tmp, "write");
    if (a) archive_write_free(a);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    return st;
}

titan_status titan_ckpt_pack(const char *ckpt, const char *out_path) {
    titan_ckpt *ck;
    TITAN_TRY(titan_ckpt_open(&ck, ckpt));
    char tmp[PATH_MAX];
    titan_status st = TITAN_OK;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", out_path) >= (int)sizeof tmp)
        st = titan_error(TITAN_ERR_USAGE, "%s: path too long", out_path);
    if (st == TITAN_OK) st = titan_ckpt_verify(ck); /* never pack a corrupt checkpoint */
    /* The run's config too: unpacked, the archive is a run titan-train resumes. */
    char root[PATH_MAX], config[PATH_MAX];
    int has_config = 0;
    if (st == TITAN_OK) st = titan_fs_join(root, sizeof root, titan_ckpt_path(ck), "..");
    if (st == TITAN_OK) has_config = find_run_config(root, config, sizeof config);
    if (st == TITAN_OK) st = pack_step(ck, out_path, tmp, has_config ? config : NULL);
    if (st == TITAN_OK) st = titan_fs_fsync_path(tmp);
    if (st == TITAN_OK) st = titan_fs_rename(tmp, out_path);
    if (st == TITAN_OK) st = titan_fs_fsync_parent(out_path);
    if (st != TITAN_OK) unlink(tmp);
    else titan_info("%s: step %" PRId64 " from %s%s%s", out_path, titan_ckpt_step(ck), titan_ckpt_path(ck),
                    has_config ? ", with " : " (no run config.toml found: unpacks as a checkpoint root)",
                    has_config ? config : "");
    titan_ckpt_close(ck);
    return st;
}

/* ---- unpack ---- */

/* Checks an entry name: "latest", "config.toml", "step-N", "step-N/" or
 * "step-N/FILE" only. kind: 0 latest, 1 step dir, 2 file in a step dir,
 * 3 the run's config. */
static titan_status check_name(const char *in, const char *name, int *kind, char *step_name, size_t cap) {
    if (name[0] == '/')
        return titan_error(TITAN_ERR_FORMAT, "%s: entry \"%s\": absolute path refused", in, name);
    const char *p = name;
    while (*p) { /* any ".." component */
        size_t l = strcspn(p, "/");
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return titan_error(TITAN_ERR_FORMAT, "%s: entry \"%s\": \"..\" component refused", in, name);
        p += l;
        while (*p == '/') p++;
    }
    if (!strcmp(name, "latest")) { *kind = 0; return TITAN_OK; }
    if (!strcmp(name, "config.toml")) { *kind = 3; return TITAN_OK; }
    const char *slash = strchr(name, '/');
    size_t l = slash ? (size_t)(slash - name) : strlen(name);
    int64_t step;
    if (l >= cap) goto unexpected;
    memcpy(step_name, name, l);
    step_name[l] = 0;
    if (titan_ckpt_parse_step_name(step_name, &step)) goto unexpected;
    if (!slash || !slash[1]) { *kind = 1; return TITAN_OK; }
    if (strchr(slash + 1, '/') || !strcmp(slash + 1, ".")) goto unexpected;
    *kind = 2;
    return TITAN_OK;
unexpected:
    return titan_error(TITAN_ERR_FORMAT, "%s: entry \"%s\": not part of a titan checkpoint archive (expected "
                       "latest, config.toml, step-N/ or step-N/FILE)", in, name);
}

static titan_status copy_data(struct archive *r, struct archive *w, const char *in, const char *name) {
    const void *buf;
    size_t n;
    la_int64_t off;
    for (;;) {
        int rc = archive_read_data_block(r, &buf, &n, &off);
        if (rc == ARCHIVE_EOF) return TITAN_OK;
        if (rc != ARCHIVE_OK)
            return titan_error(TITAN_ERR_FORMAT, "%s: entry %s: %s", in, name, archive_error_string(r));
        if (archive_write_data_block(w, buf, n, off) != ARCHIVE_OK)
            return titan_error(TITAN_ERR_IO, "%s: %s", name, archive_error_string(w));
    }
}

/* Extracts in into stage; names the steps found (at most max) and the one
 * `latest` names; *config gets the run's config.toml (malloc'd), if any. */
static titan_status extract(const char *in, const char *stage, char steps[][64], int max, int *nsteps,
                            char *latest_name, char **config) {
    *nsteps = 0;
    latest_name[0] = 0;
    *config = NULL;
    struct archive *r = archive_read_new(), *w = archive_write_disk_new();
    titan_status st = r && w ? TITAN_OK : titan_error(TITAN_ERR_NOMEM, "%s: out of memory", in);
    if (st == TITAN_OK) {
        archive_read_support_filter_all(r);
        archive_read_support_format_tar(r);
        /* Names are checked above, and the staging prefix is ours, so refuse .. and links here too. */
        archive_write_disk_set_options(w, ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                              ARCHIVE_EXTRACT_NO_OVERWRITE);
        struct stat sb;
        if (stat(in, &sb) == 0 && S_ISDIR(sb.st_mode))
            st = titan_error(TITAN_ERR_IO, "%s: a directory, not an archive", in);
        else if (archive_read_open_filename(r, in, 1 << 16) != ARCHIVE_OK)
            st = titan_error(errno == ENOENT ? TITAN_ERR_IO : TITAN_ERR_FORMAT, "%s: %s", in, archive_error_string(r));
    }
    struct archive_entry *e;
    while (st == TITAN_OK) {
        int rc = archive_read_next_header(r, &e);
        if (rc == ARCHIVE_EOF) break;
        if (rc != ARCHIVE_OK) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: %s", in, archive_error_string(r));
            break;
        }
        /* A copy: archive_entry_set_pathname below frees the entry's own. */
        const char *ename = archive_entry_pathname(e);
        char name[PATH_MAX];
        int kind = -1;
        char sname[64];
        if (!ename) { st = titan_error(TITAN_ERR_FORMAT, "%s: entry without a name", in); break; }
        if (snprintf(name, sizeof name, "%s", ename) >= (int)sizeof name) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: entry name of %zu bytes: too long", in, strlen(ename));
            break;
        }
        if ((st = check_name(in, name, &kind, sname, sizeof sname)) != TITAN_OK) break;
        if (archive_entry_hardlink(e) || archive_entry_symlink(e) ||
            archive_entry_filetype(e) != (kind == 1 ? AE_IFDIR : AE_IFREG)) {
            st = titan_error(TITAN_ERR_FORMAT, "%s: entry \"%s\": links and special files refused", in, name);
            break;
        }
        if (kind == 3) {
            la_int64_t size = archive_entry_size(e);
            if (*config || size < 0 || (size_t)size > CONFIG_MAX) {
                st = titan_error(TITAN_ERR_FORMAT, "%s: config.toml: %s", in, *config ? "twice" : "too large");
                break;
            }
            if (!(*config = malloc((size_t)size + 1))) { st = titan_error(TITAN_ERR_NOMEM, "%s: out of memory", in); break; }
            la_ssize_t n = archive_read_data(r, *config, (size_t)size);
            if (n != size) { st = titan_error(TITAN_ERR_FORMAT, "%s: config.toml: cut short", in); break; }
            (*config)[size] = 0;
            continue;
        }
        if (kind == 0) {
            if (archive_entry_size(e) > 63) { st = titan_error(TITAN_ERR_FORMAT, "%s: latest: too long", in); break; }
            la_ssize_t n = archive_read_data(r, latest_name, 63);
            latest_name[n > 0 ? n : 0] = 0;
            latest_name[strcspn(latest_name, "\n")] = 0;
            continue;
        }
        int seen = 0;
        for (int i = 0; i < *nsteps; i++) seen |= !strcmp(steps[i], sname);
        if (!seen) {
            if (*nsteps == max) { st = titan_error(TITAN_ERR_FORMAT, "%s: more than %d steps", in, max); break; }
            snprintf(steps[(*nsteps)++], 64, "%s", sname);
            char sd[PATH_MAX];
            if ((st = titan_fs_join(sd, sizeof sd, stage, sname)) != TITAN_OK) break;
            if ((st = titan_fs_mkdir_p(sd)) != TITAN_OK) break;
        }
        if (kind == 1) continue;
        char dst[PATH_MAX];
        if ((st = titan_fs_join(dst, sizeof dst, stage, name)) != TITAN_OK) break;
        archive_entry_set_pathname(e, dst);
        archive_entry_set_perm(e, 0644);
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            st = titan_error(TITAN_ERR_IO, "%s: %s", dst, archive_error_string(w));
            break;
        }
        if ((st = copy_data(r, w, in, name)) != TITAN_OK) break;
        if (archive_write_finish_entry(w) != ARCHIVE_OK)
            st = titan_error(TITAN_ERR_IO, "%s: %s", dst, archive_error_string(w));
    }
    if (w) { archive_write_close(w); archive_write_free(w); }
    if (r) { archive_read_close(r); archive_read_free(r); }
    if (st == TITAN_OK && *nsteps == 0) st = titan_error(TITAN_ERR_FORMAT, "%s: no checkpoint in the archive", in);
    return st;
}

#define MAX_STEPS 1024

/* Where an archive with a run's config puts its steps: OUTDIR/checkpoint.folder,
 * which must stay inside OUTDIR. */
static titan_status config_root(const char *in, const char *text, const char *outdir, char *root, size_t cap) {
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    char label[PATH_MAX + 16];
    snprintf(label, sizeof label, "%s:config.toml", in);
    if (titan_config_load_string(&cfg, text, label) != TITAN_OK) {
        /* a config titan-train would refuse: the archive is malformed, not the command line */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", titan_error_message());
        return titan_error(TITAN_ERR_FORMAT, "%s", msg);
    }
    const char *f = cfg.checkpoint_folder;
    int up = f[0] == '/';
    for (const char *p = f; *p && !up; p += strspn(p, "/")) {
        size_t l = strcspn(p, "/");
        up = l == 2 && p[0] == '.' && p[1] == '.';
        p += l;
    }
    if (up)
        return titan_error(TITAN_ERR_FORMAT, "%s: checkpoint.folder \"%s\" leaves the run directory", label, f);
    return titan_fs_join(root, cap, outdir, f);
}

titan_status titan_ckpt_unpack(const char *in, const char *outdir, int force) {
    char stage[PATH_MAX], latest[64], root[PATH_MAX], cpath[PATH_MAX];
    char *config = NULL;
    if (snprintf(stage, sizeof stage, "%s/.unpack.tmp", outdir) >= (int)sizeof stage)
        return titan_error(TITAN_ERR_USAGE, "%s: path too long", outdir);
    if (!titan_fs_exists(in)) return titan_error(TITAN_ERR_IO, "%s: %s", in, strerror(ENOENT));
    TITAN_TRY(titan_fs_mkdir_p(outdir));
    TITAN_TRY(titan_fs_remove_tree(stage));
    TITAN_TRY(titan_fs_mkdir_p(stage));
    char(*steps)[64] = calloc(MAX_STEPS, 64);
    if (!steps) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", in);
    int n = 0;
    titan_status st = extract(in, stage, steps, MAX_STEPS, &n, latest, &config);
    /* With the run's config, outdir becomes the run directory and the steps
     * go to its checkpoint.folder; without, outdir is the checkpoint root. */
    snprintf(root, sizeof root, "%s", outdir);
    if (st == TITAN_OK && config) st = config_root(in, config, outdir, root, sizeof root);
    if (st == TITAN_OK && config) st = titan_fs_join(cpath, sizeof cpath, outdir, "config.toml");
    if (st == TITAN_OK && config && titan_fs_exists(cpath) && !force) {
        titan_error(TITAN_ERR_USAGE, "%s: already exists", cpath);
        titan_error_hint("unpack into another directory, or pass --force to replace it");
        st = TITAN_ERR_USAGE;
    }
    /* Everything is checked before anything moves into outdir. */
    for (int i = 0; i < n && st == TITAN_OK; i++) {
        char sd[PATH_MAX], dst[PATH_MAX];
        titan_ckpt *ck = NULL;
        st = titan_fs_join(sd, sizeof sd, stage, steps[i]);
        if (st == TITAN_OK) st = titan_ckpt_open(&ck, sd);
        if (st == TITAN_OK) st = titan_ckpt_verify(ck);
        titan_ckpt_close(ck);
        if (st == TITAN_OK) st = titan_fs_join(dst, sizeof dst, root, steps[i]);
        if (st == TITAN_OK && titan_fs_exists(dst) && !force) {
            titan_error(TITAN_ERR_USAGE, "%s: already exists", dst);
            titan_error_hint("unpack into another directory, or pass --force to replace it");
            st = TITAN_ERR_USAGE;
        }
        if (st == TITAN_OK) st = sync_step(sd);
    }
    int64_t best = -1, step;
    if (st == TITAN_OK && config) st = titan_fs_mkdir_p(root);
    for (int i = 0; i < n && st == TITAN_OK; i++) {
        char sd[PATH_MAX], dst[PATH_MAX];
        st = titan_fs_join(sd, sizeof sd, stage, steps[i]);
        if (st == TITAN_OK) st = titan_fs_join(dst, sizeof dst, root, steps[i]);
        if (st == TITAN_OK) st = titan_fs_replace_dir(sd, dst);
        if (st == TITAN_OK && !titan_ckpt_parse_step_name(steps[i], &step) && step > best) best = step;
    }
    for (int i = 0; i < n && st == TITAN_OK && latest[0]; i++) /* `latest` counts only if it names one of them */
        if (!strcmp(steps[i], latest) && !titan_ckpt_parse_step_name(latest, &step)) best = step;
    if (st == TITAN_OK && best >= 0) st = titan_ckpt_set_latest(root, best);
    /* the config last: a directory with config.toml is a run, and now it is whole */
    if (st == TITAN_OK && config) st = titan_fs_write_atomic(cpath, config, strlen(config));
    titan_fs_remove_tree(stage);
    if (st == TITAN_OK)
        titan_info("%s: %d step%s from %s%s", root, n, n == 1 ? "" : "s", in,
                   config ? " (a run directory: config.toml beside it)" : "");
    free(steps);
    free(config);
    return st;
}
