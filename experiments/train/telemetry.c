/* telemetry.c — metrics.csv rows and telemetry.jsonl lines (see telemetry.h). */
#include "telemetry.h"

#include <math.h>
#include <string.h>

static void put_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
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

void fl_tele_metrics_row(FILE *f, uint64_t step, float loss, double loss_ema, float lr, float gnorm,
                         const fl_step_summary *s)
{
    fprintf(f, "%llu", (unsigned long long)step);
    const double v[] = { loss, loss_ema, lr, gnorm, s->ffn_in_amax, s->act_amax, s->act_rms, s->align.cos_med,
                         s->align.cos_p99, s->align.cos_max, s->align.norm_corr, s->down_in_amax, s->down_in_stale };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        put_csv(f, v[i]);
    fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%llu\n", (unsigned long long)s->down_in_sat, (unsigned long long)s->sat,
            (unsigned long long)s->clip, (unsigned long long)s->nan_out, (unsigned long long)s->inf_out,
            (unsigned long long)s->ftz);
}

void fl_tele_jsonl(FILE *f, uint64_t step, float loss, const fl_model *m)
{
    const fl_recipe *r = m->rec;
    fprintf(f, "{\"step\": %llu, \"loss\": ", (unsigned long long)step);
    put_num(f, loss);
    fputs(", \"sites\": [", f);
    int first = 1;
    for (int i = 0; i < r->nsites; i++) {
        const fl_site *s = &r->sites[i];
        const fl_cast_stats *st = &s->st;
        if (s->fmt == FL_FMT_FP32 || st->n == 0)
            continue;
        const double ms = st->nmom ? st->sum2 / (double)st->nmom : NAN;
        const double m4 = st->nmom ? st->sum4 / (double)st->nmom : NAN;
        const double rms = sqrt(ms);
        fprintf(f, "%s{\"name\": \"%s\", \"fmt\": \"%s\", \"n\": %llu, \"amax\": ", first ? "" : ", ",
                s->name, fl_format_name(r->hp_phase ? FL_FMT_BF16 : (fl_format)s->fmt), (unsigned long long)st->n);
        first = 0;
        put_num(f, st->amax);
        fputs(", \"rms\": ", f);
        put_num(f, rms);
        fputs(", \"amax_over_rms\": ", f);
        put_num(f, rms > 0 ? st->amax / rms : NAN);
        fputs(", \"kurtosis\": ", f);
        put_num(f, ms > 0 ? m4 / (ms * ms) : NAN);
        fprintf(f, ", \"saturated\": %llu, \"clipped\": %llu, \"nan_produced\": %llu, \"inf_produced\": %llu, \"flushed\": %llu, \"scale\": ",
                (unsigned long long)st->sat, (unsigned long long)st->clip, (unsigned long long)st->nan_out,
                (unsigned long long)st->inf_out, (unsigned long long)st->ftz);
        put_num(f, s->scale);
        fputs(", \"staleness\": ", f);
        put_num(f, s->amax_from > 0 ? st->amax / s->amax_from : NAN);
        fputc('}', f);
    }
    fputs("], \"ffn\": [", f);
    for (uint32_t l = 0; l < m->cfg.L; l++) {
        const fl_ffn_fwd_stats *fs = &m->ffn[l];
        fl_align_stats a;
        fl_model_align(&a, m, l);
        fprintf(f, "%s{\"layer\": %u, \"in_amax\": ", l ? ", " : "", l);
        put_num(f, fs->in_amax);
        fputs(", \"in_rms\": ", f);
        put_num(f, fs->in_rms);
        fputs(", \"act_amax\": ", f);
        put_num(f, fs->act_amax);
        fputs(", \"act_rms\": ", f);
        put_num(f, fs->act_rms);
        fputs(", \"cos_median\": ", f);
        put_num(f, a.cos_med);
        fputs(", \"cos_p99\": ", f);
        put_num(f, a.cos_p99);
        fputs(", \"cos_max\": ", f);
        put_num(f, a.cos_max);
        fputs(", \"norm_corr\": ", f);
        put_num(f, a.norm_corr);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

void fl_tele_sites_header(FILE *f) { fputs("step,site,amax,amax_from,staleness,saturated,clip_mass,underflow\n", f); }

void fl_tele_sites_rows(FILE *f, uint64_t step, const fl_recipe *r)
{
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
