// gpu_bench.cu — the device side of `make gpu-bench` and `make gpu-check` (host logic: kernels/gpu_report.c).
//
//   gpu_bench info                       device name, compute capability, driver and runtime versions
//   gpu_bench bench OUTDIR               bandwidth of every kernel family and pass beside a copy kernel
//                                        moving the same bytes, cuBLASLt FP8 vs BF16 GEMMs, Smooth-SwiGLU's
//                                        overhead over SwiGLU -> OUTDIR/bench.json, OUTDIR/bench.md
//   gpu_bench sweep FP8LAB OUTDIR [--twin] [--no-judge] [--pairs-chunks N] [--bwd-pairs-chunks M]
//                                        the 2^32 bf16 pairs come in 16 chunks of 2^28 (derivatives: chunk
//                                        c = every g with u = c mod 16); N for the forward kernels (default 16: all),
//                                        M for the derivatives (default 1: MPFR judges each output of a
//                                        derivative, ~2^28 per chunk; 16: all); 0 skips them; --pairs-from F:
//                                        forward chunks F..N-1 only (a sweep split over runs; each chunk's
//                                        report stays as ulp_NAME.C.json for `fp8lab ulp --merge`)
//                                        every input of each registry twin with narrow inputs (sweep_job:
//                                        all bf16 / e4m3 codes, all 2^32 bf16 SwiGLU pairs) run ON THE
//                                        DEVICE (fl_cuda_twin_run), outputs compared bit for bit with the
//                                        CPU twin and judged by `FP8LAB ulp` (file mode) ->
//                                        OUTDIR/ulp_NAME.json; --twin runs the CPU twins instead (the same
//                                        pipeline without a device, for the tests); --no-judge: the same
//                                        inputs compared with the twin bit for bit only, no `fp8lab ulp`
//                                        (MPFR is most of the sweep's time) -> OUTDIR/sweep-compare.json
//   gpu_bench assemble OUTDIR RC         OUTDIR/gpu-check.json (gpu-test's exit status, bench.json and every
//                                        ulp_NAME.json in one file) and OUTDIR/gpu-check.md; after a
//                                        --no-judge sweep: sweep-compare.json in place of the reports and
//                                        no accuracy table
// Without a device every mode but `sweep --twin` prints "no CUDA device found; skipped" and exits 0.
//
// Timing: CUDA events around each launch, 3 warm-ups, the median of 20 repeats; inputs are seeded
// random values (never zeros); sizes of 2^28 elements (hundreds of MB, far beyond the 50 MB L2).
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "cuda_test.h"
#include "gemm_fp8.h"
#include "kernels.h"
#include "train_step.h"
extern "C" {
#include "convert.h"
#include "gpu_report.h"
#include "npy.h"
#include "twins.h"
}

static const int k_warm = 3, k_reps = 20;

// ---- seeded device data ---------------------------------------------------------------------------
// Values ~ uniform in [-spread, spread) in every format (bf16: truncated to the top 16 bits; FP8: RNE,
// saturating), so that formats are compared on the same data: random FP8 codes would be log-uniform up
// to 448 and put many gates on SiLU's g < -80 tail path, a different computation.
__global__ static void fill_kernel(uint8_t *p, size_t n, int fmt, float spread, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t r = fl_mix64(seed + i * FL_GOLDEN64);
        const float v = ((float)(r >> 40) * 0x1p-24f * 2.0f - 1.0f) * spread;
        if (fmt == FL_FMT_BF16)
            ((uint16_t *)p)[i] = (uint16_t)(__float_as_uint(v) >> 16);
        else if (fmt == FL_FMT_FP32)
            ((float *)p)[i] = v;
        else // the same uniform values as bf16, rounded to the FP8 format (RNE, saturating)
            p[i] = (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, fmt == FL_FMT_E4M3 ? __NV_E4M3 : __NV_E5M2);
    }
}

static void *dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes + 256));
    return p;
}

static void *dfill(fl_format f, size_t n, float spread, uint64_t seed)
{
    void *p = dalloc(n * fl_format_storage_bytes(f));
    fill_kernel<<<1024, 256>>>((uint8_t *)p, n, (int)f, spread, seed);
    CK(cudaGetLastError());
    return p;
}

static float *dscalar(float v)
{
    float *p = (float *)dalloc(sizeof v);
    CK(cudaMemcpy(p, &v, sizeof v, cudaMemcpyHostToDevice));
    return p;
}

// ---- timing ------------------------------------------------------------------------------------------
template <class F> static double time_ms(F launch)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < k_warm; i++)
        CHECK(launch() == 0, "launch failed (warm-up)");
    CK(cudaDeviceSynchronize());
    double t[k_reps];
    for (int i = 0; i < k_reps; i++) {
        CK(cudaEventRecord(a));
        CHECK(launch() == 0, "launch failed");
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return fl_gpu_median(t, k_reps);
}

// The practical ceiling: a copy of bytes/2 read and bytes/2 written, the faster of a grid-stride kernel of
// 16-byte vectors and cudaMemcpyAsync device to device.
__global__ static void copy_kernel(uint4 *__restrict__ d, const uint4 *__restrict__ s, size_t n16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x)
        d[i] = __ldg(&s[i]);
}

static double copy_ms(double total_bytes)
{
    static std::vector<std::pair<double, double>> cache;
    for (auto &c : cache)
        if (c.first == total_bytes)
            return c.second;
    const size_t n16 = (size_t)(total_bytes / 2 / 16);
    void *s = dfill(FL_FMT_BF16, n16 * 8, 4.0f, 99), *d = dalloc(n16 * 16);
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double mk = time_ms([&] {
        copy_kernel<<<sms * 8, 512>>>((uint4 *)d, (const uint4 *)s, n16);
        return cudaGetLastError() == cudaSuccess ? 0 : -1;
    });
    const double mm = time_ms([&] { return cudaMemcpyAsync(d, s, n16 * 16, cudaMemcpyDeviceToDevice) == cudaSuccess ? 0 : -1; });
    const double ms = mk < mm ? mk : mm; // the faster of the two is the ceiling
    CK(cudaFree(s));
    CK(cudaFree(d));
    cache.push_back({ total_bytes, ms });
    return ms;
}

// ---- device info ---------------------------------------------------------------------------------------
static int device_info(fl_gpu_info *g)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return -1;
    memset(g, 0, sizeof *g);
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    snprintf(g->name, sizeof g->name, "%s", p.name);
    g->cc_major = p.major, g->cc_minor = p.minor;
    CK(cudaDriverGetVersion(&g->driver_version));
    CK(cudaRuntimeGetVersion(&g->runtime_version));
    int clk = 0;
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, 0));
    CK(cudaDeviceGetAttribute(&g->bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
    CK(cudaDeviceGetAttribute(&g->sm_count, cudaDevAttrMultiProcessorCount, 0));
    g->mem_clock_khz = clk;
    return 0;
}

static void print_info(const fl_gpu_info *g)
{
    printf("device: %s (sm_%d%d, %d SMs); driver API %d.%d, CUDA runtime %d.%d; memory clock %.0f MHz, bus %d bits, "
           "peak %.0f GB/s\n",
           g->name, g->cc_major, g->cc_minor, g->sm_count, g->driver_version / 1000, g->driver_version % 1000 / 10,
           g->runtime_version / 1000, g->runtime_version % 1000 / 10, g->mem_clock_khz / 1e3, g->bus_bits,
           fl_gpu_peak_bw(g->mem_clock_khz, g->bus_bits) / 1e9);
}

// ---- bandwidth rows -------------------------------------------------------------------------------------
static std::vector<fl_gpu_bw_row> g_bw;

// One kernel timed beside the copy of its bytes, printed.
template <class F> static fl_gpu_bw_row measure_row(const char *family, const char *pass, const char *variant, double elems,
                                                    double bpe, F launch)
{
    fl_gpu_bw_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.family, sizeof r.family, "%s", family);
    snprintf(r.pass, sizeof r.pass, "%s", pass);
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    r.elems = elems, r.bytes_per_elem = bpe;
    r.ms = time_ms(launch);
    r.copy_ms = copy_ms(elems * bpe);
    printf("  %-14s %-4s %-44s %7.3f ms  %6.0f GB/s  %5.1f%% of copy\n", family, pass, variant, r.ms,
           fl_gpu_gbps(elems * bpe, r.ms), 100 * r.copy_ms / r.ms);
    fflush(stdout);
    return r;
}

template <class F> static double bw_row(const char *family, const char *pass, const char *variant, double elems, double bpe, F launch)
{
    g_bw.push_back(measure_row(family, pass, variant, elems, bpe, launch));
    return g_bw.back().ms;
}

static const char *fn(fl_format f) { return fl_format_name(f); }

// The variants timed are the launchers' configurations of kernels/README.md's byte table (coefficient
// gradients on, computed smoothing scales, both axes), not the registry twins' (scale 1, dy = 1, no
// coefficient gradients): they are listed here, and the registry drives the sweep below.
static void bench_elementwise(std::vector<fl_gpu_overhead> &over)
{
    const size_t n = (size_t)1 << 28;
    float *one = dscalar(1.0f), *amax = dscalar(0.0f);
    const fl_format B = FL_FMT_BF16, E4 = FL_FMT_E4M3, E5 = FL_FMT_E5M2;
    auto kin = [&](void *p, fl_format f) { return fl_kin{ p, f, (f == E4 || f == E5) ? one : nullptr }; };
    auto kout = [&](void *p, fl_format f) { return fl_kout{ p, f, (f == E4 || f == E5) ? one : nullptr, amax }; };
    char v[64];
    // PolyReLU
    {
        void *xb = dfill(B, n, 4.0f, 1), *xe = dfill(E4, n, 4.0f, 2), *dyb = dfill(B, n, 1.0f, 3), *dye = dfill(E5, n, 1.0f, 4);
        void *yb = dalloc(n * 2), *ye = dalloc(n);
        float *da = (float *)dalloc(8 * sizeof(float)), *ws = (float *)dalloc((fl_cuda_polyrelu_ws_floats(n, 4) + 1) * sizeof(float));
        for (int r = 2; r <= 4; r++) {
            const fl_poly_coef c = fl_poly_coef_default(r);
            struct { fl_format i, o; double bpe; } cf[] = { { B, B, 4 }, { B, E4, 3 }, { E4, B, 3 } };
            for (auto &k : cf) {
                if (r != 3 && !(k.i == B && k.o == B))
                    continue;
                snprintf(v, sizeof v, "r=%d %s -> %s", r, fn(k.i), fn(k.o));
                void *x = k.i == B ? xb : xe, *y = k.o == B ? yb : ye;
                bw_row("PolyReLU", "fwd", v, (double)n, k.bpe, [&] { return fl_cuda_polyrelu_fwd(kout(y, k.o), kin(x, k.i), n, &c, nullptr); });
            }
            snprintf(v, sizeof v, "r=%d x, dy, dx bf16 (+ coef grads)", r);
            bw_row("PolyReLU", "bwd", v, (double)n, 6, [&] {
                return fl_cuda_polyrelu_bwd(kout(yb, B), da, ws, kin(xb, B), kin(dyb, B), n, &c, nullptr);
            });
            if (r == 3)
                bw_row("PolyReLU", "bwd", "r=3 x bf16, dy/dx e5m2", (double)n, 4, [&] {
                    return fl_cuda_polyrelu_bwd(kout(ye, E5), da, ws, kin(xb, B), kin(dye, E5), n, &c, nullptr);
                });
        }
        for (void *p : { xb, xe, dyb, dye, yb, ye, (void *)da, (void *)ws })
            CK(cudaFree(p));
    }
    // PolyNorm: (R, H) = (65536, 4096)
    {
        const size_t H = 4096, R = n / H;
        void *xb = dfill(B, n, 2.0f, 5), *dyb = dfill(B, n, 1.0f, 6), *yb = dalloc(n * 2), *ye = dalloc(n);
        float *da = (float *)dalloc(8 * sizeof(float)), *ws = (float *)dalloc((fl_cuda_polynorm_ws_floats(R, 4) + 1) * sizeof(float));
        for (int r = 2; r <= 4; r++) {
            const fl_poly_coef c = fl_poly_coef_default(r);
            snprintf(v, sizeof v, "r=%d bf16 -> bf16, H=%zu", r, H);
            bw_row("PolyNorm", "fwd", v, (double)n, 4, [&] { return fl_cuda_polynorm_fwd(kout(yb, B), kin(xb, B), R, H, &c, 1e-6f, nullptr); });
            if (r == 3) {
                snprintf(v, sizeof v, "r=3 bf16 -> e4m3, H=%zu", H);
                bw_row("PolyNorm", "fwd", v, (double)n, 3, [&] { return fl_cuda_polynorm_fwd(kout(ye, E4), kin(xb, B), R, H, &c, 1e-6f, nullptr); });
            }
            snprintf(v, sizeof v, "r=%d bf16, H=%zu", r, H);
            bw_row("PolyNorm", "bwd", v, (double)n, 6, [&] {
                return fl_cuda_polynorm_bwd(kout(yb, B), da, ws, kin(xb, B), kin(dyb, B), R, H, &c, 1e-6f, nullptr);
            });
        }
        for (void *p : { xb, dyb, yb, ye, (void *)da, (void *)ws })
            CK(cudaFree(p));
    }
    // SwiGLU and Smooth-SwiGLU: (R, C) = (65536, 4096)
    {
        const size_t C = 4096, R = n / C;
        void *gb = dfill(B, n, 4.0f, 7), *ub = dfill(B, n, 4.0f, 8), *ge = dfill(E4, n, 4.0f, 9), *ue = dfill(E4, n, 4.0f, 10);
        void *dyb = dfill(B, n, 1.0f, 11), *dye = dfill(E5, n, 1.0f, 12);
        void *yb = dalloc(n * 2), *ye = dalloc(n), *dgb = dalloc(n * 2), *dub = dalloc(n * 2), *dge = dalloc(n), *due = dalloc(n);
        float *s = (float *)dalloc(R > C ? R * 4 : C * 4);
        const double sw_b = bw_row("SwiGLU", "fwd", "bf16 -> bf16", (double)n, 6, [&] { return fl_cuda_swiglu_fwd(kout(yb, B), kin(gb, B), kin(ub, B), n, nullptr); });
        const double sw_e = bw_row("SwiGLU", "fwd", "bf16 -> e4m3", (double)n, 5, [&] { return fl_cuda_swiglu_fwd(kout(ye, E4), kin(gb, B), kin(ub, B), n, nullptr); });
        bw_row("SwiGLU", "fwd", "e4m3 -> bf16", (double)n, 4, [&] { return fl_cuda_swiglu_fwd(kout(yb, B), kin(ge, E4), kin(ue, E4), n, nullptr); });
        const double swb = bw_row("SwiGLU", "bwd", "bf16", (double)n, 10, [&] {
            return fl_cuda_swiglu_bwd(kout(dgb, B), kout(dub, B), kin(gb, B), kin(ub, B), kin(dyb, B), n, nullptr);
        });
        bw_row("SwiGLU", "bwd", "g, u bf16; dy, dg, du e5m2", (double)n, 7, [&] {
            return fl_cuda_swiglu_bwd(kout(dge, E5), kout(due, E5), kin(gb, B), kin(ub, B), kin(dye, E5), n, nullptr);
        });
        const double st = bw_row("Smooth-SwiGLU", "fwd", "per-token current scale, bf16 -> e4m3", (double)n, 5, [&] {
            return fl_cuda_smooth_swiglu_fwd(kout(ye, E4), s, kin(gb, B), kin(ub, B), R, C, FL_SMOOTH_TOKEN, 1, nullptr);
        });
        const double sg = bw_row("Smooth-SwiGLU", "fwd", "per-token given scale, bf16 -> e4m3", (double)n, 5, [&] {
            return fl_cuda_smooth_swiglu_fwd(kout(ye, E4), s, kin(gb, B), kin(ub, B), R, C, FL_SMOOTH_TOKEN, 0, nullptr);
        });
        const double sc = bw_row("Smooth-SwiGLU", "fwd", "per-channel current scale, bf16 -> e4m3", (double)n, 9, [&] {
            return fl_cuda_smooth_swiglu_fwd(kout(ye, E4), s, kin(gb, B), kin(ub, B), R, C, FL_SMOOTH_CHANNEL, 1, nullptr);
        });
        const double sb = bw_row("Smooth-SwiGLU", "bwd", "per-token, bf16", (double)n, 10, [&] {
            return fl_cuda_smooth_swiglu_bwd(kout(dgb, B), kout(dub, B), kin(gb, B), kin(ub, B), kin(dyb, B), s, R, C, FL_SMOOTH_TOKEN, nullptr);
        });
        (void)sw_b;
        over.push_back({ "Smooth-SwiGLU fwd, per-token current scale, over SwiGLU fwd (bf16 -> e4m3)", sw_e, st });
        over.push_back({ "Smooth-SwiGLU fwd, per-token given scale, over SwiGLU fwd (bf16 -> e4m3)", sw_e, sg });
        over.push_back({ "Smooth-SwiGLU fwd, per-channel current scale, over SwiGLU fwd (bf16 -> e4m3)", sw_e, sc });
        over.push_back({ "Smooth-SwiGLU bwd, per-token, over SwiGLU bwd (bf16)", swb, sb });
        for (void *p : { gb, ub, ge, ue, dyb, dye, yb, ye, dgb, dub, dge, due, (void *)s })
            CK(cudaFree(p));
    }
    CK(cudaFree(one));
    CK(cudaFree(amax));
}

// ---- the training step's row kernels at the 124m preset's shapes -----------------------------------------
// Each against a copy of the same bytes (inputs read once, outputs written once; what a kernel must move at
// least), timed in the same run.  These kernels keep the harness's sequential sums (kernels/train_step.h),
// so the elementwise goal is not theirs: the figures say where a step's time goes, for `make gpu-check`'s
// training part (its profile at 124m) to be read against.
static void bench_step(std::vector<fl_gpu_bw_row> &rows)
{
    const size_t B = 16, T = 1024, C = 768, H = 12, V = 50257, F = 2048, N = B * T, R = B * H * T;
    uint64_t tab[32];
    fl_expf_table(tab);
    auto row = [&](const char *family, const char *pass, const char *variant, double elems, double bpe, auto launch) {
        rows.push_back(measure_row(family, pass, variant, elems, bpe, launch));
    };
    char sh[64];
    {
        float *x = (float *)dfill(FL_FMT_FP32, N * C, 4.0f, 21), *dy = (float *)dfill(FL_FMT_FP32, N * C, 1.0f, 22);
        float *g = (float *)dfill(FL_FMT_FP32, C, 1.0f, 23), *y = (float *)dalloc(N * C * 4), *rs = (float *)dalloc(N * 4);
        float *dg = (float *)dalloc(C * 4), *ws = (float *)dalloc(N * 4);
        const double nc = (double)N * C;
        snprintf(sh, sizeof sh, "N %zu, C %zu: y, rstd", N, C);
        row("RMSNorm", "fwd", sh, nc, 8, [&] { return fl_cuda_rmsnorm_fwd(y, rs, x, g, N, C, 1e-5f, nullptr); });
        snprintf(sh, sizeof sh, "N %zu, C %zu: dx, dgain", N, C);
        row("RMSNorm", "bwd", sh, nc, 12, [&] { return fl_cuda_rmsnorm_bwd(y, dg, dy, x, rs, g, N, C, 0, ws, nullptr); });
        snprintf(sh, sizeof sh, "N %zu, C %zu: dx accumulating, dgain", N, C);
        row("RMSNorm", "bwd", sh, nc, 16, [&] { return fl_cuda_rmsnorm_bwd(y, dg, dy, x, rs, g, N, C, 1, ws, nullptr); });
        unsigned long long *cnt = (unsigned long long *)dalloc(8 * sizeof(unsigned long long));
        float *amd = (float *)dalloc(4);
        fl_cast_fmt cf;
        memset(&cf, 0, sizeof cf);
        cf.fmt = FL_FMT_E4M3; /* saturating, RNE */
        snprintf(sh, sizeof sh, "%zu x %zu fp32 -> e4m3 values, fake-quantised", N, C);
        row("FP8 cast", "fwd", sh, nc, 8, [&] { return fl_cuda_cast_fq(y, amd, cnt, x, N * C, 1.0f, 1.0f, &cf, 0, nullptr); });
        for (void *p : { (void *)x, (void *)dy, (void *)g, (void *)y, (void *)rs, (void *)dg, (void *)ws, (void *)cnt, (void *)amd })
            CK(cudaFree(p));
    }
    {
        float *S = (float *)dfill(FL_FMT_FP32, R * T, 4.0f, 24), *P = (float *)dalloc(R * T * 4);
        snprintf(sh, sizeof sh, "%zu causal rows of %zu", R, T);
        row("attn softmax", "fwd", sh, (double)R * T, 8, [&] { return fl_cuda_attn_softmax_fwd(P, S, R, T, 0.125f, tab, nullptr); });
        float *dP = (float *)dfill(FL_FMT_FP32, R * T, 1.0f, 25);
        row("attn softmax", "bwd", sh, (double)R * T, 12, [&] { return fl_cuda_attn_softmax_bwd(S, P, dP, R, T, 0.125f, nullptr); });
        for (void *p : { (void *)S, (void *)P, (void *)dP })
            CK(cudaFree(p));
    }
    {
        float *z0 = (float *)dfill(FL_FMT_FP32, N * V, 8.0f, 26), *z = (float *)dalloc(N * V * 4);
        double *tl = (double *)dalloc(N * 8);
        std::vector<int> ht(N);
        for (size_t i = 0; i < N; i++)
            ht[i] = (int)(i * 7919 % V);
        int *tgt = (int *)dalloc(N * sizeof(int));
        CK(cudaMemcpy(tgt, ht.data(), N * sizeof(int), cudaMemcpyHostToDevice));
        // in place: each launch starts from the same logits (the copy back is timed with it, and counted)
        snprintf(sh, sizeof sh, "N %zu, V %zu (+ a copy of z)", N, V);
        row("cross-entropy", "fwd", sh, (double)N * V, 16, [&] {
            if (cudaMemcpyAsync(z, z0, N * V * 4, cudaMemcpyDeviceToDevice) != cudaSuccess)
                return -1;
            return fl_cuda_xent_fwd(z, tl, tgt, N, V, tab, nullptr);
        });
        snprintf(sh, sizeof sh, "N %zu, V %zu", N, V);
        row("cross-entropy", "bwd", sh, (double)N * V, 8, [&] { return fl_cuda_xent_bwd(z, tgt, N, V, nullptr); });
        for (void *p : { (void *)z0, (void *)z, (void *)tl, (void *)tgt })
            CK(cudaFree(p));
    }
    {
        const size_t n = 12 * (3 * C * C + C * C + 3 * C * F) + V * C + T * C; // the 124m SwiGLU model's weights
        float *p = (float *)dfill(FL_FMT_FP32, n, 0.1f, 27), *g = (float *)dfill(FL_FMT_FP32, n, 0.01f, 28);
        float *m = (float *)dfill(FL_FMT_FP32, n, 0.01f, 29), *v = (float *)dalloc(n * 4);
        CK(cudaMemset(v, 0, n * 4));
        fl_adamw_hp h;
        memset(&h, 0, sizeof h);
        h.b1 = 0.9f, h.b2 = 0.95f, h.bc1 = 0.1f, h.bc2 = 0.05f, h.eps = 1e-8f, h.lr = 6e-4f, h.wd = 0.1f, h.gscale = 1.0f;
        snprintf(sh, sizeof sh, "%zu parameters", n);
        row("AdamW", "step", sh, (double)n, 28, [&] { return fl_cuda_adamw(p, g, m, v, n, &h, nullptr); });
        for (void *q : { (void *)p, (void *)g, (void *)m, (void *)v })
            CK(cudaFree(q));
    }
}

static int cmd_step(const char *outdir)
{
    fl_gpu_info g;
    if (device_info(&g)) {
        printf("gpu-bench step: no CUDA device found; skipped\n");
        return 0;
    }
    print_info(&g);
    printf("the training step's kernels at the 124m preset's shapes (B 16, T 1024, C 768, H 12, V 50257):\n");
    std::vector<fl_gpu_bw_row> rows;
    bench_step(rows);
    char path[4096];
    snprintf(path, sizeof path, "%s/step-kernels.md", outdir);
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    fprintf(f, "Device: %s (sm_%d%d, %d SMs).  Median of %d launches after %d; \"of copy\": a copy of the same bytes "
               "(inputs read once, outputs written once) timed in the same run.\n\n",
            g.name, g.cc_major, g.cc_minor, g.sm_count, k_reps, k_warm);
    fprintf(f, "| kernel | pass | shape | MB moved | median ms | GB/s | of copy |\n|---|---|---|---:|---:|---:|---:|\n");
    for (auto &r : rows) {
        const double bytes = r.elems * r.bytes_per_elem;
        fprintf(f, "| %s | %s | %s | %.0f | %.3f | %.0f | %.1f%% |\n", r.family, r.pass, r.variant, bytes / 1e6, r.ms,
                fl_gpu_gbps(bytes, r.ms), 100 * r.copy_ms / r.ms);
    }
    CHECK(fclose(f) == 0, "cannot write %s", path);
    printf("gpu-bench step: wrote %s\n", path);
    return 0;
}

// ---- GEMMs ----------------------------------------------------------------------------------------------
// cuBLASLt BF16 with the same per-call structure as fl_cuda_gemm_fp8 (descriptors and heuristic per call):
// A stored (K, M), B stored (K, N), D (M, N) column-major, TN, fp32 compute, bf16 D.
static int gemm_bf16(cublasLtHandle_t h, size_t M, size_t N, size_t K, const void *A, const void *Bm, void *D, void *ws, size_t wsb)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t T = CUBLAS_OP_T, Nn = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &Nn, sizeof Nn));
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, M, K));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, N, K));
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, M, N, M));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t heur = {};
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &heur, &found));
    CHECK(found, "cuBLASLt has no BF16 algorithm for %zu x %zu x %zu", M, N, K);
    const float alpha = 1.0f, beta = 0.0f;
    LT(cublasLtMatmul(h, op, &alpha, A, la, Bm, lb, &beta, D, ld, D, ld, &heur.algo, ws, wsb, 0));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    return 0;
}

static void bench_gemm(std::vector<fl_gpu_gemm_row> &rows)
{
    cublasLtHandle_t h;
    LT(cublasLtCreate(&h));
    const size_t wsb = 32u << 20;
    void *ws = dalloc(wsb);
    float *one = dscalar(1.0f);
    // the training harness's FFN GEMMs (width 64, ffn 256, 16 x 64 tokens: fc (512, 1024, 64), down
    // (64, 1024, 256)), then 4096^3 and 8192^3
    const size_t shapes[][3] = { { 512, 1024, 64 }, { 64, 1024, 256 }, { 4096, 4096, 4096 }, { 8192, 8192, 8192 } };
    for (auto &s : shapes) {
        const size_t M = s[0], N = s[1], K = s[2];
        void *A8 = dfill(FL_FMT_E4M3, M * K, 1.0f, 21), *B8 = dfill(FL_FMT_E4M3, N * K, 1.0f, 22);
        void *A16 = dfill(FL_FMT_BF16, M * K, 1.0f, 23), *B16 = dfill(FL_FMT_BF16, N * K, 1.0f, 24), *D = dalloc(M * N * 2);
        for (int fast = 0; fast <= 1; fast++) {
            fl_gemm_fp8 g = { M, N, K, FL_FMT_E4M3, FL_FMT_E4M3, (const uint8_t *)A8, K, (const uint8_t *)B8, K, FL_FMT_BF16, D, M,
                              nullptr, 0, 1.0f, 0.0f, one, one, nullptr, nullptr, fast };
            fl_gpu_gemm_row r = { "fp8", M, N, K, fast, 0 };
            r.ms = time_ms([&] { return fl_cuda_gemm_fp8(&g, h, ws, wsb, nullptr); });
            rows.push_back(r);
            printf("  GEMM fp8  %5zu x %5zu x %5zu fast=%d %9.4f ms %7.1f TFLOPS\n", M, N, K, fast, r.ms,
                   fl_gpu_tflops((double)M, (double)N, (double)K, r.ms));
        }
        fl_gpu_gemm_row r = { "bf16", M, N, K, 0, 0 };
        r.ms = time_ms([&] { return gemm_bf16(h, M, N, K, A16, B16, D, ws, wsb); });
        rows.push_back(r);
        printf("  GEMM bf16 %5zu x %5zu x %5zu        %9.4f ms %7.1f TFLOPS\n", M, N, K, r.ms, fl_gpu_tflops((double)M, (double)N, (double)K, r.ms));
        fflush(stdout);
        for (void *p : { A8, B8, A16, B16, D })
            CK(cudaFree(p));
    }
    CK(cudaFree(ws));
    CK(cudaFree(one));
    cublasLtDestroy(h);
}

static int cmd_bench(const char *outdir)
{
    fl_gpu_bench b;
    memset(&b, 0, sizeof b);
    if (device_info(&b.dev)) {
        printf("gpu-bench: no CUDA device found; skipped\n");
        return 0;
    }
    print_info(&b.dev);
    const time_t now = time(nullptr);
    strftime(b.date, sizeof b.date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    std::vector<fl_gpu_overhead> over;
    std::vector<fl_gpu_gemm_row> gemm;
    bench_elementwise(over);
    bench_gemm(gemm);
    b.bw = g_bw.data(), b.n_bw = g_bw.size();
    b.gemm = gemm.data(), b.n_gemm = gemm.size();
    b.over = over.data(), b.n_over = over.size();
    char err[512], path[4096];
    snprintf(path, sizeof path, "%s/bench.json", outdir);
    CHECK(fl_gpu_bench_write_json(&b, path, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/bench.md", outdir);
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    fl_gpu_bench_markdown(&b, f);
    CHECK(fclose(f) == 0, "cannot write %s", path);
    fl_gpu_bench_markdown(&b, stdout);
    return 0;
}

// ---- the device sweep ------------------------------------------------------------------------------------
// The jobs are the registry's twins (kernels/twins.h) whose whole input space the device can run: elementwise,
// one input of at most 16 bits or two of the same such format (at most 2^32 inputs).  Each runs on the
// device through fl_cuda_twin_run (kernels/twins.cu), the kernel the twin mirrors, on every input (pairs:
// input 0 = index >> 16, input 1 = index & 0xffff, the `fp8lab ulp --impl` indexing).
static int sweep_job(const fl_twin *t)
{
    const int bits = fl_format_get(t->in_fmt[0])->bits;
    return !t->rowwise && bits <= 16 && (t->n_inputs == 1 || (t->n_inputs == 2 && t->in_fmt[1] == t->in_fmt[0]));
}

static void write_npy(const char *path, const uint32_t *v, size_t n, size_t bytes)
{
    fl_array a;
    memset(&a, 0, sizeof a);
    a.dtype = bytes == 1 ? FL_DT_U8 : FL_DT_U16;
    a.ndim = 1;
    a.shape[0] = (int64_t)n;
    a.count = n;
    std::vector<uint8_t> buf(n * bytes);
#pragma omp parallel for
    for (long long i = 0; i < (long long)n; i++)
        memcpy(&buf[i * bytes], &v[i], bytes);
    a.data = buf.data();
    char err[512];
    CHECK(fl_npy_write(path, &a, err, sizeof err) == 0, "%s", err);
}

static int run_cmd(const std::string &c)
{
    fflush(stdout);
    const int rc = system(c.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static int cmd_sweep(const char *cli, const char *outdir, int twin, int judge, int pair_chunks, int bwd_chunks, int pair_from)
{
    fl_gpu_info info;
    if (!twin && device_info(&info)) {
        printf("gpu-sweep: no CUDA device found; skipped\n");
        return 0;
    }
    int fails = 0;
    // judged: the jobs done go to sweep.list, which assemble reads; not judged: sweep-compare.json, written
    // at the end, and no sweep.list (the one of an earlier judged sweep would name stale reports)
    char plist[4096], pcmp[4096];
    snprintf(plist, sizeof plist, "%s/sweep.list", outdir);
    snprintf(pcmp, sizeof pcmp, "%s/sweep-compare.json", outdir);
    remove(judge ? pcmp : plist);
    FILE *list = judge ? fopen(plist, "w") : nullptr;
    CHECK(!judge || list, "cannot write %s", plist);
    std::vector<fl_gpu_cmp_row> cmp;
    for (size_t job = 0; job < fl_twin_count; job++) {
        const fl_twin *tw = &fl_twins[job];
        const char *name = tw->name;
        if (!sweep_job(tw))
            continue;
        if (tw->n_inputs == 2 && fl_format_storage_bytes(tw->in_fmt[0]) == 2 && (tw->derivative ? bwd_chunks : pair_chunks) == 0)
            continue;
        const int bits = (int)fl_format_storage_bytes(tw->in_fmt[0]) * 8;
        const uint64_t space = tw->n_inputs == 1 ? 1ull << bits : 1ull << (2 * bits);
        // pairs of 16-bit inputs: 2^32 indices in chunks of 2^28 (pair_chunks of them; 16 = all)
        const uint64_t chunk = space > (1ull << 28) ? 1ull << 28 : space;
        const uint64_t nchunks_all = space / chunk;
        const int want = tw->derivative ? bwd_chunks : pair_chunks;
        const uint64_t nchunks = nchunks_all == 1 ? 1 : nchunks_all < (uint64_t)want ? nchunks_all : (uint64_t)want;
        const size_t so = fl_format_storage_bytes(tw->out_fmt);
        std::vector<uint32_t> a(chunk), b(chunk), y(chunk), t(chunk);
        std::string merge = std::string(cli) + " ulp --merge";
        size_t mismatches = 0;
        const uint64_t c0 = nchunks_all > 1 && !tw->derivative && (uint64_t)pair_from < nchunks ? (uint64_t)pair_from : 0;
        for (uint64_t c = c0; c < nchunks; c++) {
            const uint64_t base = c * chunk;
            const uint64_t mask = (1ull << bits) - 1;
            // chunk c of the pairs: indices [c 2^28, (c + 1) 2^28) (g in [4096 c, 4096 (c + 1))), reported
            // with --index-base so that the chunks merge into the `--impl` indexing; a derivative's chunk c
            // (MPFR judges every output, so only some chunks run): every g with u = 16 j + c, a strided
            // 1/16th of the space spread over all of it, its indices those of the chunk file
#pragma omp parallel for
            for (long long i = 0; i < (long long)chunk; i++) {
                a[i] = (uint32_t)(tw->n_inputs == 2 ? (base + i) >> bits : (base + i) & mask);
                b[i] = (uint32_t)((base + i) & mask);
                if (nchunks_all > 1 && tw->derivative)
                    a[i] = (uint32_t)(i & mask), b[i] = (uint32_t)(((i >> bits) << 4) | c);
            }
            const uint32_t *in[3] = { a.data(), b.data(), nullptr };
            // the CPU twin, in pieces across the cores
#pragma omp parallel for schedule(dynamic, 1)
            for (long long p = 0; p < (long long)((chunk + 65535) / 65536); p++) {
                const size_t o = (size_t)p * 65536, m = chunk - o < 65536 ? chunk - o : 65536;
                const uint32_t *pin[3] = { a.data() + o, b.data() + o, nullptr };
                tw->run(t.data() + o, pin, m, 0);
            }
            if (twin)
                y = t;
            else
                CHECK(fl_cuda_twin_run(tw, y.data(), in, chunk, 0, 0) == 0, "%s: the device run failed", name);
            for (uint64_t i = 0; i < chunk; i++)
                if (y[i] != t[i] && mismatches++ < 5)
                    fprintf(stderr, "gpu-sweep: %s index %#llx: device %#x, twin %#x\n", name, (unsigned long long)(base + i), y[i], t[i]);
            if (!judge)
                continue;
            char px[4096], pu[4096], py[4096], pj[4096];
            snprintf(px, sizeof px, "%s/sweep_x.npy", outdir);
            snprintf(pu, sizeof pu, "%s/sweep_u.npy", outdir);
            snprintf(py, sizeof py, "%s/sweep_y.npy", outdir);
            snprintf(pj, sizeof pj, "%s/ulp_%s.%llu.json", outdir, name, (unsigned long long)c);
            write_npy(px, a.data(), chunk, fl_format_storage_bytes(tw->in_fmt[0]));
            if (tw->n_inputs == 2)
                write_npy(pu, b.data(), chunk, fl_format_storage_bytes(tw->in_fmt[1]));
            write_npy(py, y.data(), chunk, so);
            std::string cmd = std::string(cli) + " ulp " + tw->ref_fn + " --format " + fn(tw->out_fmt) + " --inputs " + px +
                              " --input-format " + fn(tw->in_fmt[0]);
            if (tw->n_inputs == 2)
                cmd += std::string(" --inputs ") + pu + " --input-format " + fn(tw->in_fmt[1]);
            cmd += std::string(" --outputs ") + py + " --output-format " + fn(tw->out_fmt) + " --json --no-progress";
            if (nchunks_all > 1 && !tw->derivative)
                cmd += " --index-base " + std::to_string((unsigned long long)base);
            if (tw->ref_params && *tw->ref_params) {
                char buf[256];
                snprintf(buf, sizeof buf, "%s", tw->ref_params);
                for (char *tok = strtok(buf, ","); tok; tok = strtok(nullptr, ","))
                    cmd += std::string(" --param ") + tok;
            }
            if (tw->derivative)
                cmd += std::string(" --wrt ") + tw->ref_wrt;
            cmd += std::string(" > ") + pj;
            const int rc = run_cmd(cmd);
            CHECK(rc == 0, "%s: `fp8lab ulp` exited %d: %s", name, rc, cmd.c_str());
            merge += std::string(" ") + pj;
        }
        char pm[4096];
        snprintf(pm, sizeof pm, "%s/ulp_%s.json", outdir, name);
        const uint64_t ran = (nchunks - c0) * chunk;
        const char *coverage = ran == space ? "all" : tw->derivative ? "every g, u = c mod 16 for the chunks c run" : "chunks of 2^28";
        if (!judge) {
            fl_gpu_cmp_row r;
            memset(&r, 0, sizeof r);
            snprintf(r.name, sizeof r.name, "%s", name);
            snprintf(r.coverage, sizeof r.coverage, "%s", coverage);
            r.inputs = (unsigned long long)ran, r.mismatches = (unsigned long long)mismatches, r.twin = twin;
            cmp.push_back(r);
            printf("gpu-sweep: %-22s %12llu inputs (%s), %s: %zu mismatches with the twin (not judged)\n", name,
                   (unsigned long long)ran, coverage, twin ? "CPU twin" : "device", mismatches);
            fflush(stdout);
            fails += mismatches != 0;
            continue;
        }
        CHECK(run_cmd(merge + " --json > " + pm) == 0, "%s: merge failed", name);
        if (nchunks_all == 1) {
            char pj[4096];
            snprintf(pj, sizeof pj, "%s/ulp_%s.0.json", outdir, name);
            remove(pj);
        } // the chunks' reports of pairs stay: a sweep split over runs (--pairs-from) is merged from them
        printf("gpu-sweep: %-22s %12llu inputs (%s), %s: %zu mismatches with the twin -> %s\n", name,
               (unsigned long long)ran, coverage, twin ? "CPU twin" : "device", mismatches, pm);
        fflush(stdout);
        fails += mismatches != 0;
        fprintf(list, "%s\n", name);
    }
    if (judge)
        CHECK(fclose(list) == 0, "cannot write %s", plist);
    else {
        char err[1024];
        CHECK(fl_gpu_sweep_compare_write(pcmp, cmp.data(), cmp.size(), err, sizeof err) == 0, "%s", err);
    }
    for (const char *f : { "sweep_x.npy", "sweep_u.npy", "sweep_y.npy" }) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", outdir, f);
        remove(p);
    }
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "info")) {
        fl_gpu_info g;
        if (device_info(&g)) {
            printf("gpu-info: no CUDA device found\n");
            return 0;
        }
        print_info(&g);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "bench"))
        return cmd_bench(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "step"))
        return cmd_step(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "sweep")) {
        int twin = 0, judge = 1, chunks = 16, bwd_chunks = 1, from = 0;
        for (int i = 4; i < argc; i++) {
            if (!strcmp(argv[i], "--twin"))
                twin = 1;
            else if (!strcmp(argv[i], "--no-judge"))
                judge = 0;
            else if (!strcmp(argv[i], "--pairs-chunks") && i + 1 < argc && atoi(argv[i + 1]) >= 0 && atoi(argv[i + 1]) <= 16)
                chunks = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--pairs-from") && i + 1 < argc && atoi(argv[i + 1]) >= 0 && atoi(argv[i + 1]) < 16)
                from = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--bwd-pairs-chunks") && i + 1 < argc && atoi(argv[i + 1]) >= 0 && atoi(argv[i + 1]) <= 16)
                bwd_chunks = atoi(argv[++i]);
            else {
                fprintf(stderr, "gpu_bench sweep: bad option '%s'\n", argv[i]);
                return 2;
            }
        }
        return cmd_sweep(argv[2], argv[3], twin, judge, chunks, bwd_chunks, from);
    }
    if (argc == 4 && !strcmp(argv[1], "assemble")) {
        // the jobs the sweep completed, in order (OUTDIR/sweep.list); none after a --no-judge sweep, whose
        // comparison (OUTDIR/sweep-compare.json) is assembled without an accuracy table
        char plist[4096], pcmp[4096], line[256], err[1024];
        snprintf(plist, sizeof plist, "%s/sweep.list", argv[2]);
        snprintf(pcmp, sizeof pcmp, "%s/sweep-compare.json", argv[2]);
        if (access(plist, F_OK) != 0 && access(pcmp, F_OK) == 0) {
            if (fl_gpu_check_assemble_compared(argv[2], atoi(argv[3]), err, sizeof err)) {
                fprintf(stderr, "gpu_bench assemble: %s\n", err);
                return 1;
            }
            printf("gpu-check: wrote %s/gpu-check.json and %s/gpu-check.md (sweep compared with the twins, not judged)\n", argv[2], argv[2]);
            return 0;
        }
        std::vector<std::string> done;
        FILE *list = fopen(plist, "r");
        CHECK(list, "%s: cannot read it (run the sweep first)", plist);
        while (fgets(line, sizeof line, list)) {
            line[strcspn(line, "\n")] = 0;
            if (*line)
                done.push_back(line);
        }
        fclose(list);
        std::vector<const char *> names;
        for (auto &d : done)
            names.push_back(d.c_str());
        if (fl_gpu_check_assemble(argv[2], atoi(argv[3]), names.data(), names.size(), err, sizeof err)) {
            fprintf(stderr, "gpu_bench assemble: %s\n", err);
            return 1;
        }
        printf("gpu-check: wrote %s/gpu-check.json and %s/gpu-check.md\n", argv[2], argv[2]);
        return 0;
    }
    fprintf(stderr, "usage: gpu_bench info | bench OUTDIR | step OUTDIR | sweep FP8LAB OUTDIR [--twin] [--no-judge] [--pairs-chunks N] [--pairs-from F] [--bwd-pairs-chunks M]\n"
                    "       gpu_bench assemble OUTDIR GPU_TEST_EXIT_STATUS\n");
    return 2;
}
