#!/bin/sh
# gpu_scripts.sh - the scripts a lent GPU machine runs, run here without one,
# so that they do not rot between the rare sessions that have a GPU:
# scripts/gpu-session.sh with its four parts on cpu-guard (GPU_DEVICE):
# gpu-check.sh (the CUDA programs skipped, every training, resume, bf16 and
# FSDP check run), gpu-layouts.sh (every layout in fp32 and bf16, resumes
# across layouts), bench_gpu.sh in its smoke mode (titan's rows on the
# CUDA emulator where it is built) and the float8 part (bench_gpu.sh's
# float8 rows the same way), the results under $OUT as the device
# runner fetches them, the records and the choice of parts by them; and
# gpu-check.sh out of budget (CHECK_BUDGET_S): nothing run, results written.
. "$(dirname "$0")/lib/tap.sh"
cd "$top" || exit 1
# gpu-check.sh wants the CUDA backend built (it is where nvcc is; CI has it)
if [ ! -f bin/libtitan-cuda.so ]; then echo "no bin/libtitan-cuda.so (built where nvcc is)"; exit 77; fi
out=$tmp/results # ($tmp/out is expect's)
mkdir -p "$out"
# short sequences, a narrow model and 4 steps: a check of the plumbing, not of the numbers
export GPU_CHECK_BUILD=0 JOBS=2 STEPS=4 INIT_ARGS="--training.seq_len=64 --model.dim=64 --training.threads=1" MEMCHECK_S=0

OUT=$out GPU_DEVICE=cpu-guard BENCH_GPU_SMOKE=1 BENCH_SEQS=64 BENCH_SHAPES=1B BENCH_IMPLS="eager titan titan-serial" \
    FLOAT8_SEQS=64 FLOAT8_SHAPES=1B FLOAT8_IMPLS="titan titan-fp8" \
    SESSION_S=1000 CHECK_S=400 LAYOUTS_S=250 sh scripts/gpu-session.sh check layouts bench float8 >"$tmp/session.log" 2>&1
rc=$?
for p in check layouts; do [ ! -f "$out/$p.txt" ] || sed 's/^/#   /' "$out/$p.txt"; done
grep '^gpu-session' "$tmp/session.log" | sed 's/^/#   /'
[ $rc -eq 0 ] && ok "gpu-session on cpu-guard passes" || fail "gpu-session on cpu-guard passes (exit $rc)"
for f in check.txt layouts.txt bench.txt float8.txt logs.tar.gz records.tsv; do
    [ -s "$out/$f" ] && ok "\$OUT/$f written" || fail "\$OUT/$f written"
done
[ "$(find "$out" -type f | wc -l)" -le 8 ] && ok "at most 8 files under \$OUT (the runner's limit)" ||
    fail "at most 8 files under \$OUT (the runner's limit)"
tar -xzf "$out/logs.tar.gz" -C "$tmp" || fail "logs.tar.gz unpacks"
for p in check layouts bench float8; do [ -d "$tmp/out-$p" ] || fail "logs.tar.gz holds out-$p"; done
s=$out/check.txt
for want in "SKIP  make: GPU_CHECK_BUILD=0" "SKIP  test_cuda_ops (4 ways)" "PASS  tests/cli/train.sh" \
    "PASS  loss curves agree" "PASS  cpu-guard: stopped at step 2 and resumed, bitwise identical at step 4" \
    "PASS  cpu-guard: async checkpoints, bitwise identical state" \
    "PASS  bf16 (attention through titan's kernels) loss curve near cpu fp32" \
    "PASS  bf16 deterministic loss curve near cpu fp32" \
    "PASS  cpu-guard bf16 deterministic: a second run ends in the same bits" \
    "PASS  cpu-guard bf16 deterministic with selective op activation checkpointing: the same bits" \
    "PASS  FSDP 2 on cpu-guard over nccl refused (exit 2): the device runs no NCCL" \
    "PASS  FSDP 2 on cpu-guard (shm communicators) = FSDP 2 on cpu" \
    "PASS  GaLore (randomized SVD) on cpu-guard = the same on cpu" "PASS  GaLore (exact SVD) on cpu-guard = the same on cpu" \
    "all passed"; do
    grep -qF -- "$want" "$s" && ok "gpu-check: $want" || fail "gpu-check: $want"
done
# every layout in both precisions, and the resumes across layouts
for l in fsdp2 hsdp tp2 pp2 pp2i cp2; do
    for prec in fp32 bf16; do
        grep -q "^PASS  $l $prec = one cpu-guard: loss within" "$out/layouts.txt" && ok "layouts: $l $prec" ||
            fail "layouts: $l $prec"
    done
done
grep -q "^PASS  FSDP 2 to step 2, resumed as tp 2 = one" "$out/layouts.txt" && ok "layouts: FSDP 2 resumed as tp 2" ||
    fail "layouts: FSDP 2 resumed as tp 2"
grep -q "^all passed" "$out/layouts.txt" && ok "layouts: all passed" || fail "layouts: all passed"
# the steps of both curves, side by side
[ "$(wc -l <"$tmp/out-check/loss_cpu_cuda.txt")" -eq 4 ] && ok "loss_cpu_cuda.txt: 4 steps" ||
    fail "loss_cpu_cuda.txt: 4 steps"
# the benchmark's titan row measured something, beside PyTorch's
grep -E '^\| titan \| bf16 \(fp32 master\) \|.*\| 64 x 1 \| [0-9]+ \|' "$out/bench.txt" >/dev/null &&
    ok "bench.txt: titan's row has tokens/s" || fail "bench.txt: titan's row has tokens/s"
grep -E '^\| PyTorch [^|]* \| eager bf16 \|.*\| 64 x 1 \| [0-9]+ \|' "$out/bench.txt" >/dev/null &&
    ok "bench.txt: PyTorch's row has tokens/s" || fail "bench.txt: PyTorch's row has tokens/s"
# AdamW beside the forward against in order: step times, AdamW's, exposed, MFU
grep -E '^\| 1B \| 64 x 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| -?[0-9.]+ \| [0-9.]+% \| [0-9.]+% \|' "$out/bench.txt" >/dev/null &&
    ok "bench.txt: the optimizer overlap row" || fail "bench.txt: the optimizer overlap row"
# the float8 part: its speed check skipped without a GPU, titan's bf16 and
# float8 rows measured (on the emulator where built)
grep -q "^SKIP  tests/gpu/fp8_speed_check.cu: GPU_DEVICE=cpu-guard" "$out/float8.txt" &&
    ok "float8.txt: fp8_speed_check skipped without a GPU" || fail "float8.txt: fp8_speed_check skipped without a GPU"
grep -E '^\| titan \| bf16 \(fp32 master\), float8 tensorwise \|.*\| 64 x 1 \| [0-9]+ \|' "$out/float8.txt" >/dev/null &&
    ok "float8.txt: titan's float8 row has tokens/s" || fail "float8.txt: titan's float8 row has tokens/s"
# one record line per part, at the current code
code=$(sh scripts/gpu-session.sh --code)
[ "$(grep -c "	$code	.*	pass\$" "$out/records.tsv")" -eq 4 ] && ok "records.tsv: 4 parts passed at code $code" ||
    fail "records.tsv: 4 parts passed at code $code"
# the default is the parts not yet recorded at this code
cp "$out/records.tsv" "$tmp/records.tsv"
grep -v '^check' "$tmp/records.tsv" >"$tmp/records2.tsv"
[ "$(GPU_RECORDS=$tmp/records2.tsv sh scripts/gpu-session.sh --todo)" = "check " ] &&
    ok "--todo: the part without a record" || fail "--todo: the part without a record"
expect 0 "every part is recorded at code $code" "no part left: nothing run" -- \
    env GPU_RECORDS="$tmp/records.tsv" sh scripts/gpu-session.sh
expect 2 "'kernels': no such part" "an unknown part is a usage error" -- sh scripts/gpu-session.sh kernels

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
