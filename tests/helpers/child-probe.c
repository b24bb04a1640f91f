/* SPDX-License-Identifier: MIT */
/*
 * A child for tests: reports what it was started with, on stdout.
 *   child-probe fds          its open fds, space-separated (the fd used to list them excluded)
 *   child-probe sigs         its SigBlk and SigIgn lines from /proc/self/status
 *   child-probe env NAME     NAME's value, or "(unset)"
 *   child-probe pid          its pid
 *   child-probe exit N       exits with N
 * For the entrypoint integration tests (tests/integration/):
 *   child-probe record OUT EXITSIG CODE DELAY_MS
 *                            blocks every catchable signal, prints "ready PID" on stdout,
 *                            then appends "sig PID NAME" to OUT ("-": stdout) for each
 *                            signal received; on EXITSIG (a name or number; 0: never) it
 *                            waits DELAY_MS, appends "exit PID CODE" and exits with CODE
 *   child-probe pause        prints "ready PID", then waits with default dispositions
 *   child-probe orphans N CODE
 *                            double-forks N orphans that exit at once, prints "spawned N",
 *                            then exits with CODE after a line (or EOF) on stdin
 *   child-probe activation   prints "pid=P LISTEN_PID=… LISTEN_FDS=… fds=…", then accepts
 *                            one connection on fd 3, writes "hello P" to it and exits 0
 * For the service integration tests:
 *   child-probe stamp FILE   appends its CLOCK_MONOTONIC time ("SEC.NSEC") to FILE, exits 0
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int list_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                return 1;
        int own = dirfd(d);
        const char *sep = "";
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.' || atoi(e->d_name) == own)
                        continue;
                printf("%s%s", sep, e->d_name);
                sep = " ";
        }
        printf("\n");
        closedir(d);
        return 0;
}

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        if (n > 0)
                (void) !write(fd, buf, (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
}

static int parse_signal(const char *s) {
        if (s[0] >= '0' && s[0] <= '9')
                return atoi(s);
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < SIGRTMIN; sig++)
                if (sigabbrev_np(sig) && strcasecmp(sigabbrev_np(sig), s) == 0)
                        return sig;
        return -1;
}

static const char *signal_name(int sig, char buf[static 16]) {
        if (sig < SIGRTMIN && sigabbrev_np(sig))
                return sigabbrev_np(sig);
        snprintf(buf, 16, "RTMIN+%d", sig - SIGRTMIN);
        return buf;
}

static int record(const char *out, const char *exit_sig, int code, int delay_ms) {
        int fd = strcmp(out, "-") == 0 ? STDOUT_FILENO : open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int stop = parse_signal(exit_sig);
        if (fd < 0 || stop < 0)
                return 2;
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);
        pid_t self = getpid();
        say(STDOUT_FILENO, "ready %d\n", (int) self);
        for (;;) {
                char buf[16];
                int sig = sigwaitinfo(&all, NULL);
                if (sig < 0)
                        continue;
                say(fd, "sig %d %s\n", (int) self, signal_name(sig, buf));
                if (sig != stop)
                        continue;
                struct timespec ts = { delay_ms / 1000, (long) (delay_ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
                /* Record what arrived meanwhile (a second SIGTERM, say). */
                struct timespec zero = { 0, 0 };
                while ((sig = sigtimedwait(&all, NULL, &zero)) > 0)
                        say(fd, "sig %d %s\n", (int) self, signal_name(sig, buf));
                say(fd, "exit %d %d\n", (int) self, code);
                return code;
        }
}

static int orphans(int n, int code) {
        for (int i = 0; i < n; i++) {
                pid_t p = fork();
                if (p < 0)
                        return 3;
                if (p == 0) {
                        if (fork() < 0)
                                _exit(3);
                        _exit(0); /* the grandchild exits too, orphaned */
                }
                int st;
                if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        return 3;
        }
        printf("spawned %d\n", n);
        fflush(stdout);
        char c;
        while (read(STDIN_FILENO, &c, 1) == 1 && c != '\n')
                ;
        return code;
}

static int activation(void) {
        const char *lp = getenv("LISTEN_PID"), *lf = getenv("LISTEN_FDS");
        printf("pid=%d LISTEN_PID=%s LISTEN_FDS=%s fds=", (int) getpid(), lp ? lp : "(unset)", lf ? lf : "(unset)");
        fflush(stdout);
        list_fds();
        fflush(stdout);
        int c = accept4(3, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return 4;
        say(c, "hello %d\n", (int) getpid());
        close(c);
        return 0;
}

static int sigs(void) {
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return 1;
        char line[256];
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "SigBlk:", 7) == 0 || strncmp(line, "SigIgn:", 7) == 0)
                        fputs(line, stdout);
        fclose(f);
        return 0;
}

static int stamp(const char *path) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return 1;
        say(fd, "%lld.%09ld\n", (long long) ts.tv_sec, ts.tv_nsec);
        close(fd);
        return 0;
}

int main(int argc, char **argv) {
        if (argc < 2)
                return 2;
        if (strcmp(argv[1], "fds") == 0)
                return list_fds();
        if (strcmp(argv[1], "sigs") == 0)
                return sigs();
        if (strcmp(argv[1], "env") == 0 && argc == 3) {
                const char *v = getenv(argv[2]);
                printf("%s\n", v ? v : "(unset)");
                return 0;
        }
        if (strcmp(argv[1], "pid") == 0) {
                printf("%d\n", (int) getpid());
                return 0;
        }
        if (strcmp(argv[1], "exit") == 0 && argc == 3)
                return atoi(argv[2]);
        if (strcmp(argv[1], "record") == 0 && argc == 6)
                return record(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
        if (strcmp(argv[1], "pause") == 0) {
                printf("ready %d\n", (int) getpid());
                fflush(stdout);
                for (;;)
                        pause();
        }
        if (strcmp(argv[1], "orphans") == 0 && argc == 4)
                return orphans(atoi(argv[2]), atoi(argv[3]));
        if (strcmp(argv[1], "activation") == 0)
                return activation();
        if (strcmp(argv[1], "stamp") == 0 && argc == 3)
                return stamp(argv[2]);
        return 2;
}
