/* SPDX-License-Identifier: MIT */
/*
 * The cluster agent's state, shared by cluster.c (registration, published
 * records) and cluster-singleton.c (singleton units and their fences).
 * Nothing else includes it but reexec-cluster.c (what a daemon-reexec
 * carries). Only with HAVE_STORE_ETCD.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include <systemd/sd-event.h>

#include "cluster.h"
#include "fence.h"
#include "store-etcd.h"

/* One unit's published copy (units/HOST/NAME). */
struct published {
        struct cluster *c;
        char *name;
        struct store_event *latest; /* the local record to publish next; NULL: delete it */
        struct store_event *sending; /* the record op's value points into, while busy */
        uint64_t revision;          /* of the etcd key as last written or read; 0: absent/unknown */
        bool dirty;                 /* latest not yet on etcd */
        bool busy;                  /* op in flight */
        bool need_get;              /* a write LOST: read the key's revision first */
        char *key;                  /* op's key while busy */
        struct store_op op;
};

struct cluster;

/* A copy of a prefix of etcd kept by a watch (cluster-view.c): the newest PUT
 * of each live key, in key order; on_event (may be NULL) hears each event. */
struct mirror {
        const char *prefix;
        enum store_keyspace ks;
        void (*on_event)(struct cluster *c, const struct store_event *ev);
        struct store_watch *w;        /* made by the registration thread */
        sd_event_source *src;
        struct store_event **evs;
        size_t n, cap;
        bool failed;                  /* ended while the thread ran: a new one once it hands over */
        bool snapshot_done;           /* the watch's snapshot is in (a fresh watch: not yet) */
};

struct cluster {
        sd_event *event;
        const struct tend_cluster_options *o;
        struct store *local;
        char *endpoints, *prefix, *password, *host_id, *host_value;
        struct store_etcd_options eo;

        /* the registration thread; it alone writes etcd (once), lease and reg_error
         * while it runs; the loop reads them after done_fd (then joins it) */
        pthread_t thread;
        bool thread_running;
        int done_fd, stop_fd;
        sd_event_source *done_src;
        struct store *etcd;
        struct store_lease *lease;
        int reg_error;
        /* hosts/ID held by another lease (QA20 M5; docs/cluster.md "One host id, one
         * tend"): the thread's finding (reg_in_use; in_use: whose, for the log;
         * in_use_lease: its lease), and the loop's state: waiting for that key to go
         * (no lease, no singleton, nothing published) */
        bool reg_in_use;
        char *in_use;
        int64_t in_use_lease, logged_lease;
        bool waiting;

        sd_event_source *etcd_src;  /* the etcd store's completions */
        sd_event_source *lease_timer; /* the host lease's local expiry (store_lease_expiry) */
        bool registered;
        bool lease_late;            /* past its local expiry, not known ended (said once) */
        struct hosts_ask *host_asks; /* hosts views waiting for etcd (cluster-view.c) */

        struct store_watch *local_watch; /* service/ of the local store */
        sd_event_source *local_src;
        struct published **pub;
        size_t n_pub;
        sd_event_source *flush_timer;
        usec_t last_flush;
        bool write_failing;          /* the last write failed (said once until one succeeds) */
        bool closing;

        /* singletons (cluster-singleton.c) */
        const struct cluster_ops *ops;
        void *userdata;
        struct singleton **singles;
        size_t n_singles;
        sd_event_source *check_timer;     /* every TTL/3 while one is held: the fencing deadlines */
        bool single_snapshot_done;

        /* daemon-reexec: the lease carried (adopt_id: 0 none), taken back by the
         * registration thread; until it hands over, the fencing deadlines count
         * from adopt_expiry. adopt_lost: it had ended (the thread registered anew). */
        int64_t adopt_id;
        usec_t adopt_ttl, adopt_expiry;
        bool adopt_lost;

        /* the watched prefixes (cluster-view.c): singletons/ (on_event: cluster-singleton.c),
         * hosts/ and units/ (the cluster view) */
        struct mirror mirrors[3];
};

enum { MIRROR_SINGLES, MIRROR_HOSTS, MIRROR_UNITS };

/* A singleton unit this host wants (docs/cluster.md §5). */
struct singleton {
        struct cluster *c;
        char *name;
        char *key;                  /* singletons/NAME */
        usec_t margin;              /* the unit's stop timeout + SAFETY: Dg = expiry − margin */
        char *holder;               /* as last seen on the watch; NULL: none */
        uint64_t token;             /* while held: the key's revision */
        bool held, acquiring, releasing;
        bool stale_lease;           /* not acquired: the lease is past Dg; again at the next check */
        struct store_op op;         /* acquire or release */
        struct fence *fence;        /* while held */
        struct fence *lost_fence;   /* a lost hold's, armed at its Dk; stood down at the next hold */
        usec_t release_after;       /* a lost hold's key is deleted after its Dk: the unit is dead by then */
        pid_t pid;
        char *cgroup;
        const char *lost_why;       /* carried held without its lease or fence: lost at the first check */
        int fence_pidfd;            /* a re-exec under way: the fence's pidfd carried (else -1) */
        /* QA20 M1–M4 (docs/cluster.md §5 "Starting, stopping, reloading") */
        bool wanted;                /* this host contends for the key (a start); a stop, Hosts= end it */
        bool letting_go;            /* held; given up once the unit is down (a stop, Hosts= narrowed) */
        bool unheld_run;            /* runs here without the key (Singleton=yes added by a reload) */
        bool asked;                 /* a client's start waits for the key: the start at the acquire is its */
        bool ineligible;            /* wanted, then left out by Hosts= (a reload naming it again: wanted) */
        int64_t acquire_lease;      /* the lease id of the last acquire (its ENOENT: that lease ended) */
};

/* What a daemon-reexec carries of the cluster (reexec-cluster.c; docs/cluster.md
 * "Re-executing"): the host lease and every singleton this host wants. */
struct carried_single {
        char *name, *cgroup;        /* owned */
        usec_t margin;
        uint64_t token;
        bool held, releasing;
        bool wanted, letting_go;    /* QA20 M3: a stop's (docs/cluster.md §5) */
        int fence_fd, fence_pidfd;  /* -1: none; owned until adopted */
        pid_t fence_pid, pid;
};

struct cluster_carried {
        int64_t lease_id;           /* 0: none (not registered at the exec) */
        usec_t ttl, expiry;         /* the lease's TTL as granted, store_lease_expiry() at the exec */
        struct carried_single *singles;
        size_t n_singles;
};

/* reexec-cluster.c: frees cc, closing the fds it still owns. Accepts NULL. */
void cluster_carried_free(struct cluster_carried *cc);
/* The state the new tend read, for the next cluster_new() (one agent per process). */
void cluster_carry_in(struct cluster_carried *cc);

/* cluster.c */
int cluster_start_registration(struct cluster *c);
/* The mirror of hosts/'s events: while the host id is in use, its DELETE (or
 * a snapshot without it) starts the registration again. */
void cluster_hosts_event(struct cluster *c, const struct store_event *ev);

/* cluster-singleton.c */
/* The mirror of singletons/'s events; a new watch's snapshot starts. */
void cluster_singles_event(struct cluster *c, const struct store_event *ev);
void cluster_singles_rewatch(struct cluster *c);
/* When the fences kill (the lease's expiry − SAFETY − drift; 0: no lease). */
usec_t cluster_kill_deadline(const struct cluster *c);
/* The singletons a re-exec carried, back (held ones with their fences). */
void cluster_singles_adopt(struct cluster *c, struct cluster_carried *cc);
/* The host lease was renewed or registered: the fences' deadlines move now. */
void cluster_singles_renewed(struct cluster *c);
/* Fences stand down, every singleton forgotten. */
void cluster_singles_free(struct cluster *c);

/* cluster-view.c */
void cluster_mirrors_init(struct cluster *c);
/* The registration thread: opens the watches missing (blocking), singletons/
 * only when singles (not while the host id is in use). 0 or the first error. */
int cluster_mirrors_open(struct cluster *c, bool singles);
/* The loop: mirror i's watch ended by tend (its copy emptied). */
void cluster_mirror_stop(struct cluster *c, int i);
/* The loop, once the thread handed over: polls them (or has failed ones made again). */
void cluster_mirrors_start(struct cluster *c);
void cluster_mirrors_free(struct cluster *c);
/* The hosts views still waiting for etcd's lease time left: answered now
 * without it, their asks cancelled (before the etcd store closes). */
void cluster_views_free(struct cluster *c);
/* The newest PUT of key in mirror i, or NULL. */
const struct store_event *cluster_mirror_get(const struct cluster *c, int i, const char *key);
