/* cli.c — helpers shared by the commands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>

int fl_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fp8lab %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'fp8lab %s --help')\n", cmd);
    return FL_EXIT_USAGE;
}

int fl_cli_parse_u64(unsigned long long *out, const char *s)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int fl_cli_parse_double(double *out, const char *s)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end)
        return -1;
    *out = v;
    return 0;
}

void fl_cli_json_print(json_t *root, int digits)
{
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(digits));
    puts(s ? s : "null");
    free(s);
    json_decref(root);
}

size_t fl_cli_sh_quote(char *buf, size_t cap, const char *s, size_t n)
{
    size_t w = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (w + 1 < cap)                                                                           \
            buf[w] = (c);                                                                          \
        w++;                                                                                       \
    } while (0)
    PUT('\'');
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\'') {
            PUT('\'');
            PUT('\\');
            PUT('\'');
            PUT('\'');
        } else
            PUT(s[i]);
    PUT('\'');
#undef PUT
    if (cap)
        buf[w < cap ? w : cap - 1] = 0;
    return w;
}
