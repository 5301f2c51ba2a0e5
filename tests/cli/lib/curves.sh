# curves.sh - sourced after tap.sh by the parallel-training tests
# (dist_train.sh, tp_train.sh, pp_train.sh, by way of tiny.sh): comparisons
# of two runs' metrics.jsonl and checkpoints. Each layout regroups float
# sums only, so its curve must be the one process's to a stated relative
# tolerance; the gradient norm is the finer test (a partial gradient left
# unsummed can move the loss by a few 1e-6 over 20 steps and the norm by
# 1e-5 at step 1, where a correct layout differs by about 1e-8).
#
#   same_curve RUN_A RUN_B FIRST_STEP TOL GN_TOL   losses of steps >= FIRST_STEP
#       agree to TOL, gradient norms to GN_TOL (relative); prints the worst
#       differences on stderr
#   curve DESCRIPTION RUN_A RUN_B [FIRST_STEP [TOL [GN_TOL]]]   the same as one
#       check (defaults 1, 1e-5, 1e-6)
#   same_bits DESCRIPTION RUN_A RUN_B   identical loss and grad_norm at every
#       one of 20 steps
#   same_ckpt DESCRIPTION RUN_A RUN_B [KEY]   every file of step 20 identical
#       (metadata.json but for its meta KEY, which may differ, when given)
#   resumes NAME FLAGS NAME2 FLAGS2 NAME3 FLAGS3   checkpoints across layouts
#       (FLAGS hold --nproc): $tmp/half trained under NAME to step 10, resumed
#       as one process ($tmp/half1, a copy) and under NAME2; $tmp/half2 one
#       process to step 10, resumed under NAME3; each continues $tmp/single's
#       curve from step 11. 9 checks
#   exposed_comm DESCRIPTION RUN   every one of RUN's 20 steps reports
#       0 < comm_exposed_s <= comm_total_s (collectives that block)
same_curve() {
    /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "$4" "$5" <<'PY'
import json, sys
def load(p): return {d["step"]: (d["loss"], d["grad_norm"]) for d in map(json.loads, open(p))}
a, b, first, tol, gtol = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
steps = [s for s in a if s >= first]
if len(steps) < 10 or any(s not in b for s in steps): sys.exit("steps differ: %s vs %s" % (sorted(a), sorted(b)))
worst = max(abs(a[s][0] - b[s][0]) / abs(a[s][0]) for s in steps)
gworst = max(abs(a[s][1] - b[s][1]) / abs(a[s][1]) for s in steps)
print("max relative difference %.2e over %d steps, grad norm %.2e" % (worst, len(steps), gworst), file=sys.stderr)
sys.exit(0 if worst <= tol and gworst <= gtol else 1)
PY
}
curve() {
    if same_curve "$2" "$3" "${4:-1}" "${5:-1e-5}" "${6:-1e-6}" 2>"$tmp/err"; then ok "$1 ($(cat "$tmp/err"))"
    else fail "$1 ($(cat "$tmp/err"))"; fi
}
same_bits() {
    if /usr/bin/python3 - "$2/metrics.jsonl" "$3/metrics.jsonl" <<'PY'
import json, sys
a, b = ([(d["loss"], d["grad_norm"]) for d in map(json.loads, open(p))] for p in sys.argv[1:3])
sys.exit(0 if len(a) == 20 and a == b else 1)
PY
    then ok "$1"; else fail "$1"; fi
}
same_ckpt() {
    d=0
    for f in "$2"/checkpoint/step-00000020/*; do
        g=$3/checkpoint/step-00000020/${f##*/}
        if [ -n "${4:-}" ] && [ "${f##*/}" = metadata.json ]; then
            /usr/bin/python3 -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for m in (a, b): m["meta"].pop(sys.argv[3], None)
sys.exit(a != b)' "$f" "$g" "$4" || d=1
        else cmp -s "$f" "$g" || d=1; fi
    done
    [ $d -eq 0 ] && [ -f "$3/checkpoint/step-00000020/metadata.json" ] && ok "$1" || fail "$1"
}
resumes() {
    expect 0 "" "$1 to step 10" -- "$bin/titan-train" -q "$tmp/half" $2 --stop-at 10
    cp -r "$tmp/half" "$tmp/half1"
    expect 0 "" "resume the $1 checkpoint as one process" -- "$bin/titan-train" -q "$tmp/half1"
    curve "$1 -> one process resume continues the curve" "$tmp/single" "$tmp/half1" 11
    expect 0 "" "resume the $1 checkpoint under $3" -- "$bin/titan-train" -q "$tmp/half" $4
    curve "$1 -> $3 resume continues the curve" "$tmp/single" "$tmp/half" 11
    expect 0 "" "one process to step 10" -- "$bin/titan-train" -q "$tmp/half2" --stop-at 10
    expect 0 "" "resume the one-process checkpoint under $5" -- "$bin/titan-train" -q "$tmp/half2" $6
    curve "one process -> $5 resume continues the curve" "$tmp/single" "$tmp/half2" 11
}
exposed_comm() {
    if /usr/bin/python3 - "$2/metrics.jsonl" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(d) == 20 and all(0 < x["comm_exposed_s"] <= x["comm_total_s"] + 1e-9 for x in d) else 1)
PY
    then ok "$1"; else fail "$1"; fi
}
