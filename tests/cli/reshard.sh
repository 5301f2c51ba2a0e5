#!/bin/sh
# CLI tests of titan-reshard: a tiny run's checkpoint resharded A -> B -> A
# gives back the same bytes, and training resumed from a resharded checkpoint
# follows the original run bit for bit. Exit codes and messages. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"

shard_man_corpus
TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=6 --checkpoint.interval=3
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=2"
cfg=$top/configs/debugmodel.toml

# A reference run of 6 steps, and one stopped at step 3.
expect 0 "" "init run a" -- "$bin/titan-init" "$cfg" "$tmp/a" $TINY
expect 0 "" "train a 6 steps" -- "$bin/titan-train" -q "$tmp/a"
expect 0 "" "init run b" -- "$bin/titan-init" "$cfg" "$tmp/b" $TINY
expect 0 "" "train b to step 3" -- "$bin/titan-train" -q "$tmp/b" --stop-at 3
s3=step-00000003

# --- usage and errors ------------------------------------------------------------
expect 0 "" "--help" -- "$bin/titan-reshard" --help
grep -q "dp_shard" "$tmp/out" && ok "--help names the layout keys" || fail "--help names the layout keys"
expect 0 "" "--version" -- "$bin/titan-reshard" --version
expect 2 "--to" "missing --to is a usage error" -- "$bin/titan-reshard" "$tmp/b" "$tmp/x"
expect 2 "unknown key" "bad layout key" -- "$bin/titan-reshard" "$tmp/b" --to "fsdp=2" "$tmp/x"
expect 2 "dp_shard" "bad layout hints the keys" -- "$bin/titan-reshard" "$tmp/b" --to "fsdp=2" "$tmp/x"
expect 2 "integer" "zero degree" -- "$bin/titan-reshard" "$tmp/b" --to "tp=0" "$tmp/x"
expect 2 "pp=5" "more stages than layers + 2" -- "$bin/titan-reshard" "$tmp/b" --to "pp=5" "$tmp/x"
expect 2 "bf8" "bad --dtype" -- "$bin/titan-reshard" "$tmp/b" --to "tp=2" --dtype bf8 "$tmp/x"
expect 2 "unknown option" "unknown option" -- "$bin/titan-reshard" "$tmp/b" --to "tp=2" --bogus "$tmp/x"
expect 3 "nowhere" "missing input" -- "$bin/titan-reshard" "$tmp/nowhere" --to "tp=2" "$tmp/x"
[ -e "$tmp/x" ] && fail "failed runs leave no output" || ok "failed runs leave no output"

# --- A -> B -> A ------------------------------------------------------------------
expect 0 "" "reshard to dp_shard=4,tp=2" -- "$bin/titan-reshard" "$tmp/b" --to "dp_shard=4,tp=2" "$tmp/x"
grep -q "world 8" "$tmp/err" && ok "summary line names the world" || fail "summary line names the world"
[ "$(ls "$tmp/x/$s3"/rank-*.bin | wc -l)" -eq 8 ] && ok "8 rank files" || fail "8 rank files"
[ "$(cat "$tmp/x/latest")" = "$s3" ] && ok "latest names the step" || fail "latest names the step"
ls "$tmp/x" | grep -q tmp && fail "no .tmp left" || ok "no .tmp left"
expect 0 "" "verify the resharded checkpoint" -- "$bin/titan-ckpt" verify "$tmp/x"
expect 0 "" "info" -- "$bin/titan-ckpt" info "$tmp/x"
grep -q "dp_shard=4" "$tmp/out" && ok "info shows the layout" || fail "info shows the layout"
expect 0 "" "diff original vs resharded: no differences" -- "$bin/titan-ckpt" diff "$tmp/b/checkpoint" "$tmp/x"
expect 2 "exists" "existing step needs --force" -- "$bin/titan-reshard" "$tmp/b" --to "tp=2" "$tmp/x"
expect 0 "" "--force replaces it" -- "$bin/titan-reshard" -q --force "$tmp/b" --to "dp_shard=4,tp=2" "$tmp/x"
[ -s "$tmp/err" ] && fail "-q prints nothing" || ok "-q prints nothing"
expect 0 "" "reshard to pp=2,dp_shard=3 (uneven)" -- "$bin/titan-reshard" "$tmp/x/$s3" --to "pp=2,dp_shard=3" "$tmp/y"
expect 0 "" "back to single, into a step dir" -- "$bin/titan-reshard" "$tmp/y" --to single "$tmp/z/$s3"
expect 0 "" "diff original vs round trip: no differences" -- "$bin/titan-ckpt" diff "$tmp/b/checkpoint" "$tmp/z"
cmp -s "$tmp/b/checkpoint/$s3/rank-00000.bin" "$tmp/z/$s3/rank-00000.bin" \
    && ok "round trip: tensor bytes identical (cmp)" || fail "round trip: tensor bytes identical (cmp)"
cmp -s "$tmp/b/checkpoint/$s3/metadata.json" "$tmp/z/$s3/metadata.json" \
    && ok "round trip: metadata.json identical" || fail "round trip: metadata.json identical"
expect 2 "step 3" "a step dir of another step is refused" -- "$bin/titan-reshard" "$tmp/b" --to tp=2 "$tmp/w/step-00000009"
expect 0 "" "bf16 output" -- "$bin/titan-reshard" "$tmp/b" --to "dp_shard=2" --dtype bf16 "$tmp/h"
expect 1 "" "bf16 output differs from f32" -- "$bin/titan-ckpt" diff "$tmp/b/checkpoint" "$tmp/h"

# --- compression: zstd on request, kept by default, off on request -------------------
expect 2 "lz4" "bad --compression" -- "$bin/titan-reshard" "$tmp/b" --to tp=2 --compression lz4 "$tmp/zc"
expect 0 "" "reshard with --compression zstd" -- "$bin/titan-reshard" "$tmp/b" --to "dp_shard=2,tp=2" --compression zstd "$tmp/zc"
grep -q '"zstd"' "$tmp/zc/$s3/metadata.json" && ok "chunks are zstd" || fail "chunks are zstd"
expect 0 "" "diff original vs compressed: no differences" -- "$bin/titan-ckpt" diff "$tmp/b/checkpoint" "$tmp/zc"
expect 0 "" "reshard keeps compression" -- "$bin/titan-reshard" "$tmp/zc" --to "pp=2" "$tmp/zk"
grep -q '"zstd"' "$tmp/zk/$s3/metadata.json" && ok "kept zstd" || fail "kept zstd"
expect 0 "" "back to single, uncompressed" -- "$bin/titan-reshard" "$tmp/zk" --to single --compression none "$tmp/zn"
cmp -s "$tmp/b/checkpoint/$s3/rank-00000.bin" "$tmp/zn/$s3/rank-00000.bin" \
    && ok "compressed round trip: tensor bytes identical" || fail "compressed round trip: tensor bytes identical"

# --- a corrupt input is refused, nothing written -----------------------------------
cp -r "$tmp/x" "$tmp/xc"
printf 'XXXX' | dd of="$tmp/xc/$s3/rank-00003.bin" bs=1 seek=64 conv=notrunc 2>/dev/null
"$bin/titan-reshard" "$tmp/xc" --to single "$tmp/out-c" >/dev/null 2>"$tmp/err"; rc=$?
{ [ $rc -eq 4 ] || [ $rc -eq 7 ]; } && grep -q checksum "$tmp/err" \
    && ok "corrupt chunk refused (exit $rc)" || fail "corrupt chunk refused (exit $rc)"
ls "$tmp/out-c" 2>/dev/null | grep -q step- && fail "corrupt input leaves no step" || ok "corrupt input leaves no step"

# --- training resumes from a resharded checkpoint, bit for bit -----------------------
cp -r "$tmp/b" "$tmp/r"
rm -rf "$tmp/r/checkpoint"
expect 0 "" "reshard into a run directory" -- "$bin/titan-reshard" "$tmp/b" --to "dp_replicate=2,dp_shard=2,tp=2,pp=2" "$tmp/r"
[ -f "$tmp/r/checkpoint/$s3/metadata.json" ] && ok "written to RUN/checkpoint" || fail "written to RUN/checkpoint"
expect 0 "" "resume r from the resharded step 3" -- "$bin/titan-train" -q "$tmp/r"
cut -d, -f1-3 "$tmp/a/metrics.jsonl" > "$tmp/la"; cut -d, -f1-3 "$tmp/r/metrics.jsonl" > "$tmp/lr"
[ "$(wc -l < "$tmp/lr")" -eq 6 ] && cmp -s "$tmp/la" "$tmp/lr" \
    && ok "loss after resuming from the resharded checkpoint is identical" \
    || fail "loss after resuming from the resharded checkpoint is identical"
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/r/checkpoint/step-00000006/rank-00000.bin" \
    && ok "final state bitwise identical" || fail "final state bitwise identical"

tap_end
