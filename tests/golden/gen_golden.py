#!/usr/bin/env python3
"""gen_golden.py — golden values for tests/test_ref.c from mpmath (an independent arbitrary-precision
library; no value here comes from fp8lab's C code, which is asked only for the names of its functions).

For every function: inputs as float32 bit patterns (hex), the exact result computed by mpmath at high
precision (mp.prec 1200 bits, checked against 2400 bits: both must round alike, else the input is
dropped), rounded to nearest-even into float32 and bfloat16 with subnormals and IEEE overflow to Inf,
written as hex encodings.  Hard cases: among many candidate inputs, those whose exact result lies
closest to a rounding boundary (a midpoint) of float32 or bfloat16 are kept too (marked '# hard').

Usage:  python3 tests/golden/gen_golden.py [OUTDIR]     (needs: pip install mpmath, and a built fp8lab:
        build/fp8lab or $FP8LAB, whose `fp8lab ref --list` must name exactly the functions below)
Lines:  unary   X FP32 BF16 FP32_RZ BF16_RZ FP32_UP BF16_UP   (round to nearest even, toward zero, up)
        binary  G U (the same six)   ternary G U S (the same six)
        rowwise N X0..X(N-1) FP32_0..FP32_(N-1) BF16_0..BF16_(N-1)
"""
import math
import os
import random
import re
import struct
import subprocess
import sys

import mpmath
from mpmath import mp, mpf

SEED = 20261121
PREC = 1200

def f32(bits):
    return struct.unpack('<f', struct.pack('<I', bits))[0]

def bits32(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]

def to_f32(x):  # nearest float32 of a Python float (exact for the values we generate)
    return bits32(x)

# ---- correct rounding of an mpf (taken as exact) ----------------------------------------------------

def round_fmt(v, p, qmin, maxval, mode='n'):
    """v rounded to p bits with smallest quantum 2^qmin; mode 'n' nearest-even, 'z' toward zero,
    'u' toward +Inf; IEEE overflow (Inf, or max when rounding toward zero).  A Python float or nan."""
    if mpmath.isnan(v):
        return float('nan')
    if mpmath.isinf(v):
        return float(v)
    if v == 0:
        return 0.0  # the sign of a zero result is handled by the caller
    sign = -1 if v < 0 else 1
    away = mode == 'u' and sign > 0  # directed up moves the magnitude away from zero for v > 0 only
    a = abs(v)
    man, exp = a.man, a.exp  # a = man * 2^exp exactly
    e = exp + man.bit_length() - 1  # 2^e <= a < 2^(e+1)
    if e < qmin - 2:
        # below a quarter of the smallest subnormal: 0, or the smallest subnormal when rounding away
        return sign * (math.ldexp(1, qmin) if away else 0.0)
    if e > 1100:
        return sign * (math.inf if mode == 'n' or away else maxval)
    q = max(e - (p - 1), qmin)
    sh = exp - q
    if sh >= 0:
        n = man << sh
    else:
        n = man >> (-sh)
        rem = man - (n << (-sh))
        half = 1 << (-sh - 1)
        if mode == 'n':
            if rem > half or (rem == half and (n & 1)):
                n += 1
        elif away and rem:
            n += 1
    r = math.ldexp(n, q)
    if r > maxval:
        return sign * (math.inf if mode == 'n' or away else maxval)
    return sign * r

F32_MAX = float.fromhex('0x1.fffffep+127')
BF16_MAX = float.fromhex('0x1.fep+127')

def enc_f32(v, negzero, mode='n'):
    r = round_fmt(v, 24, -149, F32_MAX, mode)
    if math.isnan(r):
        return 0x7FFFFFFF
    if r == 0 and v == 0:
        return 0x80000000 if negzero else 0
    return bits32(r)

def enc_bf16(v, negzero, mode='n'):
    r = round_fmt(v, 8, -133, BF16_MAX, mode)
    if math.isnan(r):
        return 0x7FFF
    if r == 0 and v == 0:
        return 0x8000 if negzero else 0
    return bits32(r) >> 16

def boundary_distance(v, p, qmin):
    """|v - nearest midpoint| in ulps (small = hard)."""
    if v == 0 or not mpmath.isfinite(v):
        return 1.0
    a = abs(v)
    e = int(mpmath.floor(mpmath.log(a, 2)))
    q = max(e - (p - 1), qmin)
    t = a / mpf(2) ** q  # in ulps
    frac = t - mpmath.floor(t)
    return float(abs(frac - mpf(0.5)))

# ---- the functions, written from their definitions -----------------------------------------------

def sig(x):
    return 1 / (1 + mpmath.exp(-x))

SELU_S = mpf('1.0507009873554804934193349852946')
SELU_A = mpf('1.6732632423543772848170429916717')
ALPHA_LEAKY = mpf(0.01)  # the binary64 value 0.01, as the C side takes parameters

def gelu(x):
    return x * mpmath.erfc(-x / mpmath.sqrt(2)) / 2

def gelu_tanh(x):
    z = mpmath.sqrt(2 / mpmath.pi) * (x + mpf('0.044715') * x ** 3)
    return x * sig(2 * z)  # 0.5 (1 + tanh z) = sigmoid(2z)

def polyrelu3(x):
    if x <= 0:
        return mpf(0)
    return (x + x ** 2 + x ** 3) / 3

UNARY = {
    'relu': lambda x: x if x > 0 else mpf(0),
    'relu2': lambda x: x * x if x > 0 else mpf(0),
    'leaky_relu': lambda x: x if x > 0 else ALPHA_LEAKY * x,
    'prelu': lambda x: x if x > 0 else mpf(0.25) * x,
    'elu': lambda x: x if x > 0 else mpmath.expm1(x),
    'selu': lambda x: SELU_S * (x if x > 0 else SELU_A * mpmath.expm1(x)),
    'gelu': gelu,
    'gelu_tanh': gelu_tanh,
    'sigmoid': sig,
    'tanh': mpmath.tanh,
    'silu': lambda x: x * sig(x),
    'swish': lambda x: x * sig(x),
    'mish': lambda x: x * mpmath.tanh(mpmath.log1p(mpmath.exp(x))),
    'softplus': lambda x: mpmath.log1p(mpmath.exp(x)),
    'polyrelu': polyrelu3,
}
def log1p_real(x):
    """log(1 + x) on the reals: -Inf at -1, NaN below (mpmath would go complex)"""
    if x < -1:
        return mpf('nan')
    if x == -1:
        return mpf('-inf')
    return mpmath.log1p(x)

# The elementary functions (reference-only rows of act_list.h): written last, from the same seeded
# stream after every other file, so that adding them left the earlier files as they were.
ELEMENTARY = {
    'exp': mpmath.exp,
    'expm1': mpmath.expm1,
    'log1p': log1p_real,
    'erf': mpmath.erf,
}
# sign of a zero result, for inputs +-0 (x: the input)
NEGZERO = {
    'relu': lambda x: False, 'relu2': lambda x: False, 'polyrelu': lambda x: False,
}

BINARY = {
    'glu': lambda g, u: sig(g) * u,
    'bilinear': lambda g, u: g * u,
    'reglu': lambda g, u: (g if g > 0 else mpf(0)) * u,
    'geglu': lambda g, u: gelu(g) * u,
    'swiglu': lambda g, u: g * sig(g) * u,
}

def softmax(row):
    m = max(row)
    e = [mpmath.exp(v - m) for v in row]
    s = mpmath.fsum(e)
    return [t / s for t in e]

def polynorm3(row):
    n = len(row)
    out = [mpf(0)] * n
    for i in (1, 2, 3):
        v = [x ** i for x in row]
        d = mpmath.sqrt(mpmath.fsum(t * t for t in v) / n + mpf(1e-6))
        out = [o + t / d for o, t in zip(out, v)]
    return [o / 3 for o in out]

def pattention(row):
    n = len(row)
    nrm = mpmath.sqrt(mpmath.fsum(t * t for t in row))
    return [gelu(mpmath.sqrt(n) * t / nrm) for t in row]

ROWWISE = {'softmax': softmax, 'polynorm': polynorm3, 'pattention': pattention}

TERNARY = {'smooth_swiglu': lambda a, b, c: c * a * sig(a) * b}  # (g, u, s)

# NAME_dx.txt: the rows of reference/act_list.h with gold_dx 1 (tests/test_ref.c checks the folder)
DX = ('elu', 'selu', 'gelu', 'gelu_tanh', 'sigmoid', 'tanh', 'silu', 'mish', 'softplus')

def check_functions():
    """The functions above against `fp8lab ref --list` (reference/act_list.h): the same names, each
    with its inputs.  Only names are read from fp8lab; every value here comes from mpmath."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cli = os.environ.get('FP8LAB', os.path.join(root, 'build', 'fp8lab'))
    if not os.access(cli, os.X_OK):
        sys.exit('gen_golden.py: %s not found: run make (or set FP8LAB)' % cli)
    listed = {}
    for line in subprocess.run([cli, 'ref', '--list'], check=True, capture_output=True, text=True).stdout.splitlines():
        m = re.match(r'(\S+)\s+\(([^)]*)\)(.*)', line)
        if m:
            listed[m.group(1)] = 'row' if 'row-wise' in m.group(3) else m.group(2)
    ours = {**{n: 'x' for n in UNARY}, **{n: 'x' for n in ELEMENTARY}, **{n: 'g,u' for n in BINARY}, **{n: 'g,u,s' for n in TERNARY},
            **{n: 'row' for n in ROWWISE}}
    if ours != listed:
        bad = sorted(n for n in set(ours) | set(listed) if ours.get(n) != listed.get(n))
        sys.exit('gen_golden.py: functions differ from `fp8lab ref --list` (reference/act_list.h): ' +
                 ', '.join('%s (here %s, there %s)' % (n, ours.get(n), listed.get(n)) for n in bad))
    if set(UNARY) & set(ELEMENTARY):
        sys.exit('gen_golden.py: a function is both UNARY and ELEMENTARY')
    if not set(DX) <= set(UNARY):
        sys.exit('gen_golden.py: DX names a function that is not unary')

# ---- inputs ----------------------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 1e-30, -1e-30, 1e-8, -1e-8, 1e-3, -1e-3, 0.1, -0.1,
           0.5, -0.5, 1.0, -1.0, 1.278464542761074, -1.278464542761074, 2.0, -2.0, 3.140625, -3.140625,
           10.0, -10.0, 17.5, -17.5, 20.25, -20.25, 39.5, -40.5, 88.7, -88.7, 103.9, -103.9, 150.0,
           -150.0, 200.0, -200.0, 1e5, -1e5, 1e30, -1e30, F32_MAX, -F32_MAX]

def rand_f32(rng, lo, hi):
    return f32(to_f32(rng.uniform(lo, hi)))

def exact_eval(fn, args):
    """value at PREC, checked at 2*PREC: returns (value, ok)."""
    with mp.workprec(PREC):
        a = [mpf(x) for x in args]
        v1 = fn(*a)
    with mp.workprec(2 * PREC):
        a = [mpf(x) for x in args]
        v2 = fn(*a)
    return v2, v1, a

# Functions whose value at a nonzero input is never a dyadic number: when mpmath's value nevertheless
# comes out representable in the target format, its precision (2400 bits) did not resolve the side of
# the exact result (e.g. elu(-1e5) = -1 + e^-100000), so the directed-mode columns are left out.
EXACT_FUNCS = ('relu', 'relu2', 'leaky_relu', 'prelu', 'polyrelu', 'bilinear', 'reglu')

def line_for(name, fn, args, negzero_rule):
    v2, v1, _ = exact_eval(fn, args)
    nz = False
    if v2 == 0:
        nz = negzero_rule(args)
    r = []
    for mode in ('n', 'z', 'u'):
        for enc in (enc_f32, enc_bf16):
            c1, c2 = enc(v1, nz, mode), enc(v2, nz, mode)
            if c1 != c2:
                return None
            r.append(c2)
    unresolved = (name not in EXACT_FUNCS and v2 != 0 and mpmath.isfinite(v2) and any(a != 0 for a in args)
                  and (r[2] == r[4] or r[3] == r[5]))
    return r[:2] if unresolved else r  # fp32 rne, bf16 rne[, fp32 rtz, bf16 rtz, fp32 up, bf16 up]

def tail(r):
    """the directed-mode columns of an elementwise line (none when they could not be resolved)"""
    return ' %08x %04x %08x %04x' % (r[2], r[3], r[4], r[5]) if len(r) == 6 else ''


def default_negzero(fnname, args):
    if fnname in NEGZERO:
        return NEGZERO[fnname](args[0])
    # zero results of the other unary/gated functions at zero inputs carry the input's (product's) sign
    s = 0
    for a in args:
        if a == 0:
            return math.copysign(1.0, a) < 0 if len(args) == 1 else None
    return False

def load_hard():
    hard = {}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hard_inputs.txt')
    with open(path) as f:
        for line in f:
            if line.startswith('#') or not line.strip():
                continue
            fn, hexbits = line.split()[:2]
            hard.setdefault(fn, []).append(f32(int(hexbits, 16)))
    hard['swish'] = hard.get('silu', [])
    return hard

HARD = load_hard()

def write_unary(outdir, name, fn, rng):
    """NAME.txt of a unary function: the SPECIAL inputs, 100 random ones and the hard cases, from rng"""
    inputs = [f32(to_f32(x)) for x in SPECIAL] + [rand_f32(rng, -30, 30) for _ in range(60)] + \
             [rand_f32(rng, -3, 3) for _ in range(40)]
    # hard cases: candidates closest to a midpoint of float32 / bfloat16
    cands = [rand_f32(rng, -12, 12) for _ in range(1500)]
    hard = []
    with mp.workdps(40):
        scored32 = sorted(cands, key=lambda x: boundary_distance(fn(mpf(x)), 24, -149))
        scored16 = sorted(cands, key=lambda x: boundary_distance(fn(mpf(x)), 8, -133))
    hard = scored32[:4] + scored16[:4] + HARD.get(name, [])
    with open(os.path.join(outdir, name + '.txt'), 'w') as out:
        out.write('# %s: X FP32 BF16 (RNE; then RZ, UP; IEEE overflow); mpmath %s, prec %d, seed %d\n'
                  % (name, mpmath.__version__, PREC, SEED))
        for i, x in enumerate(inputs + hard):
            nz = (math.copysign(1.0, x) < 0) if (x == 0 and name not in NEGZERO) else False
            if name in ('elu',) and x == 0:
                nz = math.copysign(1.0, x) < 0
            r = line_for(name, fn, [x], lambda a, nz=nz: nz)
            if r is None:
                continue
            tag = '  # hard' if i >= len(inputs) else ''
            out.write('%08x %08x %04x%s%s\n' % (to_f32(x), r[0], r[1], tail(r), tag))
    print(name, file=sys.stderr)

def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    check_functions()
    rng = random.Random(SEED)
    mp.prec = PREC
    for name, fn in UNARY.items():
        write_unary(outdir, name, fn, rng)
    # first derivatives of the smooth unary functions, by mpmath.diff (numerical differentiation at the
    # working precision, independent of the analytic formulas in the C code): files NAME_dx.txt
    for name in DX:
        fn = UNARY[name]
        xs = [rand_f32(rng, -12, 12) for _ in range(40)] + [f32(to_f32(v)) for v in
                                                            (0.5, -0.5, 1.0, -1.278464542761074, -3.0, 7.5, -20.5)]
        with open(os.path.join(outdir, name + '_dx.txt'), 'w') as out:
            out.write('# d/dx %s: X FP32 BF16 (RNE; then RZ, UP); mpmath.diff, prec %d, seed %d\n' % (name, PREC, SEED))
            for x in xs:
                if name in ('elu', 'selu') and x == 0:
                    continue
                r = line_for(name, lambda t, fn=fn: mpmath.diff(fn, t), [x], lambda a: False)
                if r is None:
                    continue
                out.write('%08x %08x %04x%s\n' % (to_f32(x), r[0], r[1], tail(r)))
        print(name + '_dx', file=sys.stderr)
    for name, fn in BINARY.items():
        pairs = [(rand_f32(rng, -12, 12), rand_f32(rng, -12, 12)) for _ in range(120)]
        pairs += [(f32(to_f32(g)), f32(to_f32(u))) for g in (0.5, -3.0, 25.0, -50.0, 1e-20)
                  for u in (1.0, -7.25, 1e20, 1e-30)]
        with open(os.path.join(outdir, name + '.txt'), 'w') as out:
            out.write('# %s: G U FP32 BF16 (RNE; then RZ, UP; IEEE overflow); mpmath prec %d, seed %d\n' % (name, PREC, SEED))
            for g, u in pairs:
                # an exact zero result carries the IEEE sign of h(g) * u; h(g) = +0 for reglu at g <= 0,
                # positive for glu, the sign of g for the others
                hs = 1.0 if name in ('glu',) or (name == 'reglu' and g <= 0) else math.copysign(1.0, g)
                nz = hs * math.copysign(1.0, u) < 0
                r = line_for(name, fn, [g, u], lambda a, nz=nz: nz)
                if r is None:
                    continue
                out.write('%08x %08x %08x %04x%s\n' % (to_f32(g), to_f32(u), r[0], r[1], tail(r)))
        print(name, file=sys.stderr)
    for name, fn in TERNARY.items():
        with open(os.path.join(outdir, name + '.txt'), 'w') as out:
            out.write('# %s: G U S FP32 BF16 (RNE; then RZ, UP; IEEE overflow); mpmath prec %d, seed %d\n' % (name, PREC, SEED))
            for _ in range(120):
                g, u, s = rand_f32(rng, -12, 12), rand_f32(rng, -12, 12), f32(to_f32(2.0 ** rng.randint(-8, 8) * rng.uniform(0.5, 1)))
                r = line_for(name, fn, [g, u, s], lambda a: False)
                if r is None:
                    continue
                out.write('%08x %08x %08x %08x %04x%s\n' % (to_f32(g), to_f32(u), to_f32(s), r[0], r[1], tail(r)))
    for name, fn in ROWWISE.items():
        with open(os.path.join(outdir, name + '.txt'), 'w') as out:
            out.write('# %s: N X0..X(N-1) FP32_0.. BF16_0.. (RNE); mpmath prec %d, seed %d; polynorm: order 3, '
                      'default coefficients, eps 1e-6 (binary64); pattention: tau = sqrt(n)\n' % (name, PREC, SEED))
            for t in range(40):
                n = rng.choice([1, 2, 3, 4, 5, 8])
                row = [rand_f32(rng, -6, 6) for _ in range(n)]
                if t == 0:
                    row = [1.5] * 4  # a constant row
                n = len(row)
                with mp.workprec(PREC):
                    v1 = fn([mpf(x) for x in row])
                with mp.workprec(2 * PREC):
                    v2 = fn([mpf(x) for x in row])
                e32 = [enc_f32(a, False) for a in v2]
                e16 = [enc_bf16(a, False) for a in v2]
                if e32 != [enc_f32(a, False) for a in v1] or e16 != [enc_bf16(a, False) for a in v1]:
                    continue
                out.write('%d %s %s %s\n' % (n, ' '.join('%08x' % to_f32(x) for x in row),
                                             ' '.join('%08x' % c for c in e32), ' '.join('%04x' % c for c in e16)))
        print(name, file=sys.stderr)
    for name, fn in ELEMENTARY.items():
        write_unary(outdir, name, fn, rng)

if __name__ == '__main__':
    main()
