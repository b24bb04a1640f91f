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
