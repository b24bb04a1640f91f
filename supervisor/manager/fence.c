/* SPDX-License-Identifier: MIT */
/*
 * A singleton's fence (fence.h). The child runs only async-signal-safe calls
 * (tend is multi-threaded when it forks: the etcd store's I/O thread): poll,
 * read, clock_gettime, open, write, kill, _exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>

#include "fence.h"
#include "log.h"
#include "macro.h"

struct fence_msg {
        uint64_t deadline; /* CLOCK_MONOTONIC µs; 0: stand down; UINT64_MAX: none */
        int32_t pid;
        char cgroup[256];  /* "" : none */
};

struct fence {
        int fd; /* the pipe's write end */
        pid_t pid;
};

static uint64_t mono_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* SIGKILLs every pid listed in the cgroup's cgroup.procs; how many it read. Not
 * cgroup.kill: a cgroup once killed that way kills every process spawned into
 * it later (cgroup.h, unit_group_renew), and tend would not know to renew it. */
static int kill_listed(const char *procs) {
        char buf[4096];
        int fd = open(procs, O_RDONLY | O_CLOEXEC), n = 0;
        if (fd < 0)
                return 0;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        for (ssize_t i = 0; i < len;) {
                long pid = 0;
                while (i < len && buf[i] >= '0' && buf[i] <= '9')
                        pid = pid * 10 + (buf[i++] - '0');
                while (i < len && (buf[i] < '0' || buf[i] > '9'))
                        i++;
                if (pid > 0) {
                        (void) kill((pid_t) pid, SIGKILL);
                        n++;
                }
        }
        return n;
}

/* A stand-down (deadline 0) waiting in the pipe: tend holds the key again and
 * the unit's cgroup may hold its next run, which this fence must not kill. */
static bool stood_down(int fd) {
        struct fence_msg m;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        while (poll(&p, 1, 0) > 0 && read(fd, &m, sizeof m) == (ssize_t) sizeof m)
                if (m.deadline == 0)
                        return true;
        return false;
}

static void fence_kill(const struct fence_msg *m, int fd) {
        if (stood_down(fd))
                return;
        if (m->pid > 0) {
                (void) kill(-m->pid, SIGKILL); /* its session's process group */
                (void) kill(m->pid, SIGKILL);
        }
        if (m->cgroup[0]) {
                char path[sizeof m->cgroup + 16];
                size_t n = strlen(m->cgroup);
                memcpy(path, m->cgroup, n);
                memcpy(path + n, "/cgroup.procs", sizeof "/cgroup.procs");
                /* again while forks race the kill; bounded */
                for (int round = 0; round < 16 && kill_listed(path) > 0 && !stood_down(fd); round++)
                        (void) poll(NULL, 0, 5);
        }
}

__attribute__((noreturn)) static void fence_main(int fd) {
        struct fence_msg cur = { .deadline = UINT64_MAX };
        bool open_pipe = true;

        (void) prctl(PR_SET_NAME, "tend-fence");
        for (;;) {
                uint64_t now = mono_usec();
                if (cur.deadline != UINT64_MAX && now >= cur.deadline) {
                        fence_kill(&cur, open_pipe ? fd : -1);
                        _exit(0);
                }
                if (!open_pipe && cur.deadline == UINT64_MAX)
                        _exit(0); /* tend gone before it ever set a deadline */
                int timeout = cur.deadline == UINT64_MAX ? -1 : (int) ((cur.deadline - now + 999) / 1000);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, open_pipe ? 1 : 0, timeout);
                if (r <= 0)
                        continue;
                struct fence_msg m;
                ssize_t n = read(fd, &m, sizeof m);
                if (n == (ssize_t) sizeof m) {
                        if (m.deadline == 0)
                                _exit(0);
                        cur = m;
                } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                        open_pipe = false; /* tend died: the last deadline stands */
        }
}

int fence_new(const char *unit, struct fence **ret) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        pid_t pid = fork();
        if (pid < 0) {
                int k = negative_errno();
                close(p[0]);
                close(p[1]);
                return k;
        }
        if (pid == 0) {
                /* only its pipe: no other fence's write end, no socket of tend's */
                if (p[0] != 3 && dup2(p[0], 3) < 0)
                        _exit(1);
                (void) close_range(4, ~0U, 0);
                fence_main(3);
        }
        close(p[0]);
        (void) fcntl(p[1], F_SETFL, O_NONBLOCK);
        struct fence *f = malloc(sizeof(*f));
        if (!f) {
                (void) kill(pid, SIGKILL);
                close(p[1]);
                return -ENOMEM;
        }
        *f = (struct fence) { .fd = p[1], .pid = pid };
        log_debug("%s: fence %d forked", unit, (int) pid);
        *ret = f;
        return 0;
}

static int fence_send(struct fence *f, const struct fence_msg *m) {
        ssize_t n = write(f->fd, m, sizeof *m);
        return n == (ssize_t) sizeof *m ? 0 : n < 0 ? negative_errno() : -EIO;
}

int fence_set(struct fence *f, usec_t deadline, pid_t pid, const char *cgroup_dir) {
        struct fence_msg m = { .deadline = deadline == USEC_INFINITY ? UINT64_MAX : (deadline ?: 1), .pid = pid };
        if (cgroup_dir && strlen(cgroup_dir) < sizeof m.cgroup)
                strcpy(m.cgroup, cgroup_dir);
        return fence_send(f, &m);
}

struct fence *fence_free(struct fence *f) {
        if (!f)
                return NULL;
        struct fence_msg m = { .deadline = 0 };
        (void) fence_send(f, &m);
        close(f->fd);
        free(f);
        return NULL;
}

pid_t fence_pid(const struct fence *f) {
        return f->pid;
}

int fence_adopt(int fd, pid_t pid, struct fence **ret) {
        if (fd < 0 || pid <= 0)
                return -EINVAL;
        struct fence *f = malloc(sizeof(*f));
        if (!f)
                return -ENOMEM;
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
                int k = negative_errno();
                free(f);
                return k;
        }
        *f = (struct fence) { .fd = fd, .pid = pid };
        *ret = f;
        return 0;
}

int fence_fd(const struct fence *f) {
        return f->fd;
}
