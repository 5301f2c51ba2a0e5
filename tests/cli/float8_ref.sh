#!/bin/sh
# The float8 training reference (tests/python/float8_reference.py): torchao's
# float8 linear (tensorwise, rowwise, rowwise_with_gw_hp; emulate=True) on the
# CPU against a from-scratch implementation of its casts and GEMMs, bit for
# bit, in fp32 and bf16, one linear and a SwiGLU FFN; then its golden files
# for titan's casts and float8 linears (build/tests/test_fp8), and 10
# training steps of a small Llama with torchao's Float8Linear against
# titan's float8 training (tests/python/float8_train_golden.py,
# build/tests/test_parity). A few seconds each; TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
ref=$top/tests/python/float8_reference.py
checks="fp8-cast tensorwise rowwise rowwise_with_gw_hp golden"

if need_pyref "float8 reference against torchao"; then
    timeout 300 "$PYREF" "$ref" --write "$tmp/golden" >"$tmp/out" 2>"$tmp/err"; rc=$?
    cat "$tmp/out" >>"$tmp/err"
    if [ $rc -eq 77 ] && [ "${TITAN_REQUIRE_PY:-0}" = 1 ]; then
        fail "float8 reference: torch/torchao not importable by $PYREF"
    elif [ $rc -eq 77 ]; then
        for c in $checks; do skip "float8 $c" "torch/torchao not importable by $PYREF"; done
    else
        for c in $checks; do
            line=$(grep "^RESULT $c " "$tmp/out")
            case $line in
            "RESULT $c ok "*) ok "float8 $c: ${line#RESULT "$c" ok }" ;;
            "") fail "float8 $c: no result (exit $rc)" ;;
            *) fail "float8 $c: ${line#RESULT "$c" }" ;;
            esac
        done
        # the index names every file with its shape; each holds exactly that
        "$PYREF" - "$tmp/golden" >"$tmp/err" 2>&1 <<'EOF' && ok "float8 golden index.json: every file present, sizes match shapes" || fail "float8 golden index.json: every file present, sizes match shapes"
import json, os, sys
d = sys.argv[1]
ix = json.load(open(os.path.join(d, "index.json")))
seen = 0
def walk(o):
    global seen
    if isinstance(o, dict):
        if "file" in o and "shape" in o:
            n = 1
            for s in o["shape"]: n *= s
            size = os.path.getsize(os.path.join(d, o["file"]))
            assert size == n * (4 if o["type"] == "float32" else 1), (o, size)
            seen += 1
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(ix)
assert [c["name"] for c in ix["cases"]] == ["f32", "bf16"]
assert all(sorted(c["recipes"]) == ["rowwise", "rowwise_with_gw_hp", "tensorwise"] for c in ix["cases"])
assert seen == 88, seen
EOF
        [ $rc -eq 0 ] && ok "float8_reference.py exits 0" || fail "float8_reference.py exits 0 (exit $rc)"
        # titan's casts and float8 linears (lib/tensor/fp8.c, the CPU
        # backend's fp8_matmul_*) against these golden files: every fp8 byte
        # and scale bitwise, the GEMMs within the index's tolerance
        prog=${TITAN_BUILD:-$top/build}/tests/test_fp8
        if [ -x "$prog" ]; then
            "$prog" "$tmp/golden" >"$tmp/out" 2>"$tmp/err"; frc=$?
            cat "$tmp/out" >>"$tmp/err"
            grep "^ok   torchao golden\|^FAIL torchao golden" "$tmp/out" | while IFS= read -r line; do echo "# $line"; done
            [ $frc -eq 0 ] && [ "$(grep -c '^ok   torchao golden' "$tmp/out")" = 6 ] &&
                ok "titan's float8 casts and linears match torchao's golden files (6 cases)" ||
                fail "titan's float8 casts and linears match torchao's golden files (exit $frc)"
        else
            fail "titan's float8 casts and linears match torchao's golden files ($prog not built)"
        fi
        # training: the PyTorch Llama with torchao's Float8Linear (each
        # recipe, fp32) against titan's float8 training, 10 AdamW steps
        # (tests/unit/test_parity.c states the tolerances)
        par=${TITAN_BUILD:-$top/build}/tests/test_parity
        if timeout 300 "$PYREF" "$top/tests/python/float8_train_golden.py" "$tmp/f8train" >"$tmp/out" 2>"$tmp/err" &&
            "$par" "$tmp/f8train" >"$tmp/par" 2>>"$tmp/err"; then
            sed 's/^/# /' "$tmp/out"
            grep "float8 \|steps: \|grads max" "$tmp/par" | grep -v ac=full | sed 's/^/# /'
            ok "titan's float8 training matches torchao's Float8Linear in PyTorch (3 recipes, 10 steps)"
        else
            cat "$tmp/par" >>"$tmp/err" 2>/dev/null
            fail "titan's float8 training matches torchao's Float8Linear in PyTorch (3 recipes, 10 steps)"
        fi
    fi
fi
tap_end
