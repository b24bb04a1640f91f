/* SPDX-License-Identifier: MIT */
/*
 * etcd: `tendctl start|restart NAME` of a singleton unit another host holds
 * (docs/cluster.md §5, tendctl(1) "CLUSTER"): refused at once, naming the
 * holder, instead of a start that could only wait. This host stands by for
 * it (as for a singleton started at tend's start): it acquires the key when
 * the holder lets go or its lease ends.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "log.h"
#include "manager-internal.h"
#include "singleflight.h"
#include "unit.h"

int manager_cluster_start_refused(struct manager *m, struct unit *u, sf_waiter **ret_waiter) {
        if (!m->cluster || !u->file->singleton || cluster_singleton_may_run(m->cluster, u->name, NULL))
                return 0;
        const char *holder = cluster_singleton_holder(m->cluster, u->name);
        if (!holder || streq(holder, cluster_host_id(m->cluster)))
                return 0; /* nobody known to hold it (or this host, letting go): the start waits for the key */
        if (cluster_host_eligible(m->cluster, u->file->cluster_keys))
                (void) cluster_singleton_want(m->cluster, u->name, u->file->timeout_stop);
        sf_resolution *r = NULL;
        int k = sf_table_join(m->flights, u->name, ret_waiter, &r);
        if (k < 0 || !r)
                return k < 0 ? k : 1; /* a flight under way: its answer is this one's */
        struct unit_outcome *o = calloc(1, sizeof(*o));
        if (o) {
                *o = (struct unit_outcome) { .ok = false, .result = UNIT_RESULT_SUCCESS };
                snprintf(o->reason, sizeof o->reason, "a singleton held by host %s, where it runs; this host "
                         "takes over when %s lets go or its lease ends", holder, holder);
                if (sf_resolution_answer_take(r, o) < 0)
                        free(o);
        }
        sf_resolution_free(r); /* without an answer (out of memory): `abandoned` */
        log_info("%s: start refused: a singleton held by host %s", u->name, holder);
        return 1;
}
