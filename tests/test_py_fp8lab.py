"""Tests of experiments/python/fp8lab.py, the Python front end of `fp8lab ulp` (pytest).

Run by `make test` through build/tests/test_py_fp8lab (tests/test_py_fp8lab.c), which picks a Python
with numpy and pytest, or skips, and puts experiments/python on PYTHONPATH.  By hand:
PYTHONPATH=experiments/python python3 -m pytest -q tests/test_py_fp8lab.py (or after
`pip install ./experiments/python`).  The CLI is $FP8LAB or build/fp8lab.  Tests that need torch or
ml_dtypes skip without them.

The expected outputs are computed here in float64 and rounded once into the target format, so
they are correctly rounded (up to 2^-29 ulp from double's own rounding) independently of fp8lab.
"""
import math
import os
import sys

import shutil
import subprocess

import numpy as np
import pytest

import fp8lab

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

HALF = 0.5 + 1e-6  # a correctly rounded output, judged with the double's rounding on top


def bf16_bits_from_f64(v):
    """bf16 encodings (uint16) of float64 values rounded once, to nearest even (normal range)."""
    v = np.asarray(v, dtype=np.float64)
    m, e = np.frexp(v)  # v = m 2^e, 0.5 <= |m| < 1
    r = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)  # 8 significant bits, ties to even
    return (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def f32_from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint32) << 16).view(np.float32)


def silu64(x):
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-x))


def bf16_inputs():
    """Every bf16 encoding of [2^-4, 2^4) and (-2^4, -2^-4]: 2048 inputs."""
    pos = np.arange(0x3d80, 0x4180, dtype=np.uint16)
    return np.concatenate([pos, pos | np.uint16(0x8000)])


def test_exact_outputs_are_0_ulp():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(5000) * 100).astype(np.float32)
    x = x[x != 0]
    rep = fp8lab.ulp("relu", x, np.maximum(x, np.float32(0)), fmt="fp32")
    assert rep.count == x.size
    assert rep.max_ulp == 0 and rep.correctly_rounded == x.size and rep.mismatched_special == 0


def test_correctly_rounded_fp32_and_fp16():
    rng = np.random.default_rng(2)
    x = rng.uniform(-30, 30, 4000).astype(np.float32)
    y = (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    rep = fp8lab.ulp("sigmoid", x, y)  # fmt from y's dtype: fp32
    assert rep.format == "fp32" and rep.count == 4000
    assert rep.max_ulp <= HALF and rep.faithful == 4000 and rep.mismatched_special == 0
    x16 = rng.uniform(-8, 8, 4000).astype(np.float16)
    y16 = np.tanh(x16.astype(np.float64)).astype(np.float16)  # numpy rounds float64 -> float16 once
    rep = fp8lab.ulp("tanh", x16, y16)
    assert rep.format == "fp16" and rep.max_ulp <= HALF


def test_perturbed_bf16_output_is_the_worst_case():
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    clean = fp8lab.ulp("silu", xb, y, fmt="bf16", in_fmt="bf16")
    assert clean.count == xb.size and clean.max_ulp <= HALF
    k = 1234
    assert y[k] & 0x7f < 0x70  # +3 stays in the binade: exactly 3 ulp from the rounded value
    bad = y.copy()
    bad[k] += 3
    rep = fp8lab.ulp("silu", xb, bad, fmt="bf16", in_fmt="bf16")
    w = rep.worst[0]
    assert 2.5 <= rep.max_ulp <= 3.5 and w.ulp == rep.max_ulp
    assert w.index == k
    assert int(w.inputs_hex[0], 16) == int(xb[k]) and int(w.output_hex, 16) == int(bad[k])
    assert int(w.reference_hex, 16) == int(y[k])
    assert rep.faithful == xb.size - 1 and rep.correctly_rounded == clean.correctly_rounded - 1
    assert "silu(" in str(w) and ("index %d" % k) in str(w)


def test_gate():
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    y[7] += 2
    with pytest.raises(fp8lab.GateFailed) as e:
        fp8lab.ulp("silu", xb, y, fmt="bf16", in_fmt="bf16", max_ulp=1)
    assert isinstance(e.value, AssertionError)
    assert e.value.report.worst[0].index == 7 and 1.5 <= e.value.report.max_ulp <= 2.5
    rep = fp8lab.ulp("silu", xb, y, fmt="bf16", in_fmt="bf16", max_ulp=4)
    assert rep.returncode == 0


def test_errors_carry_the_cli_message():
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.ulp("no_such_fn", x, x)
    assert "unknown function 'no_such_fn'" in str(e.value) and e.value.returncode == 2
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.ulp("silu", x[:50], x)
    assert "50 elements" in str(e.value) and e.value.returncode in (1, 2)
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.ulp("elu", x, x, params={"no_such_param": 1})
    assert "no_such_param" in str(e.value)
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.ulp("silu", x, x, wrt="q")
    assert "q" in str(e.value) and e.value.returncode == 2
    with pytest.raises(fp8lab.Fp8labError) as e:  # bit patterns without their format
        fp8lab.ulp("silu", np.zeros(4, np.uint16), np.zeros(4, np.uint16), fmt="bf16")
    assert "in_fmt" in str(e.value)
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.ulp("silu", x, x, cli="/nonexistent/fp8lab")
    assert "not found" in str(e.value)


def test_two_inputs_and_derivatives():
    rng = np.random.default_rng(3)
    g = rng.uniform(-10, 10, 3000).astype(np.float32)
    u = rng.uniform(-10, 10, 3000).astype(np.float32)
    s = silu64(g)
    rep = fp8lab.ulp("swiglu", (g, u), (s * u).astype(np.float32))
    assert rep.count == 3000 and rep.max_ulp <= HALF
    assert len(rep.worst[0].inputs) == 2
    rep = fp8lab.ulp("swiglu", [g, u], s.astype(np.float32), wrt="u")  # d/du = silu(g)
    assert rep.max_ulp <= HALF
    rep = fp8lab.ulp("swiglu", (g, u), s.astype(np.float32), wrt="g")  # not d/dg
    assert rep.max_ulp > 1000


def test_params():
    x = np.linspace(-6, 2, 2001, dtype=np.float32)
    x64 = x.astype(np.float64)
    y = np.where(x64 > 0, x64, 0.5 * np.expm1(x64)).astype(np.float32)
    assert fp8lab.ulp("elu", x, y, params={"alpha": 0.5}).max_ulp <= HALF
    assert fp8lab.ulp("elu", x, y).max_ulp > 1000  # the default alpha = 1


def test_rows():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 32)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    rep = fp8lab.ulp("softmax", x, y)
    assert rep.count == 6 * 32 and rep.max_ulp <= HALF
    y2 = y.copy()
    y2[4, 5] = np.nextafter(np.nextafter(y2[4, 5], np.float32(1)), np.float32(1))
    w = fp8lab.ulp("softmax", x, y2).worst[0]
    assert (w.row, w.column) == (4, 5) and 1.5 <= w.ulp <= 2.5
    with pytest.raises(fp8lab.Fp8labError):
        fp8lab.ulp("softmax", x, y.T.copy())


def test_merge_of_pieces():
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    y[1500] += 5
    n = 1000
    a = fp8lab.ulp("silu", xb[:n], y[:n], fmt="bf16", in_fmt="bf16")
    b = fp8lab.ulp("silu", xb[n:], y[n:], fmt="bf16", in_fmt="bf16", index_base=n)
    m = fp8lab.merge([a, b])
    assert m.count == xb.size and m.worst[0].index == 1500 and m.max_ulp == b.max_ulp
    with pytest.raises(fp8lab.Fp8labError) as e:  # the same piece twice
        fp8lab.merge([a, a])
    assert "overlaps" in str(e.value)


def test_convert():
    x = np.array([1.0, 448.0, 500.0, -1e9, 2.0 ** -10], dtype=np.float32)
    assert fp8lab.convert(x, "e4m3").tolist() == [0x38, 0x7e, 0x7e, 0xfe, 0x00]
    assert fp8lab.convert(x, "e4m3", saturate=False).tolist()[:4] == [0x38, 0x7e, 0x7f, 0xff]
    assert fp8lab.convert(x, "bf16").tolist()[:2] == [0x3f80, 0x43e0]


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    y[99] += 4
    xt = torch.from_numpy(xb.view(np.int16)).view(torch.bfloat16)
    yt = torch.from_numpy(y.view(np.int16)).view(torch.bfloat16)
    rep = fp8lab.ulp("silu", xt, yt)  # fmt from the tensor: bf16
    assert rep.format == "bf16" and rep.worst[0].index == 99 and 3.5 <= rep.max_ulp <= 4.5
    rep = fp8lab.ulp("silu", xt.reshape(32, 64), yt.reshape(32, 64), fmt="bf16")
    assert rep.count == xb.size and rep.worst[0].index == 99
    # float8 tensors: encodings with their format
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    x8 = codes.view(torch.float8_e4m3fn)
    x8 = x8[~torch.isnan(x8.float())]
    y8 = torch.relu(x8.float()).to(torch.float8_e4m3fn)
    rep = fp8lab.ulp("relu", x8, y8)
    assert rep.format == "e4m3" and rep.count == 254 and rep.max_ulp == 0


def test_ml_dtypes_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    rep = fp8lab.ulp("silu", xb.view(ml_dtypes.bfloat16), y.view(ml_dtypes.bfloat16))
    assert rep.format == "bf16" and rep.max_ulp <= HALF and rep.count == xb.size


def test_ref_matches_the_judge():
    xb = bf16_inputs()
    r = fp8lab.ref("silu", xb, "bf16", in_fmt="bf16")
    assert r.dtype == np.uint16 and r.shape == xb.shape
    rep = fp8lab.ulp("silu", xb, r, fmt="bf16", in_fmt="bf16")
    assert rep.correctly_rounded == xb.size and not math.isinf(rep.max_ulp)


# ---- issue 24: hostile and careless calls -----------------------------------------------------------

def _silu_pieces():
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    y[10] += 3
    return xb, y


def test_merge_refuses_a_damaged_report():
    xb, y = _silu_pieces()
    a = fp8lab.ulp("silu", xb, y, fmt="bf16", in_fmt="bf16")
    raw = dict(a.raw)
    del raw["overflow"]  # crashed `ulp --merge` (NULL into strcmp): "exit status -11"
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.merge([raw])
    assert e.value.returncode == 1 and '"overflow"' in str(e.value), str(e.value)
    raw = dict(a.raw, max_ulp=-1)  # passed a --max-ulp 0.4 gate
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.merge([raw], max_ulp=0.4)
    assert e.value.returncode == 1 and "max_ulp" in str(e.value)


def test_a_killed_cli_names_the_signal(tmp_path):
    fake = tmp_path / "fp8lab"
    fake.write_text("#!/bin/sh\nkill -SEGV $$\n")
    fake.chmod(0o755)
    xb, y = _silu_pieces()
    a = fp8lab.ulp("silu", xb, y, fmt="bf16", in_fmt="bf16")
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.merge([a], cli=str(fake))
    assert e.value.returncode == -11 and "SIGSEGV" in str(e.value) and "exit status" not in str(e.value)


def test_function_names_are_not_options():
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    for fn in ("--list", "--help", "-h", ""):
        with pytest.raises(fp8lab.Fp8labError) as e:
            fp8lab.ulp(fn, x, x)
        assert "not a function name" in str(e.value)
        with pytest.raises(fp8lab.Fp8labError) as e:
            fp8lab.ref(fn, x, "fp32")
        assert "not a function name" in str(e.value)


def test_ignored_arguments_are_refused():
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    y = np.maximum(x, np.float32(0))
    with pytest.raises(fp8lab.Fp8labError) as e:  # in_fmt names bit patterns; these are float32 values
        fp8lab.ulp("relu", x, y, in_fmt="bf16")
    assert "in_fmt=bf16" in str(e.value) and "float32" in str(e.value)
    assert fp8lab.ulp("relu", x, y, in_fmt="fp32").max_ulp == 0  # the array's own format: consistent
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.ref("relu", x, "fp32", in_fmt="e4m3")
    assert "in_fmt=e4m3" in str(e.value)
    with pytest.raises(fp8lab.Fp8labError) as e:
        fp8lab.convert(x, "e4m3", from_fmt="bf16")
    assert "from_fmt=bf16" in str(e.value)
    for t in (0, -1, 1025, 10000, 2.5, True):
        with pytest.raises(fp8lab.Fp8labError) as e:
            fp8lab.ulp("relu", x, y, threads=t)
        assert "threads" in str(e.value)
    assert fp8lab.ulp("relu", x, y, threads=1).count == 16


def test_0d_arrays_keep_their_shape():
    x = np.array(1.5, dtype=np.float32)
    c = fp8lab.convert(x, "e4m3")
    assert c.shape == () and int(c) == 0x3c
    r = fp8lab.ref("relu", x, "fp32")
    assert r.shape == () and float(r) == 1.5
    assert fp8lab.ulp("relu", x, x).count == 1


def test_big_endian_arrays():
    x = np.array([1.0, 448.0, 500.0, -1e9, 2.0 ** -10], dtype=np.float32)
    xb = x.astype(">f4")
    assert fp8lab.convert(xb, "e4m3").tolist() == fp8lab.convert(x, "e4m3").tolist() == [0x38, 0x7e, 0x7e, 0xfe, 0x00]
    b16 = fp8lab.convert(x[:3], "bf16")
    assert fp8lab.convert(b16.astype(">u2"), "fp32", from_fmt="bf16").tolist() == [1.0, 448.0, 500.0]
    y = np.maximum(x, np.float32(0))
    rep = fp8lab.ulp("relu", xb, y.astype(">f4"))
    assert rep.count == 5 and rep.max_ulp == 0


def test_gate_fails_on_a_class_mismatch():
    """max_ulp alone covers finite errors: a kernel that returns NaN at -inf passes `max_ulp <= 1`
    and must fail the gate."""
    xb = fp8lab.all_inputs("bf16", kind="bits")
    y = fp8lab.ref("silu", xb, "bf16", in_fmt="bf16")  # a correct kernel: the correctly rounded outputs
    good = fp8lab.ulp("silu", xb, y, fmt="bf16", in_fmt="bf16")
    assert good.count == 65536 and good.passes(max_ulp=1), good
    bad = y.copy()
    bad[0xff80] = 0x7fc0  # silu(-inf) = NaN: one class mismatch
    rep = fp8lab.ulp("silu", xb, bad, fmt="bf16", in_fmt="bf16")
    assert rep.max_ulp <= 1  # what a bare max_ulp check sees
    assert rep.mismatched_special == 1 and rep.infinite_errors == 1
    assert not rep.passes(max_ulp=1)
    assert rep.passes(max_ulp=1, allow_class_mismatches=True)
    with pytest.raises(fp8lab.GateFailed) as e:
        rep.check(1)
    assert "class mismatch" in str(e.value)
    assert [c.index for c in rep.class_mismatches] == [0xff80]
    assert all(not math.isinf(c.ulp) for c in rep.worst)
    with pytest.raises(fp8lab.GateFailed):
        fp8lab.ulp("silu", xb, bad, fmt="bf16", in_fmt="bf16", max_ulp=1)


def test_the_largest_finite_error_keeps_its_input():
    """11 NaN outputs and one finite error: max_ulp's input is worst[0], the NaNs are in
    class_mismatches."""
    xb = bf16_inputs()
    y = bf16_bits_from_f64(silu64(f32_from_bf16_bits(xb)))
    bad = y.copy()
    bad[100:111] = 0x7fc0
    k = 1500
    bad[k] = (bad[k] & 0x8000) | 0x7f00  # a finite value far from silu(x)
    rep = fp8lab.ulp("silu", xb, bad, fmt="bf16", in_fmt="bf16")
    assert rep.infinite_errors == 11 and rep.max_ulp > 1e3
    assert rep.worst[0].index == k and rep.worst[0].ulp == rep.max_ulp
    assert len(rep.class_mismatches) == 10 and all(math.isinf(c.ulp) for c in rep.class_mismatches)


def test_faithful_is_decided_exactly():
    """tanhf at 0x33000001 errs by 1 + 2.48e-9 ulp: reported as 1.0, but not faithful."""
    x = np.array([0x33000001], dtype=np.uint32).view(np.float32)
    y = np.array([0x33000002], dtype=np.uint32).view(np.float32)
    rep = fp8lab.ulp("tanh", x, y)
    assert rep.max_ulp == 1.0 and rep.faithful == 0 and rep.worst[0].bucket == "<=2"
    assert rep.histogram["<=2"] == 1 and rep.histogram["<=1"] == 0


def test_all_inputs():
    for fmt, n in (("bf16", 65536), ("fp16", 65536), ("e4m3", 256), ("e5m2", 256)):
        b = fp8lab.all_inputs(fmt, kind="bits")
        assert b.size == n and len(np.unique(b)) == n and int(b[0]) == 0 and int(b[-1]) == n - 1
    h = fp8lab.all_inputs("fp16")
    assert h.dtype == np.float16 and np.isnan(h).sum() == 2 * 1023 and np.isinf(h).sum() == 2
    with pytest.raises(fp8lab.Fp8labError):
        fp8lab.all_inputs("fp32")
    with pytest.raises(fp8lab.Fp8labError):
        fp8lab.all_inputs("bf16", kind="list")


def test_all_inputs_torch_and_ml_dtypes():
    torch = pytest.importorskip("torch")
    t = fp8lab.all_inputs("bf16", kind="torch")
    assert t.dtype == torch.bfloat16 and t.numel() == 65536
    assert np.array_equal(t.view(torch.int16).numpy().view(np.uint16), fp8lab.all_inputs("bf16", kind="bits"))
    e = fp8lab.all_inputs("e4m3", kind="torch")
    assert e.dtype == torch.float8_e4m3fn and int(torch.isnan(e.float()).sum()) == 2
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = fp8lab.all_inputs("bf16")
    assert a.dtype == ml_dtypes.bfloat16 and a.size == 65536


def test_installable(tmp_path):
    """`pip install ./experiments/python` gives an importable module that finds the CLI on PATH."""
    have = [subprocess.run([sys.executable] + a, capture_output=True).returncode == 0
            for a in (["-c", "import setuptools"], ["-m", "pip", "--version"])]
    if not all(have):
        pytest.skip("no pip/setuptools in %s (Debian: python3-pip python3-setuptools)" % sys.executable)
    # from a copy: setuptools leaves build/ and *.egg-info beside the pyproject
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "experiments", "python"), str(src),
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(target), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (target / "fp8lab.py").is_file()
    cli = os.path.abspath(os.environ.get("FP8LAB") or os.path.join(REPO, "build", "fp8lab"))
    env = dict(os.environ, PYTHONPATH=str(target), PATH=os.path.dirname(cli) + os.pathsep + os.environ["PATH"])
    env.pop("FP8LAB", None)
    code = ("import fp8lab, os; print(fp8lab.__file__); print(fp8lab.find_cli()); "
            "r = fp8lab.ulp('relu', fp8lab.all_inputs('e4m3', kind='bits'), fp8lab.all_inputs('e4m3', kind='bits'), "
            "fmt='e4m3', in_fmt='e4m3'); print(r.count)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split()
    assert lines[0].startswith(str(target)) and os.path.samefile(lines[1], cli) and lines[2] == "256", p.stdout
