/* SPDX-License-Identifier: MIT */
/*
 * What sandbox-values.c gives the plan (sandbox.c) besides its public header
 * (sandbox-values.h): nothing else uses it. Pure and thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CAP_BIT(c) (UINT64_C(1) << (c))

/* The number of capabilities the running kernel knows, 1…64. */
unsigned sandbox_cap_count(void);

/* An unsigned decimal integer, all of s[0..n). Returns 0 with *ret; -EINVAL
 * (empty, or not all digits), -ERANGE (above UINT64_MAX). */
int sandbox_parse_u64(const char *s, size_t n, uint64_t *ret);

/* "LimitNOFILE=" for RLIMIT_NOFILE: the key in messages; NULL for a resource
 * outside 0..SANDBOX_RLIMIT_MAX-1. A static string. */
const char *sandbox_rlimit_key_eq(int resource);

/* Whether nr is one of the calls a deny list never denies (execve, exit,
 * exit_group, rt_sigprocmask: sandbox_syscall_filter_exempt()). */
bool sandbox_syscall_is_exempt(int nr);
