/* ulp_report.c — see ulp_report.h. */
#include "ulp_report.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* 2^(53 - GRID): below it the grid is the multiples of 2^-GRID, above it the doubles themselves. */
#define GRID_TOP 0x1p33
static_assert(53 - FL_ULP_GRID_BITS == 33, "GRID_TOP out of step with FL_ULP_GRID_BITS");

static const char *const hist_labels[] = { "<=2^-21", "<=0.5", "<=1", "<=2", "<=4", "<=16", ">16" };
static_assert(FL_ULP_GRID_BITS + 1 == 21, "the first bucket's label out of step with FL_ULP_GRID_BITS");
static_assert(FL_ARRAY_LEN(hist_labels) == FL_ULP_HIST_COUNT, "hist_labels out of step with fl_ulp_hist");

const char *fl_ulp_hist_label(fl_ulp_hist b) { return (unsigned)b < FL_ULP_HIST_COUNT ? hist_labels[b] : "?"; }

int fl_ulp_hist_edge(double rep) { return rep == 0.5 || rep == 1 || rep == 2 || rep == 4 || rep == 16; }

fl_ulp_hist fl_ulp_hist_bucket(double e, int above)
{
    fl_ulp_hist b;
    if (e == 0)
        return FL_ULP_HIST_0;
    if (e <= 0.5)
        b = FL_ULP_HIST_HALF;
    else if (e <= 1)
        b = FL_ULP_HIST_1;
    else if (e <= 2)
        b = FL_ULP_HIST_2;
    else if (e <= 4)
        b = FL_ULP_HIST_4;
    else if (e <= 16)
        b = FL_ULP_HIST_16;
    else
        return FL_ULP_HIST_MORE;
    return above && fl_ulp_hist_edge(e) ? (fl_ulp_hist)(b + 1) : b;
}

double fl_ulp_grid_round(double e)
{
    if (!(e < GRID_TOP))
        return e; /* already a 53-bit number (or +Inf / NaN) */
    /* e * 2^GRID is exact (a power-of-two scaling without overflow); rint rounds to nearest even. */
    return ldexp(rint(ldexp(e, FL_ULP_GRID_BITS)), -FL_ULP_GRID_BITS);
}

int fl_ulp_on_grid(double e) { return fl_ulp_grid_round(e) == e; }

void fl_ulp_report_init(fl_ulp_report *r) { memset(r, 0, sizeof *r); }

int fl_ulp_case_before(const fl_ulp_case *a, const fl_ulp_case *b)
{
    if (a->ulp != b->ulp)
        return a->ulp > b->ulp;
    return a->index < b->index;
}

/* sum += e * 2^GRID, e on the grid, finite, >= 0. */
static void sum_add_error(uint64_t sum[FL_ULP_SUM_LIMBS], double e)
{
    int ex;
    const double m = frexp(e, &ex); /* e = m 2^ex, 0.5 <= m < 1 */
    if (m == 0)
        return;
    /* e * 2^GRID = M * 2^s with M = m 2^53 an integer < 2^53 and s = ex - 53 + GRID >= 0 on the grid. */
    const uint64_t M = (uint64_t)ldexp(m, 53);
    int s = ex - 53 + FL_ULP_GRID_BITS;
    uint64_t lo = M, hi = 0;
    if (s < 0) { /* cannot happen for a grid value; keep it exact anyway by shifting M down */
        assert(!(M & ((1ull << -s) - 1)));
        lo = M >> -s;
        s = 0;
    }
    int limb = s / 64, sh = s % 64;
    if (sh) {
        hi = lo >> (64 - sh);
        lo <<= sh;
    }
    uint64_t carry = 0;
    for (int i = limb; i < FL_ULP_SUM_LIMBS; i++) {
        const uint64_t add = i == limb ? lo : i == limb + 1 ? hi : 0;
        const uint64_t t = sum[i] + add;
        const uint64_t c1 = t < add;
        sum[i] = t + carry;
        carry = c1 | (sum[i] < t);
        if (!carry && i > limb)
            break;
    }
}

static void sum_add(uint64_t dst[FL_ULP_SUM_LIMBS], const uint64_t src[FL_ULP_SUM_LIMBS])
{
    uint64_t carry = 0;
    for (int i = 0; i < FL_ULP_SUM_LIMBS; i++) {
        const uint64_t t = dst[i] + src[i];
        const uint64_t c1 = t < src[i];
        dst[i] = t + carry;
        carry = c1 | (dst[i] < t);
    }
}

/* Insert c into a sorted list of at most FL_ULP_WORST cases if it belongs there. */
static void offer(fl_ulp_case *list, int *n_list, const fl_ulp_case *c)
{
    const int n = *n_list;
    if (n == FL_ULP_WORST && !fl_ulp_case_before(c, &list[n - 1]))
        return;
    int i = n < FL_ULP_WORST ? n : FL_ULP_WORST - 1;
    while (i > 0 && fl_ulp_case_before(c, &list[i - 1])) {
        list[i] = list[i - 1];
        i--;
    }
    list[i] = *c;
    if (n < FL_ULP_WORST)
        *n_list = n + 1;
}

void fl_ulp_report_offer_worst(fl_ulp_report *r, const fl_ulp_case *c)
{
    if (!isinf(c->ulp))
        offer(r->worst, &r->n_worst, c);
    if (c->special)
        offer(r->mismatch, &r->n_mismatch, c);
}

void fl_ulp_report_add(fl_ulp_report *r, const fl_ulp_case *c)
{
    r->count++;
    r->correctly_rounded += c->cr != 0;
    r->mismatched_special += c->special != 0;
    r->hist[c->hist]++;
    if (isinf(c->ulp)) {
        r->infinite++;
    } else {
        r->faithful += c->hist <= FL_ULP_HIST_1;
        if (c->ulp > r->max_ulp)
            r->max_ulp = c->ulp;
        if (c->ulp > 0) {
            if (c->ulp < 0x1p40) { /* the common case: one limb */
                const uint64_t u = (uint64_t)(c->ulp * 0x1p20); /* exact: a grid value below 2^40 */
                const uint64_t t = r->sum[0] + u;
                if (t < u) {
                    for (int i = 1; i < FL_ULP_SUM_LIMBS && ++r->sum[i] == 0; i++)
                        ;
                }
                r->sum[0] = t;
            } else {
                sum_add_error(r->sum, c->ulp);
            }
        }
    }
    fl_ulp_report_offer_worst(r, c);
}

void fl_ulp_report_merge(fl_ulp_report *dst, const fl_ulp_report *src)
{
    dst->count += src->count;
    dst->correctly_rounded += src->correctly_rounded;
    dst->faithful += src->faithful;
    dst->mismatched_special += src->mismatched_special;
    dst->infinite += src->infinite;
    for (int i = 0; i < FL_ULP_HIST_COUNT; i++)
        dst->hist[i] += src->hist[i];
    sum_add(dst->sum, src->sum);
    if (src->max_ulp > dst->max_ulp)
        dst->max_ulp = src->max_ulp;
    for (int i = 0; i < src->n_worst; i++)
        offer(dst->worst, &dst->n_worst, &src->worst[i]);
    for (int i = 0; i < src->n_mismatch; i++)
        offer(dst->mismatch, &dst->n_mismatch, &src->mismatch[i]);
}

double fl_ulp_report_mean(const fl_ulp_report *r)
{
    const uint64_t n = r->count - r->infinite;
    if (n == 0)
        return 0;
    /* sum / n rounded once: with the sum S = sum of limbs, compute floor(S / n) and the remainder by
       long division, then form q + rem/n in long double (64-bit significand) and round to double.
       The quotient has at most 384 bits; take its leading 64 bits and a sticky bit, which is
       enough for a correctly rounded double (two extra bits plus sticky). */
    uint64_t q[FL_ULP_SUM_LIMBS];
    unsigned __int128 rem = 0;
    for (int i = FL_ULP_SUM_LIMBS - 1; i >= 0; i--) {
        const unsigned __int128 cur = (rem << 64) | r->sum[i];
        q[i] = (uint64_t)(cur / n);
        rem = cur % n;
    }
    /* value = (q + rem/n) * 2^-GRID.  Assemble the top 64 bits of q (plus the fraction) exactly. */
    int top = FL_ULP_SUM_LIMBS - 1;
    while (top > 0 && q[top] == 0)
        top--;
    long double v;
    if (top == 0) {
        /* q < 2^64: q + rem/n, rem/n < 1; long double has 64 bits, so add a sticky for the fraction */
        v = (long double)q[0] + (long double)rem / (long double)n;
    } else {
        const int lz = __builtin_clzll(q[top]);
        uint64_t head = lz ? (q[top] << lz) | (q[top - 1] >> (64 - lz)) : q[top];
        const uint64_t below = lz ? q[top - 1] << lz : q[top - 1];
        int sticky = below != 0 || rem != 0;
        for (int i = top - 2; i >= 0 && !sticky; i--)
            sticky = q[i] != 0;
        head |= (uint64_t)sticky; /* round-to-odd into 64 bits, then the cast below rounds to 53 */
        v = ldexpl((long double)head, 64 * top - lz);
    }
    return (double)ldexpl(v, -FL_ULP_GRID_BITS);
}

void fl_ulp_sum_to_string(char *buf, size_t n, const uint64_t sum[FL_ULP_SUM_LIMBS])
{
    uint64_t t[FL_ULP_SUM_LIMBS];
    memcpy(t, sum, sizeof t);
    char digits[128];
    int nd = 0;
    for (;;) {
        int zero = 1;
        unsigned __int128 rem = 0;
        for (int i = FL_ULP_SUM_LIMBS - 1; i >= 0; i--) {
            const unsigned __int128 cur = (rem << 64) | t[i];
            t[i] = (uint64_t)(cur / 10);
            rem = cur % 10;
            zero &= t[i] == 0;
        }
        digits[nd++] = (char)('0' + (int)rem);
        if (zero)
            break;
    }
    size_t k = 0;
    while (nd > 0 && k + 1 < n)
        buf[k++] = digits[--nd];
    if (n)
        buf[k] = 0;
}

int fl_ulp_sum_from_string(uint64_t sum[FL_ULP_SUM_LIMBS], const char *s)
{
    uint64_t t[FL_ULP_SUM_LIMBS] = { 0 };
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned __int128 carry = (unsigned)(*s - '0');
        for (int i = 0; i < FL_ULP_SUM_LIMBS; i++) {
            const unsigned __int128 cur = (unsigned __int128)t[i] * 10 + carry;
            t[i] = (uint64_t)cur;
            carry = cur >> 64;
        }
        if (carry)
            return -1;
    }
    memcpy(sum, t, sizeof t);
    return 0;
}
