/* cli.h — the helpers every command shares: exit statuses, usage errors, number parsing, shell
 * quoting, JSON printing.
 *
 * A command is `int fl_cmd_NAME(int argc, char **argv)`, declared in its subsystem's commands.h
 * (experiments/cli/, ulp/, train/, polyorder/), with argv[0] the command's name.  Exit statuses:
 * 0 success, 1 failure on valid usage (bad input file, I/O error), 2 bad usage (unknown flag, bad
 * value), 3 a gate that failed (ulp --max-ulp).
 */
#ifndef FL_CLI_H
#define FL_CLI_H

#include <stdio.h>

enum { FL_EXIT_OK = 0, FL_EXIT_FAIL = 1, FL_EXIT_USAGE = 2, FL_EXIT_GATE = 3 };

/* Print "fp8lab CMD: message" to stderr (printf-style) and return FL_EXIT_USAGE. */
int fl_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parse a whole-string integer/float; return 0 on success, -1 on junk or overflow. */
int fl_cli_parse_u64(unsigned long long *out, const char *s);
int fl_cli_parse_double(double *out, const char *s);

/* s (n bytes) as one word for a POSIX shell: in single quotes, where every byte stands for itself but
   ', which is written '\'' (close, an escaped quote, reopen).  Written as snprintf writes: at most
   cap - 1 bytes and a NUL into buf (buf may be NULL when cap is 0); returns the quoted length. */
size_t fl_cli_sh_quote(char *buf, size_t cap, const char *s, size_t n);

/* Print a command's JSON report on stdout: indented by 2, reals with `digits` significant digits, one
   trailing newline; the reference is released (json_t is jansson's; declared opaque here). */
struct json_t;
void fl_cli_json_print(struct json_t *root, int digits);

#endif /* FL_CLI_H */
