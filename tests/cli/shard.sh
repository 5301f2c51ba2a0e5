#!/bin/sh
# tests/cli/shard.sh - titan-shard end to end: every input kind, --stats, the
# refusals, and the exit codes of titan-shard(1). Run from the repository root
# after `make`. Prints TAP; exits non-zero when a test fails.
set -u
. "$(dirname "$0")/lib/tap.sh"
. "$(dirname "$0")/lib/shard_run.sh"
CORPUS=${TITAN_CORPUS:-$(pwd)/.deps/man-pages-6.03}
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
check "corrupt shard given to --stats (exit 7)" run 7 --stats "$T/corrupt"
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
# A FIFO (or socket, device) inside an input directory could block forever:
# skipped with a note. One named on the command line is read like a stream.
mkdir -p "$T/fifo"; printf 'a plain doc\n' >"$T/fifo/a.txt"; mkfifo "$T/fifo/p"
check "FIFO in an input dir: skipped, no hang" sh -c "timeout 20 '$BIN' '$T/fifo' -o '$T/fifo-out' 2>'$T/err'"
check "FIFO in an input dir: the note names it" grep -q 'fifo/p: skipped: a FIFO, not a regular file' "$T/err"
check "FIFO in an input dir: the rest is sharded" stats_are "$T/fifo-out" 1 14
check "FIFO named on the command line is read" sh -c "timeout 20 sh -c \"printf 'through the fifo' >'$T/fifo/p'\" &
    timeout 20 '$BIN' -q '$T/fifo/p' -o '$T/fifo-named'"
check "FIFO named on the command line: its document" stats_are "$T/fifo-named" 1 18
check "--split N with a FIFO input (exit 2, not read twice)" sh -c "timeout 20 '$BIN' --split 1 '$T/fifo/p' '$T/fifo/a.txt' \
    -o '$T/fifo-split' 2>'$T/err'; [ \$? -eq 2 ] && grep -q 'not a regular file' '$T/err'"
check "--help (exit 0, stdout)" sh -c "'$BIN' --help | grep -q 'usage: titan-shard'"
check "--version (exit 0)" sh -c "'$BIN' --version | grep -q '^titan-shard '"

# ---- threads: the same shards for any -j ----
same_dirs() { # same_dirs A B: the same file names, byte-identical files
    [ -d "$1" ] && [ "$(ls "$1")" = "$(ls "$2")" ] || { echo "# $1 and $2 hold different files"; return 1; }
    for f in "$1"/*; do cmp -s "$f" "$2/${f##*/}" || { echo "# ${f##*/} differs"; return 1; }; done
}
# ~1.3 MB of JSON Lines: several 512 KiB batches of the tokenizing pipeline
awk 'BEGIN { for (i = 0; i < 4000; i++) { s = ""; n = 20 + (i * 7919) % 80
    for (k = 0; k < n; k++) s = s sprintf("w%d ", (i * k) % 997); printf "{\"text\": \"%sline %d\"}\n", s, i } }' >"$T/big.jsonl"
BIG=4000
check "-j 1" run 0 -q -j 1 --shard-tokens 100K "$T/big.jsonl" "$T/in.tar.gz" -o "$T/j1"
check "-j 3" run 0 -q -j 3 --shard-tokens 100K "$T/big.jsonl" "$T/in.tar.gz" -o "$T/j3"
check "--threads 2" run 0 -q --threads 2 --shard-tokens 100K "$T/big.jsonl" "$T/in.tar.gz" -o "$T/j2"
check "-j 1 and 3 identical" same_dirs "$T/j1" "$T/j3"
check "-j 1 and 2 identical" same_dirs "$T/j1" "$T/j2"
check "-j 1 and 3: several shard files" [ -e "$T/j3/shard-00003.bin" ]
check "-j 0: all online CPUs" run 0 -j 0 "$T/src/a.txt" -o "$T/j0"
if command -v nproc >/dev/null 2>&1; then
    check "-j 0: the summary names $(nproc) thread(s)" grep -q "MB/s, $(nproc) thread" "$T/err"
else
    ok "# SKIP -j 0 thread count (no nproc)"
fi
check "-j x (exit 2)" run 2 -j x "$T/src/a.txt" -o "$T/bad"
check "-j 5000 (exit 2)" run 2 -j 5000 "$T/src/a.txt" -o "$T/bad"
TT=$(pwd)/build/tokenizer/cl100k_base.tiktoken
if [ -s "$TT" ]; then
    check "BPE tokenizer, -j 1" run 0 -q -j 1 --tokenizer "tiktoken:$TT" --shard-tokens 64K "$T/big.jsonl" -o "$T/bpe1"
    check "BPE tokenizer, -j 4" run 0 -q -j 4 --tokenizer "tiktoken:$TT" --shard-tokens 64K "$T/big.jsonl" -o "$T/bpe4"
    check "BPE tokenizer: -j 1 and 4 identical" same_dirs "$T/bpe1" "$T/bpe4"
else
    for d in "-j 1" "-j 4" "identical"; do ok "# SKIP BPE tokenizer $d (sh tests/tokenizer/prepare.sh makes $TT)"; done
fi

# ---- the same input twice: the same bytes, for every input kind ----
check "plain text twice" run 0 -q "$T/src/a.txt" -o "$T/twice-a"
check "plain text twice: identical" same_dirs "$T/txt" "$T/twice-a"
check "stdin twice" sh -c "printf 'from stdin' | '$BIN' -q - -o '$T/twice-stdin'"
check "stdin twice: identical" same_dirs "$T/stdin" "$T/twice-stdin"
check "--field twice" run 0 -q --field body "$T/g.jsonl.gz" -o "$T/twice-gz"
check "--field twice: identical" same_dirs "$T/gz" "$T/twice-gz"
check "--field on stdin, -j 1" sh -c "gzip -dc '$T/g.jsonl.gz' | '$BIN' -q -j 1 --field body --stdin-name x.jsonl - -o '$T/twice-stdin2'"
check "--field on stdin: identical to -j 2" same_dirs "$T/stdin2" "$T/twice-stdin2"

# ---- --split: a validation directory beside the training one ----
check "--split 0.25" run 0 --split 0.25 "$T/big.jsonl" -o "$T/sp"
va=$(stat_of "$T/sp-val" documents)
check "--split: summary line names DIR-val" grep -q "validation: $va documents.*sp-val" "$T/err"
check "--split: DIR verifies" run 0 --stats "$T/sp"
check "--split: DIR-val verifies" run 0 --stats "$T/sp-val"
tr=$(stat_of "$T/sp" documents); va=$(stat_of "$T/sp-val" documents)
check "--split: the parts add up ($tr + $va = $BIG)" [ $((${tr:-0} + ${va:-0})) -eq $BIG ]
check "--split 0.25: about a quarter held out ($va)" [ "${va:-0}" -gt 850 -a "${va:-0}" -lt 1150 ]
check "--split, -j 1" run 0 -q -j 1 --split 0.25 "$T/big.jsonl" -o "$T/sp1/"
check "--split, -j 1: same training part" same_dirs "$T/sp" "$T/sp1"
check "--split, -j 1: same validation part" same_dirs "$T/sp-val" "$T/sp1-val"
check "--split 25%" run 0 -q --split 25% "$T/big.jsonl" -o "$T/sp25"
check "--split 25%: the same as 0.25" same_dirs "$T/sp-val" "$T/sp25-val"
check "--seed 5" run 0 -q --seed 5 --split 0.25 "$T/big.jsonl" -o "$T/sp5"
check "--seed 5: other documents held out" sh -c "! cmp -s '$T/sp-val/shard-00000.bin' '$T/sp5-val/shard-00000.bin'"
check "--split 10 --val-output" run 0 -q --split 10 --val-output "$T/ten" "$T/big.jsonl" -o "$T/sp10"
check "--split 10: exactly 10 held out" [ "$(stat_of "$T/ten" documents)" = 10 ]
check "--split 10: the rest trains" [ "$(stat_of "$T/sp10" documents)" = $((BIG - 10)) ]
check "--val-output: no DIR-val made" [ ! -e "$T/sp10-val" ]
check "--split 10, -j 3: the same choice" run 0 -q -j 3 --split 10 --val-output "$T/ten3" "$T/big.jsonl" -o "$T/sp10j3"
check "--split 10, -j 3: identical" same_dirs "$T/ten" "$T/ten3"
check "--split fraction on stdin" sh -c "'$BIN' -q --stdin-name x.jsonl --split 0.1 - -o '$T/spin' <'$T/big.jsonl'"
check "--split on stdin: both parts verify" sh -c "'$BIN' --stats '$T/spin' >/dev/null && '$BIN' --stats '$T/spin-val' >/dev/null"
check "--split N on stdin (exit 2)" sh -c "'$BIN' --split 10 - -o '$T/spin2' <'$T/big.jsonl' 2>'$T/err'; [ \$? -eq 2 ] && grep -q 'give a fraction' '$T/err'"
check "--split 0 (exit 2)" run 2 --split 0 "$T/big.jsonl" -o "$T/bad"
check "--split 1.5 (exit 2)" run 2 --split 1.5 "$T/big.jsonl" -o "$T/bad"
check "--val-output without --split (exit 2)" run 2 --val-output "$T/v" "$T/big.jsonl" -o "$T/bad"
check "--val-output the same as -o (exit 2)" run 2 --split 0.1 --val-output "$T/same/" "$T/big.jsonl" -o "$T/same"
check "--split $BIG of $BIG documents (exit 2)" run 2 --split $BIG "$T/big.jsonl" -o "$T/all"
check "--split too many: message and no output" sh -c "grep -q 'at least one must stay' '$T/err' && [ ! -e '$T/all' ] && [ ! -e '$T/all-val' ]"
check "--split 0.001 of one document (exit 2)" run 2 --split 0.001 "$T/src/a.txt" -o "$T/one"
check "--split with an empty part: no output" sh -c "[ ! -e '$T/one' ] && [ ! -e '$T/one-val' ]"
mkdir -p "$T/busyv-val"; echo keep >"$T/busyv-val/notes.txt"
check "--split into an occupied DIR-val (exit 2)" run 2 --split 0.1 "$T/big.jsonl" -o "$T/busyv"
check "--split into an occupied DIR-val: no DIR left" [ ! -e "$T/busyv" ]
check "-o . with --split and no --val-output (exit 2)" sh -c "cd '$T/src' && '$BIN' --split 0.1 a.txt -o . 2>/dev/null; [ \$? -eq 2 ]"

# ---- the progress line ----
slow_input() { # a named pipe that gives two JSON Lines documents over ~1 s
    rm -f "$T/slow.jsonl"; mkfifo "$T/slow.jsonl" || return 1
    ( sleep 0.5; printf '{"text": "one"}\n'; sleep 0.6; printf '{"text": "two"}\n' ) >"$T/slow.jsonl" &
}
if command -v mkfifo >/dev/null 2>&1 && script -qc true /dev/null >/dev/null 2>&1; then
    slow_input && script -qc "'$BIN' '$T/slow.jsonl' -o '$T/prog'" /dev/null >"$T/tty" 2>&1
    check "progress line on a terminal" sh -c "grep -q 'MB read, 0 docs' '$T/tty' && grep -q \"\$(printf '\\r')\" '$T/tty'"
    check "progress line: blanked before the summary" sh -c "tr '\\r' '\\n' <'$T/tty' | grep -q '^titan-shard: 2 documents'"
    slow_input && script -qc "'$BIN' -q '$T/slow.jsonl' -o '$T/prog-q'" /dev/null >"$T/tty" 2>&1
    check "-q: no progress line" [ ! -s "$T/tty" ]
    slow_input && "$BIN" "$T/slow.jsonl" -o "$T/prog-file" 2>"$T/err"
    check "stderr not a terminal: no progress line" sh -c "! grep -q \"\$(printf '\\r')\" '$T/err' && grep -q '2 documents' '$T/err'"
else
    for d in "terminal" "blanked" "-q" "not a terminal"; do ok "# SKIP progress line: $d (no script(1) or mkfifo)"; done
fi

# ---- bad input: binary entries, damaged shard directories ----
check "-v: a binary archive entry is skipped by name" run 0 -v "$T/in.tar.gz" -o "$T/verbose"
check "-v: the message names the entry" grep -q 'in.tar.gz:sub/e.dat: skipped: binary' "$T/err"
check "without -v: the skip is counted" sh -c "'$BIN' '$T/in.tar.gz' -o '$T/quiet-skip' 2>&1 | grep -q '3 sources skipped (see -v)'"
cp -r "$T/tgz" "$T/trunc" && truncate -s 100 "$T/trunc/shard-00000.bin"
check "truncated shard given to --stats (exit 7)" run 7 --stats "$T/trunc"
check "truncated shard: file and byte named" grep -q 'shard-00000.bin: byte 100: truncated' "$T/err"
cp -r "$T/tgz" "$T/foreign" && cp "$T/big.jsonl" "$T/foreign/shard-00000.bin"
check "foreign file as a shard (exit 4)" run 4 --stats "$T/foreign"
check "foreign file: bad magic at byte 0" grep -q 'shard-00000.bin: byte 0: bad magic' "$T/err"
printf '{"format": "titan-shard", "version": 1' >"$T/foreign/index.json"
check "cut index.json (exit 4)" run 4 --stats "$T/foreign"
check "cut index.json: line and column named" grep -q 'index.json: line 1 column' "$T/err"

# ---- the demo corpus (scripts/corpus.sh: Debian's man-pages 6.03 as text, a file a page) ----
if [ -f "$CORPUS.done" ]; then
    check "demo corpus" run 0 "$CORPUS" -o "$T/corpus"
    docs=$(stat_of "$T/corpus" documents)
    tokens=$(stat_of "$T/corpus" tokens)
    pages=$(find "$CORPUS" -name '*.txt' | wc -l)
    check "demo corpus: a document per page ($docs of $pages), ~6 MB of bytes ($tokens tokens)" \
        sh -c "[ '${docs:-0}' -eq $pages ] && [ $pages -ge 1000 ] && [ '${tokens:-0}' -gt 6000000 ]"
    echo "# demo corpus: $(sed 's/^titan-shard: //' "$T/err" | head -1)"
else
    ok "# SKIP demo corpus ($CORPUS absent; scripts/corpus.sh makes it)"
    ok "# SKIP demo corpus counts"
fi

tap_end
