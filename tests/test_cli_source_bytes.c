/* test_cli_source_bytes.c — the "source" key of `ulp --json` and `quant --json` reports when the file
 * path is not UTF-8 ($FP8LAB, else build/fp8lab).
 *
 * jansson's json_string() returns NULL for bytes that are not UTF-8, and the key was dropped without
 * a word.  Paths are bytes: with a Latin-1 name (0xe9, "é") the reports must keep "source", valid
 * UTF-8 with U+FFFD where the bad byte was (numerics/fl_json.h's rule), and such an ulp report must
 * still --merge.  Before the fix both reports had no "source" at all, and the merge refused the
 * report for lacking it. */
#include "check.h"
#include "cli_test.h"
#include "dir_test.h"
#include "npy_test.h"
#include "npy.h"

#include <jansson.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

/* Runs the CLI with args; stdout into dir/out.json, stderr into dir/err.txt; the exit status. */
static int run_cli(const char *const *args) { return run_in_dir(dir, "out.json", args); }

static json_t *load_out(void) { return dir_json(dir, "out.json"); }

static void write_npy(const char *path, int rows, int cols, const float *x)
{
    put_npy(path, FL_DT_F32, rows, cols, x);
}

/* o's "source" is present and is `want` */
static void source_is(json_t *o, const char *want, const char *what)
{
    json_t *s = json_object_get(o, "source");
    CHECK(json_is_string(s), "%s: the report has no \"source\"", what);
    CHECK(!strcmp(json_string_value(s), want), "%s: \"source\" is \"%s\", want \"%s\"", what, json_string_value(s),
          want);
}

int main(void)
{
    cli_init();
    dir_make(dir, sizeof dir, "/tmp/fp8lab-src-bytes-XXXXXX");

    float x[4 * 8];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16) * 0.5f;
    char px[128], py[128], want[160];
    snprintf(px, sizeof px, "%s/x.npy", dir);
    snprintf(py, sizeof py, "%s/caf\xe9.npy", dir); /* Latin-1 "café": not UTF-8 */
    write_npy(px, 4, 8, x);
    write_npy(py, 4, 8, x);

    /* ulp: "source" is "outputs PATH" */
    const char *ulp[] = { "ulp", "relu", "--format", "fp32", "--inputs", px, "--outputs", py, "--json", NULL };
    CHECK(run_cli(ulp) == 0, "ulp on %s failed", py);
    json_t *o = load_out();
    snprintf(want, sizeof want, "outputs %s/caf\xef\xbf\xbd.npy", dir);
    source_is(o, want, "ulp --json");
    char rep[128];
    snprintf(rep, sizeof rep, "%s/r.json", dir);
    CHECK(json_dump_file(o, rep, 0) == 0, "write %s", rep);
    json_decref(o);
    const char *merge[] = { "ulp", "--merge", rep, "--json", NULL };
    CHECK(run_cli(merge) == 0, "--merge of the report failed");
    o = load_out();
    source_is(o, want, "ulp --merge");
    json_decref(o);

    /* quant: "source" is the input path */
    const char *quant[] = { "quant", "--input", py, "--json", NULL };
    CHECK(run_cli(quant) == 0, "quant on %s failed", py);
    o = load_out();
    snprintf(want, sizeof want, "%s/caf\xef\xbf\xbd.npy", dir);
    source_is(o, want, "quant --json");
    json_decref(o);

    dir_remove(dir);
    PASS("test_cli_source_bytes");
}
