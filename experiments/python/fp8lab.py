"""fp8lab from Python: judge a kernel's outputs with `fp8lab ulp`, from pytest or a notebook.

    pip install ./experiments/python                 # once, from the fp8lab repository
    import fp8lab

    def test_my_silu_bf16():                         # pytest
        x = fp8lab.all_inputs("bf16", kind="torch")  # every bf16 encoding, NaNs and infinities too
        rep = fp8lab.ulp("silu", x, my_silu(x))      # the outputs' format is their dtype's
        assert rep.passes(max_ulp=1), rep            # fails on a class mismatch (NaN, Inf) too

No build step: this file only writes temporary .npy files, runs the fp8lab CLI and parses its
`--json` report.  The CLI stays the judge (MPFR reference, exact error), so a report here is the
report `fp8lab ulp ... --json` prints.

The CLI is found, in order: the `cli=` argument, the environment variable FP8LAB, `fp8lab` on PATH,
and `build/fp8lab` of the repository when this file is imported from a checkout
(experiments/python/ of it).  `make install PREFIX=DIR` puts the CLI in DIR/bin.

A gate: `rep.passes(max_ulp=T)` is True when the largest finite error is at most T ulp AND no
output is of another class than the correctly rounded one (a NaN or Inf where the exact value is
finite, a finite output where it overflowed or is NaN): max_ulp alone covers the finite errors
only, so `assert rep.max_ulp <= 1` passes a kernel that returns NaN at -inf.  `rep.check(T)` raises
GateFailed instead; `allow_class_mismatches=True` accepts them where a caller means it.

Arrays (inputs and outputs):
  * torch tensors (any device; moved to the CPU): bfloat16, float16, float32, float64,
    float8_e4m3fn, float8_e5m2.  bfloat16 and float8 tensors are passed as bit patterns
    (`.view(torch.int16)` / `.view(torch.uint8)`) with --input-format/--output-format.
  * numpy arrays: float16, float32, float64 as values; ml_dtypes' bfloat16 / float8_e4m3fn /
    float8_e5m2 as bit patterns; uint8/uint16/uint32 arrays are bit patterns of the format given
    by `in_fmt=` (inputs) or `fmt=` (outputs).
  * several inputs (swiglu's g and u, ...): a tuple or list of arrays, `x=(g, u)`.
  * row-wise functions (softmax, polynorm): arrays of the same shape, rows on the last axis.

Errors: any failure of the CLI (exit 1: unreadable input; 2: bad usage, e.g. an unknown function,
a shape mismatch, a bad parameter) raises Fp8labError, whose message is the CLI's own; a CLI killed
by a signal raises one naming the signal (e.g. "... killed by SIGSEGV (signal 11)").  Arguments the
CLI would misread are refused here, with Fp8labError: a function name starting with '-' (it would be
taken as an option), in_fmt=/from_fmt= on float arrays whose values are not of that format (the
format names what uint bit patterns encode), threads= outside 1 .. 1024.  The gate
exit status 3 only happens with `max_ulp=`: then a failed gate raises GateFailed, an AssertionError
(pytest reports it as a failed assertion) carrying the report in `.report`.  Without `max_ulp=` a
report is always returned and the caller asserts on it.
"""

import json
import math
import numbers
import os
import shutil
import signal
import subprocess
import tempfile

import numpy as np

__all__ = ["ulp", "merge", "convert", "ref", "all_inputs", "find_cli", "UlpReport", "Case",
           "Fp8labError", "GateFailed", "fmt_ulp", "hexf"]

# The JSON report version this module reads (`fp8lab ulp --json`'s "report_version").
REPORT_VERSION = 2


class Fp8labError(RuntimeError):
    """The fp8lab CLI failed (or could not be run).  `returncode`, `stderr` and `cmd` say how."""

    def __init__(self, message, returncode=None, stderr="", cmd=None):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
        self.cmd = cmd


class GateFailed(AssertionError):
    """`max_ulp=` was given and the outputs failed it (the CLI's exit status 3)."""

    def __init__(self, report, max_ulp):
        self.report = report
        self.max_ulp = max_ulp
        msg = "%s: max error %s ulp (gate %s), %d class mismatch(es)" % (
            report.function, fmt_ulp(report.max_ulp), max_ulp, report.mismatched_special)
        if report.worst:
            msg += "; worst finite: %s" % report.worst[0]
        if report.class_mismatches:
            msg += "; first class mismatch: %s" % report.class_mismatches[0]
        super().__init__(msg)


def fmt_ulp(u):
    """An error in ulps as the reports print it: 6 significant digits, or inf."""
    return "inf" if math.isinf(u) else "%.6g" % u


def hexf(v):
    """float.hex without trailing zeros: 0x1.64p+6, not 0x1.6400000000000p+6."""
    h = float(v).hex()
    if "p" not in h:
        return h
    mant, exp = h.split("p")
    return (mant.rstrip("0").rstrip(".") if "." in mant else mant) + "p" + exp


def _to_float(v):
    if isinstance(v, str):  # the CLI writes "inf" / "nan" as strings
        return float(v)
    return float(v)


class Case:
    """One output of a report's case lists: `index` (and `row`, `column` for row-wise functions),
    `inputs` (hex floats), `inputs_hex` (encodings), `output` / `output_hex`, `reference` /
    `reference_hex` (the correctly rounded value), `ulp` (the error rounded to 2^-20 ulp, float; inf
    for a NaN/Inf class mismatch), `bucket` (the histogram bucket of the EXACT error: an error
    reported as 1.0 may lie in "<=2"), `correctly_rounded`, `mismatched_special`, `raw` (the JSON
    object)."""

    def __init__(self, raw, function=""):
        self.raw = raw
        self.function = function
        self.index = raw.get("index")
        self.row = raw.get("row")
        self.column = raw.get("column")
        self.inputs = [i["hexfloat"] for i in raw.get("inputs", [])]
        self.inputs_hex = [i["hex"] for i in raw.get("inputs", [])]
        self.output = raw["output"]["hexfloat"]
        self.output_hex = raw["output"]["hex"]
        self.reference = raw["reference"]["hexfloat"]
        self.reference_hex = raw["reference"]["hex"]
        self.ulp = _to_float(raw["ulp"])
        self.bucket = raw.get("bucket", "")
        self.correctly_rounded = bool(raw.get("correctly_rounded"))
        self.mismatched_special = bool(raw.get("mismatched_special"))

    def __str__(self):
        where = "index %s" % self.index
        if self.row is not None:
            where += ", row %s column %s" % (self.row, self.column)
        args = ", ".join("%s [%s]" % (a, h) for a, h in zip(self.inputs, self.inputs_hex))
        return "%s(%s) = %s [%s], correctly rounded %s [%s]: %s ulp (%s)" % (
            self.function, args, self.output, self.output_hex, self.reference,
            self.reference_hex, fmt_ulp(self.ulp), where)

    __repr__ = __str__


class UlpReport:
    """The CLI's JSON report as attributes: function, format, count, correctly_rounded, faithful
    (exact error <= 1 ulp), mismatched_special, infinite_errors, max_ulp (the largest FINITE error),
    mean_ulp, histogram (dict, buckets of the exact error), worst (list of Case: the largest finite
    errors, worst[0] at max_ulp), class_mismatches (list of Case: outputs of the wrong class, NaN/Inf
    first), params, overflow, shards; `raw` is the whole JSON object, `returncode` the CLI's exit
    status."""

    def __init__(self, raw, returncode=0):
        if raw.get("report_version") != REPORT_VERSION:
            raise Fp8labError("a report of version %r; this module reads version %d (`fp8lab ulp "
                              "--json` of the same fp8lab)" % (raw.get("report_version"), REPORT_VERSION))
        self.raw = raw
        self.returncode = returncode
        self.function = raw.get("function", "")
        self.format = raw.get("format", "")
        self.overflow = raw.get("overflow", "")
        self.params = raw.get("params", "")
        self.count = int(raw["count"])
        self.correctly_rounded = int(raw["correctly_rounded"])
        self.faithful = int(raw["faithful"])
        self.mismatched_special = int(raw["mismatched_special"])
        self.infinite_errors = int(raw["infinite_errors"])
        self.max_ulp = _to_float(raw["max_ulp"])
        self.mean_ulp = _to_float(raw["mean_ulp"])
        self.histogram = dict(raw.get("histogram", {}))
        self.shards = raw.get("shards", [])
        self.worst = [Case(w, self.function) for w in raw.get("worst", [])]
        self.class_mismatches = [Case(w, self.function) for w in raw.get("class_mismatches", [])]

    @property
    def correctly_rounded_fraction(self):
        return self.correctly_rounded / self.count if self.count else 1.0

    def passes(self, max_ulp, allow_class_mismatches=False):
        """True when every finite error is at most max_ulp and (unless allowed) no output is of
        another class than the correctly rounded one: the CLI's `--max-ulp` gate."""
        if isinstance(max_ulp, bool) or not isinstance(max_ulp, numbers.Real) or not max_ulp >= 0:
            raise Fp8labError("max_ulp=%r: a gate is a number >= 0" % (max_ulp,))
        return self.max_ulp <= max_ulp and (allow_class_mismatches or self.mismatched_special == 0)

    def check(self, max_ulp, allow_class_mismatches=False):
        """passes(), or GateFailed (an AssertionError) naming the worst finite case and the first
        class mismatch."""
        if not self.passes(max_ulp, allow_class_mismatches):
            raise GateFailed(self, max_ulp)
        return self

    def json(self):
        return json.dumps(self.raw)

    def __str__(self):
        s = "%s %s: %d outputs, %d correctly rounded, max %s ulp, %d class mismatch(es)" % (
            self.function, self.format, self.count, self.correctly_rounded,
            fmt_ulp(self.max_ulp), self.mismatched_special)
        if self.worst:
            s += "; worst finite: %s" % self.worst[0]
        if self.class_mismatches:
            s += "; first class mismatch: %s" % self.class_mismatches[0]
        return s

    __repr__ = __str__


def find_cli(cli=None):
    """Path of the fp8lab CLI (see the module's docstring for the search order)."""
    cands = []
    if cli:
        cands.append(("cli=", cli))
    elif os.environ.get("FP8LAB"):
        cands.append(("FP8LAB", os.environ["FP8LAB"]))
    else:
        on_path = shutil.which("fp8lab")
        cands.append(("PATH", on_path or "fp8lab"))
        here = os.path.dirname(os.path.abspath(__file__))
        if os.path.basename(here) == "python" and os.path.isfile(os.path.join(here, "..", "..", "Makefile")):
            cands.append(("the checkout", os.path.join(here, "..", "..", "build", "fp8lab")))
    for _, c in cands:
        p = c if os.sep in c else (shutil.which(c) or c)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    raise Fp8labError("fp8lab CLI not found (tried %s); build it with `make` in the fp8lab "
                      "repository and put it on PATH (`make install PREFIX=DIR`), or pass cli= or "
                      "set FP8LAB" %
                      ", ".join("%s %s" % (k, v) for k, v in cands))


# ---- arrays -> .npy files -----------------------------------------------------------------------

_TORCH_BITS = {"bfloat16": ("bf16", "int16", np.uint16), "float8_e4m3fn": ("e4m3", "uint8", np.uint8),
               "float8_e5m2": ("e5m2", "uint8", np.uint8), "float8_e4m3fnuz": ("e4m3fnuz", "uint8", np.uint8),
               "float8_e5m2fnuz": ("e5m2fnuz", "uint8", np.uint8)}
_NUMPY_BITS = {"bfloat16": ("bf16", np.uint16), "float8_e4m3fn": ("e4m3", np.uint8),
               "float8_e5m2": ("e5m2", np.uint8), "float8_e4m3fnuz": ("e4m3fnuz", np.uint8),
               "float8_e5m2fnuz": ("e5m2fnuz", np.uint8)}
_VALUE_FMT = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32"}


def _is_tensor(a):
    return type(a).__module__.startswith("torch") and hasattr(a, "detach")


def _as_array(a, what):
    """(numpy array to save, format of its bit patterns or None, format its values fit or None)."""
    if _is_tensor(a):
        import torch
        t = a.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        name = str(t.dtype).replace("torch.", "")
        if name in _TORCH_BITS:
            fmt, view, np_t = _TORCH_BITS[name]
            return t.contiguous().view(getattr(torch, view)).numpy().view(np_t), fmt, fmt
        if name in ("float16", "float32", "float64"):
            arr = t.contiguous().numpy()
            return arr, None, _VALUE_FMT.get(arr.dtype)
        raise Fp8labError("%s: torch dtype %s is not supported (bfloat16, float16, float32, float64, "
                          "float8_e4m3fn, float8_e5m2)" % (what, t.dtype))
    # C order, with the array's own shape: np.ascontiguousarray would make a 0-d array 1-d
    arr = np.asarray(a, order="C")
    if not arr.dtype.isnative:  # big-endian (on this host): the same values in native order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    name = arr.dtype.name
    if name in _NUMPY_BITS:  # ml_dtypes
        fmt, np_t = _NUMPY_BITS[name]
        return arr.view(np_t), fmt, fmt
    if arr.dtype in (np.float16, np.float32, np.float64):
        return arr, None, _VALUE_FMT.get(arr.dtype)
    if arr.dtype in (np.uint8, np.uint16, np.uint32):
        return arr, "", None  # bit patterns of a format the caller names
    if arr.dtype.kind in "iub":
        raise Fp8labError("%s: integer dtype %s: bit patterns are uint8/uint16/uint32 (with in_fmt= "
                          "for inputs, fmt= for outputs)" % (what, arr.dtype))
    raise Fp8labError("%s: dtype %s is not supported" % (what, arr.dtype))


def _fn_name(fn):
    """fn as the CLI's FN argument: a name, never an option."""
    s = str(fn)
    if not s or s.startswith("-"):
        raise Fp8labError("fn=%r is not a function name (it would be read as an option; the functions: "
                          "`fp8lab ref --list`)" % s)
    return s


def _check_value_fmt(f, arr, vfmt, what, kw):
    """A format keyword (in_fmt=, from_fmt=) names what uint bit patterns encode: on a float array
    it must be the array's own format (fp32 for float32, fp16 for float16), else it would be ignored."""
    if f and f != vfmt:
        raise Fp8labError("%s: %s=%s, but the array holds %s values (%s names the format of uint8/uint16/"
                          "uint32 bit patterns)" % (what, kw, f, arr.dtype, kw))


def _threads_arg(threads):
    if threads is None:
        return []
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or not 1 <= threads <= 1024:
        raise Fp8labError("threads=%r: --threads takes an integer from 1 to 1024" % (threads,))
    return ["--threads", str(int(threads))]


def _keep_shape(y, arr):
    """The CLI's elementwise output with the input's shape (a 0-d input gives a 0-d output)."""
    return y.reshape(arr.shape) if y.size == arr.size and y.shape != arr.shape else y


def _split_inputs(x):
    if isinstance(x, (tuple, list)) and len(x) > 0 and all(
            hasattr(e, "shape") for e in x):
        return list(x)
    return [x]


# format -> (storage bits, numpy/ml_dtypes dtype name, torch dtype name); formats of up to 16 bits
_ENUMERABLE = {"bf16": (16, "bfloat16", "bfloat16"), "fp16": (16, "float16", "float16"),
               "e4m3": (8, "float8_e4m3fn", "float8_e4m3fn"), "e5m2": (8, "float8_e5m2", "float8_e5m2"),
               "e4m3fnuz": (8, "float8_e4m3fnuz", "float8_e4m3fnuz"),
               "e5m2fnuz": (8, "float8_e5m2fnuz", "float8_e5m2fnuz")}


def all_inputs(fmt, kind="numpy"):
    """Every encoding of fmt, in encoding order (0, 1, ..., 2^bits - 1: +0 up to the positive NaNs,
    then -0 and the negatives), for an exhaustive test of a kernel.  fmt: bf16, fp16, e4m3, e5m2,
    e4m3fnuz, e5m2fnuz (fp32's 2^32 inputs: `fp8lab ulp --impl ... --exhaustive`).

    kind="numpy": an array of the format's own dtype (float16; bfloat16 and the float8 types from
                  ml_dtypes, which must then be installed)
    kind="torch": a CPU tensor of the format's torch dtype (torch must be installed)
    kind="bits":  the encodings as uint8/uint16; pass in_fmt=fmt to ulp()
    """
    if fmt not in _ENUMERABLE:
        raise Fp8labError("all_inputs(%r): formats of up to 16 bits: %s" % (fmt, ", ".join(sorted(_ENUMERABLE))))
    bits, np_name, torch_name = _ENUMERABLE[fmt]
    codes = np.arange(1 << bits, dtype=np.uint32).astype(np.uint16 if bits == 16 else np.uint8)
    if kind == "bits":
        return codes
    if kind == "numpy":
        if np_name == "float16":
            return codes.view(np.float16)
        try:
            import ml_dtypes
        except ImportError:
            raise Fp8labError("all_inputs(%r): numpy has no %s dtype: install ml_dtypes, or use kind='torch' "
                              "or kind='bits'" % (fmt, np_name))
        return codes.view(getattr(ml_dtypes, np_name))
    if kind == "torch":
        import torch
        dt = getattr(torch, torch_name, None)
        if dt is None:
            raise Fp8labError("all_inputs(%r): torch %s has no %s" % (fmt, torch.__version__, torch_name))
        signed = codes.view(np.int16) if bits == 16 else codes
        return torch.from_numpy(signed.copy()).view(dt)
    raise Fp8labError("all_inputs: kind=%r is not 'numpy', 'torch' or 'bits'" % (kind,))


def _run(args, cwd, timeout=None):
    try:
        p = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
    except OSError as e:
        raise Fp8labError("cannot run %s: %s" % (args[0], e), cmd=args)
    except subprocess.TimeoutExpired:
        raise Fp8labError("%s timed out after %s s" % (" ".join(args), timeout), cmd=args)
    return p


def _cli_error(p, args):
    msg = "\n".join(l for l in p.stderr.strip().splitlines() if not l.startswith("  run:"))
    if p.returncode < 0:  # subprocess: -N is "killed by signal N"
        try:
            name = signal.Signals(-p.returncode).name
        except ValueError:
            name = "an unknown signal"
        died = "`%s` was killed by %s (signal %d)" % (" ".join(os.path.basename(a) for a in args[:2]), name,
                                                      -p.returncode)
        msg = died + (": " + msg if msg else "")
    elif not msg:
        msg = "exit status %d" % p.returncode
    return Fp8labError(msg, returncode=p.returncode, stderr=p.stderr, cmd=args)


def _report(p, args, max_ulp):
    if p.returncode not in (0, 3) or (p.returncode == 3 and max_ulp is None):
        raise _cli_error(p, args)
    try:
        raw = json.loads(p.stdout)
    except ValueError:
        raise Fp8labError("fp8lab printed no JSON report (exit %d): %s" % (p.returncode, p.stderr.strip()),
                          returncode=p.returncode, stderr=p.stderr, cmd=args)
    rep = UlpReport(raw, p.returncode)
    if p.returncode == 3:
        raise GateFailed(rep, max_ulp)
    return rep


def ulp(fn, x, y, fmt=None, *, in_fmt=None, params=None, wrt=None, saturate=None, max_ulp=None,
        index_base=None, threads=None, mpfr_only=False, cli=None, timeout=None):
    """Judge outputs y of fn at inputs x against the MPFR reference; returns an UlpReport.

    fn        a reference function of `fp8lab ref --list` (silu, gelu, gelu_tanh, swiglu, softmax...)
    x         the input array, or a tuple/list of them (one per input of fn: (g, u) for swiglu)
    y         the outputs (values exactly representable in fmt, or its bit patterns)
    fmt       the output format (bf16, fp16, fp32, e4m3, e5m2, ...); by default y's own (a
              bfloat16/float16/float32/float8 array or tensor); required for uint bit patterns
    in_fmt    for uint8/16/32 inputs: the format they are bit patterns of (one name for all
              inputs, or a list, one per input)
    params    {"alpha": 0.5, ...}: --param NAME=V
    wrt       "x", "g", "u", ...: y is the partial derivative w.r.t. that input (dy = 1)
    saturate  True/False: the reference's overflow policy (default: the CLI's, saturating for
              8-bit formats, IEEE for fp32/bf16/fp16)
    max_ulp   a gate: raises GateFailed when the max error exceeds it or a class differs
    index_base  the arrays hold elements index_base, ... of a larger set (for merge())
    threads, mpfr_only   --threads N (1 .. 1024), --mpfr-only
    """
    fn = _fn_name(fn)
    threads_args = _threads_arg(threads)
    exe = find_cli(cli)
    xs = _split_inputs(x)
    if isinstance(in_fmt, (list, tuple)):
        if len(in_fmt) != len(xs):
            raise Fp8labError("in_fmt names %d formats for %d inputs" % (len(in_fmt), len(xs)))
        in_fmts = list(in_fmt)
    else:
        in_fmts = [in_fmt] * len(xs)
    yarr, ybits, yfmt = _as_array(y, "outputs")
    if fmt is None:
        fmt = ybits or yfmt
        if not fmt:
            raise Fp8labError("outputs: dtype %s: pass fmt= (the output format)" % yarr.dtype)
    with tempfile.TemporaryDirectory(prefix="fp8lab-py-") as d:
        args = [exe, "ulp", fn, "--format", str(fmt)]
        for i, (a, f) in enumerate(zip(xs, in_fmts)):
            arr, bits, vfmt = _as_array(a, "input %d" % i)
            if bits is None:
                _check_value_fmt(f, arr, vfmt, "input %d" % i, "in_fmt")
            elif bits == "":
                if not f:
                    raise Fp8labError("input %d: dtype %s holds bit patterns: pass in_fmt= (e.g. "
                                      "in_fmt='bf16')" % (i, arr.dtype))
                bits = f
            elif f and bits and f != bits:
                raise Fp8labError("input %d: in_fmt=%s, but the array holds %s" % (i, f, bits))
            name = "input%d.npy" % i
            np.save(os.path.join(d, name), arr)
            args += ["--inputs", name]
            if bits:
                args += ["--input-format", bits]
        np.save(os.path.join(d, "outputs.npy"), yarr)
        args += ["--outputs", "outputs.npy"]
        if ybits is not None:  # bit patterns: of the format they are (or of fmt for uint arrays)
            if ybits and ybits != fmt:
                raise Fp8labError("outputs hold %s bit patterns, fmt is %s" % (ybits, fmt))
            args += ["--output-format", str(fmt)]
        for k, v in (params or {}).items():
            args += ["--param", "%s=%s" % (k, repr(v) if isinstance(v, float) else v)]
        if wrt:
            args += ["--wrt", str(wrt)]
        if saturate is not None:
            args.append("--saturate" if saturate else "--no-saturate")
        if max_ulp is not None:
            args += ["--max-ulp", repr(float(max_ulp))]
        if index_base is not None:
            args += ["--index-base", str(int(index_base))]
        args += threads_args
        if mpfr_only:
            args.append("--mpfr-only")
        args += ["--json", "--no-progress"]
        p = _run(args, d, timeout)
        return _report(p, args, max_ulp)


def merge(reports, max_ulp=None, cli=None, timeout=None):
    """The exact report of the union of pieces judged with distinct index_base (`ulp --merge`)."""
    exe = find_cli(cli)
    reports = list(reports)
    if not reports:
        raise Fp8labError("merge: no reports")
    with tempfile.TemporaryDirectory(prefix="fp8lab-py-") as d:
        names = []
        for i, r in enumerate(reports):
            raw = r.raw if isinstance(r, UlpReport) else r
            names.append("r%d.json" % i)
            with open(os.path.join(d, names[-1]), "w") as f:
                json.dump(raw, f)
        args = [exe, "ulp", "--merge"] + names + ["--json"]
        if max_ulp is not None:
            args += ["--max-ulp", repr(float(max_ulp))]
        p = _run(args, d, timeout)
        return _report(p, args, max_ulp)


def convert(x, to, *, from_fmt=None, saturate=None, rounding=None, seed=None, cli=None, timeout=None):
    """`fp8lab convert`: x rounded into format `to`.  Returns float32 (to='fp32'), float16
    (to='fp16') or the encodings (uint16 for bf16, uint8 for 8-bit formats), x's shape."""
    exe = find_cli(cli)
    arr, bits, vfmt = _as_array(x, "x")
    if bits is None:
        _check_value_fmt(from_fmt, arr, vfmt, "x", "from_fmt")
    elif bits == "":
        if not from_fmt:
            raise Fp8labError("x: dtype %s holds bit patterns: pass from_fmt=" % arr.dtype)
        bits = from_fmt
    with tempfile.TemporaryDirectory(prefix="fp8lab-py-") as d:
        np.save(os.path.join(d, "x.npy"), arr)
        args = [exe, "convert", "--to", str(to)]
        if bits:
            args += ["--from", bits]
        if saturate is not None:
            args.append("--saturate" if saturate else "--no-saturate")
        if rounding:
            args += ["--round", str(rounding)]
        if seed is not None:
            args += ["--seed", str(int(seed))]
        args += ["x.npy", "y.npy"]
        p = _run(args, d, timeout)
        if p.returncode != 0:
            raise _cli_error(p, args)
        return _keep_shape(np.load(os.path.join(d, "y.npy")), arr)


def ref(fn, x, fmt, *, in_fmt=None, params=None, wrt=None, saturate=None, cli=None, timeout=None):
    """`fp8lab ref`: the correctly rounded fn(x) in fmt (float32/float16 for fp32/fp16, else the
    encodings), from the MPFR reference.  Inputs as for ulp(); all of one kind."""
    fn = _fn_name(fn)
    exe = find_cli(cli)
    xs = _split_inputs(x)
    with tempfile.TemporaryDirectory(prefix="fp8lab-py-") as d:
        args = [exe, "ref", fn, "--format", str(fmt)]
        names, fmts = [], set()
        for i, a in enumerate(xs):
            arr, bits, vfmt = _as_array(a, "input %d" % i)
            if bits is None:
                _check_value_fmt(in_fmt, arr, vfmt, "input %d" % i, "in_fmt")
            elif bits == "":
                if not in_fmt:
                    raise Fp8labError("input %d: dtype %s holds bit patterns: pass in_fmt="
                                      % (i, arr.dtype))
                bits = in_fmt
            fmts.add(bits)
            names.append("x%d.npy" % i)
            np.save(os.path.join(d, names[-1]), arr)
        if len(fmts) != 1:
            raise Fp8labError("`fp8lab ref` takes inputs of one kind (all values, or all bit "
                              "patterns of one format)")
        if fmts != {None}:
            args += ["--input-format", fmts.pop()]
        for k, v in (params or {}).items():
            args += ["--param", "%s=%s" % (k, repr(v) if isinstance(v, float) else v)]
        if wrt:
            args += ["--derivative", "--wrt", str(wrt)]
        if saturate is not None:
            args.append("--saturate" if saturate else "--no-saturate")
        args += names + ["y.npy"]
        p = _run(args, d, timeout)
        if p.returncode != 0:
            raise _cli_error(p, args)
        return _keep_shape(np.load(os.path.join(d, "y.npy")), arr)
