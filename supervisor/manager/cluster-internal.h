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
        struct store_watch *single_watch; /* singletons/ on etcd: made by the registration thread */
        sd_event_source *single_src;
        sd_event_source *check_timer;     /* every TTL/3 while one is held: the fencing deadlines */
        bool single_snapshot_done;
        bool single_watch_failed;         /* while the thread ran: a new one once it hands over */
};

/* A singleton unit this host wants (docs/cluster.md §5). */
struct singleton {
        struct cluster *c;
        char *name;
        char *key;                  /* singletons/NAME */
        usec_t margin;              /* the unit's stop timeout + SAFETY: Dg = expiry − margin */
        char *holder;               /* as last seen on the watch; NULL: none */
        uint64_t token;             /* while held: the key's revision */
        bool held, acquiring, releasing;
        struct store_op op;         /* acquire or release */
        struct fence *fence;        /* while held */
        pid_t pid;
        char *cgroup;
};

/* cluster.c */
int cluster_start_registration(struct cluster *c);

/* cluster-singleton.c */
/* The registration thread: opens the watch of singletons/ (blocking). */
int cluster_singles_watch_open(struct cluster *c);
/* The loop, once the thread handed over: polls the watch. */
void cluster_singles_start(struct cluster *c);
/* The loop: the watch failed; the registration thread makes a new one. */
void cluster_singles_free(struct cluster *c);
