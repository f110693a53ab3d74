#!/usr/bin/env python3
"""bench_convert_peers.py -- the peers of tests/bench_convert.c, side by side in one run: float32 ->
e4m3 / e5m2 / bf16 / fp16 with ml_dtypes (numpy astype, allocating: its only API) and PyTorch
(copy_ into a preallocated tensor, the counterpart of a conversion into an existing buffer), next to a
float32 copy measured by the same library.  Single thread, 16 Mi float32 (64 MiB), best of 7, GB/s of
float32 input; the data are bench_convert's (uniform, scaled by 2^(i mod 13)).

Optional: `make bench` runs it with $(PYTHON) when numpy and one of the peers import, and says which
are missing otherwise.  Usage: python3 tests/bench_convert_peers.py [--reps N]"""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
N = 16 << 20


def best(fn, reps):
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7
    try:
        import numpy as np
    except ImportError:
        print("bench_convert_peers: skipped: numpy is not installed (pip install numpy ml_dtypes torch)")
        return 0
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    if ml_dtypes is None and torch is None:
        print("bench_convert_peers: skipped: neither ml_dtypes nor torch is installed (pip install ml_dtypes torch)")
        return 0
    s = 0x1234567
    # bench_convert's generator, vectorised: an LCG stream is sequential, so draw it in numpy instead
    # with the same distribution (uniform in [-0.5, 0.5) times 2^(i mod 13))
    rng = np.random.default_rng(s)
    vals = (rng.random(N) - 0.5) * np.exp2(np.arange(N) % 13)
    x = vals.astype(np.float32)
    nbytes = x.nbytes
    gbps = lambda t: nbytes / t / 1e9
    print(f"bench_convert_peers: {N} float32 ({nbytes >> 20} MiB), single thread, best of {reps}")
    if ml_dtypes is not None:
        dst = np.empty_like(x)
        tc = best(lambda: np.copyto(dst, x), reps)
        print(f"  ml_dtypes {ml_dtypes.__version__} (numpy {np.__version__}): copy {gbps(tc):.2f} GB/s")
        for name, dt in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2), ("bf16", ml_dtypes.bfloat16),
                         ("fp16", np.float16)):
            t = best(lambda: x.astype(dt), reps)
            print(f"    f32->{name:5s} astype  {gbps(t):6.2f} GB/s  {100 * tc / t:5.1f}% of copy (not saturating)")
    if torch is not None:
        xt = torch.from_numpy(x)
        dst = torch.empty_like(xt)
        tc = best(lambda: dst.copy_(xt), reps)
        print(f"  torch {torch.__version__}: copy_ {gbps(tc):.2f} GB/s")
        for name, dt in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2), ("bf16", torch.bfloat16),
                         ("fp16", torch.float16)):
            out = torch.empty(N, dtype=dt)
            t = best(lambda: out.copy_(xt), reps)
            print(f"    f32->{name:5s} copy_   {gbps(t):6.2f} GB/s  {100 * tc / t:5.1f}% of copy_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
