/* ulp_arrays.c — `fp8lab ulp --inputs ... --outputs ...`: arrays written by anything (.npy or
 * .safetensors) read as bit patterns, and judged in chunks (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- inputs and outputs as bit patterns --------------------------------------------------------- */

int ulp_source_open(ulp_source *s, const char *cmd, int pattern_fmt, char *err, size_t errlen)
{
    const size_t n = strlen(s->path);
    s->is_st = n > 12 && !strcmp(s->path + n - 12, ".safetensors");
    if (s->is_st) {
        s->st = fl_st_open(s->path, err, errlen);
        if (!s->st)
            return -1;
        if (!s->tensor) {
            if (fl_st_count(s->st) != 1) {
                snprintf(err, errlen, "%s: holds %zu tensors; name one with --tensor NAME", s->path, fl_st_count(s->st));
                return -1;
            }
            s->t = fl_st_tensor_at(s->st, 0);
        } else if (!(s->t = fl_st_find(s->st, s->tensor))) {
            snprintf(err, errlen, "%s: no tensor named '%s'", s->path, s->tensor);
            return -1;
        }
        const int f = fl_st_format(s->t->dtype);
        if (f < 0 && s->t->dtype != FL_ST_F64) {
            snprintf(err, errlen, "%s: tensor '%s' has dtype %s; %s reads F32, F16, BF16, F8_E4M3, F8_E5M2, F64",
                     s->path, s->t->name, fl_st_dtype_name(s->t->dtype), cmd);
            return -1;
        }
        s->kind = f < 0 ? KIND_F64 : f;
        s->count = s->t->count;
        s->ndim = s->t->ndim;
        memcpy(s->shape, s->t->shape, sizeof s->shape);
        return 0;
    }
    s->npy = fl_npy_reader_open(s->path, &s->hdr, err, errlen);
    if (!s->npy)
        return -1;
    s->count = s->hdr.count;
    s->ndim = s->hdr.ndim;
    memcpy(s->shape, s->hdr.shape, sizeof s->shape);
    const fl_dtype dt = s->hdr.dtype;
    if (pattern_fmt >= 0 && (dt == FL_DT_U8 || dt == FL_DT_U16 || dt == FL_DT_U32)) {
        const int bits = fl_format_storage_bits((fl_format)pattern_fmt);
        if ((int)fl_dtype_size(dt) * 8 != bits) {
            snprintf(err, errlen, "%s: dtype %s cannot hold %s bit patterns (expected uint%d)", s->path,
                     fl_dtype_name(dt), fl_format_name((fl_format)pattern_fmt), bits);
            return -1;
        }
        s->kind = pattern_fmt;
        return 0;
    }
    if (dt == FL_DT_F32 || dt == FL_DT_F16 || dt == FL_DT_F64) {
        s->kind = dt == FL_DT_F32 ? FL_FMT_FP32 : dt == FL_DT_F16 ? FL_FMT_FP16 : KIND_F64;
        s->value_dtype = 1;
        return 0;
    }
    snprintf(err, errlen, "%s: dtype %s holds neither float values nor bit patterns of the format (--input-format /"
             " --output-format name it)", s->path, fl_dtype_name(dt));
    return -1;
}

/* Reads n elements as 64-bit patterns of s->kind.  0 or -1 with err. */
static int read_source(ulp_source *s, uint64_t *bits, size_t n, char *err, size_t errlen)
{
    if (s->is_st) {
        const size_t es = fl_st_dtype_size(s->t->dtype);
        const unsigned char *p = (const unsigned char *)s->t->data + s->pos * es;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = 0;
            for (size_t b = 0; b < es; b++)
                v |= (uint64_t)p[i * es + b] << (8 * b); /* little-endian */
            bits[i] = v;
        }
        s->pos += n;
        return 0;
    }
    const size_t es = fl_dtype_size(s->hdr.dtype);
    if (!s->buf)
        s->buf = malloc(((size_t)1 << 20) * 8);
    size_t done = 0;
    while (done < n) {
        const size_t want = n - done < ((size_t)1 << 20) ? n - done : ((size_t)1 << 20);
        const long long got = fl_npy_reader_read(s->npy, s->buf, want, err, errlen);
        if (got <= 0) {
            if (got == 0)
                snprintf(err, errlen, "%s: fewer elements than its header promises", s->path);
            return -1;
        }
        for (size_t i = 0; i < (size_t)got; i++) {
            const unsigned char *p = (const unsigned char *)s->buf + i * es;
            bits[done + i] = es == 1 ? *p : es == 2 ? *(const uint16_t *)p : es == 4 ? *(const uint32_t *)p
                                                                                     : *(const uint64_t *)p;
        }
        done += (size_t)got;
    }
    s->pos += n;
    return 0;
}

void ulp_source_close(ulp_source *s)
{
    if (s->npy)
        fl_npy_reader_close(s->npy);
    fl_st_close(s->st);
    free(s->buf);
}

/* The value of input bits of a kind, as a double (exact). */
double ulp_bits_value(int kind, uint64_t b)
{
    return kind == KIND_F64 ? fl_f64_from_bits(b) : (double)fl_decode(kind, (uint32_t)b);
}

const char *ulp_kind_name(int kind) { return kind == KIND_F64 ? "f64" : fl_format_name((fl_format)kind); }

/* The next m elements of every input and of the outputs. */
static int read_chunk(ulp_source *ins, ulp_source *outs, int n_inputs, uint64_t *const *inb, uint64_t *outb, size_t m,
                      char *err, size_t errlen)
{
    int rc = 0;
    for (int k = 0; k < n_inputs && rc == 0; k++)
        rc = read_source(&ins[k], inb[k], m, err, errlen);
    if (rc == 0)
        rc = read_source(outs, outb, m, err, errlen);
    return rc;
}

/* The outputs (elements pos.. of outs) as encodings of the job's format: a value that is not one is an
   error (a wrong --format).  0, or -1 with err. */
static int outputs_to_codes(uint32_t *y, const uint64_t *outb, size_t m, const ulp_source *outs, const ulp_job *j,
                            uint64_t pos, char *err, size_t errlen)
{
    const fl_format_desc *d = fl_format_get(j->fmt);
    int rc = 0;
    for (size_t i = 0; i < m && rc == 0; i++) {
        if (outs->kind == (int)j->fmt) {
            y[i] = (uint32_t)outb[i];
            continue;
        }
        const double v = ulp_bits_value(outs->kind, outb[i]);
        uint32_t code;
        if (isnan(v))
            code = fl_encode_nan_(d);
        else
            code = fl_encode_f64(j->fmt, v, FL_RND_NE, FL_OVF_NOSATURATE, 0);
        const double back = ulp_bits_value(j->fmt, code);
        if (!(isnan(v) && isnan(back)) && !(back == v && signbit(back) == signbit(v))) {
            snprintf(err, errlen, "%s: element %llu is %a, not a %s value (wrong --format?)", outs->path,
                     (unsigned long long)(pos + i), v, fl_format_name(j->fmt));
            rc = -1;
        }
        y[i] = code;
    }
    return rc;
}

/* Elementwise: m outputs, elements pos.. */
static void judge_elements(ulp_tctx *ctxs, const ulp_job *j, uint64_t *const *inb, const uint32_t *y, size_t m,
                           uint64_t pos, int mpfr_only)
{
#pragma omp parallel for schedule(dynamic, 1024)
    for (size_t i = 0; i < m; i++) {
        ulp_tctx *c = &ctxs[omp_get_thread_num()];
        uint64_t b[FL_MAX_INPUTS] = { 0 };
        for (int k = 0; k < j->n_inputs; k++)
            b[k] = inb[k][i];
        ulp_judge_add(c, j, b, y[i], pos + i, mpfr_only);
    }
}

/* Row-wise: m / row_len whole rows, elements pos..; a thread loads a row into its MPFR copy, then
   judges each of its outputs against the row reference. */
static void judge_rows(ulp_tctx *ctxs, const ulp_job *j, uint64_t *const *inb, const uint32_t *y, size_t m, uint64_t pos)
{
    const long L = j->row_len;
    const size_t nrows = m / (size_t)L;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t rw = 0; rw < nrows; rw++) {
        ulp_tctx *c = &ctxs[omp_get_thread_num()];
        for (int k = 0; k < j->n_inputs; k++)
            for (long e = 0; e < L; e++)
                ulp_set_input(c->rows[k][e], j->in_kind[k], inb[k][rw * (size_t)L + (size_t)e]);
        mpfr_srcptr *rowp[FL_MAX_INPUTS];
        for (int k = 0; k < j->n_inputs; k++) {
            rowp[k] = malloc((size_t)L * sizeof(mpfr_srcptr));
            for (long e = 0; e < L; e++)
                rowp[k][e] = c->rows[k][e];
        }
        for (long e = 0; e < L; e++) {
            const size_t i = rw * (size_t)L + (size_t)e;
            fl_ulp_verdict v;
            if (ulp_judge_mpfr(&v, c, j, NULL, (mpfr_srcptr const *const *)rowp, e, y[i]) != 0) {
                c->n_fail++;
                continue;
            }
            c->n_mpfr++;
            fl_ulp_case cs = ulp_case_of(&v, pos + i, y[i]);
            for (int k = 0; k < j->n_inputs; k++)
                cs.in[k] = inb[k][i];
            fl_ulp_report_add(&c->rep, &cs);
        }
        for (int k = 0; k < j->n_inputs; k++)
            free(rowp[k]);
    }
}

/* External arrays: chunks read in order by one thread, judged by all. */
int ulp_run_arrays(ulp_tctx *ctxs, const ulp_job *j, ulp_source *ins, ulp_source *outs, uint64_t lo, uint64_t hi,
                   ulp_progress *pg, int mpfr_only, char *err, size_t errlen)
{
    const size_t chunk_elems = j->row_len > 0 ? (size_t)j->row_len * (size_t)(((1 << 18) + j->row_len - 1) / j->row_len)
                                             : (size_t)1 << 18;
    uint64_t *inb[FL_MAX_INPUTS];
    for (int k = 0; k < j->n_inputs; k++)
        inb[k] = malloc(chunk_elems * 8);
    uint64_t *outb = malloc(chunk_elems * 8);
    uint32_t *y = malloc(chunk_elems * 4);
    int rc = 0;
    /* skip to lo */
    for (uint64_t pos = 0; pos < lo && rc == 0;) {
        const size_t m = (size_t)(lo - pos < chunk_elems ? lo - pos : chunk_elems);
        rc = read_chunk(ins, outs, j->n_inputs, inb, outb, m, err, errlen);
        pos += m;
    }
    for (uint64_t pos = lo; pos < hi && rc == 0;) {
        const size_t m = (size_t)(hi - pos < chunk_elems ? hi - pos : chunk_elems);
        rc = read_chunk(ins, outs, j->n_inputs, inb, outb, m, err, errlen);
        if (rc == 0)
            rc = outputs_to_codes(y, outb, m, outs, j, pos, err, errlen);
        if (rc)
            break;
        if (j->row_len <= 0)
            judge_elements(ctxs, j, inb, y, m, pos, mpfr_only);
        else
            judge_rows(ctxs, j, inb, y, m, pos);
        ulp_progress_tick(pg, m);
        pos += m;
    }
    for (int k = 0; k < j->n_inputs; k++)
        free(inb[k]);
    free(outb);
    free(y);
    return rc;
}
