/* train_step.c — the CPU twins of the training-step kernels (train_step.h). */
#include "train_step.h"

#include "fl_format.h"
#include "scaling.h" /* fl_fmax_f32 */

#include <math.h>
#include <mpfr.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__)
#include <immintrin.h>
#endif

/* x[i] = sqrt(x[i]), i < n.  The compiler keeps sqrtf a scalar call (errno), so the loop would not
   vectorise; the SSE/AVX square root is IEEE's correctly rounded one, like sqrtf and the device's
   __fsqrt_rn, with the same NaN results. */
static void sqrt_block(float *x, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_sqrt_ps(_mm512_loadu_ps(x + i)));
#elif defined(__AVX__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#elif defined(__SSE__)
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++)
        x[i] = fl_sqrtf(x[i]);
}

#define ADAM_BLOCK 256

int fl_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h)
{
    const fl_adamw_hp hp = *h;
#pragma omp parallel for schedule(static) if (n >= 4 * ADAM_BLOCK)
    for (size_t i0 = 0; i0 < n; i0 += ADAM_BLOCK) { /* the update in blocks, around sqrt_block */
        const size_t nb = n - i0 < ADAM_BLOCK ? n - i0 : ADAM_BLOCK;
        float mh[ADAM_BLOCK], sv[ADAM_BLOCK];
        for (size_t j = 0; j < nb; j++)
            sv[j] = fl_adamw_moments(&m[i0 + j], &v[i0 + j], g[i0 + j], &hp, &mh[j]);
        sqrt_block(sv, nb);
        for (size_t j = 0; j < nb; j++)
            p[i0 + j] = fl_adamw_param(p[i0 + j], mh[j], sv[j], &hp);
    }
    return 0;
}

int fl_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps)
{
    const float fc = (float)C;
#pragma omp parallel for schedule(static) if (N * C >= 65536)
    for (size_t t = 0; t < N; t++) {
        const float *xr = x + t * C;
        float ss = 0.0f;
        for (size_t c = 0; c < C; c++)
            ss += xr[c] * xr[c];
        const float r = fl_rms_r(ss, fc, eps);
        rstd[t] = r;
        for (size_t c = 0; c < C; c++)
            y[t * C + c] = fl_rms_y(xr[c], r, gain[c]);
    }
    return 0;
}

int fl_rmsnorm_bwd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd, const float *gain,
                   size_t N, size_t C, int accumulate)
{
    const float fc = (float)C;
#pragma omp parallel for schedule(static) if (N * C >= 65536)
    for (size_t t = 0; t < N; t++) {
        const float *xr = x + t * C, *dyr = dy + t * C;
        float d = 0.0f;
        for (size_t c = 0; c < C; c++)
            d += dyr[c] * gain[c] * xr[c];
        const float r = rstd[t], k = fl_rms_k(r, d, fc);
        for (size_t c = 0; c < C; c++) {
            const float v = fl_rms_dx(r, dyr[c], gain[c], k, xr[c]);
            dx[t * C + c] = accumulate ? dx[t * C + c] + v : v;
        }
    }
#pragma omp parallel for schedule(static) if (N * C >= 65536)
    for (size_t c = 0; c < C; c++) {
        float s = 0.0f;
        for (size_t t = 0; t < N; t++)
            s += dy[t * C + c] * x[t * C + c] * rstd[t];
        dgain[c] += s;
    }
    return 0;
}

/* fl_cast_fp8 (codes) and fl_cast_fq / fl_cast_fq_smooth (y: the fake-quantised values) share this loop;
   sm (NULL: none) smooths element i of the (n / C, C) tensor by its row's or column's scale, as cast.c's
   reference loop does. */
static void cast_loop(uint8_t *codes, float *y, float *amax, fl_cast_counts *k, const float *x, size_t n, float s,
                      float si, const fl_cast_fmt *f, uint64_t off, const fl_cast_smooth *sm)
{
    fl_cast_limits l;
    fl_cast_limits_of(&l, f);
    fl_cast_counts kk = { 0 };
    uint32_t am = fl_f32_bits(*amax) & 0x7FFFFFFFu;
#pragma omp parallel for schedule(static) reduction(fl_cnt_add : kk) reduction(max : am) if (n >= 65536)
    for (size_t i = 0; i < n; i++) {
        uint32_t fl;
        const float xi = sm ? fl_smooth_in(sm, x[i], i) : x[i];
        const uint32_t code = fl_cast_elem(&l.d, xi, xi * s, f->sr, f->sr ? fl_sr_bits(f->key, off + i) : 0u, l.ovf,
                                           l.fmax, l.bound, l.ties_ovf, &fl);
        if (codes)
            codes[i] = (uint8_t)code;
        else
            y[i] = sm ? fl_smooth_out(sm, fl_decode_f32(&l.d, code) * si, i) : fl_decode_f32(&l.d, code) * si;
        fl_cast_counts_flags(&kk, fl);
        const uint32_t a = fl_f32_bits(xi) & 0x7FFFFFFFu; /* non-negative floats order as their bits */
        if (!(fl & FL_CE_NAN_IN) && a > am)
            am = a;
    }
    *amax = fl_f32_from_bits(am);
    fl_cast_counts_add(k, &kk);
}

int fl_cast_fp8(uint8_t *codes, float *amax, fl_cast_counts *k, const float *x, size_t n, float s, const fl_cast_fmt *f,
                uint64_t off)
{
    if (f->fmt != FL_FMT_E4M3 && f->fmt != FL_FMT_E5M2) {
        fprintf(stderr, "fl_cast_fp8: %s is not an FP8 format\n", fl_format_name(f->fmt));
        return -1;
    }
    cast_loop(codes, NULL, amax, k, x, n, s, 1.0f, f, off, NULL);
    return 0;
}

int fl_cast_fq(float *y, float *amax, fl_cast_counts *k, const float *x, size_t n, float s, float si,
               const fl_cast_fmt *f, uint64_t off)
{
    if (f->fmt != FL_FMT_E4M3 && f->fmt != FL_FMT_E5M2 && f->fmt != FL_FMT_BF16) {
        fprintf(stderr, "fl_cast_fq: %s is not e4m3, e5m2 or bf16\n", fl_format_name(f->fmt));
        return -1;
    }
    cast_loop(NULL, y, amax, k, x, n, s, si, f, off, NULL);
    return 0;
}

int fl_cast_fq_smooth(float *y, float *amax, fl_cast_counts *k, const float *x, size_t n, float s, float si,
                      const fl_cast_fmt *f, uint64_t off, const fl_cast_smooth *sm)
{
    if (f->fmt != FL_FMT_E4M3 && f->fmt != FL_FMT_E5M2 && f->fmt != FL_FMT_BF16) {
        fprintf(stderr, "fl_cast_fq_smooth: %s is not e4m3, e5m2 or bf16\n", fl_format_name(f->fmt));
        return -1;
    }
    cast_loop(NULL, y, amax, k, x, n, s, si, f, off, sm);
    return 0;
}

float fl_smooth_scales(float *sc, float *sc_inv, const float *x, size_t R, size_t C, int axis)
{
    const size_t m = axis ? R : C;
    for (size_t j = 0; j < m; j++)
        sc[j] = 0.0f;
    for (size_t i = 0; i < R; i++) /* max is order-independent */
        for (size_t c = 0; c < C; c++) {
            float *a = &sc[axis ? i : c];
            *a = fl_fmax_f32(*a, fabsf(x[i * C + c]));
        }
    float am = 0.0f; /* the largest |x s| over the non-NaN x: each line's amax times its scale (monotone) */
    for (size_t j = 0; j < m; j++) {
        const float a = sc[j];
        sc[j] = fl_smooth_scale_f32(a);
        sc_inv[j] = 1.0f / sc[j];
        am = fl_fmax_f32(am, a * sc[j]);
    }
    return am;
}

int fl_embed_fwd(float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T, size_t C)
{
#pragma omp parallel for schedule(static) if (N * C >= 65536)
    for (size_t i = 0; i < N; i++) {
        const float *e = wte + (size_t)tok[i] * C, *pe = wpe + (i % T) * C;
        for (size_t k = 0; k < C; k++)
            x[i * C + k] = e[k] + pe[k];
    }
    return 0;
}

int fl_embed_bwd(float *gwte, float *gwpe, const float *dx, const int *tok, size_t N, size_t T, size_t C)
{
    /* blocks of 16 channels split between threads, each walks the rows in order */
#pragma omp parallel for schedule(static)
    for (size_t k0 = 0; k0 < C; k0 += 16) {
        const size_t k1 = C - k0 < 16 ? C : k0 + 16;
        for (size_t i = 0; i < N; i++) {
            float *gw = gwte + (size_t)tok[i] * C, *gp = gwpe + (i % T) * C;
            const float *d = dx + i * C;
            for (size_t k = k0; k < k1; k++) {
                gw[k] += d[k];
                gp[k] += d[k];
            }
        }
    }
    return 0;
}

int fl_embed_index(int *toks, int *starts, int *rows, size_t *ntok, const int *tok, size_t N, uint32_t V)
{
    size_t *count = calloc((size_t)V + 1, sizeof *count);
    if (!count) {
        fprintf(stderr, "fl_embed_index: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < N; i++) {
        if (tok[i] < 0 || (uint32_t)tok[i] >= V) {
            fprintf(stderr, "fl_embed_index: token %d at row %zu is not below the vocabulary %u\n", tok[i], i, V);
            free(count);
            return -1;
        }
        count[tok[i] + 1]++;
    }
    size_t n = 0;
    for (uint32_t v = 0; v < V; v++) { /* the distinct tokens in increasing order, their first row slots */
        if (count[v + 1]) {
            toks[n] = (int)v;
            starts[n++] = (int)count[v];
        }
        count[v + 1] += count[v];
    }
    starts[n] = (int)N;
    for (size_t i = 0; i < N; i++) /* stable: each token's rows in increasing order */
        rows[count[tok[i]]++] = (int)i;
    *ntok = n;
    free(count);
    return 0;
}

void fl_expf_table(uint64_t tab[32])
{
    mpfr_t t;
    mpfr_init2(t, 53);
    for (unsigned i = 0; i < 32; i++) {
        mpfr_set_ui(t, i, MPFR_RNDN);
        mpfr_div_2ui(t, t, 5, MPFR_RNDN); /* i/32, exact */
        mpfr_exp2(t, t, MPFR_RNDN);       /* correctly rounded to 53 bits */
        const double d = mpfr_get_d(t, MPFR_RNDN);
        uint64_t b;
        memcpy(&b, &d, sizeof b);
        tab[i] = b - ((uint64_t)i << 47);
    }
    mpfr_clear(t);
}

int fl_xent_fwd(float *z, double *tokloss, const int *tgt, size_t N, size_t V, const uint64_t *tab)
{
#pragma omp parallel for schedule(static) if (N * V >= 65536)
    for (size_t i = 0; i < N; i++) {
        float *zr = z + i * V;
        float m = -INFINITY;
        for (size_t v = 0; v < V; v++)
            m = zr[v] > m ? zr[v] : m;
        double sum = 0.0;
        for (size_t v = 0; v < V; v++) {
            zr[v] = fl_expf_glibc(zr[v] - m, tab);
            sum += zr[v];
        }
        const float inv = (float)(1.0 / sum), zt = zr[tgt[i]];
        for (size_t v = 0; v < V; v++)
            zr[v] *= inv;
        tokloss[i] = -(log((double)zt) - log(sum));
    }
    return 0;
}

int fl_xent_bwd(float *z, const int *tgt, size_t N, size_t V)
{
    const float invN = 1.0f / (float)N;
#pragma omp parallel for schedule(static) if (N * V >= 65536)
    for (size_t i = 0; i < N; i++) {
        float *zr = z + i * V;
        zr[tgt[i]] -= 1.0f;
        for (size_t v = 0; v < V; v++)
            zr[v] *= invN;
    }
    return 0;
}

int fl_attn_softmax_fwd(float *P, const float *S, size_t R, size_t T, float scale, const uint64_t *tab)
{
#pragma omp parallel for schedule(static) if (R * T >= 65536)
    for (size_t i = 0; i < R; i++) {
        const size_t n = i % T + 1;
        const float *s = S + i * T;
        float *p = P + i * T, m = -INFINITY;
        for (size_t j = 0; j < n; j++) {
            p[j] = scale != 1.0f ? s[j] * scale : s[j];
            m = p[j] > m ? p[j] : m;
        }
        float sum = 0.0f;
        for (size_t j = 0; j < n; j++) {
            p[j] = fl_expf_glibc(p[j] - m, tab);
            sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (size_t j = 0; j < n; j++)
            p[j] *= inv;
        for (size_t j = n; j < T; j++)
            p[j] = 0.0f;
    }
    return 0;
}

int fl_attn_softmax_bwd(float *dS, const float *P, const float *dP, size_t R, size_t T, float scale)
{
#pragma omp parallel for schedule(static) if (R * T >= 65536)
    for (size_t i = 0; i < R; i++) {
        const size_t n = i % T + 1;
        const float *p = P + i * T, *dp = dP + i * T;
        float d = 0.0f;
        for (size_t j = 0; j < n; j++)
            d += p[j] * dp[j];
        for (size_t j = 0; j < n; j++)
            dS[i * T + j] = p[j] * (dp[j] - d) * scale;
        for (size_t j = n; j < T; j++)
            dS[i * T + j] = 0.0f;
    }
    return 0;
}

void fl_transpose_u8(uint8_t *dst, const uint8_t *src, size_t R, size_t C)
{
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            dst[c * R + r] = src[r * C + c];
}

double fl_sumsq(const float *x, size_t n)
{
    double total = 0.0;
    for (size_t c = 0; c < fl_sumsq_chunks(n); c++) {
        double lane[FL_SUMSQ_LANES];
        const size_t c0 = c * FL_SUMSQ_CHUNK, c1 = n - c0 < FL_SUMSQ_CHUNK ? n : c0 + FL_SUMSQ_CHUNK;
        for (size_t t = 0; t < FL_SUMSQ_LANES; t++) {
            double a = 0.0;
            for (size_t i = c0 + t; i < c1; i += FL_SUMSQ_LANES)
                a += (double)x[i] * x[i];
            lane[t] = a;
        }
        for (size_t s = FL_SUMSQ_LANES / 2; s > 0; s /= 2)
            for (size_t t = 0; t < s; t++)
                lane[t] += lane[t + s];
        total += lane[0];
    }
    return total;
}

int fl_heads_copy(float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld, int to_heads)
{
    if (H * hs > ld) {
        fprintf(stderr, "fl_heads_copy: %zu heads of %zu do not fit in rows of %zu\n", H, hs, ld);
        return -1;
    }
#pragma omp parallel for schedule(static) if (B * T * H * hs > 1000000)
    for (size_t r = 0; r < B * T; r++) {
        const size_t b = r / T, t = r % T;
        for (size_t h = 0; h < H; h++) {
            float *d = to_heads ? dst + ((b * H + h) * T + t) * hs : dst + r * ld + h * hs;
            const float *x = to_heads ? src + r * ld + h * hs : src + ((b * H + h) * T + t) * hs;
            memcpy(d, x, hs * sizeof *d);
        }
    }
    return 0;
}

int fl_ffn_wsums(double *out, const float *W, size_t L, size_t F, size_t C, int gated)
{
    const size_t G = gated ? 2 : 1;
#pragma omp parallel for schedule(static) if (L * F * C > 1000000)
    for (size_t r = 0; r < L * F; r++) {
        const size_t l = r / F, i = r % F;
        const float *g = W + (l * G * F + i) * C, *u = gated ? g + F * C : NULL;
        double gg = 0, uu = 0, gu = 0;
        for (size_t k = 0; k < C; k++) {
            gg += (double)g[k] * g[k];
            if (u) {
                uu += (double)u[k] * u[k];
                gu += (double)g[k] * u[k];
            }
        }
        out[3 * r] = gg, out[3 * r + 1] = uu, out[3 * r + 2] = gu;
    }
    return 0;
}

int fl_amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C)
{
    uint32_t mb = 0;
    for (size_t i = 0; i < R * C; i++) {
        const uint32_t b = fl_f32_bits(x[i]) & 0x7FFFFFFFu;
        if (b <= 0x7F800000u && b > mb)
            mb = b;
    }
    *amax = fl_f32_from_bits(mb);
    if (!rms)
        return 0;
    double tot = 0.0;
    for (size_t r = 0; r < R; r++) {
        double s = 0.0;
        for (size_t c = 0; c < C; c++) {
            const float a = fabsf(x[r * C + c]);
            s += (double)a * a;
        }
        tot += s;
    }
    *rms = (float)sqrt(tot / (double)(R * C > 0 ? R * C : 1));
    return 0;
}
