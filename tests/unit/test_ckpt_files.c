/* test_ckpt_files.c - files a checkpoint carries (ckpt_files.c): written with
 * the step, refused under the format's own names, copied from one checkpoint
 * to another as titan-reshard does. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "core/error.h"
#include "core/fsutil.h"

#include "check.h"
#define OK(expr) CHECK((expr) == TITAN_OK, "%s", titan_error_message())

static const float four[4] = {1, 2, 3, 4};
static const int64_t shape[1] = {4};
static const char body[] = "{\"a\": 1}\n";

int main(void) {
    char tmp[] = "/tmp/titan-test-ckpt-files-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    char root[256], root2[256], p[PATH_MAX];
    snprintf(root, sizeof root, "%s/a", tmp);
    snprintf(root2, sizeof root2, "%s/b", tmp);
    titan_ckpt_writer *w = NULL;
    OK(titan_ckpt_begin(&w, root, 1));
    static const char *const bad[] = {"metadata.json", "rank-00003.bin", "a/b", ".hidden", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        titan_status st = titan_ckpt_add_file(w, bad[i], "x", 1);
        CHECK(st == TITAN_ERR_USAGE && strstr(titan_error_message(), "carried file"), "\"%s\" refused", bad[i]);
    }
    CHECK(titan_ckpt_is_own_file("rank-12345.bin") && titan_ckpt_is_own_file("metadata.json"));
    CHECK(!titan_ckpt_is_own_file("rank-1.binx") && !titan_ckpt_is_own_file("tokenizer.json"));
    OK(titan_ckpt_add_file(w, "tokenizer.json", body, strlen(body)));
    snprintf(p, sizeof p, "%s/step-00000001/tokenizer.json", root);
    CHECK(!titan_fs_exists(p), "not visible before commit");
    OK(titan_ckpt_add(w, "t", TITAN_DTYPE_F32, 1, shape, NULL, four));
    OK(titan_ckpt_commit(w, 0));
    CHECK(titan_fs_exists(p), "published with the step");

    titan_ckpt *ck = NULL;
    OK(titan_ckpt_open(&ck, root));
    OK(titan_ckpt_begin(&w, root2, 1));
    OK(titan_ckpt_copy_files(ck, w));
    OK(titan_ckpt_add(w, "t", TITAN_DTYPE_F32, 1, shape, NULL, four));
    OK(titan_ckpt_commit(w, 0));
    titan_ckpt_close(ck);
    char *data = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/step-00000001/tokenizer.json", root2);
    OK(titan_fs_read_file(p, &data, &len, 1024));
    CHECK(data && len == strlen(body) && !memcmp(data, body, len), "copied byte for byte");
    free(data);
    OK(titan_ckpt_open(&ck, root2)); /* its own data file, not the source's */
    titan_ckpt_close(ck);

    if (titan_fs_remove_tree(tmp) != TITAN_OK) fprintf(stderr, "cleanup: %s\n", titan_error_message());
    printf("test_ckpt_files: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
