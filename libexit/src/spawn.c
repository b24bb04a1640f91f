/* SPDX-License-Identifier: MIT */
/*
 * Spawning (SPEC §2.2): the plan computed before the clone, the clone itself,
 * and the child's side, which runs only async-signal-safe calls and ends in
 * execve or _exit.
 */
#include <assert.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "macro.h"
#include "strv.h"
#include "reaper-internal.h"

extern char **environ;

#define PID_SLOT_WIDTH 20 /* digits of the largest pid_t, with room to spare */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#define CLONE_INTO_CGROUP_FLAG 0x200000000ULL

/* struct clone_args as of Linux 5.7 (CLONE_ARGS_SIZE_VER2), defined here so
 * that <linux/sched.h> and <sched.h> never meet. */
struct clone_args_v2 {
        uint64_t flags;
        uint64_t pidfd;
        uint64_t child_tid;
        uint64_t parent_tid;
        uint64_t exit_signal;
        uint64_t stack;
        uint64_t stack_size;
        uint64_t tls;
        uint64_t set_tid;
        uint64_t set_tid_size;
        uint64_t cgroup;
};

static const char *env_lookup(char *const *envp, const char *name) {
        size_t n = strlen(name);
        for (; envp && *envp; envp++)
                if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
                        return *envp + n + 1;
        return NULL;
}

/* Candidate paths for the executable (attr.path, else argv[0]), in execvp's order. */
static int plan_paths(struct spawn_plan *plan, const char *exe) {
        const char *file = exe ? exe : plan->argv[0];
        /* "" is tried as it is (execve fails with ENOENT, as execvp("")
         * does), never joined with each PATH entry into a directory. */
        if (!*file || strchr(file, '/')) {
                plan->paths = calloc(2, sizeof(char *));
                if (!plan->paths || !(plan->paths[0] = strdup(file)))
                        return -ENOMEM;
                return 0;
        }

        const char *path = env_lookup(plan->envp, "PATH");
        if (!path)
                path = DEFAULT_PATH;
        size_t n = 2;
        for (const char *c = path; *c; c++)
                n += *c == ':';
        plan->paths = calloc(n, sizeof(char *));
        if (!plan->paths)
                return -ENOMEM;

        size_t k = 0;
        for (const char *dir = path;; ) {
                const char *end = strchrnul(dir, ':');
                int len = (int) (end - dir);
                /* An empty element means the current directory, as for execvp. */
                if (asprintf(&plan->paths[k], "%.*s%s%s", len, len ? dir : ".", "/", file) < 0) {
                        plan->paths[k] = NULL;
                        return -ENOMEM;
                }
                k++;
                if (!*end)
                        break;
                dir = end + 1;
        }
        return 0;
}

/* Copies envp without LISTEN_PID/WATCHDOG_PID, then appends fixed-width slots
 * the child fills from getpid(). */
static int plan_env_slots(struct spawn_plan *plan) {
        size_t n = 0;
        for (char *const *e = plan->envp; e && *e; e++)
                n++;
        char **copy = calloc(n + 3, sizeof(char *));
        if (!copy)
                return -ENOMEM;

        size_t k = 0;
        for (char *const *e = plan->envp; e && *e; e++) {
                if (strncmp(*e, "LISTEN_PID=", 11) == 0 && (plan->flags & EXIT_SPAWN_LISTEN_PID))
                        continue;
                if (strncmp(*e, "WATCHDOG_PID=", 13) == 0 && (plan->flags & EXIT_SPAWN_WATCHDOG_PID))
                        continue;
                copy[k++] = *e;
        }
        char *listen = NULL, *watchdog = NULL;
        if (plan->flags & EXIT_SPAWN_LISTEN_PID) {
                if (asprintf(&listen, "LISTEN_PID=%*s", PID_SLOT_WIDTH, "") < 0)
                        listen = NULL;
                copy[k++] = listen;
        }
        if (plan->flags & EXIT_SPAWN_WATCHDOG_PID) {
                if (asprintf(&watchdog, "WATCHDOG_PID=%*s", PID_SLOT_WIDTH, "") < 0)
                        watchdog = NULL;
                copy[k++] = watchdog;
        }
        if (((plan->flags & EXIT_SPAWN_LISTEN_PID) && !listen) ||
            ((plan->flags & EXIT_SPAWN_WATCHDOG_PID) && !watchdog)) {
                free(listen);
                free(watchdog);
                free(copy);
                return -ENOMEM;
        }
        plan->envp = copy;
        plan->envp_owned = true;
        plan->listen_pid_slot = listen ? listen + strlen("LISTEN_PID=") : NULL;
        plan->watchdog_pid_slot = watchdog ? watchdog + strlen("WATCHDOG_PID=") : NULL;
        return 0;
}

static int plan_fds(struct spawn_plan *plan, const struct exit_spawn_attr *attr) {
        if (attr->n_fds > SPAWN_MAX_EXTRA_FDS || (attr->n_fds && !attr->fds))
                return -EINVAL;
        plan->n_targets = 3 + attr->n_fds;
        for (unsigned i = 0; i < 3; i++) {
                int fd = (attr->flags & EXIT_SPAWN_STDIO) ? attr->stdio[i] : EXIT_SPAWN_FD_INHERIT;
                if (fd == EXIT_SPAWN_FD_INHERIT)
                        fd = (int) i;
                else if (fd == EXIT_SPAWN_FD_NULL) {
                        if (plan->null_fd < 0 && plan->devnull_fd < 0) {
                                plan->devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
                                if (plan->devnull_fd < 0)
                                        return negative_errno();
                        }
                        fd = plan->null_fd >= 0 ? plan->null_fd : plan->devnull_fd;
                } else if (fd < 0)
                        return -EINVAL;
                plan->src_fds[i] = fd;
        }
        for (unsigned i = 0; i < attr->n_fds; i++) {
                if (attr->fds[i] < 0)
                        return -EINVAL;
                plan->src_fds[3 + i] = attr->fds[i];
        }
        return 0;
}

int spawn_plan_init(struct spawn_plan *plan, const struct exit_spawn_attr *attr, int null_fd) {
        *plan = (struct spawn_plan) {
                .argv = attr->argv,
                .envp = attr->envp ? attr->envp : environ,
                .cwd = attr->cwd,
                .devnull_fd = -1,
                .null_fd = null_fd,
                .cgroup_fd = (attr->flags & EXIT_SPAWN_CGROUP) ? attr->cgroup_fd : -1,
                .cgroup_procs_fd = -1,
                .status_fd = -1,
                .fd_slots = { -1, -1, -1 },
                .flags = attr->flags,
                .pdeath_signal = attr->pdeath_signal,
                .parent_pid = attr->pdeath_signal ? getpid() : 0, /* for the pdeath check only */
                .pre_exec = attr->pre_exec,
                .pre_exec_userdata = attr->pre_exec_userdata,
                .ignore_signals = attr->ignore_signals,
                .umask = (mode_t) attr->umask,
        };
        if (plan->flags & EXIT_SPAWN_FOREGROUND)
                plan->flags |= EXIT_SPAWN_SETPGID;
        if (attr->nofile_soft && getrlimit(RLIMIT_NOFILE, &plan->nofile) == 0) {
                plan->set_nofile = true;
                plan->nofile.rlim_cur = attr->nofile_soft < plan->nofile.rlim_max ? attr->nofile_soft
                                                                                  : plan->nofile.rlim_max;
        }
        if ((plan->flags & EXIT_SPAWN_SETSID) && (plan->flags & EXIT_SPAWN_SETPGID))
                return -EINVAL;
        if ((plan->flags & EXIT_SPAWN_CGROUP) && attr->cgroup_fd < 0)
                return -EINVAL;
        if (attr->pdeath_signal < 0 || attr->pdeath_signal >= NSIG)
                return -EINVAL;

        int r = 0;
        if (plan->flags & (EXIT_SPAWN_LISTEN_PID | EXIT_SPAWN_WATCHDOG_PID))
                r = plan_env_slots(plan);
        if (r >= 0)
                r = plan_paths(plan, attr->path);
        if (r >= 0)
                r = plan_fds(plan, attr);
        if (r < 0)
                return r;

        /* The terminal rule of SPEC §6, decided in the parent: only when our
         * own group is the terminal's foreground group. */
        if (plan->flags & EXIT_SPAWN_FOREGROUND)
                plan->take_foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
        return 0;
}

void spawn_plan_done(struct spawn_plan *plan) {
        if (plan->envp_owned) {
                free(plan->listen_pid_slot ? plan->listen_pid_slot - strlen("LISTEN_PID=") : NULL);
                free(plan->watchdog_pid_slot ? plan->watchdog_pid_slot - strlen("WATCHDOG_PID=") : NULL);
                free((void *) plan->envp);
        }
        strv_free(plan->paths);
        plan->paths = NULL;
        plan->devnull_fd = safe_close(plan->devnull_fd);
        plan->cgroup_procs_fd = safe_close(plan->cgroup_procs_fd);
        plan->status_fd = safe_close(plan->status_fd);
}

/* ---- the child: async-signal-safe only from here to the end of child_run ---- */

_Noreturn static void child_fail(const struct spawn_plan *plan, int error, int stage) {
        struct exec_failure f = { .error = error > 0 ? error : EIO, .stage = stage };
        if (plan->shared_failure)
                *plan->shared_failure = f; /* the vfork path: our parent reads it when we exit */
        else
                (void) !write(plan->status_fd, &f, sizeof f);
        _exit(127);
}

static void fill_pid_slot(char *slot, pid_t pid) {
        char digits[PID_SLOT_WIDTH];
        int n = 0;
        do {
                digits[n++] = (char) ('0' + pid % 10);
                pid /= 10;
        } while (pid > 0 && n < PID_SLOT_WIDTH);
        for (int i = 0; i < n; i++)
                slot[i] = digits[n - 1 - i];
        slot[n] = '\0';
}

static int child_setup(struct spawn_plan *plan) {
        struct sigaction dfl = { .sa_handler = SIG_DFL }, ign = { .sa_handler = SIG_IGN };
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP) /* glibc-internal ones answer EINVAL */
                        (void) sigaction(sig, sig <= 64 && (plan->ignore_signals >> (sig - 1)) & 1 ? &ign : &dfl, NULL);
        if (plan->flags & EXIT_SPAWN_UMASK)
                umask(plan->umask);

        if ((plan->flags & EXIT_SPAWN_SETSID) && setsid() < 0)
                return -errno;
        if ((plan->flags & EXIT_SPAWN_SETPGID) && setpgid(0, 0) < 0)
                return -errno;
        /* Every signal is blocked here, SIGTTOU included, so tcsetpgrp cannot stop us. */
        if (plan->take_foreground && tcsetpgrp(STDIN_FILENO, getpid()) < 0)
                return -errno;
        if (plan->pdeath_signal) {
                if (prctl(PR_SET_PDEATHSIG, plan->pdeath_signal) < 0)
                        return -errno;
                if (getppid() != plan->parent_pid)
                        _exit(127); /* the parent is already gone */
        }
        if (plan->cgroup_procs_fd >= 0 && write(plan->cgroup_procs_fd, "0", 1) != 1)
                return -errno;
        return 0;
}

/* The vfork path with CLONE_FILES: we share our parent's fd table, and the
 * sources of 0/1/2 wait in the slots. Unsharing with close_range copies only
 * the fds below the first one it closes (Linux 5.9), so the cost does not
 * grow with the parent's fds; nothing of the shared table is touched before. */
static int child_fds_slots(const struct spawn_plan *plan) {
        int top = 0;
        for (int i = 0; i < 3; i++)
                if (plan->fd_slots[i] >= top)
                        top = plan->fd_slots[i] + 1;
        if (close_range((unsigned) top, ~0U, CLOSE_RANGE_UNSHARE) < 0)
                return -errno;
        for (int i = 0; i < 3; i++)
                if (dup2(plan->fd_slots[i], i) < 0)
                        return -errno;
        return close_range(3, ~0U, 0) < 0 ? -errno : 0;
}

/* Puts every source fd in its target slot and closes every other fd except
 * the exec-status pipe, which is close-on-exec. */
static int child_fds(struct spawn_plan *plan) {
        int n = (int) plan->n_targets;
        if (plan->fd_slots[0] >= 0)
                return child_fds_slots(plan);

        /* Move the status pipe and any source that a dup2 could clobber above
         * the targets first. */
        int status = -1;
        if (plan->status_fd >= 0) {
                status = fcntl(plan->status_fd, F_DUPFD_CLOEXEC, n);
                if (status < 0)
                        return -errno;
                plan->status_fd = status;
        }
        for (int i = 0; i < n; i++)
                if (plan->src_fds[i] < n && plan->src_fds[i] != i) {
                        int fd = fcntl(plan->src_fds[i], F_DUPFD_CLOEXEC, n);
                        if (fd < 0)
                                return -errno;
                        plan->src_fds[i] = fd;
                }

        for (int i = 0; i < n; i++) {
                if (plan->src_fds[i] == i) {
                        /* Inherited as is; a closed 0/1/2 stays closed. */
                        if (fcntl(i, F_SETFD, 0) < 0 && (errno != EBADF || i > 2))
                                return -errno;
                } else if (dup2(plan->src_fds[i], i) < 0)
                        return -errno;
        }

        if (plan->flags & EXIT_SPAWN_KEEP_FDS)
                return 0;
        if (status < 0)
                return close_range((unsigned) n, ~0U, 0) < 0 ? -errno : 0;
        if (status > n && close_range((unsigned) n, (unsigned) status - 1, 0) < 0)
                return -errno;
        if (close_range((unsigned) status + 1, ~0U, 0) < 0)
                return -errno;
        return 0;
}

/* EXIT_SPAWN_SESSION_KEYRING: a new anonymous session keyring, joined; with
 * _SHARED, the user keyring of our uid linked into it. Raw system calls:
 * libkeyutils is not needed for two calls. */
static int child_keyring(const struct spawn_plan *plan) {
        if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0UL, 0UL, 0UL, 0UL) < 0)
                return -errno;
        if ((plan->flags & EXIT_SPAWN_SESSION_KEYRING_SHARED) &&
            syscall(SYS_keyctl, KEYCTL_LINK, (long) KEY_SPEC_USER_KEYRING, (long) KEY_SPEC_SESSION_KEYRING, 0UL,
                    0UL) < 0)
                return -errno;
        return 0;
}

static void child_exec(const struct spawn_plan *plan) {
        sigset_t none;
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                child_fail(plan, errno, EXIT_STAGE_SETUP);

        int error = ENOENT;
        bool saw_eacces = false;
        for (char *const *p = plan->paths; *p; p++) {
                execve(*p, plan->argv, plan->envp);
                error = errno;
                if (error == EACCES)
                        saw_eacces = true;
                else if (error != ENOENT && error != ENOTDIR && error != ESTALE && error != ENODEV &&
                         error != ETIMEDOUT)
                        break;
        }
        if (saw_eacces && (error == ENOENT || error == ENOTDIR))
                error = EACCES;
        /* Restore the full mask so nothing interrupts the report. */
        sigset_t all;
        sigfillset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        child_fail(plan, error, EXIT_STAGE_EXEC);
}

_Noreturn static void child_run(const struct spawn_plan *shared) {
        /* Work on a copy: on the vfork path the plan is our parent's memory. */
        struct spawn_plan copy = *shared, *plan = &copy;
        pid_t self = (pid_t) syscall(SYS_getpid);
        if (plan->listen_pid_slot)
                fill_pid_slot(plan->listen_pid_slot, self);
        if (plan->watchdog_pid_slot)
                fill_pid_slot(plan->watchdog_pid_slot, self);

        int r = child_setup(plan);
        if (r < 0)
                child_fail(plan, -r, EXIT_STAGE_SETUP);
        r = child_fds(plan);
        if (r < 0)
                child_fail(plan, -r, EXIT_STAGE_FDS);
        /* Only once the inherited fds are closed: with the parent holding
         * more fds than the new soft limit, F_DUPFD in child_fds() would find
         * no slot below it (EMFILE), nor would the exec'd program. */
        if (plan->set_nofile && setrlimit(RLIMIT_NOFILE, &plan->nofile) < 0)
                child_fail(plan, errno, EXIT_STAGE_SETUP);
        if (plan->cwd && chdir(plan->cwd) < 0)
                child_fail(plan, errno, EXIT_STAGE_CHDIR);
        if ((plan->flags & (EXIT_SPAWN_SESSION_KEYRING | EXIT_SPAWN_SESSION_KEYRING_SHARED)) &&
            (r = child_keyring(plan)) < 0)
                child_fail(plan, -r, EXIT_STAGE_KEYRING);
        if (plan->pre_exec) {
                int stage = EXIT_STAGE_HOOK;
                r = plan->pre_exec(plan->pre_exec_userdata, &stage);
                if (r < 0)
                        child_fail(plan, -r, stage);
        }
        child_exec(plan);
        _exit(127);
}

static int vfork_child(void *plan) {
        child_run(plan);
}

/* ---- the parent ---- */

/* ASan and TSan cannot run instrumented code on the vfork child's own stack
 * in the parent's memory (ASan's no-return handling reports a wild stack,
 * TSan sees the shared memory as racing): sanitizer builds take clone3. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPAWN_VFORK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPAWN_VFORK_SANITIZED 1
#endif
#endif

bool spawn_vfork_available(void) {
#ifdef SPAWN_VFORK_SANITIZED
        return false;
#else
        return true;
#endif
}

/* clone3 with a stack returns in the child on that stack, with nothing on
 * it to return to: the child must call its function and exit without
 * leaving the trampoline. glibc exports no clone3 (its internal one works
 * the same way); this one is x86-64 only, elsewhere cgroup children take
 * the clone3 path without CLONE_VM.
 *
 * long spawn_clone3_call(struct clone_args_v2 *args, size_t size,
 *                        int (*fn)(void *), void *arg);
 * The syscall keeps every register but rax, rcx and r11, so fn and arg
 * travel in r8 and r9 into the child. */
#if defined(__x86_64__) && !defined(SPAWN_VFORK_SANITIZED)
#define SPAWN_CLONE3_CALL 1
long spawn_clone3_call(struct clone_args_v2 *args, size_t size, int (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl spawn_clone3_call\n"
        ".hidden spawn_clone3_call\n"
        ".type spawn_clone3_call, @function\n"
        ".p2align 4\n"
        "spawn_clone3_call:\n"
#ifdef __CET__
        "        endbr64\n"
#endif
        "        movq %rdx, %r8\n"
        "        movq %rcx, %r9\n"
        "        movl $435, %eax\n" /* __NR_clone3 */
        "        syscall\n"
        "        testq %rax, %rax\n"
        "        jz 1f\n"
        "        ret\n"           /* the parent: the pid or -errno */
        "1:      xorl %ebp, %ebp\n" /* the child, on its own stack: the outermost frame */
        "        andq $-16, %rsp\n"
        "        movq %r9, %rdi\n"
        "        call *%r8\n"
        "        movl %eax, %edi\n"
        "        movl $60, %eax\n" /* __NR_exit: fn never returns; if it did */
        "        syscall\n"
        "        hlt\n"
        ".size spawn_clone3_call, .-spawn_clone3_call\n");
#endif

bool spawn_vfork_cgroup_available(void) {
#ifdef SPAWN_CLONE3_CALL
        return true;
#else
        return false;
#endif
}

bool spawn_plan_vfork_ok(const struct spawn_plan *plan) {
        return spawn_vfork_available() && !plan->pre_exec && !(plan->flags & EXIT_SPAWN_NO_VFORK) &&
               (!plan->cwd || streq(plan->cwd, "/")) &&
               (plan->cgroup_fd < 0 || spawn_vfork_cgroup_available());
}

bool spawn_plan_slots_ok(const struct spawn_plan *plan) {
        return plan->n_targets == 3 && !(plan->flags & EXIT_SPAWN_KEEP_FDS);
}

static pid_t clone3_vfork(struct spawn_plan *plan, void *stack, uint64_t flags, int *ret_pidfd) {
#ifdef SPAWN_CLONE3_CALL
        struct clone_args_v2 args = {
                .flags = flags | CLONE_INTO_CGROUP_FLAG,
                .pidfd = (uint64_t) (uintptr_t) ret_pidfd,
                .exit_signal = SIGCHLD,
                .stack = (uint64_t) (uintptr_t) stack,
                .stack_size = SPAWN_VFORK_STACK_SIZE,
                .cgroup = (uint64_t) plan->cgroup_fd,
        };
        return (pid_t) spawn_clone3_call(&args, sizeof args, vfork_child, plan);
#else
        return -ENOSYS;
#endif
}

pid_t spawn_vfork(struct spawn_plan *plan, void *stack, int *ret_pidfd, struct exec_failure *ret_failure) {
        struct exec_failure failure = { 0 };
        int pidfd = -1;
        sigset_t all, saved;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        plan->shared_failure = &failure;
        int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | (plan->fd_slots[0] >= 0 ? CLONE_FILES : 0);
        pid_t pid;
        int k = 0;
        if (plan->cgroup_fd >= 0) {
                /* The raw syscall: -errno in the result, errno untouched. */
                pid = clone3_vfork(plan, stack, (uint64_t) flags, &pidfd);
                k = pid < 0 ? pid : 0;
        } else {
                /* With CLONE_PIDFD, clone() stores the pidfd where parent_tid points. */
                pid = clone(vfork_child, (char *) stack + SPAWN_VFORK_STACK_SIZE, flags | SIGCHLD, plan, &pidfd);
                k = pid < 0 ? negative_errno() : 0;
        }
        plan->shared_failure = NULL;
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (k < 0)
                return k;
        *ret_pidfd = pidfd;
        *ret_failure = failure;
        return pid;
}

static pid_t clone3_pidfd(struct spawn_plan *plan, int *ret_pidfd) {
        int pidfd = -1;
        struct clone_args_v2 args = {
                .flags = CLONE_PIDFD,
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                .exit_signal = SIGCHLD,
        };
        if (plan->cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP_FLAG;
                args.cgroup = (uint64_t) plan->cgroup_fd;
        }
        long pid = syscall(SYS_clone3, &args, sizeof args);
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                child_run(plan);
        *ret_pidfd = pidfd;
        return (pid_t) pid;
}

static pid_t fork_pidfd(struct spawn_plan *plan, int *ret_pidfd) {
        if (plan->cgroup_fd >= 0 && plan->cgroup_procs_fd < 0) {
                plan->cgroup_procs_fd = openat(plan->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                if (plan->cgroup_procs_fd < 0)
                        return negative_errno();
        }
        pid_t pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                child_run(plan);

        /* Nobody but us reaps this child, so its pid cannot be recycled before
         * pidfd_open: even a zombie is opened. */
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
                int r = negative_errno();
                siginfo_t si;
                (void) kill(pid, SIGKILL);
                (void) waitid(P_PID, (id_t) pid, &si, WEXITED);
                return r;
        }
        *ret_pidfd = pidfd;
        return pid;
}

pid_t spawn_clone(struct spawn_plan *plan, bool use_clone3, bool *clone3_refused, int *ret_pidfd) {
        /* The child starts with every signal blocked, so no handler of ours can
         * run in it before it has reset every disposition; it clears the mask
         * just before execve. */
        sigset_t all, saved;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);

        pid_t pid = -ENOSYS;
        if (use_clone3) {
                pid = clone3_pidfd(plan, ret_pidfd);
                /* ENOSYS: kernel < 5.3; EPERM: a container's seccomp policy. */
                if (pid == -ENOSYS || (pid == -EPERM && plan->cgroup_fd < 0))
                        *clone3_refused = true;
        }
        if (!use_clone3 || *clone3_refused)
                pid = fork_pidfd(plan, ret_pidfd);

        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        return pid;
}

/* ---- the shared-memory path: clone(CLONE_VM) without CLONE_VFORK ----
 *
 * The child runs on the caller's memory while the caller goes on, so it
 * must touch nothing the caller may change or free: everything it reads is
 * copied into an arena of its own before the clone (the plan, argv, envp,
 * the candidate paths, the working directory), it runs on the arena's stack,
 * and with a copy of the calling thread's TLS (CLONE_SETTLS), so that errno
 * and every other thread-local variable the child's libc calls write are
 * its own, not the caller's (glibc keeps errno in TLS; a child sharing the
 * caller's would clobber the caller's errno between a failed call and its
 * check). The arena is freed by the reaper once the child has exec'd (EOF on
 * the exec-status pipe: at execve the kernel switches to the new memory
 * before it closes the close-on-exec fds) or died (reaped), never before.
 *
 * The TLS copy needs the static TLS block's extent: glibc's
 * _dl_get_tls_static_info (what the sanitizers use for the same purpose)
 * and the TCB's size, _thread_db_sizeof_pthread (libthread_db's), both
 * looked up with dlsym; where either is missing (a static binary, another
 * libc) the path is not available and those children fork as before.
 * x86-64 glibc layout (TLS_TCB_AT_TP): the block is [tp - (static size -
 * TCB size), tp + TCB size); the TCB's first word and its third (header.tcb,
 * header.self) point at itself. */

#if defined(SPAWN_CLONE3_CALL) && defined(__GLIBC__)
#define SPAWN_VM 1
#endif

#define SPAWN_VM_STACK_SIZE (128u * 1024u)

struct spawn_vm {
        void *base;               /* the mapping: a guard page, the stack, this, the strings, the TLS */
        size_t size;
        void *stack;              /* its lowest address, above the guard page */
        void *tp;                 /* the child's thread pointer, in the TLS copy */
        struct spawn_plan *plan;  /* the child's, every pointer into the mapping */
};

static struct {
        size_t below, above, align; /* bytes of the block below and above the thread pointer */
        bool ok;
} vm_tls;
static pthread_once_t vm_tls_once = PTHREAD_ONCE_INIT;

#ifdef SPAWN_VM
static void vm_tls_set(size_t below, size_t above, size_t align) {
        /* Sanity: a TCB of a few KB, a block of at most 1 MB, an alignment
         * that the arena's page alignment covers. */
        if (above < 64 || above > (64u << 10) || below > (1u << 20) || !align || align > 4096 ||
            (align & (align - 1)) || below % align)
                return;
        vm_tls.below = below;
        vm_tls.above = above;
        vm_tls.align = align;
        vm_tls.ok = true;
}

/* A static binary: one TLS module, the executable's, right below the
 * thread pointer (glibc's __libc_setup_tls); the surplus below it is for
 * dlopen, which a static binary does not do. */
static int vm_tls_static(struct dl_phdr_info *info, size_t size, void *userdata) {
        (void) size;
        (void) userdata;
#ifdef SPAWN_STATIC_TCB_SIZE
        for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_TLS)
                        continue;
                size_t align = ph->p_align > 64 ? ph->p_align : 64; /* glibc's TCB_ALIGNMENT */
                vm_tls_set((ph->p_memsz + align - 1) & ~(align - 1), SPAWN_STATIC_TCB_SIZE, align);
        }
#else
        (void) info;
#endif
        return 1; /* the first module is the executable */
}
#endif

#ifdef SPAWN_VM
static bool vm_exe_has_interp(void) {
        const ElfW(Phdr) *ph = (const ElfW(Phdr) *) getauxval(AT_PHDR);
        size_t n = getauxval(AT_PHNUM);
        for (size_t i = 0; ph && i < n; i++)
                if (ph[i].p_type == PT_INTERP)
                        return true;
        return !ph; /* unknown: assume dynamic */
}
#endif

static void vm_tls_probe(void) {
#ifdef SPAWN_VM
        void (*get_static)(size_t *, size_t *);
        void *sym = dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
        memcpy(&get_static, &sym, sizeof sym); /* ISO C: no cast from an object pointer */
        const uint32_t *tcb = dlsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread");
        if (sym && tcb) {
                size_t size = 0, align = 0;
                get_static(&size, &align); /* the whole block, the TCB included */
                if (size > *tcb)
                        vm_tls_set(size - *tcb, *tcb, align);
                return;
        }
        /* dlsym answered nothing: a static binary (no PT_INTERP: no
         * dynamic loader, nothing dlopen'd), or a libc without those symbols
         * (then no shared-memory path). */
        if (!vm_exe_has_interp())
                (void) dl_iterate_phdr(vm_tls_static, NULL);
#endif
}

bool spawn_vm_available(void) {
        pthread_once(&vm_tls_once, vm_tls_probe);
        return vm_tls.ok;
}

bool spawn_plan_vm_ok(const struct spawn_plan *plan) {
        return (!plan->pre_exec || (plan->flags & EXIT_SPAWN_HOOK_SHARED_VM)) && spawn_vm_available();
}

#ifdef SPAWN_VM
/* A bump allocator run twice: once with base NULL to count, once to copy. */
struct bump {
        char *base;
        size_t used;
};

static void *bump(struct bump *b, size_t n, size_t align) {
        size_t at = (b->used + align - 1) & ~(align - 1);
        b->used = at + n;
        return b->base ? b->base + at : NULL;
}

static char *vm_str(struct bump *b, const char *s) {
        size_t n = strlen(s) + 1;
        char *d = bump(b, n, 1);
        if (d)
                memcpy(d, s, n);
        return d;
}

/* Copies v; with from/to, moves the plan's pid slots into the copies of
 * the strings they point into. */
static char **vm_strv(struct bump *b, char *const *v, const struct spawn_plan *from, struct spawn_plan *to) {
        size_t n = 0;
        while (v && v[n])
                n++;
        char **d = bump(b, (n + 1) * sizeof(char *), alignof(char *));
        for (size_t i = 0; i < n; i++) {
                char *s = vm_str(b, v[i]);
                if (!d)
                        continue;
                d[i] = s;
                if (from && from->listen_pid_slot == v[i] + strlen("LISTEN_PID="))
                        to->listen_pid_slot = s + strlen("LISTEN_PID=");
                if (from && from->watchdog_pid_slot == v[i] + strlen("WATCHDOG_PID="))
                        to->watchdog_pid_slot = s + strlen("WATCHDOG_PID=");
        }
        if (d)
                d[n] = NULL;
        return d;
}

static struct spawn_plan *vm_plan_copy(struct bump *b, const struct spawn_plan *from) {
        struct spawn_plan *to = bump(b, sizeof *to, alignof(struct spawn_plan)), scratch;
        struct spawn_plan *t = to ? to : &scratch;
        *t = *from;
        t->shared_failure = NULL;
        t->envp_owned = false;
        t->listen_pid_slot = t->watchdog_pid_slot = NULL;
        for (int i = 0; i < 3; i++)
                t->fd_slots[i] = -1; /* no CLONE_FILES: the child has its own fd table */
        t->argv = vm_strv(b, from->argv, NULL, NULL);
        t->envp = vm_strv(b, from->envp, from, t);
        t->paths = vm_strv(b, from->paths, NULL, NULL);
        t->cwd = from->cwd ? vm_str(b, from->cwd) : NULL;
        return to;
}

static void *thread_pointer(void) {
        void *tp;
        __asm__("movq %%fs:0, %0" : "=r"(tp)); /* header.tcb: the TCB's address */
        return tp;
}

static int vm_child(void *plan) {
        child_run(plan); /* the arena's plan: child_run copies it onto the arena's stack */
}
#endif

int spawn_vm_new(const struct spawn_plan *plan, struct spawn_vm **ret) {
#ifdef SPAWN_VM
        if (!spawn_vm_available())
                return -ENOSYS;
        struct bump count = { 0 };
        (void) bump(&count, sizeof(struct spawn_vm), alignof(struct spawn_vm));
        (void) vm_plan_copy(&count, plan);
        size_t page = 4096, tls_at = (count.used + vm_tls.align - 1) & ~(vm_tls.align - 1);
        size_t data = (tls_at + vm_tls.below + vm_tls.above + page - 1) & ~(page - 1);
        size_t size = page + SPAWN_VM_STACK_SIZE + data;
        char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (base == MAP_FAILED)
                return negative_errno();
        /* A stack overflow faults on the guard page (the child dies of
         * SIGSEGV) instead of running into anything else. */
        if (mprotect(base, page, PROT_NONE) < 0) {
                int r = negative_errno();
                munmap(base, size);
                return r;
        }
        struct bump b = { .base = base + page + SPAWN_VM_STACK_SIZE };
        struct spawn_vm *vm = bump(&b, sizeof *vm, alignof(struct spawn_vm));
        *vm = (struct spawn_vm) { .base = base, .size = size, .stack = base + page };
        vm->plan = vm_plan_copy(&b, plan);
        assert(b.used == count.used);

        char *tls = b.base + tls_at, *tp = thread_pointer();
        memcpy(tls, tp - vm_tls.below, vm_tls.below + vm_tls.above);
        vm->tp = tls + vm_tls.below;
        ((void **) vm->tp)[0] = vm->tp; /* header.tcb */
        ((void **) vm->tp)[2] = vm->tp; /* header.self */
        *ret = vm;
        return 0;
#else
        (void) plan;
        (void) ret;
        return -ENOSYS;
#endif
}

struct spawn_vm *spawn_vm_free(struct spawn_vm *vm) {
        if (vm)
                munmap(vm->base, vm->size);
        return NULL;
}

pid_t spawn_vm_clone(struct spawn_vm *vm, int cgroup_fd, int *ret_pidfd) {
#ifdef SPAWN_VM
        /* As spawn_clone: every signal blocked, so no handler of ours runs in
         * the child before it has reset the dispositions. */
        sigset_t all, saved;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        int pidfd = -1;
        struct clone_args_v2 args = {
                .flags = CLONE_VM | CLONE_PIDFD | CLONE_SETTLS | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP_FLAG : 0),
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                .exit_signal = SIGCHLD,
                .stack = (uint64_t) (uintptr_t) vm->stack,
                .stack_size = SPAWN_VM_STACK_SIZE,
                .tls = (uint64_t) (uintptr_t) vm->tp,
                .cgroup = cgroup_fd >= 0 ? (uint64_t) cgroup_fd : 0,
        };
        pid_t pid = (pid_t) spawn_clone3_call(&args, sizeof args, vm_child, vm->plan);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (pid < 0)
                return pid;
        *ret_pidfd = pidfd;
        return pid;
#else
        (void) vm;
        (void) cgroup_fd;
        (void) ret_pidfd;
        return -ENOSYS;
#endif
}
