/* SPDX-License-Identifier: MIT */
/*
 * The seccomp half of a sandbox plan (sandbox.h; issue 9's SystemCallFilter=,
 * SystemCallErrorNumber=): sandbox.c's parts, not for other modules. The BPF
 * programs are built with libseccomp and exported before the fork (STYLE.md
 * "Reserve before fork"); the child only loads them (sandbox_pre_exec()).
 */
#pragma once

#include <stdbool.h>

struct sandbox_plan;
struct unit_file;

/*
 * SystemCallFilter= of f into p->seccomp_filter (owned by p) and
 * p->no_new_privs: without CAP_SYS_ADMIN at the filter (sys_admin false),
 * NoNewPrivileges=yes is implied, as in systemd. unit names the unit in the
 * message logged on failure. Returns 0, or a negative errno of libseccomp
 * (-ENOMEM, -E2BIG: a program over BPF_MAXINSNS). Manager thread.
 */
int sandbox_seccomp_plan(const char *unit, const struct unit_file *f, bool sys_admin, struct sandbox_plan *p);
