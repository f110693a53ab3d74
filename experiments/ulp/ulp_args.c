/* ulp_args.c — the command line of `fp8lab ulp` into ulp_opts (one table of flags), then the checks
 * that need no file and the job they describe: the reference function, its evaluator (a derivative
 * for --wrt or a derivative twin), the output format and overflow policy, the reference parameters
 * and the fast path (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"

#include <omp.h>
#include <string.h>

static const char *const cmd = "ulp";

static int parse_range(uint64_t *lo, uint64_t *hi, const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return -1;
    char a[64];
    const size_t la = (size_t)(colon - s);
    if (la == 0 || la >= sizeof a)
        return -1;
    memcpy(a, s, la);
    a[la] = 0;
    unsigned long long x, y;
    if (fl_cli_parse_u64(&x, a) || fl_cli_parse_u64(&y, colon + 1) || y < x)
        return -1;
    *lo = x;
    *hi = y;
    return 0;
}

typedef enum {
    OPT_HELP, OPT_MERGE, OPT_LIST, OPT_FORMAT, OPT_INPUT_FORMAT, OPT_OUTPUT_FORMAT, OPT_INPUTS, OPT_OUTPUTS,
    OPT_TENSOR, OPT_IMPL, OPT_EXHAUSTIVE, OPT_RANGE, OPT_SAMPLE, OPT_SEED, OPT_THREADS, OPT_ROW_LEN, OPT_DIST,
    OPT_SAVE, OPT_INDEX_BASE, OPT_WRT, OPT_PARAM, OPT_SATURATE, OPT_NO_SATURATE, OPT_MAX_ULP, OPT_JSON,
    OPT_MPFR_ONLY, OPT_NO_PROGRESS
} opt_id;

static const struct {
    const char *name;
    opt_id id;
} flags[] = {
    { "--help", OPT_HELP }, { "-h", OPT_HELP }, { "--merge", OPT_MERGE }, { "--list", OPT_LIST },
    { "--format", OPT_FORMAT }, { "--input-format", OPT_INPUT_FORMAT }, { "--output-format", OPT_OUTPUT_FORMAT },
    { "--inputs", OPT_INPUTS }, { "--outputs", OPT_OUTPUTS }, { "--tensor", OPT_TENSOR }, { "--impl", OPT_IMPL },
    { "--exhaustive", OPT_EXHAUSTIVE }, { "--range", OPT_RANGE }, { "--sample", OPT_SAMPLE }, { "--seed", OPT_SEED },
    { "--threads", OPT_THREADS }, { "--row-len", OPT_ROW_LEN }, { "--dist", OPT_DIST }, { "--save", OPT_SAVE },
    { "--index-base", OPT_INDEX_BASE }, { "--wrt", OPT_WRT }, { "--param", OPT_PARAM },
    { "--saturate", OPT_SATURATE }, { "--no-saturate", OPT_NO_SATURATE }, { "--max-ulp", OPT_MAX_ULP },
    { "--json", OPT_JSON }, { "--mpfr-only", OPT_MPFR_ONLY }, { "--no-progress", OPT_NO_PROGRESS },
};

/* The flag's id, or -1 for anything else (FN, or an unknown option). */
static int flag_id(const char *a)
{
    for (size_t k = 0; k < FL_ARRAY_LEN(flags); k++)
        if (!strcmp(a, flags[k].name))
            return (int)flags[k].id;
    return -1;
}

/* --format, --input-format or --output-format FMT: any format but e8m0. */
static int take_format(ulp_opts *o, opt_id id, const char *a, const char *val)
{
    fl_format f;
    if (!val || fl_format_parse(&f, val))
        return fl_cli_usage_error(cmd, "%s needs a format name (formats: %s)", a, fl_format_names());
    if (f == FL_FMT_E8M0)
        return fl_cli_usage_error(cmd, "e8m0 (a scale format) is not supported by %s", a);
    *(id == OPT_FORMAT ? &o->fmt : id == OPT_INPUT_FORMAT ? &o->in_pat : &o->out_pat) = (int)f;
    return FL_EXIT_OK;
}

/* --inputs FILE or --outputs FILE, which becomes *last_file, or --tensor NAME, a tensor of *last_file. */
static int take_file(ulp_opts *o, opt_id id, const char *a, const char *val, ulp_source **last_file)
{
    if (id == OPT_TENSOR) {
        if (!val || !*last_file)
            return fl_cli_usage_error(cmd, "--tensor NAME follows the --inputs/--outputs file it names a tensor of");
        (*last_file)->tensor = val;
        return FL_EXIT_OK;
    }
    if (!val)
        return fl_cli_usage_error(cmd, "%s needs a file", a);
    if (id == OPT_INPUTS) {
        if (o->n_ins == FL_MAX_INPUTS)
            return fl_cli_usage_error(cmd, "at most %d --inputs", FL_MAX_INPUTS);
        *last_file = &o->ins[o->n_ins++];
    } else {
        if (o->have_out)
            return fl_cli_usage_error(cmd, "--outputs given twice");
        o->have_out = 1;
        *last_file = &o->outs;
    }
    (*last_file)->path = val;
    return FL_EXIT_OK;
}

/* --sample N, --seed N or --threads N. */
static int take_count(ulp_opts *o, opt_id id, const char *a, const char *val)
{
    unsigned long long v;
    if (id == OPT_THREADS && (!val || fl_cli_parse_u64(&v, val) || v < 1 || v > ULP_MAX_THREADS))
        return fl_cli_usage_error(cmd, "--threads needs an integer from 1 to %d%s%s%s", ULP_MAX_THREADS,
                                  val ? " (got '" : "", val ? val : "", val ? "')" : "");
    if (!val || fl_cli_parse_u64(&v, val))
        return fl_cli_usage_error(cmd, "%s needs a non-negative integer", a);
    if (id == OPT_SAMPLE) {
        o->nsample = v;
        o->sample_set = 1;
    } else if (id == OPT_SEED) {
        o->seed = v;
    } else {
        o->threads = (int)v;
    }
    return FL_EXIT_OK;
}

/* The row-wise options: --row-len N, --dist NAME or --save PREFIX. */
static int take_row_option(ulp_opts *o, opt_id id, const char *val)
{
    if (id == OPT_ROW_LEN) {
        unsigned long long v;
        if (!val || fl_cli_parse_u64(&v, val) || v == 0 || v >= (1ull << 24))
            return fl_cli_usage_error(cmd, "--row-len needs a row length 1 .. 2^24 - 1");
        o->row_len = (long)v;
    } else if (id == OPT_DIST) {
        o->dist = -1;
        for (int d = 0; val && d < DIST_COUNT; d++)
            if (!strcmp(val, ulp_dist_names[d]))
                o->dist = d;
        if (o->dist < 0)
            return fl_cli_usage_error(cmd, "--dist needs normal, heavy or cancel");
    } else {
        if (!val)
            return fl_cli_usage_error(cmd, "--save needs a file prefix");
        o->save_prefix = val;
    }
    return FL_EXIT_OK;
}

/* One flag `a` with the argument after it, val (NULL at the end of argv); *used = 1 when it takes val.
   *last_file is the --inputs/--outputs file a --tensor names a tensor of.  0 or a usage error. */
static int take_flag(ulp_opts *o, opt_id id, const char *a, const char *val, int *used, ulp_source **last_file)
{
    *used = 0;
    switch (id) {
    case OPT_HELP: o->help = 1; break;
    case OPT_MERGE: break; /* the caller notes where */
    case OPT_LIST: o->list = 1; break;
    case OPT_FORMAT:
    case OPT_INPUT_FORMAT:
    case OPT_OUTPUT_FORMAT:
        *used = 1;
        return take_format(o, id, a, val);
    case OPT_INPUTS:
    case OPT_OUTPUTS:
    case OPT_TENSOR:
        *used = 1;
        return take_file(o, id, a, val, last_file);
    case OPT_IMPL:
        if (!val)
            return fl_cli_usage_error(cmd, "--impl needs a name (see --list)");
        o->impl_name = val;
        *used = 1;
        break;
    case OPT_EXHAUSTIVE: o->exhaustive = 1; break;
    case OPT_RANGE:
        if (!val || parse_range(&o->lo, &o->hi, val))
            return fl_cli_usage_error(cmd, "--range needs LO:HI with LO <= HI%s%s%s", val ? " (got '" : "",
                                      val ? val : "", val ? "')" : "");
        o->range_set = 1;
        *used = 1;
        break;
    case OPT_SAMPLE:
    case OPT_SEED:
    case OPT_THREADS:
        *used = 1;
        return take_count(o, id, a, val);
    case OPT_ROW_LEN:
    case OPT_DIST:
    case OPT_SAVE:
        *used = 1;
        return take_row_option(o, id, val);
    case OPT_INDEX_BASE:
        /* a report's indices are JSON integers (int64): the arrays' elements end at 2^63 - 1 at most
           (checked against their count once they are open, cmd_ulp.c) */
        if (!val || fl_cli_parse_u64(&o->index_base, val) || o->index_base > (unsigned long long)INT64_MAX)
            return fl_cli_usage_error(cmd, "--index-base needs an integer from 0 to 2^63 - 1%s%s%s",
                                      val ? " (got '" : "", val ? val : "", val ? "')" : "");
        *used = 1;
        break;
    case OPT_WRT:
        if (!val)
            return fl_cli_usage_error(cmd, "--wrt needs an input name (x, g, u)");
        o->wrt = val;
        *used = 1;
        break;
    case OPT_PARAM:
        if (!val || !strchr(val, '=') || o->n_params == ULP_MAX_PARAMS)
            return fl_cli_usage_error(cmd, "--param needs NAME=VALUE");
        o->param_args[o->n_params++] = val;
        *used = 1;
        break;
    case OPT_SATURATE:
    case OPT_NO_SATURATE:
        o->ovf = id == OPT_SATURATE ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
        o->ovf_set = 1;
        break;
    case OPT_MAX_ULP:
        if (!val || fl_cli_parse_double(&o->T, val) || !(o->T >= 0))
            return fl_cli_usage_error(cmd, "--max-ulp needs a non-negative number");
        o->gated = 1;
        *used = 1;
        break;
    case OPT_JSON: o->json = 1; break;
    case OPT_MPFR_ONLY: o->mpfr_only = 1; break;
    case OPT_NO_PROGRESS: o->no_progress = 1; break;
    }
    return FL_EXIT_OK;
}

int ulp_parse_args(ulp_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->fmt = o->in_pat = o->out_pat = o->dist = -1;
    o->ovf = FL_OVF_SATURATE;
    ulp_source *last_file = NULL;
    /* --help ends the parse (it is answered whatever follows), --merge too (its files follow) */
    for (int i = 1; i < argc && !o->help && !o->merge; i++) {
        const char *a = argv[i];
        const int id = flag_id(a);
        if (id == OPT_MERGE) {
            o->merge = i;
        } else if (id >= 0) {
            int used;
            const int rc = take_flag(o, (opt_id)id, a, i + 1 < argc ? argv[i + 1] : NULL, &used, &last_file);
            if (rc != FL_EXIT_OK)
                return rc;
            i += used;
        } else if (a[0] == '-' && a[1]) {
            return fl_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (o->fn_name) {
            return fl_cli_usage_error(cmd, "unexpected argument '%s' (FN is '%s')", a, o->fn_name);
        } else {
            o->fn_name = a;
        }
    }
    return FL_EXIT_OK;
}

/* --impl NAME (the implementation found, FN and FMT defaulting to its own) or --inputs/--outputs:
   which options go with which. */
static int check_source(const fl_twin **impl, ulp_opts *o)
{
    *impl = NULL;
    if (!o->impl_name) {
        if (!o->n_ins || !o->have_out)
            return fl_cli_usage_error(cmd, "give --inputs and --outputs arrays, or --impl NAME (see --help)");
        if (o->exhaustive || o->sample_set)
            return fl_cli_usage_error(cmd, "--exhaustive and --sample go with --impl; for arrays use --range");
        return FL_EXIT_OK;
    }
    const fl_twin *t = fl_ulp_impl_find(o->impl_name);
    if (!t)
        return fl_cli_usage_error(cmd, "unknown implementation '%s' (see --list)", o->impl_name);
    if (o->n_ins || o->have_out)
        return fl_cli_usage_error(cmd, "--impl and --inputs/--outputs exclude each other");
    if (o->wrt)
        return fl_cli_usage_error(cmd, "--wrt goes with --inputs/--outputs (an implementation names its own)");
    if (o->index_base)
        return fl_cli_usage_error(cmd, "--index-base goes with --inputs/--outputs");
    if (!o->fn_name)
        o->fn_name = t->ref_fn;
    else if (strcmp(o->fn_name, t->ref_fn))
        return fl_cli_usage_error(cmd, "implementation '%s' computes %s, not %s", t->name, t->ref_fn, o->fn_name);
    if (o->fmt < 0)
        o->fmt = t->out_fmt;
    else if (o->fmt != (int)t->out_fmt)
        return fl_cli_usage_error(cmd, "implementation '%s' writes %s, not %s", t->name, fl_format_name(t->out_fmt),
                                  fl_format_name((fl_format)o->fmt));
    if (o->exhaustive + o->range_set + o->sample_set != 1)
        return fl_cli_usage_error(cmd, "--impl needs exactly one of --exhaustive, --range LO:HI, --sample N");
    *impl = t;
    return FL_EXIT_OK;
}

/* The reference parameters: an implementation's own ("name=value,...") first, then --param (which may
   override them), then the derivative's "d/dWRT"; p->params says them in the report. */
static int set_params(ulp_plan *p, const ulp_opts *o, const char *wrt)
{
    ulp_job *j = &p->j;
    const size_t n = sizeof p->params;
    fl_ref_params_init(&j->params, j->fn);
    if (p->impl && p->impl->ref_params && *p->impl->ref_params) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", p->impl->ref_params);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = 0;
            if (fl_ref_params_set(&j->params, tok, eq + 1))
                return fl_cli_usage_error(cmd, "implementation '%s' names a bad parameter '%s'", p->impl->name, tok);
            *eq = '=';
        }
        snprintf(p->params, n, "%s", p->impl->ref_params);
    }
    for (int k = 0; k < o->n_params; k++) {
        char name[64];
        const char *eq = strchr(o->param_args[k], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - o->param_args[k]), o->param_args[k]);
        if (fl_ref_params_set(&j->params, name, eq + 1))
            return fl_cli_usage_error(cmd, "bad parameter '%s' (%s takes: %s)", o->param_args[k], o->fn_name,
                                      *j->fn->params ? j->fn->params : "none");
        snprintf(p->params + strlen(p->params), n - strlen(p->params), "%s%s", *p->params ? "," : "", o->param_args[k]);
    }
    if (wrt)
        snprintf(p->params + strlen(p->params), n - strlen(p->params), "%sd/d%s", *p->params ? "," : "", wrt);
    return FL_EXIT_OK;
}

/* The job: function, evaluator, format, overflow policy, parameters, fast path. */
static int set_job(ulp_plan *p, const ulp_opts *o)
{
    ulp_job *j = &p->j;
    j->fn = fl_ref_lookup(o->fn_name);
    if (!j->fn)
        return fl_cli_usage_error(cmd, "unknown function '%s'", o->fn_name);
    const char *wrt = p->impl ? (p->impl->derivative ? p->impl->ref_wrt : NULL) : o->wrt;
    j->ev = fl_ref_find_eval(j->fn, wrt ? wrt : "");
    if (!j->ev)
        return fl_cli_usage_error(cmd, "%s has no derivative w.r.t. '%s'", o->fn_name, wrt);
    j->fmt = (fl_format)o->fmt;
    j->n_inputs = j->fn->n_inputs;
    const int rc = set_params(p, o, wrt);
    if (rc != FL_EXIT_OK)
        return rc;
    j->ovf = o->ovf_set ? o->ovf : fl_format_get(j->fmt)->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
    /* the fast path knows the functions without parameters, with their own inputs */
    j->fast = !*p->params && !j->fn->rowwise ? fl_fast_lookup(o->fn_name) : NULL;
    if (j->fast && (j->fast->eval ? 1 : 2) != j->fn->n_inputs)
        j->fast = NULL;
    fl_fast_fmt_init(&j->ff, j->fmt, j->ovf);
    return FL_EXIT_OK;
}

/* An implementation against its function: the same kind (elementwise or row-wise), inputs that the
   function or its derivative takes; and the row-wise options only with a row-wise implementation. */
static int check_impl(ulp_plan *p, const ulp_opts *o)
{
    const fl_twin *impl = p->impl;
    if (impl) {
        if (!p->j.fn->rowwise != !impl->rowwise)
            return fl_cli_usage_error(cmd, "implementation '%s' is %s, %s is not", impl->name,
                                      impl->rowwise ? "row-wise" : "elementwise", o->fn_name);
        p->j.n_inputs = impl->n_inputs; /* a derivative's evaluator may read more inputs than the value's */
        if (impl->n_inputs != p->j.ev->n_inputs && impl->n_inputs != p->j.fn->n_inputs)
            return fl_cli_usage_error(cmd, "implementation '%s' takes %d inputs, %s %d", impl->name, impl->n_inputs,
                                      o->fn_name, p->j.n_inputs);
    }
    if (!(impl && impl->rowwise) && (o->row_len || o->dist >= 0 || o->save_prefix))
        return fl_cli_usage_error(cmd, "--row-len, --dist and --save go with --impl of a row-wise implementation");
    return FL_EXIT_OK;
}

int ulp_setup_job(ulp_plan *p, ulp_opts *o)
{
    memset(p, 0, sizeof *p);
    int rc = check_source(&p->impl, o);
    if (rc != FL_EXIT_OK)
        return rc;
    if (!o->fn_name)
        return fl_cli_usage_error(cmd, "which function? (FN, e.g. silu)");
    if (o->out_pat >= 0 && o->fmt >= 0 && o->out_pat != o->fmt)
        return fl_cli_usage_error(cmd, "--output-format %s differs from --format %s",
                                  fl_format_name((fl_format)o->out_pat), fl_format_name((fl_format)o->fmt));
    if (o->fmt < 0)
        o->fmt = o->out_pat;
    if (o->fmt < 0)
        return fl_cli_usage_error(cmd, "--format FMT (the outputs' format) is required");
    rc = set_job(p, o);
    if (rc != FL_EXIT_OK)
        return rc;
    if (o->threads > 0) /* 0: --threads not given */
        omp_set_num_threads(o->threads);
    return check_impl(p, o);
}
