/* recipe.c — cast sites, scaling state and per-cast statistics (see recipe.h). */
#include "recipe.h"

#include "activations.h"

#include <fnmatch.h>
#include <math.h>
#include <omp.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
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
    while ((r = site_next(&p, pat, sizeof pat, &mode, err, errlen)) == 1) {
        if (!per_tensor) {
            snprintf(err, errlen, "--site %s: per-site overrides need fp8-delayed or fp8-current (or paper-gaudi2; the recipe is %s)", pat,
                     fl_recipe_name((fl_recipe_kind)cfg->kind));
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
    if (cfg->grad_sr && !per_tensor) {
        snprintf(err, errlen, "--grad-sr needs fp8-delayed or fp8-current (or paper-gaudi2: e5m2 gradients with a per-tensor scale)");
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

/* Decode tables of the 8-bit formats (filled once, before any parallel region). */
static float dec_e4m3[256], dec_e5m2[256];
static int dec_ready;

static void dec_init(void)
{
    if (dec_ready)
        return;
    for (int i = 0; i < 256; i++) {
        dec_e4m3[i] = fl_decode(FL_FMT_E4M3, (uint32_t)i);
        dec_e5m2[i] = fl_decode(FL_FMT_E5M2, (uint32_t)i);
    }
    dec_ready = 1;
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
    dec_init();
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
        } else {
            s->fmt = FL_FMT_E4M3;
            s->scaling = cfg->kind == FL_RECIPE_FP8_BLOCK ? FL_SCALING_1X128 : FL_SCALING_MX32;
        }
    }
    sites_apply(r);
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
    for (int i = 0; i < r->nsites; i++) {
        memset(&r->sites[i].st, 0, sizeof r->sites[i].st);
        r->sites[i].scale = 1.0f;
        r->sites[i].scale_bwd = 1.0f;
        r->sites[i].amax_from = 0.0f;
    }
}

void fl_recipe_step_end(fl_recipe *r)
{
    for (int i = 0; i < r->nsites; i++) {
        fl_site *s = &r->sites[i];
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
    const int blocks = s->scaling == FL_SCALING_1X128 || s->scaling == FL_SCALING_MX32;
    return (blocks && s->role != FL_ROLE_W) || s->gaudi2; /* block / MX weights: 128x128 or 1x32 both ways */
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

/* ---- the fused fake-quantisation loop ------------------------------------------------------- */

typedef struct {
    uint64_t sat, clip, nan_out, inf_out, nan_in, ftz;
} fq_cnt;

static inline void fq_cnt_add(fq_cnt *a, const fq_cnt *b)
{
    a->sat += b->sat;
    a->clip += b->clip;
    a->nan_out += b->nan_out;
    a->inf_out += b->inf_out;
    a->nan_in += b->nan_in;
    a->ftz += b->ftz;
}

/* counts summed over OpenMP threads (integers: the order does not matter) */
#pragma omp declare reduction(fq_add : fq_cnt : fq_cnt_add(&omp_out, &omp_in)) initializer(omp_priv = (fq_cnt){ 0 })

/* Fast exact encoders (RNE) of the three formats the recipes cast to; tests/test_train_cast.c checks
   them against fl_encode_f32_bits.  u: float32 bits. */
static inline uint32_t enc_bf16(uint32_t u)
{
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FFFu; /* canonical NaN */
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; /* a carry into the exponent gives Inf */
}

/* Round |x| < 2^-6 (e4m3) or < 2^-14 (e5m2) to an integer multiple of the subnormal step:
   v = |x| * 2^k is exact and below 8 (4); adding and subtracting 2^23 rounds it to nearest-even. */
static inline uint32_t rne_small(uint32_t a, float k)
{
    const float v = fl_f32_from_bits(a) * k;
    return (uint32_t)((v + 0x1p23f) - 0x1p23f);
}

static inline uint32_t enc_e4m3(uint32_t u, int nosat)
{
    const uint32_t sg = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
    if (a > 0x43E80000u) { /* 0x43e80000 is 464.0f, the e4m3 RNE overflow boundary (464 -> 448) */
        if (a > 0x7F800000u)
            return 0x7Fu; /* NaN input: the canonical NaN, sign dropped */
        return sg | (nosat ? 0x7Fu : 0x7Eu); /* non-saturating overflow / Inf: the NaN of its sign */
    }
    if (a >= 0x3C800000u) /* >= 2^-6, normal: keep 3 mantissa bits, rebias 127 -> 7 */
        return sg | (((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - (120u << 3));
    return sg | rne_small(a, 0x1p9f);
}

static inline uint32_t enc_e5m2(uint32_t u, int nosat)
{
    const uint32_t sg = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
    if (a >= 0x47700000u) { /* 0x47700000 is 61440.0f: the tie goes up to 2^16, i.e. overflow */
        if (a > 0x7F800000u)
            return 0x7Fu;
        return sg | (nosat ? 0x7Cu : 0x7Bu); /* Inf, or max 57344 */
    }
    if (a >= 0x38800000u) /* >= 2^-14, normal: keep 2 mantissa bits, rebias 127 -> 15 */
        return sg | (((a + 0xFFFFFu + ((a >> 21) & 1u)) >> 21) - (112u << 2));
    return sg | rne_small(a, 0x1p16f);
}

uint32_t fl_recipe_encode(fl_format f, float x, int nosat)
{
    const uint32_t u = fl_f32_bits(x);
    switch (f) {
    case FL_FMT_BF16: return enc_bf16(u);
    case FL_FMT_E4M3: return enc_e4m3(u, nosat);
    case FL_FMT_E5M2: return enc_e5m2(u, nosat);
    default: return fl_encode_f32_bits(fl_format_get(f), u, FL_RND_NE, nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE, 0);
    }
}

/* The fast path of fq_span for e4m3 / e5m2 / bf16: the rounded value is formed directly in float32
   bits (RNE on the kept mantissa bits, the subnormal grid by the 2^23 trick), which is
   decode(encode(v)) -- the table path above -- written branch-free.  Counts as fq_span.
   unit = 1: the caller guarantees rs = rsi = s = si = 1; unit = 2: rs = rsi = 1 (products with 1
   are exact, so skipping them changes no bit).  col: per-column smoothing cs/csi.  g240: e4m3 only,
   Gaudi2's e4m3 (FL_DESC_E4M3_GAUDI2), saturating: the largest value is 240 and the RNE overflow
   boundary 248, a tie that overflows (240's mantissa is odd); below 240 the grid is e4m3's. */
typedef struct {
    uint32_t sat, clip, ovfc, ftz, nan_in, amb; /* 32-bit counts within a chunk; amb: amax bit pattern */
} fq_acc;

/* One element (index c); the constants fold per format in the FQ_VARIANT instances below. */
static inline __attribute__((always_inline)) void fq_elem(float *y, const float *x, size_t c, const float *cs,
                                                           const float *csi, float rs, float rsi, float s, float si,
                                                           fl_format fmt, int nosat, int unit, int col, int g240,
                                                           fq_acc *A)
{
    /* sh: discarded mantissa bits; nmin: smallest normal; sub: 2^-(subnormal step exponent) */
    const int e4 = fmt == FL_FMT_E4M3, bf = fmt == FL_FMT_BF16;
    const uint32_t sh = bf ? 16 : e4 ? 20 : 21;
    const uint32_t nmin = bf ? 0x00800000u : e4 ? 0x3C800000u : 0x38800000u;
    /* 448 (240 for Gaudi2's e4m3), 57344 */
    const uint32_t maxb = bf ? 0x7F7F0000u : e4 ? (g240 ? 0x43700000u : 0x43E00000u) : 0x47600000u;
    /* overflow above: e4m3 > 464 (0x43e80000); Gaudi2's e4m3 >= 248 (0x43780000); e5m2 >= 61440
       (0x47700000); bf16 rounds to Inf */
    const uint32_t ovf = bf ? 0x7F7F8000u : e4 ? (g240 ? 0x43780000u : 0x43E80001u) : 0x47700000u;
    const float sub = e4 ? 0x1p9f : 0x1p16f, subi = e4 ? 0x1p-9f : 0x1p-16f;
    const uint32_t ovf_bits = nosat || bf ? (e4 ? 0x7FC00000u : 0x7F800000u) : maxb;
    const uint32_t half = (1u << (sh - 1)) - 1u, mask = ~((1u << sh) - 1u);
    const uint32_t nminv = bf ? 0u : nmin; /* bf16: every finite value takes the normal path */
    const uint32_t nanmask_o = (nosat || bf) && e4 ? 0u : 0xFFFFFFFFu; /* sign kept on overflow? */
    const uint32_t ovf_counts = (uint32_t)(nosat || bf);
    const uint32_t inf_counts = (uint32_t)e4; /* e5m2/bf16: an Inf input is no produced Inf */
#define SEL(m, p, q) (((p) & (m)) | ((q) & ~(m)))
    const float x0 = unit ? x[c] : x[c] * rs;
    const float xv = col ? x0 * cs[c] : x0;
    const float v = unit == 1 ? xv : xv * s;
    const uint32_t u = fl_f32_bits(v), a = u & 0x7FFFFFFFu, sg = u & 0x80000000u;
    const uint32_t rn = (a + half + ((a >> sh) & 1u)) & mask;           /* normal RNE */
    const float vs = fl_f32_from_bits(a) * sub;
    const float rsub = ((vs + 0x1p23f) - 0x1p23f) * subi;               /* subnormal RNE */
    const uint32_t mnorm = 0u - (uint32_t)(a >= nminv);
    const uint32_t r0 = SEL(mnorm, rn, fl_f32_bits(rsub));
    const uint32_t isn = (uint32_t)(a > 0x7F800000u), misn = 0u - isn;
    const uint32_t o = (uint32_t)(a >= ovf) & (isn ^ 1u), mo = 0u - o;
    const uint32_t ra = SEL(misn, 0x7FC00000u, SEL(mo, ovf_bits, r0));
    const uint32_t keep_sign = ~misn & SEL(mo, nanmask_o, 0xFFFFFFFFu);
    const float q = fl_f32_from_bits(ra | (sg & keep_sign));
    const float q1 = unit == 1 ? q : unit == 2 ? q * si : q * si * rsi;
    y[c] = col ? q1 * csi[c] : q1;
    const uint32_t axb = fl_f32_bits(xv) & 0x7FFFFFFFu;
    const uint32_t axv = SEL(0u - (uint32_t)(axb <= 0x7F800000u), axb, 0u);
    A->amb = axv > A->amb ? axv : A->amb;
    A->nan_in += isn;
    A->sat += (isn ^ 1u) & (uint32_t)(a > maxb);
    A->clip += o;
    A->ovfc += o & ovf_counts & (inf_counts | (uint32_t)(a != 0x7F800000u));
    A->ftz += (isn ^ 1u) & (uint32_t)(ra == 0) & (uint32_t)(axb != 0);
#undef SEL
}

#if defined(__AVX512F__)
/* Elements [c0, c1) 16 at a time.  A block whose every lane has |v| <= the largest finite value
   (no NaN, no saturation or overflow: the common case) takes the short form of fq_elem -- RNE,
   the subnormal grid, the flush-to-zero count and the amax, the same operations lane by lane; a
   block with any other lane goes through fq_elem.  Returns the first index not done. */
static inline __attribute__((always_inline)) size_t fq_block16(float *y, const float *x, size_t c0, size_t c1,
                                                               const float *cs, const float *csi, float rs, float rsi,
                                                               float s, float si, fl_format fmt, int nosat, int unit,
                                                               int col, int g240, fq_acc *A)
{
    const int e4 = fmt == FL_FMT_E4M3, bf = fmt == FL_FMT_BF16;
    const uint32_t sh = bf ? 16 : e4 ? 20 : 21;
    const __m512i nmin = _mm512_set1_epi32(e4 ? 0x3C800000 : 0x38800000);
    const __m512i maxb = _mm512_set1_epi32(bf ? 0x7F7F0000 : e4 ? (g240 ? 0x43700000 : 0x43E00000) : 0x47600000);
    const __m512 sub = _mm512_set1_ps(e4 ? 0x1p9f : 0x1p16f), subi = _mm512_set1_ps(e4 ? 0x1p-9f : 0x1p-16f);
    const __m512 two23 = _mm512_set1_ps(0x1p23f);
    const __m512i half = _mm512_set1_epi32((int)((1u << (sh - 1)) - 1u)), mask = _mm512_set1_epi32((int)~((1u << sh) - 1u));
    const __m512i one = _mm512_set1_epi32(1), absm = _mm512_set1_epi32(0x7FFFFFFF), zero = _mm512_setzero_si512();
    const __m512 vrs = _mm512_set1_ps(rs), vrsi = _mm512_set1_ps(rsi), vs_ = _mm512_set1_ps(s), vsi = _mm512_set1_ps(si);
    __m512i amb = _mm512_set1_epi32((int)A->amb);
    uint32_t ftz = 0;
    size_t c = c0;
    for (; c + 16 <= c1; c += 16) {
        const __m512 xl = _mm512_loadu_ps(x + c);
        const __m512 x0 = unit ? xl : _mm512_mul_ps(xl, vrs);
        const __m512 xv = col ? _mm512_mul_ps(x0, _mm512_loadu_ps(cs + c)) : x0;
        const __m512 v = unit == 1 ? xv : _mm512_mul_ps(xv, vs_);
        const __m512i u = _mm512_castps_si512(v), a = _mm512_and_si512(u, absm);
        if (_mm512_cmpgt_epu32_mask(a, maxb)) {
            for (size_t l = 0; l < 16; l++)
                fq_elem(y, x, c + l, cs, csi, rs, rsi, s, si, fmt, nosat, unit, col, g240, A);
            continue;
        }
        const __m512i sg = _mm512_andnot_si512(absm, u);
        const __m512i rn = _mm512_and_si512(
            _mm512_add_epi32(_mm512_add_epi32(a, half), _mm512_and_si512(_mm512_srli_epi32(a, sh), one)), mask);
        const __m512i axb = _mm512_and_si512(_mm512_castps_si512(xv), absm);
        __m512i r0 = rn;
        /* A flushed lane rounds to 0 from a nonzero x: only on the subnormal grid (e4m3/e5m2; a
           normal lane rounds to at least the smallest normal) or, for bf16, from below 2^-133. */
        int subn = bf;
        if (!bf) {
            const __mmask16 mn = _mm512_cmpge_epu32_mask(a, nmin);
            if (mn != 0xFFFF) { /* some lane below the smallest normal */
                const __m512 vsb = _mm512_mul_ps(_mm512_castsi512_ps(a), sub);
                const __m512 rsub = _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(vsb, two23), two23), subi);
                r0 = _mm512_mask_blend_epi32(mn, _mm512_castps_si512(rsub), rn);
                subn = 1;
            }
        }
        if (subn)
            ftz += (uint32_t)__builtin_popcount(_mm512_cmpeq_epi32_mask(r0, zero) & _mm512_cmpneq_epi32_mask(axb, zero));
        __m512 q = _mm512_castsi512_ps(_mm512_or_si512(r0, sg));
        if (unit == 0)
            q = _mm512_mul_ps(_mm512_mul_ps(q, vsi), vrsi);
        else if (unit == 2)
            q = _mm512_mul_ps(q, vsi);
        if (col)
            q = _mm512_mul_ps(q, _mm512_loadu_ps(csi + c));
        _mm512_storeu_ps(y + c, q);
        amb = _mm512_max_epu32(amb, axb);
    }
    const uint32_t vm = (uint32_t)_mm512_reduce_max_epu32(amb); /* and fq_elem's, of the other blocks */
    A->amb = vm > A->amb ? vm : A->amb;
    A->ftz += ftz;
    return c;
}
#endif

static inline __attribute__((always_inline)) float fq_span_body(float *y, const float *x, size_t n,
                                                                 const float *cs, const float *csi, float rs,
                                                                 float rsi, float s, float si, fl_format fmt,
                                                                 int nosat, fq_cnt *k, double *m2, double *m4,
                                                                 int unit, int col, int g240)
{
    /* Accumulators: integer counts and the maximum of bit patterns (ordered like the values for
       non-negative floats; NaN patterns excluded), so a vectorised loop's lanes give the
       sequential loop's results exactly.  The counts run in 32 bits over chunks of 2^20 elements. */
    fq_acc A = { 0, 0, 0, 0, 0, 0 };
    uint64_t sat = 0, clip = 0, ovfc = 0, ftz = 0, nan_in = 0;
    for (size_t c0 = 0; c0 < n; c0 += (size_t)1 << 20) {
        const size_t c1 = n - c0 < ((size_t)1 << 20) ? n : c0 + ((size_t)1 << 20);
        A.sat = A.clip = A.ovfc = A.ftz = A.nan_in = 0;
        size_t c = c0;
#if defined(__AVX512F__)
        c = fq_block16(y, x, c0, c1, cs, csi, rs, rsi, s, si, fmt, nosat, unit, col, g240, &A);
#endif
        for (; c < c1; c++)
            fq_elem(y, x, c, cs, csi, rs, rsi, s, si, fmt, nosat, unit, col, g240, &A);
        sat += A.sat;
        clip += A.clip;
        ovfc += A.ovfc;
        ftz += A.ftz;
        nan_in += A.nan_in;
    }
    const float am = fl_f32_from_bits(A.amb);
    if (m2) {
        double s2 = 0.0, s4 = 0.0;
        for (size_t c = 0; c < n; c++) {
            const float x0 = unit ? x[c] : x[c] * rs;
            const float xv = col ? x0 * cs[c] : x0;
            if ((fl_f32_bits(unit == 1 ? xv : xv * s) & 0x7FFFFFFFu) <= 0x7F800000u) { /* fq_elem's !isn */
                const double d2 = (double)xv * xv;
                s2 += d2;
                s4 += d2 * d2;
            }
        }
        *m2 += s2;
        *m4 += s4;
    }
    k->sat += sat;
    k->clip += clip;
    if (fmt == FL_FMT_E4M3)
        k->nan_out += ovfc;
    else
        k->inf_out += ovfc;
    k->ftz += ftz;
    k->nan_in += nan_in;
    return am;
}

/* The body compiled once per format (the constant folds the format's selections away), for bf16
   once more without the unit scales that every bf16 site has, for e4m3/e5m2 once more without row
   smoothing, and with column smoothing (cs, csi: Smooth-SwiGLU's per-channel scales at the down
   projection's input, e4m3 or bf16); Gaudi2's e4m3 (paper-gaudi2) the same three ways as e4m3. */
#define FQ_VARIANT(name, fmt, unit, col, g240)                                                          \
    __attribute__((noinline)) static float name(float *y, const float *x, size_t n, const float *cs,   \
                                                const float *csi, float rs, float rsi, float s, float si, \
                                                int nosat, fq_cnt *k, double *m2, double *m4)            \
    {                                                                                                    \
        return fq_span_body(y, x, n, cs, csi, rs, rsi, s, si, fmt, nosat, k, m2, m4, unit, col, g240);   \
    }
FQ_VARIANT(fq_span_e4m3, FL_FMT_E4M3, 0, 0, 0)
FQ_VARIANT(fq_span_e5m2, FL_FMT_E5M2, 0, 0, 0)
FQ_VARIANT(fq_span_bf16, FL_FMT_BF16, 0, 0, 0)
FQ_VARIANT(fq_span_bf16_unit, FL_FMT_BF16, 1, 0, 0)
FQ_VARIANT(fq_span_e4m3_r1, FL_FMT_E4M3, 2, 0, 0)
FQ_VARIANT(fq_span_e5m2_r1, FL_FMT_E5M2, 2, 0, 0)
FQ_VARIANT(fq_span_e4m3_col, FL_FMT_E4M3, 0, 1, 0)
FQ_VARIANT(fq_span_bf16_col, FL_FMT_BF16, 0, 1, 0)
FQ_VARIANT(fq_span_g240, FL_FMT_E4M3, 0, 0, 1)
FQ_VARIANT(fq_span_g240_r1, FL_FMT_E4M3, 2, 0, 1)
FQ_VARIANT(fq_span_g240_col, FL_FMT_E4M3, 0, 1, 1)
#undef FQ_VARIANT

/* cs/csi: column smoothing or NULL; not for e5m2 (no smoothed site casts to it).  g240: fmt is e4m3,
   cast as Gaudi2's e4m3, saturating. */
static float fq_span_fast(float *y, const float *x, size_t n, const float *cs, const float *csi, float rs, float rsi,
                          float s, float si, fl_format fmt, int g240, int nosat, fq_cnt *k, double *m2, double *m4)
{
    const int r1 = rs == 1.0f && rsi == 1.0f; /* no row smoothing */
    if (fmt == FL_FMT_E4M3 && g240)
        return (cs ? fq_span_g240_col : r1 ? fq_span_g240_r1 : fq_span_g240)(y, x, n, cs, csi, rs, rsi, s, si, 0, k, m2, m4);
    if (fmt == FL_FMT_E4M3)
        return (cs ? fq_span_e4m3_col : r1 ? fq_span_e4m3_r1 : fq_span_e4m3)(y, x, n, cs, csi, rs, rsi, s, si, nosat, k, m2, m4);
    if (fmt == FL_FMT_E5M2)
        return (r1 ? fq_span_e5m2_r1 : fq_span_e5m2)(y, x, n, NULL, NULL, rs, rsi, s, si, nosat, k, m2, m4);
    if (cs)
        return fq_span_bf16_col(y, x, n, cs, csi, rs, rsi, s, si, nosat, k, m2, m4);
    if (rs == 1.0f && rsi == 1.0f && s == 1.0f && si == 1.0f)
        return fq_span_bf16_unit(y, x, n, NULL, NULL, rs, rsi, s, si, nosat, k, m2, m4);
    return fq_span_bf16(y, x, n, NULL, NULL, rs, rsi, s, si, nosat, k, m2, m4);
}

/* Fake-quantize a span: y[c] = decode(encode(x[c] * cs[c] * rs * s)) * si * csi[c] * rsi, counting.
   cs/csi: per-column smoothing (or NULL), rs/rsi: per-row smoothing (1 when none).  gd: the format
   as a descriptor for the generic encoder instead of fmt (Gaudi2's e4m3), or NULL.  Returns the
   amax of x * cs * rs (the tensor entering the cast); moments of the same into m2/m4. */
static float fq_span(float *y, const float *x, size_t n, const float *cs, const float *csi, float rs,
                     float rsi, float s, float si, fl_format fmt, const fl_format_desc *gd, int nosat, float fmax,
                     float bound, int ties_ovf, fq_cnt *k, double *m2, double *m4)
{
    float am = 0.0f;
    for (size_t c = 0; c < n; c++) {
        float xv = x[c] * rs;
        if (cs)
            xv = xv * cs[c];
        const float v = xv * s;
        const uint32_t u = fl_f32_bits(v);
        float dq;
        if (gd)
            dq = fl_decode_f32(gd, fl_encode_f32_bits(gd, u, FL_RND_NE, nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE, 0));
        else if (fmt == FL_FMT_E4M3)
            dq = dec_e4m3[enc_e4m3(u, nosat)];
        else if (fmt == FL_FMT_E5M2)
            dq = dec_e5m2[enc_e5m2(u, nosat)];
        else if (fmt == FL_FMT_BF16)
            dq = fl_f32_from_bits(enc_bf16(u) << 16);
        else
            dq = fl_decode(fmt, fl_encode_f32_bits(fl_format_get(fmt), u, FL_RND_NE,
                                                   nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE, 0));
        float out = dq * si * rsi;
        if (csi)
            out = out * csi[c];
        y[c] = out;
        if (xv != xv) {
            k->nan_in++;
            continue;
        }
        const float ax = fabsf(xv), av = fabsf(v);
        if (ax > am)
            am = ax;
        if (m2) {
            const double d2 = (double)xv * xv;
            *m2 += d2;
            *m4 += d2 * d2;
        }
        if (av > fmax) { /* includes +-Inf inputs */
            k->sat++;
            if (av > bound || (ties_ovf && av == bound))
                k->clip++;
        }
        if (dq != dq)
            k->nan_out++;
        else if (isinf(dq) && !isinf(xv))
            k->inf_out++;
        else if (dq == 0.0f && xv != 0.0f)
            k->ftz++;
    }
    return am;
}

/* One element of fq_span_sr (index c): the project's one rounding routine, fl_encode_f32_bits with
   FL_RND_SR and the random bits fl_sr_bits(key, idx0 + c) (numerics/fl_round.h; the format's descriptor
   a constant, as in numerics/convert.c's SR loops), decoded through the e5m2 table. */
static inline void fq_elem_sr(float *y, const float *x, size_t c, float rs, float rsi, float s, float si, int nosat,
                              uint64_t key, uint64_t idx0, fq_cnt *k, float *am)
{
    static const fl_format_desc e5m2 = FL_DESC_E5M2;
    const float xv = x[c] * rs, v = xv * s;
    const uint32_t u = fl_f32_bits(v), a = u & 0x7FFFFFFFu;
    const uint32_t code = fl_encode_f32_bits(&e5m2, u, FL_RND_SR, nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE,
                                             fl_sr_bits(key, idx0 + c));
    const float q = dec_e5m2[code];
    y[c] = q * si * rsi;
    if (a > 0x7F800000u) {
        k->nan_in++;
        return;
    }
    if (a > 0x47600000u) { /* above 57344, Inf inputs included */
        k->sat++;
        k->clip++;
    }
    k->inf_out += (uint64_t)(isinf(q) && a != 0x7F800000u);
    k->ftz += (uint64_t)(q == 0.0f && a != 0);
    const float ax = fabsf(xv);
    if (ax > *am)
        *am = ax;
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
/* fl_mix64 of eight 64-bit lanes. */
static inline __m512i mix64_x8(__m512i z)
{
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ull));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64((long long)0x94D049BB133111EBull));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* fl_sr_bits(key, i) for i = i0 .. i0 + 15, as sixteen 32-bit lanes. */
static inline __m512i sr_bits16(uint64_t key, uint64_t i0)
{
    const __m512i g = _mm512_set1_epi64((long long)FL_GOLDEN64);
    const __m512i base = _mm512_set1_epi64((long long)(key + (i0 + 1) * FL_GOLDEN64));
    const __m512i z0 = _mm512_add_epi64(base, _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), g));
    const __m512i z1 = _mm512_add_epi64(base, _mm512_mullo_epi64(_mm512_set_epi64(15, 14, 13, 12, 11, 10, 9, 8), g));
    const __m256i r0 = _mm512_cvtepi64_epi32(_mm512_srli_epi64(mix64_x8(z0), 32));
    const __m256i r1 = _mm512_cvtepi64_epi32(_mm512_srli_epi64(mix64_x8(z1), 32));
    return _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
}
#endif

/* The stochastic-rounding e5m2 cast of a span (the dY casts with cfg.grad_sr): y[c] =
   SR(x[c] * rs * s) * si * rsi, element idx0 + c of the tensor drawing fl_sr_bits(key, idx0 + c), so
   the bits depend on (seed, step, site, element) only: not on threads or timing.
   Overflow: saturate to 57344, or Inf (nosat).  Counts and moments as fq_span; every element above
   the largest finite value counts as saturated and clipped.  Returns the amax of x * rs.  Sixteen
   elements at a time where AVX-512 DQ is available: a block whose lanes are all zero or in e5m2's
   normal range up to 57344 (the common case: no subnormal, overflow or NaN) rounds in the vector
   lanes -- FL_RND_SR for 21 discarded bits: frac32 = the dropped bits << 11, up iff frac32 + rbits
   carries out of 32 bits -- and any other block goes through fq_elem_sr. */
static float fq_span_sr(float *y, const float *x, size_t n, float rs, float rsi, float s, float si, int nosat,
                        uint64_t key, uint64_t idx0, fq_cnt *k, double *m2, double *m4)
{
    if (m2) /* moments first, in order: the cast may write over x */
        for (size_t c = 0; c < n; c++) {
            const float xv = x[c] * rs;
            if ((fl_f32_bits(xv * s) & 0x7FFFFFFFu) <= 0x7F800000u) {
                const double d2 = (double)xv * xv;
                *m2 += d2;
                *m4 += d2 * d2;
            }
        }
    float am = 0.0f;
    size_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    const __m512 vrs = _mm512_set1_ps(rs), vs = _mm512_set1_ps(s), vsi = _mm512_set1_ps(si), vrsi = _mm512_set1_ps(rsi);
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), nmin = _mm512_set1_epi32(0x38800000),
                  maxb = _mm512_set1_epi32(0x47600000), low = _mm512_set1_epi32(0x1FFFFF), step = _mm512_set1_epi32(1 << 21);
    __m512 vam = _mm512_setzero_ps();
    for (; c + 16 <= n; c += 16) {
        const __m512 xv = _mm512_mul_ps(_mm512_loadu_ps(x + c), vrs), v = _mm512_mul_ps(xv, vs);
        const __m512i u = _mm512_castps_si512(v), a = _mm512_and_si512(u, absm);
        const __mmask16 ok = (_mm512_cmpge_epu32_mask(a, nmin) | _mm512_cmpeq_epi32_mask(a, _mm512_setzero_si512())) &
                             _mm512_cmple_epu32_mask(a, maxb);
        if (ok != 0xFFFF) {
            for (size_t l = 0; l < 16; l++)
                fq_elem_sr(y, x, c + l, rs, rsi, s, si, nosat, key, idx0, k, &am);
            continue;
        }
        const __m512i frac32 = _mm512_slli_epi32(_mm512_and_si512(a, low), 11);
        const __mmask16 up = _mm512_cmplt_epu32_mask(_mm512_add_epi32(frac32, sr_bits16(key, idx0 + c)), frac32);
        const __m512i ra = _mm512_mask_add_epi32(_mm512_andnot_si512(low, a), up, _mm512_andnot_si512(low, a), step);
        const __m512 q = _mm512_castsi512_ps(_mm512_or_si512(ra, _mm512_andnot_si512(absm, u)));
        _mm512_storeu_ps(y + c, _mm512_mul_ps(_mm512_mul_ps(q, vsi), vrsi));
        vam = _mm512_max_ps(vam, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), absm)));
    }
    const float vmax = _mm512_reduce_max_ps(vam);
    am = vmax > am ? vmax : am;
#endif
    for (; c < n; c++)
        fq_elem_sr(y, x, c, rs, rsi, s, si, nosat, key, idx0, k, &am);
    return am;
}

static int log2_exact(size_t b)
{
    int k = 0;
    while (((size_t)1 << k) < b)
        k++;
    return k;
}

/* Moments of the rows of a cast without column smoothing: rm[2i], rm[2i+1] = the sums over c in
   order of d2 = (double) xv^2 and d2^2, xv = x[i][c] * rs_i, over the elements whose v = xv * s_i is
   not NaN -- fq_span_body's moment pass, row by row (rs = NULL: 1; s_i = bs[i / br]).  Eight rows
   at a time run in the lanes of one vector: an 8x8 block is transposed in registers, so that each
   column is one masked vector addition per sum (a NaN lane adds nothing: s2 and s4 start at +0 and
   only grow, so skipping is the sequential loop's "continue"). */
static void moments_row(double *rm, const float *x, size_t C, float rs, float s)
{
    double s2 = 0.0, s4 = 0.0;
    for (size_t c = 0; c < C; c++) {
        const float xv = x[c] * rs;
        if ((fl_f32_bits(xv * s) & 0x7FFFFFFFu) <= 0x7F800000u) {
            const double d2 = (double)xv * xv;
            s2 += d2;
            s4 += d2 * d2;
        }
    }
    rm[0] = s2;
    rm[1] = s4;
}

static void moments_rows(double *rm, const float *x, size_t R, size_t C, const float *rs, const float *bs, size_t br)
{
    size_t g8 = 0;
#if defined(__AVX512F__) && defined(__AVX512VL__)
    g8 = R / 8;
#pragma omp parallel for schedule(static)
    for (size_t g = 0; g < g8; g++) {
        const size_t i0 = g * 8;
        float rsv[8], sv[8];
        for (int r = 0; r < 8; r++) {
            rsv[r] = rs ? rs[i0 + r] : 1.0f;
            sv[r] = bs[(i0 + r) / br];
        }
        const __m256 vrs = _mm256_loadu_ps(rsv), vs = _mm256_loadu_ps(sv);
        const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), infb = _mm256_set1_epi32(0x7F800000);
        __m512d s2 = _mm512_setzero_pd(), s4 = _mm512_setzero_pd();
        const float *xr = x + i0 * C;
#define MOM_COL(col)                                                                                 \
    do {                                                                                             \
        const __m256 x0 = _mm256_mul_ps((col), vrs);                                                 \
        const __m256i vb = _mm256_and_si256(_mm256_castps_si256(_mm256_mul_ps(x0, vs)), absm);       \
        const __mmask8 ok = _mm256_cmple_epu32_mask(vb, infb);                                       \
        const __m512d d = _mm512_cvtps_pd(x0), d2 = _mm512_mul_pd(d, d);                             \
        s2 = _mm512_mask_add_pd(s2, ok, s2, d2);                                                     \
        s4 = _mm512_mask_add_pd(s4, ok, s4, _mm512_mul_pd(d2, d2));                                  \
    } while (0)
        size_t c = 0;
        for (; c + 8 <= C; c += 8) {
            __m256 a[8];
            for (int r = 0; r < 8; r++)
                a[r] = _mm256_loadu_ps(xr + (size_t)r * C + c);
            const __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
            const __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
            const __m256 t4 = _mm256_unpacklo_ps(a[4], a[5]), t5 = _mm256_unpackhi_ps(a[4], a[5]);
            const __m256 t6 = _mm256_unpacklo_ps(a[6], a[7]), t7 = _mm256_unpackhi_ps(a[6], a[7]);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            MOM_COL(_mm256_permute2f128_ps(u0, u4, 0x20)); /* column c: lane r = row r */
            MOM_COL(_mm256_permute2f128_ps(u1, u5, 0x20));
            MOM_COL(_mm256_permute2f128_ps(u2, u6, 0x20));
            MOM_COL(_mm256_permute2f128_ps(u3, u7, 0x20));
            MOM_COL(_mm256_permute2f128_ps(u0, u4, 0x31));
            MOM_COL(_mm256_permute2f128_ps(u1, u5, 0x31));
            MOM_COL(_mm256_permute2f128_ps(u2, u6, 0x31));
            MOM_COL(_mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; c < C; c++) {
            float v[8];
            for (int r = 0; r < 8; r++)
                v[r] = xr[(size_t)r * C + c];
            MOM_COL(_mm256_loadu_ps(v));
        }
#undef MOM_COL
        double o2[8], o4[8];
        _mm512_storeu_pd(o2, s2);
        _mm512_storeu_pd(o4, s4);
        for (int r = 0; r < 8; r++) {
            rm[2 * (i0 + r)] = o2[r];
            rm[2 * (i0 + r) + 1] = o4[r];
        }
    }
    g8 *= 8;
#endif
    for (size_t i = g8; i < R; i++)
        moments_row(rm + 2 * i, x + i * C, C, rs ? rs[i] : 1.0f, bs[i / br]);
}

void fl_recipe_row_moments(double *rm, const float *x, size_t R, size_t C, const float *rs, const float *s)
{
    moments_rows(rm, x, R, C, rs, s, 1);
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
            const uint32_t code = fl_mx_scale_code((fl_format)site->fmt, bam[b], FL_MX_CEIL);
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
        g->one = fl_delayed_scale(site->dl);
        g->one_inv = fl_delayed_scale_inv(site->dl);
        site->scale = g->one;
        site->amax_from = fl_recipe_delayed_amax_from(site->dl);
        if (site->dl_bwd)
            site->scale_bwd = fl_delayed_scale(site->dl_bwd);
    }
}

/* What a cast quantises to and how the slow loop counts its overflows; sr: stochastic rounding
   (e5m2 with a per-tensor scale) from the stream key; g240: fmt is e4m3, cast as Gaudi2's e4m3. */
typedef struct {
    int fmt, nosat, ties_ovf, sr, g240;
    float fmax, bound;
    uint64_t key;
} cast_format;

/* What the quantisation loop counted, and the amax of the tensor entering the cast. */
typedef struct {
    fq_cnt tot;
    float amax;
} cast_counts;

/* Quantize y = cast(x), counting; moments per row into rm (2R doubles, NULL without moments), the
   fixed order of the final sum. */
static cast_counts cast_quantize(const fl_recipe *r, float *y, const float *x, size_t R, size_t C,
                                 const cast_grid *g, const cast_smoothing *sm, const cast_format *cf, double *rm)
{
    const size_t n = R * C, br = g->br, nbr = g->nbr, nbc = g->nbc;
    const int cshift = g->cshift, fmt = cf->fmt, nosat = cf->nosat, mom = rm != NULL, g240 = cf->g240;
    static const fl_format_desc gaudi2 = FL_DESC_E4M3_GAUDI2;
    const fl_format_desc *gd = g240 ? &gaudi2 : NULL;
    const float *bs = g->bs, *bsi = g->bsi;
    const float *col_s = sm->col_s, *col_si = sm->col_si, *row_s = sm->row_s, *row_si = sm->row_si;
    fq_cnt tot = { 0 };
    float amax = 0.0f;
    const size_t span = g->bc < C ? g->bc : C;
    const int fast = !cf->sr && !r->slow_cast && (fmt == FL_FMT_E4M3 || fmt == FL_FMT_BF16 || (fmt == FL_FMT_E5M2 && !col_s));
    /* moments by groups of rows after the cast (moments_rows) where a row has one scale and no
       column smoothing; else inside the row loop */
    const int gmom = mom && fast && !col_s && nbc == 1;
    if (fast && (!mom || gmom) && !row_s && !col_s && nbr * nbc == 1) {
        /* One scale: the tensor is one span, cut into contiguous chunks (one per thread) instead of
           rows.  Counts and the amax do not depend on the cut. */
        const int nt = omp_get_max_threads();
#pragma omp parallel for schedule(static) reduction(fq_add : tot) reduction(max : amax)
        for (int ch = 0; ch < nt; ch++) {
            const size_t i0 = n * (size_t)ch / (size_t)nt, i1 = n * (size_t)(ch + 1) / (size_t)nt;
            fq_cnt k = { 0 };
            if (i1 > i0) {
                const float a = fq_span_fast(y + i0, x + i0, i1 - i0, NULL, NULL, 1.0f, 1.0f, bs[0], bsi[0],
                                             (fl_format)fmt, g240, nosat, &k, NULL, NULL);
                if (a > amax)
                    amax = a;
            }
            fq_cnt_add(&tot, &k);
        }
    } else {
        const float fmax = cf->fmax, bound = cf->bound;
        const int ties_ovf = cf->ties_ovf;
#pragma omp parallel for schedule(static) reduction(fq_add : tot) reduction(max : amax)
        for (size_t i = 0; i < R; i++) {
            fq_cnt k = { 0 };
            const float *srow = bs + (i / br) * nbc, *sirow = bsi + (i / br) * nbc;
            double m2 = 0.0, m4 = 0.0;
            float am = 0.0f;
            const float rs = row_s ? row_s[i] : 1.0f, rsi = row_si ? row_si[i] : 1.0f;
            for (size_t c0 = 0; c0 < C; c0 += span) {
                const size_t nn = C - c0 < span ? C - c0 : span;
                const size_t b = (nbr * nbc) > 1 ? (c0 >> cshift) : 0;
                const float a =
                    cf->sr ? fq_span_sr(y + i * C + c0, x + i * C + c0, nn, rs, rsi, srow[b], sirow[b], nosat, cf->key,
                                        (uint64_t)(i * C + c0), &k, mom ? &m2 : NULL, &m4)
                    : fast ? fq_span_fast(y + i * C + c0, x + i * C + c0, nn, col_s ? col_s + c0 : NULL,
                                        col_si ? col_si + c0 : NULL, rs, rsi, srow[b], sirow[b], (fl_format)fmt,
                                        g240, nosat, &k, mom && !gmom ? &m2 : NULL, &m4)
                         : fq_span(y + i * C + c0, x + i * C + c0, nn, col_s ? col_s + c0 : NULL,
                                   col_si ? col_si + c0 : NULL, rs, rsi, srow[b], sirow[b], (fl_format)fmt, gd, nosat,
                                   fmax, bound, ties_ovf, &k, mom ? &m2 : NULL, &m4);
                if (a > am)
                    am = a;
            }
            if (mom && !gmom) {
                rm[2 * i] = m2;
                rm[2 * i + 1] = m4;
            }
            if (am > amax)
                amax = am;
            fq_cnt_add(&tot, &k);
        }
    }
    if (gmom)
        moments_rows(rm, x, R, C, row_s, bs, br);
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

/* The clip mass of a per-tensor-scaled cast that saturated (recipe.h, fl_cast_stats.clip_mass): one
   sequential pass in double over x, the order fixed.  xv = x * rs * cs as the cast saw it, v = xv * s;
   beyond the largest finite value fmax the excess is |xv| - fmax / s, in x's units through the
   smoothing (the value rounds or saturates to fmax); where a non-saturating cast produced NaN/Inf
   (|v| beyond the RNE overflow boundary cf->bound, or at it when ties overflow) all of |x| is lost. */
static double clip_mass(const float *x, size_t R, size_t C, float s, const cast_format *cf, const cast_smoothing *sm)
{
    const double fmax = cf->fmax, bound = cf->bound;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < R; i++) {
        const float rs = sm->row_s ? sm->row_s[i] : 1.0f, rsi = sm->row_si ? sm->row_si[i] : 1.0f;
        for (size_t c = 0; c < C; c++) {
            const float x0 = x[i * C + c];
            if (!isfinite(x0))
                continue;
            const float cs = sm->col_s ? sm->col_s[c] : 1.0f, csi = sm->col_si ? sm->col_si[c] : 1.0f;
            const double ax = fabs((double)x0), av = fabs((double)(x0 * rs * cs * s));
            den += ax;
            if (cf->nosat && (av > bound || (cf->ties_ovf && av == bound)))
                num += ax;
            else if (av > fmax)
                num += (av - fmax) / s * csi * rsi;
        }
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
    if (!sm->row_s && !sm->col_s) { /* the common case: the maximum of the magnitudes' bit patterns
                                       (ordered like the values; NaN patterns excluded), vectorised */
        const size_t n = R * C;
        const int nt = omp_get_max_threads();
        uint32_t mb = 0;
#pragma omp parallel for schedule(static) reduction(max : mb)
        for (int ch = 0; ch < nt; ch++) {
            size_t i = n * (size_t)ch / (size_t)nt;
            const size_t i1 = n * (size_t)(ch + 1) / (size_t)nt;
            uint32_t m = 0;
#if defined(__AVX512F__)
            const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
            __m512i vm = _mm512_setzero_si512();
            for (; i + 16 <= i1; i += 16) {
                const __m512i b = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
                vm = _mm512_mask_max_epu32(vm, _mm512_cmple_epu32_mask(b, inf), vm, b);
            }
            m = (uint32_t)_mm512_reduce_max_epu32(vm);
#endif
            for (; i < i1; i++) {
                const uint32_t b = fl_f32_bits(x[i]) & 0x7FFFFFFFu, v = b <= 0x7F800000u ? b : 0u;
                m = v > m ? v : m;
            }
            mb = m > mb ? m : mb;
        }
        return fl_f32_from_bits(mb);
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
    /* paper-gaudi2's backward copy: e5m2 with its own scale from the same amax, round-to-nearest */
    const int bwd = !hp && transposed && site->gaudi2;
    const cast_smoothing smo = smooth_scales(sm, x, R, C);
    cast_grid g;
    cast_grid_init(&g, scaling, site->role == FL_ROLE_W, transposed, R, C);
    cast_scales(r, site, scaling, &g, x, R, C, &smo, bwd);

    cast_format cf;
    cf.fmt = hp ? FL_FMT_BF16 : bwd ? FL_FMT_E5M2 : (int)site->fmt;
    cf.g240 = !hp && !bwd && site->gaudi2;
    cf.nosat = (int)r->cfg.nosat && cf.fmt != FL_FMT_BF16 && !cf.g240; /* paper-gaudi2 saturates (r->cfg) */
    cf.fmax = cf.g240 ? FL_GAUDI2_E4M3_MAX : (float)fl_format_max((fl_format)cf.fmt);
    if (cf.g240) { /* 0x43780000 is 248.0f: 240 + half its ulp of 16; the tie goes to 256, i.e. overflows */
        cf.bound = fl_f32_from_bits(0x43780000u);
        cf.ties_ovf = 1;
    } else {
        cf.bound = (float)fl_format_rne_boundary((fl_format)cf.fmt, &cf.ties_ovf);
    }
    cf.sr = !hp && r->cfg.grad_sr && site->role == FL_ROLE_GOUT && cf.fmt == FL_FMT_E5M2;
    cf.key = fl_recipe_sr_key(r, si_);
    const int mom = r->moments && !transposed;
    double *rm = mom ? calloc(2 * (R ? R : 1), sizeof *rm) : NULL;
    /* The clip mass reads x before the cast (y may be x), when the cast will saturate: a per-tensor
       scale s saturates iff amax(xv) * s > fmax; a current scale's amax is known, a delayed one's
       takes a pass over x. */
    if (!transposed) {
        if (scaling == FL_SCALING_DELAYED || scaling == FL_SCALING_TENSOR) {
            const float am = scaling == FL_SCALING_TENSOR ? site->amax_from : xv_amax(x, R, C, &smo);
            if (am * g.one > cf.fmax)
                site->st.clip_mass = clip_mass(x, R, C, g.one, &cf, &smo);
        } else if (scaling != FL_SCALING_NONE) {
            site->st.clip_mass = NAN;
        }
    }
    const cast_counts k = cast_quantize(r, y, x, R, C, &g, &smo, &cf, rm);
    cast_grid_free(&g);
    cast_record_stats(site, &k, R, C, transposed, rm);
    free(rm);
    if (site->scaling == FL_SCALING_DELAYED && record) {
        fl_delayed_record(site->dl, k.amax);
        if (site->dl_bwd)
            fl_delayed_record(site->dl_bwd, k.amax);
    }
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
