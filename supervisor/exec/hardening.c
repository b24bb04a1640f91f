/* SPDX-License-Identifier: MIT */
/* Never less isolation than asked (hardening.h). */
#include <errno.h>

#include "log.h"

#include "hardening.h"

int hardening_cannot_apply(const char *unit, const struct unit_file *f, const char *key, const char *why) {
        (void) f; /* the operator's opt-out per unit is read here (issue 17) */
        log_error("%s: %s cannot be applied (%s): refusing to run with less isolation than asked", unit, key, why);
        return -EPERM;
}
