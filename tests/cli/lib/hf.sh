# hf.sh - sourced after tap.sh by the CLI tests that compare titan's logits
# with Hugging Face transformers' (tests/python/hf_check.py; ckpt.sh,
# init_load.sh). Needs $ck (titan-ckpt) and $PYREF (need_pyref).
# hf_logits DESC HFDIR TOKENS CKPT [hf_check.py logits options]: titan's logits
# of CKPT for TOKENS (titan-ckpt eval) match transformers' of HFDIR (float64;
# rel < 1e-4 of max|logit|); one check, and the comparison lines as comments.
hf_logits() {
    d=$1 h=$2 t=$3 c=$4; shift 4
    if ! "$ck" eval "$c" --tokens "$t" --threads 2 > "$tmp/logits.txt" 2>"$tmp/err"; then fail "$d (titan-ckpt eval)"; return; fi
    expect 0 "" "$d" -- "$PYREF" "$top/tests/python/hf_check.py" logits "$h" "$t" "$tmp/logits.txt" "$@"
    sed 's/^/# /' "$tmp/out"
}
# far VARIANT DESC: the last hf_logits (run with --far VARIANT) showed that
# VARIANT, deliberately wrong, is far off. One check.
far() { grep -q "^far $1: .* ok$" "$tmp/out" && ok "  ... and $2 is far off (> 0.1): the check can fail" \
    || fail "  ... and $2 is far off (> 0.1): the check can fail"; }
# toks N V: N token ids below V, comma-separated
toks() { seq 0 $(($1 - 1)) | awk -v v="$2" '{ print ($1 * 37 + 11) % v }' | paste -sd, -; }
