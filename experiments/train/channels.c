/* channels.c — per-channel telemetry and the decorrelation intervention (channels.h). */
#include "channels.h"

#include "fl_base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void fl_chan_headers(FILE *fc, FILE *fr)
{
    if (fc)
        fputs("step,layer,channel,amax,align,wnorm,gate_max,up_max\n", fc);
    if (fr)
        fputs("step,layer,amax,prev_max,channel,align,align_rank,wnorm,gate_max,up_max,q50,q90,q99\n", fr);
}

void fl_chan_weights(float *align, float *wnorm, const fl_model *m, uint32_t l)
{
    const size_t F = m->cfg.F;
    const int gated = fl_act_gated(m->cfg.act);
    double *buf = malloc(3 * F * sizeof *buf);
    if (!buf && !m->ffn_wsums) {
        for (size_t i = 0; i < F; i++)
            align[i] = wnorm[i] = NAN;
        return;
    }
    const double *ws = fl_model_ffn_wsums(m, l, buf);
    for (size_t i = 0; i < F; i++) {
        const double gg = ws[3 * i], uu = ws[3 * i + 1], gu = ws[3 * i + 2];
        if (gated) {
            align[i] = (gg > 0 && uu > 0) ? (float)fabs(gu / sqrt(gg * uu)) : 0.0f;
            wnorm[i] = (float)(sqrt(gg) * sqrt(uu));
        } else {
            align[i] = 0.0f;
            wnorm[i] = (float)sqrt(gg);
        }
    }
    free(buf);
}

/* Channel order by align, descending, ties by index (qsort with an index tiebreak is deterministic). */
static const float *g_sort_key;
static int by_align_desc(const void *a, const void *b)
{
    const uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const float x = g_sort_key[i], y = g_sort_key[j];
    if (x != y)
        return x > y ? -1 : 1;
    return i < j ? -1 : i > j;
}

static void order_by_align(uint32_t *ord, const float *align, size_t F)
{
    for (size_t i = 0; i < F; i++)
        ord[i] = (uint32_t)i;
    g_sort_key = align;
    qsort(ord, F, sizeof *ord, by_align_desc);
}

static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void fl_chan_rows(FILE *fc, FILE *fr, uint64_t step, const fl_model *m, int periodic)
{
    const size_t F = m->cfg.F;
    float *align = malloc(F * sizeof *align), *wnorm = malloc(F * sizeof *wnorm), *q = malloc(F * sizeof *q);
    uint32_t *ord = malloc(F * sizeof *ord);
    if (!align || !wnorm || !q || !ord) {
        free(align), free(wnorm), free(q), free(ord);
        return;
    }
    for (uint32_t l = 0; l < m->cfg.L; l++) {
        const int rows = periodic && m->chan_have[l], rec = m->chan_record[l] && m->chan_have[l];
        if (!rows && !rec)
            continue;
        fl_chan_weights(align, wnorm, m, l);
        const float *am = m->chan_amax + (size_t)l * F, *gm = m->chan_gmax + (size_t)l * F,
                    *um = m->chan_umax + (size_t)l * F;
        if (rows && fc)
            for (size_t i = 0; i < F; i++)
                fprintf(fc, "%llu,%u,%zu,%.9g,%.9g,%.9g,%.9g,%.9g\n", (unsigned long long)step, l, i, am[i], align[i],
                        wnorm[i], gm[i], um[i]);
        if (rec && fr) {
            size_t arg = 0; /* the record's channel: the first with the layer's maximum */
            for (size_t i = 1; i < F; i++)
                if (am[i] > am[arg])
                    arg = i;
            order_by_align(ord, align, F);
            size_t rank = 0;
            while (ord[rank] != arg)
                rank++;
            memcpy(q, am, F * sizeof *q);
            qsort(q, F, sizeof *q, cmp_f);
            const double fm1 = (double)(F - 1);
            fprintf(fr, "%llu,%u,%.9g,%.9g,%zu,%.9g,%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", (unsigned long long)step, l,
                    m->ffn[l].act_amax, m->chan_prev_max[l], arg, align[arg], rank, wnorm[arg], gm[arg], um[arg],
                    q[(size_t)floor(0.5 * fm1)], q[(size_t)floor(0.9 * fm1)], q[(size_t)floor(0.99 * fm1)]);
        }
    }
    free(align), free(wnorm), free(q), free(ord);
}

const char *fl_decor_name(int mode)
{
    return mode == FL_DECOR_TOP ? "top" : mode == FL_DECOR_RANDOM ? "random" : "none";
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void fl_chan_pick(uint32_t *idx, const fl_model *m, uint32_t l, uint32_t k, int mode, uint64_t seed)
{
    const size_t F = m->cfg.F;
    uint32_t *ord = malloc(F * sizeof *ord);
    float *align = malloc(F * sizeof *align), *wnorm = malloc(F * sizeof *wnorm);
    if (!ord || !align || !wnorm) {
        free(ord), free(align), free(wnorm);
        return;
    }
    if (mode == FL_DECOR_TOP) {
        fl_chan_weights(align, wnorm, m, l);
        order_by_align(ord, align, F);
    } else { /* a seeded Fisher-Yates shuffle; its first k */
        uint64_t s = seed ^ (0xDEC0ull + l);
        for (size_t i = 0; i < F; i++)
            ord[i] = (uint32_t)i;
        for (size_t i = F - 1; i > 0; i--) {
            const size_t j = (size_t)(fl_splitmix64(&s) % (uint64_t)(i + 1));
            const uint32_t t = ord[i];
            ord[i] = ord[j];
            ord[j] = t;
        }
    }
    memcpy(idx, ord, k * sizeof *idx);
    qsort(idx, k, sizeof *idx, cmp_u32);
    free(ord), free(align), free(wnorm);
}

double fl_chan_decorrelate(fl_model *m, float *am, float *av, uint32_t l, uint32_t i, uint64_t seed)
{
    const size_t C = m->cfg.C, F = m->cfg.F;
    float *g = m->p[FL_P_WFC] + (size_t)l * 2 * F * C + (size_t)i * C, *u = g + F * C;
    double *r = malloc(C * sizeof *r);
    if (!r)
        return NAN;
    uint64_t s = seed ^ fl_mix64(((uint64_t)l << 32) | i);
    double gg = 0, uu = 0;
    for (size_t k = 0; k < C; k++) {
        /* Box-Muller, u1 then u2 */
        const double u1 = ((double)(fl_splitmix64(&s) >> 11) + 0.5) * 0x1p-53;
        const double u2 = (double)(fl_splitmix64(&s) >> 11) * 0x1p-53;
        r[k] = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        gg += (double)g[k] * g[k];
        uu += (double)u[k] * u[k];
    }
    for (int pass = 0; pass < 2; pass++) { /* r -= (r.g / g.g) g, twice */
        double rg = 0;
        for (size_t k = 0; k < C; k++)
            rg += r[k] * g[k];
        const double c = gg > 0 ? rg / gg : 0.0;
        for (size_t k = 0; k < C; k++)
            r[k] -= c * g[k];
    }
    double rr = 0;
    for (size_t k = 0; k < C; k++)
        rr += r[k] * r[k];
    const double f = rr > 0 ? sqrt(uu / rr) : 0.0;
    for (size_t k = 0; k < C; k++)
        u[k] = (float)(r[k] * f);
    const size_t off = (size_t)(u - m->params);
    if (am)
        memset(am + off, 0, C * sizeof *am);
    if (av)
        memset(av + off, 0, C * sizeof *av);
    free(r);
    double gu = 0, u2 = 0;
    for (size_t k = 0; k < C; k++) {
        gu += (double)g[k] * u[k];
        u2 += (double)u[k] * u[k];
    }
    return gg > 0 && u2 > 0 ? fabs(gu / sqrt(gg * u2)) : 0.0;
}
