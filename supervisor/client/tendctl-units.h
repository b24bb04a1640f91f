/* SPDX-License-Identifier: MIT */
/*
 * tendctl's units as `show` answers them (tendctl-units.c), read by the
 * systemctl-style verbs (tendctl-show.c) and the status display
 * (tendctl-status.c). Single-threaded.
 */
#pragma once

#include "tendctl-conn.h"

/* The properties of the names asked, in their order: props[i] is the
 * unit's (owned), or, when found[i] is false, systemd's not-found set. */
struct units {
        size_t n;
        json **props;
        bool *found;
};

/* Asks tend for the units' properties on fd. 0 and *ret (units_done()),
 * -EIO (tend refused: said on stderr), -EACCES (permission denied: said), or the errno of the connection. */
int units_fetch(int fd, char *const *names, size_t n, struct units *ret);
void units_done(struct units *u);

/* systemd's text of a property's value into buf (yes/no, lists joined by
 * spaces, timestamps as systemctl prints them, null as ""). */
void format_value(const char *key, json *v, char *buf, size_t size);
