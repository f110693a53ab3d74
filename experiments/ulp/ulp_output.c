/* ulp_output.c — the reports of `fp8lab ulp`: JSON (written, and read back for --merge) and text,
 * and `--merge`, which adds shards' JSON reports into the report of the whole (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"

#include <math.h>
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

static json_t *report_json(const fl_ulp_report *r, const ulp_meta *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "function", json_string(m->fn_name));
    json_object_set_new(o, "format", json_string(fl_format_name(m->fmt)));
    json_object_set_new(o, "overflow", json_string(m->ovf == FL_OVF_SATURATE ? "saturate" : "no-saturate"));
    json_t *ins = json_array();
    for (int k = 0; k < m->n_inputs; k++)
        json_array_append_new(ins, json_string(ulp_kind_name(m->in_kind[k])));
    json_object_set_new(o, "input_formats", ins);
    json_object_set_new(o, "source", json_string(m->source));
    json_object_set_new(o, "params", json_string(m->params));
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
    json_t *w = json_array();
    for (int i = 0; i < r->n_worst; i++) {
        const fl_ulp_case *c = &r->worst[i];
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
        json_object_set_new(e, "correctly_rounded", json_boolean(c->cr));
        json_object_set_new(e, "mismatched_special", json_boolean(c->special));
        json_array_append_new(w, e);
    }
    json_object_set_new(o, "worst", w);
    return o;
}

static int parse_hex(uint64_t *out, json_t *v)
{
    json_t *h = json_object_get(v, "hex");
    if (!json_is_string(h))
        return -1;
    char *end;
    *out = strtoull(json_string_value(h), &end, 16);
    return *end ? -1 : 0;
}

/* A report back from JSON (the fields report_json writes).  0, or -1 with err. */
static int report_from_json(fl_ulp_report *r, const json_t *o, int n_inputs, char *err, size_t errlen)
{
    fl_ulp_report_init(r);
#define GETU(field, key)                                                                            \
    do {                                                                                            \
        json_t *v_ = json_object_get(o, key);                                                       \
        if (!json_is_integer(v_) || json_integer_value(v_) < 0) {                                   \
            snprintf(err, errlen, "missing or bad '%s'", key);                                      \
            return -1;                                                                              \
        }                                                                                           \
        r->field = (uint64_t)json_integer_value(v_);                                                \
    } while (0)
    GETU(count, "count");
    GETU(correctly_rounded, "correctly_rounded");
    GETU(faithful, "faithful");
    GETU(mismatched_special, "mismatched_special");
    GETU(infinite, "infinite_errors");
#undef GETU
    json_t *mx = json_object_get(o, "max_ulp");
    json_t *sum = json_object_get(o, "sum_ulp_units");
    json_t *h = json_object_get(o, "histogram");
    json_t *w = json_object_get(o, "worst");
    json_t *g = json_object_get(o, "grid_bits");
    if (!json_is_number(mx) || !json_is_string(sum) || !json_is_object(h) || !json_is_array(w) ||
        !json_is_integer(g) || json_integer_value(g) != FL_ULP_GRID_BITS) {
        snprintf(err, errlen, "missing or bad max_ulp, sum_ulp_units, histogram, worst or grid_bits");
        return -1;
    }
    r->max_ulp = json_number_value(mx);
    if (fl_ulp_sum_from_string(r->sum, json_string_value(sum))) {
        snprintf(err, errlen, "bad sum_ulp_units");
        return -1;
    }
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++) {
        json_t *v = json_object_get(h, fl_ulp_hist_label((fl_ulp_hist)b));
        if (!json_is_integer(v)) {
            snprintf(err, errlen, "histogram lacks '%s'", fl_ulp_hist_label((fl_ulp_hist)b));
            return -1;
        }
        r->hist[b] = (uint64_t)json_integer_value(v);
    }
    if (json_array_size(w) > FL_ULP_WORST) {
        snprintf(err, errlen, "more than %d worst cases", FL_ULP_WORST);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(w); i++) {
        json_t *e = json_array_get(w, i);
        fl_ulp_case c;
        memset(&c, 0, sizeof c);
        json_t *idx = json_object_get(e, "index"), *in = json_object_get(e, "inputs"), *u = json_object_get(e, "ulp");
        uint64_t out, ref;
        if (!json_is_integer(idx) || !json_is_array(in) || (int)json_array_size(in) != n_inputs ||
            parse_hex(&out, json_object_get(e, "output")) || parse_hex(&ref, json_object_get(e, "reference"))) {
            snprintf(err, errlen, "bad worst case %zu", i);
            return -1;
        }
        c.index = (uint64_t)json_integer_value(idx);
        for (int k = 0; k < n_inputs; k++)
            if (parse_hex(&c.in[k], json_array_get(in, (size_t)k))) {
                snprintf(err, errlen, "bad input of worst case %zu", i);
                return -1;
            }
        c.out = (uint32_t)out;
        c.ref = (uint32_t)ref;
        c.ulp = json_is_string(u) && !strcmp(json_string_value(u), "inf") ? INFINITY : json_number_value(u);
        c.cr = json_is_true(json_object_get(e, "correctly_rounded"));
        c.special = json_is_true(json_object_get(e, "mismatched_special"));
        r->worst[r->n_worst++] = c;
    }
    return 0;
}

/* ---- text report -------------------------------------------------------------------------------- */

static void print_value(FILE *out, int kind, uint64_t b)
{
    const double v = ulp_bits_value(kind, b);
    const int hexw = kind == KIND_F64 ? 16 : (fl_format_storage_bits((fl_format)kind) + 3) / 4;
    fprintf(out, "%a (0x%0*llx)", v, hexw, (unsigned long long)b);
}

static void print_report(FILE *out, const fl_ulp_report *r, const ulp_meta *m, const char *recheck, double T, int gated)
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
    if (r->n_worst && (r->worst[0].ulp > 0 || !r->worst[0].cr)) {
        fprintf(out, "  worst cases (error desc, index asc):\n");
        for (int i = 0; i < r->n_worst; i++) {
            const fl_ulp_case *c = &r->worst[i];
            if (c->ulp == 0 && c->cr)
                break;
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
            if (isinf(c->ulp))
                fprintf(out, "  (inf ulp%s)\n", c->special ? ", class mismatch" : "");
            else
                fprintf(out, "  (%.6f ulp%s)\n", c->ulp, c->special ? ", class mismatch" : "");
        }
        if (recheck && r->worst[0].ulp > 0)
            fprintf(out, "  re-check the worst:   %s\n", recheck);
    }
    if (gated)
        fprintf(out, "  gate --max-ulp %g:   %s\n", T,
                (r->max_ulp > T || r->mismatched_special) ? "FAILED" : "passed");
}

/* The report on stdout: JSON (with the gate's verdict when gated) or text. */
void ulp_emit_report(const fl_ulp_report *r, const ulp_meta *m, const char *recheck, double T, int gated, int json)
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

/* What the merged report says besides its counts: the first report's, with every shard. */
static void meta_from_json(ulp_meta *m, json_t *head, int n_inputs, json_t *shards)
{
    memset(m, 0, sizeof *m);
    m->fn_name = json_string_value(json_object_get(head, "function"));
    fl_format_parse(&m->fmt, json_string_value(json_object_get(head, "format")));
    m->ovf = !strcmp(json_string_value(json_object_get(head, "overflow")), "saturate") ? FL_OVF_SATURATE
                                                                                      : FL_OVF_NOSATURATE;
    m->n_inputs = n_inputs;
    for (int k = 0; k < n_inputs && k < FL_MAX_INPUTS; k++) {
        const char *s = json_string_value(json_array_get(json_object_get(head, "input_formats"), (size_t)k));
        fl_format f;
        m->in_kind[k] = s && !strcmp(s, "f64") ? KIND_F64 : s && !fl_format_parse(&f, s) ? (int)f : FL_FMT_FP32;
    }
    m->source = json_string_value(json_object_get(head, "source"));
    snprintf(m->params, sizeof m->params, "%s", json_string_value(json_object_get(head, "params")));
    m->shards = shards;
    json_t *rl = json_object_get(head, "row_len");
    m->row_len = json_is_integer(rl) && json_integer_value(rl) > 0 ? (long)json_integer_value(rl) : 0;
}

static int cmd_merge(int argc, char **argv, int first, int json, int gated, double T)
{
    const char *cmd = "ulp";
    fl_ulp_report total;
    fl_ulp_report_init(&total);
    json_t *head = NULL, *shards = json_array();
    int n_inputs = 0;
    int rc = FL_EXIT_OK;
    for (int i = first; i < argc && rc == FL_EXIT_OK; i++) {
        if (argv[i][0] == '-')
            continue;
        json_error_t je;
        json_t *o = json_load_file(argv[i], 0, &je);
        char err[256];
        if (!o || !json_is_object(o)) {
            fprintf(stderr, "fp8lab %s: %s: not a JSON report (%s)\n", cmd, argv[i], o ? "not an object" : je.text);
            json_decref(o);
            rc = FL_EXIT_FAIL;
            break;
        }
        if (!head) {
            head = o;
            n_inputs = (int)json_array_size(json_object_get(o, "input_formats"));
        } else {
            static const char *const same[] = { "function", "format", "overflow", "input_formats", "source", "params" };
            for (size_t k = 0; k < FL_ARRAY_LEN(same); k++)
                if (!json_equal(json_object_get(head, same[k]), json_object_get(o, same[k]))) {
                    fprintf(stderr, "fp8lab %s: %s: '%s' differs from the first report's; not shards of one run\n", cmd,
                            argv[i], same[k]);
                    rc = FL_EXIT_FAIL;
                }
        }
        fl_ulp_report r;
        if (rc == FL_EXIT_OK && report_from_json(&r, o, n_inputs, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s: %s\n", cmd, argv[i], err);
            rc = FL_EXIT_FAIL;
        }
        if (rc == FL_EXIT_OK)
            rc = add_shards(shards, json_object_get(o, "shards"), argv[i]);
        if (rc == FL_EXIT_OK)
            fl_ulp_report_merge(&total, &r);
        if (o != head)
            json_decref(o);
    }
    if (!head) {
        json_decref(shards);
        return rc == FL_EXIT_OK ? fl_cli_usage_error(cmd, "--merge needs report files") : rc;
    }
    if (rc == FL_EXIT_OK) {
        ulp_meta m;
        meta_from_json(&m, head, n_inputs, shards);
        ulp_emit_report(&total, &m, NULL, T, gated, json);
        if (gated && (total.max_ulp > T || total.mismatched_special))
            rc = FL_EXIT_GATE;
    }
    json_decref(head);
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
