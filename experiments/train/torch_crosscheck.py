#!/usr/bin/env python3
"""torch_crosscheck.py -- train the harness's model with the same recipe in PyTorch on the CPU.

Rebuilds, in PyTorch, exactly what `fp8lab train` does for the SwiGLU model: the same generated
corpus (experiments/train/data.c, re-implemented bit for bit with numpy's uint64 arithmetic), the same
batches, the same initial weights (model.c's splitmix64 + Box-Muller stream), the same architecture
(RMSNorm pre-norm, causal attention, SwiGLU FFN, untied head), AdamW with decoupled weight decay,
warmup + schedule and gradient clipping -- and the same recipe by fake quantisation:
  bf16         X, W, dY of every Linear rounded to bf16
  fp8-delayed  X, W in e4m3 and dY in e5m2 with per-tensor delayed scales (amax history, "max",
               margin 0), the head in bf16; PyTorch's float8 casts after a clamp to the format's
               largest finite value (saturating, as TE's and fp8lab's default)
Then it runs `fp8lab train` with the same flags and prints the two loss curves side by side over
the first steps, and the speed of both (steps/s, same thread count).

The two are not bit-identical (different summation orders in GEMMs, softmax, norms; PyTorch's
own exp/erf), so the losses agree to a few 1e-4 at first and drift apart slowly, as two correct
implementations do.  Usage:
  pip install torch numpy
  python3 experiments/train/torch_crosscheck.py [--fp8lab build/fp8lab] [--recipe bf16] [--steps 50]
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Rng:
    def __init__(self, s):
        self.s = s & M64

    def u64(self):
        self.s = (self.s + GAMMA) & M64
        return mix64(self.s)

    def unif(self):  # data.c rng_unif: (u >> 11) * 2^-53
        return (self.u64() >> 11) * 2.0**-53


def corpus(seed, n):
    """experiments/train/data.c fl_data_synthetic, step for step."""
    V, SUCC = 256, 4
    r = Rng(seed ^ 0xD47A5EED)
    perm = list(range(V))
    for i in range(V - 1, 1, -1):
        j = 1 + r.u64() % i
        perm[i], perm[j] = perm[j], perm[i]
    cdf = [0.0] * V
    z = 0.0
    for k in range(1, V):
        z += math.pow(k, -1.1)
        cdf[k] = z
    succ = [[1 + r.u64() % (V - 1) for _ in range(SUCC)] for _ in range(V)]
    tok = np.zeros(n, dtype=np.int64)
    i, prev = 0, 0
    while i < n:
        if i > 64 and r.unif() < 0.1:
            ln = 16 + r.u64() % 49
            back = ln + r.u64() % 64
            if back <= i:
                k = 0
                while k < ln and i < n:
                    tok[i] = tok[i - back]
                    k += 1
                    i += 1
        while True:
            if i >= n:
                break
            if prev != 0 and r.unif() < 0.75:
                t = succ[prev][r.u64() % SUCC]
            else:
                u = r.unif() * z
                lo, hi = 1, V - 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if cdf[mid] < u:
                        lo = mid + 1
                    else:
                        hi = mid
                t = perm[lo]
            tok[i] = t
            i += 1
            prev = t
            if not (r.unif() > 1.0 / 12.0):
                break
        if i < n:
            tok[i] = 0
            i += 1
        prev = 0
    return tok


def batch(tok, seed, step, B, T):
    span = len(tok) - (T + 1) + 1
    out = np.zeros((B, T + 1), dtype=np.int64)
    h = mix64(seed ^ 0xBA7C4)
    for b in range(B):
        u = mix64((h + step * GAMMA + b * 0xD1B54A32D192ED03) & M64)
        off = u % span
        out[b] = tok[off:off + T + 1]
    return torch.from_numpy(out)


def normal_stream(seed, n, state):
    """model.c fill_normal: splitmix64 draws u = ((z >> 11) + 0.5) 2^-53, Box-Muller (u1 then u2)."""
    s = state[0]
    k = np.arange(1, 2 * n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(s) + k * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    state[0] = (s + 2 * n * GAMMA) & M64
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    u1, u2 = u[0::2], u[1::2]
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


# ---- fake quantisation (the recipes) ---------------------------------------------------------------

class Delayed:
    """TE DelayedScaling state of one cast site: history L, "max", margin 0; initial scale 1."""

    def __init__(self, fmax, L=1024):
        self.fmax, self.L, self.hist, self.scale = fmax, L, [], 1.0

    def record(self, amax):
        if amax == 0.0:
            return
        self.hist = (self.hist + [amax])[-self.L:]
        a = max(self.hist)
        if math.isfinite(a) and a > 0:
            s = np.float32(np.float32(self.fmax) / np.float32(a))
            self.scale = float(min(s, np.finfo(np.float32).max))


def fq(x, fmt, st):
    if fmt == "bf16":
        return x.to(torch.bfloat16).float()
    dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
    s = torch.tensor(st.scale, dtype=torch.float32)
    # saturating, as TE and `fp8lab train` by default: PyTorch's e5m2 cast turns |x| >= 61440 into Inf
    # (its e4m3fn cast saturates since 2.12); clamp keeps NaN
    fmax = 448.0 if fmt == "e4m3" else 57344.0
    y = (x * s).clamp(-fmax, fmax).to(dt).float() * (1.0 / s)
    st.record(float(x.detach().abs().max()))
    return y


class QLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, site):
        xq = fq(x, site["fin"], site["in"])
        wq = fq(w, site["fin"], site["w"])
        ctx.save_for_backward(xq, wq)
        ctx.site = site
        return xq @ wq.t()

    @staticmethod
    def backward(ctx, gy):
        xq, wq = ctx.saved_tensors
        g = fq(gy, ctx.site["fgrad"], ctx.site["gout"])
        return g @ wq, g.t() @ xq, None


def make_site(recipe, head):
    if recipe == "fp32":
        return None
    if recipe == "bf16" or head:
        return {"fin": "bf16", "fgrad": "bf16", "in": None, "w": None, "gout": None}
    return {"fin": "e4m3", "fgrad": "e5m2", "in": Delayed(448.0), "w": Delayed(448.0), "gout": Delayed(57344.0)}


def linear(x, w, site):
    if site is None:
        return x @ w.t()
    return QLinearFn.apply(x, w, site)


def rms(x, g):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fp8lab", default="build/fp8lab")
    ap.add_argument("--recipe", default="bf16", choices=["fp32", "bf16", "fp8-delayed"])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--json", help="write the comparison here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    V, C, L, H, F, T, B, DL = 256, 64, 2, 4, 256, 64, 16, 65536
    std, warm = 0.02, 10
    print(f"torch {torch.__version__}; model C{C} L{L} H{H} F{F} T{T} B{B}, swiglu, {a.recipe}, seed {a.seed}, "
          f"{a.steps} steps, {a.threads} thread(s)")

    # ---- fp8lab ----
    out = tempfile.mkdtemp(prefix="fp8lab_xcheck_")
    cmd = [a.fp8lab, "train", "--act", "swiglu", "--recipe", a.recipe, "--steps", str(a.steps), "--seed", str(a.seed),
           "--out", out, "--lr", str(a.lr), "--wd", str(a.wd), "--warmup", str(warm), "--schedule", "constant",
           "--data-len", str(DL), "--threads", str(a.threads), "--quiet", "--log-every", "1000"]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "metrics.csv")) as f:
        c_loss = [float(r["loss"]) for r in csv.DictReader(f)]
    with open(os.path.join(out, "summary.json")) as f:
        c_sps = json.load(f)["steps_per_s"]

    # ---- the same in PyTorch ----
    tok = corpus(a.seed, DL)
    state = [(a.seed ^ 0x5EEDF00DCAFEBABE) & M64]
    so = std / math.sqrt(2 * L)
    def P(shape, s):
        n = int(np.prod(shape))
        return torch.tensor(s * normal_stream(a.seed, n, state), dtype=torch.float32).reshape(shape)
    wte, wpe = P((V, C), std), P((T, C), std)
    wqkv, wproj = P((L, 3 * C, C), std), P((L, C, C), so)
    wfc, wdown = P((L, 2 * F, C), std), P((L, C, F), so)
    whead = P((V, C), std)
    ln1, ln2, lnf = torch.ones(L, C), torch.ones(L, C), torch.ones(C)
    decay = [wte, wpe, wqkv, wproj, wfc, wdown, whead]
    nodecay = [ln1, ln2, lnf]
    for p in decay + nodecay:
        p.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    sites = [[make_site(a.recipe, False) for _ in range(4)] for _ in range(L)]
    head_site = make_site(a.recipe, True)
    hs = C // H
    mask = torch.full((T, T), float("-inf")).triu(1)
    t_loss = []
    t0 = time.time()
    for step in range(a.steps):
        bt = batch(tok, a.seed, step, B, T)
        x_in, y_t = bt[:, :T], bt[:, 1:]
        x = (wte[x_in] + wpe[None]).reshape(B * T, C)
        for l in range(L):
            h = rms(x, ln1[l])
            qkv = linear(h, wqkv[l], sites[l][0]).reshape(B, T, 3, H, hs).permute(2, 0, 3, 1, 4)
            att = torch.softmax(qkv[0] @ qkv[1].transpose(-1, -2) / math.sqrt(hs) + mask, -1) @ qkv[2]
            x = x + linear(att.permute(0, 2, 1, 3).reshape(B * T, C), wproj[l], sites[l][1])
            h = rms(x, ln2[l])
            g, u = linear(h, wfc[l], sites[l][2]).split(F, -1)
            x = x + linear(torch.nn.functional.silu(g) * u, wdown[l], sites[l][3])
        logits = linear(rms(x, lnf), whead, head_site)
        loss = torch.nn.functional.cross_entropy(logits, y_t.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decay + nodecay, 1.0)
        for gr in opt.param_groups:
            gr["lr"] = a.lr * min(1.0, (step + 1) / warm)
        opt.step()
        t_loss.append(float(loss.detach()))
    t_sps = a.steps / (time.time() - t0)

    print(f"{'step':>5} {'fp8lab':>10} {'pytorch':>10} {'diff':>10}")
    for s in list(range(0, min(10, a.steps))) + list(range(10, a.steps, 10)) + [a.steps - 1]:
        print(f"{s:5d} {c_loss[s]:10.5f} {t_loss[s]:10.5f} {c_loss[s] - t_loss[s]:+10.5f}")
    md = max(abs(x - y) if math.isfinite(x) and math.isfinite(y) else (0.0 if x == y else math.inf)
             for x, y in zip(c_loss, t_loss))
    print(f"max |loss difference| over {a.steps} steps: {md:.5f}")
    if not math.isfinite(md):
        print("one implementation produced a non-finite loss where the other did not", file=sys.stderr)
    print(f"speed: fp8lab {c_sps:.2f} steps/s, pytorch {t_sps:.2f} steps/s ({c_sps / t_sps:.2f}x), {a.threads} thread(s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"recipe": a.recipe, "steps": a.steps, "fp8lab_loss": c_loss, "torch_loss": t_loss,
                       "max_abs_diff": md if math.isfinite(md) else None, "fp8lab_steps_per_s": c_sps,
                       "torch_steps_per_s": t_sps}, f, indent=1)
    return 0 if math.isfinite(md) else 1


if __name__ == "__main__":
    sys.exit(main())
