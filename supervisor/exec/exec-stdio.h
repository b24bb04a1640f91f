/* SPDX-License-Identifier: MIT */
/*
 * A unit's standard input and terminal (issue 16; systemd.exec(5)
 * "LOGGING AND STANDARD INPUT/OUTPUT"): StandardInput=tty, tty-force,
 * tty-fail, file:PATH, data (StandardInputText=), and StandardOutput=tty /
 * StandardError=tty, on TTYPath= (/dev/console by default). tend opens them
 * before the fork (O_NOCTTY, O_CLOEXEC), after TTYReset= (sane termios and
 * a terminal reset) and TTYVHangup= (TIOCVHANGUP, then opened again); the
 * child makes a tty input its controlling terminal (sandbox.h, TIOCSCTTY).
 * TTYVTDisallocate= is accepted and does nothing (tend allocates no VTs).
 * Single-threaded (tend's loop).
 */
#pragma once

#include "unit-file.h"

/* The fds a spawn gets for 0, 1, 2: -1 where the caller's default stays. Owned. */
struct exec_stdio {
        int fd[3];
};

/*
 * Opens what f's StandardInput=, StandardOutput=tty, StandardError=tty ask
 * for into *ret (all -1 when nothing). A failure is logged "UNIT: KEY=: PATH:
 * error" and returned (a negative errno: an open error, -ENOMEM); *ret is
 * then all -1.
 */
int exec_stdio_open(const char *unit, const struct unit_file *f, struct exec_stdio *ret);

/* Closes the fds of s (after the spawn: the child has its copies). */
void exec_stdio_close(struct exec_stdio *s);
