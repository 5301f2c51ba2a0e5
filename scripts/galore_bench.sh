#!/bin/sh
# galore_bench.sh - AdamW beside GaLore (randomized and exact SVD) in the same
# run, on the demo corpus (configs/demo.toml's data and tokenizer, made by
# `make demo`), for the debugmodel flavor and a 4-layer dim-512 model; not
# part of CI. Per model and optimizer: the final validation loss, the
# optimizer state a rank holds (metrics.jsonl optim_state_bytes) and the
# part serving the projected matrices (optim_projected_bytes) against what
# AdamW holds for the same matrices (GaLore's flat moments hold only the
# parameters it leaves on AdamW, so AdamW's state less those is AdamW's
# for the projected matrices), and the mean step time of refresh
# steps against the others. Then the refresh's SVD alone at dim 2048
# (build/tests/test_galore --bench-svd): exact (LAPACK dgesdd) against
# randomized. Prints a Markdown table.
#
#   GALORE_STEPS (500)  GALORE_MODELS ("debug d512")  GALORE_DATA (data: the
#   demo's shards, tokenizer and validation shards)  GALORE_GAP (200)
#   GALORE_SCALE (1: the same update size as AdamW at the same lr; the
#   papers' 0.25 goes with a higher lr)  GALORE_SVD_DIM (2048; 0 skips)
#   GALORE_THREADS (2). The memory figures do not depend on the steps:
#   GALORE_STEPS=2 GALORE_GAP=1 measures them in seconds (the losses then
#   mean nothing).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
STEPS=${GALORE_STEPS:-500}
MODELS=${GALORE_MODELS:-debug d512}
DATA=${GALORE_DATA:-$top/data}
GAP=${GALORE_GAP:-200}
SCALE=${GALORE_SCALE:-1}
SVD_DIM=${GALORE_SVD_DIM:-2048}
THREADS=${GALORE_THREADS:-2}
out=${GALORE_OUT:-$top/build/galore_bench}
[ -d "$DATA/man-pages-bpe4k" ] || { echo "galore_bench: no $DATA/man-pages-bpe4k (make demo makes it)" >&2; exit 1; }
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
rm -rf "$out"
mkdir -p "$out"

COMMON="--training.steps=$STEPS --training.threads=$THREADS --checkpoint.enable=false
 --training.dataset_path=$DATA/man-pages-bpe4k --validation.dataset_path=$DATA/man-pages-bpe4k-val
 --model.tokenizer=tiktoken:$DATA/man-pages-bpe4k.tiktoken --validation.freq=$STEPS --metrics.log_freq=50"

for m in $MODELS; do
    case $m in
    debug) shape=""; dim=256 ;;
    d512) shape="--model.dim=512 --model.n_layers=4"; dim=512 ;;
    *) echo "galore_bench: model $m: debug or d512" >&2; exit 2 ;;
    esac
    rank=$((dim / 4))
    G="--optimizer.name=GaLore --optimizer.rank=$rank --optimizer.update_proj_gap=$GAP --optimizer.scale=$SCALE"
    for o in adamw galore galore_exact; do
        case $o in
        adamw) flags="" ;;
        galore) flags="$G" ;;
        galore_exact) flags="$G --optimizer.galore_svd=exact" ;;
        esac
        run=$out/$m-$o
        # shellcheck disable=SC2086
        bin/titan-init -q configs/demo.toml "$run" $COMMON $shape $flags
        echo "galore_bench: $m $o ($STEPS steps)" >&2
        # shellcheck disable=SC2086
        bin/titan-train -q "$run" 2>"$run.log" || { tail -5 "$run.log" >&2; exit 1; }
    done
done

/usr/bin/python3 - "$out" "$MODELS" "$GAP" <<'PY'
import json, os, sys
out, models, gap = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def load(p): return [json.loads(l) for l in open(os.path.join(out, p, "metrics.jsonl"))]
print("| model | optimizer | final val loss | vs AdamW | optimizer state (MiB) | vs AdamW's (whole model) | projected matrices' state (MiB) | vs AdamW's for them | step s (refresh) | step s (other) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m in models:
    a = load(m + "-adamw")
    a_val = [d["val_loss"] for d in a if "val_loss" in d][-1]
    a_state = a[-1]["optim_state_bytes"]
    for o in ("adamw", "galore", "galore_exact"):
        r = load(m + "-" + o)
        val = [d["val_loss"] for d in r if "val_loss" in d][-1]
        st, pr = r[-1]["optim_state_bytes"], r[-1]["optim_projected_bytes"]
        # AdamW's state for the projected matrices: all of AdamW's but what GaLore keeps on AdamW
        adam_for_proj = a_state - (st - pr)
        refresh = [d["step_time_s"] for d in r if (d["step"] - 1) % gap == 0 and d["step"] > 1]
        other = [d["step_time_s"] for d in r if (d["step"] - 1) % gap != 0 and d["step"] > 2]
        mean = lambda x: sum(x) / len(x) if x else float("nan")
        print("| %s | %s | %.4f | %+.2f%% | %.2f | %.1f%% | %s | %s | %.3f | %.3f |" % (
            m, o, val, 100 * (val / a_val - 1), st / 2**20, 100 * st / a_state,
            "%.2f" % (pr / 2**20) if o != "adamw" else "-",
            "%.1f%%" % (100 * pr / adam_for_proj) if o != "adamw" else "-",
            mean(refresh), mean(other)))
PY
if [ "$SVD_DIM" -gt 0 ]; then
    make -s build/tests/test_galore >/dev/null
    build/tests/test_galore --bench-svd "$SVD_DIM" $((SVD_DIM / 4))
fi
