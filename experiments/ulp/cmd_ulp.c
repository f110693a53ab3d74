/* cmd_ulp.c — `fp8lab ulp`: validate a kernel's outputs against the MPFR reference, exactly.
 *
 * Two sources of outputs: arrays written by anything (--inputs/--outputs, .npy or .safetensors), or
 * one of fp8lab's own implementations swept over its input space (--impl with --exhaustive, --range
 * or --sample).  Every output is judged exactly (experiments/ulp/ULP.md): the correctly rounded
 * encoding, the class of the exact value, and the error in ulps of the exact value's binade, rounded
 * to nearest on the 2^-20 grid.  Judging first tries the fast path (ulp_fast.h: a proven
 * double-double enclosure, for silu/sigmoid/tanh/gelu/gelu_tanh with binary32-representable inputs)
 * and asks MPFR only when the enclosure does not decide; --mpfr-only asks MPFR always.  Both give
 * the same report, bit for bit.  The per-thread reports merge exactly (ulp_report.h), so the report
 * does not depend on the thread count, the chunking, or how --range shards are merged (--merge).
 *
 * This file: the help, the entry point (parse, check, dispatch) and the run of one validation; the
 * parts are listed in cmd_ulp_internal.h.
 */
#include "cmd_ulp_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const help =
    "usage: fp8lab ulp FN --format FMT --inputs X [--inputs U ...] --outputs Y [options]\n"
    "       fp8lab ulp [FN] [--format FMT] --impl NAME (--exhaustive | --range LO:HI | --sample N [--seed S])\n"
    "       fp8lab ulp [FN] --impl ROWWISE (--sample ROWS | --range LO:HI) [--seed S] [--row-len H] [--dist D]\n"
    "       fp8lab ulp --merge A.json B.json ... [--json] [--max-ulp T]\n"
    "       fp8lab ulp --list [--json]\n"
    "\n"
    "Validates outputs of FN (a reference function: silu, gelu, gelu_tanh, sigmoid, tanh, swiglu, ...)\n"
    "in format FMT against the exact, MPFR-certified values.  Error in ulps = |y - f(x)| / ulp(f(x)),\n"
    "f(x) exact, ulp of its binade in FMT (Zimmermann et al.), reported to the nearest 2^-20 ulp.\n"
    "\n"
    "Arrays (elementwise: same element count; row-wise functions: same shape, rows on the last axis):\n"
    "  --inputs FILE     one per input of FN, in order (x; or g,u for swiglu ...): .npy (float32,\n"
    "                    float16, float64, or uint8/uint16/uint32 bit patterns with --input-format) or\n"
    "                    .safetensors (F32, F16, BF16, F8_E4M3, F8_E5M2, F64 tensors)\n"
    "  --outputs FILE    the outputs: float arrays holding values exactly representable in FMT, bit\n"
    "                    patterns of FMT (--output-format FMT), or a safetensors tensor of FMT's dtype\n"
    "  --tensor NAME     the tensor of the preceding safetensors --inputs/--outputs file (optional when\n"
    "                    the file holds one tensor)\n"
    "  --input-format F  the inputs are bit patterns of F;  --output-format F: the outputs are (= FMT)\n"
    "  --range LO:HI     only elements LO <= i < HI (shards of a big file)\n"
    "  --index-base B    the arrays hold elements B, B+1, ... of a larger set written in pieces: indices\n"
    "                    and shards are reported from B, so that the pieces' reports --merge\n"
    "                    (B + the elements <= 2^63 - 1: reports hold 64-bit signed integers)\n"
    "Built-in implementations (--list shows them):\n"
    "  --impl NAME       FN and FMT default to the implementation's; inputs are every encoding of its\n"
    "                    input format (pairs for two inputs of <= 16 bits), indexed by their bit patterns\n"
    "  --exhaustive      all of them;  --range LO:HI  indices LO <= i < HI (hex or decimal; for sharding)\n"
    "  --sample N        N indices drawn uniformly (counter-based generator, --seed S, default 0)\n"
    "Row-wise implementations (polynorm*): seeded rows of H elements, every output judged against the\n"
    "MPFR row reference (~H MPFR operations per output: a row of 4096 takes ~20-40 s of one core):\n"
    "  --sample ROWS     rows 0 .. ROWS-1 of the stream fixed by --seed S (default 0), --row-len, --dist;\n"
    "                    --range LO:HI  rows LO .. HI-1 of it (shards; --range R:R+1 re-checks row R)\n"
    "  --row-len H       elements per row (default 4096, a hidden size; 1 .. 2^24-1)\n"
    "  --dist D          normal: x ~ N(0,1); heavy: Student-t (3 d.o.f.), x100 in ~1/512 of the columns\n"
    "                    (outlier channels, the same in every row); cancel: 1/8 of the columns placed\n"
    "                    where the row's terms a_i x^i / D_i cancel most, two columns tuned to put\n"
    "                    the row's zero on a representable x (VJPs: dy placed where dx nearly cancels).\n"
    "                    Values rounded (RNE) to the input format; dy ~ N(0,1) otherwise.\n"
    "                    Generator: experiments/ulp/ULP.md section 6.  Default normal.\n"
    "  --save PREFIX     also write the rows judged: PREFIXx.npy, PREFIXdy.npy (VJPs), PREFIXy.npy, bit\n"
    "                    patterns (uint8/uint16) of shape (rows, H), for --inputs/--outputs elsewhere\n"
    "Options:\n"
    "  --param NAME=V    a parameter of FN (alpha, beta, order, a0..a4, eps, tau)\n"
    "  --wrt NAME        the outputs are the partial derivative of FN w.r.t. input NAME (x; g or u\n"
    "                    for swiglu): e.g. a backward kernel run with an upstream gradient of 1\n"
    "  --saturate / --no-saturate   overflow policy of the reference (default: saturate for 8-bit and\n"
    "                    narrower FMT, IEEE overflow for fp32/bf16/fp16)\n"
    "  --max-ulp T       gate: exit 3 if the largest error exceeds T or any output's class (NaN, Inf,\n"
    "                    saturation) differs from the reference's\n"
    "  --json            one JSON object on stdout (merge shards with --merge); with --list: every\n"
    "                    implementation's formats, kernel and accuracy-table mode (make twin-table)\n"
    "  --mpfr-only       no fast path: MPFR for every output (same report, much slower)\n"
    "  --threads N       OpenMP threads, 1 .. 1024 (default: OMP_NUM_THREADS or all cores)\n"
    "  --no-progress     no progress bar (it is shown on a terminal for long runs)\n"
    "Exit status: 0 done (gate passed), 1 failure (unreadable input), 2 bad usage, 3 gate failed.\n";

/* NULL: one process; ulp_mpi.c points it at its ranks (ulp_workers.h). */
const fl_ulp_workers *fl_ulp_workers_hook;

static const char *const cmd = "ulp";

/* ---- what is judged: seeded rows, an input space, or arrays --------------------------------------- */

/* A row-wise implementation: rows of the seeded stream (--sample ROWS is rows 0..ROWS-1, --range LO:HI
   rows LO..HI-1), and the --save files opened. */
static int plan_rows(ulp_plan *p, const ulp_opts *o)
{
    ulp_job *j = &p->j;
    char err[512];
    if (o->exhaustive)
        return fl_cli_usage_error(cmd, "row-wise implementations take --sample ROWS or --range LO:HI (rows), not --exhaustive");
    j->row_len = o->row_len ? o->row_len : RG_DEFAULT_ROW_LEN;
    const uint64_t r_lo = o->range_set ? o->lo : 0, r_hi = o->range_set ? o->hi : o->nsample;
    if (r_hi > (UINT64_MAX >> 1) / (uint64_t)j->row_len)
        return fl_cli_usage_error(cmd, "too many rows");
    for (int k = 0; k < j->n_inputs; k++)
        j->in_kind[k] = p->impl->in_fmt[k];
    p->rg.dist = o->dist < 0 ? DIST_NORMAL : (ulp_row_dist)o->dist;
    p->rg.seed = o->seed;
    p->rg.H = j->row_len;
    p->rg.n_inputs = j->n_inputs;
    p->rg.fmt[0] = p->impl->in_fmt[0];
    p->rg.fmt[1] = p->impl->in_fmt[j->n_inputs > 1 ? 1 : 0];
    p->rg.p = &j->params;
    p->sw.impl = p->impl;
    p->sw.lo = r_lo * (uint64_t)j->row_len;
    p->sw.hi = r_hi * (uint64_t)j->row_len;
    snprintf(p->source, sizeof p->source, "impl %s, rows of %ld, dist %s, seed %llu", p->impl->name, j->row_len,
             ulp_dist_names[p->rg.dist], (unsigned long long)o->seed);
    if (o->save_prefix && fl_ulp_workers_hook && fl_ulp_workers_hook->size > 1)
        return fl_cli_usage_error(cmd, "--save writes from one process (not under MPI)");
    if (!o->save_prefix)
        return FL_EXIT_OK;
    const char *what[3] = { "x", "dy", "y" };
    for (int f = 0; f < 3; f++) {
        if (f == 1 && j->n_inputs < 2)
            continue;
        const fl_format fm = f == 2 ? j->fmt : p->impl->in_fmt[f];
        fl_array hdr;
        memset(&hdr, 0, sizeof hdr);
        const int sb = fl_format_storage_bits(fm);
        hdr.dtype = sb <= 8 ? FL_DT_U8 : sb <= 16 ? FL_DT_U16 : FL_DT_U32;
        hdr.ndim = 2;
        hdr.shape[0] = (int64_t)(r_hi - r_lo);
        hdr.shape[1] = j->row_len;
        snprintf(p->save.path[f], sizeof p->save.path[f], "%s%s.npy", o->save_prefix, what[f]);
        p->save.w[f] = fl_npy_writer_open(p->save.path[f], &hdr, err, sizeof err);
        if (!p->save.w[f]) {
            fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
            for (int q = 0; q < f; q++)
                fl_npy_writer_abort(p->save.w[q]);
            return FL_EXIT_FAIL;
        }
    }
    return FL_EXIT_OK;
}

/* An elementwise implementation: its input space (every encoding, or every pair of them), a range of
   it or a sample. */
static int plan_sweep(ulp_plan *p, const ulp_opts *o)
{
    ulp_job *j = &p->j;
    int total_bits = 0;
    for (int k = 0; k < j->n_inputs; k++) {
        j->in_kind[k] = p->impl->in_fmt[k];
        p->sw.in_bits[k] = fl_format_storage_bits(p->impl->in_fmt[k]);
        total_bits += p->sw.in_bits[k];
    }
    if (j->n_inputs > 1 && total_bits > 32 && !o->sample_set && !o->range_set)
        return fl_cli_usage_error(cmd, "%d input bits: too many for --exhaustive (pairs of <= 16-bit inputs only); use --sample or --range", total_bits);
    const uint64_t space = total_bits >= 64 ? 0 : 1ull << total_bits;
    p->sw.impl = p->impl;
    p->sw.space = space;
    if (o->exhaustive) {
        p->sw.lo = 0;
        p->sw.hi = space;
    } else if (o->range_set) {
        if (o->hi > space)
            return fl_cli_usage_error(cmd, "--range beyond the %d-bit input space (0x%llx)", total_bits,
                                      (unsigned long long)space);
        p->sw.lo = o->lo;
        p->sw.hi = o->hi;
    } else {
        p->sw.sample = 1;
        p->sw.seed = o->seed;
        p->sw.lo = 0;
        p->sw.hi = o->nsample;
    }
    if (p->sw.sample)
        snprintf(p->source, sizeof p->source, "impl %s, sample %llu seed %llu", p->impl->name,
                 (unsigned long long)o->nsample, (unsigned long long)o->seed);
    else
        snprintf(p->source, sizeof p->source, "impl %s", p->impl->name);
    return FL_EXIT_OK;
}

/* Arrays: the files opened and checked against the function and each other; o->lo, o->hi the
   elements judged.  The caller closes the files, opened or not. */
/* "(6, 32)": an array's shape, as numpy prints it */
static void shape_text(char *buf, size_t n, const ulp_source *s)
{
    size_t at = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < s->ndim && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
    if (at < n)
        snprintf(buf + at, n - at, s->ndim == 1 ? ",)" : ")");
}

static int open_arrays(ulp_plan *p, ulp_opts *o)
{
    ulp_job *j = &p->j;
    char err[512];
    for (int k = 0; k < o->n_ins; k++)
        if (ulp_source_open(&o->ins[k], cmd, o->in_pat, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
            return FL_EXIT_FAIL;
        }
    /* uint8/uint16/uint32 outputs are bit patterns of FMT unless --output-format says otherwise */
    if (ulp_source_open(&o->outs, cmd, o->out_pat >= 0 ? o->out_pat : o->fmt, err, sizeof err)) {
        fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
        return FL_EXIT_FAIL;
    }
    if (o->n_ins != j->n_inputs)
        return fl_cli_usage_error(cmd, "%s takes %d input%s (%s), got %d --inputs", o->fn_name, j->n_inputs,
                                  j->n_inputs > 1 ? "s" : "", j->fn->inputs, o->n_ins);
    for (int k = 0; k < o->n_ins; k++) {
        j->in_kind[k] = o->ins[k].kind;
        if (o->ins[k].count != o->outs.count) {
            fprintf(stderr, "fp8lab %s: %s has %llu elements but %s has %llu\n", cmd, o->ins[k].path,
                    (unsigned long long)o->ins[k].count, o->outs.path, (unsigned long long)o->outs.count);
            return FL_EXIT_FAIL;
        }
    }
    if (j->fn->rowwise) {
        if (o->outs.ndim < 1 || o->outs.shape[o->outs.ndim - 1] <= 0) {
            fprintf(stderr, "fp8lab %s: %s: a row-wise function needs rows (an array of rank >= 1)\n", cmd,
                    o->outs.path);
            return FL_EXIT_FAIL;
        }
        j->row_len = (long)o->outs.shape[o->outs.ndim - 1];
        /* rows are read from every array alike: the same count is not enough ((6, 32) against
           (32, 6) would be judged as rows of 6) */
        for (int k = 0; k < o->n_ins; k++) {
            const ulp_source *s = &o->ins[k];
            int same = s->ndim == o->outs.ndim;
            for (int d = 0; same && d < s->ndim; d++)
                same = s->shape[d] == o->outs.shape[d];
            if (!same) {
                char a[160], b[160];
                shape_text(a, sizeof a, s);
                shape_text(b, sizeof b, &o->outs);
                fprintf(stderr, "fp8lab %s: %s has shape %s but %s has %s: a row-wise function needs the same shape "
                        "(rows on the last axis)\n", cmd, s->path, a, o->outs.path, b);
                return FL_EXIT_FAIL;
            }
        }
    }
    if (o->range_set && (o->hi > o->outs.count ||
                         (j->row_len > 0 && (o->lo % (uint64_t)j->row_len || o->hi % (uint64_t)j->row_len))))
        return fl_cli_usage_error(cmd, "--range %llu:%llu outside the %llu elements%s", (unsigned long long)o->lo,
                                  (unsigned long long)o->hi, (unsigned long long)o->outs.count,
                                  j->row_len > 0 ? " or not on row boundaries" : "");
    if (!o->range_set) {
        o->lo = 0;
        o->hi = o->outs.count;
    }
    if (o->index_base > (uint64_t)INT64_MAX - o->outs.count) /* the report's indices and shards are int64 */
        return fl_cli_usage_error(cmd, "--index-base %llu + %llu elements is beyond 2^63 - 1, the largest index a "
                                  "report holds", (unsigned long long)o->index_base, (unsigned long long)o->outs.count);
    snprintf(p->source, sizeof p->source, "outputs %s", o->outs.path);
    return FL_EXIT_OK;
}

static void close_arrays(ulp_opts *o)
{
    for (int q = 0; q < o->n_ins; q++)
        ulp_source_close(&o->ins[q]);
    ulp_source_close(&o->outs);
}

/* ---- the run ------------------------------------------------------------------------------------------ */

typedef struct {
    fl_ulp_report total;
    uint64_t stats[3]; /* outputs decided by the fast path, by MPFR, undecided */
    double secs;
    int nthreads;
} outcome;

/* Every element of this process's share judged, the threads' reports merged into r->total. */
static int judge_all(outcome *r, ulp_plan *p, ulp_opts *o, uint64_t lo, uint64_t hi)
{
    const fl_ulp_workers *wk = fl_ulp_workers_hook;
    const ulp_job *j = &p->j;
    char err[512];
    const int nthreads = omp_get_max_threads();
    ulp_tctx *ctxs = aligned_alloc(64, ((size_t)nthreads * sizeof(ulp_tctx) + 63) / 64 * 64);
    for (int t = 0; t < nthreads; t++)
        ulp_tctx_init(&ctxs[t], j);
    ulp_progress pg = { 0, hi - lo, 0, ulp_now_s(), 0 };
    /* row-wise outputs cost ~row_len MPFR operations each: a bar from one row of 4096 on */
    pg.on = !o->no_progress && isatty(2) &&
            pg.total >= (j->row_len > 0 && p->impl ? (uint64_t)1 << 12 : (uint64_t)1 << 22) && (!wk || wk->rank == 0);
    const double t0 = ulp_now_s();
    int rc = FL_EXIT_OK;
    if (p->impl && p->impl->rowwise) {
        if (ulp_run_rows(ctxs, j, &p->sw, &p->rg, &pg, o->save_prefix ? &p->save : NULL, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
            rc = FL_EXIT_FAIL;
        }
        for (int f = 0; f < 3; f++) {
            if (!p->save.w[f])
                continue;
            if (rc != FL_EXIT_OK) {
                fl_npy_writer_abort(p->save.w[f]);
            } else if (fl_npy_writer_commit(p->save.w[f], err, sizeof err)) {
                fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
                rc = FL_EXIT_FAIL;
            }
            p->save.w[f] = NULL;
        }
    } else if (p->impl) {
        ulp_run_sweep(ctxs, j, &p->sw, &pg, o->mpfr_only);
    } else if (ulp_run_arrays(ctxs, j, o->ins, &o->outs, lo, hi, &pg, o->mpfr_only, err, sizeof err)) {
        fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
        rc = FL_EXIT_FAIL;
    }
    ulp_progress_end(&pg);
    r->secs = ulp_now_s() - t0;
    r->nthreads = nthreads;
    fl_ulp_report_init(&r->total);
    memset(r->stats, 0, sizeof r->stats);
    for (int t = 0; t < nthreads; t++) {
        fl_ulp_report_merge(&r->total, &ctxs[t].rep);
        r->stats[0] += ctxs[t].n_fast;
        r->stats[1] += ctxs[t].n_mpfr;
        r->stats[2] += ctxs[t].n_fail;
        ulp_tctx_clear(&ctxs[t], j);
    }
    free(ctxs);
    return rc;
}

/* The command that re-checks the worst case alone: its row, its input index, or its array element. */
static void recheck_line(char *buf, size_t n, const ulp_plan *p, const ulp_opts *o, const fl_ulp_case *w)
{
    const ulp_job *j = &p->j;
    int k = snprintf(buf, n, "fp8lab ulp %s --format %s", o->fn_name, fl_format_name(j->fmt));
    for (int q = 0; q < o->n_params; q++)
        k += snprintf(buf + k, n - (size_t)k, " --param %s", o->param_args[q]);
    if (p->impl && p->impl->rowwise) {
        const unsigned long long row = w->index / (uint64_t)j->row_len;
        snprintf(buf + k, n - (size_t)k, " --impl %s --row-len %ld --dist %s --seed %llu --range %llu:%llu",
                 p->impl->name, j->row_len, ulp_dist_names[p->rg.dist], (unsigned long long)o->seed, row, row + 1);
    } else if (p->impl) {
        uint64_t id = 0;
        for (int q = 0; q < j->n_inputs; q++)
            id = (p->sw.in_bits[q] >= 64 ? 0 : id << p->sw.in_bits[q]) | w->in[q];
        snprintf(buf + k, n - (size_t)k, " --impl %s --range 0x%llx:0x%llx", p->impl->name, (unsigned long long)id,
                 (unsigned long long)id + 1);
    } else {
        for (int q = 0; q < o->n_ins; q++)
            k += snprintf(buf + k, n - (size_t)k, " --inputs %s", o->ins[q].path);
        snprintf(buf + k, n - (size_t)k, " --outputs %s --range %llu:%llu", o->outs.path,
                 (unsigned long long)w->index, (unsigned long long)w->index + 1);
    }
}

/* The report of the whole run on stdout, with how the run went; the gate's exit status. */
static int report(outcome *r, const ulp_plan *p, const ulp_opts *o, uint64_t lo, uint64_t hi)
{
    const fl_ulp_workers *wk = fl_ulp_workers_hook;
    fl_ulp_report *total = &r->total;
    ulp_meta m;
    memset(&m, 0, sizeof m);
    m.fn_name = o->fn_name;
    m.fmt = p->j.fmt;
    m.ovf = p->j.ovf;
    m.n_inputs = p->j.n_inputs;
    memcpy(m.in_kind, p->j.in_kind, sizeof m.in_kind);
    m.source = p->source;
    snprintf(m.params, sizeof m.params, "%s", p->params);
    m.lo = lo;
    m.hi = hi;
    m.row_len = p->j.row_len;
    char recheck[2][1024] = { "", "" }; /* the worst finite error, the first class mismatch */
    if (total->n_worst && total->worst[0].ulp > 0)
        recheck_line(recheck[0], sizeof recheck[0], p, o, &total->worst[0]);
    if (total->n_mismatch)
        recheck_line(recheck[1], sizeof recheck[1], p, o, &total->mismatch[0]);
    if (o->index_base) { /* after the recheck lines, which name the file's own elements */
        m.lo += o->index_base, m.hi += o->index_base;
        for (int q = 0; q < total->n_worst; q++)
            total->worst[q].index += o->index_base;
        for (int q = 0; q < total->n_mismatch; q++)
            total->mismatch[q].index += o->index_base;
    }
    ulp_emit_report(total, &m, recheck, o->T, o->gated, o->json);
    /* how the run went (not part of the report, which is the same whichever judge decided) */
    fprintf(o->json ? stderr : stdout,
            "  run: %.2f s, %d thread%s%s; %llu outputs decided by the fast path, %llu by MPFR%s\n", r->secs,
            r->nthreads, r->nthreads > 1 ? "s" : "", wk && wk->size > 1 ? " per process" : "",
            (unsigned long long)r->stats[0], (unsigned long long)r->stats[1], o->mpfr_only ? " (--mpfr-only)" : "");
    return o->gated && (total->max_ulp > o->T || total->mismatched_special) ? FL_EXIT_GATE : FL_EXIT_OK;
}

/* Judge [lo, hi) (this process's share of it under MPI workers, whose reports rank 0 gathers) and
   report. */
static int validate(ulp_plan *p, ulp_opts *o, uint64_t lo, uint64_t hi)
{
    const fl_ulp_workers *wk = fl_ulp_workers_hook;
    uint64_t my_lo = lo, my_hi = hi;
    if (wk && wk->size > 1) { /* contiguous shares of whole rows */
        const uint64_t unit = p->j.row_len > 0 ? (uint64_t)p->j.row_len : 1, units = (hi - lo) / unit;
        my_lo = lo + units * (uint64_t)wk->rank / (uint64_t)wk->size * unit;
        my_hi = wk->rank == wk->size - 1 ? hi : lo + units * (uint64_t)(wk->rank + 1) / (uint64_t)wk->size * unit;
    }
    if (p->impl) { /* the sweep drivers read their elements from the plan */
        p->sw.lo = my_lo;
        p->sw.hi = my_hi;
    }
    outcome r;
    int rc = judge_all(&r, p, o, my_lo, my_hi);
    if (wk && wk->size > 1) {
        wk->reduce(&r.total, r.stats, 3, wk->ctx);
        if (wk->rank != 0)
            return rc;
    }
    if (rc == FL_EXIT_OK && r.stats[2]) {
        fprintf(stderr, "fp8lab %s: MPFR could not decide %llu outputs (no precision up to %ld bits sufficed)\n", cmd,
                (unsigned long long)r.stats[2], (long)FL_REF_MAX_PREC);
        rc = FL_EXIT_FAIL;
    }
    return rc == FL_EXIT_OK ? report(&r, p, o, lo, hi) : rc;
}

/* ---- --list --json ----------------------------------------------------------------------------------- */

/* One implementation for `--list --json`: what a driver needs to run it (experiments/ulp/twin_table.sh
   runs every kernel twin from this listing) -- the reference function, parameters and derivative, the
   formats, the kernel a twin mirrors, and the accuracy table's mode (twins.h) as `ulp --impl NAME`
   arguments, with the fast path decided as a run of the implementation decides it (ulp_setup_job).
   NULL when the implementation does not set up (a usage error, already reported). */
static json_t *impl_json(const fl_twin *t)
{
    char *argv[] = { (char *)cmd, (char *)"--impl", (char *)t->name, (char *)"--exhaustive", NULL };
    ulp_opts o;
    ulp_plan p;
    if (ulp_parse_args(&o, 4, argv) != FL_EXIT_OK || ulp_setup_job(&p, &o) != FL_EXIT_OK)
        return NULL;
    fl_twin_mode m;
    fl_twin_table_mode(&m, t, p.j.fast != NULL);
    char args[128];
    fl_twin_mode_args(args, sizeof args, &m);
    json_t *ins = json_array(), *margs = json_array();
    for (int k = 0; k < t->n_inputs; k++)
        json_array_append_new(ins, json_string(fl_format_name(t->in_fmt[k])));
    for (char *tok = strtok(args, " "); tok; tok = strtok(NULL, " "))
        json_array_append_new(margs, json_string(tok));
    const fl_twin_kernel *k = fl_twin_kernel_of(t);
    return json_pack("{s:s, s:s, s:s, s:i, s:s?, s:o, s:s, s:b, s:o, s:i, s:b, s:s, s:o, s:s}", "name", t->name, "ref_fn",
                     t->ref_fn, "ref_params", t->ref_params, "derivative", t->derivative, "wrt", t->ref_wrt,
                     "input_formats", ins, "output_format", fl_format_name(t->out_fmt), "rowwise", t->rowwise, "kernel",
                     k ? json_pack("{s:s, s:i}", "name", fl_twin_kernel_name(k->id), "order", k->order) : json_null(),
                     "space_bits", fl_twin_space_bits(t), "fast_path", p.j.fast != NULL, "mode", fl_twin_mode_name(m.kind),
                     "mode_args", margs, "summary", t->summary);
}

/* {"twins": [...], "examples": [...]} on stdout. */
static int list_json(void)
{
    json_t *twins = json_array(), *examples = json_array();
    for (size_t i = 0; i < fl_twin_count + fl_ulp_example_count; i++) {
        const fl_twin *t = i < fl_twin_count ? &fl_twins[i] : &fl_ulp_examples[i - fl_twin_count];
        json_t *e = impl_json(t);
        if (!e) {
            fprintf(stderr, "fp8lab %s: implementation '%s' does not set up (above)\n", cmd, t->name);
            json_decref(twins);
            json_decref(examples);
            return FL_EXIT_FAIL;
        }
        json_array_append_new(i < fl_twin_count ? twins : examples, e);
    }
    json_t *o = json_pack("{s:o, s:o}", "twins", twins, "examples", examples);
    json_dumpf(o, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(o);
    return FL_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------------------------- */

int fl_cmd_ulp(int argc, char **argv)
{
    ulp_opts o;
    int rc = ulp_parse_args(&o, argc, argv);
    if (rc != FL_EXIT_OK)
        return rc;
    if (o.help) {
        fputs(help, stdout);
        return FL_EXIT_OK;
    }
    if (o.list) {
        if (o.json)
            return list_json();
        fl_ulp_impl_list(stdout);
        return FL_EXIT_OK;
    }
    if (o.merge)
        return ulp_merge_main(argc, argv, o.merge + 1, o.json, o.gated, o.T);
    ulp_plan p;
    rc = ulp_setup_job(&p, &o);
    if (rc != FL_EXIT_OK)
        return rc;
    if (!p.impl) {
        rc = open_arrays(&p, &o);
        if (rc == FL_EXIT_OK)
            rc = validate(&p, &o, o.lo, o.hi);
        close_arrays(&o);
        return rc;
    }
    rc = p.impl->rowwise ? plan_rows(&p, &o) : plan_sweep(&p, &o);
    return rc == FL_EXIT_OK ? validate(&p, &o, p.sw.lo, p.sw.hi) : rc;
}
