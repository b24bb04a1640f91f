/* SPDX-License-Identifier: MIT */
/*
 * Condition*= and Assert*= evaluated (systemd.unit(5) "Conditions and
 * Asserts"; docs/tend.service.5.md "CONDITIONS"), at each start before
 * ExecStartPre= (lifecycle/unit-steps.c). Each type reads what systemd 252's
 * reads; the three tied to systemd's own state answer as systemd does with no
 * first boot, no credentials and no pending update (ConditionFirstBoot=yes
 * false, ConditionCredential= false, ConditionNeedsUpdate= false).
 *
 * The machine's facts (/proc, /sys, /etc/os-release, /etc/machine-id, /run,
 * /.dockerenv) are read under env->root, the seam that lets a test point them
 * at a fixture; the paths of the Path*=/Directory*=/File*= types are the
 * unit's own and are not moved. Not thread-safe: the larger files (the kernel's
 * command line, os-release, cpuinfo) are read into static buffers; tend calls
 * this from its one event loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "unit-file.h"

struct condition_env {
        const char *root; /* NULL or "": "/"; else a directory standing for it (borrowed) */
        char **environ;   /* ConditionEnvironment='s block (borrowed); NULL: tend's own environ */
};

/*
 * c's check, negation applied: 1 it holds, 0 it does not, a negative errno
 * when it cannot be determined (systemd counts that as not holding, negated
 * or not): -EINVAL a value the check cannot read, -ENOMEM, or the error
 * reading a fact of the machine.
 */
int condition_test(const struct condition_env *env, const struct unit_condition *c);

/*
 * The conditions (asserts false) or the asserts (true) of l, as systemd
 * combines them: every non-triggering one must hold and, if there are
 * triggering ones, at least one of those. 1: the start may go on; 0: it may
 * not, *ret_failed (borrowed from l) the first non-triggering one that failed,
 * or when only the triggering ones failed, the first of those. A check that
 * cannot be determined is logged (warning, unit and file:line) and fails.
 * l may be NULL (no conditions: 1). unit and path name the unit in messages.
 */
int condition_list_test(const struct condition_env *env, const struct unit_conditions *l, bool asserts,
                        const char *unit, const char *path, const struct unit_condition **ret_failed);

/* c as written, prefixes included: "ConditionPathExists=|!/x", into buf (cut to size). */
void condition_format(const struct unit_condition *c, char *buf, size_t size);
