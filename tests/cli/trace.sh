#!/bin/sh
# CLI tests of the flight recorder and titan-trace. A 2-rank job hung on
# purpose (TITAN_TEST_STALL: rank 1 stops before step 3 as if stuck in a
# kernel): SIGUSR1 to the launcher makes both ranks dump and go on, and
# titan-trace hang names the collective rank 0 waits in and rank 1 as the
# one that never called it; SIGTERM leaves dumps too. The same for a
# pipeline (a receive whose send never came), and for a collective that
# times out (rank 0's dump says why it failed). titan-trace summary, plot
# (text and SVG), flight and chrome (dumps and op-profile traces on one
# clock) on what the runs wrote; bad input gets its exit status and the
# file named. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"
unset TITAN_COMM_TIMEOUT # the tests below set their own

shard_man_corpus

# wait_for FILE PATTERN [TENTHS]: until FILE holds PATTERN (default 20 s).
wait_for() {
    i=0
    while [ $i -lt "${3:-200}" ]; do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# reason RUN R: the "reason" of rank R's dump
reason() {
    /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reason"])' "$1/comm_traces/rank-$2.json" 2>/dev/null
}
# dumped RUN REASON: until both ranks' dumps give REASON (ranks other than 0 log no info lines)
dumped() {
    i=0
    while [ $i -lt 200 ]; do
        [ "$(reason "$1" 0)" = "$2" ] && [ "$(reason "$1" 1)" = "$2" ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

# ranks JOB: how many ranks the launcher JOB still has (a rank killed by a
# signal leaves it alive for its 30 s grace, so the launcher alone proves nothing)
ranks() { pgrep -P "$1" | wc -l; }

# ---- a hung FSDP job: SIGUSR1, then SIGTERM ------------------------------------------------
"$bin/titan-init" -q "$cfg" "$tmp/hung" $TINY 2>"$tmp/err" || fail "init hung"
TITAN_TEST_STALL=1:3 "$bin/titan-train" "$tmp/hung" --nproc 2 --comm.train_timeout_seconds=120 \
    >"$tmp/hung.out" 2>"$tmp/hung.err" &
job=$!
if wait_for "$tmp/hung.err" "TITAN_TEST_STALL: rank 1 stops before step 3"; then ok "rank 1 stalls before step 3"
else fail "rank 1 stalls before step 3"; fi
sleep 1 # rank 0 reaches the step's first collective
kill -USR1 $job
if dumped "$tmp/hung" SIGUSR1; then ok "SIGUSR1 to the launcher: both ranks dump"; else fail "SIGUSR1 to the launcher: both ranks dump"; fi
sleep 0.5
[ "$(ranks $job)" -eq 2 ] && ok "both ranks go on after SIGUSR1" || fail "both ranks go on after SIGUSR1 ($(ranks $job) left)"
expect 1 "" "titan-trace hang on a hung job exits 1" -- "$bin/titan-trace" hang "$tmp/hung"
cp "$tmp/out" "$tmp/hang.txt"
grep -q "^stuck: all_gather #[0-9]* on comm shard" "$tmp/hang.txt" && grep -q "step 3" "$tmp/hang.txt" &&
    grep -q "rank 0 (.*): waiting in it" "$tmp/hang.txt" &&
    grep -q "rank 1 (.*): NEVER CALLED IT" "$tmp/hang.txt" && grep -q "is in no communication: busy (or stuck) outside titan's collectives in step 3 (step start)" "$tmp/hang.txt" &&
    grep -q "^likely cause: rank 1 " "$tmp/hang.txt" &&
    ok "hang: rank 0 waits in step 3's all_gather on shard, rank 1 never called it (at the step's start), the likely cause" ||
    { fail "hang report"; sed 's/^/#   /' "$tmp/hang.txt"; }
expect 0 "" "titan-trace flight -n 3 RUN" -- "$bin/titan-trace" flight -n 3 "$tmp/hung"
[ "$(grep -c "^rank [01] (" "$tmp/out")" -eq 2 ] && grep -q "all_gather .* running .*(so far)" "$tmp/out" &&
    ok "flight: both ranks, rank 0's all_gather still running" || { fail "flight listing"; sed 's/^/#   /' "$tmp/out"; }
kill -TERM $job
wait $job; rc=$?
[ $rc -ne 0 ] && [ "$(reason "$tmp/hung" 0)" = SIGTERM ] && [ "$(reason "$tmp/hung" 1)" = SIGTERM ] &&
    ok "SIGTERM: both ranks dump, then die of it (job exit $rc)" ||
    fail "SIGTERM: both ranks dump, then die of it (exit $rc, reasons $(reason "$tmp/hung" 0), $(reason "$tmp/hung" 1))"

# ---- a hung pipeline: the receive whose send never came ------------------------------------
"$bin/titan-init" -q "$cfg" "$tmp/pp" $TINY 2>"$tmp/err" || fail "init pp"
TITAN_TEST_STALL=1:3 "$bin/titan-train" "$tmp/pp" --nproc 2 --comm.train_timeout_seconds=120 \
    --parallelism.pipeline_parallel_degree=2 --parallelism.data_parallel_shard_degree=1 >/dev/null 2>"$tmp/pp.err" &
job=$!
wait_for "$tmp/pp.err" "TITAN_TEST_STALL" && sleep 1
kill -USR1 $job
dumped "$tmp/pp" SIGUSR1
expect 1 "" "titan-trace hang on a hung pipeline" -- "$bin/titan-trace" hang "$tmp/pp"
grep -q "recv #[0-9]* from rank 1 of comm pp" "$tmp/out" && grep -q "NEVER CALLED the matching send" "$tmp/out" &&
    grep -q "^likely cause: rank 1 " "$tmp/out" &&
    ok "hang: stage 0 waits for a receive from stage 1, which never sent it" ||
    { fail "pipeline hang report"; sed 's/^/#   /' "$tmp/out"; }
kill -TERM $job; wait $job

# ---- a collective that times out: the failed rank's dump says why --------------------------
"$bin/titan-init" -q "$cfg" "$tmp/tmo" $TINY 2>"$tmp/err" || fail "init tmo"
TITAN_TEST_STALL=1:3 "$bin/titan-train" "$tmp/tmo" --nproc 2 --comm.train_timeout_seconds=2 >/dev/null 2>"$tmp/tmo.err" &
job=$!
wait_for "$tmp/tmo.err" "rank-0.json written (.*timed out after 2.0 s waiting for rank 1" &&
    ok "a timed-out rank dumps with the error as its reason" || fail "a timed-out rank dumps with the error as its reason"
kill -TERM $job; wait $job; rc=$?
grep -q "rank 0 of 2 exited with status 8" "$tmp/tmo.err" && ok "it exits 8 (rc $rc)" || fail "it exits 8 (rc $rc)"
expect 1 "" "titan-trace hang after the timeout" -- "$bin/titan-trace" hang "$tmp/tmo"
grep -q "rank 0 (.*): failed in it" "$tmp/out" && grep -q "^likely cause: rank 1 " "$tmp/out" &&
    ok "hang: rank 0 failed in the collective rank 1 never called" || { fail "timeout report"; sed 's/^/#   /' "$tmp/out"; }
# A dump written later (the launcher's SIGTERM to a rank that had failed) keeps the failure's error
mkdir -p "$tmp/later"
/usr/bin/python3 - "$tmp/tmo/comm_traces/rank-0.json" "$tmp/later/rank-0.json" <<'PY' || fail "a later dump made"
import json, sys
d = json.load(open(sys.argv[1]))
d["failure"], d["reason"] = d["reason"], "SIGTERM"
json.dump(d, open(sys.argv[2], "w"))
PY
expect 0 "" "titan-trace flight on a dump written after a failure" -- "$bin/titan-trace" flight -n 1 "$tmp/later/rank-0.json"
grep -q "^rank 0 (.*: SIGTERM, after it failed: .*timed out after 2.0 s" "$tmp/out" &&
    ok "flight: the header gives the reason and the failure before it" || { fail "flight after a failure"; sed 's/^/#   /' "$tmp/out"; }

# ---- the recorder off: nothing written, SIGUSR1 harmless ----------------------------------
"$bin/titan-init" -q "$cfg" "$tmp/off" $TINY 2>"$tmp/err" || fail "init off"
TITAN_TEST_STALL=1:3 "$bin/titan-train" "$tmp/off" --nproc 2 --comm.trace_buf_size=0 \
    --comm.train_timeout_seconds=120 >/dev/null 2>"$tmp/off.err" &
job=$!
wait_for "$tmp/off.err" "TITAN_TEST_STALL" && sleep 0.5
kill -USR1 $job; sleep 1
[ "$(ranks $job)" -eq 2 ] && [ ! -e "$tmp/off/comm_traces" ] && ok "trace_buf_size = 0: SIGUSR1 ignored, no dumps" ||
    fail "trace_buf_size = 0: SIGUSR1 ignored, no dumps"
kill -TERM $job; wait $job

# ---- a finished run: summary, plot, chrome ------------------------------------------------
"$bin/titan-init" -q "$cfg" "$tmp/done" $TINY 2>"$tmp/err" || fail "init done"
expect 0 "" "train 20 steps on 2 ranks, profiling step 10" -- "$bin/titan-train" -q "$tmp/done" --nproc 2 \
    --profiling.enable_profiling=true
expect 0 "" "titan-trace summary RUN" -- "$bin/titan-trace" summary "$tmp/done"
grep -q "^steps  *1 to 20 (20 lines)" "$tmp/out" && grep -q "^loss  *first [0-9.]*, last" "$tmp/out" &&
    grep -q "^tokens/s  *median [0-9]" "$tmp/out" && grep -q "^MFU  *median" "$tmp/out" &&
    grep -q "^comm  *[0-9.]* s of collectives" "$tmp/out" && grep -q "^checkpoints  *2 saves" "$tmp/out" &&
    ok "summary: steps, loss, tokens/s, MFU, communication, checkpoints" || { fail "summary"; sed 's/^/#   /' "$tmp/out"; }
first=$(/usr/bin/python3 -c 'import json,sys; print("%.4f" % json.loads(open(sys.argv[1]).readline())["loss"])' \
    "$tmp/done/metrics.jsonl")
grep -q "first $first," "$tmp/out" && ok "summary's first loss is metrics.jsonl's ($first)" || fail "summary's first loss ($first)"
expect 0 "" "titan-trace plot RUN (text)" -- "$bin/titan-trace" plot "$tmp/done" --width 40 --height 8
[ "$(grep -c '|' "$tmp/out")" -eq 8 ] && grep -q "^ *loss:  \* loss" "$tmp/out" && ok "text plot: 8 rows and a legend" ||
    { fail "text plot"; sed 's/^/#   /' "$tmp/out"; }
expect 0 "" "titan-trace plot --svg" -- "$bin/titan-trace" plot -y loss,grad_norm --svg "$tmp/loss.svg" "$tmp/done"
/usr/bin/python3 - "$tmp/loss.svg" <<'PY' && ok "SVG: two polylines of 20 points" || fail "SVG: two polylines of 20 points"
import sys, xml.etree.ElementTree as ET
lines = [e for e in ET.parse(sys.argv[1]).iter() if e.tag.endswith("polyline")]
sys.exit(0 if len(lines) == 2 and all(len(l.get("points").split()) == 20 for l in lines) else 1)
PY
expect 0 "" "titan-trace plot of two runs" -- "$bin/titan-trace" plot "$tmp/done" "$tmp/hung" --height 6
grep -q "/done:loss .*/hung:loss" "$tmp/out" && ok "two runs share a plot, series named RUN:KEY" ||
    { fail "two runs share a plot"; sed 's/^/#   /' "$tmp/out"; }
cp -r "$tmp/hung/comm_traces" "$tmp/done/comm_traces"
expect 0 "" "titan-trace chrome RUN" -- "$bin/titan-trace" chrome -o "$tmp/trace.json" "$tmp/done"
/usr/bin/python3 - "$tmp/trace.json" <<'PY' 2>"$tmp/err" && ok "chrome: steps, ops and collectives of both ranks on one clock" || fail "chrome trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
cats = {(e["cat"], e["pid"]) for e in x}
assert cats == {("op", 0), ("op", 1), ("comm", 0), ("comm", 1), ("step", 0)}, cats
steps = sorted((e for e in x if e["name"].startswith("step ")), key=lambda e: e["ts"])
assert [e["name"] for e in steps] == ["step %d" % i for i in range(1, 21)], [e["name"] for e in steps]
assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(steps, steps[1:])), "steps overlap"
assert sum(e["name"] == "checkpoint" for e in x) == 2
# the profiled steps' ops (10 and 20) lie within those steps' slices: one wall clock
inside = lambda e, s: s["ts"] - 1e3 <= e["ts"] <= s["ts"] + s["dur"] + 1e3
ops = [e for e in x if e["cat"] == "op"]
assert ops and all(inside(e, steps[9]) or inside(e, steps[19]) for e in ops), "ops outside the profiled steps"
assert min(e["ts"] for e in x) == 0 and all(e["dur"] >= 0 for e in x)
assert any(e["name"].startswith("all_gather #") and e["args"]["state"] == "running" for e in x)
PY

# ---- bad input ----------------------------------------------------------------------------
expect 2 "unknown command 'bogus'" "unknown command" -- "$bin/titan-trace" bogus
expect 2 "expected one argument" "hang without a run" -- "$bin/titan-trace" hang
expect 2 "unknown option '--svg'" "an option of another command" -- "$bin/titan-trace" summary --svg x "$tmp/done"
expect 2 'no numeric "nosuch"' "plot -y of a key no line has" -- "$bin/titan-trace" plot -y nosuch "$tmp/done"
expect 3 "nothere: no such run directory or metrics file" "summary of a missing run" -- "$bin/titan-trace" summary "$tmp/nothere"
printf '{"step":1,"loss":2}\nnot json\n' > "$tmp/bad.jsonl"
expect 4 "bad.jsonl:2: not a metrics line" "a bad metrics line, named by file:line" -- "$bin/titan-trace" summary "$tmp/bad.jsonl"
expect 3 "no flight recorder dumps" "hang on a run without dumps" -- "$bin/titan-trace" hang "$tmp/off"
echo '{"format":"x"}' > "$tmp/rank-0.json"
expect 4 "not a flight recorder dump" "a foreign rank-0.json" -- "$bin/titan-trace" flight "$tmp/rank-0.json"
expect 0 "" "titan-trace --help" -- "$bin/titan-trace" --help
[ -f "$top/man/titan-trace.1" ] && ok "titan-trace(1) exists" || fail "titan-trace(1) exists"

tap_end
