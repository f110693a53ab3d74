/* test_run_readers.c — the readers of run folders refuse damaged files (issue 24, Low: "Readers
 * accept damaged files", "Sizes from a config are trusted", "Non-UTF-8 paths drop JSON keys"),
 * through the CLI on runs of a tiny model trained here:
 *   1. attribute: a records.csv, channels.csv or metrics.csv cut inside its last field (no newline
 *      at its end), a bad number in a column attribute does not use (records.csv's q99), and a row
 *      with an extra field exit 1 naming FILE:LINE; the intact run exits 0.
 *   2. attribute on a config.json with sizes the data cannot have: ffn 2^20 x layers 16 (beyond what
 *      train accepts) and ffn 65536 x layers 64 (accepted, but a 64-row channels.csv cannot hold one
 *      step of 2^22 rows) exit 1 naming the file, with a peak RSS under 100 MB (the first allocated
 *      677 MB and the second 173 MB before refusing).
 *   3. attribute --json on a run folder whose name is not UTF-8 ("r\xff x"): the JSON parses, and
 *      "run" is there, the bad byte written as U+FFFD (fl_json.h).
 *   4. mechanism --judge-search: the same table whatever the order of a pair's lines in runs.txt
 *      (each run's activation comes from its own configuration); an empty runs.txt, a header-only or
 *      a cut metrics.csv, a pair of two SwiGLU runs and an unpaired run exit 1.
 * Everything lives in a mkdtemp folder in /tmp, removed at the end.
 */
#include "check.h"
#include "cli_test.h"

#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

static char base[] = "/tmp/fp8lab-readers-XXXXXX";
static char clipath[PATH_MAX];

#define TINY "--width", "16", "--layers", "1", "--heads", "2", "--seq", "8", "--batch", "2", "--data-len", "4096", "--quiet"

/* Run the CLI, output into log.txt; its exit status and peak RSS in KB. */
static int run_rss(long *kb, const char *const *args)
{
    int st;
    struct rusage ru;
    const pid_t p = spawn("log.txt", args);
    CHECK(wait4(p, &st, 0, &ru) == p, "wait4");
    *kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void put(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "write %s", path);
}

/* A copy of run folder a as b (the files attribute and judge-search read). */
static void copy_run(const char *a, const char *b)
{
    static const char *const files[] = { "config.json", "metrics.csv", "channels.csv", "records.csv", "checkpoint.bin" };
    CHECK(mkdir(b, 0755) == 0, "mkdir %s", b);
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char pa[PATH_MAX], pb[PATH_MAX];
        size_t n;
        snprintf(pa, sizeof pa, "%s/%s", a, files[k]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[k]);
        char *t = slurp(pa, &n);
        if (t)
            put(pb, t, n);
        free(t);
    }
}

/* attribute on dir must exit 1 with a message holding want. */
static void refused(const char *dir, const char *want, const char *what)
{
    long kb;
    const int rc = run_rss(&kb, (const char *const[]){ "attribute", dir, NULL });
    size_t n;
    char *log = slurp("log.txt", &n);
    CHECK(rc == 1 && log && strstr(log, want), "attribute on %s: exit %d (want 1), message '%s' (want '%s')", what, rc,
          log ? log : "", want);
    free(log);
}

/* Cut the last cut bytes of dir/name (its newline and the end of its last field); its line count. */
static int cut_tail(const char *dir, const char *name, size_t cut)
{
    char p[PATH_MAX];
    size_t n;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *t = slurp(p, &n);
    CHECK(t && n > cut + 1 && t[n - 1] == '\n', "%s", p);
    int lines = 0;
    for (size_t k = 0; k < n; k++)
        lines += t[k] == '\n';
    put(p, t, n - cut);
    free(t);
    return lines;
}

/* Append text to line `line` (1-based) of dir/name. */
static void append_to_line(const char *dir, const char *name, int line, const char *text)
{
    char p[PATH_MAX];
    size_t n;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *t = slurp(p, &n), *a = t;
    CHECK(t, "%s", p);
    for (int k = 0; k < line && a; k++)
        a = strchr(a, '\n') + (k + 1 < line);
    CHECK(a, "%s has fewer than %d lines", p, line);
    FILE *f = fopen(p, "wb");
    CHECK(f, "%s", p);
    fwrite(t, 1, (size_t)(a - t), f);
    fputs(text, f);
    fputs(a, f);
    CHECK(fclose(f) == 0, "%s", p);
    free(t);
}

static void check_attribute(void)
{
    long kb;
    CHECK(run_rss(&kb, (const char *const[]){ "train", TINY, "--ffn", "32", "--steps", "20", "--chan-every", "1", "--out", "run", NULL }) == 0,
          "train");
    CHECK(run_rss(&kb, (const char *const[]){ "attribute", "run", NULL }) == 0, "attribute on the intact run");

    /* 1. damaged files (line counts: 20 steps of 1 x 32 channels, one metrics row per step; the
       records as many as the run set) */
    char want[128];
    copy_run("run", "c1");
    snprintf(want, sizeof want, "records.csv:%d: the last line has no newline", cut_tail("c1", "records.csv", 4));
    refused("c1", want, "a records.csv cut inside its last field");
    copy_run("run", "c2");
    CHECK(cut_tail("c2", "channels.csv", 3) == 641, "channels.csv: not 641 lines");
    refused("c2", "channels.csv:641: the last line has no newline", "a channels.csv cut inside its last field");
    copy_run("run", "c3");
    CHECK(cut_tail("c3", "metrics.csv", 2) == 21, "metrics.csv: not 21 lines");
    refused("c3", "metrics.csv:21: the last line has no newline", "a metrics.csv cut inside its last field");
    copy_run("run", "c4");
    append_to_line("c4", "records.csv", 2, "x"); /* the first record: the first step sets one */
    refused("c4", "records.csv:2: column 'q99': bad number '", "a bad number in records.csv's q99");
    copy_run("run", "c5");
    append_to_line("c5", "records.csv", 2, ",7");
    refused("c5", "records.csv:2: 14 fields, the header has 13", "an extra field in records.csv");

    /* 2. sizes the data cannot have */
    static const struct {
        const char *layers, *ffn, *want;
    } sz[2] = { { "16", "1048576", "config.json: \"ffn\" is not an integer in [1, 65536]" },
                { "64", "65536", "channels.csv: 4" /* its size */ } };
    for (int k = 0; k < 2; k++) {
        char d[16], p[64], cfg[256];
        snprintf(d, sizeof d, "big%d", k);
        copy_run("run", d);
        snprintf(cfg, sizeof cfg, "{\"act\": \"swiglu\", \"wd\": 0.1, \"layers\": %s, \"ffn\": %s}\n", sz[k].layers, sz[k].ffn);
        snprintf(p, sizeof p, "%s/config.json", d);
        put(p, cfg, strlen(cfg));
        snprintf(p, sizeof p, "%s/channels.csv", d);
        size_t n;
        char *t = slurp(p, &n), *e = t;
        for (int l = 0; l < 65; l++) /* the header and 64 rows */
            e = strchr(e, '\n') + 1;
        put(p, t, (size_t)(e - t));
        free(t);
        const int rc = run_rss(&kb, (const char *const[]){ "attribute", d, NULL });
        char *log = slurp("log.txt", &n);
        CHECK(rc == 1 && log && strstr(log, sz[k].want), "layers %s x ffn %s: exit %d, '%s'", sz[k].layers, sz[k].ffn, rc,
              log ? log : "");
        CHECK(kb < 100 * 1024, "layers %s x ffn %s: peak RSS %ld KB before refusing", sz[k].layers, sz[k].ffn, kb);
        free(log);
    }

    /* 3. a run folder whose name is not UTF-8 */
    copy_run("run", "r\xff x");
    CHECK(run_rss(&kb, (const char *const[]){ "attribute", "--json", "r\xff x", NULL }) == 0, "attribute --json");
    json_error_t je;
    json_t *j = json_load_file("log.txt", 0, &je);
    CHECK(j, "attribute --json: not JSON: %s", je.text);
    const char *r = json_string_value(json_object_get(j, "run"));
    CHECK(r && !strcmp(r, "r\xef\xbf\xbd x"), "attribute --json: \"run\" is %s", r ? r : "missing");
    json_decref(j);
}

static void put_runs(const char *text) { put("js/runs.txt", text, strlen(text)); }

static void check_judge_search(void)
{
    /* a SwiGLU run and its parameter-matched GeLU (F x 1.5); lr 0.1, wd 1: tau = 10 steps */
    long kb;
    static const char *const common[] = { "--steps", "40", "--lr", "0.1", "--wd", "1", "--warmup", "1", "--schedule", "constant" };
    CHECK(mkdir("js", 0755) == 0, "mkdir js");
    for (int g = 0; g < 2; g++) {
        const char *args[40] = { "train", TINY, "--act", g ? "gelu" : "swiglu", "--ffn", g ? "48" : "32", "--out",
                                 g ? "js/a-gelu" : "js/a-swiglu" };
        int n = 0;
        while (args[n])
            n++;
        for (size_t k = 0; k < sizeof common / sizeof common[0]; k++)
            args[n++] = common[k];
        CHECK(run_rss(&kb, args) == 0, "train %s", args[n - 1]);
    }
    static const char *const judge[] = { "mechanism", "--judge-search", "js", NULL };
    size_t n1, n2;
    put_runs("js/a-swiglu --act swiglu\njs/a-gelu --act gelu\n");
    CHECK(run_rss(&kb, judge) == 0, "judge-search, SwiGLU first");
    char *first = slurp("log.txt", &n1);
    CHECK(first && strstr(first, "a-swiglu "), "judge-search: %s", first ? first : "");
    put_runs("js/a-gelu --act gelu\njs/a-swiglu --act swiglu\n");
    CHECK(run_rss(&kb, judge) == 0, "judge-search, GeLU first");
    char *second = slurp("log.txt", &n2);
    CHECK(second && n1 == n2 && !memcmp(first, second, n1), "judge-search: the order of the lines changed the table:\n%s\n%s",
          first, second ? second : "");
    free(first);
    free(second);

    static const struct {
        const char *runs, *want;
    } bad[3] = { { "", "no pair of runs was judged" },
                 { "js/a-swiglu --act swiglu\njs/a-swiglu --act swiglu\n", "are not a SwiGLU / GeLU pair" },
                 { "js/a-swiglu --act swiglu\njs/a-gelu --act gelu\njs/a-swiglu\n", "runs.txt:3: the last run has no pair" } };
    for (int k = 0; k < 3; k++) {
        put_runs(bad[k].runs);
        const int rc = run_rss(&kb, judge);
        size_t n;
        char *log = slurp("log.txt", &n);
        CHECK(rc == 1 && log && strstr(log, bad[k].want), "judge-search on runs.txt '%s': exit %d, '%s'", bad[k].runs, rc,
              log ? log : "");
        free(log);
    }
    put_runs("js/a-swiglu --act swiglu\njs/a-gelu --act gelu\n");
    size_t n;
    char *m = slurp("js/a-gelu/metrics.csv", &n);
    CHECK(m, "js/a-gelu/metrics.csv");
    const size_t hdr = (size_t)(strchr(m, '\n') + 1 - m), half = (size_t)(strchr(m + n / 2, '\n') + 1 - m);
    /* header only, cut at a line's end, cut inside the last line */
    static const char *const want[3] = { "no data rows", "cut short", "the last line has no newline" };
    for (int k = 0; k < 3; k++) {
        put("js/a-gelu/metrics.csv", m, k == 0 ? hdr : k == 1 ? half : n - 2);
        const int rc = run_rss(&kb, judge);
        char *log = slurp("log.txt", &n1);
        CHECK(rc == 1 && log && strstr(log, "a-gelu/metrics.csv") && strstr(log, want[k]), "judge-search, %s metrics.csv: exit %d, '%s'",
              want[k], rc, log ? log : "");
        free(log);
    }
    /* a step the run cannot have logged (found by tests/fuzz: -1 and nan were undefined behaviour, 1e18
       a loop of 10^18 steps) */
    static const char *const steps[3] = { "-1", "nan", "1e18" };
    for (int k = 0; k < 3; k++) {
        char *b = malloc(n + 8);
        CHECK(b && m[hdr] == '0' && m[hdr + 1] == ',', "the first row is step 0");
        memcpy(b, m, hdr);
        const size_t w = strlen(steps[k]);
        memcpy(b + hdr, steps[k], w);
        memcpy(b + hdr + w, m + hdr + 1, n - hdr - 1);
        put("js/a-gelu/metrics.csv", b, n - 1 + w);
        const int rc = run_rss(&kb, judge);
        char *log = slurp("log.txt", &n1);
        CHECK(rc == 1 && log && strstr(log, "is not the run's next step"), "judge-search, step %s: exit %d, '%s'", steps[k],
              rc, log ? log : "");
        free(log);
        free(b);
    }
    free(m);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    const char *c = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    CHECK(realpath(c, clipath), "CLI %s not built", c);
    cli = clipath;
    CHECK(mkdtemp(base), "mkdtemp");
    CHECK(chdir(base) == 0, "chdir %s", base);
    check_attribute();
    check_judge_search();
    CHECK(chdir("/") == 0, "chdir /");
    CHECK(nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "remove %s", base);
    PASS("test_run_readers");
}
