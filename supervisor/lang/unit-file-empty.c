/* SPDX-License-Identifier: MIT */
/*
 * parsefix: the keys whose empty assignment systemd 252 ignores (issue 17,
 * QA finding H2). systemd parses `PrivateTmp=` with its boolean parser, which
 * fails on "", logs "Failed to parse boolean value, ignoring" and keeps the
 * earlier value; the same holds for its enum, mode and resource-limit parsers
 * below (checked with `systemd-analyze verify` of systemd 252 on a file
 * setting each key and then emptying it). tend does the same: a warning with
 * file:line naming the key, the earlier value kept — so a drop-in's
 * `PrivateTmp=` never turns off what the package's file turned on. The list
 * keys (RestrictAddressFamilies=, SystemCallFilter=, the path lists,
 * IPAddressDeny= …) reset on empty in both and are not here.
 */
#include <string.h>

#include "unit-file-internal.h"

/* [Service] keys: systemd 252 logs "Failed to parse …, ignoring" for "" and keeps the value. */
static const char *const empty_ignored[] = {
        /* booleans (config_parse_bool) */
        "PrivateTmp", "PrivateDevices", "PrivateNetwork", "PrivateUsers", "PrivateMounts", "PrivateIPC",
        "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
        "ProtectClock", "ProtectHostname", "MemoryDenyWriteExecute", "LockPersonality", "RestrictRealtime",
        "RestrictSUIDSGID", "NoNewPrivileges", "RemoveIPC",
        /* enums and modes */
        "ProtectSystem", "ProtectHome", "ProtectProc", "ProcSubset", "UMask", "KeyringMode", "DevicePolicy",
        "NotifyAccess", "RuntimeDirectoryMode", "StateDirectoryMode", "CacheDirectoryMode", "LogsDirectoryMode",
        "ConfigurationDirectoryMode",
        /* resource limits (config_parse_rlimit: "Failed to parse resource value, ignoring") */
        "LimitCPU", "LimitFSIZE", "LimitDATA", "LimitSTACK", "LimitCORE", "LimitRSS", "LimitNOFILE", "LimitAS",
        "LimitNPROC", "LimitMEMLOCK", "LimitLOCKS", "LimitSIGPENDING", "LimitMSGQUEUE", "LimitNICE",
        "LimitRTPRIO", "LimitRTTIME",
        NULL,
};

const char *const *uf_empty_ignored_keys(void) {
        return empty_ignored;
}

bool uf_empty_assignment(struct parse_ctx *c, enum section section, const char *key, const char *value) {
        if (*value || section != SECTION_SERVICE)
                return false;
        if (streq(key, "DynamicUser")) { /* systemd 252: a fatal error ("Failed to parse boolean value") */
                syntax_error(c, "%s=: empty value is not a boolean", key);
                return true;
        }
        for (const char *const *k = empty_ignored; *k; k++)
                if (streq(*k, key)) {
                        report(c, LOG_WARNING, 0, "%s=: empty value, ignoring", key);
                        return true;
                }
        return false;
}
