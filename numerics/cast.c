/* cast.c — the cast engine (see cast.h): element code, the reference loop, and the run-time choice
 * of the kernels that numerics/cast_vec.h instantiates per instruction set. */
#include "cast.h"
#include "cast_elem.h"
#include "convert.h"      /* fl_convert_isa */
#include "convert_simd.h" /* FL_ISA_* */
#include "fl_round.h"

#include <math.h>
#include <omp.h>
#include <string.h>

void fl_cast_counts_add(fl_cast_counts *a, const fl_cast_counts *b)
{
    a->sat += b->sat;
    a->clip += b->clip;
    a->nan_out += b->nan_out;
    a->inf_out += b->inf_out;
    a->nan_in += b->nan_in;
    a->ftz += b->ftz;
}

void fl_cast_counts_flags(fl_cast_counts *k, uint32_t flags)
{
    k->nan_in += (flags & FL_CE_NAN_IN) != 0;
    k->sat += (flags & FL_CE_SAT) != 0;
    k->clip += (flags & FL_CE_CLIP) != 0;
    k->nan_out += (flags & FL_CE_NAN_OUT) != 0;
    k->inf_out += (flags & FL_CE_INF_OUT) != 0;
    k->ftz += (flags & FL_CE_FTZ) != 0;
}

/* ---- encoding: the conversion kernels ------------------------------------------------------------ */

#define ENC_CHUNK 2048 /* elements scaled into a stack buffer at a time */

void fl_cast_encode_span(void *codes, const float *x, size_t n, float s, fl_format fmt, int nosat)
{
    /* a cast to bf16 overflows to Inf whatever nosat says (fl_cast_fmt.nosat) */
    const fl_overflow ovf = nosat || fmt == FL_FMT_BF16 ? FL_OVF_NOSATURATE : FL_OVF_SATURATE;
    if (s == 1.0f) {
        fl_convert_from_f32(codes, fmt, x, n, FL_RND_NE, ovf, 0, 0);
        return;
    }
    const size_t w = fl_format_storage_bytes(fmt), nb = (n + ENC_CHUNK - 1) / ENC_CHUNK;
#pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 18) && !omp_in_parallel())
    for (size_t b = 0; b < nb; b++) {
        float t[ENC_CHUNK];
        const size_t i0 = b * ENC_CHUNK, m = n - i0 < ENC_CHUNK ? n - i0 : ENC_CHUNK;
        for (size_t i = 0; i < m; i++)
            t[i] = x[i0 + i] * s;
        fl_convert_from_f32((char *)codes + i0 * w, fmt, t, m, FL_RND_NE, ovf, 0, 0);
    }
}

/* ---- element code ------------------------------------------------------------------------------ */

/* Counts within a chunk of at most 2^20 elements, in 32 bits; amb: the amax's bit pattern (the
   maximum of non-negative floats' patterns orders them as the values do). */
typedef struct {
    uint32_t sat, clip, ovfc, ftz, nan_in, amb;
} fq_acc;

#define SEL(m, p, q) (((p) & (m)) | ((q) & ~(m)))

/* The per-format constants of the fused RNE cast (they fold in each instance).  sh: discarded
   mantissa bits; nmin: the smallest normal (float32 bits); maxb: the largest finite value, 448
   (240 for Gaudi2's e4m3) or 57344; ovf: overflow at and above: e4m3 above 464 (0x43e80000),
   Gaudi2's e4m3 at 248 (0x43780000, a tie that overflows: 240's mantissa is odd), e5m2 at 61440
   (0x47700000), bf16 where RNE reaches Inf; sub: 2^-(the subnormal step's exponent). */
#define FQ_CONSTS(fmt, g240)                                                                                        \
    const int e4 = (fmt) == FL_FMT_E4M3, bf = (fmt) == FL_FMT_BF16;                                                \
    const uint32_t sh = bf ? 16 : e4 ? 20 : 21;                                                                    \
    const uint32_t nmin = bf ? 0x00800000u : e4 ? 0x3C800000u : 0x38800000u;                                       \
    const uint32_t maxb = bf ? 0x7F7F0000u : e4 ? ((g240) ? 0x43700000u : 0x43E00000u) : 0x47600000u;              \
    const float sub = e4 ? 0x1p9f : 0x1p16f, subi = e4 ? 0x1p-9f : 0x1p-16f;                                      \
    const uint32_t half = (1u << (sh - 1)) - 1u, mask = ~((1u << sh) - 1u);                                       \
    (void)e4;                                                                                                      \
    (void)bf;                                                                                                      \
    (void)sh;                                                                                                      \
    (void)nmin;                                                                                                    \
    (void)maxb;                                                                                                    \
    (void)sub;                                                                                                     \
    (void)subi;                                                                                                    \
    (void)half;                                                                                                    \
    (void)mask

/* One element of the fused RNE cast (index c): the rounded value formed directly in float32 bits --
   RNE on the kept mantissa bits, the subnormal grid by the 2^23 trick -- which is
   decode(encode(v)), branch-free.  unit = 1: rs = rsi = s = si = 1; unit = 2: rs = rsi = 1 (the
   products with 1 skipped).  col: column smoothing cs/csi. */
static inline __attribute__((always_inline)) void fq_elem(float *y, const float *x, size_t c, const float *cs,
                                                           const float *csi, float rs, float rsi, float s, float si,
                                                           fl_format fmt, int nosat, int unit, int col, int g240,
                                                           fq_acc *A)
{
    FQ_CONSTS(fmt, g240);
    const uint32_t ovf = bf ? 0x7F7F8000u : e4 ? (g240 ? 0x43780000u : 0x43E80001u) : 0x47700000u;
    const uint32_t ovf_bits = nosat || bf ? (e4 ? 0x7FC00000u : 0x7F800000u) : maxb;
    const uint32_t nminv = bf ? 0u : nmin; /* bf16: every finite value takes the normal path */
    const uint32_t nanmask_o = (nosat || bf) && e4 ? 0u : 0xFFFFFFFFu; /* sign kept on overflow? */
    const uint32_t ovf_counts = (uint32_t)(nosat || bf);
    const uint32_t inf_counts = (uint32_t)e4; /* e5m2/bf16: an Inf input is no produced Inf */
    const float x0 = unit ? x[c] : x[c] * rs;
    const float xv = col ? x0 * cs[c] : x0;
    const float v = unit == 1 ? xv : xv * s;
    const uint32_t u = fl_f32_bits(v), a = u & 0x7FFFFFFFu, sg = u & 0x80000000u;
    const uint32_t rn = (a + half + ((a >> sh) & 1u)) & mask; /* normal RNE */
    const float vs = fl_f32_from_bits(a) * sub;
    const float rsub = ((vs + 0x1p23f) - 0x1p23f) * subi; /* subnormal RNE */
    const uint32_t mnorm = 0u - (uint32_t)(a >= nminv);
    const uint32_t r0 = SEL(mnorm, rn, fl_f32_bits(rsub));
    const uint32_t isn = (uint32_t)(a > 0x7F800000u), misn = 0u - isn;
    const uint32_t o = (uint32_t)(a >= ovf) & (isn ^ 1u), mo = 0u - o;
    const uint32_t ra = SEL(misn, 0x7FC00000u, SEL(mo, ovf_bits, r0));
    const uint32_t keep_sign = ~misn & SEL(mo, nanmask_o, 0xFFFFFFFFu);
    const float q = fl_f32_from_bits(ra | (sg & keep_sign));
    const float q1 = unit == 1 ? q : unit == 2 ? q * si : q * si * rsi;
    y[c] = col ? q1 * csi[c] : q1;
    const uint32_t axb = fl_f32_bits(xv) & 0x7FFFFFFFu;
    const uint32_t axv = SEL(0u - (uint32_t)(axb <= 0x7F800000u), axb, 0u);
    A->amb = axv > A->amb ? axv : A->amb;
    A->nan_in += isn;
    A->sat += (isn ^ 1u) & (uint32_t)(a > maxb);
    A->clip += o;
    A->ovfc += o & ovf_counts & (inf_counts | (uint32_t)(a != 0x7F800000u));
    A->ftz += (isn ^ 1u) & (uint32_t)(ra == 0) & (uint32_t)(axb != 0);
}

/* One element of the SR cast (index c): fl_encode_f32_bits with FL_RND_SR and the random bits
   fl_sr_bits(key, off + c), decoded.  Every element above the largest finite value counts as
   saturated and clipped (SR may carry it past the RNE boundary or not); a non-finite output from
   a non-NaN input counts as nan_out (e4m3) or, from a finite input, inf_out; ftz: v nonzero, q 0. */
static inline __attribute__((always_inline)) void fq_elem_sr(float *y, const float *x, size_t c, const float *cs,
                                                              const float *csi, float rs, float rsi, float s, float si,
                                                              const fl_format_desc *d, uint32_t maxb, int nosat,
                                                              int col, uint64_t key, uint64_t off, fq_acc *A)
{
    const float x0 = x[c] * rs;
    const float xv = col ? x0 * cs[c] : x0;
    const float v = xv * s;
    const uint32_t u = fl_f32_bits(v), a = u & 0x7FFFFFFFu;
    const uint32_t code =
        fl_encode_f32_bits(d, u, FL_RND_SR, nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE, fl_sr_bits(key, off + c));
    const float q = fl_decode_f32(d, code);
    const float q1 = q * si * rsi;
    y[c] = col ? q1 * csi[c] : q1;
    if (a > 0x7F800000u) {
        A->nan_in++;
        return;
    }
    const uint32_t o = (uint32_t)(a > maxb);
    A->sat += o;
    A->clip += o;
    const uint32_t qa = fl_f32_bits(q) & 0x7FFFFFFFu;
    A->ovfc += (uint32_t)(qa >= 0x7F800000u) & (uint32_t)(d->mbits == 3 || a != 0x7F800000u);
    A->ftz += (uint32_t)(qa == 0) & (uint32_t)(a != 0);
    const uint32_t axb = fl_f32_bits(xv) & 0x7FFFFFFFu;
    A->amb = axb > A->amb ? axb : A->amb;
}

/* Fold a chunk's 32-bit counts into k (ovfc: nan_out for e4m3, inf_out otherwise). */
static inline void fq_acc_flush(fl_cast_counts *k, fq_acc *A, int e4)
{
    k->sat += A->sat;
    k->clip += A->clip;
    if (e4)
        k->nan_out += A->ovfc;
    else
        k->inf_out += A->ovfc;
    k->ftz += A->ftz;
    k->nan_in += A->nan_in;
    A->sat = A->clip = A->ovfc = A->ftz = A->nan_in = 0;
}

/* The moments of a span after its cast, in order (fq bodies; the reference loop sums inline). */
static inline __attribute__((always_inline)) void fq_moments(const float *x, size_t n, const float *cs, float rs,
                                                              float s, int unit, int col, double *m2, double *m4)
{
    double s2 = 0.0, s4 = 0.0;
    for (size_t c = 0; c < n; c++) {
        const float x0 = unit ? x[c] : x[c] * rs;
        const float xv = col ? x0 * cs[c] : x0;
        if ((fl_f32_bits(unit == 1 ? xv : xv * s) & 0x7FFFFFFFu) <= 0x7F800000u) {
            const double d2 = (double)xv * xv;
            s2 += d2;
            s4 += d2 * d2;
        }
    }
    *m2 += s2;
    *m4 += s4;
}

#define FQ_CHUNK ((size_t)1 << 20)

/* ---- the kernels, once per instruction set ------------------------------------------------------ */

#define VB 0
#define VSUF _scalar
#define VTARGET
#include "cast_vec.h"
#undef VB
#undef VSUF
#undef VTARGET

#if defined(__x86_64__) && defined(__GNUC__)
#define FL_HAVE_X86_CAST 1
#include <immintrin.h>
#define VB 32
#define VSUF _avx2
#define VTARGET FL_TARGET_AVX2
#include "cast_vec.h"
#undef VB
#undef VSUF
#undef VTARGET

#define VB 64
#define VSUF _avx512
#define VTARGET FL_TARGET_AVX512
#include "cast_vec.h"
#undef VB
#undef VSUF
#undef VTARGET
#endif

/* ---- the format's limits ------------------------------------------------------------------------ */

float fl_cast_fmax(const fl_cast_fmt *f)
{
    return f->gaudi2 ? FL_GAUDI2_E4M3_MAX : (float)fl_format_max(f->fmt);
}

/* The RNE overflow boundary: a |v| beyond it (or at it, *ties_ovf set) overflows. */
static float cast_bound(const fl_cast_fmt *f, int *ties_ovf)
{
    if (f->gaudi2) { /* 0x43780000 is 248.0f: 240 + half its ulp of 16; the tie goes to 256, i.e. overflows */
        *ties_ovf = 1;
        return fl_f32_from_bits(0x43780000u);
    }
    return (float)fl_format_rne_boundary(f->fmt, ties_ovf);
}

void fl_cast_clip_mass(const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc, double *num,
                       double *den)
{
    int ties_ovf = 0;
    const double fmax = fl_cast_fmax(f), bound = cast_bound(f, &ties_ovf);
    const int nosat = f->nosat && !f->gaudi2;
    const float rs = sc->rs, rsi = sc->rsi, s = sc->s;
    double nu = *num, de = *den;
    for (size_t c = 0; c < n; c++) {
        const float x0 = x[c];
        if (!isfinite(x0))
            continue;
        const float cs = sc->cs ? sc->cs[c] : 1.0f, csi = sc->csi ? sc->csi[c] : 1.0f;
        const double ax = fabs((double)x0), av = fabs((double)(x0 * rs * cs * s));
        de += ax;
        if (nosat && (av > bound || (ties_ovf && av == bound)))
            nu += ax;
        else if (av > fmax)
            nu += (av - fmax) / s * csi * rsi;
    }
    *num = nu;
    *den = de;
}

/* ---- the reference loop ------------------------------------------------------------------------- */

/* fl_encode_f32_bits and fl_decode_f32 element by element, the counts by their definitions. */
void fl_cast_limits_of(fl_cast_limits *l, const fl_cast_fmt *f)
{
    static const fl_format_desc gaudi2 = FL_DESC_E4M3_GAUDI2;
    l->d = f->gaudi2 ? gaudi2 : *fl_format_get(f->fmt);
    const int nosat = (f->nosat && !f->gaudi2) || f->fmt == FL_FMT_BF16;
    l->ovf = nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE;
    l->ties_ovf = 0;
    l->fmax = fl_cast_fmax(f);
    l->bound = cast_bound(f, &l->ties_ovf);
}

static float fq_reference(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                          fl_cast_counts *k, double *m2, double *m4)
{
    fl_cast_limits lim;
    fl_cast_limits_of(&lim, f);
    const fl_format_desc *d = &lim.d;
    const fl_overflow ovf = lim.ovf;
    const int ties_ovf = lim.ties_ovf;
    const float fmax = lim.fmax, bound = lim.bound;
    float am = 0.0f;
    for (size_t c = 0; c < n; c++) {
        float xv = x[c] * sc->rs;
        if (sc->cs)
            xv = xv * sc->cs[c];
        const float v = xv * sc->s;
        uint32_t fl;
        const uint32_t code = fl_cast_elem(d, xv, v, f->sr, f->sr ? fl_sr_bits(f->key, sc->off + c) : 0u, ovf, fmax,
                                           bound, ties_ovf, &fl);
        float out = fl_decode_f32(d, code) * sc->si * sc->rsi;
        if (sc->csi)
            out = out * sc->csi[c];
        y[c] = out;
        fl_cast_counts_flags(k, fl);
        if (fl & FL_CE_NAN_IN)
            continue;
        const float ax = fabsf(xv);
        if (ax > am)
            am = ax;
        if (m2) {
            const double d2 = (double)xv * xv;
            *m2 += d2;
            *m4 += d2 * d2;
        }
    }
    return am;
}

/* ---- e2m1 (NVFP4 and MXFP4 elements) ------------------------------------------------------------ */

/* The reference loop's values and counts for e2m1 (FL_DESC_E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf or
   NaN, so every cast saturates and a NaN encodes as +6), with the rounding done on float32 bits:
   - RNE: |v| >= 1 keeps one mantissa bit, (a + 0x1FFFFF + lsb) & ~0x3FFFFF; |v| < 1 rounds on the
     subnormal grid of 0.5 by the 2^23 trick on 2|v|; |v| >= 7 (the RNE boundary, a tie that overflows:
     6's mantissa bit is odd) and Inf give 6;
   - SR: frac32 = floor(the discarded fraction of an ulp * 2^32) -- |v| >= 1: the 22 discarded bits
     shifted up by 10; |v| < 1: (2|v| - floor(2|v|)) * 2^32, exact in float32 and truncated by the
     conversion -- and away from zero iff frac32 + fl_sr_bits(key, off + c) >= 2^32, as
     fl_encode_f32_bits does (fl_round.h); every |v| > 6 gives 6.
   tests/test_cast.c compares this with the reference loop on all 2^32 inputs (RNE) and on a stride
   plus the binade edges (SR). */
static inline __attribute__((always_inline)) float fq_e2m1_body(float *y, const float *x, size_t n,
                                                                  const fl_cast_scales *sc, uint64_t key, int sr,
                                                                  int plain, fl_cast_counts *k, double *m2, double *m4)
{
    /* plain (a constant): no column smoothing, no moments -- a loop without control flow, which the
       compiler vectorises.  n < 2^32 (fq_e2m1's chunks): 32-bit counters, the lanes' width; m2, m4: the
       running sums, carried from chunk to chunk */
    uint32_t sat = 0, clip = 0, ftz = 0, nan_in = 0;
    uint32_t amb = 0;
    double s2 = m2 ? *m2 : 0.0, s4 = m4 ? *m4 : 0.0;
    const float rs = sc->rs, s = sc->s, si = sc->si, rsi = sc->rsi;
    for (size_t c = 0; c < n; c++) {
        const float x0 = x[c] * rs;
        const float xv = !plain && sc->cs ? x0 * sc->cs[c] : x0;
        const float v = xv * s;
        const uint32_t u = fl_f32_bits(v), a = u & 0x7FFFFFFFu;
        const uint32_t mnorm = 0u - (uint32_t)(a >= 0x3F800000u);
        /* 2|v| where |v| < 1, else 0 (no float-to-integer conversion out of range below) */
        const float a2 = fl_f32_from_bits(SEL(mnorm, 0u, fl_f32_bits(fl_f32_from_bits(a) * 2.0f)));
        uint32_t r;
        if (!sr) {
            const uint32_t rn = (a + 0x1FFFFFu + ((a >> 22) & 1u)) & ~0x3FFFFFu;
            const uint32_t rsub = fl_f32_bits(((a2 + 0x1p23f) - 0x1p23f) * 0.5f);
            r = SEL(0u - (uint32_t)(a >= 0x40E00000u), 0x40C00000u, SEL(mnorm, rn, rsub)); /* NaN and Inf: 6 */
        } else {
            const uint32_t mhi = 0u - (uint32_t)(a2 >= 1.0f);
            const float fl = fl_f32_from_bits(mhi & 0x3F800000u);
            const uint32_t lo = SEL(mnorm, a & ~0x3FFFFFu, mhi & 0x3F000000u);
            const uint32_t frac32 = SEL(mnorm, (a & 0x3FFFFFu) << 10, (uint32_t)((a2 - fl) * 0x1p32f));
            const uint32_t away = (uint32_t)(((uint64_t)frac32 + fl_sr_bits(key, sc->off + c)) >> 32);
            /* one step up: + 2^22 in the bits from 1 up (a carry moves the binade); below 1, + 0.5 */
            const uint32_t up = SEL(mnorm, lo + 0x400000u, SEL(mhi, 0x3F800000u, 0x3F000000u));
            r = SEL(0u - (uint32_t)(a > 0x40C00000u), 0x40C00000u, SEL(0u - away, up, lo)); /* NaN and Inf: 6 */
        }
        const uint32_t isn = (uint32_t)(a > 0x7F800000u);
        const float q = fl_f32_from_bits(r | (u & 0x80000000u & (isn - 1u))); /* NaN: +6 */
        const float q1 = q * si * rsi;
        y[c] = !plain && sc->csi ? q1 * sc->csi[c] : q1;
        const uint32_t axb = fl_f32_bits(xv) & 0x7FFFFFFFu, num = (uint32_t)(axb <= 0x7F800000u);
        nan_in += num ^ 1u;
        const uint32_t axn = axb & (0u - num);
        amb = axn > amb ? axn : amb;
        if (!plain && m2) {
            const double d2 = num ? (double)xv * xv : 0.0;
            s2 += d2;
            s4 += d2 * d2;
        }
        sat += num & (uint32_t)(a > 0x40C00000u);
        clip += num & (uint32_t)(sr ? a > 0x40C00000u : a >= 0x40E00000u);
        ftz += num & (uint32_t)(r == 0) & (uint32_t)(sr ? a != 0 : axb != 0);
    }
    k->sat += sat;
    k->clip += clip;
    k->ftz += ftz;
    k->nan_in += nan_in;
    if (m2) {
        *m2 = s2;
        *m4 = s4;
    }
    return fl_f32_from_bits(amb);
}

/* The span in chunks of at most 2^30 elements (the body's 32-bit counters), the moments summed in
   order through all of them, then added to *m2, *m4. */
static float fq_e2m1(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                     fl_cast_counts *k, double *m2, double *m4)
{
    const size_t chunk = (size_t)1 << 30;
    const int plain = !m2 && !sc->cs && !sc->csi;
    double s2 = 0.0, s4 = 0.0, *p2 = m2 ? &s2 : NULL, *p4 = m2 ? &s4 : NULL;
    uint32_t amb = 0;
    size_t c0 = 0;
    do {
        const size_t len = n - c0 < chunk ? n - c0 : chunk;
        fl_cast_scales cs = *sc;
        cs.off += c0;
        cs.cs = sc->cs ? sc->cs + c0 : NULL;
        cs.csi = sc->csi ? sc->csi + c0 : NULL;
        float am;
        if (plain)
            am = f->sr ? fq_e2m1_body(y + c0, x + c0, len, &cs, f->key, 1, 1, k, NULL, NULL)
                       : fq_e2m1_body(y + c0, x + c0, len, &cs, 0, 0, 1, k, NULL, NULL);
        else
            am = f->sr ? fq_e2m1_body(y + c0, x + c0, len, &cs, f->key, 1, 0, k, p2, p4)
                       : fq_e2m1_body(y + c0, x + c0, len, &cs, 0, 0, 0, k, p2, p4);
        amb = fl_f32_bits(am) > amb ? fl_f32_bits(am) : amb;
        c0 += len;
    } while (c0 < n);
    if (m2) {
        *m2 += s2;
        *m4 += s4;
    }
    return fl_f32_from_bits(amb);
}

float fl_cast_fq_e2m1(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                      fl_cast_counts *k)
{
    return fq_e2m1(y, x, n, f, sc, k, NULL, NULL);
}

float fl_cast_fq_span(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                      fl_cast_counts *k, double *m2, double *m4)
{
    return fl_cast_fq_span_at(fl_convert_isa(), y, x, n, f, sc, k, m2, m4);
}

float fl_cast_fq_span_at(int isa, float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                         fl_cast_counts *k, double *m2, double *m4)
{
    if (isa > fl_cpu_isa())
        isa = fl_cpu_isa();
    const int fused = f->fmt == FL_FMT_E4M3 || f->fmt == FL_FMT_E5M2 || (f->fmt == FL_FMT_BF16 && !f->gaudi2);
    if (f->fmt == FL_FMT_E2M1 && !f->reference)
        return fq_e2m1(y, x, n, f, sc, k, m2, m4);
    if (f->reference || !fused || (f->sr && f->gaudi2))
        return fq_reference(y, x, n, f, sc, k, m2, m4);
#if FL_HAVE_X86_CAST
    if (isa >= FL_ISA_AVX512)
        return fq_dispatch_avx512(y, x, n, f, sc, k, m2, m4);
    if (isa >= FL_ISA_AVX2)
        return fq_dispatch_avx2(y, x, n, f, sc, k, m2, m4);
#endif
    (void)isa;
    return fq_dispatch_scalar(y, x, n, f, sc, k, m2, m4);
}

float fl_cast_amax(const float *x, size_t n)
{
#if FL_HAVE_X86_CAST
    const int isa = fl_convert_isa();
    if (isa >= FL_ISA_AVX512)
        return fl_f32_from_bits(amax_bits_avx512(x, n));
    if (isa >= FL_ISA_AVX2)
        return fl_f32_from_bits(amax_bits_avx2(x, n));
#endif
    return fl_f32_from_bits(amax_bits_scalar(x, n));
}

/* ---- row moments -------------------------------------------------------------------------------- */

static void moments_row(double *rm, const float *x, size_t C, float rs, float s)
{
    double s2 = 0.0, s4 = 0.0;
    for (size_t c = 0; c < C; c++) {
        const float xv = x[c] * rs;
        if ((fl_f32_bits(xv * s) & 0x7FFFFFFFu) <= 0x7F800000u) {
            const double d2 = (double)xv * xv;
            s2 += d2;
            s4 += d2 * d2;
        }
    }
    rm[0] = s2;
    rm[1] = s4;
}

#if FL_HAVE_X86_CAST
/* Rows 8g .. 8g + 7 in the lanes of one vector: an 8x8 block is transposed in registers, so that
   each column is one masked vector addition per sum (a NaN lane adds nothing: s2 and s4 start at
   +0 and only grow, so skipping is the sequential loop's "continue"). */
__attribute__((target("avx512f,avx512vl"))) static void moments_rows8_avx512(double *rm, const float *x, size_t C,
                                                                            size_t i0, const float *rs, const float *bs,
                                                                            size_t br)
{
    float rsv[8], sv[8];
    for (int r = 0; r < 8; r++) {
        rsv[r] = rs ? rs[i0 + r] : 1.0f;
        sv[r] = bs[(i0 + r) / br];
    }
    const __m256 vrs = _mm256_loadu_ps(rsv), vs = _mm256_loadu_ps(sv);
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), infb = _mm256_set1_epi32(0x7F800000);
    __m512d s2 = _mm512_setzero_pd(), s4 = _mm512_setzero_pd();
    const float *xr = x + i0 * C;
#define MOM_COL(col)                                                                                 \
    do {                                                                                             \
        const __m256 x0 = _mm256_mul_ps((col), vrs);                                                 \
        const __m256i vb = _mm256_and_si256(_mm256_castps_si256(_mm256_mul_ps(x0, vs)), absm);       \
        const __mmask8 ok = _mm256_cmple_epu32_mask(vb, infb);                                       \
        const __m512d d = _mm512_cvtps_pd(x0), d2 = _mm512_mul_pd(d, d);                             \
        s2 = _mm512_mask_add_pd(s2, ok, s2, d2);                                                     \
        s4 = _mm512_mask_add_pd(s4, ok, s4, _mm512_mul_pd(d2, d2));                                  \
    } while (0)
    size_t c = 0;
    for (; c + 8 <= C; c += 8) {
        __m256 a[8];
        for (int r = 0; r < 8; r++)
            a[r] = _mm256_loadu_ps(xr + (size_t)r * C + c);
        const __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
        const __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
        const __m256 t4 = _mm256_unpacklo_ps(a[4], a[5]), t5 = _mm256_unpackhi_ps(a[4], a[5]);
        const __m256 t6 = _mm256_unpacklo_ps(a[6], a[7]), t7 = _mm256_unpackhi_ps(a[6], a[7]);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        MOM_COL(_mm256_permute2f128_ps(u0, u4, 0x20)); /* column c: lane r = row r */
        MOM_COL(_mm256_permute2f128_ps(u1, u5, 0x20));
        MOM_COL(_mm256_permute2f128_ps(u2, u6, 0x20));
        MOM_COL(_mm256_permute2f128_ps(u3, u7, 0x20));
        MOM_COL(_mm256_permute2f128_ps(u0, u4, 0x31));
        MOM_COL(_mm256_permute2f128_ps(u1, u5, 0x31));
        MOM_COL(_mm256_permute2f128_ps(u2, u6, 0x31));
        MOM_COL(_mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (; c < C; c++) {
        float v[8];
        for (int r = 0; r < 8; r++)
            v[r] = xr[(size_t)r * C + c];
        MOM_COL(_mm256_loadu_ps(v));
    }
#undef MOM_COL
    double o2[8], o4[8];
    _mm512_storeu_pd(o2, s2);
    _mm512_storeu_pd(o4, s4);
    for (int r = 0; r < 8; r++) {
        rm[2 * (i0 + r)] = o2[r];
        rm[2 * (i0 + r) + 1] = o4[r];
    }
}
#endif

void fl_cast_row_moments(double *rm, const float *x, size_t R, size_t C, const float *rs, const float *s, size_t br)
{
    size_t g8 = 0;
#if FL_HAVE_X86_CAST
    if (fl_convert_isa() >= FL_ISA_AVX512) {
        g8 = R / 8;
#pragma omp parallel for schedule(static)
        for (size_t g = 0; g < g8; g++)
            moments_rows8_avx512(rm, x, C, g * 8, rs, s, br);
        g8 *= 8;
    }
#endif
#pragma omp parallel for schedule(static)
    for (size_t i = g8; i < R; i++)
        moments_row(rm + 2 * i, x + i * C, C, rs ? rs[i] : 1.0f, s[i / br]);
}
