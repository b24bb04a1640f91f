/* SPDX-License-Identifier: MIT */
/*
 * A child for tests: reports what it was started with, on stdout.
 *   child-probe fds          its open fds, space-separated (the fd used to list them excluded)
 *   child-probe sigs         its SigBlk and SigIgn lines from /proc/self/status
 *   child-probe env NAME     NAME's value, or "(unset)"
 *   child-probe pid          its pid
 *   child-probe cwd          its working directory
 *   child-probe keyring      its session keyring's id and whether its user keyring is linked
 *                            into it: "ID linked|unlinked" (keyctl(2))
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
 * For the notify tests (sd_notify, SPEC §4):
 *   child-probe notify [--to ADDR] [--fork] [--count N] [--every MS] [--barrier]
 *                      [--then-pause] MSG
 *                            sends MSG ("\n" in it: a newline) as one datagram to ADDR
 *                            (default $NOTIFY_SOCKET; "@name" is abstract), N times
 *                            (default 1; 0: forever), MS ms apart; with --fork from a
 *                            child it forks (and waits for); with --barrier then waits,
 *                            as sd_notify_barrier() does, until the receiver has closed
 *                            the fd of a BARRIER=1 datagram (so it is alive while its
 *                            message is read); then prints "sent N PID" (PID: the
 *                            sender) and exits 0, or with --then-pause waits with
 *                            default dispositions
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/keyctl.h>

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

static const char *signal_name(int sig, char buf[static 24]) {
        if (sig < SIGRTMIN && sigabbrev_np(sig))
                return sigabbrev_np(sig);
        snprintf(buf, 24, "RTMIN+%d", sig - SIGRTMIN);
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
                char buf[24];
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

/* A datagram socket connected to addr ("@name": abstract), or -1. */
static int notify_connect(const char *addr) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n = addr ? strlen(addr) : 0;
        if (n < 2 || n >= sizeof sa.sun_path)
                return -1;
        memcpy(sa.sun_path, addr, n);
        if (addr[0] == '@')
                sa.sun_path[0] = '\0';
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        socklen_t len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n + (addr[0] != '@'));
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, len) < 0) {
                perror("child-probe notify: connect");
                return -1;
        }
        return fd;
}

/* BARRIER=1 with a pipe's write end; waits (5 s at most) for the receiver to close it. */
static int notify_barrier(int fd) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        char cbuf[CMSG_SPACE(sizeof(int))];
        memset(cbuf, 0, sizeof cbuf);
        struct iovec iov = { .iov_base = (void *) "BARRIER=1", .iov_len = 9 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &p[1], sizeof(int));
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        close(p[1]);
        struct pollfd pfd = { .fd = p[0], .events = POLLIN };
        int k = n < 0 ? -1 : poll(&pfd, 1, 5000);
        close(p[0]);
        if (k <= 0)
                fprintf(stderr, "child-probe notify: barrier not answered\n");
        return k > 0 ? 0 : -1;
}

static long notify_send(const char *addr, const char *msg, long count, long every_ms, int barrier) {
        int fd = notify_connect(addr);
        if (fd < 0)
                return -1;
        struct timespec gap = { every_ms / 1000, (every_ms % 1000) * 1000000L };
        long sent = 0;
        for (; count == 0 || sent < count; sent++) {
                if (sent > 0 && every_ms > 0)
                        nanosleep(&gap, NULL);
                if (send(fd, msg, strlen(msg), MSG_NOSIGNAL) < 0) {
                        perror("child-probe notify: send");
                        break;
                }
        }
        if (barrier && notify_barrier(fd) < 0)
                sent = -1;
        close(fd);
        return sent;
}

static int notify(int argc, char **argv) {
        const char *addr = getenv("NOTIFY_SOCKET"), *raw = NULL;
        long count = 1, every = 0;
        int fork_it = 0, then_pause = 0, barrier = 0;
        for (int i = 2; i < argc; i++) {
                if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
                        addr = argv[++i];
                else if (strcmp(argv[i], "--fork") == 0)
                        fork_it = 1;
                else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
                        count = atol(argv[++i]);
                else if (strcmp(argv[i], "--every") == 0 && i + 1 < argc)
                        every = atol(argv[++i]);
                else if (strcmp(argv[i], "--then-pause") == 0)
                        then_pause = 1;
                else if (strcmp(argv[i], "--barrier") == 0)
                        barrier = 1;
                else
                        raw = argv[i];
        }
        if (!raw || !addr)
                return 2;
        char msg[8192];
        size_t n = 0;
        for (const char *p = raw; *p && n < sizeof msg - 1; p++) {
                if (p[0] == '\\' && p[1] == 'n') {
                        msg[n++] = '\n';
                        p++;
                } else
                        msg[n++] = *p;
        }
        msg[n] = '\0';
        long sent;
        pid_t sender = getpid();
        if (fork_it) {
                int pfd[2];
                if (pipe(pfd) < 0)
                        return 1;
                pid_t c = fork();
                if (c == 0) {
                        long k = notify_send(addr, msg, count, every, barrier);
                        (void) !write(pfd[1], &k, sizeof k);
                        _exit(0);
                }
                close(pfd[1]);
                if (c < 0 || read(pfd[0], &sent, sizeof sent) != sizeof sent)
                        sent = -1;
                close(pfd[0]);
                waitpid(c, NULL, 0);
                sender = c;
        } else
                sent = notify_send(addr, msg, count, every, barrier);
        printf("sent %ld %d\n", sent, (int) sender);
        fflush(stdout);
        if (sent < 0)
                return 1;
        while (then_pause)
                pause();
        return 0;
}

static int keyring(void) {
        long id = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, (long) KEY_SPEC_SESSION_KEYRING, 0L);
        long user = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, (long) KEY_SPEC_USER_KEYRING, 1L);
        int32_t links[256];
        long n = syscall(SYS_keyctl, KEYCTL_READ, (long) KEY_SPEC_SESSION_KEYRING, links, sizeof links);
        if (id < 0 || user < 0 || n < 0)
                return 1;
        bool linked = false;
        for (long i = 0; i < n / 4 && i < 256; i++)
                linked = linked || links[i] == user;
        printf("%ld %s\n", id, linked ? "linked" : "unlinked");
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
        if (strcmp(argv[1], "cwd") == 0) {
                char buf[4096];
                if (!getcwd(buf, sizeof buf))
                        return 1;
                printf("%s\n", buf);
                return 0;
        }
        if (strcmp(argv[1], "keyring") == 0)
                return keyring();
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
        if (strcmp(argv[1], "notify") == 0)
                return notify(argc, argv);
        return 2;
}
