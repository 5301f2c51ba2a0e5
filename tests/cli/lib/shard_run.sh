# shard_run.sh - sourced after tap.sh by the titan-shard CLI tests (shard.sh,
# train_tokenizer.sh): $BIN (the titan-shard under test; set BIN to test
# another), $T (tap.sh's temporary directory), run and stat_of.
BIN=${BIN:-$bin/titan-shard}
[ -x "$BIN" ] || { echo "Bail out! $BIN not built (run make)"; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$tmp
# run EXPECTED_RC ARGS...: runs titan-shard, keeps stdout/stderr in $T/out, $T/err
run() {
    want=$1; shift
    "$BIN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ "$rc" -eq "$want" ] || { echo "# exit $rc, want $want: titan-shard $*"; sed 's/^/#   /' "$T/err"; return 1; }
}
stat_of() { # stat_of DIR KEY: one value of --stats
    "$BIN" --stats "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'
}
