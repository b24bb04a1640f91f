/* SPDX-License-Identifier: MIT */
/*
 * reexec-cluster: what daemon-reexec carries of the cluster (issue 20;
 * docs/cluster.md "Re-executing"; tend(8) "RE-EXECUTING"): the host's etcd
 * lease (its id, TTL and local expiry: CLOCK_MONOTONIC survives execve) and
 * every singleton this host wants, the held ones with their fencing token,
 * their unit's main pid and cgroup, and their fence process (its pipe's
 * write end and a pidfd, by fd number, O_CLOEXEC cleared for the exec).
 * The new tend renews the same lease at once (no new registration: the
 * host key and the singleton keys live on), takes each fence back (still
 * tend's child, its deadline standing meanwhile), and runs nothing anew: no
 * failover, no unit restarted, $TEND_FENCING_TOKEN unchanged.
 *
 * The state document's "cluster" object (absent without --store): a reader
 * of format 1 or 2 without it ignores it; such a tend registers anew, and
 * the carried fences kill the singletons at their deadline (safe: a
 * failover, never two runs). Single-threaded (tend's loop). Only the
 * manager's reexec files include this.
 */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

struct manager;

/*
 * The old tend, building the state: adds "cluster" to state (nothing
 * without a cluster), the fences' deadlines moved to the lease's current
 * expiry first. With cloexec (the exec failed; state NULL): O_CLOEXEC put
 * back on the fences' fds, the pidfds opened for it closed. Returns 0,
 * -ENOMEM, or fcntl's/pidfd_open's errors.
 */
int reexec_cluster_save(struct manager *m, json_object *state, bool cloexec);

/*
 * The new tend, after reading the state and before manager_setup(): hands
 * the "cluster" object (if any) to the next cluster_new(). The fds it names
 * are owned from here on (closed if nothing takes them). Never fails: a
 * malformed object is logged and dropped (the fences then fire at their
 * deadline: the singletons stop, safe).
 */
void reexec_cluster_begin(struct manager *m);
