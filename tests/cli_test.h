/* cli_test.h — running the fp8lab CLI from a test: spawn it with arguments (stdout and stderr to a
 * file), wait for it, and compare or search the files it wrote.  Include after check.h; set `cli`
 * (from $FP8LAB) before use. */
#ifndef FL_CLI_TEST_H
#define FL_CLI_TEST_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *cli;

/* cli = $FP8LAB, else build/fp8lab; it must be executable. */
static void cli_init(void)
{
    cli = getenv("FP8LAB");
    if (!cli || !*cli)
        cli = "build/fp8lab";
    CHECK(access(cli, X_OK) == 0, "no CLI at %s (set FP8LAB)", cli);
}

/* Run `cli args` through the shell (args: shell words), stdout and stderr captured into out (len - 1
   bytes at most, NUL-terminated; the rest is read and dropped, so that the CLI never dies of SIGPIPE).
   The exit status. */
static int run_sh(char *out, size_t len, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cli, args);
    FILE *p = popen(cmd, "r");
    CHECK(p, "popen %s", cmd);
    const size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    const int st = pclose(p);
    CHECK(WIFEXITED(st), "%s did not exit normally", cmd);
    return WEXITSTATUS(st);
}

/* Start cli with args (NULL-terminated): stdout to outfile, stderr to errfile (one file, written in
   order, when they are the same string). */
static pid_t spawn_out(const char *outfile, const char *errfile, const char *const *args)
{
    const pid_t p = fork();
    CHECK(p >= 0, "fork");
    if (p == 0) {
        const int fe = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int fo = strcmp(outfile, errfile) ? open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0644) : fe;
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fe, 2);
        dup2(fo, 1);
        const char *argv[64];
        int n = 0;
        argv[n++] = cli;
        for (int i = 0; args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    return p;
}

/* Start cli with args; stdout and stderr to errfile. */
static pid_t spawn(const char *errfile, const char *const *args) { return spawn_out(errfile, errfile, args); }

/* Run cli with args: stdout into outfile, stderr into errfile.  The exit status, or 128 + the signal
   that ended it. */
static int run_out(const char *outfile, const char *errfile, const char *const *args)
{
    int st;
    const pid_t p = spawn_out(outfile, errfile, args);
    CHECK(waitpid(p, &st, 0) == p, "waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run cli with args: stdout into dir/outname, stderr into dir/err.txt.  The exit status, as run_out. */
static int run_in_dir(const char *dir, const char *outname, const char *const *args)
{
    char out[256], err[256];
    snprintf(out, sizeof out, "%s/%s", dir, outname);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    return run_out(out, err, args);
}

/* Run cli with args; stdout and stderr into errfile. */
static int run(const char *errfile, const char *const *args) { return run_out(errfile, errfile, args); }

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    const long k = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)k + 1);
    CHECK(b && fread(b, 1, (size_t)k, f) == (size_t)k, "read %s", path);
    b[k] = 0;
    fclose(f);
    *n = (size_t)k;
    return b;
}

static void same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    CHECK(x && y, "missing %s or %s", a, b);
    CHECK(na == nb && !memcmp(x, y, na), "%s (%zu bytes) and %s (%zu bytes) differ", a, na, b, nb);
    free(x);
    free(y);
}

static int contains(const char *file, const char *needle)
{
    size_t n;
    char *t = slurp(file, &n);
    const int r = t && strstr(t, needle) != NULL;
    free(t);
    return r;
}

/* Start cli with args in a process group of its own (stdout and stderr to errfile), wait until the file
   `until` exists, then SIGKILL the whole group (the command's children too) and wait until none of the
   group is left (a run folder's lock goes with the last of them).  The group leader's wait status. */
static int spawn_killed_when(const char *errfile, const char *const *args, const char *until)
{
    const pid_t p = fork();
    CHECK(p >= 0, "fork");
    if (p == 0) {
        setpgid(0, 0);
        const int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, 1), dup2(fd, 2);
        const char *argv[64] = { cli };
        for (int i = 0; args[i] && i < 62; i++)
            argv[i + 1] = args[i];
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    setpgid(p, p);
    const struct timespec nap = { 0, 5000000 };
    for (int i = 0; i < 20000 && access(until, F_OK); i++)
        nanosleep(&nap, NULL);
    kill(-p, SIGKILL);
    int st;
    waitpid(p, &st, 0);
    for (int i = 0; i < 20000 && kill(-p, 0) == 0; i++)
        nanosleep(&nap, NULL);
    return st;
}

#endif /* FL_CLI_TEST_H */
