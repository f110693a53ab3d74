/* cmd_ulp_internal.h — the parts of `fp8lab ulp` (experiments/ulp/), for the files that make it up:
 *
 *   cmd_ulp.c       help, the entry point (parse, check, dispatch) and the run of one validation
 *   ulp_args.c      the command line into ulp_opts; the checks; the job (function, formats, parameters)
 *   ulp_arrays.c    arrays from files (--inputs/--outputs): reading, judging
 *   ulp_sweep.c     --impl of an elementwise implementation: its input space in chunks
 *   ulp_rows.c      --impl of a row-wise implementation: seeded rows
 *   ulp_judge.c     one output judged exactly (fast path, else MPFR)
 *   ulp_output.c    the report as text or JSON, and --merge
 *   ulp_progress.c  the progress bar
 *   examples.c      the plain-C examples and the registry of implementations (ulp_impls.h)
 */
#ifndef FL_CMD_ULP_INTERNAL_H
#define FL_CMD_ULP_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "commands.h"
#include "common/cli.h"
#include "fl_round.h"
#include "npy.h"
#include "ref.h"
#include "round_mpfr.h"
#include "safetensors.h"
#include "ulp_fast.h"
#include "ulp_impls.h"
#include "ulp_report.h"
#include "ulp_workers.h"

/* ---- inputs and outputs as bit patterns (ulp_arrays.c) ---------------------------------------- */

#define KIND_F64 (-1) /* binary64 values; otherwise an fl_format whose encodings the bits are */

typedef struct {
    const char *path;
    const char *tensor;  /* safetensors: the tensor's name, or NULL */
    int is_st;
    fl_npy_reader *npy;
    fl_array hdr;
    fl_st_file *st;
    const fl_st_tensor *t;
    uint64_t pos;        /* elements handed out */
    uint64_t count;
    int ndim;
    int64_t shape[FL_NPY_MAXDIM];
    int kind;            /* KIND_F64 or an fl_format */
    int value_dtype;     /* npy: 1 if the array holds values (float32/16/64) rather than bit patterns */
    void *buf;
} ulp_source;

/* ---- the job and the judge (ulp_judge.c) ------------------------------------------------------ */

typedef struct {
    const fl_ref_fn *fn;
    const fl_ref_evaluator *ev;
    fl_ref_params params;
    int n_inputs;
    int in_kind[FL_MAX_INPUTS];
    fl_format fmt;
    fl_overflow ovf;
    const fl_fast_fn *fast; /* NULL: MPFR only */
    fl_fast_fmt ff;
    long row_len;           /* row-wise functions */
} ulp_job;

/* Per-thread state. */
typedef struct {
    mpfr_t x[FL_MAX_INPUTS], a, lo, hi, t, yv, f;
    mpfr_t *rows[FL_MAX_INPUTS]; /* row-wise: one row per input */
    long rows_len;
    fl_ulp_report rep;
    uint64_t n_fast, n_mpfr, n_fail;
    char pad[64];
} ulp_tctx;

/* ---- progress (ulp_progress.c) ---------------------------------------------------------------- */

typedef struct {
    int on;
    uint64_t total;
    uint64_t done; /* atomically updated */
    double t0, last;
} ulp_progress;

/* ---- reports (ulp_output.c): what a report says besides its counts ---------------------------- */

typedef struct {
    const char *fn_name;
    fl_format fmt;
    fl_overflow ovf;
    int n_inputs;
    int in_kind[FL_MAX_INPUTS];
    const char *source; /* "impl NAME" or the outputs' path */
    char params[256];
    uint64_t lo, hi;    /* elements judged: [lo, hi) (one shard) */
    json_t *shards;     /* merged reports: their [lo, hi) list */
    long row_len;       /* row-wise: the row length (worst cases name row and column); else 0 */
} ulp_meta;

/* ---- sweeps of an implementation (ulp_sweep.c; ulp_rows.c for row-wise ones) ------------------ */

typedef struct {
    const fl_twin *impl;
    uint64_t lo, hi;   /* element numbers [lo, hi) */
    int sample;        /* element i -> index sample_index(seed, i, space) */
    uint64_t seed, space;
    int in_bits[3];
} ulp_sweep;

/* Row-wise implementations: the seeded rows (ulp_rows.c, experiments/ulp/ULP.md section 6). */
typedef enum { DIST_NORMAL, DIST_HEAVY, DIST_CANCEL, DIST_COUNT } ulp_row_dist;

#define RG_DEFAULT_ROW_LEN 4096

typedef struct {
    ulp_row_dist dist;
    uint64_t seed;
    long H;
    int n_inputs;            /* 1: x; 2: x, dy (a VJP) */
    fl_format fmt[2];
    const fl_ref_params *p;  /* order, coefficients, eps: the reference's */
} ulp_rowgen;

typedef struct {
    fl_npy_writer *w[3]; /* x, dy, y: bit patterns, shape (rows, H) */
    char path[3][1100];
} ulp_row_save;

extern const char *const ulp_dist_names[DIST_COUNT];

/* ---- the command line (ulp_args.c) ---------------------------------------------------------------- */

#define ULP_MAX_PARAMS 16
#define ULP_MAX_THREADS 1024 /* --threads 1 .. 1024 */

typedef struct {
    int help, list;
    int merge;                  /* argv index of --merge (the report files follow it), or 0 */
    const char *fn_name;        /* FN; ulp_setup_job fills in an implementation's */
    const char *impl_name;      /* --impl */
    int fmt, in_pat, out_pat;   /* --format, --input-format, --output-format: an fl_format, or -1 */
    ulp_source ins[FL_MAX_INPUTS], outs; /* --inputs, --outputs (--tensor) */
    int n_ins, have_out;
    int exhaustive, range_set, sample_set;
    uint64_t lo, hi;            /* --range */
    uint64_t nsample, seed;     /* --sample, --seed */
    int threads;                /* --threads 1 .. ULP_MAX_THREADS; 0: not given (OpenMP's default) */
    long row_len;               /* --row-len; 0: the default */
    int dist;                   /* --dist; -1: the default */
    const char *save_prefix;    /* --save */
    const char *wrt;            /* --wrt */
    unsigned long long index_base;
    const char *param_args[ULP_MAX_PARAMS]; /* --param NAME=V, in order */
    int n_params;
    fl_overflow ovf;            /* --saturate / --no-saturate, when ovf_set */
    int ovf_set;
    double T;                   /* --max-ulp, when gated */
    int gated, json, mpfr_only, no_progress;
} ulp_opts;

/* One validation, as ulp_setup_job and cmd_ulp.c plan it. */
typedef struct {
    const fl_twin *impl;        /* --impl, or NULL: arrays */
    ulp_job j;
    char params[256];           /* the reference parameters as the report names them */
    ulp_sweep sw;               /* --impl: the elements (row-wise: rows * row_len of them) */
    ulp_rowgen rg;              /* row-wise --impl: the rows */
    ulp_row_save save;          /* --save */
    char source[600];           /* the report's "source" */
} ulp_plan;

/* 0 (FL_EXIT_OK) with *o filled in, or the exit status of a usage error (already reported). */
int ulp_parse_args(ulp_opts *o, int argc, char **argv);
/* The checks that need no file, and p's implementation, job and parameters.  0 or an exit status. */
int ulp_setup_job(ulp_plan *p, ulp_opts *o);

/* ---- the parts' entry points -------------------------------------------------------------------- */

int ulp_source_open(ulp_source *s, const char *cmd, int pattern_fmt, char *err, size_t errlen);
void ulp_source_close(ulp_source *s);
/* The value of input bits of a kind, as a double (exact). */
double ulp_bits_value(int kind, uint64_t b);
const char *ulp_kind_name(int kind);
/* Elements [lo, hi) of the arrays.  0, or -1 with err. */
int ulp_run_arrays(ulp_tctx *ctxs, const ulp_job *j, ulp_source *ins, ulp_source *outs, uint64_t lo, uint64_t hi,
                   ulp_progress *pg, int mpfr_only, char *err, size_t errlen);

void ulp_tctx_init(ulp_tctx *c, const ulp_job *j);
void ulp_tctx_clear(ulp_tctx *c, const ulp_job *j);
void ulp_set_input(mpfr_ptr x, int kind, uint64_t b);
/* The JSON report's version ("report_version"): 2 decides faithful and the histogram from the exact
   error and keeps the worst finite cases and the class mismatches as two lists. */
#define ULP_REPORT_VERSION 2

/* The report's case of one judged output (inputs left zero: the caller sets them). */
static inline fl_ulp_case ulp_case_of(const fl_ulp_verdict *v, uint64_t index, uint32_t y)
{
    fl_ulp_case c = { index, { 0 }, y, v->ref, v->ulp, v->cr, v->special, v->hist };
    return c;
}

int ulp_judge_mpfr(fl_ulp_verdict *v, ulp_tctx *c, const ulp_job *j, mpfr_srcptr const *x,
                   mpfr_srcptr const *const *rows, long row_j, uint32_t y);
void ulp_judge_add(ulp_tctx *c, const ulp_job *j, const uint64_t *in, uint32_t y, uint64_t index, int mpfr_only);

void ulp_run_sweep(ulp_tctx *ctxs, const ulp_job *j, const ulp_sweep *s, ulp_progress *pg, int mpfr_only);
int ulp_run_rows(ulp_tctx *ctxs, const ulp_job *j, const ulp_sweep *s, const ulp_rowgen *g, ulp_progress *pg,
                 ulp_row_save *sv, char *err, size_t errlen);

double ulp_now_s(void);
void ulp_progress_tick(ulp_progress *p, uint64_t n);
void ulp_progress_end(ulp_progress *p);

/* recheck: NULL, or the commands that re-check the worst finite error and the first class mismatch
   ("" where there is none). */
void ulp_emit_report(const fl_ulp_report *r, const ulp_meta *m, const char (*recheck)[1024], double T, int gated,
                     int json);

/* A report read back from the JSON of `ulp --json` (what --merge reads; the fuzz target's entry). */
typedef struct {
    json_t *root;       /* the parsed document: owns meta's strings and meta.shards */
    fl_ulp_report rep;  /* counts, histogram, maximum, exact sum, worst cases */
    ulp_meta meta;      /* function, format, overflow, inputs, source, params, row_len, shards */
} ulp_report_doc;

/* Parses the report in data[0, size) (JSON text; no NUL needed, any bytes accepted) and checks every
   field it reads: types; counts non-negative integers (int64) consistent with each other (parts of
   "count" at most "count", the histogram summing to it, "faithful" its buckets <= 1 ulp, the shards
   disjoint and covering it, the worst list min(count, 10) long and ordered, "max_ulp" in its top
   bucket and at the worst list's first finite case, the exact sum between max_ulp and count * max_ulp);
   errors on the 2^-20 grid, >= 0, below 2^300, or "inf" in the worst list; formats, functions and
   the overflow policy from the known lists; 1 .. FL_MAX_INPUTS inputs, as many in every worst case,
   each encoding within its format's bits; row_len (1 .. 2^24 - 1) exactly for row-wise functions.
   0 with *d filled in (release it with ulp_report_doc_free), or -1 with *d zeroed and err one line
   naming the field, e.g. "\"overflow\": missing". */
int ulp_report_parse(ulp_report_doc *d, const char *data, size_t size, char *err, size_t errlen);
void ulp_report_doc_free(ulp_report_doc *d);
/* `fp8lab ulp ... --merge FILES...`: argv[first..] are the files and the options that may follow them. */
int ulp_merge_main(int argc, char **argv, int first, int json, int gated, double T);

#endif /* FL_CMD_ULP_INTERNAL_H */
