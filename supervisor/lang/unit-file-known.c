/* SPDX-License-Identifier: MIT */
/*
 * Keys of systemd's language that are not in the key table (unit-file-keys.c
 * holds those tend honours), in two tables (docs/tend.service.5.md "KEYS
 * ACCEPTED SILENTLY" and "KEYS THAT ARE NOT APPLIED"):
 *  - accepted silently: they matter only to systemd's own machinery (its
 *    documentation links, its job engine, enablement, its journal's
 *    metadata, accounting); a unit runs the same under tend without them;
 *  - not applied: they would change what a process gets or when it runs;
 *    each is named in ONE warning per unit that says what differs;
 *  - noted (corpus): ignored with one info line per unit, as a dependency on
 *    another unit type is (Slice=: slices are units tend does not have).
 * A key in neither table is unknown (one warning per line, as before); the
 * hardening keys (ProtectSystem=, PrivateTmp=, Restrict*=…) stay there until
 * the sandboxing issue. Keys other helpers honour (Type=forking's, the
 * conditions, the directories, the process keys, the other dependencies) are
 * in neither table: they belong in the key table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit-file-internal.h"

struct known_key {
        enum section section; /* SECTION_IGNORED: any of [Unit] and [Service] */
        const char *key;
        const char *why; /* silent: why it does not matter; differs: "the unit runs without …" */
};

#define U SECTION_UNIT
#define S SECTION_SERVICE

/* Accepted silently, and why. */
static const struct known_key silent_keys[] = {
        { U, "Documentation", "links for systemctl status and man pages" },
        { U, "DefaultDependencies", "systemd's implicit dependencies on its own targets and slices" },
        { U, "IgnoreOnIsolate", "systemctl isolate, which tend does not have" },
        { U, "AllowIsolate", "systemctl isolate, which tend does not have" },
        { U, "RefuseManualStart", "systemd's job engine: tendctl start is how tend starts units" },
        { U, "RefuseManualStop", "systemd's job engine: tendctl stop is how tend stops units" },
        { U, "JobTimeoutSec", "systemd's job engine: TimeoutStartSec= bounds a start" },
        { U, "JobRunningTimeoutSec", "systemd's job engine: TimeoutStartSec= bounds a start" },
        { U, "JobTimeoutAction", "systemd's job engine" },
        { U, "JobTimeoutRebootArgument", "systemd's job engine" },
        { U, "CollectMode", "when systemd unloads a unit: tend keeps every unit of DIR" },
        { U, "SourcePath", "the file a generator made the unit from" },
        { U, "RequiresMountsFor", "mount units: tend starts after the system's mounts" },
        { U, "RebootArgument", "only for reboot actions, which tend refuses" },
        { S, "BusName", "only for Type=dbus, which tend refuses" },
        { S, "NonBlocking", "only for sockets passed by socket units, which tend does not run" },
        { S, "Sockets", "socket units, which tend does not run" },
        { S, "SyslogFacility", "journal metadata of the unit's output" },
        { S, "SyslogLevel", "journal metadata of the unit's output" },
        { S, "SyslogLevelPrefix", "journal metadata of the unit's output" },
        { S, "LogLevelMax", "journal filtering: tend keeps every line" },
        { S, "LogExtraFields", "journal metadata of the unit's output" },
        { S, "LogRateLimitIntervalSec", "journald's rate limit" },
        { S, "LogRateLimitBurst", "journald's rate limit" },
        { S, "CPUAccounting", "accounting only: tend's cgroups count anyway" },
        { S, "MemoryAccounting", "accounting only: tend's cgroups count anyway" },
        { S, "TasksAccounting", "accounting only: tend's cgroups count anyway" },
        { S, "IOAccounting", "accounting only: tend's cgroups count anyway" },
        { S, "BlockIOAccounting", "accounting only: tend's cgroups count anyway" },
        { S, "IPAccounting", "accounting only" },
        { S, "ManagedOOMSwap", "systemd-oomd's policy" },
        { S, "ManagedOOMMemoryPressure", "systemd-oomd's policy" },
        { S, "ManagedOOMMemoryPressureLimit", "systemd-oomd's policy" },
        { S, "ManagedOOMPreference", "systemd-oomd's policy" },
        /* corpus */
        { S, "UtmpIdentifier", "an init record for who(1): agetty and login write the session's own records" },
        { S, "UtmpMode", "an init record for who(1): agetty and login write the session's own records" },
};

/* corpus: keys whose difference is told at info level, once per unit, like a
 * dependency on another unit type: "KEY= ignored: WHY". */
static const struct known_key noted_keys[] = {
        { S, "Slice", "tend has no slice units: the unit's cgroup is under tend's own, without the slice's limits" },
};

/* Not applied: one warning per unit, "KEY= is not supported: the unit runs without WHY". */
static const struct known_key differs_keys[] = {
        { U, "StartLimitAction", "the action (none is what tend does)" },
        { U, "SuccessActionExitStatus", "the exit status it sets (tend exits with the unit's)" },
        { U, "FailureActionExitStatus", "the exit status it sets (tend exits with the unit's)" },
        { U, "PropagatesStopTo", "stopping the units it names when it stops" },
        { U, "StopPropagatedFrom", "being stopped when the units it names stop" },
        { S, "ExecCondition", "running the command first (it always starts)" },
        { S, "ExecStopPost", "running the command after it stops" },
        { S, "RestartForceExitStatus", "the forced restarts (Restart= alone decides)" },
        { S, "TimeoutAbortSec", "its own watchdog abort timeout (TimeoutStopSec= is used)" },
        { S, "TimeoutStartFailureMode", "the mode (a start timeout stops the unit with KillSignal=)" },
        { S, "TimeoutStopFailureMode", "the mode (a stop timeout sends FinalKillSignal=)" },
        { S, "RuntimeMaxSec", "a maximum run time" },
        { S, "RuntimeRandomizedExtraSec", "a maximum run time" },
        { S, "ExitType", "waiting for its cgroup to empty (the main process's exit ends it)" },
        { S, "FileDescriptorStoreMax", "an fd store (FDSTORE=1 is ignored: its fds are not given back after a restart)" },
        { S, "RootDirectoryStartOnly", "the exception" },
        { S, "PassEnvironment", "the variables of tend's environment it names" },
        { S, "LoadCredential", "its credentials ($CREDENTIALS_DIRECTORY is not set; %d names a directory tend never makes)" },
        { S, "LoadCredentialEncrypted", "its credentials ($CREDENTIALS_DIRECTORY is not set; %d names a directory tend never makes)" },
        { S, "SetCredential", "its credentials ($CREDENTIALS_DIRECTORY is not set; %d names a directory tend never makes)" },
        { S, "SetCredentialEncrypted", "its credentials ($CREDENTIALS_DIRECTORY is not set; %d names a directory tend never makes)" },
        { S, "PAMName", "a PAM session (no pam_limits, pam_env or pam_systemd settings)" },
        { S, "Personality", "the personality" },
        { S, "TimerSlackNSec", "the timer slack" },
        { S, "CoredumpFilter", "the core dump filter" },
        { S, "Delegate", "a delegated cgroup (not handed to User=, no controllers enabled in it; a root process may still make sub-cgroups, which tend stops with the unit)" },
        { S, "DisableControllers", "the change (tend's cgroups keep their controllers)" },
        { S, "CPUWeight", "the CPU weight" },
        { S, "StartupCPUWeight", "the CPU weight" },
        { S, "CPUShares", "the CPU weight" },
        { S, "StartupCPUShares", "the CPU weight" },
        { S, "CPUQuota", "the CPU quota" },
        { S, "CPUQuotaPeriodSec", "the CPU quota" },
        { S, "AllowedCPUs", "the cpuset" },
        { S, "AllowedMemoryNodes", "the cpuset" },
        { S, "MemoryMin", "the memory protection" },
        { S, "MemoryLow", "the memory protection" },
        { S, "MemoryHigh", "the memory limit" },
        { S, "MemoryMax", "the memory limit" },
        { S, "MemoryLimit", "the memory limit" },
        { S, "MemorySwapMax", "the swap limit" },
        { S, "IOWeight", "the IO weight" },
        { S, "StartupIOWeight", "the IO weight" },
        { S, "IODeviceWeight", "the IO weight" },
        { S, "IOReadBandwidthMax", "the IO limit" },
        { S, "IOWriteBandwidthMax", "the IO limit" },
        { S, "IOReadIOPSMax", "the IO limit" },
        { S, "IOWriteIOPSMax", "the IO limit" },
        { S, "BlockIOWeight", "the IO weight" },
        { S, "BlockIODeviceWeight", "the IO weight" },
        { S, "BlockIOReadBandwidth", "the IO limit" },
        { S, "BlockIOWriteBandwidth", "the IO limit" },
};

_Static_assert(ELEMENTSOF(differs_keys) + ELEMENTSOF(noted_keys) <= 128, "differs_warned holds 128 bits");

static const struct known_key *find(const struct known_key *t, size_t n, enum section section, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (t[i].section == section && streq(t[i].key, key))
                        return &t[i];
        return NULL;
}

bool uf_known_key(struct parse_ctx *c, enum section section, const char *key) {
        if (section == SECTION_INSTALL) /* WantedBy=, RequiredBy=, Also=, DefaultInstance=: enablement */
                return true;
        if (find(silent_keys, ELEMENTSOF(silent_keys), section, key))
                return true;
        const struct known_key *d = find(differs_keys, ELEMENTSOF(differs_keys), section, key);
        const struct known_key *n = d ? NULL : find(noted_keys, ELEMENTSOF(noted_keys), section, key);
        if (!d && !n)
                return false;
        size_t i = d ? (size_t) (d - differs_keys) : ELEMENTSOF(differs_keys) + (size_t) (n - noted_keys);
        uint64_t bit = UINT64_C(1) << (i % 64);
        if (!(c->differs_warned[i / 64] & bit)) {
                c->differs_warned[i / 64] |= bit;
                if (d)
                        report(c, LOG_WARNING, 0, "%s= is not supported: the unit runs without %s", d->key, d->why);
                else
                        report(c, LOG_INFO, 0, "%s= ignored: %s", n->key, n->why);
        }
        return true;
}

/* [Install] Alias=: names of the same unit, of the same kind (a template's
 * aliases are templates, whose instances are the instance's aliases). */
int uf_parse_alias(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strv_builder *l = &c->lists[LIST_ALIAS];
        if (!*value) {
                strv_builder_clear(l);
                return 0;
        }
        int r;
        for (const char *p = value;;) {
                _cleanup_free_ char *n = NULL;
                char q[QUOTE_BUF];
                r = uf_next_word_resolved(c, k, &p, value, &n, NULL);
                if (r <= 0)
                        break;
                unsigned kind = c->instance ? UNIT_NAME_TEMPLATE : UNIT_NAME_PLAIN;
                if (!unit_name_is_valid(n, kind)) {
                        report(c, LOG_WARNING, 0, "Alias=%s ignored: not a %s name", uf_quote(q, n),
                               c->instance ? "template (NAME@.service)" : "service (NAME.service)");
                        continue;
                }
                char *a = c->instance ? NULL : TAKE_PTR(n);
                if (c->instance && asprintf(&a, "%.*s%s.service", (int) strcspn(n, "@") + 1, n, c->instance) < 0)
                        a = NULL;
                if (!a) {
                        r = -ENOMEM;
                        break;
                }
                if (streq(a, c->name)) {
                        free(a);
                        continue;
                }
                r = strv_builder_push(l, a);
                if (r < 0)
                        break;
        }
        return r;
}
