/* SPDX-License-Identifier: MIT */
/*
 * security: tendctl security NAME… (tendctl-security.c). Single-threaded.
 */
#pragma once

#include "tendctl-verbs.h"

/* tend's assessment printed as systemd-analyze security does, or as a JSON
 * array with -o json. Returns the exit status (0; 3 a unit not found; …). */
int run_security_verb(const struct args *a, int fd);
