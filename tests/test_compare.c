/* test_compare.c — `--gemm-kchunk K` and `fp8lab compare` through the CLI.
 *
 *  1. --gemm-kchunk: a run with K larger than every sum (no sum cut) is byte-identical to the default
 *     run; K 4 gives another loss at some step, by roundings (another order of the same products), and records
 *     gemm_kchunk in config.json; a resumed K 4 run ends byte-identical to the uninterrupted one, and
 *     so does one at --threads 1.
 *  2. compare: K 8 against the envelope of K 4 and K 16 AGREEs (exit 0); seed 2 DISAGREEs at step 0
 *     (exit 3) and its configuration difference (seed) is named; the report's bound is the factor times
 *     the envelope's maximum (window) and, with --bound running, follows e_t; a run compared with itself
 *     AGREEs with ratio 0.
 *  3. --device twins (the GPU step's code on the CPU, gstep.h): its run AGREEs with the harness's within
 *     the K 4 / K 16 envelope; resumed from a kept checkpoint it ends byte-identical; metrics.csv writes
 *     nan for the columns it does not measure (the cast counters) and summary.json null, and its FFN
 *     statistics at step 0 are within 1e-4 of the harness's; mxfp8, nvfp4, --fast-accum under fp8-delayed,
 *     --chan-every and --gemm-kchunk with it, and --device cuda without --plan, exit 2 before a
 *     folder is made.  Under fp8-delayed its sites.csv at step 0 is the harness's, it counts its casts, and
 *     a resume is byte-identical (metrics.csv and sites.csv).  With --accum 2 it AGREEs with the harness's
 *     --accum 2 run, both resume byte-identical, and a delayed scale comes from the previous step's largest
 *     micro-batch amax.
 *  4. build/fp8lab-cuda, where make cuda built it, refuses --device cuda without a device: exit 2, a
 *     message, no folder.  make gpu-check's training part (tests/gpu_train_check.sh) in its twins mode: its runs, verdicts, resume
 *     check and report work without a device (four AGREE rows, the resume lines, exit 0).
 *  5. Bad input: a missing run, a metrics.csv cut short or with decreasing steps, runs that logged
 *     different steps — exit 1 naming the file; no --envelope, a bad --factor or --bound, an unknown
 *     option — exit 2.
 * Needs the CLI: $FP8LAB (tests/run.sh sets it), default build/fp8lab.
 */
#include "check.h"
#include "cli_test.h"
#include "dir_test.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char tmp[256];

#define TINY "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
             "--log-every", "1", "--quiet", "--lr", "1e-2", "--warmup", "2"

static void train(const char *name, const char *k, const char *seed)
{
    const char *a[] = { "train", "--steps", "20", TINY, "--gemm-kchunk", k, "--seed", seed, "--out", P("%s/%s", tmp, name),
                        NULL };
    CHECK(run(P("%s/err.txt", tmp), a) == 0, "train %s", name);
}

/* The loss column of a run's metrics.csv at data row t. */
static double loss_at(const char *name, int t)
{
    char *s = dir_slurp(P("%s/%s", tmp, name), "metrics.csv"); /* (a static buffer) */
    for (int i = 0; i <= t; i++)
        s = strchr(s, '\n') + 1;
    return strtod(strchr(s, ',') + 1, NULL);
}

static json_t *compare(int *rc, const char *ref, const char *test, const char *bound)
{
    const char *a[] = { "compare", P("%s/%s", tmp, ref), P("%s/%s", tmp, test), "--envelope", P("%s/k4", tmp),
                        "--envelope", P("%s/k16", tmp), "--bound", bound, "--json", NULL };
    *rc = run_out(P("%s/out.json", tmp), P("%s/err.txt", tmp), a);
    return dir_json(tmp, "out.json");
}

/* file of runs a and b (in tmp) are equal up to the first occurrence of marker (e.g. "\n1,": the rows
   of step 0), which both must have. */
static int same_head(const char *a, const char *b, const char *file, const char *marker)
{
    char *t[2];
    for (int k = 0; k < 2; k++) {
        const char *s = dir_slurp(P("%s/%s", tmp, k ? b : a), file), *e = strstr(s, marker); /* (a static buffer) */
        CHECK(e, "%s/%s has no '%s'", k ? b : a, file, marker + 1);
        t[k] = strndup(s, (size_t)(e - s));
        CHECK(t[k], "memory");
    }
    const int same = !strcmp(t[0], t[1]);
    free(t[0]);
    free(t[1]);
    return same;
}

/* Run name (in tmp, kept --keep-ckpt 9) resumed from its step-9 checkpoint: its metrics.csv, with what & 1 its
   sites.csv, with what & 2 its channels.csv and records.csv, byte-identical to the uninterrupted run's. */
static void resume_same(const char *name, int what)
{
    CHECK(!system(P("cp '%s/%s/metrics.csv' '%s/%s.csv' && cp '%s/%s/sites.csv' '%s/%s.sites' && "
                    "cp '%s/%s/checkpoint-9.bin' '%s/%s/checkpoint.bin'",
                    tmp, name, tmp, name, tmp, name, tmp, name, tmp, name, tmp, name)),
          "cp %s", name);
    if (what & 2)
        CHECK(!system(P("cp '%s/%s/channels.csv' '%s/%s.chan' && cp '%s/%s/records.csv' '%s/%s.rec'", tmp, name, tmp,
                        name, tmp, name, tmp, name)),
              "cp %s", name);
    const char *r[] = { "train", "--resume", P("%s/%s", tmp, name), "--quiet", NULL };
    CHECK(run(P("%s/err.txt", tmp), r) == 0, "resume %s from step 9", name);
    same_file(P("%s/%s.csv", tmp, name), P("%s/%s/metrics.csv", tmp, name));
    if (what & 1)
        same_file(P("%s/%s.sites", tmp, name), P("%s/%s/sites.csv", tmp, name));
    if (what & 2) {
        same_file(P("%s/%s.chan", tmp, name), P("%s/%s/channels.csv", tmp, name));
        same_file(P("%s/%s.rec", tmp, name), P("%s/%s/records.csv", tmp, name));
    }
}

/* --chan-every on --device twins (the GPU step fills the host model's per-channel telemetry): channels.csv
   has the harness's rows (steps, layers, channels), step 0's bit for bit; records.csv its header and
   records; a resume from step 9 leaves both files byte-identical. */
static void check_twins_chan(void)
{
    char err[512];
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    const char *h[] = { "train", "--steps", "20", TINY, "--chan-every", "5", "--seed", "1", "--out", P("%s/chh", tmp), NULL };
    const char *a[] = { "train", "--steps", "20", TINY, "--chan-every", "5", "--device", "twins", "--keep-ckpt", "9",
                        "--seed", "1", "--out", P("%s/cht", tmp), NULL };
    CHECK(run(err, h) == 0 && run(err, a) == 0, "--chan-every runs, harness and --device twins");
    int lines[2] = { 0, 0 };
    for (int k = 0; k < 2; k++)
        for (const char *c = dir_slurp(P("%s/%s", tmp, k ? "cht" : "chh"), "channels.csv"); *c; c++)
            lines[k] += *c == '\n';
    CHECK(lines[0] == lines[1] && lines[0] == 1 + 4 * 32, "channels.csv: %d and %d lines (1 + 4 steps x 32 channels)",
          lines[0], lines[1]);
    CHECK(same_head("chh", "cht", "channels.csv", "\n5,"), "channels.csv's step-0 rows: the twins' are the harness's");
    CHECK(contains(P("%s/cht/records.csv", tmp), "step,layer,amax,prev_max,channel") &&
              contains(P("%s/cht/records.csv", tmp), "\n0,0,"),
          "records.csv: the header and step 0's record");
    resume_same("cht", 2);
    printf("  --device twins --chan-every 5: channels.csv's rows as the harness's (step 0 bit for bit), records.csv "
           "written; resumed from step 9 byte-identical\n");
}

static void check_kchunk(void)
{
    train("k0", "0", "1");
    train("kbig", "4096", "1");
    same_file(P("%s/k0/metrics.csv", tmp), P("%s/kbig/metrics.csv", tmp));
    same_file(P("%s/k0/sites.csv", tmp), P("%s/kbig/sites.csv", tmp)); /* (checkpoint.bin records the option) */
    train("k4", "4", "1");
    train("k8", "8", "1");
    train("k16", "16", "1");
    train("s2", "0", "2");
    int first = -1;
    for (int t = 0; t < 20 && first < 0; t++)
        if (loss_at("k4", t) != loss_at("k0", t))
            first = t;
    CHECK(first >= 0, "K 4 sums in another order: some step's loss differs");
    CHECK(fabs(loss_at("k4", first) - loss_at("k0", first)) < 1e-5, "... by roundings only at first (step %d: %a, %a)",
          first, loss_at("k4", first), loss_at("k0", first));
    json_t *c = dir_json(P("%s/k4", tmp), "config.json");
    CHECK(json_integer_value(json_object_get(c, "gemm_kchunk")) == 4, "config.json records gemm_kchunk");
    json_decref(c);
    /* resume and thread count: the same bits */
    const char *a[] = { "train", "--steps", "20", TINY, "--gemm-kchunk", "4", "--seed", "1", "--keep-ckpt", "9",
                        "--threads", "1", "--out", P("%s/k4r", tmp), NULL };
    CHECK(run(P("%s/err.txt", tmp), a) == 0, "K 4 at one thread");
    same_file(P("%s/k4/metrics.csv", tmp), P("%s/k4r/metrics.csv", tmp));
    CHECK(!system(P("cp '%s/k4r/checkpoint-9.bin' '%s/k4r/checkpoint.bin'", tmp, tmp)), "cp");
    const char *r[] = { "train", "--resume", P("%s/k4r", tmp), "--quiet", NULL };
    CHECK(run(P("%s/err.txt", tmp), r) == 0, "resume K 4 from step 9");
    same_file(P("%s/k4/metrics.csv", tmp), P("%s/k4r/metrics.csv", tmp));
    printf("  --gemm-kchunk: K 4096 byte-identical to the default, K 4 another order (first differing loss at step %d: %a "
           "vs %a), one thread and a resume from step 9 the same bits\n",
           first, (double)(float)loss_at("k4", first), (double)(float)loss_at("k0", first));
}

static void check_compare(void)
{
    int rc;
    json_t *o = compare(&rc, "k0", "k8", "window");
    CHECK(rc == 0 && !strcmp(json_string_value(json_object_get(o, "verdict")), "AGREE"), "K 8 agrees (exit %d)", rc);
    const double ratio = json_real_value(json_object_get(o, "worst_ratio"));
    CHECK(ratio > 0 && ratio <= 1, "K 8's largest ratio %g in (0, 1]", ratio);
    /* window bound: the envelope's maximum, by hand over K 4 and K 16 */
    double e = 0;
    for (int t = 0; t < 20; t++)
        e = fmax(e, fmax(fabs(loss_at("k4", t) - loss_at("k0", t)), fabs(loss_at("k16", t) - loss_at("k0", t))));
    CHECK(e > 0 && fabs(json_real_value(json_object_get(o, "envelope_last")) - e) <= 1e-8 * e &&
              fabs(json_real_value(json_object_get(o, "envelope_first")) - e) <= 1e-8 * e,
          "window: envelope %g at every step (JSON: 9 digits)", e);
    json_decref(o);
    o = compare(&rc, "k0", "s2", "window");
    CHECK(rc == 3 && !strcmp(json_string_value(json_object_get(o, "verdict")), "DISAGREE") &&
              json_integer_value(json_object_get(o, "first_outside")) == 0,
          "seed 2 disagrees at step 0 (exit %d)", rc);
    CHECK(strstr(json_string_value(json_object_get(o, "test_config_differs")), "seed") != NULL, "the seed is named");
    json_decref(o);
    o = compare(&rc, "k0", "k0", "running");
    CHECK(rc == 0 && json_real_value(json_object_get(o, "worst_ratio")) == 0.0, "a run against itself: ratio 0");
    CHECK(!strcmp(json_string_value(json_object_get(o, "bound")), "running") &&
              fabs(json_real_value(json_object_get(o, "envelope_first")) -
                   fmax(fabs(loss_at("k4", 0) - loss_at("k0", 0)), fabs(loss_at("k16", 0) - loss_at("k0", 0)))) <= 1e-8 * e,
          "running: the envelope at step 0 is step 0's difference");
    json_decref(o);
    /* the text report */
    const char *t[] = { "compare", P("%s/k0", tmp), P("%s/s2", tmp), "--envelope", P("%s/k4", tmp), NULL };
    CHECK(run(P("%s/out.txt", tmp), t) == 3 && contains(P("%s/out.txt", tmp), "DISAGREE") &&
              contains(P("%s/out.txt", tmp), "first step outside the bound: 0") &&
              contains(P("%s/out.txt", tmp), "differs from REF's in: seed"),
          "text report");
    printf("  compare: K 8 AGREE (ratio %.3g) inside the K 4 / K 16 envelope (%.3g), seed 2 DISAGREE at step 0\n",
           ratio, e);
}

/* The clip mass of a saturated cast on the step (a current scale 2^6 too large: every cast saturates) with
   activation act:
   sites.csv's clip_mass at step 0 is a number at every site, not NaN, and the harness's figure where the
   tensor is the harness's (the first Linear's input and every weight: bit for bit), near it elsewhere. */
static void check_twins_clip_mass(const char *act)
{
    char err[512];
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    const char *h[] = { "train", "--steps", "1", TINY, "--recipe", "fp8-current", "--margin", "-6", "--seed", "1", "--act", act,
                        "--out", P("%s/cmh-%s", tmp, act), NULL };
    const char *a[] = { "train", "--steps", "1", TINY, "--recipe", "fp8-current", "--margin", "-6", "--seed", "1", "--act", act,
                        "--device", "twins", "--out", P("%s/cmt-%s", tmp, act), NULL };
    CHECK(run(err, h) == 0 && run(err, a) == 0, "%s: fp8-current --margin -6 runs, harness and --device twins", act);
    char *rows[2];
    for (int k = 0; k < 2; k++)
        rows[k] = strdup(dir_slurp(P("%s/%s-%s", tmp, k ? "cmt" : "cmh", act), "sites.csv"));
    CHECK(rows[0] && rows[1], "memory");
    int sites = 0, exact = 0;
    char *save[2] = { NULL, NULL }, *line[2];
    line[0] = strtok_r(rows[0], "\n", &save[0]);
    line[1] = strtok_r(rows[1], "\n", &save[1]);
    for (;;) { /* step,site,amax,amax_from,staleness,saturated,clip_mass,... */
        line[0] = strtok_r(NULL, "\n", &save[0]);
        line[1] = strtok_r(NULL, "\n", &save[1]);
        if (!line[0] || !line[1])
            break;
        char site[2][64];
        double cm[2];
        long long sat[2];
        for (int k = 0; k < 2; k++)
            CHECK(sscanf(line[k], "0,%63[^,],%*[^,],%*[^,],%*[^,],%lld,%lf", site[k], &sat[k], &cm[k]) == 3,
                  "sites.csv row: %s", line[k]);
        CHECK(!strcmp(site[0], site[1]), "the same sites in order: %s / %s", site[0], site[1]);
        CHECK(sat[0] > 0 && sat[1] > 0, "%s %s: the cast saturated (harness %lld, twins %lld)", act, site[0], sat[0], sat[1]);
        CHECK(!isnan(cm[1]) && cm[1] > 0.0, "%s: the step's clip mass is %g (the harness's %g)", site[0], cm[1], cm[0]);
        CHECK(fabs(cm[1] - cm[0]) <= 1e-6 * cm[0], "%s: the step's clip mass %.9g, the harness's %.9g", site[0], cm[1], cm[0]);
        const int same_tensor = !strcmp(site[0], "L0.qkv.in") || strstr(site[0], ".w") != NULL;
        CHECK(!same_tensor || cm[1] == cm[0], "%s: the same tensor, the clip mass %.9g, the harness's %.9g", site[0], cm[1], cm[0]);
        exact += same_tensor;
        sites++;
    }
    CHECK(sites >= 8 && exact >= 4, "%d sites compared, %d exactly", sites, exact);
    free(rows[0]);
    free(rows[1]);
    printf("  --device twins, %s, a saturating current scale: the clip mass at all %d sites (exactly the harness's at %d)\n",
           act, sites, exact);
}

/* --device twins under fp8-delayed and paper-gaudi2 (its e5m2 backward copies counted in): the casts'
   statistics come from the step (sites.csv's step 0 rows are the harness's); under fp8-delayed summary.json
   counts, and a resume from a kept checkpoint (the delayed histories in it) ends with metrics.csv and
   sites.csv byte-identical. */
static void check_twins_fp8(void)
{
    char err[512];
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    static const char *const recs[2][3] = { { "fp8-delayed", "f8h", "f8t" }, { "paper-gaudi2", "g2h", "g2t" } };
    for (int r = 0; r < 2; r++) {
        const char *h[] = { "train", "--steps", "20", TINY, "--recipe", recs[r][0], "--seed", "1", "--out",
                            P("%s/%s", tmp, recs[r][1]), NULL };
        const char *a[] = { "train", "--steps", "20", TINY, "--recipe", recs[r][0], "--device", "twins", "--keep-ckpt",
                            "9", "--seed", "1", "--out", P("%s/%s", tmp, recs[r][2]), NULL };
        CHECK(run(err, h) == 0 && run(err, a) == 0, "%s runs, harness and --device twins", recs[r][0]);
        CHECK(same_head(recs[r][1], recs[r][2], "sites.csv", "\n1,"), "%s: sites.csv's step-0 rows: the twins' are the harness's",
              recs[r][0]);
    }
    /* --fp8-gemm: the same casts (sites.csv's step 0 the harness's), the GEMMs on the codes, a resume byte-identical */
    const char *g8[] = { "train", "--steps", "20", TINY, "--recipe", "fp8-delayed", "--device", "twins", "--fp8-gemm",
                         "--keep-ckpt", "9", "--seed", "1", "--out", P("%s/f8g", tmp), NULL };
    CHECK(run(err, g8) == 0, "--device twins --fp8-gemm runs");
    {
        CHECK(same_head("f8h", "f8g", "sites.csv", "\n1,"), "--fp8-gemm: sites.csv's step-0 rows are the harness's");
        char *m8 = strdup(dir_slurp(P("%s/f8g", tmp), "metrics.csv")); /* (dir_slurp's buffer is static) */
        CHECK(m8 && strcmp(m8, dir_slurp(P("%s/f8t", tmp), "metrics.csv")),
              "--fp8-gemm changes the GEMMs' order: its metrics.csv is not the fp32 GEMMs'");
        free(m8);
    }
    resume_same("f8g", 1);
    json_t *sum = dir_json(P("%s/f8t", tmp), "summary.json");
    CHECK(json_is_integer(json_object_get(sum, "saturated_total")) && json_is_integer(json_object_get(sum, "flushed_total")),
          "summary.json counts the device's casts under fp8-delayed");
    json_decref(sum);
    resume_same("f8t", 1);
    /* the paper's recipe with FP8 Adam moments (--pow2 --fp8-adam): the cast moments in the checkpoint, a
       resume byte-identical */
    const char *fa[] = { "train", "--steps", "20", TINY, "--recipe", "fp8-delayed", "--pow2", "--fp8-adam", "--device",
                         "twins", "--keep-ckpt", "9", "--seed", "1", "--out", P("%s/fat", tmp), NULL };
    CHECK(run(err, fa) == 0, "--device twins --pow2 --fp8-adam runs");
    resume_same("fat", 1);
    printf("  --device twins, fp8-delayed and paper-gaudi2: sites.csv's step 0 the harness's; fp8-delayed: counters "
           "measured, resumed from step 9 byte-identical (metrics.csv, sites.csv); the same with --fp8-gemm and with --pow2 --fp8-adam\n");
}

/* --accum 2 (two micro-batches a step): the twins run AGREEs with the harness's within the envelope of
   the harness's --accum 2 reruns in other orders; config.json records it. */
static void check_accum(void)
{
    char err[512];
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    static const char *const names[4] = { "a2h", "a2k4", "a2k16", "a2t" };
    static const char *const extra[4][2] = { { "--gemm-kchunk", "0" }, { "--gemm-kchunk", "4" }, { "--gemm-kchunk", "16" },
                                             { "--device", "twins" } };
    for (int k = 0; k < 4; k++) {
        const char *a[] = { "train", "--steps", "20", TINY, "--recipe", "fp8-current", "--accum", "2", extra[k][0],
                            extra[k][1], "--keep-ckpt", "9", "--seed", "1", "--out", P("%s/%s", tmp, names[k]), NULL };
        CHECK(run(err, a) == 0, "--accum 2 run %s", names[k]);
    }
    for (int k = 0; k < 4; k += 3) /* resumed from step 9, harness and twins: byte-identical */
        resume_same(names[k], 1);
    CHECK(contains(P("%s/a2t/config.json", tmp), "\"accum\": 2"), "config.json records --accum 2");
    const char *c[] = { "compare", P("%s/a2h", tmp), P("%s/a2t", tmp), "--envelope", P("%s/a2k4", tmp), "--envelope",
                        P("%s/a2k16", tmp), NULL };
    CHECK(run(P("%s/a2.txt", tmp), c) == 0 && contains(P("%s/a2.txt", tmp), "AGREE"),
          "--device twins --accum 2 AGREEs with the harness's --accum 2");
    /* fp8-delayed, history 1: with two micro-batches a step, each delayed site's scale at step t comes from
       the largest amax of step t - 1's casts (sites.csv: amax_from at t is amax at t - 1), not from its last
       micro-batch's; the twins step shares the rule */
    for (int dev = 0; dev < 2; dev++) {
        const char *name = dev ? "a2dt" : "a2d";
        const char *a[] = { "train", "--steps", "20", TINY, "--recipe", "fp8-delayed", "--amax-history", "1", "--accum",
                            "2", "--device", dev ? "twins" : "cpu", "--seed", "1", "--out", P("%s/%s", tmp, name), NULL };
        CHECK(run(err, a) == 0, "--accum 2 fp8-delayed run %s", name);
        FILE *f = fopen(P("%s/%s/sites.csv", tmp, name), "r");
        CHECK(f != NULL, "sites.csv of %s", name);
        char line[512], snames[64][40], last[64][32];
        int nsites = 0, rows = 0;
        CHECK(fgets(line, sizeof line, f) != NULL, "header");
        while (fgets(line, sizeof line, f)) {
            unsigned long long step;
            char site[40], amax[32], from[32];
            CHECK(sscanf(line, "%llu,%39[^,],%31[^,],%31[^,],", &step, site, amax, from) == 4, "row %s", line);
            int k = 0;
            while (k < nsites && strcmp(snames[k], site))
                k++;
            if (k == nsites) {
                CHECK(nsites < 64, "sites");
                snprintf(snames[nsites++], sizeof snames[0], "%s", site);
            } else if (step > 0) {
                CHECK(!strcmp(from, last[k]), "%s step %llu %s: amax_from %s, the previous step's amax %s", name, step, site,
                      from, last[k]);
                rows++;
            }
            snprintf(last[k], sizeof last[0], "%s", amax);
        }
        fclose(f);
        CHECK(rows >= 19 * 6, "%s: %d rows checked", name, rows);
    }
    printf("  --accum 2 under fp8-current: --device twins AGREEs with the harness, both resume byte-identical; "
           "config.json records it; under "
           "fp8-delayed a scale comes from the previous step's largest micro-batch amax (harness and twins)\n");
}

static void check_twins(void)
{
    char err[512];
    snprintf(err, sizeof err, "%s/err.txt", tmp);
    const char *a[] = { "train", "--steps", "20", TINY, "--device", "twins", "--keep-ckpt", "9", "--seed", "1", "--out",
                        P("%s/tw", tmp), NULL };
    CHECK(run(err, a) == 0, "a --device twins run");
    int rc;
    json_t *o = compare(&rc, "k0", "tw", "window");
    CHECK(rc == 0, "--device twins agrees with the harness (exit %d, ratio %g)", rc,
          json_real_value(json_object_get(o, "worst_ratio")));
    const double ratio = json_real_value(json_object_get(o, "worst_ratio"));
    CHECK(!strcmp(json_string_value(json_object_get(o, "test_config_differs")), "device, keep_ckpt"),
          "only the device (and --keep-ckpt) differ: %s", json_string_value(json_object_get(o, "test_config_differs")));
    json_decref(o);
    CHECK(contains(P("%s/tw/metrics.csv", tmp), ",nan,nan,nan,nan,nan,nan\n"), "unmeasured counters written nan");
    json_t *sum = dir_json(P("%s/tw", tmp), "summary.json");
    CHECK(json_real_value(json_object_get(sum, "amax_max")) > 0 && json_is_null(json_object_get(sum, "saturated_total")) &&
              !strcmp(json_string_value(json_object_get(sum, "device")), "twins"),
          "summary.json: the FFN's amax measured, the cast counters null, the device named");
    json_decref(sum);
    for (int col = 5; col <= 7; col++) { /* ffn_in_amax, act_amax, act_rms of step 0 */
        char *m0 = dir_slurp(P("%s/k0", tmp), "metrics.csv"), *p0 = strchr(m0, '\n') + 1;
        for (int c = 0; c < col; c++)
            p0 = strchr(p0, ',') + 1;
        const double h = strtod(p0, NULL);
        char *m1 = dir_slurp(P("%s/tw", tmp), "metrics.csv"), *p1 = strchr(m1, '\n') + 1; /* (same static buffer) */
        for (int c = 0; c < col; c++)
            p1 = strchr(p1, ',') + 1;
        const double g = strtod(p1, NULL);
        CHECK(isfinite(g) && fabs(g - h) <= 1e-4 * fabs(h), "column %d at step 0: twins %g, harness %g", col, g, h);
    }
    resume_same("tw", 0);
    const char *const *bad[] = {
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "twins", "--recipe", "mxfp8", "--out",
                               P("%s/nb1", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "twins", "--attn-kchunk", "4", "--out",
                               P("%s/nb2", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "twins", "--gemm-kchunk", "4", "--out",
                               P("%s/nb3", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "cuda", "--out", P("%s/nb4", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "tpu", "--out", P("%s/nb5", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "twins", "--recipe", "nvfp4", "--out",
                               P("%s/nb6", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "twins", "--recipe", "fp8-delayed",
                               "--fast-accum", "--out", P("%s/nb7", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--recipe", "fp8-delayed", "--fp8-gemm", "--out",
                               P("%s/nb8", tmp), NULL },
        (const char *const[]){ "train", "--steps", "2", TINY, "--device", "twins", "--recipe", "paper-gaudi2", "--fp8-gemm",
                               "--out", P("%s/nb9", tmp), NULL },
    };
    const char *plan[] = { "train", "--preset", "124m", "--recipe", "paper-gaudi2", "--device", "cuda", "--plan", NULL };
    CHECK(run(err, plan) == 0 && contains(err, "GPU step plan"), "--plan takes the FP8 recipes the step does not run yet");
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK(run(err, bad[k]) == 2, "refused device run %zu: exit 2", k);
        struct stat st;
        CHECK(stat(P("%s/nb%zu", tmp, k + 1), &st) != 0, "refused device run %zu: no folder", k);
    }
    printf("  --device twins: AGREE (ratio %.3g), resumed from step 9 byte-identical, nan/null where not measured; "
           "%zu refused configurations exit 2\n",
           ratio, sizeof bad / sizeof bad[0]);
}

/* build/fp8lab-cuda (make cuda; where nvcc is) without a device: --device cuda is refused with exit 2, a
   message and no run folder, before any work.  On a machine with a device the run must succeed instead. */
static void check_cuda_refusal(void)
{
    char cuda[512], cmd[2048];
    snprintf(cuda, sizeof cuda, "%s-cuda", cli);
    if (access(cuda, X_OK)) {
        printf("  %s not built here (no nvcc): its refusal without a device is not checked\n", cuda);
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' train --steps 2 --width 16 --layers 1 --heads 2 --ffn 32 --seq 16 --batch 4 --quiet "
                              "--device cuda --out '%s/nc' >'%s/nc.log' 2>&1", cuda, tmp, tmp);
    const int rc = system(cmd);
    CHECK(rc != -1 && WIFEXITED(rc), "%s ran", cuda);
    struct stat st;
    if (WEXITSTATUS(rc) == 2) {
        CHECK(contains(P("%s/nc.log", tmp), "no CUDA device") && stat(P("%s/nc", tmp), &st) != 0,
              "--device cuda without a device: a message and no folder");
        printf("  fp8lab-cuda --device cuda without a device: exit 2, a message, no folder\n");
    } else {
        CHECK(WEXITSTATUS(rc) == 0, "--device cuda: exit %d (2 without a device, 0 with one)", WEXITSTATUS(rc));
        printf("  fp8lab-cuda --device cuda: a device is here, and the run succeeded\n");
    }
}

static void check_gpu_script(void)
{
    char build[512], cmd[2048];
    snprintf(build, sizeof build, "%s", cli);
    char *slash = strrchr(build, '/');
    CHECK(slash, "the CLI's folder from %s", cli);
    *slash = 0;
    snprintf(cmd, sizeof cmd, "GPU_TRAIN_CHECK_DEVICE=twins sh tests/gpu_train_check.sh '%s' '%s/gtc' >'%s/gtc.log' 2>&1",
             build, tmp, tmp);
    CHECK(system(cmd) == 0, "gpu_train_check.sh in twins mode (log: %s/gtc.log)", tmp);
    const char *r = P("%s/gtc/train-check.md", tmp);
    CHECK(contains(r, "| swiglu | bf16 | AGREE |") && contains(r, "| swiglu | fp32 | AGREE |") &&
              contains(r, "| swiglu | fp8-delayed | AGREE |") && contains(r, "| swiglu | paper-gaudi2 | AGREE |") &&
              contains(r, "| gelu | bf16 | AGREE |") && contains(r, "| polyrelu3 | bf16 | AGREE |") &&
              contains(r, "| swiglu | fp8-delayed --fp8-gemm | AGREE |") &&
              contains(r, "byte-identical") && contains(r, "demo --device twins (9 arms, 1 seed, 40 steps): ran"),
          "the report: seven AGREE rows, the resume lines and the demo's");
    /* a wrong device step (no gradient clipping) must fail the check */
    snprintf(cmd, sizeof cmd,
             "GPU_TRAIN_CHECK_DEVICE=twins GPU_TRAIN_CHECK_FLAGS='--clip 0' sh tests/gpu_train_check.sh '%s' '%s/gtc2' "
             ">'%s/gtc2.log' 2>&1",
             build, tmp, tmp);
    const int rc = system(cmd);
    CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && contains(P("%s/gtc2/train-check.md", tmp), "DISAGREE"),
          "gpu_train_check.sh with a wrong step (--clip 0): exit 1 and DISAGREE in the report (status %d)", rc);
    printf("  gpu_train_check.sh (twins mode): swiglu under bf16, fp32, fp8-delayed and paper-gaudi2, gelu and polyrelu3 "
           "under bf16, fp8-delayed --fp8-gemm and --pow2 --fp8-adam AGREE, resume byte-identical, the demo on the step runs; a step "
           "without clipping fails it\n");
}

/* A copy of run k0 whose metrics.csv is replaced by text. */
static const char *bad_run(const char *name, const char *text)
{
    static char dirs[8][512];
    static int nd;
    char *d = dirs[nd++ & 7];
    snprintf(d, sizeof dirs[0], "%s/%s", tmp, name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/k0/config.json' '%s/'", d, tmp, d);
    CHECK(system(cmd) == 0, "copy");
    FILE *f = fopen(P("%s/metrics.csv", d), "w");
    CHECK(f && fputs(text, f) >= 0 && !fclose(f), "write");
    return d;
}

static void check_bad(void)
{
    char err[512];
    snprintf(err, sizeof err, "%s/bad.txt", tmp);
    const char *cut = bad_run("cut", "step,loss\n0,5.5\n1,5.4");
    const char *dec = bad_run("dec", "step,loss\n0,5.5\n2,5.4\n1,5.3\n");
    const char *skip = bad_run("skip", "step,loss\n0,5.5\n2,5.4\n");
    const char *none = bad_run("none", "step,loss\n");
    char k0[512], k4[512];
    snprintf(k0, sizeof k0, "%s/k0", tmp);
    snprintf(k4, sizeof k4, "%s/k4", tmp);
    struct {
        const char *dir, *needle;
    } files[] = { { cut, "cut short" }, { dec, "not increasing" }, { skip, "is step 2" }, { none, "no data rows" },
                  { P("%s/missing", tmp), "cannot open" } };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        const char *a[] = { "compare", k0, files[k].dir, "--envelope", k4, NULL };
        CHECK(run(err, a) == 1 && contains(err, files[k].needle) && contains(err, "metrics.csv"),
              "bad run %zu: exit 1 naming metrics.csv and '%s'", k, files[k].needle);
    }
    const char *const *usage[] = {
        (const char *const[]){ "compare", k0, k4, NULL },
        (const char *const[]){ "compare", k0, k4, "--envelope", k4, "--factor", "0", NULL },
        (const char *const[]){ "compare", k0, k4, "--envelope", k4, "--factor", "nan", NULL },
        (const char *const[]){ "compare", k0, k4, "--envelope", k4, "--bound", "max", NULL },
        (const char *const[]){ "compare", k0, k4, "--envelope", k4, "--frob", NULL },
        (const char *const[]){ "compare", k0, "--envelope", k4, NULL },
        (const char *const[]){ "compare", k0, k4, k4, "--envelope", k4, NULL },
        (const char *const[]){ "compare", k0, k4, "--envelope", NULL },
    };
    for (size_t k = 0; k < sizeof usage / sizeof usage[0]; k++)
        CHECK(run(err, usage[k]) == 2, "usage %zu: exit 2", k);
    const char *kk[] = { "train", "--steps", "2", TINY, "--gemm-kchunk", "-1", "--out", P("%s/neg", tmp), NULL };
    CHECK(run(err, kk) == 2, "--gemm-kchunk -1: exit 2");
    printf("  bad runs exit 1 naming metrics.csv (cut, decreasing, other steps, empty, missing); %zu bad usages exit 2\n",
           sizeof usage / sizeof usage[0]);
}

int main(void)
{
    cli_init();
    dir_make(tmp, sizeof tmp, "/tmp/fl_compare_XXXXXX");
    check_kchunk();
    check_compare();
    check_twins();
    check_twins_fp8();
    check_twins_clip_mass("swiglu");
    check_twins_clip_mass("smooth_swiglu"); /* the down projection's input smoothed: its scales from the device */
    check_twins_chan();
    check_accum();
    check_gpu_script();
    check_cuda_refusal();
    check_bad();
    dir_remove(tmp);
    PASS("test_compare");
}
