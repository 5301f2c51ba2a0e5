/* fuzz_pack.c - fuzz target: unpacking a checkpoint archive
 * (`titan-ckpt unpack`, titan_ckpt_unpack).
 *
 * Input: a flags byte, then the archive (tar, any compression libarchive
 * reads). Bit 0 passes --force; bit 1 makes the output directory beforehand
 * with a run's config.toml and a step-1 in it. The archive is unpacked into
 * SCRATCH/a/b/out, and whatever it holds, nothing may appear outside out
 * (SCRATCH, a and b hold exactly what they held), and out may hold only
 * directories and regular files: no link, device or FIFO. Every checkpoint
 * it leaves was verified by the unpacking. Built with libFuzzer by
 * `make fuzz`; replayed over tests/fuzz/corpus/pack by `make check`
 * (build/tests/test_fuzz_pack). */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/pack.h"
#include "core/log.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* dir holds exactly the one entry `only` (and, at the top, the input). */
static void holds_only(const char *dir, const char *only, const char *also) {
    DIR *d = opendir(dir);
    if (!d) abort();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, only)) continue;
        if (also && !strcmp(e->d_name, also)) continue;
        fprintf(stderr, "fuzz_pack: %s/%s written outside the output directory\n", dir, e->d_name);
        abort();
    }
    closedir(d);
}

/* Everything under path is a directory or a regular file. */
static void plain_tree(const char *path, int depth) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISREG(sb.st_mode)) return;
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "fuzz_pack: %s: not a regular file or directory (mode %o)\n", path, (unsigned)sb.st_mode);
        abort();
    }
    DIR *d = depth < 32 ? opendir(path) : NULL;
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[4096];
        fuzz_join(child, sizeof child, path, e->d_name);
        plain_tree(child, depth + 1);
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    titan_log_set_verbosity(0);
    if (size < 1) return 0;
    const char *base = fuzz_scratch("pack");
    char a[512], b[512], out[512], in[512];
    fuzz_join(a, sizeof a, base, "a");
    fuzz_join(b, sizeof b, a, "b");
    fuzz_join(out, sizeof out, b, "out");
    fuzz_join(in, sizeof in, base, "in.tar");
    if (titan_fs_remove_tree(a) != TITAN_OK || titan_fs_mkdir_p(b) != TITAN_OK) abort();
    if (data[0] & 2) {
        static const char cfg[] = "[checkpoint]\nfolder = \"checkpoint\"\n";
        char step[600];
        fuzz_join(step, sizeof step, out, "checkpoint/step-1");
        if (titan_fs_mkdir_p(step) != TITAN_OK) abort();
        fuzz_write(out, "config.toml", cfg, sizeof cfg - 1);
    }
    fuzz_write(base, "in.tar", data + 1, size - 1);
    titan_status st = titan_ckpt_unpack(in, out, data[0] & 1);
    if (st != TITAN_OK && !titan_error_message()[0]) abort();
    holds_only(base, "a", "in.tar");
    holds_only(a, "b", NULL);
    holds_only(b, "out", NULL);
    plain_tree(out, 0);
    titan_error_clear();
    return 0;
}
