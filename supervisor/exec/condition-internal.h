/* SPDX-License-Identifier: MIT */
/* What condition.c and condition-machine.c share; not for other modules. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "condition.h"

/* Reads env->root + path (path absolute) into buf (NUL-terminated, at most
 * size-1 bytes): its length, or a negative errno (-ENOENT…). */
ssize_t cond_read(const struct condition_env *env, const char *path, char *buf, size_t size);
/* env->root + path into buf; buf. */
const char *cond_path(const struct condition_env *env, const char *path, char *buf, size_t size);

/* condition-machine.c: the checks that read facts of the machine (1, 0, or a negative errno). */
int cond_virtualization(const struct condition_env *env, const char *v);
int cond_firmware(const struct condition_env *env, const char *v);
int cond_security(const struct condition_env *env, const char *v);
int cond_architecture(const char *v);
int cond_cpu_feature(const char *v);
int cond_ac_power(const struct condition_env *env, const char *v);
int cond_control_group_controller(const struct condition_env *env, const char *v);
int cond_pressure(const struct condition_env *env, unit_condition_type t, const char *v);
int cond_path_is_encrypted(const struct condition_env *env, const char *path);
/* The innermost virtualization's id ("docker", "kvm"…), "none", and whether it is a container. */
const char *cond_detect_virtualization(const struct condition_env *env, bool *ret_container);
