/* SPDX-License-Identifier: MIT */
/*
 * The cluster agent's state, shared by cluster.c (registration, published
 * records) and cluster-singleton.c (singleton units and their fences).
 * Nothing else includes it. Only with HAVE_STORE_ETCD.
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

        sd_event_source *etcd_src;  /* the etcd store's completions */
        sd_event_source *lease_timer; /* the host lease's local expiry (store_lease_expiry) */
        bool registered;
        bool lease_late;            /* past its local expiry, not known ended (said once) */

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
};

/* cluster.c */
int cluster_start_registration(struct cluster *c);

/* cluster-singleton.c */
/* The mirror of singletons/'s events; a new watch's snapshot starts. */
void cluster_singles_event(struct cluster *c, const struct store_event *ev);
void cluster_singles_rewatch(struct cluster *c);
/* Fences stand down, every singleton forgotten. */
void cluster_singles_free(struct cluster *c);

/* cluster-view.c */
void cluster_mirrors_init(struct cluster *c);
/* The registration thread: opens the watches missing (blocking). 0 or the first error. */
int cluster_mirrors_open(struct cluster *c);
/* The loop, once the thread handed over: polls them (or has failed ones made again). */
void cluster_mirrors_start(struct cluster *c);
void cluster_mirrors_free(struct cluster *c);
/* The newest PUT of key in mirror i, or NULL. */
const struct store_event *cluster_mirror_get(const struct cluster *c, int i, const char *key);
