/* SPDX-License-Identifier: MIT */
/* systemd time spans ("1min 30s", "500ms", "2h", "infinity"), as unit files and
 * tend's options write them (systemd.time(7)). */
#pragma once

#include "time-util.h"

/*
 * Parses s into µs. A number without a unit is in default_unit µs (systemd:
 * seconds for most keys, USEC_PER_SEC). "infinity" is USEC_INFINITY.
 * Returns 0, -EINVAL (syntax), or -ERANGE (overflow). Pure; thread-safe.
 */
int parse_timespan(const char *s, usec_t default_unit, usec_t *ret);

/* Formats µs as "1min 30s", "500ms", "infinity" into buf (≥ 64 bytes). */
const char *format_timespan(usec_t u, char buf[static 64]);
