/* SPDX-License-Identifier: MIT */
/*
 * The cluster (issue 20; docs/cluster.md): with `tend --store etcd://…`, a
 * second store on etcd beside tend's own in-memory one. This host registers
 * under a lease of its own (presence = the lease kept alive by the store's
 * I/O thread: one keep-alive per TTL/3, no key rewritten on a timer) and
 * publishes a copy of each unit record, written behind and coalesced (at
 * most one write per unit per second).
 *
 * The loop never waits on the network: data writes go through store_submit()
 * (completions through the etcd store's fd in tend's sd-event loop); the
 * calls that only exist blocking (authentication, the lease grant and its
 * first keep-alive, the host key's create) run in a registration thread,
 * which retries with back-off (1 s doubling to 30 s), logging the endpoints
 * and the error, and hands its result to the loop through an eventfd.
 * Ordinary units never wait for any of it.
 *
 * Single-threaded from the caller's side: every function runs in tend's loop.
 */
#pragma once

#include <systemd/sd-event.h>

#include "options.h"
#include "store.h"

struct cluster;

/*
 * Starts the cluster agent for o (o->store set; strings borrowed for the
 * agent's lifetime) on loop e; it watches `service/` of the local store
 * (borrowed, must outlive it) to publish records. Registration starts at
 * once in the background. Returns 0 and *ret (the caller's, freed with
 * cluster_free), or -EINVAL (a malformed URL, an unreadable password file
 * or host id: logged), -EOPNOTSUPP (tend built without libcurl: logged),
 * -ENOMEM, sd-event's errors.
 */
int cluster_new(sd_event *e, const struct tend_cluster_options *o, struct store *local, struct cluster **ret);

/*
 * Leaves the cluster: the registration thread is stopped (waited for: at
 * most one etcd request's deadline), the host's lease revoked (its keys go
 * at once: a clean leave, not a failure), the etcd store closed. Accepts
 * NULL; returns NULL.
 */
struct cluster *cluster_free(struct cluster *c);

/* This host's id (never NULL once created). */
const char *cluster_host_id(const struct cluster *c);
