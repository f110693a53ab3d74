#!/usr/bin/env python3
"""torch_table.py — PyTorch's activation kernels judged by `fp8lab ulp` against the MPFR reference.

    make torch-table PYTHON=ENV/bin/python          # ENV: a venv with torch and numpy
    ENV/bin/python experiments/torchval/torch_table.py [--out DIR] [--parts bf16,fp16,fp32,fp8]

Per device present (the CPU; CUDA where torch.cuda.is_available()), torch computes each function on
every bf16 and fp16 encoding (65,536 each, NaN and +-Inf included), on float32 over four stated
binades plus a seeded uniform sample of bit patterns, SwiGLU as F.silu(g) * u on seeded samples of
pairs, softmax on seeded rows; and the float8 casts x.to(torch.float8_e4m3fn / float8_e5m2) are
compared bit for bit with `fp8lab convert`.  fp8lab is the judge: this script only produces outputs
(through experiments/python/fp8lab.py) and reads the CLI's JSON reports.

Writes DIR/torch-table.json (every entry ever run into DIR, keyed by torch version, device and ISA:
another version or device gets its own entry, a rerun replaces its own) and DIR/torch-table.md.
Without torch or numpy it says how to get them, prints SKIPPED and exits 0.
The findings are explained in experiments/torchval/TORCH.md.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "experiments", "python"))
try:
    import fp8lab  # needs numpy: main() says how to get it where it is missing
except ImportError:
    fp8lab = None

HOWTO = ("python3 -m venv ENV && ENV/bin/pip install torch numpy; then: make torch-table PYTHON=ENV/bin/python")

# float32: these binades, every encoding in each (the first 2^span with --f32-span), then a sample
F32_BINADES = [  # (name, first bit pattern)
    ("-[2^6, 2^7)", 0xC2800000),   # exp(-x) overflows below -88.7: silu, sigmoid, elu tails
    ("-[2^2, 2^3)", 0xC0800000),   # 1 + erf / 1 + tanh cancel: gelu, gelu_tanh, mish
    ("[2^-1, 2^0)", 0x3F000000),   # the middle
    ("[2^4, 2^5)", 0x41800000),    # softplus's threshold (20), large x
]

SCHEMA = "fp8lab-torch-table/1"


def skip(what):
    print("torch-table: SKIPPED: %s has no %s.  To run it: %s" % (sys.executable, what, HOWTO))
    sys.exit(0)


def pct(a, n):  # never rounds a miss up to 100%
    if n == 0:
        return "—"
    return "100%" if a == n else "%.4f%%" % min(100.0 * a / n, 99.9999)


def case_dict(c):
    if c is None:
        return None
    d = {"inputs": c.inputs, "inputs_hex": c.inputs_hex, "output": c.output, "output_hex": c.output_hex,
         "reference": c.reference, "reference_hex": c.reference_hex, "ulp": fp8lab.fmt_ulp(c.ulp)}
    if c.row is not None:
        d["row"], d["column"] = c.row, c.column
    return d


def case_text(c):
    if c is None:
        return "—"
    where = " (row %s, col %s)" % (c["row"], c["column"]) if "row" in c else ""
    return "%s → %s (%s)%s" % (", ".join(c["inputs"]), c["output"], c["reference"], where)


class Table:
    def __init__(self, np, torch, fp8lab, dev, args):
        self.np, self.torch, self.fp8lab, self.dev, self.args = np, torch, fp8lab, dev, args
        self.F = torch.nn.functional
        self.rows, self.casts, self.timings = [], [], {}

    # ---- inputs ----------------------------------------------------------------------------------
    def all16(self, fmt):
        """Every encoding of bf16 / fp16 as a tensor on the device (index = bit pattern)."""
        np, torch = self.np, self.torch
        codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
        if fmt == "bf16":
            t = torch.from_numpy(codes.view(np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(codes.view(np.float16).copy())
        return t.to(self.dev)

    def f32_pieces(self):
        """[(name, float32 tensor)]: the binades, then the uniform sample of bit patterns."""
        np, torch = self.np, self.torch
        n = 1 << self.args.f32_span
        out = []
        for name, lo in F32_BINADES:
            bits = np.arange(lo, lo + n, dtype=np.uint64).astype(np.uint32)
            out.append((name if n == 1 << 23 else "%s (first 2^%d)" % (name, self.args.f32_span),
                        torch.from_numpy(bits.view(np.float32))))
        rng = np.random.default_rng(self.args.seed)
        bits = rng.integers(0, 1 << 32, size=self.args.f32_sample, dtype=np.uint64).astype(np.uint32)
        out.append(("%d uniform bit patterns (seed %d)" % (self.args.f32_sample, self.args.seed),
                    torch.from_numpy(bits.view(np.float32))))
        return [(nm, t.to(self.dev)) for nm, t in out]

    def pair_sample(self, fmt, n):
        np, torch = self.np, self.torch
        rng = np.random.default_rng(self.args.seed)
        if fmt == "fp32":
            g = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
            u = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
            return torch.from_numpy(g).to(self.dev), torch.from_numpy(u).to(self.dev)
        b = rng.integers(0, 1 << 32, size=n, dtype=np.uint64)
        hi = (b >> np.uint64(16)).astype(np.uint16)
        lo = (b & np.uint64(0xFFFF)).astype(np.uint16)
        if fmt == "bf16":
            mk = lambda c: torch.from_numpy(c.view(np.int16)).view(torch.bfloat16)
        else:
            mk = lambda c: torch.from_numpy(c.view(np.float16))
        return mk(hi).to(self.dev), mk(lo).to(self.dev)

    # ---- judging ---------------------------------------------------------------------------------
    def judge(self, fn, pieces, fmt, params=None):
        """pieces: [(x or (g, u), y)]; one report (merged over pieces with distinct index bases), and
        the worst finite case (re-judged without non-finite outputs where the worst list holds only
        class mismatches)."""
        fp8lab = self.fp8lab
        reps, base = [], 0
        for x, y in pieces:
            reps.append(fp8lab.ulp(fn, x, y, fmt=fmt, params=params, index_base=base, threads=self.args.threads or None))
            base += int(y.numel())
        rep = reps[0] if len(reps) == 1 else fp8lab.merge(reps)
        fin = [c for c in rep.worst if c.ulp != float("inf")]
        worst_finite = fin[0] if fin else None
        if worst_finite is None and rep.infinite_errors > 0 and rep.max_ulp > 0:
            sub, base = [], 0
            for x, y in pieces:
                xs = x if isinstance(x, tuple) else (x,)
                keep = self.torch.isfinite(y.float())
                for t in xs:
                    keep &= self.torch.isfinite(t.float())
                if int(keep.sum()) == 0:
                    continue
                sub.append(fp8lab.ulp(fn, tuple(t[keep] for t in xs), y[keep], fmt=fmt, params=params,
                                      index_base=base, threads=self.args.threads or None))
                base += int(y.numel())
            if sub:
                r2 = sub[0] if len(sub) == 1 else fp8lab.merge(sub)
                fin = [c for c in r2.worst if c.ulp != float("inf")]
                worst_finite = fin[0] if fin else None
        first_mismatch = next((c for c in rep.worst if c.mismatched_special), None)
        return rep, worst_finite, first_mismatch

    def add_row(self, part, name, call, ref, fmt, inputs, short, pieces, params=None):
        t0 = time.time()
        rep, wf, mm = self.judge(ref, pieces, fmt, params)
        secs = time.time() - t0
        row = {"part": part, "function": name, "torch": call, "reference": ref, "params": params or {},
               "format": fmt, "inputs": inputs, "inputs_short": short, "count": rep.count,
               "correctly_rounded": rep.correctly_rounded, "faithful": rep.faithful,
               "mismatched_special": rep.mismatched_special, "infinite_errors": rep.infinite_errors,
               "max_ulp": fp8lab.fmt_ulp(rep.max_ulp), "mean_ulp": rep.mean_ulp, "histogram": rep.histogram,
               "worst_finite": case_dict(wf), "first_class_mismatch": case_dict(mm),
               "worst": [case_dict(c) for c in rep.worst], "judge_seconds": round(secs, 2)}
        self.rows.append(row)
        print("  %-9s %-10s vs %-9s %-5s %9d  CR %-9s max %-10s >16: %-6s class: %-4d %s" % (
            part, name, ref, fmt, rep.count, pct(rep.correctly_rounded, rep.count), fp8lab.fmt_ulp(rep.max_ulp),
            rep.histogram.get(">16", 0), rep.mismatched_special, case_text(row["worst_finite"])), flush=True)

    # ---- the parts -------------------------------------------------------------------------------
    def elementwise(self):
        F, torch = self.F, self.torch

        def gelu_aten(x):  # F.gelu without oneDNN, which serves fp32 and bf16 CPU tensors by default
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with torch.backends.mkldnn.flags(enabled=False):
                    return F.gelu(x)
        extra = []
        if self.dev == "cpu":
            extra = [("gelu", "F.gelu(x), oneDNN off", gelu_aten, [("gelu", None)])]
        return [  # (name, the torch call as text, callable, [(reference, params)])
            ("relu", "F.relu(x)", F.relu, [("relu", None)]),
            ("silu", "F.silu(x)", F.silu, [("silu", None)]),
            ("gelu", "F.gelu(x)", F.gelu, [("gelu", None)]),
        ] + extra + [
            ("gelu_tanh", "F.gelu(x, approximate='tanh')", lambda x: F.gelu(x, approximate="tanh"),
             [("gelu_tanh", None), ("gelu", None)]),
            ("sigmoid", "torch.sigmoid(x)", torch.sigmoid, [("sigmoid", None)]),
            ("tanh", "torch.tanh(x)", torch.tanh, [("tanh", None)]),
            ("softplus", "F.softplus(x)", F.softplus, [("softplus", {"beta": 1})]),
            ("mish", "F.mish(x)", F.mish, [("mish", None)]),
            ("elu", "F.elu(x)", F.elu, [("elu", {"alpha": 1})]),
            ("selu", "F.selu(x)", F.selu, [("selu", None)]),
        ]

    def part16(self, fmt):
        x = self.all16(fmt)
        for name, call, fn, refs in self.elementwise():
            y = fn(x)
            for ref, params in refs:
                self.add_row(fmt, name, call, ref, fmt, "all 65536 encodings", "all 65536", [(x, y)], params)
        self.swiglu(fmt, self.args.pair_sample)
        self.softmax(fmt)
        self.casts_from(fmt, x, "all 65536 %s encodings" % fmt)

    def part32(self):
        pieces = self.f32_pieces()
        desc = "%s; %s" % (", ".join(nm for nm, _ in pieces[:-1]), pieces[-1][0])
        for name, call, fn, refs in self.elementwise():
            pairs = [(x, fn(x)) for _, x in pieces]
            for ref, params in refs:
                self.add_row("fp32", name, call, ref, "fp32", desc, "binades + sample", pairs, params)
        self.swiglu("fp32", self.args.pair_sample // 4)
        self.softmax("fp32")

    def swiglu(self, fmt, n):
        g, u = self.pair_sample(fmt, n)
        y = self.F.silu(g) * u
        self.add_row(fmt, "swiglu", "F.silu(g) * u", "swiglu", fmt,
                     "%d uniform (g, u) bit-pattern pairs (seed %d)" % (n, self.args.seed),
                     "%d random pairs" % n, [((g, u), y)])

    def softmax(self, fmt):
        np, torch = self.np, self.torch
        rows, cols = self.args.softmax_rows, self.args.softmax_len
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[fmt]
        for scale in (1, 16):
            rng = np.random.default_rng(self.args.seed)
            x = torch.from_numpy(rng.standard_normal((rows, cols)) * scale).to(dt).to(self.dev)
            y = torch.softmax(x, dim=-1)
            self.add_row(fmt, "softmax", "torch.softmax(x, dim=-1)", "softmax", fmt,
                         "%d rows of %d, x ~ N(0, %d^2) (seed %d)" % (rows, cols, scale, self.args.seed),
                         "%d×%d, N(0, %d²)" % (rows, cols, scale), [(x, y)])

    def casts_from(self, src, x, desc):
        """x.to(float8) against `fp8lab convert`, saturating and not, bit for bit."""
        np, torch = self.np, self.torch
        xc = x.cpu()
        for tgt, tdt in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
            t0 = time.time()
            tb = x.to(tdt).cpu().view(torch.uint8).numpy()
            rec = {"source": src, "target": tgt, "torch": "x.to(torch.%s)" % str(tdt).replace("torch.", ""),
                   "inputs": desc, "count": int(tb.size), "compare": []}
            isnan8 = (lambda b: (b & 0x7F) == 0x7F) if tgt == "e4m3" else (lambda b: (b & 0x7F) > 0x7C)
            for sat in (True, False):
                fb = self.fp8lab.convert(xc, tgt, saturate=sat)
                diff = np.nonzero(tb != fb)[0]
                both_nan = isnan8(tb[diff]) & isnan8(fb[diff])
                nan_only = int(np.count_nonzero(both_nan))
                xs = self._hex_inputs(xc, list(diff[~both_nan][:8]) + list(diff[both_nan][:2]))
                rec["compare"].append({
                    "fp8lab": "convert --to %s %s" % (tgt, "--saturate" if sat else "--no-saturate"),
                    "mismatches": int(diff.size), "nan_sign_or_payload_only": nan_only,
                    "examples": [{"x": xh, "torch": "0x%02x" % tb[i], "fp8lab": "0x%02x" % fb[i]}
                                 for i, xh in xs]})
            rec["seconds"] = round(time.time() - t0, 2)
            self.casts.append(rec)
            print("  cast %-5s -> %s %9d: %s" % (src, tgt, tb.size, "; ".join(
                "%s: %d mismatches (%d NaN sign/payload only)" % (c["fp8lab"], c["mismatches"],
                                                                 c["nan_sign_or_payload_only"])
                for c in rec["compare"])), flush=True)

    def _hex_inputs(self, xc, idx):
        torch = self.torch
        out = []
        for i in idx:
            v = xc[int(i)]
            if v.dtype == torch.bfloat16:
                b = int(v.view(torch.int16).item()) & 0xFFFF
                out.append((int(i), "0x%04x (%s)" % (b, fp8lab.hexf(v))))
            elif v.dtype == torch.float16:
                b = int(v.view(torch.int16).item()) & 0xFFFF
                out.append((int(i), "0x%04x (%s)" % (b, fp8lab.hexf(v))))
            else:
                b = int(v.view(torch.int32).item()) & 0xFFFFFFFF
                out.append((int(i), "0x%08x (%s)" % (b, fp8lab.hexf(v))))
        return out

    def casts32(self):
        np, torch = self.np, self.torch
        rng = np.random.default_rng(self.args.seed)
        bits = rng.integers(0, 1 << 32, size=self.args.f32_sample, dtype=np.uint64).astype(np.uint32)
        # and every float32 in the binades around each format's overflow and underflow boundaries
        extra = []
        for lo in (0x43800000, 0xC3800000, 0x47000000, 0xC7000000, 0x3A000000, 0x36800000):
            extra.append(np.arange(lo, lo + (1 << 23), dtype=np.uint64).astype(np.uint32))
        allb = np.concatenate([bits] + extra)
        x = torch.from_numpy(allb.view(np.float32)).to(self.dev)
        self.casts_from("fp32", x, "%d uniform float32 bit patterns (seed %d) and every float32 in "
                        "±[2^8, 2^9), ±[2^15, 2^16), [2^-11, 2^-10), [2^-18, 2^-17)" %
                        (self.args.f32_sample, self.args.seed))

    def run(self):
        parts = self.args.parts
        for p, fn in (("bf16", lambda: self.part16("bf16")), ("fp16", lambda: self.part16("fp16")),
                      ("fp32", self.part32), ("fp8", self.casts32)):
            if p in parts:
                t0 = time.time()
                fn()
                self.timings[p] = round(time.time() - t0, 1)
                print("  -- %s part: %.1f s" % (p, self.timings[p]), flush=True)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "unknown CPU", []
    model = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "unknown CPU")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), [])
    return model, [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16") if f in flags]


def device_identity(torch, dev):
    if dev == "cpu":
        model, flags = cpu_model()
        isa = torch.backends.cpu.get_cpu_capability()
        return isa, "%s; %s" % (model, " ".join(flags))
    name = torch.cuda.get_device_name(0)
    cc = torch.cuda.get_device_capability(0)
    return "sm_%d%d" % cc, name


def capability_text(e):
    """What an entry was measured on: torch's CPU capability, or the GPU's compute capability."""
    isa = e.get("isa")
    if not isa:
        return "capability not recorded"
    if e.get("device") == "cpu":
        return "`torch.backends.cpu.get_cpu_capability()` = %s" % isa
    return "compute capability %s" % isa


def markdown(entries):
    out = ["# PyTorch's activation kernels against the MPFR reference (`make torch-table`)", "",
           "Generated by experiments/torchval/torch_table.py; judged by `fp8lab ulp` (error in ulps of the "
           "correctly rounded result's binade; \"correctly rounded\" compares encodings; \"faithful\" is "
           "≤ 1 ulp; class mismatches are NaN/Inf disagreements).  Explanations: "
           "experiments/torchval/TORCH.md.", ""]
    for e in entries:
        out += ["## torch %s, %s (%s), %s" % (e["torch"], e["device"], e.get("isa") or "?", e["date"]), "",
                "Measured with torch %s on %s, %s." % (e["torch"], e["device"], capability_text(e)),
                "Device: %s.  Part times (torch + judge, wall): %s." % (
                    e["device_detail"], ", ".join("%s %s s" % kv for kv in e["timings"].items())), ""]
        for part in ("bf16", "fp16", "fp32"):
            rows = [r for r in e["rows"] if r["part"] == part]
            if not rows:
                continue
            out += ["### %s (torch %s, %s)" % (part, e["torch"], capability_text(e)), ""]
            out += ["Inputs: " + "; ".join(sorted(set(
                "%s = %s" % (r.get("inputs_short", "?"), r["inputs"]) for r in rows))) + ".", "",
                "| torch | judged against | inputs | correctly rounded | faithful | > 16 ulp | max ulp (finite) "
                "| worst finite: x → torch (correctly rounded) | class mismatches: first |",
                "|---|---|---|---|---|---|---|---|---|"]
            for r in rows:
                fm = r["first_class_mismatch"]
                out.append("| `%s` | %s%s | %s (%d) | %s | %s | %d | %s | %s | %s |" % (
                    r["torch"], r["reference"],
                    "".join(" %s=%s" % kv for kv in r["params"].items()), r.get("inputs_short", "?"), r["count"],
                    pct(r["correctly_rounded"], r["count"]), pct(r["faithful"], r["count"]),
                    r["histogram"].get(">16", 0), r["max_ulp"] if r["infinite_errors"] < r["count"] else "—",
                    case_text(r["worst_finite"]) if r["max_ulp"] != "0" else "—",
                    "%d: %s" % (r["mismatched_special"], case_text(fm)) if r["mismatched_special"] else "0"))
            out.append("")
        if e["casts"]:
            out += ["### float8 casts against `fp8lab convert` (torch %s, %s)" % (e["torch"], capability_text(e)),
                    "",
                    "| cast | inputs | fp8lab | mismatches | of which NaN sign/payload only | examples: x → torch / fp8lab |",
                    "|---|---|---|---|---|---|"]
            for c in e["casts"]:
                for cmp in c["compare"]:
                    ex = "; ".join("%s → %s / %s" % (d["x"], d["torch"], d["fp8lab"]) for d in cmp["examples"][:4])
                    out.append("| `%s` from %s | %s | `%s` | %d of %d | %d | %s |" % (
                        c["torch"], c["source"], c["inputs"], cmp["fp8lab"], cmp["mismatches"], c["count"],
                        cmp["nan_sign_or_payload_only"], ex or "—"))
            out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "build", "torch-table"), help="output folder")
    ap.add_argument("--cli", default=None, help="the fp8lab CLI (default: $FP8LAB, else build/fp8lab)")
    ap.add_argument("--device", default="all", help="cpu, cuda or all present (default)")
    ap.add_argument("--parts", default="bf16,fp16,fp32,fp8", help="any of bf16,fp16,fp32,fp8")
    ap.add_argument("--f32-span", type=int, default=23,
                    help="float32: the first 2^SPAN encodings of each binade (23: all of them)")
    ap.add_argument("--f32-sample", type=int, default=1 << 20, help="float32 uniform bit patterns")
    ap.add_argument("--pair-sample", type=int, default=1 << 22, help="SwiGLU (g, u) pairs (bf16, fp16; /4 for fp32)")
    ap.add_argument("--softmax-rows", type=int, default=32)
    ap.add_argument("--softmax-len", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="fp8lab ulp --threads (default: all cores)")
    args = ap.parse_args()
    args.parts = set(p for p in args.parts.split(",") if p)
    bad = args.parts - {"bf16", "fp16", "fp32", "fp8"}
    if bad or not 0 <= args.f32_span <= 23:
        ap.error("bad --parts %s or --f32-span" % ",".join(sorted(bad)))
    try:
        import numpy as np
    except ImportError:
        skip("numpy")
    try:
        import torch
    except ImportError:
        skip("torch")
    if args.cli:
        os.environ["FP8LAB"] = args.cli
    cli = fp8lab.find_cli()
    devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if args.device != "all":
        if args.device not in devs:
            print("torch-table: device %s is not available here (present: %s)" % (args.device, ", ".join(devs)))
            return 2
        devs = [args.device]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "torch-table.json")
    store = {"schema": SCHEMA, "entries": []}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        if old.get("schema") == SCHEMA:
            store = old
    print("torch-table: torch %s, numpy %s, python %s; fp8lab %s" % (torch.__version__, np.__version__,
                                                                    platform.python_version(), cli))
    for dev in devs:
        isa, detail = device_identity(torch, dev)
        print("torch-table: torch %s, device %s, %s (%s), %s" % (
            torch.__version__, dev, capability_text({"device": dev, "isa": isa}), detail, date), flush=True)
        tab = Table(np, torch, fp8lab, dev, args)
        tab.run()
        for r in tab.rows + tab.casts:  # each row names what it was measured with
            r["torch_version"], r["capability"] = torch.__version__, isa
        key = "torch %s | %s | %s | %s" % (torch.__version__, dev, isa, detail)
        entry = {"key": key, "torch": torch.__version__, "device": dev, "isa": isa, "device_detail": detail,
                 "date": date, "numpy": np.__version__, "parts": sorted(args.parts),
                 "settings": {"f32_span": args.f32_span, "f32_sample": args.f32_sample,
                              "pair_sample": args.pair_sample, "softmax_rows": args.softmax_rows,
                              "softmax_len": args.softmax_len, "seed": args.seed},
                 "timings": tab.timings, "rows": tab.rows, "casts": tab.casts}
        prev = next((e for e in store["entries"] if e["key"] == key), None)
        if prev:  # a rerun of some parts replaces those parts and keeps the others
            cast_part = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp8"}
            entry["rows"] = [r for r in prev["rows"] if r["part"] not in args.parts] + entry["rows"]
            entry["casts"] = [c for c in prev["casts"] if cast_part[c["source"]] not in args.parts] + entry["casts"]
            entry["timings"] = dict(prev["timings"], **entry["timings"])
            entry["parts"] = sorted(set(prev["parts"]) | args.parts)
            order = {"bf16": 0, "fp16": 1, "fp32": 2, "fp8": 3}
            entry["rows"].sort(key=lambda r: order[r["part"]])  # stable: each part's own order
            entry["casts"].sort(key=lambda c: order[c["source"]])
            entry["timings"] = dict(sorted(entry["timings"].items(), key=lambda kv: order[kv[0]]))
        store["entries"] = [e for e in store["entries"] if e["key"] != key] + [entry]
        store["entries"].sort(key=lambda e: e["key"])
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(store, f, indent=1)
        os.replace(tmp, path)
        md = markdown(store["entries"])
        with open(os.path.join(args.out, "torch-table.md"), "w") as f:
            f.write(md + "\n")
        print("torch-table: %s: %s" % (dev, ", ".join("%s part %s s" % kv for kv in tab.timings.items())))
    print("torch-table: wrote %s and %s" % (path, os.path.join(args.out, "torch-table.md")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
