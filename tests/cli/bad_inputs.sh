#!/bin/sh
# CLI test of hostile input: well over 100 crafted bad inputs, fed to all six
# tools (titan-shard, titan-init, titan-train, titan-reshard, titan-ckpt,
# titan-trace): TOML job files cut short, garbled or with bad values; huge
# sizes, counts, shapes and offsets in checkpoint catalogs, Hugging Face
# config.json and safetensors headers, shard headers and index.json,
# tiktoken and tokenizer.json files; wrong JSON types, duplicate keys,
# negative numbers, NaN; path tricks in pack archives; empty files,
# directories and FIFOs where files are expected; flight recorder dumps and
# metrics.jsonl. Each must exit within 10 s with its documented code
# (titan(7) EXIT STATUS) and a message naming the file and the cause, and
# leave no sanitizer report (make check-asan runs this on bin-asan/). What
# the other CLI tests check already (ckpt.sh, shard.sh, init_load.sh,
# gguf.sh, trace.sh, train.sh) is not repeated. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
PY=/usr/bin/python3
ck=$bin/titan-ckpt
cfg=$top/configs/debugmodel.toml
T=$tmp

# bad CODE FILE CAUSE DESCRIPTION -- command...: the command exits CODE within
# 10 s; its stderr names FILE (a fixed string) and CAUSE (a basic regular
# expression), and holds no sanitizer report.
bad() {
    code=$1; file=$2; cause=$3; desc=$4; shift 5
    timeout 10 "$@" >"$T/out" 2>"$T/err"; rc=$?
    if grep -q 'Sanitizer\|runtime error:' "$T/err"; then fail "$desc (a sanitizer report)"; return; fi
    if [ $rc -eq 124 ]; then fail "$desc (still running after 10 s)"; return; fi
    if [ $rc -ne "$code" ]; then fail "$desc (exit $rc, want $code)"; return; fi
    if ! grep -qF -- "$file" "$T/err"; then fail "$desc (the message does not name '$file')"; return; fi
    if ! grep -q -- "$cause" "$T/err"; then fail "$desc (the message lacks '$cause')"; return; fi
    ok "$desc"
}
# edit SRC DST FILE PYTHON: DST, a copy of SRC (a directory), whose JSON file
# FILE the Python statements change as m (j: the json module; a str m is
# written as it is).
edit() {
    rm -rf "$2"; cp -r "$1" "$2"
    $PY - "$2/$3" "$4" <<'EOF'
import json as j, sys
p = sys.argv[1]
m = j.load(open(p))
c = lambda t, k: m["tensors"][t]["chunks"][k]
exec(sys.argv[2])
open(p, "w").write(m if isinstance(m, str) else j.dumps(m))
EOF
}
# put FILE PYTHON: FILE holds what the Python expression gives (bytes or str)
put() {
    $PY -c 'import sys, json, base64, struct; v = eval(sys.argv[2]); open(sys.argv[1], "wb").write(v if isinstance(v, bytes) else v.encode())' "$1" "$2"
}

# ---- the good inputs the bad ones are made from -------------------------------------------
cat "$top"/man/*.1 > "$T/corpus.txt"
"$bin/titan-shard" -q -o "$T/data" "$T/corpus.txt" 2>"$T/err" && ok "shard a corpus" || fail "shard a corpus"
TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=1 --training.threads=1
 --training.dataset_path=$T/data --metrics.peak_flops=1e11"
expect 0 "" "titan-init a tiny run (its seed checkpoint)" -- "$bin/titan-init" -q "$cfg" "$T/r" $TINY
s0=$T/r/checkpoint/step-00000000
expect 0 "" "export it to Hugging Face format" -- "$ck" convert -q --to hf "$T/r" "$T/hf"
mkdir -p "$T/j"

# ---- TOML job files: titan-init CONFIG, titan-train RUN (exit 2) -------------------------
toml() { # NAME CONTENT (printf format): $T/j/NAME.toml
    printf "$2" > "$T/j/$1.toml"
}
toml cut '[training\n'
bad 2 cut.toml "expected ']'" "TOML: a table header cut short" -- "$bin/titan-init" "$T/j/cut.toml" "$T/x"
put "$T/j/garbled.toml" 'bytes(range(128, 256))'
bad 2 garbled.toml "invalid UTF-8" "TOML: bytes that are not UTF-8" -- "$bin/titan-init" "$T/j/garbled.toml" "$T/x"
toml nul '[job]\ndescription = "a\000b"\n'
bad 2 nul.toml "NUL byte" "TOML: a NUL byte" -- "$bin/titan-init" "$T/j/nul.toml" "$T/x"
toml dupkey '[training]\nsteps = 1\nsteps = 2\n'
bad 2 "dupkey.toml:3" "duplicate key 'steps'" "TOML: a key given twice" -- "$bin/titan-init" "$T/j/dupkey.toml" "$T/x"
toml duptable '[training]\nsteps = 1\n[training]\nseq_len = 8\n'
bad 2 "duptable.toml:3" "defined twice" "TOML: a table given twice" -- "$bin/titan-init" "$T/j/duptable.toml" "$T/x"
toml negsteps '[training]\nsteps = -5\n'
bad 2 "negsteps.toml:2" "training.steps: expected a positive integer" "TOML: negative steps" -- "$bin/titan-init" "$T/j/negsteps.toml" "$T/x"
toml bigint '[training]\nsteps = 99999999999999999999999\n'
bad 2 bigint.toml "does not fit in 64 bits" "TOML: an integer beyond 64 bits" -- "$bin/titan-init" "$T/j/bigint.toml" "$T/x"
toml nanlr '[optimizer]\nlr = nan\n'
bad 2 "nanlr.toml:2" "optimizer.lr: expected a positive number, got nan" "TOML: lr = nan" -- "$bin/titan-init" "$T/j/nanlr.toml" "$T/x"
toml inflr '[optimizer]\nlr = -inf\n'
bad 2 "inflr.toml:2" "optimizer.lr: expected a positive number" "TOML: lr = -inf" -- "$bin/titan-init" "$T/j/inflr.toml" "$T/x"
toml strint '[training]\nseq_len = "long"\n'
bad 2 "strint.toml:2" "training.seq_len" "TOML: a string for an integer" -- "$bin/titan-init" "$T/j/strint.toml" "$T/x"
toml floatint '[training]\nseq_len = 1e30\n'
bad 2 "floatint.toml:2" "expected a positive integer, got 1e30" "TOML: 1e30 for an integer" -- "$bin/titan-init" "$T/j/floatint.toml" "$T/x"
toml wide32 '[training]\nlocal_batch_size = 4294967297\n'
bad 2 "wide32.toml:2" "local_batch_size: expected a positive integer" "TOML: a batch beyond 32 bits" -- "$bin/titan-init" "$T/j/wide32.toml" "$T/x"
toml heads '[model]\nn_heads = 3000000000\n'
bad 2 "heads.toml:2" "model.n_heads" "TOML: 3e9 heads" -- "$bin/titan-init" "$T/j/heads.toml" "$T/x"
toml layers '[model]\nn_layers = 2000000000\n'
# checked with the flavor's other sizes, after the file is read: named by its section
bad 2 "[model]" "n_layers: must be 1 to 1048576" "TOML: 2e9 layers" -- "$bin/titan-init" "$T/j/layers.toml" "$T/x"
toml unterminated '[job]\ndescription = "abc\n'
bad 2 "unterminated.toml:2" "unterminated string" "TOML: a string without its end" -- "$bin/titan-init" "$T/j/unterminated.toml" "$T/x"
toml escape '[job]\ndescription = "\\q"\n'
bad 2 "escape.toml:2" "invalid escape" "TOML: a bad escape" -- "$bin/titan-init" "$T/j/escape.toml" "$T/x"
put "$T/j/deep.toml" '"x = " + "[" * 100000 + "]" * 100000 + "\n"'
bad 2 "deep.toml:1" "nested more than" "TOML: arrays nested 100000 deep" -- "$bin/titan-init" "$T/j/deep.toml" "$T/x"
put "$T/j/deeptab.toml" '"x = " + "{a = " * 50000 + "1" + "}" * 50000 + "\n"'
bad 2 "deeptab.toml:1" "nested more than" "TOML: inline tables nested 50000 deep" -- "$bin/titan-init" "$T/j/deeptab.toml" "$T/x"
put "$T/j/longstr.toml" '"[job]\ndescription = \"" + "a" * 5000000 + "\"\n"'
bad 2 "longstr.toml:2" "longer than the 255 allowed" "TOML: a 5 MB string" -- "$bin/titan-init" "$T/j/longstr.toml" "$T/x"
put "$T/j/longkey.toml" '"[training]\n" + "k" * 1000000 + " = 1\n"'
bad 2 "longkey.toml:2" "unknown key" "TOML: a 1 MB key" -- "$bin/titan-init" "$T/j/longkey.toml" "$T/x"
toml wrongtab '[training]\nsteps = 1\n[training.steps]\nx = 1\n'
bad 2 "wrongtab.toml" "steps" "TOML: a table over a value" -- "$bin/titan-init" "$T/j/wrongtab.toml" "$T/x"
toml flavor '[model]\nflavor = 5\n'
bad 2 "flavor.toml:2" "model.flavor" "TOML: an integer for the flavor" -- "$bin/titan-init" "$T/j/flavor.toml" "$T/x"
toml arrkey '[training]\nsteps = [1, 2]\n'
bad 2 "arrkey.toml:2" "training.steps" "TOML: an array for steps" -- "$bin/titan-init" "$T/j/arrkey.toml" "$T/x"
bad 3 "$T/j" "Is a directory" "a directory as CONFIG -> 3" -- "$bin/titan-init" "$T/j" "$T/x"
bad 3 "nowhere.toml" "No such file" "a missing CONFIG -> 3" -- "$bin/titan-init" "$T/j/nowhere.toml" "$T/x"
# titan-train RUN: the run's config.toml damaged
cp -r "$T/r" "$T/rt" && printf '[training]\nsteps = "x' > "$T/rt/config.toml"
bad 2 "rt/config.toml:2" "unterminated string" "titan-train: a run whose config.toml is cut short" -- "$bin/titan-train" "$T/rt"
rm -f "$T/rt/config.toml" && mkdir "$T/rt/config.toml"
bad 3 "rt/config.toml" "Is a directory" "titan-train: a directory as the run's config.toml" -- "$bin/titan-train" "$T/rt"
rm -rf "$T/rt/config.toml" && printf '[training]\nsteps = 0\n' > "$T/rt/config.toml"
bad 2 "rt/config.toml:2" "training.steps: expected a positive integer" "titan-train: a run whose config.toml has 0 steps" -- "$bin/titan-train" "$T/rt"
bad 2 "command line" "training.steps" "titan-train: --training.steps=-1" -- "$bin/titan-train" "$T/r" --training.steps=-1
bad 3 "corpus.txt" "not a directory" "titan-train: a file as the dataset" -- "$bin/titan-train" "$T/r" --training.dataset_path="$T/corpus.txt"

# ---- shard directories: titan-shard --stats, titan-train (exit 4; 3 missing; 7 damaged) ----
sd() { edit "$T/data" "$T/sd/$1" index.json "$2"; }
mkdir -p "$T/sd"
sd empty 'm = ""'
bad 4 "empty/index.json" "expected near end of file" "index.json: empty" -- "$bin/titan-shard" --stats "$T/sd/empty"
sd array 'm = "[]"'
bad 4 "array/index.json" "not a JSON object" "index.json: an array" -- "$bin/titan-shard" --stats "$T/sd/array"
sd shardsobj 'm["shards"] = {}'
bad 4 "shardsobj/index.json" '"shards" missing or not an array' "index.json: shards an object" -- "$bin/titan-shard" --stats "$T/sd/shardsobj"
sd toobig 'm["tokens"] = 2**64 - 1'
bad 4 "toobig/index.json" "too big integer" "index.json: tokens 2^64-1" -- "$bin/titan-shard" --stats "$T/sd/toobig"
sd negtok 'm["tokens"] = -1'
bad 4 "negtok/index.json" '"tokens" missing or not a non-negative integer' "index.json: tokens -1" -- "$bin/titan-shard" --stats "$T/sd/negtok"
sd floattok 'm["documents"] = 1.5'
bad 4 "floattok/index.json" '"documents" missing or not a non-negative integer' "index.json: documents 1.5" -- "$bin/titan-shard" --stats "$T/sd/floattok"
sd dotdot 'm["shards"][0]["file"] = "../../etc/passwd"'
bad 4 "dotdot/index.json" "is not a plain file name" "index.json: a file ../../etc/passwd" -- "$bin/titan-shard" --stats "$T/sd/dotdot"
sd abs 'm["shards"][0]["file"] = "/etc/passwd"'
bad 4 "abs/index.json" "is not a plain file name" "index.json: an absolute file" -- "$bin/titan-shard" --stats "$T/sd/abs"
sd vocab0 'm["vocab_size"] = 0'
bad 4 "vocab0/index.json" "vocab_size 0 out of range" "index.json: vocab_size 0" -- "$bin/titan-shard" --stats "$T/sd/vocab0"
sd vocabhuge 'm["vocab_size"] = 2**40'
bad 4 "vocabhuge/index.json" "vocab_size 1099511627776 out of range" "index.json: vocab_size 2^40" -- "$bin/titan-shard" --stats "$T/sd/vocabhuge"
sd dupkey 'm = j.dumps(m).replace("{", "{\"tokens\": 5, ", 1)'
bad 4 "dupkey/index.json" "duplicate object key" "index.json: a key given twice" -- "$bin/titan-shard" --stats "$T/sd/dupkey"
sd xxh 'm["shards"][0]["xxh64"] = "zz"'
bad 4 "xxh/index.json" "is not 16 hex digits" "index.json: a bad xxh64" -- "$bin/titan-shard" --stats "$T/sd/xxh"
sd tokstr 'm["shards"][0]["tokens"] = "many"'
bad 4 "tokstr/index.json" 'shards\[0\]: "tokens"' "index.json: a string for a shard's tokens" -- "$bin/titan-shard" --stats "$T/sd/tokstr"
sd repeat 'm["shards"] = m["shards"] * 100000; m["tokens"] *= 100000; m["documents"] *= 100000'
bad 4 "repeat/index.json" "is listed more than once" "index.json: one file listed 100000 times" -- "$bin/titan-shard" --stats "$T/sd/repeat"
sd totals 'm["tokens"] += 1'
bad 4 "totals/index.json" "disagree with the shards" "index.json: totals against the list" -- "$bin/titan-shard" --stats "$T/sd/totals"
sd version 'm["version"] = 2'
bad 4 "version/index.json" "version 2 not supported" "index.json: version 2" -- "$bin/titan-shard" --stats "$T/sd/version"
sd tokid 'm["tokenizer"] = "x" * 100'
bad 4 "tokid/index.json" "longer than 16 bytes" "index.json: a 100-byte tokenizer id" -- "$bin/titan-shard" --stats "$T/sd/tokid"
sd sub 'm["shards"][0]["file"] = "sub"'
mkdir "$T/sd/sub/sub"
bad 3 "sd/sub/sub" "not a regular file" "index.json: a directory as a shard" -- "$bin/titan-shard" --stats "$T/sd/sub"
sd fifo 'm["shards"][0]["file"] = "fifo"'
mkfifo "$T/sd/fifo/fifo"
bad 3 "sd/fifo/fifo" "not a regular file" "index.json: a FIFO as a shard (not waited on)" -- "$bin/titan-shard" --stats "$T/sd/fifo"
sd ififo 'pass'
rm "$T/sd/ififo/index.json" && mkfifo "$T/sd/ififo/index.json"
bad 3 "ififo/index.json" "not a regular file" "a FIFO as index.json (not waited on)" -- "$bin/titan-shard" --stats "$T/sd/ififo"
# shard headers: edited with their header checksum made right again
hdr() { # NAME PYTHON: a copy of the data whose shard-00000.bin header (b, a bytearray) the statements change
    sd "$1" 'pass'
    $PY - "$T/sd/$1/shard-00000.bin" "$2" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
exec(sys.argv[2])
def xxh32(data, seed=0):
    P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    M = 0xffffffff
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & M
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 16 <= n:
            for k in range(4):
                v[k] = rotl((v[k] + struct.unpack_from("<I", data, i)[0] * P2) & M, 13) * P1 & M
                i += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 4 <= n:
        h = rotl((h + struct.unpack_from("<I", data, i)[0] * P3) & M, 17) * P4 & M
        i += 4
    while i < n:
        h = rotl((h + data[i] * P5) & M, 11) * P1 & M
        i += 1
    h ^= h >> 15; h = h * P2 & M; h ^= h >> 13; h = h * P3 & M; h ^= h >> 16
    return h
struct.pack_into("<I", b, 60, xxh32(bytes(b[:60])))
open(p, "wb").write(b)
EOF
}
hdr control 'pass'
expect 0 "" "shard header: rewriting its checksum keeps a good shard good" -- "$bin/titan-shard" --stats "$T/sd/control"
hdr htokens 'struct.pack_into("<Q", b, 16, 2**62)'
bad 4 "htokens/shard-00000.bin" "byte 16:" "shard header: 2^62 tokens" -- "$bin/titan-shard" --stats "$T/sd/htokens"
hdr hversion 'struct.pack_into("<I", b, 8, 7)'
bad 4 "hversion/shard-00000.bin" "byte 8: format version 7" "shard header: version 7" -- "$bin/titan-shard" --stats "$T/sd/hversion"
hdr hsize 'struct.pack_into("<I", b, 12, 2**31)'
bad 4 "hsize/shard-00000.bin" "byte 12: header size" "shard header: header size 2^31" -- "$bin/titan-shard" --stats "$T/sd/hsize"
hdr hvocab 'struct.pack_into("<I", b, 40, 0xffffffff)'
bad 4 "hvocab/shard-00000.bin" "byte 40: vocabulary size 4294967295" "shard header: vocabulary 2^32-1" -- "$bin/titan-shard" --stats "$T/sd/hvocab"
hdr htokid 'b[44:60] = b"\xff" * 16'
bad 4 "htokid/shard-00000.bin" "byte 44: tokenizer" "shard header: a tokenizer id of 0xff bytes" -- "$bin/titan-shard" --stats "$T/sd/htokid"
hdr hdocs 'struct.pack_into("<Q", b, 24, 2**64 - 1)'
bad 4 "hdocs/shard-00000.bin" "byte 24:" "shard header: 2^64-1 documents" -- "$bin/titan-shard" --stats "$T/sd/hdocs"
sd zero 'pass'
: > "$T/sd/zero/shard-00000.bin"
bad 7 "zero/shard-00000.bin" "truncated" "an empty shard file -> 7" -- "$bin/titan-shard" --stats "$T/sd/zero"
sd hmagic 'pass'
printf 'NOTASHRD' | dd of="$T/sd/hmagic/shard-00000.bin" conv=notrunc 2>/dev/null
bad 4 "hmagic/shard-00000.bin" "byte 0: bad magic" "shard header: a foreign magic" -- "$bin/titan-train" "$T/r" --training.dataset_path="$T/sd/hmagic"
bad 4 "repeat/index.json" "listed more than once" "titan-train: a dataset listing one file 100000 times" -- "$bin/titan-train" "$T/r" --training.dataset_path="$T/sd/repeat"
bad 3 "sd/fifo/fifo" "not a regular file" "titan-train: a FIFO as a shard" -- "$bin/titan-train" "$T/r" --training.dataset_path="$T/sd/fifo"

# ---- titan-shard inputs and tokenizer files (exit 4; 3 unreadable) ---------------------------
mkdir -p "$T/tk"
printf 'hello world\n' > "$T/tk/in.txt"
printf '#!/bin/sh\nexec "%s" -q --tokenizer "$1" "%s" -o "%s"\n' "$bin/titan-shard" "$T/tk/in.txt" "$T/tk/out" > "$T/shard_tok"
chmod +x "$T/shard_tok"
shard_tok=$T/shard_tok # shard_tok SPEC: titan-shard of a small text with the tokenizer SPEC
: > "$T/tk/empty.tiktoken"
bad 4 "empty.tiktoken" "no tokens" "tiktoken: an empty file" -- "$shard_tok" "tiktoken:$T/tk/empty.tiktoken"
printf '!!!notbase64 0\n' > "$T/tk/b64.tiktoken"
bad 4 "b64.tiktoken: line 1" "bad base64" "tiktoken: bad base64" -- "$shard_tok" "tiktoken:$T/tk/b64.tiktoken"
ranks() { # FILE PYTHON-EXPR(i): a tiktoken file of the 256 bytes, rank given by the expression
    $PY -c 'import base64, sys
for i in range(256): print(base64.b64encode(bytes([i])).decode(), eval(sys.argv[2]))' "$1" "$2" > "$1"
}
ranks "$T/tk/huge.tiktoken" 'i if i < 255 else 99999999999'
bad 4 "huge.tiktoken: line 256" "is not a number below 2^32" "tiktoken: a rank of 1e11" -- "$shard_tok" "tiktoken:$T/tk/huge.tiktoken"
ranks "$T/tk/neg.tiktoken" '-i'
bad 4 "neg.tiktoken: line 2" "rank '-1'" "tiktoken: a negative rank" -- "$shard_tok" "tiktoken:$T/tk/neg.tiktoken"
ranks "$T/tk/dup.tiktoken" '0'
bad 4 "dup.tiktoken: line 2" "duplicate rank 0" "tiktoken: every rank 0" -- "$shard_tok" "tiktoken:$T/tk/dup.tiktoken"
ranks "$T/tk/gap.tiktoken" '2 * i'
bad 4 "gap.tiktoken" "out of range" "tiktoken: ranks with gaps" -- "$shard_tok" "tiktoken:$T/tk/gap.tiktoken"
$PY -c 'import base64
for i in range(256): print(base64.b64encode(bytes([i])).decode())' > "$T/tk/norank.tiktoken"
bad 4 "norank.tiktoken: line 1" "found no space" "tiktoken: no ranks" -- "$shard_tok" "tiktoken:$T/tk/norank.tiktoken"
bad 3 "$T/tk" "Is a directory" "tiktoken: a directory" -- "$shard_tok" "tiktoken:$T/tk"
bad 4 "in.txt" "expected near 'hello'" "tokenizer.json: plain text" -- "$shard_tok" "hf:$T/tk/in.txt"
# tokenizer.json: a byte-level BPE of the 256 bytes, then changed
$PY - "$T/tk" <<'EOF'
import copy, json, sys
out = sys.argv[1]
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, k = bs[:], 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + k); k += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
base = {"added_tokens": [{"id": 256, "content": "<|begin_of_text|>", "special": True},
                         {"id": 257, "content": "<|end_of_text|>", "special": True}],
        "model": {"type": "BPE", "vocab": vocab, "merges": []}}
def w(name, f):
    d = copy.deepcopy(base); d = f(d) or d
    open("%s/%s.json" % (out, name), "w").write(d if isinstance(d, str) else json.dumps(d))
w("good", lambda d: None)
w("vhuge", lambda d: d["model"]["vocab"].__setitem__("zz", 2**40))
w("vneg", lambda d: d["model"]["vocab"].__setitem__("zz", -1))
w("vstr", lambda d: d["model"]["vocab"].__setitem__("zz", "x"))
w("vtwice", lambda d: d["model"]["vocab"].__setitem__("zz", 5))
w("merge", lambda d: d["model"].__setitem__("merges", ["a q"]))
w("mergeshape", lambda d: d["model"].__setitem__("merges", [["a"]]))
w("mergesobj", lambda d: d["model"].__setitem__("merges", "no"))
w("vocabarr", lambda d: d["model"].__setitem__("vocab", []))
w("wordpiece", lambda d: d["model"].__setitem__("type", "WordPiece"))
w("addedneg", lambda d: d["added_tokens"].append({"id": -5, "content": "x"}))
w("noadded", lambda d: d.__delitem__("added_tokens"))
w("dupkey", lambda d: json.dumps(d).replace("{", '{"model": 1, ', 1))
w("deep", lambda d: "[" * 100000 + "]" * 100000)
EOF
expect 0 "" "tokenizer.json: the unchanged one shards" -- "$shard_tok" "hf:$T/tk/good.json"
bad 4 "vhuge.json" "model.vocab: id is not an integer in 0..2^24-1" "tokenizer.json: an id of 2^40" -- "$shard_tok" "hf:$T/tk/vhuge.json"
bad 4 "vneg.json" "model.vocab: id is not an integer" "tokenizer.json: an id of -1" -- "$shard_tok" "hf:$T/tk/vneg.json"
bad 4 "vstr.json" "model.vocab: id is not an integer" "tokenizer.json: a string id" -- "$shard_tok" "hf:$T/tk/vstr.json"
bad 4 "vtwice.json" "id 5 given twice" "tokenizer.json: an id given twice" -- "$shard_tok" "hf:$T/tk/vtwice.json"
bad 4 "merge.json" "model.merges\[0\]" "tokenizer.json: a merge of unknown tokens" -- "$shard_tok" "hf:$T/tk/merge.json"
bad 4 "mergeshape.json" "model.merges\[0\]" "tokenizer.json: a merge of one part" -- "$shard_tok" "hf:$T/tk/mergeshape.json"
bad 4 "mergesobj.json" "model.merges: missing or not an array" "tokenizer.json: merges a string" -- "$shard_tok" "hf:$T/tk/mergesobj.json"
bad 4 "vocabarr.json" "model.vocab: missing or not an object" "tokenizer.json: vocab an array" -- "$shard_tok" "hf:$T/tk/vocabarr.json"
bad 4 "wordpiece.json" "not BPE" "tokenizer.json: a WordPiece model" -- "$shard_tok" "hf:$T/tk/wordpiece.json"
bad 4 "addedneg.json" "added_tokens: id is not an integer" "tokenizer.json: an added token of id -5" -- "$shard_tok" "hf:$T/tk/addedneg.json"
bad 4 "noadded.json" "added_tokens: none" "tokenizer.json: no added tokens" -- "$shard_tok" "hf:$T/tk/noadded.json"
bad 4 "dupkey.json" "duplicate object key" "tokenizer.json: a key given twice" -- "$shard_tok" "hf:$T/tk/dupkey.json"
bad 4 "deep.json" "maximum parsing depth" "tokenizer.json: arrays nested 100000 deep" -- "$shard_tok" "hf:$T/tk/deep.json"
# inputs: a FIFO inside an input directory is skipped, not waited on
mkdir -p "$T/tk/dir" && cp "$T/tk/in.txt" "$T/tk/dir/a.txt" && mkfifo "$T/tk/dir/pipe.txt"
bad 0 "dir/pipe.txt" "skipped: a FIFO" "a FIFO inside an input directory is skipped with a note" -- \
    "$bin/titan-shard" -v "$T/tk/dir" -o "$T/tk/fifo-out"
printf '\037\213\010\000garbage' > "$T/tk/cut.txt.gz"
bad 4 "cut.txt.gz" "" "a gzip file cut short" -- "$bin/titan-shard" -q "$T/tk/cut.txt.gz" -o "$T/tk/gz-out"
bad 3 "nothere.txt" "No such file" "a missing input -> 3" -- "$bin/titan-shard" -q "$T/tk/nothere.txt" -o "$T/tk/none-out"
bad 2 "--train-tokenizer" "" "--train-tokenizer 0 -> 2" -- "$bin/titan-shard" --train-tokenizer 0 "$T/tk/in.txt" -o "$T/tk/v.json"

# ---- checkpoint catalogs: titan-ckpt, titan-train, titan-reshard, titan-init (exit 4; 3) -------
ckb() { edit "$s0" "$T/ck/$1" metadata.json "$2"; }
mkdir -p "$T/ck"
ckb empty 'm = ""'
bad 4 "empty/metadata.json" "expected near end of file" "metadata.json: empty" -- "$ck" verify "$T/ck/empty"
ckb array 'm = "[]"'
bad 4 "array/metadata.json" "not a titan checkpoint" "metadata.json: an array" -- "$ck" info "$T/ck/array"
ckb negstep 'm["step"] = -1'
bad 4 "negstep/metadata.json" 'missing or negative "step"' "metadata.json: step -1" -- "$ck" verify "$T/ck/negstep"
ckb strstep 'm["step"] = "x"'
bad 4 "strstep/metadata.json" 'missing or negative "step"' "metadata.json: a string step" -- "$ck" info "$T/ck/strstep"
ckb bigstep 'm["step"] = 1e300'
bad 4 "bigstep/metadata.json" 'missing or negative "step"' "metadata.json: step 1e300" -- "$ck" verify "$T/ck/bigstep"
ckb negshape 'm["tensors"]["norm.weight"]["shape"] = [-32]'
bad 4 "negshape/metadata.json" "tensor norm.weight: shape is not 1 to 4 positive integers" "metadata.json: a negative shape" -- "$ck" verify "$T/ck/negshape"
ckb hugeshape 'm["tensors"]["norm.weight"]["shape"] = [2**40, 2**40]'
bad 4 "hugeshape/metadata.json" "tensor norm.weight: shape too large" "metadata.json: a 2^80-element shape" -- "$ck" verify "$T/ck/hugeshape"
ckb ndim 'm["tensors"]["norm.weight"]["shape"] = [1] * 100'
bad 4 "ndim/metadata.json" "shape is not 1 to 4" "metadata.json: 100 dimensions" -- "$ck" verify "$T/ck/ndim"
ckb offset 'c("norm.weight", 0)["offset"] = 2**63 - 1'
bad 4 "offset/metadata.json" "offset 9223372036854775807 is absurd" "metadata.json: offset 2^63-1" -- "$ck" verify "$T/ck/offset"
ckb dotdot 'c("norm.weight", 0)["file"] = "../../../etc/passwd"'
bad 4 "dotdot/metadata.json" "chunk file is not a plain file name" "metadata.json: a chunk in ../../../etc/passwd" -- "$ck" verify "$T/ck/dotdot"
ckb abs 'c("norm.weight", 0)["file"] = "/etc/passwd"'
bad 4 "abs/metadata.json" "chunk file is not a plain file name" "metadata.json: a chunk in /etc/passwd" -- "$ck" verify "$T/ck/abs"
ckb sub 'c("norm.weight", 0)["file"] = "sub"'
mkdir "$T/ck/sub/sub"
bad 3 "ck/sub/sub" "not a regular file" "metadata.json: a chunk in a directory" -- "$ck" verify "$T/ck/sub"
ckb fifo 'c("norm.weight", 0)["file"] = "fifo"'
mkfifo "$T/ck/fifo/fifo"
bad 3 "ck/fifo/fifo" "not a regular file" "metadata.json: a chunk in a FIFO (not waited on)" -- "$ck" verify "$T/ck/fifo"
ckb mfifo 'pass'
rm "$T/ck/mfifo/metadata.json" && mkfifo "$T/ck/mfifo/metadata.json"
bad 3 "mfifo/metadata.json" "not a regular file" "a FIFO as metadata.json (not waited on)" -- "$ck" info "$T/ck/mfifo"
ckb mdir 'pass'
rm "$T/ck/mdir/metadata.json" && mkdir "$T/ck/mdir/metadata.json"
bad 3 "mdir/metadata.json" "not a regular file" "a directory as metadata.json" -- "$ck" verify "$T/ck/mdir"
ckb dupkey 'm = j.dumps(m).replace("{", "{\"step\": 7, ", 1)'
bad 4 "dupkey/metadata.json" "duplicate object key" "metadata.json: a key given twice" -- "$ck" verify "$T/ck/dupkey"
ckb vocab 'm["meta"]["model.vocab_size"] = 2**40'
bad 4 "vocab/metadata.json" '"model.vocab_size": 1099511627776 out of range' "metadata.json: a vocabulary of 2^40" -- "$ck" verify "$T/ck/vocab"
ckb heads0 'm["meta"]["model.n_heads"] = 0'
bad 4 "ck/heads0" "n_heads: must be > 0" "metadata.json: 0 heads" -- "$ck" verify "$T/ck/heads0"
ckb dimstr 'm["meta"]["model.dim"] = "wide"'
bad 4 "dimstr/metadata.json" '"model.dim": not an integer' "metadata.json: a string dim" -- "$ck" verify "$T/ck/dimstr"
ckb neglayers 'm["meta"]["model.n_layers"] = -3'
bad 4 "ck/neglayers" "n_layers: must be 1 to 1048576" "metadata.json: -3 layers" -- "$ck" verify "$T/ck/neglayers"
ckb notensors 'm["tensors"] = {}'
bad 4 "ck/notensors" "missing from the catalog" "metadata.json: no tensors" -- "$ck" verify "$T/ck/notensors"
ckb tensarr 'm["tensors"] = []'
bad 4 "tensarr/metadata.json" "tensors" "metadata.json: tensors an array" -- "$ck" verify "$T/ck/tensarr"
ckb chunksobj 'm["tensors"]["norm.weight"]["chunks"] = {}'
bad 4 "chunksobj/metadata.json" "tensor norm.weight" "metadata.json: chunks an object" -- "$ck" verify "$T/ck/chunksobj"
ckb boxneg 'c("norm.weight", 0)["box"]["size"] = [-32]'
bad 4 "boxneg/metadata.json" "tensor norm.weight: chunk 0" "metadata.json: a negative box" -- "$ck" verify "$T/ck/boxneg"
ckb checksum 'c("norm.weight", 0)["checksum"] = "md5:zz"'
bad 4 "checksum/metadata.json" "tensor norm.weight" "metadata.json: an unknown checksum kind" -- "$ck" verify "$T/ck/checksum"
ckb stored 'c("norm.weight", 0)["stored_nbytes"] = 2**62'
bad 4 "stored/metadata.json" "tensor norm.weight: chunk 0" "metadata.json: stored_nbytes 2^62" -- "$ck" verify "$T/ck/stored"
ckb format 'm["format"] = "other"'
bad 4 "format/metadata.json" "not a titan checkpoint" "metadata.json: a foreign format" -- "$ck" diff "$T/ck/format" "$s0"
ckb version 'm["version"] = 99'
bad 4 "version/metadata.json" "version" "metadata.json: version 99" -- "$ck" verify "$T/ck/version"
# The same catalogs through the other tools
bad 4 "vocab/metadata.json" "out of range" "titan-ckpt convert --to hf: a vocabulary of 2^40" -- "$ck" convert --to hf "$T/ck/vocab" "$T/ck/vocab-hf"
bad 4 "dimstr/metadata.json" "not an integer" "titan-ckpt convert --to gguf: a string dim" -- "$ck" convert --to gguf "$T/ck/dimstr" "$T/ck/dimstr.gguf"
bad 4 "hugeshape/metadata.json" "shape too large" "titan-reshard: a 2^80-element shape" -- "$bin/titan-reshard" "$T/ck/hugeshape" --to tp=2 "$T/ck/rs1"
bad 4 "ck/neglayers" "n_layers" "titan-reshard: -3 layers" -- "$bin/titan-reshard" "$T/ck/neglayers" --to tp=2 "$T/ck/rs2"
bad 3 "ck/fifo/fifo" "not a regular file" "titan-reshard: a chunk in a FIFO" -- "$bin/titan-reshard" "$T/ck/fifo" --to tp=2 "$T/ck/rs3"
bad 4 "dupkey/metadata.json" "duplicate object key" "titan-init: initial_load_path with a key given twice" -- \
    "$bin/titan-init" "$cfg" "$T/x" $TINY --checkpoint.initial_load_path="$T/ck/dupkey"
bad 4 "offset/metadata.json" "is absurd" "titan-init: initial_load_path with an absurd offset" -- \
    "$bin/titan-init" "$cfg" "$T/x" $TINY --checkpoint.initial_load_path="$T/ck/offset"
# titan-train resuming from a damaged catalog: the run's latest step
rsm() { # NAME PYTHON: a copy of the run whose step 0 catalog the statements change
    rm -rf "$T/ck/$1"; cp -r "$T/r" "$T/ck/$1"
    edit "$s0" "$T/ck/$1/checkpoint/step-00000000" metadata.json "$2"
}
rsm trun 'm["tensors"]["norm.weight"]["shape"] = [2**40, 2**40]'
bad 4 "step-00000000/metadata.json" "shape too large" "titan-train: resuming from a 2^80-element shape" -- "$bin/titan-train" "$T/ck/trun"
rsm trun2 'm["meta"]["model.n_layers"] = 1000000'
bad 2 "step-00000000" "model.n_layers is 1000000 in the checkpoint but 2" "titan-train: resuming from a catalog of 1e6 layers" -- "$bin/titan-train" "$T/ck/trun2"
rsm tlatest 'pass'
printf '../../../../etc' > "$T/ck/tlatest/checkpoint/latest"
# latest is a hint (titan-checkpoint(5)): a bad one is named, and the highest complete step used
bad 0 "tlatest/checkpoint/latest" 'malformed ("../../../../etc"); using step-00000000' "titan-ckpt ls: a latest pointing outside" -- "$ck" ls "$T/ck/tlatest"
bad 0 "tlatest/checkpoint/latest" 'malformed ("../../../../etc"); using step-00000000' "titan-train: a latest pointing outside" -- "$bin/titan-train" "$T/ck/tlatest"
rsm tlfifo 'pass'
rm "$T/ck/tlfifo/checkpoint/latest" && mkfifo "$T/ck/tlfifo/checkpoint/latest"
bad 0 "tlfifo/checkpoint/latest" "not a regular file" "titan-ckpt ls: a FIFO as latest (not waited on)" -- "$ck" ls "$T/ck/tlfifo"

# ---- Hugging Face directories: titan-ckpt convert --from hf, titan-init (exit 4; 3) ----------
mkdir -p "$T/hc"
hfc() { edit "$T/hf" "$T/hc/$1" config.json "$2"; }
hfc empty 'm = ""'
bad 4 "empty/config.json" "expected near end of file" "config.json: empty" -- "$ck" convert --from hf "$T/hc/empty" "$T/hc/o"
hfc array 'm = "[]"'
bad 4 "array/config.json" "not a JSON object" "config.json: an array" -- "$ck" convert --from hf "$T/hc/array" "$T/hc/o"
hfc dimstr 'm["hidden_size"] = "big"'
bad 4 "dimstr/config.json" '"hidden_size": not a non-negative integer' "config.json: a string hidden_size" -- "$ck" convert --from hf "$T/hc/dimstr" "$T/hc/o"
hfc vocab 'm["vocab_size"] = 2**40'
bad 4 "vocab/config.json" '"vocab_size": not a non-negative integer' "config.json: a vocabulary of 2^40" -- "$ck" convert --from hf "$T/hc/vocab" "$T/hc/o"
hfc heads0 'm["num_attention_heads"] = 0'
bad 4 "heads0/config.json" "n_heads: must be > 0" "config.json: 0 heads (no division by zero)" -- "$ck" convert --from hf "$T/hc/heads0" "$T/hc/o"
hfc heads5 'm["num_attention_heads"] = 5'
bad 4 "heads5/config.json" "times 5 heads is not hidden_size" "config.json: heads that do not divide the width" -- "$ck" convert --from hf "$T/hc/heads5" "$T/hc/o"
hfc inter 'm["intermediate_size"] = -96'
bad 4 "inter/config.json" '"intermediate_size": not a non-negative integer' "config.json: a negative FFN size" -- "$ck" convert --from hf "$T/hc/inter" "$T/hc/o"
hfc nan 'm = "{\"rope_theta\": NaN}"'
bad 4 "nan/config.json" "invalid token near 'NaN'" "config.json: rope_theta NaN" -- "$ck" convert --from hf "$T/hc/nan" "$T/hc/o"
hfc eps 'm["rms_norm_eps"] = -1'
bad 4 "eps/config.json" "norm_eps: must be > 0" "config.json: a negative epsilon" -- "$ck" convert --from hf "$T/hc/eps" "$T/hc/o"
hfc kv3 'm["num_key_value_heads"] = 3'
bad 4 "kv3/config.json" "n_kv_heads: 3 must be > 0 and divide n_heads 4" "config.json: 3 kv heads of 4" -- "$ck" convert --from hf "$T/hc/kv3" "$T/hc/o"
hfc dim31 'm["hidden_size"] = 2**31'
bad 4 "dim31/config.json" '"hidden_size": not a non-negative integer' "config.json: a width of 2^31" -- "$ck" convert --from hf "$T/hc/dim31" "$T/hc/o"
hfc dupkey 'm = j.dumps(m).replace("{", "{\"hidden_size\": 64, ", 1)'
bad 4 "dupkey/config.json" "duplicate object key" "config.json: a key given twice" -- "$ck" convert --from hf "$T/hc/dupkey" "$T/hc/o"
hfc ropestr 'm["rope_scaling"] = "yes"'
bad 4 "ropestr/config.json" 'only rope_type "llama3" is supported' "config.json: rope_scaling a string" -- "$ck" convert --from hf "$T/hc/ropestr" "$T/hc/o"
hfc theta 'm["rope_theta"] = -5'
bad 4 "theta/config.json" "rope_theta: must be > 1" "config.json: a negative RoPE base" -- "$ck" convert --from hf "$T/hc/theta" "$T/hc/o"
hfc tie 'm["tie_word_embeddings"] = "maybe"'
bad 4 "tie/config.json" '"tie_word_embeddings": not true or false' "config.json: a string for tie_word_embeddings" -- "$ck" convert --from hf "$T/hc/tie" "$T/hc/o"
hfc maxpos 'm["max_position_embeddings"] = -1'
bad 4 "maxpos/config.json" '"max_position_embeddings"' "config.json: max_position_embeddings -1" -- "$ck" convert --from hf "$T/hc/maxpos" "$T/hc/o"
hfc cfifo 'pass'
rm "$T/hc/cfifo/config.json" && mkfifo "$T/hc/cfifo/config.json"
bad 3 "cfifo/config.json" "not a regular file" "a FIFO as config.json (not waited on)" -- "$ck" convert --from hf "$T/hc/cfifo" "$T/hc/o"
bad 3 "cfifo/config.json" "not a regular file" "titan-init: initial_load_in_hf with a FIFO as config.json" -- \
    "$bin/titan-init" "$cfg" "$T/x" $TINY --checkpoint.initial_load_path="$T/hc/cfifo" --checkpoint.initial_load_in_hf=true
bad 4 "heads0/config.json" "n_heads: must be > 0" "titan-init: initial_load_in_hf with 0 heads" -- \
    "$bin/titan-init" "$cfg" "$T/x" $TINY --checkpoint.initial_load_path="$T/hc/heads0" --checkpoint.initial_load_in_hf=true
# safetensors headers
stx() { # NAME PYTHON: a copy of the export whose model.safetensors header (h) or whole bytes (raw) change
    rm -rf "$T/hc/$1"; cp -r "$T/hf" "$T/hc/$1"
    $PY - "$T/hc/$1/model.safetensors" "$2" <<'EOF'
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h, raw = json.loads(b[8:8 + n]), None
exec(sys.argv[2])
if raw is None:
    t = (h if isinstance(h, str) else json.dumps(h)).encode()
    t += b" " * (-len(t) % 8)
    raw = struct.pack("<Q", len(t)) + t + b[8 + n:]
open(p, "wb").write(raw)
EOF
}
stx st0 'raw = b""'
bad 4 "st0/model.safetensors" "too short for a safetensors file" "safetensors: empty" -- "$ck" convert --from hf "$T/hc/st0" "$T/hc/o"
stx st3 'raw = b"\1\2\3"'
bad 4 "st3/model.safetensors" "too short" "safetensors: 3 bytes" -- "$ck" convert --from hf "$T/hc/st3" "$T/hc/o"
stx hlen0 'raw = struct.pack("<Q", 0)'
bad 4 "hlen0/model.safetensors" "header: empty" "safetensors: a header of 0 bytes" -- "$ck" convert --from hf "$T/hc/hlen0" "$T/hc/o"
stx hlen63 'raw = struct.pack("<Q", 2**63) + b"{}"'
bad 4 "hlen63/model.safetensors" "header length 9223372036854775808 is absurd" "safetensors: a header length of 2^63" -- "$ck" convert --from hf "$T/hc/hlen63" "$T/hc/o"
stx notjson 'h = "not json"'
bad 4 "notjson/model.safetensors" "header: byte" "safetensors: a header that is not JSON" -- "$ck" convert --from hf "$T/hc/notjson" "$T/hc/o"
stx harr 'h = "[]"'
bad 4 "harr/model.safetensors" "header: not a JSON object" "safetensors: a header array" -- "$ck" convert --from hf "$T/hc/harr" "$T/hc/o"
stx rev 'h["model.norm.weight"]["data_offsets"] = [100, 0]'
bad 4 "rev/model.safetensors" "data_offsets is not \[begin, end\]" "safetensors: reversed offsets" -- "$ck" convert --from hf "$T/hc/rev" "$T/hc/o"
stx off63 'h["model.norm.weight"]["data_offsets"] = [0, 2**63]'
bad 4 "off63/model.safetensors" "too big integer" "safetensors: an offset of 2^63" -- "$ck" convert --from hf "$T/hc/off63" "$T/hc/o"
stx shape64 'h["model.norm.weight"]["shape"] = [2**32, 2**32]'
bad 4 "shape64/model.safetensors" "tensor model.norm.weight: shape too large" "safetensors: a 2^64-element shape" -- "$ck" convert --from hf "$T/hc/shape64" "$T/hc/o"
stx shapeneg 'h["model.norm.weight"]["shape"] = [-32]'
bad 4 "shapeneg/model.safetensors" "shape is not a list of non-negative integers" "safetensors: a negative shape" -- "$ck" convert --from hf "$T/hc/shapeneg" "$T/hc/o"
stx shape50 'h["model.norm.weight"]["shape"] = [1] * 50'
bad 4 "shape50/model.safetensors" "more than 4 dimensions" "safetensors: 50 dimensions" -- "$ck" convert --from hf "$T/hc/shape50" "$T/hc/o"
stx dupname 'h = json.dumps(h).replace("{", "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, ", 1)'
bad 4 "dupname/model.safetensors" "duplicate object key" "safetensors: a tensor named twice" -- "$ck" convert --from hf "$T/hc/dupname" "$T/hc/o"
stx metaint 'h["__metadata__"] = {"format": 5}'
bad 4 "metaint/model.safetensors" "__metadata__ value of \"format\" is not a string" "safetensors: an integer in __metadata__" -- "$ck" convert --from hf "$T/hc/metaint" "$T/hc/o"
stx offstr 'h["model.norm.weight"]["data_offsets"] = "x"'
bad 4 "offstr/model.safetensors" "malformed dtype, shape or data_offsets" "safetensors: offsets a string" -- "$ck" convert --from hf "$T/hc/offstr" "$T/hc/o"
stx span 'h["model.norm.weight"]["shape"] = [16]'
bad 4 "span/model.safetensors" "shape holds 64 bytes of F32 but data_offsets span 128" "safetensors: a shape smaller than its bytes" -- "$ck" convert --from hf "$T/hc/span" "$T/hc/o"
rm -rf "$T/hc/stdir" && cp -r "$T/hf" "$T/hc/stdir" && rm "$T/hc/stdir/model.safetensors" && mkdir "$T/hc/stdir/model.safetensors"
bad 3 "stdir/model.safetensors" "not a regular file" "a directory as model.safetensors" -- "$ck" convert --from hf "$T/hc/stdir" "$T/hc/o"
rm -rf "$T/hc/stfifo" && cp -r "$T/hf" "$T/hc/stfifo" && rm "$T/hc/stfifo/model.safetensors" && mkfifo "$T/hc/stfifo/model.safetensors"
bad 3 "stfifo/model.safetensors" "not a regular file" "a FIFO as model.safetensors (not waited on)" -- "$ck" convert --from hf "$T/hc/stfifo" "$T/hc/o"
idx() { rm -rf "$T/hc/$1"; cp -r "$T/hf" "$T/hc/$1"; printf '%s' "$2" > "$T/hc/$1/model.safetensors.index.json"; }
idx idxout '{"weight_map": {"model.norm.weight": "../x.safetensors"}}'
bad 4 "idxout/model.safetensors.index.json" "is not a file name in the directory" "index.json: a weight file outside the directory" -- "$ck" convert --from hf "$T/hc/idxout" "$T/hc/o"
idx idxgone '{"weight_map": {"model.norm.weight": "gone.safetensors"}}'
bad 3 "idxgone/gone.safetensors" "No such file" "index.json: a weight file that is not there" -- "$ck" convert --from hf "$T/hc/idxgone" "$T/hc/o"
idx idxarr '{"weight_map": []}'
bad 4 "idxarr/model.safetensors.index.json" 'no "weight_map" object' "index.json: weight_map an array" -- "$ck" convert --from hf "$T/hc/idxarr" "$T/hc/o"
idx idxcut '{"weight_map": {"model.norm.weight": "mod'
bad 4 "idxcut/model.safetensors.index.json" "" "index.json: cut short" -- "$ck" convert --from hf "$T/hc/idxcut" "$T/hc/o"

# ---- GGUF export inputs: titan-ckpt convert --to gguf ---------------------------------------
bad 4 "vhuge.json" "model.vocab: id is not an integer" "GGUF: --tokenizer hf: with an id of 2^40" -- \
    "$ck" convert --to gguf "$T/r" "$T/g1.gguf" --tokenizer "hf:$T/tk/vhuge.json"
bad 4 "dup.tiktoken" "duplicate rank 0" "GGUF: --tokenizer tiktoken: with every rank 0" -- \
    "$ck" convert --to gguf "$T/r" "$T/g2.gguf" --tokenizer "tiktoken:$T/tk/dup.tiktoken"
bad 4 "hugeshape/metadata.json" "shape too large" "GGUF: a checkpoint with a 2^80-element shape" -- \
    "$ck" convert --to gguf "$T/ck/hugeshape" "$T/g3.gguf"
bad 2 "--max-position" "" "GGUF: --max-position -1" -- "$ck" convert --to gguf "$T/r" "$T/g4.gguf" --max-position -1

# ---- pack archives: titan-ckpt unpack (exit 4) -----------------------------------------------
mk_tar() { # OUT ENTRIES...: a tar of kind:name entries (f file, h hard link, d device, p FIFO, b big size claim)
    out=$1; shift
    $PY - "$out" "$@" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for spec in sys.argv[2:]:
        kind, name = spec.split(":", 1)
        ti = tarfile.TarInfo(name)
        if kind == "h": ti.type, ti.linkname = tarfile.LNKTYPE, "step-00000001/metadata.json"
        elif kind == "d": ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
        elif kind == "p": ti.type = tarfile.FIFOTYPE
        if kind in "hdp": t.addfile(ti); continue
        data = b"evil\n"
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
EOF
}
mk_tar "$T/hard.tar" "f:step-00000001/metadata.json" "h:step-00000001/rank-00000.bin"
bad 4 "hard.tar" "step-00000001/rank-00000.bin" "unpack: a hard link entry" -- "$ck" unpack "$T/hard.tar" "$T/u1"
mk_tar "$T/dev.tar" "d:step-00000001/rank-00000.bin"
bad 4 "dev.tar" "step-00000001/rank-00000.bin" "unpack: a device entry" -- "$ck" unpack "$T/dev.tar" "$T/u2"
mk_tar "$T/fifo.tar" "p:step-00000001/rank-00000.bin"
bad 4 "fifo.tar" "step-00000001/rank-00000.bin" "unpack: a FIFO entry" -- "$ck" unpack "$T/fifo.tar" "$T/u3"
mk_tar "$T/dot.tar" "f:step-00000001/./../x"
bad 4 "dot.tar" '".." component refused' "unpack: ./.. inside a name" -- "$ck" unpack "$T/dot.tar" "$T/u4"
mk_tar "$T/latest.tar" "f:../latest"
bad 4 "latest.tar" '".." component refused' "unpack: ../latest" -- "$ck" unpack "$T/latest.tar" "$T/u5"
mk_tar "$T/garbage-meta.tar" "f:step-00000001/metadata.json" "f:latest"
bad 4 "metadata.json" "" "unpack: an archive whose catalog is garbage" -- "$ck" unpack "$T/garbage-meta.tar" "$T/u6"
: > "$T/empty.tar"
bad 4 "empty.tar" "" "unpack: an empty file" -- "$ck" unpack "$T/empty.tar" "$T/u7"
put "$T/noise.tar" 'bytes(range(256)) * 64'
bad 4 "noise.tar" "" "unpack: noise" -- "$ck" unpack "$T/noise.tar" "$T/u8"
bad 3 "$T/ck" "a directory, not an archive" "unpack: a directory as the archive -> 3" -- "$ck" unpack "$T/ck" "$T/u9"
[ ! -e "$T/x" ] && [ ! -e "$T/latest" ] && ok "no refusal wrote anything outside its OUTDIR" || fail "no refusal wrote anything outside its OUTDIR"

# ---- titan-trace: metrics.jsonl and flight recorder dumps (exit 4; 3) -------------------------
mkdir -p "$T/tr"
printf '{"step":1,"loss":NaN}\n' > "$T/tr/nan.jsonl"
bad 4 "nan.jsonl:1" "not a metrics line" "metrics: a NaN loss" -- "$bin/titan-trace" summary "$T/tr/nan.jsonl"
printf '{"step":1e300,"loss":2}\n' > "$T/tr/bigstep.jsonl"
bad 4 "bigstep.jsonl:1" "not a metrics line" "metrics: step 1e300" -- "$bin/titan-trace" summary "$T/tr/bigstep.jsonl"
put "$T/tr/noise.jsonl" 'bytes(range(256)) * 20'
bad 4 "noise.jsonl:" "not a metrics line" "metrics: noise" -- "$bin/titan-trace" summary "$T/tr/noise.jsonl"
printf '[1,2]\n' > "$T/tr/arr.jsonl"
bad 4 "arr.jsonl:1" "not a metrics line" "metrics: an array" -- "$bin/titan-trace" summary "$T/tr/arr.jsonl"
printf '{"step":"one","loss":2}\n' > "$T/tr/strstep.jsonl"
bad 4 "strstep.jsonl:1" "not a metrics line" "metrics: a string step" -- "$bin/titan-trace" plot "$T/tr/strstep.jsonl"
put "$T/tr/long.jsonl" '"{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"x\": \"" + "x" * 20000000 + "\"\n"'
bad 4 "long.jsonl:2" "not a metrics line" "metrics: a 20 MB line cut short" -- "$bin/titan-trace" summary "$T/tr/long.jsonl"
printf '{"step":1,"loss":2}\n' > "$T/tr/ok.jsonl"
bad 2 "--width" "is not an integer 10..1000" "plot --width 999999999" -- "$bin/titan-trace" plot --width 999999999 "$T/tr/ok.jsonl"
bad 2 "--height" "is not an integer 4..500" "plot --height -1" -- "$bin/titan-trace" plot --height -1 "$T/tr/ok.jsonl"
flight() { # NAME PYTHON: a 2-rank dump directory made from tests/fuzz's dump, r0 and r1 changed
    rm -rf "$T/fl/$1"; mkdir -p "$T/fl/$1"
    $PY - "$top/tests/fuzz/corpus/flight/valid_fsdp_timeout.json" "$T/fl/$1" "$2" <<'EOF'
import copy, json, sys
d = json.load(open(sys.argv[1]))
r0, r1 = copy.deepcopy(d), copy.deepcopy(d)
r1["rank"] = 1
for c in r1["comms"]: c["rank"] = min(1, c["size"] - 1)
exec(sys.argv[3])
for i, r in enumerate([r0, r1]):
    open("%s/rank-%d.json" % (sys.argv[2], i), "w").write(r if isinstance(r, str) else json.dumps(r))
EOF
}
flight world 'r0["world_size"] = 2**31 - 1'
bad 4 "world/rank-0.json" "no valid rank and world_size" "flight: a world of 2^31-1 ranks" -- "$bin/titan-trace" hang "$T/fl/world"
flight worlds 'r1["world_size"] = 3'
bad 4 "worlds/rank-1.json" "dumps of different jobs" "flight: two world sizes" -- "$bin/titan-trace" hang "$T/fl/worlds"
flight negworld 'r0["world_size"] = -1'
bad 4 "negworld/rank-0.json" "no valid rank and world_size" "flight: world size -1" -- "$bin/titan-trace" flight "$T/fl/negworld"
flight comm 'r0["comms"][0]["size"] = 2**40'
bad 4 "comm/rank-0.json" "a communicator without a valid id, rank and size" "flight: a communicator of 2^40 ranks" -- "$bin/titan-trace" hang "$T/fl/comm"
flight rank 'r0["rank"] = 5'
bad 4 "rank/rank-0.json" "no valid rank and world_size" "flight: rank 5 of 2" -- "$bin/titan-trace" hang "$T/fl/rank"
flight tworank 'r1["rank"] = 0'
bad 4 "tworank/rank-1.json" "two dumps of rank 0" "flight: two dumps of one rank" -- "$bin/titan-trace" hang "$T/fl/tworank"
flight count 'r0 = json.dumps(r0).replace("\"count\": 6176", "\"count\": 1180591620717411303424", 1)'
bad 4 "count/rank-0.json:1" "too big integer" "flight: a count of 2^70" -- "$bin/titan-trace" hang "$T/fl/count"
flight fmt 'r0 = "{}"'
bad 4 "fmt/rank-0.json" "not titan-flight-1" "flight: an empty object" -- "$bin/titan-trace" flight "$T/fl/fmt/rank-0.json"
flight cut 'r0 = json.dumps(r0)[:500]'
bad 4 "cut/rank-0.json:1" "not JSON" "flight: a dump cut short" -- "$bin/titan-trace" hang "$T/fl/cut"
flight state 'r0["entries"][0]["state"] = "dancing"'
bad 4 "state/rank-0.json" "an entry without an op or a known state" "flight: an unknown state" -- "$bin/titan-trace" hang "$T/fl/state"
flight ecomm 'r0["entries"][0]["comm"] = 99'
bad 4 "ecomm/rank-0.json" "an entry of an unknown communicator" "flight: an entry of communicator 99" -- "$bin/titan-trace" chrome -o "$T/fl/c.json" "$T/fl/ecomm/rank-0.json"
printf '{"traceEvents": 5}' > "$T/tr/op.json"
bad 4 "op.json" "neither a flight recorder dump nor an op-profile trace" "chrome: traceEvents a number" -- "$bin/titan-trace" chrome "$T/tr/op.json"
bad 3 "fl/none" "" "hang: a missing directory -> 3" -- "$bin/titan-trace" hang "$T/fl/none"

# Unreadable files: root reads them anyway, so only as another user.
if [ "$(id -u)" != 0 ]; then
    cp "$cfg" "$T/j/noread.toml" && chmod 000 "$T/j/noread.toml"
    bad 3 "noread.toml" "Permission denied" "an unreadable CONFIG -> 3" -- "$bin/titan-init" "$T/j/noread.toml" "$T/x"
    cp -r "$T/data" "$T/sd/noread" && chmod 000 "$T/sd/noread/shard-00000.bin"
    bad 3 "noread/shard-00000.bin" "Permission denied" "an unreadable shard -> 3" -- "$bin/titan-shard" --stats "$T/sd/noread"
else
    skip "an unreadable CONFIG -> 3" "running as root, who reads any file"
    skip "an unreadable shard -> 3" "running as root, who reads any file"
fi
tap_end
