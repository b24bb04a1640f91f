/* SPDX-License-Identifier: MIT */
/*
 * libexit — exit delivery that never loses an exit (SPEC §2.1) and a pidfd
 * reaper (SPEC §2.2). This is libexit's only installed header.
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - Return: 0 (or a non-negative value the comment names) on success, a
 *    negative errno on failure. The global errno is never a return channel.
 *    Invalid arguments (NULL where a pointer is required, out-of-range values)
 *    answer -EINVAL; no function aborts on bad input.
 *  - ret_* out-parameters are written only on success.
 *  - Thread-safety: every function may be called from any thread, concurrently
 *    with any other, on the same objects, except the _free or _unref of an object
 *    concurrently with another call on that same object.
 *  - Times are milliseconds (timeout_ms); a negative timeout waits forever,
 *    0 never blocks.
 *  - No caller code ever runs inside a libexit call: there are no callbacks.
 *    Readiness is reported through file descriptors (eventfds), all O_CLOEXEC.
 *
 * The long explanation with examples is docs/libexit.3.md.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIBEXIT_VERSION_MAJOR 0
#define LIBEXIT_VERSION_MINOR 1

/* ------------------------------------------------------------------------ */
/* Identity and exit reasons (SPEC §2.1 "Identity", "Exit reason")           */
/* ------------------------------------------------------------------------ */

/*
 * Every process the hub knows gets a 64-bit id, never reused during the hub's
 * lifetime, starting at 1. 0 is never a valid id. Kernel pids are reused, ids
 * are not: the ledger, the watches and the durable records are keyed by id.
 */
typedef uint64_t exit_id_t;

enum exit_reason_kind {
        EXIT_REASON_EXITED = 1, /* status = exit code 0..255 */
        EXIT_REASON_KILLED = 2, /* status = signal number; core_dumped set if it dumped core */
};

/* ABI: 16 bytes, stable from version 1. */
struct exit_reason {
        int32_t kind;        /* enum exit_reason_kind */
        int32_t status;      /* the exit code, or the signal number */
        int32_t core_dumped; /* 0 or 1; only with EXIT_REASON_KILLED */
        int32_t reserved;    /* 0 */
};

/* Fills *ret_reason from a waitid() siginfo: code is si_code, status si_status (CLD_EXITED,
 * CLD_KILLED, CLD_DUMPED). Returns 0, or -EINVAL for any other si_code. */
int exit_reason_from_siginfo(int code, int status, struct exit_reason *ret_reason);

/* The shell's convention: code for EXITED, 128 + signal for KILLED. */
int exit_reason_to_shell_status(const struct exit_reason *reason);

/* ------------------------------------------------------------------------ */
/* Events (SPEC §2.1 "Queue")                                                */
/* ------------------------------------------------------------------------ */

enum exit_event_type {
        EXIT_EVENT_EXIT = 1,   /* a process exited: id, pid, reason, flags are set */
        EXIT_EVENT_LAGGED = 2, /* the queue overflowed since the last receive: events
                                * were dropped (those queued when this marker was
                                * produced, plus those that did not fit). Recover by
                                * taking the outcomes of the ids you own. Other fields 0. */
};

enum exit_event_flags {
        EXIT_EVENT_ORPHAN = 1u << 0, /* not spawned or tracked: reaped as PID 1 / subreaper;
                                      * recorded durably, its outcome cannot be taken */
};

/* ABI: 56 bytes, stable from version 1. */
struct exit_event {
        uint32_t type;  /* enum exit_event_type */
        uint32_t flags; /* enum exit_event_flags */
        exit_id_t id;
        int32_t pid;
        uint32_t reserved0;
        struct exit_reason reason;
        uint64_t reserved[2];
};

/* ------------------------------------------------------------------------ */
/* The hub (SPEC §2.1)                                                       */
/* ------------------------------------------------------------------------ */

struct exit_hub;

#define EXIT_HUB_DEFAULT_QUEUE_CAPACITY 1024u
#define EXIT_HUB_DEFAULT_RECORD_CAPACITY 4096u

/*
 * Creates a hub. queue_capacity bounds the subscription's queue (events),
 * record_capacity bounds the durable records (oldest evicted first); 0 selects
 * the defaults above; both are preallocated here, so publishing never
 * allocates. The caller owns the returned reference ("the owner").
 * Errors: -EINVAL (ret_hub NULL, or a capacity above 2^24), -ENOMEM.
 */
int exit_hub_new(uint32_t queue_capacity, uint32_t record_capacity, struct exit_hub **ret_hub);

/*
 * Reference counting. ref() takes another owner reference and returns hub
 * (NULL if the hub is already closed: it is never reopened). unref() drops
 * one and returns NULL. When the last owner reference is
 * dropped the hub is *closed*: nothing more is published; the subscription
 * drains what is queued, then answers -EPIPE; unfired watches answer -EPIPE.
 * Memory is released once the subscription and every watch and watch set are
 * freed too (each holds an internal reference). Both accept NULL.
 */
struct exit_hub *exit_hub_ref(struct exit_hub *hub);
struct exit_hub *exit_hub_unref(struct exit_hub *hub);

/*
 * Process registration, for a reaper (libexit's own, or an embedder that
 * reaps its children itself; never both for one process).
 *
 * reserve() allocates everything a process needs in the hub and draws its id,
 * before the fork (STYLE "reserve before fork"); attach() binds the reserved
 * id to the child's pid once it exists and never allocates; unreserve()
 * releases a reservation whose fork failed (its watches answer -ESRCH).
 * register() is reserve() + attach() for a process that already exists.
 * A reserved or attached process is *live*; its exit must be published once.
 *
 * Errors: reserve -ENOMEM, -EPIPE (hub closed); attach -ENOENT (no such
 * reservation, or already attached), -EEXIST (that pid is already live in the
 * hub), -EINVAL (pid <= 0); unreserve -ENOENT (no such reservation), -EBUSY
 * (already attached: its exit must be published instead); register as
 * reserve and attach.
 */
int exit_hub_reserve(struct exit_hub *hub, exit_id_t *ret_id);
int exit_hub_attach(struct exit_hub *hub, exit_id_t id, pid_t pid);
int exit_hub_unreserve(struct exit_hub *hub, exit_id_t id);
int exit_hub_register(struct exit_hub *hub, pid_t pid, exit_id_t *ret_id);

/*
 * Publishes the exit of a live process: records the outcome in the ledger and
 * a durable record, then fires its watches, then offers an event to the queue
 * (SPEC §2.1 "Order"). Allocates nothing.
 * Errors: -ENOENT (id unknown or only reserved), -EALREADY (already published),
 * -EPIPE (hub closed).
 */
int exit_hub_publish(struct exit_hub *hub, exit_id_t id, const struct exit_reason *reason);

/*
 * Publishes the exit of an orphan (a process neither spawned nor tracked):
 * draws a new id, records it durably (its outcome cannot be taken), queues an
 * event with EXIT_EVENT_ORPHAN. Errors: -EPIPE (closed), -EINVAL.
 */
int exit_hub_publish_orphan(struct exit_hub *hub, pid_t pid, const struct exit_reason *reason,
                            exit_id_t *ret_id);

/*
 * The exit of an orphan of pid published after id `after` (exit ids grow:
 * a process spawned before the orphan was reaped has a smaller one), the
 * newest if several, from the durable records: 0 and *ret_reason, or
 * -ENOENT (none, or its record was evicted: record_capacity later exits),
 * -EINVAL. A program that learns an orphan's pid only after its exit (a
 * daemon's PID file read once the process that wrote it is gone) gets its
 * exact status this way. Thread-safe (the hub's lock).
 */
int exit_hub_orphan_find(struct exit_hub *hub, pid_t pid, exit_id_t after, struct exit_reason *ret_reason);

/* Maps a pid to the id of its *live* process. Errors: -ESRCH (no live process
 * has that pid). */
int exit_hub_pid_to_id(struct exit_hub *hub, pid_t pid, exit_id_t *ret_id);

/*
 * Takes the outcome of a spawned or tracked process: exactly once, even with
 * concurrent takers (one gets 0, the others -EALREADY). The owner of the
 * process takes it; untaken outcomes are kept (they are the caller's memory
 * to release by taking them). ret_reason is required.
 * Errors: -EINPROGRESS (still live), -EALREADY (taken, while its durable
 * record is retained), -EPERM (an orphan's, while its record is retained),
 * -ENOENT (no such id, unreserved, or taken and its record since evicted).
 */
int exit_hub_take(struct exit_hub *hub, exit_id_t id, struct exit_reason *ret_reason);

/* ------------------------------------------------------------------------ */
/* The subscription: a bounded single-subscriber queue (SPEC §2.1 "Queue")   */
/* ------------------------------------------------------------------------ */

struct exit_sub;

/*
 * Subscribes. One subscription per hub lifetime: a second call fails with
 * -EBUSY, even after the first was freed. Exits published before this call
 * are not queued (they are in the ledger). Holds an internal hub reference.
 * Errors: -EBUSY, -EPIPE (hub closed), -ENOMEM, or an eventfd error.
 */
int exit_hub_subscribe(struct exit_hub *hub, struct exit_sub **ret_sub);

/*
 * Receives one event. Blocks (without polling) up to timeout_ms.
 * Returns 0 with *ret_event filled (an EXIT or a LAGGED marker); -ETIMEDOUT;
 * -EPIPE once the hub is closed and the queue drained.
 */
int exit_sub_recv(struct exit_sub *sub, struct exit_event *ret_event, int timeout_ms);

/*
 * Receives up to n events into events[] (a LAGGED marker is always first of
 * its batch). Returns the count (>= 1), -ETIMEDOUT, or -EPIPE as exit_sub_recv.
 */
int exit_sub_recv_batch(struct exit_sub *sub, struct exit_event *events, size_t n, int timeout_ms);

/* A pollable fd, readable exactly when a receive would not block. Owned by
 * the subscription: do not close it, do not read it. */
int exit_sub_fd(const struct exit_sub *sub);

/* Frees the subscription (NULL accepted); returns NULL. */
struct exit_sub *exit_sub_free(struct exit_sub *sub);

/* ------------------------------------------------------------------------ */
/* Watches: one-shot, notification-only (SPEC §2.1 "Watches")               */
/* ------------------------------------------------------------------------ */

struct exit_watch;
struct exit_watch_set;

enum exit_watch_state {
        EXIT_WATCH_LIVE = 0,           /* armed; fires exactly once */
        EXIT_WATCH_ALREADY_EXITED = 1, /* the reason is returned now; nothing armed */
        EXIT_WATCH_NO_RECORD = 2,      /* no live process and no retained record; nothing armed */
};

/*
 * Watches process id, register-then-check. Returns the state (>= 0):
 *  LIVE: *ret_watch is an armed watch, owned by the caller (exit_watch_free);
 *        it fires once, making readable the fd it was registered through: the
 *        set's shared fd when set is non-NULL, else the watch's own fd.
 *  ALREADY_EXITED: *ret_reason filled (if non-NULL), *ret_watch = NULL.
 *  NO_RECORD: *ret_watch = NULL.
 * userdata is returned by exit_watch_userdata(), never dereferenced.
 * A watch never consumes the ledger's outcome. Holds an internal hub reference.
 * Errors: -EPIPE (hub closed), -ENOMEM, -EINVAL (id 0, ret_watch NULL, or set
 * belongs to another hub).
 */
int exit_hub_watch(struct exit_hub *hub, exit_id_t id, struct exit_watch_set *set, void *userdata,
                   struct exit_watch **ret_watch, struct exit_reason *ret_reason);

/* The watch's own fd (readable once answered: fired, hub closed, or
 * reservation released), created on first call. Owned by the watch: do not
 * close it. -EINVAL if the watch was registered through a set; or an eventfd
 * error. */
int exit_watch_fd(struct exit_watch *watch);

/*
 * Non-blocking result: 0 and *ret_reason (if non-NULL) once fired; -EAGAIN not
 * yet; -EPIPE the hub was closed before it fired; -ESRCH its reservation was
 * released.
 */
int exit_watch_result(struct exit_watch *watch, struct exit_reason *ret_reason);

/* As exit_watch_result, blocking up to timeout_ms: adds -ETIMEDOUT. */
int exit_watch_wait(struct exit_watch *watch, int timeout_ms, struct exit_reason *ret_reason);

exit_id_t exit_watch_id(const struct exit_watch *watch);
void *exit_watch_userdata(const struct exit_watch *watch);

/* Frees a watch (NULL accepted), deregistering it if unfired; returns NULL. */
struct exit_watch *exit_watch_free(struct exit_watch *watch);

/*
 * A watch set: many watches served by one fd, so one event loop serves any
 * number of watches without a thread or an fd per watch. A fired watch is
 * queued on its set (an intrusive link: firing allocates nothing) and the
 * set's fd becomes readable; exit_watch_set_next() pops fired watches.
 */
/* Holds an internal hub reference. Errors: -EPIPE (hub closed), -ENOMEM, or
 * an eventfd error. */
int exit_watch_set_new(struct exit_hub *hub, struct exit_watch_set **ret_set);

/* The set's fd: readable exactly when exit_watch_set_next would return one. */
int exit_watch_set_fd(const struct exit_watch_set *set);

/* Pops one fired watch (still owned by the caller). Returns 0 and *ret_watch,
 * or -EAGAIN when none is pending. Watches answered -EPIPE at close, or -ESRCH
 * at unreserve, are popped too. */
int exit_watch_set_next(struct exit_watch_set *set, struct exit_watch **ret_watch);

/* Frees a set (NULL accepted); its watches should have been freed first
 * (-EBUSY is impossible to return from a free: such watches are detached and
 * report through exit_watch_result/exit_watch_wait only; they stay owned by
 * the caller). Returns NULL. */
struct exit_watch_set *exit_watch_set_free(struct exit_watch_set *set);

/* ------------------------------------------------------------------------ */
/* The reaper: spawn, track, reap and signal through pidfds (SPEC §2.2)     */
/* ------------------------------------------------------------------------ */

struct exit_reaper;
struct exit_process;

enum exit_reaper_flags {
        /* Reap orphans too: as PID 1, or else after making the caller a child
         * subreaper (PR_SET_CHILD_SUBREAPER). In this mode every child of the
         * process that was not spawned or tracked through this reaper is reaped
         * and published as an orphan — including children an embedder forked
         * itself. */
        EXIT_REAPER_ORPHANS = 1u << 0,
        /* Never use clone3: always fork + pidfd_open (the fallback taken
         * automatically when clone3 answers ENOSYS or EPERM). For tests. */
        EXIT_REAPER_NO_CLONE3 = 1u << 1,
        /* Queue an exec event (exit_reaper_next_exec) for every spawned process
         * whose exec status becomes known other than through
         * exit_process_wait_exec: collected by dispatch, or known when spawn
         * returns (the vfork path). The reaper's fd is readable while one is
         * queued, so the caller must pop them all (until -EAGAIN) each time
         * it wakes, or its loop spins. Without it nothing is queued, so an
         * embedder that never pops events keeps no memory for them. */
        EXIT_REAPER_EXEC_EVENTS = 1u << 2,
        /* Never use the vfork path. By default a child with no pre-exec hook
         * and no working directory but "/" is started with
         * clone(CLONE_VM|CLONE_VFORK|CLONE_PIDFD) — with a cgroup, clone3 with
         * CLONE_INTO_CGROUP too, on x86-64 — as posix_spawn does: the caller
         * is suspended until the child has exec'd (no page tables are copied;
         * a child with only 0/1/2 shares the fd table until it unshares the
         * few fds below the reaper's slots), and the exec status is known when
         * spawn returns. docs/reaping.md. For tests. */
        EXIT_REAPER_NO_VFORK = 1u << 3,
        /* Never use the shared-memory path (EXIT_SPAWN_HOOK_SHARED_VM and
         * docs/reaping.md): a child that does not take the vfork path
         * forks (clone3, or fork). For tests. */
        EXIT_REAPER_NO_CLONE_VM = 1u << 4,
};

/*
 * Creates a reaper publishing into hub (which it references). At creation:
 * SIGCHLD is set to its default disposition without SA_NOCLDWAIT (an inherited
 * SIG_IGN would make the kernel discard every exit status) and blocked in the
 * calling thread; the reaper must be created before any other thread exists,
 * or SIGCHLD must be blocked in every thread. Only the reaper's signalfd reads
 * SIGCHLD; only the reaper calls wait*() on its children.
 * At most one reaper per process.
 * Errors: -ENOSYS when the kernel lacks pidfd_open / waitid(P_PIDFD) (Linux
 * < 5.10) or a seccomp profile answers ENOSYS for it, -EPERM when a seccomp
 * profile refuses pidfd_open (docker < 20.10), -EBUSY (a reaper exists),
 * -ENOMEM, -EMFILE, or the errno of signalfd/epoll_create1/eventfd/prctl;
 * exit_reaper_missing_syscall() then names the call. pidfd_send_signal
 * refused (EPERM or ENOSYS) is not an error: see exit_process_signal().
 */
int exit_reaper_new(struct exit_hub *hub, uint32_t flags, struct exit_reaper **ret_reaper);

/* After exit_reaper_new() failed: the name of the system call that failed or
 * was missing ("pidfd_open", "waitid(P_PIDFD)", "eventfd2",
 * "prctl(PR_SET_CHILD_SUBREAPER)", …; a static string), or NULL when the error
 * was not a call's (-EBUSY, -ENOMEM). Not thread-safe: read it right after. */
const char *exit_reaper_missing_syscall(void);

/* Frees the reaper (NULL accepted): closes its fds, unblocks nothing, reaps
 * nothing more; live children keep running. Its hub reference is dropped at
 * once (process handles still held do not keep the hub open), and a new
 * reaper may be created. Returns NULL. */
struct exit_reaper *exit_reaper_free(struct exit_reaper *reaper);

/* An epoll fd (O_CLOEXEC), readable when exit_reaper_dispatch() has work (a
 * child's pidfd, an exec-status pipe, or SIGCHLD) and, with
 * EXIT_REAPER_EXEC_EVENTS, exactly while an exec result is queued for
 * exit_reaper_next_exec (SPEC §2.2: the exec status is an fd the caller
 * watches). Level-triggered. Owned by the reaper. */
int exit_reaper_fd(const struct exit_reaper *reaper);

/*
 * Does all pending work without blocking: reaps every exited child through
 * its pidfd (waitid(P_PIDFD)) and publishes it into the hub; collects exec
 * statuses; in orphan mode runs orphan passes until no zombie is left.
 * Returns the number of exits published (>= 0) or a negative errno.
 */
int exit_reaper_dispatch(struct exit_reaper *reaper);

enum exit_spawn_flags {
        EXIT_SPAWN_SETSID = 1u << 0,      /* child calls setsid() */
        EXIT_SPAWN_SETPGID = 1u << 1,     /* child gets its own process group */
        EXIT_SPAWN_FOREGROUND = 1u << 2,  /* implies SETPGID: if fd 0 is a terminal whose
                                           * foreground group is the caller's, the child makes
                                           * its own group the foreground one (SIGTTOU blocked) */
        EXIT_SPAWN_LISTEN_PID = 1u << 3,  /* envp gains LISTEN_PID=<child's pid> */
        EXIT_SPAWN_WATCHDOG_PID = 1u << 4,/* envp gains WATCHDOG_PID=<child's pid> */
        EXIT_SPAWN_STDIO = 1u << 5,       /* use stdio[]; without it 0/1/2 are inherited */
        EXIT_SPAWN_CGROUP = 1u << 6,      /* use cgroup_fd */
        EXIT_SPAWN_UMASK = 1u << 8,       /* the child sets its umask to attr.umask */
        EXIT_SPAWN_KEEP_FDS = 1u << 7,    /* close nothing: every fd of the caller that is not
                                           * close-on-exec reaches the child at its number (an
                                           * entrypoint passing inherited fds on). The caller
                                           * guarantees its own fds are O_CLOEXEC. */
        EXIT_SPAWN_NO_VFORK = 1u << 9,    /* never the vfork path for this child: spawn returns
                                           * once it exists, not once it has exec'd, so a slow
                                           * exec (a binary on a hung mount) never suspends the
                                           * caller; its exec status comes as for any fork */
        EXIT_SPAWN_SESSION_KEYRING = 1u << 10, /* the child joins a new anonymous session keyring
                                           * (keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL): one
                                           * system call, before the pre-exec hook), owned by the
                                           * child's uid at that point; it no longer shares the
                                           * caller's. A failure (ENOSYS: a kernel without keys;
                                           * EPERM: a seccomp policy; EDQUOT) is the exec status,
                                           * stage EXIT_STAGE_KEYRING. Either path (vfork or fork) */
        EXIT_SPAWN_SESSION_KEYRING_SHARED = 1u << 11, /* implies SESSION_KEYRING: then links the
                                           * child's user keyring (KEY_SPEC_USER_KEYRING) into it
                                           * (KEYCTL_LINK), as systemd's KeyringMode=shared */
        EXIT_SPAWN_HOOK_SHARED_VM = 1u << 12, /* the caller declares pre_exec safe on its own memory:
                                           * the hook allocates nothing, writes no memory but its
                                           * own locals (errno and other thread-locals are the
                                           * child's own), and pre_exec_userdata with all it
                                           * points to stays valid and unchanged until the exec
                                           * status is known (exit_process_exec_result() other
                                           * than -EINPROGRESS, or the exit). Then such a child
                                           * may take the shared-memory path: clone(CLONE_VM)
                                           * without CLONE_VFORK, spawn returning at once, no
                                           * page tables copied (docs/reaping.md). Without the
                                           * flag a child with a hook always forks */
};

#define EXIT_SPAWN_FD_INHERIT (-1) /* stdio slot: keep the caller's fd of that number */
#define EXIT_SPAWN_FD_NULL (-2)    /* stdio slot: /dev/null */

/* Stages reported with an exec failure (exit_process_exec_result ret_stage). */
enum exit_spawn_stage {
        EXIT_STAGE_EXEC = 0,
        EXIT_STAGE_SETUP = 1,  /* session/group, terminal, parent-death signal, cgroup, mask */
        EXIT_STAGE_FDS = 2,
        EXIT_STAGE_CHDIR = 3,
        EXIT_STAGE_KEYRING = 4, /* EXIT_SPAWN_SESSION_KEYRING: the join, or the user keyring's link */
        EXIT_STAGE_HOOK = 16,  /* the pre-exec hook; it may add its own code to this */
};

/*
 * What to spawn. Zero-initialise, then set size = sizeof(struct exit_spawn_attr)
 * (the library accepts older, shorter structs). Every pointer is borrowed for
 * the duration of exit_reaper_spawn() only.
 */
struct exit_spawn_attr {
        uint32_t size;
        uint32_t flags;            /* enum exit_spawn_flags */
        char *const *argv;         /* argv[0] is run: a path if it has a '/', else searched in
                                    * envp's PATH (then the default PATH), as execvp does */
        char *const *envp;         /* NULL: the caller's environ */
        const char *cwd;           /* NULL: inherit; other than "/": never the vfork path */
        int stdio[3];              /* with EXIT_SPAWN_STDIO: fds for 0/1/2, or
                                    * EXIT_SPAWN_FD_INHERIT / EXIT_SPAWN_FD_NULL */
        const int *fds;            /* extra fds, become 3, 4, … in order */
        uint32_t n_fds;
        int pdeath_signal;         /* 0: none; else PR_SET_PDEATHSIG */
        int cgroup_fd;             /* with EXIT_SPAWN_CGROUP: a cgroup2 directory fd; the
                                    * child starts in it (CLONE_INTO_CGROUP, or written to its
                                    * cgroup.procs in the fork fallback) */
        /* Runs in the child after fds, before the signal mask is cleared and the
         * exec; may call only async-signal-safe functions; returns 0 or a negative
         * errno, and may set *ret_stage (EXIT_STAGE_HOOK + n). */
        int (*pre_exec)(void *userdata, int *ret_stage);
        void *pre_exec_userdata;
        /* Accepted only when size covers them (older callers' structs end above): */
        const char *path;          /* the executable; NULL: argv[0] (as described above) */
        uint64_t ignore_signals;   /* bit (sig - 1): started with SIG_IGN instead of SIG_DFL
                                    * (a service's SIGPIPE); every other signal at SIG_DFL */
        uint32_t umask;            /* with EXIT_SPAWN_UMASK */
        uint64_t nofile_soft;      /* non-zero: the child's RLIMIT_NOFILE soft limit (capped
                                    * at the caller's hard limit, which it keeps) */
};

/*
 * Spawns a child (SPEC §2.2): everything that allocates is done before the
 * clone; the child starts with an empty signal mask, every signal at its
 * default, and exactly the fds it was given (close_range). Returns once the
 * child exists — it does not wait for the exec; the exec status arrives
 * through the reaper's fd (exit_reaper_next_exec, with EXIT_REAPER_EXEC_EVENTS;
 * on the vfork path it is known, queued and the fd readable on return) or
 * exit_process_wait_exec().
 * *ret_process is the caller's reference (exit_process_unref).
 * Errors: -EINVAL, -ENOMEM, -EAGAIN/-EMFILE (fork or fds exhausted), -EPIPE
 * (hub closed). A missing binary is not an error here: its exec status is -ENOENT.
 */
int exit_reaper_spawn(struct exit_reaper *reaper, const struct exit_spawn_attr *attr,
                      struct exit_process **ret_process);

/*
 * Whether the calling process has any child left, running or a zombie not yet
 * reaped: 1 or 0. Uses waitid(WNOWAIT), so it reaps nothing.
 */
int exit_reaper_has_children(struct exit_reaper *reaper);

/*
 * Tracks pid, which must be the caller's own unreaped child (zombies
 * included); -ECHILD otherwise, -EEXIST if already tracked.
 */
int exit_reaper_track(struct exit_reaper *reaper, pid_t pid, struct exit_process **ret_process);

/*
 * With EXIT_REAPER_EXEC_EVENTS: pops one process whose exec status became
 * known during dispatch or at spawn (not through exit_process_wait_exec), as
 * a new reference for the caller, in the order they became known. Popping the
 * last one makes the reaper's fd quiet again (unless dispatch has work).
 * Needs no dispatch first: a result known at spawn is poppable at once.
 * Returns 0, or -EAGAIN when none is pending.
 */
int exit_reaper_next_exec(struct exit_reaper *reaper, struct exit_process **ret_process);

pid_t exit_process_pid(const struct exit_process *process);
exit_id_t exit_process_id(const struct exit_process *process);

/* The process's pidfd, owned by the handle (valid until the last unref). */
int exit_process_pidfd(const struct exit_process *process);

/*
 * Sends sig through the pidfd; never to a recycled pid. 0, -ESRCH once
 * reaped, -EINVAL (NULL process, bad sig), or the errno of the send.
 * When a seccomp profile refuses pidfd_send_signal (EPERM or ENOSYS: docker <
 * 20.10, hardened profiles), it falls back to kill(2) on the pid, from the
 * first refusal on (see exit_process_signal_refused()). That is safe because
 * every process handle is the caller's own child, and a child's pid cannot be
 * recycled until it is reaped: the fallback holds the reaper's lock, under
 * which alone the reaper reaps, and checks the process is not reaped yet.
 * After exit_reaper_free() the fallback is not taken (nothing guarantees the
 * pid then): the refusal's errno is returned. Thread-safe.
 */
int exit_process_signal(struct exit_process *process, int sig);

/* 0 while pidfd_send_signal works, else the negative errno (-EPERM or
 * -ENOSYS) it was first refused with, by exit_reaper_new()'s probe or a
 * send: exit_process_signal() then uses kill(2). For a caller that logs
 * the fallback once. Thread-safe. SPEC §2.2. */
int exit_process_signal_refused(void);

/*
 * The exec status: 0 exec succeeded; -EINPROGRESS not known yet; else the
 * negative errno the child failed with (-ENOENT, -EACCES, …), with
 * *ret_stage (if non-NULL) the enum exit_spawn_stage it failed at.
 * Tracked processes answer 0.
 */
int exit_process_exec_result(const struct exit_process *process, int *ret_stage);

/* Blocks up to timeout_ms for the exec status, then answers as
 * exit_process_exec_result, or -ETIMEDOUT. */
int exit_process_wait_exec(struct exit_process *process, int timeout_ms, int *ret_stage);

struct exit_process *exit_process_ref(struct exit_process *process);
struct exit_process *exit_process_unref(struct exit_process *process);

#ifdef __cplusplus
}
#endif
