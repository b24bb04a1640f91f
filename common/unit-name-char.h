/* SPDX-License-Identifier: MIT */
/*
 * The characters of a unit name's prefix and instance (systemd.unit(5):
 * ASCII letters, digits, ":", "-", "_", ".", "\"; "@" separates the instance
 * and is the caller's to allow). Shared by the unit-file parser (lang/) and
 * the log's unit field (basic/log.c). Pure, thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <string.h>

/* Whether c may stand in a unit name's prefix or instance; '\0' never does. */
static inline bool unit_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr(":-_.\\", c) != NULL);
}

/* The suffix (".timer", ".socket", …) when name ends with that of a systemd
 * unit type other than service, which tend does not run; else NULL. Only the
 * end is looked at: "foo.bar" names foo.bar.service. */
static inline const char *unit_name_other_suffix(const char *name) {
        static const char *const types[] = { ".target", ".socket", ".mount", ".automount", ".swap", ".path",
                                             ".timer", ".device", ".slice", ".scope" };
        size_t n = strlen(name);
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
                size_t t = strlen(types[i]);
                if (n > t && strcmp(name + n - t, types[i]) == 0)
                        return types[i];
        }
        return NULL;
}
