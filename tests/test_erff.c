/* test_erff.c — fl_erff (kernels/erff.h) is erf correctly rounded to float32.
 *
 * For every float a in [0, 4) (about 1.08e9, some 10 s on two cores; a stride with STRIDE):
 *   1. the double that fl_erff rounds, y = fl_erf_abs_d(a), is within 2^-50 (relative) of erfl(a), the
 *      libm's erf in x87 extended precision (64-bit significand; its error is taken to be below 2^-60,
 *      glibc documents 1-2 ulp of that format);
 *   2. if y moved by 2^-40 either way rounds to the same float, erf(a) (within 2^-50 + 2^-60 of y)
 *      rounds to it too, and fl_erff(a) is correct; otherwise the input is judged by MPFR (erf at 160
 *      bits, rounded to float by mpfr_get_flt), and it must agree;
 *   3. every 4096th input checked is also judged by MPFR (a check on the erfl assumption).
 * Then: odd symmetry bit for bit on the same inputs, the special values (±0, ±Inf, NaN, |x| >= 4), and
 * fl_gelu_f32 against the libm formula where glibc's erff agrees, and the training harness's GELU
 * (ffn_act.c) against what the GPU step's kernels compute (fl_gelu_f32; dy * fl_gelu_grad_f32 with
 * fl_expf_glibc), bit for bit.  It also counts the inputs where the
 * libm's erff differs (a report: glibc before 2.41 is not correctly rounded; from 2.41 it should be 0).
 * Usage: test_erff [STRIDE]   (default 1: every input) */
#include "check.h"
#include "erff.h"
#include "convert.h"
#include "convert_simd.h"
#include "train/ffn_act.h"
#include "train/model_simd.h"
#include "train_step.h"

#include <math.h>
#include <mpfr.h>
#include <stdint.h>

static float mpfr_erff(float a)
{
    mpfr_t t;
    mpfr_init2(t, 160);
    mpfr_set_flt(t, a, MPFR_RNDN);
    mpfr_erf(t, t, MPFR_RNDN);
    const float r = mpfr_get_flt(t, MPFR_RNDN);
    mpfr_clear(t);
    mpfr_free_cache();
    return r;
}

static uint32_t bits(float f) { return fl_f32_bits(f); }
/* equal bits, or both NaN (a NaN's payload and sign follow operand order, which compilers may swap) */
static int same(float a, float b) { return bits(a) == bits(b) || (fl_isnanf(a) && fl_isnanf(b)); }

int main(int argc, char **argv)
{
#if defined(__SANITIZE_ADDRESS__)
    const uint32_t def_stride = 17; /* the sanitizer build checks memory, the plain build the numbers: 17x less */
#else
    const uint32_t def_stride = 1;
#endif
    const uint32_t stride = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : def_stride;
    CHECK(stride >= 1, "stride must be >= 1");
    const uint32_t end = 0x40800000u; /* 4.0f */
    const double window = 0x1p-40;
    double worst = 0;
    uint32_t worst_at = 0;
    long n = 0, flagged = 0, sampled = 0, libm_differs = 0, bad = 0;
    uint32_t bad_at = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : n, flagged, sampled, libm_differs, bad)
    for (uint32_t blk = 0; blk < end / (1u << 20); blk++) {
        double w = 0;
        uint32_t wat = 0;
        for (uint32_t u = blk << 20; u < (blk + 1) << 20; u++) {
            if ((u % stride) && u != 0x3E000000u && u != 0x3DFFFFFFu && u != 0x407FFFFFu && u != 1u)
                continue; /* the stride, plus the ends of piece 0 and of the range, and the smallest float */
            const float a = fl_f32_from_bits(u);
            const double y = fl_erf_abs_d(a);
            const float r = fl_erff(a);
            n++;
            if (u) {
                const long double z = erfl((long double)a);
                const double rel = (double)fabsl(((long double)y - z) / z);
                if (rel > w)
                    w = rel, wat = u;
            }
            float want = (float)y;
            const int near = (float)(y * (1 - window)) != (float)(y * (1 + window));
            if (near || (n & 4095) == 0) {
                want = mpfr_erff(a);
                flagged += near, sampled += !near;
            }
            if (bits(r) != bits(want) || bits(fl_erff(-a)) != (bits(r) | 0x80000000u)) {
                bad++;
#pragma omp critical
                bad_at = u;
            }
            libm_differs += bits(erff(a)) != bits(r);
        }
#pragma omp critical
        if (w > worst)
            worst = w, worst_at = wat;
    }
    printf("fl_erff: %ld floats in [0, 4) (stride %u): double before rounding within 2^%.2f of erfl (worst "
           "at %a); %ld near a rounding boundary and %ld others judged by MPFR; %ld misrounded; the libm's "
           "erff differs on %ld (%.3f%%)\n",
           n, stride, log2(worst), fl_f32_from_bits(worst_at), flagged, sampled, bad, libm_differs,
           100.0 * (double)libm_differs / (double)n);
    CHECK(worst < 0x1p-50, "relative error 2^%.2f at a = %a (0x%08x) exceeds 2^-50", log2(worst),
          fl_f32_from_bits(worst_at), worst_at);
    CHECK(bad == 0, "%ld inputs misrounded or not odd, one at a = %a (0x%08x): fl_erff %a, MPFR %a", bad,
          fl_f32_from_bits(bad_at), bad_at, fl_erff(fl_f32_from_bits(bad_at)), mpfr_erff(fl_f32_from_bits(bad_at)));

    /* special values */
    CHECK(bits(fl_erff(0.0f)) == 0u && bits(fl_erff(-0.0f)) == 0x80000000u, "erf(±0) must be ±0");
    CHECK(fl_erff(INFINITY) == 1.0f && fl_erff(-INFINITY) == -1.0f, "erf(±Inf) must be ±1");
    CHECK(fl_erff(4.0f) == 1.0f && fl_erff(-0x1.fffffep127f) == -1.0f, "erf(|x| >= 4) must be ±1");
    CHECK(mpfr_erff(4.0f) == 1.0f && mpfr_erff(0x1.fffffep1f) == fl_erff(0x1.fffffep1f), "erf near 4");
    const float qnan = fl_f32_from_bits(0x7FC00123u), snan_neg = fl_f32_from_bits(0xFF800001u);
    CHECK(fl_isnanf(fl_erff(qnan)) && fl_isnanf(fl_erff(snan_neg)), "erf(NaN) must be NaN");
    CHECK(fl_erff(0x1p-149f) == mpfr_erff(0x1p-149f) && fl_erff(0x1.fffffcp-127f) == mpfr_erff(0x1.fffffcp-127f),
          "subnormal inputs");

    /* GELU: the harness's formula; equal to it wherever the libm's erff agrees with fl_erff */
    long gelu_n = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 65537) {
        const float x = fl_f32_from_bits((uint32_t)u), t = x * FL_GELU_RSQRT2;
        if (fl_isnanf(x) || bits(erff(t)) != bits(fl_erff(t)))
            continue;
        gelu_n++;
        const float want = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
        const float e = expf(-0.5f * x * x);
        const float dwant = 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * e;
        CHECK(bits(fl_gelu_f32(x)) == bits(want), "gelu(%a): %a, the formula with erff %a", x, fl_gelu_f32(x), want);
        CHECK(bits(fl_gelu_grad_f32(x, e)) == bits(dwant), "gelu'(%a): %a, want %a", x, fl_gelu_grad_f32(x, e), dwant);
    }
    CHECK(gelu_n > 60000, "GELU compared on %ld inputs only", gelu_n);

    /* the harness's vector span (erf_simd.c) = fl_erff on every float32 pattern, at each vector level the CPU has */
    for (int isa = FL_ISA_AVX2; isa <= fl_cpu_isa() && isa <= FL_ISA_AVX512; isa++) {
        if (fl_convert_set_isa(isa) != isa)
            continue;
        long differ = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : differ)
        for (uint32_t blk = 0; blk < (1u << 16); blk += stride) {
            float xs[1u << 16], ys[1u << 16];
            for (uint32_t j = 0; j < (1u << 16); j++)
                xs[j] = fl_f32_from_bits((blk << 16) | j);
            const uint32_t m = (1u << 16) - (blk & 7); /* spans ending in tails of every length below 8 */
            model_erff_span(ys, xs, m);
            for (uint32_t j = 0; j < m; j++)
                differ += !same(ys[j], fl_erff(xs[j]));
        }
        char over[96] = "every float32";
        if (stride > 1)
            snprintf(over, sizeof over, "the float32 patterns of every %u-th block of 2^16", stride);
        printf("  model_erff_span at %s (level %d): %ld differ from fl_erff, over %s\n",
               model_simd_isa() == FL_ISA_AVX512 ? "avx512" : model_simd_isa() == FL_ISA_AVX2 ? "avx2" : "scalar", isa,
               differ, over);
        CHECK(differ == 0, "model_erff_span differs from fl_erff on %ld inputs at level %d", differ, isa);
    }
    fl_convert_set_isa(-1);

    /* the harness's GELU forward and backward = the device kernels' element formulas (every 4099th float) */
    enum { NH = 1 << 20 };
    static float x[NH], h[NH], dh[NH], dx[NH];
    uint64_t tab[32];
    fl_expf_table(tab);
    fl_act gelu;
    CHECK(fl_act_parse(&gelu, "gelu") == 0, "gelu is an activation");
    for (int i = 0; i < NH; i++) {
        x[i] = fl_f32_from_bits((uint32_t)((uint64_t)i * 4099u));
        dh[i] = (float)((i % 7) - 3) * 0.375f;
    }
    fl_act_forward(h, x, 1, NH, gelu, NULL);
    fl_act_backward(dx, NULL, dh, x, 1, NH, gelu, NULL);
    for (int i = 0; i < NH; i++) {
        const float e = fl_expf_glibc(-0.5f * x[i] * x[i], tab);
        CHECK(same(h[i], fl_gelu_f32(x[i])), "harness gelu(%a) = %a, kernel %a", x[i], h[i], fl_gelu_f32(x[i]));
        CHECK(same(dx[i], dh[i] * fl_gelu_grad_f32(x[i], e)), "harness gelu'(%a) dy %a = %a, kernel %a", x[i],
              dh[i], dx[i], dh[i] * fl_gelu_grad_f32(x[i], e));
    }
    PASS("test_erff");
}
