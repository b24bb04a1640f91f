/* SPDX-License-Identifier: MIT */
/*
 * security: what a unit asks of the hardening keys tend does not keep in
 * other structs, and the operator's opt-out (docs/tend.service.5.md
 * "HARDENING"; SPEC §3: never less isolation than asked; issue 17).
 *  - the keys tend refuses (unit-file-refused.c): set to a value that asks
 *    for a restriction, they fail the unit at load unless the operator
 *    accepted weaker isolation for them;
 *  - the opt-out: [X-Tend] AcceptWeakerIsolation=KEY… per unit, and tend's
 *    --accept-weaker-isolation[=KEY,…] for every unit;
 *  - RemoveIPC= (exec/remove-ipc.h applies it when the unit stops);
 *  - the assignments of the keys `tendctl security` reads (security-assess.h),
 *    in file order, so that the assessor replays them as systemd would.
 * Out of line: only units that set any of them have one (SPEC §8).
 */
#pragma once

#include <stdbool.h>

struct unit_file;

struct unit_hardening {
        char **assignments; /* "Key=value" of every assessed key in file order (drop-ins after), owned; NULL: none */
        char **refused;     /* keys ("Key", no '=') set to a value tend refuses, not accepted; owned; NULL: none */
        char **accepted;    /* AcceptWeakerIsolation='s keys ("Key", no '='), owned; NULL: none */
        bool accept_all;    /* AcceptWeakerIsolation=yes */
        bool remove_ipc;    /* RemoveIPC=, no (exec/remove-ipc.h) */
        unsigned char keyring_mode; /* keyring: KeyringMode=, enum unit_keyring_mode */
};

/* keyring: KeyringMode= (systemd.exec(5); docs/tend.service.5.md "Session keyring"). */
enum unit_keyring_mode {
        UNIT_KEYRING_DEFAULT, /* not set, or set empty */
        UNIT_KEYRING_INHERIT, /* the processes keep tend's session keyring */
        UNIT_KEYRING_PRIVATE, /* a new anonymous session keyring per process tree */
        UNIT_KEYRING_SHARED,  /* private, with the user keyring of the unit's user linked into it */
};

/*
 * The keyring f's processes get (never UNIT_KEYRING_DEFAULT): its
 * KeyringMode=, else tend's default, systemd's: private when tend runs as
 * root (a system manager) and this kernel lets it make keyrings
 * (unit_keyring_available()), else inherit (a user manager's default). f may
 * be NULL (the default). Manager thread only (the probe is cached).
 */
enum unit_keyring_mode unit_keyring_mode(const struct unit_file *f);

/* Whether tend can give a process a keyring of its own here: keyctl(2) is
 * neither missing (ENOSYS) nor denied (EPERM, EACCES: a container's seccomp
 * policy). Probed once; manager thread only. */
bool unit_keyring_available(void);

/* Frees h and what it owns; NULL. */
struct unit_hardening *unit_hardening_free(struct unit_hardening *h);

/*
 * The global opt-out, tend --accept-weaker-isolation[=KEY,…]: list is NULL
 * (none), "yes" (every key) or a comma-separated list of keys, each with or
 * without '='. Set once at start-up, before any unit is loaded (not
 * thread-safe). 0, -EINVAL (an empty key), -ENOMEM.
 */
int unit_hardening_accept_global(const char *list);

/*
 * Whether the operator accepted weaker isolation for key ("Key" or "Key=")
 * of f (f may be NULL: the global opt-out alone), per unit or globally.
 * Thread-safe once the global opt-out is set.
 */
bool unit_hardening_accepts(const struct unit_file *f, const char *key);

/*
 * The value of f's last assignment of key ("Key", no '='), or NULL when f
 * does not set it (an empty assignment is ""). Borrowed from f.
 */
const char *unit_hardening_value(const struct unit_file *f, const char *key);

/*
 * Why tend refuses key ("Key", no '=') when set to a value that asks for
 * something, or NULL when key is not one tend refuses. Static.
 */
const char *unit_hardening_refused_why(const char *key);

/* The keys tend refuses, NULL-terminated, in table order (for tests and docs). */
const char *const *unit_hardening_refused_keys(void);
