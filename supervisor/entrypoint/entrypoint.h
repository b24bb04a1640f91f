/* SPDX-License-Identifier: MIT */
/* Entrypoint mode: tend -- CMD (SPEC §1, §6; docs/tend.8.md). */
#pragma once

#include <stddef.h>

#include "options.h"

/*
 * Collects the fds tend inherited beyond 0/1/2 (not close-on-exec), to pass
 * to CMD unchanged. Call before tend opens any fd. *ret_fds is the caller's
 * to free. Returns 0 or -ENOMEM.
 */
int entrypoint_collect_inherited_fds(int **ret_fds, size_t *ret_n);

/*
 * Runs CMD until it exits and its leftovers are gone. Closes the inherited
 * fds once CMD has them. Returns tend's exit status: CMD's code, 128 + its
 * signal, 127/126 when it could not be executed, 1 on tend's own failure.
 */
int entrypoint_run(const struct tend_options *opts, const int *inherited, size_t n_inherited);
