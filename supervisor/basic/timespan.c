/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "timespan.h"

static const struct {
        const char *suffix;
        usec_t usec;
} units[] = {
        /* Longest first where one suffix is a prefix of another. */
        { "usec", 1 }, { "us", 1 }, { "µs", 1 },
        { "msec", USEC_PER_MSEC }, { "ms", USEC_PER_MSEC },
        { "seconds", USEC_PER_SEC }, { "second", USEC_PER_SEC }, { "sec", USEC_PER_SEC }, { "s", USEC_PER_SEC },
        { "minutes", 60 * USEC_PER_SEC }, { "minute", 60 * USEC_PER_SEC }, { "min", 60 * USEC_PER_SEC },
        { "months", 2629800 * USEC_PER_SEC }, { "month", 2629800 * USEC_PER_SEC },
        { "m", 60 * USEC_PER_SEC },
        { "hours", 3600 * USEC_PER_SEC }, { "hour", 3600 * USEC_PER_SEC }, { "hr", 3600 * USEC_PER_SEC },
        { "h", 3600 * USEC_PER_SEC },
        { "days", 86400 * USEC_PER_SEC }, { "day", 86400 * USEC_PER_SEC }, { "d", 86400 * USEC_PER_SEC },
        { "weeks", 604800 * USEC_PER_SEC }, { "week", 604800 * USEC_PER_SEC }, { "w", 604800 * USEC_PER_SEC },
        { "years", 31557600 * USEC_PER_SEC }, { "year", 31557600 * USEC_PER_SEC }, { "y", 31557600 * USEC_PER_SEC },
};

/* Matches the unit at *p (followed by a digit, space or the end). */
static int parse_unit(const char **p, usec_t default_unit, usec_t *ret) {
        const char *s = *p;
        if (*s == '\0' || isspace((unsigned char) *s) || isdigit((unsigned char) *s)) {
                *ret = default_unit;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                size_t n = strlen(units[i].suffix);
                if (strncmp(s, units[i].suffix, n) == 0) {
                        char next = s[n];
                        if (next == '\0' || isspace((unsigned char) next) || isdigit((unsigned char) next)) {
                                *p = s + n;
                                *ret = units[i].usec;
                                return 0;
                        }
                }
        }
        return -EINVAL;
}

int parse_timespan(const char *s, usec_t default_unit, usec_t *ret) {
        if (!s || !ret)
                return -EINVAL;
        while (isspace((unsigned char) *s))
                s++;
        if (strcmp(s, "infinity") == 0) {
                *ret = USEC_INFINITY;
                return 0;
        }
        usec_t total = 0;
        bool any = false;
        while (*s) {
                if (!isdigit((unsigned char) *s) && *s != '.')
                        return -EINVAL;
                char *end;
                errno = 0;
                unsigned long long whole = strtoull(s, &end, 10);
                if (errno)
                        return -ERANGE;
                double frac = 0;
                if (*end == '.') {
                        const char *f = end + 1;
                        double scale = 0.1;
                        for (end++; isdigit((unsigned char) *end); end++, scale /= 10)
                                frac += (*end - '0') * scale;
                        if (end == f && end - 1 == s)
                                return -EINVAL; /* a lone "." */
                }
                s = end;
                while (*s == ' ')
                        s++;
                usec_t unit;
                if (parse_unit(&s, default_unit, &unit) < 0)
                        return -EINVAL;
                if (whole > (USEC_INFINITY - 1) / unit)
                        return -ERANGE;
                usec_t add = (usec_t) whole * unit + (usec_t) (frac * (double) unit);
                if (total > USEC_INFINITY - 1 - add)
                        return -ERANGE;
                total += add;
                any = true;
                while (isspace((unsigned char) *s))
                        s++;
        }
        if (!any)
                return -EINVAL;
        *ret = total;
        return 0;
}

const char *format_timespan(usec_t u, char buf[static 64]) {
        if (u == USEC_INFINITY) {
                snprintf(buf, 64, "infinity");
                return buf;
        }
        static const struct { const char *name; usec_t usec; } parts[] = {
                { "d", 86400 * USEC_PER_SEC }, { "h", 3600 * USEC_PER_SEC }, { "min", 60 * USEC_PER_SEC },
                { "s", USEC_PER_SEC }, { "ms", USEC_PER_MSEC }, { "us", 1 },
        };
        size_t n = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(parts) && n < 60; i++) {
                if (u < parts[i].usec)
                        continue;
                usec_t k = u / parts[i].usec;
                u %= parts[i].usec;
                n += (size_t) snprintf(buf + n, 64 - n, "%s%llu%s", n ? " " : "", (unsigned long long) k, parts[i].name);
        }
        if (n == 0)
                snprintf(buf, 64, "0");
        return buf;
}
