/* cmd_formats.c — `fp8lab formats [--json]`: one row per number format. */
#include "commands.h"
#include "common/cli.h"
#include "fl_format.h"
#include "fl_round.h"

#include <jansson.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab formats [--json]\n"
    "\n"
    "One row per number format fp8lab knows: storage bits, exponent bias, largest finite value,\n"
    "smallest normal and subnormal, machine epsilon (2^-M), the Inf and NaN encodings, and the\n"
    "round-to-nearest-even overflow boundary (max + ulp(max)/2).  '>' means values above it\n"
    "overflow and the boundary itself rounds to max (a tie to an even max, as in e4m3: 464 -> 448);\n"
    "'>=' means the boundary itself overflows (max is odd: e5m2, fp16, bf16).\n"
    "  --json   one JSON object {\"formats\": [...]} on stdout, values as decimals and hex floats\n";

/* Encodings of Inf and NaN as text, e.g. "0x7c, 0xfc" or "0x7d-0x7f, 0xfd-0xff". */
static void specials_text(char *inf, size_t ninf, char *nan, size_t nnan, fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    const int w = d->bits > 16 ? 8 : d->bits > 8 ? 4 : 2; /* hex digits */
    const uint32_t sbit = 1u << (d->bits - 1), all = (sbit << 1) - 1;
    snprintf(inf, ninf, "none");
    snprintf(nan, nnan, "none");
    switch (d->specials) {
    case FL_SPEC_IEEE:
        snprintf(inf, ninf, "0x%0*x, 0x%0*x", w, d->max_mag + 1, w, sbit | (d->max_mag + 1));
        snprintf(nan, nnan, "0x%0*x-0x%0*x, 0x%0*x-0x%0*x", w, d->max_mag + 2, w, sbit - 1, w,
                 sbit | (d->max_mag + 2), w, all);
        break;
    case FL_SPEC_FN:
        snprintf(nan, nnan, "0x%0*x, 0x%0*x", w, sbit - 1, w, all);
        break;
    case FL_SPEC_FNUZ:
    case FL_SPEC_E8M0:
        snprintf(nan, nnan, "0x%0*x", w, d->nan);
        break;
    default:
        break;
    }
}

int fl_cmd_formats(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            return fl_cli_usage_error("formats", "unknown argument '%s'", argv[i]);
        }
    }
    json_t *list = json ? json_array() : NULL;
    if (!json)
        printf("%-9s %4s %4s %4s %12s %12s %12s %10s %-22s %-44s %s\n", "format", "bits", "e/m", "bias",
               "max", "min_normal", "min_subnorm", "epsilon", "inf", "nan", "rne_overflow");
    for (int i = 0; i < FL_FMT_COUNT; i++) {
        const fl_format f = (fl_format)i;
        const fl_format_desc *d = fl_format_get(f);
        char inf[160], nan[160], em[16], bnd[48], hexbuf[48];
        int ties_overflow;
        const double boundary = fl_format_rne_boundary(f, &ties_overflow);
        specials_text(inf, sizeof inf, nan, sizeof nan, f);
        const int saturates_always = d->specials == FL_SPEC_NONE;
        if (!json) {
            snprintf(em, sizeof em, "%d/%d", d->ebits, d->mbits);
            if (saturates_always)
                snprintf(bnd, sizeof bnd, "(always saturates) %s %.9g", ties_overflow ? ">=" : ">", boundary);
            else
                snprintf(bnd, sizeof bnd, "%s %.9g", ties_overflow ? ">=" : ">", boundary);
            printf("%-9s %4d %4s %4d %12.6g %12.6g %12.6g %10.3g %-22s %-44s %s\n", fl_format_name(f), d->bits,
                   em, d->bias, fl_format_max(f), fl_format_min_normal(f), fl_format_min_subnormal(f),
                   fl_format_epsilon(f), inf, nan, bnd);
            continue;
        }
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(fl_format_name(f)));
        json_object_set_new(o, "bits", json_integer(d->bits));
        json_object_set_new(o, "exponent_bits", json_integer(d->ebits));
        json_object_set_new(o, "mantissa_bits", json_integer(d->mbits));
        json_object_set_new(o, "bias", json_integer(d->bias));
        const struct { const char *key; double v; } nums[] = {
            { "max_finite", fl_format_max(f) },       { "min_normal", fl_format_min_normal(f) },
            { "min_subnormal", fl_format_min_subnormal(f) }, { "epsilon", fl_format_epsilon(f) },
            { "rne_overflow_boundary", boundary },
        };
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
            json_object_set_new(o, nums[k].key, json_real(nums[k].v));
            char key[64];
            snprintf(key, sizeof key, "%s_hex", nums[k].key);
            snprintf(hexbuf, sizeof hexbuf, "%a", nums[k].v);
            json_object_set_new(o, key, json_string(hexbuf));
        }
        json_object_set_new(o, "boundary_overflows", json_boolean(ties_overflow && !saturates_always));
        json_object_set_new(o, "always_saturates", json_boolean(saturates_always));
        json_object_set_new(o, "has_sign", json_boolean(d->specials != FL_SPEC_E8M0));
        json_object_set_new(o, "inf_encodings", json_string(inf));
        json_object_set_new(o, "nan_encodings", json_string(nan));
        json_object_set_new(o, "storage_dtype", json_string(d->bits <= 8 ? "uint8" : d->bits == 16 ? "uint16" : "float32"));
        json_array_append_new(list, o);
    }
    if (json) {
        json_t *root = json_object();
        json_object_set_new(root, "formats", list);
        fl_cli_json_print(root, 17);
    }
    return FL_EXIT_OK;
}
