/* SPDX-License-Identifier: MIT */
/* The reaper's private structures, shared by reaper.c and spawn.c. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>

#include "libexit.h"

enum source_type {
        SOURCE_SIGNAL,
        SOURCE_PIDFD,
        SOURCE_EXEC,
        SOURCE_EXEC_READY, /* the eventfd that is readable while exec results are queued */
};

/* What an epoll_event's data.ptr points at. */
struct source {
        enum source_type type;
        struct exit_process *process; /* NULL for SOURCE_SIGNAL and SOURCE_EXEC_READY */
};

/*
 * One child. Every field below n_ref is protected by its reaper's lock. The
 * reaper holds a reference while the child is unreaped (it is in the pid map
 * and its pidfd in the epoll set); the exec-ready list holds one while queued.
 */
struct exit_process {
        /* (Ordered to leave no hole: one per running process, 96 B, SPEC §8.) */
        atomic_uint n_ref;
        pid_t pid;
        struct exit_reaper *reaper; /* an internal reference */
        exit_id_t id;
        int pidfd;

        /* Exec status: the read end of a close-on-exec pipe; the child writes
         * {errno, stage} if anything fails before or at execve. EOF = exec'd. */
        int exec_fd;
        int exec_error;         /* 1 while unknown, else 0 or a negative errno */
        int exec_stage;
        unsigned exec_pollers;  /* threads in exit_process_wait_exec's poll() on exec_fd */
        bool exec_in_epoll;
        bool pidfd_in_epoll;
        atomic_bool reaped;
        bool exec_queued;

        struct source src_pidfd, src_exec;
        struct exit_process *exec_next; /* the exec-ready list */
        /* The shared-memory path: the child's arena (stack, TLS, plan), owned;
         * freed once the child has exec'd or died, never before. */
        struct spawn_vm *vm;
};

#define EXEC_UNKNOWN 1

/* What the child writes into the exec-status pipe on failure. */
struct exec_failure {
        int32_t error; /* positive errno */
        int32_t stage; /* enum exit_spawn_stage */
};

/*
 * Everything the child needs, computed before the clone (SPEC §2.2: nothing
 * that can allocate or fail happens in the child). Owned by the spawn call.
 */
struct spawn_plan {
        char *const *argv;      /* borrowed */
        char *const *envp;      /* an owned copy when envp_owned, else borrowed */
        char **paths;           /* owned: candidate paths for execve, NULL-terminated */
        bool envp_owned;
        char *listen_pid_slot;  /* points into envp's copy: the digits to fill, or NULL */
        char *watchdog_pid_slot;
        const char *cwd;
        int src_fds[3 + 253];   /* the fd each target 0..n_targets-1 comes from */
        unsigned n_targets;
        int devnull_fd;         /* owned, or -1 */
        int null_fd;            /* borrowed /dev/null (the reaper's), or -1: then devnull_fd is opened */
        int cgroup_fd;          /* borrowed, or -1 */
        int cgroup_procs_fd;    /* owned (fork fallback only), or -1 */
        int status_fd;          /* the pipe's write end, owned; -1 on the vfork path */
        /* The vfork path with CLONE_FILES: the caller put the sources of 0/1/2
         * in these reserved low fds (the reaper's slots) just before the
         * clone; the child unshares only the fds below them. -1: not used. */
        int fd_slots[3];
        struct exec_failure *shared_failure; /* the vfork path: where the child reports */
        uint32_t flags;
        int pdeath_signal;
        pid_t parent_pid;
        bool take_foreground;
        uint64_t ignore_signals;
        mode_t umask;
        bool set_nofile;
        struct rlimit nofile;   /* computed before the clone */
        int (*pre_exec)(void *userdata, int *ret_stage);
        void *pre_exec_userdata;
};

#define SPAWN_MAX_EXTRA_FDS 253u

/* null_fd: an open /dev/null the plan may borrow for EXIT_SPAWN_FD_NULL, or -1. */
int spawn_plan_init(struct spawn_plan *plan, const struct exit_spawn_attr *attr, int null_fd);
void spawn_plan_done(struct spawn_plan *plan);

/* Clones the child (clone3, or fork + pidfd_open when use_clone3 is false or
 * clone3 is refused — *clone3_refused is then set). Returns the pid and
 * *ret_pidfd, or a negative errno. Runs with every signal blocked. */
pid_t spawn_clone(struct spawn_plan *plan, bool use_clone3, bool *clone3_refused, int *ret_pidfd);

/* Whether the plan may take the vfork path: no hook (it could touch the
 * shared memory), no working directory other than "/" (a slow chdir would
 * stall the caller while it is suspended; the root never is), and a cgroup
 * only where clone3 can be called with a stack of its own (spawn_vfork_cgroup_available). */
bool spawn_plan_vfork_ok(const struct spawn_plan *plan);

/* False in sanitizer builds, which always take clone3 (see spawn.c). */
bool spawn_vfork_available(void);

/* Whether this build can vfork into a cgroup: clone3(CLONE_VM | CLONE_VFORK |
 * CLONE_INTO_CGROUP) on a stack of its own needs an assembly trampoline,
 * written for x86-64 only. */
bool spawn_vfork_cgroup_available(void);

/* Whether the plan can use fd slots (spawn_plan.fd_slots): the vfork path,
 * 0/1/2 only, not EXIT_SPAWN_KEEP_FDS. */
bool spawn_plan_slots_ok(const struct spawn_plan *plan);

#define SPAWN_VFORK_STACK_SIZE (128u * 1024u)

/* clone(CLONE_VM|CLONE_VFORK|CLONE_PIDFD) on stack, or clone3 with
 * CLONE_INTO_CGROUP too when the plan has a cgroup; CLONE_FILES when the plan
 * uses fd slots. The caller is suspended until the child has exec'd or
 * failed, so the exec status is known on return, in *ret_failure (error 0 =
 * exec'd). Returns the pid or a negative errno: -ENOSYS, -EPERM, -EINVAL or
 * -E2BIG from clone3 mean the kernel (or a seccomp policy) refused it. */
pid_t spawn_vfork(struct spawn_plan *plan, void *stack, int *ret_pidfd, struct exec_failure *ret_failure);

/* ---- the shared-memory path (spawn.c: clone(CLONE_VM) without CLONE_VFORK) ---- */

struct spawn_vm;

/* Whether this build and libc can give a child a copy of the calling
 * thread's TLS (x86-64 glibc, found through dlsym; never in sanitizer builds
 * or static binaries). Probed once; thread-safe. */
bool spawn_vm_available(void);

/* Whether the plan may take the shared-memory path: no hook, or one the
 * caller declared safe on shared memory (EXIT_SPAWN_HOOK_SHARED_VM); and
 * spawn_vm_available(). */
bool spawn_plan_vm_ok(const struct spawn_plan *plan);

/* Maps the child's arena (a guard page, a stack, a copy of the plan with
 * its argv, envp, paths and cwd, a copy of the calling thread's TLS) and
 * fills it; the plan is not used after. *ret is the caller's (spawn_vm_free).
 * Errors: -ENOSYS (not available), or mmap's. */
int spawn_vm_new(const struct spawn_plan *plan, struct spawn_vm **ret);

/* Unmaps the arena (NULL accepted); returns NULL. Only once its child has
 * exec'd or died, or was never cloned. */
struct spawn_vm *spawn_vm_free(struct spawn_vm *vm);

/* clone3(CLONE_VM | CLONE_PIDFD | CLONE_SETTLS [| CLONE_INTO_CGROUP when
 * cgroup_fd >= 0]) on the arena's stack and TLS, every signal blocked
 * around it; the caller goes on at once. Returns the pid and *ret_pidfd, or
 * a negative errno: -ENOSYS, -EPERM, -EINVAL, -E2BIG mean refused (then fork). */
pid_t spawn_vm_clone(struct spawn_vm *vm, int cgroup_fd, int *ret_pidfd);
