/* cast_vec.h — the fused cast kernels of numerics/cast.c, written once with GCC's vector extensions
 * and included once per instruction set.  The includer defines
 *   VB       vector width in bytes (0: no vectors, the element loop only; 32: AVX2; 64: AVX-512)
 *   VSUF     a suffix for the names defined here (_scalar, _avx2, _avx512)
 *   VTARGET  the function attribute selecting the instruction set
 * and the element code (fq_elem, fq_elem_sr, FQ_CONSTS, fq_acc).
 *
 * A vector of lanes runs the element code's operations lane by lane -- the same integer and
 * float32 operations, so the same bits -- when every lane is in the common case:
 *   RNE  |v| within the largest finite value (no NaN, saturation or overflow; subnormal lanes by
 *        the 2^23 trick as fq_elem does);
 *   SR   |v| zero or in the normal range up to the largest finite value: the discarded bits as a
 *        32-bit fraction, frac32 = (a << (32 - sh)) truncated, round up iff frac32 + rbits carries
 *        out of 32 bits -- fl_round.h's FL_RND_SR.
 * A vector with any other lane goes through the element code lane by lane.
 */
#define CX_CAT_(a, b) a##b
#define CX_CAT(a, b) CX_CAT_(a, b)
#define CX(name) CX_CAT(name, VSUF)
#define CX_AI static inline __attribute__((always_inline))

#if VB
#define CX_L (VB / 4) /* lanes */
#define SV(name) CX(name)
#include "simd_vec.h"
#undef SV

VTARGET CX_AI CX(vf) CX(load)(const float *p)
{
    CX(vf) v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The RNE cast of elements [c0, c1) a vector at a time (see the top); returns the first index not
   done.  The amax and flush-to-zero count of the vector lanes go into A at the end. */
VTARGET CX_AI size_t CX(fq_blocks)(float *y, const float *x, size_t c0, size_t c1, const float *cs, const float *csi,
                                  float rs, float rsi, float s, float si, fl_format fmt, int nosat, int unit, int col,
                                  int g240, fq_acc *A)
{
    FQ_CONSTS(fmt, g240);
    CX(vu) amb = { 0 }, ftzv = { 0 };
    const CX(vu) vmaxb = amb + maxb;
    size_t c = c0;
    for (; c + CX_L <= c1; c += CX_L) {
        const CX(vf) xl = CX(load)(x + c);
        const CX(vf) x0 = unit ? xl : xl * rs;
        const CX(vf) xv = col ? x0 * CX(load)(cs + c) : x0;
        const CX(vf) v = unit == 1 ? xv : xv * s;
        const CX(vu) u = (CX(vu))v, a = u & 0x7FFFFFFFu;
        if (CX(any_gt)(a, vmaxb)) {
            for (size_t l = 0; l < CX_L; l++)
                fq_elem(y, x, c + l, cs, csi, rs, rsi, s, si, fmt, nosat, unit, col, g240, A);
            continue;
        }
        const CX(vu) rn = (a + half + ((a >> sh) & 1u)) & mask;
        const CX(vu) axb = (CX(vu))xv & 0x7FFFFFFFu;
        CX(vu) r0 = rn;
        /* A lane rounds to 0 from a nonzero x only on the subnormal grid (e4m3/e5m2; a normal lane
           rounds to at least the smallest normal) or, for bf16, from below 2^-133. */
        int subn = bf;
        if (!bf) {
            const CX(vu) small = (CX(vu))(a < nmin);
            if (CX(any)(small)) {
                const CX(vf) vsb = (CX(vf))a * sub;
                const CX(vf) rsub = ((vsb + 0x1p23f) - 0x1p23f) * subi;
                r0 = SEL(small, (CX(vu))rsub, rn);
                subn = 1;
            }
        }
        if (subn)
            ftzv -= (CX(vu))(r0 == 0u) & (CX(vu))(axb != 0u);
        CX(vf) q = (CX(vf))(r0 | (u & 0x80000000u));
        if (unit == 0)
            q = q * si * rsi;
        else if (unit == 2)
            q = q * si;
        if (col)
            q = q * CX(load)(csi + c);
        memcpy(y + c, &q, sizeof q);
        amb = CX(umax)(amb, axb);
    }
    const uint32_t vm = CX(hmax)(amb);
    A->amb = vm > A->amb ? vm : A->amb;
    A->ftz += CX(hsum)(ftzv);
    return c;
}

/* The SR cast of elements [c0, c1) a vector at a time (see the top); returns the first index not
   done. */
VTARGET CX_AI size_t CX(sr_blocks)(float *y, const float *x, size_t c0, size_t c1, const float *cs, const float *csi,
                                  float rs, float rsi, float s, float si, fl_format fmt, const fl_format_desc *d,
                                  int nosat, int col, uint64_t key, uint64_t off, fq_acc *A)
{
    FQ_CONSTS(fmt, 0);
    const uint32_t nlo = bf ? 0u : nmin, low = (1u << sh) - 1u;
    CX(vu) amb = { 0 }, ftzv = { 0 };
    size_t c = c0;
    for (; c + CX_L <= c1; c += CX_L) {
        const CX(vf) x0 = CX(load)(x + c) * rs;
        const CX(vf) xv = col ? x0 * CX(load)(cs + c) : x0;
        const CX(vf) v = xv * s;
        const CX(vu) u = (CX(vu))v, a = u & 0x7FFFFFFFu;
        const CX(vu) bad = (CX(vu))(a > maxb) | ((CX(vu))(a < nlo) & (CX(vu))(a != 0u));
        if (CX(any)(bad)) {
            for (size_t l = 0; l < CX_L; l++)
                fq_elem_sr(y, x, c + l, cs, csi, rs, rsi, s, si, d, maxb, nosat, col, key, off, A);
            continue;
        }
        const CX(vu) frac32 = (a & low) << (32 - sh);
        const CX(vu) up = (CX(vu))((frac32 + CX(sr_bits)(key, off + c)) < frac32);
        const CX(vu) ra = (a & ~low) + (up & (1u << sh));
        if (bf) /* a float32 subnormal may round down to zero */
            ftzv -= (CX(vu))(ra == 0u) & (CX(vu))(a != 0u);
        CX(vf) q = (CX(vf))(ra | (u & 0x80000000u));
        q = q * si * rsi;
        if (col)
            q = q * CX(load)(csi + c);
        memcpy(y + c, &q, sizeof q);
        amb = CX(umax)(amb, (CX(vu))xv & 0x7FFFFFFFu);
    }
    const uint32_t vm = CX(hmax)(amb);
    A->amb = vm > A->amb ? vm : A->amb;
    A->ftz += CX(hsum)(ftzv);
    return c;
}

/* max of |x|'s bit patterns over the non-NaN elements */
VTARGET static uint32_t CX(amax_bits)(const float *x, size_t n)
{
    CX(vu) vm = { 0 };
    size_t i = 0;
    for (; i + CX_L <= n; i += CX_L) {
        const CX(vu) b = (CX(vu))CX(load)(x + i) & 0x7FFFFFFFu;
        vm = CX(umax)(vm, b & (CX(vu))(b <= 0x7F800000u)); /* NaN patterns count as 0 */
    }
    uint32_t m = CX(hmax)(vm);
    for (; i < n; i++) {
        const uint32_t b = fl_f32_bits(x[i]) & 0x7FFFFFFFu, v = b <= 0x7F800000u ? b : 0u;
        m = v > m ? v : m;
    }
    return m;
}
#else
static uint32_t CX(amax_bits)(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t b = fl_f32_bits(x[i]) & 0x7FFFFFFFu, v = b <= 0x7F800000u ? b : 0u;
        m = v > m ? v : m;
    }
    return m;
}
#endif

/* The RNE cast of a span: chunks of FQ_CHUNK (32-bit counts), vectors then the element code. */
VTARGET CX_AI float CX(fq_body)(float *y, const float *x, size_t n, const float *cs, const float *csi, float rs,
                               float rsi, float s, float si, fl_format fmt, int nosat, fl_cast_counts *k, double *m2,
                               double *m4, int unit, int col, int g240)
{
    fq_acc A = { 0, 0, 0, 0, 0, 0 };
    for (size_t c0 = 0; c0 < n; c0 += FQ_CHUNK) {
        const size_t c1 = n - c0 < FQ_CHUNK ? n : c0 + FQ_CHUNK;
        size_t c = c0;
#if VB
        c = CX(fq_blocks)(y, x, c0, c1, cs, csi, rs, rsi, s, si, fmt, nosat, unit, col, g240, &A);
#endif
        for (; c < c1; c++)
            fq_elem(y, x, c, cs, csi, rs, rsi, s, si, fmt, nosat, unit, col, g240, &A);
        fq_acc_flush(k, &A, fmt == FL_FMT_E4M3);
    }
    if (m2)
        fq_moments(x, n, cs, rs, s, unit, col, m2, m4);
    return fl_f32_from_bits(A.amb);
}

/* The SR cast of a span (the moments first: they read x, which y may be). */
VTARGET CX_AI float CX(sr_body)(float *y, const float *x, size_t n, const float *cs, const float *csi, float rs,
                               float rsi, float s, float si, fl_format fmt, int nosat, uint64_t key, uint64_t off,
                               fl_cast_counts *k, double *m2, double *m4, int col)
{
    FQ_CONSTS(fmt, 0);
    (void)e4;
    const fl_format_desc *d = fl_format_get(fmt);
    if (m2)
        fq_moments(x, n, cs, rs, s, 0, col, m2, m4);
    fq_acc A = { 0, 0, 0, 0, 0, 0 };
    for (size_t c0 = 0; c0 < n; c0 += FQ_CHUNK) {
        const size_t c1 = n - c0 < FQ_CHUNK ? n : c0 + FQ_CHUNK;
        size_t c = c0;
#if VB
        c = CX(sr_blocks)(y, x, c0, c1, cs, csi, rs, rsi, s, si, fmt, d, nosat, col, key, off, &A);
#endif
        for (; c < c1; c++)
            fq_elem_sr(y, x, c, cs, csi, rs, rsi, s, si, d, maxb, nosat, col, key, off, &A);
        fq_acc_flush(k, &A, fmt == FL_FMT_E4M3);
    }
    return fl_f32_from_bits(A.amb);
}

/* One instance per (format, unit, column smoothing, Gaudi2's e4m3): the constants fold. */
#define CX_FQ(name, fmt, unit, col, g240)                                                                     \
    VTARGET __attribute__((noinline)) static float CX(name)(float *y, const float *x, size_t n, const float *cs, \
                                                            const float *csi, float rs, float rsi, float s,     \
                                                            float si, int nosat, fl_cast_counts *k, double *m2, \
                                                            double *m4)                                         \
    {                                                                                                           \
        return CX(fq_body)(y, x, n, cs, csi, rs, rsi, s, si, fmt, nosat, k, m2, m4, unit, col, g240);          \
    }
#define CX_FQ_FMT(tag, fmt, g240)                                                                             \
    CX_FQ(CX_CAT(fq_##tag, _u0), fmt, 0, 0, g240)                                                             \
    CX_FQ(CX_CAT(fq_##tag, _u1), fmt, 1, 0, g240)                                                             \
    CX_FQ(CX_CAT(fq_##tag, _u2), fmt, 2, 0, g240)                                                             \
    CX_FQ(CX_CAT(fq_##tag, _col), fmt, 0, 1, g240)
CX_FQ_FMT(e4m3, FL_FMT_E4M3, 0)
CX_FQ_FMT(e5m2, FL_FMT_E5M2, 0)
CX_FQ_FMT(bf16, FL_FMT_BF16, 0)
CX_FQ_FMT(g240, FL_FMT_E4M3, 1)
#undef CX_FQ_FMT
#undef CX_FQ

#define CX_SR(name, fmt, col)                                                                                   \
    VTARGET __attribute__((noinline)) static float CX(name)(float *y, const float *x, size_t n, const float *cs, \
                                                            const float *csi, float rs, float rsi, float s,     \
                                                            float si, int nosat, uint64_t key, uint64_t off,    \
                                                            fl_cast_counts *k, double *m2, double *m4)          \
    {                                                                                                           \
        return CX(sr_body)(y, x, n, cs, csi, rs, rsi, s, si, fmt, nosat, key, off, k, m2, m4, col);             \
    }
CX_SR(sr_e4m3, FL_FMT_E4M3, 0)
CX_SR(sr_e4m3_col, FL_FMT_E4M3, 1)
CX_SR(sr_e5m2, FL_FMT_E5M2, 0)
CX_SR(sr_e5m2_col, FL_FMT_E5M2, 1)
CX_SR(sr_bf16, FL_FMT_BF16, 0)
CX_SR(sr_bf16_col, FL_FMT_BF16, 1)
#undef CX_SR

typedef float (*CX(fq_fn))(float *, const float *, size_t, const float *, const float *, float, float, float, float,
                            int, fl_cast_counts *, double *, double *);
typedef float (*CX(sr_fn))(float *, const float *, size_t, const float *, const float *, float, float, float, float,
                            int, uint64_t, uint64_t, fl_cast_counts *, double *, double *);

/* The instance for a span: [format e4m3, e5m2, bf16, Gaudi2's e4m3][u0, u1, u2, col]. */
static const CX(fq_fn) CX(fq_table)[4][4] = {
    { CX(fq_e4m3_u0), CX(fq_e4m3_u1), CX(fq_e4m3_u2), CX(fq_e4m3_col) },
    { CX(fq_e5m2_u0), CX(fq_e5m2_u1), CX(fq_e5m2_u2), CX(fq_e5m2_col) },
    { CX(fq_bf16_u0), CX(fq_bf16_u1), CX(fq_bf16_u2), CX(fq_bf16_col) },
    { CX(fq_g240_u0), CX(fq_g240_u1), CX(fq_g240_u2), CX(fq_g240_col) },
};
static const CX(sr_fn) CX(sr_table)[3][2] = {
    { CX(sr_e4m3), CX(sr_e4m3_col) },
    { CX(sr_e5m2), CX(sr_e5m2_col) },
    { CX(sr_bf16), CX(sr_bf16_col) },
};

/* f: e4m3, e5m2 or bf16 (Gaudi2's e4m3 RNE only). */
static float CX(fq_dispatch)(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                             fl_cast_counts *k, double *m2, double *m4)
{
    const int fi = f->fmt == FL_FMT_E4M3 ? (f->gaudi2 ? 3 : 0) : f->fmt == FL_FMT_E5M2 ? 1 : 2;
    const int nosat = (f->nosat && !f->gaudi2) || f->fmt == FL_FMT_BF16; /* bf16 overflows to Inf */
    if (f->sr)
        return CX(sr_table)[fi][sc->cs != NULL](y, x, n, sc->cs, sc->csi, sc->rs, sc->rsi, sc->s, sc->si, nosat, f->key,
                                                sc->off, k, m2, m4);
    const int r1 = sc->rs == 1.0f && sc->rsi == 1.0f;
    const int v = sc->cs ? 3 : !r1 ? 0 : (sc->s == 1.0f && sc->si == 1.0f) ? 1 : 2;
    return CX(fq_table)[fi][v](y, x, n, sc->cs, sc->csi, sc->rs, sc->rsi, sc->s, sc->si, nosat, k, m2, m4);
}

#ifdef CX_L
#undef CX_L
#endif
#undef CX_AI
#undef CX
#undef CX_CAT
#undef CX_CAT_
