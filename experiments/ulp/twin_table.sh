#!/bin/sh
# twin_table.sh FP8LAB OUTDIR — the published accuracy table of the kernels' CPU twins
# (kernels/README.md, "Accuracy: every twin against MPFR"): runs `fp8lab ulp --impl NAME --json` for
# every kernel twin, exhaustively where the input space allows (every bf16 / e4m3 input; every bf16
# pair for the SwiGLU forward, through the fast path), otherwise a fixed-seed sample, and writes
# OUTDIR/NAME.json and OUTDIR/table.md.  `make twin-table` runs it (tens of minutes on 2 cores).
set -eu
cli=$1
out=$2
mkdir -p "$out"
run() { # NAME MODE...
    name=$1
    shift
    echo "== $name $*" >&2
    "$cli" ulp --impl "$name" --json --no-progress "$@" > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name|$*" >> "$out/modes.tmp"
}
rm -f "$out/modes.tmp"
# one input of <= 16 bits, and e4m3 pairs: every input
for t in silu_bf16 polyrelu2_bf16 polyrelu3_bf16 polyrelu4_bf16 polyrelu3_bf16_e4m3 polyrelu3_e4m3_bf16 \
         polyrelu2_bwd_bf16 polyrelu3_bwd_bf16 polyrelu4_bwd_bf16 polyrelu3_bwd_e5m2 swiglu_e4m3_bf16; do
    run $t --exhaustive
done
# every bf16 pair (2^32) of the SwiGLU forward: the fast path decides almost all of them
for t in swiglu_bf16 swiglu_bf16_e4m3; do
    run $t --exhaustive
done
# no fast path (derivatives): MPFR on a fixed-seed sample of 2^20 inputs.  The Smooth-SwiGLU twins are
# not sampled: their scale input must match the data (s = 2^-ceil(log2 amax) of the channel), which
# independent samples of (g, u, s) are not; with such an s their output is RN(h s) for h = swiglu_bf16's
# fp32 value and s a power of two, i.e. swiglu's accuracy (kernels/README.md).
for t in swiglu_bwd_g_bf16 swiglu_bwd_u_bf16 swiglu_bwd_g_e5m2; do
    run $t --sample 1048576 --seed 1
done
mv "$out/modes.tmp" "$out/modes.txt"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def pct(a, n):  # never rounds a miss up to 100%
    return "100%" if a == n else "%.4f%%" % min(100.0 * a / n, 99.9999)
rows = ["| twin | inputs | outputs | correctly rounded | faithful (≤ 1 ulp) | max ulp (finite) | worst input → output (correctly rounded) | class mismatches |",
        "|---|---|---|---|---|---|---|---|"]
for line in open(out + "/modes.txt"):
    name, mode = line.rstrip("\n").split("|", 1)
    o = json.load(open("%s/%s.json" % (out, name)))
    n = o["count"]
    fin = [w for w in o["worst"] if w["ulp"] != "inf"]
    worst = "—"
    if fin and o["max_ulp"] > 0:
        w = fin[0]
        worst = "%s → %s (%s)" % (", ".join(i["hexfloat"] for i in w["inputs"]), w["output"]["hexfloat"], w["reference"]["hexfloat"])
    elif o["worst"]:
        w = o["worst"][0]
        worst = "class mismatch: %s → %s (%s)" % (", ".join(i["hexfloat"] for i in w["inputs"]), w["output"]["hexfloat"], w["reference"]["hexfloat"])
    what = "all %d" % n if "exhaustive" in mode else "%d sampled (seed 1)" % n
    rows.append("| `%s` | %s | %s | %s | %s | %.6g | %s | %d |" % (
        name, " ".join(o["input_formats"]) + " → " + o["format"], what, pct(o["correctly_rounded"], n),
        pct(o["faithful"], n), o["max_ulp"], worst, o["mismatched_special"]))
open(out + "/table.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
