#!/bin/sh
# CLI test of the habits users bring from torchtitan and common tools:
# --job.config_file (a new run in job.dump_folder, then resumes under the
# file's keys, naming those that differ), titan-init CONFIG without RUN, a
# job file given to titan-train in place of a run, one error line for a
# layout that does not fit --nproc, step lines with N/TOTAL and an ETA, and
# a sampling-only call that trains nothing and measures no peak. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus
# A job file as torchtitan users write them: relative paths, run in its folder.
mkdir -p "$tmp/w"
cat > "$tmp/w/job.toml" <<EOF
[job]
dump_folder = "out/job"
[model]
flavor = "debugmodel"
dim = 32
n_layers = 2
n_heads = 4
n_kv_heads = 2
multiple_of = 16
[training]
dataset_path = "$tmp/data"
steps = 6
seq_len = 32
local_batch_size = 2
threads = 1
[checkpoint]
interval = 3
keep_latest_k = 0
[metrics]
peak_flops = 1e11
log_freq = 2
EOF
cd "$tmp/w" || exit 1

# --- --job.config_file ---------------------------------------------------------------
expect 0 "out/job: a new run of job.toml (job.dump_folder)" "--job.config_file F makes a new run in job.dump_folder" -- \
    "$bin/titan-train" --job.config_file job.toml --stop-at 3
[ -f out/job/config.toml ] && [ -d out/job/checkpoint/step-00000003 ] && ok "its run and checkpoint are in job.dump_folder" \
    || fail "its run and checkpoint are in job.dump_folder"
expect 0 "whose keys differ from out/job/config.toml in 1: training.steps 6 -> 8" \
    "resumed under the file's keys, the differences named" -- "$bin/titan-train" --job.config_file job.toml --training.steps 8
grep -q "resumed from out/job/checkpoint/step-00000003" "$tmp/err" && ok "it resumed from step 3" || fail "it resumed from step 3"
expect 2 "unexpected argument 'out/job'" "--job.config_file with a RUN as well is refused" -- \
    "$bin/titan-train" --job.config_file job.toml out/job
expect 2 "job.toml: a job config, not a run directory" "titan-train JOB.toml says what it is" -- "$bin/titan-train" job.toml
grep -q "hint: titan-train --job.config_file job.toml" "$tmp/err" && ok "... and how to train it" || fail "... and how to train it"

# --- titan-init without RUN ------------------------------------------------------------
expect 0 "RUN: out/init (job.dump_folder)" "titan-init CONFIG makes job.dump_folder" -- \
    "$bin/titan-init" job.toml --job.dump_folder=out/init
[ -f out/init/config.toml ] && ok "out/init is a run" || fail "out/init is a run"
expect 0 "" "titan-init --job.config_file CONFIG RUN" -- "$bin/titan-init" -q --job.config_file job.toml out/init2
[ -f out/init2/config.toml ] && ok "out/init2 is a run" || fail "out/init2 is a run"

# --- one line for a layout that does not fit --nproc ---------------------------------
expect 2 "3 ranks cannot be split into" "a layout --nproc 3 cannot make fails before the ranks start" -- \
    "$bin/titan-train" out/init --nproc 3 $TP2
[ "$(grep -c 'error:' "$tmp/err")" = 1 ] && ok "... with one error line" || fail "... with one error line"
if command -v mpirun >/dev/null 2>&1; then
    expect 2 "degrees multiply to 2" "the same under mpirun -n 3" -- mpirun --allow-run-as-root --oversubscribe -n 3 \
        "$bin/titan-train" out/init --parallelism.data_parallel_shard_degree=2
    [ "$(grep -c 'titan-train.*error:' "$tmp/err")" = 1 ] && ok "... rank 0 alone says it" || fail "... rank 0 alone says it"
else
    skip "one error line under mpirun" "mpirun not found"
fi

# --- step lines, sampling ----------------------------------------------------------------
expect 0 "" "train out/init to 4 of 6 steps" -- "$bin/titan-train" out/init --stop-at 4
grep -q "^step 1/6 | loss .* | eta [0-9<][0-9]*s (to step 4)" "$tmp/err" && ok "step lines: N/TOTAL and the ETA to --stop-at" \
    || fail "step lines: N/TOTAL and the ETA to --stop-at"
grep -q "^step 4/6 | " "$tmp/err" && ok "the --stop-at step is printed" || fail "the --stop-at step is printed"
expect 0 "sampling from step 4 (nothing left to train)" "--sample at --stop-at trains nothing" -- \
    "$bin/titan-train" out/init --stop-at 4 --sample 3
grep -q "nothing to\|GFLOP/s" "$tmp/err" && fail "... prints no 'nothing to' and measures no peak" \
    || ok "... prints no 'nothing to' and measures no peak"
expect 0 "nothing to train: the run is at step 4 (--stop-at 4)" "no steps left, no sample: says so" -- \
    "$bin/titan-train" out/init --stop-at 4
tap_end
