#!/usr/bin/env python3
"""bench_convert_peers.py -- the peers of tests/bench_convert.c: float32 -> e4m3 / e5m2 / bf16 / fp16 with
PyTorch (copy_ into a preallocated tensor of the target dtype, the counterpart of a conversion into an
existing buffer; x.to(dtype) would also pay for allocating and first-touching a fresh output) and
ml_dtypes (numpy astype, allocating: its only API), each next to a float32 copy by the same library.
Single thread, 16 Mi float32 (64 MiB), best of 9, GB/s of float32 input; the data have
bench_convert's distribution (uniform in [-0.5, 0.5) times 2^(i mod 13)).  The peers' casts round to
nearest-even; whether one saturates is probed (1e6 and +Inf cast to the format and back: finite or
not) and printed, so that bench_convert sets each rate beside fp8lab's conversion of the same kind
(torch 2.15's float8_e4m3fn saturates, its e5m2/bf16/fp16 and all of ml_dtypes' do not).

The decodes (--decode): the same data cast to each format by the peer itself, then back to float32:
torch's out.copy_(codes) into a preallocated float32 tensor and codes.to(torch.float32) (allocating),
ml_dtypes' codes.astype(np.float32) (allocating); GB/s of float32 OUTPUT (64 MiB), single thread.

Optional: bench_convert runs it with $PYTHON and reads --machine's lines; without numpy or without
both peers it prints one line "skipped: why".
Usage: python3 tests/bench_convert_peers.py [--machine] [--reps N] [--encode] [--decode]
(neither --encode nor --decode: both)"""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
N = 16 << 20
FORMATS = ("e4m3", "e5m2", "bf16", "fp16")


def best(fn, reps):
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    machine = "--machine" in sys.argv
    encode = "--encode" in sys.argv or "--decode" not in sys.argv
    decode = "--decode" in sys.argv or "--encode" not in sys.argv
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 9
    try:
        import numpy as np
    except ImportError:
        print("skipped: numpy is not installed (python3 -m venv ENV && ENV/bin/pip install numpy ml_dtypes torch)")
        return 0
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    try:
        import torch
        torch.set_num_threads(1)
        # the version with the instruction set ATen's kernels run on (ATEN_CPU_CAPABILITY caps it)
        tver = torch.__version__ + "/" + torch.backends.cpu.get_cpu_capability()
    except ImportError:
        torch = None
    if ml_dtypes is None and torch is None:
        print("skipped: neither torch nor ml_dtypes is installed (pip install torch ml_dtypes)")
        return 0
    rng = np.random.default_rng(0x1234567)
    x = ((rng.random(N) - 0.5) * np.exp2(np.arange(N) % 13)).astype(np.float32)
    gbps = lambda t: x.nbytes / t / 1e9

    def report(who, ver, what, t, sat=""):
        if machine:
            print(f"peer {who} {ver} {what} {gbps(t):.3f} {sat}", flush=True)
        else:
            print(f"  {who} {ver}: {what:10s} {gbps(t):6.2f} GB/s {sat}", flush=True)

    def saturates(cast_back):
        with np.errstate(over="ignore", invalid="ignore"):
            return "sat" if np.all(np.isfinite(cast_back(np.array([1e6, np.inf], dtype=np.float32)))) else "nosat"

    if decode:
        # "e4m3-f32": into an existing float32 buffer (torch copy_) or ml_dtypes' astype;
        # "e4m3-f32to": torch's .to(torch.float32).  The float32 output is x.nbytes, as gbps assumes.
        if torch is not None:
            xt = torch.from_numpy(x)
            out = torch.empty_like(xt)
            for name, dt in zip(FORMATS, (torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16)):
                codes = xt.to(dt)
                report("torch", tver, name + "-f32", best(lambda: out.copy_(codes), reps))
                report("torch", tver, name + "-f32to", best(lambda: codes.to(torch.float32), reps))
        if ml_dtypes is not None:
            for name, dt in zip(FORMATS, (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16, np.float16)):
                with np.errstate(over="ignore", invalid="ignore"):
                    codes = x.astype(dt)
                report("ml_dtypes", ml_dtypes.__version__, name + "-f32", best(lambda: codes.astype(np.float32), reps))
    if not encode:
        return 0
    if torch is not None:
        xt = torch.from_numpy(x)
        dst = torch.empty_like(xt)
        report("torch", tver, "copy", best(lambda: dst.copy_(xt), reps))
        for name, dt in zip(FORMATS, (torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16)):
            out = torch.empty(N, dtype=dt)
            sat = saturates(lambda v: torch.from_numpy(v).to(dt).float().numpy())
            report("torch", tver, name, best(lambda: out.copy_(xt), reps), sat)
    if ml_dtypes is not None:
        dst = np.empty_like(x)
        report("ml_dtypes", ml_dtypes.__version__, "copy", best(lambda: np.copyto(dst, x), reps))
        for name, dt in zip(FORMATS, (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16, np.float16)):
            sat = saturates(lambda v: v.astype(dt).astype(np.float32))
            report("ml_dtypes", ml_dtypes.__version__, name, best(lambda: x.astype(dt), reps), sat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
