/* test_op_profile.c - the op profiler (lib/backend/op_profile.h): it forwards
 * every op unchanged, records only while asked, counts matmul and attention
 * FLOPs, and its table and totals agree with its events. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/op_profile.h"
#include "check.h"
#include "core/fsutil.h"

int main(void) {
    const titan_backend *cpu = titan_backend_cpu(), *be = NULL;
    titan_op_profile *p = NULL;
    CHECK(titan_op_profile_create(cpu, &p, &be) == TITAN_OK);
    CHECK(be && be != cpu && strcmp(be->name, "cpu") == 0 && be->host == 1 && be->alloc == cpu->alloc,
          "the table keeps the inner backend's name, host flag and memory ops");
    CHECK(be->caps == cpu->caps && (be->caps & TITAN_CAP_CPU) && be->set_option == cpu->set_option,
          "and its caps and set_option");
    CHECK(be->set_option(TITAN_OPT_ATTENTION_CUDNN, 1) == -1, "cpu has no attention option");
    titan_op_profile *q = NULL;
    const titan_backend *bq = NULL;
    CHECK(titan_op_profile_create(cpu, &q, &bq) == TITAN_ERR_USAGE, "one profiler per process");

    enum { N = 8, IC = 16, OC = 12 };
    float *x = be->alloc(N * IC * sizeof(float)), *w = be->alloc(OC * IC * sizeof(float));
    float *y = be->alloc(N * OC * sizeof(float)), *y2 = be->alloc(N * OC * sizeof(float));
    for (int i = 0; i < N * IC; i++) x[i] = sinf((float)i);
    for (int i = 0; i < OC * IC; i++) w[i] = cosf((float)i);

    be->matmul_forward(TITAN_DTYPE_F32, y, x, w, N, IC, OC); /* not recording */
    CHECK(titan_op_profile_total_s(p, NULL, NULL) == 0.0, "nothing recorded while off");

    titan_op_profile_record(p, 1);
    be->matmul_forward(TITAN_DTYPE_F32, y2, x, w, N, IC, OC);
    be->zero(x, N * IC * sizeof(float));
    double ss = be->sumsq(y2, N * OC);
    titan_op_profile_record(p, 0);
    be->scale(y2, 1, 1.0f); /* after the recording: not counted */

    CHECK(memcmp(y, y2, N * OC * sizeof(float)) == 0, "the profiled op computes the same bits");
    CHECK(ss > 0, "sumsq returns the inner value");
    const char *top = NULL;
    double top_s = -1, all = titan_op_profile_total_s(p, &top, &top_s);
    CHECK(all > 0 && top != NULL && top_s > 0 && top_s <= all + 1e-12, "totals: %g, %s %g", all, top ? top : "-", top_s);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    titan_op_profile_summary(p, f, 1.0);
    fclose(f);
    CHECK(strstr(buf, "matmul_forward") && strstr(buf, "zero") && strstr(buf, "sumsq") &&
              !strstr(buf, "scale") && strstr(buf, "all ops") && strstr(buf, "of the step"),
          "summary:\n%s", buf);
    free(buf);

    char path[] = "/tmp/titan_op_profile_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(titan_op_profile_write_trace(p, path, 3, 42) == TITAN_OK, "write trace");
    char *js = NULL;
    size_t jn = 0;
    CHECK(titan_fs_read_file(path, &js, &jn, 1 << 20) == TITAN_OK);
    /* 2 N IC OC flops for the one recorded matmul */
    CHECK(js && strstr(js, "\"flops\": 3072") && strstr(js, "\"step\": 42") && strstr(js, "\"pid\": 3") &&
              strstr(js, "N=8 IC=16 OC=12") && !strstr(js, "\"scale\""),
          "trace:\n%s", js ? js : "");
    free(js);
    unlink(path);

    be->free(x), be->free(w), be->free(y), be->free(y2);
    titan_op_profile_free(p);
    CHECK(titan_op_profile_create(cpu, &q, &bq) == TITAN_OK, "a new profiler once the first is freed");
    titan_op_profile_free(q);
    printf("test_op_profile: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
