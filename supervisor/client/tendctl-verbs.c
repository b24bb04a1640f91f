/* SPDX-License-Identifier: MIT */
/*
 * tendctl's verbs (tendctl-verbs.h): one table of what each verb sends,
 * takes and answers with (tendctl(1) "EXIT STATUS", one table per verb).
 */
#include <assert.h>
#include <errno.h>

#include "control-proto.h"
#include "macro.h"
#include "tendctl-verbs.h"

/* unknown: the exit status for a unit tend does not know (systemctl's);
 * systemctl: the verb is systemctl's, so 5 and 4 mean what systemctl says. */
static const struct verb_info verbs[_VERB_MAX] = {
        [VERB_STATUS] = { "status", CONTROL_CMD_STATUS, OPT_JSON | OPT_LINES, 0, SIZE_MAX, EXIT_UNKNOWN_STATUS },
        [VERB_LIST] = { "list", CONTROL_CMD_LIST, OPT_JSON, 0, 0, 0 },
        [VERB_LIST_UNITS] = { "list-units", CONTROL_CMD_LIST, OPT_JSON, 0, 0, 0 },
        [VERB_START] = { "start", CONTROL_CMD_START, OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_STOP] = { "stop", CONTROL_CMD_STOP, OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_RESTART] = { "restart", CONTROL_CMD_RESTART, OPT_NO_BLOCK | OPT_JSON, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_RESET_FAILED] = { "reset-failed", CONTROL_CMD_RESET_FAILED, 0, 0, SIZE_MAX, EXIT_FAILED },
        [VERB_KILL] = { "kill", CONTROL_CMD_KILL, OPT_KILL, 1, 1, EXIT_FAILED },
        [VERB_RELOAD] = { "reload", CONTROL_CMD_RELOAD, OPT_NO_BLOCK, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_LOGS] = { "logs", CONTROL_CMD_LOGS, OPT_LOGS | OPT_LINES | OPT_PROPS | OPT_JSON | OPT_FILTER, 1, 1, EXIT_NOT_FOUND },
        [VERB_WATCH] = { "watch", CONTROL_CMD_WATCH, OPT_EPHEMERAL | OPT_JSON, 0, 1, EXIT_NOT_FOUND },
        [VERB_DAEMON_RELOAD] = { "daemon-reload", CONTROL_CMD_DAEMON_RELOAD, OPT_JSON, 0, 0, 0 },
        [VERB_SHUTDOWN] = { "shutdown", CONTROL_CMD_SHUTDOWN, 0, 0, 0, 0 },
        [VERB_SHOW] = { "show", CONTROL_CMD_SHOW, OPT_PROPS | OPT_JSON, 1, SIZE_MAX, 0 },
        [VERB_IS_ACTIVE] = { "is-active", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_PROGRAM_NOT_RUNNING },
        [VERB_IS_FAILED] = { "is-failed", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_IS_ENABLED] = { "is-enabled", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_CAT] = { "cat", CONTROL_CMD_SHOW, 0, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_LIST_DEPENDENCIES] = { "list-dependencies", CONTROL_CMD_SHOW, 0, 1, 1, 0 },
        [VERB_TRY_RESTART] = { "try-restart", CONTROL_CMD_SHOW, OPT_NO_BLOCK, 1, SIZE_MAX, EXIT_NOT_INSTALLED },
        [VERB_RELOAD_OR_RESTART] = { "reload-or-restart", CONTROL_CMD_SHOW, OPT_NO_BLOCK, 1, SIZE_MAX,
                                     EXIT_NOT_INSTALLED },
        [VERB_SECURITY] = { "security", CONTROL_CMD_SECURITY, OPT_JSON, 1, SIZE_MAX, EXIT_NOT_FOUND },
        [VERB_ENABLE] = { "enable", CONTROL_CMD_ENABLE, OPT_NOW, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_DISABLE] = { "disable", CONTROL_CMD_DISABLE, OPT_NOW, 1, SIZE_MAX, EXIT_FAILED },
        [VERB_DAEMON_REEXEC] = { "daemon-reexec", CONTROL_CMD_DAEMON_REEXEC, 0, 0, 0, 0 },
};

const struct verb_info *verb_info(enum verb v) {
        assert((unsigned) v < _VERB_MAX);
        return &verbs[v];
}

const char *verb_name(enum verb v) {
        return (unsigned) v < _VERB_MAX ? verbs[v].name : "?";
}

int verb_exit_unknown(enum verb v) {
        return (unsigned) v < _VERB_MAX ? verbs[v].unknown : EXIT_FAILED;
}

/* "tend is not running" is 5 unless 5 means an unknown unit for the verb
 * (start, stop, …: systemctl's "not installed"), then 1 as systemctl's own
 * "cannot connect". */
int verb_exit_not_running(enum verb v) {
        return verb_exit_unknown(v) == EXIT_NOT_RUNNING ? EXIT_FAILED : EXIT_NOT_RUNNING;
}

/* "permission denied" is 4 for every verb (QA19 L7): for status too, where
 * 4 is also LSB's "status unknown" — which a refused status is (1 there
 * would be LSB's "dead, its pid file left"). stderr says which. */
int verb_exit_denied(enum verb v) {
        return EXIT_DENIED;
}

int verb_from_string(const char *s) {
        for (size_t i = 0; i < _VERB_MAX; i++)
                if (streq(s, verbs[i].name))
                        return (int) i;
        return -EINVAL;
}
