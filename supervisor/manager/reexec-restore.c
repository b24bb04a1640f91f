/* SPDX-License-Identifier: MIT */
/*
 * reexec: the new tend's side of daemon-reexec (reexec.h): the previous
 * tend's state read from the memfd it left, each unit put back.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "jobs.h"
#include "log.h"
#include "logs-handover.h"
#include "macro.h"
#include "reexec.h"
#include "reexec-cluster.h"
#include "unit-file.h"
#include "unit-restore.h"

/* ---- reading ---- */

static json_object *state_read(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > 256 * 1024 * 1024)
                return NULL;
        _cleanup_free_ char *text = malloc((size_t) st.st_size + 1);
        if (!text)
                return NULL;
        ssize_t n = pread(fd, text, (size_t) st.st_size, 0);
        if (n != st.st_size)
                return NULL;
        text[n] = '\0';
        return json_tokener_parse(text);
}

/* ---- validation (QA19 L1): every type checked before any access ---- */

/* K_UINT: a count, time or size, never negative (one was read as 0). */
enum kind { K_STRING, K_INT, K_UINT, K_BOOL, K_ARRAY, K_OBJECT, K_FD };

/* A unit entry's keys and their types: a key the table does not name is
 * ignored (a newer tend's, format rule: tend(8) "RE-EXECUTING"). */
static const struct { const char *key; enum kind kind; } unit_keys[] = {
        { "name", K_STRING },           { "pos", K_STRING },           { "result", K_STRING },
        { "want_up", K_BOOL },          { "finished", K_BOOL },        { "watchdog_held", K_BOOL },
        { "main_pid", K_UINT },          { "since_realtime", K_UINT },  { "since_monotonic", K_UINT },
        { "deadline", K_UINT },          { "restarts", K_UINT },        { "restart_step", K_UINT },
        { "starts", K_ARRAY },           { "last_exit_kind", K_INT },   { "last_exit_status", K_INT },
        { "last_exit_core", K_INT },     { "status_text", K_STRING },   { "started_text_size", K_UINT },
        { "started_text_hash", K_UINT }, { "file_text_size", K_UINT },  { "file_text_hash", K_UINT },
        { "failure", K_OBJECT },        { "spawned", K_BOOL },         { "renew", K_BOOL },
        { "old_groups", K_ARRAY },      { "logs", K_OBJECT },          { "notify_fd", K_FD },
};

static bool is_int(json_object *v) {
        return json_object_is_type(v, json_type_int);
}

/* An fd the previous tend handed over: a number above stdio's. */
static bool is_fd(json_object *v) {
        return is_int(v) && json_object_get_int64(v) >= 3 && json_object_get_int64(v) <= INT32_MAX;
}

static bool kind_ok(json_object *v, enum kind k) {
        switch (k) {
        case K_STRING: return json_object_is_type(v, json_type_string);
        case K_INT: return is_int(v);
        case K_UINT: return is_int(v) && json_object_get_int64(v) >= 0; /* above INT64_MAX: INT64_MAX */
        case K_BOOL: return json_object_is_type(v, json_type_boolean) || is_int(v);
        case K_ARRAY: return json_object_is_type(v, json_type_array);
        case K_OBJECT: return json_object_is_type(v, json_type_object);
        case K_FD: return is_fd(v);
        }
        return false;
}

static bool array_of(json_object *a, enum kind k) {
        for (size_t i = 0; i < json_object_array_length(a); i++)
                if (!kind_ok(json_object_array_get_idx(a, i), k))
                        return false;
        return true;
}

/* Whether the unit entry's "logs" is as tend writes it: *why names what is not. */
static bool logs_valid(json_object *l, const char **why) {
        json_object *v = NULL;
        if (json_object_object_get_ex(l, "pipes", &v) && (!json_object_is_type(v, json_type_array) ||
                                                         !array_of(v, K_OBJECT))) {
                *why = "logs.pipes";
                return false;
        }
        for (size_t i = 0; v && i < json_object_array_length(v); i++) {
                json_object *p = json_object_array_get_idx(v, i), *x = NULL;
                if (!json_object_object_get_ex(p, "rfd", &x) || !is_fd(x) ||
                    (json_object_object_get_ex(p, "wfd", &x) && !is_fd(x)) ||
                    (json_object_object_get_ex(p, "in", &x) && !json_object_is_type(x, json_type_string))) {
                        *why = "logs.pipes[].rfd, wfd or in";
                        return false;
                }
        }
        static const char *const ints[] = { "ring_head", "ring_used", "ring_count" };
        for (size_t i = 0; i < ELEMENTSOF(ints); i++)
                if (json_object_object_get_ex(l, ints[i], &v) && !kind_ok(v, K_UINT)) {
                        *why = ints[i];
                        return false;
                }
        if ((json_object_object_get_ex(l, "ring", &v) && !json_object_is_type(v, json_type_string)) ||
            (json_object_object_get_ex(l, "shared", &v) && !kind_ok(v, K_BOOL))) {
                *why = "logs.ring or logs.shared";
                return false;
        }
        return true;
}

/* Whether a unit entry has every key tend reads of the type it reads it
 * as (NULL), or the key that is not (a name, static). */
static const char *unit_entry_invalid(json_object *o) {
        json_object *v = NULL;
        const char *why = NULL;
        if (!json_object_is_type(o, json_type_object))
                return "the entry";
        if (!json_object_object_get_ex(o, "name", &v) || !json_object_is_type(v, json_type_string) ||
            !unit_name_is_valid(json_object_get_string(v), UNIT_NAME_PLAIN | UNIT_NAME_INSTANCE))
                return "name";
        for (size_t i = 0; i < ELEMENTSOF(unit_keys); i++)
                if (json_object_object_get_ex(o, unit_keys[i].key, &v) && !kind_ok(v, unit_keys[i].kind))
                        return unit_keys[i].key;
        if ((json_object_object_get_ex(o, "starts", &v) && !array_of(v, K_UINT)) ||
            (json_object_object_get_ex(o, "old_groups", &v) && !array_of(v, K_UINT)))
                return "starts or old_groups";
        if (json_object_object_get_ex(o, "logs", &v) && !logs_valid(v, &why))
                return why;
        return NULL;
}

/* The fds a refused entry names: kept from the units' processes (they are
 * not closed: the number may be one tend has opened since). */
static void entry_fds_cloexec(json_object *o) {
        json_object *l = NULL, *pipes = NULL, *v = NULL;
        if (!json_object_is_type(o, json_type_object))
                return;
        if (json_object_object_get_ex(o, "notify_fd", &v) && is_fd(v))
                (void) fcntl(json_object_get_int(v), F_SETFD, FD_CLOEXEC);
        if (!json_object_object_get_ex(o, "logs", &l) || !json_object_is_type(l, json_type_object) ||
            !json_object_object_get_ex(l, "pipes", &pipes) || !json_object_is_type(pipes, json_type_array))
                return;
        for (size_t i = 0; i < json_object_array_length(pipes); i++) {
                json_object *p = json_object_array_get_idx(pipes, i);
                static const char *const ends[] = { "rfd", "wfd" };
                for (size_t e = 0; e < ELEMENTSOF(ends); e++)
                        if (json_object_is_type(p, json_type_object) && json_object_object_get_ex(p, ends[e], &v) &&
                            is_fd(v))
                                (void) fcntl(json_object_get_int(v), F_SETFD, FD_CLOEXEC);
        }
}

/* The fds a checked entry names, at most max into fds, each with the file
 * type it must have (its notify socket: S_IFSOCK; its pipes' ends:
 * S_IFIFO); how many. */
static size_t entry_fds(json_object *o, int *fds, mode_t *types, size_t max) {
        json_object *l = NULL, *pipes = NULL, *v = NULL;
        size_t n = 0;
        if (json_object_object_get_ex(o, "notify_fd", &v) && n < max) {
                types[n] = S_IFSOCK;
                fds[n++] = json_object_get_int(v);
        }
        if (!json_object_object_get_ex(o, "logs", &l) || !json_object_object_get_ex(l, "pipes", &pipes))
                return n;
        for (size_t i = 0; i < json_object_array_length(pipes); i++) {
                json_object *p = json_object_array_get_idx(pipes, i);
                static const char *const ends[] = { "rfd", "wfd" };
                for (size_t e = 0; e < ELEMENTSOF(ends); e++)
                        if (json_object_object_get_ex(p, ends[e], &v) && n < max) {
                                types[n] = S_IFIFO;
                                fds[n++] = json_object_get_int(v);
                        }
        }
        return n;
}

/* Whether every fd the entry names is open, of its type, and named by no
 * entry checked before it (seen: a bit per fd below limit): NULL, or what
 * is not. A state naming one fd twice made the second owner close the
 * first's, and tend abort on the double close (QA19B M3). */
static const char *entry_fds_invalid(json_object *o, uint8_t *seen, size_t limit) {
        int fds[64];
        mode_t types[64];
        size_t n = entry_fds(o, fds, types, ELEMENTSOF(fds));
        for (size_t i = 0; i < n; i++) {
                size_t fd = (size_t) fds[i];
                struct stat st;
                if (fd >= limit || fstat(fds[i], &st) < 0)
                        return "an fd that is not open";
                if ((st.st_mode & S_IFMT) != types[i])
                        return types[i] == S_IFSOCK ? "a notify socket that is not a socket" : "a pipe that is not one";
                if (seen[fd / 8] & (1u << (fd % 8)))
                        return "an fd another entry names";
        }
        for (size_t i = 0; i < n; i++)
                seen[(size_t) fds[i] / 8] |= (uint8_t) (1u << ((size_t) fds[i] % 8));
        return NULL;
}

/* Each unit entry checked: one that is not as tend writes it is dropped
 * from the document, said with the key, and its unit starts as at a first
 * start (in cgroup mode, what its cgroup holds is killed first: SPEC §4). */
static void units_validate(json_object *units) {
        struct rlimit rl;
        size_t limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 24) ? (size_t) rl.rlim_cur : 1u << 24;
        _cleanup_free_ uint8_t *seen = calloc(limit / 8 + 1, 1);
        for (size_t i = json_object_array_length(units); i-- > 0;) {
                json_object *o = json_object_array_get_idx(units, i), *n = NULL;
                const char *why = unit_entry_invalid(o);
                if (!why && seen)
                        why = entry_fds_invalid(o, seen, limit);
                if (!why)
                        continue;
                const char *name = json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "name", &n) &&
                                                   json_object_is_type(n, json_type_string)
                                           ? json_object_get_string(n) : "?";
                log_error("re-executed: the previous tend's state has a bad \"%s\" in units[%zu] (%.64s): that unit is "
                          "not resumed, it starts as at a first start", why, i, name);
                entry_fds_cloexec(o);
                (void) json_object_array_del_idx(units, i, 1);
        }
}

/* An fd of the control server's: a socket (fstat), or -1. */
static int socket_fd(json_object *v) {
        struct stat st;
        if (!is_fd(v))
                return -1;
        int fd = json_object_get_int(v);
        return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) ? fd : -1;
}

/* The control socket and connections: "control_fd" that is not a socket is
 * dropped (tend makes its socket anew, as at a first start; its clients
 * then see their connection refused until it does); connections that are
 * not sockets are dropped. */
static void control_validate(json_object *state) {
        json_object *v = NULL;
        if (json_object_object_get_ex(state, "control_fd", &v) && !(is_int(v) && json_object_get_int64(v) == 0) &&
            socket_fd(v) < 0) {
                log_error("re-executed: the previous tend's state names a control socket that is not one (%.32s): "
                          "a new one is made", json_object_to_json_string(v));
                json_object_object_del(state, "control_fd");
        }
        static const char *const lists[] = { "control_conns", "reexec_waiting" };
        for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
                if (!json_object_object_get_ex(state, lists[l], &v))
                        continue;
                for (size_t i = json_object_array_length(v); i-- > 0;)
                        if (socket_fd(json_object_array_get_idx(v, i)) < 0) {
                                log_error("re-executed: the previous tend's state names a control connection that is "
                                          "not a socket (%s[%zu]): dropped", lists[l], i);
                                (void) json_object_array_del_idx(v, i, 1);
                        }
        }
}

/* The document's shape (an object, its version, its lists): NULL when it is
 * as tend writes it, else what is not. */
static const char *state_invalid(json_object *state, int *ret_version) {
        json_object *v = NULL;
        *ret_version = 0;
        if (!json_object_is_type(state, json_type_object))
                return "not a JSON object";
        if (!json_object_object_get_ex(state, "version", &v) || !is_int(v))
                return "no \"version\" number";
        int64_t version = json_object_get_int64(v);
        *ret_version = version < 0 || version > INT32_MAX ? -1 : (int) version;
        if (version < 1 || version > TEND_STATE_VERSION)
                return "a format this tend does not read";
        static const struct { const char *key, *why; } lists[] = {
                { "units", "\"units\" is not an array" },
                { "control_conns", "\"control_conns\" is not an array" },
                { "reexec_waiting", "\"reexec_waiting\" is not an array" },
        };
        for (size_t i = 0; i < ELEMENTSOF(lists); i++)
                if (json_object_object_get_ex(state, lists[i].key, &v) && !json_object_is_type(v, json_type_array))
                        return lists[i].why;
        /* tend always writes it: without it, tend cannot tell its units'
         * processes (read as "no units", every unit started anew beside them) */
        if (!json_object_object_get_ex(state, "units", NULL))
                return "no \"units\"";
        return NULL;
}

int manager_resume_begin(struct manager *m) {
        const char *e = getenv("TEND_REEXEC_STATE_FD");
        if (!e)
                return 0;
        char *end;
        long fd = strtol(e, &end, 10);
        unsetenv("TEND_REEXEC_STATE_FD"); /* no unit inherits it */
        if (*end || fd < 3 || fd > INT32_MAX)
                return log_error_errno(-EBADF, "$TEND_REEXEC_STATE_FD=%s is not an fd", e);
        m->resumed = state_read((int) fd);
        close((int) fd);
        int version = 0;
        const char *why = m->resumed ? state_invalid(m->resumed, &version) : "not JSON, or not readable";
        if (why) {
                json_object_put(m->resumed);
                m->resumed = NULL;
                return log_error_errno(-EPROTO, "the previous tend's state is unreadable (%s; format %d, this tend "
                                       "reads 1 to %d): exiting, so that the service manager restarts tend",
                                       why, version, TEND_STATE_VERSION);
        }
        json_object *units = NULL;
        if (json_object_object_get_ex(m->resumed, "units", &units))
                units_validate(units);
        control_validate(m->resumed);
        log_info("re-executed: resuming from the previous tend's state (format %d)", version);
        reexec_cluster_begin(m); /* cluster: the etcd lease and fences, for cluster_new() */
        return 1;
}

/* A number (or boolean) of o's, def when absent or of another type. */
static int64_t get_int(json_object *o, const char *key, int64_t def) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && kind_ok(v, K_BOOL) ? json_object_get_int64(v) : def;
}

static uint64_t get_uint(json_object *o, const char *key, uint64_t def) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && kind_ok(v, K_BOOL) ? json_object_get_uint64(v) : def;
}

int manager_resume_control_fd(const struct manager *m) {
        return m->resumed ? (int) get_int(m->resumed, "control_fd", 0) : 0;
}

/* hex text → bytes (*ret owned, NULL and 0 for ""). */
static int unhex(json_object *o, uint8_t **ret, size_t *ret_n) {
        const char *s = o ? json_object_get_string(o) : "";
        size_t n = strlen(s) / 2;
        *ret = NULL;
        *ret_n = 0;
        if (n == 0)
                return 0;
        uint8_t *b = malloc(n);
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned x;
                if (sscanf(s + 2 * i, "%2x", &x) != 1) {
                        free(b);
                        return -EINVAL;
                }
                b[i] = (uint8_t) x;
        }
        *ret = b;
        *ret_n = n;
        return 0;
}

/* ---- one function per kind of thing carried ---- */

/* A position or result by its name (unit_pos_to_string(), unit_result_to_string()); def if unknown. */
static int get_named(json_object *o, const char *key, const char *(*name_of)(int), int max, int def) {
        json_object *v;
        const char *s = json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
        for (int i = 0; s && i < max; i++)
                if (name_of(i) && streq(name_of(i), s))
                        return i;
        return def;
}

static const char *pos_name(int p) {
        return unit_pos_to_string((enum unit_pos) p);
}

static const char *result_name(int r) {
        return unit_result_to_string((enum unit_result) r);
}

static void saved_of(json_object *o, struct unit_saved *s) {
        json_object *starts = NULL, *text = NULL;
        *s = (struct unit_saved) {
                .pos = (enum unit_pos) get_named(o, "pos", pos_name, _UNIT_POS_MAX, -1),
                .result = (enum unit_result) get_named(o, "result", result_name, _UNIT_RESULT_MAX,
                                                       UNIT_RESULT_RESOURCES),
                .want_up = get_int(o, "want_up", 0),
                .finished = get_int(o, "finished", 0),
                .watchdog_held = get_int(o, "watchdog_held", 0),
                .main_pid = (pid_t) get_int(o, "main_pid", 0),
                .since_realtime = get_uint(o, "since_realtime", 0),
                .since_monotonic = get_uint(o, "since_monotonic", 0),
                .deadline = get_uint(o, "deadline", USEC_INFINITY),
                .restarts = get_uint(o, "restarts", 0),
                .restart_step = (unsigned) get_int(o, "restart_step", 0),
                .has_last_exit = json_object_object_get_ex(o, "last_exit_kind", NULL),
                .last_exit = { .kind = (int32_t) get_int(o, "last_exit_kind", 0),
                               .status = (int32_t) get_int(o, "last_exit_status", 0),
                               .core_dumped = (int32_t) get_int(o, "last_exit_core", 0) },
        };
        if (json_object_object_get_ex(o, "status_text", &text))
                s->status_text = json_object_get_string(text);
        if (json_object_object_get_ex(o, "starts", &starts))
                for (size_t i = 0; i < json_object_array_length(starts) && s->n_starts < UNIT_SAVED_STARTS_MAX; i++)
                        s->starts[s->n_starts++] = json_object_get_uint64(json_object_array_get_idx(starts, i));
}

/* The pipes' read ends and unread bytes of l into h (in[] owned by the
 * caller). A format-1 document names each pipe's write end too ("wfd"): it
 * is closed here (issue 19's fd budget: tend holds none between spawns). */
static int handover_pipes_of(json_object *l, struct logs_handover *h, uint8_t *in[2]) {
        json_object *pipes = NULL;
        if (!json_object_object_get_ex(l, "pipes", &pipes))
                return 0;
        h->n_pipes = (unsigned) MIN(json_object_array_length(pipes), 2u);
        h->shared = get_int(l, "shared", 0);
        int k = 0;
        for (unsigned i = 0; i < h->n_pipes; i++) {
                json_object *p = json_object_array_get_idx(pipes, i), *t = NULL;
                h->pipe[i].rfd = (int) get_int(p, "rfd", -1);
                safe_close((int) get_int(p, "wfd", -1));
                (void) json_object_object_get_ex(p, "in", &t);
                if (k >= 0)
                        k = unhex(t, &in[i], &h->pipe[i].in_len);
                h->pipe[i].in = in[i];
        }
        return k;
}

/* The unit's log pipes (the read ends that existed) back into its stream,
 * and its ring (u NULL: a unit gone from DIR); the fds closed when they do
 * not fit. */
static int resume_unit_logs(struct unit *u, json_object *o) {
        json_object *l = NULL, *ring = NULL;
        if (!json_object_object_get_ex(o, "logs", &l))
                return 0;
        struct logs_handover h = { .n_pipes = 0 };
        uint8_t *in[2] = { NULL, NULL }, *ringbuf = NULL;
        int k = handover_pipes_of(l, &h, in);
        if (k >= 0 && json_object_object_get_ex(l, "ring", &ring) && unhex(ring, &ringbuf, &h.ring_cap) >= 0) {
                h.ring = ringbuf;
                h.ring_head = get_uint(l, "ring_head", 0);
                h.ring_used = get_uint(l, "ring_used", 0);
                h.ring_count = get_uint(l, "ring_count", 0);
        }
        if (k >= 0)
                k = u && data(u)->logs ? logs_stream_handover_put(data(u)->logs, &h) : -ESTALE;
        if (k < 0) {
                if (u)
                        log_error_errno(k, "%s: its log pipes cannot be taken back (%m): its output is lost from now on", u->name);
                for (unsigned i = 0; i < h.n_pipes; i++)
                        safe_close(h.pipe[i].rfd);
        }
        free(in[0]);
        free(in[1]);
        free(ringbuf);
        return k;
}

/* The unit's main process, tracked again: it is still tend's child (running,
 * or a zombie if it exited during the exec), so its pid names it. */
static int resume_unit_main(struct manager *m, struct unit *u, pid_t pid, struct exit_process **ret) {
        *ret = NULL;
        if (pid <= 0)
                return 0;
        int k = exit_routes_reserve(&m->routes, 1);
        if (k >= 0)
                k = exit_reaper_track(m->reaper, pid, ret);
        if (k < 0)
                return log_error_errno(k, "%s: its main process %d cannot be tracked again: %m", u->name, (int) pid);
        unit_group_set_leader(data(u)->group, pid);
        return 0;
}

/* The unit's notify socket (u NULL: a unit gone from DIR: closed). */
static void resume_unit_notify(struct manager *m, struct unit *u, json_object *o) {
        int fd = (int) get_int(o, "notify_fd", -1);
        if (fd < 0)
                return;
        int k = u ? manager_notify_adopt(m, u, fd) : -ESTALE;
        if (k < 0) {
                if (u)
                        log_error_errno(k, "%s: its notify socket cannot be taken back: %m", u->name);
                safe_close(fd);
        }
}

/* Its last failed command ("failure", issue 18), kept as when it failed:
 * absent in an older state (none shown until a command fails again). */
static void resume_unit_failure(struct manager *m, struct unit *u, json_object *o) {
        static const char *const keys[] = { "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop", "Exec" };
        json_object *j = NULL, *v = NULL;
        if (!json_object_object_get_ex(o, "failure", &j))
                return;
        const char *key = json_object_object_get_ex(j, "key", &v) ? json_object_get_string(v) : NULL;
        const char *path = json_object_object_get_ex(j, "path", &v) ? json_object_get_string(v) : "";
        for (size_t i = 0; key && i < ELEMENTSOF(keys); i++)
                if (streq(key, keys[i])) {
                        struct unit_failure f = {
                                .key = keys[i], /* static, as unit_note_failure() gives it */
                                .index = (unsigned) get_int(j, "index", 0),
                                .n = (unsigned) get_int(j, "n", 0),
                                .pid = (pid_t) get_int(j, "pid", 0),
                                .exec_errno = (int) get_int(j, "exec_errno", 0),
                                .reason = { .kind = (int32_t) get_int(j, "kind", 0),
                                            .status = (int32_t) get_int(j, "status", 0),
                                            .core_dumped = (int32_t) get_int(j, "core", 0) },
                                .realtime = get_uint(j, "realtime", 0),
                                .path = path ? path : "",
                        };
                        manager_command_failed(m, u, &f);
                        return;
                }
}

/* "spawned" (QA19 H1): whether the previous tend spawned into the unit's
 * cgroup, so that what is left in it is this lineage's (left alone at the
 * next start), not a previous tend's (killed). A state without the key (a
 * format-2 tend before it) is judged by the unit's history: a unit the old
 * tend ever ran (not inactive, or a last exit, a restart, a start counted)
 * had its processes spawned by it; one with no history never ran under it,
 * and what its cgroup holds came from before (killed, as before the key). */
static bool resume_unit_spawned(json_object *o, const struct unit_saved *s) {
        json_object *v = NULL;
        if (json_object_object_get_ex(o, "spawned", &v) && json_object_is_type(v, json_type_boolean))
                return json_object_get_boolean(v);
        return s->pos != UNIT_POS_INACTIVE || s->has_last_exit || s->restarts > 0 || s->n_starts > 0;
}

/* The unit's cgroup as the previous tend knew it ("spawned", "renew"; a
 * state without "renew" leaves the guess of a cgroup found at load), and
 * without cgroups its earlier process groups ("old_groups"). */
static void resume_unit_group(struct unit *u, json_object *o, const struct unit_saved *s) {
        json_object *v = NULL;
        int renew = json_object_object_get_ex(o, "renew", &v) && json_object_is_type(v, json_type_boolean)
                            ? json_object_get_boolean(v) : -1;
        unit_group_resume(data(u)->group, resume_unit_spawned(o, s), renew);
        json_object *old = NULL;
        if (json_object_object_get_ex(o, "old_groups", &old) && json_object_is_type(old, json_type_array))
                for (size_t i = 0; i < json_object_array_length(old) && i < UNIT_GROUP_MAX_OLD + 1; i++) {
                        json_object *p = json_object_array_get_idx(old, i);
                        if (json_object_is_type(p, json_type_int))
                                unit_group_keep_old(data(u)->group, (pid_t) json_object_get_int(p));
                }
}

static int resume_unit(struct manager *m, struct unit *u, json_object *o) {
        struct unit_saved s;
        saved_of(o, &s);
        (void) resume_unit_logs(u, o);
        resume_unit_notify(m, u, o);
        data(u)->started_text_size = (size_t) get_uint(o, "started_text_size", 0);
        data(u)->started_text_hash = get_uint(o, "started_text_hash", 0);
        struct exit_process *main = NULL;
        int k = resume_unit_main(m, u, s.main_pid, &main);
        if (k < 0 && s.pos == UNIT_POS_RUNNING)
                s = (struct unit_saved) { .pos = UNIT_POS_FAILED, .result = UNIT_RESULT_RESOURCES,
                                          .restarts = s.restarts, .deadline = USEC_INFINITY };
        sf_resolution *r = s.pos == UNIT_POS_BACKOFF ? manager_join_own(m, u) : NULL;
        k = unit_restore(u, &s, main, r);
        exit_process_unref(main);
        if (k < 0)
                return log_error_errno(k, "%s: cannot be put back as it was: %m", u->name);
        data(u)->resumed = true;
        resume_unit_group(u, o, &s);
        jobs_resumed(m->jobs, u); /* QA19 H2: OnFailure= not started again */
        resume_unit_failure(m, u, o);
        /* A dead unit holds no pipe (issue 19's fd budget) unless something
         * of it still runs; a format-1 state carried every unit's. */
        if ((s.pos == UNIT_POS_INACTIVE || s.pos == UNIT_POS_FAILED) && logs_stream_n_pipes(data(u)->logs) > 0)
                manager_logs_release(m, u);
        return 0;
}

static bool fd_listed(json_object *a, int fd) {
        for (size_t i = 0; a && i < json_object_array_length(a); i++)
                if (json_object_get_int(json_object_array_get_idx(a, i)) == fd)
                        return true;
        return false;
}

/* The control connections the previous tend was serving, served on; those
 * waiting for daemon-reexec's answer ("reexec_waiting", QA L1) are answered
 * now: the new tend has taken over, its units resumed. */
static void resume_control_conns(struct manager *m) {
        json_object *conns = NULL, *waiting = NULL;
        (void) json_object_object_get_ex(m->resumed, "reexec_waiting", &waiting);
        if (json_object_object_get_ex(m->resumed, "control_conns", &conns))
                for (size_t i = 0; i < json_object_array_length(conns); i++) {
                        int fd = json_object_get_int(json_object_array_get_idx(conns, i));
                        if (fd_listed(waiting, fd))
                                control_server_adopt_answered(m->control, fd);
                        else
                                control_server_adopt(m->control, fd);
                }
}

/* A unit of the state not in DIR now. The old tend refuses a re-exec while
 * one that runs would not load (reexec.c units_resumable()): only a file
 * changed during the exec itself gets here with something running. */
static void resume_dropped(struct manager *m, json_object *o, const char *name) {
        struct unit_saved s;
        saved_of(o, &s);
        if (s.pos == UNIT_POS_INACTIVE || s.pos == UNIT_POS_FAILED)
                log_info("%s: in the previous tend's state but not in %s any more: dropped", name, m->opts->config_dir);
        else
                log_warning("%s: in the previous tend's state but not in %s any more: its processes "
                            "are left to run unsupervised", name, m->opts->config_dir);
}

/* The unit the state names: DIR's, or an instance loaded from its template
 * (`tendctl start NAME@INST`: no file of its own in DIR, so not loaded with
 * DIR; daemon-reload keeps it, and so does the re-exec). NULL if neither. */
static struct unit *resume_find(struct manager *m, const char *name) {
        struct unit *u = name ? manager_find_unit(m, name) : NULL;
        if (u || !name || !unit_name_is_valid(name, UNIT_NAME_INSTANCE))
                return u;
        if (manager_jobs_ops.load(m, name) < 0)
                return NULL;
        return manager_find_unit(m, name);
}

/* ---- the load's messages (QA L2) ---- */

/* The messages logged while a re-executed tend loads DIR, held until the
 * units are known: a file whose text is the one the previous tend loaded had
 * its messages logged by it already. With --store, the cluster's threads
 * (started before the load) may log meanwhile: theirs are held too, under
 * the lock, and logged after it (none names a unit file). */
static struct {
        struct { int level; char *msg; } *v;
        size_t n, cap;
        unsigned lost;
        bool holding; /* under held_lock: once false, a late message goes out as it comes */
} held;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

static void hold_message_locked(int level, const char *msg) {
        if (held.n == held.cap) {
                size_t cap = held.cap ? 2 * held.cap : 64;
                void *v = reallocarray(held.v, cap, sizeof *held.v);
                if (!v) {
                        held.lost++;
                        return;
                }
                held.v = v;
                held.cap = cap;
        }
        char *copy = strdup(msg);
        if (!copy) {
                held.lost++;
                return;
        }
        held.v[held.n].level = level;
        held.v[held.n++].msg = copy;
}

static void hold_message(int level, const char *msg, void *userdata) {
        pthread_mutex_lock(&held_lock);
        if (held.holding)
                hold_message_locked(level, msg);
        else
                log_internal(level, 0, "%s", msg); /* the sink is gone: written out */
        pthread_mutex_unlock(&held_lock);
}

/* The previous tend's entry of unit name in the state, NULL if none. */
static json_object *state_unit(const struct manager *m, const char *name) {
        json_object *units = NULL, *n = NULL;
        if (!json_object_object_get_ex(m->resumed, "units", &units))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(units); i++) {
                json_object *o = json_object_array_get_idx(units, i);
                if (json_object_object_get_ex(o, "name", &n) && streq(json_object_get_string(n), name))
                        return o;
        }
        return NULL;
}

/* Whether u's file (with its drop-ins) is the text the previous tend loaded. */
static bool text_unchanged(const struct manager *m, const struct unit *u) {
        json_object *o = u->file ? state_unit(m, u->name) : NULL;
        return o && json_object_object_get_ex(o, "file_text_hash", NULL) &&
               get_uint(o, "file_text_size", 0) == u->file->text_size &&
               get_uint(o, "file_text_hash", 0) == u->file->text_hash;
}

/* The unit msg is about: "FILE[:LINE]: …" of its file or a drop-in
 * (DIR/NAME.service, DIR/NAME.service.d/X.conf), or "NAME.service: …". */
static struct unit *message_unit(struct manager *m, const char *msg, const char **ret_path, size_t *ret_len) {
        char name[256];
        size_t len = strcspn(msg, ":");
        *ret_path = msg;
        *ret_len = msg[0] == '/' ? len : 0;
        if (msg[0] != '/')
                return log_message_unit(msg, name, sizeof name) > 0 ? manager_find_unit(m, name) : NULL;
        const char *base = memrchr(msg, '/', len) + 1, *dir = base - 1;
        size_t n = len - (size_t) (base - msg);
        while (dir > msg && dir[-1] != '/')
                dir--;
        if (base - dir > 2 && (size_t) (base - 1 - dir) < sizeof name && strncmp(base - 3, ".d/", 3) == 0 &&
            n > 5 && strncmp(base + n - 5, ".conf", 5) == 0)
                snprintf(name, sizeof name, "%.*s", (int) (base - 3 - dir), dir); /* a drop-in: its unit */
        else if (n < sizeof name)
                snprintf(name, sizeof name, "%.*s", (int) n, base);
        else
                return NULL;
        return manager_find_unit(m, name);
}

static bool path_is(const char *path, size_t len, const char *s) {
        return s && strlen(s) == len && strncmp(path, s, len) == 0;
}

/* Whether msg was logged by the previous tend: about a unit whose text is
 * unchanged (its own file's, or its drop-ins', or by its name). */
static bool message_repeated(struct manager *m, const char *msg) {
        const char *path;
        size_t len;
        struct unit *u = message_unit(m, msg, &path, &len);
        if (!u || !text_unchanged(m, u))
                return false;
        if (len == 0)
                return true;
        bool ours = path_is(path, len, u->file->path);
        for (char **d = u->file->dropins; !ours && d && *d; d++)
                ours = path_is(path, len, *d);
        return ours;
}

int manager_resume_load_units(struct manager *m) {
        held.holding = true;
        log_set_sink(hold_message, NULL);
        int k = manager_load_units(m);
        log_set_sink(NULL, NULL);
        pthread_mutex_lock(&held_lock); /* a thread's message under way is in, a later one goes out */
        held.holding = false;
        pthread_mutex_unlock(&held_lock);
        size_t dropped = 0;
        for (size_t i = 0; i < held.n; i++) {
                if (message_repeated(m, held.v[i].msg))
                        dropped++;
                else
                        log_internal(held.v[i].level, 0, "%s", held.v[i].msg);
                free(held.v[i].msg);
        }
        if (held.lost > 0)
                log_warning("re-executed: %u messages of loading %s lost (out of memory)", held.lost, m->opts->config_dir);
        if (dropped > 0)
                log_info("re-executed: %zu messages about unit files unchanged since the previous tend loaded them "
                         "not repeated", dropped);
        free(held.v);
        held.v = NULL;
        held.n = held.cap = held.lost = 0;
        return k;
}

size_t manager_resume_units(struct manager *m) {
        json_object *units = NULL;
        size_t n = 0;
        if (!m->resumed)
                return 0;
        if (json_object_object_get_ex(m->resumed, "units", &units))
                for (size_t i = 0; i < json_object_array_length(units); i++) {
                        json_object *o = json_object_array_get_idx(units, i), *name = NULL;
                        (void) json_object_object_get_ex(o, "name", &name);
                        struct unit *u = resume_find(m, json_object_get_string(name));
                        if (!u) {
                                (void) resume_unit_logs(NULL, o);
                                resume_unit_notify(m, NULL, o);
                                resume_dropped(m, o, json_object_get_string(name));
                        } else if (resume_unit(m, u, o) >= 0)
                                n++;
                }
        resume_control_conns(m);
        json_object_put(m->resumed);
        m->resumed = NULL;
        log_info("re-executed: %zu units resumed", n);
        return n;
}
