/* test_ulp_fast.c — the fast path's enclosures contain the exact value, and are as tight as claimed.
 *
 * For every fast function, inputs: every float32 whose exponent lies in each region of the evaluator
 * (sampled: N_PER random mantissas per binade and sign, seed printed), plus the region boundaries and
 * their neighbours.  The exact value is MPFR's (fl_ref_value at 256 bits): it must lie in
 * [c - r, c + r], and r must be small enough for the judge to decide (r <= 2^-60 |c| outside the
 * proxies).  Prints the largest observed |f - c| / r per function (the bounds' slack).  For gelu also
 * every Taylor node and node switch, and the CLI's fast report against --mpfr-only on ranges across its
 * regions (byte for byte).
 * Usage: test_ulp_fast [N_PER]   (default 40) */
#include "check.h"
#include "fl_round.h"
#include "ref.h"
#include "ulp/ulp_fast.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t next32(void)
{
    return (uint32_t)(fl_splitmix64(&rng) >> 32);
}

static double worst_slack;
static double gelu_taylor_slack, gelu_taylor_rel;
static float worst_x;

static void check_one2(const fl_fast_fn *fn, const fl_ref_fn *ref, const fl_ref_evaluator *ev, uint32_t xb, uint32_t ub);

static void check_one(const fl_fast_fn *fn, const fl_ref_fn *ref, const fl_ref_evaluator *ev, uint32_t xb)
{
    check_one2(fn, ref, ev, xb, 0);
}

/* x = the float of xb; for two-input functions u = the float of ub */
static void check_one2(const fl_fast_fn *fn, const fl_ref_fn *ref, const fl_ref_evaluator *ev, uint32_t xb, uint32_t ub)
{
    const float x = fl_f32_from_bits(xb), u = fl_f32_from_bits(ub);
    fl_encl e;
    const int st = fn->eval ? fn->eval(&e, x) : fn->eval2(&e, x, u);
    if (st != FL_FAST_OK)
        return;
    fl_ref_params p;
    fl_ref_params_init(&p, ref);
    mpfr_t xv, uv, f, c, d;
    mpfr_inits2(256, xv, uv, f, c, d, (mpfr_ptr)0);
    mpfr_set_flt(xv, x, MPFR_RNDN);
    mpfr_set_flt(uv, u, MPFR_RNDN);
    mpfr_srcptr xs[2] = { xv, uv };
    CHECK(fl_ref_value(f, ev->eval, xs, &p) == 0, "%s: no reference at x=%a", fn->name, (double)x);
    mpfr_set_d(c, e.ch, MPFR_RNDN);
    mpfr_add_d(c, c, e.cl, MPFR_RNDN); /* exact at 256 bits for our centres */
    const int proxy = fabs(e.ch) == 0x1p-900 || e.cl == -0x1p-900 || e.cl == 0x1p-900;
    if (proxy) {
        /* the exact value must lie in the proxy's region: (0, 2^-180) or (1 - 2^-149, 1), signed */
        mpfr_abs(d, f, MPFR_RNDN);
        const int tiny = mpfr_cmp_d(d, 0x1p-180) < 0 && !mpfr_zero_p(d) && (mpfr_sgn(f) > 0) == (e.ch > 0);
        mpfr_sub_d(d, d, 1.0, MPFR_RNDN);
        const int near1 = mpfr_sgn(d) <= 0 && /* 0: f rounded to 1 at 256 bits */ mpfr_cmp_d(d, -0x1p-149) > 0 && (mpfr_sgn(f) > 0) == (e.ch > 0);
        CHECK(tiny || near1, "%s: proxy %a%+a wrong at x=%a (f=%g)", fn->name, e.ch, e.cl, (double)x,
              mpfr_get_d(f, MPFR_RNDN));
    } else {
        mpfr_sub(d, f, c, MPFR_RNDN);
        /* one-sided enclosures: f strictly on their side of c */
        CHECK(e.side == 0 || mpfr_sgn(d) == e.side || mpfr_zero_p(d) /* f = c at 256 bits */, "%s: f not on side %d of c=%a at x=%a", fn->name, e.side, e.ch,
              (double)x);
        mpfr_abs(d, d, MPFR_RNDU);
        /* f is within 2^-256 |f| of the exact value, or a stand-in within 2^-200 (fl_ref_near) */
        const double dist = mpfr_get_d(d, MPFR_RNDU) - fabs(mpfr_get_d(f, MPFR_RNDN)) * 0x1p-199;
        CHECK(dist <= e.r, "%s: enclosure misses f at x=%a (0x%08x): c=%a%+a r=%a |f-c|=%a", fn->name, (double)x,
              xb, e.ch, e.cl, e.r, dist);
        CHECK(e.r <= 0x1p-60 * fabs(e.ch) + 0x1p-1019 || e.r == 0, "%s: radius %a too wide for c=%a at x=%a", fn->name, e.r, e.ch,
              (double)x);
        /* gelu's Taylor region 2^-30 <= |x| < 3: the slack, and the radius relative to |c| */
        if (!strcmp(fn->name, "gelu") && fabsf(x) >= 0x1p-30f && fabsf(x) < 3.0f) {
            if (dist / e.r > gelu_taylor_slack)
                gelu_taylor_slack = dist / e.r;
            if (e.r / fabs(e.ch) > gelu_taylor_rel)
                gelu_taylor_rel = e.r / fabs(e.ch);
        }
        /* the slack of the double-double middles (radii 2^-81 .. 2^-70 relative), not the series */
        if (e.r >= 0x1p-85 * fabs(e.ch) && fabs(x) >= 0x1p-20f && dist / e.r > worst_slack) {
            worst_slack = dist / e.r;
            worst_x = x;
        }
    }
    mpfr_clears(xv, uv, f, c, d, (mpfr_ptr)0);
}

/* The CLI's report with the fast path equals --mpfr-only's (JSON, byte for byte) on ranges across the
   fast path's region edges (below).  Needs the CLI ($FP8LAB, else build/fp8lab). */
static char *cli_json(const char *cli, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s ulp %s --json --no-progress 2>/dev/null", cli, args);
    FILE *p = popen(cmd, "r");
    CHECK(p, "cannot run %s", cmd);
    static char bufs[2][1 << 16];
    static int w;
    char *b = bufs[w++ % 2];
    const size_t n = fread(b, 1, sizeof bufs[0] - 1, p);
    b[n] = 0;
    CHECK(pclose(p) == 0 && n > 0, "failed: %s", cmd);
    return b;
}

static void cli_vs_mpfr(void)
{
    const char *cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    FILE *f = fopen(cli, "rb");
    if (!f) {
        printf("note: %s missing: CLI comparison skipped\n", cli);
        return;
    }
    fclose(f);
    /* gelu: 0, 2^-30, 1/128, -0.75, -1.52, 3 (both signs); sigmoid and tanh: the tails next to 1
       (sigmoid x in [37, 104), tanh |x| in [19, 53)) and their edges */
    static const struct {
        const char *impl, *range;
    } cases[] = { { "gelu_erff_f32", "0x00000000:0x00000100" }, { "gelu_erff_f32", "0x80000000:0x80000100" },
                  { "gelu_erff_f32", "0x307fff00:0x30800100" }, { "gelu_erff_f32", "0xb07fff00:0xb0800100" },
                  { "gelu_erff_f32", "0x3bffff00:0x3c000100" }, { "gelu_erff_f32", "0xbbffff00:0xbc000100" },
                  { "gelu_erff_f32", "0xbf3fff00:0xbf400100" }, { "gelu_erff_f32", "0xbfc2ff00:0xbfc30100" },
                  { "gelu_erff_f32", "0x403fff00:0x40400100" }, { "gelu_erff_f32", "0xc03fff00:0xc0400100" },
                  { "sigmoid_via_tanhf_f32", "0x4213ff00:0x42140100" }, /* 37 */
                  { "sigmoid_f32", "0x4213ff00:0x42140100" },
                  { "sigmoid_via_tanhf_f32", "0x42cfff00:0x42d00100" }, /* 104 */
                  { "tanhf_f32", "0x4197ff00:0x41980100" },             /* 19 */
                  { "tanhf_f32", "0xc197ff00:0xc1980100" },
                  { "tanhf_f32", "0x4253ff00:0x42540100" },             /* 53 */
                  { "tanhf_f32", "0xc253ff00:0xc2540100" } };
    char args[256];
    for (size_t r = 0; r < FL_ARRAY_LEN(cases); r++) {
        snprintf(args, sizeof args, "--impl %s --range %s", cases[r].impl, cases[r].range);
        const char *a = cli_json(cli, args);
        snprintf(args, sizeof args, "--impl %s --range %s --mpfr-only", cases[r].impl, cases[r].range);
        const char *b = cli_json(cli, args);
        CHECK(!strcmp(a, b), "--mpfr-only differs from the fast path: %s --range %s", cases[r].impl, cases[r].range);
    }
    printf("fast path == --mpfr-only on %zu CLI ranges (gelu regions, sigmoid/tanh tails)\n", FL_ARRAY_LEN(cases));
}

/* The judge's common-case shortcut against the general judge, on enclosures built around every kind
   of decision point of every output format: codes, midpoints between codes, powers of two, the
   subnormal range and zero, proxies, the overflow boundary, one-sided enclosures, and outputs that
   are the reference, its neighbours, random codes, NaN and Inf.  Where the shortcut decides, the
   general judge must decide too, and identically. */
static double uni(void) { return (next32() >> 8) * 0x1p-24; }

static int same_verdict(const fl_ulp_verdict *a, const fl_ulp_verdict *b)
{
    return a->ref == b->ref && a->cr == b->cr && a->special == b->special && a->hist == b->hist &&
           fl_f64_bits(a->ulp) == fl_f64_bits(b->ulp);
}

static void judge_common_vs_general(int n)
{
    long decided_common = 0, decided_general = 0, total = 0, only_common = 0, points = 0;
    for (int f = 0; f < FL_FMT_COUNT; f++) {
        if (f == FL_FMT_E8M0)
            continue;
        const fl_format_desc *d = fl_format_get((fl_format)f);
        const uint32_t mask = d->bits == 32 ? 0xFFFFFFFFu : (1u << d->bits) - 1;
        for (int ovf = 0; ovf < FL_OVF_COUNT; ovf++) {
            fl_fast_fmt ff;
            fl_fast_fmt_init(&ff, (fl_format)f, (fl_overflow)ovf);
            for (int i = 0; i < n; i++) {
                uint32_t q = next32() & mask;
                const int kind = (int)(next32() % 8);
                if (kind == 3) /* near the bottom of the range: subnormals, zero, 2^emin */
                    q = (q & (1u << (d->bits - 1))) | (next32() % (4u << d->mbits));
                if (kind == 4) /* near the top: max and the overflow boundary */
                    q = (q & (1u << (d->bits - 1))) | (d->max_mag - next32() % 3);
                if (kind == 5) /* powers of two */
                    q &= ~((1u << d->mbits) - 1);
                const double v = (double)fl_decode_f32(d, q);
                if (!isfinite(v) || (d->specials == FL_SPEC_FNUZ && q == d->nan))
                    continue;
                const uint32_t mag = q & ((1u << (d->bits - 1)) - 1);
                const double vn = mag < d->max_mag ? (double)fl_decode_f32(d, (q & ~((1u << (d->bits - 1)) - 1)) | (mag + 1))
                                                   : v + (v - (double)fl_decode_f32(d, q - 1));
                const double w = fabs(vn - v) > 0 ? fabs(vn - v) : 0x1p-149;
                const double sg = v < 0 || (v == 0 && (q >> (d->bits - 1))) ? -1 : 1;
                double ch;
                switch (next32() % 7) {
                case 0: ch = v; break;
                case 1: ch = v + sg * w * (1.2 * uni() - 0.6); break;
                case 2: ch = v + sg * 0.5 * w * (1 + ldexp(2 * uni() - 1, -(int)(next32() % 60))); break;
                case 3: ch = v - sg * 0.25 * w * (1 + ldexp(2 * uni() - 1, -(int)(next32() % 60))); break;
                case 4: ch = sg * 0x1p-900 * (1 + uni()); break;
                case 5: ch = v * (1 + ldexp(2 * uni() - 1, -(int)(next32() % 60))); break;
                default: ch = v * 1.0625 * (1 + uni()); break;
                }
                /* cl and r are small multiples of one power of two, so that c - r and c + r are exact
                   double-doubles (the points checked below) */
                const double base = ch == 0 ? 0 : ldexp(1, ilogb(ch) - 72 - (int)(next32() % 60));
                double cl = next32() % 2 ? base * ((double)(next32() % (1u << 20)) - 0x1p19) : 0;
                const double t = ch + cl;
                cl = (ch - t) + cl; /* normalised: (t, cl) */
                ch = t;
                fl_encl e = { ch, cl, 0, 0 };
                if (next32() % 4)
                    e.r = base * (double)(next32() % (1u << 20)) * ldexp(1, (int)(next32() % 31));
                if (e.r > 0)
                    e.side = (int)(next32() % 3) - 1;
                uint32_t y;
                switch (next32() % 6) {
                case 0: case 1: y = q; break;
                case 2: y = (q + 1) & mask; break;
                case 3: y = (q - 1) & mask; break;
                case 4: y = next32() & mask; break;
                default: y = d->specials == FL_SPEC_IEEE && next32() % 2 ? (d->max_mag + 1) : d->nan; break;
                }
                fl_ulp_verdict a, b;
                const int ca = fl_fast_judge_common(&a, FL_FAST_OK, &e, &ff, y);
                const int cb = fl_fast_judge_general(&b, FL_FAST_OK, &e, &ff, y);
                total++;
                decided_common += ca;
                decided_general += cb;
                if (ca && cb)
                    CHECK(same_verdict(&a, &b),
                          "%s ovf %d: ch %a cl %a r %a side %d y 0x%x: shortcut ref 0x%x cr %d special %d ulp %a, general ref 0x%x cr %d special %d ulp %a",
                          fl_format_name((fl_format)f), ovf, e.ch, e.cl, e.r, e.side, y, a.ref, a.cr, a.special, a.ulp, b.ref, b.cr,
                          b.special, b.ulp);
                if (ca && !cb) {
                    /* the general judge is more cautious here (e.g. an enclosure across 2^emin, where
                       the ulp is the same on both sides): the shortcut's verdict must hold at both ends
                       of the enclosure and at its centre, each judged as a point by the general judge */
                    only_common++;
                    for (int p = -1; p <= 1; p++) {
                        const double lo = e.cl + p * e.r; /* exact */
                        const double h = e.ch + lo;
                        fl_encl pt = { h, (e.ch - h) + lo, 0, 0 };
                        fl_ulp_verdict c;
                        if (!fl_fast_judge_general(&c, FL_FAST_OK, &pt, &ff, y))
                            continue;
                        points++;
                        CHECK(same_verdict(&a, &c),
                              "%s ovf %d: ch %a cl %a r %a side %d y 0x%x: shortcut ref 0x%x cr %d special %d ulp %a, at the point %+d r: ref 0x%x cr %d special %d ulp %a",
                              fl_format_name((fl_format)f), ovf, e.ch, e.cl, e.r, e.side, y, a.ref, a.cr, a.special, a.ulp, p, c.ref,
                              c.cr, c.special, c.ulp);
                    }
                }
            }
        }
    }
    printf("judge shortcut vs general: %ld enclosures, general decided %ld, shortcut %ld (%ld of them left open by the "
           "general judge, checked at %ld points), all agree\n", total, decided_general, decided_common, only_common, points);
    CHECK(decided_common * 2 > decided_general, "the shortcut decided too few cases (%ld of %ld)", decided_common, decided_general);
}

int main(int argc, char **argv)
{
    const int n_per = argc > 1 ? atoi(argv[1]) : 40;
    fl_fast_init();
    const char *names[] = { "silu", "sigmoid", "tanh", "gelu", "gelu_tanh" };
    /* region edges used by the evaluators */
    const float edges[] = { 0x1p-30f, 0x1p-20f, 0.55f, 3.0f, 9.0f, 10.0f, 12.0f, 16.0f, 52.0f, 53.0f, 64.0f, 104.0f, 125.0f, 140.0f };
    printf("seed 0x243F6A8885A308D3, %d inputs per binade and sign\n", n_per);
    judge_common_vs_general(2500 * n_per);
    for (size_t k = 0; k < FL_ARRAY_LEN(names); k++) {
        const fl_fast_fn *fn = fl_fast_lookup(names[k]);
        const fl_ref_fn *ref = fl_ref_lookup(names[k]);
        CHECK(fn && ref, "missing %s", names[k]);
        const fl_ref_evaluator *ev = fl_ref_find_eval(ref, "");
        worst_slack = 0;
        for (uint32_t sign = 0; sign < 2; sign++)
            for (uint32_t ex = 0; ex < 255; ex++) {
                /* the middle binades (|x| in [2^-31, 2^8]) densely, the rest lightly */
                const int n = (ex >= 96 && ex <= 135) ? n_per : 3;
                for (int i = 0; i < n; i++)
                    check_one(fn, ref, ev, sign << 31 | ex << 23 | (next32() & 0x7FFFFF));
                check_one(fn, ref, ev, sign << 31 | ex << 23);
                check_one(fn, ref, ev, sign << 31 | ex << 23 | 0x7FFFFF);
            }
        for (size_t i = 0; i < FL_ARRAY_LEN(edges); i++)
            for (int s = -1; s <= 1; s += 2)
                for (int dlt = -2; dlt <= 2; dlt++)
                    check_one(fn, ref, ev, (uint32_t)((int32_t)fl_f32_bits(s * edges[i]) + dlt));
        check_one(fn, ref, ev, 0);
        check_one(fn, ref, ev, 0x80000000u);
        if (!strcmp(names[k], "gelu")) {
            /* gelu's Taylor nodes k/64, |k| <= 192: every node and every switch between two nodes (the
               midpoints (2k+1)/128), with their float neighbours, on both sides of 0 */
            for (int j = -192; j <= 192; j++)
                for (int mid = 0; mid < 2; mid++) {
                    const float v = (float)(j * 0x1p-6 + mid * 0x1p-7);
                    if (v == 0 || fabsf(v) >= 3.0f)
                        continue;
                    for (int dlt = -2; dlt <= 2; dlt++)
                        check_one(fn, ref, ev, (uint32_t)((int32_t)fl_f32_bits(v) + dlt));
                }
        }
        printf("%-10s largest |f - c| / r in the double-double middle = %.3g (x=%a)\n", names[k], worst_slack,
               (double)worst_x);
        if (!strcmp(names[k], "gelu"))
            printf("%-10s Taylor region 2^-30 <= |x| < 3: largest |f - c| / r = %.3g, largest r / |c| = 2^%.2f\n",
                   names[k], gelu_taylor_slack, log2(gelu_taylor_rel));
    }
    /* swiglu(g, u): random bf16 pairs over the whole range, and g across silu's regions */
    {
        const fl_fast_fn *fn = fl_fast_lookup("swiglu");
        const fl_ref_fn *ref = fl_ref_lookup("swiglu");
        CHECK(fn && ref, "missing swiglu");
        const fl_ref_evaluator *ev = fl_ref_find_eval(ref, "");
        worst_slack = 0;
        for (int i = 0; i < 50 * n_per; i++) {
            const uint32_t r = next32();
            check_one2(fn, ref, ev, (r & 0xFFFF0000u), r << 16);
        }
        for (size_t i = 0; i < FL_ARRAY_LEN(edges); i++)
            for (int s = -1; s <= 1; s += 2)
                for (int k = 0; k < 20; k++)
                    check_one2(fn, ref, ev, fl_f32_bits(s * edges[i]) & 0xFFFF0000u, next32() & 0xFFFF0000u);
        const float far[] = { 200.0f, 600.0f, 601.0f, -599.0f, -601.0f, 1e30f, -1e30f };
        for (size_t i = 0; i < FL_ARRAY_LEN(far); i++)
            for (int k = 0; k < 20; k++)
                check_one2(fn, ref, ev, fl_f32_bits(far[i]), next32());
        printf("%-10s largest |f - c| / r in the double-double middle = %.3g\n", "swiglu", worst_slack);
    }
    cli_vs_mpfr();
    PASS("test_ulp_fast");
}
