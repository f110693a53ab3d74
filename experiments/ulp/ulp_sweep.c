/* ulp_sweep.c — `fp8lab ulp --impl NAME` on elementwise implementations: the input space (or a
 * sample of it) in chunks through the implementation, every output judged (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- the sweeps ----------------------------------------------------------------------------------- */

static uint64_t sample_index(uint64_t seed, uint64_t i, uint64_t space)
{
    const uint64_t z = fl_mix64(seed + (i + 1) * FL_GOLDEN64);
    return space ? (uint64_t)(((unsigned __int128)z * space) >> 64) : z;
}

#define CHUNK 4096

/* The inputs of elements e0 .. e0 + m - 1: index = in[0] in[1] ... as a mixed-radix number, the last
   input lowest (for a sample, the index is drawn from the element number). */
static void fill_inputs(uint32_t *const in[3], uint64_t *idx, const ulp_sweep *s, uint64_t e0, size_t m)
{
    const int ni = s->impl->n_inputs;
    if (ni == 1 && !s->sample && s->in_bits[0] == 32) { /* a binary32 sweep: the index is the input */
        for (size_t i = 0; i < m; i++) {
            idx[i] = e0 + i;
            in[0][i] = (uint32_t)(e0 + i);
        }
        return;
    }
    for (size_t i = 0; i < m; i++) {
        const uint64_t id = s->sample ? sample_index(s->seed, e0 + i, s->space) : e0 + i;
        idx[i] = id;
        uint64_t rest = id;
        for (int k = ni - 1; k >= 0; k--) {
            in[k][i] = (uint32_t)(rest & (s->in_bits[k] >= 64 ? ~0ull : (1ull << s->in_bits[k]) - 1));
            rest = s->in_bits[k] >= 64 ? 0 : rest >> s->in_bits[k];
        }
    }
}

/* The counts of a batch of judged outputs whose errors are finite and below 2^40 (the common case of
   fl_ulp_report_add: the sum fits one limb) and whose class matches, kept in registers and folded
   into the report once per chunk.  Cases enter the worst list through fl_ulp_report_offer_worst,
   built only when their error reaches the list's last entry; every other case (class mismatches
   among them, for their own list) goes through fl_ulp_report_add.  The report is the
   one fl_ulp_report_add would build case by case (its fields are sums and a top-10 under a total
   order, so the order of additions does not matter). */
typedef struct {
    uint64_t count, cr, faithful, sum; /* sum < 4096 * 2^60: no overflow within a chunk */
    uint64_t hist[FL_ULP_HIST_COUNT];
    double max;
} batch;

static void batch_fold(fl_ulp_report *r, const batch *b)
{
    r->count += b->count;
    r->correctly_rounded += b->cr;
    r->faithful += b->faithful;
    for (int i = 0; i < FL_ULP_HIST_COUNT; i++)
        r->hist[i] += b->hist[i];
    if (b->max > r->max_ulp)
        r->max_ulp = b->max;
    uint64_t add = b->sum;
    for (int i = 0; i < FL_ULP_SUM_LIMBS && add; i++) {
        const uint64_t t = r->sum[i] + add;
        add = t < add;
        r->sum[i] = t;
    }
}

/* The value of an input encoding as binary32 (every fl_format is a subset of binary32). */
static inline float input_f32(int kind, uint32_t b)
{
    return kind == FL_FMT_FP32 ? fl_f32_from_bits(b) : fl_decode((fl_format)kind, b);
}

/* One chunk of a sweep on the fast path (one or two inputs, fl_format encodings): judge_add's work
   without a case record per output. */
static void fast_chunk(ulp_tctx *c, const ulp_job *j, uint32_t *const in[3], const uint32_t *out, size_t m,
                       const uint64_t *idx, uint64_t e0, int sample)
{
    batch b;
    memset(&b, 0, sizeof b);
    const fl_fast_eval eval = j->fast->eval;
    const fl_fast_eval2 eval2 = j->fast->eval2;
    const int k0 = j->in_kind[0], k1 = j->in_kind[1];
    fl_ulp_report *r = &c->rep;
    for (size_t i = 0; i < m; i++) {
        fl_encl e;
        fl_ulp_verdict v;
        const uint32_t x0 = in[0][i], x1 = eval ? 0 : in[1][i];
        const int st = eval ? eval(&e, input_f32(k0, x0)) : eval2(&e, input_f32(k0, x0), input_f32(k1, x1));
        const uint64_t index = sample ? e0 + i : idx[i];
        if (!fl_fast_judge(&v, st, &e, &j->ff, out[i])) {
            const uint64_t bits[3] = { x0, x1, 0 };
            ulp_judge_add(c, j, bits, out[i], index, 1);
            continue;
        }
        c->n_fast++;
        const double u = v.ulp;
        if (!(u < 0x1p40) || v.special) { /* +Inf, huge or a class mismatch: the general accumulator */
            fl_ulp_case cs = ulp_case_of(&v, index, out[i]);
            cs.in[0] = x0;
            cs.in[1] = x1;
            fl_ulp_report_add(r, &cs);
            continue;
        }
        b.count++;
        b.cr += v.cr != 0;
        b.hist[v.hist]++;
        b.faithful += v.hist <= FL_ULP_HIST_1;
        b.max = u > b.max ? u : b.max;
        b.sum += (uint64_t)(u * 0x1p20); /* exact: a grid value below 2^40 */
        if (r->n_worst < FL_ULP_WORST || u >= r->worst[FL_ULP_WORST - 1].ulp) {
            fl_ulp_case cs = ulp_case_of(&v, index, out[i]);
            cs.in[0] = x0;
            cs.in[1] = x1;
            fl_ulp_report_offer_worst(r, &cs);
        }
    }
    batch_fold(r, &b);
}

void ulp_run_sweep(ulp_tctx *ctxs, const ulp_job *j, const ulp_sweep *s, ulp_progress *pg, int mpfr_only)
{
    /* the fast loop: a fast function of the implementation's inputs (one, or two for a gate) */
    int fast_loop = j->fast && !mpfr_only && s->impl->n_inputs == j->n_inputs &&
                    (j->fast->eval ? j->n_inputs == 1 : j->n_inputs == 2);
    for (int k = 0; k < j->n_inputs; k++)
        fast_loop &= j->in_kind[k] >= 0 && j->in_kind[k] != FL_FMT_E8M0;
    const uint64_t n = s->hi - s->lo;
    const uint64_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel
    {
        ulp_tctx *c = &ctxs[omp_get_thread_num()];
        uint32_t *in[3] = { malloc(CHUNK * 4), malloc(CHUNK * 4), malloc(CHUNK * 4) };
        uint32_t *out = malloc(CHUNK * 4);
        uint64_t *idx = malloc(CHUNK * 8);
        const int ni = s->impl->n_inputs;
#pragma omp for schedule(dynamic, 1)
        for (uint64_t ch = 0; ch < nchunks; ch++) {
            const uint64_t e0 = s->lo + ch * CHUNK;
            const size_t m = (size_t)(e0 + CHUNK <= s->hi ? CHUNK : s->hi - e0);
            fill_inputs(in, idx, s, e0, m);
            s->impl->run(out, (const uint32_t *const *)in, m, 0);
            if (fast_loop) {
                fast_chunk(c, j, in, out, m, idx, e0, s->sample);
                ulp_progress_tick(pg, m);
                continue;
            }
            for (size_t i = 0; i < m; i++) {
                uint64_t bits[3] = { 0, 0, 0 };
                for (int k = 0; k < ni; k++)
                    bits[k] = in[k][i];
                ulp_judge_add(c, j, bits, out[i], s->sample ? e0 + i : idx[i], mpfr_only);
            }
            ulp_progress_tick(pg, m);
        }
        free(in[0]);
        free(in[1]);
        free(in[2]);
        free(out);
        free(idx);
    }
}
