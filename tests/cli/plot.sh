#!/bin/sh
# CLI tests of titan-trace plot, checked on the SVG itself (parsed with
# python3's xml.etree): a run trained to step 10 on one process and
# resumed under 2 ranks records its segments in metrics.jsonl; its plot has
# a panel (y axis) a key, tick labels on round numbers, legends outside the
# data areas, and a marker at step 10 naming the new layout. --smooth draws
# TensorBoard's debiased EMA of a known series over the faint raw one;
# --log-y puts ticks on powers of ten; two runs share the panels. The text
# plot: a panel a key, round y labels, the resume as a ':' column. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"
PY=/usr/bin/python3

shard_man_corpus

# ---- a run resumed under another layout records its segments -------------------------------
"$bin/titan-init" -q "$cfg" "$tmp/run" $TINY 2>"$tmp/err" || fail "init run"
expect 0 "" "train to step 10 on one process" -- "$bin/titan-train" -q "$tmp/run" --stop-at 10
expect 0 "" "resume to step 20 on 2 ranks (dp_shard=2)" -- "$bin/titan-train" -q "$tmp/run" --nproc 2
$PY - "$tmp/run/metrics.jsonl" >"$tmp/err" 2>&1 <<'PY' && ok "metrics.jsonl: segments at steps 1 and 11 (from 0 single, from 10 dp_shard=2), global batch 4 both" || fail "segment records"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == list(range(1, 21)), [r["step"] for r in rows]
assert all("loss" in r for r in rows), "a line without loss"
seg = [(r["step"], r["resumed_from"], r["layout"], r["global_batch"]) for r in rows if "resumed_from" in r]
assert seg == [(1, 0, "single", 4), (11, 10, "dp_replicate=1,dp_shard=2,cp=1,tp=1,pp=1", 4)], seg
PY

# ---- the SVG checker: round ticks, legends outside, markers, points inside ------------------
cat >"$tmp/check_svg.py" <<'PY'
"""check_svg.py SVG PANELS [MARKER_STEP LABEL_PART]: exits 1 with the reason."""
import math, sys, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
els = list(svg.iter())
cls = lambda c: [e for e in els if e.get("class") == c]
def box(e):
    return tuple(float(e.get(k)) for k in ("x", "y", "width", "height"))
def overlap(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]
def round_ticks(vals, what):
    assert len(vals) >= 2, "%s: %d ticks" % (what, len(vals))
    d = vals[1] - vals[0]
    assert d > 0, "%s: ticks not ascending: %s" % (what, vals)
    for a, b in zip(vals, vals[1:]):
        assert abs((b - a) - d) <= 1e-9 * max(abs(d), 1e-300) * 1e3, "%s: uneven ticks %s" % (what, vals)
    m = d / 10 ** math.floor(math.log10(d) + 1e-9)
    assert any(abs(m - r) < 1e-6 for r in (1, 2, 5)), "%s: step %g is not 1, 2 or 5 x 10^k (%s)" % (what, d, vals)
    for v in vals:
        assert abs(v / d - round(v / d)) < 1e-6, "%s: %g is not a multiple of %g" % (what, v, d)
areas = {e.get("data-panel"): box(e) for e in cls("plot-area")}
want = sys.argv[2].split(",")
assert sorted(areas) == sorted(want), "panels %s, want %s" % (sorted(areas), want)
by = lambda c, p: [e for e in cls(c) if e.get("data-panel") == p]
for p in want:
    ys = [float(t.text) for t in by("ytick", p)]
    round_ticks(sorted(ys), "panel %s y" % p)
xt = cls("xtick")
xs = [float(t.text) for t in xt]
round_ticks(xs, "step axis")
for lb in cls("legend-box"):
    for p, a in areas.items():
        assert not overlap(box(lb), a), "legend of %s overlaps panel %s: %s %s" % (lb.get("data-panel"), p, box(lb), a)
for p, a in areas.items():
    for q, b in areas.items():
        assert p == q or not overlap(a, b), "panels %s and %s overlap" % (p, q)
# the step at pixel x, from the first and last tick labels' positions
x0, x1 = float(xt[0].get("x")), float(xt[-1].get("x"))
step_at = lambda x: xs[0] + (x - x0) / (x1 - x0) * (xs[-1] - xs[0])
for pl in cls("series") + cls("raw"):
    for pt in pl.get("points").split():
        px, py = map(float, pt.split(","))
        assert any(a[0] - 0.5 <= px <= a[0] + a[2] + 0.5 and a[1] - 0.5 <= py <= a[1] + a[3] + 0.5
                   for a in areas.values()), "point %s of %s outside every panel" % (pt, pl.get("data-name"))
if len(sys.argv) > 3:
    step, part = float(sys.argv[3]), sys.argv[4]
    lines = [e for e in cls("marker") if float(e.get("data-step")) == step]
    assert lines, "no marker at step %g (markers at %s)" % (step, [e.get("data-step") for e in cls("marker")])
    x = float(lines[0].get("x1"))
    assert abs(step_at(x) - step) < 0.05, "marker of step %g drawn at step %g" % (step, step_at(x))
    top = min(a[1] for a in areas.values()); bottom = max(a[1] + a[3] for a in areas.values())
    assert float(lines[0].get("y1")) <= top and float(lines[0].get("y2")) >= bottom, "marker does not cross every panel"
    labels = [e.text for e in cls("marker-label") if float(e.get("data-step")) == step]
    assert labels and part in labels[0], "marker label %s lacks %r" % (labels, part)
    assert all(float(e.get("y")) < top for e in cls("marker-label")), "a marker label inside the data"
PY

expect 0 "" "plot -y loss,lr,grad_norm --svg" -- "$bin/titan-trace" plot -y loss,lr,grad_norm --svg "$tmp/run.svg" "$tmp/run"
$PY "$tmp/check_svg.py" "$tmp/run.svg" loss,lr,grad_norm 10 "resumed as dp_shard=2" 2>"$tmp/err" &&
    ok "SVG: a panel a key, round ticks, legends outside the data, the resume at step 10 as dp_shard=2" ||
    fail "SVG of the resumed run"
$PY - "$tmp/run.svg" 2>"$tmp/err" <<'PY' && ok "SVG: three polylines of 20 points, none drawn raw" || fail "SVG polylines"
import sys, xml.etree.ElementTree as ET
pl = [e for e in ET.parse(sys.argv[1]).iter() if e.tag.endswith("polyline")]
assert len(pl) == 3 and all(len(l.get("points").split()) == 20 for l in pl), [len(l.get("points").split()) for l in pl]
assert all(l.get("class") == "series" for l in pl)
PY
expect 0 "" "plot (default keys) --svg" -- "$bin/titan-trace" plot --svg "$tmp/loss.svg" "$tmp/run"
$PY "$tmp/check_svg.py" "$tmp/loss.svg" loss 10 "resumed" 2>"$tmp/err" && ok "SVG of the loss alone: one panel, round ticks, the marker" ||
    fail "SVG of the loss alone"

# ---- smoothing: TensorBoard's debiased EMA of a known series ---------------------------------
# loss: a noisy known series (and a constant one, which TensorBoard leaves alone)
$PY - "$tmp/known.jsonl" <<'PY' || fail "known series written"
import json, sys
with open(sys.argv[1], "w") as f:
    for s in range(1, 41):
        f.write(json.dumps({"step": s, "loss": 4 + 2 * ((s * 7) % 5) / 4 - s / 20, "mfu": 0.25}) + "\n")
PY
expect 0 "" "plot --smooth 0.6 --svg of a known series" -- "$bin/titan-trace" plot -y loss,mfu --smooth 0.6 \
    --svg "$tmp/smooth.svg" "$tmp/known.jsonl"
cat >"$tmp/check_ema.py" <<'PY'
"""check_ema.py SVG METRICS W: the drawn loss is TensorBoard's EMA of the raw one, the raw one faint beneath."""
import json, sys, xml.etree.ElementTree as ET
els = list(ET.parse(sys.argv[1]).iter())
w = float(sys.argv[3])
raw = [json.loads(l)["loss"] for l in open(sys.argv[2])]
ema, last = [], 0.0
for i, v in enumerate(raw, 1):
    last = last * w + (1 - w) * v
    ema.append(last / (1 - w ** i))
ticks = [e for e in els if e.get("class") == "ytick" and e.get("data-panel") == "loss"]
(y0, v0), (y1, v1) = [(float(t.get("y")) - 4, float(t.text)) for t in (ticks[0], ticks[-1])]
value = lambda py: v0 + (py - y0) / (y1 - y0) * (v1 - v0)
res = (v1 - v0) / abs(y1 - y0) * 0.02  # two hundredths of a pixel
def ys(cls, name):
    pl = [e for e in els if e.get("class") == cls and e.get("data-name") == name]
    assert len(pl) == 1, "%d %s polylines of %s" % (len(pl), cls, name)
    return [value(float(p.split(",")[1])) for p in pl[0].get("points").split()]
got, faint = ys("series", "loss"), ys("raw", "loss")
assert len(got) == len(ema) == len(faint)
worst = max(abs(a - b) for a, b in zip(got, ema))
assert worst <= res, "drawn loss differs from the EMA by %g (resolution %g)" % (worst, res)
assert max(abs(a - b) for a, b in zip(faint, raw)) <= res, "the raw polyline is not the raw series"
assert max(abs(a - b) for a, b in zip(got, raw)) > 100 * res, "smoothing changed nothing"
op = [e.get("stroke-opacity") for e in els if e.get("class") == "raw"]
assert op and all(float(o) < 1 for o in op), "raw polylines not faint: %s" % op
# the constant series is drawn as it is
mfu = [e for e in els if e.get("class") == "series" and e.get("data-name") == "mfu"][0]
assert len({p.split(",")[1] for p in mfu.get("points").split()}) == 1, "a constant series smoothed"
print("worst %.2g at a resolution of %.2g" % (worst, res), file=sys.stderr)
PY
$PY "$tmp/check_ema.py" "$tmp/smooth.svg" "$tmp/known.jsonl" 0.6 2>"$tmp/err" &&
    ok "--smooth 0.6: the drawn loss is the debiased EMA ($(tail -n1 "$tmp/err")), raw faint beneath, constants untouched" ||
    fail "--smooth 0.6: the drawn loss is the debiased EMA"
$PY "$tmp/check_svg.py" "$tmp/smooth.svg" loss,mfu 2>"$tmp/err" && ok "smoothed SVG: round ticks, legends outside" ||
    fail "smoothed SVG: round ticks, legends outside"
expect 2 "a weight 0 to 0.999" "--smooth 1 is refused" -- "$bin/titan-trace" plot --smooth 1 "$tmp/known.jsonl"

# ---- --log-y: powers of ten ------------------------------------------------------------------
$PY - "$tmp/decades.jsonl" <<'PY' || fail "decades written"
import json, sys
with open(sys.argv[1], "w") as f:
    for s in range(1, 31):
        f.write(json.dumps({"step": s, "lr": 3e-6 * 1.25 ** s, "loss": 11 - s / 4}) + "\n")
PY
expect 0 "" "plot --log-y --svg" -- "$bin/titan-trace" plot -y lr,loss --log-y --svg "$tmp/log.svg" "$tmp/decades.jsonl"
$PY - "$tmp/log.svg" 2>"$tmp/err" <<'PY' && ok "--log-y: lr ticks on powers of ten, evenly spaced; loss ticks round" || fail "--log-y ticks"
import math, sys, xml.etree.ElementTree as ET
els = list(ET.parse(sys.argv[1]).iter())
t = [(float(e.get("y")), float(e.text)) for e in els if e.get("class") == "ytick" and e.get("data-panel") == "lr"]
assert len(t) >= 3, t
assert all(abs(math.log10(v) - round(math.log10(v))) < 1e-9 for _, v in t), [v for _, v in t]
gaps = [b[0] - a[0] for a, b in zip(t, t[1:])]
assert max(gaps) - min(gaps) < 0.2, "decades not evenly spaced: %s" % gaps
l = [float(e.text) for e in els if e.get("class") == "ytick" and e.get("data-panel") == "loss"]
assert all(abs(v - round(v)) < 1e-9 for v in l), l
PY

# ---- two runs share the panels -----------------------------------------------------------------
"$bin/titan-init" -q "$cfg" "$tmp/other" $TINY --training.steps=10 2>"$tmp/err" || fail "init other"
expect 0 "" "train another run 10 steps" -- "$bin/titan-train" -q "$tmp/other"
expect 0 "" "plot of two runs --svg" -- "$bin/titan-trace" plot -y loss,lr --svg "$tmp/two.svg" "$tmp/run" "$tmp/other"
$PY "$tmp/check_svg.py" "$tmp/two.svg" loss,lr 10 "run: resumed as dp_shard=2" 2>"$tmp/err" &&
    $PY - "$tmp/two.svg" "$tmp" 2>>"$tmp/err" <<'PY' && ok "two runs: two panels of RUN:KEY series, the resumed run's marker named" || fail "two runs' SVG"
import sys, xml.etree.ElementTree as ET
t = sys.argv[2]
s = {(e.get("data-name"), len(e.get("points").split())) for e in ET.parse(sys.argv[1]).iter() if e.get("class") == "series"}
want = {(t + "/run:loss", 20), (t + "/run:lr", 20), (t + "/other:loss", 10), (t + "/other:lr", 10)}
assert s == want, s
PY
expect 0 "" "text plot of two runs" -- "$bin/titan-trace" plot "$tmp/run" "$tmp/other" --height 6
grep -q "loss:  \* .*/run:loss  o .*/other:loss" "$tmp/out" && ok "text: two runs share the loss panel" ||
    { fail "text: two runs share the loss panel"; sed 's/^/#   /' "$tmp/out"; }

# ---- the text plot ---------------------------------------------------------------------------
expect 0 "" "text plot -y loss,lr" -- "$bin/titan-trace" plot -y loss,lr --width 50 --height 8 "$tmp/run"
$PY - "$tmp/out" 2>"$tmp/err" <<'PY' && ok "text: two panels of 8 rows, round y labels, the resume a ':' column named below" ||
import math, re, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [l for l in lines if re.match(r"^.{10} \|", l)]
assert len(rows) == 16, "%d rows" % len(rows)
for panel in (rows[:8], rows[8:]):
    vals = [float(l[:10]) for l in panel if l[:10].strip()]
    assert len(vals) >= 2, panel
    d = vals[0] - vals[1]
    m = d / 10 ** math.floor(math.log10(d) + 1e-9)
    assert any(abs(m - r) < 1e-6 for r in (1, 2, 5)) and all(abs(v / d - round(v / d)) < 1e-6 for v in vals), vals
col = {l.index(":", 12) for l in rows if ":" in l[12:]}
assert len(col) == 1, "marker columns %s" % col
assert any(re.search(r": step 10: resumed as dp_shard=2", l) for l in lines), "no marker line"
assert lines[0].strip().startswith("loss:") and any(l.strip().startswith("lr:") for l in lines), "panel legends"
PY
    { fail "text plot"; sed 's/^/#   /' "$tmp/out"; }

tap_end
