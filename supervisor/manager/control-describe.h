/* SPDX-License-Identifier: MIT */
/*
 * ctl: a unit's properties for the control socket's `show`
 * (docs/control-protocol.md "show"). Single-threaded: tend's loop.
 */
#pragma once

#include <json-c/json.h>

struct manager;

/* Adds the properties of the unit called name (its own name, as
 * control_ops.resolve gives it) to props (borrowed). 0, -ENOENT (no such
 * unit), -ENOMEM. */
int manager_describe_unit(struct manager *m, const char *name, struct json_object *props);

/* security: adds the exposure of the unit called name (security-assess.h)
 * to ret (borrowed): "exposure" (tenths, 0–100), "level", "checks" (an
 * array in systemd's order). 0, -ENOENT (no such unit, or no file loaded),
 * -ENOMEM. manager/control-security.c. */
int manager_assess_unit(struct manager *m, const char *name, struct json_object *ret);
