/* SPDX-License-Identifier: MIT */
/*
 * Never less isolation than asked (SPEC §3; issue 17): the one decision a
 * sandboxing key takes when tend cannot apply it on this machine (no
 * CAP_SYS_ADMIN for a mount namespace, a kernel without a feature, a key that
 * needs BPF or an LSM). The plan builders (sandbox.c and its parts) call it
 * before the fork; the unit is refused unless its operator accepted weaker
 * isolation for that key explicitly (docs/tend.service.5.md "HARDENING").
 */
#pragma once

#include <stdbool.h>

struct unit_file;

/*
 * unit (its name, for messages) asks for key (e.g. "PrivateTmp=") through f,
 * and tend cannot apply it here because of why (a short phrase, e.g. "needs a
 * mount namespace: tend lacks CAP_SYS_ADMIN"). Returns:
 *   -EPERM  the unit must not start: logged at error as
 *           "UNIT: KEY cannot be applied (WHY): refusing to run with less isolation than asked";
 *   1       the operator accepted weaker isolation for key: the caller skips it
 *           (said once per unit and key at warning).
 * No pointer is kept. Called from the manager's thread only.
 */
int hardening_cannot_apply(const char *unit, const struct unit_file *f, const char *key, const char *why);
