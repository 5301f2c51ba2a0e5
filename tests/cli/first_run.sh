#!/bin/sh
# CLI test of a newcomer's whole path, the first-run issue's walk: learn a
# BPE and shard a corpus with it (10% held out), make a run with relative
# paths, then from another working directory train with --stop-at, resume
# on two ranks (the global batch kept, both layouts named, the validation
# set the same size), extend training.steps (the LR warning), reshard,
# export to Hugging Face and GGUF (the tokenizer from the checkpoint),
# sample and plot (the resume marked). Each step checks what surprised
# users before. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"
proj=$tmp/proj
away=$tmp/elsewhere
mkdir -p "$proj/corpus" "$away"
for p in "$top"/man/*.[157] "$top/README.md"; do cp "$p" "$proj/corpus/$(basename "$p").txt"; done
cd "$proj" || exit 1

# --- data and run, made with paths relative to the project --------------------------------
expect 0 "" "titan-shard --train-tokenizer 512" -- "$bin/titan-shard" -q --train-tokenizer 512 corpus -o bpe.tiktoken
expect 0 "" "shard with it, 10% held out" -- "$bin/titan-shard" -q --tokenizer tiktoken:bpe.tiktoken --split 0.1 \
    corpus -o data
SMALL="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=20 --checkpoint.interval=5
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2 --metrics.peak_flops=1e11 --metrics.log_freq=5
 --validation.enable --validation.freq=5 --validation.steps=2"
expect 0 "" "titan-init with relative paths" -- "$bin/titan-init" -q "$cfg" run $SMALL \
    --model.tokenizer=tiktoken:bpe.tiktoken --training.dataset_path=data --validation.dataset_path=data-val
grep -q "tokenizer = \"tiktoken:$proj/bpe.tiktoken\"" run/config.toml && grep -q "dataset_path = \"$proj/data\"" run/config.toml \
    && ok "the run's config holds absolute paths" || fail "the run's config holds absolute paths"

# --- training from elsewhere ---------------------------------------------------------------------
cd "$away" || exit 1
expect 0 "^step 10/20 | " "train to --stop-at 10 from another directory" -- "$bin/titan-train" "$proj/run" --stop-at 10
grep -q "eta .* (to step 10)" "$tmp/err" && ok "step lines: N/TOTAL and the ETA to the stop" || fail "step lines: N/TOTAL and the ETA to the stop"
grep "validation: [0-9]* held-out sequences" "$tmp/err" | sed 's/.*validation: \([0-9]*\) .*/\1/' > "$tmp/val1"
[ -s "$tmp/val1" ] && ok "the validation set's size is said ($(cat "$tmp/val1") sequences)" || fail "the validation set's size is said"
grep -q "LR schedule changed" "$tmp/err" && fail "no LR warning on a first run" || ok "no LR warning on a first run"

expect 0 "resume: saved as single / .* at step 10; resuming as dp_shard=2 / " \
    "resume on 2 ranks: both layouts named" -- "$bin/titan-train" "$proj/run" --nproc 2 --training.local_batch_size=1 --stop-at 15
grep -q "resume: saved as single / global batch 2 x 32 (2 x 1 dp x 1 accum) at step 10; resuming as dp_shard=2 / global batch 2 x 32 (1 x 2 dp x 1 accum)" "$tmp/err" \
    && ok "... the global batch kept (2 sequences)" || fail "... the global batch kept ($(grep 'resume: ' "$tmp/err"))"
[ "$(grep -c 'threads: ' "$tmp/err")" = 1 ] && ok "... the threads line printed once" || fail "... the threads line printed once"
grep "validation: [0-9]* held-out sequences" "$tmp/err" | sed 's/.*validation: \([0-9]*\) .*/\1/' > "$tmp/val2"
[ -s "$tmp/val2" ] && cmp -s "$tmp/val1" "$tmp/val2" && ok "... the same number of validation sequences" \
    || fail "... the same number of validation sequences ($(cat "$tmp/val1") vs $(cat "$tmp/val2"))"
grep -q "LR schedule changed" "$tmp/err" && fail "... no LR warning (nothing it depends on changed)" \
    || ok "... no LR warning (nothing it depends on changed)"

expect 0 "LR schedule changed since step 15 was saved (training.steps 20 -> 24)" \
    "extending training.steps without lr_scheduler.total_steps warns" -- "$bin/titan-train" "$proj/run" --training.steps 24 \
    --training.local_batch_size=1 --nproc 2
cp "$tmp/err" "$tmp/extend.err"

# --- reshard, export, sample, plot ----------------------------------------------------------------
expect 0 "" "reshard for tp=2" -- "$bin/titan-reshard" -q "$proj/run" --to tp=2 "$away/tp2"
expect 0 "" "... the same tensors, exactly" -- "$bin/titan-ckpt" diff "$proj/run" "$away/tp2"
expect 0 "" "export to Hugging Face" -- "$bin/titan-ckpt" convert -q --to hf "$proj/run" "$away/hf"
[ -s "$away/hf/tokenizer.json" ] && [ -s "$away/hf/tokenizer_config.json" ] && ok "... with tokenizer.json and tokenizer_config.json" \
    || fail "... with tokenizer.json and tokenizer_config.json"
/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(0 if isinstance(c.get("bos_token_id"), int) and isinstance(c.get("eos_token_id"), int) else 1)' \
    "$away/hf/config.json" && ok "... and the special-token ids in config.json" || fail "... and the special-token ids in config.json"
expect 0 "" "export to GGUF without --tokenizer" -- "$bin/titan-ckpt" convert -q --to gguf "$proj/run" "$away/m.gguf"
expect 0 "sampling from step 24" "sample from the finished run" -- "$bin/titan-train" "$proj/run" --training.steps 24 \
    --sample 16 --prompt "The "
[ -s "$tmp/out" ] && ok "... text on stdout" || fail "... text on stdout"
grep -q "GFLOP/s" "$tmp/err" && fail "... no GEMM probe for it" || ok "... no GEMM probe for it"
expect 0 "" "plot the run as SVG" -- "$bin/titan-trace" plot -y loss,lr --svg "$away/run.svg" "$proj/run"
grep -q "resumed as dp_shard=2" "$away/run.svg" && ok "... the resume on 2 ranks is marked" || fail "... the resume on 2 ranks is marked"
tap_end
