/* SPDX-License-Identifier: MIT */
/*
 * reexec-cluster (reexec-cluster.h): the cluster's part of the re-exec
 * state, written by the old tend and read back by the new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager-internal.h"
#include "reexec.h"
#include "reexec-cluster.h"

#ifdef HAVE_STORE_ETCD
#include "cluster-internal.h"

static int set_cloexec(int fd, bool on) {
        int f = fcntl(fd, F_GETFD);
        if (f < 0 || fcntl(fd, F_SETFD, on ? f | FD_CLOEXEC : f & ~FD_CLOEXEC) < 0)
                return -errno;
        return 0;
}

/* A held singleton's fence: its deadline refreshed, its pipe and a pidfd of
 * it kept open across the exec (cloexec: put back as they were). */
static int save_fence(struct singleton *s, json_object *o, bool cloexec) {
        if (!s->fence)
                return 0;
        int fd = fence_fd(s->fence), k;
        if (cloexec) {
                s->fence_pidfd = safe_close(s->fence_pidfd);
                return set_cloexec(fd, true);
        }
        (void) fence_set(s->fence, cluster_kill_deadline(s->c), s->pid, s->cgroup);
        if (s->fence_pidfd < 0 && (s->fence_pidfd = (int) syscall(SYS_pidfd_open, fence_pid(s->fence), 0)) < 0)
                return -errno;
        if ((k = set_cloexec(fd, false)) < 0 || (k = set_cloexec(s->fence_pidfd, false)) < 0)
                return k;
        if ((k = reexec_state_add(o, "fence_fd", json_object_new_int(fd))) < 0 ||
            (k = reexec_state_add(o, "fence_pid", json_object_new_int(fence_pid(s->fence)))) < 0)
                return k;
        return reexec_state_add(o, "fence_pidfd", json_object_new_int(s->fence_pidfd));
}

static int save_single(struct singleton *s, json_object *arr) {
        json_object *o = json_object_new_object();
        int k = o && json_object_array_add(arr, o) >= 0 ? 0 : -ENOMEM;
        if (k < 0) {
                json_object_put(o);
                return k;
        }
        if ((k = reexec_state_add(o, "name", json_object_new_string(s->name))) < 0 ||
            (k = reexec_state_add(o, "margin", json_object_new_uint64(s->margin))) < 0 ||
            (k = reexec_state_add(o, "held", json_object_new_boolean(s->held))) < 0 ||
            (k = reexec_state_add(o, "releasing", json_object_new_boolean(s->releasing))) < 0 ||
            (k = reexec_state_add(o, "token", json_object_new_uint64(s->token))) < 0 ||
            (k = reexec_state_add(o, "pid", json_object_new_int(s->pid))) < 0 ||
            (k = reexec_state_add(o, "wanted", json_object_new_boolean(s->wanted))) < 0 ||
            (k = reexec_state_add(o, "letting_go", json_object_new_boolean(s->letting_go))) < 0)
                return k;
        if (s->cgroup && (k = reexec_state_add(o, "cgroup", json_object_new_string(s->cgroup))) < 0)
                return k;
        return s->held ? save_fence(s, o, false) : 0;
}

int reexec_cluster_save(struct manager *m, json_object *state, bool cloexec) {
        struct cluster *c = m->cluster;
        if (!c)
                return 0;
        if (cloexec) {
                for (size_t i = 0; i < c->n_singles; i++)
                        if (c->singles[i]->held)
                                (void) save_fence(c->singles[i], NULL, true);
                return 0;
        }
        json_object *o = json_object_new_object(), *singles = json_object_new_array();
        int k = reexec_state_add(state, "cluster", o);
        if (k >= 0)
                k = reexec_state_add(o, "singletons", singles);
        else
                json_object_put(singles);
        /* The lease only once the registration thread handed it over: before, it is the thread's. */
        if (k >= 0 && c->registered && c->lease &&
            ((k = reexec_state_add(o, "lease", json_object_new_int64(store_etcd_lease_id(c->lease)))) < 0 ||
             (k = reexec_state_add(o, "ttl", json_object_new_uint64(store_etcd_lease_ttl(c->lease)))) < 0 ||
             (k = reexec_state_add(o, "expiry", json_object_new_uint64(store_lease_expiry(c->lease)))) < 0))
                return k;
        for (size_t i = 0; k >= 0 && i < c->n_singles; i++)
                k = save_single(c->singles[i], singles);
        return k;
}

/* ---- the new tend ---- */

static int64_t get_int(json_object *o, const char *key, int64_t def) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : def;
}

static uint64_t get_uint(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_uint64(v) : 0;
}

static const char *get_str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

/* A carried fd: made O_CLOEXEC again at once (no unit inherits it); -1 if absent. */
static int take_fd(json_object *o, const char *key) {
        int fd = (int) get_int(o, key, -1);
        if (fd < 3 || fcntl(fd, F_GETFD) < 0)
                return -1;
        (void) set_cloexec(fd, true);
        return fd;
}

void cluster_carried_free(struct cluster_carried *cc) {
        if (!cc)
                return;
        for (size_t i = 0; i < cc->n_singles; i++) {
                free(cc->singles[i].name);
                free(cc->singles[i].cgroup);
                safe_close(cc->singles[i].fence_fd);
                safe_close(cc->singles[i].fence_pidfd);
        }
        free(cc->singles);
        free(cc);
}

static void carry_single(json_object *o, struct carried_single *cs) {
        const char *name = get_str(o, "name"), *cgroup = get_str(o, "cgroup");
        *cs = (struct carried_single) {
                .name = name ? strdup(name) : NULL, .cgroup = cgroup ? strdup(cgroup) : NULL,
                .margin = get_uint(o, "margin"), .token = get_uint(o, "token"),
                .held = get_int(o, "held", 0), .releasing = get_int(o, "releasing", 0),
                .fence_fd = take_fd(o, "fence_fd"), .fence_pidfd = take_fd(o, "fence_pidfd"),
                .fence_pid = (pid_t) get_int(o, "fence_pid", 0), .pid = (pid_t) get_int(o, "pid", 0),
                /* QA20 M3: a stopped host's singleton stays unwanted (absent: a tend before it) */
                .wanted = get_int(o, "wanted", 1), .letting_go = get_int(o, "letting_go", 0),
        };
}

void reexec_cluster_begin(struct manager *m) {
        json_object *o = NULL, *singles = NULL;
        if (!m->resumed || !json_object_object_get_ex(m->resumed, "cluster", &o))
                return;
        struct cluster_carried *cc = calloc(1, sizeof(*cc));
        /* QA19 L1: every type checked before use (json-c asserts on an array call on another type) */
        size_t n = json_object_object_get_ex(o, "singletons", &singles) && json_object_is_type(singles, json_type_array)
                           ? json_object_array_length(singles) : 0;
        if (cc && n > 0 && !(cc->singles = calloc(n, sizeof(*cc->singles)))) {
                free(cc);
                cc = NULL;
        }
        if (!cc) { /* the fences fire at their deadline: the singletons stop */
                log_error("re-executed: the cluster's state not taken back (out of memory): its singletons stop");
                return;
        }
        cc->lease_id = get_int(o, "lease", 0);
        cc->ttl = get_uint(o, "ttl");
        cc->expiry = get_uint(o, "expiry");
        for (size_t i = 0; i < n; i++) {
                carry_single(json_object_array_get_idx(singles, i), &cc->singles[cc->n_singles]);
                if (cc->singles[cc->n_singles].name)
                        cc->n_singles++;
                else {
                        free(cc->singles[cc->n_singles].cgroup);
                        safe_close(cc->singles[cc->n_singles].fence_fd);
                        safe_close(cc->singles[cc->n_singles].fence_pidfd);
                }
        }
        cluster_carry_in(cc);
}

#else /* !HAVE_STORE_ETCD */

int reexec_cluster_save(struct manager *m, json_object *state, bool cloexec) {
        return 0;
}

void reexec_cluster_begin(struct manager *m) {
}

#endif
