/* SPDX-License-Identifier: MIT */
/*
 * reexec: the new tend's side of daemon-reexec (reexec.h): the previous
 * tend's state read from the memfd it left, each unit put back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        json_object *v = NULL;
        int version = m->resumed && json_object_object_get_ex(m->resumed, "version", &v) ? json_object_get_int(v) : 0;
        if (version < 1 || version > TEND_STATE_VERSION) {
                json_object_put(m->resumed);
                m->resumed = NULL;
                return log_error_errno(-EPROTO, "the previous tend's state is unreadable (format %d, this tend reads 1 to %d)",
                                       version, TEND_STATE_VERSION);
        }
        log_info("re-executed: resuming from the previous tend's state (format %d)", version);
        reexec_cluster_begin(m); /* cluster: the etcd lease and fences, for cluster_new() */
        return 1;
}

static int64_t get_int(json_object *o, const char *key, int64_t def) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : def;
}

static uint64_t get_uint(json_object *o, const char *key, uint64_t def) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_uint64(v) : def;
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
        /* A dead unit holds no pipe (issue 19's fd budget) unless something
         * of it still runs; a format-1 state carried every unit's. */
        if ((s.pos == UNIT_POS_INACTIVE || s.pos == UNIT_POS_FAILED) && logs_stream_n_pipes(data(u)->logs) > 0)
                manager_logs_release(m, u);
        return 0;
}

/* The control connections the previous tend was serving, served on. */
static void resume_control_conns(struct manager *m) {
        json_object *conns = NULL;
        if (json_object_object_get_ex(m->resumed, "control_conns", &conns))
                for (size_t i = 0; i < json_object_array_length(conns); i++)
                        control_server_adopt(m->control, json_object_get_int(json_object_array_get_idx(conns, i)));
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
