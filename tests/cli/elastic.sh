#!/bin/sh
# CLI tests of elastic restarts (titan-train --nproc N --max-restarts K
# [--min-nproc M]; titan-train(1), Launch, Restarts): a 4-rank FSDP job of
# the tiny model, 20 steps of global batch 8, a checkpoint every 5, loses a
# rank (TITAN_TEST_KILL: SIGKILL) at a step drawn from the shell's pid and
# the clock (printed), and restarts from its latest checkpoint:
#   on 4 ranks: the metrics.jsonl lines, timing fields and the segment's
#     keys aside, and the final checkpoint equal the uninterrupted job's bit
#     for bit; the restart is recorded in metrics.jsonl with its cause and
#     the steps redone, which the kill step fixes and the checkpoint
#     interval bounds;
#   on 2 ranks (--min-nproc 2, TITAN_TEST_LOST_RANKS=2 forcing it): the
#     curve within the layouts' tolerance (curves.sh: 1e-5 relative loss,
#     1e-6 gradient norm), global batch 8 kept by 2 accumulation steps;
#   a start that saved no checkpoint counts a rank as lost: 3 ranks are
#     skipped (8 sequences do not split over dp 3), 2 taken;
# and what does not restart: --max-restarts 0, damaged data (status 7),
# restarts spent (the last start's status 8), a signal sent to the
# launcher, the launcher's options without --nproc. TAP output.
set -u
TINY_GLOBAL_BATCH=8
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus
EL="$TINY --checkpoint.interval=5"
for r in ref k4 k2 np none bad spent sig; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $EL 2>"$tmp/err" || fail "init $r"
done

# The kill: rank 0..3 before step 2..19 (a step after the seed checkpoint,
# before the last), drawn from the pid and the clock so that runs cover the
# steps around the checkpoints.
seed=${ELASTIC_SEED:-$(( $$ + $(date +%s) ))} # set it to replay a run
kstep=$(( 2 + seed % 18 )) krank=$(( seed / 18 % 4 ))
kstep2=$(( 2 + (seed / 72) % 18 )) krank2=$(( seed / 1296 % 4 ))
echo "# ELASTIC_SEED=$seed: kill rank $krank before step $kstep (4 ranks again), rank $krank2 before step $kstep2 (then 2 ranks)"

# drop_timing A B: metrics.jsonl lines of A and B, without the fields that
# time the steps or mark run segments, equal and 20 of them
drop_timing() {
    /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
SKIP = {"tokens_per_s", "mfu", "peak_rss_bytes", "step_time_s", "start_unix_s", "ckpt_stall_s", "comm_total_s",
        "comm_exposed_s", "dev_peak_bytes", "dev_used_bytes", "resumed_from", "global_batch", "layout", "restart",
        "restart_cause", "steps_redone", "optim_state_bytes", "optim_projected_bytes",
        "optim_comm_s", "optim_comm_bytes", "optimizer_s"}
a, b = ([{k: v for k, v in json.loads(l).items() if k not in SKIP} for l in open(p)] for p in sys.argv[1:3])
diff = [x["step"] for x, y in zip(a, b) if x != y]
print("%d and %d lines, %d differ %s" % (len(a), len(b), len(diff), diff[:5]), file=sys.stderr)
sys.exit(0 if len(a) == len(b) == 20 and not diff else 1)
PY
}
# restart_line RUN RESTART CAUSE REDONE LAYOUT: the segment line of that
# restart, its steps_redone REDONE (the steps trained after the checkpoint)
# or one less (rank 0 lost in the step a rank it waited for finished)
restart_line() {
    /usr/bin/python3 - "$1/metrics.jsonl" "$2" "$3" "$4" "$5" <<'PY'
import json, sys
path, k, cause, redone, layout = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
seg = [d for d in map(json.loads, open(path)) if "restart" in d]
print("restart lines: %s" % seg, file=sys.stderr)
ok = len(seg) == 1 and seg[0]["restart"] == k and cause in seg[0]["restart_cause"] and \
     seg[0]["steps_redone"] in (redone, max(redone - 1, 0)) and seg[0]["layout"].startswith(layout) and \
     seg[0]["global_batch"] == 8
sys.exit(0 if ok else 1)
PY
}

expect 0 "" "uninterrupted: FSDP 4, 20 steps" -- "$bin/titan-train" -q "$tmp/ref" --nproc 4

# --- a rank lost, restarted on 4 ranks: the same bits ---
expect 0 "restart 1 of 1 in 1 s: rank $krank of 4 was killed by signal 9 (Killed); resuming from step $(( (kstep - 1) / 5 * 5 )) on 4 ranks" \
    "rank $krank killed before step $kstep: restarted from the latest checkpoint on 4 ranks" -- \
    env TITAN_TEST_KILL=$krank:$kstep "$bin/titan-train" -q "$tmp/k4" --nproc 4 --max-restarts 1
if drop_timing "$tmp/ref" "$tmp/k4" 2>"$tmp/err"; then ok "restarted on 4 ranks: every metrics line = the uninterrupted job's, bit for bit ($(cat "$tmp/err"))"
else fail "restarted on 4 ranks: every metrics line = the uninterrupted job's, bit for bit ($(cat "$tmp/err"))"; fi
same_ckpt "restarted on 4 ranks: the final checkpoint = the uninterrupted job's, byte for byte" "$tmp/ref" "$tmp/k4"
# the work lost: the steps after checkpoint (kstep - 1) / 5 * 5, fewer than the interval
redone=$(( (kstep - 1) % 5 ))
if restart_line "$tmp/k4" 1 "rank $krank of 4 was killed by signal 9" $redone "dp_replicate=1,dp_shard=4" 2>"$tmp/err" &&
    [ $redone -lt 5 ]; then ok "metrics.jsonl records restart 1, its cause and the $redone steps redone (< the interval, 5)"
else fail "metrics.jsonl records restart 1, its cause and the $redone steps redone (< the interval, 5)"; fi

# --- a rank lost, restarted on 2 ranks: the layouts' tolerance ---
expect 0 "resuming from step $(( (kstep2 - 1) / 5 * 5 )) on 2 ranks" \
    "rank $krank2 killed before step $kstep2, 2 ranks counted lost: restarted on 2 ranks (--min-nproc 2)" -- \
    env TITAN_TEST_KILL=$krank2:$kstep2 TITAN_TEST_LOST_RANKS=2 "$bin/titan-train" "$tmp/k2" --nproc 4 --max-restarts 1 \
    --min-nproc 2
grep -q "batch 2 x 32 x 2 dp x 2 accum" "$tmp/err" && ok "2 ranks keep the global batch of 8: 2 accumulation steps" \
    || fail "2 ranks keep the global batch of 8: 2 accumulation steps"
curve "restarted on 2 ranks: the curve = the uninterrupted job's" "$tmp/ref" "$tmp/k2"
restart_line "$tmp/k2" 1 "rank $krank2 of 4 was killed by signal 9" $(( (kstep2 - 1) % 5 )) "dp_replicate=1,dp_shard=2" \
    2>"$tmp/err" && ok "metrics.jsonl records the restart on 2 ranks and its layout" \
    || fail "metrics.jsonl records the restart on 2 ranks and its layout"

# --- no checkpoint since the start: a rank counts as lost, 3 ranks do not fit ---
expect 0 "restart: 3 ranks skipped: the global batch of 8 sequences is not a multiple of local batch 2 x 3 dp" \
    "a start that saved nothing: 3 ranks skipped, saying why" -- env TITAN_TEST_KILL=1:3 "$bin/titan-train" -q "$tmp/np" \
    --nproc 4 --max-restarts 1 --min-nproc 2 --stop-at 6
grep -q "resuming from step 0 on 2 ranks (no checkpoint since the last start)" "$tmp/err" \
    && ok "... and the restart takes 2 ranks" || fail "... and the restart takes 2 ranks"
expect 0 "" "the same with --min-nproc 4: again on 4 ranks" -- env TITAN_TEST_KILL=1:3 "$bin/titan-train" -q "$tmp/none" \
    --nproc 4 --max-restarts 1 --stop-at 6
grep -q "resuming from step 0 on 4 ranks" "$tmp/err" && ok "... resumes on 4 ranks" || fail "... resumes on 4 ranks"

# --- what does not restart ---
rm -rf "$tmp/none/checkpoint/step-00000005" "$tmp/none/checkpoint/step-00000006" "$tmp/none/metrics.jsonl"
echo step-00000000 > "$tmp/none/checkpoint/latest"
expect 8 "spawn: rank 2 of 4 was killed by signal 9" "--max-restarts 0: a lost rank ends the job (status 8)" -- \
    env TITAN_TEST_KILL=2:2 "$bin/titan-train" -q "$tmp/none" --nproc 4 --stop-at 3
grep -q "restart" "$tmp/err" && fail "... and nothing restarts" || ok "... and nothing restarts"

data=$(ls -S "$tmp/bad/checkpoint/step-00000000/"*.bin | head -n 1)
printf 'XXXXXXXXXXXXXXXX' | dd of="$data" bs=1 seek=4096 conv=notrunc 2>/dev/null
expect 7 "not restarted: rank [0-9] exited with status 7 (damaged data), which a restart would meet again" \
    "damaged data (status 7) is not restarted" -- "$bin/titan-train" -q "$tmp/bad" --nproc 4 --max-restarts 3

expect 8 "not restarted: all 1 restarts (--max-restarts) are spent" \
    "a rank lost at every start: restarts spent, the last start's status" -- \
    env TITAN_TEST_KILL=1:7:9 "$bin/titan-train" -q "$tmp/spent" --nproc 4 --max-restarts 1 --stop-at 8
[ "$(grep -c "TITAN_TEST_KILL: rank 1 kills itself before step 7" "$tmp/err")" -eq 2 ] \
    && ok "... after 2 starts, each from step 5" || fail "... after 2 starts, each from step 5"

"$bin/titan-train" -q "$tmp/sig" --nproc 2 --max-restarts 3 --training.steps=100000 >/dev/null 2>"$tmp/sig.err" &
launcher=$!
polls=0
while [ $polls -lt 300 ] && ! grep -qs '"step"' "$tmp/sig/metrics.jsonl"; do sleep 0.1; polls=$((polls + 1)); done
kill -TERM $launcher
wait $launcher; rc=$?
if [ $rc -eq 143 ] && grep -q "not restarted: the launcher was sent signal 15" "$tmp/sig.err" &&
    ! grep -q "restart 1 of" "$tmp/sig.err"; then ok "SIGTERM to the launcher: stopped, not restarted (exit 143)"
else fail "SIGTERM to the launcher: stopped, not restarted (exit $rc)"; sed 's/^/#   /' "$tmp/sig.err" | tail -n 5; fi

expect 2 "--max-restarts: only with --nproc" "--max-restarts without --nproc is a usage error" -- \
    "$bin/titan-train" "$tmp/ref" --max-restarts 2
expect 2 "--min-nproc 5: more than --nproc 4" "--min-nproc above --nproc is a usage error" -- \
    "$bin/titan-train" "$tmp/ref" --nproc 4 --max-restarts 1 --min-nproc 5
expect 2 "no restart to take fewer ranks" "--min-nproc without --max-restarts is a usage error" -- \
    "$bin/titan-train" "$tmp/ref" --nproc 4 --min-nproc 2

tap_end
