/* runcsv.c — reading a run's CSV files (runcsv.h). */
#include "runcsv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n)
        vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Split s at commas (trailing CR/LF removed) into out; the count, or -1 beyond FL_CSV_MAXF. */
static int split(char *s, char **out)
{
    s[strcspn(s, "\r\n")] = 0;
    int n = 0;
    for (;;) {
        if (n == FL_CSV_MAXF)
            return -1;
        out[n++] = s;
        char *c = strchr(s, ',');
        if (!c)
            return n;
        *c = 0;
        s = c + 1;
    }
}

void fl_csv_close(fl_csv *c)
{
    if (c->f)
        fclose(c->f);
    free(c->line);
    free(c->hdr);
    c->f = NULL;
    c->line = c->hdr = NULL;
}

/* Open dir/name and read its header. */
int fl_csv_open(fl_csv *c, const char *dir, const char *name, char *err, size_t errn)
{
    memset(c, 0, sizeof *c);
    c->err = err;
    c->errn = errn;
    if ((size_t)snprintf(c->path, sizeof c->path, "%s/%s", dir, name) >= sizeof c->path)
        return fail(err, errn, "%s/%s: path too long", dir, name);
    c->f = fopen(c->path, "r");
    if (!c->f)
        return fail(err, errn, "%s: cannot open: %s", c->path, strerror(errno));
    const ssize_t len = getline(&c->line, &c->cap, c->f);
    if (len < 0) {
        fl_csv_close(c);
        return fail(err, errn, "%s: empty file (no header line)", c->path);
    }
    if (c->line[len - 1] != '\n') {
        fl_csv_close(c);
        return fail(err, errn, "%s:1: the header line has no newline (the file is cut short)", c->path);
    }
    c->lineno = 1;
    c->hdr = strdup(c->line);
    if (!c->hdr || (c->nh = split(c->hdr, c->name)) < 0) {
        fl_csv_close(c);
        return fail(err, errn, "%s:1: header unreadable (more than %d columns?)", c->path, FL_CSV_MAXF);
    }
    return 0;
}

/* The header positions of the k columns names into col. */
int fl_csv_need(fl_csv *c, const char *const *names, int *col, int k)
{
    for (int j = 0; j < k; j++) {
        col[j] = -1;
        for (int h = 0; h < c->nh && col[j] < 0; h++)
            if (!strcmp(c->name[h], names[j]))
                col[j] = h;
        if (col[j] < 0)
            return fail(c->err, c->errn, "%s:1: header lacks the column '%s'", c->path, names[j]);
    }
    return 0;
}

/* Whether s is one whole number (nan and inf included: the caller decides). */
static int is_number(const char *s)
{
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    return end != s && !*end && !(errno == ERANGE && isfinite(v) && v != 0.0);
}

/* The next non-blank row: 1, 0 at the end, -1 when it is damaged: no newline at its end (a file cut
   short inside its last line), a field count not the header's, or a field that is not a number
   (every column of these files is numeric). */
int fl_csv_row(fl_csv *c)
{
    for (;;) {
        const ssize_t len = getline(&c->line, &c->cap, c->f);
        if (len < 0)
            return 0;
        c->lineno++;
        if (c->line[len - 1] != '\n')
            return fail(c->err, c->errn, "%s:%ld: the last line has no newline (the file is cut short)", c->path,
                        c->lineno);
        if (c->line[strspn(c->line, " \t\r\n")] == 0)
            continue;
        const int n = split(c->line, c->fld);
        if (n != c->nh)
            return fail(c->err, c->errn, "%s:%ld: %s%d fields, the header has %d", c->path, c->lineno,
                        n < 0 ? "more than " : "", n < 0 ? FL_CSV_MAXF : n, c->nh);
        for (int j = 0; j < n; j++)
            if (!is_number(c->fld[j]))
                return fail(c->err, c->errn, "%s:%ld: column '%s': bad number '%s'", c->path, c->lineno, c->name[j],
                            c->fld[j]);
        return 1;
    }
}

/* Field j as a number (nan and inf accepted: the caller decides). */
int fl_csv_num(fl_csv *c, int j, double *v)
{
    const char *s = c->fld[j];
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (end == s || *end || (errno == ERANGE && isfinite(*v) && *v != 0.0))
        return fail(c->err, c->errn, "%s:%ld: column '%s': bad number '%s'", c->path, c->lineno, c->name[j], s);
    return 0;
}

/* Field j as an integer in [lo, hi]. */
int fl_csv_int(fl_csv *c, int j, long lo, long hi, long *v)
{
    const char *s = c->fld[j];
    char *end;
    errno = 0;
    *v = strtol(s, &end, 10);
    if (end == s || *end || errno || *v < lo || *v > hi) {
        if (hi == LONG_MAX)
            return fail(c->err, c->errn, "%s:%ld: column '%s': '%s' is not an integer >= %ld", c->path, c->lineno,
                        c->name[j], s, lo);
        return fail(c->err, c->errn, "%s:%ld: column '%s': '%s' is not an integer in [%ld, %ld]", c->path, c->lineno,
                    c->name[j], s, lo, hi);
    }
    return 0;
}

int fl_csv_series(const char *dir, const char *name, const char *colname, int (*need)(double), const char *what,
                  long **step, double **val, long *n, char *err, size_t errn)
{
    const char *const cols[] = { "step", colname };
    fl_csv c;
    int col[2], rc;
    long cap = 0;
    *step = NULL;
    *val = NULL;
    *n = 0;
    if (fl_csv_open(&c, dir, name, err, errn))
        return -1;
    if (fl_csv_need(&c, cols, col, 2))
        goto bad;
    while ((rc = fl_csv_row(&c)) > 0) {
        long s;
        double v;
        if (fl_csv_int(&c, col[0], 0, LONG_MAX, &s) || fl_csv_num(&c, col[1], &v))
            goto bad;
        if (need && !need(v)) {
            fail(err, errn, "%s:%ld: %s %s is not %s", c.path, c.lineno, colname, c.fld[col[1]], what);
            goto bad;
        }
        if (*n && s <= (*step)[*n - 1]) {
            fail(err, errn, "%s:%ld: steps not increasing: step %ld after step %ld", c.path, c.lineno, s,
                 (*step)[*n - 1]);
            goto bad;
        }
        if (*n + 1 >= cap) {
            cap = cap ? 2 * cap : 1024;
            long *ms = realloc(*step, (size_t)cap * sizeof *ms);
            if (ms)
                *step = ms;
            double *mv = realloc(*val, (size_t)cap * sizeof *mv);
            if (mv)
                *val = mv;
            if (!ms || !mv) {
                fail(err, errn, "%s: out of memory", c.path);
                goto bad;
            }
        }
        (*step)[*n] = s;
        (*val)[(*n)++] = v;
    }
    if (rc < 0)
        goto bad;
    if (!*n) {
        fail(err, errn, "%s: no data rows", c.path);
        goto bad;
    }
    fl_csv_close(&c);
    return 0;
bad:
    fl_csv_close(&c);
    return -1;
}
