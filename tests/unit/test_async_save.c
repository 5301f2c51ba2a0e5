/* test_async_save.c - background checkpoint saves: the checkpoint holds the
 * state at the moment of the save even when training changes it right after,
 * a second save waits for the first, and a failed save surfaces at the next
 * poll or wait instead of being lost. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "model/llama_config.h"
#include "train/async_save.h"
#include "train/state.h"

#include "check.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void) {
    char root[] = "/tmp/titan-test-async-XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    titan_llama_config mc;
    CHECK(titan_llama_flavor("debugmodel", &mc) == TITAN_OK);
    mc.vocab_size = 300;
    size_t n = titan_llama_num_params(&mc);
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4), *back = malloc(n * 4);
    for (size_t i = 0; i < n; i++) p[i] = (float)i * 1e-6f, m[i] = 1.0f, v[i] = 2.0f;
    titan_tokenizer *byte;
    CHECK(titan_tokenizer_open(&byte, "byte") == TITAN_OK);
    titan_async_saver *s;
    CHECK(titan_async_saver_create(&s, titan_backend_cpu(), n) == TITAN_OK);
    titan_train_progress pr = {.step = 1, .tokens_seen = 10, .loader = {.position = 5}};
    titan_state_view view = {.params = p, .exp_avg = m, .exp_avg_sq = v, .adam_step = 1};
    char ck[128];
    snprintf(ck, sizeof ck, "%s/ckpt", root);
    double stall = -1;
    CHECK(titan_async_save_start(s, ck, &mc, &view, &pr, byte, 0, &stall) == TITAN_OK && stall >= 0);
    /* Training moves on while the thread writes: the checkpoint must not see it. */
    for (size_t i = 0; i < n; i++) p[i] = -1.0f;
    pr.step = 2;
    CHECK(titan_async_save_start(s, ck, &mc, &view, &pr, byte, 0, &stall) == TITAN_OK); /* waits for step 1 */
    CHECK(titan_async_save_wait(s) == TITAN_OK);
    titan_train_progress got;
    char path[256];
    snprintf(path, sizeof path, "%s/step-00000001", ck);
    CHECK(titan_state_load(path, &mc, back, NULL, &got, NULL, 0) == TITAN_OK);
    int same = 1;
    for (size_t i = 0; i < n; i++) same &= back[i] == (float)i * 1e-6f;
    CHECK(same && got.step == 1 && got.loader.position == 5 && got.tokens_seen == 10);
    CHECK(titan_state_load(ck, &mc, back, NULL, &got, NULL, 0) == TITAN_OK); /* latest = 2 */
    CHECK(got.step == 2 && back[0] == -1.0f);

    /* A root that cannot be created (a regular file is in the way). */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/file", root);
    FILE *f = fopen(bad, "w");
    if (f) fclose(f);
    snprintf(bad, sizeof bad, "%s/file/ckpt", root);
    pr.step = 3;
    CHECK(titan_async_save_start(s, bad, &mc, &view, &pr, byte, 0, &stall) == TITAN_OK);
    titan_status st = titan_async_save_wait(s);
    CHECK(st != TITAN_OK);
    CHECK(strstr(titan_error_message(), "checkpoint step 3 (written in the background)") != NULL);
    CHECK(strstr(titan_error_message(), "file/ckpt") != NULL);
    CHECK(titan_async_save_wait(s) == TITAN_OK); /* reported once */
    /* Through poll: the error comes out at a later step. */
    CHECK(titan_async_save_start(s, bad, &mc, &view, &pr, byte, 0, &stall) == TITAN_OK);
    st = TITAN_OK;
    for (int i = 0; i < 2000 && st == TITAN_OK; i++) {
        st = titan_async_save_poll(s);
        if (st == TITAN_OK) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK(st != TITAN_OK);
    titan_async_saver_free(s);
    titan_tokenizer_free(byte);
    free(p), free(m), free(v), free(back);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (failures) {
        fprintf(stderr, "test_async_save: %d failures\n", failures);
        return 1;
    }
    printf("test_async_save: ok\n");
    return 0;
}
