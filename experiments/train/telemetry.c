/* telemetry.c — metrics.csv rows and telemetry.jsonl lines (see telemetry.h). */
#include "telemetry.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *fl_tele_json_num(double v, int digits)
{
    char buf[48];
    if (!isfinite(v))
        return json_null();
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    /* no '.' and no exponent: an integer (jansson would add ".0" to a real); "-0" stays a real */
    if (!strpbrk(buf, ".e") && strcmp(buf, "-0"))
        return json_integer(strtoll(buf, NULL, 10));
    return json_real(strtod(buf, NULL));
}

void fl_tele_summarize(fl_step_summary *s, const fl_model *m)
{
    memset(s, 0, sizeof *s);
    const fl_recipe *r = m->rec;
    for (uint32_t l = 0; l < m->cfg.L; l++) {
        const fl_ffn_fwd_stats *fs = &m->ffn[l];
        if (fs->in_amax > s->ffn_in_amax)
            s->ffn_in_amax = fs->in_amax;
        if (fs->act_amax > s->act_amax || l == 0) {
            s->act_amax = fs->act_amax;
            s->act_rms = fs->act_rms;
        }
        fl_align_stats a;
        fl_model_align(&a, m, l);
        if (a.cos_med > s->align.cos_med) s->align.cos_med = a.cos_med;
        if (a.cos_p99 > s->align.cos_p99) s->align.cos_p99 = a.cos_p99;
        if (a.cos_max > s->align.cos_max) s->align.cos_max = a.cos_max;
        if (l == 0 || a.norm_corr > s->align.norm_corr) s->align.norm_corr = a.norm_corr;
        const fl_site *d = &r->sites[FL_SITE(l, FL_LIN_DOWN, FL_ROLE_IN)];
        if (d->st.amax > s->down_in_amax)
            s->down_in_amax = d->st.amax;
        const float stale = d->amax_from > 0.0f ? d->st.amax / d->amax_from : 0.0f;
        if (stale > s->down_in_stale)
            s->down_in_stale = stale;
        s->down_in_sat += d->st.sat;
    }
    for (int i = 0; i < r->nsites; i++) {
        const fl_cast_stats *st = &r->sites[i].st;
        s->sat += st->sat;
        s->clip += st->clip;
        s->nan_out += st->nan_out;
        s->inf_out += st->inf_out;
        s->ftz += st->ftz;
    }
}

void fl_tele_metrics_header(FILE *f)
{
    fputs("step,loss,loss_ema,lr,grad_norm,ffn_in_amax,act_amax,act_rms,align_med,align_p99,align_max,"
          "norm_corr,down_in_amax,down_in_stale,down_in_sat,sat,clip,nan_out,inf_out,ftz\n", f);
}

/* A CSV number: %.9g, or nan / inf / -inf (one spelling for NaN whatever its sign bit). */
static void put_csv(FILE *f, double v)
{
    if (isnan(v))
        fputs(",nan", f);
    else if (isinf(v))
        fputs(v > 0 ? ",inf" : ",-inf", f);
    else
        fprintf(f, ",%.9g", v);
}

void fl_tele_unmeasured(fl_step_summary *s)
{
    s->down_in_amax = s->down_in_stale = NAN;
    s->down_in_sat = s->sat = s->clip = s->nan_out = s->inf_out = s->ftz = 0;
    s->unmeasured = 1;
}

void fl_tele_metrics_row(FILE *f, uint64_t step, float loss, double loss_ema, float lr, float gnorm,
                         const fl_step_summary *s)
{
    fprintf(f, "%llu", (unsigned long long)step);
    const double v[] = { loss, loss_ema, lr, gnorm, s->ffn_in_amax, s->act_amax, s->act_rms, s->align.cos_med,
                         s->align.cos_p99, s->align.cos_max, s->align.norm_corr, s->down_in_amax, s->down_in_stale };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        put_csv(f, v[i]);
    if (s->unmeasured) {
        fputs(",nan,nan,nan,nan,nan,nan\n", f);
        return;
    }
    fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%llu\n", (unsigned long long)s->down_in_sat, (unsigned long long)s->sat,
            (unsigned long long)s->clip, (unsigned long long)s->nan_out, (unsigned long long)s->inf_out,
            (unsigned long long)s->ftz);
}

/* One cast site's record: its counters and the moments of what entered the cast. */
static json_t *site_json(const fl_site *s, int hp_phase)
{
    const fl_cast_stats *st = &s->st;
    const double ms = st->nmom ? st->sum2 / (double)st->nmom : NAN;
    const double m4 = st->nmom ? st->sum4 / (double)st->nmom : NAN;
    const double rms = sqrt(ms);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "fmt", json_string(fl_format_name(hp_phase ? FL_FMT_BF16 : (fl_format)s->fmt)));
    json_object_set_new(o, "n", json_integer((json_int_t)st->n));
    json_object_set_new(o, "amax", fl_tele_json_num(st->amax, 9));
    json_object_set_new(o, "rms", fl_tele_json_num(rms, 9));
    json_object_set_new(o, "amax_over_rms", fl_tele_json_num(rms > 0 ? st->amax / rms : NAN, 9));
    json_object_set_new(o, "kurtosis", fl_tele_json_num(ms > 0 ? m4 / (ms * ms) : NAN, 9));
    json_object_set_new(o, "saturated", json_integer((json_int_t)st->sat));
    json_object_set_new(o, "clipped", json_integer((json_int_t)st->clip));
    json_object_set_new(o, "nan_produced", json_integer((json_int_t)st->nan_out));
    json_object_set_new(o, "inf_produced", json_integer((json_int_t)st->inf_out));
    json_object_set_new(o, "flushed", json_integer((json_int_t)st->ftz));
    json_object_set_new(o, "scale", fl_tele_json_num(s->scale, 9));
    json_object_set_new(o, "staleness", fl_tele_json_num(s->amax_from > 0 ? st->amax / s->amax_from : NAN, 9));
    return o;
}

/* Layer l's FFN record: its input and activation statistics and the gate/up alignment. */
static json_t *ffn_json(const fl_model *m, uint32_t l)
{
    const fl_ffn_fwd_stats *fs = &m->ffn[l];
    fl_align_stats a;
    fl_model_align(&a, m, l);
    json_t *o = json_object();
    json_object_set_new(o, "layer", json_integer(l));
    json_object_set_new(o, "in_amax", fl_tele_json_num(fs->in_amax, 9));
    json_object_set_new(o, "in_rms", fl_tele_json_num(fs->in_rms, 9));
    json_object_set_new(o, "act_amax", fl_tele_json_num(fs->act_amax, 9));
    json_object_set_new(o, "act_rms", fl_tele_json_num(fs->act_rms, 9));
    json_object_set_new(o, "cos_median", fl_tele_json_num(a.cos_med, 9));
    json_object_set_new(o, "cos_p99", fl_tele_json_num(a.cos_p99, 9));
    json_object_set_new(o, "cos_max", fl_tele_json_num(a.cos_max, 9));
    json_object_set_new(o, "norm_corr", fl_tele_json_num(a.norm_corr, 9));
    return o;
}

void fl_tele_jsonl(FILE *f, uint64_t step, float loss, const fl_model *m)
{
    const fl_recipe *r = m->rec;
    json_t *line = json_object(), *sites = json_array(), *ffn = json_array();
    json_object_set_new(line, "step", json_integer((json_int_t)step));
    json_object_set_new(line, "loss", fl_tele_json_num(loss, 9));
    for (int i = 0; i < r->nsites; i++)
        if (r->sites[i].fmt != FL_FMT_FP32 && r->sites[i].st.n != 0)
            json_array_append_new(sites, site_json(&r->sites[i], r->hp_phase));
    for (uint32_t l = 0; l < m->cfg.L; l++)
        json_array_append_new(ffn, ffn_json(m, l));
    json_object_set_new(line, "sites", sites);
    json_object_set_new(line, "ffn", ffn);
    json_dumpf(line, f, FL_TELE_JSON_FLAGS);
    fputc('\n', f);
    json_decref(line);
}

void fl_tele_sites_header(FILE *f, const fl_recipe *r)
{
    if (fl_recipe_is_fp4((fl_recipe_kind)r->cfg.kind))
        fputs("step,site,amax,saturated,clip_mass,flush_mass,under_mass,underflow,snr,blk_p01,blk_p50,blk_p99\n", f);
    else
        fputs("step,site,amax,amax_from,staleness,saturated,clip_mass,underflow\n", f);
}

static double snr(double norm2, double err2) { return err2 > 0 ? sqrt(norm2) / sqrt(err2) : INFINITY; }

/* A row of a whole step's ratio: only the snr column filled. */
static void snr_row(FILE *f, uint64_t step, const char *name, double v)
{
    fprintf(f, "%llu,%s,,,,,,", (unsigned long long)step, name);
    put_csv(f, v);
    fputs(",,,\n", f);
}

/* The FP4 rows of a step (fl_tele_sites_header). */
static void fp4_sites_rows(FILE *f, uint64_t step, const fl_recipe *r)
{
    double g2 = 0, ge2 = 0;
    int ng = 0;
    for (int i = 0; i < r->nsites; i++) {
        const fl_site *s = &r->sites[i];
        if (s->fmt != FL_FMT_E2M1 || r->hp_phase || s->st.n == 0)
            continue;
        const fl_cast_stats *st = &s->st;
        fprintf(f, "%llu,%s", (unsigned long long)step, s->name);
        put_csv(f, st->amax);
        fprintf(f, ",%llu", (unsigned long long)st->sat);
        put_csv(f, st->clip_mass);
        put_csv(f, st->flush_mass);
        put_csv(f, st->under_mass);
        put_csv(f, (double)st->ftz / (double)st->n);
        put_csv(f, snr(st->norm2, st->err2));
        for (int k = 0; k < 3; k++)
            put_csv(f, st->blk_q[k]);
        fputc('\n', f);
        if (s->role == FL_ROLE_GOUT) {
            g2 += st->norm2;
            ge2 += st->err2;
            ng++;
        }
    }
    if (ng)
        snr_row(f, step, "all.gout", snr(g2, ge2));
    if (r->moments && r->wgrad_norm2 > 0) {
        snr_row(f, step, "all.wgrad", snr(r->wgrad_norm2, r->wgrad_err2));
        if (r->wgrad_halves) /* signed: -sqrt(|m2| / e2) when the estimate of ||E dW||^2 came out negative */
            snr_row(f, step, "all.wgrad_mean", copysign(snr(fabs(r->wgrad_mean2), r->wgrad_err2), r->wgrad_mean2));
    }
}

void fl_tele_sites_rows(FILE *f, uint64_t step, const fl_recipe *r)
{
    if (fl_recipe_is_fp4((fl_recipe_kind)r->cfg.kind)) {
        fp4_sites_rows(f, step, r);
        return;
    }
    for (int i = 0; i < r->nsites; i++) {
        const fl_site *s = &r->sites[i];
        if (s->scaling != FL_SCALING_DELAYED && s->scaling != FL_SCALING_TENSOR)
            continue;
        const fl_cast_stats *st = &s->st;
        fprintf(f, "%llu,%s", (unsigned long long)step, s->name); /* put_csv writes each field's comma */
        put_csv(f, st->amax);
        put_csv(f, s->amax_from);
        put_csv(f, s->amax_from > 0.0f ? (double)st->amax / s->amax_from : 0.0);
        fprintf(f, ",%llu", (unsigned long long)st->sat);
        put_csv(f, st->clip_mass);
        put_csv(f, st->n ? (double)st->ftz / (double)st->n : 0.0);
        fputc('\n', f);
    }
}
