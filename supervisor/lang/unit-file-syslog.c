/* SPDX-License-Identifier: MIT */
/*
 * The unit-file parser's journal keys (issue 18): SyslogLevelPrefix=,
 * SyslogLevel=, SyslogFacility=, with systemd.exec(5)'s values. They set how
 * exec/logs reads a unit's lines (docs/logging.md "Levels"); the fields are
 * small and zero means "not set" (unit_file_syslog_priority()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "unit-file-internal.h"

static const char *const level_names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
static const char *const facility_names[] = {
        "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp",
        [16] = "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
};

/* A name of names[0..n), or its number; -EINVAL otherwise. */
static int lookup_name_or_number(const char *const *names, size_t n, const char *value) {
        for (size_t i = 0; i < n; i++)
                if (names[i] && streq(names[i], value))
                        return (int) i;
        char *end;
        long v = strtol(value, &end, 10);
        if (value[0] >= '0' && value[0] <= '9' && !*end && v >= 0 && (size_t) v < n && names[v])
                return (int) v;
        return -EINVAL;
}

int unit_syslog_level_from_string(const char *s) {
        return s ? lookup_name_or_number(level_names, ELEMENTSOF(level_names), s) : -EINVAL;
}

int uf_parse_syslog(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct unit_file *u = c->u;
        int v = 0;

        switch ((uintptr_t) k->data) {
        case UF_SYSLOG_LEVEL_PREFIX:
                if (!*value) {
                        u->syslog_level_prefix = 0;
                        return 0;
                }
                if ((v = uf_parse_boolean(value)) < 0)
                        return invalid_value(c, k, value);
                u->syslog_level_prefix = v ? 2 : 1;
                return 0;
        case UF_SYSLOG_LEVEL:
                if (*value && (v = unit_syslog_level_from_string(value)) < 0)
                        return invalid_value(c, k, value);
                u->syslog_level = *value ? (uint8_t) (v + 1) : 0;
                return 0;
        default:
                if (*value && (v = lookup_name_or_number(facility_names, ELEMENTSOF(facility_names), value)) < 0)
                        return invalid_value(c, k, value);
                u->syslog_facility = *value ? (uint8_t) (v + 1) : 0;
                return 0;
        }
}

int uf_parse_boolean(const char *value) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(value, yes[i]) == 0)
                        return 1;
                if (strcasecmp(value, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}
