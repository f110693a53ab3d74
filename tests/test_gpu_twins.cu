// test_gpu_twins.cu — every CUDA kernel against its CPU twin, bit for bit; the FP8 GEMM wrapper against
// its twin within the derived bound (part of make test wherever nvcc exists; make gpu-test runs it
// alone).  Without a CUDA device it prints "SKIP: no CUDA device" and exits 77, which tests/run.sh
// counts as skipped.
//
// 1. The registry (kernels/twins.h): every entry of fl_twins runs on the device through fl_cuda_twin_run
//    (kernels/twins.cu) and on the CPU through its own run function, on the same encodings, aligned and
//    one element off (the kernels' element-wise path).  An entry whose kernel has no device runner fails
//    here (and a new kernel kind does not compile in twins.cu until it has one).
// 2. The launchers' options the twins leave at their defaults, over every format the launchers
//    instantiate: FP8 scales and scale_inv != 1, amax, coefficient gradients, Smooth-SwiGLU's computed
//    scales on both axes and its backward.
// 3. The FP8 GEMM against its twin.
// 4. The training-step kernels (kernels/train_step.h): AdamW's p, m, v against the twin, gradients with
//    zeros, Inf and NaN among them; RMSNorm forward (y, rstd) and backward (dx accumulating or not,
//    dgain), row counts and widths that are not multiples of 32; the FP8 cast's codes, counts and amax
//    (e4m3, e5m2, Gaudi2's e4m3; saturating or not; RNE and SR) on a stride of every float32 pattern;
//    the embeddings' forward and backward (token rows through fl_embed_index); the head's softmax
//    cross-entropy (probabilities and dlogits bit for bit, the losses within 4 ulps of double: CUDA's
//    log is not glibc's); the causal attention softmax forward and backward.
// Inputs: random activations-like values, every bf16 / e4m3 / e5m2 code cycled through the tensors
// (NaN, Inf, subnormals, max), sizes with a scalar tail (n % 16 != 0), and misaligned copies (the
// scalar-access path) -- the reduction order must not depend on either.
// Output: one line per part; the first mismatch prints the index, input and both encodings and exits 1.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "cuda_test.h"
#include "erff.h"
#include "gemm_fp8.h"
#include "kernels.h"
#include "train_step.h"
#include "twins.h"
extern "C" {
#include "convert.h"
#include "ulp.h"

// experiments/train/model.h (C, not included here): the harness's per-channel maxima
extern "C" void fl_chan_colmax(float *am, float *gm, float *um, const float *h, const float *g, const float *u, size_t N,
                               size_t F);
}

static uint64_t lcg = 0x5DEECE66Dull;
static double rnd()
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 9007199254740992.0;
}


// A host tensor of encodings with a device mirror (offset bytes into the device allocation).
struct tensor {
    fl_format fmt;
    size_t n, off;
    std::vector<uint8_t> h;
    uint8_t *dbase = nullptr;
    tensor(fl_format f, size_t n_, size_t off_ = 0) : fmt(f), n(n_), off(off_), h(n_ * fl_format_storage_bytes(f))
    {
        CK(cudaMalloc(&dbase, h.size() + 64));
        CK(cudaMemset(dbase, 0, h.size() + 64));
    }
    ~tensor() { cudaFree(dbase); }
    void *d() { return dbase + off; }
    void fill(double spread, int codes)
    {
        for (size_t i = 0; i < n; i++) {
            uint32_t c;
            if (codes && i % 7 == 3) // every encoding of the format, cycled
                c = (uint32_t)((i / 7) % (fl_format_storage_bytes(fmt) == 2 ? 65536 : 256));
            else
                c = fl_encode_f64(fmt, (rnd() - 0.45) * spread, FL_RND_NE, FL_OVF_SATURATE, 0);
            memcpy(&h[i * fl_format_storage_bytes(fmt)], &c, fl_format_storage_bytes(fmt)); // little-endian low bytes
        }
        CK(cudaMemcpy(d(), h.data(), h.size(), cudaMemcpyHostToDevice));
    }
    std::vector<uint8_t> back()
    {
        std::vector<uint8_t> r(h.size());
        CK(cudaMemcpy(r.data(), d(), r.size(), cudaMemcpyDeviceToHost));
        return r;
    }
    fl_kin kin_h(const float *s) { return fl_kin{ h.data(), fmt, s }; }
    fl_kin kin_d(const float *s) { return fl_kin{ d(), fmt, s }; }
};

static float *dev_scalar(float v)
{
    float *p;
    CK(cudaMalloc(&p, sizeof v));
    CK(cudaMemcpy(p, &v, sizeof v, cudaMemcpyHostToDevice));
    return p;
}

static float get_scalar(const float *p)
{
    float v;
    CK(cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

static void compare(const char *what, const tensor &cpu_out, const std::vector<uint8_t> &gpu, const tensor *in0)
{
    const size_t es = fl_format_storage_bytes(cpu_out.fmt);
    for (size_t i = 0; i < cpu_out.n; i++)
        if (memcmp(&cpu_out.h[i * es], &gpu[i * es], es) != 0) {
            uint32_t a = 0, b = 0, x = 0;
            memcpy(&a, &cpu_out.h[i * es], es);
            memcpy(&b, &gpu[i * es], es);
            if (in0)
                memcpy(&x, &in0->h[i * fl_format_storage_bytes(in0->fmt)], fl_format_storage_bytes(in0->fmt));
            fprintf(stderr, "FAIL %s i=%zu x=%#x (%a) cpu=%#x gpu=%#x\n", what, i, x, in0 ? fl_decode(in0->fmt, x) : 0.0f, a, b);
            exit(1);
        }
}

static int cases = 0;

// ---- 1. every registry entry on the device ------------------------------------------------------------

// n encodings of format f: random values of about +-spread, and every code of the format cycled through
// every 7th element (fp32: random bit patterns there).  e8m0 (Smooth-SwiGLU's scale): 2^-4 .. 2^4,
// every code cycled.
static std::vector<uint32_t> codes(fl_format f, size_t n, double spread)
{
    std::vector<uint32_t> v(n);
    const int bits = fl_format_get(f)->bits;
    for (size_t i = 0; i < n; i++) {
        if (i % 7 == 3)
            v[i] = bits == 32 ? (uint32_t)(rnd() * 4294967296.0) : (uint32_t)((i / 7) % (1u << bits));
        else if (f == FL_FMT_E8M0)
            v[i] = 127 + (uint32_t)(rnd() * 9) - 4;
        else
            v[i] = fl_encode_f64(f, (rnd() - 0.45) * spread, FL_RND_NE, FL_OVF_SATURATE, 0);
    }
    return v;
}

// Equal encodings; fp32 NaNs equal as a class (the GPU's fp32 arithmetic returns the canonical NaN where
// x86 keeps an operand's payload; the kernels' narrow outputs encode every NaN alike).
static int same(fl_format f, uint32_t a, uint32_t b)
{
    return a == b || (f == FL_FMT_FP32 && fl_isnanf(fl_f32_from_bits(a)) && fl_isnanf(fl_f32_from_bits(b)));
}

static void case_twin(const fl_twin *t, size_t n, size_t row_len, size_t off)
{
    std::vector<uint32_t> in[3], cpu(n), gpu(n);
    const uint32_t *p[3] = { nullptr, nullptr, nullptr };
    for (int k = 0; k < t->n_inputs; k++) {
        in[k] = codes(t->in_fmt[k], n, k == 0 ? 16.0 : 6.0);
        p[k] = in[k].data();
    }
    t->run(cpu.data(), p, n, row_len);
    CHECK(fl_cuda_twin_run(t, gpu.data(), p, n, row_len, off) == 0,
          "%s did not run on the device (every registry entry needs a device runner: kernels/twins.cu)", t->name);
    for (size_t i = 0; i < n; i++)
        if (!same(t->out_fmt, cpu[i], gpu[i])) {
            fprintf(stderr, "FAIL %s n=%zu row_len=%zu off=%zu i=%zu inputs", t->name, n, row_len, off, i);
            for (int k = 0; k < t->n_inputs; k++)
                fprintf(stderr, " %#x (%a)", in[k][i], fl_decode(t->in_fmt[k], in[k][i]));
            fprintf(stderr, " cpu=%#x gpu=%#x\n", cpu[i], gpu[i]);
            exit(1);
        }
    cases++;
}

static void test_registry()
{
    for (size_t i = 0; i < fl_twin_count; i++) {
        const fl_twin *t = &fl_twins[i];
        if (t->rowwise) {
            case_twin(t, 33 * 4096, 4096, 0);
            case_twin(t, 5 * 4101, 4101, 0); // H % 16 != 0
            case_twin(t, 7 * 16, 16, 1);     // misaligned
        } else {
            case_twin(t, 3 * FL_TILE + 13, 0, 0); // several tiles and a scalar tail
            case_twin(t, 1000, 0, 1);             // misaligned: scalar path, same order
        }
    }
    printf("  the %zu twins of the registry: ok\n", fl_twin_count);
}

// ---- 2. the launchers' options ------------------------------------------------------------------------

// scale for FP8 outputs, scale_inv for FP8 inputs (host and device copies)
static const float k_scale = 2.0f, k_scale_inv = 0.5f;

static int is_fp8(fl_format f) { return f == FL_FMT_E4M3 || f == FL_FMT_E5M2; }
static const float *hs(fl_format f, int in) { return is_fp8(f) ? (in ? &k_scale_inv : &k_scale) : nullptr; }

// A case's device scalars: scale_inv (FP8 inputs), scale (FP8 outputs), amax.
struct dscalars {
    float *in = dev_scalar(k_scale_inv), *out = dev_scalar(k_scale), *amax = dev_scalar(0.0f);
    ~dscalars()
    {
        cudaFree(in);
        cudaFree(out);
        cudaFree(amax);
    }
    const float *for_in(fl_format f) const { return is_fp8(f) ? in : nullptr; }
    const float *for_out(fl_format f) const { return is_fp8(f) ? out : nullptr; }
};

// A device array of floats.
struct dfloats {
    float *p = nullptr;
    explicit dfloats(size_t n) { CK(cudaMalloc(&p, (n ? n : 1) * sizeof(float))); }
    ~dfloats() { cudaFree(p); }
};

// The device's coefficient gradients da[0..order] against the twin's, bit for bit (NaN as NaN).
static void check_da(const char *what, const float *dda, const float *da, int order)
{
    float gda[FL_POLY_MAX_ORDER + 1];
    CK(cudaMemcpy(gda, dda, (order + 1) * sizeof(float), cudaMemcpyDeviceToHost));
    for (int k = 0; k <= order; k++)
        CHECK(fl_f32_bits(gda[k]) == fl_f32_bits(da[k]) || (isnan(da[k]) && isnan(gda[k])), "%s da%d cpu %a gpu %a", what, k, da[k],
              gda[k]);
}

static void case_polyrelu(int order, fl_format fi, fl_format fo, size_t n, size_t off)
{
    const fl_poly_coef c = fl_poly_coef_default(order);
    tensor x(fi, n, off), y(fo, n, off);
    x.fill(8.0, 1);
    dscalars d;
    float amax = 0.0f;
    CHECK(fl_polyrelu_fwd(fl_kout{ y.h.data(), fo, hs(fo, 0), &amax }, x.kin_h(hs(fi, 1)), n, &c) == 0, "cpu");
    CHECK(fl_cuda_polyrelu_fwd(fl_kout{ y.d(), fo, d.for_out(fo), d.amax }, x.kin_d(d.for_in(fi)), n, &c, nullptr) == 0, "launch");
    CK(cudaDeviceSynchronize());
    char what[128];
    snprintf(what, sizeof what, "polyrelu%d fwd %s->%s n=%zu off=%zu", order, fl_format_name(fi), fl_format_name(fo), n, off);
    compare(what, y, y.back(), &x);
    CHECK(get_scalar(d.amax) == amax, "%s amax cpu %a gpu %a", what, amax, get_scalar(d.amax));
    // backward: dx in bf16 or e5m2 (float32 with float32 x: the GPU step's), with coefficient gradients
    const std::vector<fl_format> grads = fi == FL_FMT_FP32 ? std::vector<fl_format>{ FL_FMT_FP32 }
                                                            : std::vector<fl_format>{ FL_FMT_BF16, FL_FMT_E5M2 };
    for (fl_format fg : grads) {
        tensor dy(fg, n, off), dx(fg, n, off);
        dy.fill(2.0, 1);
        dfloats dda(FL_POLY_MAX_ORDER + 1), ws(fl_cuda_polyrelu_ws_floats(n, order) + 1);
        float da[FL_POLY_MAX_ORDER + 1], am = 0.0f;
        CK(cudaMemset(d.amax, 0, 4));
        CHECK(fl_polyrelu_bwd(fl_kout{ dx.h.data(), fg, hs(fg, 0), &am }, da, x.kin_h(hs(fi, 1)), dy.kin_h(hs(fg, 1)), n, &c) == 0, "cpu");
        CHECK(fl_cuda_polyrelu_bwd(fl_kout{ dx.d(), fg, d.for_out(fg), d.amax }, dda.p, ws.p, x.kin_d(d.for_in(fi)), dy.kin_d(d.for_in(fg)),
                                   n, &c, nullptr) == 0,
              "launch");
        CK(cudaDeviceSynchronize());
        snprintf(what, sizeof what, "polyrelu%d bwd x %s dy/dx %s n=%zu off=%zu", order, fl_format_name(fi), fl_format_name(fg), n, off);
        compare(what, dx, dx.back(), &x);
        check_da(what, dda.p, da, order);
        CHECK(get_scalar(d.amax) == am, "%s amax", what);
    }
    cases++;
}

static void case_polynorm(int order, fl_format fi, fl_format fo, size_t R, size_t H, size_t off)
{
    const fl_poly_coef c = fl_poly_coef_default(order);
    const size_t n = R * H;
    const fl_format fg = fi == FL_FMT_FP32 ? FL_FMT_FP32 : FL_FMT_BF16; /* float32 throughout: the GPU step's */
    tensor x(fi, n, off), y(fo, n, off), dy(fg, n, off), dx(fg, n, off);
    x.fill(4.0, 0);
    dy.fill(1.0, 0);
    dscalars d;
    float amax = 0.0f;
    CHECK(fl_polynorm_fwd(fl_kout{ y.h.data(), fo, hs(fo, 0), &amax }, x.kin_h(hs(fi, 1)), R, H, &c, 1e-6f) == 0, "cpu");
    CHECK(fl_cuda_polynorm_fwd(fl_kout{ y.d(), fo, d.for_out(fo), d.amax }, x.kin_d(d.for_in(fi)), R, H, &c, 1e-6f, nullptr) == 0, "launch");
    CK(cudaDeviceSynchronize());
    char what[128];
    snprintf(what, sizeof what, "polynorm%d fwd %s->%s R=%zu H=%zu off=%zu", order, fl_format_name(fi), fl_format_name(fo), R, H, off);
    compare(what, y, y.back(), &x);
    CHECK(get_scalar(d.amax) == amax, "%s amax", what);
    float da[FL_POLY_MAX_ORDER + 1];
    dfloats dda(FL_POLY_MAX_ORDER + 1), ws(fl_cuda_polynorm_ws_floats(R, order));
    CHECK(fl_polynorm_bwd(fl_kout{ dx.h.data(), fg, nullptr, nullptr }, da, x.kin_h(hs(fi, 1)), dy.kin_h(nullptr), R, H, &c, 1e-6f) == 0,
          "cpu");
    CHECK(fl_cuda_polynorm_bwd(fl_kout{ dx.d(), fg, nullptr, nullptr }, dda.p, ws.p, x.kin_d(d.for_in(fi)), dy.kin_d(nullptr), R, H,
                               &c, 1e-6f, nullptr) == 0,
          "launch");
    CK(cudaDeviceSynchronize());
    snprintf(what, sizeof what, "polynorm%d bwd x %s R=%zu H=%zu off=%zu", order, fl_format_name(fi), R, H, off);
    compare(what, dx, dx.back(), &x);
    check_da(what, dda.p, da, order);
    cases++;
}

static void case_swiglu(fl_format fi, fl_format fo, fl_format fg, size_t R, size_t C, size_t off)
{
    const size_t n = R * C;
    tensor g(fi, n, off), u(fi, n, off), y(fo, n, off), dy(fg, n, off), dg(fg, n, off), du(fg, n, off);
    g.fill(16.0, 1);
    u.fill(6.0, 1);
    dy.fill(2.0, 1);
    dscalars d;
    const float *gi = d.for_in(fi), *go = d.for_out(fo), *gg = d.for_in(fg), *gout = d.for_out(fg);
    float amax = 0.0f;
    char what[160];
    CHECK(fl_swiglu_fwd(fl_kout{ y.h.data(), fo, hs(fo, 0), &amax }, g.kin_h(hs(fi, 1)), u.kin_h(hs(fi, 1)), n) == 0, "cpu");
    CHECK(fl_cuda_swiglu_fwd(fl_kout{ y.d(), fo, go, d.amax }, g.kin_d(gi), u.kin_d(gi), n, nullptr) == 0, "launch");
    CK(cudaDeviceSynchronize());
    snprintf(what, sizeof what, "swiglu fwd %s->%s n=%zu off=%zu", fl_format_name(fi), fl_format_name(fo), n, off);
    compare(what, y, y.back(), &g);
    CHECK(get_scalar(d.amax) == amax, "%s amax", what);
    CHECK(fl_swiglu_bwd(fl_kout{ dg.h.data(), fg, hs(fg, 0), nullptr }, fl_kout{ du.h.data(), fg, hs(fg, 0), nullptr }, g.kin_h(hs(fi, 1)),
                        u.kin_h(hs(fi, 1)), dy.kin_h(hs(fg, 1)), n) == 0,
          "cpu");
    CHECK(fl_cuda_swiglu_bwd(fl_kout{ dg.d(), fg, gout, nullptr }, fl_kout{ du.d(), fg, gout, nullptr }, g.kin_d(gi), u.kin_d(gi), dy.kin_d(gg), n,
                             nullptr) == 0,
          "launch");
    CK(cudaDeviceSynchronize());
    snprintf(what, sizeof what, "swiglu bwd %s grads %s n=%zu off=%zu", fl_format_name(fi), fl_format_name(fg), n, off);
    compare(what, dg, dg.back(), &g);
    compare(what, du, du.back(), &g);
    // Smooth-SwiGLU, both axes, computed and given scales
    for (int axis = 0; axis < 2; axis++)
        for (int compute = 1; compute >= 0; compute--) {
            const size_t ns = axis == FL_SMOOTH_CHANNEL ? C : R;
            std::vector<float> s(ns, 0.0f), gs(ns);
            dfloats dsm(ns);
            if (!compute)
                for (size_t k = 0; k < ns; k++)
                    s[k] = ldexpf(1.0f, (int)(rnd() * 8) - 4);
            CK(cudaMemcpy(dsm.p, s.data(), ns * sizeof(float), cudaMemcpyHostToDevice));
            amax = 0.0f;
            CK(cudaMemset(d.amax, 0, 4));
            CHECK(fl_smooth_swiglu_fwd(fl_kout{ y.h.data(), fo, hs(fo, 0), &amax }, s.data(), g.kin_h(hs(fi, 1)), u.kin_h(hs(fi, 1)), R, C,
                                       (fl_smooth_axis)axis, compute) == 0,
                  "cpu");
            CHECK(fl_cuda_smooth_swiglu_fwd(fl_kout{ y.d(), fo, go, d.amax }, dsm.p, g.kin_d(gi), u.kin_d(gi), R, C, (fl_smooth_axis)axis, compute,
                                            nullptr) == 0,
                  "launch");
            CK(cudaDeviceSynchronize());
            snprintf(what, sizeof what, "smooth-swiglu %s %s fwd %s->%s R=%zu C=%zu off=%zu", fl_smooth_axis_name((fl_smooth_axis)axis),
                     compute ? "current" : "given", fl_format_name(fi), fl_format_name(fo), R, C, off);
            compare(what, y, y.back(), &g);
            CK(cudaMemcpy(gs.data(), dsm.p, ns * sizeof(float), cudaMemcpyDeviceToHost));
            CHECK(memcmp(gs.data(), s.data(), ns * sizeof(float)) == 0, "%s scales", what);
            CHECK(get_scalar(d.amax) == amax, "%s amax", what);
            CHECK(fl_smooth_swiglu_bwd(fl_kout{ dg.h.data(), fg, hs(fg, 0), nullptr }, fl_kout{ du.h.data(), fg, hs(fg, 0), nullptr },
                                       g.kin_h(hs(fi, 1)), u.kin_h(hs(fi, 1)), dy.kin_h(hs(fg, 1)), s.data(), R, C, (fl_smooth_axis)axis) == 0,
                  "cpu");
            CHECK(fl_cuda_smooth_swiglu_bwd(fl_kout{ dg.d(), fg, gout, nullptr }, fl_kout{ du.d(), fg, gout, nullptr }, g.kin_d(gi), u.kin_d(gi),
                                            dy.kin_d(gg), dsm.p, R, C, (fl_smooth_axis)axis, nullptr) == 0,
                  "launch");
            CK(cudaDeviceSynchronize());
            compare(what, dg, dg.back(), &g);
            compare(what, du, du.back(), &g);
        }
    cases++;
}

// ---- 3. the FP8 GEMM ------------------------------------------------------------------------------------

// Column m of A (K, M) dotted with column n of B (K, N), the FP8 codes decoded, summed in double (each
// product exact), and the sum of |products| into *sum_abs.
static double exact_dot(const tensor &A, const tensor &B, size_t m, size_t n, size_t K, double *sum_abs)
{
    double s = 0, sa = 0;
    for (size_t k = 0; k < K; k++) {
        const double p = (double)fl_decode(A.fmt, A.h[m * K + k]) * fl_decode(B.fmt, B.h[n * K + k]);
        s += p;
        sa += fabs(p);
    }
    *sum_abs = sa;
    return s;
}

static void case_gemm(fl_format fa, fl_format fb, fl_format fd, int fast, size_t M, size_t N, size_t K)
{
    tensor A(fa, M * K), B(fb, N * K), D(fd, M * N);
    A.fill(4.0, 0);
    B.fill(4.0, 0);
    const float as = 0.5f, bs = 0.25f, dsc = 4.0f;
    float *das = dev_scalar(as), *dbs = dev_scalar(bs), *dds = dev_scalar(dsc), *damax = dev_scalar(0.0f);
    fl_gemm_fp8 g = { M, N, K, fa, fb, (const uint8_t *)A.d(), K, (const uint8_t *)B.d(), K, fd, D.d(), M, nullptr, 0, 1.0f, 0.0f, das, dbs, dds,
                      (fd == FL_FMT_E4M3 || fd == FL_FMT_E5M2) ? damax : nullptr, fast };
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    CHECK(fl_cuda_gemm_fp8(&g, nullptr, ws, 32 << 20, nullptr) == 0, "gemm launch");
    CK(cudaDeviceSynchronize());
    std::vector<uint8_t> gd = D.back();
    float amax = 0;
    fl_gemm_fp8 h = g;
    h.a = A.h.data(), h.b = B.h.data(), h.d = D.h.data(), h.a_scale = &as, h.b_scale = &bs, h.d_scale = &dsc, h.amax_d = &amax;
    CHECK(fl_gemm_fp8_cpu(&h, FL_GEMM_ACC_SGEMM, nullptr) == 0, "gemm twin");
    double worst = 0, worst_fast = 0, amax_bound = 0;
    for (size_t n = 0; n < N; n++)
        for (size_t m = 0; m < M; m++) {
            double sa;
            const double s = exact_dot(A, B, m, n, K, &sa);
            const double f = as * bs, v = f * s;
            uint32_t cg = 0, cc = 0;
            memcpy(&cg, &gd[(n * M + m) * fl_format_storage_bytes(fd)], fl_format_storage_bytes(fd));
            memcpy(&cc, &D.h[(n * M + m) * fl_format_storage_bytes(fd)], fl_format_storage_bytes(fd));
            const double dsd = (fd == FL_FMT_E4M3) ? dsc : 1.0;
            const double vg = fl_decode(fd, cg) / dsd, vc = fl_decode(fd, cc) / dsd;
            double bound = fl_gemm_fp32_bound(K, f * sa, fabs(v));
            if (fd != FL_FMT_FP32)
                bound += fl_ulp(fd, v * dsd) / dsd * 1.0001 + fl_gemm_fp32_bound(K, f * sa, fabs(v));
            if (fast) {
                worst_fast = fmax(worst_fast, fabs(vg - v) / (f * sa));
                CHECK(fabs(vg - v) <= fl_fast_accum_bound(K, f * sa, nullptr) + bound, "gemm fast accum beyond its bound");
            } else {
                CHECK(fabs(vg - vc) <= bound, "gemm %s x %s -> %s m=%zu n=%zu gpu=%a cpu=%a bound=%g", fl_format_name(fa), fl_format_name(fb),
                        fl_format_name(fd), m, n, vg, vc, bound);
                worst = fmax(worst, fabs(vg - vc) / (0x1p-24 * f * sa));
                amax_bound = fmax(amax_bound, bound);
            }
        }
    printf("  gemm %s x %s -> %s M=%zu N=%zu K=%zu fast=%d: ", fl_format_name(fa), fl_format_name(fb), fl_format_name(fd), M, N, K, fast);
    if (fast)
        printf("max |gpu - exact| / S' = %.3g (the model's bound %.3g)\n", worst_fast,
               fl_fast_accum_bound(K, 1.0, nullptr));
    else if (g.amax_d) {
        const float ag = get_scalar(damax);
        CHECK(fabs((double)ag - amax) <= amax_bound, "amax_D gpu %a twin %a beyond the bound %g", ag, amax, amax_bound);
        printf("max |gpu - twin| = %.2f u S'; amax_D gpu %a twin %a\n", worst, ag, amax);
    } else
        printf("max |gpu - twin| = %.2f u S'\n", worst);
    cudaFree(ws);
    cudaFree(das);
    cudaFree(dbs);
    cudaFree(dds);
    cudaFree(damax);
    cases++;
}

// ---- 4. the training-step kernels ----------------------------------------------------------------

// The FP8 GEMM as the GPU step calls it (--fp8-gemm, gstep.c's gemm8): fp32 D, both dequantization
// factors in one allocation (a_scale, a_scale + 1), D a view doff bytes into a larger buffer (aligned 16,
// not 256), and with beta = 1 C = D (the planes and the weight gradient accumulate).  Judged against the
// sum in double (its own error far below the bound) within the fp32 bound, the accumulated C counted as one more term.
static void case_gemm_step(fl_format fa, fl_format fb, size_t M, size_t N, size_t K, float beta, size_t doff)
{
    tensor A(fa, M * K), B(fb, N * K);
    A.fill(4.0, 0);
    B.fill(4.0, 0);
    std::vector<float> c(M * N);
    for (size_t i = 0; i < c.size(); i++)
        c[i] = (float)(rnd() - 0.5) * 64.0f;
    uint8_t *dbuf;
    CK(cudaMalloc(&dbuf, M * N * sizeof(float) + doff));
    float *dd = (float *)(dbuf + doff);
    CK(cudaMemcpy(dd, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));
    const float sc[2] = { 0.5f, 0.25f };
    float *dsc;
    CK(cudaMalloc(&dsc, sizeof sc));
    CK(cudaMemcpy(dsc, sc, sizeof sc, cudaMemcpyHostToDevice));
    fl_gemm_fp8 g;
    memset(&g, 0, sizeof g);
    g.m = M, g.n = N, g.k = K;
    g.a_fmt = fa, g.a = (const uint8_t *)A.d(), g.lda = K;
    g.b_fmt = fb, g.b = (const uint8_t *)B.d(), g.ldb = K;
    g.d_fmt = FL_FMT_FP32, g.d = dd, g.ldd = M;
    g.c = beta != 0.0f ? dd : nullptr, g.ldc = M;
    g.alpha = 1.0f, g.beta = beta;
    g.a_scale = dsc, g.b_scale = dsc + 1;
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    CHECK(fl_cuda_gemm_fp8(&g, nullptr, ws, 32 << 20, nullptr) == 0, "gemm (the step's call) M=%zu N=%zu K=%zu beta %g D offset %zu",
          M, N, K, (double)beta, doff);
    CK(cudaDeviceSynchronize());
    std::vector<float> gd(M * N);
    CK(cudaMemcpy(gd.data(), dd, gd.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const double f = (double)sc[0] * sc[1];
    for (size_t n = 0; n < N; n++)
        for (size_t m = 0; m < M; m++) {
            double sa;
            const double s = exact_dot(A, B, m, n, K, &sa);
            const double cv = beta != 0.0f ? (double)c[n * M + m] : 0.0, v = f * s + cv;
            const double bound = fl_gemm_fp32_bound(K + 1, f * sa + fabs(cv), fabs(v));
            CHECK(fabs((double)gd[n * M + m] - v) <= bound, "gemm (the step's call) M=%zu N=%zu K=%zu beta %g m=%zu n=%zu gpu=%a double=%a bound=%g",
                  M, N, K, (double)beta, m, n, gd[n * M + m], v, bound);
        }
    cudaFree(ws);
    cudaFree(dsc);
    cudaFree(dbuf);
    cases++;
}

static void case_adamw(size_t n)
{
    std::vector<float> p(n), g(n), m(n), v(n);
    for (size_t i = 0; i < n; i++) {
        g[i] = i % 97 == 5 ? 0.0f : i % 211 == 7 ? INFINITY : i % 223 == 11 ? NAN : (float)((rnd() - 0.5) * ldexp(1.0, (int)(i % 90) - 60));
        p[i] = (float)(rnd() - 0.5);
        m[i] = (float)((rnd() - 0.5) * 1e-3);
        v[i] = (float)(rnd() * 1e-5);
    }
    const fl_adamw_hp hp = { 0.9f, 0.95f, 0.271f, 0.142625f, 1e-8f, 3e-3f, 0.1f, 0.5f };
    float *d[4];
    std::vector<float> *h[4] = { &p, &g, &m, &v };
    for (int k = 0; k < 4; k++) {
        CK(cudaMalloc(&d[k], n * sizeof(float)));
        CK(cudaMemcpy(d[k], h[k]->data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    if (fl_adamw(p.data(), g.data(), m.data(), v.data(), n, &hp) || fl_cuda_adamw(d[0], d[1], d[2], d[3], n, &hp, nullptr)) {
        fprintf(stderr, "FAIL adamw: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    const char *names[4] = { "p", "g", "m", "v" };
    for (int k = 0; k < 4; k++) {
        std::vector<float> back(n);
        CK(cudaMemcpy(back.data(), d[k], n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
            if (!same(FL_FMT_FP32, fl_f32_bits((*h[k])[i]), fl_f32_bits(back[i]))) {
                fprintf(stderr, "FAIL adamw %s i=%zu g=%a cpu=%a gpu=%a\n", names[k], i, g[i], (*h[k])[i], back[i]);
                exit(1);
            }
        cudaFree(d[k]);
    }
    cases++;
}

static float *dev_copy(const std::vector<float> &h)
{
    float *d;
    CK(cudaMalloc(&d, h.size() * sizeof(float)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static void expect_same(const char *what, const std::vector<float> &cpu, const float *dev)
{
    std::vector<float> back(cpu.size());
    CK(cudaMemcpy(back.data(), dev, back.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < cpu.size(); i++)
        if (!same(FL_FMT_FP32, fl_f32_bits(cpu[i]), fl_f32_bits(back[i]))) {
            fprintf(stderr, "FAIL %s i=%zu cpu=%a gpu=%a\n", what, i, cpu[i], back[i]);
            exit(1);
        }
}

// The FFN weight sums of the alignment telemetry (fl_ffn_wsums): L layers of (G F, C) weights, doubles
// compared bit for bit.  Zero rows and rows of weights near 1e30 (squares near 1e60) included.
static void case_ffn_wsums(size_t L, size_t F, size_t C, int gated)
{
    const size_t G = gated ? 2 : 1, n = L * G * F * C, R = L * F;
    std::vector<float> w(n);
    for (size_t i = 0; i < n; i++)
        w[i] = (float)((rnd() - 0.5) * (i / C % 11 == 4 ? 0.0 : i / C % 13 == 6 ? 1e30 : 0.2));
    std::vector<double> cpu(3 * R), gpu(3 * R);
    float *dw = dev_copy(w);
    double *dout;
    CK(cudaMalloc(&dout, 3 * R * sizeof(double)));
    if (fl_ffn_wsums(cpu.data(), w.data(), L, F, C, gated) || fl_cuda_ffn_wsums(dout, dw, L, F, C, gated, nullptr)) {
        fprintf(stderr, "FAIL ffn_wsums: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaMemcpy(gpu.data(), dout, 3 * R * sizeof(double), cudaMemcpyDeviceToHost));
    if (memcmp(cpu.data(), gpu.data(), 3 * R * sizeof(double))) {
        for (size_t i = 0; i < 3 * R; i++)
            if (memcmp(&cpu[i], &gpu[i], sizeof(double))) {
                fprintf(stderr, "FAIL ffn_wsums L=%zu F=%zu C=%zu gated=%d: row %zu sum %zu cpu %a gpu %a\n", L, F, C,
                        gated, i / 3, i % 3, cpu[i], gpu[i]);
                break;
            }
        exit(1);
    }
    cudaFree(dw);
    cudaFree(dout);
    cases++;
}

// The attention's head layout copy (fl_heads_copy) both ways, bit for bit (a copy: NaN payloads kept).
static void case_heads_copy(size_t B, size_t T, size_t H, size_t hs, size_t ld)
{
    const size_t rows = B * T * ld, mats = B * H * T * hs;
    std::vector<float> tok(rows), hm(mats), out_h(mats, 7.0f), out_t(rows, 7.0f);
    for (size_t i = 0; i < rows; i++)
        tok[i] = (float)(rnd() - 0.5);
    for (size_t i = 0; i < mats; i++)
        hm[i] = (float)(rnd() - 0.5);
    hm[mats / 2] = fl_f32_from_bits(0x7FC01234u);
    float *dtok = dev_copy(tok), *dhm = dev_copy(hm), *dout_h = dev_copy(out_h), *dout_t = dev_copy(out_t);
    if (fl_heads_copy(out_h.data(), tok.data(), B, T, H, hs, ld, 1) || fl_heads_copy(out_t.data(), hm.data(), B, T, H, hs, ld, 0) ||
        fl_cuda_heads_copy(dout_h, dtok, B, T, H, hs, ld, 1, nullptr) ||
        fl_cuda_heads_copy(dout_t, dhm, B, T, H, hs, ld, 0, nullptr)) {
        fprintf(stderr, "FAIL heads copy: a launcher returned an error\n");
        exit(1);
    }
    std::vector<float> back_h(mats), back_t(rows);
    CK(cudaMemcpy(back_h.data(), dout_h, mats * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(back_t.data(), dout_t, rows * sizeof(float), cudaMemcpyDeviceToHost));
    if (memcmp(back_h.data(), out_h.data(), mats * sizeof(float)) || memcmp(back_t.data(), out_t.data(), rows * sizeof(float))) {
        fprintf(stderr, "FAIL heads copy B=%zu T=%zu H=%zu hs=%zu ld=%zu\n", B, T, H, hs, ld);
        exit(1);
    }
    for (float *p : { dtok, dhm, dout_h, dout_t })
        cudaFree(p);
    cases++;
}

// off: the tensors start off floats into their allocations (1: not 16-byte aligned, the launchers' scalar
// path for the outputs).
static void case_rmsnorm(size_t N, size_t C, int accumulate, size_t off = 0)
{
    std::vector<float> x(N * C), dy(N * C), g(C), y(N * C), r(N), dx(N * C, accumulate ? 0.25f : 0.0f), dg(C, 0.125f);
    for (size_t i = 0; i < N * C; i++) {
        x[i] = (float)((rnd() - 0.5) * (i / C % 7 == 3 ? 1e30 : 4.0));
        dy[i] = (float)(rnd() - 0.5);
    }
    for (size_t c = 0; c < C; c++)
        g[c] = (float)(0.5 + rnd());
    auto at = [&](const std::vector<float> &h) {
        std::vector<float> p(off, 0.0f);
        p.insert(p.end(), h.begin(), h.end());
        return dev_copy(p) + off;
    };
    float *dx_ = at(x), *ddy = at(dy), *dg_ = at(g), *dy_ = at(y), *dr = dev_copy(r), *ddx = at(dx), *ddg = dev_copy(dg),
          *dk = dev_copy(r);
    if (fl_rmsnorm_fwd(y.data(), r.data(), x.data(), g.data(), N, C, 1e-5f) ||
        fl_cuda_rmsnorm_fwd(dy_, dr, dx_, dg_, N, C, 1e-5f, nullptr) ||
        fl_rmsnorm_bwd(dx.data(), dg.data(), dy.data(), x.data(), r.data(), g.data(), N, C, accumulate) ||
        fl_cuda_rmsnorm_bwd(ddx, ddg, ddy, dx_, dr, dg_, N, C, accumulate, dk, nullptr)) {
        fprintf(stderr, "FAIL rmsnorm: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("rmsnorm y", y, dy_);
    expect_same("rmsnorm rstd", r, dr);
    expect_same("rmsnorm dx", dx, ddx);
    expect_same("rmsnorm dgain", dg, ddg);
    for (float *p : { dx_, ddy, dg_, dy_, ddx })
        cudaFree(p - off);
    for (float *p : { dr, ddg, dk })
        cudaFree(p);
    cases++;
}

// A cast's counts (dk: 6 on the device, fl_cast_counts' order) and amax (dam) equal to the twin's k and amax.
static bool same_cast_stats(const fl_cast_counts &k, float amax, const unsigned long long *dk, const float *dam)
{
    unsigned long long hk[6];
    CK(cudaMemcpy(hk, dk, sizeof hk, cudaMemcpyDeviceToHost));
    const unsigned long long want[6] = { k.sat, k.clip, k.nan_out, k.inf_out, k.nan_in, k.ftz };
    if (memcmp(want, hk, sizeof hk) || fl_f32_bits(get_scalar(dam)) != fl_f32_bits(amax)) {
        fprintf(stderr, "  counts sat %llu/%llu clip %llu/%llu nan %llu/%llu inf %llu/%llu nan_in %llu/%llu ftz %llu/%llu, "
                        "amax %a/%a (twin/device)\n", want[0], hk[0], want[1], hk[1], want[2], hk[2], want[3], hk[3],
                want[4], hk[4], want[5], hk[5], amax, get_scalar(dam));
        return false;
    }
    return true;
}

static void case_cast_fp8(fl_format fmt, int gaudi2, int nosat, int sr)
{
    const size_t n = (size_t)(0x100000000ull / 65521) + 5;
    std::vector<float> x(n);
    for (size_t i = 0; i + 5 < n; i++)
        x[i] = fl_f32_from_bits((uint32_t)(i * 65521u));
    const float sp[5] = { 0.0f, INFINITY, NAN, 464.0f, 0x1p-17f };
    memcpy(&x[n - 5], sp, sizeof sp);
    const fl_cast_fmt f = { fmt, gaudi2, nosat, sr, 0xC0FFEEull, 0 };
    std::vector<uint8_t> codes(n), back(n);
    fl_cast_counts k = { 0, 0, 0, 0, 0, 0 };
    float amax = 0.0f;
    float *dx = dev_copy(x), *dam = dev_scalar(0.0f);
    uint8_t *dcodes;
    unsigned long long *dk, hk[6];
    CK(cudaMalloc(&dcodes, n));
    CK(cudaMalloc(&dk, sizeof hk));
    CK(cudaMemset(dk, 0, sizeof hk));
    if (fl_cast_fp8(codes.data(), &amax, &k, x.data(), n, 0.75f, &f, 77) ||
        fl_cuda_cast_fp8(dcodes, dam, dk, dx, n, 0.75f, &f, 77, nullptr)) {
        fprintf(stderr, "FAIL cast_fp8: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(back.data(), dcodes, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (codes[i] != back[i]) {
            fprintf(stderr, "FAIL cast_fp8 %s%s nosat %d sr %d i=%zu x=%a cpu=%#x gpu=%#x\n", fl_format_name(fmt),
                    gaudi2 ? " (Gaudi2)" : "", nosat, sr, i, x[i], codes[i], back[i]);
            exit(1);
        }
    if (!same_cast_stats(k, amax, dk, dam)) {
        fprintf(stderr, "FAIL cast_fp8 %s nosat %d sr %d: counts or amax differ\n", fl_format_name(fmt), nosat, sr);
        exit(1);
    }
    cudaFree(dx);
    cudaFree(dam);
    cudaFree(dcodes);
    cudaFree(dk);
    cases++;
}

// Smooth-SwiGLU's smoothing on the device (the GPU step's FP8 recipes): the scales, the smoothed amax and
// the smoothed cast's values, counts and amax as the twins' (fl_smooth_scales, fl_cast_fq_smooth), per
// column and per row, on a tensor with NaN and Inf in it.
static void case_smooth(size_t R, size_t C, int axis)
{
    std::vector<float> x(R * C), y(R * C), s(axis ? R : C), si(axis ? R : C);
    for (size_t i = 0; i < x.size(); i++)
        x[i] = fl_f32_from_bits((uint32_t)(i * 2654435761u)) * 0x1p-100f;
    x[3] = NAN;
    x[x.size() / 2] = -INFINITY;
    const float am = fl_smooth_scales(s.data(), si.data(), x.data(), R, C, axis);
    const fl_cast_smooth hs = { axis ? s.data() : nullptr, axis ? si.data() : nullptr, axis ? nullptr : s.data(),
                                axis ? nullptr : si.data(), C };
    const fl_cast_fmt f = { FL_FMT_E4M3, 0, 0, 0, 0, 0 };
    fl_cast_counts k = { 0, 0, 0, 0, 0, 0 };
    float amax = 0.0f;
    if (fl_cast_fq_smooth(y.data(), &amax, &k, x.data(), x.size(), 0.5f, 2.0f, &f, 0, &hs)) {
        fprintf(stderr, "FAIL smooth: the twin returned an error\n");
        exit(1);
    }
    float *dx = dev_copy(x), *ds, *dsi, *dy, *dam = dev_scalar(0.0f);
    unsigned *ws;
    unsigned long long *dk, hk[6];
    CK(cudaMalloc(&ds, s.size() * sizeof(float)));
    CK(cudaMalloc(&dsi, s.size() * sizeof(float)));
    CK(cudaMalloc(&dy, y.size() * sizeof(float)));
    CK(cudaMalloc(&ws, (R + C + 1) * sizeof(unsigned)));
    CK(cudaMalloc(&dk, sizeof hk));
    CK(cudaMemset(dk, 0, sizeof hk));
    float gam = -1.0f;
    const fl_cast_smooth dsm = { axis ? ds : nullptr, axis ? dsi : nullptr, axis ? nullptr : ds, axis ? nullptr : dsi, C };
    if (fl_cuda_smooth_scales(ds, dsi, &gam, dx, R, C, axis, ws, nullptr) ||
        fl_cuda_cast_fq_smooth(dy, dam, dk, dx, x.size(), 0.5f, 2.0f, &f, 0, &dsm, nullptr)) {
        fprintf(stderr, "FAIL smooth: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("smooth scales", s, ds);
    expect_same("smooth inverses", si, dsi);
    expect_same("smoothed cast y", y, dy);
    if (fl_f32_bits(gam) != fl_f32_bits(am) || !same_cast_stats(k, amax, dk, dam)) {
        fprintf(stderr, "FAIL smooth R=%zu C=%zu axis %d: smoothed amax %a / %a, or the cast's counts or amax differ\n", R,
                C, axis, gam, am);
        exit(1);
    }
    for (void *p : { (void *)dx, (void *)ds, (void *)dsi, (void *)dy, (void *)dam, (void *)ws, (void *)dk })
        cudaFree(p);
    cases++;
}

// The fake-quantising cast (the GPU step's FP8 recipes): values, counts and amax as the twin's; bf16 too.
static void case_cast_fq(fl_format fmt, int gaudi2, int nosat, int sr, float s)
{
    const size_t n = (size_t)(0x100000000ull / 65521) + 5;
    std::vector<float> x(n), y(n);
    for (size_t i = 0; i + 5 < n; i++)
        x[i] = fl_f32_from_bits((uint32_t)(i * 65521u));
    const float sp[5] = { 0.0f, INFINITY, NAN, 464.0f, 0x1p-17f };
    memcpy(&x[n - 5], sp, sizeof sp);
    const fl_cast_fmt f = { fmt, gaudi2, nosat, sr, 0xC0FFEEull, 0 };
    fl_cast_counts k = { 0, 0, 0, 0, 0, 0 };
    float amax = 0.0f;
    float *dx = dev_copy(x), *dam = dev_scalar(0.0f), *dy;
    unsigned long long *dk, hk[6];
    CK(cudaMalloc(&dy, n * sizeof(float)));
    CK(cudaMalloc(&dk, sizeof hk));
    CK(cudaMemset(dk, 0, sizeof hk));
    if (fl_cast_fq(y.data(), &amax, &k, x.data(), n, s, 1.0f / s, &f, 77) ||
        fl_cuda_cast_fq(dy, dam, dk, dx, n, s, 1.0f / s, &f, 77, nullptr)) {
        fprintf(stderr, "FAIL cast_fq: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("cast_fq y", y, dy); // (any NaN matches any NaN: the device's multiply gives the canonical one)
    if (!same_cast_stats(k, amax, dk, dam)) {
        fprintf(stderr, "FAIL cast_fq %s nosat %d sr %d: counts or amax differ\n", fl_format_name(fmt), nosat, sr);
        exit(1);
    }
    cudaFree(dx);
    cudaFree(dam);
    cudaFree(dy);
    cudaFree(dk);
    cases++;
}

static void case_embed(size_t B, size_t T, size_t C, uint32_t V)
{
    const size_t N = B * T;
    std::vector<int> tok(N), toks(N), starts(N + 1), rows(N);
    for (size_t i = 0; i < N; i++)
        tok[i] = (int)(rnd() * rnd() * V) % (int)V; /* skewed: frequent small tokens, some never seen */
    std::vector<float> wte(V * C), wpe(T * C), dx(N * C), x(N * C), gw(V * C), gp(T * C);
    for (auto *v : { &wte, &wpe, &dx, &gw, &gp })
        for (float &e : *v)
            e = (float)(rnd() - 0.5);
    size_t ntok = 0;
    if (fl_embed_index(toks.data(), starts.data(), rows.data(), &ntok, tok.data(), N, V)) {
        fprintf(stderr, "FAIL embed: index\n");
        exit(1);
    }
    int *dtok, *dtoks, *dstarts, *drows;
    CK(cudaMalloc(&dtok, N * sizeof(int)));
    CK(cudaMalloc(&dtoks, N * sizeof(int)));
    CK(cudaMalloc(&dstarts, (N + 1) * sizeof(int)));
    CK(cudaMalloc(&drows, N * sizeof(int)));
    CK(cudaMemcpy(dtok, tok.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dtoks, toks.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dstarts, starts.data(), (N + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(drows, rows.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    float *dwte = dev_copy(wte), *dwpe = dev_copy(wpe), *ddx = dev_copy(dx), *dx_ = dev_copy(x), *dgw = dev_copy(gw),
          *dgp = dev_copy(gp);
    if (fl_embed_fwd(x.data(), tok.data(), wte.data(), wpe.data(), N, T, C) ||
        fl_cuda_embed_fwd(dx_, dtok, dwte, dwpe, N, T, C, nullptr) ||
        fl_embed_bwd(gw.data(), gp.data(), dx.data(), tok.data(), N, T, C) ||
        fl_cuda_embed_bwd(dgw, dgp, ddx, dtoks, dstarts, drows, ntok, N, T, C, nullptr)) {
        fprintf(stderr, "FAIL embed: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("embed x", x, dx_);
    expect_same("embed gwte", gw, dgw);
    expect_same("embed gwpe", gp, dgp);
    for (float *p : { dwte, dwpe, ddx, dx_, dgw, dgp })
        cudaFree(p);
    for (int *p : { dtok, dtoks, dstarts, drows })
        cudaFree(p);
    cases++;
}

static void case_xent(size_t N, size_t V)
{
    std::vector<float> z(N * V);
    std::vector<int> tgt(N);
    std::vector<double> loss(N), dloss(N);
    for (size_t i = 0; i < N * V; i++)
        z[i] = (float)((rnd() - 0.5) * (i / V % 5 == 2 ? 300.0 : 10.0));
    for (size_t i = 0; i < N; i++)
        tgt[i] = (int)(rnd() * V) % (int)V;
    uint64_t tab[32];
    fl_expf_table(tab);
    float *dz = dev_copy(z);
    int *dt;
    double *dl;
    CK(cudaMalloc(&dt, N * sizeof(int)));
    CK(cudaMalloc(&dl, N * sizeof(double)));
    CK(cudaMemcpy(dt, tgt.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    if (fl_xent_fwd(z.data(), loss.data(), tgt.data(), N, V, tab) || fl_cuda_xent_fwd(dz, dl, dt, N, V, tab, nullptr)) {
        fprintf(stderr, "FAIL xent: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("xent p", z, dz);
    CK(cudaMemcpy(dloss.data(), dl, N * sizeof(double), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < N; i++)
        if (!(loss[i] == dloss[i] || fabs(loss[i] - dloss[i]) <= 4 * 0x1p-52 * fabs(loss[i]))) {
            fprintf(stderr, "FAIL xent loss row %zu: cpu %.17g gpu %.17g\n", i, loss[i], dloss[i]);
            exit(1);
        }
    if (fl_xent_bwd(z.data(), tgt.data(), N, V) || fl_cuda_xent_bwd(dz, dt, N, V, nullptr)) {
        fprintf(stderr, "FAIL xent bwd: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("xent dlogits", z, dz);
    cudaFree(dz);
    cudaFree(dt);
    cudaFree(dl);
    cases++;
}

static void case_attn_softmax(size_t R, size_t T)
{
    std::vector<float> S(R * T), dP(R * T), P(R * T), dS(R * T);
    for (size_t i = 0; i < R * T; i++) {
        S[i] = (float)((rnd() - 0.5) * (i / T % 11 == 4 ? 500.0 : 20.0));
        dP[i] = (float)(rnd() - 0.5);
    }
    uint64_t tab[32];
    fl_expf_table(tab);
    const float scale = 0.125f;
    float *dS_ = dev_copy(S), *ddP = dev_copy(dP), *dPr = dev_copy(P), *ddS = dev_copy(dS);
    if (fl_attn_softmax_fwd(P.data(), S.data(), R, T, scale, tab) ||
        fl_cuda_attn_softmax_fwd(dPr, dS_, R, T, scale, tab, nullptr) ||
        fl_attn_softmax_bwd(dS.data(), P.data(), dP.data(), R, T, scale) ||
        fl_cuda_attn_softmax_bwd(ddS, dPr, ddP, R, T, scale, nullptr)) {
        fprintf(stderr, "FAIL attn softmax: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("attn softmax P", P, dPr);
    expect_same("attn softmax dS", dS, ddS);
    for (float *p : { dS_, ddP, dPr, ddS })
        cudaFree(p);
    cases++;
}

// The GPU step's sums, adds and relu (kernels/step_ops.cu) against their twins, bit for bit.
static void case_step_ops(size_t n)
{
    std::vector<float> x(n), y(n), dy(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((rnd() - 0.5) * (i % 97 == 5 ? 1e20 : 3.0));
        y[i] = (float)(rnd() - 0.5);
        dy[i] = (float)(rnd() - 0.5);
    }
    x[n / 2] = -0.0f;
    if (n > 7)
        x[7] = -INFINITY;
    float *dx = dev_copy(x), *dyy = dev_copy(y), *ddy = dev_copy(dy), *dh = dev_copy(y), *ddx = dev_copy(y);
    double *ws;
    CK(cudaMalloc(&ws, (fl_sumsq_chunks(n) + n + 1) * sizeof(double)));
    double gpu = -1.0;
    if (fl_cuda_sumsq(&gpu, dx, n, ws, nullptr) || fl_cuda_add_f32(dyy, dx, n, nullptr) ||
        fl_cuda_relu_fwd(dh, dx, n, nullptr) || fl_cuda_relu_bwd(ddx, dx, ddy, n, nullptr)) {
        fprintf(stderr, "FAIL step ops: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    const double cpu = fl_sumsq(x.data(), n);
    if (memcmp(&cpu, &gpu, sizeof cpu)) {
        fprintf(stderr, "FAIL sumsq n=%zu cpu=%a gpu=%a\n", n, cpu, gpu);
        exit(1);
    }
    std::vector<float> add(n), h(n), d(n);
    for (size_t i = 0; i < n; i++) {
        add[i] = y[i] + x[i];
        h[i] = fl_relu_f32(x[i]);
        d[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    }
    expect_same("add", add, dyy);
    for (size_t C : { (size_t)1, (size_t)77, n }) { // the FFN telemetry: rows of C (the tail ignored)
        const size_t R = n / C;
        float am = -1, rm = -1, gam = -2, grm = -2;
        if (fl_amax_rms(&am, &rm, x.data(), R, C) || fl_cuda_amax_rms(&gam, &grm, dx, R, C, ws, nullptr)) {
            fprintf(stderr, "FAIL amax_rms: a launcher returned an error\n");
            exit(1);
        }
        if (memcmp(&am, &gam, 4) || memcmp(&rm, &grm, 4)) {
            fprintf(stderr, "FAIL amax_rms R=%zu C=%zu cpu %a %a gpu %a %a\n", R, C, am, rm, gam, grm);
            exit(1);
        }
    }
    expect_same("relu fwd", h, dh);
    expect_same("relu bwd", d, ddx);
    // SwiGLU on float32 planes (the step's) against the twin with float32 views: g = x, u = y, dh = dy
    std::vector<float> sh(n), sdg(n), sdu(n);
    const fl_kin kg = { x.data(), FL_FMT_FP32, nullptr }, ku = { y.data(), FL_FMT_FP32, nullptr },
                 kd = { dy.data(), FL_FMT_FP32, nullptr };
    float *gh = dev_copy(sh), *gdg = dev_copy(sh), *gdu = dev_copy(sh), *gu = dev_copy(y);
    if (fl_swiglu_fwd((fl_kout){ sh.data(), FL_FMT_FP32, nullptr, nullptr }, kg, ku, n) ||
        fl_swiglu_bwd((fl_kout){ sdg.data(), FL_FMT_FP32, nullptr, nullptr }, (fl_kout){ sdu.data(), FL_FMT_FP32, nullptr, nullptr },
                      kg, ku, kd, n) ||
        fl_cuda_swiglu_f32_fwd(gh, dx, gu, n, nullptr) || fl_cuda_swiglu_f32_bwd(gdg, gdu, dx, gu, ddy, n, nullptr)) {
        fprintf(stderr, "FAIL swiglu f32: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("swiglu f32 fwd", sh, gh);
    expect_same("swiglu f32 dg", sdg, gdg);
    expect_same("swiglu f32 du", sdu, gdu);
    for (float *p : { gh, gdg, gdu, gu })
        cudaFree(p);
    // the per-channel maxima (--chan-every): h = x, g = y + x (dyy after the add), u = dy as (R, 77) planes, with the
    // huge values, -Inf and -0 of x; bit for bit (there is no NaN)
    {
        const size_t Fc = 77, Rc = n / Fc;
        std::vector<float> am(Fc), gm(Fc), um(Fc), dam(Fc), dgm(Fc), dum(Fc);
        unsigned *wsu;
        CK(cudaMalloc(&wsu, 3 * Fc * sizeof(unsigned)));
        fl_chan_colmax(am.data(), gm.data(), um.data(), x.data(), add.data(), dy.data(), Rc, Fc);
        if (Rc && fl_cuda_chan_colmax(dam.data(), dgm.data(), dum.data(), dx, dyy, ddy, Rc, Fc, wsu, nullptr)) {
            fprintf(stderr, "FAIL chan_colmax: the launcher returned an error\n");
            exit(1);
        }
        for (size_t i = 0; Rc && i < Fc; i++)
            if (memcmp(&am[i], &dam[i], 4) || memcmp(&gm[i], &dgm[i], 4) || memcmp(&um[i], &dum[i], 4)) {
                fprintf(stderr, "FAIL chan_colmax column %zu: cpu %a %a %a gpu %a %a %a\n", i, am[i], gm[i], um[i], dam[i],
                        dgm[i], dum[i]);
                exit(1);
            }
        cudaFree(wsu);
    }
    // the byte transpose of --fp8-gemm's codes: (R, C) -> (C, R), with R and C not multiples of the 32 x 32 tiles
    {
        const size_t Rt = 77, Ct = n / Rt > 0 ? (n / Rt < 300 ? n / Rt : 300) : 1;
        std::vector<uint8_t> src(Rt * Ct), want(Rt * Ct), got(Rt * Ct);
        for (size_t i = 0; i < src.size(); i++)
            src[i] = (uint8_t)(i * 37 + 11);
        fl_transpose_u8(want.data(), src.data(), Rt, Ct);
        uint8_t *ds8, *dd8;
        CK(cudaMalloc(&ds8, src.size()));
        CK(cudaMalloc(&dd8, src.size()));
        CK(cudaMemcpy(ds8, src.data(), src.size(), cudaMemcpyHostToDevice));
        if (fl_cuda_transpose_u8(dd8, ds8, Rt, Ct, nullptr)) {
            fprintf(stderr, "FAIL transpose_u8: the launcher returned an error\n");
            exit(1);
        }
        CK(cudaMemcpy(got.data(), dd8, got.size(), cudaMemcpyDeviceToHost));
        if (memcmp(want.data(), got.data(), got.size())) {
            fprintf(stderr, "FAIL transpose_u8 (%zu, %zu)\n", Rt, Ct);
            exit(1);
        }
        cudaFree(ds8);
        cudaFree(dd8);
    }
    // GELU on float32 (the step's): fl_gelu_f32 and dy * fl_gelu_grad_f32(x, fl_expf_glibc(-x^2/2)), x from
    // [-24, 24] here with every 97th element huge, and -0, -Inf
    uint64_t tab[32];
    fl_expf_table(tab);
    std::vector<float> xg(n), gf(n), gb(n);
    for (size_t i = 0; i < n; i++) {
        xg[i] = x[i] * 8.0f;
        gf[i] = fl_gelu_f32(xg[i]);
        gb[i] = dy[i] * fl_gelu_grad_f32(xg[i], fl_expf_glibc(-0.5f * xg[i] * xg[i], tab));
    }
    float *dxg = dev_copy(xg), *dgf = dev_copy(sh), *dgb = dev_copy(sh);
    if (fl_cuda_gelu_fwd(dgf, dxg, n, nullptr) || fl_cuda_gelu_bwd(dgb, dxg, ddy, n, tab, nullptr)) {
        fprintf(stderr, "FAIL gelu f32: a launcher returned an error\n");
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    expect_same("gelu f32 fwd", gf, dgf);
    expect_same("gelu f32 bwd", gb, dgb);
    for (float *p : { dxg, dgf, dgb })
        cudaFree(p);
    const std::vector<float> nan3 = { NAN, -2.0f, 1.0f }; // NaN elements do not count in amax
    float *dn = dev_copy(nan3), gnan = -1.0f;
    if (fl_cuda_amax_rms(&gnan, nullptr, dn, 1, 3, ws, nullptr) || gnan != 2.0f) {
        fprintf(stderr, "FAIL amax over {NaN, -2, 1}: %a\n", gnan);
        exit(1);
    }
    for (float *p : { dx, dyy, ddy, dh, ddx, dn })
        cudaFree(p);
    cudaFree(ws);
    cases++;
}

// The step's row-major strided-batched GEMM on cuBLASLt against a double-precision product: within the
// bound of any order of fp32 sums, |d| <= gamma_K sum_k |a_k b_k| (+ beta C's rounding), per element.
static void case_gemm_rm(int ta, int tb, fl_format f, size_t M, size_t N, size_t K, size_t batch, float beta)
{
    // padded leading dimensions and batch strides: odd ones for fp32; for bf16 multiples of 8 elements
    // (16 bytes, what the step's bf16 operands have), since cuBLASLt need not take 2-byte aligned rows
    const size_t q = f == FL_FMT_BF16 ? 8 : 1;
    auto up = [q](size_t x) { return (x + q - 1) / q * q; };
    const size_t lda = up(ta ? M : K) + 3 * q, ldb = up(tb ? K : N) + 5 * q, ldc = N + 2;
    const size_t ra = ta ? K : M, rb = tb ? N : K;
    const size_t sa = ra * lda + 7 * q, sb = rb * ldb + q, sc = M * ldc + 4; // (multiples of q: lda, ldb are)
    std::vector<float> a(batch * sa), b(batch * sb), c(batch * sc);
    for (auto &v : a) v = (float)(rnd() - 0.5);
    for (auto &v : b) v = (float)(rnd() - 0.5);
    for (auto &v : c) v = (float)(rnd() - 0.5);
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    if (f == FL_FMT_BF16) { // the operands as bf16 codes, their values as the reference reads them
        fl_convert_from_f32(a16.data(), FL_FMT_BF16, a.data(), a.size(), FL_RND_NE, FL_OVF_NOSATURATE, 0, 0);
        fl_convert_from_f32(b16.data(), FL_FMT_BF16, b.data(), b.size(), FL_RND_NE, FL_OVF_NOSATURATE, 0, 0);
        fl_convert_to_f32(a.data(), FL_FMT_BF16, a16.data(), a.size());
        fl_convert_to_f32(b.data(), FL_FMT_BF16, b16.data(), b.size());
    }
    const size_t es = f == FL_FMT_BF16 ? 2 : 4;
    void *da, *db;
    CK(cudaMalloc(&da, a.size() * es));
    CK(cudaMalloc(&db, b.size() * es));
    CK(cudaMemcpy(da, f == FL_FMT_BF16 ? (const void *)a16.data() : a.data(), a.size() * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, f == FL_FMT_BF16 ? (const void *)b16.data() : b.data(), b.size() * es, cudaMemcpyHostToDevice));
    float *dc = dev_copy(c);
    void *lt = fl_cuda_lt_new(), *ws;
    CK(cudaMalloc(&ws, 32u << 20));
    const fl_gemm_rm g = { ta, tb, M, N, K, da, f, lda, sa, db, f, ldb, sb, beta, dc, ldc, sc, batch };
    if (!lt || fl_cuda_gemm_rm(&g, lt, ws, 32u << 20, nullptr)) {
        fprintf(stderr, "FAIL gemm_rm: the launcher returned an error\n");
        exit(1);
    }
    std::vector<float> back(c.size());
    CK(cudaMemcpy(back.data(), dc, back.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const double u = 0x1p-24, gam = (K + 2) * u / (1 - (K + 2) * u);
    for (size_t q = 0; q < batch; q++)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) {
                double s = beta ? (double)beta * c[q * sc + i * ldc + j] : 0.0, m = fabs(s);
                for (size_t k = 0; k < K; k++) {
                    const double x = a[q * sa + (ta ? k * lda + i : i * lda + k)], w = b[q * sb + (tb ? j * ldb + k : k * ldb + j)];
                    s += x * w;
                    m += fabs(x * w);
                }
                const double got = back[q * sc + i * ldc + j];
                if (!(fabs(got - s) <= gam * m)) {
                    fprintf(stderr, "FAIL gemm_rm ta=%d tb=%d fmt=%d (%zu, %zu, %zu) x%zu at [%zu][%zu][%zu]: %a, exact %a, bound %a\n",
                            ta, tb, (int)f, M, N, K, batch, q, i, j, got, s, gam * m);
                    exit(1);
                }
            }
    for (size_t q = 0; q < batch; q++) // the gaps between the problems' rows are untouched
        for (size_t i = 0; i < M; i++)
            for (size_t j = N; j < ldc && q * sc + i * ldc + j < c.size(); j++)
                if (memcmp(&back[q * sc + i * ldc + j], &c[q * sc + i * ldc + j], 4)) {
                    fprintf(stderr, "FAIL gemm_rm: wrote outside C at [%zu][%zu][%zu]\n", q, i, j);
                    exit(1);
                }
    // through a plan cache (the step's path): planned at the first call, found at the second; the same
    // bytes as the uncached call each time
    void *plans = fl_cuda_gemm_plans_new();
    for (int rep = 0; rep < 2; rep++) {
        std::vector<float> again(c.size());
        CK(cudaMemcpy(dc, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));
        if (!plans || fl_cuda_gemm_rm_cached(&g, plans, lt, ws, 32u << 20, nullptr)) {
            fprintf(stderr, "FAIL gemm_rm: the cached launcher returned an error\n");
            exit(1);
        }
        CK(cudaMemcpy(again.data(), dc, again.size() * sizeof(float), cudaMemcpyDeviceToHost));
        if (fl_cuda_gemm_plans_count(plans) != 1) {
            fprintf(stderr, "FAIL gemm_rm: %d plans kept after call %d of one problem (the second must find the first)\n",
                    fl_cuda_gemm_plans_count(plans), rep);
            exit(1);
        }
        if (memcmp(again.data(), back.data(), back.size() * sizeof(float))) {
            fprintf(stderr, "FAIL gemm_rm ta=%d tb=%d fmt=%d (%zu, %zu, %zu) x%zu: call %d through the plan cache "
                            "differs from the uncached call\n", ta, tb, (int)f, M, N, K, batch, rep);
            exit(1);
        }
    }
    fl_cuda_gemm_plans_free(plans);
    fl_cuda_lt_free(lt);
    cudaFree(ws);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cases++;
}

int main()
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (the kernels compiled; run on a machine with one: make gpu-test)\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gpu-test: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    test_registry();
    // the launchers' options over every instantiated format (forward data bf16 / e4m3, gradients bf16 / e5m2)
    const size_t big = 3 * FL_TILE + 13; // several tiles and a scalar tail
    for (int order = 2; order <= 4; order++)
        for (fl_format fi : { FL_FMT_BF16, FL_FMT_E4M3 })
            for (fl_format fo : { FL_FMT_BF16, FL_FMT_E4M3 }) {
                case_polyrelu(order, fi, fo, big, 0);
                case_polyrelu(order, fi, fo, 1000, 2); // misaligned: scalar path, same order
            }
    for (int order = 2; order <= 4; order++) { // float32 I/O: the GPU training step's
        case_polyrelu(order, FL_FMT_FP32, FL_FMT_FP32, big, 0);
        case_polyrelu(order, FL_FMT_FP32, FL_FMT_FP32, 1000, 4); // 4 bytes: not 16-byte aligned
    }
    printf("  polyrelu (scales, amax, coefficient gradients; float32 I/O): ok\n");
    for (int order = 2; order <= 4; order++)
        for (fl_format fi : { FL_FMT_BF16, FL_FMT_E4M3 })
            for (fl_format fo : { FL_FMT_BF16, FL_FMT_E4M3 }) {
                case_polynorm(order, fi, fo, 33, 4096, 0);
                case_polynorm(order, fi, fo, 5, 4101, 0); // H % 16 != 0
                case_polynorm(order, fi, fo, 7, 16, 2);   // misaligned
                case_polynorm(order, fi, fo, 3, 8192, 0); // aligned, longer than one vector per thread
                case_polynorm(order, fi, fo, 9, 4000, 0); // aligned, some threads without a vector
            }
    for (int order = 2; order <= 4; order++) { // float32 I/O: the GPU training step's (never kept in registers)
        case_polynorm(order, FL_FMT_FP32, FL_FMT_FP32, 33, 768, 0);
        case_polynorm(order, FL_FMT_FP32, FL_FMT_FP32, 5, 4101, 0);
        case_polynorm(order, FL_FMT_FP32, FL_FMT_FP32, 7, 16, 4); // 4 bytes: not 16-byte aligned
        case_polynorm(order, FL_FMT_FP32, FL_FMT_FP32, 3, 8192, 0);
    }
    printf("  polynorm (scales, amax, coefficient gradients; float32 I/O): ok\n");
    for (fl_format fi : { FL_FMT_BF16, FL_FMT_E4M3 })
        for (fl_format fo : { FL_FMT_BF16, FL_FMT_E4M3 })
            for (fl_format fg : { FL_FMT_BF16, FL_FMT_E5M2 }) {
                case_swiglu(fi, fo, fg, 64, 4096 + 32, 0);
                case_swiglu(fi, fo, fg, 9, 1001, 0);
                case_swiglu(fi, fo, fg, 5, 64, 2);
            }
    printf("  swiglu, smooth-swiglu (scales, amax, computed smoothing scales, both axes): ok\n");
    for (fl_format fd : { FL_FMT_FP32, FL_FMT_BF16, FL_FMT_E4M3 })
        case_gemm(FL_FMT_E4M3, FL_FMT_E4M3, fd, 0, 256, 128, 1024);
    case_gemm(FL_FMT_E5M2, FL_FMT_E4M3, FL_FMT_BF16, 0, 128, 256, 512);
    case_gemm(FL_FMT_E4M3, FL_FMT_E4M3, FL_FMT_FP32, 1, 128, 128, 4096);
    // the step's three GEMMs of a Linear (width 64, 192 outputs, 1024 tokens): forward, dgrad on e5m2
    // gradients, wgrad accumulating; D aligned 256 and 16
    for (size_t doff : { (size_t)0, (size_t)16 }) {
        case_gemm_step(FL_FMT_E4M3, FL_FMT_E4M3, 192, 1024, 64, 0.0f, doff);
        case_gemm_step(FL_FMT_E4M3, FL_FMT_E5M2, 64, 1024, 192, 1.0f, doff);
        case_gemm_step(FL_FMT_E4M3, FL_FMT_E5M2, 64, 192, 1024, 1.0f, doff);
    }
    printf("  gemm as the GPU step calls it (fp32 D, scales in one allocation, beta 0 and 1 into D, D aligned 256 and 16): ok\n");
    case_adamw(1000003);
    case_adamw(17);
    printf("  adamw (p, m, v; Inf / NaN / zero gradients): ok\n");
    case_rmsnorm(16 * 1024, 768, 0);
    case_rmsnorm(1000, 200, 1);
    case_rmsnorm(33, 31, 0);
    case_rmsnorm(40, 64, 1, 1);  // misaligned: the outputs' scalar path with C % 4 == 0
    case_rmsnorm(70000, 8, 1);   // more rows than a grid's y (65535)
    printf("  rmsnorm forward and backward (accumulating or not, overflowing rows, ragged shapes, misaligned, > 65535 rows): ok\n");
    case_ffn_wsums(12, 2048, 768, 1); // the 124m preset's SwiGLU
    case_ffn_wsums(3, 33, 70, 1);
    case_ffn_wsums(2, 96, 32, 0);
    case_ffn_wsums(1, 5, 1, 1);
    printf("  the FFN weight sums of the alignment telemetry (gated or not, ragged, zero and huge rows): ok\n");
    for (int sr = 0; sr <= 1; sr++) {
        for (int nosat = 0; nosat <= 1; nosat++) {
            case_cast_fp8(FL_FMT_E4M3, 0, nosat, sr);
            case_cast_fp8(FL_FMT_E5M2, 0, nosat, sr);
        }
        case_cast_fp8(FL_FMT_E4M3, 1, 0, sr);
    }
    for (int sr = 0; sr <= 1; sr++) {
        case_cast_fq(FL_FMT_E4M3, 0, 0, sr, 0.75f);
        case_cast_fq(FL_FMT_E5M2, 0, 1, sr, 0x1p-3f);
    }
    case_cast_fq(FL_FMT_BF16, 0, 0, 0, 1.0f);
    case_cast_fq(FL_FMT_E4M3, 1, 0, 0, 0x1p-4f); // Gaudi2's e4m3 (paper-gaudi2's forward casts)
    for (int axis = 0; axis <= 1; axis++) {
        case_smooth(1000, 2048, axis);
        case_smooth(333, 77, axis);
    }
    printf("  fp8 cast (codes, counts, amax; e4m3, e5m2, Gaudi2 e4m3; RNE and SR), and as fake-quantised values (bf16, "
           "Gaudi2 too), smoothed per channel and per token with the smoothing scales: ok\n");
    case_embed(4, 1024, 768, 5003);
    case_embed(3, 7, 20, 50);
    printf("  embeddings forward and backward (repeated and absent tokens): ok\n");
    case_xent(1024, 50257);
    case_xent(37, 300);
    printf("  softmax cross-entropy (probabilities, dlogits; losses within 4 ulps): ok\n");
    case_attn_softmax(4 * 12 * 1024, 1024);
    case_attn_softmax(2 * 3 * 37, 37);
    case_attn_softmax(2 * 2 * 201, 201);   // an odd number of rows per backward block
    case_attn_softmax(2 * 1 * 1025, 1025); // longer than the row kernels take (shared memory per warp)
    printf("  causal attention softmax forward and backward: ok\n");
    case_heads_copy(16, 1024, 12, 64, 3 * 768); // the 124m preset's qkv rows
    case_heads_copy(3, 5, 4, 6, 24);            // the attention output's rows
    case_heads_copy(2, 7, 3, 5, 3 * 15 + 1);    // a row longer than its heads
    printf("  the attention's head layout copies, both ways: ok\n");
    case_step_ops(3 * FL_SUMSQ_CHUNK + 77);
    case_step_ops(5);
    printf("  the step's gradient sum of squares (bit for bit in double), FFN amax and rms, residual add, relu, gelu, "
           "float32 SwiGLU: ok\n");
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (fl_format f : { FL_FMT_FP32, FL_FMT_BF16 }) {
                case_gemm_rm(ta, tb, f, 33, 17, 64, 3, 0.0f);
                case_gemm_rm(ta, tb, f, 64, 48, 96, 1, 1.0f);
            }
    printf("  the step's row-major strided-batched GEMM (both transposes, fp32 and bf16, beta 0 and 1) within "
           "gamma_K, through a plan cache the same bytes: ok\n");
    printf("gpu-test: %d cases passed (kernels bit-identical to their CPU twins; ULP reports: the twins', "
           "tests/test_kernels_twins and fp8lab ulp --impl)\n", cases);
    return 0;
}
