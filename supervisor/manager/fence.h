/* SPDX-License-Identifier: MIT */
/*
 * The fence of a singleton unit (issue 20; docs/cluster.md §6): a small
 * process forked by tend per held singleton that kills the unit at a
 * deadline unless tend moves the deadline later through a pipe. It is what
 * stops the unit when tend's loop cannot run (SIGSTOP, a hang, tend killed):
 * a paused tend cannot extend the deadline, so the unit dies by it.
 *
 * The fence kills the unit's main pid and process group (units run in a
 * session of their own) and every pid listed in its cgroup's cgroup.procs
 * (not cgroup.kill: a cgroup once killed that way kills whatever is spawned
 * into it later, and tend would not know to renew it). It keeps tend's blocked signal mask (SIGTERM and the
 * like do not end it), holds only its pipe, and exits after killing, when
 * told to stand down, or at its deadline with nothing to kill.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "time-util.h"

struct fence;

/* Forks the fence with no deadline yet (it waits for fence_set()). Returns
 * 0 and *ret (the caller's; fence_free()), or a negative errno. */
int fence_new(const char *unit, struct fence **ret);

/*
 * Moves the deadline (CLOCK_MONOTONIC µs; USEC_INFINITY: none) and the
 * target: pid (0: none yet) and the unit's cgroup directory (NULL: none).
 * Never blocks (the pipe is non-blocking and a message is one atomic write
 * of less than PIPE_BUF). Returns 0 or a negative errno (the fence then
 * keeps its previous deadline: the unit dies no later than it).
 */
int fence_set(struct fence *f, usec_t deadline, pid_t pid, const char *cgroup_dir);

/* Tells the fence to stand down (the unit is stopped, or handed over
 * cleanly, or this host holds the key again) and forgets it. A fence at its
 * deadline looks for a stand-down before it kills and between its rounds of
 * kills, so one sent before the unit's next run starts spares that run.
 * Accepts NULL; returns NULL. */
struct fence *fence_free(struct fence *f);

/* Its pid (tests, logs). */
pid_t fence_pid(const struct fence *f);

/* daemon-reexec (docs/cluster.md "Re-executing"): the fence's pipe write end
 * (the caller clears its O_CLOEXEC for the exec, never closes it), and a
 * fence taken back from it by the new tend: fd (now the new fence's, made
 * O_CLOEXEC again) and the fence's pid (still tend's child). Returns 0 and
 * *ret (fence_free()), or -EINVAL, -ENOMEM, fcntl's errors. */
int fence_fd(const struct fence *f);
int fence_adopt(int fd, pid_t pid, struct fence **ret);
