/* SPDX-License-Identifier: MIT */
/*
 * ns: what namespace.c (the plan) and namespace-child.c (the child's step)
 * share. Not a public header: only those two include it.
 */
#pragma once

#include <stdbool.h>

#include "namespace.h"

/* The index of key in namespace.c's key table (namespace_key_name()); 0 if none. */
int key_index(const char *key);

/* Whether path is strictly under parent (both absolute, simplified). */
bool path_under(const char *path, const char *parent);

/* Whether entry m makes its path read-only, noexec, exec, its merged flags
 * included (systemd 252's mount_entry_read_only() and the like). */
bool entry_read_only(const struct namespace_mount *m);
bool entry_no_exec(const struct namespace_mount *m);
bool entry_exec(const struct namespace_mount *m);
