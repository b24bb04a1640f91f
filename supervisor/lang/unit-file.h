/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser (SPEC §3): DIR/NAME.service in systemd's unit syntax
 * and semantics for SPEC §3's subset, loaded into a struct unit_file. The
 * reference for users is docs/tend.service.5.md (every key, its default, the
 * differences from systemd).
 *
 * Diagnostics (SPEC §3, §7), all through log.h, each naming "FILE:LINE:" and
 * quoting what the user wrote:
 *  - warning, the rest of the file still loads: an unknown section or key, a
 *    key not applied (once per unit, saying what differs), an unknown escape
 *    sequence (kept verbatim);
 *  - error, the unit is not loaded: a syntax error, an invalid value, a value
 *    tend recognises but cannot honour ("… is not supported: WHY").
 * A bad file never affects another unit, and no input makes the parser crash
 * or grow without bound (tests/fuzz/fuzz-unit-file.c).
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - Return 0 on success or a negative errno; ret_* out-parameters are
 *    written only on success.
 *  - Pure and reentrant: no global state, so units may be parsed from several
 *    threads at once; only log.h (thread-safe) and the file system are touched.
 *  - Times are µs (usec_t); USEC_INFINITY is "infinity".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "sandbox-values.h"
#include "unit-hardening.h"
#include "time-util.h"
#include "unit-exec.h"

/* Longest unit name, systemd's UNIT_NAME_MAX less the NUL. */
#define UNIT_NAME_MAX 255
/* Longest unit file read; longer files are refused (SPEC §7: bounded memory). */
#define UNIT_FILE_SIZE_MAX (1024 * 1024)

typedef enum unit_type {
        UNIT_TYPE_SIMPLE,  /* started at fork */
        UNIT_TYPE_EXEC,    /* started at a successful exec */
        UNIT_TYPE_NOTIFY,  /* started at READY=1 (SPEC §4 "Readiness and notify") */
        UNIT_TYPE_ONESHOT, /* started at a successful exit */
        UNIT_TYPE_FORKING, /* started when ExecStart= exits 0: the main process from PIDFile= or guessed */
        UNIT_TYPE_IDLE,    /* parsed only: the loaded unit says UNIT_TYPE_SIMPLE (console ordering aside, the same) */
} unit_type;

typedef enum unit_restart {
        UNIT_RESTART_NO,
        UNIT_RESTART_ALWAYS,
        UNIT_RESTART_ON_SUCCESS,
        UNIT_RESTART_ON_FAILURE,
        UNIT_RESTART_ON_ABNORMAL,
        UNIT_RESTART_ON_ABORT,
        UNIT_RESTART_ON_WATCHDOG,
} unit_restart;

/* SuccessAction= / FailureAction=. */
typedef enum unit_action {
        UNIT_ACTION_NONE,
        UNIT_ACTION_EXIT,       /* orderly shutdown of tend, exit with the unit's status */
        UNIT_ACTION_EXIT_FORCE, /* immediate exit with the unit's status */
} unit_action;

typedef enum unit_kill_mode {
        UNIT_KILL_CONTROL_GROUP,
        UNIT_KILL_MIXED,
        UNIT_KILL_PROCESS,
} unit_kill_mode;

typedef enum unit_notify_access {
        UNIT_NOTIFY_ACCESS_DEFAULT, /* not set: none, or main for notify/watchdog units (SPEC §4) */
        UNIT_NOTIFY_ACCESS_NONE,
        UNIT_NOTIFY_ACCESS_MAIN,
        UNIT_NOTIFY_ACCESS_EXEC,
        UNIT_NOTIFY_ACCESS_ALL,
} unit_notify_access;

typedef enum unit_output_kind {
        /* Not set. StandardOutput: SPEC §4's default, decided by the log module
         * (the journal when $JOURNAL_STREAM matches tend's stderr, else tend's
         * stdout with a "NAME[PID]: " prefix). StandardError: the same target as
         * standard output (systemd's DefaultStandardError=inherit); an explicit
         * StandardError=inherit is stored as this too. */
        UNIT_OUTPUT_DEFAULT,
        UNIT_OUTPUT_INHERIT, /* StandardOutput=inherit: tend's own stdout, no prefix, no ring */
        UNIT_OUTPUT_NULL,
        UNIT_OUTPUT_JOURNAL,
        UNIT_OUTPUT_FILE,   /* file:PATH, opened for writing without truncation */
        UNIT_OUTPUT_APPEND, /* append:PATH */
        UNIT_OUTPUT_TTY,    /* tty: TTYPath= (exec helper, issue 16) */
} unit_output_kind;

struct unit_output {
        unit_output_kind kind;
        char *path; /* UNIT_OUTPUT_FILE / _APPEND: absolute path; otherwise NULL */
};

/*
 * Exit statuses that SuccessExitStatus= / RestartPreventExitStatus= list:
 * codes 0–255 and signals 1–64 (termination by that signal).
 */
struct unit_exit_status_set {
        uint64_t codes[4];
        uint64_t signals; /* bit sig-1 */
};

static inline bool unit_exit_status_set_has_code(const struct unit_exit_status_set *s, int code) {
        return code >= 0 && code <= 255 && (s->codes[code / 64] >> (code % 64)) & 1;
}
static inline bool unit_exit_status_set_has_signal(const struct unit_exit_status_set *s, int sig) {
        return sig >= 1 && sig <= 64 && (s->signals >> (sig - 1)) & 1;
}

/*
 * A loaded unit. Every pointer is owned by the struct (unit_file_free()).
 * Defaults (docs/tend.service.5.md) are set for every key not in the file.
 */
/* (The small fields are grouped to leave few holes: 1,000 units keep one each,
 * SPEC §8's footprint; add a new group of keys as a pointer to an out-of-line
 * struct, as sandbox does.) */
/* etcd: [X-Tend] Hosts=, HostMetadata= (docs/cluster.md): the hosts of the
 * cluster that may run the unit; out of line, few units set them. */
struct unit_cluster_keys {
        char **hosts;         /* host ids; NULL: any */
        char **host_metadata; /* "K=V", each to match the host's --host-metadata; NULL: none */
};
void unit_cluster_keys_free(struct unit_cluster_keys *ck);

struct unit_file {
        char *name;     /* "foo.service", "foo@bar.service" */
        char *path;     /* the file read: DIR/NAME, or DIR/foo@.service for an instance */
        char *instance; /* "bar" for foo@bar.service, otherwise NULL */
        /* The text parsed (the template's for an instance without its own file):
         * its size and FNV-1a 64 hash. daemon-reload restarts a unit whose text
         * changed and touches no other (SPEC §5; unit_file_same_text()). */
        size_t text_size;
        uint64_t text_hash;

        /* [Unit] */
        char *description;               /* NULL if not set */
        char **requires, **wants, **binds_to, **after, **before; /* service names, or NULL (other unit types are dropped) */
        usec_t start_limit_interval;     /* StartLimitIntervalSec=, 10s; 0 disables the limit */
        unsigned start_limit_burst;      /* StartLimitBurst=, 5 */
        unit_action success_action;      /* none */
        unit_action failure_action;      /* none */

        /* [Service] */
        unit_type type;                  /* simple, or oneshot when there is no ExecStart= */
        struct unit_command_list exec_start_pre;
        struct unit_command_list exec_start; /* exactly 1, or ≥ 0 for oneshot */
        struct unit_command_list exec_start_post;
        struct unit_command_list exec_stop;
        struct unit_command_list exec_reload;
        unit_restart restart;            /* no */
        unsigned restart_steps;          /* RestartSteps=, 0 */
        usec_t restart_sec;              /* RestartSec=, 100ms */
        usec_t restart_max_delay;        /* RestartMaxDelaySec=, infinity */
        struct unit_exit_statuses *exit_statuses; /* owned; NULL: both empty (unit_file_exit_statuses()) */
        usec_t timeout_start;            /* TimeoutStartSec=, 90s (infinity for oneshot); 0 → infinity */
        usec_t timeout_stop;             /* TimeoutStopSec=, 10s (SPEC §3); 0 → infinity */
        usec_t watchdog;                 /* WatchdogSec=, 0: none (infinity: none either) */
        int watchdog_signal;             /* WatchdogSignal=, SIGABRT */
        unit_notify_access notify_access;/* NotifyAccess=, DEFAULT (unit_notify_access_effective()) */
        unit_kill_mode kill_mode;        /* control-group */
        int kill_signal;                 /* SIGTERM */
        int final_kill_signal;           /* SIGKILL */
        bool send_sigkill;               /* yes */
        bool ignore_sigpipe;             /* yes */
        bool remain_after_exit;          /* no */
        bool guess_main_pid;             /* fork: GuessMainPID=, yes (here: no hole, SPEC §8) */
        char **environment;              /* Environment=: "NAME=VALUE" strv, a later NAME replacing an
                                          * earlier one in place; NULL if none */
        struct unit_env_file *environment_files; /* EnvironmentFile=, read at each start */
        size_t n_environment_files;
        char *working_directory;         /* absolute, or NULL for "/" (and for "~") */
        bool working_directory_missing_ok; /* '-' prefix */
        bool working_directory_home;     /* WorkingDirectory=~: User='s home (tend's user's without User=) */
        /* journal: SyslogLevelPrefix=, SyslogLevel=, SyslogFacility= (unit-file-syslog.c);
         * 0 = not set, use unit_file_syslog_priority(), unit_file_syslog_level_prefix() */
        uint8_t syslog_level;            /* SyslogLevel= + 1 */
        uint8_t syslog_facility;         /* SyslogFacility= + 1 */
        uint8_t syslog_level_prefix;     /* SyslogLevelPrefix=: 1 no, 2 yes */
        bool stop_when_unneeded;         /* deps: StopWhenUnneeded=, no */
        bool on_failure_mode_fail;       /* deps: OnFailureJobMode=fail; no: replace (the default) */
        bool singleton;                  /* etcd: [X-Tend] Singleton=, no: one host of the cluster runs it
                                          * (docs/cluster.md; in the padding before standard_output) */
        struct unit_cluster_keys *cluster_keys; /* etcd: Hosts=, HostMetadata=; owned, NULL: none */
        struct unit_output standard_output;
        struct unit_output standard_error;
        char *syslog_identifier;         /* NULL: the unit name (SyslogLevel= … are with the flags above) */

        /* fork: Type=forking's keys (docs/tend.service.5.md "Type=forking"). */
        char *pid_file;                  /* PIDFile=: absolute (a relative one is under /run), NULL: none */

        /* Sandboxing (sandbox.h; docs/tend.service.5.md "SANDBOXING"), applied at
         * each start: out of line, few units set any (unit_file_sandbox()). */
        struct unit_sandbox_keys *sandbox; /* owned; NULL: every key at its default */

        /* deps: the dependency keys beyond Requires=/Wants=/BindsTo=/After=/Before=
         * (docs/tend.service.5.md "DEPENDENCIES"): lists out of line, few units set them. */
        struct unit_dep_keys *dep_keys;  /* owned; NULL: every list empty (unit_file_dep_keys());
                                          * StopWhenUnneeded=, OnFailureJobMode= are with the flags above */
        /* cond: Condition*=, Assert*= (docs/tend.service.5.md "CONDITIONS"),
         * checked at each start (exec/condition.h): out of line, most units have none. */
        struct unit_conditions *conditions; /* owned; NULL: none */
        /* load: the unit's other names and the drop-ins read (docs/tend.service.5.md "LOADING") */
        char **aliases;                  /* alias symlinks in DIR and [Install] Alias=, sorted; NULL: none */
        char **dropins;                  /* the drop-in files parsed after path, in order; NULL: none */
        /* security: the hardening keys tend refuses, the opt-out, what tendctl security reads
         * (unit-hardening.h; docs/tend.service.5.md "HARDENING") */
        struct unit_hardening *hardening; /* owned; NULL: none of them set */
};

/* deps: the lists of the dependency keys (service names, other unit types
 * dropped as for Requires=; NULL when empty). Conflicts= is symmetric and
 * ReloadPropagatedFrom= is PropagatesReloadTo= turned around: the graph
 * (lifecycle/deps.h) joins both directions. */
struct unit_dep_keys {
        char **requisite, **part_of, **conflicts, **upholds;
        char **on_failure, **on_success;
        char **propagates_reload_to, **reload_propagated_from;
};

/* f's dependency lists; all empty when it sets none. */
static inline const struct unit_dep_keys *unit_file_dep_keys(const struct unit_file *f) {
        static const struct unit_dep_keys none = {};
        return f->dep_keys ? f->dep_keys : &none;
}

/* The priority of f's lines without a "<N>" prefix: SyslogFacility= (default
 * daemon) | SyslogLevel= (default info), as <syslog.h> numbers them. Thread-safe. */
static inline int unit_file_syslog_priority(const struct unit_file *f) {
        int level = f->syslog_level ? f->syslog_level - 1 : 6 /* LOG_INFO */;
        int facility = f->syslog_facility ? f->syslog_facility - 1 : 3 /* LOG_DAEMON >> 3 */;
        return (facility << 3) | level;
}

/* SyslogLevelPrefix= (default yes): whether a "<N>" at a line's start gives its level. */
static inline bool unit_file_syslog_level_prefix(const struct unit_file *f) {
        return f->syslog_level_prefix != 1;
}

/* A syslog level by name ("err", "warning" …) or number 0-7: the level, or
 * -EINVAL. Thread-safe. */
int unit_syslog_level_from_string(const char *s);

/* SuccessExitStatus= and RestartPreventExitStatus=: out of line, few units set them. */
struct unit_exit_statuses {
        struct unit_exit_status_set success;         /* SuccessExitStatus=, empty: 0 alone is success */
        struct unit_exit_status_set restart_prevent; /* RestartPreventExitStatus=, empty */
};

/* Both sets empty (what a NULL unit_file.exit_statuses means). */
extern const struct unit_exit_statuses unit_exit_statuses_none;

/* f's exit status sets: never NULL, borrowed from f (or static). Thread-safe. */
static inline const struct unit_exit_statuses *unit_file_exit_statuses(const struct unit_file *f) {
        return f->exit_statuses ? f->exit_statuses : &unit_exit_statuses_none;
}

/* The sandboxing keys of a unit file. */
struct unit_sandbox_keys {
        char *user;                      /* User=: a name or a numeric uid; NULL: tend's own */
        char *group;                     /* Group=: a name or a numeric gid; NULL: User='s primary group */
        char **supplementary_groups;     /* SupplementaryGroups=: names or gids, added to User='s; NULL: none */
        mode_t umask;                    /* UMask=, 0022 */
        struct sandbox_limit limits[SANDBOX_RLIMIT_MAX]; /* Limit*=, by resource: not set → tend's own */
        bool no_new_privileges;          /* NoNewPrivileges=, no (SystemCallFilter= may imply it) */
        uint64_t capability_bounding_set;/* CapabilityBoundingSet=, a mask: UINT64_MAX, unchanged */
        uint64_t ambient_capabilities;   /* AmbientCapabilities=, a mask: 0 */
        struct sandbox_syscall_filter syscall_filter; /* SystemCallFilter=: not set */
        int syscall_error_number;        /* SystemCallErrorNumber=: 0, a denied call kills with SIGSYS */
        /* exec (issue 16): directories and process keys (exec-dirs.h, sandbox.h) */
        struct unit_exec_keys *exec;     /* owned; NULL: every key at its default (unit_sandbox_exec()) */
        /* seccomp (issue 17): the seccomp keys and the non-mount namespaces (unit-file-hardening.c) */
        struct unit_hardening_keys *hardening; /* owned; NULL: every key at its default (unit_file_hardening()) */
        /* ns: the file-system namespace keys (unit-file-namespace.h, exec/namespace.h) */
        struct unit_namespace_keys *ns;  /* owned; NULL: every key at its default (unit_file_namespace()) */
        /* cost17: the seccomp programs compiled from these keys, reused at every start */
        struct unit_bpf_cache *bpf_cache; /* owned; NULL until the first start that needs one */
};

/* cost17: BPF programs exec/sandbox-seccomp.c compiled with libseccomp at the
 * first start of a loaded unit file, reused by every later start until the
 * file is freed (a daemon-reload that changes it parses a new one). They are
 * a function of the keys alone (and of tend's personality, which never
 * changes), so a start never needs a fresh one; files with the same
 * SystemCallFilter= share one program. Manager thread only; released with
 * the file (unit_file_free() calls release, which exec sets). */
struct unit_bpf_program {
        void *filter;                    /* struct sock_filter[len], owned; NULL: none */
        unsigned short len;
};
#define UNIT_BPF_PROGRAMS 8
struct unit_bpf_cache {
        void (*release)(struct unit_bpf_cache *c); /* frees c and what it holds (never NULL) */
        bool filter_built;               /* SystemCallFilter='s program is in filter */
        struct unit_bpf_program filter;  /* borrowed from filter_shared */
        void *filter_shared;             /* exec's reference to the program shared by files (opaque) */
        bool programs_built;             /* the hardening keys' programs are in programs[] */
        size_t n_programs;
        struct unit_bpf_program programs[UNIT_BPF_PROGRAMS]; /* in load order */
};

/* seccomp (issue 17): RestrictAddressFamilies= … PrivateUsers= (exec/sandbox-seccomp.c,
 * exec/sandbox-ns.c apply them; docs/tend.service.5.md "HARDENING"). */
#define UNIT_ARCHS_MAX 8
struct unit_hardening_keys {
        bool address_families_set;       /* RestrictAddressFamilies=: not set, every family */
        bool address_families_allow;     /* an allow list (else "~": a deny list) */
        uint64_t address_families;       /* bit n: AF_n (families below 64; "none": an empty allow list) */
        bool namespaces_set;             /* RestrictNamespaces=: not set, no restriction */
        unsigned long namespaces_allowed;/* the CLONE_NEW* flags a process may still use */
        uint32_t archs[UNIT_ARCHS_MAX];  /* SystemCallArchitectures=: libseccomp's tokens, 0-terminated; none: any */
        bool lock_personality, memory_deny_write_execute, restrict_realtime, restrict_suid_sgid;
        bool protect_clock, protect_kernel_modules, protect_kernel_logs, protect_hostname;
        /* ↑ protect_kernel_modules, protect_kernel_logs: their seccomp and capability parts are
         * exec/sandbox-seccomp.c's; their mount parts (/usr/lib/modules; /proc/kmsg, /dev/kmsg)
         * belong to the mount namespace's plan ("ns"), which reads these two flags. */
        bool private_network, private_ipc, private_users;
        struct sandbox_syscall_filter syscall_log; /* SystemCallLog=: allow_list: the calls logged ("~": all but those); not set */
};

/* Every hardening key at its default (what a NULL unit_sandbox_keys.hardening means). */
extern const struct unit_hardening_keys unit_hardening_defaults;

/* f's hardening keys: never NULL, borrowed from f (or static). Thread-safe. */
const struct unit_hardening_keys *unit_file_hardening(const struct unit_file *f);

/* Frees h and what it owns; NULL. NULL is accepted. */
struct unit_hardening_keys *unit_hardening_keys_free(struct unit_hardening_keys *h);

/* RuntimeDirectory=, StateDirectory=, CacheDirectory=, LogsDirectory=, ConfigurationDirectory=. */
typedef enum unit_exec_dir {
        UNIT_EXEC_DIR_RUNTIME,
        UNIT_EXEC_DIR_STATE,
        UNIT_EXEC_DIR_CACHE,
        UNIT_EXEC_DIR_LOGS,
        UNIT_EXEC_DIR_CONFIGURATION,
        _UNIT_EXEC_DIR_MAX,
} unit_exec_dir;

typedef enum unit_preserve {
        UNIT_PRESERVE_NO,
        UNIT_PRESERVE_YES,
        UNIT_PRESERVE_RESTART,
} unit_preserve;

typedef enum unit_input_kind {
        UNIT_INPUT_NULL,
        UNIT_INPUT_TTY,       /* TTYPath= as the controlling terminal, if free (tend does not wait) */
        UNIT_INPUT_TTY_FORCE, /* taken from another session if need be */
        UNIT_INPUT_TTY_FAIL,  /* the start fails if another session has it */
        UNIT_INPUT_FILE,      /* file:PATH, read-only */
        UNIT_INPUT_DATA,      /* StandardInputText=: the text, through a memfd */
} unit_input_kind;

#define UNIT_CPU_SET_WORDS 16 /* CPUAffinity=: CPUs 0…1023 */

/* The process keys of issue 16 (sandbox.h applies them; docs/tend.service.5.md "PROCESS"). */
struct unit_exec_keys {
        char **directories[_UNIT_EXEC_DIR_MAX]; /* relative, safe paths ("a", "a/b"); NULL: none */
        mode_t directory_modes[_UNIT_EXEC_DIR_MAX]; /* *DirectoryMode=, 0755 */
        unit_preserve runtime_directory_preserve; /* RuntimeDirectoryPreserve=, no */
        bool nice_set, oom_score_adjust_set, io_set, cpu_sched_set, cpu_sched_reset_on_fork, cpu_affinity_set;
        int nice;                        /* Nice=, -20…19 */
        int oom_score_adjust;            /* OOMScoreAdjust=, -1000…1000 */
        int io_class, io_priority;       /* IOSchedulingClass= (IOPRIO_CLASS_*), IOSchedulingPriority= 0…7 */
        int cpu_sched_policy, cpu_sched_priority; /* CPUSchedulingPolicy= (SCHED_*), CPUSchedulingPriority= */
        uint64_t cpu_affinity[UNIT_CPU_SET_WORDS]; /* CPUAffinity=, bit n: CPU n */
        unit_input_kind standard_input;  /* StandardInput=, null */
        char *standard_input_path;       /* file:PATH */
        char *standard_input_text;       /* StandardInputText=, lines joined with '\n' */
        char *tty_path;                  /* TTYPath=, NULL: /dev/console */
        bool tty_reset, tty_vhangup, tty_vt_disallocate;
        /* corpus: the keys the Debian corpus uses (unit-file-extra.c; docs/tend.service.5.md "MORE KEYS") */
        char **unset_environment;        /* UnsetEnvironment=: NAME or NAME=VALUE entries; NULL: none */
        int restart_kill_signal;         /* RestartKillSignal=: 0, KillSignal= */
        bool send_sighup;                /* SendSIGHUP=, no */
        bool permissions_start_only;     /* PermissionsStartOnly=, no: applied to the commands' flags at load */
        uint64_t tasks_max;              /* TasksMax=: 0 not set, UINT64_MAX infinity, else the pids.max */
};

/*
 * corpus: removes from envp (a NULL-terminated strv, changed in place) every
 * NAME=… whose NAME is an entry of unset without '=', and every assignment
 * equal to an entry with '=' (systemd.exec(5) UnsetEnvironment=). The removed
 * strings are freed. Neither may be NULL except unset (nothing to do).
 */
void unit_env_unset(char **envp, char *const *unset);

/* Every process key at its default (what a NULL unit_sandbox_keys.exec means). */
extern const struct unit_exec_keys unit_exec_defaults;

/* f's process keys: never NULL, borrowed from f (or static). Thread-safe. */
const struct unit_exec_keys *unit_file_exec(const struct unit_file *f);

/* Frees what e owns and resets it to the defaults (unit-file-process.c). */
void unit_exec_keys_clear(struct unit_exec_keys *e);

/* Every sandboxing key at its default (what a NULL unit_file.sandbox means). */
extern const struct unit_sandbox_keys unit_sandbox_defaults;

/* f's sandboxing keys: never NULL, borrowed from f (or static). Thread-safe. */
static inline const struct unit_sandbox_keys *unit_file_sandbox(const struct unit_file *f) {
        return f->sandbox ? f->sandbox : &unit_sandbox_defaults;
}

/* cond: the conditions and asserts of a unit (systemd.unit(5) "Conditions and
 * Asserts"), in the order of their keys; exec/condition.h evaluates them. */
typedef enum unit_condition_type {
        UNIT_CONDITION_ARCHITECTURE,
        UNIT_CONDITION_FIRMWARE,
        UNIT_CONDITION_VIRTUALIZATION,
        UNIT_CONDITION_HOST,
        UNIT_CONDITION_KERNEL_COMMAND_LINE,
        UNIT_CONDITION_KERNEL_VERSION,
        UNIT_CONDITION_CREDENTIAL,
        UNIT_CONDITION_ENVIRONMENT,
        UNIT_CONDITION_SECURITY,
        UNIT_CONDITION_CAPABILITY,
        UNIT_CONDITION_AC_POWER,
        UNIT_CONDITION_NEEDS_UPDATE,
        UNIT_CONDITION_FIRST_BOOT,
        UNIT_CONDITION_PATH_EXISTS,
        UNIT_CONDITION_PATH_EXISTS_GLOB,
        UNIT_CONDITION_PATH_IS_DIRECTORY,
        UNIT_CONDITION_PATH_IS_SYMBOLIC_LINK,
        UNIT_CONDITION_PATH_IS_MOUNT_POINT,
        UNIT_CONDITION_PATH_IS_READ_WRITE,
        UNIT_CONDITION_PATH_IS_ENCRYPTED,
        UNIT_CONDITION_DIRECTORY_NOT_EMPTY,
        UNIT_CONDITION_FILE_NOT_EMPTY,
        UNIT_CONDITION_FILE_IS_EXECUTABLE,
        UNIT_CONDITION_USER,
        UNIT_CONDITION_GROUP,
        UNIT_CONDITION_CONTROL_GROUP_CONTROLLER,
        UNIT_CONDITION_MEMORY,
        UNIT_CONDITION_CPUS,
        UNIT_CONDITION_CPU_FEATURE,
        UNIT_CONDITION_OS_RELEASE,
        UNIT_CONDITION_MEMORY_PRESSURE,
        UNIT_CONDITION_CPU_PRESSURE,
        UNIT_CONDITION_IO_PRESSURE,
        _UNIT_CONDITION_TYPE_MAX,
} unit_condition_type;

struct unit_condition {
        unit_condition_type type;
        bool is_assert;  /* Assert*=: its failure fails the start; Condition*=: skips it */
        bool trigger;    /* '|': one of the triggering checks, of which one must hold */
        bool negate;     /* '!' */
        unsigned line;   /* of the assignment in unit_file.path */
        char *parameter; /* specifiers resolved; never NULL */
};

struct unit_conditions {
        size_t n;
        struct unit_condition items[]; /* n, owned */
};

/* The name after "Condition"/"Assert" of type t ("PathExists"); NULL if out of range. */
const char *unit_condition_type_name(unit_condition_type t);

/* Frees every condition of l and l; returns NULL. NULL is accepted. */
struct unit_conditions *unit_conditions_free(struct unit_conditions *l);

/* Frees u and everything it owns; returns NULL. NULL is accepted. */
struct unit_file *unit_file_free(struct unit_file *u);

/* Whether a and b were parsed from the same text (size and hash equal). */
static inline bool unit_file_same_text(const struct unit_file *a, const struct unit_file *b) {
        return a->text_size == b->text_size && a->text_hash == b->text_hash;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct unit_file *, unit_file_free);

/* ------------------------------------------------------------------------ */
/* Unit names (systemd.unit(5): NAME.service, NAME@.service, NAME@INST.service) */
/* ------------------------------------------------------------------------ */

enum {
        UNIT_NAME_PLAIN = 1 << 0,    /* foo.service */
        UNIT_NAME_TEMPLATE = 1 << 1, /* foo@.service */
        UNIT_NAME_INSTANCE = 1 << 2, /* foo@bar.service */
        UNIT_NAME_ANY = UNIT_NAME_PLAIN | UNIT_NAME_TEMPLATE | UNIT_NAME_INSTANCE,
};

/*
 * True if name is a valid service unit name of one of the kinds in flags:
 * at most UNIT_NAME_MAX bytes, ending in ".service", a non-empty prefix of
 * [A-Za-z0-9:_.\\-], then for a template "@", for an instance "@" and a
 * non-empty instance of the same characters plus "@".
 */
bool unit_name_is_valid(const char *name, unsigned flags);

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Parses the text data[0..size) of unit name (the fuzzing and testing entry
 * point; unit_load() reads the file and calls this). name must be a valid
 * plain or instance name: it gives %n %N %p %P %i %I %f %j %J. origin names
 * the file in messages ("FILE:LINE: ..."). On success *ret is a new unit
 * owned by the caller (its path is origin). Returns 0; -EINVAL (invalid
 * name, or the text is not a loadable unit: the messages say why);
 * -EOPNOTSUPP (a key or value tend does not support yet); -EFBIG (over
 * UNIT_FILE_SIZE_MAX); -ENOMEM. ret_message (optional) receives, on failure,
 * a copy of the first error message (for status displays), owned by the
 * caller; NULL on success.
 */
int unit_file_parse(const char *name, const char *origin, const char *data, size_t size, struct unit_file **ret,
                    char **ret_message);

/* Drop-in files of one unit at most (systemd has no limit; tend's bounds the memory of a
 * load): a unit with more is refused, naming the directory, rather than run with some
 * unread (parsefix, issue 17 M6). */
#define UNIT_DROPINS_MAX 1024

/* One text of a unit: its file, or one of its drop-ins. */
struct unit_text {
        const char *origin; /* the file, for messages */
        const char *data;   /* size bytes, need not be NUL-terminated; NULL if size is 0 */
        size_t size;
};

/*
 * unit_file_parse() over texts[0..n): the unit's file, then its drop-ins in
 * the order they apply (1 ≤ n ≤ UNIT_DROPINS_MAX + 1); each starts outside
 * any section, and an empty assignment resets what earlier texts set, as in
 * systemd. Messages name each text's own FILE:LINE. The unit's path is
 * texts[0].origin, its dropins the other origins; its text_size and text_hash
 * cover every text and the drop-ins' names. Returns as unit_file_parse().
 */
int unit_file_parse_texts(const char *name, const struct unit_text *texts, size_t n, struct unit_file **ret,
                          char **ret_message);

/*
 * Loads unit name from directory dir (docs/tend.service.5.md "LOADING"):
 * DIR/NAME, or for an instance foo@bar.service without its own file,
 * DIR/foo@.service with %i = bar. Links are followed: a link to another
 * name of DIR is an alias (the unit is loaded under the name the links
 * lead to: *ret's name may differ from name); a link out of DIR is a linked
 * unit named by the link, whose file is the target, which must be a regular
 * file named as a unit of name's kind (anything else is refused unread); a
 * file that is empty or links to /dev/null is a masked unit. Then the
 * drop-ins: every *.conf of NAME.service.d/, the template's
 * NAME@.service.d/, the dash prefixes' (foo-.service.d/ for foo-bar.service)
 * and service.d/ in DIR, by file name, a more specific directory's file
 * hiding a same-named one of a less specific; an empty or /dev/null drop-in
 * adds nothing.
 * Returns 0 with *ret owned by the caller; -EINVAL (a template name, an
 * invalid name, a link refused), -ENOENT (no such unit), -ERFKILL (masked),
 * an error of unit_file_parse(), or the open/read error; every failure is
 * logged, quoting no more than a token of any file (a path, a key, a value).
 * ret_message as for unit_file_parse().
 */
int unit_load(const char *dir, const char *name, struct unit_file **ret, char **ret_message);

/* Whether DIR has a file for unit name (an instance: its own or its
 * template's), a link or not, without reading it; false for an invalid name. */
bool unit_exists(const char *dir, const char *name);

/* A unit of a directory that was not loaded. */
struct unit_load_error {
        char *name;    /* the file name in DIR */
        int error;     /* negative errno, as unit_load() returned it; -ERFKILL: masked */
        char *message; /* the first error message (already logged) */
};

/* The result of loading a directory: sorted by name. */
struct unit_set {
        struct unit_file **units; /* n_units, owned */
        size_t n_units;
        struct unit_load_error *errors; /* n_errors, owned */
        size_t n_errors;
};

/* Frees s and every unit and error in it; returns NULL. NULL is accepted. */
struct unit_set *unit_set_free(struct unit_set *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct unit_set *, unit_set_free);

/*
 * Loads every DIR/NAME.service that is not a template (SPEC §3 "Which units
 * run"), each unit once: the names of DIR whose links lead to one unit are
 * its aliases (with its [Install] Alias= names; an alias that names another
 * unit is dropped with a warning), and dependencies that name an alias are
 * rewritten to the unit's name. A unit that fails to load (including an
 * invalid name) is an entry of errors under its (real) name, logged, and
 * affects no other unit. Other unit types are ignored, in one line: a
 * warning naming the .socket and .timer files, an info line for the rest;
 * other files silently.
 * Returns 0 with *ret owned by the caller (even if every unit failed);
 * a negative errno only when dir itself cannot be read (logged) or -ENOMEM.
 */
int unit_load_dir(const char *dir, struct unit_set **ret);

/*
 * tend --verify (docs/tend.8.md): loads each path, a unit file or a
 * directory of them (its templates as NAME@instance.service), as tend
 * would, logging every message; prints one summary line on stdout. Starts
 * nothing. Returns the exit status: 1 if a unit does not load (a masked one
 * is no error) or a path cannot be read, else 0. paths: NULL-terminated,
 * borrowed. Not thread-safe (stdout).
 */
int unit_verify(char *const *paths);
