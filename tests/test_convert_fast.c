/* test_convert_fast.c — every fast float32 conversion path gives the bits of the plain encoder
 * (fl_encode_f32_bits) it stands for:
 *   - convert.c's specialised loops (FL_ISA_SCALAR) and every kernel of convert_simd.c on every
 *     instruction set this CPU has, each variant (the conversion instruction, the integer
 *     intrinsics, the vector-extension code): round-to-nearest-even into e4m3, e5m2, bf16 and fp16,
 *     saturating and not, on all 2^32 float32 inputs;
 *   - the same for stochastic rounding against the encoder fed fl_sr_bits(seed, offset + i), on a
 *     stride of 256 through every sign, exponent and high mantissa bit, at a misaligned start and
 *     an odd length (the tails);
 *   - VCVTNEPS2BF16 itself (where the CPU has AVX512_BF16): where it departs from round-to-nearest-
 *     even on all 2^32 inputs, so that the kernel built on it re-does exactly the lanes it must;
 *   - fl_convert_from_f32 on 1 and 2 threads, and FP8LAB_ISA / fl_convert_set_isa;
 *   - the decodes (fl_convert_to_f32 and every decode kernel of every instruction set this CPU has)
 *     against fl_decode_f32 on every code of every 1- and 2-byte format, NaN encodings included,
 *     at several alignments and with tails of 0..63 elements.
 * About a minute on 2 threads.  Under AddressSanitizer the RNE part takes the stride of 256 and the
 * neighbourhoods of the overflow boundaries instead of all 2^32 inputs, and the VCVTNEPS2BF16
 * measurement the 2^24-input blocks that start at 0x00, 0x3F, 0x7F, 0x80 and 0xFF << 24. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "convert.h"
#include "convert_simd.h"
#include "fl_round.h"

#if defined(__SANITIZE_ADDRESS__)
#define FULL_SWEEP 0
#else
#define FULL_SWEEP 1
#endif

static const fl_format fmts[4] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_FP16 };

/* The plain encoder over an array, RNE, one loop per (format, policy) with the descriptor a
   constant (so that it vectorises: the reference for 2^32 inputs x 8 conversions). */
#define REF_LOOP(NAME, DESC, OVF, T)                                                                          \
    static void NAME(void *dst, const uint32_t *u, size_t n)                                                  \
    {                                                                                                         \
        static const fl_format_desc d = DESC;                                                                 \
        for (size_t i = 0; i < n; i++)                                                                        \
            ((T *)dst)[i] = (T)fl_encode_f32_bits(&d, u[i], FL_RND_NE, OVF, 0);                              \
    }
/* Both policies of a format (descriptor FL_DESC_FMT): ref_F_0 (not saturating), ref_F_1 (saturating). */
#define REF_LOOPS(F, FMT, T)                                                                                  \
    REF_LOOP(ref_##F##_0, FL_DESC_##FMT, FL_OVF_NOSATURATE, T)                                                \
    REF_LOOP(ref_##F##_1, FL_DESC_##FMT, FL_OVF_SATURATE, T)
REF_LOOPS(e4m3, E4M3, uint8_t)
REF_LOOPS(e5m2, E5M2, uint8_t)
REF_LOOPS(bf16, BF16, uint16_t)
REF_LOOPS(fp16, FP16, uint16_t)
static void (*const ref_loops[4][2])(void *, const uint32_t *, size_t) = {
    { ref_e4m3_0, ref_e4m3_1 }, { ref_e5m2_0, ref_e5m2_1 }, { ref_bf16_0, ref_bf16_1 }, { ref_fp16_0, ref_fp16_1 }
};

/* One path under test: a kernel, or (fn == NULL) convert.c's loops through fl_convert_from_f32
   with the instruction set capped to scalar. */
typedef struct {
    fl_cvt_fn fn;
    int isa, variant;
} path;

enum { MAX_PATHS = 1 + FL_ISA_COUNT * FL_CVT_VARIANTS };

/* Every distinct path of a conversion on this CPU. */
static int paths_of(fl_format f, fl_rounding mode, fl_overflow ovf, path *p)
{
    int np = 0;
    p[np++] = (path){ NULL, FL_ISA_SCALAR, 0 };
    for (int isa = FL_ISA_AVX2; isa <= fl_cpu_isa(); isa++)
        for (int v = 0; v < FL_CVT_VARIANTS; v++) {
            const fl_cvt_fn fn = fl_cvt_kernel(isa, f, mode, ovf, v);
            int seen = fn == NULL;
            for (int k = 0; k < np && !seen; k++)
                seen = p[k].fn == fn;
            if (!seen)
                p[np++] = (path){ fn, isa, v };
        }
    return np;
}

static void run_path(const path *p, void *dst, fl_format f, const uint32_t *u, size_t n, fl_rounding mode,
                     fl_overflow ovf, uint64_t seed, uint64_t off)
{
    if (p->fn)
        p->fn(dst, (const float *)u, n, seed, off);
    else
        fl_convert_from_f32(dst, f, (const float *)u, n, mode, ovf, seed, off);
}

static const char *variant_name(int v) { return v == FL_CVT_BEST ? "best" : v == FL_CVT_INTEGER ? "integer" : "generic"; }

static uint32_t code_at(const void *p, size_t bytes, size_t i)
{
    return bytes == 1 ? ((const uint8_t *)p)[i] : ((const uint16_t *)p)[i];
}

/* RNE: the inputs u[0..n) through every path of every (format, policy), against the reference.
   Returns the number of mismatches; prints the first of each conversion. */
static unsigned long long rne_block(const uint32_t *u, size_t n, uint16_t *ref, uint16_t *out)
{
    unsigned long long bad = 0;
    for (int k = 0; k < 4; k++)
        for (int sat = 0; sat < 2; sat++) {
            const fl_overflow ovf = sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
            const size_t bytes = fl_format_storage_bytes(fmts[k]);
            ref_loops[k][sat](ref, u, n);
            path p[MAX_PATHS];
            const int np = paths_of(fmts[k], FL_RND_NE, ovf, p);
            for (int j = 0; j < np; j++) {
                run_path(&p[j], out, fmts[k], u, n, FL_RND_NE, ovf, 0, 0);
                if (memcmp(out, ref, n * bytes) == 0)
                    continue;
                for (size_t i = 0; i < n; i++)
                    if (code_at(out, bytes, i) != code_at(ref, bytes, i) && bad++ == 0)
#pragma omp critical
                        fprintf(stderr, "%s rne %s, %s %s: x = 0x%08x (%a): kernel 0x%02x, encoder 0x%02x\n",
                                fl_format_name(fmts[k]), sat ? "sat" : "nosat", fl_isa_name(p[j].isa),
                                variant_name(p[j].variant), u[i], fl_f32_from_bits(u[i]), code_at(out, bytes, i),
                                code_at(ref, bytes, i));
            }
        }
    return bad;
}

static void test_rne(void)
{
    fl_convert_set_isa(FL_ISA_SCALAR); /* the NULL path: convert.c's own loops */
    unsigned long long bad = 0;
    if (FULL_SWEEP) {
#pragma omp parallel reduction(+ : bad)
        {
            const size_t n = (size_t)1 << 24;
            uint32_t *u = malloc(n * 4);
            uint16_t *ref = malloc(n * 2), *out = malloc(n * 2);
            CHECK(u && ref && out, "out of memory");
#pragma omp for schedule(dynamic)
            for (int c = 0; c < 256; c++) {
                for (size_t i = 0; i < n; i++)
                    u[i] = (uint32_t)c << 24 | (uint32_t)i;
                bad += rne_block(u, n, ref, out);
            }
            free(u);
            free(ref);
            free(out);
        }
        CHECK(bad == 0, "rne: %llu mismatches over all 2^32 inputs x 8 conversions x every path", bad);
    } else {
        const size_t n = (size_t)1 << 24;
        uint32_t *u = malloc(n * 4);
        uint16_t *ref = malloc(n * 2), *out = malloc(n * 2);
        CHECK(u && ref && out, "out of memory");
        for (size_t i = 0; i < n; i++)
            u[i] = (uint32_t)(i * 256 + (i & 255));
        bad += rne_block(u, n, ref, out);
        for (int k = 0; k < 4; k++) /* +-2^16 patterns around each overflow boundary */
            for (int sign = 0; sign < 2; sign++) {
                const uint32_t edge = (uint32_t)sign << 31 | fl_f32_bits((float)fl_format_max(fmts[k]));
                for (size_t i = 0; i < (1u << 17); i++)
                    u[i] = edge - 65536 + (uint32_t)i;
                bad += rne_block(u, 1u << 17, ref, out);
            }
        CHECK(bad == 0, "rne: %llu mismatches on the stride and the overflow edges", bad);
        free(u);
        free(ref);
        free(out);
    }
    fl_convert_set_isa(-1);
}

/* SR: every path against the encoder with fl_sr_bits(seed, offset + i), from element `skip` of a
   stride (a misaligned start) over an odd length. */
static void test_sr(void)
{
    const uint64_t seed = 0x5EEDull, offset = 1000003;
    const size_t n = ((size_t)1 << 24) + 13, skip = 3;
    uint32_t *u = malloc((n + skip) * 4);
    uint16_t *o = malloc(n * 2);
    CHECK(u && o, "out of memory");
    for (size_t i = 0; i < n + skip; i++)
        u[i] = (uint32_t)(17 + i * 256 + (i >> 24));
    fl_convert_set_isa(FL_ISA_SCALAR);
    for (int k = 0; k < 4; k++)
        for (int sat = 0; sat < 2; sat++) {
            const fl_overflow ovf = sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
            const fl_format_desc *d = fl_format_get(fmts[k]);
            const size_t bytes = fl_format_storage_bytes(fmts[k]);
            path p[MAX_PATHS];
            const int np = paths_of(fmts[k], FL_RND_SR, ovf, p);
            for (int j = 0; j < np; j++) {
                run_path(&p[j], o, fmts[k], u + skip, n, FL_RND_SR, ovf, seed, offset);
                unsigned long long bad = 0;
#pragma omp parallel for reduction(+ : bad)
                for (size_t i = 0; i < n; i++) {
                    const uint32_t x = u[skip + i];
                    const uint32_t want = fl_encode_f32_bits(d, x, FL_RND_SR, ovf, fl_sr_bits(seed, offset + i));
                    if (code_at(o, bytes, i) != want && bad++ == 0)
#pragma omp critical
                        fprintf(stderr, "%s sr %s, %s %s: element %zu, x = 0x%08x (%a): kernel 0x%02x, encoder 0x%02x\n",
                                fl_format_name(fmts[k]), sat ? "sat" : "nosat", fl_isa_name(p[j].isa),
                                variant_name(p[j].variant), i, x, fl_f32_from_bits(x), code_at(o, bytes, i), want);
                }
                CHECK(bad == 0, "%s sr %s (%s %s): %llu of %zu inputs differ", fl_format_name(fmts[k]),
                      sat ? "sat" : "nosat", fl_isa_name(p[j].isa), variant_name(p[j].variant), bad, n);
            }
        }
    fl_convert_set_isa(-1);
    free(u);
    free(o);
}

/* VCVTNEPS2BF16 against round-to-nearest-even (no saturation) on all 2^32 inputs: the lanes where
   it differs must all be ones the bf16 kernel re-does (a nonzero magnitude below 2^-126, or one at
   or above 0x7F7F8000); and it must really differ on subnormals (inputs treated as zero) and on
   NaNs (payload kept), or the comment in convert_simd.c is wrong. */
static void test_bf16_instruction(void)
{
    unsigned long long outside = 0, sub = 0, nan = 0;
    int have = 1;
#pragma omp parallel reduction(+ : outside, sub, nan)
    {
        static const fl_format_desc d = FL_DESC_BF16;
        const size_t n = (size_t)1 << 24;
        uint32_t *u = malloc(n * 4);
        uint16_t *o = malloc(n * 2);
        CHECK(u && o, "out of memory");
#pragma omp for schedule(dynamic)
        for (int c = 0; c < 256; c++) {
            /* under AddressSanitizer: the chunks holding subnormals, NaNs and ordinary values */
            if (!FULL_SWEEP && c != 0x00 && c != 0x3F && c != 0x7F && c != 0x80 && c != 0xFF)
                continue;
            for (size_t i = 0; i < n; i++)
                u[i] = (uint32_t)c << 24 | (uint32_t)i;
            if (!fl_bf16_native_raw(o, (const float *)u, n)) {
#pragma omp atomic write
                have = 0;
                continue;
            }
            for (size_t i = 0; i < n; i++) {
                const uint32_t a = u[i] & 0x7FFFFFFFu;
                if (o[i] == fl_encode_f32_bits(&d, u[i], FL_RND_NE, FL_OVF_NOSATURATE, 0))
                    continue;
                if (a >= 1 && a <= 0x7FFFFFu)
                    sub++;
                else if (a > 0x7F800000u)
                    nan++;
                else if (outside++ == 0)
#pragma omp critical
                    fprintf(stderr, "VCVTNEPS2BF16: x = 0x%08x (%a): 0x%04x, RNE 0x%04x\n", u[i],
                            fl_f32_from_bits(u[i]), o[i], fl_encode_f32_bits(&d, u[i], FL_RND_NE, FL_OVF_NOSATURATE, 0));
            }
        }
        free(u);
        free(o);
    }
    if (!have) {
        printf("VCVTNEPS2BF16: not on this CPU (no AVX512_BF16); not measured\n");
        return;
    }
    printf("VCVTNEPS2BF16 vs RNE over %s: %llu subnormal inputs differ, %llu NaNs differ, %llu others\n",
           FULL_SWEEP ? "all 2^32 inputs" : "5 of 256 blocks of 2^24 inputs", sub, nan, outside);
    CHECK(outside == 0, "VCVTNEPS2BF16 differs from RNE on %llu ordinary inputs", outside);
    CHECK(sub > 0 && nan > 0, "VCVTNEPS2BF16 no longer differs on subnormals (%llu) or NaNs (%llu): update convert_simd.c",
          sub, nan);
}

/* Decoding (fl_convert_to_f32 and the kernels of convert_decode_simd.c) against fl_decode_f32, bit for
   bit, on every code of every 1- and 2-byte format: each kernel of every instruction set this CPU has
   (fl_dec_kernel) and fl_convert_to_f32 capped to each level.  The source holds every code once, in
   an order rotated by the tail length, followed by a tail of 0..63 more codes, at source offsets of
   0..3 elements and destination offsets of 0 and 1 floats: every code goes through the vector body
   and, over the rotations, through every lane and every tail position.  NaN encodings included:
   fl_decode_f32 defines them all as 0x7FC00000, checked here too. */
static void test_decode(void)
{
    enum { TAIL = 64, SOFF = 4, DOFF = 2 };
    unsigned long long paths = 0, calls = 0;
    for (int f = 0; f < FL_FMT_COUNT; f++) {
        const fl_format_desc *d = fl_format_get((fl_format)f);
        const size_t bytes = fl_format_storage_bytes((fl_format)f);
        if (bytes > 2)
            continue;
        const size_t nc = (size_t)1 << (8 * bytes), cap = nc + TAIL + SOFF;
        uint16_t *codes = malloc(cap * 2);
        uint8_t *src = malloc(cap * bytes);
        uint32_t *want = malloc(cap * 4), *got = malloc((cap + DOFF) * 4);
        CHECK(codes && src && want && got, "out of memory");
        /* what the scalar decode defines for NaN encodings */
        for (uint32_t c = 0; c < nc; c++)
            if (fl_is_nan(d, c))
                CHECK(fl_f32_bits(fl_decode_f32(d, c)) == 0x7FC00000u, "%s code 0x%x: NaN decodes to 0x%08x",
                      fl_format_name((fl_format)f), c, fl_f32_bits(fl_decode_f32(d, c)));
        for (int isa = FL_ISA_SCALAR; isa <= fl_cpu_isa(); isa++)
            for (int via = 0; via < 2; via++) {
                /* via = 1: fl_convert_to_f32 capped to isa (on scalar: its own loop) */
                const fl_dec_fn fn = via ? NULL : fl_dec_kernel(isa, (fl_format)f);
                if (!via && !fn)
                    continue;
                if (via)
                    CHECK(fl_convert_set_isa(isa) == isa, "cap %s not taken", fl_isa_name(isa));
                paths++;
                for (size_t tail = 0; tail < TAIL; tail++) {
                    const size_t n = nc + tail;
                    for (size_t i = 0; i < n + SOFF; i++)
                        codes[i] = (uint16_t)((i + tail * 37) & (nc - 1));
                    for (size_t so = 0; so < SOFF; so++)
                        for (size_t dof = 0; dof < DOFF; dof++) {
                            const uint16_t *c = codes + so;
                            for (size_t i = 0; i < n; i++) {
                                if (bytes == 1)
                                    src[so + i] = (uint8_t)c[i];
                                else
                                    ((uint16_t *)src)[so + i] = c[i];
                                want[i] = fl_f32_bits(fl_decode_f32(d, c[i]));
                            }
                            const void *in = src + so * bytes;
                            float *out = (float *)(got + dof);
                            memset(got, 0xA5, (cap + DOFF) * 4);
                            if (fn)
                                fn(out, in, n);
                            else
                                fl_convert_to_f32(out, (fl_format)f, in, n);
                            calls++;
                            CHECK(got[dof + n] == 0xA5A5A5A5u && (dof == 0 || got[0] == 0xA5A5A5A5u),
                                  "%s decode (%s %s): wrote outside [0, %zu)", fl_format_name((fl_format)f),
                                  fl_isa_name(isa), fn ? "kernel" : "fl_convert_to_f32", n);
                            if (memcmp(got + dof, want, n * 4) == 0)
                                continue;
                            for (size_t i = 0; i < n; i++)
                                CHECK(got[dof + i] == want[i],
                                      "%s decode (%s %s), n %zu, src offset %zu, dst offset %zu: element %zu, "
                                      "code 0x%x: got 0x%08x, fl_decode_f32 0x%08x",
                                      fl_format_name((fl_format)f), fl_isa_name(isa), fn ? "kernel" : "fl_convert_to_f32",
                                      n, so, dof, i, c[i], got[dof + i], want[i]);
                        }
                }
            }
        free(codes);
        free(src);
        free(want);
        free(got);
    }
    fl_convert_set_isa(-1);
    /* formats without a kernel stay on the loop; a kernel exists for e4m3, bf16 and fp16 from AVX2 on */
    CHECK(fl_dec_kernel(FL_ISA_SCALAR, FL_FMT_E4M3) == NULL && fl_dec_kernel(FL_ISA_AVX2, FL_FMT_FP32) == NULL,
          "fl_dec_kernel: a kernel where there should be none");
    if (fl_cpu_isa() >= FL_ISA_AVX2)
        CHECK(fl_dec_kernel(FL_ISA_AVX2, FL_FMT_E4M3) && fl_dec_kernel(FL_ISA_AVX2, FL_FMT_BF16) &&
                  fl_dec_kernel(FL_ISA_AVX2, FL_FMT_FP16),
              "fl_dec_kernel: no AVX2 kernel");
    printf("decode: every code of every 1- and 2-byte format, tails 0..%d, %d x %d offsets: %llu paths, %llu calls\n",
           TAIL - 1, SOFF, DOFF, paths, calls);
}

/* fl_convert_from_f32 gives the same bits on 1 and 2 threads (and at every instruction-set cap), for
   an array below FL_STREAM_MIN_BYTES of output and (1 thread) one above it, whose output goes
   through fl_stream_store, into a destination one element off a 32-byte boundary; the decodes of
   the large one the same at every cap (fl_convert_to_f32 streams from FL_STREAM_MIN_BYTES of
   float32 on). */
static void test_threads_and_caps(void)
{
    const size_t nbig = FL_STREAM_MIN_BYTES + 7;
    uint32_t *u = malloc(nbig * 4);
    uint16_t *a = malloc(nbig * 2), *b = malloc(nbig * 2 + 64);
    float *da = malloc(nbig * 4), *db = malloc(nbig * 4 + 64);
    CHECK(u && a && b && da && db, "out of memory");
    uint64_t s = 42;
    for (size_t i = 0; i < nbig; i++)
        u[i] = (uint32_t)fl_splitmix64(&s);
    for (int big = 0; big < 2; big++)
        for (int k = 0; k < 4; k++)
            for (int sr = 0; sr < 2; sr++) {
                const size_t n = big ? nbig : ((size_t)1 << 20) + 7, threads = big ? 1 : 2;
                const fl_rounding mode = sr ? FL_RND_SR : FL_RND_NE;
                const size_t bytes = fl_format_storage_bytes(fmts[k]);
                omp_set_num_threads(1);
                fl_convert_set_isa(FL_ISA_SCALAR);
                fl_convert_from_f32(a, fmts[k], (const float *)u, n, mode, FL_OVF_SATURATE, 7, 99);
                if (big && !sr)
                    fl_convert_to_f32(da, fmts[k], a, n);
                for (int isa = FL_ISA_SCALAR; isa <= fl_cpu_isa(); isa++) {
                    omp_set_num_threads((int)threads);
                    CHECK(fl_convert_set_isa(isa) == isa, "cap %s not taken", fl_isa_name(isa));
                    /* big: one element past a 64-byte boundary */
                    char *bd = big ? (char *)b + bytes : (char *)b;
                    memset(bd, 0, n * bytes);
                    fl_convert_from_f32(bd, fmts[k], (const float *)u, n, mode, FL_OVF_SATURATE, 7, 99);
                    CHECK(memcmp(a, bd, n * bytes) == 0, "%s %s, %zu elements: %zu threads on %s differ from 1 thread on scalar",
                          fl_format_name(fmts[k]), sr ? "sr" : "rne", n, threads, fl_isa_name(isa));
                    if (big && !sr) {
                        memset(db + 1, 0, n * 4);
                        fl_convert_to_f32(db + 1, fmts[k], a, n);
                        CHECK(memcmp(da, db + 1, n * 4) == 0, "decode %s, %zu codes: %s differs from scalar",
                              fl_format_name(fmts[k]), n, fl_isa_name(isa));
                    }
                }
            }
    omp_set_num_threads(2);
    fl_convert_set_isa(-1);
    CHECK(fl_convert_isa() <= fl_cpu_isa(), "isa above the CPU's");
    CHECK(fl_isa_parse("avx512") == FL_ISA_AVX512 && fl_isa_parse("scalar") == FL_ISA_SCALAR &&
              fl_isa_parse("sse9") == -1, "fl_isa_parse");
    free(u);
    free(a);
    free(b);
    free(da);
    free(db);
}

int main(void)
{
    printf("CPU: %s (conversions run on %s)\n", fl_isa_name(fl_cpu_isa()), fl_isa_name(fl_convert_isa()));
    double t = omp_get_wtime();
    test_rne();
    printf("rne, every path: %.1f s\n", omp_get_wtime() - t);
    t = omp_get_wtime();
    test_sr();
    printf("sr, every path: %.1f s\n", omp_get_wtime() - t);
    t = omp_get_wtime();
    test_bf16_instruction();
    printf("VCVTNEPS2BF16: %.1f s\n", omp_get_wtime() - t);
    t = omp_get_wtime();
    test_threads_and_caps();
    printf("threads, caps and streamed stores: %.1f s\n", omp_get_wtime() - t);
    t = omp_get_wtime();
    test_decode();
    printf("decode, every path: %.1f s\n", omp_get_wtime() - t);
    PASS("test_convert_fast");
}
