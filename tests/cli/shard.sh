#!/bin/sh
# tests/cli/shard.sh - titan-shard end to end: every input kind, --stats, the
# refusals, and the exit codes of titan-shard(1). Run from the repository root
# after `make`. Prints TAP; exits non-zero when a test fails.
set -u
BIN=${BIN:-bin/titan-shard}
[ -x "$BIN" ] || { echo "Bail out! $BIN not built (run make)"; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
CORPUS=${TITAN_CORPUS:-$(pwd)/.deps/nlp-corpus-4.4.0.tgz}

T=$(mktemp -d "${TMPDIR:-/tmp}/titan-cli-shard.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { # check DESCRIPTION COMMAND...: passes when the command succeeds
    d=$1; shift
    if "$@"; then ok "$d"; else not_ok "$d"; fi
}
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
stats_are() { # stats_are DIR DOCS TOKENS
    [ "$(stat_of "$1" documents)" = "$2" ] && [ "$(stat_of "$1" tokens)" = "$3" ] &&
        [ "$(stat_of "$1" checksums)" = ok ] ||
        { echo "# $1: $("$BIN" --stats "$1" 2>&1 | tr '\n' ' '), want $2 documents, $3 tokens"; return 1; }
}
empty_stdout() { [ ! -s "$T/out" ] || { echo "# unexpected stdout:"; sed 's/^/#   /' "$T/out"; return 1; }; }

# ---- inputs ----
mkdir -p "$T/src/sub"
printf 'The quick brown fox.\nJumps over the lazy dog.\n' >"$T/src/a.txt"         # 46 bytes
printf '["one", "two two", "three three three"]\n' >"$T/src/b.json"                # 3 docs, 3+7+17 bytes
printf '{"text": "first line"}\n\n{"text": "second", "id": 2}\n' >"$T/src/c.jsonl"  # 2 docs, 10+6 bytes
printf '# Title\n\nSome *markdown*.\n' >"$T/src/sub/d.md"                          # 26 bytes
printf 'bin\000ary' >"$T/src/sub/e.dat"                                            # skipped: binary
printf 'console.log(1);\n' >"$T/src/f.js"                                          # skipped: program
printf '{"name": "x"}\n' >"$T/src/package.json"                                     # skipped: not strings
DOCS=7
TOKENS=$((46 + 3 + 7 + 17 + 10 + 6 + 26 + 2 * DOCS))

# ---- one input of each kind ----
check "plain text file" run 0 "$T/src/a.txt" -o "$T/txt"
check "plain text: stdout stays empty" empty_stdout
check "plain text: --stats counts" stats_are "$T/txt" 1 48
check "plain text: summary line on stderr" grep -q '1 documents, 48 tokens' "$T/err"

(cd "$T/src" && tar czf "$T/in.tar.gz" a.txt b.json c.jsonl sub f.js package.json)
check ".tar.gz archive" run 0 "$T/in.tar.gz" -o "$T/tgz"
check ".tar.gz: documents and tokens" stats_are "$T/tgz" $DOCS $TOKENS

check "directory input" run 0 "$T/src" -o "$T/dir"
check "directory: same documents as the archive" stats_are "$T/dir" $DOCS $TOKENS

if command -v zip >/dev/null 2>&1; then
    (cd "$T/src" && zip -qr "$T/in.zip" a.txt b.json c.jsonl sub f.js package.json)
    check ".zip archive" run 0 "$T/in.zip" -o "$T/zip"
    check ".zip: documents and tokens" stats_are "$T/zip" $DOCS $TOKENS
else
    ok "# SKIP .zip archive (no zip)"
    ok "# SKIP .zip: documents and tokens (no zip)"
fi

zstd -q -c "$T/src/a.txt" >"$T/a.txt.zst"
check ".zst compressed text" run 0 "$T/a.txt.zst" -o "$T/zst"
check ".zst: same tokens as the plain file" stats_are "$T/zst" 1 48

printf '{"body": "from gzip"}\n{"body": "jsonl"}\n' | gzip -c >"$T/g.jsonl.gz"
check ".jsonl.gz with --field" run 0 --field body "$T/g.jsonl.gz" -o "$T/gz"
check ".jsonl.gz: one document per line" stats_are "$T/gz" 2 $((9 + 5 + 4))

check "stdin (-)" sh -c "printf 'from stdin' | '$BIN' -q - -o '$T/stdin'"
check "stdin: documents and tokens" stats_are "$T/stdin" 1 12
check "stdin as JSON Lines (--stdin-name)" sh -c "gzip -dc '$T/g.jsonl.gz' | '$BIN' -q --field body --stdin-name x.jsonl - -o '$T/stdin2'"
check "stdin as JSON Lines: one document per line" stats_are "$T/stdin2" 2 $((9 + 5 + 4))

check "several inputs" run 0 -q "$T/src/a.txt" "$T/in.tar.gz" -o "$T/multi"
check "several inputs: totals add up" stats_are "$T/multi" $((DOCS + 1)) $((TOKENS + 48))
check "-q: no summary" sh -c "[ ! -s '$T/err' ]"

# ---- determinism, shard size, overwrite rules ----
check "same input twice" run 0 -q "$T/in.tar.gz" -o "$T/tgz2"
check "same input twice: identical files" sh -c "cmp -s '$T/tgz/index.json' '$T/tgz2/index.json' &&
    cmp -s '$T/tgz/shard-00000.bin' '$T/tgz2/shard-00000.bin'"
check "--shard-tokens splits files" run 0 -q --shard-tokens 40 "$T/in.tar.gz" -o "$T/small"
check "--shard-tokens: $(((TOKENS + 39) / 40)) files" sh -c "[ \"\$('$BIN' --stats '$T/small' | grep '^shards:')\" = 'shards: $(((TOKENS + 39) / 40))' ]"
check "--shard-tokens: same totals" stats_are "$T/small" $DOCS $TOKENS
check "existing shard dir refused without --force (exit 2)" run 2 "$T/src/a.txt" -o "$T/small"
check "existing shard dir: hint names --force" grep -q -- '--force' "$T/err"
check "--force replaces a shard dir" run 0 -q --force "$T/src/a.txt" -o "$T/small"
check "--force: stale shard files removed" sh -c "[ ! -e '$T/small/shard-00001.bin' ]"
check "--force: new contents" stats_are "$T/small" 1 48
mkdir "$T/busy"; echo keep >"$T/busy/notes.txt"
check "non-empty other dir refused even with --force (exit 2)" run 2 --force "$T/src/a.txt" -o "$T/busy"
check "non-empty other dir: left untouched" sh -c "[ \"\$(ls '$T/busy')\" = notes.txt ]"

# ---- errors ----
check "missing input (exit 3)" run 3 "$T/nosuch.txt" -o "$T/miss"
check "missing input: message names the file" grep -q 'nosuch.txt' "$T/err"
check "missing input: no output made" sh -c "[ ! -e '$T/miss' ]"
cp -r "$T/tgz" "$T/corrupt"
printf 'X' | dd of="$T/corrupt/shard-00000.bin" bs=1 seek=70 conv=notrunc 2>/dev/null
check "corrupt shard given to --stats (exit 4)" run 4 --stats "$T/corrupt"
check "corrupt shard: message names file and byte" grep -q 'shard-00000.bin: byte 64: payload checksum mismatch' "$T/err"
check "--stats on a missing dir (exit 3)" run 3 --stats "$T/nodir"
check "--stats on a missing dir: hint" grep -q 'hint: run titan-shard' "$T/err"
check "bad option (exit 2)" run 2 --bogus "$T/src/a.txt" -o "$T/bad"
check "bad option: named on stderr" grep -q 'bogus' "$T/err"
check "no -o (exit 2)" run 2 "$T/src/a.txt"
check "bad --shard-tokens (exit 2)" run 2 --shard-tokens 12x "$T/src/a.txt" -o "$T/bad"
check "unknown tokenizer (exit 2) lists choices" sh -c "'$BIN' --tokenizer nope '$T/src/a.txt' -o '$T/bad' 2>&1 | grep -q 'choices: byte'; [ \$? -eq 0 ] && [ ! -e '$T/bad' ]"
check "only skipped sources (exit 4)" run 4 "$T/src/sub/e.dat" -o "$T/none"
check "only skipped sources: no output made" sh -c "[ ! -e '$T/none' ]"
printf '{"title": "x"}\n' >"$T/nofield.jsonl"
check "jsonl without the field (exit 4)" run 4 "$T/nofield.jsonl" -o "$T/nof"
check "jsonl without the field: line named, hint --field" sh -c "grep -q 'nofield.jsonl: line 1' '$T/err' && grep -q -- '--field' '$T/err'"
printf '["unterminated' >"$T/broken.json"
check "broken JSON (exit 4)" run 4 "$T/broken.json" -o "$T/broken"
head -c 200 "$T/in.tar.gz" >"$T/cut.tar.gz"
check "truncated archive (exit 4)" run 4 "$T/cut.tar.gz" -o "$T/cut"
check "truncated archive: no output made" sh -c "[ ! -e '$T/cut' ]"
check "--help (exit 0, stdout)" sh -c "'$BIN' --help | grep -q 'usage: titan-shard'"
check "--version (exit 0)" sh -c "'$BIN' --version | grep -q '^titan-shard '"

# ---- the demo corpus (npm nlp-corpus: 100 builds/doc-N.json of 1000 sentences) ----
if [ -s "$CORPUS" ]; then
    check "demo corpus" run 0 "$CORPUS" -o "$T/corpus"
    docs=$(stat_of "$T/corpus" documents)
    tokens=$(stat_of "$T/corpus" tokens)
    check "demo corpus: ~100 json files of sentences ($docs documents)" sh -c "[ '${docs:-0}' -ge 100000 ] && [ '${tokens:-0}' -gt 8000000 ]"
    echo "# demo corpus: $(sed 's/^titan-shard: //' "$T/err" | head -1)"
else
    ok "# SKIP demo corpus ($CORPUS absent; scripts/install-deps.sh fetches it)"
    ok "# SKIP demo corpus counts"
fi

echo "1..$n"
[ "$fails" -eq 0 ]
