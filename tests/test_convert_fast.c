/* test_convert_fast.c — numerics/convert.c's specialised round-to-nearest-even loops give the bits of the
 * plain encoder (fl_encode_f32_bits) they stand for: e4m3 without saturation (the saturating encoder
 * with the overflowing lanes patched) on all 2^32 float32 inputs; every other specialised loop (e4m3
 * sat, e5m2, bf16, fp16, each sat and nosat) on every 2^32 / 2^8 input pattern (a stride of 256
 * through every sign, exponent and high mantissa bit) plus the neighbourhoods of their overflow
 * boundaries; and the stochastic-rounding loops (e4m3, e5m2, bf16, saturating) against the encoder fed
 * fl_sr_bits(seed, offset + i), on the same stride with a nonzero offset.  About 20 s on 2 threads. */
#include <stdlib.h>

#include "check.h"
#include "convert.h"
#include "fl_round.h"

static unsigned long long compare_mode(fl_format f, fl_rounding mode, fl_overflow ovf, uint64_t first, uint64_t step,
                                       size_t n)
{
    const uint64_t seed = 0x5EEDull, offset = 1000003;
    const fl_format_desc *d = fl_format_get(f);
    const size_t bytes = fl_format_storage_bytes(f);
    uint32_t *u = malloc(n * 4);
    uint16_t *o = malloc(n * 2);
    CHECK(u && o, "out of memory");
    for (size_t i = 0; i < n; i++)
        u[i] = (uint32_t)(first + i * step);
    fl_convert_from_f32(o, f, (const float *)u, n, mode, ovf, seed, offset);
    unsigned long long bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t got = bytes == 1 ? ((uint8_t *)o)[i] : o[i];
        const uint32_t r = mode == FL_RND_SR ? fl_sr_bits(seed, offset + i) : 0;
        const uint32_t want = fl_encode_f32_bits(d, u[i], mode, ovf, r);
        if (got != want && bad++ == 0)
            fprintf(stderr, "%s %s%s: x = 0x%08x (%a): loop 0x%02x, encoder 0x%02x\n", fl_format_name(f), mode == FL_RND_SR ? "sr " : "",
                    ovf == FL_OVF_SATURATE ? "sat" : "nosat", u[i], fl_f32_from_bits(u[i]), got, want);
    }
    free(u);
    free(o);
    return bad;
}

static unsigned long long compare(fl_format f, fl_overflow ovf, uint64_t first, uint64_t step, size_t n)
{
    return compare_mode(f, FL_RND_NE, ovf, first, step, n);
}

int main(void)
{
    /* e4m3 nosat: every float32 bit pattern, in 256 chunks */
    unsigned long long bad = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : bad)
    for (int c = 0; c < 256; c++)
        bad += compare(FL_FMT_E4M3, FL_OVF_NOSATURATE, (uint64_t)c << 24, 1, (size_t)1 << 24);
    CHECK(bad == 0, "e4m3 nosat: %llu of 2^32 inputs differ from the encoder", bad);
    /* the other loops: a stride through everything, and +-2^16 patterns around each overflow boundary */
    const fl_format fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_FP16 };
    for (size_t k = 0; k < FL_ARRAY_LEN(fmts); k++)
        for (int s = 0; s < 2; s++) {
            const fl_overflow ovf = s ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
            bad = compare(fmts[k], ovf, 0, 256, (size_t)1 << 24) + compare(fmts[k], ovf, 255, 256, (size_t)1 << 24);
            const uint32_t edge = fl_f32_bits((float)fl_format_max(fmts[k]));
            for (int sign = 0; sign < 2; sign++)
                bad += compare(fmts[k], ovf, ((uint64_t)sign << 31) + edge - 65536, 1, 1u << 18);
            CHECK(bad == 0, "%s %s: %llu inputs differ", fl_format_name(fmts[k]), s ? "sat" : "nosat", bad);
        }
    const fl_format sr_fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16 };
    for (size_t k = 0; k < FL_ARRAY_LEN(sr_fmts); k++) {
        bad = compare_mode(sr_fmts[k], FL_RND_SR, FL_OVF_SATURATE, 17, 256, (size_t)1 << 24);
        CHECK(bad == 0, "%s sr: %llu inputs differ", fl_format_name(sr_fmts[k]), bad);
    }
    PASS("test_convert_fast");
}
