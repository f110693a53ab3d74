/* test_ulp_merge_bad.c — `fp8lab ulp --merge` on damaged and hostile reports, and the range checks of
 * `ulp --threads` and `--index-base`, through the CLI binary ($FP8LAB, else build/fp8lab).
 *
 * The hostile reports are real `ulp --json` reports (silu_f32 and swiglu_bf16 over [0, 300)) edited
 * here with jansson: a key deleted, a value of the wrong type or out of range, counts that contradict
 * each other, arrays longer than the fixed limits (8 and 5 input formats, 11 worst cases).  Each must
 * give exit status 1, one line on stderr naming the file and the field, and nothing on stdout (the
 * README's "Bad input" rule).  Before the fix these crashed (a missing "overflow" or "format": NULL
 * into strcmp; 8 inputs: a stack overflow), invented an fp32 fifth input, let "max_ulp": -1 pass a
 * --max-ulp 0.4 gate, printed 3270400% for count 0 and 18446744073709551611 for a count of -5.
 * The unedited reports still merge (exit 0, the same counts), and so do two row-wise shards of one run
 * (whose row_len must agree, and go with a row-wise function only).
 *
 * --threads takes 1 .. 1024, --index-base B needs B + elements <= 2^63 - 1 (a JSON report's largest
 * index); both refusals exit 2 naming the flag. */
#include "check.h"
#include "cli_test.h"
#include "dir_test.h"
#include "npy_test.h"
#include "npy.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

/* Runs the CLI with args (NULL-terminated, after the program name): stdout into dir/out.txt, stderr
   into dir/err.txt.  The exit status, or 128 + the signal that ended it. */
static int run_cli(const char *const *args) { return run_in_dir(dir, "out.txt", args); }

static char *slurp_dir(const char *name) { return dir_slurp(dir, name); }

static json_t *load(const char *name) { return dir_json(dir, name); }

static const char *save(json_t *o, const char *name)
{
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK(json_dump_file(o, p, JSON_INDENT(1)) == 0, "cannot write %s", p);
    return p;
}

static json_t *worst(json_t *o, size_t i) { return json_array_get(json_object_get(o, "worst"), i); }

/* o (edited) must be refused by --merge: exit 1, one stderr line naming the file and `field`, no
   output; with --json and without, and gated.  Takes o's reference. */
static void refused(json_t *o, const char *field, const char *what)
{
    const char *p = save(o, "bad.json");
    json_decref(o);
    const char *const modes[3][4] = { { "--json", NULL }, { NULL }, { "--max-ulp", "0.4", NULL } };
    for (int m = 0; m < 3; m++) {
        const char *args[8] = { "ulp", "--merge", p };
        int n = 3;
        for (int k = 0; modes[m][k]; k++)
            args[n++] = modes[m][k];
        args[n] = NULL;
        const int rc = run_cli(args);
        const char *err = slurp_dir("err.txt");
        CHECK(rc == 1, "%s: --merge exit %d, want 1 (mode %d); stderr: %s", what, rc, m, err);
        CHECK(strstr(err, p) && strstr(err, field), "%s: the message names neither %s nor '%s': %s", what, p, field,
              err);
        CHECK(strchr(err, '\n') == err + strlen(err) - 1, "%s: the message is not one line: %s", what, err);
        CHECK(!*slurp_dir("out.txt"), "%s: --merge printed a report: %s", what, slurp_dir("out.txt"));
    }
}

static json_t *copy_of(json_t *base) { return json_deep_copy(base); }

static json_t *with(json_t *base, const char *key, json_t *v)
{
    json_t *o = copy_of(base);
    json_object_set_new(o, key, v);
    return o;
}

static json_t *without(json_t *base, const char *key)
{
    json_t *o = copy_of(base);
    CHECK(json_object_del(o, key) == 0, "the report has no '%s'", key);
    return o;
}

/* base with n input formats of `fmt` and n inputs in every worst case (copies of the first). */
static json_t *n_inputs(json_t *base, int n, const char *fmt)
{
    json_t *o = copy_of(base), *f = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(f, json_string(fmt));
    json_object_set_new(o, "input_formats", f);
    for (size_t i = 0; i < json_array_size(json_object_get(o, "worst")); i++) {
        json_t *in = json_object_get(worst(o, i), "inputs"), *first = json_deep_copy(json_array_get(in, 0));
        json_array_clear(in);
        for (int k = 0; k < n; k++)
            json_array_append(in, first);
        json_decref(first);
    }
    return o;
}

static void merge_ok(const char *file, json_t *want)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    const char *args[] = { "ulp", "--merge", p, "--json", NULL };
    CHECK(run_cli(args) == 0, "merge of the unedited %s: %s", file, slurp_dir("err.txt"));
    json_t *m = load("out.txt");
    static const char *const same[] = { "count", "correctly_rounded", "faithful", "histogram", "worst",
                                        "class_mismatches", "max_ulp", "sum_ulp_units", "input_formats", "source",
                                        "shards", "row_len", "report_version" };
    for (size_t k = 0; k < sizeof same / sizeof *same; k++)
        CHECK(json_equal(json_object_get(m, same[k]), json_object_get(want, same[k])) ||
                  (!json_object_get(m, same[k]) && !json_object_get(want, same[k])),
              "merge of one report changed '%s'", same[k]);
    json_decref(m);
}

static void test_bad_reports(void)
{
    char range[] = "0:300";
    const char *a1[] = { "ulp", "--impl", "silu_f32", "--range", range, "--json", NULL };
    CHECK(run_cli(a1) == 0, "silu_f32 report: %s", slurp_dir("err.txt"));
    json_t *r1 = load("out.txt");
    save(r1, "silu.json");
    const char *a2[] = { "ulp", "--impl", "swiglu_bf16", "--range", range, "--json", NULL };
    CHECK(run_cli(a2) == 0, "swiglu_bf16 report: %s", slurp_dir("err.txt"));
    json_t *r2 = load("out.txt");
    save(r2, "swiglu.json");
    merge_ok("silu.json", r1);
    merge_ok("swiglu.json", r2);

    /* every field the reader reads, deleted */
    static const char *const keys[] = { "function", "format", "overflow", "input_formats", "source", "params",
                                        "shards", "count", "correctly_rounded", "faithful", "mismatched_special",
                                        "infinite_errors", "max_ulp", "mean_ulp", "sum_ulp_units", "grid_bits",
                                        "histogram", "worst", "class_mismatches", "report_version" };
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char what[64];
        snprintf(what, sizeof what, "no '%s'", keys[k]);
        refused(without(r1, keys[k]), keys[k], what);
    }
    /* the reproducers of issue 24 */
    refused(n_inputs(r1, 8, "fp32"), "input_formats", "8 inputs");
    refused(n_inputs(r1, 5, "fp32"), "input_formats", "5 inputs");
    refused(with(r1, "max_ulp", json_integer(-1)), "max_ulp", "max_ulp -1");
    refused(with(r1, "count", json_integer(0)), "count", "count 0");
    /* a report of an older fp8lab (faithful decided on the rounded error, one case list) */
    refused(with(r1, "report_version", json_integer(1)), "report_version", "report version 1");
    {
        json_t *o = copy_of(r1);
        json_object_set_new(json_object_get(o, "histogram"), "<=2^-21", json_integer(-5));
        refused(o, "histogram", "a negative histogram count");
    }
    /* types and ranges */
    refused(with(r1, "format", json_string("e9m9")), "format", "an unknown format");
    refused(with(r1, "format", json_integer(3)), "format", "a format that is a number");
    refused(with(r1, "format", json_string("e8m0")), "format", "a scale format");
    refused(with(r1, "function", json_string("no_such_fn")), "function", "an unknown function");
    refused(with(r1, "overflow", json_string("maybe")), "overflow", "a bad overflow policy");
    refused(with(r1, "overflow", json_null()), "overflow", "overflow null");
    refused(with(r1, "input_formats", json_pack("[s]", "nope")), "input_formats", "an unknown input format");
    refused(with(r1, "input_formats", json_array()), "input_formats", "no input formats");
    refused(with(r1, "source", json_integer(1)), "source", "a source that is a number");
    refused(with(r1, "params", json_string("a=1,b=2,c=3,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")),
            "params", "params longer than a report's 255 bytes");
    refused(with(r1, "count", json_real(300)), "count", "a count that is a real");
    refused(with(r1, "count", json_string("300")), "count", "a count that is a string");
    refused(with(r1, "count", json_integer(301)), "count", "a count beyond the shards and the histogram");
    refused(with(r1, "correctly_rounded", json_integer(301)), "correctly_rounded", "more correctly rounded than judged");
    refused(with(r1, "faithful", json_integer(17)), "faithful", "faithful against the histogram");
    refused(with(r1, "infinite_errors", json_integer(1)), "infinite_errors", "infinite errors the histogram lacks");
    refused(with(r1, "mismatched_special", json_integer(-1)), "mismatched_special", "a negative count");
    refused(with(r1, "max_ulp", json_string("inf")), "max_ulp", "max_ulp \"inf\" (the largest finite error)");
    refused(with(r1, "max_ulp", json_real(0.25)), "max_ulp", "max_ulp below the worst case");
    refused(with(r1, "max_ulp", json_real(0x1p-30)), "max_ulp", "max_ulp off the 2^-20 grid");
    refused(with(r1, "max_ulp", json_real(1e300)), "max_ulp", "max_ulp beyond the worst case and the sum");
    refused(with(r1, "mean_ulp", json_string("x")), "mean_ulp", "mean_ulp a string");
    refused(with(r1, "sum_ulp_units", json_string("12x")), "sum_ulp_units", "a sum that is not a number");
    refused(with(r1, "sum_ulp_units", json_string("0")), "sum_ulp_units", "a sum of 0 with errors");
    refused(with(r1, "sum_ulp_units", json_string("99999999999999999999999999999")), "sum_ulp_units",
            "a sum beyond count * max_ulp");
    refused(with(r1, "grid_bits", json_integer(19)), "grid_bits", "another grid");
    refused(with(r1, "histogram", json_array()), "histogram", "a histogram that is an array");
    refused(with(r1, "shards", json_pack("[[i,i]]", 300, 0)), "shards", "a shard with lo > hi");
    refused(with(r1, "shards", json_pack("[[i,i]]", -300, 0)), "shards", "a negative shard");
    refused(with(r1, "shards", json_pack("[[i,i]]", 0, 299)), "shards", "shards narrower than the count");
    refused(with(r1, "shards", json_pack("[[i,i],[i,i]]", 0, 200, 100, 300)), "shards", "overlapping shards");
    refused(with(r1, "shards", json_pack("[[i]]", 0)), "shards", "a shard without hi");
    refused(with(r1, "shards", json_array()), "shards", "no shards");
    /* the worst list */
    {
        json_t *o = copy_of(r1);
        json_array_append(json_object_get(o, "worst"), worst(o, 0));
        refused(o, "worst", "11 worst cases");
    }
    {
        json_t *o = copy_of(r1);
        json_array_remove(json_object_get(o, "worst"), 9);
        refused(o, "worst", "9 worst cases of 300 outputs");
    }
    {
        json_t *o = copy_of(r1);
        json_t *w = json_object_get(o, "worst"), *first = json_deep_copy(json_array_get(w, 0));
        json_array_remove(w, 0);
        json_array_append_new(w, first);
        refused(o, "worst", "worst cases out of order");
    }
    static const struct {
        const char *key;
        json_t *(*val)(void);
        const char *what;
    } wbad[] = {
        { "index", json_null, "an index that is null" },
        { "ulp", json_null, "an error that is null" },
        { "correctly_rounded", json_null, "correctly_rounded null" },
        { "mismatched_special", json_null, "mismatched_special null" },
        { "inputs", json_array, "no inputs" },
        { "bucket", json_null, "a bucket that is null" },
        { "output", json_object, "an output without hex" },
        { "reference", json_object, "a reference without hex" },
    };
    for (size_t k = 0; k < sizeof wbad / sizeof *wbad; k++) {
        json_t *o = copy_of(r1);
        json_object_set_new(worst(o, 3), wbad[k].key, wbad[k].val());
        char field[64];
        snprintf(field, sizeof field, "worst[3]");
        refused(o, field, wbad[k].what);
        o = copy_of(r1);
        json_object_del(worst(o, 3), wbad[k].key);
        refused(o, wbad[k].key, wbad[k].what);
    }
    static const char *const hexes[] = { "", "0x", "-1", "0x1ffffffff", " 0x1", "0x1 ", "0xg", "0x00000000000000001" };
    for (size_t k = 0; k < sizeof hexes / sizeof *hexes; k++) {
        json_t *o = copy_of(r1);
        json_object_set_new(json_object_get(worst(o, 0), "output"), "hex", json_string(hexes[k]));
        refused(o, "output", "a bad output hex");
        o = copy_of(r1);
        json_object_set_new(json_array_get(json_object_get(worst(o, 0), "inputs"), 0), "hex", json_string(hexes[k]));
        refused(o, "inputs", "a bad input hex");
    }
    {
        json_t *o = copy_of(r1);
        json_object_set_new(worst(o, 0), "ulp", json_string("nan"));
        refused(o, "ulp", "a NaN error");
        o = copy_of(r1);
        json_object_set_new(worst(o, 0), "ulp", json_real(-0.5));
        refused(o, "ulp", "a negative error");
        o = copy_of(r1);
        json_object_set_new(worst(o, 0), "ulp", json_string("inf"));
        refused(o, "ulp", "an infinite error the counts do not have");
    }
    {   /* the bucket must be the case's error's (or the next one above an edge) */
        json_t *o = copy_of(r1);
        json_object_set_new(worst(o, 0), "bucket", json_string(">16"));
        refused(o, "bucket", "a bucket that is not the error's");
        o = copy_of(r1);
        json_object_set_new(worst(o, 0), "bucket", json_string("<=7"));
        refused(o, "bucket", "a bucket that is no label");
    }
    {   /* a class mismatch list that holds a case with no mismatch, or is missing one */
        json_t *o = copy_of(r1);
        json_array_append(json_object_get(o, "class_mismatches"), worst(o, 0));
        refused(o, "class_mismatches", "a mismatch list with a case the counts do not have");
        json_t *q = copy_of(r1);
        json_object_set_new(q, "mismatched_special", json_integer(1));
        json_t *c = json_deep_copy(worst(q, 0));
        json_array_append_new(json_object_get(q, "class_mismatches"), c);
        refused(q, "class_mismatches", "a mismatch list case without mismatched_special");
    }
    /* two inputs, one in the worst case */
    {
        json_t *o = copy_of(r2);
        json_array_remove(json_object_get(worst(o, 0), "inputs"), 1);
        refused(o, "inputs", "one input of two");
        refused(with(r2, "input_formats", json_pack("[s]", "bf16")), "input", "one input format of two");
    }
    /* not a report at all */
    refused(json_array(), "report", "an array");
    {
        const char *p = save(r1, "trunc.json");
        FILE *f = fopen(p, "r+");
        CHECK(f && ftruncate(fileno(f), 100) == 0, "truncate");
        fclose(f);
        const char *args[] = { "ulp", "--merge", p, "--json", NULL };
        CHECK(run_cli(args) == 1 && strstr(slurp_dir("err.txt"), p) && !*slurp_dir("out.txt"), "a truncated report: %s",
              slurp_dir("err.txt"));
    }
    {   /* a count beyond int64: jansson refuses it */
        const char *p = save(r1, "big.json");
        FILE *f = fopen(p, "w");
        CHECK(f, "write");
        char *txt = json_dumps(r1, 0), *at = strstr(txt, "\"count\": 300");
        CHECK(at, "no count in %s", txt);
        fprintf(f, "%.*s\"count\": 18446744073709551615%s", (int)(at - txt), txt, at + strlen("\"count\": 300"));
        fclose(f);
        free(txt);
        const char *args[] = { "ulp", "--merge", p, "--json", NULL };
        CHECK(run_cli(args) == 1 && strstr(slurp_dir("err.txt"), p) && !*slurp_dir("out.txt"), "a count of 2^64 - 1: %s",
              slurp_dir("err.txt"));
    }
    /* row-wise reports: row_len goes with a row-wise function, and the shards of one run agree on it */
    {
        char r_a[] = "0:2", r_b[] = "2:4";
        const char *aa[] = { "ulp", "--impl", "polynorm3_bf16", "--row-len", "16", "--range", r_a, "--json", NULL };
        CHECK(run_cli(aa) == 0, "polynorm3_bf16 rows 0:2: %s", slurp_dir("err.txt"));
        json_t *a = load("out.txt");
        const char *ab[] = { "ulp", "--impl", "polynorm3_bf16", "--row-len", "16", "--range", r_b, "--json", NULL };
        CHECK(run_cli(ab) == 0, "polynorm3_bf16 rows 2:4: %s", slurp_dir("err.txt"));
        json_t *b = load("out.txt");
        save(a, "rows_a.json");
        merge_ok("rows_a.json", a);
        char pa[128];
        snprintf(pa, sizeof pa, "%s/rows_a.json", dir);
        const char *pb = save(b, "rows_b.json");
        const char *args[] = { "ulp", "--merge", pa, pb, "--json", NULL };
        CHECK(run_cli(args) == 0, "two row shards of one run: %s", slurp_dir("err.txt"));
        json_object_set_new(b, "row_len", json_integer(32));
        save(b, "rows_b.json");
        CHECK(run_cli(args) == 1 && strstr(slurp_dir("err.txt"), pb) && strstr(slurp_dir("err.txt"), "row_len") &&
                  !*slurp_dir("out.txt"),
              "row shards with different row_len: %s", slurp_dir("err.txt"));
        refused(without(a, "row_len"), "row_len", "a row-wise report without row_len");
        refused(with(r1, "row_len", json_integer(16)), "row_len", "an elementwise report with row_len");
        refused(with(a, "row_len", json_integer(0)), "row_len", "row_len 0");
        refused(with(a, "row_len", json_integer(1 << 24)), "row_len", "row_len 2^24");
        json_decref(a);
        json_decref(b);
    }
    json_decref(r1);
    json_decref(r2);
}

static void write_npy(const char *name, fl_dtype dt, const void *data, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    put_npy(p, dt, 0, (int64_t)n, data);
}

/* --threads and --index-base: refused with exit 2 and a message naming the flag, nothing printed */
static void test_counts(void)
{
    static const char *const bad_threads[] = { "10000", "0", "1025", "-1", "18446744073709551617" };
    for (size_t k = 0; k < sizeof bad_threads / sizeof *bad_threads; k++) {
        const char *args[] = { "ulp", "--impl", "silu_f32", "--range", "0:10", "--threads", bad_threads[k], NULL };
        const int rc = run_cli(args);
        CHECK(rc == 2 && strstr(slurp_dir("err.txt"), "--threads") && !*slurp_dir("out.txt"), "--threads %s: exit %d: %s",
              bad_threads[k], rc, slurp_dir("err.txt"));
    }
    const char *ok[] = { "ulp", "--impl", "silu_f32", "--range", "0:10", "--threads", "2", "--json", NULL };
    CHECK(run_cli(ok) == 0, "--threads 2: %s", slurp_dir("err.txt"));

    const float x[4] = { 0.5f, 1.0f, -2.0f, 3.0f };
    write_npy("x.npy", FL_DT_F32, x, 4);
    write_npy("y.npy", FL_DT_F32, x, 4); /* relu's outputs would be exact; these are judged as relu */
    char px[128], py[128];
    snprintf(px, sizeof px, "%s/x.npy", dir);
    snprintf(py, sizeof py, "%s/y.npy", dir);
    /* 2^64 - 1 wrapped; 2^63 - 4 + 4 elements is 2^63, one beyond a report's int64 indices */
    static const char *const bad_base[] = { "18446744073709551615", "9223372036854775808", "9223372036854775804" };
    for (size_t k = 0; k < sizeof bad_base / sizeof *bad_base; k++) {
        const char *args[] = { "ulp", "relu", "--format", "fp32", "--inputs", px, "--outputs", py, "--index-base",
                               bad_base[k], "--json", NULL };
        const int rc = run_cli(args);
        CHECK(rc == 2 && strstr(slurp_dir("err.txt"), "--index-base") && !*slurp_dir("out.txt"),
              "--index-base %s: exit %d: %s", bad_base[k], rc, slurp_dir("err.txt"));
    }
    const char *good[] = { "ulp", "relu", "--format", "fp32", "--inputs", px, "--outputs", py, "--index-base",
                           "9223372036854775803", "--json", NULL };
    CHECK(run_cli(good) == 0, "--index-base 2^63 - 5 with 4 elements: %s", slurp_dir("err.txt"));
    json_t *o = load("out.txt");
    json_t *sh = json_array_get(json_object_get(o, "shards"), 0);
    CHECK(json_integer_value(json_array_get(sh, 1)) == INT64_MAX, "the last shard ends at 2^63 - 1");
    json_decref(o);
}

int main(void)
{
    cli_init();
    dir_make(dir, sizeof dir, "/tmp/fp8lab-merge-bad-XXXXXX");
    test_bad_reports();
    test_counts();
    dir_remove(dir);
    PASS("test_ulp_merge_bad");
}
