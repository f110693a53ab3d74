/* test_ulp_report.c — the ulp report accumulator: buckets, the grid, the exact sum and mean, the worst
 * list's order, and merges that are exactly associative and commutative (any sharding, any order). */
#include "check.h"
#include "ulp_report.h"

#include <math.h>
#include <string.h>

static uint64_t rng = 42;
static uint64_t next64(void)
{
    return fl_splitmix64(&rng);
}

/* A random judged case: errors spread over every bucket, a few huge, infinite and tied ones. */
static fl_ulp_case random_case(uint64_t index)
{
    fl_ulp_case c;
    memset(&c, 0, sizeof c);
    c.index = index;
    c.in[0] = next64() & 0xFFFFFFFF;
    c.out = (uint32_t)next64();
    c.ref = c.out;
    const unsigned k = next64() % 100;
    if (k < 40)
        c.ulp = fl_ulp_grid_round((double)(next64() % 1000) / 2000); /* <= 0.5 */
    else if (k < 70)
        c.ulp = fl_ulp_grid_round(ldexp((double)(next64() >> 11), -53) * 20);
    else if (k < 80)
        c.ulp = 1.5; /* many ties: ordering by index */
    else if (k < 85)
        c.ulp = fl_ulp_grid_round(ldexp(1.0 + (double)(next64() >> 11) * 0x1p-53, (int)(next64() % 250)));
    else if (k < 87)
        c.ulp = INFINITY;
    else
        c.ulp = 0;
    c.cr = c.ulp <= 0.5 && k % 3 != 0;
    if (!c.cr)
        c.ref ^= 1;
    c.special = isinf(c.ulp) || k == 99;
    /* an edge's exact error lies above it now and then (the judge decides that; any value will do here) */
    c.hist = (int)fl_ulp_hist_bucket(c.ulp, (int)(next64() & 1));
    return c;
}

static void check_equal(const fl_ulp_report *a, const fl_ulp_report *b, const char *what)
{
    CHECK(a->count == b->count && a->correctly_rounded == b->correctly_rounded && a->faithful == b->faithful &&
              a->mismatched_special == b->mismatched_special && a->infinite == b->infinite,
          "%s: counts differ", what);
    CHECK(!memcmp(a->hist, b->hist, sizeof a->hist), "%s: histograms differ", what);
    CHECK(!memcmp(a->sum, b->sum, sizeof a->sum), "%s: sums differ", what);
    CHECK(a->max_ulp == b->max_ulp, "%s: max %a vs %a", what, a->max_ulp, b->max_ulp);
    CHECK(a->n_worst == b->n_worst, "%s: worst lists of %d and %d", what, a->n_worst, b->n_worst);
    for (int i = 0; i < a->n_worst; i++)
        CHECK(!memcmp(&a->worst[i], &b->worst[i], sizeof a->worst[i]), "%s: worst[%d] differs (index %llu vs %llu)",
              what, i, (unsigned long long)a->worst[i].index, (unsigned long long)b->worst[i].index);
    CHECK(a->n_mismatch == b->n_mismatch, "%s: mismatch lists of %d and %d", what, a->n_mismatch, b->n_mismatch);
    for (int i = 0; i < a->n_mismatch; i++)
        CHECK(!memcmp(&a->mismatch[i], &b->mismatch[i], sizeof a->mismatch[i]), "%s: mismatch[%d] differs", what, i);
}

/* A case of error e in the bucket of its exact error (above: the exact error lies above an edge). */
static fl_ulp_case make_case(uint64_t index, double e, int above, int special)
{
    fl_ulp_case c;
    memset(&c, 0, sizeof c);
    c.index = index;
    c.ulp = e;
    c.special = special;
    c.hist = (int)fl_ulp_hist_bucket(e, above);
    return c;
}

int main(void)
{
    /* buckets: the reported error's, the edges inclusive upper bounds unless the exact error lies above */
    const double edges[] = { 0, 0x1p-20, 0.5, 0.5 + 0x1p-20, 1, 2, 4, 16, 16 + 0x1p-20, 1e300, INFINITY };
    const fl_ulp_hist want[] = { FL_ULP_HIST_0, FL_ULP_HIST_HALF, FL_ULP_HIST_HALF, FL_ULP_HIST_1, FL_ULP_HIST_1,
                                 FL_ULP_HIST_2, FL_ULP_HIST_4, FL_ULP_HIST_16, FL_ULP_HIST_MORE, FL_ULP_HIST_MORE,
                                 FL_ULP_HIST_MORE };
    for (size_t i = 0; i < FL_ARRAY_LEN(edges); i++) {
        CHECK(fl_ulp_hist_bucket(edges[i], 0) == want[i], "bucket of %a: %d, want %d", edges[i],
              (int)fl_ulp_hist_bucket(edges[i], 0), (int)want[i]);
        const int edge = edges[i] == 0.5 || edges[i] == 1 || edges[i] == 2 || edges[i] == 4 || edges[i] == 16;
        CHECK(fl_ulp_hist_edge(edges[i]) == edge, "edge %a", edges[i]);
        CHECK(fl_ulp_hist_bucket(edges[i], 1) == (edge ? want[i] + 1 : want[i]), "bucket of %a above: %d", edges[i],
              (int)fl_ulp_hist_bucket(edges[i], 1));
    }
    /* faithful counts the exact error: 1 ulp exactly is faithful, 1 + 2^-30 (reported as 1) is not */
    {
        fl_ulp_report f;
        fl_ulp_report_init(&f);
        fl_ulp_case one = make_case(0, 1.0, 0, 0), above = make_case(1, 1.0, 1, 0);
        fl_ulp_report_add(&f, &one);
        fl_ulp_report_add(&f, &above);
        CHECK(f.faithful == 1 && f.hist[FL_ULP_HIST_1] == 1 && f.hist[FL_ULP_HIST_2] == 1 && f.max_ulp == 1.0,
              "faithful %llu, <=1 %llu, <=2 %llu", (unsigned long long)f.faithful,
              (unsigned long long)f.hist[FL_ULP_HIST_1], (unsigned long long)f.hist[FL_ULP_HIST_2]);
    }
    /* the largest finite error keeps its input whatever the class mismatches: 11 NaN outputs (infinite
       errors) and one finite error of 1756148.79 ulp */
    {
        fl_ulp_report f, g;
        fl_ulp_report_init(&f);
        fl_ulp_report_init(&g);
        for (uint64_t i = 0; i < 11; i++) {
            const fl_ulp_case nan_out = make_case(100 + i, INFINITY, 0, 1);
            fl_ulp_report_add(i % 2 ? &f : &g, &nan_out);
        }
        const fl_ulp_case big = make_case(7, fl_ulp_grid_round(1756148.79), 0, 0);
        fl_ulp_report_add(&g, &big);
        fl_ulp_report_merge(&f, &g);
        CHECK(f.n_worst == 1 && f.worst[0].index == 7 && f.worst[0].ulp == f.max_ulp,
              "the worst finite case: %d cases, first index %llu", f.n_worst, (unsigned long long)f.worst[0].index);
        CHECK(f.n_mismatch == FL_ULP_WORST && f.mismatch[0].index == 100 && f.mismatched_special == 11 &&
                  f.infinite == 11,
              "mismatch list %d, first %llu", f.n_mismatch, (unsigned long long)f.mismatch[0].index);
    }

    /* grid: nearest multiple of 2^-20 (ties to even) below 2^33, doubles above */
    CHECK(fl_ulp_grid_round(0x1p-21) == 0, "tie at 2^-21 goes to even 0");
    CHECK(fl_ulp_grid_round(0x3p-21) == 0x2p-20, "tie at 3*2^-21 goes to even 2*2^-20");
    CHECK(fl_ulp_grid_round(0.5 + 0x1p-22) == 0.5, "0.5 + 2^-22 -> 0.5");
    CHECK(fl_ulp_grid_round(0x1.8p40) == 0x1.8p40 && fl_ulp_on_grid(0x1.8p40), "large values stay");
    CHECK(!fl_ulp_on_grid(0x1p-30) && fl_ulp_on_grid(0x5p-20), "on_grid");

    /* the exact sum survives errors of every size: 2^200 + 3 * 2^-20 - ... */
    fl_ulp_report r;
    fl_ulp_report_init(&r);
    fl_ulp_case c;
    memset(&c, 0, sizeof c);
    const double vals[] = { 0x1p200, 0x1p-20, 0x1p-20, 0x1p-20, 0x1.fffffffffffffp250, 3.25 };
    for (size_t i = 0; i < FL_ARRAY_LEN(vals); i++) {
        c.index = i;
        c.ulp = vals[i];
        fl_ulp_report_add(&r, &c);
    }
    char s[160];
    fl_ulp_sum_to_string(s, sizeof s, r.sum);
    uint64_t back[FL_ULP_SUM_LIMBS];
    CHECK(fl_ulp_sum_from_string(back, s) == 0 && !memcmp(back, r.sum, sizeof back), "sum string round trip: %s", s);
    CHECK(fl_ulp_sum_from_string(back, "12x") != 0 && fl_ulp_sum_from_string(back, "") != 0, "bad sums rejected");
    /* sum in units: 2^220 + 3 + (2^53-1) 2^218 + 3.25 * 2^20; check the low limb and the top bits */
    CHECK(r.sum[0] == 3 + (uint64_t)(3.25 * 0x1p20), "low limb %llu", (unsigned long long)r.sum[0]);
    CHECK(r.max_ulp == 0x1.fffffffffffffp250, "max");
    const double mean = fl_ulp_report_mean(&r);
    const double want_mean = (0x1p200 + 0x1.fffffffffffffp250) / 6; /* the small terms vanish below an ulp */
    CHECK(fabs(mean - want_mean) <= 0x1p-52 * want_mean, "mean %a vs %a", mean, want_mean);
    /* a simple mean exactly */
    fl_ulp_report_init(&r);
    for (int i = 0; i < 3; i++) {
        c.index = (uint64_t)i;
        c.ulp = i == 2 ? 1.0 : 0.25;
        fl_ulp_report_add(&r, &c);
    }
    CHECK(fl_ulp_report_mean(&r) == 0.5, "mean of 0.25 0.25 1 is 0.5: %a", fl_ulp_report_mean(&r));

    /* worst list: finite errors, error desc, index asc, exactly 10; the infinite one in the mismatch list */
    fl_ulp_report_init(&r);
    const double ws[] = { 1.5, 2.0, INFINITY, 1.5, 0.25, 2.0, 7.0, 1.5, 0.5, 3.0, 1.5, 9.0, 0.125 };
    const uint64_t order[] = { 11, 6, 9, 1, 5, 0, 3, 7, 10, 8 };
    for (size_t i = 0; i < FL_ARRAY_LEN(ws); i++) {
        c = make_case(i, ws[i], 0, isinf(ws[i]));
        fl_ulp_report_add(&r, &c);
    }
    CHECK(r.n_worst == FL_ULP_WORST, "worst list holds %d", r.n_worst);
    for (int i = 0; i < FL_ULP_WORST; i++)
        CHECK(r.worst[i].index == order[i], "worst[%d] index %llu, want %llu", i, (unsigned long long)r.worst[i].index,
              (unsigned long long)order[i]);
    CHECK(r.infinite == 1 && r.max_ulp == 9.0 && r.worst[0].ulp == r.max_ulp, "infinite errors stay out of max");
    CHECK(r.n_mismatch == 1 && r.mismatch[0].index == 2, "the mismatch list: %d", r.n_mismatch);

    /* merges: shards added in any order, merged in any grouping, equal the whole */
    enum { N = 20000, SHARDS = 7 };
    static fl_ulp_case cases[N];
    for (int i = 0; i < N; i++)
        cases[i] = random_case((uint64_t)i);
    fl_ulp_report whole, parts[SHARDS];
    fl_ulp_report_init(&whole);
    for (int i = 0; i < N; i++)
        fl_ulp_report_add(&whole, &cases[i]);
    for (int k = 0; k < SHARDS; k++)
        fl_ulp_report_init(&parts[k]);
    for (int i = N - 1; i >= 0; i--) /* reversed, interleaved */
        fl_ulp_report_add(&parts[(unsigned)i * 2654435761u % SHARDS], &cases[i]);
    fl_ulp_report m1, m2, m3;
    fl_ulp_report_init(&m1);
    for (int k = 0; k < SHARDS; k++)
        fl_ulp_report_merge(&m1, &parts[k]);
    check_equal(&whole, &m1, "left fold");
    fl_ulp_report_init(&m2);
    for (int k = SHARDS - 1; k >= 0; k--)
        fl_ulp_report_merge(&m2, &parts[k]);
    check_equal(&whole, &m2, "right fold");
    /* tree: ((0 1) (2 3)) ((4 5) 6) */
    fl_ulp_report a = parts[0], b = parts[2], d = parts[4];
    fl_ulp_report_merge(&a, &parts[1]);
    fl_ulp_report_merge(&b, &parts[3]);
    fl_ulp_report_merge(&d, &parts[5]);
    fl_ulp_report_merge(&d, &parts[6]);
    fl_ulp_report_merge(&a, &b);
    m3 = d;
    fl_ulp_report_merge(&m3, &a);
    check_equal(&whole, &m3, "tree");
    PASS("test_ulp_report");
}
