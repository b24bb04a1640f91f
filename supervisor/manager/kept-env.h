/* SPDX-License-Identifier: MIT */
/*
 * The kept environment (SPEC §8 restart latency): a main process's
 * environment is built from tend's own, the unit file and the notify
 * socket, none of which changes between restarts unless the file does; it
 * is kept for the next spawn once the unit has restarted (a copy of tend's
 * environment per unit, a few KiB: 1,000 units started once keep none).
 * EnvironmentFile= is read at each start and User= is looked up at each
 * start: with either the environment is built anew.
 *
 * The invariant (tests/unit/test-manager-kept-env.c): kept only once the
 * unit has restarted, for a main process, without EnvironmentFile= or
 * User=; a kept one is used only for a file of the same text (size and hash,
 * unit_file_same_text), else rebuilt.
 *
 * One per unit, zero-initialised; single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kept_env {
        char **env;      /* owned (strv_free), NULL when none is kept */
        size_t size;     /* the text of the file env was built from: text_size */
        uint64_t hash;   /* and text_hash */
};

/* Whether the environment of this spawn is to be kept (and may come from
 * the kept one): a main process (main), of a unit that restarted (restarts
 * > 0), whose file has no EnvironmentFile= (n_environment_files == 0) and
 * whose environment is not User='s (environment_owned false, sandbox.h). */
static inline bool kept_env_wanted(bool main, uint64_t restarts, size_t n_environment_files, bool environment_owned) {
        return main && restarts > 0 && n_environment_files == 0 && !environment_owned;
}

/* The kept environment if it was built from a file of this text (taken:
 * the caller owns it, none is kept any more), else NULL (a stale one stays
 * until replaced). */
char **kept_env_take(struct kept_env *k, size_t text_size, uint64_t text_hash);

/* Keeps env (taken), built from a file of this text, replacing any kept one. */
void kept_env_keep(struct kept_env *k, char **env, size_t text_size, uint64_t text_hash);

/* Frees the kept environment, if any. */
void kept_env_done(struct kept_env *k);
