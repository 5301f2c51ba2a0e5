#!/bin/sh
# CLI tests of parallelism.module_fqns_per_model_part (torchtitan's stage
# split by module name) on the tiny model of pp_train.sh with 6 layers:
# the parts of the default split (pp 2, 1F1B) give the default split's
# bits; uneven parts (pp 2, 1F1B: 1 layer then 5; pp 2 Interleaved1F1B and
# ZBVZeroBubble: 4 parts of 1, 2, 1 and 2 layers) follow the one-process
# curve to pp_train.sh's bounds and name the split in the layout
# (pp_layers); titan-reshard takes the uneven checkpoint to the default
# split and back byte for byte; a ZBV run's checkpoint resumes as one
# process; --print-config
# writes the key back; and the refusals, each naming the part and the
# FQN: the embedding, norm or output in the wrong part, a layer twice, out
# of order or missing, part of a block, an unknown name, parts not a
# multiple of pp, a schedule's stages a rank, a clash with
# pipeline_parallel_layers_per_stage, an empty part. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

PP2="--parallelism.pipeline_parallel_degree=2"
L6="--model.n_layers=6"
KEY="--parallelism.module_fqns_per_model_part"
# the default split of 6 layers over 2 stages: (6 + 1 + 1) / 2 = 4 a stage, less 1 for each end's weight
DEFAULT='[["tok_embeddings","layers.0","layers.1","layers.2"],["layers.3","layers.4","layers.5","norm","output"]]'
UNEVEN='[["tok_embeddings","layers.0"],["layers.1","layers.2","layers.3","layers.4","layers.5","norm","output"]]'
FOUR='[["tok_embeddings","layers.0"],["layers.1","layers.2"],["layers.3"],["layers.4","layers.5","norm","output"]]'
for r in single dflt byname uneven il zbv half bad; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $L6 2>"$tmp/err" || fail "init $r"
done

expect 0 "" "train 6 layers, one process" -- "$bin/titan-train" -q "$tmp/single"
expect 0 "" "train pp 2, the default split" -- "$bin/titan-train" -q "$tmp/dflt" --nproc 2 $PP2
expect 0 "" "pp 2, the default split by name" -- "$bin/titan-train" "$tmp/byname" --nproc 2 $PP2 "$KEY=$DEFAULT"
# the checkpoint's layout names the split
saved() { grep -q "\"layout\": \"$2\"" "$tmp/$1/checkpoint/step-00000020/metadata.json"; }
check "the checkpoint's layout names the split by name" \
    saved byname "dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2,pp_v=1,pp_first_less=1,pp_last_less=1,pp_layers=3:3"
same_bits "the default split by name = the default split, bit for bit" "$tmp/dflt" "$tmp/byname"
expect 0 "" "pp 2, 1 layer then 5" -- \
    "$bin/titan-train" "$tmp/uneven" --nproc 2 $PP2 "$KEY=$UNEVEN"
check "the uneven split is in the checkpoint's layout" saved uneven "dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2,pp_v=1,pp_first_less=1,pp_last_less=1,pp_layers=1:5"
curve "pp 2, 1 layer then 5: loss curve = one process" "$tmp/single" "$tmp/uneven"
expect 0 "" "reshard the uneven split's checkpoint to the default split" -- \
    "$bin/titan-reshard" -q "$tmp/uneven" --to "pp=2" "$tmp/even"
expect 0 "" "and back to 1 layer then 5 (pp_layers)" -- "$bin/titan-reshard" -q "$tmp/even" --to "pp=2,pp_layers=1:5" \
    "$tmp/back"
for f in rank-00000.bin rank-00001.bin; do
    cmp -s "$tmp/uneven/checkpoint/step-00000020/$f" "$tmp/back/step-00000020/$f" &&
        ok "uneven -> default -> uneven: $f byte for byte" || fail "uneven -> default -> uneven: $f byte for byte"
done
expect 0 "" "pp 2 Interleaved1F1B, 4 parts of 1, 2, 1, 2 layers" -- "$bin/titan-train" -q "$tmp/il" --nproc 2 $PP2 \
    --parallelism.pipeline_parallel_schedule=Interleaved1F1B "$KEY=$FOUR"
curve "pp 2 Interleaved1F1B by name: loss curve = one process" "$tmp/single" "$tmp/il"
expect 0 "" "pp 2 ZBVZeroBubble, the same 4 parts in a V" -- \
    "$bin/titan-train" "$tmp/zbv" --nproc 2 $PP2 --parallelism.pipeline_parallel_schedule=ZBVZeroBubble "$KEY=$FOUR"
curve "pp 2 ZBVZeroBubble by name: loss curve = one process" "$tmp/single" "$tmp/zbv"
check "the V's checkpoint layout" saved zbv "dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1,pp_layers=1:2:1:2"
expect 0 "" "pp 2 ZBVZeroBubble by name to step 10" -- "$bin/titan-train" -q "$tmp/half" --nproc 2 $PP2 \
    --parallelism.pipeline_parallel_schedule=ZBVZeroBubble "$KEY=$FOUR" --stop-at 10
expect 0 "" "its checkpoint resumes as one process" -- "$bin/titan-train" -q "$tmp/half"
curve "ZBV by name -> one process resume continues the curve" "$tmp/single" "$tmp/half" 11

expect 0 "" "--print-config" -- sh -c "'$bin/titan-train' --print-config '$tmp/bad/config.toml' '$KEY=$FOUR' >'$tmp/pc'"
grep -qF 'module_fqns_per_model_part = [["tok_embeddings", "layers.0"], ["layers.1", "layers.2"], ["layers.3"], ["layers.4", "layers.5", "norm", "output"]]' \
    "$tmp/pc" && ok "--print-config writes the parts" || fail "--print-config writes the parts"

# --- refusals (exit 2 before the first step) -------------------------------------
bad() { # STDERR NAME PARTS [FLAGS...]
    want=$1 name=$2 parts=$3
    shift 3
    expect 2 "$want" "refused: $name" -- "$bin/titan-train" -q "$tmp/bad" --nproc 2 $PP2 "$KEY=$parts" "$@"
}
bad "part 1: 'tok_embeddings' belongs to the first part (part 0)" "the embedding in part 1" \
    '[["layers.0","layers.1","layers.2"],["tok_embeddings","layers.3","layers.4","layers.5","norm","output"]]'
bad "part 0: 'norm' belongs to the last part (part 1)" "norm in part 0" \
    '[["tok_embeddings","layers.0","layers.1","layers.2","norm"],["layers.3","layers.4","layers.5","output"]]'
bad "part 1: 'layers.2' is named twice (also in part 0)" "a layer twice" \
    '[["tok_embeddings","layers.0","layers.1","layers.2"],["layers.2","layers.3","layers.4","layers.5","norm","output"]]'
bad "part 1: 'layers.4' out of order" "a gap" \
    '[["tok_embeddings","layers.0","layers.1","layers.2"],["layers.4","layers.3","layers.5","norm","output"]]'
bad "'layers.5' is in no part" "a layer missing" \
    '[["tok_embeddings","layers.0","layers.1","layers.2"],["layers.3","layers.4","norm","output"]]'
bad "'output' is in no part" "the output missing" \
    '[["tok_embeddings","layers.0","layers.1","layers.2"],["layers.3","layers.4","layers.5","norm"]]'
bad "part 0: 'layers.0.attention' names part of a block" "part of a block" \
    '[["tok_embeddings","layers.0.attention","layers.1"],["layers.2","layers.3","layers.4","layers.5","norm","output"]]'
bad "part 1: 'layers.6' is not a block of the model (tok_embeddings, layers.0 to layers.5, norm, output)" \
    "a layer past the model" \
    '[["tok_embeddings","layers.0","layers.1","layers.2"],["layers.3","layers.4","layers.5","layers.6","norm","output"]]'
bad "3 parts for pipeline_parallel_degree 2" "parts not a multiple of pp" \
    '[["tok_embeddings","layers.0"],["layers.1","layers.2"],["layers.3","layers.4","layers.5","norm","output"]]'
bad "4 parts over pipeline_parallel_degree 2 make 2 stages a rank" "1F1B with 2 stages a rank" "$FOUR"
bad "has 4 parts, pipeline_parallel_layers_per_stage = 4 makes 2 stages" "a clash with layers_per_stage" "$FOUR" \
    --parallelism.pipeline_parallel_schedule=Interleaved1F1B --parallelism.pipeline_parallel_layers_per_stage=4
bad "part 1: expected a non-empty list of strings, got" "an empty part" '[["tok_embeddings"],[]]'

tap_end
