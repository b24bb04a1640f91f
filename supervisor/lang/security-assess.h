/* SPDX-License-Identifier: MIT */
/*
 * security: a unit's exposure as `systemd-analyze security` (systemd 252)
 * scores it, from what tend will apply (issue 17; docs/tendctl.1.md
 * "security"). Pure: reads a loaded unit file, no system state.
 *
 * Each check reads one key (or a part of it: one capability group, one
 * syscall group), gives a badness 0…range (or "not applicable"), and weighs
 * it; the exposure is the weighted mean on a 0–100 scale (tenths of the
 * 0.0–10.0 shown), rounded up, and named by the same seven words as systemd.
 * A key tend does not apply (not in its key table yet, refused and accepted
 * under the opt-out, or named in AcceptWeakerIsolation=) counts as absent.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct unit_file;

#define SECURITY_CHECKS_MAX 96
#define SECURITY_NOT_APPLICABLE (-1)

struct security_check {
        const char *name;        /* systemd's check name, e.g. "CapabilityBoundingSet=~CAP_SYS_ADMIN"; static */
        const char *key;         /* the key it reads, e.g. "CapabilityBoundingSet"; static */
        const char *description; /* the outcome, in tend's words; static */
        unsigned weight, range;
        int badness;             /* 0…range, or SECURITY_NOT_APPLICABLE */
        unsigned exposure;       /* this check's part of the total, in tenths (0 when good) */
        bool not_applied;        /* the unit's value of key (or systemd's default) is not what tend applies */
};

struct security_assessment {
        struct security_check checks[SECURITY_CHECKS_MAX];
        size_t n;
        unsigned exposure;       /* 0…100: tenths of the 0.0–10.0 score */
        const char *level;       /* "PERFECT", "SAFE", "OK", "MEDIUM", "EXPOSED", "UNSAFE", "DANGEROUS"; static */
};

/*
 * Assesses f into *ret (overwritten). Returns 0, or -ENOMEM (a syscall
 * group's names could not be resolved). f is only read; nothing is kept.
 * Thread-safe once the global opt-out is set (unit-hardening.h).
 */
int security_assess(const struct unit_file *f, struct security_assessment *ret);

/*
 * Tests only: with on, every key counts as in tend's key table (the opt-out
 * still counts), so the assessor's reading of keys other parts of tend apply
 * can be checked against systemd's before they are honoured. Not thread-safe.
 */
void security_assess_test_apply_all(bool on);

/* Whether a check reads key ("Key", no '='): the parser keeps its assignments. */
bool security_assess_reads(const char *key);
