/* test_py_fp8lab.c — runs tests/test_py_fp8lab.py, the tests of the Python module
 * experiments/python/fp8lab.py, under pytest, so that tests/run.sh counts it like any other test.
 *
 * The Python is the first of $PYTHON, python3 and /usr/bin/python3 that imports numpy and pytest
 * (Debian: apt-get install python3-numpy python3-pytest; .ci/deps.sh installs them).  Where none
 * does, it prints "SKIP: ..." and exits 77: skipped, never passed.  Otherwise it execs
 * `PY -m pytest -q tests/test_py_fp8lab.py` with experiments/python first on PYTHONPATH, whose exit
 * status is the test's (0 passed, else failed).
 * The CLI under test is $FP8LAB (tests/run.sh sets it to the build's fp8lab), else build/fp8lab. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

static const char *const test_file = "tests/test_py_fp8lab.py";

/* 1 if `py -c "import numpy, pytest"` succeeds (its output discarded). */
static int has_numpy_pytest(const char *py)
{
    const pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        const int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execlp(py, py, "-c", "import numpy, pytest", (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void)
{
    if (access(test_file, R_OK) != 0) {
        fprintf(stderr, "test_py_fp8lab: %s not found (run from the repository root)\n", test_file);
        return 1;
    }
    const char *env = getenv("PYTHON");
    const char *cands[3];
    int n = 0;
    if (env && *env)
        cands[n++] = env;
    cands[n++] = "python3";
    cands[n++] = "/usr/bin/python3";
    for (int i = 0; i < n; i++) {
        if (!has_numpy_pytest(cands[i]))
            continue;
        printf("test_py_fp8lab: %s -m pytest %s\n", cands[i], test_file);
        fflush(stdout);
        /* no __pycache__ or .pytest_cache left in the source tree */
        setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
        /* the module from this checkout, as `pip install ./experiments/python` would provide it */
        const char *pp = getenv("PYTHONPATH");
        char path[4096];
        snprintf(path, sizeof path, "experiments/python%s%s", pp && *pp ? ":" : "", pp && *pp ? pp : "");
        setenv("PYTHONPATH", path, 1);
        execlp(cands[i], cands[i], "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file, (char *)NULL);
        perror("test_py_fp8lab: exec");
        return 1;
    }
    printf("SKIP: no Python with numpy and pytest (tried");
    for (int i = 0; i < n; i++)
        printf("%s %s", i ? "," : "", cands[i]);
    printf("); Debian: apt-get install python3-numpy python3-pytest\n");
    return 77;
}
