#!/usr/bin/env python3
"""peers_semantics.py — the conversion semantics of PyTorch and ml_dtypes next to `fp8lab convert`.

    make peers-table PYTHON=ENV/bin/python     # ENV: a venv with numpy, torch and ml_dtypes
    make peers-check PYTHON=ENV/bin/python     # exit 1 when numerics/CONVERT.md's table is stale
    ENV/bin/python experiments/torchval/peers_semantics.py [--doc FILE] [--check | --print]

Every conversion below is run, none is typed: the same fixed list of probe inputs goes into each
target format (bf16, fp16, e4m3 = float8_e4m3fn, e5m2, e4m3fnuz, e5m2fnuz) through
  * torch:     torch.from_numpy(x).to(dtype) on the CPU,
  * ml_dtypes: x.astype(dtype) (fp16: numpy's own float16, as ml_dtypes has none),
  * fp8lab:    `fp8lab convert --to FMT` on a .npy of x, with its default overflow policy, with
               --saturate and --no-saturate, and for float64 inputs also through `--to fp32` first,
and the encodings are compared bit for bit.  Each peer converts the probes twice, once as
one-element arrays and once tiled into a long array (the vectorised path); a cell shows both where
they differ.  The probes are derived from `fp8lab formats --json` (max, the RNE overflow boundary,
epsilon, the smallest subnormal), so they follow the formats' definitions.

The Markdown (a summary per peer, then every probe) replaces the text between the markers
<!-- peers-table --> and <!-- /peers-table --> of --doc (numerics/CONVERT.md).  --check writes
nothing and exits 1 when that text differs from a fresh probe (the date aside); --print only prints.
The document is rewritten, or checked, only when both peers are importable, so that a partial run
cannot drop a column: with one missing it prints the table (--check: nothing) and SKIPPED; without
numpy, or without either peer, SKIPPED.  Each SKIPPED says how to install what is missing (exit 0).
The fp8lab CLI: --cli, else $FP8LAB, else build/fp8lab.
"""
import argparse
import datetime
import difflib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DOC = os.path.join(REPO, "numerics", "CONVERT.md")
BEGIN, END = "<!-- peers-table -->", "<!-- /peers-table -->"
HOWTO = ("python3 -m venv ENV && ENV/bin/pip install numpy torch ml_dtypes; "
         "then: make peers-table PYTHON=ENV/bin/python")

# fp8lab's name -> (torch dtype name, ml_dtypes dtype name or "numpy:NAME")
FORMATS = [
    ("bf16", "bfloat16", "bfloat16"),
    ("fp16", "float16", "numpy:float16"),
    ("e4m3", "float8_e4m3fn", "float8_e4m3fn"),
    ("e5m2", "float8_e5m2", "float8_e5m2"),
    ("e4m3fnuz", "float8_e4m3fnuz", "float8_e4m3fnuz"),
    ("e5m2fnuz", "float8_e5m2fnuz", "float8_e5m2fnuz"),
]

CLASSES = [  # (key, name in the tables)
    ("sat", "Inf and overflow"),
    ("nan", "NaN"),
    ("tie", "ties"),
    ("sub", "subnormals"),
    ("dbl", "float64 inputs"),
]

TILE = 256  # copies of a probe in the long array: long enough for every vector path


def skip(what):
    print("peers-table: SKIPPED: %s has no %s.  To run it: %s" % (sys.executable, what, HOWTO))
    sys.exit(0)


# ---- numbers --------------------------------------------------------------------------------------
def hexf(x):
    """A float's hex form without trailing zeros: 0x1.d00002p+8."""
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    s = float.hex(x)
    m = re.match(r"(-?0x[01])(?:\.([0-9a-f]*?))?0*p([+-]\d+)$", s)
    if not m:
        return s
    return "%s%s%sp%s" % (m.group(1), "." if m.group(2) else "", m.group(2) or "", m.group(3))


class Probe:
    def __init__(self, cls, label, src, value=None, bits=None):
        self.cls, self.label, self.src = cls, label, src  # src: "f32" or "f64"
        self.value, self.bits = value, bits  # one of them: a float, or the source's bit pattern

    def array(self, np):
        if self.bits is not None:
            ut = np.uint32 if self.src == "f32" else np.uint64
            return np.array([self.bits], dtype=ut).view(np.float32 if self.src == "f32" else np.float64)
        a = np.array([self.value], dtype=np.float32 if self.src == "f32" else np.float64)
        if float(a[0]) != self.value:
            raise ValueError("probe %s: %r is not a %s" % (self.label, self.value, self.src))
        return a

    def input_text(self):
        if self.bits is not None:
            return "NaN `0x%0*x` (%s)" % (8 if self.src == "f32" else 16, self.bits, self.src)
        return "`%s` (%s)" % (hexf(self.value), self.src)


def probes_for(np, f):
    """The probe list of one format, f: its entry of `fp8lab formats --json`."""
    big, mx = float.fromhex(f["rne_overflow_boundary_hex"]), float.fromhex(f["max_finite_hex"])
    eps, s = float.fromhex(f["epsilon_hex"]), float.fromhex(f["min_subnormal_hex"])

    def f32_step(x, to):
        return float(np.nextafter(np.float32(x), np.float32(to)))
    P = [
        Probe("sat", "+Inf", "f32", math.inf),
        Probe("sat", "−Inf", "f32", -math.inf),
        Probe("sat", "max", "f32", mx),
        Probe("sat", "B less 1 float32 ulp", "f32", f32_step(big, 0.0)),
        Probe("sat", "B", "f32", big),
        Probe("sat", "B plus 1 float32 ulp", "f32", f32_step(big, math.inf)),
        Probe("sat", "−(B plus 1 float32 ulp)", "f32", -f32_step(big, math.inf)),
        Probe("nan", "quiet", "f32", bits=0x7FC00000),
        Probe("nan", "quiet, negative", "f32", bits=0xFFC00000),
        Probe("nan", "signalling, payload 1", "f32", bits=0x7F800001),
        Probe("nan", "every payload bit, negative", "f32", bits=0xFFFFFFFF),
        Probe("nan", "quiet", "f64", bits=0x7FF8000000000000),
        Probe("nan", "quiet, negative", "f64", bits=0xFFF8000000000000),
        Probe("tie", "1 + ε/2", "f32", 1 + eps / 2),
        Probe("tie", "1 + 3ε/2", "f32", 1 + 3 * eps / 2),
        Probe("tie", "−(1 + ε/2)", "f32", -(1 + eps / 2)),
        Probe("sub", "s/2", "f32", s / 2),
        Probe("sub", "3s/2", "f32", 3 * s / 2),
        Probe("sub", "−s/4", "f32", -s / 4),
    ]
    if s / 2 < 2.0 ** -126:  # the format reaches float32's subnormals: float32 subnormal inputs
        P += [Probe("sub", "float32 subnormal", "f32", float(np.array([0x00400000], np.uint32).view(np.float32)[0])),
              Probe("sub", "largest float32 subnormal", "f32",
                    float(np.array([0x007FFFFF], np.uint32).view(np.float32)[0]))]
    for label, tie, x in (("1 + ε/2 + 2^-40", 1 + eps / 2, 1 + eps / 2 + 2.0 ** -40),
                          ("B·(1 − 2^-40)", big, big * (1 - 2.0 ** -40)),
                          ("s/2·(1 + 2^-30)", s / 2, s / 2 * (1 + 2.0 ** -30))):
        # x lies just beside a tie of the format, and rounding it to float32 lands on the tie
        if x == tie or float(np.float32(x)) != tie:
            raise ValueError("probe %s of %s: float32 does not round it onto the tie" % (label, f["name"]))
        P.append(Probe("dbl", label, "f64", x))
    return P


# ---- the converters -------------------------------------------------------------------------------
def bits_of(np, a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8 if a.itemsize == 1 else np.uint16 if a.itemsize == 2 else np.uint32).astype(np.int64)


class Fp8lab:
    def __init__(self, cli, np):
        self.cli, self.np = cli, np
        self.tmp = tempfile.mkdtemp(prefix="peers-semantics-")

    def run(self, *args):
        p = subprocess.run([self.cli] + list(args), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("%s %s: exit %d: %s" % (self.cli, " ".join(args), p.returncode, p.stderr.strip()))
        return p.stdout

    def formats(self):
        return {f["name"]: f for f in json.loads(self.run("formats", "--json"))["formats"]}

    def convert(self, x, fmt, policy=None, via_fp32=False):
        """x (float32 or float64 array) -> the encodings (int64), through the CLI."""
        np = self.np
        src = os.path.join(self.tmp, "x.npy")
        np.save(src, x)
        if via_fp32:
            self.run("convert", "--to", "fp32", src, os.path.join(self.tmp, "x32.npy"))
            src = os.path.join(self.tmp, "x32.npy")
        out = os.path.join(self.tmp, "y.npy")
        self.run(*(["convert", "--to", fmt] + ([policy] if policy else []) + [src, out]))
        return bits_of(np, np.load(out))

    def close(self):
        for n in os.listdir(self.tmp):
            os.remove(os.path.join(self.tmp, n))
        os.rmdir(self.tmp)


# fp8lab's ways of converting: (key, text, overflow flag, through `--to fp32` first).  "default"
# first; the others are tried, in this order, to reproduce a peer.
OPTIONS = [
    ("default", "default", None, False),
    ("sat", "`--saturate`", "--saturate", False),
    ("nosat", "`--no-saturate`", "--no-saturate", False),
    ("via", "via `--to fp32`", None, True),
    ("via-sat", "via `--to fp32`, `--saturate`", "--saturate", True),
    ("via-nosat", "via `--to fp32`, `--no-saturate`", "--no-saturate", True),
]


def fp8lab_results(fl, np, fmt, probes):
    """{option key: [encoding per probe]}.  The via-fp32 options apply to float64 inputs; a float32
    input is its own float32 value, so there they equal the direct ones."""
    res = {o[0]: [None] * len(probes) for o in OPTIONS}
    for src in ("f32", "f64"):
        idx = [i for i, p in enumerate(probes) if p.src == src]
        if not idx:
            continue
        x = np.concatenate([probes[i].array(np) for i in idx])
        for key, _, flag, via in OPTIONS:
            y = fl.convert(x, fmt, flag, via_fp32=via and src == "f64")
            for j, i in enumerate(idx):
                res[key][i] = int(y[j])
    return res


def peer_results(np, convert, probes):
    """[(tiled, alone)] per probe: the peer's encoding in a long array and as a one-element array."""
    out = []
    for p in probes:
        a = p.array(np)
        alone = int(convert(a)[0])
        tiled = convert(np.tile(a, TILE))
        if len(set(tiled.tolist())) != 1:
            raise RuntimeError("probe %s: one input gave several encodings in one array" % p.label)
        out.append((int(tiled[0]), alone))
    return out


def torch_converter(np, torch, dt):
    view = torch.uint8 if dt.itemsize == 1 else torch.int16

    def conv(a):
        y = torch.from_numpy(a).to(dt).view(view).numpy()
        return y.astype(np.int64) & (0xFF if dt.itemsize == 1 else 0xFFFF)
    return conv


def numpy_converter(np, dt):
    def conv(a):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bits_of(np, a.astype(dt))
    return conv


# ---- the tables -----------------------------------------------------------------------------------
def enc(v, fmt_bits):
    return "`0x%0*x`" % (fmt_bits // 4, v)


def peer_cell(r, default, bits):
    tiled, alone = r
    t = enc(tiled, bits)
    if tiled != default:
        t = "**%s**" % t
    if alone != tiled:
        t += " (alone: %s)" % enc(alone, bits)
    return t


def matches(r, v):
    return r[0] == v and r[1] == v


def markdown(meas):
    """meas: {"header": str, "peers": [(name, label)], "formats": [per format dict]}."""
    peers = meas["peers"]
    out = [meas["header"], ""]
    out += ["fp8lab's default overflow policy, probed with +Inf: %s." % "; ".join(
        "%s: %s" % (pol, ", ".join(names)) for pol, names in meas["policies"]), ""]
    # summary per peer
    for pkey, plabel in peers:
        out += ["**%s** against `fp8lab convert`'s default: \"same\" where every probe of the row gives the "
                "same encoding; otherwise how many differ and the first `convert` option that reproduces all "
                "of the row's probes, or that none does." % plabel, ""]
        out.append("| | " + " | ".join(f["name"] for f in meas["formats"]) + " |")
        out.append("|---|" + "---|" * len(meas["formats"]))
        for ckey, cname in CLASSES:
            cells = []
            for f in meas["formats"]:
                rows = [i for i, p in enumerate(f["probes"]) if p.cls == ckey]
                pr = f["peers"].get(pkey)
                if pr is None:
                    cells.append("n/a")
                    continue
                d = f["fp8lab"]["default"]
                ndiff = sum(1 for i in rows if not matches(pr[i], d[i]))
                if ndiff == 0:
                    cells.append("same")
                    continue
                opt = next((txt for k, txt, _, _ in OPTIONS[1:]
                            if all(matches(pr[i], f["fp8lab"][k][i]) for i in rows)), None)
                cells.append("%d of %d differ: %s" % (ndiff, len(rows), opt if opt else "no option"))
            out.append("| %s | %s |" % (cname, " | ".join(cells)))
        out.append("")
    # every probe
    out += ["Every probe.  B is the format's RNE overflow boundary, max + ½ ulp (`fp8lab formats`), ε its "
            "epsilon, s its smallest subnormal; float64 inputs are rounded once by fp8lab.  A peer's encoding is "
            "bold where it differs from fp8lab's default; the fp8lab column then names the option that gives the "
            "peer's encoding.", ""]
    out.append("| behaviour | format | probe | input | fp8lab (default) | " + " | ".join(l for _, l in peers) + " |")
    out.append("|---|---|---|---|---|" + "---|" * len(peers))
    for ckey, cname in CLASSES:
        for f in meas["formats"]:
            bits = f["bits"]
            for i, p in enumerate(f["probes"]):
                if p.cls != ckey:
                    continue
                d = f["fp8lab"]["default"][i]
                fl = enc(d, bits)
                notes = []
                for pkey, _ in peers:
                    pr = f["peers"].get(pkey)
                    if pr is None or matches(pr[i], d):
                        continue
                    want = pr[i][0]
                    opt = next((txt for k, txt, _, _ in OPTIONS[1:] if f["fp8lab"][k][i] == want), None)
                    note = "%s: %s" % (enc(want, bits), opt if opt else "no option")
                    if note not in notes:
                        notes.append(note)
                if notes:
                    fl += "; " + "; ".join(notes)
                pcells = []
                for pkey, _ in peers:
                    pr = f["peers"].get(pkey)
                    pcells.append("n/a" if pr is None else peer_cell(pr[i], d, bits))
                out.append("| %s | %s | %s | %s | %s | %s |" % (cname, f["name"], p.label, p.input_text(), fl,
                                                                " | ".join(pcells)))
    return "\n".join(out)


def measure(np, torch, ml_dtypes, fl):
    fmts = fl.formats()
    peers = []
    vers = []
    if torch is not None:
        peers.append(("torch", "torch %s" % torch.__version__))
        vers.append("torch %s (CPU, `torch.backends.cpu.get_cpu_capability()` = %s)" % (
            torch.__version__, torch.backends.cpu.get_cpu_capability()))
    if ml_dtypes is not None:
        peers.append(("ml_dtypes", "ml_dtypes %s" % ml_dtypes.__version__))
        vers.append("ml_dtypes %s" % ml_dtypes.__version__)
    vers.append("numpy %s" % np.__version__)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    header = "Probed on %s by `make peers-table` (experiments/torchval/peers_semantics.py) with %s." % (
        date, ", ".join(vers))
    if ml_dtypes is not None:
        header += "  ml_dtypes has no fp16: its fp16 column is numpy's `float16`."
    out_fmts, pol = [], {}
    for name, tname, mname in FORMATS:
        f = fmts[name]
        probes = probes_for(np, f)
        res = fp8lab_results(fl, np, name, probes)
        inf = next(i for i, p in enumerate(probes) if p.label == "+Inf")
        d = res["default"][inf]
        kind = ("saturating (±Inf and overflow give ±max)" if d == res["sat"][inf] != res["nosat"][inf]
                else "not saturating" if d == res["nosat"][inf] else "other")
        pol.setdefault(kind, []).append(name)
        pr = {}
        if torch is not None and hasattr(torch, tname):
            pr["torch"] = peer_results(np, torch_converter(np, torch, getattr(torch, tname)), probes)
        if ml_dtypes is not None:
            mod, attr = (np, mname[6:]) if mname.startswith("numpy:") else (ml_dtypes, mname)
            if hasattr(mod, attr):
                pr["ml_dtypes"] = peer_results(np, numpy_converter(np, np.dtype(getattr(mod, attr))), probes)
        out_fmts.append({"name": name, "bits": f["bits"] if f["bits"] >= 8 else 8, "probes": probes,
                         "fp8lab": res, "peers": pr})
    return {"header": header, "peers": peers, "formats": out_fmts, "policies": list(pol.items())}


def doc_block(text, path):
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        raise SystemExit("peers-table: %s has no %s ... %s markers" % (path, BEGIN, END))
    return i + len(BEGIN), j


def undated(s):
    return re.sub(r"Probed on \d{4}-\d{2}-\d{2}", "Probed on DATE", s).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--doc", default=DOC, help="the Markdown file whose peers-table block is rewritten")
    ap.add_argument("--cli", default=None, help="the fp8lab CLI (default: $FP8LAB, else build/fp8lab)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 if the doc's table differs from a fresh probe")
    g.add_argument("--print", action="store_true", help="print the table, write nothing")
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError:
        skip("numpy")
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if torch is None and ml_dtypes is None:
        skip("torch and no ml_dtypes")
    cli = args.cli or os.environ.get("FP8LAB") or os.path.join(REPO, "build", "fp8lab")
    if not os.access(cli, os.X_OK):
        print("peers-table: no fp8lab CLI at %s (build it: make, or pass --cli / FP8LAB=)" % cli)
        return 2
    fl = Fp8lab(cli, np)
    try:
        md = markdown(measure(np, torch, ml_dtypes, fl))
    finally:
        fl.close()
    missing = [n for n, m in (("torch", torch), ("ml_dtypes", ml_dtypes)) if m is None]
    if args.print:
        print(md)
        return 0
    if missing:  # the document's table has a column for each peer: leave it as it is
        if not args.check:
            print(md)
        print("peers-table: SKIPPED %s %s: %s has no %s.  To run it: %s" % (
            "checking" if args.check else "writing", args.doc, sys.executable, " or ".join(missing), HOWTO))
        return 0
    with open(args.doc, encoding="utf-8") as f:
        text = f.read()
    a, b = doc_block(text, args.doc)
    if args.check:
        old, new = undated(text[a:b]), undated(md)
        if old == new:
            print("peers-table: %s is in sync with a fresh probe" % args.doc)
            return 0
        sys.stdout.writelines(difflib.unified_diff((old + "\n").splitlines(True), (new + "\n").splitlines(True),
                                                   args.doc + " (table)", "fresh probe"))
        print("\npeers-table: %s differs from a fresh probe: run make peers-table PYTHON=%s" % (
            args.doc, sys.executable))
        return 1
    new_text = text[:a] + "\n" + md + "\n" + text[b:]
    if new_text != text:
        tmp = args.doc + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new_text)
        os.replace(tmp, args.doc)
    print("peers-table: %s %s" % ("rewrote" if new_text != text else "unchanged:", args.doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
