/* SPDX-License-Identifier: MIT */
/* Never less isolation than asked (hardening.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "strv.h"
#include "unit-file.h"

#include "hardening.h"

/* "UNIT\nKEY" of each key already said to be skipped: once per unit and key
 * for tend's life (a restart says nothing new). Manager thread only. */
static char **warned;

static bool warned_once(const char *unit, const char *key) {
        size_t u = strlen(unit), k = strcspn(key, "=");
        for (char **w = warned; w && *w; w++)
                if (strncmp(*w, unit, u) == 0 && (*w)[u] == '\n' && strncmp(*w + u + 1, key, k) == 0 &&
                    (*w)[u + 1 + k] == '\0')
                        return true;
        char *s = malloc(u + k + 2);
        if (s) {
                memcpy(s, unit, u);
                s[u] = '\n';
                memcpy(s + u + 1, key, k);
                s[u + 1 + k] = '\0';
                (void) strv_push(&warned, s); /* out of memory: said again next time */
        }
        return false;
}

int hardening_cannot_apply(const char *unit, const struct unit_file *f, const char *key, const char *why) {
        if (unit_hardening_accepts(f, key)) {
                if (!warned_once(unit, key))
                        log_warning("%s: weaker isolation accepted: not applying %s (%s)", unit, key, why);
                return 1;
        }
        log_error("%s: %s cannot be applied (%s): refusing to run with less isolation than asked", unit, key, why);
        return -EPERM;
}
