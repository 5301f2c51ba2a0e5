# tap.sh - sourced by the CLI test scripts (tests/cli/*.sh; not a test
# itself): TAP counters and the checks they share. Gives $top (the
# repository), $bin (the tools: $TITAN_BIN, else bin/; make check-asan
# points it at bin-asan/), $tmp (a directory removed on exit), ok/fail/skip
# DESCRIPTION, check, expect, shard_man_corpus (below) and tap_end.
#   EXPECT_TIMEOUT=S   bound every expect'ed command to S seconds
#   EXPECT_OUTPUT=1    expect's PATTERN may also be in stdout
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${TITAN_BIN:-$top/bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0; bad=0
ok()   { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - $1"; [ -f "$tmp/err" ] && tail -n 40 "$tmp/err" | sed 's/^/#   /'; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds
check() { d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
# expect CODE PATTERN DESCRIPTION -- command...: exit status CODE, and
# PATTERN (if not empty) in its stderr. Output lands in $tmp/out, $tmp/err.
expect() {
    code=$1; pat=$2; desc=$3; shift 4
    if [ -n "${EXPECT_TIMEOUT:-}" ]; then
        timeout "$EXPECT_TIMEOUT" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    else
        "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    fi
    [ "${EXPECT_OUTPUT:-0}" = 1 ] && cat "$tmp/out" >>"$tmp/err"
    if [ $rc -ne "$code" ]; then fail "$desc (exit $rc, want $code)"; return; fi
    if [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/err"; then fail "$desc (output lacks '$pat')"; return; fi
    ok "$desc"
}
# shard_man_corpus [SECTIONS]: the small corpus the training tests share,
# the text of the man pages of SECTIONS (a glob; default [157]), sharded
# with the byte tokenizer into $tmp/data (the text stays in
# $tmp/corpus.txt). One check.
shard_man_corpus() {
    cat "$top"/man/*.${1:-[157]} > "$tmp/corpus.txt"
    "$bin/titan-shard" -q -o "$tmp/data" "$tmp/corpus.txt" 2>"$tmp/err" && ok "shard corpus" || fail "shard corpus"
}
# The pinned Python references (scripts/pyenv.sh: torch, transformers,
# tokenizers, tiktoken, gguf ...): $PYREF is build/venv's python, or empty
# where it is not made. need_pyref DESCRIPTION: true when it is there; else
# a skip, or a failure under TITAN_REQUIRE_PY=1 (CI sets it: there every
# reference check must run, but llama.cpp's, whose wheel CI does not build:
# tests/gguf/prepare.sh).
PYREF=${TITAN_PY-$("$top/scripts/pyenv.sh" --check 2>/dev/null)} || PYREF=""
need_pyref() {
    [ -n "$PYREF" ] && return 0
    if [ "${TITAN_REQUIRE_PY:-0}" = 1 ]; then fail "$1 (the Python references are not installed: scripts/pyenv.sh)"
    else skip "$1" "the Python references are not installed (scripts/pyenv.sh)"; fi
    return 1
}
# Prints the plan line; the script's exit status says whether all passed.
tap_end() { echo "1..$n"; [ $bad -eq 0 ]; }
