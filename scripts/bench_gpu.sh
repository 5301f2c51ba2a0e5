#!/bin/sh
# bench_gpu.sh - titan-train on one GPU (training.device=cuda) beside the same
# model in plain PyTorch on the same GPU in the same run
# (scripts/torch_gpu_bench.py: SDPA, bf16 autocast over fp32 parameters,
# fused AdamW; eager and torch.compile of each block):
#   1B   Llama 3.2 1B: dim 2048, 16 layers, 32 heads, 8 kv heads, FFN 8192,
#        vocab 128256, tied head (titan's 1B flavor)
#   8B   Llama 3.1 8B's layers: dim 4096, 32 heads, 8 kv heads, FFN 14336,
#        vocab 128256, cut to $BENCH_8B_LAYERS layers; "auto": the deepest
#        whose titan dry run fits the GPU (scripts/deepest-8b.sh: at the
#        longest seq_len, with each float8 row's scratch, within
#        BENCH_MEM_FRACTION, 0.85, of its memory); the table's rows state it
# at seq_len 2048 and 8192, random tokens (titan reads shards made with a
# synthetic 128256-token tokenizer). titan computes in bf16 with fp32 master
# weights (training.mixed_precision_param = "bfloat16"; BENCH_TITAN_DTYPE=float32
# for its fp32 path) and its rows say which.
# Prints a Markdown table (tokens/s after the warmup steps, MFU against one peak
# for every row, peak GPU memory) and writes it with the raw JSON and the logs
# to build/bench_gpu/ and, when $OUT is set, $OUT/bench_gpu.{md,json} and
# $OUT/bench_gpu-logs.tar.gz. A titan run takes one step more than timed,
# profiled op by op: NAME.ops.txt (per-op table) and NAME.trace.json (Chrome
# trace) in the logs say where its step time goes. A run that fails, is refused (out of memory) or
# hits its time limit is a row with the line that says why.
#
#   scripts/bench_gpu.sh [--peak-flops F]
#   BENCH_PEAK_FLOPS (989e12: H100 SXM bf16 dense; H200 has the same compute)
#   BENCH_8B_LAYERS (4, or auto)  BENCH_SEQS ("2048 8192")  BENCH_SHAPES ("1B 8B")
#   BENCH_GPU_MIB: the memory auto fits (default the GPU's; a smoke test
#   searches for an 81559 MiB H100 and then runs 2 layers)
#   BENCH_IMPLS ("eager compile titan titan-serial titan-det": titan as
#   titan-train runs by default, attention through cuDNN's fused flash
#   attention where libcudnn.so.9 opens (TITAN_CUDNN_LIB names it, else the
#   first found beside PyTorch's); titan-serial the same with
#   optimizer.overlap_with_forward = false, AdamW in order at the step's
#   end: the "optimizer overlap" table below the main one sets the two side
#   by side (step time, AdamW's time, its exposed part, MFU); titan-det
#   with training.deterministic, titan's own attention kernels, bitwise
#   repeatable; titan-fp8 and titan-fp8r: float8 training on the tensor
#   cores, torchao's tensorwise and rowwise recipes, every linear but the
#   output, as torchtitan's jobs; compile-fp8: compile with torchao's
#   Float8Linear, tensorwise (torchtitan's float8 row), where torchao imports)
#   BENCH_TITAN_DTYPE (bfloat16)
#   BENCH_BATCH (1)  BENCH_STEPS (8)
#   BENCH_WARMUP (3)  BENCH_RUN_TIMEOUT (150 s a run)
#   BENCH_BUDGET (480 s from the start, build included: a run gets what is
#   left, and none starts with less than BENCH_MIN_RUN, 40 s)
#   BENCH_PY (default: the first of /opt/torch/.venv/bin/python3, build/venv's
#   (scripts/pyenv.sh), python3, /usr/bin/python3 that imports torch)
#   BENCH_KEEP=1 keeps the titan run directories (12 GB of seed checkpoints)
#   BENCH_GPU_SMOKE=1: a check of this script without a GPU: tiny shapes,
#   titan on cuda under the CPU emulator (build/emu/libtitan-cuda-emu.so;
#   without it on the cpu), PyTorch on the CPU; the numbers mean nothing.
# Build first (make, or scripts/gpu-check.sh) to leave the budget to the runs;
# without bin/libtitan-cuda.so this script runs make itself.
# Exit status: 0 when the table was written (its rows say what failed), 77 no
# GPU (one line "no GPU: ..."), 2 a bad argument or setting, 1 otherwise.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
t_start=$(date +%s)

PEAK=${BENCH_PEAK_FLOPS:-989e12}
peak_source="H100 SXM bf16 dense, the default"
[ -z "${BENCH_PEAK_FLOPS:-}" ] || peak_source="BENCH_PEAK_FLOPS"
while [ $# -gt 0 ]; do
    case $1 in
    --peak-flops=*) PEAK=${1#*=}; peak_source="--peak-flops" ;;
    --peak-flops) [ $# -ge 2 ] || { echo "bench_gpu: error: --peak-flops needs a value" >&2; exit 2; }
        PEAK=$2; peak_source="--peak-flops"; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_gpu: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case $PEAK in
    *[!0-9eE.+-]*|'') echo "bench_gpu: error: peak FLOP/s '$PEAK' is not a number" >&2; exit 2 ;;
esac

SMOKE=0
case ${BENCH_GPU_SMOKE:-} in ''|0) ;; *) SMOKE=1 ;; esac
if [ $SMOKE -eq 0 ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "no GPU: nvidia-smi not found (BENCH_GPU_SMOKE=1 checks this script on the CPU)"
        exit 77
    fi
    gpus=$(nvidia-smi -L 2>&1)
    case $gpus in
        GPU\ 0:*) ;;
        *) echo "no GPU: nvidia-smi -L: $(echo "$gpus" | head -n 1)"; exit 77 ;;
    esac
fi

L8=${BENCH_8B_LAYERS:-4}
SEQS=${BENCH_SEQS:-2048 8192}
SHAPES=${BENCH_SHAPES:-1B 8B}
IMPLS=${BENCH_IMPLS:-eager compile titan titan-serial titan-det}
TDTYPE=${BENCH_TITAN_DTYPE:-bfloat16}
case $TDTYPE in bfloat16) TMODE=bf16 ;; float32) TMODE=fp32 ;;
*) echo "bench_gpu: error: BENCH_TITAN_DTYPE: '$TDTYPE' is not bfloat16 or float32" >&2; exit 2 ;; esac
BATCH=${BENCH_BATCH:-1}
STEPS=${BENCH_STEPS:-8}
WARMUP=${BENCH_WARMUP:-3}
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-150}
BUDGET=${BENCH_BUDGET:-480}
MIN_RUN=${BENCH_MIN_RUN:-40}
DEVICE=cuda
if [ $SMOKE -eq 1 ]; then
    SEQS=${BENCH_SEQS:-64 128}
    STEPS=${BENCH_STEPS:-3}
    WARMUP=${BENCH_WARMUP:-1}
    DEVICE=cpu
    # titan's cuda path on the CPU where the emulator is built (kernels/README.md)
    if [ -f build/emu/libtitan-cuda-emu.so ] && [ -z "${TITAN_CUDA_LIB:-}" ]; then
        DEVICE=cuda
        export TITAN_CUDA_LIB="$top/build/emu/libtitan-cuda-emu.so"
        # and its interpreter of cuDNN's graphs for the titan-cudnn rows
        export TITAN_CUDNN_LIB="$TITAN_CUDA_LIB"
    fi
fi
[ "$L8" = auto ] && L8v=1 || L8v=$L8 # auto: resolved once the vocabulary is written
for v in "BENCH_8B_LAYERS=$L8v" "BENCH_BATCH=$BATCH" "BENCH_STEPS=$STEPS" "BENCH_WARMUP=$WARMUP" \
    "BENCH_RUN_TIMEOUT=$RUN_TIMEOUT" "BENCH_BUDGET=$BUDGET" "BENCH_MIN_RUN=$MIN_RUN" $(for s in $SEQS; do echo "BENCH_SEQS=$s"; done); do
    case ${v#*=} in
    ''|*[!0-9]*|0) [ "$v" = BENCH_WARMUP=0 ] || { echo "bench_gpu: error: $v: expected a positive integer" >&2; exit 2; } ;;
    esac
done
[ "$STEPS" -gt "$WARMUP" ] || { echo "bench_gpu: error: BENCH_STEPS ($STEPS) must exceed BENCH_WARMUP ($WARMUP)" >&2; exit 2; }
for m in $IMPLS; do
    case $m in eager|compile|compile-fp8|titan|titan-serial|titan-det|titan-fp8|titan-fp8r) ;;
    *) echo "bench_gpu: error: BENCH_IMPLS: unknown '$m' (eager, compile, compile-fp8, titan, titan-serial, titan-det, titan-fp8, titan-fp8r)" >&2; exit 2 ;; esac
done
for sh in $SHAPES; do
    case $sh in 1B|8B) ;;
    *) echo "bench_gpu: error: BENCH_SHAPES: unknown '$sh' (1B, 8B)" >&2; exit 2 ;; esac
done
. scripts/find-cudnn.sh
PY=${BENCH_PY:-}
if [ -z "$PY" ]; then # the GPU image's torch, else the first python3 with one
    for p in /opt/torch/.venv/bin/python3 "$top/build/venv/bin/python3" python3 /usr/bin/python3; do
        if "$p" -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
    done
fi

out=$top/build/bench_gpu
work=$out/work
mkdir -p "$work" || exit 1
rm -f "$out"/*.meta.json "$out"/*.log "$out"/*.gpu "$out"/*.json "$out"/*.jsonl "$out"/bench_gpu.md
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
export TITAN_NO_REEXEC=1
say() { echo "bench_gpu: $*" >&2; }
elapsed() { echo $(( $(date +%s) - t_start )); }

# Background jobs (titan-init, the memory poller) are ours to stop on the way
# out: an init no run waited for, the poller of a run cut short.
poller=""
cleanup() {
    for sh in $SHAPES; do
        eval "p=\${init_pid_$sh:-}"
        [ -z "$p" ] || kill "$p" 2>/dev/null
    done
    [ -z "$poller" ] || kill "$poller" 2>/dev/null
    if [ "${BENCH_KEEP:-0}" != 1 ]; then rm -rf "$work"/run-*; fi
}
trap 'cleanup; exit 130' INT TERM

# --- titan: built, with its libraries ------------------------------------------------
titan_ok=1
titan_why=""
case " $IMPLS " in *" titan "*) ;; *) titan_ok=0; titan_why="not asked for" ;; esac
# broken_tool: the first of the tools the runs need that does not start
# (its loader's error in $out/version.err), or nothing
broken_tool() {
    for t in titan-init titan-train titan-shard; do
        bin/$t --version >/dev/null 2>"$out/version.err" || { echo "$t"; return; }
    done
}
if [ $titan_ok -eq 1 ] && [ $SMOKE -eq 0 ]; then
    # Carried Debian libraries (scripts/gpu-deps.sh), as gpu-check.sh uses them.
    if [ -d .gpu-deps ] && { [ -n "$(broken_tool)" ] || ! printf '#include <zstd.h>\n' | ${CC:-cc} -E -x c - >/dev/null 2>&1; }; then
        set -- use # dash's "." passes no arguments: the sourced script sees ours
        # shellcheck disable=SC1091
        . scripts/gpu-deps.sh >/dev/null 2>&1 && say "C libraries from .gpu-deps (build/gpu-deps)"
    fi
    if [ ! -f bin/libtitan-cuda.so ] || [ ! -x bin/titan-train ]; then
        say "building titan (make -j${JOBS:-16}; log in build/bench_gpu/make.log) ..."
        # shellcheck disable=SC2086
        make -j"${JOBS:-16}" ${TITAN_MAKE_VARS:-} >"$out/make.log" 2>&1
    fi
    if [ ! -f bin/libtitan-cuda.so ]; then
        titan_ok=0; titan_why="titan not built: no bin/libtitan-cuda.so (see build/bench_gpu/make.log)"
    fi
fi
if [ $titan_ok -eq 1 ]; then
    t=$(broken_tool)
    [ -z "$t" ] || { titan_ok=0; titan_why="bin/$t does not run: $(head -n 1 "$out/version.err") (make; or carry .gpu-deps)"; }
fi
[ -n "$titan_why" ] && [ "$titan_why" != "not asked for" ] && say "$titan_why"

# --- the machine ---------------------------------------------------------------------
torch_v=$("${PY:-python3}" -c 'import torch; print(torch.__version__ + (" (CUDA %s)" % torch.version.cuda if torch.version.cuda else ""))' 2>/dev/null) ||
    { echo "bench_gpu: error: no python3 with torch found (set BENCH_PY)" >&2; exit 1; }
if [ $SMOKE -eq 1 ]; then
    gpu="no GPU (smoke test on the CPU)"; driver="-"
else
    gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader -i 0 2>/dev/null | head -n 1)
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null | head -n 1)
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1
fi
nvcc=$("${NVCC:-/usr/local/cuda/bin/nvcc}" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)
{
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "gpu=$gpu"
    echo "driver=$driver"
    echo "nvcc=nvcc ${nvcc:-not found}"
    echo "torch=$torch_v"
    echo "titan=$(bin/titan-train --version 2>/dev/null | head -n 1)"
    echo "host=$(uname -n), $(nproc) CPUs"
    echo "peak_source=$peak_source"
    echo "warmup=$WARMUP"
    echo "smoke=$SMOKE"
} >"$out/env.txt"
say "$gpu; torch $torch_v; MFU against $PEAK FLOP/s ($peak_source)"

# --- data: a 128256-token vocabulary and shards of repository text ----------------
vocab=$work/llama3-size.tiktoken
[ -s "$vocab" ] || "$PY" scripts/torch_gpu_bench.py --write-tiktoken "$vocab" || exit 1
maxseq=0
for s in $SEQS; do [ "$s" -gt "$maxseq" ] && maxseq=$s; done
need=$(( (STEPS + 1) * BATCH * (maxseq + 1) ))
data=$work/data
have=$(sed -n 's/^  "tokens": \([0-9]*\),*$/\1/p' "$data/index.json" 2>/dev/null | head -n 1)
if [ $titan_ok -eq 1 ] && [ "${have:-0}" -lt "$need" ]; then
    rm -rf "$data" "$work/corpus.txt"
    : >"$work/corpus.txt"
    while [ "$(wc -c <"$work/corpus.txt")" -lt $((2 * need + 4096)) ]; do # ~0.6 tokens a byte
        cat lib/*/*.c lib/*/*.h >>"$work/corpus.txt"
    done
    if ! bin/titan-shard -q --tokenizer "tiktoken:$vocab" -o "$data" "$work/corpus.txt" 2>"$out/shard.log"; then
        titan_ok=0; titan_why="titan-shard failed: $(tail -n 1 "$out/shard.log")"
    fi
    rm -f "$work/corpus.txt"
fi

# --- the 8B shape's depth: BENCH_8B_LAYERS=auto ----------------------------------------
# The deepest that fits for every row asked for: bf16 (or fp32) and each
# float8 recipe's scratch, at the longest seq_len.
case " $SHAPES " in *" 8B "*) ;; *) [ "$L8" = auto ] && L8=4 ;; esac # not run
if [ "$L8" = auto ] && [ $titan_ok -eq 0 ]; then
    L8=4
    say "8B depth: 4 layers (auto needs titan's dry run: $titan_why)"
fi
if [ "$L8" = auto ]; then
    gmib=${BENCH_GPU_MIB:-}
    if [ -z "$gmib" ] && [ $SMOKE -eq 1 ]; then gmib=81559; fi
    [ -n "$gmib" ] || gmib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1)
    frac=${BENCH_MEM_FRACTION:-0.85}
    recipes="-"
    case " $IMPLS " in *" titan-fp8 "*) recipes="$recipes tensorwise" ;; esac
    case " $IMPLS " in *" titan-fp8r "*) recipes="$recipes rowwise" ;; esac
    L8=33 deep_why=""
    for r in $recipes; do
        set -- --gpu-mib "$gmib" --tokenizer "tiktoken:$vocab" --seq "$maxseq" --batch "$BATCH" --dtype "$TDTYPE" \
            --fraction "$frac"
        [ "$r" = - ] || set -- "$@" --float8 "$r"
        d=$(sh scripts/deepest-8b.sh "$@" 2>"$out/deepest-8b.err") ||
            { echo "bench_gpu: error: BENCH_8B_LAYERS=auto: $(tail -n 1 "$out/deepest-8b.err")" >&2; exit 1; }
        n=${d%% *}
        if [ "$n" -lt "$L8" ]; then
            L8=$n deep_why="${d#* } MiB planned"
            [ "$r" = - ] || deep_why="$deep_why with float8 $r"
        fi
    done
    [ "$L8" -gt 0 ] || { echo "bench_gpu: error: BENCH_8B_LAYERS=auto: not one 8B layer fits $gmib MiB x $frac" >&2; exit 1; }
    say "8B depth: $L8 layers, the deepest whose dry run fits $frac of $gmib MiB ($deep_why, seq_len $maxseq)"
    echo "deepest_8b=$L8 layers within $frac of $gmib MiB: $deep_why" >>"$out/env.txt"
    [ $SMOKE -eq 0 ] || L8=2 # the smoke test's tiny 8B shape
fi
say "shapes: $SHAPES (8B cut to $L8 layers); seq_len: $SEQS; batch $BATCH; $STEPS steps, first $WARMUP not timed"

# --- shapes ------------------------------------------------------------------------
# shape NAME: flavor and dimensions (the flavor's own, or tiny ones for a smoke test)
shape() {
    case $1 in
    1B) flavor=1B; dim=2048; layers=16; heads=32; kv=8; mult=256; ffnm=1.5; tie=1; ropes=32 ;;
    8B) flavor=8B; dim=4096; layers=$L8; heads=32; kv=8; mult=1024; ffnm=1.3; tie=0; ropes=8 ;;
    *) echo "bench_gpu: error: unknown shape '$1' (1B or 8B)" >&2; exit 2 ;;
    esac
    if [ $SMOKE -eq 1 ]; then
        heads=4; kv=2
        if [ "$1" = 1B ]; then dim=64; layers=2; else dim=128; fi
    fi
}

# titan-init of every shape, in the background while PyTorch runs: a seed
# checkpoint of 1-2 billion parameters takes a minute of one CPU core.
if [ $titan_ok -eq 1 ]; then
    for sh in $SHAPES; do
        shape "$sh"
        timeout -k 10 600 bin/titan-init -q --force configs/debugmodel.toml "$work/run-$sh" \
            --model.flavor="$flavor" --model.tokenizer="tiktoken:$vocab" --model.dim="$dim" \
            --model.n_layers="$layers" --model.n_heads="$heads" --model.n_kv_heads="$kv" \
            --training.dataset_path="$data" --training.local_batch_size="$BATCH" \
            --training.steps="$STEPS" --training.device="$DEVICE" --checkpoint.enable=false \
            --metrics.log_freq=1 --metrics.peak_flops="$PEAK" --lr_scheduler.warmup_steps=2 \
            >"$out/init-$sh.log" 2>&1 &
        eval "init_pid_$sh=$! init_rc_$sh=-1"
    done
fi

# --- one run -----------------------------------------------------------------------
idx=0
gpu_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1; }
# meta NAME IMPL MODE SHAPE SEQ RC WALL TIMEOUT BASE SKIP: the run's description for the report
meta() {
    set -- "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "${9:-0}" "$(printf '%s' "${10:-}" | tr -d '"\134')"
    case $9 in ''|*[!0-9]*) set -- "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" 0 "${10}" ;; esac
    printf '{"name":"%s","impl":"%s","mode":"%s","shape":"%s","dim":%d,"layers":%d,"heads":%d,"kv_heads":%d,"multiple_of":%d,"ffn_mult":%s,"tie":%d,"rope_scaling":%s,"vocab":128256,"seq":%d,"batch":%d,"steps":%d,"warmup":%d,"rc":%d,"wall_s":%d,"timeout_s":%d,"gpu_base_mib":%s,"skip":"%s"}\n' \
        "$1" "$2" "$3" "$4" "$dim" "$layers" "$heads" "$kv" "$mult" "$ffnm" "$tie" "$ropes" \
        "$5" "$BATCH" "$STEPS" "$WARMUP" "$6" "$7" "$8" "$9" "${10}" >"$out/$1.meta.json"
}
# run IMPL MODE SHAPE SEQ
run() {
    impl=$1; mode=$2; sh=$3; seq=$4
    shape "$sh"
    idx=$((idx + 1))
    name=$(printf '%02d-%s-%s-%s' "$idx" "$sh" "$seq" "$mode")
    if [ "$impl" = titan ] && [ $titan_ok -eq 0 ]; then
        meta "$name" titan "$mode" "$sh" "$seq" -1 0 0 0 "$titan_why"
        return
    fi
    for pass in 1 2; do # before and after waiting for a seed checkpoint
        left=$((BUDGET - $(elapsed)))
        if [ "$left" -lt "$MIN_RUN" ]; then
            say "$name: skipped, ${left}s of the ${BUDGET}s budget left"
            meta "$name" "$impl" "$mode" "$sh" "$seq" -1 0 0 0 "time budget (BENCH_BUDGET=$BUDGET s) spent"
            return
        fi
        if [ "$impl" != titan ] || [ $pass = 2 ]; then break; fi
        eval "ipid=\${init_pid_$sh:-}"
        if [ -n "$ipid" ]; then
            kill -0 "$ipid" 2>/dev/null && say "waiting for titan-init $sh ..."
            wait "$ipid"
            eval "init_rc_$sh=$? init_pid_$sh="
        fi
        irc=-1
        eval "irc=\${init_rc_$sh:--1}"
        if [ "$irc" != 0 ]; then # its log says why
            cp "$out/init-$sh.log" "$out/$name.log" 2>/dev/null
            meta "$name" titan "$mode" "$sh" "$seq" "$irc" 0 600 0
            return
        fi
    done
    limit=$RUN_TIMEOUT
    [ "$left" -lt "$limit" ] && limit=$left
    base=0
    if [ $SMOKE -eq 0 ]; then
        base=$(gpu_mib)
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 >"$out/$name.gpu" 2>/dev/null &
        poller=$!
    fi
    say "$name: $impl $mode, $sh, seq $seq x $BATCH (limit ${limit}s) ..."
    t0=$(date +%s)
    if [ "$impl" = torch ]; then
        timeout -k 10 "$limit" "$PY" scripts/torch_gpu_bench.py --mode "$mode" --dim "$dim" \
            --layers "$layers" --heads "$heads" --kv-heads "$kv" --multiple-of "$mult" \
            --ffn-mult "$ffnm" --tie "$tie" --rope-scaling "$ropes" --seq-len "$seq" \
            --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --time-limit $((limit - 15)) \
            --out "$out/$name.json" >/dev/null 2>"$out/$name.log"
        rc=$?
    else
        # One step more than timed, profiled op by op (titan-train's
        # [profiling]): where the step's time goes, beside the table.
        rm -rf "$work/run-$sh/metrics.jsonl" "$work/run-$sh/profile_traces"
        det=false; case $mode in *-det) det=true ;; esac
        ovl=true; case $mode in *-serial) ovl=false ;; esac
        # float8 on the tensor cores (torchtitan's jobs: every linear but the output)
        f8=""; case $mode in *-fp8) f8=tensorwise ;; *-fp8r) f8=rowwise ;; esac
        set --
        [ -z "$f8" ] || set -- --model.converters=float8 --quantize.linear.float8.emulate=false \
            --quantize.linear.float8.recipe_name=$f8 --quantize.linear.float8.filter_fqns=output
        timeout -k 10 "$limit" bin/titan-train "$work/run-$sh" --training.seq_len="$seq" --training.deterministic=$det \
            --optimizer.overlap_with_forward=$ovl \
            --training.local_batch_size="$BATCH" --training.steps=$((STEPS + 1)) \
            --training.device="$DEVICE" --metrics.peak_flops="$PEAK" \
            --training.mixed_precision_param="$TDTYPE" --profiling.enable_profiling=true \
            --profiling.profile_freq=$((STEPS + 1)) "$@" >"$out/$name.log" 2>&1
        rc=$?
        cp "$work/run-$sh/metrics.jsonl" "$out/$name.metrics.jsonl" 2>/dev/null
        p="$work/run-$sh/profile_traces/iteration_$((STEPS + 1))"
        cp "$p/rank0_ops.txt" "$out/$name.ops.txt" 2>/dev/null
        cp "$p/rank0_trace.json" "$out/$name.trace.json" 2>/dev/null
    fi
    wall=$(( $(date +%s) - t0 ))
    if [ -n "$poller" ]; then kill "$poller" 2>/dev/null; wait "$poller" 2>/dev/null; poller=""; fi
    say "$name: exit $rc after ${wall}s"
    meta "$name" "$impl" "$mode" "$sh" "$seq" "$rc" "$wall" "$limit" "$base"
}

# Cheaper sequence length first, so a spent budget cuts the longest runs.
for seq in $SEQS; do
    for sh in $SHAPES; do
        for m in $IMPLS; do
            case $m in
            eager|compile|compile-fp8) run torch "$m" "$sh" "$seq" ;;
            titan-fp8) run titan "$TMODE-fp8" "$sh" "$seq" ;;
            titan-fp8r) run titan "$TMODE-fp8r" "$sh" "$seq" ;;
            titan) run titan "$TMODE" "$sh" "$seq" ;;
            titan-det) run titan "$TMODE-det" "$sh" "$seq" ;;
            titan-serial) run titan "$TMODE-serial" "$sh" "$seq" ;;
            *) echo "bench_gpu: error: unknown implementation '$m'" >&2; exit 2 ;;
            esac
        done
    done
done
cleanup

# --- the table ---------------------------------------------------------------------
echo
"$PY" scripts/torch_gpu_bench.py --report "$out" --peak-flops "$PEAK" || exit 1
# AdamW beside the next forward (titan) against in order (titan-serial), from
# the timed steps' metrics: exposed = overlapped step - (serial step - AdamW)
"$PY" - "$out" "$WARMUP" "$STEPS" "$BATCH" >>"$out/bench_gpu.md" <<'PY' && sed -n '/^## Optimizer overlap/,$p' "$out/bench_gpu.md"
import glob, json, os, sys
d, warm, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def timed(name):
    try:
        rows = [json.loads(l) for l in open(os.path.join(d, name + ".metrics.jsonl"))]
    except OSError:
        return None
    rows = [r for r in rows if warm < r["step"] <= steps]  # the last, profiled step is not timed
    if not rows:
        return None
    mean = lambda k: sum(r.get(k, 0.0) for r in rows) / len(rows)
    return dict(step=mean("step_time_s"), opt=mean("optimizer_s"), mfu=mean("mfu"),
                has_opt=all("optimizer_s" in r for r in rows))
runs = {}
for p in sorted(glob.glob(os.path.join(d, "*.meta.json"))):
    m = json.load(open(p))
    if m["impl"] == "titan" and not m["mode"].endswith(("-det", "-fp8", "-fp8r")):
        runs.setdefault((m["shape"], m["seq"]), {})["serial" if m["mode"].endswith("-serial") else "overlap"] = m["name"]
out = ["", "## Optimizer overlap (titan, AdamW beside the next forward vs in order)", "",
       "| shape | seq x batch | step ms in order | AdamW ms | step ms overlapped | AdamW exposed ms | MFU in order | MFU overlapped |",
       "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
for (shape, seq), r in sorted(runs.items()):
    s = timed(r["serial"]) if "serial" in r else None
    o = timed(r["overlap"]) if "overlap" in r else None
    if not s or not o or not s["has_opt"]:
        out.append("| %s | %d x %d | - | - | - | - | - | - |" % (shape, seq, batch))
        continue
    exposed = o["step"] - (s["step"] - s["opt"])
    out.append("| %s | %d x %d | %.1f | %.1f | %.1f | %.1f | %.2f%% | %.2f%% |" % (
        shape, seq, batch, 1e3 * s["step"], 1e3 * s["opt"], 1e3 * o["step"], 1e3 * exposed, 100 * s["mfu"], 100 * o["mfu"]))
print("\n".join(out))
PY
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp "$out/bench_gpu.md" "$out/bench_gpu.json" "$OUT/" &&
        tar -czf "$OUT/bench_gpu-logs.tar.gz" -C "$top/build" --exclude=bench_gpu/work bench_gpu
fi
say "table and JSON in build/bench_gpu/ (bench_gpu.md, bench_gpu.json)$([ -n "${OUT:-}" ] && echo " and $OUT"); $(elapsed)s in all"
