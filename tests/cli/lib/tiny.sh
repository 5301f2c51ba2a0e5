# tiny.sh - the preamble the parallel-training tests share (dist_train.sh,
# tp_train.sh, pp_train.sh; not a test itself): sources tap.sh and
# curves.sh, bounds every expect'ed command and every collective's wait, and
# gives the tiny model they all train, $TINY (2 layers of dim 32, 4 heads
# over 2 kv heads, 20 steps of local batch 2, checkpoints at 10 and 20, on
# shard_man_corpus's $tmp/data), $cfg and the flags (parallelism, bf16,
# cpu-guard) more than one of them uses, same_validation and under_mpirun
# (below).
#   TINY_GLOBAL_BATCH=N   set before sourcing: the global batch (default 4)
EXPECT_TIMEOUT=120
. "$(dirname "$0")/lib/tap.sh"
. "$(dirname "$0")/lib/curves.sh"
export TITAN_COMM_TIMEOUT=20

TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.global_batch_size=${TINY_GLOBAL_BATCH:-4} --training.steps=20
 --checkpoint.interval=10 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2
 --training.dataset_path=$tmp/data --metrics.peak_flops=1e11 --training.threads=1"
cfg=$top/configs/debugmodel.toml
# TITAN_TEST_ASYNC_TP=1: every tp run that can (sequence parallel, shm,
# cpu) with async tensor parallelism (collective matmuls); NOATP turns it
# off where it cannot apply (it is refused there: tp_async.sh).
ATP=""
[ "${TITAN_TEST_ASYNC_TP:-0}" = 1 ] && ATP="--parallelism.enable_async_tensor_parallel=true"
NOATP="--parallelism.enable_async_tensor_parallel=false"
# TITAN_TEST_CP_RING=1: every cp run that can (shm, cpu) with the ring
# (context_parallel_rotate_method = "alltoall"); NORING where it cannot.
CPR=""
[ "${TITAN_TEST_CP_RING:-0}" = 1 ] && CPR="--parallelism.context_parallel_rotate_method=alltoall"
NORING="--parallelism.context_parallel_rotate_method=allgather"
TP2="--parallelism.tensor_parallel_degree=2${ATP:+ $ATP}"
DDP="--parallelism.data_parallel_replicate_degree=2 --parallelism.data_parallel_shard_degree=1"
BF16="--training.mixed_precision_param=bfloat16"
GUARD="--training.device=cpu-guard"

# same_validation NAME FLAGS: held-out text (README.md, LICENSE) sharded into
# $tmp/val; $tmp/v1 (one process) and $tmp/v2 (NAME: 2 ranks with FLAGS)
# trained 10 steps, validating 5 sequences every 5 (a last batch of one
# sequence padded: resume_layout.sh); NAME's validation losses must be the
# one process's to 1e-5 relative. 4 checks.
same_validation() {
    cat "$top/README.md" "$top/LICENSE" > "$tmp/held.txt"
    "$bin/titan-shard" -q -o "$tmp/val" "$tmp/held.txt" 2>"$tmp/err" && ok "shard held-out text" || fail "shard held-out text"
    VAL="--validation.enable=true --validation.dataset_path=$tmp/val --validation.freq=5 --validation.sequences=5"
    for r in v1 v2; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY --training.steps=10 2>"$tmp/err" || fail "init $r"; done
    expect 0 "val_loss" "train with validation, one process" -- "$bin/titan-train" "$tmp/v1" $VAL
    expect 0 "val_loss" "train with validation, $1" -- "$bin/titan-train" "$tmp/v2" --nproc 2 $2 $VAL
    if /usr/bin/python3 - "$tmp/v1/metrics.jsonl" "$tmp/v2/metrics.jsonl" 2>"$tmp/err" <<'PY'
import json, sys
a, b = ([d["val_loss"] for d in map(json.loads, open(p)) if "val_loss" in d] for p in sys.argv[1:3])
worst = max(abs(x - y) / x for x, y in zip(a, b)) if len(a) == len(b) == 2 else 1
print("%.2e" % worst, file=sys.stderr)
sys.exit(0 if worst <= 1e-5 else 1)
PY
    then ok "$1 validation loss = one process's ($(cat "$tmp/err"))"
    else fail "$1 validation loss = one process's ($(cat "$tmp/err"))"; fi
}

# under_mpirun NAME FLAGS: $tmp/mpi trained by 2 ranks started by mpirun
# (PMIx) with FLAGS must follow $tmp/single's curve. 2 checks (a skip
# without mpirun).
under_mpirun() {
    if command -v mpirun >/dev/null 2>&1; then
        "$bin/titan-init" -q "$cfg" "$tmp/mpi" $TINY 2>"$tmp/err" || fail "init mpi"
        expect 0 "" "train $1 under mpirun (PMIx)" -- mpirun --allow-run-as-root --oversubscribe -n 2 \
            "$bin/titan-train" -q "$tmp/mpi" $2 $NOATP $NORING
        curve "mpirun $1 loss curve = one process" "$tmp/single" "$tmp/mpi"
    else
        skip "train $1 under mpirun" "mpirun not found"
    fi
}
