#!/bin/sh
# CLI tests of checkpoint durability at the system-call level: every save
# runs under build/tests/sync_trace.so (tests/durability/sync_trace.c, an
# LD_PRELOAD shim that logs each write, fsync, fdatasync, syncfs,
# sync_file_range, open, close, mkdir, rename and unlink of every process
# and thread), and tests/durability/check_sync.py checks the log against
# titan-checkpoint(5)'s WRITING A CHECKPOINT: each file of a step synced
# after its last write, then the step directory, all before the step's
# rename; the root synced after it and before `latest` is replaced; latest
# synced before its rename and the root after; a root (or a directory above
# it) the tool made, synced in its parent. It also emulates a power
# loss after every call (unsynced data dropped, each directory's unsynced
# changes kept up to any point) and requires `latest` to name a complete
# step in every state a crash could leave. Saves checked: titan-init's
# seed, one process sync and async, FSDP 2 (--nproc 2) sync and async,
# titan-reshard's output and convert --from hf's (also over an existing
# step: renameat2 RENAME_EXCHANGE). Then the test shows the
# checker can fail: SYNC_TRACE_DROP makes one fsync a no-op (as if the call
# were removed from the code) and the checker must name what it left
# unsynced. The page cache hides all of this from a test that reads back.
set -u
. "$(dirname "$0")/lib/tap.sh"
export TITAN_COMM_TIMEOUT=60
shim=$top/build/tests/sync_trace.so
checker=$top/tests/durability/check_sync.py
[ -f "$shim" ] || { echo "$shim not built (make all)"; exit 77; }
# A sanitizer build (make check-asan) wants its runtime first among the
# preloaded libraries: it goes before the shim.
preload=$(ldd "$bin/titan-train" 2>/dev/null | awk '/lib(asan|tsan)\.so/ { printf "%s ", $3 }')$shim

shard_man_corpus
TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.global_batch_size=4 --training.steps=4
 --checkpoint.interval=2 --checkpoint.keep_latest_k=1 --lr_scheduler.warmup_steps=2
 --training.dataset_path=$tmp/data --metrics.peak_flops=1e11 --training.threads=1"
cfg=$top/configs/debugmodel.toml
ASYNC="--checkpoint.async_mode=async"

# traced NAME CMD...: runs CMD with the shim, its log in $tmp/trace-NAME
traced() {
    name=$1; shift
    rm -rf "$tmp/trace-$name"; mkdir -p "$tmp/trace-$name"
    env SYNC_TRACE_DIR="$tmp/trace-$name" LD_PRELOAD="$preload" "$@"
}
# durable NAME STEPS DESC: the checker passes on NAME's log, which
# published at least STEPS steps
durable() {
    if /usr/bin/python3 "$checker" --expect-steps "$2" "$tmp/trace-$1" >"$tmp/check" 2>&1; then
        ok "$3: $(grep -c '^published' "$tmp/check") steps published, protocol kept, $(sed -n 's/ crash states emulated//p' "$tmp/check") crash states complete"
    else
        fail "$3"; sed 's/^/#   /' "$tmp/check" | head -n 30
    fi
}

expect 0 "" "titan-init seeds a run (traced)" -- traced init "$bin/titan-init" -q "$cfg" "$tmp/one" $TINY
durable init 1 "titan-init's seed checkpoint"
expect 0 "" "train one process, sync saves (traced)" -- traced one "$bin/titan-train" -q "$tmp/one"
durable one 2 "one process, sync saves"

"$bin/titan-init" -q "$cfg" "$tmp/async" $TINY 2>"$tmp/err" || fail "init async"
expect 0 "" "train one process, async saves (traced)" -- traced async "$bin/titan-train" -q "$tmp/async" $ASYNC
durable async 2 "one process, async saves"

"$bin/titan-init" -q "$cfg" "$tmp/fsdp" $TINY 2>"$tmp/err" || fail "init fsdp"
expect 0 "" "train FSDP 2, sync saves (traced)" -- traced fsdp "$bin/titan-train" -q "$tmp/fsdp" --nproc 2
durable fsdp 2 "FSDP 2 (--nproc 2), sync saves"
[ "$(ls "$tmp/trace-fsdp" | wc -l)" -ge 3 ] && ok "FSDP 2: a log per process (launcher and 2 ranks)" \
    || fail "FSDP 2: a log per process (found $(ls "$tmp/trace-fsdp" | wc -l))"

"$bin/titan-init" -q "$cfg" "$tmp/fsdpa" $TINY 2>"$tmp/err" || fail "init fsdpa"
expect 0 "" "train FSDP 2, async saves (traced)" -- traced fsdpa "$bin/titan-train" -q "$tmp/fsdpa" --nproc 2 $ASYNC
durable fsdpa 2 "FSDP 2 (--nproc 2), async saves"

expect 0 "" "titan-reshard to dp_shard=2 (traced)" -- traced reshard "$bin/titan-reshard" "$tmp/one" --to dp_shard=2 "$tmp/resharded"
durable reshard 1 "titan-reshard's output"

expect 0 "" "convert --to hf" -- "$bin/titan-ckpt" convert -q --to hf "$tmp/one" "$tmp/hf"
expect 0 "" "convert --from hf (traced)" -- traced hf "$bin/titan-ckpt" convert -q --from hf "$tmp/hf" "$tmp/imported"
durable hf 1 "convert --from hf's output"
expect 0 "" "convert --from hf --force over it (traced)" -- traced hf2 "$bin/titan-ckpt" convert -q --from hf --force "$tmp/hf" "$tmp/imported"
grep -q " rename 0 0 .*step-00000000.tmp .*step-00000000 flags=2" "$tmp"/trace-hf2/* \
    && ok "  ... which exchanged step 0 with the new one (RENAME_EXCHANGE)" || fail "  ... which exchanged step 0 with the new one (RENAME_EXCHANGE)"
durable hf2 1 "convert --from hf --force's output, over an existing step"

# ---- the checker can fail: one fsync removed at a time -----------------------------------
# dropped NAME SUFFIX PATTERN DESC: a traced FSDP 2 run (from the seed,
# step 0, to step 2, which replaces it) whose fsyncs of paths ending in
# SUFFIX do nothing; the checker must fail, saying PATTERN, and its
# power-loss emulation must find a crash that loses the checkpoint.
dropped() {
    rm -rf "$tmp/$1"
    "$bin/titan-init" -q "$cfg" "$tmp/$1" $TINY --training.steps=2 2>"$tmp/err" || fail "init $1"
    traced "$1" env SYNC_TRACE_DROP="$2" "$bin/titan-train" -q "$tmp/$1" --nproc 2 >"$tmp/out" 2>"$tmp/err" ||
        { fail "$4 (the run failed)"; return; }
    grep -q " dropped " "$tmp/trace-$1"/* || { fail "$4 (no fsync of *$2 was dropped)"; return; }
    if /usr/bin/python3 "$checker" "$tmp/trace-$1" >"$tmp/check" 2>&1; then
        fail "$4: the checker passed"
    elif ! grep -q -- "$3" "$tmp/check"; then
        fail "$4 (the checker failed, but not saying '$3')"; sed 's/^/#   /' "$tmp/check" | head -n 20
    elif ! grep -q "VIOLATION (power loss)" "$tmp/check"; then
        fail "$4 (the protocol check saw it, the power-loss emulation did not)"; sed 's/^/#   /' "$tmp/check" | head -n 20
    else
        ok "$4: caught"; grep VIOLATION "$tmp/check" | sed "s|$tmp/||g; s/^/#   /"
    fi
}
dropped nofile rank-00001.bin "step-00000002/rank-00001.bin: not fsynced after its last write" \
    "rank 1's data file not fsynced before the rename"
dropped nometa metadata.json "metadata.json: not fsynced" "metadata.json not fsynced"
dropped nodir step-00000002.tmp "step-00000002.tmp: directory not fsynced" "the step directory not fsynced"
dropped noroot /checkpoint "the root was not fsynced after" "the checkpoint root not fsynced (latest may still name step 0 as it is deleted)"
dropped nolatest latest.tmp "latest.tmp: not fsynced" "latest.tmp not fsynced"
# A new root is durable only once its parent is synced (titan_fs_mkdir_p
# does it): dropping the run directory's fsyncs leaves checkpoint/ unsynced
# in it. (The emulation takes the root as given: the protocol check alone.)
traced seeded env SYNC_TRACE_DROP=/seeded "$bin/titan-init" -q "$cfg" "$tmp/seeded" $TINY >"$tmp/out" 2>"$tmp/err" ||
    fail "init seeded"
if /usr/bin/python3 "$checker" "$tmp/trace-seeded" >"$tmp/check" 2>&1; then
    fail "a new checkpoint root not synced in its parent: the checker passed"
elif grep -q "seeded/checkpoint: made for checkpoint root .*, but .*/seeded was not fsynced after" "$tmp/check"; then
    ok "a new checkpoint root not synced in its parent: caught"
else
    fail "a new checkpoint root not synced in its parent (not the expected message)"; sed 's/^/#   /' "$tmp/check" | head -n 20
fi

tap_end
