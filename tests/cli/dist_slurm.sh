#!/bin/sh
# CLI test of running under Slurm: a one-node Slurm on this machine
# (scripts/slurm-local.sh, or one it already started), then srun --mpi=pmix
# with 2 ranks: build/tests/test_dist's communicator suite, a failing and a
# killed rank, and a tiny data-parallel titan-train that must give the same
# bits as --nproc 2; a hung one (TITAN_TEST_STALL) whose ranks dump on
# scancel --signal=USR1 and on scancel, and titan-trace hang names the
# rank; scripts/sbatch-example.sh's restart loop (MAX_RESTARTS) after a
# lost rank. TAP output; skipped (77) without Slurm, without root to start it,
# or when it will not start here. Stops the Slurm it started.
# TITAN_REQUIRE_SLURM=1 (CI sets it) turns every skip into a failure.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "$1"; [ "${TITAN_REQUIRE_SLURM:-0}" = 1 ] && exit 1; exit 77; }
prog=$top/build/tests/test_dist
bin=$top/bin
local_slurm=$top/scripts/slurm-local.sh
for c in srun sinfo slurmd slurmctld munged; do
    command -v $c >/dev/null 2>&1 || skip "$c not found (Debian: slurm-wlm munge)"
done
[ -x "$prog" ] || skip "$prog not built (make)"
tmp=$(mktemp -d)
started=0
cleanup() {
    [ $started -eq 1 ] && sh "$local_slurm" stop
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# One test at a time on this machine's local Slurm: another could stop it
# under us (fd 9; slurm-local.sh keeps it from the daemons).
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TITAN_SLURM_DIR:-/tmp/titan-slurm}.test.lock"
    flock -w 300 9 || skip "another dist_slurm.sh has held the local Slurm for 5 minutes"
fi
# One already running (left by a developer, say) is used and left running.
sh "$local_slurm" status 2>/dev/null || {
    [ "$(id -u)" -eq 0 ] || skip "starting a local Slurm needs root"
    started=1
}
t0=$(date +%s)
conf=$(sh "$local_slurm" start 2>"$tmp/start") ||
    skip "local Slurm did not start: $(tail -n 3 "$tmp/start" | tr '\n' ' ')"
export SLURM_CONF="$conf"
echo "# local Slurm ($SLURM_CONF) ready in $(($(date +%s) - t0)) s"

n=0; bad=0
ok()   { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - $1"; cat "$tmp/out" "$tmp/err" 2>/dev/null | sed 's/^/#   /' | tail -n 30; }
# More ranks than CPUs only where the machine has fewer than 2.
OVER=""; [ "$(nproc)" -lt 2 ] && OVER=--overcommit
# srun_np NP args...: one job step of NP tasks on the one node, killed after 2 minutes.
srun_np() {
    np=$1; shift
    timeout 120 srun --mpi=pmix -N1 -n "$np" $OVER --time=2 "$@" >"$tmp/out" 2>"$tmp/err"
}

srun --mpi=list >"$tmp/out" 2>"$tmp/err"
grep -q pmix "$tmp/out" && ok "srun --mpi=list has pmix" || fail "srun --mpi=list has pmix"

srun_np 2 "$prog"; rc=$?
if [ $rc -eq 0 ] && grep -q "suite all: 2 ranks via pmix: ok" "$tmp/out"; then
    ok "srun --mpi=pmix -n2: bootstrap and every collective"
else
    fail "srun --mpi=pmix -n2: bootstrap and every collective (exit $rc)"
fi

srun_np 2 "$prog" --suite exit3; rc=$?
[ $rc -eq 3 ] && ok "a rank's exit code 3 is srun's" || fail "a rank's exit code 3 is srun's (exit $rc)"

srun_np 2 "$prog" --suite kill; rc=$?
if [ $rc -ne 0 ] && grep -q "rank 0 got, as expected:.*exited or was killed" "$tmp/err"; then
    ok "a killed rank is named by the survivor"
else
    fail "a killed rank is named by the survivor (exit $rc)"
fi

# --- titan-train: 2 data-parallel ranks under srun == --nproc 2, bit for bit ------
export TITAN_NO_REEXEC=1
cfg=$top/configs/debugmodel.toml
TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=6 --checkpoint.interval=3
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=1 --parallelism.data_parallel_shard_degree=2"
if [ ! -x "$bin/titan-train" ] || [ ! -x "$bin/titan-init" ] || [ ! -x "$bin/titan-shard" ]; then
    ok "# SKIP titan-train under srun (bin/ not built)"
else
    cat "$top"/man/*.[157] > "$tmp/corpus.txt" # as tap.sh's shard_man_corpus (not sourced here)
    "$bin/titan-shard" -q -o "$tmp/data" "$tmp/corpus.txt" 2>"$tmp/err" && ok "shard corpus" || fail "shard corpus"
    "$bin/titan-init" "$cfg" "$tmp/s" $TINY >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 0 ] && grep -q "single process" "$tmp/err"; then
        ok "# SKIP titan-train under srun (this titan-train trains in a single process)"
    elif [ $rc -ne 0 ]; then
        fail "titan-init a 2-way sharded run (exit $rc)"
    else
        srun_np 2 "$bin/titan-train" "$tmp/s"; rc=$?
        if [ $rc -ne 0 ] && grep -q "single process" "$tmp/err"; then
            ok "# SKIP titan-train under srun (this titan-train trains in a single process)"
        elif [ $rc -eq 0 ] && grep -q "2 ranks (pmix" "$tmp/err"; then
            ok "srun --mpi=pmix -n2 titan-train: 6 steps on 2 ranks"
            [ "$(wc -l < "$tmp/s/metrics.jsonl")" -eq 6 ] && ok "6 metrics lines" || fail "6 metrics lines"
            last=$tmp/s/checkpoint/step-00000006
            [ -f "$last/rank-00000.bin" ] && [ -f "$last/rank-00001.bin" ] &&
                ok "final checkpoint has both ranks' files" || fail "final checkpoint has both ranks' files"
            "$bin/titan-init" "$cfg" "$tmp/l" $TINY >"$tmp/out" 2>"$tmp/err" &&
                timeout 120 "$bin/titan-train" --nproc 2 "$tmp/l" >"$tmp/out" 2>"$tmp/err"; rc=$?
            if [ $rc -ne 0 ]; then
                fail "the same run with --nproc 2 (exit $rc)"
            else
                same=1
                for f in "$last"/*; do
                    cmp -s "$f" "$tmp/l/checkpoint/step-00000006/$(basename "$f")" || same=0
                done
                [ $same -eq 1 ] && ok "srun and --nproc 2 give the same checkpoint bits" \
                    || fail "srun and --nproc 2 give the same checkpoint bits"
            fi
        else
            fail "srun --mpi=pmix -n2 titan-train (exit $rc)"
        fi
        # --- a hung job: scancel --signal=USR1 makes every rank dump, titan-trace names the rank ---
        "$bin/titan-init" -q "$cfg" "$tmp/h" $TINY --training.steps=100 2>"$tmp/err"
        name=titan-hang-$$
        TITAN_TEST_STALL=1:3 timeout 120 srun --mpi=pmix -N1 -n 2 $OVER --time=2 -J $name "$bin/titan-train" \
            "$tmp/h" --comm.train_timeout_seconds=100 >"$tmp/hout" 2>"$tmp/herr" &
        step=$!
        reasons() { # both ranks' dump reasons, or nothing
            /usr/bin/python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1] + "/comm_traces/rank-%d.json" % r))["reason"] for r in (0, 1)))' "$tmp/h" 2>/dev/null
        }
        i=0; until grep -q "TITAN_TEST_STALL" "$tmp/herr" 2>/dev/null || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
        sleep 1
        jid=$(squeue -h -n $name -o %i | head -n 1)
        [ -n "$jid" ] && scancel --signal=USR1 "$jid"
        i=0; until [ "$(reasons)" = "SIGUSR1 SIGUSR1" ] || [ $i -ge 200 ]; do sleep 0.1; i=$((i + 1)); done
        "$bin/titan-trace" hang "$tmp/h" >"$tmp/out" 2>"$tmp/err"; rc=$?
        if [ -n "$jid" ] && [ $rc -eq 1 ] && grep -q "NEVER CALLED IT" "$tmp/out" && grep -q "^likely cause: rank 1 " "$tmp/out"; then
            ok "scancel --signal=USR1: both ranks dump, titan-trace hang names rank 1"
        else
            fail "scancel --signal=USR1: both ranks dump, titan-trace hang names rank 1 (job '$jid', exit $rc, reasons '$(reasons)')"
        fi
        [ -n "$jid" ] && scancel "$jid"
        wait $step
        i=0; until [ "$(reasons)" = "SIGTERM SIGTERM" ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
        [ "$(reasons)" = "SIGTERM SIGTERM" ] && ok "scancel: both ranks dump as they stop" ||
            fail "scancel: both ranks dump as they stop (reasons '$(reasons)')"
        # --- scripts/sbatch-example.sh's restart loop: rank 1 lost before step 5, srun started
        # again from step 3's checkpoint; the curve is the uninterrupted srun job's, bit for bit ---
        "$bin/titan-init" -q "$cfg" "$tmp/e" $TINY 2>"$tmp/err"
        PATH="$bin:$PATH" MAX_RESTARTS=1 RESTART_PAUSE=1 TITAN_TEST_KILL=1:5 timeout 120 sbatch --wait -N1 \
            --ntasks-per-node=2 --cpus-per-task=1 $OVER --time=2 -o "$tmp/e.log" "$top/scripts/sbatch-example.sh" \
            "$tmp/e" >"$tmp/out" 2>"$tmp/err"; rc=$?
        cat "$tmp/e.log" >>"$tmp/err" 2>/dev/null
        if [ $rc -eq 0 ] && grep -q "sbatch-example: restart 1 in 1 s: srun exited with status" "$tmp/e.log" &&
            /usr/bin/python3 - "$tmp/s/metrics.jsonl" "$tmp/e/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
seg = [d for d in b if "restart" in d]
same = [(d["loss"], d["grad_norm"]) for d in a] == [(d["loss"], d["grad_norm"]) for d in b]
sys.exit(0 if len(a) == 6 and same and len(seg) == 1 and seg[0]["restart"] == 1 and
         seg[0]["resumed_from"] == 3 and "srun exited with status" in seg[0]["restart_cause"] else 1)
PY
        then ok "sbatch-example.sh MAX_RESTARTS=1: a lost rank ($(grep -o "srun exited with status [0-9]*" "$tmp/e.log" |
            head -n 1)), srun again from step 3, the same bits, restart recorded"
        else fail "sbatch-example.sh MAX_RESTARTS=1: a lost rank, srun again from step 3 (exit $rc)"; fi
    fi
fi

echo "1..$n"
[ $bad -eq 0 ]
