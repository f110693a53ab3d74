/* test_json_writers.c — every JSON the commands write, with hostile bytes in the strings they record:
 * files and folders named with quotes, backslashes, control bytes (a tab, a newline, 0x01, 0x1b),
 * invalid UTF-8 (0xff, 0xfe, a cut sequence) and a valid 2-byte sequence.  Through the CLI.
 *
 *  1. config.json, summary.json and every telemetry.jsonl line parse with jansson; config.json's
 *     "data" is the path under fl_json.h's rule (valid UTF-8 kept, each bad byte U+FFFD: the test
 *     builds the expected string itself); the checkpoint's record gives the path back byte for byte.
 *  2. A fork of that run's checkpoint (its path as hostile) writes a config.json whose "fork_from" is
 *     that path under the same rule, and a resume of the hostile folder runs.
 *  3. ulp --json (arrays with hostile names; "source"), ulp --merge --json, quant --json ("source"),
 *     order --input --json ("input"), attribute --json on the hostile run folder ("run"), formats
 *     --json, demo.json and mechanism.json in hostile --out folders: each parses with jansson, and
 *     the path it records follows the rule.
 */
#include "check.h"
#include "cli_test.h"
#include "npy_test.h"
#include "train/train.h"

#include <jansson.h>
#include <sys/stat.h>

static char tmp[256];

/* s under fl_json.h's rule, for the bytes this test uses: ASCII kept, the 2-byte "\xc3\xa9" kept,
   every other byte >= 0x80 (alone or a cut sequence) replaced by U+FFFD. */
static void json_rule(char *out, size_t n, const char *s)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && w + 4 < n; p++) {
        if (p[0] == 0xc3 && p[1] == 0xa9) {
            out[w++] = (char)p[0];
            out[w++] = (char)p[1];
            p++;
        } else if (*p >= 0x80) {
            memcpy(out + w, "\xef\xbf\xbd", 3);
            w += 3;
        } else {
            out[w++] = (char)*p;
        }
    }
    out[w] = 0;
}

static json_t *load(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    CHECK(j, "%s:%d: %s", path, je.line, je.text);
    return j;
}

static void string_is(json_t *o, const char *key, const char *raw, const char *file)
{
    char want[2048];
    json_rule(want, sizeof want, raw);
    const char *got = json_string_value(json_object_get(o, key));
    CHECK(got && !strcmp(got, want), "%s: \"%s\" is not the path under the JSON rule", file, key);
}

/* 1. */
static void writers(const char *data, const char *out)
{
    char p[2048], e[300];
    snprintf(e, sizeof e, "%s/err", tmp);
    const char *a[] = { "train", "--data", data, "--steps", "4", "--width", "16", "--layers", "1", "--heads", "2",
                        "--ffn", "32", "--seq", "8", "--batch", "2", "--log-every", "1", "--recipe", "fp8-delayed",
                        "--chan-every", "1", "--threads", "1", "--quiet", "--out", out, NULL };
    CHECK(run(e, a) == 0, "train on a hostile --data into a hostile --out");
    snprintf(p, sizeof p, "%s/config.json", out);
    json_t *c = load(p);
    string_is(c, "data", data, p);
    json_decref(c);
    snprintf(p, sizeof p, "%s/summary.json", out);
    json_t *s = load(p);
    CHECK(json_integer_value(json_object_get(s, "steps_done")) == 4, "%s: steps_done", p);
    json_decref(s);
    snprintf(p, sizeof p, "%s/telemetry.jsonl", out);
    size_t n;
    char *t = slurp(p, &n);
    CHECK(t, "%s", p);
    int lines = 0;
    for (char *q = t; *q; lines++) {
        char *nl = strchr(q, '\n');
        CHECK(nl, "%s: a line without its newline", p);
        *nl = 0;
        json_error_t je;
        json_t *j = json_loads(q, 0, &je);
        CHECK(j && json_is_array(json_object_get(j, "sites")), "%s line %d: %s", p, lines + 1, j ? "no sites" : je.text);
        json_decref(j);
        q = nl + 1;
    }
    CHECK(lines == 4, "%s: %d lines", p, lines);
    free(t);
    fl_train_cfg cfg;
    fl_train_state st;
    char err[4600];
    CHECK(!fl_train_read_cfg(&cfg, &st, out, err, sizeof err), "%s", err);
    CHECK(cfg.data_kind == FL_DATA_TEXT && !strcmp(cfg.data_path, data), "the record gives the path back byte for byte");
    printf("  config.json, summary.json, telemetry.jsonl parse; \"data\" follows the JSON rule; the record keeps the bytes\n");
}

/* 2. */
static void fork_and_resume(const char *out)
{
    char ck[2048], fork[600], p[700], e[300];
    snprintf(ck, sizeof ck, "%s/checkpoint.bin", out);
    snprintf(fork, sizeof fork, "%s/fork", tmp);
    snprintf(e, sizeof e, "%s/err", tmp);
    const char *f[] = { "train", "--fork", ck, "--steps", "6", "--lr", "2e-3", "--threads", "1", "--quiet", "--out", fork, NULL };
    CHECK(run(e, f) == 0, "a fork of a checkpoint in a hostile folder");
    snprintf(p, sizeof p, "%s/config.json", fork);
    json_t *c = load(p);
    string_is(c, "fork_from", ck, p);
    CHECK(json_integer_value(json_object_get(c, "fork_step")) == 4, "%s: fork_step", p);
    json_decref(c);
    const char *r[] = { "train", "--resume", fork, "--quiet", NULL };
    CHECK(run(e, r) == 0, "resume of the fork (finished)");
    const char *r2[] = { "train", "--resume", out, "--quiet", NULL };
    CHECK(run(e, r2) == 0, "resume of the hostile folder (finished)");
    printf("  a fork records the hostile checkpoint path under the JSON rule; resumes run\n");
}


/* Whether the JSON string value of o's key holds raw under the JSON rule (the whole of it when whole). */
static void string_has(json_t *o, const char *key, const char *raw, int whole, const char *what)
{
    char want[2048];
    json_rule(want, sizeof want, raw);
    const char *got = json_string_value(json_object_get(o, key));
    CHECK(got && (whole ? !strcmp(got, want) : strstr(got, want) != NULL), "%s: \"%s\" does not hold the hostile path "
          "under the JSON rule", what, key);
}

/* Run args with stdout into file (under tmp) and load that as JSON; the command must exit with rc. */
static json_t *run_json(const char *file, const char *const *args, int rc)
{
    char out[700], e[300];
    snprintf(out, sizeof out, "%s/%s", tmp, file);
    snprintf(e, sizeof e, "%s/err", tmp);
    CHECK(run_out(out, e, args) == rc, "%s %s: exit status", args[0], file);
    return load(out);
}

/* 3. the other commands' JSON, on files and folders with hostile names */
static void other_writers(const char *out)
{
    char x[700], y[700], r0[700], r1[700], demo[700], mech[700];
    snprintf(x, sizeof x, "%s/x\"'\\\x01\n\xff\xc3\xa9.npy", tmp);
    snprintf(y, sizeof y, "%s/y \x1f\\\"\xfe.npy", tmp);
    const float v[8] = { 0.5f, 1.0f, 2.0f, -1.0f, 3.0f, -0.25f, 8.0f, 0.125f };
    put_npy(x, FL_DT_F32, 2, 4, v);
    put_npy(y, FL_DT_F32, 2, 4, v);
    const char *u0[] = { "ulp", "silu", "--format", "fp32", "--inputs", x, "--outputs", y, "--range", "0:4", "--json", NULL };
    const char *u1[] = { "ulp", "silu", "--format", "fp32", "--inputs", x, "--outputs", y, "--range", "4:8", "--json", NULL };
    json_t *j = run_json("r0.json", u0, 0);
    string_has(j, "source", y, 0, "ulp --json");
    json_decref(j);
    json_decref(run_json("r1.json", u1, 0));
    snprintf(r0, sizeof r0, "%s/r0.json", tmp);
    snprintf(r1, sizeof r1, "%s/r1.json", tmp);
    const char *m[] = { "ulp", "--merge", r0, r1, "--json", NULL };
    j = run_json("merged.json", m, 0);
    string_has(j, "source", y, 0, "ulp --merge --json");
    CHECK(json_integer_value(json_object_get(j, "count")) == 8, "the merged report counts 8 outputs");
    json_decref(j);
    const char *q[] = { "quant", "--input", x, "--json", NULL };
    j = run_json("quant.json", q, 0);
    string_has(j, "source", x, 1, "quant --json");
    json_decref(j);
    const char *o[] = { "order", "--input", x, "--json", NULL };
    j = run_json("order.json", o, 0);
    string_has(j, "input", x, 0, "order --input --json");
    json_decref(j);
    const char *a[] = { "attribute", out, "--json", NULL };
    j = run_json("attribute.json", a, 0);
    string_has(j, "run", out, 1, "attribute --json");
    json_decref(j);
    snprintf(demo, sizeof demo, "%s/demo\"\\\x02\xff", tmp);
    const char *d[] = { "demo", "--out", demo, "--seeds", "1", "--steps", "10", "--width", "16", "--layers", "1",
                        "--heads", "2", "--ffn", "32", "--seq", "8", "--batch", "2", "--data-len", "4096", NULL };
    const char *fm[] = { "formats", "--json", NULL };
    json_decref(run_json("formats.json", fm, 0));
    char e[300], p[800];
    snprintf(e, sizeof e, "%s/err", tmp);
    const int rcd = run(e, d);
    CHECK(rcd == 0 || rcd == 3 || rcd == 4, "demo into a hostile folder (exit %d)", rcd);
    snprintf(p, sizeof p, "%s/demo.json", demo);
    j = load(p);
    json_t *runs = json_object_get(j, "runs");
    CHECK(json_array_size(runs) == 9, "%s: 9 runs", p);
    string_has(json_array_get(runs, 0), "dir", demo, 0, "demo.json");
    json_decref(j);
    snprintf(mech, sizeof mech, "%s/mech\"\\\x03\xfe", tmp);
    const char *me[] = { "mechanism", "--out", mech, "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32",
                         "--seq", "8", "--batch", "2", "--data-len", "4096", "--lr", "0.03", "--horizon-tau", "9",
                         "--chan-every", "10", "--jobs", "1", NULL };
    const int rcm = run(e, me);
    CHECK(rcm == 0 || rcm == 3, "mechanism into a hostile folder (exit %d)", rcm);
    snprintf(p, sizeof p, "%s/mechanism.json", mech);
    json_decref(load(p));
    printf("  ulp, ulp --merge, quant, order, attribute, formats, demo.json and mechanism.json parse; their paths follow the JSON rule\n");
}

int main(void)
{
    cli_init();
    snprintf(tmp, sizeof tmp, "/tmp/fp8lab_test_json_writers_%d", (int)getpid());
    CHECK(!mkdir(tmp, 0755), "mkdir %s", tmp);
    char data[600], out[600];
    snprintf(data, sizeof data, "%s/d\"a'ta\\ \x01\t\n\x1b \xff\xfe \xc3 \xc3\xa9.txt", tmp);
    snprintf(out, sizeof out, "%s/o\"u't\\ \x02\t\n \xfe\xe2\x82 \xc3\xa9", tmp);
    FILE *f = fopen(data, "w");
    CHECK(f, "create %s", data);
    for (int i = 0; i < 300; i++)
        fprintf(f, "line %d: \"quoted\" \\ text\n", i);
    CHECK(!fclose(f), "write %s", data);
    writers(data, out);
    fork_and_resume(out);
    other_writers(out);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(!system(cmd), "cleanup");
    PASS("test_json_writers");
}
