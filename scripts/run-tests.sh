#!/bin/sh
# Runs the whole test suite: unit test programs, the PyTorch parity test and the
# CLI scripts. Prints one line per test and "N passed, N failed, N skipped".
# A test program exiting 77 is skipped (e.g. PyTorch missing).
#   scripts/run-tests.sh [--build DIR] [--bin DIR] [--asan] [CLI-TEST...]
#   --build DIR   the unit tests of DIR/tests (default build; logs in DIR/test-logs)
#   --bin DIR     the tools of DIR (default bin): the CLI tests' $bin (TITAN_BIN)
#   --asan        a sanitizer build (make check-asan): its runtime options
#                 (tests/asan/options.sh), and no CUDA emulator runs
#   CLI-TEST      only these of tests/cli (names without .sh; default all)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
build=build; asan=0
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --bin) TITAN_BIN=$(cd "${2:?--bin needs a directory}" && pwd) || exit 2; export TITAN_BIN; shift 2 ;;
    --asan) asan=1; shift ;;
    -*) echo "run-tests.sh: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $asan -eq 1 ] && . tests/asan/options.sh
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
export TITAN_NO_REEXEC=1
# The pinned Python references (scripts/pyenv.sh makes build/venv): empty
# where they are not installed, and the checks that need them skip (fail
# under TITAN_REQUIRE_PY=1, as in CI).
TITAN_PY=$(scripts/pyenv.sh --check 2>/dev/null) || TITAN_PY=""
export TITAN_PY
log=$build/test-logs
mkdir -p "$log"
pass=0; fail=0; skip=0; failed=""

run() { # name, command...
    name=$1; shift
    start=$(date +%s)
    "$@" >"$log/$name.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    # a sanitizer report (--asan: tests/asan/options.sh) fails the test
    if [ $asan -eq 1 ] && [ -n "$(ls "$asan_logs")" ]; then
        for r in "$asan_logs"/*; do echo "== $r"; cat "$r"; done >>"$log/$name.log"
        rm -f "$asan_logs"/*
        echo "sanitizer report (above)" >>"$log/$name.log"
        [ $rc -eq 0 ] || [ $rc -eq 77 ] && rc=86
    fi
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); echo "PASS  $name (${secs}s)"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); echo "SKIP  $name: $(tail -n 1 "$log/$name.log")"
    else
        fail=$((fail + 1)); failed="$failed $name"
        echo "FAIL  $name (exit $rc, ${secs}s); last lines of $log/$name.log:"
        tail -n 25 "$log/$name.log" | sed 's/^/    /'
    fi
}

golden() { # without build/venv, pyenv.sh --check says so: a skip (77), or 1 under TITAN_REQUIRE_PY=1
    py=${TITAN_PY:-$(scripts/pyenv.sh --check)} || { rc=$?; echo "$py"; return $rc; }
    "$py" tests/torch/gen_golden.py "$build/golden" && "$build/tests/test_parity" "$build/golden"
}

# The tokenizer references of test_bpe and gguf.sh (tiktoken, tokenizers: build/tokenizer/).
sh tests/tokenizer/prepare.sh 2>"$log/tokenizer_prepare.log"
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    [ "$n" = test_parity ] && continue
    run "$n" "$t"
done
[ -x "$build/tests/test_parity" ] && run test_parity golden
# The CUDA backend's own code on the CPU (tests/emu/cuda_emu.h), where nvcc built it.
if [ $asan -eq 0 ] && [ -f build/emu/libtitan-cuda-emu.so ] && [ -x build/tests/test_cuda_ops ]; then
    run test_cuda_ops_emu env TITAN_CUDA_LIB=build/emu/libtitan-cuda-emu.so build/tests/test_cuda_ops
    run test_comm_nccl_emu env TITAN_CUDA_LIB=build/emu/libtitan-cuda-emu.so TITAN_EMU_DEVICES=2 \
        build/tests/test_comm_nccl
    # async tp's shared windows on device memory between processes (CUDA
    # IPC), ranks on one emulated GPU and across two
    run test_group_overlap_emu env TITAN_CUDA_LIB=build/emu/libtitan-cuda-emu.so TITAN_EMU_DEVICES=2 \
        build/tests/test_group_overlap
    # bf16 attention through cuDNN's graphs, run by the emulator's interpreter
    # (cudnn_emu.cpp); cuDNN must have run, as a call it does not take falls
    # back to titan's kernels without a word
    cudnn_ops() {
        env TITAN_CUDA_LIB=build/emu/libtitan-cuda-emu.so TITAN_CUDNN_LIB=build/emu/libtitan-cuda-emu.so \
            TITAN_CUDA_ATTENTION=cudnn build/tests/test_cuda_ops >"$log/cudnn_ops.out" 2>&1
        cudnn_rc=$?
        cat "$log/cudnn_ops.out"
        [ $cudnn_rc -eq 0 ] || return $cudnn_rc
        grep -q 'through cuDNN' "$log/cudnn_ops.out" || { echo "cuDNN never ran (no 'through cuDNN' note)"; return 1; }
    }
    if nm -D build/emu/libtitan-cuda-emu.so 2>/dev/null | grep -q ' T cudnnBackendExecute$'; then
        run test_cuda_ops_emu_cudnn cudnn_ops
    fi
fi
cli=""
for c in "$@"; do cli="$cli tests/cli/$c.sh"; done
for s in ${cli:-tests/cli/*.sh}; do
    [ -f "$s" ] || { [ $# -eq 0 ] && continue; echo "no CLI test $s" >&2; exit 2; }
    run "cli_$(basename "$s" .sh)" sh "$s"
done

echo
[ $fail -eq 0 ] || echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
