/* SPDX-License-Identifier: MIT */
/*
 * The pidfd reaper (SPEC §2.2). Every child is a pidfd in one epoll set; it
 * is reaped with waitid(P_PIDFD) and signalled with pidfd_send_signal, so no
 * signal ever reaches a recycled pid (where a seccomp profile refuses
 * pidfd_send_signal, kill(2) on a child not yet reaped: process_kill_fallback). SIGCHLD is read only from our signalfd;
 * in orphan mode it triggers orphan passes that peek with WNOWAIT.
 *
 * Locking: one mutex per reaper protects the pid map, the epoll registrations
 * and every exit_process field but n_ref. The hub has its own lock and runs no
 * caller code, so publishing under our lock cannot deadlock.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hashmap.h"
#include "macro.h"
#include "reaper-internal.h"
#include "time-util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct pid_slot {
        uint64_t key; /* the pid, > 0 */
        struct exit_process *proc;
};
HASHMAP_DEFINE(pid_map, struct pid_slot);

struct exit_reaper {
        pthread_mutex_t lock;
        atomic_uint n_ref;     /* the owner's, plus one per exit_process */
        bool closed;           /* the owner freed it */
        struct exit_hub *hub;
        uint32_t flags;
        int epfd;
        int sigfd;
        bool clone3_refused;
        bool clone3_vfork_refused; /* clone3 refused CLONE_VM with a stack: cgroup children fork */
        bool clone3_vm_refused; /* clone3 refused CLONE_VM|CLONE_SETTLS: no shared-memory path */
        void *vfork_stack;     /* SPAWN_VFORK_STACK_SIZE bytes, mapped at the first vfork spawn */
        /* Reserved low fds, taken at creation while the table is small: /dev/null,
         * and three slots that hold /dev/null except during a vfork spawn, when
         * they hold the child's 0/1/2 (spawn_plan.fd_slots). Protected by lock. */
        int null_fd;
        int fd_slots[3];
        struct source src_signal;

        /* pid → unreaped process (common/hashmap.h). Room for each child is
         * reserved before its fork: nothing allocates once the child exists. */
        struct pid_map pids;

        /* The exec-ready list (EXIT_REAPER_EXEC_EVENTS). exec_ready_fd, an
         * eventfd in the epoll set, holds a count exactly while the list is
         * not empty: results queued outside dispatch (the vfork path knows
         * its child's at spawn, and no fd of the child ever becomes readable
         * for it) must wake the caller's loop too (SPEC §2.2). */
        struct exit_process *exec_head, *exec_tail;
        int exec_ready_fd;
        struct source src_exec_ready;
};

static atomic_bool reaper_exists;
static const char *missing_syscall; /* the call exit_reaper_new failed in */
/* 0, or the negative errno (-EPERM, -ENOSYS) pidfd_send_signal was first
 * refused with: a container's seccomp profile older than the call (docker <
 * 20.10). From then on our own unreaped children are signalled with kill(2). */
static atomic_int signal_refused;

static int sys_pidfd_open(pid_t pid, unsigned flags) {
        return (int) syscall(SYS_pidfd_open, pid, flags);
}

static int sys_pidfd_send_signal(int pidfd, int sig) {
        return (int) syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* ---- the pid map ---- */

/* Only the lookups and removals live here; the room for an insert is made by
 * pid_map_reserve() before the fork, and process_attach() puts. */
static struct exit_process *pid_lookup(const struct pid_map *m, pid_t pid) {
        struct pid_slot *s = pid_map_get(m, (uint64_t) pid);
        return s ? s->proc : NULL;
}

/* p is in the map: a live pid is there once. */
static void pid_unmap(struct pid_map *m, const struct exit_process *p) {
        struct pid_slot *s = pid_map_get(m, (uint64_t) p->pid);
        assert(s && s->proc == p);
        pid_map_remove(m, s);
}

/* ---- references ---- */

static void reaper_unref_internal(struct exit_reaper *r) {
        if (atomic_fetch_sub(&r->n_ref, 1) != 1)
                return;
        pthread_mutex_destroy(&r->lock);
        if (r->vfork_stack)
                munmap(r->vfork_stack, SPAWN_VFORK_STACK_SIZE);
        pid_map_done(&r->pids);
        exit_hub_unref(r->hub); /* NULL once exit_reaper_free ran */
        bool owner_gone = r->closed;
        free(r);
        if (!owner_gone)
                atomic_store(&reaper_exists, false); /* a failed exit_reaper_new */
}

_public_ struct exit_process *exit_process_ref(struct exit_process *p) {
        if (p)
                atomic_fetch_add(&p->n_ref, 1);
        return p;
}

_public_ struct exit_process *exit_process_unref(struct exit_process *p) {
        if (!p || atomic_fetch_sub(&p->n_ref, 1) != 1)
                return NULL;
        /* The last reference: the reaper holds none, so p is in no epoll set
         * and no list. */
        safe_close(p->exec_fd);
        safe_close(p->pidfd);
        /* p->vm still set: the reaper was freed before its child exec'd or
         * died, so the child may still run on the arena: it is left mapped
         * (a leak of one arena rather than a child on freed memory). */
        struct exit_reaper *r = p->reaper;
        free(p);
        if (r)
                reaper_unref_internal(r);
        return NULL;
}

/* ---- exec status ---- */

static void exec_fd_release(struct exit_reaper *r, struct exit_process *p) {
        if (p->exec_in_epoll) {
                (void) epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->exec_fd, NULL);
                p->exec_in_epoll = false;
        }
        /* A thread still polling it closes nothing: the last poller, or the
         * final unref, does. */
        if (p->exec_pollers == 0)
                p->exec_fd = safe_close(p->exec_fd);
}

static void exec_queue(struct exit_reaper *r, struct exit_process *p) {
        if (!(r->flags & EXIT_REAPER_EXEC_EVENTS) || p->exec_queued || r->closed)
                return;
        p->exec_queued = true;
        exit_process_ref(p);
        if (r->exec_tail)
                r->exec_tail->exec_next = p;
        else {
                r->exec_head = p;
                /* Cannot fail: the counter is 0 (the list was empty) and a
                 * write of 1 never overflows it. */
                (void) eventfd_write(r->exec_ready_fd, 1);
        }
        r->exec_tail = p;
}

/* Reads the exec status if it is there. Returns true once it is known. */
static bool exec_collect(struct exit_reaper *r, struct exit_process *p, bool queue) {
        if (p->exec_error != EXEC_UNKNOWN)
                return true;
        struct exec_failure f;
        ssize_t n = read(p->exec_fd, &f, sizeof f);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return false;
        if (n == (ssize_t) sizeof f) {
                p->exec_error = -f.error;
                p->exec_stage = f.stage;
        } else {
                /* EOF: the pipe closed at a successful execve. A short read
                 * cannot happen (8 bytes < PIPE_BUF); treat it as success. */
                p->exec_error = 0;
                p->exec_stage = EXIT_STAGE_EXEC;
                /* The shared-memory path: at EOF the child runs on its new
                 * memory (execve switches it before closing the
                 * close-on-exec fds) or has exited, so its arena is free. A
                 * failure record comes before the child's _exit: the arena
                 * waits for its reap. */
                if (n == 0)
                        p->vm = spawn_vm_free(p->vm);
        }
        exec_fd_release(r, p);
        if (queue)
                exec_queue(r, p);
        return true;
}

_public_ int exit_reaper_next_exec(struct exit_reaper *r, struct exit_process **ret) {
        if (!r || !ret)
                return -EINVAL;
        pthread_mutex_lock(&r->lock);
        struct exit_process *p = r->exec_head;
        if (p) {
                r->exec_head = p->exec_next;
                if (!r->exec_head) {
                        r->exec_tail = NULL;
                        eventfd_t drained;
                        (void) eventfd_read(r->exec_ready_fd, &drained); /* the fd is quiet again */
                }
                p->exec_next = NULL;
                p->exec_queued = false;
        }
        pthread_mutex_unlock(&r->lock);
        if (!p)
                return -EAGAIN;
        *ret = p; /* the list's reference passes to the caller */
        return 0;
}

_public_ int exit_process_exec_result(const struct exit_process *p, int *ret_stage) {
        if (!p)
                return -EINVAL;
        pthread_mutex_lock(&p->reaper->lock);
        int e = p->exec_error, stage = p->exec_stage;
        pthread_mutex_unlock(&p->reaper->lock);
        if (e == EXEC_UNKNOWN)
                return -EINPROGRESS;
        if (ret_stage)
                *ret_stage = stage;
        return e;
}

_public_ int exit_process_wait_exec(struct exit_process *p, int timeout_ms, int *ret_stage) {
        if (!p)
                return -EINVAL;
        struct exit_reaper *r = p->reaper;
        usec_t deadline = deadline_after_ms(timeout_ms);

        pthread_mutex_lock(&r->lock);
        while (!exec_collect(r, p, false)) {
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (deadline != USEC_INFINITY && now >= deadline) {
                        pthread_mutex_unlock(&r->lock);
                        return -ETIMEDOUT;
                }
                int wait_ms = deadline == USEC_INFINITY ? -1 : (int) ((deadline - now + 999) / 1000);
                struct pollfd pfd = { .fd = p->exec_fd, .events = POLLIN };
                p->exec_pollers++;
                pthread_mutex_unlock(&r->lock);
                (void) poll(&pfd, 1, wait_ms);
                pthread_mutex_lock(&r->lock);
                p->exec_pollers--;
        }
        if (p->exec_pollers == 0 && !p->exec_in_epoll)
                p->exec_fd = safe_close(p->exec_fd);
        int e = p->exec_error;
        if (ret_stage)
                *ret_stage = p->exec_stage;
        pthread_mutex_unlock(&r->lock);
        return e;
}

/* ---- processes ---- */

_public_ pid_t exit_process_pid(const struct exit_process *p) {
        return p ? p->pid : -EINVAL;
}

_public_ exit_id_t exit_process_id(const struct exit_process *p) {
        return p ? p->id : 0;
}

_public_ int exit_process_pidfd(const struct exit_process *p) {
        return p ? p->pidfd : -EINVAL;
}

static bool signal_refusal(int error) {
        return error == -EPERM || error == -ENOSYS;
}

/* pidfd_send_signal refused by a seccomp profile: kill(2) is safe for our own
 * child while it is unreaped, because its pid cannot be recycled before we
 * reap it, and we reap only under r->lock, which is held here. A closed
 * reaper reaps nothing (another could reap the pid as an orphan): refused. */
static int process_kill_fallback(struct exit_process *p, int sig, int error) {
        struct exit_reaper *r = p->reaper;
        if (!r)
                return error;
        pthread_mutex_lock(&r->lock);
        int k = error;
        if (atomic_load(&p->reaped))
                k = -ESRCH;
        else if (!r->closed)
                k = kill(p->pid, sig) < 0 ? negative_errno() : 0;
        pthread_mutex_unlock(&r->lock);
        return k;
}

_public_ int exit_process_signal(struct exit_process *p, int sig) {
        if (!p || sig < 0 || sig >= NSIG)
                return -EINVAL;
        if (atomic_load(&p->reaped))
                return -ESRCH;
        int error = atomic_load(&signal_refused);
        if (error == 0) {
                /* Even racing the reap, the pidfd names this process only: the
                 * kernel answers ESRCH once it is reaped. */
                if (sys_pidfd_send_signal(p->pidfd, sig) == 0)
                        return 0;
                error = negative_errno();
                if (!signal_refusal(error))
                        return error;
                int none = 0;
                (void) atomic_compare_exchange_strong(&signal_refused, &none, error);
        }
        return process_kill_fallback(p, sig, error);
}

_public_ int exit_process_signal_refused(void) {
        return atomic_load(&signal_refused);
}

static struct exit_process *process_new(struct exit_reaper *r) {
        struct exit_process *p = calloc(1, sizeof *p);
        if (!p)
                return NULL;
        atomic_init(&p->n_ref, 1);
        p->pidfd = -1;
        p->exec_fd = -1;
        p->exec_error = EXEC_UNKNOWN;
        p->src_pidfd = (struct source) { SOURCE_PIDFD, p };
        p->src_exec = (struct source) { SOURCE_EXEC, p };
        return p;
}

/* Binds p (holding pid and pidfd) to the reaper: the caller holds the lock and
 * has reserved p->id and map room, so only the epoll registrations can fail;
 * on failure they are undone and the caller disposes of p and its id. */
static int process_attach(struct exit_reaper *r, struct exit_process *p) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->src_pidfd };
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->pidfd, &ev) < 0)
                return negative_errno();
        if (p->exec_fd >= 0) {
                ev.data.ptr = &p->src_exec;
                if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->exec_fd, &ev) < 0) {
                        int k = negative_errno();
                        (void) epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
                        return k;
                }
                p->exec_in_epoll = true;
        }
        p->pidfd_in_epoll = true;
        /* Cannot fail: the id is reserved and a live pid is unique. */
        int k = exit_hub_attach(r->hub, p->id, p->pid);
        assert(k == 0);
        (void) k;
        (void) pid_map_put(&r->pids, (struct pid_slot) { .key = (uint64_t) p->pid, .proc = p });
        p->reaper = r;
        atomic_fetch_add(&r->n_ref, 1);
        exit_process_ref(p); /* the reaper's, until reaped */
        return 0;
}

/* Publishes p's exit from a waitid siginfo and drops the reaper's reference. */
static int process_reaped(struct exit_reaper *r, struct exit_process *p, const siginfo_t *si) {
        struct exit_reason reason;
        int k = exit_reason_from_siginfo(si->si_code, si->si_status, &reason);
        if (k < 0)
                return k;
        atomic_store(&p->reaped, true);
        if (p->pidfd_in_epoll) {
                (void) epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
                p->pidfd_in_epoll = false;
        }
        pid_unmap(&r->pids, p);
        p->vm = spawn_vm_free(p->vm); /* the child is gone: nothing runs on its arena */
        /* The child is gone, so its end of the exec pipe is closed: the status
         * is readable now, and known before anyone sees the exit. */
        (void) exec_collect(r, p, true);
        k = exit_hub_publish(r->hub, p->id, &reason);
        exit_process_unref(p);
        return k < 0 ? k : 1;
}

/* Reaps p if it has exited. Returns 1 if reaped, 0 if still running. */
static int process_try_reap(struct exit_reaper *r, struct exit_process *p) {
        siginfo_t si = { 0 };
        if (waitid((idtype_t) P_PIDFD, (id_t) p->pidfd, &si, WEXITED | WNOHANG) < 0)
                return errno == EINTR ? 0 : negative_errno();
        if (si.si_pid == 0)
                return 0;
        return process_reaped(r, p, &si);
}

/* ---- orphans ---- */

/* SPEC §2.2: peek at any zombie; a tracked one is reaped through its pidfd as
 * that child's exit, any other with P_PID as an orphan; repeat until none is
 * left, because SIGCHLD coalesces. */
static int orphan_pass(struct exit_reaper *r) {
        int n = 0;
        for (;;) {
                siginfo_t si = { 0 };
                if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == ECHILD ? n : negative_errno();
                }
                if (si.si_pid == 0)
                        return n;

                struct exit_process *p = pid_lookup(&r->pids, si.si_pid);
                int k;
                if (p)
                        k = process_try_reap(r, p);
                else {
                        siginfo_t reaped = { 0 };
                        if (waitid(P_PID, (id_t) si.si_pid, &reaped, WEXITED | WNOHANG) < 0 || reaped.si_pid == 0)
                                continue;
                        struct exit_reason reason;
                        k = exit_reason_from_siginfo(reaped.si_code, reaped.si_status, &reason);
                        if (k >= 0)
                                k = exit_hub_publish_orphan(r->hub, reaped.si_pid, &reason, NULL);
                        k = k < 0 ? k : 1;
                }
                if (k < 0)
                        return k;
                n += k;
        }
}

/* ---- the reaper ---- */

/* Names the call a failed exit_reaper_new failed in; returns error. */
static int failed_in(const char *call, int error) {
        missing_syscall = call;
        return error;
}

static int probe_kernel(void) {
        int fd = sys_pidfd_open(getpid(), 0);
        if (fd < 0)
                return failed_in("pidfd_open", negative_errno());
        _cleanup_close_ int pidfd = fd;
        /* Signalling ourselves is always allowed: EPERM or ENOSYS (with
         * pidfd_open present) is a seccomp profile. Not fatal: children are
         * then signalled with kill(2) (exit_process_signal). */
        if (sys_pidfd_send_signal(pidfd, 0) < 0) {
                int error = negative_errno();
                if (signal_refusal(error))
                        atomic_store(&signal_refused, error);
        }
        siginfo_t si;
        if (waitid((idtype_t) P_PIDFD, (id_t) pidfd, &si, WEXITED | WNOHANG) < 0 && errno == EINVAL)
                return failed_in("waitid(P_PIDFD)", -ENOSYS);
        if (close_range(~0U, ~0U, 0) < 0 && errno == ENOSYS)
                return failed_in("close_range", -ENOSYS);
        return 0;
}

_public_ const char *exit_reaper_missing_syscall(void) {
        return missing_syscall;
}

static int reaper_init_signals(struct exit_reaper *r) {
        /* An inherited SIG_IGN or SA_NOCLDWAIT would make the kernel discard
         * every exit status. */
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        if (sigaction(SIGCHLD, &dfl, NULL) < 0)
                return failed_in("rt_sigaction", negative_errno());
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        int k = pthread_sigmask(SIG_BLOCK, &chld, NULL);
        if (k != 0)
                return failed_in("rt_sigprocmask", -k);
        r->sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        if (r->sigfd < 0)
                return failed_in("signalfd4", negative_errno());
        r->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (r->epfd < 0)
                return failed_in("epoll_create1", negative_errno());
        r->src_signal = (struct source) { SOURCE_SIGNAL, NULL };
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &r->src_signal };
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->sigfd, &ev) < 0)
                return failed_in("epoll_ctl", negative_errno());
        if (r->flags & EXIT_REAPER_EXEC_EVENTS) {
                r->exec_ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (r->exec_ready_fd < 0)
                        return failed_in("eventfd2", negative_errno());
                r->src_exec_ready = (struct source) { SOURCE_EXEC_READY, NULL };
                ev.data.ptr = &r->src_exec_ready;
                if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->exec_ready_fd, &ev) < 0)
                        return failed_in("epoll_ctl", negative_errno());
        }
        if ((r->flags & EXIT_REAPER_ORPHANS) && getpid() != 1 &&
            prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return failed_in("prctl(PR_SET_CHILD_SUBREAPER)", negative_errno());
        return 0;
}

static void release_fd_slots(struct exit_reaper *r) {
        r->null_fd = safe_close(r->null_fd);
        for (int i = 0; i < 3; i++)
                r->fd_slots[i] = safe_close(r->fd_slots[i]);
}

/* Without slots (an fd limit hit) spawns still work: they copy and close
 * the caller's whole fd table, as the other paths do. Never 0/1/2, which
 * the caller may have closed and will reopen. */
static void reserve_fd_slots(struct exit_reaper *r) {
        r->null_fd = r->fd_slots[0] = r->fd_slots[1] = r->fd_slots[2] = -1;
        if (!spawn_vfork_available() || (r->flags & EXIT_REAPER_NO_VFORK))
                return;
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return;
        r->null_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        for (int i = 0; i < 3 && r->null_fd >= 0; i++)
                r->fd_slots[i] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        if (r->fd_slots[2] < 0)
                release_fd_slots(r);
}

/* Puts the plan's sources of 0/1/2 into the slots; false (slots unchanged
 * or back on /dev/null) when a source is not open. */
static bool fd_slots_fill(struct exit_reaper *r, struct spawn_plan *plan) {
        if (r->fd_slots[0] < 0 || !spawn_plan_slots_ok(plan))
                return false;
        for (int i = 0; i < 3; i++)
                if (dup3(plan->src_fds[i], r->fd_slots[i], O_CLOEXEC) < 0) {
                        for (int j = 0; j < i; j++)
                                (void) dup3(r->null_fd, r->fd_slots[j], O_CLOEXEC);
                        return false;
                }
        memcpy(plan->fd_slots, r->fd_slots, sizeof plan->fd_slots);
        return true;
}

/* The child has exec'd or died: the slots let go of its sources (a pipe's
 * write end held here would keep its reader from ever seeing EOF). */
static void fd_slots_clear(struct exit_reaper *r, struct spawn_plan *plan) {
        if (plan->fd_slots[0] < 0)
                return;
        for (int i = 0; i < 3; i++) {
                (void) dup3(r->null_fd, r->fd_slots[i], O_CLOEXEC);
                plan->fd_slots[i] = -1;
        }
}

_public_ int exit_reaper_new(struct exit_hub *hub, uint32_t flags, struct exit_reaper **ret) {
        if (!hub || !ret || (flags & ~(uint32_t) (EXIT_REAPER_ORPHANS | EXIT_REAPER_NO_CLONE3 | EXIT_REAPER_EXEC_EVENTS |
                                          EXIT_REAPER_NO_VFORK | EXIT_REAPER_NO_CLONE_VM)))
                return -EINVAL;
        missing_syscall = NULL;
        int k = probe_kernel();
        if (k < 0)
                return k;
        if (atomic_exchange(&reaper_exists, true))
                return -EBUSY;

        struct exit_reaper *r = calloc(1, sizeof *r);
        if (!r) {
                atomic_store(&reaper_exists, false);
                return -ENOMEM;
        }
        pthread_mutex_init(&r->lock, NULL);
        atomic_init(&r->n_ref, 1);
        r->hub = exit_hub_ref(hub);
        r->flags = flags;
        r->epfd = r->sigfd = r->exec_ready_fd = -1;
        r->clone3_refused = flags & EXIT_REAPER_NO_CLONE3;
        reserve_fd_slots(r);

        k = reaper_init_signals(r);
        if (k < 0) {
                safe_close(r->epfd);
                safe_close(r->sigfd);
                safe_close(r->exec_ready_fd);
                release_fd_slots(r);
                reaper_unref_internal(r);
                return k;
        }
        *ret = r;
        return 0;
}

_public_ struct exit_reaper *exit_reaper_free(struct exit_reaper *r) {
        if (!r)
                return NULL;
        pthread_mutex_lock(&r->lock);
        r->closed = true;
        /* Live children keep running; their handles stay valid for signalling. */
        for (struct pid_slot *s = NULL; (s = pid_map_next(&r->pids, s));) {
                struct exit_process *p = s->proc;
                p->pidfd_in_epoll = p->exec_in_epoll = false;
                exit_process_unref(p);
        }
        pid_map_clear(&r->pids);
        while (r->exec_head) {
                struct exit_process *p = r->exec_head;
                r->exec_head = p->exec_next;
                p->exec_queued = false;
                exit_process_unref(p);
        }
        r->exec_tail = NULL;
        r->epfd = safe_close(r->epfd);
        r->sigfd = safe_close(r->sigfd);
        r->exec_ready_fd = safe_close(r->exec_ready_fd);
        release_fd_slots(r);
        /* Closed: nothing is published any more, so the hub's owner reference
         * goes now, not when the last process handle does; and a new reaper
         * may be created although handles of this one are still held. */
        struct exit_hub *hub = TAKE_PTR(r->hub);
        atomic_store(&reaper_exists, false);
        pthread_mutex_unlock(&r->lock);
        exit_hub_unref(hub);
        reaper_unref_internal(r);
        return NULL;
}

_public_ int exit_reaper_fd(const struct exit_reaper *r) {
        return r ? r->epfd : -EINVAL;
}

static void drain_signalfd(struct exit_reaper *r) {
        struct signalfd_siginfo si[16];
        /* A read returns every signal queued that fits: a short one drained it. */
        while (read(r->sigfd, si, sizeof si) == (ssize_t) sizeof si)
                ;
}

_public_ int exit_reaper_dispatch(struct exit_reaper *r) {
        if (!r)
                return -EINVAL;
        pthread_mutex_lock(&r->lock);
        int n = 0, k = 0;
        bool sigchld = false;
        /* A failure to reap one child is retried at its next readiness; only
         * epoll and orphan-pass failures are reported. */
        struct epoll_event ev[64];
        for (;;) {
                int m = epoll_wait(r->epfd, ev, (int) ELEMENTSOF(ev), 0);
                if (m < 0) {
                        if (errno == EINTR)
                                continue;
                        k = negative_errno();
                        break;
                }
                for (int i = 0; i < m; i++) {
                        struct source *s = ev[i].data.ptr;
                        if (s->type == SOURCE_SIGNAL) {
                                drain_signalfd(r);
                                sigchld = true;
                        } else if (s->type == SOURCE_EXEC) {
                                (void) exec_collect(r, s->process, true);
                        } else if (s->type == SOURCE_EXEC_READY) {
                                /* Stays readable until the caller pops the last
                                 * result (exit_reaper_next_exec): nothing to do here. */
                        } else if (s->process->pidfd_in_epoll) {
                                /* An orphan pass earlier in this batch may have reaped it. */
                                int reaped = process_try_reap(r, s->process);
                                if (reaped > 0)
                                        n += reaped;
                        }
                }
                if (m < (int) ELEMENTSOF(ev))
                        break;
        }
        if (sigchld && (r->flags & EXIT_REAPER_ORPHANS)) {
                k = orphan_pass(r);
                if (k > 0)
                        n += k;
        }
        pthread_mutex_unlock(&r->lock);
        return k < 0 ? k : n;
}

/* ---- spawn and track ---- */

static int exec_pipe_open(struct exit_process *p, struct spawn_plan *plan) {
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0)
                return negative_errno();
        p->exec_fd = pipefd[0];
        plan->status_fd = pipefd[1];
        return 0;
}

static int vfork_stack_get(struct exit_reaper *r) {
        if (r->vfork_stack)
                return 0;
        void *stack = mmap(NULL, SPAWN_VFORK_STACK_SIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED)
                return negative_errno();
        r->vfork_stack = stack;
        return 0;
}

/* The vfork path: the exec status is known on return; queue its event now. */
static pid_t spawn_vfork_known(struct exit_reaper *r, struct exit_process *p, struct spawn_plan *plan) {
        struct exec_failure f;
        bool slots = fd_slots_fill(r, plan);
        pid_t pid = spawn_vfork(plan, r->vfork_stack, &p->pidfd, &f);
        if (slots)
                fd_slots_clear(r, plan);
        if (pid < 0)
                return pid;
        p->exec_error = -f.error;
        p->exec_stage = f.error ? f.stage : EXIT_STAGE_EXEC;
        exec_queue(r, p);
        return pid;
}

static bool vfork_refused(pid_t pid) {
        return pid == -ENOSYS || pid == -EPERM || pid == -EINVAL || pid == -E2BIG;
}

/* Disposes of a child we could not bind: it is ours and unreaped, so its
 * pidfd names it alone. */
static void child_discard(struct exit_process *p) {
        siginfo_t si;
        /* Not yet reaped (we wait for it below): its pid cannot be recycled. */
        if (sys_pidfd_send_signal(p->pidfd, SIGKILL) < 0)
                (void) kill(p->pid, SIGKILL);
        (void) waitid((idtype_t) P_PIDFD, (id_t) p->pidfd, &si, WEXITED);
        p->vm = spawn_vm_free(p->vm);
}

/* Whether this spawn takes the shared-memory path (docs/reaping.md): a
 * plan that does not vfork, whose hook (if any) is declared safe on shared
 * memory, where clone3 with CLONE_VM has not been refused. */
static bool spawn_vm_wanted(const struct exit_reaper *r, const struct spawn_plan *plan) {
        return !(r->flags & (EXIT_REAPER_NO_CLONE_VM | EXIT_REAPER_NO_CLONE3)) && !r->clone3_refused &&
               !r->clone3_vm_refused && spawn_plan_vm_ok(plan);
}

/* The shared-memory path: 0 and no child when clone3 refused it (the caller
 * forks instead, from now on), else the pid or a negative errno. */
static pid_t spawn_vm_start(struct exit_reaper *r, struct exit_process *p, const struct spawn_plan *plan) {
        pid_t pid = spawn_vm_clone(p->vm, plan->cgroup_fd, &p->pidfd);
        if (pid < 0)
                p->vm = spawn_vm_free(p->vm); /* no child: nothing runs on it */
        if (vfork_refused(pid)) {
                r->clone3_vm_refused = true;
                return 0;
        }
        return pid;
}

_public_ int exit_reaper_spawn(struct exit_reaper *r, const struct exit_spawn_attr *attr,
                               struct exit_process **ret) {
        const uint32_t known = EXIT_SPAWN_SETSID | EXIT_SPAWN_SETPGID | EXIT_SPAWN_FOREGROUND |
                               EXIT_SPAWN_LISTEN_PID | EXIT_SPAWN_WATCHDOG_PID | EXIT_SPAWN_STDIO |
                               EXIT_SPAWN_CGROUP | EXIT_SPAWN_KEEP_FDS | EXIT_SPAWN_UMASK | EXIT_SPAWN_NO_VFORK |
                               EXIT_SPAWN_SESSION_KEYRING | EXIT_SPAWN_SESSION_KEYRING_SHARED |
                               EXIT_SPAWN_HOOK_SHARED_VM;
        if (!r || !attr || !ret || attr->size < offsetof(struct exit_spawn_attr, pre_exec) ||
            !attr->argv || !attr->argv[0] || (attr->flags & ~known))
                return -EINVAL;
        /* An older caller's shorter struct: the fields it lacks stay zero. */
        struct exit_spawn_attr a = { 0 };
        memcpy(&a, attr, attr->size < sizeof a ? attr->size : sizeof a);

        struct spawn_plan plan;
        int k = spawn_plan_init(&plan, &a, r->null_fd);
        struct exit_process *p = k < 0 ? NULL : process_new(r);
        if (k >= 0 && !p)
                k = -ENOMEM;
        bool vfork = k >= 0 && !(r->flags & EXIT_REAPER_NO_VFORK) && spawn_plan_vfork_ok(&plan);
        /* A cgroup child vforks through clone3 only (it needs CLONE_INTO_CGROUP). */
        if (vfork && plan.cgroup_fd >= 0 && (r->clone3_refused || r->clone3_vfork_refused))
                vfork = false;
        if (k >= 0 && !vfork)
                k = exec_pipe_open(p, &plan);
        /* The arena is filled now, with the pipe's write end in its plan. */
        if (k >= 0 && !vfork && spawn_vm_wanted(r, &plan) && spawn_vm_new(&plan, &p->vm) == -ENOMEM)
                k = -ENOMEM;
        if (k < 0)
                goto fail;

        /* spawn holds the lock from the clone until the id is recorded, so no
         * orphan pass can take the child for an orphan. */
        pthread_mutex_lock(&r->lock);
        k = r->closed ? -EPIPE : pid_map_reserve(&r->pids, pid_map_size(&r->pids) + 1);
        if (k >= 0 && vfork)
                k = vfork_stack_get(r);
        if (k >= 0)
                k = exit_hub_reserve(r->hub, &p->id);
        if (k >= 0) {
                pid_t pid = vfork ? spawn_vfork_known(r, p, &plan) : 0;
                if (vfork && plan.cgroup_fd >= 0 && vfork_refused(pid)) {
                        /* Refused with a stack (an old kernel, a seccomp policy):
                         * the clone3 path, which has its own fallback, from now on. */
                        r->clone3_vfork_refused = true;
                        vfork = false;
                        pid = exec_pipe_open(p, &plan);
                }
                if (p->vm && pid >= 0)
                        pid = spawn_vm_start(r, p, &plan);
                if (!vfork && !p->vm && pid >= 0)
                        pid = spawn_clone(&plan, !r->clone3_refused, &r->clone3_refused, &p->pidfd);
                k = pid < 0 ? pid : 0;
                if (k >= 0) {
                        p->pid = pid;
                        k = process_attach(r, p);
                        if (k < 0)
                                child_discard(p);
                }
                if (k < 0)
                        (void) exit_hub_unreserve(r->hub, p->id);
        }
        pthread_mutex_unlock(&r->lock);
        if (k < 0)
                goto fail;
        spawn_plan_done(&plan);
        *ret = p;
        return 0;
fail:
        spawn_plan_done(&plan);
        if (p)
                p->vm = spawn_vm_free(p->vm); /* set here only if no child was cloned */
        exit_process_unref(p);
        return k;
}

_public_ int exit_reaper_has_children(struct exit_reaper *r) {
        if (!r)
                return -EINVAL;
        for (;;) {
                siginfo_t si = { 0 };
                if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
                        return 1;
                if (errno == ECHILD)
                        return 0;
                if (errno != EINTR)
                        return negative_errno();
        }
}

_public_ int exit_reaper_track(struct exit_reaper *r, pid_t pid, struct exit_process **ret) {
        if (!r || pid <= 0 || !ret)
                return -EINVAL;
        siginfo_t si = { 0 };
        /* Only our own unreaped children: waitid answers ECHILD for any other. */
        if (waitid(P_PID, (id_t) pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
                return negative_errno();

        struct exit_process *p = process_new(r);
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->exec_error = 0;
        p->pidfd = sys_pidfd_open(pid, 0);
        int k = p->pidfd < 0 ? negative_errno() : 0;

        pthread_mutex_lock(&r->lock);
        if (k >= 0 && r->closed)
                k = -EPIPE;
        if (k >= 0 && pid_lookup(&r->pids, pid))
                k = -EEXIST;
        if (k >= 0)
                k = pid_map_reserve(&r->pids, pid_map_size(&r->pids) + 1);
        if (k >= 0)
                k = exit_hub_reserve(r->hub, &p->id);
        if (k >= 0) {
                k = process_attach(r, p);
                if (k < 0)
                        (void) exit_hub_unreserve(r->hub, p->id);
        }
        pthread_mutex_unlock(&r->lock);
        if (k < 0) {
                exit_process_unref(p);
                return k;
        }
        *ret = p;
        return 0;
}
