/* test_cli_convert_signals.c — `fp8lab convert` stopped mid-write leaves no temporary file behind
 * ($FP8LAB, else build/fp8lab; numerics/fl_io.h: the temporaries' registry and sweep).
 *
 * The input is a FIFO that announces a 64 MiB float32 array (16 Mi elements) and is fed 8 MiB, so
 * that convert has created OUT.tmp.PID.XXXXXX and written converted chunks into it, and then waits for
 * more: a signal arrives mid-write, every time, with no timing luck involved.
 *   SIGTERM, SIGINT, SIGHUP: convert dies of that same signal (re-raised after the cleanup), and no
 *     OUT.tmp.* and no OUT remain.
 *   SIGKILL: no handler runs, so OUT.tmp.PID.XXXXXX of the dead PID stays; the next convert to OUT
 *     removes it (its PID no longer exists), keeps the temporary of a live process (this test's PID)
 *     and an old-style name without a PID, and writes OUT.
 * fl_atomic_sweep itself: only BASE.tmp.PID.XXXXXX of BASE with a dead PID goes; other bases, other
 *   shapes of name and live PIDs stay.
 * Before the fix OUT.tmp.XXXXXX stayed after every one of the four signals. */
#include "check.h"
#include "fl_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static const char *cli;

static pid_t spawn_convert(const char *in, const char *out)
{
    char errfile[128];
    snprintf(errfile, sizeof errfile, "%s/err.txt", dir);
    const pid_t p = fork();
    CHECK(p >= 0, "fork");
    if (p == 0) {
        const int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(cli, cli, "convert", "--to", "e4m3", in, out, (char *)NULL);
        _exit(127);
    }
    return p;
}

/* Entries of dir whose name starts with prefix; the first one's name into first (if any). */
static int count_prefix(const char *prefix, char *first, size_t n)
{
    DIR *d = opendir(dir);
    CHECK(d, "opendir %s", dir);
    int k = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            if (!k && first)
                snprintf(first, n, "%s", e->d_name);
            k++;
        }
    closedir(d);
    return k;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* A .npy v1.0 header for float32 of shape (n,). */
static size_t npy_header(unsigned char *h, size_t n)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }", n);
    const size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64, hlen = total - 10;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (unsigned char)(hlen & 0xff);
    h[9] = (unsigned char)(hlen >> 8);
    memcpy(h + 10, dict, (size_t)len);
    memset(h + 10 + len, ' ', hlen - (size_t)len - 1);
    h[total - 1] = '\n';
    return total;
}

/* convert from a FIFO, stopped by sig once its temporary holds converted data.  Returns its PID
   (reaped). */
static pid_t convert_killed(int sig)
{
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/in.npy", dir);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    unlink(in);
    CHECK(mkfifo(in, 0600) == 0, "mkfifo %s", in);
    const pid_t pid = spawn_convert(in, out);
    int fd = -1;
    for (int t = 0; t < 10000 && fd < 0; t++) { /* non-blocking: fails (ENXIO) until convert opens it */
        fd = open(in, O_WRONLY | O_NONBLOCK);
        if (fd < 0)
            sleep_ms(1);
    }
    CHECK(fd >= 0, "convert never opened the FIFO");
    CHECK(fcntl(fd, F_SETFL, 0) == 0, "blocking writes");
    static unsigned char buf[1 << 20];
    const size_t n = (size_t)16 << 20; /* 64 MiB announced */
    const size_t h = npy_header(buf, n);
    CHECK(write(fd, buf, h) == (ssize_t)h, "header");
    float *x = (float *)buf;
    for (size_t i = 0; i < sizeof buf / 4; i++)
        x[i] = (float)i * 0.25f;
    for (int k = 0; k < 8; k++) /* 8 MiB: two of convert's 4 MiB chunks, read and converted */
        CHECK(write(fd, buf, sizeof buf) == (ssize_t)sizeof buf, "data");
    char tmp[256];
    int seen = 0;
    for (int t = 0; t < 10000 && !seen; t++) {
        seen = count_prefix("out.npy.tmp.", tmp, sizeof tmp);
        if (!seen)
            sleep_ms(1);
    }
    CHECK(seen == 1, "no temporary file appeared");
    struct stat st;
    char tp[512];
    snprintf(tp, sizeof tp, "%s/%s", dir, tmp);
    for (int t = 0; t < 10000 && (stat(tp, &st) != 0 || st.st_size < (1 << 20)); t++)
        sleep_ms(1);
    CHECK(stat(tp, &st) == 0 && st.st_size >= (1 << 20), "%s: no converted chunk written", tp);
    char want[64];
    snprintf(want, sizeof want, "out.npy.tmp.%ld.", (long)pid);
    CHECK(!strncmp(tmp, want, strlen(want)), "the temporary %s does not name its writer (%s)", tmp, want);
    CHECK(kill(pid, sig) == 0, "kill");
    int wst;
    CHECK(waitpid(pid, &wst, 0) == pid, "waitpid");
    close(fd);
    CHECK(WIFSIGNALED(wst) && WTERMSIG(wst) == sig, "convert did not die of signal %d (status 0x%x)", sig, wst);
    unlink(in);
    return pid;
}

int main(void)
{
    cli = getenv("FP8LAB");
    if (!cli || !*cli)
        cli = "build/fp8lab";
    CHECK(access(cli, X_OK) == 0, "no CLI at %s (set FP8LAB)", cli);
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "/tmp/fp8lab-convert-sig-XXXXXX");
    CHECK(mkdtemp(dir), "mkdtemp");

    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
    for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++) {
        convert_killed(sigs[k]);
        char left[256] = "";
        CHECK(count_prefix("out.npy.tmp", left, sizeof left) == 0, "signal %d left %s behind", sigs[k], left);
        CHECK(count_prefix("out.npy", NULL, 0) == 0, "signal %d: out.npy was written", sigs[k]);
    }

    /* SIGKILL: the temporary stays; the next run to the same OUT sweeps it */
    const pid_t dead = convert_killed(SIGKILL);
    char stale[256];
    CHECK(count_prefix("out.npy.tmp.", stale, sizeof stale) == 1, "SIGKILL: no temporary left to sweep");
    char live[128], old[128], p[512], in[128], out[128];
    snprintf(live, sizeof live, "%s/out.npy.tmp.%ld.abcdef", dir, (long)getpid());
    snprintf(old, sizeof old, "%s/out.npy.tmp.abcdef", dir);
    CHECK(close(open(live, O_WRONLY | O_CREAT, 0600)) == 0 && close(open(old, O_WRONLY | O_CREAT, 0600)) == 0,
          "decoys");
    snprintf(in, sizeof in, "%s/small.npy", dir);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    {
        static unsigned char buf[4096];
        const size_t h = npy_header(buf, 16);
        memset(buf + h, 0, 64);
        FILE *f = fopen(in, "wb");
        CHECK(f && fwrite(buf, 1, h + 64, f) == h + 64 && fclose(f) == 0, "write %s", in);
    }
    const pid_t q = spawn_convert(in, out);
    int wst;
    CHECK(waitpid(q, &wst, 0) == q && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the next convert failed");
    snprintf(p, sizeof p, "%s/%s", dir, stale);
    CHECK(access(p, F_OK) != 0, "the next convert kept %s of the dead process %ld", stale, (long)dead);
    CHECK(access(live, F_OK) == 0, "the next convert removed %s of a live process", live);
    CHECK(access(old, F_OK) == 0, "the next convert removed %s, whose writer it cannot know", old);
    CHECK(access(out, F_OK) == 0, "no %s", out);
    CHECK(count_prefix("out.npy.tmp.", NULL, 0) == 2, "temporaries other than the two decoys remain");

    /* the sweep alone, on names of a dead process (a child reaped) and a live one (this test) */
    const pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0)
        _exit(0);
    CHECK(waitpid(child, &wst, 0) == child, "waitpid");
    static const struct {
        const char *fmt;
        int dead, goes;
    } names[] = {
        { "o.tmp.%ld.abcdef", 1, 1 },  { "o.tmp.%ld.abcde", 1, 0 },  { "o.tmp.%ldx.abcdef", 1, 0 },
        { "oo.tmp.%ld.abcdef", 1, 0 }, { "o.tmp.%ld.abcdef.x", 1, 0 }, { "o.tmp.%ld.ABCDEF", 0, 0 },
    };
    char o_path[128];
    snprintf(o_path, sizeof o_path, "%s/o", dir);
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char name[64];
        snprintf(name, sizeof name, names[k].fmt, (long)(names[k].dead ? child : getpid()));
        snprintf(p, sizeof p, "%s/%s", dir, name);
        CHECK(close(open(p, O_WRONLY | O_CREAT, 0600)) == 0, "create %s", p);
    }
    CHECK(fl_atomic_sweep(o_path) == 1, "fl_atomic_sweep did not remove exactly one file");
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char name[64];
        snprintf(name, sizeof name, names[k].fmt, (long)(names[k].dead ? child : getpid()));
        snprintf(p, sizeof p, "%s/%s", dir, name);
        CHECK((access(p, F_OK) != 0) == names[k].goes, "fl_atomic_sweep: %s %s", name,
              names[k].goes ? "stayed" : "was removed");
    }

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm");
    PASS("test_cli_convert_signals");
}
