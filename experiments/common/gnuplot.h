/* gnuplot.h — running gnuplot on a script with no shell, every path and user string passed as data.
 *
 * The commands that plot (plot, attribute --plot, mechanism, demo) write a gnuplot script whose
 * program text is fixed: each path and title reaches it as an argument, ARG1..ARG9 of
 * `gnuplot -c SCRIPT ARG...` (at most 9: gnuplot drops the rest).  gnuplot never re-reads a
 * string variable's value as program text: no backtick substitution, no @macro expansion, no
 * escape sequences, whatever the bytes (checked on gnuplot 5.4 by tests/test_hostile_names.c).
 *
 * One hazard stays with the value: as a file name, gnuplot treats a leading '<' (`plot '<cmd'`,
 * `gnuplot -c '<cmd'`) and a leading '|' (`set output '|cmd'`) as a shell pipe, '-' as standard
 * input, '+' and '$NAME' as pseudo-files, '~' as the home folder.  fl_gnuplot_path writes "./"
 * before every relative path, so that a path can only name a file; every path handed to gnuplot
 * goes through it (the runner does so for the script itself).
 */
#ifndef FL_GNUPLOT_H
#define FL_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

enum { FL_GNUPLOT_MAXARGS = 9 };

/* path for gnuplot into buf (n bytes): itself when absolute, else "./" path.  0, or -1 when it does
   not fit. */
int fl_gnuplot_path(char *buf, size_t n, const char *path);

/* The script's first line: "# written by fp8lab WHO; run from the same folder with: gnuplot -c
   SCRIPT ARG...", the exact command fl_gnuplot_run runs, each word quoted for a POSIX shell ('...',
   a ' as '\''), or, when it holds a control character, ANSI-C quoted ($'...', which bash, zsh, ksh
   and POSIX.1-2024 sh take), so that the comment is one line and never ends in a backslash (gnuplot
   would continue it into the next line). */
void fl_gnuplot_comment(FILE *f, const char *who, const char *script, int nargs, const char *const *args);

/* Run `gnuplot -c SCRIPT ARG...` (fork + execvp, no shell; script through fl_gnuplot_path) and wait.
   gnuplot's standard error is read: its lines other than warnings are printed after "fp8lab WHO:
   gnuplot says:"; its standard output goes to /dev/null.  0 when gnuplot exited 0; else -1 after
   "fp8lab WHO: gnuplot not found (install gnuplot-nox: .ci/deps.sh)" (exec failed), or "fp8lab WHO:
   gnuplot failed on SCRIPT". */
int fl_gnuplot_run(const char *who, const char *script, int nargs, const char *const *args);

#endif /* FL_GNUPLOT_H */
