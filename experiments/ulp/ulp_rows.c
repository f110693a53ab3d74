/* ulp_rows.c — `fp8lab ulp --impl NAME` on row-wise implementations (PolyNorm): seeded rows, their
 * generator and the row-by-row judging (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- row-wise sweeps: seeded rows ------------------------------------------------------------------
 *
 * A row-wise twin (PolyNorm) is run on rows generated from (seed, distribution, row length, row
 * number) alone, so that any row can be regenerated on its own (--range R:R+1 re-checks row R) and
 * the report does not depend on threads, blocks or ranks.  Every random number is the splitmix64
 * finalizer chained over (seed, stream, row, column, draw); uniforms are (top 53 bits + 1/2) 2^-53;
 * normals are Box-Muller (libm log, cos, sqrt) on draws 2k, 2k+1.  Values are rounded once (RNE) into
 * the input's format, saturating for 8-bit formats.  Distributions (experiments/ulp/ULP.md section 6):
 *   normal  x = N(0,1);  dy = N(0,1) for a VJP
 *   heavy   x = Student-t with 3 degrees of freedom, N0 / sqrt((N1^2 + N2^2 + N3^2) / 3), times 100 in
 *           the outlier channels: column c is one when bits(seed, channel stream, 0, c, 0) % 512 == 0
 *           (the same columns in every row, ~8 of 4096);  dy = N(0,1)
 *   cancel  forward: x = N(0,1), then every column with plant bits % 8 == 0 is set to
 *           x* (1 + (2U - 1) 2^-6), x* < 0 the point where the row's terms a_i x^i / D_i cancel most
 *           (the least |sum| / sum|.| over x = -2^(-6 + k/256), k = 0..3584), D_i from the row as it
 *           stands; four rounds (planting moves the D_i); then two tuning columns (the first two
 *           unplanted) are set so that the row's zero lands on a representable b near x* (below);
 *           VJP: x = N(0,1), dy = N(0,1), then in the planted columns dy_k = the value that makes
 *           dx_k = 0 given the row's P_i = sum_j dy_j x_j^i (three rounds); then dy of one tuning
 *           column brings dx of the first planted column nearest 0 (below). */

const char *const ulp_dist_names[DIST_COUNT] = { "normal", "heavy", "cancel" };

enum { RG_X = 1, RG_DY = 2, RG_CHANNEL = 3, RG_PLANT = 4 };

#define RG_BLOCK_ROWS 64

static uint64_t rg_mix(uint64_t z) { return fl_mix64(z + FL_GOLDEN64); }

static uint64_t rg_bits(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t draw)
{
    uint64_t h = rg_mix(seed);
    h = rg_mix(h ^ stream);
    h = rg_mix(h ^ row);
    h = rg_mix(h ^ col);
    return rg_mix(h ^ draw);
}

static double rg_unif(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t draw)
{
    return fl_open01(rg_bits(seed, stream, row, col, draw));
}

static double rg_normal(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t k)
{
    const double u1 = rg_unif(seed, stream, row, col, 2 * k), u2 = rg_unif(seed, stream, row, col, 2 * k + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint32_t rg_encode(fl_format f, double v)
{
    return fl_encode_f64(f, v, FL_RND_NE, fl_format_get(f)->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE, 0);
}

static double rg_coef(const fl_ref_params *p, int i)
{
    return p->a_set >> i & 1 ? p->a[i] : i == 0 ? 0.0 : 1.0 / p->order;
}

static int rg_planted(const ulp_rowgen *g, uint64_t row, long c)
{
    return (rg_bits(g->seed, RG_PLANT, row, (uint64_t)c, 0) & 7) == 0;
}

/* D_i = sqrt(mean(x^(2i)) + eps), i = 1..order, in double from the row's encodings */
static void rg_norms(double *D, const ulp_rowgen *g, const uint32_t *x)
{
    const int r = g->p->order;
    double S[5] = { 0 };
    for (long c = 0; c < g->H; c++) {
        const double v = fl_decode(g->fmt[0], x[c]);
        double pw = 1;
        for (int i = 1; i <= r; i++) {
            pw *= v;
            S[i] += pw * pw;
        }
    }
    for (int i = 1; i <= r; i++)
        D[i] = sqrt(S[i] / (double)g->H + g->p->eps);
}

static double rg_cancel_point(const ulp_rowgen *g, const double *D)
{
    const int r = g->p->order;
    double best = INFINITY, bx = -1;
    for (int k = 0; k <= 14 * 256; k++) {
        const double x = -exp2(-6.0 + k / 256.0);
        const double a0 = rg_coef(g->p, 0);
        double s = a0, m = fabs(a0), xi = 1;
        for (int i = 1; i <= r; i++) {
            xi *= x;
            const double t = rg_coef(g->p, i) * xi / D[i];
            s += t;
            m += fabs(t);
        }
        if (m > 0 && fabs(s) / m < best) {
            best = fabs(s) / m;
            bx = x;
        }
    }
    return bx;
}

/* x[0..H): N(0,1); heavy: Student-t with 3 degrees of freedom, x100 in the outlier channels. */
static void rg_draw_x(const ulp_rowgen *g, uint64_t row, uint32_t *x)
{
    const long H = g->H;
    for (long c = 0; c < H; c++) {
        double v = rg_normal(g->seed, RG_X, row, (uint64_t)c, 0);
        if (g->dist == DIST_HEAVY) {
            const double n1 = rg_normal(g->seed, RG_X, row, (uint64_t)c, 1);
            const double n2 = rg_normal(g->seed, RG_X, row, (uint64_t)c, 2);
            const double n3 = rg_normal(g->seed, RG_X, row, (uint64_t)c, 3);
            v /= sqrt((n1 * n1 + n2 * n2 + n3 * n3) / 3.0);
            if (rg_bits(g->seed, RG_CHANNEL, 0, (uint64_t)c, 0) % 512 == 0)
                v *= 100.0;
        }
        x[c] = rg_encode(g->fmt[0], v);
    }
}

/* cancel, forward: the planted columns set near x* (four rounds: planting moves the D_i). */
static void rg_plant_x(const ulp_rowgen *g, uint64_t row, uint32_t *x)
{
    const long H = g->H;
    double D[5] = { 0 };
    for (int round = 0; round < 4; round++) {
        rg_norms(D, g, x);
        const double xs = rg_cancel_point(g, D);
        for (long c = 0; c < H; c++)
            if (rg_planted(g, row, c))
                x[c] = rg_encode(g->fmt[0], xs * (1.0 + (2.0 * rg_unif(g->seed, RG_PLANT, row, (uint64_t)c, 1) - 1.0) * 0x1p-6));
    }
}

/* cancel, forward, tuning: the first two unplanted columns, one after the other, take the value of
   the input format in [-4, 4] that brings the output nearest 0 (relative to its terms) at b, b one of
   the five values of the input format nearest x* (the first column chooses b too): the row's zero
   moves onto b, so the planted elements equal to b cancel to ~2^-20 of their terms or better */
static void rg_tune_x(const ulp_rowgen *g, uint64_t row, uint32_t *x)
{
    const long H = g->H;
    const int r = g->p->order;
    double D[5] = { 0 };
    rg_norms(D, g, x);
    const uint32_t c0 = rg_encode(g->fmt[0], rg_cancel_point(g, D));
    const uint32_t ncodes = 1u << fl_format_storage_bits(g->fmt[0]);
    double b = fl_decode(g->fmt[0], c0);
    for (long c = 0, tuned = 0; c < H && tuned < 2; c++) {
        if (rg_planted(g, row, c))
            continue;
        double S[5] = { 0 };
        for (long q = 0; q < H; q++) {
            const double v = q == c ? 0.0 : fl_decode(g->fmt[0], x[q]);
            double pw = 1;
            for (int i = 1; i <= r; i++) {
                pw *= v;
                S[i] += pw * pw;
            }
        }
        double best = INFINITY, best_b = b;
        for (int db = tuned ? 0 : -2; db <= (tuned ? 0 : 2); db++) {
            const double bb = tuned ? b : fl_decode(g->fmt[0], c0 + (uint32_t)db);
            if (!(bb < 0))
                continue;
            for (uint32_t code = 0; code < ncodes; code++) {
                const double v = fl_decode(g->fmt[0], code);
                if (!(fabs(v) <= 4.0))
                    continue;
                double y = rg_coef(g->p, 0), m = fabs(y), pw = 1, bi = 1;
                for (int i = 1; i <= r; i++) {
                    pw *= v;
                    bi *= bb;
                    const double t = rg_coef(g->p, i) * bi / sqrt((S[i] + pw * pw) / (double)H + g->p->eps);
                    y += t;
                    m += fabs(t);
                }
                if (fabs(y) / m < best) {
                    best = fabs(y) / m;
                    best_b = bb;
                    x[c] = code;
                }
            }
        }
        b = best_b;
        tuned++;
    }
}

/* cancel, VJP: in the planted columns, dy_k = the value that makes dx_k = 0 given the row's
   P_i = sum_j dy_j x_j^i (three rounds); D as rg_norms gives it. */
static void rg_plant_dy(const ulp_rowgen *g, uint64_t row, const uint32_t *x, uint32_t *dy, const double *D)
{
    const long H = g->H;
    const int r = g->p->order;
    for (int round = 0; round < 3; round++) {
        double P[5] = { 0 };
        for (long c = 0; c < H; c++) {
            const double xv = fl_decode(g->fmt[0], x[c]), d = fl_decode(g->fmt[1], dy[c]);
            double pw = 1;
            for (int i = 1; i <= r; i++) {
                pw *= xv;
                P[i] += d * pw;
            }
        }
        for (long c = 0; c < H; c++) {
            if (!rg_planted(g, row, c))
                continue;
            const double xv = fl_decode(g->fmt[0], x[c]);
            double num = 0, den = 0, pw = 1; /* pw = x^(i-1) */
            for (int i = 1; i <= r; i++) {
                const double a = rg_coef(g->p, i) * i;
                den += a * pw / D[i];
                num += a * pw * pw * xv * P[i] / ((double)H * D[i] * D[i] * D[i]);
                pw *= xv;
            }
            const double q = num / den;
            if (den != 0 && isfinite(q))
                dy[c] = rg_encode(g->fmt[1], q);
        }
    }
}

/* cancel, VJP, tuning: the first planted column k, and the first unplanted column t with |x_t| >= 1:
   dy_t takes the value of dy's format in [-4, 4] that brings dx_k nearest 0 (dx_k is affine in dy_t) */
static void rg_tune_dy(const ulp_rowgen *g, uint64_t row, const uint32_t *x, uint32_t *dy, const double *D)
{
    const long H = g->H;
    const int r = g->p->order;
    long k = 0, t = 0;
    while (k < H && !rg_planted(g, row, k))
        k++;
    while (t < H && (rg_planted(g, row, t) || !(fabs(fl_decode(g->fmt[0], x[t])) >= 1.0)))
        t++;
    if (k == H || t == H)
        return;
    double P[5] = { 0 };
    for (long c = 0; c < H; c++) {
        if (c == t)
            continue;
        const double xv = fl_decode(g->fmt[0], x[c]), d = fl_decode(g->fmt[1], dy[c]);
        double pw = 1;
        for (int i = 1; i <= r; i++) {
            pw *= xv;
            P[i] += d * pw;
        }
    }
    const double xk = fl_decode(g->fmt[0], x[k]), xt = fl_decode(g->fmt[0], x[t]), dk = fl_decode(g->fmt[1], dy[k]);
    const uint32_t ncodes = 1u << fl_format_storage_bits(g->fmt[1]);
    double best = INFINITY;
    for (uint32_t code = 0; code < ncodes; code++) {
        const double v = fl_decode(g->fmt[1], code);
        if (!(fabs(v) <= 4.0))
            continue;
        double dx = 0, pk = 1, pt = 1; /* pk = xk^(i-1), pt = xt^i */
        for (int i = 1; i <= r; i++) {
            pt *= xt;
            const double a = rg_coef(g->p, i) * i;
            dx += a * pk * dk / D[i] - a * pk * pk * xk * (P[i] + v * pt) / ((double)H * D[i] * D[i] * D[i]);
            pk *= xk;
        }
        if (fabs(dx) < best) {
            best = fabs(dx);
            dy[t] = code;
        }
    }
}

/* Row number `row`: x[0..H) and, for a VJP, dy[0..H). */
static void rg_row(const ulp_rowgen *g, uint64_t row, uint32_t *x, uint32_t *dy)
{
    rg_draw_x(g, row, x);
    if (g->dist == DIST_CANCEL && g->n_inputs == 1) {
        rg_plant_x(g, row, x);
        rg_tune_x(g, row, x);
    }
    if (g->n_inputs < 2)
        return;
    for (long c = 0; c < g->H; c++)
        dy[c] = rg_encode(g->fmt[1], rg_normal(g->seed, RG_DY, row, (uint64_t)c, 0));
    if (g->dist != DIST_CANCEL)
        return;
    double D[5] = { 0 };
    rg_norms(D, g, x);
    rg_plant_dy(g, row, x, dy, D);
    rg_tune_dy(g, row, x, dy, D);
}

/* Rows lo/H .. hi/H of the seeded stream through the twin, every output judged with MPFR.  Blocks of
   RG_BLOCK_ROWS rows: generated and run one row per iteration, then judged element by element
   (threads load the row they need into their MPFR copy).  0, or -1 with err (--save). */
int ulp_run_rows(ulp_tctx *ctxs, const ulp_job *j, const ulp_sweep *s, const ulp_rowgen *g, ulp_progress *pg,
                 ulp_row_save *sv, char *err, size_t errlen)
{
    const long H = j->row_len;
    const int ni = s->impl->n_inputs;
    const uint64_t r_lo = s->lo / (uint64_t)H, r_hi = s->hi / (uint64_t)H;
    const size_t blk = (size_t)RG_BLOCK_ROWS * (size_t)H;
    uint32_t *in[3] = { malloc(blk * 4), malloc(blk * 4), NULL };
    uint32_t *out = malloc(blk * 4);
    void *pack = malloc(blk * 4);
    int rc = 0;
    for (uint64_t b0 = r_lo; b0 < r_hi && rc == 0; b0 += RG_BLOCK_ROWS) {
        const uint64_t nr = r_hi - b0 < RG_BLOCK_ROWS ? r_hi - b0 : RG_BLOCK_ROWS;
#pragma omp parallel for schedule(dynamic, 1)
        for (uint64_t r = 0; r < nr; r++) {
            uint32_t *x = in[0] + r * (uint64_t)H, *dy = in[1] + r * (uint64_t)H;
            rg_row(g, b0 + r, x, dy);
            const uint32_t *rin[3] = { x, dy, NULL };
            s->impl->run(out + r * (uint64_t)H, rin, (size_t)H, (size_t)H);
        }
        const uint64_t n = nr * (uint64_t)H;
#pragma omp parallel
        {
            ulp_tctx *c = &ctxs[omp_get_thread_num()];
            mpfr_srcptr *rowp[FL_MAX_INPUTS] = { NULL };
            for (int k = 0; k < ni; k++) {
                rowp[k] = malloc((size_t)H * sizeof(mpfr_srcptr));
                for (long e = 0; e < H; e++)
                    rowp[k][e] = c->rows[k][e];
            }
            uint64_t loaded = UINT64_MAX;
#pragma omp for schedule(dynamic, 16)
            for (uint64_t i = 0; i < n; i++) {
                const uint64_t r = i / (uint64_t)H;
                const long e = (long)(i % (uint64_t)H);
                if (r != loaded) {
                    for (int k = 0; k < ni; k++)
                        for (long q = 0; q < H; q++)
                            ulp_set_input(c->rows[k][q], j->in_kind[k], in[k][r * (uint64_t)H + (uint64_t)q]);
                    loaded = r;
                }
                fl_ulp_verdict v;
                if (ulp_judge_mpfr(&v, c, j, NULL, (mpfr_srcptr const *const *)rowp, e, out[i]) != 0) {
                    c->n_fail++;
                    continue;
                }
                c->n_mpfr++;
                fl_ulp_case cs = ulp_case_of(&v, b0 * (uint64_t)H + i, out[i]);
                for (int k = 0; k < ni; k++)
                    cs.in[k] = in[k][i];
                fl_ulp_report_add(&c->rep, &cs);
                ulp_progress_tick(pg, 1);
            }
            for (int k = 0; k < ni; k++)
                free(rowp[k]);
        }
        for (int f = 0; sv && f < 3 && rc == 0; f++) {
            if (!sv->w[f])
                continue;
            const uint32_t *src = f == 2 ? out : in[f];
            const fl_format fm = f == 2 ? j->fmt : (fl_format)j->in_kind[f];
            for (uint64_t i = 0; i < n; i++)
                if (fl_format_storage_bits(fm) <= 8)
                    ((uint8_t *)pack)[i] = (uint8_t)src[i];
                else if (fl_format_storage_bits(fm) <= 16)
                    ((uint16_t *)pack)[i] = (uint16_t)src[i];
                else
                    ((uint32_t *)pack)[i] = src[i];
            rc = fl_npy_writer_write(sv->w[f], pack, (size_t)n, err, errlen) ? -1 : 0;
        }
    }
    free(in[0]);
    free(in[1]);
    free(out);
    free(pack);
    return rc;
}
