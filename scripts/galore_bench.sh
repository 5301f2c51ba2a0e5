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
#   demo's shards, tokenizer and validation shards)  GALORE_GAP (50: a
#   500-step run refreshes ten times; GaLore's default 200, meant for runs
#   of thousands of steps, refreshes three times here and trails by more:
#   see below)
#   GALORE_LR (4.5e-3: the GaLore runs' optimizer.lr, which the embedding,
#   norms and output on AdamW take too) and GALORE_ADAMW_LR (4.5e-3,
#   AdamW's): both at AdamW's best lr of a sweep (debugmodel, 500 steps,
#   session 42: AdamW 3.9646 at 3e-3, 3.9409 at 4.5e-3, 4.0232 at 6e-3);
#   GaLore's best is there too (scale 2, gap 200: 4.1052 at 3e-3, 4.0663
#   at 4.5e-3, 4.0703 at 6e-3; scale 3 at 3e-3: 4.1355; session 43: gap 50
#   at 4.5e-3, 4.0537, +2.86% from AdamW's best; exact SVD 4.0512, +2.80%;
#   the dim-512 model at 4.5e-3, gap 50: AdamW 3.9673, GaLore 3.9826,
#   +0.39%). An empty value takes
#   configs/demo.toml's lr (3e-3).
#   GALORE_SCALE (2: the projected matrices step at lr x scale; at rank
#   dim/4 a back-projected update has about half the Frobenius norm of
#   AdamW's, sqrt(r/n), so 2 steps them about as far as AdamW at the same lr;
#   the GaLore paper's 0.25 goes with lr 0.01 against AdamW's 1e-3)
#   GALORE_SVD_DIM (2048; 0 skips)  GALORE_THREADS (2)
#   GALORE_OPTIMIZERS ("galore galore_exact": the GaLore runs beside AdamW,
#   randomized and exact SVD; AdamW always runs).
#   AdamW runs at configs/demo.toml's other settings; the lr and scale each
#   optimizer ran at are printed above the table.
#   The memory figures do not depend on the steps:
#   GALORE_STEPS=2 GALORE_GAP=1 measures them in seconds (the losses then
#   mean nothing).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
STEPS=${GALORE_STEPS:-500}
MODELS=${GALORE_MODELS:-debug d512}
DATA=${GALORE_DATA:-$top/data}
GAP=${GALORE_GAP:-50}
SCALE=${GALORE_SCALE:-2}
LR=${GALORE_LR-4.5e-3}
ALR=${GALORE_ADAMW_LR-4.5e-3}
OPTS="adamw $(echo "${GALORE_OPTIMIZERS:-galore galore_exact}" | sed 's/adamw//')"
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
    G="--optimizer.name=GaLore --optimizer.rank=$rank --optimizer.update_proj_gap=$GAP --optimizer.scale=$SCALE${LR:+ --optimizer.lr=$LR}"
    for o in $OPTS; do
        case $o in
        adamw) flags="${ALR:+--optimizer.lr=$ALR}" ;;
        galore) flags="$G" ;;
        galore_exact) flags="$G --optimizer.galore_svd=exact" ;;
        *) echo "galore_bench: optimizer $o: adamw, galore or galore_exact" >&2; exit 2 ;;
        esac
        run=$out/$m-$o
        # shellcheck disable=SC2086
        bin/titan-init -q configs/demo.toml "$run" $COMMON $shape $flags
        echo "galore_bench: $m $o ($STEPS steps)" >&2
        # shellcheck disable=SC2086
        bin/titan-train -q "$run" 2>"$run.log" || { tail -5 "$run.log" >&2; exit 1; }
    done
done

alr=$(sed -n 's/^lr = //p' configs/demo.toml)
src="configs/demo.toml"
[ -z "$ALR" ] || src="GALORE_ADAMW_LR, default 4.5e-3"
echo "AdamW: lr ${ALR:-$alr} ($src). GaLore: lr ${LR:-$alr} (embedding, norms, output on AdamW at it too), scale $SCALE (projected matrices at lr x $SCALE), rank dim/4, update_proj_gap $GAP, proj_type std. $STEPS steps, validation at the last."
echo
/usr/bin/python3 - "$out" "$MODELS" "$GAP" "$OPTS" <<'PY'
import json, os, sys
out, models, gap, opts = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4].split()
def load(p): return [json.loads(l) for l in open(os.path.join(out, p, "metrics.jsonl"))]
print("| model | optimizer | final val loss | vs AdamW | optimizer state (MiB) | vs AdamW's (whole model) | projected matrices' state (MiB) | vs AdamW's for them | step s (refresh) | step s (other) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m in models:
    a = load(m + "-adamw")
    a_val = [d["val_loss"] for d in a if "val_loss" in d][-1]
    a_state = a[-1]["optim_state_bytes"]
    for o in opts:
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
