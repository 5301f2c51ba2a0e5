#!/bin/sh
# CLI test of TensorBoard event files (metrics.enable_tensorboard): a run
# resumed after losing its last steps writes a second file whose SessionLog
# START makes TensorBoard drop the lost steps; TensorBoard's own reader
# (the tensorboard package's EventAccumulator) sees each step once, under
# torchtitan's tags, with metrics.jsonl's values to float32 rounding;
# titan-trace reads the files back as it reads metrics.jsonl, and a damaged
# record is exit 7 naming the byte. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"
shard_man_corpus
r=$tmp/r
"$bin/titan-init" -q "$cfg" "$r" $TINY --training.steps=6 --checkpoint.interval=2 --metrics.enable_tensorboard \
    --validation.enable --validation.dataset_path="$tmp/data" --validation.freq=3 --validation.steps=1 2>"$tmp/err" \
    || fail "init"
expect 0 "tensorboard: $r/tb/[0-9]\{8\}-[0-9]\{4\}/events.out.tfevents.[0-9]*\.[^.]*\.[0-9]*\.0" \
    "6 steps write RUN/tb/YYYYmmdd-HHMM/events.out.tfevents.SECS.HOST.PID.0" -- "$bin/titan-train" "$r"
# Lose steps 5 and 6: their checkpoint is gone, the run resumes from step 4.
rm -rf "$r/checkpoint/step-00000006"
echo step-00000004 > "$r/checkpoint/latest"
sleep 1 # a second file, with a later name
expect 0 "resumed from .*step-00000004" "resumed from step 4, steps 5 and 6 trained again" -- "$bin/titan-train" "$r"
[ "$(find "$r/tb" -name '*tfevents*' | wc -l)" = 2 ] && ok "two event files" || fail "two event files"
# Both starts in one minute's folder, as when a job restarts at once (a
# minute's boundary between them would make two TensorBoard runs).
set -- $(find "$r/tb" -name '*tfevents*' | sort)
[ "$(dirname "$1")" = "$(dirname "$2")" ] || mv "$2" "$(dirname "$1")/"

if need_pyref "TensorBoard's EventAccumulator reads the files"; then
    if "$PYREF" - "$r" > "$tmp/out" 2>"$tmp/err" <<'PY'
import json, sys, warnings
warnings.filterwarnings("ignore")
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
run = sys.argv[1]
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
mux = EventMultiplexer(size_guidance={"scalars": 0})
mux.AddRunsFromDirectory(run + "/tb")
mux.Reload()
runs = sorted(mux.Runs())
# the two files may share a minute's folder or not: join their scalars in start order
series = {}
bad = []
for name in runs:
    for tag in mux.Runs()[name]["scalars"]:
        events = mux.Scalars(name, tag)
        if len(events) != len(set(e.step for e in events)):
            bad.append("%s: a step twice: %s" % (tag, [e.step for e in events]))
        for e in events:
            series.setdefault(tag, {})[e.step] = e.value
pairs = {"loss_metrics/global_avg_loss": "loss", "grad_norm": "grad_norm", "lr": "lr",
         "ntokens_seen": "tokens_seen", "validation_metrics/loss": "val_loss",
         "time_metrics/end_to_end(s)": "step_time_s"}
for tag, key in pairs.items():
    want = {l["step"]: l[key] for l in lines if key in l}
    got = series.get(tag, {})
    if sorted(got) != sorted(want):
        bad.append("%s: steps %s, metrics.jsonl %s" % (tag, sorted(got), sorted(want)))
        continue
    for s, v in want.items():
        if abs(got[s] - v) > 1e-6 * max(1.0, abs(v)):
            bad.append("%s step %d: %r, metrics.jsonl %r" % (tag, s, got[s], v))
print("tags:", sorted(series))
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
    then ok "EventAccumulator: steps 1-6 once each, metrics.jsonl's values, validation at 3 and 6"
    else fail "EventAccumulator: steps 1-6 once each, metrics.jsonl's values ($(tail -n 3 "$tmp/out" "$tmp/err"))"; fi
    grep -q "'throughput(tps)'" "$tmp/out" && grep -q "'tflops'" "$tmp/out" && grep -q "'mfu(%)'" "$tmp/out" \
        && ok "torchtitan's tags" || fail "torchtitan's tags"
fi

# --- titan-trace reads them back ---------------------------------------------------------
"$bin/titan-trace" summary "$r" > "$tmp/a" 2>"$tmp/err" || fail "summary of metrics.jsonl"
expect 0 "" "titan-trace summary RUN/tb" -- "$bin/titan-trace" summary "$r/tb"
grep '^loss\|^steps\|^validation' "$tmp/a" > "$tmp/a.k"
grep '^loss\|^steps\|^validation' "$tmp/out" > "$tmp/b.k"
cmp -s "$tmp/a.k" "$tmp/b.k" && ok "... the same steps, loss and validation lines as metrics.jsonl's" \
    || fail "... the same steps, loss and validation lines as metrics.jsonl's ($(diff "$tmp/a.k" "$tmp/b.k" | tr '\n' ' '))"
expect 0 "" "titan-trace plot -y loss_metrics/global_avg_loss of one event file" -- \
    "$bin/titan-trace" plot -y loss_metrics/global_avg_loss "$(find "$r/tb" -name '*tfevents*' | sort | head -n 1)"
f=$(find "$r/tb" -name '*tfevents*' | sort | tail -n 1)
printf 'X' | dd of="$f" bs=1 seek=40 conv=notrunc 2>/dev/null
expect 7 "events.out.tfevents.*: byte [0-9]*: record .*checksum mismatch" "a damaged record: exit 7 naming the byte" -- \
    "$bin/titan-trace" summary "$r/tb"
tap_end
