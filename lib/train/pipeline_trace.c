/* pipeline_trace.c - a pipeline rank's last step as a Chrome trace (see
 * pipeline_trace.h). */
#include "train/pipeline_trace.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/fsutil.h"

titan_status titan_pipeline_trace_write(const titan_pipeline *p, const char *run_dir, int world_rank) {
    const titan_pp_action *acts;
    const titan_pp_span *sp;
    double t0;
    int n = titan_pipeline_last_step(p, &acts, &sp, &t0), steps, pp, r, v, micro;
    if (n == 0) return TITAN_OK;
    titan_pp_schedule s;
    titan_pipeline_shape(p, &s, &pp, &r, &v, &micro);
    double measured = titan_pipeline_bubble(p, &steps);
    double theory = titan_pp_schedule_bubble(s, pp, r, v, micro);
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/pipeline_traces", run_dir);
    TITAN_TRY(titan_fs_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/rank%d_trace.json", dir, world_rank);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return titan_error(TITAN_ERR_NOMEM, "pipeline trace %s: out of memory", path);
    double start_unix = titan_wall_s() - (titan_now_s() - t0);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %d, \"start_unix_s\": %.6f, \"pipeline\": "
               "{\"schedule\": \"%s\", \"placement\": \"%s\", \"pp\": %d, \"pp_rank\": %d, \"stages_per_rank\": %d, "
               "\"micro_batches\": %d, "
               "\"steps\": %d, \"bubble_measured\": %.6f, \"bubble_theory\": %.6f}},\n \"traceEvents\": [\n",
            world_rank, start_unix, titan_pp_schedule_name(s), titan_pp_schedule_vshape(s) ? "v" : "loop", pp, r, v,
            micro, steps, measured, theory);
    fprintf(f, "  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 100, \"args\": {\"name\": "
               "\"pipeline (pp rank %d)\"}}", world_rank, r);
    for (int i = 0; i < n; i++) {
        int g = titan_pp_global_stage(titan_pp_schedule_vshape(s), pp, r, acts[i].stage);
        fprintf(f, ",\n  {\"name\": \"%c %d/%d\", \"cat\": \"pipeline\", \"ph\": \"X\", \"pid\": %d, \"tid\": 100, "
                   "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"op\": \"%c\", \"stage\": %d, \"micro_batch\": %d, "
                   "\"blocked_ms\": %.3f, \"cpu_ms\": %.3f}}",
                "FBIW"[acts[i].op], g, acts[i].mb, world_rank, sp[i].t0 * 1e6, (sp[i].t1 - sp[i].t0) * 1e6,
                "FBIW"[acts[i].op], g, acts[i].mb, sp[i].blocked_s * 1e3, sp[i].cpu_s * 1e3);
    }
    fputs("\n]}\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return titan_error(TITAN_ERR_NOMEM, "pipeline trace %s: out of memory", path);
    }
    titan_status st = titan_fs_write_atomic(path, buf, len);
    free(buf);
    return st;
}
