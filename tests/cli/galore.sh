#!/bin/sh
# GaLore against its reference implementation: tests/python/galore_reference.py
# runs galore-torch (PyPI, pinned in tests/python/requirements.in) for 40
# steps on five matrices (std, reverse_std, left, right; refreshes every 3-5
# steps, exact SVD) and writes goldens; build/tests/test_galore replays them
# through titan's optimizer (1e-5), beside its projection and SVD checks.
set -u
. "$(dirname "$0")/lib/tap.sh"
unit=$top/build/tests/test_galore

if need_pyref "GaLore goldens from galore-torch"; then
    timeout 300 "$PYREF" "$top/tests/python/galore_reference.py" "$tmp/galore.bin" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -eq 77 ] && [ "${TITAN_REQUIRE_PY:-0}" != 1 ]; then
        skip "GaLore goldens" "torch/galore_torch not importable by $PYREF"
    elif [ $rc -ne 0 ]; then
        fail "GaLore goldens: galore_reference.py exit $rc: $(tail -1 "$tmp/err")"
    else
        ok "GaLore goldens written by galore-torch"
        if TITAN_GALORE_GOLDEN=$tmp/galore.bin "$unit" >"$tmp/out" 2>"$tmp/err"; then
            ok "titan's GaLore equals galore-torch to 1e-5 for 40 steps, 8-14 refreshes ($(grep -c '^galore-torch case' "$tmp/out") cases)"
        else
            fail "titan's GaLore against galore-torch: $(head -3 "$tmp/err")"
        fi
    fi
fi
tap_end
