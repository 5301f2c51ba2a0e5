/* replay.c - runs a fuzz target's entry point over its corpus files, so that
 * `make check` keeps every seed and every crasher found so far as a
 * regression test without needing libFuzzer.
 *
 *     build/tests/test_fuzz_NAME [FILE|DIR ...]
 *
 * With no arguments it replays tests/fuzz/corpus/NAME (NAME from the program's
 * own name), found from the current directory or from the program's. */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int nfiles;

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    /* An exact-size copy, so a read past the end is a read past the allocation. */
    unsigned char *exact = malloc(n ? n : 1);
    if (exact) memcpy(exact, buf, n);
    free(buf);
    if (!exact) return -1;
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    nfiles++;
    return 0;
}

static int run_path(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) return run_file(path);
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, alphasort), rc = n < 0 ? -1 : 0;
    if (n < 0) perror(path);
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX];
        if (ents[i]->d_name[0] != '.' && snprintf(p, sizeof p, "%s/%s", path, ents[i]->d_name) < (int)sizeof p &&
            run_path(p) != 0)
            rc = -1;
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        int rc = 0;
        for (int i = 1; i < argc; i++) rc |= run_path(argv[i]) != 0;
        printf("replayed %d inputs\n", nfiles);
        return rc;
    }
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    const char *name = strncmp(base, "test_fuzz_", 10) == 0 ? base + 10 : base;
    char dir[PATH_MAX], alt[PATH_MAX];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    /* build/tests/test_fuzz_NAME -> build/tests/../../tests/fuzz/corpus/NAME */
    int dirlen = base > argv[0] ? (int)(base - argv[0] - 1) : 1;
    snprintf(alt, sizeof alt, "%.*s/../../tests/fuzz/corpus/%s", dirlen, base > argv[0] ? argv[0] : ".", name);
    struct stat sb;
    const char *use = stat(dir, &sb) == 0 ? dir : alt;
    if (stat(use, &sb) != 0) {
        fprintf(stderr, "%s: corpus %s not found (run from the repository root)\n", base, dir);
        return 1;
    }
    int rc = run_path(use);
    printf("%s: replayed %d corpus inputs from %s: %s\n", base, nfiles, use, rc ? "FAIL" : "ok");
    return rc ? 1 : nfiles > 0 ? 0 : 1;
}
