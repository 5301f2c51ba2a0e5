#!/bin/sh
# CLI test of the exit codes as documented: titan(7)'s table is error.h's
# status enum; every tool's --help footer lists the codes of its man page's
# EXIT STATUS, all of them titan(7)'s; every sentence of the man pages and
# README that gives a code for a checksum, memory, a non-finite step or a
# usage error gives that code; and the tools exit so (a damaged shard, a
# damaged checkpoint, a missing run, an unknown option), with codes their
# pages list. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
PY=/usr/bin/python3
TOOLS="titan-shard titan-init titan-train titan-reshard titan-ckpt titan-trace"

for t in $TOOLS; do "$bin/$t" --help > "$tmp/$t.help" 2>&1; done
if $PY - "$top" "$tmp" $TOOLS > "$tmp/docs.tap" 2>"$tmp/err" <<'EOF'
import re, sys
top, tmp, tools = sys.argv[1], sys.argv[2], sys.argv[3:]
bad = []
def section(text, name):
    m = re.search(r"^\.SH %s\n(.*?)(?=^\.SH |\Z)" % name, text, re.S | re.M)
    return m.group(1) if m else ""
def man_codes(text):
    return set(int(c) for c in re.findall(r"^\.TP\n\.B (\d+)\n", section(text, "EXIT STATUS"), re.M))
enum = {int(v): k for k, v in re.findall(r"(TITAN_\w+) = (\d+),", open(top + "/lib/core/error.h").read())}
titan7 = open(top + "/man/titan.7").read()
all_codes = man_codes(titan7)
print("titan(7) codes %s, error.h %s" % (sorted(all_codes), sorted(enum)), file=sys.stderr)
if all_codes != set(enum): bad.append("titan(7) EXIT STATUS %s is not error.h's %s" % (sorted(all_codes), sorted(enum)))
out = []
for t in tools:
    page = open("%s/man/%s.1" % (top, t)).read()
    mc = man_codes(page)
    foot = open("%s/%s.help" % (tmp, t)).read()
    foot = foot[foot.index("Exit status:"):] if "Exit status:" in foot else ""
    hc = set(int(c) for c in re.findall(r"(?:^|[:,]\s+)(\d)\s", foot.replace("\n", " ")))
    okay = mc and mc == hc and mc <= all_codes
    out.append("%s %s: man %s, --help %s" % ("ok" if okay else "not ok", t, sorted(mc), sorted(hc)))
    open("%s/%s.codes" % (tmp, t), "w").write(" ".join(map(str, sorted(mc))))
# Sentences that name one exit code and one of these subjects must agree.
subjects = [(r"checksum", 7), (r"out of memory", 6), (r"not finite|non-finite", 5), (r"usage error", 2)]
pages = ["man/" + p for p in ("titan.7", "titan-checkpoint.5", "titan-shard.5")] + ["man/%s.1" % t for t in tools] + ["README.md"]
for p in pages:
    text = open(top + "/" + p).read()
    text = re.sub(r"^\.(?:B|I|BR|IR|RB|BI|IB)\s+", "", text, flags=re.M)
    text = re.sub(r"^\.[A-Za-z]+.*$", " ", text, flags=re.M)
    text = text.replace("\\-", "-").replace("\n", " ")
    for s in re.split(r"(?<=[.;:])\s+", text):
        codes = set(int(c) for c in re.findall(r"\b(?:exit status|exits with status|exits? with|status|exits?)\s+(\d)\b", s))
        if len(codes) != 1: continue
        code = codes.pop()
        if code not in all_codes: bad.append("%s: exit %d is not a code of titan(7): %s" % (p, code, s.strip()[:160]))
        for pat, want in subjects:
            if re.search(pat, s, re.I) and code != want and not re.search(r"malformed|missing", s, re.I):
                bad.append("%s: says exit %d for '%s' (titan(7): %d): %s" % (p, code, pat, want, s.strip()[:200]))
    # the EXIT STATUS tables: an entry speaks of its own code's subject
    for code, entry in re.findall(r"^\.TP\n\.B (\d+)\n(.*?)(?=^\.TP|^\.PP|\Z)", section(open(top + "/" + p).read(), "EXIT STATUS"), re.S | re.M):
        entry = re.sub(r"checksum kind", "", entry.replace("\n", " "))
        for pat, want in subjects:
            if re.search(pat, entry, re.I) and int(code) != want and want != 2:
                bad.append("%s: EXIT STATUS %s speaks of '%s' (titan(7): %d): %s" % (p, code, pat, want, entry.strip()[:200]))
out.append(("ok" if not bad else "not ok") + " the man pages and README give each subject its titan(7) code")
for b in bad: out.append("# " + b)
print("\n".join(out))
EOF
then :; else fail "the exit-code check ran ($(tail -n 3 "$tmp/err"))"; fi
while IFS= read -r line; do
    case $line in
    "ok "*) ok "${line#ok }" ;;
    "not ok "*) fail "${line#not ok }" ;;
    *) echo "$line" ;;
    esac
done < "$tmp/docs.tap"

# --- the tools exit as their pages say ------------------------------------------------
# lists TOOL CODE: the code is one TOOL's page and --help list
lists() { case " $(cat "$tmp/$1.codes") " in *" $2 "*) return 0 ;; esac; return 1; }
# exits TOOL CODE PATTERN DESCRIPTION -- command: exits CODE, as documented for TOOL
exits() {
    tool=$1; code=$2; shift 2
    expect "$code" "$@"
    lists "$tool" "$code" && ok "$tool documents exit $code" || fail "$tool documents exit $code"
}
printf 'exit codes are part of the interface\n%.0s' $(seq 1 200) > "$tmp/c.txt"
"$bin/titan-shard" -q -o "$tmp/data" "$tmp/c.txt" 2>"$tmp/err" || fail "shard"
f=$tmp/data/shard-00000.bin
printf 'X' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null
exits titan-shard 7 "payload checksum" "a damaged shard: titan-shard --stats -> 7" -- "$bin/titan-shard" --stats "$tmp/data"
cfg=$top/configs/debugmodel.toml
SMALL="--model.dim=32 --model.n_layers=1 --model.n_heads=2 --training.seq_len=16 --training.local_batch_size=1
 --training.steps=1 --training.threads=1 --metrics.peak_flops=1e11"
"$bin/titan-init" -q "$cfg" "$tmp/r" $SMALL --training.dataset_path="$tmp/data" 2>"$tmp/err" || fail "init"
exits titan-train 7 "payload checksum" "a damaged shard: titan-train -> 7" -- "$bin/titan-train" -q "$tmp/r"
exits titan-train 3 "no such run directory" "a missing run: titan-train -> 3" -- "$bin/titan-train" "$tmp/none"
step=$tmp/r/checkpoint/step-00000000
data=$(ls "$step"/*.bin | head -n 1)
printf '\001\002\003\004' | dd of="$data" bs=1 seek=8 conv=notrunc 2>/dev/null
exits titan-ckpt 7 "checksum mismatch" "a damaged checkpoint: titan-ckpt verify -> 7" -- "$bin/titan-ckpt" verify "$step"
exits titan-reshard 7 "checksum mismatch" "a damaged checkpoint: titan-reshard -> 7" -- \
    "$bin/titan-reshard" "$step" --to tp=1 "$tmp/out-ckpt"
for t in $TOOLS; do exits "$t" 2 "unknown option" "$t --bogus -> 2" -- "$bin/$t" --bogus; done
tap_end
