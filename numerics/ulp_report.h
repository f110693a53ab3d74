/* ulp_report.h — the accumulator of an ulp validation: counts, histogram, exact sum, worst cases.
 *
 * One fl_ulp_report summarises any number of judged outputs.  Each output arrives as an fl_ulp_case
 * whose error `ulp` has already been decided exactly (experiments/ulp/ULP.md):
 *
 *   ulp  the error |y - f(x)| / ulp(f(x)) of the output y against the exact value f(x), in the ulp of
 *        f(x)'s binade in the output format (Zimmermann et al.), ROUNDED TO NEAREST (ties to even)
 *        onto the reporting grid: multiples of 2^-FL_ULP_GRID_BITS below 2^(53 - FL_ULP_GRID_BITS),
 *        53-bit binary64 numbers above.  Every reported error is therefore an integer multiple of
 *        2^-FL_ULP_GRID_BITS, which is what makes the sum below exact.
 *        +Inf when the output or the exact value is NaN or infinite and they do not match
 *        (the output is NaN/Inf where the reference is not, or the reverse).
 *   hist     the histogram bucket of the EXACT error (not of the rounded one): where the reported
 *            error is a bucket's upper edge (0.5, 1, 2, 4 or 16 ulp) the judge decides on which side
 *            of the edge the exact error lies.  The first bucket holds the errors that report as 0,
 *            i.e. exact errors of at most 2^-(FL_ULP_GRID_BITS + 1) ulp.  So an error of 1 + 2^-30 ulp,
 *            which reports as 1.000000, is in the bucket above 1 and is not faithful.
 *   cr       the output's encoding equals the correctly rounded one (any NaN equals any NaN).
 *   special  the output's class differs from the reference's: NaN, +-Inf, saturation (the exact value
 *            overflowed and the reference clamped it to +-max) or finite.
 *
 * Faithful is "the exact error is at most 1 ulp" (the first three buckets), correctly rounded is the
 * encodings' equality: both are exact decisions, never read off the rounded error.
 *
 * Exactness and merging.  The sum of errors is kept as an integer count of 2^-FL_ULP_GRID_BITS units
 * in FL_ULP_SUM_LIMBS 64-bit limbs (384 bits: errors below 2^300 ulp, 2^64 of them, fit), counts are
 * integers, the maximum is a maximum, and the two case lists keep the FL_ULP_WORST first cases
 * ordered by (error descending, index ascending).  fl_ulp_report_merge is therefore exactly
 * associative and commutative: shards of a sweep merged in any order, by threads, by processes or
 * from JSON files, give the report of the whole sweep bit for bit, provided element indices are
 * global (unique across shards).
 *
 * Two lists.  `worst` holds the outputs with the largest FINITE errors, so its first case is always the
 * input of max_ulp; `mismatch` holds the class mismatches (infinite errors first).  An output may be
 * in both (a finite output where the exact value saturated).  max_ulp, the sum and mean_ulp cover the
 * outputs with a finite error; outputs with an infinite error are counted in `infinite` (and in the
 * histogram's last bucket).
 */
#ifndef FL_ULP_REPORT_H
#define FL_ULP_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "fl_format.h"

#define FL_ULP_GRID_BITS 20    /* reported errors are multiples of 2^-20 ulp */
#define FL_ULP_WORST 10
#define FL_ULP_SUM_LIMBS 6

/* Histogram buckets of the exact error: [0, 2^-21], (2^-21, 0.5], (0.5, 1], (1, 2], (2, 4], (4, 16], > 16. */
typedef enum {
    FL_ULP_HIST_0,
    FL_ULP_HIST_HALF,
    FL_ULP_HIST_1,
    FL_ULP_HIST_2,
    FL_ULP_HIST_4,
    FL_ULP_HIST_16,
    FL_ULP_HIST_MORE,
    FL_ULP_HIST_COUNT
} fl_ulp_hist;

typedef struct {
    uint64_t index;                    /* element index (global over the sweep / arrays) */
    uint64_t in[FL_MAX_INPUTS];    /* input bit patterns, in the inputs' storage formats */
    uint32_t out;                      /* output encoding */
    uint32_t ref;                      /* correctly rounded encoding */
    double ulp;                        /* reported error (see above); +Inf for a special mismatch */
    int cr;                            /* out equals ref */
    int special;                       /* class mismatch */
    int hist;                          /* fl_ulp_hist of the exact error */
} fl_ulp_case;

typedef struct {
    uint64_t count;                    /* outputs judged */
    uint64_t correctly_rounded;
    uint64_t faithful;                 /* exact error <= 1 ulp */
    uint64_t mismatched_special;
    uint64_t infinite;                 /* outputs whose error is infinite */
    uint64_t hist[FL_ULP_HIST_COUNT];
    uint64_t sum[FL_ULP_SUM_LIMBS];    /* sum of finite errors in 2^-FL_ULP_GRID_BITS units, little-endian limbs */
    double max_ulp;                    /* largest finite error; 0 when there is none */
    int n_worst;
    fl_ulp_case worst[FL_ULP_WORST];   /* finite errors, (error desc, index asc): worst[0] has max_ulp */
    int n_mismatch;
    fl_ulp_case mismatch[FL_ULP_WORST]; /* class mismatches, (error desc, index asc) */
} fl_ulp_report;

void fl_ulp_report_init(fl_ulp_report *r);
/* Adds one judged output. */
void fl_ulp_report_add(fl_ulp_report *r, const fl_ulp_case *c);
/* The case-list part of fl_ulp_report_add alone (for a caller that keeps the counts of a batch
   itself and offers only the cases that may enter a list; see experiments/ulp/ulp_sweep.c). */
void fl_ulp_report_offer_worst(fl_ulp_report *r, const fl_ulp_case *c);
/* dst += src (exact, associative, commutative). */
void fl_ulp_report_merge(fl_ulp_report *dst, const fl_ulp_report *src);
/* Mean of the finite errors: the exact sum divided by their count, as a double within one ulp
   (a function of the exact sum and the count only, so equal reports give equal means; 0 when
   there is no finite error). */
double fl_ulp_report_mean(const fl_ulp_report *r);

/* 1 if a reported error (a grid value) is a bucket's upper edge: 0.5, 1, 2, 4 or 16, where the exact
   error may lie on either side and the judge must say which. */
int fl_ulp_hist_edge(double rep);
/* The bucket of the exact error from its reported value and, at an edge, whether the exact error
   lies above it (above is ignored elsewhere; +Inf goes to FL_ULP_HIST_MORE). */
fl_ulp_hist fl_ulp_hist_bucket(double rep, int above);
/* "<=2^-21", "<=0.5", "<=1", "<=2", "<=4", "<=16", ">16". */
const char *fl_ulp_hist_label(fl_ulp_hist b);

/* Round a non-negative real given as a double onto the reporting grid (to nearest, ties to even).
   Exact for any double input: the grid is coarser than binary64 at every magnitude. */
double fl_ulp_grid_round(double e);
/* 1 if e is a point of the reporting grid (or +Inf). */
int fl_ulp_on_grid(double e);

/* The exact sum as a decimal integer of 2^-FL_ULP_GRID_BITS units (for JSON, where numbers are
   doubles); buf needs 128 bytes.  Parse returns 0, or -1 for anything but a decimal integer that fits. */
void fl_ulp_sum_to_string(char *buf, size_t n, const uint64_t sum[FL_ULP_SUM_LIMBS]);
int fl_ulp_sum_from_string(uint64_t sum[FL_ULP_SUM_LIMBS], const char *s);

/* Is case a ahead of case b in the worst list? (error desc, index asc) */
int fl_ulp_case_before(const fl_ulp_case *a, const fl_ulp_case *b);

#endif /* FL_ULP_REPORT_H */
