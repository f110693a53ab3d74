#!/usr/bin/env python3
"""explain.py — checks the causes that experiments/torchval/TORCH.md gives for PyTorch's inaccurate
outputs.  Each cause is a float32 model of the kernel's arithmetic, written with numpy float32
operations (or, where the kernel's own exp/erf/tanh matters, torch's float32 ops), and the check is
how many of torch's output bits the model predicts.  Errors in ulps come from `fp8lab ulp`.

    ENV/bin/python experiments/torchval/explain.py        # ENV: a venv with torch and numpy; ~1 min
"""
import math
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

try:
    import numpy as np
    import torch
except ImportError as e:
    print("explain: SKIPPED: %s (python3 -m venv ENV && ENV/bin/pip install torch numpy)" % e)
    sys.exit(0)
import fp8lab  # noqa: E402

F = torch.nn.functional
f32 = np.float32
np.seterr(all="ignore")
warnings.simplefilter("ignore")


def bf16_rne(a):
    """float32 -> bf16 bits, to nearest even; NaN -> 0x7fc0 (compared as a class)."""
    a = np.asarray(a, dtype=np.float32)
    b = a.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    r[np.isnan(a)] = 0x7FC0
    return r


def bits16(t):
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def same16(tb, mb):
    nan_t = (tb & 0x7FFF) > 0x7F80
    nan_m = (mb & 0x7FFF) > 0x7F80
    return (tb == mb) | (nan_t & nan_m)


def ftz(a):
    a = a.copy()
    a[np.abs(a) < f32(2.0 ** -126)] *= f32(0)
    return a


def erf32(v):
    """erf correctly rounded to float32 (from double's erf, accurate to < 1e-16)."""
    return np.array([math.erf(float(t)) for t in np.asarray(v, np.float64)], dtype=np.float32)


hx = fp8lab.hexf


def agree(name, ok, total, note=""):
    print("%-58s model = torch on %d of %d%s" % (name, int(np.count_nonzero(ok)), total, note))


def hexes(xf, idx, k=6):
    return ", ".join(hx(xf[i]) for i in idx[:k])


codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
xb = torch.from_numpy(codes.view(np.int16).copy()).view(torch.bfloat16)
xf = xb.float().numpy()
one, half = f32(1), f32(0.5)
C = f32(math.sqrt(0.5))

print("torch %s, CPU capability %s" % (torch.__version__, torch.backends.cpu.get_cpu_capability()))

# ---- silu, sigmoid: exp(-x) overflows ------------------------------------------------------------
t = bits16(F.silu(xb))
m = bf16_rne(xf / (one + np.exp(-xf)))
agree("silu bf16: x / (1 + exp(-x)) in float32", same16(t, m), 65536)
over = np.isinf(np.exp(-xf)) & np.isfinite(xf)
print("    exp(-x) = inf for %d finite bf16 x (x <= %s); torch's silu is -0 at %d of them" % (
    over.sum(), hx(xf[over].max()), np.count_nonzero(over & (t == 0x8000))))
t = bits16(torch.sigmoid(xb))
agree("sigmoid bf16: 1 / (1 + exp(-x)) in float32", same16(t, bf16_rne(one / (one + np.exp(-xf)))), 65536)

bits = np.arange(0xC2800000, 0xC3000000, dtype=np.uint64).astype(np.uint32)  # -[2^6, 2^7)
x32 = torch.from_numpy(bits.view(np.float32))
xn = x32.numpy()
over = np.isinf(np.exp(-xn))
for nm, fn in (("silu", F.silu), ("sigmoid", torch.sigmoid)):
    y = fn(x32).numpy()
    print("%s fp32 on -[2^6, 2^7): exp(-x) = inf at %d inputs (x <= %s); torch returns 0 at %d of them, "
          "and at %d others" % (nm, over.sum(), hx(xn[over].max()), np.count_nonzero(over & (y == 0)),
                                np.count_nonzero(~over & (y == 0))))

# ---- gelu (exact): oneDNN for fp32/bf16 on the CPU -------------------------------------------------
t = bits16(F.gelu(xb))
xd = ftz(xf)  # oneDNN's bf16 path: subnormal inputs and results are flushed to zero
e = erf32(xd * C)
m = bf16_rne(ftz((xd * (one + e)) * half))
ok = same16(t, m)
agree("gelu bf16 (oneDNN): FTZ((x * (1 + erf(x/sqrt2))) * 0.5)", ok, 65536)
bad = np.nonzero(~ok)[0]
fin = bad[np.isfinite(xf[bad])]
print("    the others: %s; finite ones all in [%s, %s]" % (
    ", ".join("%s -> torch 0x%04x, model 0x%04x" % (hx(xf[i]), t[i], m[i]) for i in bad[~np.isfinite(xf[bad])]),
    hx(xf[fin].min()), hx(xf[fin].max())))
off = []
for i in fin:  # how far the kernel's erf must be from the correctly rounded one to give torch's bits
    for k in sorted(range(-8, 9), key=abs):
        ee = e[i]
        for _ in range(abs(k)):
            ee = np.nextafter(ee, f32(np.inf if k > 0 else -np.inf))
        if bf16_rne(ftz(np.array([(xd[i] * (one + ee)) * half], np.float32)))[0] == t[i]:
            off.append(k)
            break
    else:
        off.append(None)
print("    each of those %d is torch's output for an erf %s float32 ulps from the correctly rounded erf" % (
    len(fin), "between %d and %d" % (min(off), max(off)) if None not in off else "NOT within 8"))
big = (xf >= 2.0 ** 127) & np.isfinite(xf)
print("    x * (1 + erf) overflows for the %d finite x >= 2^127: torch gives +inf at %d of them" % (
    big.sum(), np.count_nonzero(big & (t == 0x7F80))))
sub = (np.abs(xf) < 2.0 ** -125) & (xf != 0)
print("    |x| < 2^-125 (result subnormal): torch returns +-0 at %d of %d" % (
    np.count_nonzero(sub & ((t & 0x7FFF) == 0)), sub.sum()))
with torch.backends.mkldnn.flags(enabled=False):
    t2 = bits16(F.gelu(xb))
    inf_aten = F.gelu(torch.tensor([float("inf"), 2.0 ** 127], dtype=torch.float32)).tolist()
# (a one-element tensor never goes to oneDNN: these need two or more)
inf_dnn = F.gelu(torch.tensor([float("inf"), 2.0 ** 127], dtype=torch.float32)).tolist()
e2 = erf32(xf * C)
ok = same16(t2, bf16_rne((xf * half) * (one + e2)))
agree("gelu bf16, oneDNN off: (x * 0.5) * (1 + erf(x/sqrt2))", ok, 65536,
      "; others at x = %s" % hexes(xf, np.nonzero(~ok)[0]))
print("    fp32 gelu([+inf, 2^127]): oneDNN %s, %s; oneDNN off %s, %s" % (*inf_dnn, *inf_aten))
cut = np.nonzero((e2 == -1) & (xf < 0) & np.isfinite(xf))[0]
print("    fl32(erf(x/sqrt2)) = -1 for x <= %s: then 1 + erf = 0 and gelu is -0 (torch -0 at %d of those %d x)" % (
    hx(xf[cut].max()), np.count_nonzero(t2[cut] == 0x8000), cut.size))
groups = [("finite x >= 2^127", big), ("x = +inf", np.isposinf(xf)), ("x = -inf", np.isneginf(xf)),
          ("0 < |x| < 2^-125", sub), ("x < -3", (xf < -3) & np.isfinite(xf))]
for label, yb in (("oneDNN", t), ("oneDNN off", t2)):
    counts = []
    for nm, mask in groups:
        r = fp8lab.ulp("gelu", codes[mask], yb[mask], fmt="bf16", in_fmt="bf16")
        counts.append("%s: %d > 16 ulp, %d class mismatches" % (nm, r.histogram[">16"], r.mismatched_special))
    print("    fp8lab, bf16 gelu (%s) by region: %s" % (label, "; ".join(counts)))

bits = np.arange(0xC0800000, 0xC1000000, dtype=np.uint64).astype(np.uint32)  # -[2^2, 2^3)
x4 = torch.from_numpy(bits.view(np.float32))
for label, on in (("oneDNN", True), ("oneDNN off", False)):
    with torch.backends.mkldnn.flags(enabled=on):
        y = F.gelu(x4).numpy()
    print("gelu fp32 on -[2^2, 2^3) (%s): torch returns -0 at %d inputs, the largest %s" % (
        label, np.count_nonzero(y == 0), hx(x4.numpy()[y == 0].max())))

# ---- gelu, tanh form ---------------------------------------------------------------------------
t = bits16(F.gelu(xb, approximate="tanh"))
k, kap = f32(math.sqrt(2 / math.pi)), f32(0.044715)
inner = k * (xf + kap * (xf * xf * xf))
for nm, th in (("np.tanh", np.tanh(inner)), ("torch.tanh", torch.tanh(torch.from_numpy(inner)).numpy())):
    m = bf16_rne(half * xf * (one + th))
    ok = same16(t, m)
    bad = np.nonzero(~ok)[0]
    agree("gelu_tanh bf16: 0.5 x (1 + tanh(k (x + 0.044715 x^3))), %s" % nm, ok, 65536,
          "; others at x = %s" % hexes(xf, bad, 4) if bad.size else "")
th = np.tanh(inner)
cut = np.nonzero((th == -1) & (xf < 0) & np.isfinite(xf))[0]
print("    fl32(tanh(inner)) = -1 for x <= %s: 1 + tanh = 0, torch -0 at %d of those %d" % (
    hx(xf[cut].max()), np.count_nonzero(t[cut] == 0x8000), cut.size))

# ---- swiglu = silu(g) * u: silu(g) is rounded to bf16 first ---------------------------------------
rng = np.random.default_rng(1)  # the sample of torch_table.py (seed 1, 2^22 pairs)
b = rng.integers(0, 1 << 32, size=1 << 22, dtype=np.uint64)
g = torch.from_numpy((b >> np.uint64(16)).astype(np.uint16).view(np.int16)).view(torch.bfloat16)
u = torch.from_numpy((b & np.uint64(0xFFFF)).astype(np.uint16).view(np.int16)).view(torch.bfloat16)
s = F.silu(g)
t = bits16(s * u)
m = bf16_rne(s.float().numpy() * u.float().numpy())
agree("swiglu bf16 (2^22 pairs): bf16(float32(silu(g) in bf16) * u)", same16(t, m), 1 << 22)
gn = g.float().numpy()
sz = (s.float().numpy() == 0) & (gn < -1) & np.isfinite(gn)
print("    silu(g) in bf16 is -0 for the %d sampled finite g < -1 with g <= %s (all %d of them)" % (
    sz.sum(), hx(gn[sz].max()), np.count_nonzero((gn <= gn[sz].max()) & np.isfinite(gn))))

# ---- mish fp32: subnormal intermediates ----------------------------------------------------------
bits = np.arange(0xC2800000, 0xC3000000, dtype=np.uint64).astype(np.uint32)
x32 = torch.from_numpy(bits.view(np.float32))
y = F.mish(x32).numpy().view(np.uint32)
sp = F.softplus(x32)
m = (x32 * torch.tanh(sp)).numpy().view(np.uint32)
agree("mish fp32 on -[2^6, 2^7): x * tanh(softplus(x)), torch float32 ops", m == y, y.size)
spn = sp.numpy()
print("    softplus(x) ~ e^x is subnormal for x < %s and 0 for x <= %s" % (
    hx(x32.numpy()[(spn < 2.0 ** -126)].max()), hx(x32.numpy()[spn == 0].max())))

# ---- selu fp32: float32 constants -----------------------------------------------------------------
SCALE, ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
for lo, nm in ((0x3F000000, "[2^-1, 2^0)"), (0xBF000000, "-[2^-1, 2^0)")):
    bits = np.arange(lo, lo + (1 << 23), dtype=np.uint64).astype(np.uint32)
    x = torch.from_numpy(bits.view(np.float32))
    y = F.selu(x).numpy().view(np.uint32)
    if lo == 0x3F000000:
        m, d = (x.numpy() * f32(SCALE)).view(np.uint32), "x * fl32(scale)"
    else:
        m, d = (torch.expm1(x).numpy() * f32(f32(ALPHA) * f32(SCALE))).view(np.uint32), \
            "expm1(x) * fl32(fl32(alpha) * fl32(scale))"
    agree("selu fp32 on %s: %s" % (nm, d), m == y, y.size)
print("    fl32(scale) is %.3g relative from scale, fl32(alpha*scale) %.3g" % (
    abs(float(f32(SCALE)) / SCALE - 1), abs(float(f32(f32(ALPHA) * f32(SCALE))) / (ALPHA * SCALE) - 1)))

# ---- softmax fp32: the rounding of x - max --------------------------------------------------------
rng = np.random.default_rng(1)  # the rows of torch_table.py: 32 x 256, N(0, 16^2)
x = torch.from_numpy(rng.standard_normal((32, 256)) * 16).to(torch.float32)
y = torch.softmax(x, dim=-1)
xn = x.numpy()
z = (xn - xn.max(axis=1, keepdims=True)).astype(np.float32)  # float32 differences, rounded
ez = np.exp(z.astype(np.float64))
model = (ez / ez.sum(axis=1, keepdims=True)).astype(np.float32)  # everything else exact
rm, rt = fp8lab.ulp("softmax", x, torch.from_numpy(model)), fp8lab.ulp("softmax", x, y)
dist = np.abs(y.numpy().astype(np.float64) - model) / np.spacing(np.abs(model))
print("softmax fp32, N(0, 16^2) rows: torch max %.4g ulp; exp of the float32-rounded x - max, all else exact: "
      "max %.4g ulp; torch within %.3g ulp of that model" % (rt.max_ulp, rm.max_ulp, dist.max()))

# ---- special values ------------------------------------------------------------------------------
ninf = f32(-np.inf)
print("specials: float32 arithmetic at x = -inf: silu %s, gelu %s, gelu_tanh %s, mish %s" % (
    ninf / (one + np.exp(-ninf)), (ninf * (one + f32(-1))) * half,
    half * ninf * (one + np.tanh(k * (ninf + kap * ninf * ninf * ninf))), ninf * np.tanh(f32(0))))
sp = torch.tensor([-np.inf, -0.0], dtype=torch.bfloat16)
print("    torch bf16: silu %s, gelu %s, gelu_tanh %s, mish %s; relu(-0) = %s" % (
    F.silu(sp)[0].item(), F.gelu(sp)[0].item(), F.gelu(sp, approximate="tanh")[0].item(), F.mish(sp)[0].item(),
    hx(F.relu(sp)[1].item())))
tiny = torch.tensor([2.0 ** -24], dtype=torch.float16)
v = F.silu(tiny.float())[0].item()
print("fp16 silu(2^-24): float32 silu = %s, a tie between 0 and 2^-24 in fp16 -> %s; exact silu(2^-24) = 2^-25 (1 + 2^-26 ...)" % (
    hx(v), F.silu(tiny)[0].item()))

# ---- the tanh form's own distance from GELU (no torch arithmetic involved) ------------------------
for fmt in ("bf16", "fp16"):
    if fmt == "bf16":
        keep = np.isfinite(xf)
        xin, kw = codes[keep], {"in_fmt": "bf16"}
    else:
        h = codes.view(np.float16)
        keep = np.isfinite(h)
        xin, kw = h[keep], {}
    ct = fp8lab.ref("gelu_tanh", xin, fmt, **kw)  # the tanh form, correctly rounded
    r = fp8lab.ulp("gelu", xin, ct, fmt=fmt, **kw)
    print("the tanh form itself (correctly rounded) judged as GELU, every finite %s: max %.6g ulp at %s" % (
        fmt, r.max_ulp, r.worst[0]))

# ---- the reproducers of TORCH.md: their "correct" lines are MPFR's correctly rounded values -------
def check_repro(name, x, right, ref, fmt):
    xin = tuple(t.float().numpy() for t in x) if isinstance(x, tuple) else x.float().numpy()
    want = fp8lab.ref(ref, xin, fmt)
    want = want.view(np.uint32) if fmt == "fp32" else want
    got = right.contiguous().view(torch.int16 if fmt == "bf16" else torch.int32).numpy()
    got = got.view(np.uint16) if fmt == "bf16" else got.view(np.uint32)
    print("reproducer %-10s correct line = MPFR's %s: %s" % (name, fmt, bool((got == want).all())))


x = torch.tensor([-90.5, -89.0], dtype=torch.bfloat16)
check_repro("silu", x, F.silu(x.double()).bfloat16(), "silu", "bf16")
x = torch.tensor([-89.0, -90.0], dtype=torch.bfloat16)
check_repro("sigmoid", x, torch.sigmoid(x.double()).bfloat16(), "sigmoid", "bf16")
x = torch.tensor([2.0 ** 127, float("inf"), -10.0, 2.0 ** -126], dtype=torch.bfloat16)
xd = x.double()
check_repro("gelu", x, (xd * torch.special.erfc(-xd / 2 ** 0.5) / 2).bfloat16(), "gelu", "bf16")
x = torch.tensor([-6.1875, -8.625], dtype=torch.bfloat16)
xd = x.double()
check_repro("gelu_tanh", x, (xd * torch.sigmoid(2 * (2 / math.pi) ** 0.5 * (xd + 0.044715 * xd ** 3))).bfloat16(),
            "gelu_tanh", "bf16")
g, u = torch.tensor([-97.5], dtype=torch.bfloat16), torch.tensor([2.0 ** 38], dtype=torch.bfloat16)
check_repro("swiglu", (g, u), (F.silu(g.double()) * u.double()).bfloat16(), "swiglu", "bf16")
x = torch.tensor([-102.875, -100.0])
check_repro("mish", x, F.mish(x.double()).float(), "mish", "fp32")
x = torch.tensor([[41.1438102722168, -37.87767028808594]])
check_repro("softmax", x, torch.softmax(x.double(), dim=-1).float(), "softmax", "fp32")
