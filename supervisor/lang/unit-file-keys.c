/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's keys (unit-file.c): their defaults, the parsers of
 * scalar values (strings, time spans, numbers, booleans, signals, enums) and
 * the table of every key with its parser.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "signal-util.h"
#include "timespan.h"

#include "unit-file-internal.h"

const struct unit_file unit_defaults = {
        .start_limit_interval = 10 * USEC_PER_SEC,
        .start_limit_burst = 5,
        .type = UNIT_TYPE_SIMPLE,
        .restart = UNIT_RESTART_NO,
        .restart_sec = 100 * USEC_PER_MSEC,
        .restart_max_delay = USEC_INFINITY,
        .timeout_start = 90 * USEC_PER_SEC,
        .timeout_stop = 10 * USEC_PER_SEC, /* SPEC §3; systemd's is 90s */
        .watchdog_signal = SIGABRT,
        .kill_mode = UNIT_KILL_CONTROL_GROUP,
        .kill_signal = SIGTERM,
        .final_kill_signal = SIGKILL,
        .send_sigkill = true,
        .ignore_sigpipe = true,
        .guess_main_pid = true,
};

const struct unit_sandbox_keys unit_sandbox_defaults = {
        .umask = 0022,
        .capability_bounding_set = UINT64_MAX, /* unchanged */
};

const struct unit_exit_statuses unit_exit_statuses_none = {};

/* ------------------------------------------------------------------------ */
/* Value parsers                                                             */
/* ------------------------------------------------------------------------ */

/* The sandboxing keys being parsed, marked as assigned. */
struct unit_sandbox_keys *uf_sandbox_keys(struct parse_ctx *c) {
        c->sb_set = true;
        return &c->sb;
}

void *uf_key_field(struct parse_ctx *c, const struct key_def *k) {
        if (k->offset & KEY_SB)
                return (char *) uf_sandbox_keys(c) + KEY_OFFSET(k);
        if (k->offset & KEY_XS) {
                c->xs_set = true;
                return (char *) &c->xs + KEY_OFFSET(k);
        }
        return (char *) c->u + k->offset;
}

const void *uf_key_default(const struct key_def *k) {
        if (k->offset & KEY_SB)
                return (const char *) &unit_sandbox_defaults + KEY_OFFSET(k);
        if (k->offset & KEY_XS)
                return (const char *) &unit_exit_statuses_none + KEY_OFFSET(k);
        return (const char *) &unit_defaults + k->offset;
}

/* An empty assignment resets a scalar to its default. */
void uf_reset_default(struct parse_ctx *c, const struct key_def *k) {
        memcpy(uf_key_field(c, k), uf_key_default(k), k->size);
}

static int parse_string(struct parse_ctx *c, const struct key_def *k, const char *value) {
        char **field = FIELD(c, k, char *);
        char *s = NULL;
        if (*value) {
                int r = uf_resolve_specifiers(c, k, value, &s);
                if (r < 0)
                        return r;
        }
        free(*field);
        *field = s;
        return 0;
}

static int parse_sec(struct parse_ctx *c, const struct key_def *k, const char *value, usec_t *ret) {
        char q[QUOTE_BUF];
        if (parse_timespan(value, USEC_PER_SEC, ret) < 0)
                return syntax_error(c, "%s=: invalid time span %s", k->key, uf_quote(q, value));
        return 0;
}

static int parse_timespan_key(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                uf_reset_default(c, k);
                return 0;
        }
        return parse_sec(c, k, value, FIELD(c, k, usec_t));
}

/* TimeoutStartSec=, TimeoutStopSec=, TimeoutSec= (both): 0 means no timeout, as in systemd. */
enum { TIMEOUT_START = 1, TIMEOUT_STOP = 2 };
static int parse_timeout(struct parse_ctx *c, const struct key_def *k, const char *value) {
        uintptr_t which = (uintptr_t) k->data;
        usec_t v = 0;
        if (*value) {
                int r = parse_sec(c, k, value, &v);
                if (r < 0)
                        return r;
                if (v == 0)
                        v = USEC_INFINITY;
        }
        if (which & TIMEOUT_START) {
                c->u->timeout_start = *value ? v : unit_defaults.timeout_start;
                c->timeout_start_set = *value;
        }
        if (which & TIMEOUT_STOP)
                c->u->timeout_stop = *value ? v : unit_defaults.timeout_stop;
        return 0;
}

static int parse_unsigned(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                uf_reset_default(c, k);
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || *end || errno || v > UINT_MAX)
                return invalid_value(c, k, value);
        *FIELD(c, k, unsigned) = (unsigned) v;
        return 0;
}

static int parse_bool(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };
        if (!*value) {
                uf_reset_default(c, k);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(value, yes[i]) == 0 || strcasecmp(value, no[i]) == 0) {
                        *FIELD(c, k, bool) = strcasecmp(value, yes[i]) == 0;
                        return 0;
                }
        char q[QUOTE_BUF];
        return syntax_error(c, "%s=: invalid boolean %s", k->key, uf_quote(q, value));
}

static int parse_signal(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value) {
                uf_reset_default(c, k);
                return 0;
        }
        int sig = signal_from_string(value);
        char q[QUOTE_BUF];
        if (sig < 0)
                return syntax_error(c, "%s=: invalid signal %s", k->key, uf_quote(q, value));
        *FIELD(c, k, int) = sig;
        return 0;
}

/* An enum's names in value order; systemd values tend refuses ("KEY=VALUE is not supported"). */
struct enum_table {
        const char *const *names;
        size_t n;
        const char *const *unsupported; /* NULL-terminated */
};

/* What to do instead of an unsupported value, for those that need it said. */
static const char *unsupported_why(const char *key, const char *value) {
        if (streq(key, "Type") && streq(value, "dbus"))
                return "tend does not watch D-Bus names; use Type=simple, or Type=notify if the program sends READY=1";
        return NULL;
}

static int parse_enum(struct parse_ctx *c, const struct key_def *k, const char *value) {
        const struct enum_table *t = k->data;
        if (!*value) {
                uf_reset_default(c, k);
                if (streq(k->key, "Type"))
                        c->type_set = false;
                return 0;
        }
        for (size_t i = 0; i < t->n; i++)
                if (t->names[i] && streq(value, t->names[i])) {
                        *FIELD(c, k, int) = (int) i;
                        if (streq(k->key, "Type"))
                                c->type_set = true, c->type_line = c->line;
                        if (streq(k->key, "Restart"))
                                c->restart_line = c->line;
                        return 0;
                }
        for (const char *const *s = t->unsupported; s && *s; s++)
                if (streq(value, *s)) {
                        const char *why = unsupported_why(k->key, value);
                        return report(c, LOG_ERR, EOPNOTSUPP, "%s=%s is not supported%s%s", k->key, value,
                                      why ? ": " : "", why ? why : "");
                }
        return invalid_value(c, k, value);
}

static const char *const type_names[] = { "simple", "exec", "notify", "oneshot", "forking", "idle" };
static const char *const type_unsupported[] = { "dbus", "notify-reload", NULL };
static const struct enum_table type_table = { type_names, ELEMENTSOF(type_names), type_unsupported };

const char *const restart_names[] = { "no", "always", "on-success", "on-failure",
                                             "on-abnormal", "on-abort", "on-watchdog" };
static const struct enum_table restart_table = { restart_names, ELEMENTSOF(restart_names), NULL };

static const char *const action_names[] = { "none", "exit", "exit-force" };
static const char *const action_unsupported[] = {
        "reboot", "reboot-force", "reboot-immediate", "poweroff", "poweroff-force", "poweroff-immediate",
        "halt", "halt-force", "halt-immediate", "kexec", "kexec-force", "soft-reboot", "soft-reboot-force", NULL,
};
static const struct enum_table action_table = { action_names, ELEMENTSOF(action_names), action_unsupported };

static const char *const kill_mode_names[] = { "control-group", "mixed", "process" };
static const char *const kill_mode_unsupported[] = { "none", NULL };
static const struct enum_table kill_mode_table = { kill_mode_names, ELEMENTSOF(kill_mode_names), kill_mode_unsupported };

static const char *const notify_access_names[] = { NULL, "none", "main", "exec", "all" };
static const struct enum_table notify_access_table = { notify_access_names, ELEMENTSOF(notify_access_names), NULL };

/* ------------------------------------------------------------------------ */
/* The keys                                                                  */
/* ------------------------------------------------------------------------ */

#define F(field) offsetof(struct unit_file, field), sizeof(((struct unit_file *) 0)->field)
#define SB(field) (KEY_SB | offsetof(struct unit_sandbox_keys, field)), sizeof(((struct unit_sandbox_keys *) 0)->field)
#define XS(field) (KEY_XS | offsetof(struct unit_exit_statuses, field)), sizeof(((struct unit_exit_statuses *) 0)->field)
#define U SECTION_UNIT
#define S SECTION_SERVICE
#define LIST(i) ((const void *) (uintptr_t) (i))
#define RESOURCE(r) ((const void *) (uintptr_t) (r))

static const struct key_def unit_keys[] = {
        { U, "Description", parse_string, F(description), NULL },
        { U, "Requires", uf_parse_unit_names, 0, 0, LIST(LIST_REQUIRES) },
        { U, "Wants", uf_parse_unit_names, 0, 0, LIST(LIST_WANTS) },
        { U, "BindsTo", uf_parse_unit_names, 0, 0, LIST(LIST_BINDS_TO) },
        { U, "After", uf_parse_unit_names, 0, 0, LIST(LIST_AFTER) },
        { U, "Before", uf_parse_unit_names, 0, 0, LIST(LIST_BEFORE) },
        { U, "StartLimitIntervalSec", parse_timespan_key, F(start_limit_interval), NULL },
        { U, "StartLimitInterval", parse_timespan_key, F(start_limit_interval), NULL },
        { U, "StartLimitBurst", parse_unsigned, F(start_limit_burst), NULL },
        { U, "SuccessAction", parse_enum, F(success_action), &action_table },
        { U, "FailureAction", parse_enum, F(failure_action), &action_table },

        { S, "Type", parse_enum, F(type), &type_table },
        { S, "ExecStartPre", uf_parse_exec, F(exec_start_pre), NULL },
        { S, "ExecStart", uf_parse_exec, F(exec_start), NULL },
        { S, "ExecStartPost", uf_parse_exec, F(exec_start_post), NULL },
        { S, "ExecStop", uf_parse_exec, F(exec_stop), NULL },
        { S, "ExecReload", uf_parse_exec, F(exec_reload), NULL },
        { S, "Restart", parse_enum, F(restart), &restart_table },
        { S, "RestartSec", parse_timespan_key, F(restart_sec), NULL },
        { S, "RestartSteps", parse_unsigned, F(restart_steps), NULL },
        { S, "RestartMaxDelaySec", parse_timespan_key, F(restart_max_delay), NULL },
        { S, "RemainAfterExit", parse_bool, F(remain_after_exit), NULL },
        { S, "SuccessExitStatus", uf_parse_exit_status, XS(success), NULL },
        { S, "RestartPreventExitStatus", uf_parse_exit_status, XS(restart_prevent), NULL },
        { S, "TimeoutStartSec", parse_timeout, 0, 0, (const void *) (uintptr_t) TIMEOUT_START },
        { S, "TimeoutStopSec", parse_timeout, 0, 0, (const void *) (uintptr_t) TIMEOUT_STOP },
        { S, "TimeoutSec", parse_timeout, 0, 0, (const void *) (uintptr_t) (TIMEOUT_START | TIMEOUT_STOP) },
        { S, "WatchdogSec", parse_timespan_key, F(watchdog), NULL },
        { S, "WatchdogSignal", parse_signal, F(watchdog_signal), NULL },
        { S, "NotifyAccess", parse_enum, F(notify_access), &notify_access_table },
        { S, "KillMode", parse_enum, F(kill_mode), &kill_mode_table },
        { S, "KillSignal", parse_signal, F(kill_signal), NULL },
        { S, "FinalKillSignal", parse_signal, F(final_kill_signal), NULL },
        { S, "SendSIGKILL", parse_bool, F(send_sigkill), NULL },
        { S, "IgnoreSIGPIPE", parse_bool, F(ignore_sigpipe), NULL },
        { S, "Environment", uf_parse_environment, 0, 0, LIST(LIST_ENVIRONMENT) },
        { S, "EnvironmentFile", uf_parse_environment_file, 0, 0, NULL },
        { S, "WorkingDirectory", uf_parse_working_directory, 0, 0, NULL },
        { S, "StandardOutput", uf_parse_output, F(standard_output), NULL },
        { S, "StandardError", uf_parse_output, F(standard_error), NULL },
        { S, "SyslogIdentifier", parse_string, F(syslog_identifier), NULL },
        /* systemd's names in [Service] for [Unit] keys */
        { S, "StartLimitInterval", parse_timespan_key, F(start_limit_interval), NULL },
        { S, "StartLimitBurst", parse_unsigned, F(start_limit_burst), NULL },
        { S, "FailureAction", parse_enum, F(failure_action), &action_table },
        /* sandboxing (sandbox.h) */
        { S, "User", uf_parse_user, SB(user), NULL },
        { S, "Group", uf_parse_user, SB(group), NULL },
        { S, "SupplementaryGroups", uf_parse_supplementary_groups, 0, 0, LIST(LIST_SUPPLEMENTARY_GROUPS) },
        { S, "UMask", uf_parse_umask, SB(umask), NULL },
        { S, "NoNewPrivileges", parse_bool, SB(no_new_privileges), NULL },
        { S, "CapabilityBoundingSet", uf_parse_capabilities, SB(capability_bounding_set), NULL },
        { S, "AmbientCapabilities", uf_parse_capabilities, SB(ambient_capabilities), NULL },
        { S, "SystemCallFilter", uf_parse_syscall_filter, 0, 0, NULL },
        { S, "SystemCallErrorNumber", uf_parse_errno, SB(syscall_error_number), NULL },
        { S, "LimitCPU", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_CPU) },
        { S, "LimitFSIZE", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_FSIZE) },
        { S, "LimitDATA", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_DATA) },
        { S, "LimitSTACK", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_STACK) },
        { S, "LimitCORE", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_CORE) },
        { S, "LimitRSS", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_RSS) },
        { S, "LimitNOFILE", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_NOFILE) },
        { S, "LimitAS", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_AS) },
        { S, "LimitNPROC", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_NPROC) },
        { S, "LimitMEMLOCK", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_MEMLOCK) },
        { S, "LimitLOCKS", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_LOCKS) },
        { S, "LimitSIGPENDING", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_SIGPENDING) },
        { S, "LimitMSGQUEUE", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_MSGQUEUE) },
        { S, "LimitNICE", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_NICE) },
        { S, "LimitRTPRIO", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_RTPRIO) },
        { S, "LimitRTTIME", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_RTTIME) },
        /* exec: directories and process keys (issue 16; unit-file-process.c) */
        { S, "RuntimeDirectory", uf_parse_exec_directory, 0, 0, RESOURCE(UNIT_EXEC_DIR_RUNTIME) },
        { S, "StateDirectory", uf_parse_exec_directory, 0, 0, RESOURCE(UNIT_EXEC_DIR_STATE) },
        { S, "CacheDirectory", uf_parse_exec_directory, 0, 0, RESOURCE(UNIT_EXEC_DIR_CACHE) },
        { S, "LogsDirectory", uf_parse_exec_directory, 0, 0, RESOURCE(UNIT_EXEC_DIR_LOGS) },
        { S, "ConfigurationDirectory", uf_parse_exec_directory, 0, 0, RESOURCE(UNIT_EXEC_DIR_CONFIGURATION) },
        { S, "RuntimeDirectoryMode", uf_parse_exec_directory_mode, 0, 0, RESOURCE(UNIT_EXEC_DIR_RUNTIME) },
        { S, "StateDirectoryMode", uf_parse_exec_directory_mode, 0, 0, RESOURCE(UNIT_EXEC_DIR_STATE) },
        { S, "CacheDirectoryMode", uf_parse_exec_directory_mode, 0, 0, RESOURCE(UNIT_EXEC_DIR_CACHE) },
        { S, "LogsDirectoryMode", uf_parse_exec_directory_mode, 0, 0, RESOURCE(UNIT_EXEC_DIR_LOGS) },
        { S, "ConfigurationDirectoryMode", uf_parse_exec_directory_mode, 0, 0, RESOURCE(UNIT_EXEC_DIR_CONFIGURATION) },
        { S, "RuntimeDirectoryPreserve", uf_parse_process, 0, 0, RESOURCE(0) },
        { S, "Nice", uf_parse_process, 0, 0, RESOURCE(1) },
        { S, "OOMScoreAdjust", uf_parse_process, 0, 0, RESOURCE(2) },
        { S, "IOSchedulingClass", uf_parse_process, 0, 0, RESOURCE(3) },
        { S, "IOSchedulingPriority", uf_parse_process, 0, 0, RESOURCE(4) },
        { S, "CPUSchedulingPolicy", uf_parse_process, 0, 0, RESOURCE(5) },
        { S, "CPUSchedulingPriority", uf_parse_process, 0, 0, RESOURCE(6) },
        { S, "CPUSchedulingResetOnFork", uf_parse_process, 0, 0, RESOURCE(7) },
        { S, "TTYReset", uf_parse_process, 0, 0, RESOURCE(8) },
        { S, "TTYVHangup", uf_parse_process, 0, 0, RESOURCE(9) },
        { S, "TTYVTDisallocate", uf_parse_process, 0, 0, RESOURCE(10) },
        { S, "CPUAffinity", uf_parse_cpu_affinity, 0, 0, NULL },
        { S, "StandardInput", uf_parse_standard_input, 0, 0, NULL },
        { S, "StandardInputText", uf_parse_standard_input_text, 0, 0, NULL },
        { S, "TTYPath", uf_parse_tty_path, 0, 0, NULL },
        /* deps: the dependency keys beyond Requires=/Wants=/BindsTo=/After=/Before= (jobs.h) */
        { U, "Requisite", uf_parse_unit_names, 0, 0, LIST(LIST_REQUISITE) },
        { U, "PartOf", uf_parse_unit_names, 0, 0, LIST(LIST_PART_OF) },
        { U, "Conflicts", uf_parse_unit_names, 0, 0, LIST(LIST_CONFLICTS) },
        { U, "Upholds", uf_parse_unit_names, 0, 0, LIST(LIST_UPHOLDS) },
        { U, "OnFailure", uf_parse_unit_names, 0, 0, LIST(LIST_ON_FAILURE) },
        { U, "OnSuccess", uf_parse_unit_names, 0, 0, LIST(LIST_ON_SUCCESS) },
        { U, "PropagatesReloadTo", uf_parse_unit_names, 0, 0, LIST(LIST_PROPAGATES_RELOAD_TO) },
        { U, "ReloadPropagatedFrom", uf_parse_unit_names, 0, 0, LIST(LIST_RELOAD_PROPAGATED_FROM) },
        { U, "StopWhenUnneeded", parse_bool, F(stop_when_unneeded), NULL },
        { U, "OnFailureJobMode", uf_parse_job_mode, F(on_failure_mode_fail), NULL },
        { S, "LimitRTTIME", uf_parse_limit, 0, 0, RESOURCE(RLIMIT_RTTIME) },        /* cond: Condition*= and Assert*= (unit-file-conditions.c), every type of systemd 252 */
#define COND(name, t)                                                                                      \
        { U, "Condition" name, uf_parse_condition, 0, 0, (const void *) (uintptr_t) (t) },                 \
        { U, "Assert" name, uf_parse_condition, 0, 0, (const void *) (uintptr_t) ((t) | UF_CONDITION_ASSERT) }
        COND("Architecture", UNIT_CONDITION_ARCHITECTURE),
        COND("Firmware", UNIT_CONDITION_FIRMWARE),
        COND("Virtualization", UNIT_CONDITION_VIRTUALIZATION),
        COND("Host", UNIT_CONDITION_HOST),
        COND("KernelCommandLine", UNIT_CONDITION_KERNEL_COMMAND_LINE),
        COND("KernelVersion", UNIT_CONDITION_KERNEL_VERSION),
        COND("Credential", UNIT_CONDITION_CREDENTIAL),
        COND("Environment", UNIT_CONDITION_ENVIRONMENT),
        COND("Security", UNIT_CONDITION_SECURITY),
        COND("Capability", UNIT_CONDITION_CAPABILITY),
        COND("ACPower", UNIT_CONDITION_AC_POWER),
        COND("NeedsUpdate", UNIT_CONDITION_NEEDS_UPDATE),
        COND("FirstBoot", UNIT_CONDITION_FIRST_BOOT),
        COND("PathExists", UNIT_CONDITION_PATH_EXISTS),
        COND("PathExistsGlob", UNIT_CONDITION_PATH_EXISTS_GLOB),
        COND("PathIsDirectory", UNIT_CONDITION_PATH_IS_DIRECTORY),
        COND("PathIsSymbolicLink", UNIT_CONDITION_PATH_IS_SYMBOLIC_LINK),
        COND("PathIsMountPoint", UNIT_CONDITION_PATH_IS_MOUNT_POINT),
        COND("PathIsReadWrite", UNIT_CONDITION_PATH_IS_READ_WRITE),
        COND("PathIsEncrypted", UNIT_CONDITION_PATH_IS_ENCRYPTED),
        COND("DirectoryNotEmpty", UNIT_CONDITION_DIRECTORY_NOT_EMPTY),
        COND("FileNotEmpty", UNIT_CONDITION_FILE_NOT_EMPTY),
        COND("FileIsExecutable", UNIT_CONDITION_FILE_IS_EXECUTABLE),
        COND("User", UNIT_CONDITION_USER),
        COND("Group", UNIT_CONDITION_GROUP),
        COND("ControlGroupController", UNIT_CONDITION_CONTROL_GROUP_CONTROLLER),
        COND("Memory", UNIT_CONDITION_MEMORY),
        COND("CPUs", UNIT_CONDITION_CPUS),
        COND("CPUFeature", UNIT_CONDITION_CPU_FEATURE),
        COND("OSRelease", UNIT_CONDITION_OS_RELEASE),
        COND("MemoryPressure", UNIT_CONDITION_MEMORY_PRESSURE),
        COND("CPUPressure", UNIT_CONDITION_CPU_PRESSURE),
        COND("IOPressure", UNIT_CONDITION_IO_PRESSURE),
#undef COND
        /* fork: Type=forking's main process */
        { S, "PIDFile", uf_parse_pid_file, F(pid_file), NULL },
        { S, "GuessMainPID", parse_bool, F(guess_main_pid), NULL },
        /* load: [Install] Alias= (the rest of [Install], and the keys tend does not apply: unit-file-known.c) */
        { SECTION_INSTALL, "Alias", uf_parse_alias, 0, 0, LIST(LIST_ALIAS) },
        /* journal: the level of a unit's lines (issue 18; unit-file-syslog.c) */
        { S, "SyslogLevelPrefix", uf_parse_syslog, 0, 0, RESOURCE(UF_SYSLOG_LEVEL_PREFIX) },
        { S, "SyslogLevel", uf_parse_syslog, 0, 0, RESOURCE(UF_SYSLOG_LEVEL) },
        { S, "SyslogFacility", uf_parse_syslog, 0, 0, RESOURCE(UF_SYSLOG_FACILITY) },
        /* corpus: keys of the Debian corpus (unit-file-extra.c) */
        { S, "UnsetEnvironment", uf_parse_extra, 0, 0, RESOURCE(UF_EXTRA_UNSET_ENVIRONMENT) },
        { S, "RestartKillSignal", uf_parse_extra, 0, 0, RESOURCE(UF_EXTRA_RESTART_KILL_SIGNAL) },
        { S, "SendSIGHUP", uf_parse_extra, 0, 0, RESOURCE(UF_EXTRA_SEND_SIGHUP) },
        { S, "PermissionsStartOnly", uf_parse_extra, 0, 0, RESOURCE(UF_EXTRA_PERMISSIONS_START_ONLY) },
        { S, "TasksMax", uf_parse_extra, 0, 0, RESOURCE(UF_EXTRA_TASKS_MAX) },
        { S, "OOMPolicy", uf_parse_extra, 0, 0, RESOURCE(UF_EXTRA_OOM_POLICY) },
        /* seccomp: issue 17's seccomp keys and non-mount namespaces (unit-file-hardening.c) */
        { S, "RestrictAddressFamilies", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_ADDRESS_FAMILIES) },
        { S, "RestrictNamespaces", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_NAMESPACES) },
        { S, "SystemCallArchitectures", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_ARCHS) },
        { S, "LockPersonality", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_LOCK_PERSONALITY) },
        { S, "MemoryDenyWriteExecute", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_MDWE) },
        { S, "RestrictRealtime", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_REALTIME) },
        { S, "RestrictSUIDSGID", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_SUID_SGID) },
        { S, "ProtectClock", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_CLOCK) },
        { S, "ProtectKernelModules", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_MODULES) },
        { S, "ProtectKernelLogs", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_LOGS) },
        { S, "ProtectHostname", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_HOSTNAME) },
        { S, "PrivateNetwork", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_NETWORK) },
        { S, "PrivateIPC", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_IPC) },
        { S, "PrivateUsers", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_USERS) },
        { S, "SystemCallLog", uf_parse_hardening, 0, 0, RESOURCE(UF_HARDENING_SYSCALL_LOG) },
        /* ns: the file-system namespace keys (issue 17; unit-file-namespace.c, exec/namespace.c) */
        { S, "ReadWritePaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_READ_WRITE) },
        { S, "ReadOnlyPaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_READ_ONLY) },
        { S, "InaccessiblePaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_INACCESSIBLE) },
        { S, "ExecPaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_EXEC) },
        { S, "NoExecPaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_NO_EXEC) },
        { S, "TemporaryFileSystem", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_TEMPORARY) },
        { S, "BindPaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_BIND) },
        { S, "BindReadOnlyPaths", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_BIND_READ_ONLY) },
        { S, "ProtectSystem", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PROTECT_SYSTEM) },
        { S, "ProtectHome", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PROTECT_HOME) },
        { S, "ProtectProc", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PROTECT_PROC) },
        { S, "ProcSubset", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PROC_SUBSET) },
        { S, "PrivateTmp", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PRIVATE_TMP) },
        { S, "PrivateDevices", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PRIVATE_DEVICES) },
        { S, "ProtectKernelTunables", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PROTECT_KERNEL_TUNABLES) },
        { S, "ProtectControlGroups", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PROTECT_CONTROL_GROUPS) },
        { S, "PrivateMounts", uf_parse_namespace, 0, 0, RESOURCE(UF_NS_PRIVATE_MOUNTS) },
        /* their old names (systemd.exec(5): "ReadWriteDirectories=… are deprecated aliases"; redis-server's unit uses one) */
        { S, "ReadWriteDirectories", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_READ_WRITE) },
        { S, "ReadOnlyDirectories", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_READ_ONLY) },
        { S, "InaccessibleDirectories", uf_parse_namespace, 0, 0, RESOURCE(UNIT_NS_INACCESSIBLE) },
        /* security: the operator's opt-out, RemoveIPC= (unit-file-refused.c; unit-hardening.h) */
        { SECTION_TEND, "AcceptWeakerIsolation", uf_parse_accept_weaker, 0, 0, NULL },
        { S, "RemoveIPC", uf_parse_remove_ipc, 0, 0, NULL },
        /* etcd: singleton units among the tends sharing an etcd prefix (issue 20, docs/cluster.md) */
        { SECTION_TEND, "Singleton", parse_bool, F(singleton), NULL },
        { SECTION_TEND, "Hosts", uf_parse_cluster_words, 0, 0, LIST(LIST_HOSTS) },
        { SECTION_TEND, "HostMetadata", uf_parse_cluster_words, 0, 0, LIST(LIST_HOST_METADATA) },
        /* keyring: a session keyring per unit (systemd.exec(5) KeyringMode=; unit-hardening.h) */
        { S, "KeyringMode", uf_parse_keyring_mode, 0, 0, NULL },
};

const struct key_def *uf_key_lookup(enum section section, const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(unit_keys); i++)
                if (unit_keys[i].section == section && streq(unit_keys[i].key, key))
                        return &unit_keys[i];
        return NULL;
}
