#!/bin/sh
# Regenerate the seed corpus tests/fuzz/corpus/<target>/ of the fuzz harnesses (tests/fuzz/README.md):
# small valid files of each kind, made with the CLI where it writes them (convert, train, ulp --json)
# and with Python's standard library where it does not (.npy and .safetensors inputs), plus damaged
# variants.  Crash reproducers (corpus/<target>/crash-*) are kept.  Deterministic: rerunning it
# rewrites the same bytes.
# Usage: sh tests/fuzz/make_corpus.sh [FP8LAB]     (default build/fp8lab; `make` builds it)
set -eu
cd "$(dirname "$0")/../.."
F=${1:-build/fp8lab}
F=$(cd "$(dirname "$F")" && pwd)/$(basename "$F")
C=$PWD/tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for t in npy safetensors checkpoint runcsv mechanism ulpjson; do
    mkdir -p "$C/$t"
    find "$C/$t" -type f ! -name 'crash-*' -delete
done

# ---- npy: hand-written headers of every dtype and version, then convert's outputs ----
python3 - "$C/npy" <<'EOF'
import struct, sys
d = sys.argv[1]
def npy(name, descr, shape, data, fortran=False, ver=(1, 0), hdr=None, pad=True):
    h = hdr if hdr is not None else "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", "(%s)" % "".join("%d, " % s for s in shape) if len(shape) != 1 else "(%d,)" % shape[0])
    ln = 4 if ver[0] >= 2 else 2
    if pad:
        total = 6 + 2 + ln + len(h) + 1
        h += " " * ((-total) % 64)
    h += "\n"
    lenf = struct.pack("<I" if ln == 4 else "<H", len(h))
    open("%s/%s" % (d, name), "wb").write(b"\x93NUMPY" + bytes(ver) + lenf + h.encode() + data)
f4 = struct.pack("<6f", 1.5, -2.0, 0.0, 3.25, 448.0, -1e-3)
npy("f4_2x3.npy", "<f4", (2, 3), f4)
npy("f4_be.npy", ">f4", (3,), struct.pack(">3f", 1.0, -0.5, 65504.0))
npy("f2_4.npy", "<f2", (4,), struct.pack("<4H", 0x3c00, 0x7c00, 0x8001, 0x7e00))
npy("f8_2.npy", "<f8", (2,), struct.pack("<2d", 1e300, -4.5))
npy("u1_5.npy", "|u1", (5,), bytes([0, 1, 0x7e, 0x7f, 0xff]))
npy("u2_2x2.npy", "<u2", (2, 2), struct.pack("<4H", 0x3f80, 0x7f80, 0xffff, 1))
npy("u4_1.npy", "<u4", (1,), struct.pack("<I", 0x7f800001))
npy("i4_3.npy", "<i4", (3,), struct.pack("<3i", -1, 0, 7))
npy("i8_1x1x2.npy", "<i8", (1, 1, 2), struct.pack("<2q", -5, 1 << 40))
npy("f4_fortran.npy", "<f4", (2, 2), struct.pack("<4f", 1, 2, 3, 4), fortran=True)
npy("f4_0d.npy", "<f4", (), struct.pack("<f", 2.5))
npy("f4_empty.npy", "<f4", (0,), b"")
npy("f4_0x3.npy", "<f4", (0, 3), b"")
npy("f4_v2.npy", "<f4", (2,), struct.pack("<2f", 1, 2), ver=(2, 0))
npy("f4_v3.npy", "<f4", (2,), struct.pack("<2f", 1, 2), ver=(3, 0))
npy("f4_nopad.npy", "<f4", (1,), struct.pack("<f", 1), pad=False)
# damaged
npy("bad_truncated.npy", "<f4", (2, 3), f4[:10])
npy("bad_trailing.npy", "<f4", (2,), struct.pack("<3f", 1, 2, 3))
npy("bad_descr_c8.npy", "<c8", (1,), b"\0" * 8)
npy("bad_descr_i1.npy", "|i1", (1,), b"\0")
npy("bad_shape_neg.npy", "<f4", (-1,), b"")
npy("bad_shape_huge.npy", "<f4", (1 << 62, 8), b"")
npy("bad_dupkey.npy", "<f4", (1,), b"\0" * 4, hdr="{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }")
npy("bad_nokey.npy", "<f4", (1,), b"\0" * 4, hdr="{'descr': '<f4', 'shape': (1,), }")
npy("bad_version.npy", "<f4", (1,), b"\0" * 4, ver=(9, 0))
open("%s/bad_hdrlen.npy" % d, "wb").write(b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'")
open("%s/bad_magic.npy" % d, "wb").write(b"\x93NUMPZ\x01\x00\x10\x00{}              \n")
EOF
for to in e4m3 e5m2 bf16 fp16 e2m1; do
    "$F" convert --to "$to" "$C/npy/f4_2x3.npy" "$C/npy/conv_$to.npy" >/dev/null
done

# ---- safetensors: every dtype, several tensors, metadata, padding; damaged variants ----
python3 - "$C/safetensors" <<'EOF'
import json, struct, sys
d = sys.argv[1]
size = dict(F64=8, F32=4, F16=2, BF16=2, F8_E4M3=1, F8_E5M2=1, BOOL=1, U8=1, I8=1, U16=2, I16=2, U32=4, I32=4, U64=8, I64=8)
def st(name, tensors, meta=None, pad=0, hdr=None, extra=b"", hlen=None):
    h, buf = {}, b""
    if meta is not None:
        h["__metadata__"] = meta
    for tn, dt, shape, data in tensors:
        h[tn] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(buf), len(buf) + len(data)]}
        buf += data
    hb = hdr if hdr is not None else json.dumps(h, separators=(",", ":")).encode() + b" " * pad
    open("%s/%s" % (d, name), "wb").write(struct.pack("<Q", len(hb) if hlen is None else hlen) + hb + buf + extra)
f32 = struct.pack("<4f", 1.0, -2.5, 448.0, 1e-8)
st("f32_2x2.safetensors", [("x", "F32", (2, 2), f32)])
st("f16_bf16.safetensors", [("a", "F16", (3,), struct.pack("<3H", 0x3c00, 0x7bff, 0x0001)),
                            ("b", "BF16", (1, 3), struct.pack("<3H", 0x3f80, 0xff80, 0x7fc0))], pad=5)
st("fp8.safetensors", [("g", "F8_E4M3", (2, 2), bytes([0x38, 0x7e, 0x7f, 0x80])),
                       ("u", "F8_E5M2", (4,), bytes([0x3c, 0x7b, 0x7c, 0xfd]))], meta={"format": "pt"})
st("f64_0d.safetensors", [("s", "F64", (), struct.pack("<d", 3.0))])
st("ints_first.safetensors", [("i", "I32", (2,), struct.pack("<2i", -1, 2)), ("m", "BOOL", (2,), b"\x01\x00"),
                              ("y", "F32", (1,), struct.pack("<f", 0.5))])
st("all_dtypes.safetensors", [("t_" + k, k, (1,), b"\x01" * v) for k, v in size.items()])
st("empty_tensor.safetensors", [("e", "F32", (0, 4), b""), ("x", "F32", (1,), struct.pack("<f", 1))])
st("no_tensors.safetensors", [], meta={})
# damaged
st("bad_overlap.safetensors", [], hdr=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}', extra=b"\0" * 6)
st("bad_hole.safetensors", [], hdr=b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', extra=b"\0\0")
st("bad_trailing.safetensors", [("x", "F32", (1,), f32[:4])], extra=b"\0")
st("bad_truncated.safetensors", [("x", "F32", (2, 2), f32[:12])])
st("bad_hlen.safetensors", [("x", "F32", (1,), f32[:4])], hlen=1 << 40)
st("bad_dtype.safetensors", [("x", "F128", (1,), b"\0" * 16)])
st("bad_count.safetensors", [], hdr=b'{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}}', extra=b"\0" * 4)
st("bad_shape.safetensors", [], hdr=b'{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', extra=b"\0" * 4)
st("bad_overflow.safetensors", [], hdr=b'{"x":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}', extra=b"\0" * 8)
st("bad_array.safetensors", [], hdr=b'[1,2]')
st("bad_meta.safetensors", [], hdr=b'{"__metadata__":{"k":1}}')
st("bad_dupkey.safetensors", [], hdr=b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', extra=b"\0")
open("%s/bad_short.safetensors" % d, "wb").write(b"\x02\0\0\0")
EOF

# ---- checkpoint and run folders: tiny training runs ----
tiny="--width 4 --layers 1 --heads 1 --ffn 4 --seq 2 --batch 1 --data-len 4096 --steps 12 --chan-every 4 --threads 1 --quiet"
"$F" train $tiny --out "$T/swiglu" >/dev/null
"$F" train $tiny --act gelu --out "$T/gelu" >/dev/null
cp "$T/swiglu/checkpoint.bin" "$C/checkpoint/tiny.bin"
python3 - "$C/checkpoint" <<'EOF'
import struct, sys, zlib
d = sys.argv[1]
b = open(d + "/tiny.bin", "rb").read()
magic, ver, ns, payload, crc, z = struct.unpack("<8sIIQII", b[:32])
secs, off = [], 32
for i in range(ns):
    sid, z2, s = struct.unpack("<IIQ", b[off:off + 16]); off += 16
    secs.append((sid, b[off:off + s])); off += s
def ck(name, secs, ver=ver, magic=magic, fix=True, cut=None, ns=None, crc_xor=0):
    p = b"".join(struct.pack("<IIQ", sid, 0, len(x)) + x for sid, x in secs)
    out = struct.pack("<8sIIQII", magic, ver, len(secs) if ns is None else ns, len(p), (zlib.crc32(p) ^ crc_xor) & 0xffffffff, 0) + p
    open("%s/%s" % (d, name), "wb").write(out if cut is None else out[:cut])
small = [s for s in secs if s[0] in (1, 2, 6)]  # configuration, state, recipe: what a fork reads first
ck("cfg_state_recipe.bin", small)
ck("cfg_state.bin", [s for s in secs if s[0] in (1, 2)])
ck("bad_crc.bin", small, crc_xor=1)
ck("bad_version.bin", small, ver=4)
ck("bad_magic.bin", small, magic=b"FP8LCKPU")
ck("bad_truncated.bin", small, cut=1000)
ck("bad_nsec.bin", small, ns=33)
ck("bad_overrun.bin", [(1, secs[0][1]), (2, secs[1][1][:8])] , ns=3)
ck("empty_sections.bin", [])
EOF

# ---- run folders (attribute's readers): config.json ## metrics.csv ## channels.csv ## records.csv ----
runcsv() { # DIR OUT [config.json] [metrics.csv] [channels.csv] [records.csv]: the folder's files, or replacements
    src=$1 out=$2; shift 2
    {
        cat "${1:-$src/config.json}"; printf '\n##\n'
        cat "${2:-$src/metrics.csv}"; printf '\n##\n'
        cat "${3:-$src/channels.csv}"; printf '\n##\n'
        cat "${4:-$src/records.csv}"
    } > "$C/runcsv/$out"
}
runcsv "$T/swiglu" swiglu.run
runcsv "$T/gelu" gelu.run
head -n 7 "$T/swiglu/channels.csv" > "$T/ch_short.csv"              # a step block cut short
runcsv "$T/swiglu" bad_channels_short.run "" "" "$T/ch_short.csv"
head -c -3 "$T/swiglu/records.csv" > "$T/rec_cut.csv"                # cut inside its last field
runcsv "$T/swiglu" bad_records_cut.run "" "" "" "$T/rec_cut.csv"
head -n 1 "$T/swiglu/metrics.csv" > "$T/m_hdr.csv"                    # header only
runcsv "$T/swiglu" bad_metrics_header_only.run "" "$T/m_hdr.csv"
sed 's/"ffn": *[0-9]*/"ffn": 1048576/; s/"layers": *[0-9]*/"layers": 16/' "$T/swiglu/config.json" > "$T/cfg_big.json"
runcsv "$T/swiglu" bad_config_huge.run "$T/cfg_big.json"              # sizes from a config (issue 24)
sed '3s/^[0-9]*/1/' "$T/swiglu/metrics.csv" > "$T/m_back.csv"          # steps going back
runcsv "$T/swiglu" bad_metrics_back.run "" "$T/m_back.csv"
sed '2,$s/,[^,]*$/,nan/' "$T/swiglu/channels.csv" > "$T/ch_nan.csv"  # every row non-finite: excluded
runcsv "$T/swiglu" channels_nan.run "" "" "$T/ch_nan.csv"

# ---- the lever search's runs (mechanism --judge-search): SwiGLU metrics.csv ## GeLU metrics.csv ----
mech() { # OUT SWIGLU-METRICS GELU-METRICS
    { cat "$2"; printf '\n##\n'; cat "$3"; } > "$C/mechanism/$1"
}
mech pair.run "$T/swiglu/metrics.csv" "$T/gelu/metrics.csv"
mech swapped.run "$T/gelu/metrics.csv" "$T/swiglu/metrics.csv"
head -n 5 "$T/swiglu/metrics.csv" > "$T/m_short.csv"
mech bad_cut_short.run "$T/m_short.csv" "$T/gelu/metrics.csv"
head -c -2 "$T/gelu/metrics.csv" > "$T/m_nonl.csv"
mech bad_no_newline.run "$T/swiglu/metrics.csv" "$T/m_nonl.csv"
mech bad_header_only.run "$T/m_hdr.csv" "$T/m_hdr.csv"
sed '2s/^[0-9]*/1e18/' "$T/swiglu/metrics.csv" > "$T/m_far.csv"      # the first step far away
mech bad_step_far.run "$T/m_far.csv" "$T/gelu/metrics.csv"
sed '2s/^[0-9]*/-1/' "$T/swiglu/metrics.csv" > "$T/m_neg.csv"        # a negative step
mech bad_step_negative.run "$T/m_neg.csv" "$T/gelu/metrics.csv"

# ---- ulp --json reports (ulp --merge's reader): one report, or two separated by a line "##" ----
cd "$T"
"$F" ulp --impl silu_f32_naive --range 0x3f000000:0x3f000040 --json --no-progress > a.json 2>/dev/null
"$F" ulp --impl silu_f32_naive --range 0x3f000040:0x3f000080 --json --no-progress > b.json 2>/dev/null
"$F" ulp --impl swiglu_bf16 --range 0:64 --json --no-progress > g.json 2>/dev/null
python3 - "$C/ulpjson" <<'EOF2'
import json, sys
d = sys.argv[1]
a, b, g = (json.load(open(n)) for n in ("a.json", "b.json", "g.json"))
def text(r):
    return json.dumps(r, separators=(",", ":"))
def put(name, *reports, raw=None):
    open("%s/%s" % (d, name), "w").write(raw if raw is not None else "\n##\n".join(text(r) for r in reports))
def edit(r, f):
    x = json.loads(json.dumps(r)); f(x); return x
put("silu_a.json", a)
put("swiglu.json", g)
put("silu_a_b.merge", a, b)
put("silu_a_swiglu.merge", a, g)                          # not shards of one run
put("silu_a_a.merge", a, a)                               # overlapping shards
for k in ("overflow", "format", "function", "count", "max_ulp", "histogram", "worst", "shards", "input_formats"):
    put("bad_no_%s.json" % k, edit(a, lambda x: x.pop(k)))
put("bad_max_ulp_neg.json", edit(a, lambda x: x.update(max_ulp=-1)))
put("bad_count_0.json", edit(a, lambda x: x.update(count=0)))
put("bad_count_neg.json", edit(a, lambda x: x.update(count=-5)))
put("bad_format.json", edit(a, lambda x: x.update(format="fp99")))
put("bad_inputs_8.json", edit(g, lambda x: (x.update(input_formats=["bf16"] * 8),
    [w.update(inputs=w["inputs"] * 4) for w in x["worst"]])))          # 8 inputs: a stack overflow before
put("bad_inputs_5.json", edit(g, lambda x: x.update(input_formats=["bf16"] * 5)))
put("bad_truncated.json", raw=text(a)[:len(text(a)) // 2])
put("bad_array.json", raw="[]")
EOF2
cd - >/dev/null
echo "corpus: $(find "$C" -type f | wc -l) files, $(du -sk "$C" | cut -f1) KiB in $C"
