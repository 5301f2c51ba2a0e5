/* emu_test.h - what the emulator's own tests share (test_cuda_emu.cu,
 * test_cudnn_emu.cpp): one line per case, and cases that must stop the
 * process, run in a child. Header-only: each test is one program. */
#ifndef TITAN_TESTS_EMU_TEST_H
#define TITAN_TESTS_EMU_TEST_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

static int failures;

static void report(bool ok, const char *what, const std::string &detail = "") {
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail.empty() ? "" : ": ", detail.c_str());
    if (!ok) failures++;
}

/* runs fn in a child with stderr captured; true when it died by SIGABRT or
 * SIGSEGV and its stderr holds want; *said is the first line it wrote */
template <typename F>
static bool dies_saying(F fn, const char *want, std::string *said) {
    char path[] = "/tmp/emu_test.XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return false;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fn();
        _exit(0); /* it should not get here */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::string text;
    char buf[512];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, (size_t)n);
    close(fd);
    unlink(path);
    *said = text.substr(0, text.find('\n'));
    const bool died = WIFSIGNALED(status) &&
                      (WTERMSIG(status) == SIGABRT || WTERMSIG(status) == SIGSEGV);
    return died && text.find(want) != std::string::npos;
}

#endif
