#!/bin/sh
# tests/cli/train_tokenizer.sh - titan-shard --train-tokenizer N end to end:
# learn a vocabulary from a small corpus, shard with it (tiktoken:FILE), and
# decode the shards back to the same documents as byte-level shards hold;
# tiktoken (build/venv) reads the learnt file, writes it back identical and
# encodes the documents to the shards' ids; the refusals and exit codes of
# titan-shard(1). Run from the repository root after `make`. Prints TAP;
# exits non-zero when a test fails.
set -u
. "$(dirname "$0")/lib/tap.sh"
. "$(dirname "$0")/lib/shard_run.sh"
PY=/usr/bin/python3
lines() { wc -l <"$1" | tr -d ' '; }

# ---- a small corpus: the man pages and README as text, a JSON Lines file
# with other scripts, and invalid UTF-8 ----
mkdir -p "$T/src"
for f in man/*.1 man/*.5 README.md; do [ -f "$f" ] && cp "$f" "$T/src/"; done
printf '{"text": "caf\\u00e9 na\\u00efve \\u65e5\\u672c\\u8a9e \\u043f\\u0440\\u0438\\u0432\\u0435\\u0442 123456 \\ud83d\\ude00"}\n{"text": "tabs\\tand\\r\\nnewlines  "}\n' >"$T/src/other.jsonl"
printf 'bytes \377\376 not UTF-8 \300\257 end\n' >"$T/src/bad-utf8.txt"

check "--train-tokenizer 600" run 0 --train-tokenizer 600 -o "$T/tok.tiktoken" "$T/src"
check "stdout stays empty" sh -c "[ ! -s '$T/out' ]"
check "summary line on stderr" grep -q 'documents, .* MB of text, .* distinct pre-tokens, 344 merges: 600 tokens (+256 special)' "$T/err"
check "600 lines, ranks 0..599" sh -c "[ $(lines "$T/tok.tiktoken") = 600 ] && tail -n 1 '$T/tok.tiktoken' | grep -q ' 599\$'"
check "the 256 bytes first, in byte order" sh -c "head -n 1 '$T/tok.tiktoken' | grep -qx 'AA== 0' && sed -n 66p '$T/tok.tiktoken' | grep -qx 'QQ== 65'"
check "no .tmp left" [ ! -e "$T/tok.tiktoken.tmp" ]
check "the same input again: the same file" run 0 -q -f --train-tokenizer 600 -o "$T/tok2.tiktoken" "$T/src"
check "the same input again: identical" cmp -s "$T/tok.tiktoken" "$T/tok2.tiktoken"
check "-j 1" run 0 -q -j 1 --train-tokenizer 600 -o "$T/tok-j1.tiktoken" "$T/src"
check "-j 3" run 0 -q -j 3 --train-tokenizer 600 -o "$T/tok-j3.tiktoken" "$T/src"
check "-j 1 and 3: identical" sh -c "cmp -s '$T/tok.tiktoken' '$T/tok-j1.tiktoken' && cmp -s '$T/tok.tiktoken' '$T/tok-j3.tiktoken'"
# 20 kB of text cannot make 4096 tokens (the whole corpus, which grows with
# the man pages and README, now can): the warning then names the target
head -c 20000 "$top/README.md" >"$T/small.txt"
check "4K means 4096" run 0 -q --train-tokenizer 4K -o "$T/tok4k.tiktoken" "$T/small.txt"
check "4K: stops early on a small corpus, with a warning" grep -q 'stopped at .* of 4096 tokens' "$T/err"

# ---- shard with it and decode back ----
check "shard with tiktoken:FILE" run 0 --tokenizer "tiktoken:$T/tok.tiktoken" "$T/src" -o "$T/sh"
check "--stats: vocabulary 600 + 256 specials" [ "$(stat_of "$T/sh" vocab)" = 856 ]
check "shard with the byte tokenizer" run 0 -q "$T/src" -o "$T/sb"
check "same documents" [ "$(stat_of "$T/sh" documents)" = "$(stat_of "$T/sb" documents)" ]
check "fewer tokens than bytes ($(stat_of "$T/sh" tokens) < $(stat_of "$T/sb" tokens))" \
    [ "$(stat_of "$T/sh" tokens)" -lt "$(stat_of "$T/sb" tokens)" ]
# decode.py DIR [TIKTOKEN]: the documents of a shard directory, each as hex on one line
cat >"$T/decode.py" <<'EOF'
import base64, json, os, struct, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
ids = []
for s in idx["shards"]:
    raw = open(os.path.join(d, s["file"]), "rb").read()
    ids += struct.unpack("<%dI" % ((len(raw) - 64) // 4), raw[64:])
vocab = {i: bytes([i]) for i in range(256)}
if len(sys.argv) > 2:
    vocab = {int(r): base64.b64decode(b) for b, r in (l.split() for l in open(sys.argv[2]))}
doc = None
for i in ids:
    if i == idx["bos"]:
        assert doc is None, "bos inside a document"
        doc = b""
    elif i == idx["eos"]:
        print(doc.hex())
        doc = None
    else:
        doc += vocab[i]
assert doc is None, "document not closed"
EOF
if [ -x "$PY" ]; then
    check "decode: the BPE shards hold the byte shards' documents" sh -c "
        $PY '$T/decode.py' '$T/sh' '$T/tok.tiktoken' >'$T/docs-bpe' && $PY '$T/decode.py' '$T/sb' >'$T/docs-byte' &&
        [ -s '$T/docs-byte' ] && cmp -s '$T/docs-bpe' '$T/docs-byte'"
else
    ok "# SKIP decode round trip ($PY missing)"
fi
# tiktoken_check.py MODE TOKDIR BPE_DIR BYTE_DIR TIKTOKEN: the learnt file through
# tiktoken's own code (build/venv). MODE dump: tiktoken reads it
# (load_tiktoken_bpe) and writes it again (dump_tiktoken_bpe) byte for byte.
# MODE ids: tiktoken.Encoding with Llama 3's pattern (as Llama 3's
# tokenizer.py builds it) encodes each document of the byte shards to the
# ids of the same document in the BPE shards (documents that are not UTF-8,
# which tiktoken cannot take as text, are counted apart).
cat >"$T/tiktoken_check.py" <<'EOF'
import json, os, struct, sys
mode, tokdir, bpe_dir, byte_dir, path = sys.argv[1:6]
os.environ["TIKTOKEN_CACHE_DIR"] = ""
sys.path.insert(0, tokdir)
import tiktoken, tiktoken.load
from gen_reference import LLAMA3
ranks = tiktoken.load.load_tiktoken_bpe(path)
if mode == "dump":
    # tiktoken writes through blobfile, not in the venv: for a local path it is open()
    import types
    sys.modules.setdefault("blobfile", types.SimpleNamespace(BlobFile=open))
    tiktoken.load.dump_tiktoken_bpe(ranks, path + ".dumped")
    same = open(path, "rb").read() == open(path + ".dumped", "rb").read()
    print("tiktoken: %d ranks read, written back %s" % (len(ranks), "identical" if same else "DIFFERENT"))
    sys.exit(0 if same else 1)
def docs(d):
    idx = json.load(open(os.path.join(d, "index.json")))
    out, doc = [], None
    for s in idx["shards"]:
        raw = open(os.path.join(d, s["file"]), "rb").read()
        for i in struct.unpack("<%dI" % ((len(raw) - 64) // 4), raw[64:]):
            if i == idx["bos"]:
                doc = []
            elif i == idx["eos"]:
                out.append(doc)
                doc = None
            else:
                doc.append(i)
    return out
enc = tiktoken.Encoding(name="learnt", pat_str=LLAMA3, mergeable_ranks=ranks, special_tokens={})
bpe, byte = docs(bpe_dir), docs(byte_dir)
assert len(bpe) == len(byte) and bpe, "%d and %d documents" % (len(bpe), len(byte))
same = ids = not_utf8 = 0
for b, d in zip(bpe, byte):
    try:
        text = bytes(d).decode("utf-8")
    except UnicodeDecodeError:
        not_utf8 += 1
        continue
    want = enc.encode_ordinary(text)
    same += want == b
    ids += len(want)
    if want != b and same + 5 > len(bpe):
        print("differs: %r...: titan %s, tiktoken %s" % (text[:40], b[:12], want[:12]))
n = len(bpe) - not_utf8
print("tiktoken %s: %d of %d UTF-8 documents (%d ids) the same; %d not UTF-8 left out"
      % (tiktoken.__version__, same, n, ids, not_utf8))
sys.exit(0 if same == n and n > 0 else 1)
EOF
for mode in dump ids; do
    d="tiktoken reads and writes back the learnt file"
    [ $mode = ids ] && d="tiktoken (Llama 3's pattern) encodes every UTF-8 document to the BPE shards' ids"
    if need_pyref "$d"; then
        check "$d" sh -c "'$PYREF' '$T/tiktoken_check.py' $mode '$top/tests/tokenizer' '$T/sh' '$T/sb' '$T/tok.tiktoken' >'$T/err' 2>&1"
        sed 's/^/# /' "$T/err"
    fi
done

# ---- early stop, refusals ----
printf 'ab ab ab' >"$T/tiny.txt"
check "a tiny text stops early (exit 0)" run 0 --train-tokenizer 1000 -o "$T/tiny.tiktoken" "$T/tiny.txt"
check "tiny: the warning names the tokens made" grep -q 'stopped at 258 of 1000 tokens' "$T/err"
check "tiny: 258 lines" [ "$(lines "$T/tiny.tiktoken")" = 258 ]
check "an existing file is refused without -f (exit 2)" run 2 --train-tokenizer 300 -o "$T/tok.tiktoken" "$T/src"
check "existing file: hint names -f" grep -q 'hint: -f replaces it' "$T/err"
check "existing file: left as it was" cmp -s "$T/tok.tiktoken" "$T/tok2.tiktoken"
check "-f replaces it" run 0 -q -f --train-tokenizer 300 -o "$T/tok.tiktoken" "$T/src"
check "-f: the new file" [ "$(lines "$T/tok.tiktoken")" = 300 ]
for size in 255 abc 12x 2000000 1025K; do
    check "--train-tokenizer $size (exit 2)" run 2 --train-tokenizer "$size" -o "$T/bad" "$T/src"
done
check "bad size: the message gives the range" grep -q '256 to 1048576' "$T/err"
check "no -o (exit 2)" run 2 --train-tokenizer 300 "$T/src"
check "no input (exit 2)" run 2 --train-tokenizer 300 -o "$T/bad"
check "--tokenizer with it (exit 2)" run 2 --train-tokenizer 300 --tokenizer "tiktoken:$T/tok.tiktoken" -o "$T/bad" "$T/src"
check "--split with it (exit 2)" run 2 --train-tokenizer 300 --split 0.1 -o "$T/bad" "$T/src"
check "-o a directory (exit 2)" run 2 --train-tokenizer 300 -o "$T/src" "$T/src"
check "missing input (exit 3)" run 3 --train-tokenizer 300 -o "$T/bad" "$T/nosuch.txt"
printf 'bin\000ary' >"$T/e.dat"
check "only skipped sources (exit 4)" run 4 --train-tokenizer 300 -o "$T/bad" "$T/e.dat"
check "no file left by the failures" [ ! -e "$T/bad" ]
check "--help names --train-tokenizer" sh -c "'$BIN' --help | grep -q -- '--train-tokenizer N'"

tap_end
