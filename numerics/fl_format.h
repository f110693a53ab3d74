/* fl_format.h — the number formats of fp8lab, described as data.
 *
 * A format is its storage width, exponent and mantissa widths, exponent bias and the way it spends
 * encodings on specials.  Every conversion and decode in fl_round.h is one generic routine driven
 * by this description; the special cases that do not fit the IEEE pattern are named here:
 *
 *   FL_SPEC_IEEE  top exponent is Inf (mantissa 0) and NaN (mantissa != 0): fp32, bf16, fp16, e5m2.
 *   FL_SPEC_FN    no Inf; only the all-ones magnitude S.1111.111 is NaN, so the top binade of
 *                 e4m3 ("fn", OCP) holds finite values up to S.1111.110 = 448.
 *   FL_SPEC_FNUZ  no Inf, no -0: the encoding 0x80 (negative zero) is the only NaN
 *                 (e4m3fnuz / e5m2fnuz of AMD and Graphcore).
 *   FL_SPEC_NONE  every encoding is finite (the OCP MX element types e3m2, e2m3, e2m1).
 *   FL_SPEC_E8M0  the MX scale: no sign, no zero, no subnormals, value 2^(E-127), 0xFF is NaN.
 *
 * Values: an encoding with biased exponent E and mantissa m is (-1)^s * 2^(E-bias) * (1 + m/2^M)
 * for E >= 1 and (-1)^s * 2^(1-bias) * (m/2^M) for E = 0 (subnormal), except for E8M0.
 */
#ifndef FL_FORMAT_H
#define FL_FORMAT_H

#include "fl_base.h"

typedef enum {
    FL_FMT_FP32,
    FL_FMT_BF16,
    FL_FMT_FP16,
    FL_FMT_E4M3,
    FL_FMT_E5M2,
    FL_FMT_E8M0,
    FL_FMT_E3M2,
    FL_FMT_E2M3,
    FL_FMT_E2M1,
    FL_FMT_E4M3FNUZ,
    FL_FMT_E5M2FNUZ,
    FL_FMT_COUNT
} fl_format;

typedef enum {
    FL_SPEC_IEEE,
    FL_SPEC_FN,
    FL_SPEC_FNUZ,
    FL_SPEC_NONE,
    FL_SPEC_E8M0
} fl_specials;

typedef struct {
    int bits;         /* storage width; the sign is bit (bits-1) except for E8M0 */
    int ebits;        /* exponent field width */
    int mbits;        /* stored mantissa bits M (precision p = M + 1) */
    int bias;
    int specials;     /* fl_specials */
    uint32_t max_mag; /* magnitude encoding (sign clear) of the largest finite value */
    uint32_t nan;     /* the NaN a conversion produces (NVIDIA's choice: positive, quiet);
                         for FL_SPEC_NONE formats, which have no NaN, unused */
} fl_format_desc;

/* One descriptor per format, usable as an initialiser anywhere (device code builds a local const
 * from these; host code indexes fl_format_table).
 *   e4m3 max_mag 0x7E is S.1111.110 = 448; 0x7F is the NaN.
 *   e5m2 max_mag 0x7B is S.11110.11 = 57344; 0x7C is Inf.
 *   e4m3fnuz max 0x7F = 2^7 * 1.875 = 240; e5m2fnuz max 0x7F = 2^15 * 1.75 = 57344.
 *   e3m2 max 0x1F = 2^4 * 1.75 = 28; e2m3 max 0x1F = 2^2 * 1.875 = 7.5; e2m1 max 0x7 = 2^2 * 1.5 = 6.
 *   e8m0 max 0xFE = 2^127; 0xFF is the NaN. */
#define FL_DESC_FP32     { 32, 8, 23, 127, FL_SPEC_IEEE, 0x7F7FFFFFu, 0x7FFFFFFFu }
#define FL_DESC_BF16     { 16, 8, 7, 127, FL_SPEC_IEEE, 0x7F7Fu, 0x7FFFu }
#define FL_DESC_FP16     { 16, 5, 10, 15, FL_SPEC_IEEE, 0x7BFFu, 0x7FFFu }
#define FL_DESC_E4M3     { 8, 4, 3, 7, FL_SPEC_FN, 0x7Eu, 0x7Fu }
#define FL_DESC_E5M2     { 8, 5, 2, 15, FL_SPEC_IEEE, 0x7Bu, 0x7Fu }
#define FL_DESC_E8M0     { 8, 8, 0, 127, FL_SPEC_E8M0, 0xFEu, 0xFFu }
#define FL_DESC_E3M2     { 6, 3, 2, 3, FL_SPEC_NONE, 0x1Fu, 0 }
#define FL_DESC_E2M3     { 6, 2, 3, 1, FL_SPEC_NONE, 0x1Fu, 0 }
#define FL_DESC_E2M1     { 4, 2, 1, 1, FL_SPEC_NONE, 0x7u, 0 }
#define FL_DESC_E4M3FNUZ { 8, 4, 3, 8, FL_SPEC_FNUZ, 0x7Fu, 0x80u }
#define FL_DESC_E5M2FNUZ { 8, 5, 2, 16, FL_SPEC_FNUZ, 0x7Fu, 0x80u }

/* Host table, in enum order (C++ has no array designators, so the order is checked by a test that
 * compares every row's name and numbers). */
static const fl_format_desc fl_format_table[FL_FMT_COUNT] = {
    FL_DESC_FP32, FL_DESC_BF16, FL_DESC_FP16, FL_DESC_E4M3, FL_DESC_E5M2, FL_DESC_E8M0,
    FL_DESC_E3M2, FL_DESC_E2M3, FL_DESC_E2M1, FL_DESC_E4M3FNUZ, FL_DESC_E5M2FNUZ,
};

/* Host-side lookup.  (Device code uses the FL_DESC_* initialisers for a local constant.) */
static inline const fl_format_desc *fl_format_get(fl_format f) { return &fl_format_table[f]; }

/* Rounding modes.  FL_RND_SR is stochastic rounding: see fl_round.h for its distribution. */
typedef enum {
    FL_RND_NE, /* to nearest, ties to even */
    FL_RND_ZERO,
    FL_RND_UP,   /* toward +Inf */
    FL_RND_DOWN, /* toward -Inf */
    FL_RND_SR,
    FL_RND_COUNT
} fl_rounding;

/* Overflow policy. */
typedef enum {
    FL_OVF_SATURATE,   /* finite overflow and +-Inf give +-max (NVIDIA __NV_SATFINITE) */
    FL_OVF_NOSATURATE, /* IEEE overflow: Inf where the format has one, else NaN (NVIDIA __NV_NOSAT) */
    FL_OVF_COUNT
} fl_overflow;

/* Host-side metadata: names and derived numbers (fl_format.c). */
const char *fl_format_name(fl_format f);
const char *fl_rounding_name(fl_rounding r);
/* Parse a name ("e4m3", "bf16", "float8_e4m3fn", ...); returns 0 and sets *out, or -1. */
int fl_format_parse(fl_format *out, const char *name);
int fl_rounding_parse(fl_rounding *out, const char *name);
/* A comma-separated list of the accepted format names, for error messages and --help. */
const char *fl_format_names(void);

/* Derived numbers, exact as doubles. */
double fl_format_max(fl_format f);         /* largest finite value */
double fl_format_min_normal(fl_format f);  /* smallest positive normal */
double fl_format_min_subnormal(fl_format f);
double fl_format_epsilon(fl_format f);     /* 2^-M: distance from 1 to the next value */
/* The round-to-nearest-even overflow boundary: max + ulp(max)/2.  Exact values above it overflow;
   the boundary itself overflows when *ties_overflow is set (max's mantissa is odd: e5m2, fp16, bf16),
   and rounds to max when not (e4m3: 464 is a tie and 448 = S.1111.110 is even). */
double fl_format_rne_boundary(fl_format f, int *ties_overflow);
/* Storage bits of one encoding in an array: 8 or 16 or 32 (sub-byte formats use one uint8 each). */
int fl_format_storage_bits(fl_format f);

#endif /* FL_FORMAT_H */
