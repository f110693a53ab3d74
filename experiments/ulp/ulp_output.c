/* ulp_output.c — the reports of `fp8lab ulp`: JSON (written, and read back for --merge) and text,
 * and `--merge`, which adds shards' JSON reports into the report of the whole (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"
#include "fl_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ------------------------------------------------------------------------------------------- */

static json_t *json_num_or_str(double v)
{
    if (isnan(v))
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static json_t *json_value(int kind, uint64_t b)
{
    json_t *o = json_object();
    char s[64];
    const int hexw = kind == KIND_F64 ? 16 : (fl_format_storage_bits((fl_format)kind) + 3) / 4;
    snprintf(s, sizeof s, "0x%0*llx", hexw, (unsigned long long)b);
    json_object_set_new(o, "hex", json_string(s));
    const double v = ulp_bits_value(kind, b);
    json_object_set_new(o, "decimal", json_num_or_str(v));
    snprintf(s, sizeof s, "%a", v);
    json_object_set_new(o, "hexfloat", json_string(s));
    return o;
}

static json_t *cases_json(const fl_ulp_case *cases, int n, const ulp_meta *m)
{
    json_t *w = json_array();
    for (int i = 0; i < n; i++) {
        const fl_ulp_case *c = &cases[i];
        json_t *e = json_object();
        json_object_set_new(e, "index", json_integer((json_int_t)c->index));
        if (m->row_len > 0) {
            json_object_set_new(e, "row", json_integer((json_int_t)(c->index / (uint64_t)m->row_len)));
            json_object_set_new(e, "column", json_integer((json_int_t)(c->index % (uint64_t)m->row_len)));
        }
        json_t *in = json_array();
        for (int k = 0; k < m->n_inputs; k++)
            json_array_append_new(in, json_value(m->in_kind[k], c->in[k]));
        json_object_set_new(e, "inputs", in);
        json_object_set_new(e, "output", json_value(m->fmt, c->out));
        json_object_set_new(e, "reference", json_value(m->fmt, c->ref));
        json_object_set_new(e, "ulp", json_num_or_str(c->ulp));
        json_object_set_new(e, "bucket", json_string(fl_ulp_hist_label((fl_ulp_hist)c->hist)));
        json_object_set_new(e, "correctly_rounded", json_boolean(c->cr));
        json_object_set_new(e, "mismatched_special", json_boolean(c->special));
        json_array_append_new(w, e);
    }
    return w;
}

static json_t *report_json(const fl_ulp_report *r, const ulp_meta *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "report_version", json_integer(ULP_REPORT_VERSION));
    json_object_set_new(o, "function", json_string(m->fn_name));
    json_object_set_new(o, "format", json_string(fl_format_name(m->fmt)));
    json_object_set_new(o, "overflow", json_string(m->ovf == FL_OVF_SATURATE ? "saturate" : "no-saturate"));
    json_t *ins = json_array();
    for (int k = 0; k < m->n_inputs; k++)
        json_array_append_new(ins, json_string(ulp_kind_name(m->in_kind[k])));
    json_object_set_new(o, "input_formats", ins);
    json_object_set_new(o, "source", fl_json_string(m->source)); /* a path: any bytes (fl_json.h) */
    json_object_set_new(o, "params", fl_json_string(m->params)); /* --param values: any bytes */
    if (m->shards) {
        json_object_set(o, "shards", m->shards);
    } else {
        json_t *sh = json_array(), *one = json_array();
        json_array_append_new(one, json_integer((json_int_t)m->lo));
        json_array_append_new(one, json_integer((json_int_t)m->hi));
        json_array_append_new(sh, one);
        json_object_set_new(o, "shards", sh);
    }
    if (m->row_len > 0)
        json_object_set_new(o, "row_len", json_integer((json_int_t)m->row_len));
    json_object_set_new(o, "count", json_integer((json_int_t)r->count));
    json_object_set_new(o, "correctly_rounded", json_integer((json_int_t)r->correctly_rounded));
    json_object_set_new(o, "faithful", json_integer((json_int_t)r->faithful));
    json_object_set_new(o, "mismatched_special", json_integer((json_int_t)r->mismatched_special));
    json_object_set_new(o, "infinite_errors", json_integer((json_int_t)r->infinite));
    json_object_set_new(o, "max_ulp", json_real(r->max_ulp));
    json_object_set_new(o, "mean_ulp", json_real(fl_ulp_report_mean(r)));
    char sum[160];
    fl_ulp_sum_to_string(sum, sizeof sum, r->sum);
    json_object_set_new(o, "sum_ulp_units", json_string(sum));
    json_object_set_new(o, "grid_bits", json_integer(FL_ULP_GRID_BITS));
    json_t *h = json_object();
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++)
        json_object_set_new(h, fl_ulp_hist_label((fl_ulp_hist)b), json_integer((json_int_t)r->hist[b]));
    json_object_set_new(o, "histogram", h);
    json_object_set_new(o, "worst", cases_json(r->worst, r->n_worst, m));
    json_object_set_new(o, "class_mismatches", cases_json(r->mismatch, r->n_mismatch, m));
    return o;
}

/* ---- a report read back (ulp_report_parse, for --merge and the fuzz target) -------------------- */

/* One line naming the field into err; -1. */
static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Errors are below 2^300 ulp (ulp_report.h: what the exact sum of 2^64 of them holds). */
#define ULP_READ_MAX_ERR 0x1p300
/* A report larger than this is no report of `ulp --json` (a merged one lists its shards: ~30 bytes each). */
#define ULP_READ_MAX_BYTES ((size_t)256 << 20)

/* o[key]: an integer 0 .. 2^63 - 1 (JSON integers are int64, so within uint64). */
static int get_count(uint64_t *out, const json_t *o, const char *key, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return bad(err, errlen, "\"%s\": missing", key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return bad(err, errlen, "\"%s\": not a non-negative integer", key);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_string(const char **out, const json_t *o, const char *key, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return bad(err, errlen, "\"%s\": missing", key);
    if (!json_is_string(v))
        return bad(err, errlen, "\"%s\": not a string", key);
    *out = json_string_value(v);
    return 0;
}

/* An input or output kind by its report name: "f64" or a format (not e8m0, a scale format). */
static int parse_kind(int *kind, const char *s)
{
    fl_format f;
    if (!strcmp(s, "f64")) {
        *kind = KIND_F64;
        return 0;
    }
    if (fl_format_parse(&f, s) || f == FL_FMT_E8M0)
        return -1;
    *kind = (int)f;
    return 0;
}

static int kind_bits(int kind) { return kind == KIND_F64 ? 64 : fl_format_storage_bits((fl_format)kind); }

/* v's "hex": "0x" and 1..16 hex digits (as report_json writes them), a value below 2^bits. */
static int get_hex(uint64_t *out, const json_t *v, int bits, const char *what, char *err, size_t errlen)
{
    json_t *h = json_is_object(v) ? json_object_get(v, "hex") : NULL;
    if (!json_is_string(h))
        return bad(err, errlen, "%s: not an object with a \"hex\" string", what);
    const char *s = json_string_value(h);
    const size_t n = strlen(s);
    uint64_t x = 0;
    int ok = n > 2 && n <= 18 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    for (size_t i = 2; ok && i < n; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        ok = d >= 0;
        x = x << 4 | (uint64_t)(d & 15);
    }
    if (!ok)
        return bad(err, errlen, "%s: hex \"%.40s\" is not 0x and 1 to 16 hex digits", what, s);
    if (bits < 64 && x >> bits)
        return bad(err, errlen, "%s: hex %s does not fit the %d bits of its format", what, s, bits);
    *out = x;
    return 0;
}

/* An error as written: a number on the reporting grid, >= 0 and below 2^300, or "inf". */
static int get_ulp(double *out, const json_t *v, const char *what, char *err, size_t errlen)
{
    if (json_is_string(v) && !strcmp(json_string_value(v), "inf")) {
        *out = INFINITY;
        return 0;
    }
    if (!json_is_number(v))
        return bad(err, errlen, "%s: not a number or \"inf\"", what);
    const double e = json_number_value(v);
    if (!(e >= 0 && e < ULP_READ_MAX_ERR) || !fl_ulp_on_grid(e))
        return bad(err, errlen, "%s: %g is not an error in ulps (>= 0, below 2^300, a multiple of 2^-%d)", what, e,
                   FL_ULP_GRID_BITS);
    *out = e;
    return 0;
}

static int cmp_shard(const void *a, const void *b)
{
    const json_int_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* "shards": [[lo, hi], ...], 0 <= lo <= hi, disjoint, covering count elements in all. */
static int check_shards(const json_t *o, uint64_t count, char *err, size_t errlen)
{
    json_t *sh = json_object_get(o, "shards");
    if (!sh)
        return bad(err, errlen, "\"shards\": missing");
    const size_t n = json_array_size(sh);
    if (!json_is_array(sh) || n == 0)
        return bad(err, errlen, "\"shards\": not a non-empty array of [lo, hi] pairs");
    json_int_t *lh = malloc(2 * n * sizeof *lh);
    if (!lh)
        return bad(err, errlen, "\"shards\": out of memory for %zu shards", n);
    uint64_t total = 0;
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        json_t *a = json_array_get(sh, k), *lo = json_array_get(a, 0), *hi = json_array_get(a, 1);
        if (json_array_size(a) != 2 || !json_is_integer(lo) || !json_is_integer(hi) || json_integer_value(lo) < 0 ||
            json_integer_value(hi) < json_integer_value(lo)) {
            rc = bad(err, errlen, "\"shards[%zu]\": not a pair of integers 0 <= lo <= hi", k);
            break;
        }
        lh[2 * k] = json_integer_value(lo);
        lh[2 * k + 1] = json_integer_value(hi);
        total += (uint64_t)(lh[2 * k + 1] - lh[2 * k]); /* < 2^63 each: no overflow before the check below */
        if (total > (uint64_t)INT64_MAX)
            rc = bad(err, errlen, "\"shards\": cover more than 2^63 - 1 elements");
    }
    if (!rc) {
        /* by lo: a non-empty shard overlaps an earlier one iff it starts below the furthest end so far */
        qsort(lh, n, 2 * sizeof *lh, cmp_shard);
        json_int_t end = 0;
        for (size_t k = 0; k < n && !rc; k++) {
            if (lh[2 * k] == lh[2 * k + 1])
                continue;
            if (lh[2 * k] < end)
                rc = bad(err, errlen, "\"shards\": [%lld, %lld) overlaps another shard of the report",
                         (long long)lh[2 * k], (long long)lh[2 * k + 1]);
            end = lh[2 * k + 1] > end ? lh[2 * k + 1] : end;
        }
    }
    if (!rc && total != count)
        rc = bad(err, errlen, "\"shards\" cover %llu elements but \"count\" is %llu", (unsigned long long)total,
                 (unsigned long long)count);
    free(lh);
    return rc;
}

/* What the report says besides its counts: function, format, overflow, inputs, source, params,
   row_len; m->shards is the document's list. */
static int read_meta(ulp_meta *m, const json_t *o, char *err, size_t errlen)
{
    const char *fmt = NULL, *ovf = NULL, *params = NULL;
    memset(m, 0, sizeof *m);
    if (get_string(&m->fn_name, o, "function", err, errlen) || get_string(&fmt, o, "format", err, errlen) ||
        get_string(&ovf, o, "overflow", err, errlen) || get_string(&m->source, o, "source", err, errlen) ||
        get_string(&params, o, "params", err, errlen))
        return -1;
    const fl_ref_fn *fn = fl_ref_lookup(m->fn_name);
    if (!fn)
        return bad(err, errlen, "\"function\": unknown function \"%.64s\"", m->fn_name);
    int kind;
    if (parse_kind(&kind, fmt) || kind == KIND_F64)
        return bad(err, errlen, "\"format\": unknown output format \"%.32s\" (formats: %s)", fmt, fl_format_names());
    m->fmt = (fl_format)kind;
    if (!strcmp(ovf, "saturate"))
        m->ovf = FL_OVF_SATURATE;
    else if (!strcmp(ovf, "no-saturate"))
        m->ovf = FL_OVF_NOSATURATE;
    else
        return bad(err, errlen, "\"overflow\": \"%.32s\" is neither \"saturate\" nor \"no-saturate\"", ovf);
    json_t *ins = json_object_get(o, "input_formats");
    if (!ins)
        return bad(err, errlen, "\"input_formats\": missing");
    if (!json_is_array(ins) || json_array_size(ins) < 1 || json_array_size(ins) > FL_MAX_INPUTS)
        return bad(err, errlen, "\"input_formats\": not an array of 1 to %d format names", FL_MAX_INPUTS);
    m->n_inputs = (int)json_array_size(ins);
    for (int k = 0; k < m->n_inputs; k++) {
        json_t *v = json_array_get(ins, (size_t)k);
        if (!json_is_string(v) || parse_kind(&m->in_kind[k], json_string_value(v)))
            return bad(err, errlen, "\"input_formats[%d]\": not \"f64\" or a format name (%s)", k, fl_format_names());
    }
    if (strlen(params) >= sizeof m->params)
        return bad(err, errlen, "\"params\": longer than %zu bytes", sizeof m->params - 1);
    memcpy(m->params, params, strlen(params) + 1);
    json_t *rl = json_object_get(o, "row_len");
    if (rl && (!json_is_integer(rl) || json_integer_value(rl) < 1 || json_integer_value(rl) >= (1 << 24)))
        return bad(err, errlen, "\"row_len\": not a row length 1 .. 2^24 - 1");
    if (!rl != !fn->rowwise)
        return bad(err, errlen, "\"row_len\": %s for %s, a%s function", rl ? "present" : "missing", fn->name,
                   fn->rowwise ? " row-wise" : "n elementwise");
    m->row_len = rl ? (long)json_integer_value(rl) : 0;
    m->shards = json_object_get(o, "shards");
    return 0;
}

/* The counts, histogram, maximum and exact sum, each checked and against each other. */
static int read_counts(fl_ulp_report *r, const json_t *o, char *err, size_t errlen)
{
    if (get_count(&r->count, o, "count", err, errlen) ||
        get_count(&r->correctly_rounded, o, "correctly_rounded", err, errlen) ||
        get_count(&r->faithful, o, "faithful", err, errlen) ||
        get_count(&r->mismatched_special, o, "mismatched_special", err, errlen) ||
        get_count(&r->infinite, o, "infinite_errors", err, errlen))
        return -1;
    static const char *const part[] = { "correctly_rounded", "mismatched_special", "infinite_errors" };
    const uint64_t part_v[] = { r->correctly_rounded, r->mismatched_special, r->infinite };
    for (int k = 0; k < 3; k++)
        if (part_v[k] > r->count)
            return bad(err, errlen, "\"%s\" %llu exceeds \"count\" %llu", part[k], (unsigned long long)part_v[k],
                       (unsigned long long)r->count);
    json_t *g = json_object_get(o, "grid_bits");
    if (!json_is_integer(g) || json_integer_value(g) != FL_ULP_GRID_BITS)
        return bad(err, errlen, "\"grid_bits\": %s (this fp8lab reports on the 2^-%d grid)", g ? "not 20" : "missing",
                   FL_ULP_GRID_BITS);
    json_t *h = json_object_get(o, "histogram");
    if (!json_is_object(h))
        return bad(err, errlen, "\"histogram\": %s", h ? "not an object" : "missing");
    uint64_t hsum = 0;
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++) {
        const char *label = fl_ulp_hist_label((fl_ulp_hist)b);
        json_t *v = json_object_get(h, label);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return bad(err, errlen, "\"histogram.%s\": %s", label, v ? "not a non-negative integer" : "missing");
        r->hist[b] = (uint64_t)json_integer_value(v);
        if (__builtin_add_overflow(hsum, r->hist[b], &hsum))
            return bad(err, errlen, "\"histogram\": the counts overflow 2^64");
    }
    if (hsum != r->count)
        return bad(err, errlen, "\"histogram\" counts %llu outputs but \"count\" is %llu", (unsigned long long)hsum,
                   (unsigned long long)r->count);
    const uint64_t le1 = r->hist[FL_ULP_HIST_0] + r->hist[FL_ULP_HIST_HALF] + r->hist[FL_ULP_HIST_1];
    if (r->faithful != le1)
        return bad(err, errlen, "\"faithful\" %llu differs from the \"histogram\"'s %llu errors <= 1 ulp",
                   (unsigned long long)r->faithful, (unsigned long long)le1);
    if (r->hist[FL_ULP_HIST_MORE] < r->infinite)
        return bad(err, errlen, "\"infinite_errors\" %llu exceed the \"histogram\"'s %llu errors > 16 ulp",
                   (unsigned long long)r->infinite, (unsigned long long)r->hist[FL_ULP_HIST_MORE]);
    /* the largest finite error: the top non-empty bucket of the finite errors holds it (the bucket of
       its reported value, or the next one when that value is an edge the exact error lies above) */
    json_t *mx = json_object_get(o, "max_ulp");
    if (!mx)
        return bad(err, errlen, "\"max_ulp\": missing");
    if (!json_is_number(mx) || get_ulp(&r->max_ulp, mx, "\"max_ulp\"", err, errlen))
        return bad(err, errlen, "\"max_ulp\": not a finite error in ulps (>= 0, below 2^300, a multiple of 2^-%d)",
                   FL_ULP_GRID_BITS);
    const uint64_t finite = r->count - r->infinite;
    const int top_lo = fl_ulp_hist_bucket(r->max_ulp, 0), top_hi = fl_ulp_hist_bucket(r->max_ulp, 1);
    int top = -1;
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++)
        if (r->hist[b] - (b == FL_ULP_HIST_MORE ? r->infinite : 0))
            top = b;
    if ((finite && top != top_lo && top != top_hi) || (!finite && r->max_ulp != 0))
        return bad(err, errlen, "\"max_ulp\" %g disagrees with the \"histogram\"", r->max_ulp);
    json_t *mean = json_object_get(o, "mean_ulp");
    if (!json_is_number(mean) || !(json_number_value(mean) >= 0 && json_number_value(mean) <= r->max_ulp))
        return bad(err, errlen, "\"mean_ulp\": %s", mean ? "not a number 0 .. max_ulp" : "missing");
    const char *sum = NULL;
    if (get_string(&sum, o, "sum_ulp_units", err, errlen))
        return -1;
    if (fl_ulp_sum_from_string(r->sum, sum))
        return bad(err, errlen, "\"sum_ulp_units\": not a decimal integer below 2^384");
    int zero = 1;
    for (int k = 0; k < FL_ULP_SUM_LIMBS; k++)
        zero &= r->sum[k] == 0;
    /* max_ulp <= the exact mean <= max_ulp: the exact sum lies in [max, finite * max] 2^20 units */
    const double mean_v = fl_ulp_report_mean(r);
    if (zero != (r->max_ulp == 0) ||
        (!zero && !(mean_v <= r->max_ulp && mean_v * (double)finite >= r->max_ulp * (1 - 0x1p-40))))
        return bad(err, errlen, "\"sum_ulp_units\" %.60s is not a sum of %llu errors of at most \"max_ulp\" %g", sum,
                   (unsigned long long)finite, r->max_ulp);
    return 0;
}

/* One case of a list: its index, inputs, encodings within their formats, error, bucket and flags. */
static int read_case(fl_ulp_case *c, const ulp_meta *m, const json_t *e, const char *list, size_t i, char *err,
                     size_t errlen)
{
    memset(c, 0, sizeof *c);
    char what[96];
    if (!json_is_object(e))
        return bad(err, errlen, "\"%s[%zu]\": not an object", list, i);
    json_t *idx = json_object_get(e, "index"), *in = json_object_get(e, "inputs"), *u = json_object_get(e, "ulp");
    json_t *cr = json_object_get(e, "correctly_rounded"), *sp = json_object_get(e, "mismatched_special");
    json_t *bk = json_object_get(e, "bucket");
    if (!json_is_integer(idx) || json_integer_value(idx) < 0)
        return bad(err, errlen, "\"%s[%zu].index\": %s", list, i, idx ? "not a non-negative integer" : "missing");
    c->index = (uint64_t)json_integer_value(idx);
    if (!json_is_array(in) || (int)json_array_size(in) != m->n_inputs)
        return bad(err, errlen, "\"%s[%zu].inputs\": %s of %d (one per \"input_formats\")", list, i,
                   in ? "not an array" : "missing", m->n_inputs);
    for (int k = 0; k < m->n_inputs; k++) {
        snprintf(what, sizeof what, "\"%s[%zu].inputs[%d]\"", list, i, k);
        if (get_hex(&c->in[k], json_array_get(in, (size_t)k), kind_bits(m->in_kind[k]), what, err, errlen))
            return -1;
    }
    const int out_bits = kind_bits((int)m->fmt);
    uint64_t out, ref;
    snprintf(what, sizeof what, "\"%s[%zu].output\"", list, i);
    if (get_hex(&out, json_object_get(e, "output"), out_bits, what, err, errlen))
        return -1;
    snprintf(what, sizeof what, "\"%s[%zu].reference\"", list, i);
    if (get_hex(&ref, json_object_get(e, "reference"), out_bits, what, err, errlen))
        return -1;
    c->out = (uint32_t)out;
    c->ref = (uint32_t)ref;
    snprintf(what, sizeof what, "\"%s[%zu].ulp\"", list, i);
    if (!u)
        return bad(err, errlen, "%s: missing", what);
    if (get_ulp(&c->ulp, u, what, err, errlen))
        return -1;
    if (!json_is_boolean(cr) || !json_is_boolean(sp))
        return bad(err, errlen, "\"%s[%zu].%s\": %s", list, i, !json_is_boolean(cr) ? "correctly_rounded"
                   : "mismatched_special", (!json_is_boolean(cr) ? cr : sp) ? "not true or false" : "missing");
    c->cr = json_is_true(cr);
    c->special = json_is_true(sp);
    /* the exact error's bucket: the reported error's, or the next one above an edge */
    c->hist = -1;
    for (int b = 0; b < FL_ULP_HIST_COUNT && json_is_string(bk); b++)
        if (!strcmp(json_string_value(bk), fl_ulp_hist_label((fl_ulp_hist)b)))
            c->hist = b;
    if (c->hist < 0 || (c->hist != (int)fl_ulp_hist_bucket(c->ulp, 0) && c->hist != (int)fl_ulp_hist_bucket(c->ulp, 1)))
        return bad(err, errlen, "\"%s[%zu].bucket\": %s", list, i,
                   bk ? "not the bucket of the case's \"ulp\" (a histogram label)" : "missing");
    if (isinf(c->ulp) && !c->special)
        return bad(err, errlen, "\"%s[%zu].ulp\": infinite without a class mismatch", list, i);
    return 0;
}

/* A case list: min(n, 10) cases of the n that belong to it, (error desc, index asc).  "worst": the
   finite errors, the first at max_ulp; "class_mismatches": the mismatched specials, infinite errors
   first, as many as there are. */
static int read_list(fl_ulp_case *list, int *n_list, const fl_ulp_report *r, const ulp_meta *m, const json_t *o,
                     const char *key, uint64_t n, char *err, size_t errlen)
{
    json_t *w = json_object_get(o, key);
    if (!json_is_array(w))
        return bad(err, errlen, "\"%s\": %s", key, w ? "not an array" : "missing");
    const uint64_t want = n < FL_ULP_WORST ? n : FL_ULP_WORST;
    if (json_array_size(w) != want)
        return bad(err, errlen, "\"%s\": %zu cases, but %llu outputs belong to it and it keeps %llu", key,
                   json_array_size(w), (unsigned long long)n, (unsigned long long)want);
    const int finite_list = !strcmp(key, "worst");
    uint64_t n_inf = 0;
    *n_list = 0;
    for (size_t i = 0; i < json_array_size(w); i++) {
        fl_ulp_case c;
        if (read_case(&c, m, json_array_get(w, i), key, i, err, errlen))
            return -1;
        if (i > 0 && fl_ulp_case_before(&c, &list[i - 1]))
            return bad(err, errlen, "\"%s[%zu]\": out of order (error descending, then index ascending)", key, i);
        if (finite_list && isinf(c.ulp))
            return bad(err, errlen, "\"worst[%zu].ulp\": infinite (those are in \"class_mismatches\")", i);
        if (finite_list && i == 0 && c.ulp != r->max_ulp)
            return bad(err, errlen, "\"worst[0].ulp\" %g: the largest finite error differs from \"max_ulp\" %g", c.ulp,
                       r->max_ulp);
        if (!finite_list && !c.special)
            return bad(err, errlen, "\"class_mismatches[%zu]\": not a mismatched special", i);
        n_inf += isinf(c.ulp);
        list[(*n_list)++] = c;
    }
    if (!finite_list && n_inf != (r->infinite < want ? r->infinite : want))
        return bad(err, errlen, "\"class_mismatches\": %llu infinite errors, but \"infinite_errors\" is %llu",
                   (unsigned long long)n_inf, (unsigned long long)r->infinite);
    return 0;
}

static int read_lists(fl_ulp_report *r, const ulp_meta *m, const json_t *o, char *err, size_t errlen)
{
    if (r->infinite > r->mismatched_special)
        return bad(err, errlen, "\"infinite_errors\" %llu exceed \"mismatched_special\" %llu (an infinite error is a "
                   "class mismatch)", (unsigned long long)r->infinite, (unsigned long long)r->mismatched_special);
    return read_list(r->worst, &r->n_worst, r, m, o, "worst", r->count - r->infinite, err, errlen) ||
           read_list(r->mismatch, &r->n_mismatch, r, m, o, "class_mismatches", r->mismatched_special, err, errlen);
}

/* "report_version": what this fp8lab writes.  Reports without it decided "faithful" and the
   histogram's edges on the rounded error, and kept one case list: they cannot be merged with these. */
static int read_version(const json_t *o, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, "report_version");
    if (!json_is_integer(v) || json_integer_value(v) != ULP_REPORT_VERSION)
        return bad(err, errlen, "\"report_version\": %s (this fp8lab reads version %d; a report without it was made by "
                   "an older fp8lab that decided \"faithful\" on the rounded error: run that shard again)",
                   v ? "not this fp8lab's" : "missing", ULP_REPORT_VERSION);
    return 0;
}

int ulp_report_parse(ulp_report_doc *d, const char *data, size_t size, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (size > ULP_READ_MAX_BYTES)
        return bad(err, errlen, "%zu bytes: larger than any report (%zu MiB)", size, ULP_READ_MAX_BYTES >> 20);
    json_error_t je;
    json_t *o = json_loadb(data, size, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return bad(err, errlen, "not a JSON report: %s (line %d, column %d)", je.text, je.line, je.column);
    fl_ulp_report_init(&d->rep);
    int rc = json_is_object(o) ? 0 : bad(err, errlen, "not an ulp report (a JSON object)");
    if (!rc)
        rc = read_version(o, err, errlen);
    if (!rc)
        rc = read_meta(&d->meta, o, err, errlen);
    if (!rc)
        rc = read_counts(&d->rep, o, err, errlen);
    if (!rc)
        rc = check_shards(o, d->rep.count, err, errlen);
    if (!rc)
        rc = read_lists(&d->rep, &d->meta, o, err, errlen);
    if (rc) {
        json_decref(o);
        memset(d, 0, sizeof *d);
        return -1;
    }
    d->root = o;
    return 0;
}

void ulp_report_doc_free(ulp_report_doc *d)
{
    json_decref(d->root);
    memset(d, 0, sizeof *d);
}

/* ---- text report -------------------------------------------------------------------------------- */

static void print_value(FILE *out, int kind, uint64_t b)
{
    const double v = ulp_bits_value(kind, b);
    const int hexw = kind == KIND_F64 ? 16 : (fl_format_storage_bits((fl_format)kind) + 3) / 4;
    fprintf(out, "%a (0x%0*llx)", v, hexw, (unsigned long long)b);
}

static void print_cases(FILE *out, const fl_ulp_case *cases, int n, const ulp_meta *m)
{
    for (int i = 0; i < n; i++) {
        const fl_ulp_case *c = &cases[i];
        if (m->row_len > 0)
            fprintf(out, "    #%-2d row %-7llu col %-6llu ", i + 1, (unsigned long long)(c->index / (uint64_t)m->row_len),
                    (unsigned long long)(c->index % (uint64_t)m->row_len));
        else
            fprintf(out, "    #%-2d index %-11llu ", i + 1, (unsigned long long)c->index);
        for (int k = 0; k < m->n_inputs; k++) {
            fprintf(out, "%s=", m->n_inputs == 1 ? "x" : m->row_len > 0 ? (k == 0 ? "x" : "dy")
                              : k == 0 ? "x0" : k == 1 ? "x1" : k == 2 ? "x2" : "x3");
            print_value(out, m->in_kind[k], c->in[k]);
            fputc(' ', out);
        }
        fprintf(out, "y=");
        print_value(out, m->fmt, c->out);
        fprintf(out, " ref=");
        print_value(out, m->fmt, c->ref);
        const char *cls = c->special ? ", class mismatch" : "";
        if (isinf(c->ulp))
            fprintf(out, "  (inf ulp%s)\n", cls);
        else if (c->hist != (int)fl_ulp_hist_bucket(c->ulp, 0)) /* an edge the exact error lies above */
            fprintf(out, "  (%.6f ulp rounded; exactly above %g%s)\n", c->ulp, c->ulp, cls);
        else
            fprintf(out, "  (%.6f ulp%s)\n", c->ulp, cls);
    }
}

static void print_report(FILE *out, const fl_ulp_report *r, const ulp_meta *m, const char (*recheck)[1024], double T,
                         int gated)
{
    fprintf(out, "fp8lab ulp: %s%s%s%s, inputs", m->fn_name, *m->params ? " (" : "", m->params, *m->params ? ")" : "");
    for (int k = 0; k < m->n_inputs; k++)
        fprintf(out, " %s", ulp_kind_name(m->in_kind[k]));
    fprintf(out, " -> %s (RNE, %s), %s\n", fl_format_name(m->fmt),
            m->ovf == FL_OVF_SATURATE ? "saturating" : "IEEE overflow", m->source);
    const double n = r->count ? (double)r->count : 1;
    fprintf(out, "  outputs judged        %llu\n", (unsigned long long)r->count);
    fprintf(out, "  correctly rounded     %llu (%.4f%%)\n", (unsigned long long)r->correctly_rounded,
            100 * (double)r->correctly_rounded / n);
    fprintf(out, "  faithful (<= 1 ulp)   %llu (%.4f%%)\n", (unsigned long long)r->faithful, 100 * (double)r->faithful / n);
    fprintf(out, "  mismatched specials   %llu   (infinite errors %llu)\n", (unsigned long long)r->mismatched_special,
            (unsigned long long)r->infinite);
    fprintf(out, "  max error             %.6f ulp    mean %.6g ulp\n", r->max_ulp, fl_ulp_report_mean(r));
    fprintf(out, "  histogram            ");
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++)
        fprintf(out, " %s: %llu", fl_ulp_hist_label((fl_ulp_hist)b), (unsigned long long)r->hist[b]);
    fputc('\n', out);
    /* the worst finite errors: every case with an error or a wrong encoding (the list's tail may be
       correctly rounded cases of error 0, which say nothing) */
    int n_bad = 0;
    while (n_bad < r->n_worst && (r->worst[n_bad].ulp > 0 || !r->worst[n_bad].cr))
        n_bad++;
    if (n_bad) {
        fprintf(out, "  worst finite errors (error desc, index asc):\n");
        print_cases(out, r->worst, n_bad, m);
        if (recheck && recheck[0][0])
            fprintf(out, "  re-check the worst:   %s\n", recheck[0]);
    }
    if (r->n_mismatch) {
        fprintf(out, "  class mismatches (%d of %llu, infinite errors first):\n", r->n_mismatch,
                (unsigned long long)r->mismatched_special);
        print_cases(out, r->mismatch, r->n_mismatch, m);
        if (recheck && recheck[1][0])
            fprintf(out, "  re-check the first:   %s\n", recheck[1]);
    }
    if (gated)
        fprintf(out, "  gate --max-ulp %g:   %s\n", T,
                (r->max_ulp > T || r->mismatched_special) ? "FAILED" : "passed");
}

/* The report on stdout: JSON (with the gate's verdict when gated) or text. */
void ulp_emit_report(const fl_ulp_report *r, const ulp_meta *m, const char (*recheck)[1024], double T, int gated,
                     int json)
{
    if (!json) {
        print_report(stdout, r, m, recheck, T, gated);
        return;
    }
    json_t *o = report_json(r, m);
    if (gated)
        json_object_set_new(o, "gate", json_string(r->max_ulp > T || r->mismatched_special ? "failed" : "passed"));
    json_dumpf(o, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(o);
}

/* ---- merge ------------------------------------------------------------------------------------------ */

/* The [lo, hi) shards of the report in file `path` appended to `all`; one that overlaps an earlier
   report's is an error (the same elements counted twice). */
static int add_shards(json_t *all, json_t *sh, const char *path)
{
    const char *cmd = "ulp";
    int rc = FL_EXIT_OK;
    for (size_t k = 0; rc == FL_EXIT_OK && k < json_array_size(sh); k++) {
        json_t *a = json_array_get(sh, k);
        const json_int_t lo = json_integer_value(json_array_get(a, 0)), hi = json_integer_value(json_array_get(a, 1));
        for (size_t q = 0; q < json_array_size(all); q++) {
            json_t *b = json_array_get(all, q);
            const json_int_t l2 = json_integer_value(json_array_get(b, 0)), h2 = json_integer_value(json_array_get(b, 1));
            if (lo < h2 && l2 < hi) {
                fprintf(stderr, "fp8lab %s: %s: shard [%lld, %lld) overlaps [%lld, %lld) of an earlier report\n", cmd,
                        path, (long long)lo, (long long)hi, (long long)l2, (long long)h2);
                rc = FL_EXIT_FAIL;
            }
        }
        json_array_append(all, a);
    }
    return rc;
}

/* The file at path into memory (at most ULP_READ_MAX_BYTES + 1 bytes: the parser refuses more). */
static char *read_file(const char *path, size_t *n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        bad(err, errlen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap || len > ULP_READ_MAX_BYTES)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb)
            free(buf);
        buf = nb;
        cap *= 2;
    }
    if (!buf || ferror(f)) {
        bad(err, errlen, "%s%s", buf ? "cannot read: " : "out of memory", buf ? strerror(errno) : "");
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = len;
    return buf;
}

/* The field in which report b differs from a (shards of one run agree on everything but their counts),
   or NULL. */
static const char *meta_differs(const ulp_meta *a, const ulp_meta *b)
{
    if (strcmp(a->fn_name, b->fn_name))
        return "function";
    if (a->fmt != b->fmt)
        return "format";
    if (a->ovf != b->ovf)
        return "overflow";
    if (a->n_inputs != b->n_inputs || memcmp(a->in_kind, b->in_kind, (size_t)a->n_inputs * sizeof a->in_kind[0]))
        return "input_formats";
    if (strcmp(a->source, b->source))
        return "source";
    if (strcmp(a->params, b->params))
        return "params";
    if (a->row_len != b->row_len)
        return "row_len";
    return NULL;
}

static int cmd_merge(int argc, char **argv, int first, int json, int gated, double T)
{
    const char *cmd = "ulp";
    fl_ulp_report total;
    fl_ulp_report_init(&total);
    ulp_report_doc head, d;
    memset(&head, 0, sizeof head);
    json_t *shards = json_array();
    int rc = FL_EXIT_OK;
    for (int i = first; i < argc && rc == FL_EXIT_OK; i++) {
        if (argv[i][0] == '-')
            continue;
        char err[512];
        size_t n;
        char *text = read_file(argv[i], &n, err, sizeof err);
        if (!text || ulp_report_parse(&d, text, n, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s: %s\n", cmd, argv[i], err);
            free(text);
            rc = FL_EXIT_FAIL;
            break;
        }
        free(text);
        const char *differs = head.root ? meta_differs(&head.meta, &d.meta) : NULL;
        if (differs) {
            fprintf(stderr, "fp8lab %s: %s: \"%s\" differs from the first report's; not shards of one run\n", cmd,
                    argv[i], differs);
            rc = FL_EXIT_FAIL;
        }
        if (rc == FL_EXIT_OK)
            rc = add_shards(shards, d.meta.shards, argv[i]);
        if (rc == FL_EXIT_OK)
            fl_ulp_report_merge(&total, &d.rep);
        if (!head.root)
            head = d;
        else
            ulp_report_doc_free(&d);
    }
    if (!head.root) {
        json_decref(shards);
        return rc == FL_EXIT_OK ? fl_cli_usage_error(cmd, "--merge needs report files") : rc;
    }
    if (rc == FL_EXIT_OK) {
        ulp_meta m = head.meta;
        m.shards = shards;
        ulp_emit_report(&total, &m, NULL, T, gated, json);
        if (gated && (total.max_ulp > T || total.mismatched_special))
            rc = FL_EXIT_GATE;
    }
    ulp_report_doc_free(&head);
    json_decref(shards);
    return rc;
}

int ulp_merge_main(int argc, char **argv, int first, int json, int gated, double T)
{
    const char *cmd = "ulp";
    /* options before --merge apply; the files follow it, and so may --json and --max-ulp */
    for (int i = first; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--max-ulp")) {
            if (i + 1 >= argc || fl_cli_parse_double(&T, argv[i + 1]) || !(T >= 0))
                return fl_cli_usage_error(cmd, "--max-ulp needs a non-negative number");
            gated = 1;
            argv[i + 1] = (char *)"-"; /* not a file: cmd_merge skips arguments that begin with '-' */
            i++;
        } else if (argv[i][0] == '-' && argv[i][1])
            return fl_cli_usage_error(cmd, "unknown option '%s' after --merge", argv[i]);
    }
    return cmd_merge(argc, argv, first, json, gated, T);
}
