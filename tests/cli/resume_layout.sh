#!/bin/sh
# CLI tests of a resume under another layout: what the checkpoint records of
# its steps (layout, local batch, sequence length, accumulation, global
# batch, validation sequences), the line that says what was saved and what
# is resumed, the global batch kept by gradient accumulation when
# training.global_batch_size is unset (and changed, with a line, when it is
# set; refused when the new layout cannot make it), and validation over a
# fixed number of held-out sequences whatever the layout.
#
# The tiny model of tiny.sh with training.global_batch_size unset: FSDP 2
# (local batch 2, so a global batch of 4) trains 20 steps uninterrupted, and
# to step 10 in a second run whose checkpoint resumes as one process
# (accumulation 2), as tp 2 (dp 1: accumulation 2) and with local batch 1
# (accumulation 4). Each continues the uninterrupted curve to 1e-5 relative
# (float sums regrouped, as in dist_train.sh), and its validation losses
# (the 8 sequences that validation.steps = 2 made under FSDP 2, kept) are
# the uninterrupted run's to 1e-5 (seen: 4e-8 and 2e-8); with a global
# batch of 2 instead the curve moves by 2e-2, with 4 sequences instead of 8
# val_loss by 2.6e-2.
# validation.sequences = 5 (a partial last batch on every layout but local
# batch 1) gives one value to 1e-5 under one process, FSDP 2 and local
# batch 1 (no padding there: the check of the padded batches' arithmetic).
# TAP output.
set -u
TINY_GLOBAL_BATCH=-1
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus
cat "$top/README.md" "$top/LICENSE" > "$tmp/held.txt"
"$bin/titan-shard" -q -o "$tmp/val" "$tmp/held.txt" 2>"$tmp/err" && ok "shard held-out text" || fail "shard held-out text"
VAL="--validation.enable=true --validation.dataset_path=$tmp/val --validation.freq=5 --validation.steps=2"
for r in whole half; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $VAL 2>"$tmp/err" || fail "init $r"; done

expect 0 "validation: 8 held-out sequences" "FSDP 2, 20 steps, validating 8 sequences" -- \
    "$bin/titan-train" "$tmp/whole" --nproc 2
expect 0 "" "FSDP 2 to step 10" -- "$bin/titan-train" -q "$tmp/half" --nproc 2 --stop-at 10
if /usr/bin/python3 - "$tmp/half/checkpoint/step-00000010/metadata.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["meta"]
want = {"layout": "dp_replicate=1,dp_shard=2,cp=1,tp=1,pp=1", "training.local_batch_size": 2,
        "training.seq_len": 32, "train.accum_steps": 1, "training.global_batch_size": 4,
        "validation.sequences": 8, "validation.steps": 2}
sys.exit(0 if all(m.get(k) == v for k, v in want.items()) else "%s" % {k: m.get(k) for k in want})
PY
then ok "the checkpoint records layout, batch and validation"; else fail "the checkpoint records layout, batch and validation"; fi

# val_same DESCRIPTION RUN_A RUN_B: the val_loss of steps 15 and 20 agree to 1e-5 relative.
val_same() {
    if /usr/bin/python3 - "$2/metrics.jsonl" "$3/metrics.jsonl" 2>"$tmp/err" <<'PY'
import json, sys
a, b = ({d["step"]: d["val_loss"] for d in map(json.loads, open(p)) if "val_loss" in d} for p in sys.argv[1:3])
worst = max(abs(a[s] - b[s]) / a[s] for s in (15, 20)) if all(s in a and s in b for s in (15, 20)) else 1
print("%.2e" % worst, file=sys.stderr)
sys.exit(0 if worst <= 1e-5 else 1)
PY
    then ok "$1 (max relative difference $(cat "$tmp/err"))"
    else fail "$1 (max relative difference $(cat "$tmp/err"))"; fi
}

# --- the global batch kept: one process, tp 2, a smaller local batch ----------------------
for r in one tp lb1 over bad pad1 pad2 padb1 old; do cp -r "$tmp/half" "$tmp/$r"; done
expect 0 "resume: saved as dp_shard=2 / global batch 4 x 32 (2 x 2 dp x 1 accum) at step 10; resuming as single / global batch 4 x 32 (2 x 1 dp x 2 accum)" \
    "FSDP 2 checkpoint resumed as one process: accumulation 2, and one line says so" -- "$bin/titan-train" "$tmp/one"
grep -q "validation: 8 held-out sequences.*kept from step 10 (validation.steps = 2 makes 4 under this layout" "$tmp/err" \
    && ok "the validation sequences are kept, and a line says so" || fail "the validation sequences are kept, and a line says so"
curve "one process with accumulation 2 continues the FSDP 2 curve" "$tmp/whole" "$tmp/one" 11
val_same "one process: the FSDP 2 validation loss" "$tmp/whole" "$tmp/one"
grep -q '"train.accum_steps": 2' "$tmp/one/checkpoint/step-00000020/metadata.json" \
    && ok "its checkpoint records accumulation 2" || fail "its checkpoint records accumulation 2"

expect 0 "resuming as tp=2 / global batch 4 x 32 (2 x 1 dp x 2 accum)" "FSDP 2 checkpoint resumed as tp 2" -- \
    "$bin/titan-train" "$tmp/tp" --nproc 2 $TP2
curve "tp 2 with accumulation 2 continues the FSDP 2 curve" "$tmp/whole" "$tmp/tp" 11
val_same "tp 2: the FSDP 2 validation loss" "$tmp/whole" "$tmp/tp"

expect 0 "resuming as single / global batch 4 x 32 (1 x 1 dp x 4 accum)" "resumed with local batch 1: accumulation 4" -- \
    "$bin/titan-train" "$tmp/lb1" --training.local_batch_size=1
curve "local batch 1 with accumulation 4 continues the FSDP 2 curve" "$tmp/whole" "$tmp/lb1" 11
val_same "local batch 1: the FSDP 2 validation loss" "$tmp/whole" "$tmp/lb1"

# --- the override, and a global batch the layout cannot make -----------------------------
expect 0 "global batch changed: 4 sequences a step when step 10 was saved, 2 from here on (training.global_batch_size)" \
    "training.global_batch_size set: the new batch, and a line says so" -- \
    "$bin/titan-train" "$tmp/over" --training.global_batch_size=2
grep -q "resuming as single / global batch 2 x 32 (2 x 1 dp x 1 accum)" "$tmp/err" \
    && ok "the resume line shows the new batch" || fail "the resume line shows the new batch"
if /usr/bin/python3 - "$tmp/over/metrics.jsonl" <<'PY'
import json, sys
t = {d["step"]: d["tokens_seen"] for d in map(json.loads, open(sys.argv[1]))}
sys.exit(0 if t[11] == 1280 + 64 and t[20] == 1280 + 10 * 64 else "%s" % t)
PY
then ok "the override's steps take 2 sequences"; else fail "the override's steps take 2 sequences"; fi
expect 2 "checkpoint/step-00000010: step 10 was trained with a global batch of 4 sequences; this layout takes 3 x 1 dp = 3 a micro-batch step" \
    "a global batch the local batch does not divide is refused" -- \
    "$bin/titan-train" "$tmp/bad" --training.local_batch_size=3
grep -q "keep it with --training.local_batch_size=2, or change it with --training.global_batch_size=6" "$tmp/err" \
    && ok "the refusal names both fixes" || fail "the refusal names both fixes"
if [ "$(cat "$tmp/bad/checkpoint/latest")" = step-00000010 ] && ! grep -q '"step":11,' "$tmp/bad/metrics.jsonl"
then ok "the refused run trains nothing"; else fail "the refused run trains nothing"; fi

# --- validation.sequences: one number whatever the layout, padded batches included -------
expect 0 "validation: 5 held-out sequences of 32 tokens every 5 steps (validation.sequences); 8 when step 10 was saved" \
    "validation.sequences = 5, one process (a partial last batch)" -- \
    "$bin/titan-train" "$tmp/pad1" --validation.sequences=5
expect 0 "" "validation.sequences = 5, FSDP 2 (a partial last batch on one rank)" -- \
    "$bin/titan-train" -q "$tmp/pad2" --nproc 2 --validation.sequences=5
expect 0 "" "validation.sequences = 5, local batch 1 (no padding)" -- \
    "$bin/titan-train" -q "$tmp/padb1" --validation.sequences=5 --training.local_batch_size=1
val_same "5 sequences: FSDP 2 = one process" "$tmp/pad1" "$tmp/pad2"
val_same "5 sequences: padded batches = local batch 1" "$tmp/padb1" "$tmp/pad1"
if /usr/bin/python3 - "$tmp/pad1/metrics.jsonl" "$tmp/one/metrics.jsonl" <<'PY'
import json, sys
a, b = ({d["step"]: d["val_loss"] for d in map(json.loads, open(p)) if "val_loss" in d} for p in sys.argv[1:3])
sys.exit(0 if abs(a[20] - b[20]) / b[20] > 1e-4 else "5 and 8 sequences give %s and %s" % (a[20], b[20]))
PY
then ok "5 sequences differ from 8 (the count is the one asked for)"; else fail "5 sequences differ from 8"; fi

# --- a checkpoint older than these records ------------------------------------------------
/usr/bin/python3 - "$tmp/old/checkpoint/step-00000010/metadata.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for k in ("layout", "training.local_batch_size", "training.seq_len", "train.accum_steps",
          "training.global_batch_size", "validation.sequences", "validation.steps"):
    del m["meta"][k]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
expect 0 "resume: saved layout unknown / global batch unknown at step 10 (a checkpoint older than these records); resuming as single / global batch 2 x 32 (2 x 1 dp x 1 accum)" \
    "a checkpoint without the records resumes, saying what it does not know" -- "$bin/titan-train" "$tmp/old"

tap_end
