/* test_train_opts.c — the option table of `fp8lab train` (experiments/train/train_opts.h) and what it
 * drives.
 *
 *  1. Every row's default is a value its flag takes: given as the flag, it changes nothing in
 *     fl_train_cfg_default; the default configuration passes fl_train_cfg_check.
 *  2. Ranges: every integer option takes lo and hi and refuses lo - 1 and hi + 1; every float option
 *     takes or refuses lo and hi as the table says, and refuses inf, nan and 1e300; every enum takes
 *     each of its names and refuses another.
 *  3. Round trips of configurations with every option away from its default (hostile bytes in the
 *     --data and --fork paths: quotes, backslashes, control bytes, a newline, invalid UTF-8):
 *     fl_train_cfg_store then fl_train_cfg_load, and fl_train_cfg_args split by sh then
 *     fl_train_parse_flag, give the same bytes back.
 *  4. The record's rules: a missing key takes the default, an unknown key, a newer format, a repeated
 *     key, a line without '=', a bad escape, a bare control byte, a NUL byte, a cut last line, a bad
 *     header, a bad value and a configuration train refuses are each refused with what is wrong.
 *  5. --help names every flag, keeps lines within 100 columns; config.json's object has every key,
 *     a seed above 2^63 - 1 as its digits, floats that read back to the same float.
 *  6. fl_train_cfg_diff names the option that differs; with FL_OPT_FIXED only those a fork keeps.
 */
#include "check.h"
#include "train/train_opts.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char hostile[] = "a'b\"c\\d\x01\te\nf\xff\xfeg $HOME `x` \xc3\xa9.txt";

static fl_train_cfg parsed(const char *flag, const char *val, int *rc)
{
    fl_train_cfg c;
    int used;
    fl_train_cfg_default(&c);
    *rc = fl_train_parse_flag(&c, "test", flag, val, &used);
    return c;
}

/* 1. */
static void defaults(void)
{
    fl_train_cfg d;
    fl_train_cfg_default(&d);
    CHECK(fl_train_cfg_check(&d) == NULL, "the defaults are refused: %s", fl_train_cfg_check(&d));
    for (int i = 0; i < fl_train_opt_count; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        if (!o->key || !o->flag || o->type == FL_OPT_BOOL || !o->def[0])
            continue; /* a bool has no value; "" is an unset list or path, which no flag gives */
        int rc;
        const fl_train_cfg c = parsed(o->flag, o->def, &rc);
        CHECK(rc == 0 && !memcmp(&c, &d, sizeof c), "%s %s: the default does not give the default", o->flag, o->def);
    }
    printf("  every default is a value of its flag and gives the default configuration\n");
}

static void expect(const fl_train_opt *o, const char *val, int ok)
{
    int rc;
    const fl_train_cfg c = parsed(o->flag, val, &rc);
    CHECK(ok ? rc == 0 : rc == 2, "%s %s: %s", o->flag, val, ok ? "refused" : "accepted");
    char why[2000];
    CHECK(!ok || fl_train_cfg_check_fields(&c, why, sizeof why) == NULL, "%s %s: accepted, then refused by the check: %s",
          o->flag, val, why);
}

/* 2. */
static void ranges(void)
{
    int n = 0;
    for (int i = 0; i < fl_train_opt_count; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        char v[64];
        if (!o->key || !o->flag)
            continue;
        if (o->type == FL_OPT_U32 || o->type == FL_OPT_U64 || o->type == FL_OPT_I32) {
            snprintf(v, sizeof v, "%.0f", o->lo);
            expect(o, v, 1);
            if (o->lo > 0 || o->type == FL_OPT_I32) {
                snprintf(v, sizeof v, "%.0f", o->lo - 1);
                expect(o, v, 0);
            }
            if (o->hi < 0x1p64) {
                snprintf(v, sizeof v, "%.0f", o->hi);
                expect(o, v, 1);
                snprintf(v, sizeof v, "%.0f", o->hi + 1);
                expect(o, v, 0);
            }
            expect(o, "1.5", 0);
            n++;
        } else if (o->type == FL_OPT_F32) {
            snprintf(v, sizeof v, "%.9g", o->lo);
            expect(o, v, !(o->attr & FL_OPT_LO_OPEN));
            snprintf(v, sizeof v, "%.9g", nextafterf((float)o->lo, -INFINITY));
            expect(o, v, 0);
            if (o->hi < FLT_MAX) {
                snprintf(v, sizeof v, "%.9g", o->hi);
                expect(o, v, !(o->attr & FL_OPT_HI_OPEN));
                snprintf(v, sizeof v, "%.9g", nextafterf((float)o->hi, INFINITY));
                expect(o, v, 0);
            }
            expect(o, "inf", 0);
            expect(o, "nan", 0);
            expect(o, "1e300", 0);
            n++;
        } else if (o->type == FL_OPT_ENUM) {
            for (unsigned k = 0; o->names(k); k++)
                expect(o, o->names(k), 1);
            expect(o, "bogus", 0);
            n++;
        }
    }
    int rc;
    parsed("--width", NULL, &rc);
    CHECK(rc == 2, "a flag without its value");
    parsed("--no-such-flag", "1", &rc);
    CHECK(rc == 1, "an unknown flag");
    parsed("--out", "x", &rc);
    CHECK(rc == 1, "--out is the command's, not the configuration's");
    printf("  %d numeric and enum options: both ends of each range, one step beyond, non-finite numbers\n", n);
}

/* A configuration with every option away from its default. */
static void unusual(fl_train_cfg *c, uint64_t seed)
{
    int used;
    static const char *const flags[][2] = {
        { "--act", "smooth_swiglu" }, { "--recipe", "fp8-delayed" }, { "--steps", "777" }, { "--width", "32" },
        { "--layers", "3" }, { "--heads", "2" }, { "--ffn", "48" }, { "--seq", "17" }, { "--batch", "5" },
        { "--init-std", "0.031" }, { "--lr", "2.5e-3" }, { "--lr-min", "0.25" }, { "--schedule", "constant" },
        { "--warmup", "7" }, { "--wd", "0.7" }, { "--beta1", "0.8" }, { "--beta2", "0.99" }, { "--adam-eps", "1e-6" },
        { "--clip", "0" }, { "--amax-history", "3" }, { "--amax-algo", "most_recent" }, { "--margin", "-2" },
        { "--pow2", NULL }, { "--fp8-overflow", "nan" }, { "--fp8-adam", NULL }, { "--fast-accum", NULL },
        { "--grad-scaling", "current" }, { "--fp8-start", "9" }, { "--grad-sr", NULL },
        { "--site", "L0.down.in=bf16" }, { "--site", "*.fc.w=current" }, { "--data", hostile }, { "--data-len", "5000" },
        { "--bos", NULL }, { "--trigger-rate", "0.01" }, { "--trigger-len", "3" }, { "--log-every", "3" },
        { "--ckpt-every", "11" }, { "--keep-ckpt", "5,700,9" }, { "--chan-every", "4" }, { "--fork", hostile }, { "--decorrelate", "random:3" },
        { "--div-margin", "2.5" }, { "--div-window", "50" }, { "--div-ema", "0.5" }, { "--no-stop-on-divergence", NULL },
    };
    fl_train_cfg_default(c);
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        CHECK(fl_train_parse_flag(c, "test", flags[k][0], flags[k][1], &used) == 0, "%s", flags[k][0]);
    c->seed = seed;
    c->data_hash = 0x0123456789abcdefull;
    c->fork_step = 12;
    c->fork_crc = 0xdeadbeefu;
    CHECK(fl_train_cfg_check(c) == NULL, "the unusual configuration is refused: %s", fl_train_cfg_check(c));
}

/* The words of args as sh splits them (sh -c "printf '%s\0' ARGS"), parsed onto the defaults. */
static void args_through_sh(fl_train_cfg *d, const char *args)
{
    static char cmd[40000], out[40000];
    snprintf(cmd, sizeof cmd, "printf '%%s\\0' %s", args);
    FILE *p = popen(cmd, "r");
    CHECK(p, "popen");
    const size_t n = fread(out, 1, sizeof out, p);
    CHECK(pclose(p) == 0 && n < sizeof out, "sh: %s", cmd);
    const char *w[400];
    int nw = 0;
    for (size_t i = 0; i < n && nw < 400; i += strlen(out + i) + 1)
        w[nw++] = out + i;
    fl_train_cfg_default(d);
    for (int i = 0; i < nw; i++) {
        int used = 0;
        CHECK(fl_train_parse_flag(d, "test", w[i], i + 1 < nw ? w[i + 1] : NULL, &used) == 0, "word %s", w[i]);
        i += used;
    }
}

/* 3. */
static void round_trips(void)
{
    fl_train_cfg cs[4];
    fl_train_cfg_default(&cs[0]);
    fl_train_demo_preset(&cs[1]);
    unusual(&cs[2], 99);
    unusual(&cs[3], UINT64_MAX);
    for (int k = 0; k < 4; k++) {
        fl_train_cfg d;
        size_t len = 0;
        char err[2000], args[16384];
        char *rec = fl_train_cfg_store(&cs[k], &len);
        CHECK(rec && len > 0, "store");
        CHECK(!fl_train_cfg_load(&d, rec, len, err, sizeof err), "configuration %d: %s", k, err);
        CHECK(!memcmp(&d, &cs[k], sizeof d), "configuration %d: the record does not give it back", k);
        free(rec);
        CHECK(!fl_train_cfg_args(args, sizeof args, &cs[k]), "args fit");
        args_through_sh(&d, args);
        d.data_hash = cs[k].data_hash, d.fork_step = cs[k].fork_step, d.fork_crc = cs[k].fork_crc; /* not flags */
        const fl_train_opt *o = fl_train_cfg_diff(&d, &cs[k], 0);
        CHECK(!memcmp(&d, &cs[k], sizeof d), "configuration %d: train_args through sh differ at %s: %s", k,
              o ? fl_train_opt_name(o) : "(a byte outside the options)", args);
    }
    char small[16];
    CHECK(fl_train_cfg_args(small, sizeof small, &cs[2]) == -1 && strlen(small) == sizeof small - 1, "a short buffer");
    printf("  4 configurations (hostile --data and --fork paths): record and train_args through sh give them back\n");
}

/* Load rec (a C string) and expect a refusal whose message holds want. */
static void refused(const char *rec, const char *want)
{
    fl_train_cfg c;
    char err[2000] = "";
    CHECK(fl_train_cfg_load(&c, rec, strlen(rec), err, sizeof err) == -1, "accepted: %.200s", rec);
    CHECK(strstr(err, want), "the message '%s' does not say '%s'", err, want);
    for (const char *p = err; *p; p++)
        CHECK((unsigned char)*p >= 0x20, "a control byte in the message '%s'", err);
}

/* 4. */
static void record_rules(void)
{
    fl_train_cfg c, d;
    unusual(&c, 5);
    size_t len;
    char *rec = fl_train_cfg_store(&c, &len), err[2000];
    char *buf = malloc(len + 400);
    /* a missing key takes the default: chan_every removed gives 0 */
    char *line = strstr(rec, "\nchan_every=");
    CHECK(line, "the record has chan_every");
    const size_t at = (size_t)(line - rec) + 1, ll = strcspn(line + 1, "\n") + 1;
    memcpy(buf, rec, at);
    memcpy(buf + at, rec + at + ll, len - at - ll);
    CHECK(!fl_train_cfg_load(&d, buf, len - ll, err, sizeof err), "%s", err);
    CHECK(d.chan_every == 0, "a missing key takes the default");
    d.chan_every = c.chan_every;
    CHECK(!memcmp(&c, &d, sizeof c), "the rest as it was");
    /* refusals */
    static const struct {
        const char *add, *want;
    } bad[] = { { "frob\x01nicate=1\n", "unknown key 'frob\\x01nicate'" }, { "lr=0.5\n", "twice" },
                { "no equals sign\n", "without '='" }, { "pows2=1\n", "unknown key 'pows2'" } };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(buf, len + 400, "%s%s", rec, bad[k].add);
        refused(buf, bad[k].want);
    }
    const char *head = "fp8lab-train-config 1\n";
    static const struct {
        const char *body, *want;
    } bodies[] = {
        { "width=3\n", "width: bad value '3'" }, { "data=a\\qb\n", "malformed value" }, { "data=a\tb\n", "malformed value" },
        { "data=a\\x41\n", "malformed value" }, { "data=a\\x00\n", "malformed value" }, { "lr=0.5", "no newline" },
        { "keep_ckpt=5000\n", "not one train accepts" }, { "recipe=fp9\n", "one of" },
    };
    for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++) {
        snprintf(buf, len + 400, "%s%s", head, bodies[k].body);
        refused(buf, bodies[k].want);
    }
    refused("fp8lab-train-config 2\nlr=0.5\n", "newer");
    refused("fp8lab-train-config x\n", "does not start with");
    refused("FP8LAB-train-config 1\n", "does not start with");
    refused("", "does not start with");
    memcpy(buf, rec, len);
    buf[len / 2] = 0;
    CHECK(fl_train_cfg_load(&d, buf, len, err, sizeof err) == -1 && strstr(err, "NUL"), "a NUL byte: %s", err);
    snprintf(buf, len + 400, "%sdata=x\\\\y\\x0a\\x7f\\n\n", head);
    CHECK(!fl_train_cfg_load(&d, buf, strlen(buf), err, sizeof err) && !strcmp(d.data_path, "x\\y\n\x7f\n"), "escapes: %s",
          err);
    free(buf);
    free(rec);
    printf("  the record: a missing key takes its default; 17 malformed records refused with what is wrong\n");
}

/* 5. */
static void help_and_json(void)
{
    char *text;
    size_t n;
    FILE *f = open_memstream(&text, &n);
    CHECK(f, "memstream");
    fl_train_opts_help(f);
    fclose(f);
    for (int i = 0; i < fl_train_opt_count; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        if (o->flag)
            CHECK(strstr(text, o->flag), "--help lacks %s", o->flag);
        if (o->flag_off)
            CHECK(strstr(text, o->flag_off), "--help lacks %s", o->flag_off);
    }
    for (const char *p = text; *p;) {
        const size_t k = strcspn(p, "\n");
        CHECK(k <= 100, "a help line of %zu columns: %.*s", k, (int)k, p);
        p += k + (p[k] == '\n');
    }
    free(text);
    fl_train_cfg c;
    unusual(&c, UINT64_MAX);
    json_t *o = fl_train_cfg_json_obj(&c);
    CHECK(o, "json");
    for (int i = 0; i < fl_train_opt_count; i++)
        if (fl_train_opt_table[i].key)
            CHECK(json_object_get(o, fl_train_opt_table[i].key), "config.json lacks %s", fl_train_opt_table[i].key);
    CHECK(json_integer_value(json_object_get(o, "decorrelate_k")) == 3 &&
              !strcmp(json_string_value(json_object_get(o, "decorrelate")), "random"),
          "decorrelate and its K");
    CHECK(!strcmp(json_string_value(json_object_get(o, "seed")), "18446744073709551615"), "a seed above 2^63 - 1");
    CHECK((float)json_number_value(json_object_get(o, "init_std")) == c.model.init_std, "a float reads back");
    CHECK(json_array_size(json_object_get(o, "keep_ckpt")) == 3, "keep_ckpt as an array");
    json_decref(o);
    printf("  --help names every flag within 100 columns; config.json has every key\n");
}

/* 6. */
static void diffs(void)
{
    fl_train_cfg a, b;
    int used;
    fl_train_cfg_default(&a);
    b = a;
    CHECK(!fl_train_cfg_diff(&a, &b, 0), "equal configurations");
    CHECK(!fl_train_parse_flag(&b, "test", "--lr", "0.5", &used), "--lr");
    CHECK(!strcmp(fl_train_opt_name(fl_train_cfg_diff(&a, &b, 0)), "--lr") && !fl_train_cfg_diff(&a, &b, FL_OPT_FIXED),
          "--lr differs and a fork may change it");
    CHECK(!fl_train_parse_flag(&b, "test", "--bos", NULL, &used) && b.model.V == 257, "--bos sets the vocabulary");
    CHECK(!strcmp(fl_train_opt_name(fl_train_cfg_diff(&a, &b, FL_OPT_FIXED)), "vocab"), "the vocabulary is fixed");
    printf("  the first differing option is named; FL_OPT_FIXED picks what a fork keeps\n");
}

int main(void)
{
    defaults();
    ranges();
    round_trips();
    record_rules();
    help_and_json();
    diffs();
    PASS("test_train_opts");
}
