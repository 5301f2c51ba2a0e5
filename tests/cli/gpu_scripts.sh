#!/bin/sh
# gpu_scripts.sh - the scripts a lent GPU machine runs, run here without one,
# so that they do not rot between the rare sessions that have a GPU:
# scripts/gpu-session.sh with gpu-check.sh on cpu-guard (GPU_DEVICE: the CUDA
# programs skipped, every training, resume, bf16 and FSDP check run) and
# bench_gpu.sh in its smoke mode (titan's rows on the CUDA emulator where it
# is built), the results under $OUT as the device runner fetches them; and
# gpu-check.sh out of budget (CHECK_BUDGET_S): nothing run, results written.
. "$(dirname "$0")/lib/tap.sh"
cd "$top" || exit 1
# gpu-check.sh wants the CUDA backend built (it is where nvcc is; CI has it)
if [ ! -f bin/libtitan-cuda.so ]; then echo "no bin/libtitan-cuda.so (built where nvcc is)"; exit 77; fi
out=$tmp/out
mkdir -p "$out"
# short sequences and 4 steps: a check of the plumbing, not of the numbers
export GPU_CHECK_BUILD=0 JOBS=2 STEPS=4 INIT_ARGS="--training.seq_len=128" MEMCHECK_S=0

OUT=$out GPU_DEVICE=cpu-guard BENCH_GPU_SMOKE=1 BENCH_SEQS=64 BENCH_SHAPES=1B BENCH_IMPLS="eager titan" \
    SESSION_S=500 CHECK_S=400 sh scripts/gpu-session.sh >"$tmp/session.log" 2>&1
rc=$?
[ ! -f "$out/summary.txt" ] || sed 's/^/#   /' "$out/summary.txt"
grep '^gpu-session' "$tmp/session.log" | sed 's/^/#   /'
[ $rc -eq 0 ] && ok "gpu-session on cpu-guard passes" || fail "gpu-session on cpu-guard passes (exit $rc)"
for f in summary.txt loss_cpu_cuda.txt loss_cpu_bf16.txt gpu-check.tar.gz bench_gpu.md bench_gpu.json \
    bench_gpu-logs.tar.gz; do
    [ -s "$out/$f" ] && ok "\$OUT/$f written" || fail "\$OUT/$f written"
done
[ "$(find "$out" -type f | wc -l)" -le 8 ] && ok "at most 8 files under \$OUT (the runner's limit)" ||
    fail "at most 8 files under \$OUT (the runner's limit)"
s=$out/summary.txt
for want in "SKIP  make: GPU_CHECK_BUILD=0" "SKIP  test_cuda_ops (4 ways)" "PASS  tests/cli/train.sh" \
    "PASS  loss curves agree" "PASS  cpu-guard: stopped at step 2 and resumed, bitwise identical at step 4" \
    "PASS  cpu-guard: async checkpoints, bitwise identical state" \
    "PASS  bf16 (attention through titan's kernels) loss curve near cpu fp32" \
    "PASS  bf16 deterministic loss curve near cpu fp32" \
    "PASS  cpu-guard bf16 deterministic: a second run ends in the same bits" \
    "PASS  cpu-guard bf16 deterministic with selective op activation checkpointing: the same bits" \
    "PASS  FSDP 2 on cpu-guard (shm communicators) = FSDP 2 on cpu" "all passed"; do
    grep -qF -- "$want" "$s" && ok "gpu-check: $want" || fail "gpu-check: $want"
done
# the steps of both curves, side by side
[ "$(wc -l <"$out/loss_cpu_cuda.txt")" -eq 4 ] && ok "loss_cpu_cuda.txt: 4 steps" || fail "loss_cpu_cuda.txt: 4 steps"
# the benchmark's titan row measured something, beside PyTorch's
grep -E '^\| titan \| bf16 \(fp32 master\) \|.*\| 64 x 1 \| [0-9]+ \|' "$out/bench_gpu.md" >/dev/null &&
    ok "bench_gpu.md: titan's row has tokens/s" || fail "bench_gpu.md: titan's row has tokens/s"
grep -E '^\| PyTorch [^|]* \| eager bf16 \|.*\| 64 x 1 \| [0-9]+ \|' "$out/bench_gpu.md" >/dev/null &&
    ok "bench_gpu.md: PyTorch's row has tokens/s" || fail "bench_gpu.md: PyTorch's row has tokens/s"
grep -q '^gpu-session: bench_gpu exit 0' "$tmp/session.log" && ok "bench_gpu ran in the time left" ||
    fail "bench_gpu ran in the time left"

# no budget left: every command 'not run', the summary still written
rm -rf "$out" && mkdir -p "$out"
OUT=$out GPU_DEVICE=cpu-guard CHECK_BUDGET_S=1 sh scripts/gpu-check.sh >"$tmp/budget.log" 2>&1
rc=$?
[ $rc -ne 0 ] && ok "gpu-check out of budget fails" || fail "gpu-check out of budget fails"
grep -q "FAIL  train on cpu" "$out/summary.txt" && grep -q "CHECK_BUDGET_S=1 spent" build/gpu-check/train_cpu.log &&
    ok "out of budget: the training runs are 'not run'" || fail "out of budget: the training runs are 'not run'"
[ -s "$out/gpu-check.tar.gz" ] && ok "out of budget: results still under \$OUT" ||
    fail "out of budget: results still under \$OUT"
tap_end
