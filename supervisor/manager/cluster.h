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

/* What the agent asks of the manager (singletons), from tend's loop. */
struct cluster_ops {
        /* NAME is held by this host now: start it (cluster_singleton_may_run() says yes). */
        void (*acquired)(void *userdata, const char *name);
        /* NAME must stop now: its lease could not be renewed before the fencing deadline. */
        void (*lost)(void *userdata, const char *name);
};

/*
 * Starts the cluster agent for o (o->store set; strings borrowed for the
 * agent's lifetime) on loop e; it watches `service/` of the local store
 * (borrowed, must outlive it) to publish records. Registration starts at
 * once in the background. Returns 0 and *ret (the caller's, freed with
 * cluster_free), or -EINVAL (a malformed URL, an unreadable password file
 * or host id: logged), -EOPNOTSUPP (tend built without libcurl: logged),
 * -ENOMEM, sd-event's errors.
 */
int cluster_new(sd_event *e, const struct tend_cluster_options *o, struct store *local,
                const struct cluster_ops *ops, void *userdata, struct cluster **ret);

/*
 * Leaves the cluster: the registration thread is stopped (waited for: at
 * most one etcd request's deadline), the host's lease revoked (its keys go
 * at once: a clean leave, not a failure), the etcd store closed. Accepts
 * NULL; returns NULL.
 */
struct cluster *cluster_free(struct cluster *c);

/* This host's id (never NULL once created). */
const char *cluster_host_id(const struct cluster *c);

/* Whether this host's id is in use by another tend (hosts/ID under another
 * lease; docs/cluster.md "One host id, one tend"): not registered, no
 * singleton runs here until that key goes. Loop only. */
bool cluster_host_id_in_use(const struct cluster *c);

/* Whether this host may run a unit with the constraints ck ([X-Tend] Hosts=:
 * its id is listed; HostMetadata=: each K=V is one of --host-metadata's).
 * NULL ck: any host may. */
struct unit_cluster_keys;
bool cluster_host_eligible(const struct cluster *c, const struct unit_cluster_keys *ck);

/* ---- singleton units ([X-Tend] Singleton=yes; docs/cluster.md §5, §6) ---- */

/*
 * This host wants to run singleton NAME (idempotent; name copied): it tries
 * to acquire singletons/NAME once registered, else waits on the watch of
 * singletons/ and tries when the key goes; ops->acquired says when it holds
 * it. stop_timeout (µs, the unit's TimeoutStopSec=) sizes the fencing margin.
 * Returns 0, -ENOMEM, or -ERANGE when the lease TTL cannot cover the margin
 * (logged: the unit is never started by this host).
 */
int cluster_singleton_want(struct cluster *c, const char *name, usec_t stop_timeout);

/* Whether this host holds NAME and is before its fencing deadline (may spawn
 * it now); *ret_token (may be NULL): the key's revision, $TEND_FENCING_TOKEN. */
bool cluster_singleton_may_run(struct cluster *c, const char *name, uint64_t *ret_token);

/* NAME's main process (0: none now) and cgroup directory (NULL: none), for
 * its fence. */
void cluster_singleton_target(struct cluster *c, const char *name, pid_t pid, const char *cgroup_dir);

/*
 * etcd: the cluster view (control.h's ops.cluster; docs/control-protocol.md
 * "cluster"), answered from the watches' mirrors, never a read of etcd: one
 * JSON object appended to items per host (view "hosts"), per published unit
 * of every host ("list"), or for singleton unit ("status"). c NULL:
 * -EOPNOTSUPP; "status" of a key nobody holds: -ENOENT; -ENOMEM.
 * "hosts" with ticket (borrowed; a reference taken): CONTROL_ANSWER_LATER
 * when each host's lease time left is asked of etcd (docs/cluster.md §4b):
 * the items are answered through the ticket from tend's loop once etcd
 * answered or HOSTS_TTL_WAIT passed (the unanswered ones null); the loop
 * never waits on etcd. Without a ticket: now, the time left unknown.
 * While this tend waits for its host id (another tend's hosts/ID; docs/cluster.md
 * "One host id, one tend"), "hosts" adds an item for this tend with "waiting":
 * CLUSTER_WAITING_HOST_ID and "status" answers with "this_host": the same
 * (holder null when this tend does not watch the key meanwhile).
 */
#define CLUSTER_WAITING_HOST_ID "waiting: host id in use"
struct json_object;
struct control_ticket;
int cluster_view(struct cluster *c, const char *view, const char *unit, struct json_object *items,
                 struct control_ticket *ticket);

/* The host holding NAME as last seen on the watch (NULL: none or unknown). */
const char *cluster_singleton_holder(const struct cluster *c, const char *name);

/* ---- a singleton started, stopped, reloaded (QA20 M1–M4; docs/cluster.md §5) ---- */

/*
 * This host no longer wants NAME (`tendctl stop`, Hosts= no longer naming
 * it): it stops contending for the key; a key it holds is given up once the
 * unit is down — now when unit_down, else at cluster_singleton_unit_down() —
 * by the fence killing what is left of the unit's cgroup, then the key's
 * delete (another host that wants it takes it). NAME unknown: nothing.
 */
void cluster_singleton_unwant(struct cluster *c, const char *name, bool unit_down);

/* NAME's unit is down (inactive or failed): a hold being given up goes now. */
void cluster_singleton_unit_down(struct cluster *c, const char *name);

/* Hosts=/HostMetadata= left this host out of NAME, which it wanted (set: true),
 * so that a reload naming it again puts it back on standby. Returns the mark
 * as it was; a start or stop of NAME clears it. NAME unknown: false. Loop only. */
bool cluster_singleton_set_ineligible(struct cluster *c, const char *name, bool set);

/* Singleton= removed by a reload: a key held is deleted now, its fence stood
 * down (the unit runs on as an ordinary one); this host no longer contends. */
void cluster_singleton_forget(struct cluster *c, const char *name);

/* NAME, wanted and not held, runs here already (Singleton=yes added to a
 * running unit by a reload): when another host holds the key (seen now, or
 * by the acquire or the watch later), ops->lost stops this host's copy. */
void cluster_singleton_running(struct cluster *c, const char *name);

/* Whether this host wants NAME and waits for its key (tendctl status). c may be NULL. */
bool cluster_singleton_waiting(const struct cluster *c, const char *name);

/* A client's start of NAME waits for the key: the start at the acquire is an
 * explicit one (start limit reset, as `tendctl start`). take_asked: whether
 * one was, cleared. */
void cluster_singleton_ask(struct cluster *c, const char *name);
bool cluster_singleton_take_asked(struct cluster *c, const char *name);
