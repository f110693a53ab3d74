/* recipe.c — cast sites, scaling state and per-cast statistics (see recipe.h). */
#include "recipe.h"

#include "activations.h"

#include <fnmatch.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static const char *const recipe_names[] = {
    [FL_RECIPE_FP32] = "fp32",
    [FL_RECIPE_BF16] = "bf16",
    [FL_RECIPE_FP8_DELAYED] = "fp8-delayed",
    [FL_RECIPE_FP8_CURRENT] = "fp8-current",
    [FL_RECIPE_FP8_BLOCK] = "fp8-block",
    [FL_RECIPE_MXFP8] = "mxfp8",
    [FL_RECIPE_PAPER_GAUDI2] = "paper-gaudi2",
    [FL_RECIPE_NVFP4] = "nvfp4",
    [FL_RECIPE_MXFP4] = "mxfp4",
};
_Static_assert(FL_ARRAY_LEN(recipe_names) == FL_RECIPE_COUNT, "recipe name table");

const char *fl_recipe_name(fl_recipe_kind r)
{
    return (unsigned)r < FL_RECIPE_COUNT ? recipe_names[r] : "?";
}

int fl_recipe_parse(fl_recipe_kind *out, const char *s)
{
    for (int i = 0; i < FL_RECIPE_COUNT; i++)
        if (!strcmp(s, recipe_names[i])) {
            *out = (fl_recipe_kind)i;
            return 0;
        }
    return -1;
}

int fl_recipe_is_fp8(fl_recipe_kind r) { return r >= FL_RECIPE_FP8_DELAYED && r < FL_RECIPE_COUNT; }

int fl_recipe_is_fp4(fl_recipe_kind r) { return r == FL_RECIPE_NVFP4 || r == FL_RECIPE_MXFP4; }
int fl_recipe_dev_fp8(fl_recipe_kind r)
{
    return r == FL_RECIPE_FP8_DELAYED || r == FL_RECIPE_FP8_CURRENT || r == FL_RECIPE_PAPER_GAUDI2;
}

int fl_recipe_per_tensor(fl_recipe_kind r)
{
    return r == FL_RECIPE_FP8_DELAYED || r == FL_RECIPE_FP8_CURRENT || r == FL_RECIPE_PAPER_GAUDI2;
}

void fl_recipe_cfg_default(fl_recipe_cfg *c, fl_recipe_kind kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->history = 1024; /* TE defaults: 1024, "max", margin 0 */
    c->algo = FL_AMAX_MAX;
    c->margin = 0;
}

void fl_recipe_paper(fl_recipe_cfg *c, uint32_t fp8_start)
{
    c->kind = FL_RECIPE_FP8_DELAYED;
    c->history = 1;
    c->algo = FL_AMAX_MAX;
    c->margin = 0;
    c->pow2 = 1;
    c->nosat = 0;
    c->grad_sr = 1;
    c->fp8_start = fp8_start;
}

void fl_recipe_paper_gaudi2(fl_recipe_cfg *c)
{
    const uint32_t start = c->fp8_start;
    fl_recipe_paper(c, start);
    c->kind = FL_RECIPE_PAPER_GAUDI2;
    c->fast_accum = 0;
    c->grad_current = 0;
}

const char *fl_recipe_paper_gaudi2_check(const fl_recipe_cfg *c)
{
    fl_recipe_cfg p = *c;
    fl_recipe_paper_gaudi2(&p);
    if (c->history != p.history || c->algo != p.algo)
        return "paper-gaudi2 scales from the amax of the previous global batch, which is the previous step here "
               "(--amax-history 1, --amax-algo max); --recipe fp8-delayed takes another history";
    if (c->margin != p.margin || c->pow2 != p.pow2)
        return "paper-gaudi2's scales are 2^floor(log2(max / amax)) (--margin 0, --pow2); --recipe fp8-delayed takes "
               "others";
    if (c->nosat != p.nosat)
        return "paper-gaudi2's casts saturate, as Gaudi2's do (--fp8-overflow saturate); --recipe fp8-delayed takes "
               "--fp8-overflow nan";
    if (c->grad_sr != p.grad_sr)
        return "paper-gaudi2 rounds the e5m2 gradients stochastically (--grad-sr); --recipe fp8-delayed takes "
               "--no-grad-sr";
    if (c->grad_current || c->fast_accum)
        return "--grad-scaling current and --fast-accum are not part of paper-gaudi2; --recipe fp8-delayed takes them";
    return NULL;
}

/* ---- per-site overrides (recipe.h) -------------------------------------------------------------- */

enum { SITE_BF16, SITE_CURRENT, SITE_DELAYED };

/* The next override of a spec at *p: pattern and mode, *p moved past it.  Returns 1 with one
   parsed, 0 at the end, -1 for a malformed one (what is wrong in err). */
static int site_next(const char **p, char *pat, size_t patn, int *mode, char *err, size_t errlen)
{
    const char *s = *p;
    while (*s == ';')
        s++;
    if (!*s)
        return 0;
    const char *end = strchr(s, ';'), *eq = strchr(s, '=');
    if (!end)
        end = s + strlen(s);
    if (!eq || eq > end || eq == s || (size_t)(eq - s) >= patn) {
        snprintf(err, errlen, "--site '%.*s': expected PATTERN=bf16|current|delayed", (int)(end - s), s);
        return -1;
    }
    memcpy(pat, s, (size_t)(eq - s));
    pat[eq - s] = 0;
    const size_t ml = (size_t)(end - eq - 1);
    if (ml == 4 && !strncmp(eq + 1, "bf16", 4)) *mode = SITE_BF16;
    else if (ml == 7 && !strncmp(eq + 1, "current", 7)) *mode = SITE_CURRENT;
    else if (ml == 7 && !strncmp(eq + 1, "delayed", 7)) *mode = SITE_DELAYED;
    else {
        snprintf(err, errlen, "--site '%.*s': unknown mode '%.*s' (bf16, current, delayed)", (int)(end - s), s,
                 (int)ml, eq + 1);
        return -1;
    }
    *p = end;
    return 1;
}

int fl_recipe_sites_add(fl_recipe_cfg *cfg, const char *spec)
{
    const size_t have = strlen(cfg->sites), add = strlen(spec);
    /* site names, fnmatch's *?[]! and the '=': nothing that needs quoting in JSON or a shell */
    if (!strchr(spec, '=') || spec[strspn(spec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-*?[]!=")] ||
        have + (have ? 1 : 0) + add + 1 > sizeof cfg->sites)
        return -1;
    if (have)
        cfg->sites[have] = ';';
    memcpy(cfg->sites + have + (have ? 1 : 0), spec, add + 1);
    return 0;
}

const char *fl_recipe_sites_check(const fl_recipe_cfg *cfg, int nsites, const char *const *names,
                                  const uint8_t *hp_mask, char *err, size_t errlen)
{
    const char *p = cfg->sites;
    char pat[FL_SITE_SPEC_MAX];
    int mode, r;
    const int per_tensor = fl_recipe_per_tensor((fl_recipe_kind)cfg->kind);
    const int fp4 = fl_recipe_is_fp4((fl_recipe_kind)cfg->kind);
    while ((r = site_next(&p, pat, sizeof pat, &mode, err, errlen)) == 1) {
        if (fp4 && mode != SITE_BF16) {
            snprintf(err, errlen, "--site %s: under %s a site can only be kept in bf16 (PATTERN=bf16)", pat,
                     fl_recipe_name((fl_recipe_kind)cfg->kind));
            return err;
        }
        if (!per_tensor && !fp4) {
            snprintf(err, errlen, "--site %s: per-site overrides need fp8-delayed or fp8-current (or paper-gaudi2, or bf16 "
                     "sites under nvfp4 / mxfp4; the recipe is %s)", pat, fl_recipe_name((fl_recipe_kind)cfg->kind));
            return err;
        }
        int hits = 0;
        for (int i = 0; i < nsites; i++) {
            if (fnmatch(pat, names[i], 0))
                continue;
            if (hp_mask && hp_mask[i]) {
                snprintf(err, errlen, "--site %s: %s stays in bf16 under every FP8 recipe and takes no override", pat, names[i]);
                return err;
            }
            hits++;
        }
        if (!hits) {
            snprintf(err, errlen, "--site %s: no cast site of this model is named so (sites: L<layer>.<qkv|proj|fc|down>.<in|w|gout>, layers 0..%d)",
                     pat, (nsites - 3) / 12 - 1);
            return err;
        }
    }
    if (r < 0)
        return err;
    if (cfg->grad_sr && !per_tensor && !fp4) {
        snprintf(err, errlen, "--grad-sr needs fp8-delayed or fp8-current (or paper-gaudi2: e5m2 gradients with a per-tensor "
                 "scale), or nvfp4 / mxfp4");
        return err;
    }
    if ((cfg->update_sr || cfg->rht) && !fp4) {
        snprintf(err, errlen, "--update-sr and --rht need nvfp4 or mxfp4");
        return err;
    }
    if ((cfg->four_over_six || cfg->fp4_w1d) && cfg->kind != FL_RECIPE_NVFP4) {
        snprintf(err, errlen, "--four-over-six and --fp4-w1d need nvfp4");
        return err;
    }
    if (cfg->mx_floor && cfg->kind != FL_RECIPE_MXFP8 && cfg->kind != FL_RECIPE_MXFP4) {
        snprintf(err, errlen, "--mx-floor needs mxfp8 or mxfp4");
        return err;
    }
    return NULL;
}

/* Apply the overrides to the sites' formats and scalings (checked beforehand). */
static void sites_apply(fl_recipe *r)
{
    const char *p = r->cfg.sites;
    char pat[FL_SITE_SPEC_MAX], err[8];
    int mode;
    while (site_next(&p, pat, sizeof pat, &mode, err, sizeof err) == 1)
        for (int i = 0; i < r->nsites; i++) {
            fl_site *s = &r->sites[i];
            if (fnmatch(pat, s->name, 0))
                continue;
            if (mode == SITE_BF16) {
                s->fmt = FL_FMT_BF16;
                s->scaling = FL_SCALING_NONE;
            } else {
                s->fmt = s->role == FL_ROLE_GOUT ? FL_FMT_E5M2 : FL_FMT_E4M3;
                s->scaling = mode == SITE_CURRENT ? FL_SCALING_TENSOR : FL_SCALING_DELAYED;
            }
        }
}

/* The format whose largest finite value a site's scales map the amax to (scaling.h): the cast's,
   except for Gaudi2's e4m3, whose 240 is e4m3fnuz's largest value too (the scale rule reads nothing
   else of the format). */
static fl_format scale_format(const fl_site *s) { return s->gaudi2 ? FL_FMT_E4M3FNUZ : (fl_format)s->fmt; }

int fl_recipe_init(fl_recipe *r, const fl_recipe_cfg *cfg, int nsites, const char *const *names,
                   const uint32_t *roles, const uint8_t *hp_mask)
{
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    if (cfg->kind == FL_RECIPE_PAPER_GAUDI2)
        fl_recipe_paper_gaudi2(&r->cfg); /* its settings are fixed: whatever the fields say, these run */
    cfg = &r->cfg;
    if (cfg->kind >= FL_RECIPE_COUNT) {
        fprintf(stderr, "recipe: unknown kind %u\n", cfg->kind);
        return -1;
    }
    if ((cfg->kind == FL_RECIPE_FP8_DELAYED || cfg->kind == FL_RECIPE_PAPER_GAUDI2) &&
        (cfg->history == 0 || cfg->history > (1u << 20) || cfg->algo >= FL_AMAX_ALGO_COUNT)) {
        fprintf(stderr, "recipe: amax history length must be 1..1048576\n");
        return -1;
    }
    if (cfg->margin < -127 || cfg->margin > 127) {
        fprintf(stderr, "recipe: margin must be in [-127, 127]\n");
        return -1;
    }
    char err[FL_SITE_SPEC_MAX + 200];
    if (fl_recipe_sites_check(cfg, nsites, names, hp_mask, err, sizeof err)) {
        fprintf(stderr, "recipe: %s\n", err);
        return -1;
    }
    r->nsites = nsites;
    r->sites = calloc((size_t)nsites, sizeof *r->sites);
    if (!r->sites)
        return -1;
    const int fp8 = fl_recipe_is_fp8((fl_recipe_kind)cfg->kind);
    for (int i = 0; i < nsites; i++) {
        fl_site *s = &r->sites[i];
        snprintf(s->name, sizeof s->name, "%s", names[i]);
        s->role = roles[i];
        s->scale = 1.0f;
        if (cfg->kind == FL_RECIPE_FP32) {
            s->fmt = FL_FMT_FP32;
            s->scaling = FL_SCALING_NONE;
        } else if (cfg->kind == FL_RECIPE_BF16 || (fp8 && hp_mask && hp_mask[i])) {
            s->fmt = FL_FMT_BF16;
            s->scaling = FL_SCALING_NONE;
        } else if (fl_recipe_per_tensor((fl_recipe_kind)cfg->kind)) {
            s->fmt = roles[i] == FL_ROLE_GOUT ? FL_FMT_E5M2 : FL_FMT_E4M3;
            s->scaling = cfg->kind != FL_RECIPE_FP8_CURRENT && !(roles[i] == FL_ROLE_GOUT && cfg->grad_current)
                             ? FL_SCALING_DELAYED
                             : FL_SCALING_TENSOR;
        } else if (fl_recipe_is_fp4((fl_recipe_kind)cfg->kind)) {
            s->fmt = FL_FMT_E2M1;
            s->scaling = cfg->kind == FL_RECIPE_NVFP4 ? FL_SCALING_NVFP4 : FL_SCALING_MX32;
        } else {
            s->fmt = FL_FMT_E4M3;
            s->scaling = cfg->kind == FL_RECIPE_FP8_BLOCK ? FL_SCALING_1X128 : FL_SCALING_MX32;
        }
    }
    sites_apply(r);
    if (cfg->rht) /* the wgrad GEMM's two inputs: the same Linear's in and gout sites, both FP4 */
        for (int i = 0; i < nsites; i++) {
            fl_site *s = &r->sites[i];
            const size_t n = strlen(s->name);
            const int in = n > 3 && !strcmp(s->name + n - 3, ".in"), gout = n > 5 && !strcmp(s->name + n - 5, ".gout");
            if (s->fmt != FL_FMT_E2M1 || (!in && !gout))
                continue;
            char other[sizeof s->name + 8];
            snprintf(other, sizeof other, "%.*s%s", (int)(n - (in ? 3 : 5)), s->name, in ? ".gout" : ".in");
            for (int j = 0; j < nsites; j++)
                if (!strcmp(r->sites[j].name, other) && r->sites[j].fmt == FL_FMT_E2M1)
                    s->rht = 1;
        }
    for (int i = 0; i < nsites; i++) {
        fl_site *s = &r->sites[i];
        /* paper-gaudi2's X and W sites in FP8 (not those an override keeps in bf16) */
        s->gaudi2 = cfg->kind == FL_RECIPE_PAPER_GAUDI2 && s->fmt == FL_FMT_E4M3;
        if (s->scaling == FL_SCALING_DELAYED) {
            s->dl = malloc(fl_delayed_size(cfg->history));
            if (!s->dl || fl_delayed_init(s->dl, cfg->history, (fl_amax_algo)cfg->algo, cfg->margin,
                                          scale_format(s), (int)cfg->pow2)) {
                fprintf(stderr, "recipe: cannot set up delayed scaling for %s\n", s->name);
                return -1;
            }
            if (s->gaudi2) {
                s->dl_bwd = malloc(fl_delayed_size(cfg->history));
                if (!s->dl_bwd || fl_delayed_init(s->dl_bwd, cfg->history, (fl_amax_algo)cfg->algo, cfg->margin,
                                                  FL_FMT_E5M2, (int)cfg->pow2)) {
                    fprintf(stderr, "recipe: cannot set up delayed scaling for %s's e5m2 copy\n", s->name);
                    return -1;
                }
            }
        }
    }
    return 0;
}

void fl_recipe_free(fl_recipe *r)
{
    if (r->sites)
        for (int i = 0; i < r->nsites; i++) {
            free(r->sites[i].dl);
            free(r->sites[i].dl_bwd);
        }
    free(r->sites);
    memset(r, 0, sizeof *r);
}

void fl_recipe_step_begin(fl_recipe *r, int moments)
{
    r->moments = moments;
    r->wgrad_norm2 = r->wgrad_err2 = r->wgrad_mean2 = 0.0;
    r->wgrad_halves = 0;
    for (int i = 0; i < r->nsites; i++) {
        memset(&r->sites[i].st, 0, sizeof r->sites[i].st);
        r->sites[i].scale = 1.0f;
        r->sites[i].scale_bwd = 1.0f;
        r->sites[i].amax_from = 0.0f;
    }
}

/* A forward cast's amax into the site's delayed history(ies): now, or with r->defer as the step's largest,
   recorded at fl_recipe_step_end. */
static void delayed_record(const fl_recipe *r, fl_site *site, float amax)
{
    if (r->defer) {
        site->amax_pend = site->pend ? fl_fmax_f32(site->amax_pend, amax) : amax;
        site->pend = 1;
        return;
    }
    fl_delayed_record(site->dl, amax);
    if (site->dl_bwd)
        fl_delayed_record(site->dl_bwd, amax);
}

void fl_recipe_step_end(fl_recipe *r)
{
    for (int i = 0; i < r->nsites; i++) {
        fl_site *s = &r->sites[i];
        if (s->pend) {
            s->pend = 0;
            fl_delayed_record(s->dl, s->amax_pend);
            if (s->dl_bwd)
                fl_delayed_record(s->dl_bwd, s->amax_pend);
        }
        s->tot_sat += s->st.sat;
        s->tot_clip += s->st.clip;
        s->tot_nan_out += s->st.nan_out;
        s->tot_inf_out += s->st.inf_out;
        s->tot_ftz += s->st.ftz;
    }
}

int fl_recipe_needs_bwd_copy(const fl_recipe *r, int site)
{
    const fl_site *s = &r->sites[site];
    const int blocks = s->scaling == FL_SCALING_1X128 || s->scaling == FL_SCALING_MX32 || s->scaling == FL_SCALING_NVFP4;
    if (blocks && s->role == FL_ROLE_W) /* FP8: 128x128 blocks, or (mxfp8) 1x32 both ways; nvfp4: 16x16 tiles */
        return s->fmt == FL_FMT_E2M1 && (s->scaling == FL_SCALING_MX32 || r->cfg.fp4_w1d);
    return blocks || s->gaudi2;
}

float fl_recipe_delayed_amax_from(const fl_delayed *d)
{
    if (d->steps == 0)
        return 0.0f;
    if (d->algo == FL_AMAX_MOST_RECENT) {
        /* the most recent nonzero amax: walk back from the newest slot */
        for (uint32_t k = 1; k <= d->len; k++) {
            const float a = d->history[(d->head + d->len - k) % d->len];
            if (a != 0.0f)
                return a;
        }
        return 0.0f;
    }
    float m = 0.0f;
    for (uint32_t k = 0; k < d->len; k++)
        m = fl_fmax_f32(m, d->history[k]);
    return m;
}

static int log2_exact(size_t b)
{
    int k = 0;
    while (((size_t)1 << k) < b)
        k++;
    return k;
}

void fl_recipe_row_moments(double *rm, const float *x, size_t R, size_t C, const float *rs, const float *s)
{
    fl_cast_row_moments(rm, x, R, C, rs, s, 1);
}

/* The smoothing scale: the kernels' rule (kernels/activations.h), 2^-ceil(log2 amax). */
static float smooth_scale(float a) { return fl_smooth_scale_f32(a); }

/* The smoothing scales of a cast: per column (axis 0) or per row (axis 1), NULL where none. */
typedef struct {
    const float *col_s, *col_si, *row_s, *row_si;
} cast_smoothing;

/* Smoothing scales from the current amax per column or per row (powers of two), into sm. */
static cast_smoothing smooth_scales(fl_smooth *sm, const float *x, size_t R, size_t C)
{
    cast_smoothing z = { NULL, NULL, NULL, NULL };
    if (!sm)
        return z;
    if (sm->axis == 0) {
        for (size_t c = 0; c < C; c++)
            sm->s[c] = 0.0f;
        for (size_t i = 0; i < R; i++) /* max is order-independent; sequential rows */
            for (size_t c = 0; c < C; c++)
                sm->s[c] = fl_fmax_f32(sm->s[c], fabsf(x[i * C + c]));
        for (size_t c = 0; c < C; c++) {
            sm->s[c] = smooth_scale(sm->s[c]);
            sm->s_inv[c] = 1.0f / sm->s[c];
        }
        z.col_s = sm->s;
        z.col_si = sm->s_inv;
    } else {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < R; i++) {
            float a = 0.0f;
            for (size_t c = 0; c < C; c++)
                a = fl_fmax_f32(a, fabsf(x[i * C + c]));
            sm->s[i] = smooth_scale(a);
            sm->s_inv[i] = 1.0f / sm->s[i];
        }
        z.row_s = sm->s;
        z.row_si = sm->s_inv;
    }
    return z;
}

/* The scales of a cast: br x bc tiles, nbr x nbc of them, scale bs[b] and its inverse bsi[b]; a
   single scale lives in one / one_inv (bs, bsi point at them: use the struct by pointer only). */
typedef struct {
    size_t br, bc, nbr, nbc;
    int cshift; /* block column of column c: c >> cshift */
    float one, one_inv;
    float *bs, *bsi;
} cast_grid;

/* Blocking of the scheme: block (TE Float8BlockScaling: 128x128 weights, 1x128 activations along
   the GEMM's reduction axis), mx (1x32 along it), else one scale for the tensor. */
static void cast_grid_init(cast_grid *g, fl_scaling scaling, int weight, int transposed, size_t R, size_t C)
{
    g->br = R ? R : 1;
    g->bc = C ? C : 1;
    if (scaling == FL_SCALING_1X128) {
        g->br = weight ? 128 : transposed ? 128 : 1;
        g->bc = weight ? 128 : transposed ? 1 : 128;
    } else if (scaling == FL_SCALING_MX32) {
        g->br = transposed ? FL_MX_BLOCK : 1;
        g->bc = transposed ? 1 : FL_MX_BLOCK;
    }
    g->nbr = (R + g->br - 1) / g->br;
    g->nbc = (C + g->bc - 1) / g->bc;
    g->cshift = g->bc >= C ? 40 : log2_exact(g->bc);
    g->one = g->one_inv = 1.0f;
    g->bs = &g->one;
    g->bsi = &g->one_inv;
}

static void cast_grid_free(cast_grid *g)
{
    if (g->bs != &g->one) {
        free(g->bs);
        free(g->bsi);
    }
}

/* Scales from the current amax of each block (schemes current, block, mx) of x as smoothed; sfmt: the
   format whose largest value the per-tensor scale maps the amax to.  bwd: the backward copy's scale,
   which leaves the site's scale and amax_from (the forward cast's) as they are. */
static void current_scales(const fl_recipe *r, fl_site *site, fl_scaling scaling, cast_grid *g, const float *x,
                           size_t R, size_t C, const cast_smoothing *sm, fl_format sfmt, int bwd)
{
    const float *col_s = sm->col_s, *row_s = sm->row_s;
#define XS(i, c) (col_s ? x[(i) * C + (c)] * col_s[c] : row_s ? x[(i) * C + (c)] * row_s[i] : x[(i) * C + (c)])
    const size_t nbr = g->nbr, nbc = g->nbc, br = g->br, nb = nbr * nbc;
    const int cshift = g->cshift;
    float *bam = calloc(nb, sizeof *bam);
    if (nb > 1) {
        g->bs = malloc(nb * sizeof *g->bs);
        g->bsi = malloc(nb * sizeof *g->bsi);
    }
    /* per-block amax: parallel over block rows (each block row owned by one thread) */
#pragma omp parallel for schedule(static)
    for (size_t rb = 0; rb < nbr; rb++)
        for (size_t i = rb * br; i < R && i < (rb + 1) * br; i++)
            for (size_t c = 0; c < C; c++) {
                const float a = fabsf(XS(i, c));
                float *m = &bam[rb * nbc + (c >> cshift)];
                *m = fl_fmax_f32(*m, a);
            }
#undef XS
    for (size_t b = 0; b < nb; b++) {
        float s;
        if (scaling == FL_SCALING_MX32) {
            const uint32_t code = fl_mx_scale_code((fl_format)site->fmt, bam[b], r->cfg.mx_floor ? FL_MX_FLOOR : FL_MX_CEIL);
            s = fl_mx_mul_from_code(code);
            g->bsi[b] = fl_mx_scale_from_code(code);
        } else if (scaling == FL_SCALING_1X128) {
            /* TE Float8BlockScaling: power-of-two scales, amax floored at epsilon 0 */
            s = fl_scale_from_amax((fl_format)site->fmt, bam[b], 1.0f, 0, 1);
            g->bsi[b] = 1.0f / s;
        } else {
            s = fl_scale_from_amax(sfmt, bam[b], 1.0f, r->cfg.margin, (int)r->cfg.pow2);
            g->bsi[b] = 1.0f / s;
            if (!bwd)
                site->amax_from = bam[b];
        }
        g->bs[b] = s;
    }
    if (scaling == FL_SCALING_TENSOR && !bwd)
        site->scale = g->bs[0];
    free(bam);
}

/* A delayed site's scale and inverse from its history, recorded in the site (scale, amax_from, and for
   paper-gaudi2 the e5m2 copy's scale, read before this cast's amax goes in): cast_scales and the GPU
   step's casts. */
static void delayed_scales(fl_site *site, float *s, float *s_inv)
{
    *s = fl_delayed_scale(site->dl);
    *s_inv = fl_delayed_scale_inv(site->dl);
    site->scale = *s;
    site->amax_from = fl_recipe_delayed_amax_from(site->dl);
    if (site->dl_bwd)
        site->scale_bwd = fl_delayed_scale(site->dl_bwd);
}

/* The format, rounding and stream of site si's cast: hp, the bf16 start; bwd, paper-gaudi2's e5m2 copy for
   the backward; else the site's own (fl_recipe_cast and the GPU step's casts). */
static fl_cast_fmt cast_fmt_of(const fl_recipe *r, int si, int hp, int bwd)
{
    const fl_site *site = &r->sites[si];
    fl_cast_fmt cf = { 0 };
    cf.fmt = hp ? FL_FMT_BF16 : bwd ? FL_FMT_E5M2 : (fl_format)site->fmt;
    cf.gaudi2 = !hp && !bwd && site->gaudi2;
    cf.nosat = (int)r->cfg.nosat && cf.fmt != FL_FMT_BF16 && !cf.gaudi2; /* paper-gaudi2 saturates (r->cfg) */
    cf.sr = !hp && r->cfg.grad_sr && site->role == FL_ROLE_GOUT && cf.fmt == FL_FMT_E5M2;
    cf.key = fl_recipe_sr_key(r, si);
    return cf;
}

/* The scales of the site's scheme into g (none: 1); bwd: the scales of paper-gaudi2's e5m2 copy. */
static void cast_scales(const fl_recipe *r, fl_site *site, fl_scaling scaling, cast_grid *g, const float *x,
                        size_t R, size_t C, const cast_smoothing *sm, int bwd)
{
    if (scaling == FL_SCALING_1X128 || scaling == FL_SCALING_MX32 || scaling == FL_SCALING_TENSOR) {
        current_scales(r, site, scaling, g, x, R, C, sm, bwd ? FL_FMT_E5M2 : scale_format(site), bwd);
    } else if (scaling == FL_SCALING_DELAYED && bwd) {
        g->one = site->scale_bwd; /* read from dl_bwd by the forward cast, before its amax went in */
        g->one_inv = 1.0f / site->scale_bwd;
    } else if (scaling == FL_SCALING_DELAYED) {
        delayed_scales(site, &g->one, &g->one_inv);
    }
}

/* What the casts counted (summed over OpenMP threads by fl_cnt_add, cast.h: integers, the order does
   not matter), and the amax of the tensor entering the cast. */
typedef struct {
    fl_cast_counts tot;
    float amax;
} cast_counts;

/* Quantize y = cast(x) through the cast engine (numerics/cast.h), span by span: one span per row
   and block of columns, or, with a single scale and no smoothing, one contiguous chunk per thread
   (counts and the amax do not depend on the cut).  Moments per row into rm (2R doubles, NULL
   without moments), the fixed order of the final sum: by groups of rows after the cast
   (fl_cast_row_moments) where a row has one scale and no column smoothing, else inside the span. */
static cast_counts cast_quantize(float *y, const float *x, size_t R, size_t C, const cast_grid *g,
                                 const cast_smoothing *sm, const fl_cast_fmt *cf, double *rm)
{
    const size_t n = R * C, br = g->br, nbr = g->nbr, nbc = g->nbc;
    const int cshift = g->cshift, mom = rm != NULL;
    const float *bs = g->bs, *bsi = g->bsi;
    const float *col_s = sm->col_s, *col_si = sm->col_si, *row_s = sm->row_s, *row_si = sm->row_si;
    fl_cast_counts tot = { 0 };
    float amax = 0.0f;
    const size_t span = g->bc < C ? g->bc : C;
    const int fast = !cf->sr && !cf->reference;
    const int gmom = mom && fast && !col_s && nbc == 1;
    if (fast && (!mom || gmom) && !row_s && !col_s && nbr * nbc == 1) {
        const int nt = omp_get_max_threads();
        const fl_cast_scales sc = { 1.0f, 1.0f, bs[0], bsi[0], NULL, NULL, 0 };
#pragma omp parallel for schedule(static) reduction(fl_cnt_add : tot) reduction(max : amax)
        for (int ch = 0; ch < nt; ch++) {
            const size_t i0 = n * (size_t)ch / (size_t)nt, i1 = n * (size_t)(ch + 1) / (size_t)nt;
            fl_cast_counts k = { 0 };
            if (i1 > i0) {
                const float a = fl_cast_fq_span(y + i0, x + i0, i1 - i0, cf, &sc, &k, NULL, NULL);
                if (a > amax)
                    amax = a;
            }
            fl_cast_counts_add(&tot, &k);
        }
    } else {
#pragma omp parallel for schedule(static) reduction(fl_cnt_add : tot) reduction(max : amax)
        for (size_t i = 0; i < R; i++) {
            fl_cast_counts k = { 0 };
            const float *srow = bs + (i / br) * nbc, *sirow = bsi + (i / br) * nbc;
            double m2 = 0.0, m4 = 0.0;
            float am = 0.0f;
            for (size_t c0 = 0; c0 < C; c0 += span) {
                const size_t nn = C - c0 < span ? C - c0 : span;
                const size_t b = (nbr * nbc) > 1 ? (c0 >> cshift) : 0;
                const fl_cast_scales sc = { row_s ? row_s[i] : 1.0f, row_si ? row_si[i] : 1.0f, srow[b], sirow[b],
                                            col_s ? col_s + c0 : NULL, col_si ? col_si + c0 : NULL, (uint64_t)(i * C + c0) };
                const float a = fl_cast_fq_span(y + i * C + c0, x + i * C + c0, nn, cf, &sc, &k,
                                                mom && !gmom ? &m2 : NULL, &m4);
                if (a > am)
                    am = a;
            }
            if (mom && !gmom) {
                rm[2 * i] = m2;
                rm[2 * i + 1] = m4;
            }
            if (am > amax)
                amax = am;
            fl_cast_counts_add(&tot, &k);
        }
    }
    if (gmom)
        fl_cast_row_moments(rm, x, R, C, row_s, bs, br);
    return (cast_counts){ tot, amax };
}

/* Add a cast's counts and moments to the site's statistics; the amax of a row-wise cast only
   (the transposed copy of the same tensor would count it twice). */
static void cast_record_stats(fl_site *site, const cast_counts *k, size_t R, size_t C, int transposed,
                              const double *rm)
{
    fl_cast_stats *st = &site->st;
    const size_t n = R * C;
    st->n += n;
    st->sat += k->tot.sat;
    st->clip += k->tot.clip;
    st->nan_out += k->tot.nan_out;
    st->inf_out += k->tot.inf_out;
    st->nan_in += k->tot.nan_in;
    st->ftz += k->tot.ftz;
    if (!transposed)
        st->amax = fl_fmax_f32(st->amax, k->amax);
    if (rm) {
        for (size_t i = 0; i < R; i++) {
            st->sum2 += rm[2 * i];
            st->sum4 += rm[2 * i + 1];
        }
        st->nmom += n;
    }
}

/* The clip mass of a per-tensor-scaled cast that saturated (recipe.h, fl_cast_stats.clip_mass):
   one sequential pass over x, row by row (fl_cast_clip_mass), the order fixed. */
static double clip_mass(const float *x, size_t R, size_t C, float s, const fl_cast_fmt *cf, const cast_smoothing *sm)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < R; i++) {
        const fl_cast_scales sc = { sm->row_s ? sm->row_s[i] : 1.0f, sm->row_si ? sm->row_si[i] : 1.0f, s, 1.0f / s,
                                    sm->col_s, sm->col_si, 0 };
        fl_cast_clip_mass(x + i * C, C, cf, &sc, &num, &den);
    }
    return den > 0.0 ? num / den : 0.0;
}

uint64_t fl_recipe_sr_key(const fl_recipe *r, int site)
{
    return fl_mix64(r->sr_seed ^ fl_mix64(((uint64_t)r->step << 16) ^ (uint64_t)site ^ 0x5352000000000000ull));
}

/* max |x * rs * cs| over the non-NaN elements (the amax the cast will see). */
static float xv_amax(const float *x, size_t R, size_t C, const cast_smoothing *sm)
{
    if (!sm->row_s && !sm->col_s) { /* the common case: one chunk per thread */
        const size_t n = R * C;
        const int nt = omp_get_max_threads();
        float m = 0.0f;
#pragma omp parallel for schedule(static) reduction(max : m)
        for (int ch = 0; ch < nt; ch++) {
            const size_t i0 = n * (size_t)ch / (size_t)nt, i1 = n * (size_t)(ch + 1) / (size_t)nt;
            const float a = fl_cast_amax(x + i0, i1 - i0);
            m = a > m ? a : m;
        }
        return m;
    }
    float am = 0.0f;
#pragma omp parallel for schedule(static) reduction(max : am)
    for (size_t i = 0; i < R; i++) {
        const float rs = sm->row_s ? sm->row_s[i] : 1.0f;
        float a = 0.0f;
        for (size_t c = 0; c < C; c++)
            a = fl_fmax_f32(a, fabsf(x[i * C + c] * rs * (sm->col_s ? sm->col_s[c] : 1.0f)));
        am = a > am ? a : am;
    }
    return am;
}

/* ---- FP4 (nvfp4, mxfp4) ------------------------------------------------------------------------ */

static int cmp_float(const void *p, const void *q)
{
    const float a = *(const float *)p, b = *(const float *)q;
    return (a > b) - (a < b);
}

/* Eight float32 lanes (GCC's vector extension: each operation lane by lane, so the bits do not depend
   on the instruction set the compiler picks for it). */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* The block telemetry of an FP4 forward cast (recipe.h, fl_cast_stats): a the tensor as cast (rows,
   cols), b its fake quantisation, unit[tile] the decode unit of each tile of br x bc (the element
   grid's 1; 6 units is the block's largest value), tensor amax am.  Sums per row in double, then over
   the rows in order (the thread count does not matter). */
static void fp4_block_stats(fl_cast_stats *st, const float *a, const float *b, size_t rows, size_t cols, size_t br,
                            size_t bc, const float *unit, float am, int quantiles)
{
    const size_t nc = (cols + bc - 1) / bc, nr = (rows + br - 1) / br;
    double *acc = calloc(rows * 5, sizeof *acc); /* per row: sum |x|, clip, flush, under, sum (q - x)^2; */
    double *x2 = calloc(rows, sizeof *x2);
    float *seg = quantiles ? malloc(rows * nc * sizeof *seg) : NULL; /* per row segment: its amax */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; i++) {
        double sa = 0, cl = 0, fl = 0, un = 0, e2 = 0, s2 = 0;
        for (size_t jb = 0; jb < nc; jb++) {
            /* a block's sums in float32 on 8 lanes (element j on lane (j - j0) % 8, each lane in index
               order, the lanes added pairwise: a fixed order), then in double */
            const float u = unit[(i / br) * nc + jb], top = 6.0f * u;
            const size_t j0 = jb * bc, j1 = cols < (jb + 1) * bc ? cols : (jb + 1) * bc;
            v8f vm = { 0 }, va = { 0 }, vx2 = { 0 }, ve2 = { 0 }, vcl = { 0 }, vfl = { 0 };
            const v8f vtop = { top, top, top, top, top, top, top, top };
            const float *ab = a + i * cols, *bb = b + i * cols;
            for (size_t j8 = j0; j8 < j1; j8 += 8) {
                v8f xv, q;
                if (j1 - j8 >= 8) {
                    memcpy(&xv, ab + j8, sizeof xv);
                    memcpy(&q, bb + j8, sizeof q);
                } else { /* a short tail: zeros, which add nothing */
                    float xs[8] = { 0 }, qs[8] = { 0 };
                    memcpy(xs, ab + j8, (j1 - j8) * sizeof *xs);
                    memcpy(qs, bb + j8, (j1 - j8) * sizeof *qs);
                    memcpy(&xv, xs, sizeof xv);
                    memcpy(&q, qs, sizeof q);
                }
                const v8i fin = ((v8i)xv & 0x7F800000) != 0x7F800000; /* lanes of -1 or 0 */
                const v8f ax = (v8f)((v8i)xv & 0x7FFFFFFF & fin), d = (v8f)((v8i)(q - xv) & fin);
                const v8i gt = ax > vm;
                vm = (v8f)(((v8i)ax & gt) | ((v8i)vm & ~gt));
                va += ax;
                vx2 += ax * ax;
                ve2 += d * d;
                vcl += (v8f)((v8i)(ax - vtop) & (ax > vtop));
                vfl += (v8f)((v8i)ax & (q == 0.0f));
            }
#define LANES8(v) (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])))
            float sm = 0.0f;
            for (int l = 0; l < 8; l++)
                sm = vm[l] > sm ? vm[l] : sm;
            const float fa = LANES8(va), fx2 = LANES8(vx2), fe2 = LANES8(ve2), fcl = LANES8(vcl), ffl = LANES8(vfl);
#undef LANES8
            sa += fa, s2 += fx2, e2 += fe2, cl += fcl;
            if (u == 0.0f)
                un += ffl;
            else
                fl += ffl;
            if (seg)
                seg[i * nc + jb] = sm;
        }
        double *w = acc + i * 5;
        w[0] = sa, w[1] = cl, w[2] = fl, w[3] = un, w[4] = e2;
        x2[i] = s2;
    }
    double t[5] = { 0 }, tx2 = 0;
    for (size_t i = 0; i < rows; i++) {
        for (int k = 0; k < 5; k++)
            t[k] += acc[i * 5 + k];
        tx2 += x2[i];
    }
    st->clip_mass = t[0] > 0 ? t[1] / t[0] : 0.0;
    st->flush_mass = t[0] > 0 ? t[2] / t[0] : 0.0;
    st->under_mass = t[0] > 0 ? t[3] / t[0] : 0.0;
    st->norm2 = tx2;
    st->err2 = t[4];
    st->blk_q[0] = st->blk_q[1] = st->blk_q[2] = NAN;
    if (seg) {
        /* tiles of br rows: the amax of each tile, from its rows' segments */
        const size_t nb = nr * nc;
        if (br > 1)
            for (size_t ib = 0; ib < nr; ib++)
                for (size_t jb = 0; jb < nc; jb++) {
                    float m = 0.0f;
                    for (size_t i = ib * br; i < rows && i < (ib + 1) * br; i++)
                        m = fl_fmax_f32(m, seg[i * nc + jb]);
                    seg[ib * nc + jb] = m;
                }
        qsort(seg, nb, sizeof *seg, cmp_float);
        static const double qs[3] = { 0.01, 0.50, 0.99 };
        for (int k = 0; k < 3; k++)
            st->blk_q[k] = am > 0.0f ? seg[(size_t)(qs[k] * (double)(nb - 1) + 0.5)] / am : NAN;
    }
    free(acc);
    free(x2);
    free(seg);
}

/* dst (8 x 8, row stride ldd) = the transpose of src (8 x 8, row stride lds), in three shuffle stages. */
static inline void transpose8x8(float *dst, size_t ldd, const float *src, size_t lds)
{
    v8f r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        memcpy(&r[k], src + k * lds, sizeof r[k]);
    for (int k = 0; k < 8; k += 2) { /* t = pairs of rows interleaved */
        t[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int k = 0; k < 8; k += 4) { /* u: four rows of columns (0, 4), (1, 5), (2, 6), (3, 7) */
        u[k] = __builtin_shufflevector(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 1] = __builtin_shufflevector(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[k + 2] = __builtin_shufflevector(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 3] = __builtin_shufflevector(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int k = 0; k < 4; k++) { /* column k and column k + 4 */
        const v8f lo = __builtin_shufflevector(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const v8f hi = __builtin_shufflevector(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        memcpy(dst + k * ldd, &lo, sizeof lo);
        memcpy(dst + (k + 4) * ldd, &hi, sizeof hi);
    }
}

/* Element (i, c) of an (R, C) tensor between x's layout and the cast's (transposed: (C, R), at c * R + i),
   times rs[i] or cs[c] where given: back = 0 reads the tensor from src in x's layout, back = 1 writes it
   to dst in x's layout.  In tiles of 32 x 32 (the cache lines of both sides). */
static void relayout(float *dst, const float *src, size_t R, size_t C, int transposed, int back, const float *rs,
                     const float *cs)
{
    if (transposed && !rs && !cs) { /* a plain transpose (the wgrad copies): 8 x 8 blocks in registers */
        const size_t Rs = back ? C : R, Cs = back ? R : C; /* src (Rs, Cs) -> dst (Cs, Rs) */
        const size_t R8 = Rs & ~(size_t)7, C8 = Cs & ~(size_t)7;
        /* eight rows of dst at a time, written along (rows of a power-of-two stride apart share a cache
           set: more at once would evict each other) */
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < C8; c += 8)
            for (size_t i = 0; i < R8; i += 8)
                transpose8x8(dst + c * Rs + i, Rs, src + i * Cs + c, Cs);
        for (size_t i = 0; i < Rs; i++) /* the edges */
            for (size_t c = i < R8 ? C8 : 0; c < Cs; c++)
                dst[c * Rs + i] = src[i * Cs + c];
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < R; i0 += 32)
        for (size_t c0 = 0; c0 < C; c0 += 32)
            for (size_t i = i0; i < R && i < i0 + 32; i++)
                for (size_t c = c0; c < C && c < c0 + 32; c++) {
                    const size_t k = i * C + c, kc = transposed ? c * R + i : k;
                    const float v = src[back ? kc : k];
                    dst[back ? k : kc] = rs ? v * rs[i] : cs ? v * cs[c] : v;
                }
}

/* An FP4 cast (recipe.h: nvfp4, mxfp4).  The tensor as the cast sees it -- smoothed, and for the wgrad
   copies (transposed) laid out with the tokens along the rows, after the Hadamard transform where
   --rht -- goes to a scratch buffer; it is quantised in blocks along its rows; the result goes back
   to y in x's layout, unsmoothed (the transform stays: both operands of the wgrad GEMM carry it). */
static void fp4_cast(fl_recipe *r, int si_, float *y, const float *x, size_t R, size_t C, int transposed, fl_smooth *sm)
{
    fl_site *site = &r->sites[si_];
    const int nv = site->scaling == FL_SCALING_NVFP4;
    const size_t n = R * C, rows = transposed ? C : R, cols = transposed ? R : C;
    const cast_smoothing smo = smooth_scales(sm, x, R, C);
    const int smoothed = smo.row_s || smo.col_s, rht = transposed && site->rht;
    /* a: the tensor as cast (x itself when it is), b: its quantisation (y itself when it can be) */
    float *abuf = NULL, *bbuf = NULL;
    const float *a = x;
    if (smoothed || transposed) {
        abuf = malloc((n ? n : 1) * sizeof *abuf);
        relayout(abuf, x, R, C, transposed, 0, smo.row_s, smo.col_s);
        a = abuf;
    }
    const int direct = !smoothed && !transposed && y != x;
    float *b = direct ? y : (bbuf = malloc((n ? n : 1) * sizeof *b));
    if (rht) {
        if (cols % FL_RHT_SIZE) { /* fl_train_cfg_check refuses --rht unless batch x seq is a multiple of 16 */
            fprintf(stderr, "recipe: --rht needs a multiple of %d tokens (%zu)\n", FL_RHT_SIZE, cols);
            abort();
        }
        float signs[FL_RHT_SIZE];
        fl_rht16_signs(signs, r->sr_seed);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j += FL_RHT_SIZE)
                fl_rht16(abuf + i * cols + j, signs);
    }
    fl_cast_fmt cf = { .fmt = FL_FMT_E2M1 };
    cf.sr = (site->role == FL_ROLE_GOUT && r->cfg.grad_sr) || (site->role == FL_ROLE_IN && transposed && r->cfg.update_sr);
    cf.key = fl_recipe_sr_key(r, si_) ^ (transposed ? FL_RECIPE_SR_COPY : 0); /* the copy: its own stream */
    cf.reference = r->slow_cast;
    const float am = fl_cast_amax(a, n);
    /* tiles: nvfp4 weights 16x16 (not with --fp4-w1d), else one row */
    const size_t br = nv && site->role == FL_ROLE_W && !r->cfg.fp4_w1d ? FL_NVFP4_BLOCK : 1;
    const size_t bc = nv ? FL_NVFP4_BLOCK : FL_MX_BLOCK, nc = (cols + bc - 1) / bc, nr = (rows + br - 1) / br;
    const size_t ntile = nr * nc > 0 ? nr * nc : 1;
    float *unit = malloc(ntile * sizeof *unit);
    uint8_t *code = malloc(ntile); /* the block scales' codes: e4m3 (nvfp4), e8m0 (mxfp4) */
    fl_quant_stats q = { 0 };
    if (nv) {
        const float s_enc = fl_nvfp4_global_scale(am, (int)r->cfg.four_over_six), s_dec = 1.0f / s_enc;
        fl_nvfp4_fake_quantize_tiles(b, code, &q, a, rows, cols, br, s_enc, (int)r->cfg.four_over_six, cf.sr, cf.key,
                                     cf.reference);
        for (size_t t = 0; t < nr * nc; t++)
            unit[t] = fl_decode_f32(fl_format_get(FL_FMT_E4M3), code[t]) * s_dec;
    } else { /* a block holding a NaN gets the code 0xFF and decodes to NaNs */
        fl_mx_fake_quantize_cast(b, code, &q, a, rows, cols, &cf, r->cfg.mx_floor ? FL_MX_FLOOR : FL_MX_CEIL);
        for (size_t t = 0; t < nr * nc; t++)
            unit[t] = code[t] == 0xFFu ? NAN : fl_mx_scale_from_code(code[t]);
    }
    free(code);
    cast_counts k = { { .sat = q.n_sat, .clip = q.n_clip, .nan_in = q.n_nan, .ftz = q.n_ftz }, am };
    fl_cast_stats *st = &site->st;
    double *rm = NULL;
    if (!transposed) {
        fp4_block_stats(st, a, b, rows, cols, br, bc, unit, am, r->moments);
        if (r->moments) { /* the moments of the tensor as cast, per row in order (one scale: 1) */
            const float one = 1.0f;
            rm = calloc(2 * (R ? R : 1), sizeof *rm);
            fl_cast_row_moments(rm, a, R, C, NULL, &one, R ? R : 1);
        }
    }
    if (!direct)
        relayout(y, b, R, C, transposed, 1, smo.row_si, smo.col_si);
    cast_record_stats(site, &k, R, C, transposed, rm); /* no delayed history: every FP4 scale is current */
    free(rm);
    free(unit);
    free(abuf);
    free(bbuf);
}

void fl_recipe_cast(fl_recipe *r, int si_, float *y, const float *x, size_t R, size_t C,
                    int transposed, int record, fl_smooth *sm)
{
    fl_site *site = &r->sites[si_];
    if (site->fmt == FL_FMT_FP32) {
        if (y != x)
            memcpy(y, x, R * C * sizeof *x);
        return;
    }
    /* the BF16 start (cfg.fp8_start): an FP8 site casts to bf16, unscaled, and still records its amax */
    const int hp = r->hp_phase && site->fmt != FL_FMT_BF16;
    const fl_scaling scaling = hp ? FL_SCALING_NONE : site->scaling;
    if (hp) {
        site->scale = 1.0f;
        site->amax_from = 0.0f; /* no staleness: nothing was scaled */
    }
    if (!hp && site->fmt == FL_FMT_E2M1) {
        fp4_cast(r, si_, y, x, R, C, transposed, sm);
        return;
    }
    /* paper-gaudi2's backward copy: e5m2 with its own scale from the same amax, round-to-nearest */
    const int bwd = !hp && transposed && site->gaudi2;
    const cast_smoothing smo = smooth_scales(sm, x, R, C);
    cast_grid g;
    cast_grid_init(&g, scaling, site->role == FL_ROLE_W, transposed, R, C);
    cast_scales(r, site, scaling, &g, x, R, C, &smo, bwd);

    fl_cast_fmt cf = cast_fmt_of(r, si_, hp, bwd);
    cf.reference = r->slow_cast;
    const int mom = r->moments && !transposed;
    double *rm = mom ? calloc(2 * (R ? R : 1), sizeof *rm) : NULL;
    /* The clip mass reads x before the cast (y may be x), when the cast will saturate: a per-tensor
       scale s saturates iff amax(xv) * s > fmax; a current scale's amax is known, a delayed one's
       takes a pass over x. */
    if (!transposed) {
        if (scaling == FL_SCALING_DELAYED || scaling == FL_SCALING_TENSOR) {
            const float am = scaling == FL_SCALING_TENSOR ? site->amax_from : xv_amax(x, R, C, &smo);
            if (am * g.one > fl_cast_fmax(&cf))
                site->st.clip_mass = clip_mass(x, R, C, g.one, &cf, &smo);
        } else if (scaling != FL_SCALING_NONE) {
            site->st.clip_mass = NAN;
        }
    }
    const cast_counts k = cast_quantize(y, x, R, C, &g, &smo, &cf, rm);
    cast_grid_free(&g);
    cast_record_stats(site, &k, R, C, transposed, rm);
    free(rm);
    if (site->scaling == FL_SCALING_DELAYED && record)
        delayed_record(r, site, k.amax);
}

/* ---- the GPU step's casts ------------------------------------------------------------------------- */

const char *fl_recipe_dev_check(const fl_recipe *r)
{
    if (r->cfg.fast_accum)
        return "--fast-accum (the FP8 GEMM's fast accumulation) has no device path yet";
    for (int i = 0; i < r->nsites; i++) {
        const fl_site *s = &r->sites[i];
        if (s->fmt == FL_FMT_FP32 || s->fmt == FL_FMT_BF16)
            continue;
        if (s->fmt != FL_FMT_E4M3 && s->fmt != FL_FMT_E5M2)
            return "FP4 sites have no device path yet";
        if (s->scaling != FL_SCALING_DELAYED && s->scaling != FL_SCALING_TENSOR)
            return "block and MX scales have no device path yet (per-tensor delayed and current scaling have)";
    }
    return NULL;
}

int fl_recipe_dev_cast_begin(fl_recipe *r, int si, float amax, fl_cast_fmt *cf, float *s, float *s_inv)
{
    fl_site *site = &r->sites[si];
    const int hp = r->hp_phase && site->fmt != FL_FMT_BF16; /* fl_recipe_cast's bf16 start */
    const fl_scaling scaling = hp ? FL_SCALING_NONE : site->scaling;
    if (site->fmt == FL_FMT_FP32 || (!hp && scaling != FL_SCALING_NONE && scaling != FL_SCALING_DELAYED &&
                                      scaling != FL_SCALING_TENSOR))
        return -1;
    *s = *s_inv = 1.0f;
    if (hp) {
        site->scale = 1.0f;
        site->amax_from = 0.0f;
    } else if (scaling == FL_SCALING_DELAYED) {
        delayed_scales(site, s, s_inv);
    } else if (scaling == FL_SCALING_TENSOR) { /* current_scales, one block */
        *s = fl_scale_from_amax(scale_format(site), amax, 1.0f, r->cfg.margin, (int)r->cfg.pow2);
        *s_inv = 1.0f / *s;
        site->amax_from = amax;
        site->scale = *s;
    }
    *cf = cast_fmt_of(r, si, hp, 0);
    return 0;
}

int fl_recipe_dev_copy_begin(fl_recipe *r, int si, fl_cast_fmt *cf, float *s, float *s_inv)
{
    const fl_site *site = &r->sites[si];
    if (!fl_recipe_needs_bwd_copy(r, si) || !site->gaudi2 ||
        (site->scaling != FL_SCALING_DELAYED && site->scaling != FL_SCALING_TENSOR))
        return -1;
    *cf = cast_fmt_of(r, si, r->hp_phase, !r->hp_phase); /* the bf16 start: the forward's bf16 cast */
    /* cast_scales' bwd: the delayed copy's scale read by the forward cast, or current_scales' from the same
       tensor's amax (the forward cast's, amax_from) for e5m2 */
    const float sb = site->scaling == FL_SCALING_DELAYED
                         ? site->scale_bwd
                         : fl_scale_from_amax(FL_FMT_E5M2, site->amax_from, 1.0f, r->cfg.margin, (int)r->cfg.pow2);
    *s = r->hp_phase ? 1.0f : sb;
    *s_inv = r->hp_phase ? 1.0f : 1.0f / sb;
    return 0;
}

void fl_recipe_dev_copy_end(fl_recipe *r, int si, const fl_cast_counts *k, size_t n)
{
    const cast_counts kk = { *k, 0.0f };
    cast_record_stats(&r->sites[si], &kk, n, 1, 1, NULL); /* counts only: amax and mass are the forward cast's */
}

int fl_recipe_dev_cast_end(fl_recipe *r, int si, const fl_cast_counts *k, float amax, size_t n, float s,
                           const fl_cast_fmt *cf, int record)
{
    fl_site *site = &r->sites[si];
    const cast_counts kk = { *k, amax };
    cast_record_stats(site, &kk, n, 1, 0, NULL);
    int want = 0; /* it saturated: the clip mass takes a pass over x (fl_recipe_dev_clip_mass); NaN until then */
    if ((site->scaling == FL_SCALING_DELAYED || site->scaling == FL_SCALING_TENSOR) && cf->fmt != FL_FMT_BF16 &&
        amax * s > fl_cast_fmax(cf)) {
        site->st.clip_mass = NAN;
        want = 1;
    }
    if (site->scaling == FL_SCALING_DELAYED && record)
        delayed_record(r, site, amax);
    return want;
}

void fl_recipe_dev_clip_mass(fl_recipe *r, int si, const float *x, size_t R, size_t C, float s, const fl_cast_fmt *cf,
                             const fl_cast_smooth_host *sm)
{
    const cast_smoothing smo = { sm ? sm->cs : NULL, sm ? sm->csi : NULL, sm ? sm->rs : NULL, sm ? sm->rsi : NULL };
    r->sites[si].st.clip_mass = clip_mass(x, R, C, s, cf, &smo);
}

/* ---- state ------------------------------------------------------------------------------------ */

size_t fl_recipe_state_size(const fl_recipe *r)
{
    size_t n = 0;
    for (int i = 0; i < r->nsites; i++) {
        n += 5 * sizeof(uint64_t);
        if (r->sites[i].dl)
            n += fl_delayed_size(r->sites[i].dl->len);
        if (r->sites[i].dl_bwd)
            n += fl_delayed_size(r->sites[i].dl_bwd->len);
    }
    return n;
}

void fl_recipe_state_save(const fl_recipe *r, unsigned char *buf)
{
    for (int i = 0; i < r->nsites; i++) {
        const fl_site *s = &r->sites[i];
        const uint64_t t[5] = { s->tot_sat, s->tot_clip, s->tot_nan_out, s->tot_inf_out, s->tot_ftz };
        memcpy(buf, t, sizeof t);
        buf += sizeof t;
        for (const fl_delayed *d = s->dl; d; d = d == s->dl ? s->dl_bwd : NULL) {
            const size_t k = fl_delayed_size(d->len);
            memcpy(buf, d, k);
            buf += k;
        }
    }
}

const char *fl_recipe_state_load(fl_recipe *r, const unsigned char *buf, size_t n)
{
    if (n != fl_recipe_state_size(r))
        return "scaling state has the wrong size for this recipe";
    for (int i = 0; i < r->nsites; i++) {
        fl_site *s = &r->sites[i];
        uint64_t t[5];
        memcpy(t, buf, sizeof t);
        buf += sizeof t;
        s->tot_sat = t[0];
        s->tot_clip = t[1];
        s->tot_nan_out = t[2];
        s->tot_inf_out = t[3];
        s->tot_ftz = t[4];
        for (fl_delayed *d = s->dl; d; d = d == s->dl ? s->dl_bwd : NULL) {
            const size_t k = fl_delayed_size(d->len);
            memcpy(d, buf, k);
            buf += k;
            const char *why = fl_delayed_check(d, k);
            if (why)
                return why;
        }
    }
    return NULL;
}
