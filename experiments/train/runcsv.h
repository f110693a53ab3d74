/* runcsv.h — reading the CSV files of a training run (metrics.csv, channels.csv, records.csv, ...):
 * a header line of column names, then rows of numbers, every line ending in a newline.  Damage is
 * an error naming the file and line: a missing or cut header, a row cut short (no newline), a field
 * count other than the header's, a field that is not a number.  Blank lines are skipped.
 */
#ifndef FL_RUNCSV_H
#define FL_RUNCSV_H

#include <stddef.h>
#include <stdio.h>

enum { FL_CSV_MAXF = 64 };

typedef struct {
    FILE *f;
    char path[4200];
    char *line, *hdr;
    size_t cap;
    long lineno;
    char *name[FL_CSV_MAXF]; /* the header's column names (into hdr) */
    char *fld[FL_CSV_MAXF];  /* the current row's fields (into line) */
    int nh;
    char *err;
    size_t errn;
} fl_csv;

/* Open dir/name and read its header.  0, or -1 with the reason in err. */
int fl_csv_open(fl_csv *c, const char *dir, const char *name, char *err, size_t errn);
void fl_csv_close(fl_csv *c);
/* The header positions of the k columns names into col; -1 (err) when one is missing. */
int fl_csv_need(fl_csv *c, const char *const *names, int *col, int k);
/* The next non-blank row: 1, 0 at the end, -1 (err) when it is damaged. */
int fl_csv_row(fl_csv *c);
/* Field j of the row as a number (nan and inf accepted: the caller decides), or as an integer in
   [lo, hi].  0, or -1 (err). */
int fl_csv_num(fl_csv *c, int j, double *v);
int fl_csv_int(fl_csv *c, int j, long lo, long hi, long *v);

/* A column of dir/name against its "step" column (metrics.csv's loss, lr, ...): the rows' steps and
   values into *step and *val (malloc'd, *n + 1 slots each, the caller frees them also on failure), the
   steps increasing strictly.  need, when not NULL, is a test every value passes, named by what (the
   message: "<file>:<line>: <col> <text> is not <what>").  0, or -1 with the reason in err: the file's
   damage (fl_csv_row), a missing column, a value failing need, steps not increasing, no data rows, out of
   memory. */
int fl_csv_series(const char *dir, const char *name, const char *col, int (*need)(double), const char *what,
                  long **step, double **val, long *n, char *err, size_t errn);

#endif /* FL_RUNCSV_H */
