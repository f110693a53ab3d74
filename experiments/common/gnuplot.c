/* gnuplot.c — see gnuplot.h. */
#include "gnuplot.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int fl_gnuplot_path(char *buf, size_t n, const char *path)
{
    const char *pre = path[0] == '/' ? "" : "./";
    return (size_t)snprintf(buf, n, "%s%s", pre, path) < n ? 0 : -1;
}

static void put_word(FILE *f, const char *s)
{
    int ctl = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        ctl |= *c < 0x20 || *c == 0x7f;
    if (!ctl) {
        const size_t n = strlen(s), len = fl_cli_sh_quote(NULL, 0, s, n);
        char *q = malloc(len + 1);
        if (q) {
            fl_cli_sh_quote(q, len + 1, s, n);
            fputs(q, f);
        }
        free(q);
        return;
    }
    fputs("$'", f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\%03o", *c);
        else if (*c == '\'' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else
            fputc(*c, f);
    fputc('\'', f);
}

void fl_gnuplot_comment(FILE *f, const char *who, const char *script, int nargs, const char *const *args)
{
    char sp[4200];
    fprintf(f, "# written by fp8lab %s; run from the same folder with: gnuplot -c ", who);
    put_word(f, fl_gnuplot_path(sp, sizeof sp, script) ? script : sp);
    for (int k = 0; k < nargs; k++) {
        fputc(' ', f);
        put_word(f, args[k]);
    }
    fputc('\n', f);
}

int fl_gnuplot_run(const char *who, const char *script, int nargs, const char *const *args)
{
    char sp[4200];
    const char *argv[FL_GNUPLOT_MAXARGS + 4];
    if (nargs > FL_GNUPLOT_MAXARGS || fl_gnuplot_path(sp, sizeof sp, script)) {
        fprintf(stderr, "fp8lab %s: %s: %s\n", who, script,
                nargs > FL_GNUPLOT_MAXARGS ? "more than 9 gnuplot arguments" : "path too long");
        return -1;
    }
    int n = 0;
    argv[n++] = "gnuplot";
    argv[n++] = "-c";
    argv[n++] = sp;
    for (int k = 0; k < nargs; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    /* out: gnuplot's stderr; ex: the errno of a failed exec (closed unwritten by a successful one) */
    int out[2], ex[2];
    if (pipe2(out, O_CLOEXEC))
        goto no_run;
    if (pipe2(ex, O_CLOEXEC)) {
        close(out[0]);
        close(out[1]);
        goto no_run;
    }
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        const int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        dup2(out[1], 2);
        execvp("gnuplot", (char *const *)argv);
        const int e = errno;
        if (write(ex[1], &e, sizeof e) < 0)
            _exit(126);
        _exit(127);
    }
    close(out[1]);
    close(ex[1]);
    if (pid < 0) {
        close(out[0]);
        close(ex[0]);
        goto no_run;
    }
    int e = 0;
    ssize_t got;
    while ((got = read(ex[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(ex[0]);
    FILE *g = fdopen(out[0], "r");
    if (g) {
        char *line = NULL;
        size_t cap = 0;
        int noisy = 0;
        while (getline(&line, &cap, g) > 0)
            if (!strstr(line, "warning") && !strstr(line, "Warning")) { /* empty log-scale ranges etc. */
                if (!noisy++)
                    fprintf(stderr, "fp8lab %s: gnuplot says:\n", who);
                fputs(line, stderr);
            }
        free(line);
        fclose(g);
    } else
        close(out[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            st = -1;
            break;
        }
    if (got == (ssize_t)sizeof e) {
        if (e == ENOENT)
            fprintf(stderr, "fp8lab %s: gnuplot not found (install gnuplot-nox: .ci/deps.sh)\n", who);
        else
            fprintf(stderr, "fp8lab %s: cannot run gnuplot: %s\n", who, strerror(e));
        return -1;
    }
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "fp8lab %s: gnuplot failed on %s\n", who, script);
        return -1;
    }
    return 0;
no_run:
    fprintf(stderr, "fp8lab %s: cannot run gnuplot: %s\n", who, strerror(errno));
    return -1;
}
