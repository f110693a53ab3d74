/* test_ulp.c — ulp(v), ordinals, distances and ulp errors, exhaustively over the 8- and 16-bit
 * formats: for every pair of neighbouring finite encodings the distance is 1 and the gap equals
 * ulp() of the lower one's binade (the Zimmermann convention), and NaN stays a class of its own. */
#include "check.h"
#include "fl_round.h"
#include "ulp.h"

#include <math.h>

int main(void)
{
    /* Spot values: the convention's definition, including the subnormal floor and beyond max. */
    CHECK(fl_ulp(FL_FMT_E4M3, 1.0) == 0x1p-3, "ulp e4m3 1.0 = %a", fl_ulp(FL_FMT_E4M3, 1.0));
    CHECK(fl_ulp(FL_FMT_E4M3, 448.0) == 32.0, "ulp e4m3 448");
    CHECK(fl_ulp(FL_FMT_E4M3, 500.0) == 32.0, "ulp e4m3 500 (top binade continues)");
    CHECK(fl_ulp(FL_FMT_E4M3, 600.0) == 64.0, "ulp e4m3 600: binade [512, 1024)");
    CHECK(fl_ulp(FL_FMT_E4M3, 0x1p-12) == 0x1p-9, "ulp e4m3 below subnormal floor");
    CHECK(fl_ulp(FL_FMT_E4M3, 0.0) == 0x1p-9, "ulp e4m3 0");
    CHECK(fl_ulp(FL_FMT_BF16, 1.0) == 0x1p-7 && fl_ulp(FL_FMT_BF16, 0x1p-140) == 0x1p-133, "ulp bf16");
    CHECK(fl_ulp(FL_FMT_FP16, 65504.0) == 32.0 && fl_ulp(FL_FMT_FP16, 1e-9) == 0x1p-24, "ulp fp16");
    CHECK(fl_ulp(FL_FMT_E5M2, -3.0) == 0.5, "ulp e5m2 -3");
    CHECK(isnan(fl_ulp(FL_FMT_E4M3, NAN)) && isnan(fl_ulp(FL_FMT_E4M3, INFINITY)), "ulp of NaN/Inf is NaN");

    const fl_format fmts[] = { FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E3M2, FL_FMT_E2M3,
                               FL_FMT_E2M1, FL_FMT_E4M3FNUZ, FL_FMT_E5M2FNUZ };
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        const fl_format f = fmts[k];
        const fl_format_desc *d = fl_format_get(f);
        const uint32_t sbit = 1u << (d->bits - 1);
        /* Walk the positive finite encodings upward. */
        for (uint32_t c = 0; c < d->max_mag; c++) {
            const double lo = fl_decode(f, c), hi = fl_decode(f, c + 1);
            int64_t dist;
            CHECK(fl_ulp_distance(&dist, f, c, c + 1) == 0 && dist == 1, "%s dist(0x%x, 0x%x) = %lld", fl_format_name(f), c,
                  c + 1, (long long)dist);
            CHECK(hi - lo == fl_ulp(f, lo), "%s gap above %a is %a, ulp says %a", fl_format_name(f), lo, hi - lo, fl_ulp(f, lo));
            /* Negative side mirrors (fnuz has no -0: skip c == 0 there). */
            if (!(d->specials == FL_SPEC_FNUZ && c == 0)) {
                CHECK(fl_ulp_distance(&dist, f, sbit | (c + 1), sbit | c) == 0 && dist == 1, "%s negative dist at 0x%x",
                      fl_format_name(f), c);
            }
            /* The error of the upper neighbour against the lower one's value is exactly 1 ulp,
               against the midpoint exactly 0.5 (both exact in double). */
            CHECK(fl_ulp_error(f, c + 1, lo) == 1.0, "%s ulp_error(0x%x, %a) = %g", fl_format_name(f), c + 1, lo,
                  fl_ulp_error(f, c + 1, lo));
            CHECK(fl_ulp_error(f, c, 0.5 * (lo + hi)) == 0.5 * (hi - lo) / fl_ulp(f, 0.5 * (lo + hi)),
                  "%s ulp_error at midpoint above %a", fl_format_name(f), lo);
        }
        /* Across zero: +min_sub and -min_sub are 2 apart, +0 and -0 are 0 apart. */
        int64_t dist;
        if (d->specials != FL_SPEC_FNUZ) {
            CHECK(fl_ulp_distance(&dist, f, 0, sbit) == 0 && dist == 0, "%s +0/-0 distance %lld", fl_format_name(f), (long long)dist);
        }
        CHECK(fl_ulp_distance(&dist, f, sbit | 1, 1) == 0 && dist == 2, "%s -min_sub to +min_sub %lld", fl_format_name(f), (long long)dist);
        CHECK(fl_ulp_distance(&dist, f, sbit | d->max_mag, d->max_mag) == 0 && dist == 2 * (int64_t)d->max_mag,
              "%s -max to +max", fl_format_name(f));
        /* NaN: a class of its own. */
        if (d->specials != FL_SPEC_NONE) {
            CHECK(fl_ulp_distance(&dist, f, d->nan, 1) == -1 && dist == 0, "%s NaN vs finite must be -1", fl_format_name(f));
            CHECK(fl_ulp_distance(&dist, f, d->nan, d->nan) == 1, "%s NaN vs NaN must be 1", fl_format_name(f));
            CHECK(isnan(fl_ulp_error(f, d->nan, 1.0)), "%s ulp_error of NaN must be NaN", fl_format_name(f));
        }
        if (d->specials == FL_SPEC_IEEE) {
            const uint32_t inf = d->max_mag + 1;
            CHECK(fl_ulp_distance(&dist, f, d->max_mag, inf) == 0 && dist == 1, "%s max to Inf is one step", fl_format_name(f));
            CHECK(fl_ulp_error(f, inf, INFINITY) == 0 && isinf(fl_ulp_error(f, inf, 1.0)) && isinf(fl_ulp_error(f, 1, INFINITY)),
                  "%s ulp_error with infinities", fl_format_name(f));
        }
    }
    /* Saturation shows as a finite error: e4m3 448 against an exact 1000 is (1000-448)/64 ulps. */
    CHECK(fl_ulp_error(FL_FMT_E4M3, 0x7E, 1000.0) == (1000.0 - 448.0) / 64.0, "e4m3 saturated error %g",
          fl_ulp_error(FL_FMT_E4M3, 0x7E, 1000.0));
    /* E8M0 ordinals are the codes. */
    int64_t dist;
    CHECK(fl_ulp_distance(&dist, FL_FMT_E8M0, 0x10, 0x20) == 0 && dist == 16, "e8m0 distance");
    PASS("test_ulp");
}
