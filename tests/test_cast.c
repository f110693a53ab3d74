/* test_cast.c — the cast engine (numerics/cast.h), the one path of every cast the training harness
 * makes, against the plain encoder and decoder of fl_round.h:
 *   1. RNE fake quantisation into e4m3 and e5m2 (saturating and not), bf16, Gaudi2's e4m3 and e2m1, on
 *      all 2^32 float32 inputs, at every instruction set this CPU has (scalar, AVX2, AVX-512): the
 *      output bits equal fl_decode_f32(fl_encode_f32_bits(x)) exactly (NaN included: the decoder's
 *      one NaN), and per chunk of 2^20 inputs the counts (saturated, clipped, NaN/Inf produced, NaN
 *      in, flushed to zero) and the amax equal those the definitions in cast.h give;
 *   2. fl_cast_encode_span, the encoding of the fast-accumulation GEMM path (the conversion kernels),
 *      on all 2^32 inputs against fl_encode_f32_bits (e4m3 and e5m2 both policies, bf16); with
 *      scales != 1, at every level, on part 3's inputs, spans that cross its buffer and its threads;
 *   3. every other kernel shape -- row scale, block scale, column smoothing, SR into e4m3 / e5m2 /
 *      bf16 / e2m1 -- against the reference loop (fl_cast_fmt.reference) at every instruction set, on a
 *      stride of 1021 through all float32 patterns plus the neighbourhoods of every binade edge and
 *      overflow boundary, with scales that are and are not powers of two, odd span lengths and a
 *      nonzero stream offset: bits, counts, amax and moments;
 *   4. SR is unbiased: the mean of 2^16 SR casts of values between two e5m2 neighbours is their
 *      exact value within 5 standard errors.
 * The row moments are tested in tests/test_train_recipes.c.  About two and a half minutes on 2
 * threads.  Under AddressSanitizer parts 1 and 2 take every 251st chunk and part 3 a stride of 16381.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "check.h"
#include "convert.h"
#include "convert_simd.h"
#include "fl_round.h"

#if defined(__SANITIZE_ADDRESS__)
#define CHUNK_STEP 251
#define STRIDE 16381
#else
#define CHUNK_STEP 1
#define STRIDE 1021
#endif
#define CHUNK ((size_t)1 << 20)
#define NCHUNK ((size_t)1 << 12)

/* The instruction sets the engine distinguishes, those this CPU has. */
static int levels[3], nlevels;

static void find_levels(void)
{
    static const int want[3] = { FL_ISA_SCALAR, FL_ISA_AVX2, FL_ISA_AVX512 };
    for (int i = 0; i < 3; i++)
        if (want[i] <= fl_cpu_isa())
            levels[nlevels++] = want[i];
}

static int same_bits(float a, float b) { return fl_f32_bits(a) == fl_f32_bits(b); }

/* The plain encoder over a chunk, RNE, the descriptor a constant (so that the loop vectorises). */
#define REF_LOOP(NAME, DESC, OVF)                                                                             \
    static void NAME(uint32_t *code, uint32_t u0, size_t n)                                                   \
    {                                                                                                         \
        static const fl_format_desc d = DESC;                                                                 \
        for (size_t i = 0; i < n; i++)                                                                        \
            code[i] = fl_encode_f32_bits(&d, u0 + (uint32_t)i, FL_RND_NE, OVF, 0);                            \
    }
REF_LOOP(ref_e4m3_sat, FL_DESC_E4M3, FL_OVF_SATURATE)
REF_LOOP(ref_e4m3_nosat, FL_DESC_E4M3, FL_OVF_NOSATURATE)
REF_LOOP(ref_e5m2_sat, FL_DESC_E5M2, FL_OVF_SATURATE)
REF_LOOP(ref_e5m2_nosat, FL_DESC_E5M2, FL_OVF_NOSATURATE)
REF_LOOP(ref_bf16, FL_DESC_BF16, FL_OVF_NOSATURATE)
REF_LOOP(ref_gaudi2, FL_DESC_E4M3_GAUDI2, FL_OVF_SATURATE)
REF_LOOP(ref_e2m1, FL_DESC_E2M1, FL_OVF_SATURATE)

/* One format/policy of parts 1 and 2. */
typedef struct {
    const char *name;
    fl_cast_fmt f;
    fl_format_desc d;
    void (*ref)(uint32_t *, uint32_t, size_t);
} fmode;

static const fmode modes[] = {
    { "e4m3 sat", { FL_FMT_E4M3, 0, 0, 0, 0, 0 }, FL_DESC_E4M3, ref_e4m3_sat },
    { "e4m3 nosat", { FL_FMT_E4M3, 0, 1, 0, 0, 0 }, FL_DESC_E4M3, ref_e4m3_nosat },
    { "e5m2 sat", { FL_FMT_E5M2, 0, 0, 0, 0, 0 }, FL_DESC_E5M2, ref_e5m2_sat },
    { "e5m2 nosat", { FL_FMT_E5M2, 0, 1, 0, 0, 0 }, FL_DESC_E5M2, ref_e5m2_nosat },
    { "bf16", { FL_FMT_BF16, 0, 0, 0, 0, 0 }, FL_DESC_BF16, ref_bf16 },
    { "gaudi2 e4m3", { FL_FMT_E4M3, 1, 0, 0, 0, 0 }, FL_DESC_E4M3_GAUDI2, ref_gaudi2 },
    { "e2m1", { FL_FMT_E2M1, 0, 0, 0, 0, 0 }, FL_DESC_E2M1, ref_e2m1 },
};

/* The counts of cast.h's definitions for v = x (scales 1), from the decoded result dq (branch-free,
   so that the loop vectorises). */
static void expected_counts(const float *x, const float *dq, size_t n, float fmax, float bound, int ties_ovf,
                            fl_cast_counts *k, uint32_t *amb)
{
    uint64_t nan_in = 0, sat = 0, clip = 0, nan_out = 0, inf_out = 0, ftz = 0;
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const float v = x[i], av = fabsf(v), q = dq[i];
        const uint32_t b = fl_f32_bits(av), num = v == v;
        nan_in += 1u - num;
        m = num && b > m ? b : m;
        const uint32_t o = num & (av > fmax);
        sat += o;
        clip += o & ((av > bound) | ((uint32_t)ties_ovf & (av == bound)));
        const uint32_t qn = q != q, qi = !qn && (fabsf(q) == INFINITY);
        nan_out += num & qn;
        inf_out += num & qi & (av != INFINITY);
        ftz += num & !qn & !qi & (q == 0.0f) & (v != 0.0f);
    }
    k->nan_in += nan_in;
    k->sat += sat;
    k->clip += clip;
    k->nan_out += nan_out;
    k->inf_out += inf_out;
    k->ftz += ftz;
    *amb = m > *amb ? m : *amb;
}

static int counts_equal(const fl_cast_counts *a, const fl_cast_counts *b)
{
    return a->sat == b->sat && a->clip == b->clip && a->nan_out == b->nan_out && a->inf_out == b->inf_out &&
           a->nan_in == b->nan_in && a->ftz == b->ftz;
}

#define COUNTS_FMT "sat %llu clip %llu nan_out %llu inf_out %llu nan_in %llu ftz %llu"
#define COUNTS_ARGS(k)                                                                                               \
    (unsigned long long)(k).sat, (unsigned long long)(k).clip, (unsigned long long)(k).nan_out,                    \
        (unsigned long long)(k).inf_out, (unsigned long long)(k).nan_in, (unsigned long long)(k).ftz

/* Parts 1 and 2: all 2^32 inputs, each mode; per chunk the reference once, then every level's
   fake quantisation and (the modes fl_cast_encode_span has) the encoding. */
static void check_exhaustive(void)
{
    for (size_t m = 0; m < FL_ARRAY_LEN(modes); m++) {
        const fmode *md = &modes[m];
        int ties_ovf = 0;
        const float fmax = fl_cast_fmax(&md->f);
        const float bound =
            md->f.gaudi2 ? fl_f32_from_bits(0x43780000u) : (float)fl_format_rne_boundary(md->f.fmt, &ties_ovf);
        if (md->f.gaudi2)
            ties_ovf = 1;
        const size_t ncodes = (size_t)1 << md->d.bits;
        float *dec = malloc(ncodes * sizeof *dec);
        for (size_t c = 0; c < ncodes; c++)
            dec[c] = fl_decode_f32(&md->d, (uint32_t)c);
        long bad = 0;
#pragma omp parallel reduction(+ : bad)
        {
            float *x = malloc(CHUNK * sizeof *x), *want = malloc(CHUNK * sizeof *want);
            float *got = malloc(CHUNK * sizeof *got);
            uint32_t *code = malloc(CHUNK * sizeof *code);
            uint16_t *enc = malloc(CHUNK * sizeof *enc);
#pragma omp for schedule(dynamic)
            for (size_t ch = 0; ch < NCHUNK; ch += CHUNK_STEP) {
                const uint32_t u0 = (uint32_t)(ch * CHUNK);
                md->ref(code, u0, CHUNK);
                for (size_t i = 0; i < CHUNK; i++) {
                    x[i] = fl_f32_from_bits(u0 + (uint32_t)i);
                    want[i] = dec[code[i]];
                }
                if (!md->f.gaudi2 && md->f.fmt != FL_FMT_E2M1) {
                    /* part 2: the encoding, the conversion kernels at the default level */
                    fl_cast_encode_span(enc, x, CHUNK, 1.0f, md->f.fmt, md->f.nosat);
                    for (size_t i = 0; i < CHUNK; i++) {
                        const uint32_t e = md->d.bits == 8 ? ((const uint8_t *)enc)[i] : ((const uint16_t *)enc)[i];
                        if (e != code[i] && bad++ == 0) {
#pragma omp critical
                            fprintf(stderr, "encode_span %s: x = 0x%08x: got 0x%x want 0x%x\n", md->name,
                                    u0 + (uint32_t)i, e, code[i]);
                        }
                    }
                }
                fl_cast_counts kw = { 0 };
                uint32_t amb = 0;
                expected_counts(x, want, CHUNK, fmax, bound, ties_ovf, &kw, &amb);
                for (int li = 0; li < nlevels; li++) {
                    fl_cast_counts kg = { 0 };
                    const fl_cast_scales sc = { 1.0f, 1.0f, 1.0f, 1.0f, NULL, NULL, 0 };
                    const float am = fl_cast_fq_span_at(levels[li], got, x, CHUNK, &md->f, &sc, &kg, NULL, NULL);
                    if (memcmp(got, want, CHUNK * sizeof *got) != 0)
                        for (size_t i = 0; i < CHUNK; i++)
                            if (!same_bits(got[i], want[i]) && bad++ == 0) {
#pragma omp critical
                            fprintf(stderr, "%s at %s: x = %a (0x%08x): got 0x%08x want 0x%08x\n", md->name,
                                    fl_isa_name(levels[li]), x[i], u0 + (uint32_t)i, fl_f32_bits(got[i]),
                                    fl_f32_bits(want[i]));
                        }
                    if ((!counts_equal(&kg, &kw) || fl_f32_bits(am) != amb) && bad++ == 0) {
#pragma omp critical
                        fprintf(stderr,
                                "%s at %s, inputs 0x%08x + 2^20: got " COUNTS_FMT " amax %a, want " COUNTS_FMT
                                " amax %a\n",
                                md->name, fl_isa_name(levels[li]), u0, COUNTS_ARGS(kg), am, COUNTS_ARGS(kw),
                                fl_f32_from_bits(amb));
                    }
                }
            }
            free(x);
            free(want);
            free(got);
            free(code);
            free(enc);
        }
        CHECK(bad == 0, "%s: %ld mismatching elements or chunks", md->name, bad);
        free(dec);
    }
    printf("  RNE fake quantisation (%zu modes x %d levels; e2m1: its one bit-arithmetic loop) and fl_cast_encode_span (5 modes), %s inputs each: bits, "
           "counts and amax agree with fl_encode_f32_bits / fl_decode_f32\n",
           FL_ARRAY_LEN(modes), nlevels, CHUNK_STEP == 1 ? "all 2^32" : "every 251st chunk of 2^20");
}

/* Part 3's inputs: a stride of 1021 through all patterns and +-40 patterns around every binade edge
   and the overflow boundaries, both signs, shuffled into spans by a fixed permutation. */
static size_t stride_inputs(float **out)
{
    const size_t nstride = ((size_t)1 << 32) / STRIDE + 1;
    static const uint32_t extra[] = { 0x43E80000u, 0x43E00000u, 0x47700000u, 0x47600000u, 0x7F7F8000u,
                                      0x7F800000u, 0x43780000u, 0x43700000u, 0x40E00000u, 0x40C00000u,
                                      0x3F400000u, 0x40A00000u }; /* e2m1: 7, 6, the ties 0.75 and 5 */
    const size_t nedge = (256 + FL_ARRAY_LEN(extra)) * 81 * 2;
    float *x = malloc((nstride + nedge) * sizeof *x);
    size_t n = 0;
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += STRIDE)
        x[n++] = fl_f32_from_bits((uint32_t)u);
    for (size_t e = 0; e < 256 + FL_ARRAY_LEN(extra); e++) {
        const uint32_t c = e < 256 ? (uint32_t)e << 23 : extra[e - 256];
        for (int dl = -40; dl <= 40; dl++)
            for (uint32_t s = 0; s < 2; s++)
                x[n++] = fl_f32_from_bits(((uint32_t)((int64_t)c + dl) & 0x7FFFFFFFu) | (s << 31));
    }
    uint64_t st = 0x243F6A8885A308D3ull;
    for (size_t i = n - 1; i > 0; i--) {
        const size_t j = (size_t)(fl_splitmix64(&st) % (i + 1));
        const float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
    *out = x;
    return n;
}

/* Part 2 with scales: fl_cast_encode_span(x, s) against fl_encode_f32_bits of x * s, at every level,
   on part 3's inputs (spans of 2^18 + 37 elements: several stack buffers and, on 2 threads, both
   threads), scales exact (3 * 2^-4, a power of two) and not (1 / 3). */
static void check_encode_span(void)
{
    float *x;
    const size_t n = stride_inputs(&x), span = ((size_t)1 << 18) + 37;
    static const float scales[] = { 0.1875f, 0x1p-7f, 1.0f / 3.0f, 1.0f };
    static const struct {
        fl_format f;
        int nosat;
        fl_format_desc d;
        fl_overflow ovf;
    } fm[] = { { FL_FMT_E4M3, 0, FL_DESC_E4M3, FL_OVF_SATURATE },   { FL_FMT_E4M3, 1, FL_DESC_E4M3, FL_OVF_NOSATURATE },
               { FL_FMT_E5M2, 0, FL_DESC_E5M2, FL_OVF_SATURATE },   { FL_FMT_E5M2, 1, FL_DESC_E5M2, FL_OVF_NOSATURATE },
               { FL_FMT_BF16, 0, FL_DESC_BF16, FL_OVF_NOSATURATE } };
    uint16_t *enc = malloc(span * sizeof *enc);
    long bad = 0, checked = 0;
    for (int li = 0; li < nlevels; li++) {
        fl_convert_set_isa(levels[li]);
        for (size_t k = 0; k < FL_ARRAY_LEN(fm); k++)
            for (size_t si = 0; si < FL_ARRAY_LEN(scales); si++)
                for (size_t i0 = 0; i0 < n; i0 += span) {
                    const size_t m = n - i0 < span ? n - i0 : span;
                    fl_cast_encode_span(enc, x + i0, m, scales[si], fm[k].f, fm[k].nosat);
                    for (size_t i = 0; i < m; i++) {
                        const float v = x[i0 + i] * scales[si];
                        const uint32_t want = fl_encode_f32_bits(&fm[k].d, fl_f32_bits(v), FL_RND_NE, fm[k].ovf, 0);
                        const uint32_t got = fm[k].d.bits == 8 ? ((const uint8_t *)enc)[i] : enc[i];
                        checked++;
                        if (got != want && bad++ == 0)
                            fprintf(stderr, "encode_span %s nosat %d at %s: x = %a, s = %a: got 0x%x want 0x%x\n",
                                    fl_format_name(fm[k].f), fm[k].nosat, fl_isa_name(levels[li]), x[i0 + i],
                                    scales[si], got, want);
                    }
                }
    }
    fl_convert_set_isa(-1);
    CHECK(bad == 0, "fl_cast_encode_span: %ld of %ld codes differ", bad, checked);
    printf("  fl_cast_encode_span with scales: %ld codes at %d levels agree with fl_encode_f32_bits\n", checked,
           nlevels);
    free(enc);
    free(x);
}

/* Part 3: the spans of the harness's shapes against the reference loop.  The scales keep v = x * ...
   from overflowing where x is finite (the scaled-overflow edge, where |x| itself is finite but v
   is Inf, is outside the harness's scale range and the definitions there differ between nothing
   that runs). */
static void check_shapes(void)
{
    float *x;
    const size_t n = stride_inputs(&x);
    /* only inputs the largest scale keeps finite: |x| < 2^120 */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if ((fl_f32_bits(x[i]) & 0x7FFFFFFFu) < 0x7B800000u || (fl_f32_bits(x[i]) & 0x7FFFFFFFu) >= 0x7F800000u)
            x[m++] = x[i];
    typedef struct {
        const char *name;
        float rs, s;
        int col;
    } shape;
    static const shape shapes[] = {
        { "unit", 1.0f, 1.0f, 0 },        { "block 2^-3", 1.0f, 0x1p-3f, 0 }, { "scale 0.7", 1.0f, 0.7f, 0 },
        { "row 2^5, s 3.1", 0x1p5f, 3.1f, 0 }, { "columns, s 0.37", 1.0f, 0.37f, 1 }, { "row and columns", 0x1p-2f, 0x1p6f, 1 },
    };
    static const fl_format fmts[5] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_E4M3, FL_FMT_E2M1 };
    long spans = 0;
    const size_t span = m; /* one span per cast, all inputs */
    float *got = malloc(span * sizeof *got), *want = malloc(span * sizeof *want);
    float *cs = malloc(span * sizeof *cs), *csi = malloc(span * sizeof *csi);
    uint64_t st = 7;
    for (size_t c = 0; c < span; c++) {
        cs[c] = fl_pow2f((int)(fl_splitmix64(&st) % 9) - 4);
        csi[c] = 1.0f / cs[c];
    }
    for (size_t h = 0; h < FL_ARRAY_LEN(shapes); h++)
        for (int fi = 0; fi < 5; fi++)
            for (int nosat = 0; nosat < 2; nosat++)
                for (int sr = 0; sr < 2; sr++) {
                    const int g240 = fi == 3;
                    if ((g240 && (sr || nosat)) || ((fi == 2 || fi == 4) && nosat))
                        continue;
                    const shape *sh = &shapes[h];
                    /* an odd length (vector tails at every level), a nonzero stream offset */
                    const size_t nn = m - 3;
                    const fl_cast_scales sc = { sh->rs, 1.0f / sh->rs, sh->s, 1.0f / sh->s, sh->col ? cs : NULL,
                                                sh->col ? csi : NULL, 12345 };
                    fl_cast_fmt f = { fmts[fi], g240, nosat, sr, 0x9E3779B97F4A7C15ull ^ h, 1 };
                    fl_cast_counts kw = { 0 };
                    double w2 = 0, w4 = 0;
                    const float aw = fl_cast_fq_span(want, x, nn, &f, &sc, &kw, &w2, &w4);
                    f.reference = 0;
                    for (int li = 0; li < nlevels; li++) {
                        fl_convert_set_isa(levels[li]);
                        fl_cast_counts kg = { 0 };
                        double g2 = 0, g4 = 0;
                        const float ag = fl_cast_fq_span(got, x, nn, &f, &sc, &kg, &g2, &g4);
                        for (size_t i = 0; i < nn; i++)
                            CHECK(same_bits(got[i], want[i]),
                                  "%s%s nosat=%d sr=%d %s at %s: x = %a (0x%08x), element %zu: got 0x%08x want 0x%08x",
                                  fl_format_name(f.fmt), g240 ? " (gaudi2)" : "", nosat, sr, sh->name,
                                  fl_isa_name(levels[li]), x[i], fl_f32_bits(x[i]), i, fl_f32_bits(got[i]),
                                  fl_f32_bits(want[i]));
                        CHECK(counts_equal(&kg, &kw) && same_bits(ag, aw),
                              "%s nosat=%d sr=%d %s at %s: got " COUNTS_FMT " amax %a, want " COUNTS_FMT " amax %a",
                              fl_format_name(f.fmt), nosat, sr, sh->name, fl_isa_name(levels[li]), COUNTS_ARGS(kg), ag,
                              COUNTS_ARGS(kw), aw);
                        CHECK(g2 == w2 && g4 == w4, "%s sr=%d %s at %s: moments %a %a, want %a %a", fl_format_name(f.fmt),
                              sr, sh->name, fl_isa_name(levels[li]), g2, g4, w2, w4);
                        spans++;
                    }
                }
    fl_convert_set_isa(-1);
    printf("  %zu inputs (stride %d + edges) x %zu shapes x formats, RNE and SR, %d levels: %ld spans equal the "
           "reference loop\n", m, STRIDE, FL_ARRAY_LEN(shapes), nlevels, spans);
    free(got);
    free(want);
    free(cs);
    free(csi);
    free(x);
}

/* Part 4: SR is unbiased. */
static void check_sr_unbiased(void)
{
    /* between e5m2's neighbours 1.25 and 1.5 and in its subnormal range (steps of 2^-16) */
    static const float vals[] = { 1.3f, 1.45f, 0x1.8p-16f, 3.3e-6f, -700.1f };
    const size_t n = (size_t)1 << 16;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int li = 0; li < nlevels; li++) {
        fl_convert_set_isa(levels[li]);
        for (size_t v = 0; v < FL_ARRAY_LEN(vals); v++) {
            for (size_t i = 0; i < n; i++)
                x[i] = vals[v];
            const fl_cast_fmt f = { FL_FMT_E5M2, 0, 0, 1, 0xC0FFEEull + v, 0 };
            const fl_cast_scales sc = { 1.0f, 1.0f, 1.0f, 1.0f, NULL, NULL, 99 };
            fl_cast_counts k = { 0 };
            fl_cast_fq_span(y, x, n, &f, &sc, &k, NULL, NULL);
            double mean = 0.0, lo = INFINITY, hi = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                mean += y[i];
                lo = y[i] < lo ? y[i] : lo;
                hi = y[i] > hi ? y[i] : hi;
            }
            mean /= (double)n;
            const double p = (vals[v] - lo) / (hi - lo), se = (hi - lo) * sqrt(p * (1 - p) / (double)n);
            CHECK(fabs(mean - vals[v]) <= 5 * se, "SR of %a at %s: mean %a, 5 se %g", vals[v], fl_isa_name(levels[li]),
                  mean, 5 * se);
        }
    }
    fl_convert_set_isa(-1);
    free(x);
    free(y);
    printf("  SR: the mean of 2^16 casts is the value within 5 standard errors (%zu values, %d levels)\n",
           FL_ARRAY_LEN(vals), nlevels);
}

int main(void)
{
    find_levels();
    printf("test_cast: levels");
    for (int i = 0; i < nlevels; i++)
        printf(" %s", fl_isa_name(levels[i]));
    printf(", %d threads\n", omp_get_max_threads());
    check_sr_unbiased();
    check_shapes();
    check_encode_span();
    check_exhaustive();
    PASS("test_cast");
}
