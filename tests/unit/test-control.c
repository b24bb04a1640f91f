/* SPDX-License-Identifier: MIT */
/*
 * The control socket server (SPEC §5, docs/control-protocol.md) on real
 * sockets, a real store, a real single-flight table and a fake manager
 * (struct control_ops recording its calls): path rules, directory and socket
 * modes, stale and live sockets, status/list built from store records,
 * blocking and shared starts, shares released by clients that leave,
 * blocking stops, bad requests, the client limit, peer authorisation (root:
 * children that setuid() to nobody), watch (snapshot, marker, live events,
 * lag), logs (ring and follow), a client that reads nothing, and tendctl
 * itself run against the server. Every wait has a deadline whose failure
 * message names the likely cause; every test checks that no fd leaked and
 * leaves no child behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "control-proto.h"
#include "control.h"
#include "log.h"
#include "logs.h"
#include "singleflight.h"
#include "store.h"
#include "testutil.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define NOBODY 65534
#define TEST_GROUP 4242
#define WAIT_MS 5000

typedef struct json_object json;

/* ------------------------------------------------------------------------ */
/* Small helpers: fd count, captured log                                     */
/* ------------------------------------------------------------------------ */


static char logged[65536];
static size_t logged_len;

static void capture_log(int level, const char *msg, void *userdata) {
        int n = snprintf(logged + logged_len, sizeof logged - logged_len, "%s\n", msg);
        if (n > 0 && logged_len + (size_t) n < sizeof logged)
                logged_len += (size_t) n;
}

/* ------------------------------------------------------------------------ */
/* The fake manager: struct control_ops over a real single-flight table       */
/* ------------------------------------------------------------------------ */

#define MAX_FLIGHTS 8

struct fake {
        sf_table *table;
        struct {
                char unit[256];
                sf_resolution *r;
        } flights[MAX_FLIGHTS];
        unsigned n_start, n_restart, n_stop, n_kill, n_reload, n_reset, n_daemon_reload, n_shutdown;
        char last_unit[256];
        int last_sig;
        bool last_main, reset_all;
        int kill_error, reload_error;
        bool reload_bad_file; /* daemon-reload: one file does not load */
        logs_stream *stream; /* web.service's */
        bool up[2];          /* known_units[i]'s last record shows it up (put_record) */
        /* stop of db.service: web.service goes down with it, reported from
         * inside ops->stop (as a Requires= dependent does in the manager). */
        bool db_stop_takes_web;
        /* reload: reported ended from inside ops->reload (a command that
         * cannot be spawned), with this reason ("" for success); NULL: later */
        const char *reload_reports;
        /* daemon-reexec: its answer, and whether it abandons from inside */
        unsigned n_reexec;
        int reexec_error;
        bool reexec_abandons;
        struct control_server *server;
        /* cluster: "hosts" kept on a ticket (answered by the test), others at once */
        unsigned n_cluster;
        struct control_ticket *ticket;
};

static const char *const known_units[] = { "web.service", "db.service" };

static int known_index(const char *unit) {
        for (size_t i = 0; i < ELEMENTSOF(known_units); i++)
                if (streq(known_units[i], unit))
                        return (int) i;
        return -1;
}

/* The fake's flight outcome (the manager's is struct unit_outcome): the
 * server sees it only through fake_describe_outcome. */
struct fake_outcome {
        bool ok;
        pid_t pid;
        const char *result;
        const char *reason;
};

static int fake_outcome_copy(const void *outcome, void **ret_copy, void *userdata) {
        struct fake_outcome *c = malloc(sizeof *c);
        if (!c)
                return -ENOMEM;
        *c = *(const struct fake_outcome *) outcome;
        *ret_copy = c;
        return 0;
}

static void fake_outcome_free(void *outcome, void *userdata) {
        free(outcome);
}

static const sf_outcome_ops fake_outcome_ops = { .copy = fake_outcome_copy, .free = fake_outcome_free };

static int fake_resolve(void *userdata, const char *name, char ret[static 256]) {
        char n[256];
        snprintf(n, sizeof n, "%s", name);
        size_t len = strlen(n);
        if (len > 8 && streq(n + len - 8, ".service"))
                n[len - 8] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(known_units); i++)
                if (strncmp(known_units[i], n, strlen(n)) == 0 && streq(known_units[i] + strlen(n), ".service")) {
                        snprintf(ret, 256, "%s", known_units[i]);
                        return 0;
                }
        return -ENOENT;
}

static int fake_start(void *userdata, const char *unit, bool restart, sf_waiter **ret) {
        struct fake *f = userdata;
        sf_resolution *r = NULL;
        int k = sf_table_join(f->table, unit, ret, &r);
        if (k < 0)
                return k;
        if (r) {
                for (size_t i = 0; i < MAX_FLIGHTS; i++)
                        if (!f->flights[i].r) {
                                snprintf(f->flights[i].unit, sizeof f->flights[i].unit, "%s", unit);
                                f->flights[i].r = r;
                                break;
                        }
        }
        restart ? f->n_restart++ : f->n_start++;
        return 0;
}

static void fake_describe_outcome(void *userdata, void *outcome, struct control_outcome *ret) {
        const struct fake_outcome *o = outcome;
        *ret = (struct control_outcome) { .ok = o->ok, .main_pid = o->pid, .result = o->result,
                                          .result_failed = !o->result || !streq(o->result, "success") };
        snprintf(ret->reason, sizeof ret->reason, "%s", o->reason ? o->reason : "");
        fake_outcome_free(outcome, NULL);
}

/* As the manager: 1 when the unit's last record shows it down (or it has none). */
static int fake_stop(void *userdata, const char *unit) {
        struct fake *f = userdata;
        f->n_stop++;
        snprintf(f->last_unit, sizeof f->last_unit, "%s", unit);
        if (f->db_stop_takes_web && streq(unit, "db.service") && f->up[0]) {
                f->up[0] = false;
                control_server_unit_stopped(f->server, "web.service");
        }
        int i = known_index(unit);
        return i >= 0 && f->up[i] ? 0 : 1;
}

static int fake_reset_failed(void *userdata, const char *unit) {
        struct fake *f = userdata;
        f->n_reset++;
        f->reset_all = !unit;
        snprintf(f->last_unit, sizeof f->last_unit, "%s", unit ? unit : "");
        return 0;
}

static int fake_kill(void *userdata, const char *unit, int sig, bool main_only) {
        struct fake *f = userdata;
        f->n_kill++;
        f->last_sig = sig;
        f->last_main = main_only;
        snprintf(f->last_unit, sizeof f->last_unit, "%s", unit);
        return f->kill_error;
}

static int fake_reload(void *userdata, const char *unit) {
        struct fake *f = userdata;
        f->n_reload++;
        if (f->reload_error == 0 && f->reload_reports)
                control_server_unit_reloaded(f->server, unit, f->reload_reports[0] ? f->reload_reports : NULL);
        return f->reload_error;
}

static int fake_daemon_reexec(void *userdata, char *why, size_t size) {
        struct fake *f = userdata;
        f->n_reexec++;
        if (f->reexec_error < 0)
                snprintf(why, size, "%s", "refused at once");
        else if (f->reexec_abandons)
                control_server_reexec_abandoned(f->server, "abandoned from inside");
        return f->reexec_error;
}

static logs_stream *fake_logs(void *userdata, const char *unit) {
        struct fake *f = userdata;
        return streq(unit, "web.service") ? f->stream : NULL;
}

static int fake_daemon_reload(void *userdata, struct json_object *report) {
        struct fake *f = userdata;
        f->n_daemon_reload++;
        if (!f->reload_bad_file)
                return 0;
        json *added = json_object_new_array(), *failed = json_object_new_array(), *e = json_object_new_object();
        json_object_array_add(added, json_object_new_string("new.service"));
        json_object_object_add(e, "name", json_object_new_string("bad.service"));
        json_object_object_add(e, "message", json_object_new_string("/d/bad.service:3: Restart=: invalid value"));
        json_object_array_add(failed, e);
        /* QA19 L3: a file no unit was loaded from */
        e = json_object_new_object();
        json_object_object_add(e, "name", json_object_new_string("never.service"));
        json_object_object_add(e, "message", json_object_new_string("/d/never.service:1: syntax error"));
        json_object_object_add(e, "loaded", json_object_new_boolean(false));
        json_object_array_add(failed, e);
        json_object_object_add(report, "added", added);
        json_object_object_add(report, "failed", failed);
        return 0;
}

static int fake_shutdown(void *userdata) {
        ((struct fake *) userdata)->n_shutdown++;
        return 0;
}

static int fake_waiters(void *userdata, const char *unit) {
        return sf_table_get_waiters(((struct fake *) userdata)->table, unit);
}

/* ctl: show's properties of a known unit (resolve said it exists). */
static int fake_describe(void *userdata, const char *unit, json *props) {
        if (control_add_string(props, "Id", unit) < 0 || control_add_string(props, "ActiveState", "active") < 0 ||
            control_add_string(props, "SubState", "running") < 0 || control_add_string(props, "TendState", "running") < 0 ||
            control_add_int64(props, "MainPID", 1234) < 0)
                return -ENOMEM;
        return 0;
}

/* etcd: the cluster view: one item; "hosts" answered later through the ticket. */
static int fake_cluster(void *userdata, const char *view, const char *unit, json *items,
                        struct control_ticket *ticket) {
        struct fake *f = userdata;
        json *it = json_object_new_object();
        f->n_cluster++;
        if (!it || control_add_string(it, "host", "h1") < 0 || json_object_array_add(items, it) < 0)
                return -ENOMEM;
        if (!streq(view, "hosts") || !ticket)
                return 0;
        f->ticket = control_ticket_ref(ticket);
        return CONTROL_ANSWER_LATER;
}

static const struct control_ops fake_ops = {
        .resolve = fake_resolve,
        .start = fake_start,
        .describe_outcome = fake_describe_outcome,
        .stop = fake_stop,
        .reset_failed = fake_reset_failed,
        .kill = fake_kill,
        .reload = fake_reload,
        .logs = fake_logs,
        .daemon_reload = fake_daemon_reload,
        .shutdown = fake_shutdown,
        .waiters = fake_waiters,
        .describe = fake_describe,
        .daemon_reexec = fake_daemon_reexec,
        .cluster = fake_cluster,
};

static sf_resolution **fake_flight(struct fake *f, const char *unit) {
        for (size_t i = 0; i < MAX_FLIGHTS; i++)
                if (f->flights[i].r && streq(f->flights[i].unit, unit))
                        return &f->flights[i].r;
        fail_msg("no flight for %s: ops->start was not called as leader", unit);
        return NULL;
}

/* The work's answer, as the unit's state machine would publish it; reason
 * NULL: none. */
static void fake_answer_why(struct fake *f, const char *unit, bool ok, pid_t pid, const char *result,
                            const char *reason) {
        sf_resolution **r = fake_flight(f, unit);
        struct fake_outcome *o = malloc(sizeof *o);
        assert_non_null(o);
        *o = (struct fake_outcome) { .ok = ok, .pid = pid, .result = result, .reason = reason };
        assert_int_equal(sf_resolution_answer_take(*r, o), 0);
        *r = sf_resolution_free(*r);
}

static void fake_answer(struct fake *f, const char *unit, bool ok, pid_t pid, const char *result) {
        fake_answer_why(f, unit, ok, pid, result, NULL);
}

/* ------------------------------------------------------------------------ */
/* Fixture: an sd-event loop, a store, the table, a server in a temp dir      */
/* ------------------------------------------------------------------------ */

struct fx {
        sd_event *e;
        struct store *store;
        struct fake fake;
        struct control_server *server;
        char dir[64];
        char path[128];
        int fds;
        pid_t kids[4];
        int kid_fds[4];
};

static struct fx *fx_setup(const struct store_options *so, const struct control_options *co_in) {
        struct fx *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->fds = count_fds();
        logged_len = 0;
        logged[0] = '\0';
        log_set_sink(capture_log, NULL);
        log_set_max_level(LOG_DEBUG);
        assert_int_equal(sd_event_new(&f->e), 0);
        assert_int_equal(store_new(so, &f->store), 0);
        assert_int_equal(sf_table_new(&fake_outcome_ops, NULL, &f->fake.table), 0);
        snprintf(f->dir, sizeof f->dir, "/tmp/test-control-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->path, sizeof f->path, "%s/run/control", f->dir);
        struct control_options co = co_in ? *co_in : (struct control_options) { .control_group = (gid_t) -1 };
        co.path = f->path;
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &f->server), 0);
        f->fake.server = f->server;
        for (size_t i = 0; i < ELEMENTSOF(f->kids); i++)
                f->kid_fds[i] = -1;
        return f;
}

static int setup(void **state) {
        *state = fx_setup(NULL, NULL);
        return 0;
}

static void rm_rf(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d))) {
                char p[PATH_MAX];
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                if (de->d_type == DT_DIR)
                        rm_rf(p);
                else
                        (void) unlink(p);
        }
        closedir(d);
        (void) rmdir(dir);
}

static int teardown(void **state) {
        struct fx *f = *state;
        for (size_t i = 0; i < ELEMENTSOF(f->kids); i++)
                if (f->kids[i] > 0) {
                        (void) kill(f->kids[i], SIGKILL);
                        (void) waitpid(f->kids[i], NULL, 0);
                }
        for (size_t i = 0; i < ELEMENTSOF(f->kid_fds); i++)
                safe_close(f->kid_fds[i]);
        f->server = control_server_free(f->server);
        for (size_t i = 0; i < MAX_FLIGHTS; i++)
                f->fake.flights[i].r = sf_resolution_free(f->fake.flights[i].r);
        f->fake.table = sf_table_unref(f->fake.table);
        f->store = store_unref(f->store);
        f->e = sd_event_unref(f->e);
        rm_rf(f->dir);
        log_set_sink(NULL, NULL);
        int want = f->fds;
        free(f);
        assert_int_equal(count_fds(), want); /* an fd leaked */
        return 0;
}

/* ------------------------------------------------------------------------ */
/* Bounded waiting: the loop runs while the test waits on its own fds         */
/* ------------------------------------------------------------------------ */

typedef bool (*cond_fn)(struct fx *f, void *arg);

/* Dispatches whatever is ready, until nothing is. */
static void settle(struct fx *f) {
        for (int i = 0; i < 10000; i++)
                if (sd_event_run(f->e, 0) <= 0)
                        return;
        fail_msg("the loop never went idle: a source stays ready (a busy loop in the server?)");
}

/* Runs the loop until cond holds; fails after timeout_ms naming what was
 * awaited and the likely cause. watch_fd (or -1) also wakes the wait. */
static void run_until(struct fx *f, cond_fn cond, void *arg, int watch_fd, int timeout_ms, const char *what,
                      const char *cause) {
        usec_t deadline = deadline_after_ms(timeout_ms);
        for (;;) {
                settle(f);
                if (cond(f, arg))
                        return;
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        fail_msg("timed out after %d ms waiting for %s (likely: %s)", timeout_ms, what, cause);
                struct pollfd p[2] = { { .fd = sd_event_get_fd(f->e), .events = POLLIN },
                                       { .fd = watch_fd, .events = POLLIN } };
                (void) poll(p, watch_fd >= 0 ? 2 : 1, (int) ((deadline - now) / USEC_PER_MSEC) + 1);
        }
}

static bool log_has(struct fx *f, void *arg) {
        return strstr(logged, arg) != NULL;
}

static bool fd_readable(struct fx *f, void *arg) {
        struct pollfd p = { .fd = *(int *) arg, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

static bool counter_reached(struct fx *f, void *arg) {
        unsigned **c = arg;
        return *c[0] >= *c[1];
}

static void wait_counter(struct fx *f, unsigned *counter, unsigned want, const char *what) {
        unsigned *args[2] = { counter, &want };
        run_until(f, counter_reached, args, -1, WAIT_MS, what, "the server did not read the request or call ops");
}

struct waiters_arg {
        const char *unit;
        int want;
};

static bool waiters_are(struct fx *f, void *arg) {
        struct waiters_arg *w = arg;
        return sf_table_get_waiters(f->fake.table, w->unit) == w->want;
}

static void wait_waiters(struct fx *f, const char *unit, int want) {
        struct waiters_arg w = { unit, want };
        run_until(f, waiters_are, &w, -1, WAIT_MS, "the flight's waiter count",
                  "the server did not notice the client leaving, or leaked its waiter");
}

/* ------------------------------------------------------------------------ */
/* A client in the test process                                              */
/* ------------------------------------------------------------------------ */

static int client_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        assert_true(strlen(path) < sizeof sa.sun_path); /* the test's paths are short */
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        return fd;
}

static void client_send_raw(int fd, const void *buf, size_t len) {
        assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t) len);
}

static void client_send(int fd, const char *text) {
        client_send_raw(fd, text, strlen(text));
}

/* The next message (parsed), waiting with the loop running; NULL at EOF. */
static json *client_recv(struct fx *f, int fd) {
        static char buf[CONTROL_MESSAGE_MAX + 1];
        run_until(f, fd_readable, &fd, fd, WAIT_MS, "an answer from the server",
                  "the server did not answer, or waits for something the test did not do");
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0)
                return NULL;
        assert_true(n > 0);
        json *o = NULL;
        assert_int_equal(control_message_parse(buf, (size_t) n, &o), 0);
        int64_t v;
        assert_int_equal(control_get_int64(o, "version", &v), 0);
        assert_int_equal(v, 1);
        return o;
}

static const char *str(json *o, const char *key) {
        const char *s = NULL;
        return control_get_string(o, key, &s) < 0 ? NULL : s;
}

static int64_t num(json *o, const char *key) {
        int64_t v = INT64_MIN;
        (void) control_get_int64(o, key, &v);
        return v;
}

static bool flag(json *o, const char *key) {
        bool b = false;
        (void) control_get_bool(o, key, &b);
        return b;
}

static void assert_type(json *o, const char *type) {
        assert_non_null(o);
        assert_string_equal(str(o, "type"), type);
}

/* Reads until the result; data messages' "units"/lines are collected into
 * *ret_data (an array) when given. Returns the result. */
static json *client_result(struct fx *f, int fd, json **ret_data) {
        json *data = json_object_new_array();
        for (;;) {
                json *m = client_recv(f, fd);
                assert_non_null(m); /* EOF before the result */
                if (streq(str(m, "type"), "result")) {
                        if (ret_data)
                                *ret_data = data;
                        else
                                json_object_put(data);
                        return m;
                }
                if (streq(str(m, "type"), "units")) {
                        json *u = json_object_object_get(m, "units");
                        for (size_t i = 0; i < json_object_array_length(u); i++)
                                json_object_array_add(data, json_object_get(json_object_array_get_idx(u, i)));
                        json_object_put(m);
                } else
                        json_object_array_add(data, m);
        }
}

/* Sends one request, returns the result's error ("" when ok). */
static char *ask(struct fx *f, int fd, const char *request) {
        client_send(fd, request);
        json *r = client_result(f, fd, NULL);
        char *e = strdup(flag(r, "ok") ? "" : str(r, "error"));
        json_object_put(r);
        return e;
}

static void assert_ask(struct fx *f, int fd, const char *request, const char *error) {
        char *e = ask(f, fd, request);
        assert_string_equal(e, error);
        free(e);
}

static void assert_no_message(struct fx *f, int fd) {
        settle(f);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 0), 0);
}

/* ------------------------------------------------------------------------ */
/* Unit records in the store                                                 */
/* ------------------------------------------------------------------------ */

static void put_record(struct fx *f, const char *unit, const char *state, int pid) {
        char key[300], text[1024];
        snprintf(key, sizeof key, "service/%s", unit);
        snprintf(text, sizeof text,
                 "{\"version\":1,\"name\":\"%s\",\"state\":\"%s\",\"main_pid\":%s%.0d,\"since\":1700000000000000,"
                 "\"since_monotonic\":5000000,\"restarts\":2,\"last_exit\":{\"signal\":9,\"core_dumped\":false},"
                 "\"status\":\"Ready\",\"result\":\"success\",\"waiters\":0}",
                 unit, state, pid > 0 ? "" : "null", pid);
        struct store_event *ev = NULL;
        if (store_get(f->store, STORE_DURABLE, key, &ev) == 0) {
                assert_int_equal(store_update(f->store, STORE_DURABLE, key, text, strlen(text), ev->revision, 0, NULL), 1);
                store_event_unref(ev);
        } else
                assert_int_equal(store_create(f->store, STORE_DURABLE, key, text, strlen(text), 0, NULL), 1);
        /* As the manager reports the records it stores. */
        bool down = streq(state, "inactive") || streq(state, "failed");
        int i = known_index(unit);
        if (i >= 0)
                f->fake.up[i] = !down;
        if (down)
                control_server_unit_stopped(f->server, unit);
}

static const char *const record_fields[] = { "version", "name", "state", "main_pid", "since", "since_monotonic",
                                             "restarts", "last_exit", "status", "result", "waiters" };

/* Exactly SPEC §5's fields, with the values put_record() wrote. */
static void assert_record(json *rec, const char *unit, const char *state, int pid, int waiters) {
        assert_int_equal(json_object_object_length(rec), ELEMENTSOF(record_fields));
        for (size_t i = 0; i < ELEMENTSOF(record_fields); i++)
                assert_true(json_object_object_get_ex(rec, record_fields[i], NULL));
        assert_string_equal(str(rec, "name"), unit);
        assert_string_equal(str(rec, "state"), state);
        if (pid > 0)
                assert_int_equal(num(rec, "main_pid"), pid);
        else
                assert_null(json_object_object_get(rec, "main_pid"));
        assert_int_equal(num(rec, "since"), 1700000000000000);
        assert_int_equal(num(rec, "since_monotonic"), 5000000);
        assert_int_equal(num(rec, "restarts"), 2);
        json *le = json_object_object_get(rec, "last_exit");
        assert_int_equal(num(le, "signal"), 9);
        assert_false(flag(le, "core_dumped"));
        assert_string_equal(str(rec, "status"), "Ready");
        assert_string_equal(str(rec, "result"), "success");
        assert_int_equal(num(rec, "waiters"), waiters);
}

/* ------------------------------------------------------------------------ */
/* Path rules, modes, stale and live sockets                                 */
/* ------------------------------------------------------------------------ */

static void test_socket_path(void **state) {
        char *p = NULL;
        char *saved_xdg = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;

        setenv("TEND_SOCKET", "/env/sock", 1);
        assert_int_equal(control_socket_path("/opt/sock", &p), 0);
        assert_string_equal(p, "/opt/sock");
        free(p);
        assert_int_equal(control_socket_path(NULL, &p), 0);
        assert_string_equal(p, "/env/sock");
        free(p);
        unsetenv("TEND_SOCKET");
        setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
        assert_int_equal(control_socket_path(NULL, &p), 0);
        assert_string_equal(p, geteuid() == 0 ? "/run/tend/control" : "/run/user/1000/tend/control");
        free(p);
        unsetenv("XDG_RUNTIME_DIR");
        if (geteuid() == 0) {
                assert_int_equal(control_socket_path("", &p), 0);
                assert_string_equal(p, "/run/tend/control");
                free(p);
        } else
                assert_int_equal(control_socket_path(NULL, &p), -ENOENT);
        assert_int_equal(control_socket_path(NULL, NULL), -EINVAL);
        if (saved_xdg)
                setenv("XDG_RUNTIME_DIR", saved_xdg, 1);
        free(saved_xdg);
}

static void assert_mode(const char *path, mode_t type, mode_t mode, gid_t gid) {
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & S_IFMT, type);
        assert_int_equal(st.st_mode & 07777, mode);
        if (gid != (gid_t) -1)
                assert_int_equal(st.st_gid, gid);
}

static void test_modes(void **state) {
        struct fx *f = *state;
        char dir[128], path2[160];
        struct control_server *s2 = NULL;
        gid_t group = geteuid() == 0 ? TEST_GROUP : getegid();

        snprintf(dir, sizeof dir, "%s/run", f->dir);
        assert_mode(dir, S_IFDIR, 0700, (gid_t) -1);
        assert_mode(f->path, S_IFSOCK, 0600, (gid_t) -1);

        /* With a control group: 0710 and 0660, owned by the group. Ancestors: 0755. */
        snprintf(path2, sizeof path2, "%s/a/b/control", f->dir);
        struct control_options co = { .path = path2, .control_group = group };
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), 0);
        snprintf(dir, sizeof dir, "%s/a/b", f->dir);
        assert_mode(dir, S_IFDIR, 0710, group);
        assert_mode(path2, S_IFSOCK, 0660, group);
        snprintf(dir, sizeof dir, "%s/a", f->dir);
        assert_mode(dir, S_IFDIR, 0755, (gid_t) -1);
        s2 = control_server_free(s2);
        assert_int_equal(access(path2, F_OK), -1); /* unlinked */
        snprintf(dir, sizeof dir, "%s/a/b", f->dir);
        assert_int_equal(access(dir, F_OK), -1); /* the directory it made, removed */

        /* An existing directory is the operator's: its mode is left alone. */
        assert_int_equal(chmod(f->dir, 0751), 0);
        snprintf(path2, sizeof path2, "%s/control", f->dir);
        co = (struct control_options) { .path = path2, .control_group = (gid_t) -1 };
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), 0);
        assert_mode(f->dir, S_IFDIR, 0751, (gid_t) -1);
        assert_mode(path2, S_IFSOCK, 0600, (gid_t) -1);
        s2 = control_server_free(s2);
        assert_int_equal(access(f->dir, F_OK), 0);
}

static void test_stale_and_live(void **state) {
        struct fx *f = *state;
        char path2[160];
        struct control_server *s2 = NULL;
        struct control_options co = { .path = f->path, .control_group = (gid_t) -1 };

        /* A live tend there: -EADDRINUSE, and its socket is left alone. */
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), -EADDRINUSE);
        assert_non_null(strstr(logged, "already running"));
        int c = client_connect(f->path);
        assert_ask(f, c, "{\"version\":1,\"command\":\"list\"}", "");
        close(c);

        /* A stale socket (bound, nobody listening): unlinked and bound again. */
        snprintf(path2, sizeof path2, "%s/stale", f->dir);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        assert_true(strlen(path2) < sizeof sa.sun_path);
        memcpy(sa.sun_path, path2, strlen(path2));
        int old = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(old, (struct sockaddr *) &sa, sizeof sa), 0);
        close(old);
        co.path = path2;
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), 0);
        assert_non_null(strstr(logged, "stale"));
        c = client_connect(path2);
        close(c);
        s2 = control_server_free(s2);

        /* Something that is no socket: -EEXIST, untouched. */
        int fd = open(path2, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), -EEXIST);
        assert_int_equal(access(path2, F_OK), 0);
        unlink(path2);
}

/* ------------------------------------------------------------------------ */
/* status, list                                                              */
/* ------------------------------------------------------------------------ */

static void test_status(void **state) {
        struct fx *f = *state;
        json *data = NULL, *r;
        put_record(f, "web.service", "running", 1234);
        put_record(f, "db.service", "inactive", 0);
        int c = client_connect(f->path);

        client_send(c, "{\"version\":1,\"command\":\"status\"}");
        r = client_result(f, c, &data);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(data), 2);
        assert_record(json_object_array_get_idx(data, 0), "db.service", "inactive", 0, 0);
        assert_record(json_object_array_get_idx(data, 1), "web.service", "running", 1234, 0);
        json_object_put(r);
        json_object_put(data);

        /* NAME and NAME.service; the waiters field is live (ops->waiters). */
        sf_waiter *w = NULL;
        assert_int_equal(fake_start(&f->fake, "web.service", false, &w), 0);
        client_send(c, "{\"version\":1,\"command\":\"status\",\"units\":[\"web\",\"db.service\"]}");
        r = client_result(f, c, &data);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(data), 2);
        assert_record(json_object_array_get_idx(data, 0), "web.service", "running", 1234, 1);
        assert_record(json_object_array_get_idx(data, 1), "db.service", "inactive", 0, 0);
        json_object_put(r);
        json_object_put(data);
        sf_waiter_free(w);

        /* An unknown unit: the others are shown, the result says not-found. */
        client_send(c, "{\"version\":1,\"command\":\"status\",\"units\":[\"nosuch\",\"web\"]}");
        r = client_result(f, c, &data);
        assert_false(flag(r, "ok"));
        assert_string_equal(str(r, "error"), "not-found");
        assert_non_null(strstr(str(r, "message"), "nosuch"));
        json *missing = json_object_object_get(r, "units");
        assert_int_equal(json_object_array_length(missing), 1);
        assert_string_equal(str(json_object_array_get_idx(missing, 0), "name"), "nosuch");
        assert_int_equal(json_object_array_length(data), 1);
        json_object_put(r);
        json_object_put(data);

        /* list: every unit; it takes no names. */
        client_send(c, "{\"version\":1,\"command\":\"list\"}");
        r = client_result(f, c, &data);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(data), 2);
        json_object_put(r);
        json_object_put(data);
        assert_ask(f, c, "{\"version\":1,\"command\":\"list\",\"units\":[\"web\"]}", "bad-request");
        close(c);
}

/* Many records: the answer comes in several batches, all of them. */
static void test_status_batches(void **state) {
        struct fx *f = *state;
        json *data = NULL;
        char name[64];
        for (int i = 0; i < 400; i++) {
                snprintf(name, sizeof name, "u%03d.service", i);
                put_record(f, name, "running", 100 + i);
        }
        int c = client_connect(f->path);
        client_send(c, "{\"version\":1,\"command\":\"list\"}");
        unsigned batches = 0;
        json *r = NULL;
        data = json_object_new_array();
        for (;;) {
                json *m = client_recv(f, c);
                assert_non_null(m);
                if (streq(str(m, "type"), "result")) {
                        r = m;
                        break;
                }
                assert_type(m, "units");
                batches++;
                json *u = json_object_object_get(m, "units");
                for (size_t i = 0; i < json_object_array_length(u); i++)
                        json_object_array_add(data, json_object_get(json_object_array_get_idx(u, i)));
                json_object_put(m);
        }
        assert_true(flag(r, "ok"));
        assert_true(batches > 1);
        assert_int_equal(json_object_array_length(data), 400);
        assert_string_equal(str(json_object_array_get_idx(data, 399), "name"), "u399.service");
        json_object_put(r);
        json_object_put(data);
        close(c);
}

/* ------------------------------------------------------------------------ */
/* start, restart: single flight (SPEC §2.3)                                 */
/* ------------------------------------------------------------------------ */

static const char start_web[] = "{\"version\":1,\"command\":\"start\",\"units\":[\"web\"]}";

static void test_start_shared(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path), b = client_connect(f->path);

        client_send(a, start_web);
        client_send(b, "{\"version\":1,\"command\":\"start\",\"units\":[\"web.service\"]}");
        wait_counter(f, &f->fake.n_start, 2, "both starts reaching ops->start");
        assert_int_equal(sf_table_get_waiters(f->fake.table, "web.service"), 2);
        assert_no_message(f, a); /* blocked until the flight answers */
        assert_no_message(f, b);

        fake_answer(&f->fake, "web.service", true, 4242, "success");
        json *ra = client_result(f, a, NULL), *rb = client_result(f, b, NULL);
        for (json *r = ra; r; r = r == ra ? rb : NULL) {
                assert_true(flag(r, "ok"));
                json *u = json_object_array_get_idx(json_object_object_get(r, "units"), 0);
                assert_string_equal(str(u, "name"), "web.service");
                assert_string_equal(str(u, "answer"), "ok");
                assert_int_equal(num(u, "main_pid"), 4242);
                assert_string_equal(str(u, "result"), "success");
        }
        assert_int_equal(f->fake.n_start, 2); /* one ops->start per client, one flight */
        assert_int_equal(sf_table_get_waiters(f->fake.table, "web.service"), 0);
        json_object_put(ra);
        json_object_put(rb);

        /* restart joins a flight the same way; a failed outcome fails the command. */
        client_send(a, "{\"version\":1,\"command\":\"restart\",\"units\":[\"web\"]}");
        wait_counter(f, &f->fake.n_restart, 1, "restart reaching ops->start");
        fake_answer(&f->fake, "web.service", false, 0, "exit-code");
        ra = client_result(f, a, NULL);
        assert_false(flag(ra, "ok"));
        assert_string_equal(str(ra, "error"), "failed");
        assert_non_null(strstr(str(ra, "message"), "exit-code"));
        json_object_put(ra);

        /* One request at a time: a pipelined request waits behind the start. */
        client_send(a, start_web);
        client_send(a, "{\"version\":1,\"command\":\"list\"}");
        wait_counter(f, &f->fake.n_start, 3, "the third start");
        assert_no_message(f, a);
        fake_answer(&f->fake, "web.service", true, 4243, "success");
        ra = client_result(f, a, NULL);
        assert_int_equal(num(json_object_array_get_idx(json_object_object_get(ra, "units"), 0), "main_pid"), 4243);
        json_object_put(ra);
        ra = client_result(f, a, NULL);
        assert_true(flag(ra, "ok"));
        assert_null(json_object_object_get(ra, "units"));
        json_object_put(ra);
        close(a);
        close(b);
}

/* The manager describes the outcome (describe_outcome); the server words
 * the answer: each form of the failure message, main_pid null without one. */
static void test_start_outcome_messages(void **state) {
        struct fx *f = *state;
        static const struct {
                bool ok;
                pid_t pid;
                const char *result, *reason, *message;
        } cases[] = {
                { true, 12, "success", NULL, NULL },
                { false, 0, "success", "ExecStartPre= exited 1", "web.service did not start: ExecStartPre= exited 1" },
                { false, 0, "exit-code", "status 3", "web.service failed to start (result exit-code): status 3" },
                { false, 0, "timeout", NULL, "web.service failed to start (result timeout)" },
                { false, 0, NULL, NULL, "web.service failed to start (result unknown)" },
        };
        int a = client_connect(f->path);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                client_send(a, start_web);
                wait_counter(f, &f->fake.n_start, (unsigned) i + 1, "the start");
                fake_answer_why(&f->fake, "web.service", cases[i].ok, cases[i].pid, cases[i].result, cases[i].reason);
                json *r = client_result(f, a, NULL);
                json *u = json_object_array_get_idx(json_object_object_get(r, "units"), 0);
                assert_int_equal(flag(r, "ok"), cases[i].ok);
                assert_string_equal(str(u, "answer"), "ok");
                if (cases[i].pid > 0)
                        assert_int_equal(num(u, "main_pid"), cases[i].pid);
                else
                        assert_true(json_object_object_get_ex(u, "main_pid", NULL) && !json_object_object_get(u, "main_pid"));
                if (cases[i].result)
                        assert_string_equal(str(u, "result"), cases[i].result);
                else
                        assert_true(json_object_object_get_ex(u, "result", NULL) && !json_object_object_get(u, "result"));
                if (cases[i].message) {
                        assert_string_equal(str(u, "message"), cases[i].message);
                        assert_string_equal(str(r, "message"), cases[i].message);
                        assert_string_equal(str(r, "error"), "failed");
                }
                json_object_put(r);
        }
        close(a);
}

static void test_start_cancelled_answer(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path);
        client_send(a, start_web);
        wait_counter(f, &f->fake.n_start, 1, "the start");
        assert_int_equal(sf_table_cancel(f->fake.table, "web.service"), 0);
        json *r = client_result(f, a, NULL);
        assert_string_equal(str(r, "error"), "cancelled");
        json_object_put(r);
        *fake_flight(&f->fake, "web.service") = sf_resolution_free(*fake_flight(&f->fake, "web.service"));
        close(a);
}

static void test_start_no_block(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path);

        client_send(a, "{\"version\":1,\"command\":\"start\",\"units\":[\"web\"],\"no_block\":true}");
        json *r = client_result(f, a, NULL); /* at once */
        assert_true(flag(r, "ok"));
        assert_string_equal(str(json_object_array_get_idx(json_object_object_get(r, "units"), 0), "answer"), "queued");
        json_object_put(r);
        for (int i = 0; i < 5; i++) /* repeated: still one share held for the flight */
                assert_ask(f, a, "{\"version\":1,\"command\":\"start\",\"units\":[\"web\"],\"no_block\":true}", "");
        assert_int_equal(f->fake.n_start, 6);
        close(a);

        /* The client left, but what it asked for goes on: tend holds its share. */
        settle(f);
        assert_int_equal(sf_table_get_waiters(f->fake.table, "web.service"), 1);
        sf_resolution **res = fake_flight(&f->fake, "web.service");
        assert_false(sf_resolution_is_cancelled(*res));
        fake_answer(&f->fake, "web.service", true, 77, "success");
        wait_waiters(f, "web.service", 0);
}

static void test_start_client_leaves(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path), b = client_connect(f->path);

        client_send(a, start_web);
        client_send(b, start_web);
        wait_counter(f, &f->fake.n_start, 2, "both starts");
        assert_int_equal(sf_table_get_waiters(f->fake.table, "web.service"), 2);
        close(a);
        wait_waiters(f, "web.service", 1); /* a's share released */
        sf_resolution **res = fake_flight(&f->fake, "web.service");
        assert_false(sf_resolution_is_cancelled(*res));
        close(b);
        wait_waiters(f, "web.service", 0); /* the last client gone: the flight is cancelled */
        assert_true(sf_resolution_is_cancelled(*res));
        *res = sf_resolution_free(*res);

        /* An unknown unit: not-found, nothing joined. */
        a = client_connect(f->path);
        assert_ask(f, a, "{\"version\":1,\"command\":\"start\",\"units\":[\"nosuch\"]}", "not-found");
        assert_int_equal(f->fake.n_start, 2);
        close(a);
}

/* ------------------------------------------------------------------------ */
/* stop and the per-unit commands                                            */
/* ------------------------------------------------------------------------ */

static void test_stop(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path);
        put_record(f, "web.service", "running", 10);

        client_send(a, "{\"version\":1,\"command\":\"stop\",\"units\":[\"web\"]}");
        wait_counter(f, &f->fake.n_stop, 1, "the stop");
        assert_no_message(f, a);
        put_record(f, "web.service", "stopping", 10);
        assert_no_message(f, a);
        put_record(f, "web.service", "inactive", 0);
        json *r = client_result(f, a, NULL);
        assert_true(flag(r, "ok"));
        json_object_put(r);

        /* Already down: answered at once; --no-block too. */
        assert_ask(f, a, "{\"version\":1,\"command\":\"stop\",\"units\":[\"web\"]}", "");
        put_record(f, "web.service", "running", 11);
        assert_ask(f, a, "{\"version\":1,\"command\":\"stop\",\"units\":[\"web\"],\"no_block\":true}", "");
        assert_int_equal(f->fake.n_stop, 3);

        /* Two units, one down: the answer waits for the other; a report of
         * another unit, or a record that is not down, answers nothing. */
        client_send(a, "{\"version\":1,\"command\":\"stop\",\"units\":[\"db\",\"web\"]}");
        wait_counter(f, &f->fake.n_stop, 5, "the stops of db and web");
        control_server_unit_stopped(f->server, "db.service");
        put_record(f, "web.service", "stopping", 11);
        assert_no_message(f, a);
        put_record(f, "web.service", "failed", 0);
        r = client_result(f, a, NULL);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(json_object_object_get(r, "units")), 2);
        json_object_put(r);

        /* Reported down from inside the same request (stopping db stops
         * web): answered after the request, once. */
        put_record(f, "web.service", "running", 12);
        f->fake.db_stop_takes_web = true;
        client_send(a, "{\"version\":1,\"command\":\"stop\",\"units\":[\"web\",\"db\"]}");
        r = client_result(f, a, NULL);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(json_object_object_get(r, "units")), 2);
        json_object_put(r);
        assert_no_message(f, a);
        assert_int_equal(f->fake.n_stop, 7);
        close(a);
}

/* QA L5: reload waits for the manager's control_server_unit_reloaded(). */
static void test_reload_waits(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path);
        client_send(a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\"]}");
        wait_counter(f, &f->fake.n_reload, 1, "the reload");
        assert_no_message(f, a);
        control_server_unit_reloaded(f->server, "db.service", NULL); /* another unit's: answers nothing */
        assert_no_message(f, a);
        control_server_unit_reloaded(f->server, "web.service", NULL);
        json *r = client_result(f, a, NULL);
        assert_true(flag(r, "ok"));
        json_object_put(r);

        /* Failed: the reason, per unit and at the top. */
        client_send(a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\",\"db\"]}");
        wait_counter(f, &f->fake.n_reload, 3, "the reloads");
        control_server_unit_reloaded(f->server, "db.service", NULL);
        assert_no_message(f, a);
        control_server_unit_reloaded(f->server, "web.service", "web.service: reload failed: ExecReload=/x exited with status 5");
        r = client_result(f, a, NULL);
        assert_false(flag(r, "ok"));
        assert_string_equal(str(r, "error"), "failed");
        assert_non_null(strstr(str(r, "message"), "web.service: reload failed: ExecReload=/x exited with status 5"));
        json_object_put(r);

        /* Reported from inside the request: answered once, with it. */
        f->fake.reload_reports = "web.service: reload failed: at once";
        client_send(a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\"]}");
        r = client_result(f, a, NULL);
        assert_non_null(strstr(str(r, "message"), "reload failed: at once"));
        json_object_put(r);
        assert_no_message(f, a);
        f->fake.reload_reports = "";
        assert_ask(f, a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\"]}", "");
        assert_no_message(f, a);

        /* no_block: answered at once; the later report answers nothing. */
        f->fake.reload_reports = NULL;
        assert_ask(f, a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\"],\"no_block\":true}", "");
        control_server_unit_reloaded(f->server, "web.service", NULL);
        assert_no_message(f, a);

        /* A client that leaves while it waits: nothing left behind. */
        client_send(a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\"]}");
        wait_counter(f, &f->fake.n_reload, 7, "the last reload");
        close(a);
        settle(f);
        control_server_unit_reloaded(f->server, "web.service", NULL);
        settle(f);
}

static bool is_closed(struct fx *f, void *arg) {
        char b;
        struct pollfd p = { .fd = *(int *) arg, .events = POLLIN };
        return poll(&p, 1, 0) > 0 && recv(*(int *) arg, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
}

/* QA M1, L1: daemon-reexec's answer waits for the manager's word; the idle
 * timeout does not cut it; a refusal is answered at once; an abandonment
 * later (or from inside the request), once. */
static void test_daemon_reexec_deferred(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path), b = client_connect(f->path);
        client_send(a, "{\"version\":1,\"command\":\"daemon-reexec\"}");
        wait_counter(f, &f->fake.n_reexec, 1, "the re-exec request");
        /* Past the idle timeout (100 ms here: b, idle, is closed): a still
         * waits, not closed. */
        int fds[4];
        assert_int_equal(control_server_handover(f->server, fds, 4, true), 1); /* b: idle; a never among them */
        run_until(f, is_closed, &b, b, WAIT_MS, "the idle client closed", "the idle timeout is not armed");
        assert_no_message(f, a);
        /* The exec's hand-over: a among the waiting. */
        assert_int_equal(control_server_handover_waiting(f->server, fds, 4, false), 1);
        assert_int_equal(control_server_handover_waiting(f->server, fds, 4, true), 1);
        assert_int_equal(control_server_handover(f->server, fds, 4, true), 0);
        control_server_reexec_abandoned(f->server, "X cannot read tend's state format 2 (no answer in time)");
        struct pollfd pa = { .fd = a, .events = POLLIN };
        assert_int_equal(poll(&pa, 1, 0), 0); /* never from inside the call: from the loop */
        json *r = client_result(f, a, NULL);
        assert_false(flag(r, "ok"));
        assert_string_equal(str(r, "message"), "not re-executing: X cannot read tend's state format 2 (no answer in time)");
        json_object_put(r);
        control_server_reexec_abandoned(f->server, "again"); /* nobody waits: nothing */
        assert_no_message(f, a);

        f->fake.reexec_error = -ENOEXEC;
        client_send(a, "{\"version\":1,\"command\":\"daemon-reexec\"}");
        r = client_result(f, a, NULL);
        assert_string_equal(str(r, "message"), "not re-executing: refused at once");
        json_object_put(r);
        f->fake.reexec_error = 0;
        f->fake.reexec_abandons = true;
        client_send(a, "{\"version\":1,\"command\":\"daemon-reexec\"}");
        r = client_result(f, a, NULL);
        assert_string_equal(str(r, "message"), "not re-executing: abandoned from inside");
        json_object_put(r);
        assert_no_message(f, a);
        /* A client that leaves while it waits: the server forgets it. */
        f->fake.reexec_abandons = false;
        client_send(a, "{\"version\":1,\"command\":\"daemon-reexec\"}");
        wait_counter(f, &f->fake.n_reexec, 4, "the last re-exec request");
        close(a);
        settle(f);
        assert_int_equal(control_server_handover_waiting(f->server, fds, 4, true), 0);
        control_server_reexec_abandoned(f->server, "after it left");
        settle(f);
        close(b);
}

/* issue 20: the cluster view's hosts answered later through a ticket: the
 * connection waits (past the idle timeout), others are served meanwhile, the
 * answer comes from the loop (never inside control_ticket_answer()), once; a
 * client that hangs up detaches its ticket and the late answer is dropped. */
static void test_cluster_ticket(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path), b = client_connect(f->path);
        client_send(a, "{\"version\":1,\"command\":\"cluster\",\"view\":\"hosts\"}");
        wait_counter(f, &f->fake.n_cluster, 1, "the hosts request");
        client_send(b, "{\"version\":1,\"command\":\"cluster\",\"view\":\"list\"}");
        json *data = NULL, *r = client_result(f, b, &data);
        assert_true(flag(r, "ok")); /* b served while a waits */
        assert_int_equal(json_object_array_length(data), 1);
        json_object_put(r);
        json_object_put(data);
        run_until(f, is_closed, &b, b, WAIT_MS, "the idle client closed", "the idle timeout is not armed");
        close(b);
        assert_no_message(f, a); /* past the idle timeout: a still waits */
        assert_true(control_ticket_waiting(f->fake.ticket));
        json *items = json_object_new_array();
        for (int i = 0; i < 2; i++) {
                json *it = json_object_new_object();
                assert_int_equal(control_add_int64(it, "lease_left_ms", 4000 + i), 0);
                assert_int_equal(json_object_array_add(items, it), 0);
        }
        control_ticket_answer(f->fake.ticket, 0, items);
        control_ticket_answer(f->fake.ticket, -EIO, items); /* once only */
        struct pollfd pa = { .fd = a, .events = POLLIN };
        assert_int_equal(poll(&pa, 1, 0), 0); /* from the loop, not inside the call */
        assert_false(control_ticket_waiting(f->fake.ticket));
        r = client_result(f, a, &data);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(data), 2);
        assert_int_equal(json_object_get_int64(json_object_object_get(
                                 json_object_object_get(json_object_array_get_idx(data, 1), "item"), "lease_left_ms")),
                         4001);
        json_object_put(r);
        json_object_put(data);
        f->fake.ticket = control_ticket_unref(f->fake.ticket);
        assert_no_message(f, a);
        /* A client that hangs up while it waits: the late answer is dropped. */
        client_send(a, "{\"version\":1,\"command\":\"cluster\",\"view\":\"hosts\"}");
        wait_counter(f, &f->fake.n_cluster, 3, "the second hosts request");
        close(a);
        settle(f);
        assert_false(control_ticket_waiting(f->fake.ticket));
        control_ticket_answer(f->fake.ticket, 0, items);
        settle(f);
        f->fake.ticket = control_ticket_unref(f->fake.ticket);
        json_object_put(items);
}

static int setup_short_idle(void **state) {
        struct control_options co = { .control_group = (gid_t) -1, .idle_timeout_usec = 100 * USEC_PER_MSEC };
        *state = fx_setup(NULL, &co);
        return 0;
}

static void test_unit_commands(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path);

        assert_ask(f, a, "{\"version\":1,\"command\":\"kill\",\"units\":[\"web\"],\"signal\":9,\"main\":true}", "");
        assert_int_equal(f->fake.n_kill, 1);
        assert_int_equal(f->fake.last_sig, 9);
        assert_true(f->fake.last_main);
        assert_string_equal(f->fake.last_unit, "web.service");
        f->fake.kill_error = -ESRCH;
        assert_ask(f, a, "{\"version\":1,\"command\":\"kill\",\"units\":[\"web\"]}", "failed");
        assert_int_equal(f->fake.last_sig, SIGTERM);
        assert_ask(f, a, "{\"version\":1,\"command\":\"kill\",\"units\":[\"nosuch\"]}", "not-found");

        f->fake.reload_error = -EOPNOTSUPP;
        client_send(a, "{\"version\":1,\"command\":\"reload\",\"units\":[\"web\"]}");
        json *r = client_result(f, a, NULL);
        assert_string_equal(str(r, "error"), "failed");
        assert_non_null(strstr(str(r, "message"), "no ExecReload="));
        json_object_put(r);

        assert_ask(f, a, "{\"version\":1,\"command\":\"reset-failed\"}", "");
        assert_true(f->fake.reset_all);
        assert_ask(f, a, "{\"version\":1,\"command\":\"reset-failed\",\"units\":[\"db\"]}", "");
        assert_false(f->fake.reset_all);
        assert_string_equal(f->fake.last_unit, "db.service");
        assert_ask(f, a, "{\"version\":1,\"command\":\"daemon-reload\"}", "");
        /* A file that does not load: the request fails, naming it; the lists are always there. */
        f->fake.reload_bad_file = true;
        client_send(a, "{\"version\":1,\"command\":\"daemon-reload\"}");
        r = client_result(f, a, NULL);
        assert_string_equal(str(r, "error"), "failed");
        assert_non_null(strstr(str(r, "message"), "bad.service: not reloaded, left as it is: /d/bad.service:3:"));
        assert_string_equal(json_object_get_string(json_object_array_get_idx(json_object_object_get(r, "added"), 0)),
                            "new.service");
        assert_int_equal(json_object_array_length(json_object_object_get(r, "changed")), 0);
        assert_int_equal(json_object_array_length(json_object_object_get(r, "removed")), 0);
        json *u = json_object_array_get_idx(json_object_object_get(r, "units"), 0);
        assert_string_equal(str(u, "name"), "bad.service");
        assert_string_equal(str(u, "error"), "failed");
        /* QA19 L3: a file never loaded is "not loaded", not "left as it is" */
        u = json_object_array_get_idx(json_object_object_get(r, "units"), 1);
        assert_string_equal(str(u, "name"), "never.service");
        assert_string_equal(str(u, "message"), "never.service: not loaded: /d/never.service:1: syntax error");
        json_object_put(r);
        assert_ask(f, a, "{\"version\":1,\"command\":\"shutdown\"}", "");
        assert_int_equal(f->fake.n_daemon_reload, 2);
        assert_int_equal(f->fake.n_shutdown, 1);
        close(a);
}

/* ------------------------------------------------------------------------ */
/* Bad input, limits                                                         */
/* ------------------------------------------------------------------------ */

static void test_bad_requests(void **state) {
        struct fx *f = *state;
        int a = client_connect(f->path);

        /* Over 64 KiB: "too-large"; the connection stays usable (documented). */
        size_t big = CONTROL_REQUEST_MAX + 1;
        char *buf = malloc(big);
        assert_non_null(buf);
        memset(buf, ' ', big);
        memcpy(buf, "{\"version\":1,\"command\":\"list\"}", 30); /* then spaces: valid JSON, too long */
        client_send_raw(a, buf, big);
        free(buf);
        json *r = client_result(f, a, NULL);
        assert_string_equal(str(r, "error"), "too-large");
        json_object_put(r);
        assert_ask(f, a, "{\"version\":1,\"command\":\"list\"}", "");

        assert_ask(f, a, "{\"version\":1,\"command\":", "bad-request");
        assert_ask(f, a, "[1,2]", "bad-request");
        assert_ask(f, a, "{\"version\":1} trailing", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"frobnicate\"}", "bad-request");
        assert_ask(f, a, "{\"version\":1}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"start\"}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"start\",\"units\":\"web\"}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"start\",\"units\":[1]}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"watch\",\"keyspace\":\"other\"}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"kill\",\"units\":[\"web\"],\"signal\":0}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"kill\",\"units\":[\"web\"],\"signal\":\"TERM\"}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"start\",\"units\":[\"web\"],\"no_block\":1}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"logs\",\"units\":[\"web\"],\"lines\":-5}", "bad-request");
        assert_ask(f, a, "{\"version\":1,\"command\":\"logs\",\"units\":[\"web\",\"db\"]}", "bad-request");
        assert_int_equal(f->fake.n_kill, 0);
        client_send(a, "{\"version\":2,\"command\":\"list\"}");
        r = client_result(f, a, NULL);
        assert_string_equal(str(r, "error"), "unsupported-version");
        assert_int_equal(json_object_get_int(json_object_array_get_idx(json_object_object_get(r, "supported"), 0)), 1);
        json_object_put(r);
        assert_ask(f, a, "{\"command\":\"list\"}", "unsupported-version");
        assert_int_equal(f->fake.n_start, 0);

        /* tend is unaffected: this client and a new one are served. */
        assert_ask(f, a, "{\"version\":1,\"command\":\"list\"}", "");
        int b = client_connect(f->path);
        assert_ask(f, b, "{\"version\":1,\"command\":\"list\"}", "");
        close(a);
        close(b);
}

static void test_max_clients(void **state) {
        struct fx *f = *state;
        char path2[160];
        struct control_server *s2 = NULL;
        snprintf(path2, sizeof path2, "%s/limited", f->dir);
        struct control_options co = { .path = path2, .control_group = (gid_t) -1, .max_clients = 2 };
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), 0);

        int a = client_connect(path2), b = client_connect(path2);
        assert_ask(f, a, "{\"version\":1,\"command\":\"list\"}", ""); /* both accepted by now */
        assert_ask(f, b, "{\"version\":1,\"command\":\"list\"}", "");
        int c = client_connect(path2);
        json *r = client_recv(f, c);
        assert_string_equal(str(r, "error"), "too-many-clients");
        json_object_put(r);
        assert_null(client_recv(f, c)); /* then closed */
        close(c);
        close(a);
        settle(f);
        c = client_connect(path2); /* a slot is free again */
        assert_ask(f, c, "{\"version\":1,\"command\":\"list\"}", "");
        close(c);
        close(b);
        s2 = control_server_free(s2);
}

/* A client that reads nothing, with answers pending, is dropped after the
 * stall timeout; tend goes on serving the others. */
static void test_silent_client_dropped(void **state) {
        struct fx *f = *state;
        char path2[160], big[40000];
        struct control_server *s2 = NULL;
        snprintf(path2, sizeof path2, "%s/stall", f->dir);
        struct control_options co = { .path = path2, .control_group = (gid_t) -1, .stall_timeout_usec = 200000 };
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), 0);

        int a = client_connect(path2);
        client_send(a, "{\"version\":1,\"command\":\"watch\",\"prefix\":\"blob/\"}");
        settle(f);
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        for (int i = 0; i < 40; i++) { /* 1.6 MB of events: more than the socket and the queue hold */
                char key[32];
                snprintf(key, sizeof key, "blob/%02d", i);
                assert_int_equal(store_create(f->store, STORE_DURABLE, key, big, strlen(big), 0, NULL), 1);
                settle(f);
        }
        run_until(f, log_has, (void *) "read nothing", -1, WAIT_MS, "the silent client being dropped",
                  "the stall timer was not armed when the socket refused output");
        int b = client_connect(path2);
        assert_ask(f, b, "{\"version\":1,\"command\":\"list\"}", "");
        close(b);
        /* What was sent before the drop is readable, then EOF. */
        for (int n = 0;; n++) {
                char buf[CONTROL_MESSAGE_MAX];
                ssize_t k = recv(a, buf, sizeof buf, MSG_DONTWAIT);
                if (k == 0)
                        break;
                assert_true(k > 0 && n < 1000); /* no EOF: the connection was not closed */
        }
        close(a);
        s2 = control_server_free(s2);
}

/* ------------------------------------------------------------------------ */
/* Peer authorisation (SO_PEERCRED, SO_PEERGROUPS)                           */
/* ------------------------------------------------------------------------ */

struct child {
        pid_t pid;
        int pidfd;
        int status;
        bool exited;
};

static bool child_exited(struct fx *f, void *arg) {
        struct child *c = arg;
        siginfo_t si = { 0 };
        if (waitid((idtype_t) P_PIDFD, (id_t) c->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return false;
        c->exited = true;
        c->status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
        return true;
}

static void child_wait(struct fx *f, struct child *c, const char *what) {
        run_until(f, child_exited, c, c->pidfd, WAIT_MS, what, "the child hangs on a server that does not answer");
        close(c->pidfd);
        c->pid = 0;
}

/* Drops to uid nobody with gid and supplementary groups as given. */
static void become(gid_t gid, const gid_t *groups, size_t n) {
        if (setgroups(n, groups) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0)
                _exit(90);
}

/* A child that connects as (gid, groups) and asks for list; exits 0 when
 * the answer's error is `want` ("" = ok), 1 otherwise. */
static struct child spawn_peer(const char *path, gid_t gid, const gid_t *groups, size_t n, const char *want) {
        pid_t parent = getpid();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(99);
                become(gid, groups, n);
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
                int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                        _exit(91);
                static const char list[] = "{\"version\":1,\"command\":\"list\"}";
                (void) send(fd, list, strlen(list), MSG_NOSIGNAL);
                char buf[4096];
                for (;;) {
                        ssize_t k = recv(fd, buf, sizeof buf - 1, 0);
                        if (k < 0 && errno == ECONNRESET) /* see refuse() in control.c */
                                k = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
                        if (k <= 0)
                                _exit(92);
                        buf[k] = '\0';
                        if (!strstr(buf, "\"type\":\"result\""))
                                continue;
                        bool ok = strstr(buf, "\"ok\":true") != NULL;
                        if (!*want) {
                                if (!ok)
                                        fprintf(stderr, "peer child: %s\n", buf);
                                _exit(ok ? 0 : 1);
                        }
                        char e[64];
                        snprintf(e, sizeof e, "\"error\":\"%s\"", want);
                        _exit(strstr(buf, e) ? 0 : 1);
                }
        }
        struct child c = { .pid = pid, .pidfd = (int) syscall(SYS_pidfd_open, pid, 0) };
        assert_true(c.pidfd >= 0);
        return c;
}

static void test_peer_refused(void **state) {
        struct fx *f = *state;
        if (geteuid() != 0) {
                print_message("skipped: switching a child to uid nobody needs root\n");
                skip();
        }
        /* Let nobody reach the socket: the server's own check must refuse it. */
        char dir[128];
        snprintf(dir, sizeof dir, "%s/run", f->dir);
        assert_int_equal(chmod(f->dir, 0755), 0);
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(chmod(f->path, 0666), 0);

        struct child c = spawn_peer(f->path, NOBODY, NULL, 0, "permission-denied");
        child_wait(f, &c, "the refused child");
        assert_int_equal(c.status, 0); /* not the permission-denied answer */
        assert_non_null(strstr(logged, "refused client"));
        assert_non_null(strstr(logged, "uid 65534"));

        /* tend itself is unaffected. */
        int a = client_connect(f->path);
        assert_ask(f, a, "{\"version\":1,\"command\":\"list\"}", "");
        close(a);
}

static void test_peer_group(void **state) {
        struct fx *f = *state;
        if (geteuid() != 0) {
                print_message("skipped: switching a child to uid nobody needs root\n");
                skip();
        }
        char path2[160];
        struct control_server *s2 = NULL;
        snprintf(path2, sizeof path2, "%s/grp/control", f->dir);
        struct control_options co = { .path = path2, .control_group = TEST_GROUP };
        assert_int_equal(control_server_new(f->e, f->store, &fake_ops, &f->fake, &co, &s2), 0);
        assert_int_equal(chmod(f->dir, 0755), 0);

        gid_t g = TEST_GROUP;
        struct child c = spawn_peer(path2, NOBODY, &g, 1, ""); /* supplementary group: SO_PEERGROUPS */
        child_wait(f, &c, "the child in the control group (supplementary)");
        assert_int_equal(c.status, 0);
        c = spawn_peer(path2, TEST_GROUP, NULL, 0, ""); /* primary group */
        child_wait(f, &c, "the child in the control group (primary)");
        assert_int_equal(c.status, 0);
        c = spawn_peer(path2, NOBODY, NULL, 0, "");     /* neither: the 0710 directory keeps it out */
        child_wait(f, &c, "the child outside the control group");
        assert_int_equal(c.status, 91);
        s2 = control_server_free(s2);
}

/* ------------------------------------------------------------------------ */
/* watch                                                                     */
/* ------------------------------------------------------------------------ */

static void test_watch(void **state) {
        struct fx *f = *state;
        put_record(f, "web.service", "running", 5);
        int a = client_connect(f->path);

        client_send(a, "{\"version\":1,\"command\":\"watch\",\"prefix\":\"service/\"}");
        json *m = client_recv(f, a);
        assert_type(m, "event");
        assert_string_equal(str(m, "event"), "put");
        assert_string_equal(str(m, "keyspace"), "durable");
        assert_string_equal(str(m, "key"), "service/web.service");
        assert_int_equal(num(m, "revision"), 1);
        assert_string_equal(str(json_object_object_get(m, "value"), "state"), "running");
        json_object_put(m);
        m = client_recv(f, a);
        assert_type(m, "snapshot-done");
        assert_int_equal(num(m, "revision"), 1);
        json_object_put(m);

        put_record(f, "web.service", "stopping", 5);
        assert_int_equal(store_create(f->store, STORE_DURABLE, "other/x", "1", 1, 0, NULL), 1); /* not matching */
        m = client_recv(f, a);
        assert_type(m, "event");
        assert_int_equal(num(m, "revision"), 2);
        assert_string_equal(str(json_object_object_get(m, "value"), "state"), "stopping");
        json_object_put(m);
        assert_int_equal(store_delete(f->store, STORE_DURABLE, "service/web.service", STORE_REV_ANY, NULL), 1);
        m = client_recv(f, a);
        assert_string_equal(str(m, "event"), "delete");
        assert_string_equal(str(m, "cause"), "deleted");
        assert_int_equal(num(m, "revision"), 4);
        assert_int_equal(num(m, "prev_revision"), 2);
        json_object_put(m);
        close(a);
        settle(f);

        /* The ephemeral keyspace, with a non-JSON value. */
        a = client_connect(f->path);
        assert_int_equal(store_create(f->store, STORE_EPHEMERAL, "watchdog/web.service", "raw", 3, 0, NULL), 1);
        client_send(a, "{\"version\":1,\"command\":\"watch\",\"keyspace\":\"ephemeral\"}");
        m = client_recv(f, a);
        assert_string_equal(str(m, "keyspace"), "ephemeral");
        assert_string_equal(str(m, "value"), "raw");
        json_object_put(m);
        close(a);
}

static int setup_small_watch(void **state) {
        struct store_options so = { .watch_queue_capacity = 4 };
        *state = fx_setup(&so, NULL);
        return 0;
}

/* A watcher that falls behind is told "lagged", and can watch again. */
static void test_watch_lagged(void **state) {
        struct fx *f = *state;
        put_record(f, "web.service", "running", 5);
        int a = client_connect(f->path);
        client_send(a, "{\"version\":1,\"command\":\"watch\",\"prefix\":\"service/\"}");
        json_object_put(client_recv(f, a));
        json_object_put(client_recv(f, a));

        for (int i = 0; i < 10; i++) /* no loop iteration in between: the store's queue overflows */
                put_record(f, "web.service", i % 2 ? "running" : "stopping", 5);
        json *m;
        while ((m = client_recv(f, a)) && streq(str(m, "type"), "event"))
                json_object_put(m);
        assert_type(m, "result");
        assert_string_equal(str(m, "error"), "lagged");
        json_object_put(m);
        assert_non_null(strstr(logged, "fell behind"));

        client_send(a, "{\"version\":1,\"command\":\"watch\",\"prefix\":\"service/\"}");
        m = client_recv(f, a);
        assert_int_equal(num(m, "revision"), 11); /* the current state, at once */
        json_object_put(m);
        close(a);
}

/* ------------------------------------------------------------------------ */
/* logs                                                                      */
/* ------------------------------------------------------------------------ */

struct ring_count {
        size_t n;
};

static int count_line(const struct logs_line *l, void *userdata) {
        ((struct ring_count *) userdata)->n++;
        return 0;
}

static bool ring_has(struct fx *f, void *arg) {
        struct ring_count rc = { 0 };
        (void) logs_stream_ring(f->fake.stream, SIZE_MAX, count_line, &rc);
        return rc.n >= *(size_t *) arg;
}

static void test_logs(void **state) {
        struct fx *f = *state;
        logs_manager *lm = NULL;
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC), out, err;
        struct logs_manager_options lo = { .console_fd = devnull };
        assert_int_equal(logs_manager_new(f->e, &lo, &lm), 0);
        struct logs_stream_config sc = { .name = "web.service",
                                         .stdout_target = { LOGS_TARGET_CONSOLE, NULL },
                                         .stderr_target = { LOGS_TARGET_CONSOLE, NULL } };
        assert_int_equal(logs_stream_new(lm, &sc, &f->fake.stream), 0);
        assert_int_equal(logs_stream_prepare_spawn(f->fake.stream, &out, &err), 0);
        logs_stream_set_pid(f->fake.stream, 321);
        int w = fcntl(out, F_DUPFD_CLOEXEC, 0); /* the child's copy: tend closes its own at spawn_done */
        assert_true(w >= 0);
        logs_stream_spawn_done(f->fake.stream);
        assert_int_equal(write(w, "one\ntwo\nthree\n", 14), 14);
        size_t want = 3;
        run_until(f, ring_has, &want, -1, WAIT_MS, "three lines in the ring", "the log stream did not read its pipe");

        int a = client_connect(f->path);
        client_send(a, "{\"version\":1,\"command\":\"logs\",\"units\":[\"web\"],\"lines\":2}");
        json *data = NULL, *r = client_result(f, a, &data);
        assert_true(flag(r, "ok"));
        assert_int_equal(json_object_array_length(data), 2);
        json *l = json_object_array_get_idx(data, 0);
        assert_type(l, "line");
        assert_string_equal(str(l, "text"), "two");
        assert_string_equal(str(l, "unit"), "web.service");
        assert_string_equal(str(l, "stream"), "stdout");
        assert_int_equal(num(l, "pid"), 321);
        assert_true(num(l, "time") > 0);
        assert_string_equal(str(json_object_array_get_idx(data, 1), "text"), "three");
        json_object_put(r);
        json_object_put(data);

        /* -f: the ring, then new lines as they come. */
        client_send(a, "{\"version\":1,\"command\":\"logs\",\"units\":[\"web.service\"],\"lines\":1,\"follow\":true}");
        json *m = client_recv(f, a);
        assert_string_equal(str(m, "text"), "three");
        json_object_put(m);
        assert_no_message(f, a);
        assert_int_equal(write(w, "four\n", 5), 5);
        m = client_recv(f, a);
        assert_string_equal(str(m, "text"), "four");
        json_object_put(m);
        close(a);
        settle(f);

        /* A unit whose output bypasses tend has no ring. */
        a = client_connect(f->path);
        assert_ask(f, a, "{\"version\":1,\"command\":\"logs\",\"units\":[\"db\"]}", "failed");
        assert_ask(f, a, "{\"version\":1,\"command\":\"logs\",\"units\":[\"nosuch\"]}", "not-found");
        close(a);
        settle(f);
        close(w);
        f->fake.stream = logs_stream_free(f->fake.stream);
        lm = logs_manager_free(lm);
        close(devnull);
}

/* ------------------------------------------------------------------------ */
/* tendctl, run against the server                                           */
/* ------------------------------------------------------------------------ */

static const char *tendctl_path(void) {
        static char p[PATH_MAX];
        const char *env = getenv("TENDCTL");
        if (env)
                return env;
        ssize_t n = readlink("/proc/self/exe", p, sizeof p - 40);
        assert_true(n > 0);
        p[n] = '\0';
        *strrchr(p, '/') = '\0';
        strcat(p, "/../../supervisor/tendctl");
        return p;
}

struct run {
        struct child c;
        int out; /* the child's stdout, non-blocking */
        char text[65536];
        size_t len;
};

static void run_drain(struct run *r) {
        for (;;) {
                ssize_t n = read(r->out, r->text + r->len, sizeof r->text - 1 - r->len);
                if (n <= 0)
                        break;
                r->len += (size_t) n;
        }
        r->text[r->len] = '\0';
}

static bool run_exited(struct fx *f, void *arg) {
        struct run *r = arg;
        run_drain(r);
        return child_exited(f, &r->c);
}

/* Starts tendctl with argv (NULL-terminated) as uid nobody when `nobody`. */
static void tendctl_start(struct run *r, bool nobody, const char *const *argv) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t parent = getpid();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(99);
                if (dup2(p[1], STDOUT_FILENO) < 0)
                        _exit(98);
                if (nobody)
                        become(NOBODY, NULL, 0);
                unsetenv("TEND_SOCKET");
                execv(tendctl_path(), (char *const *) argv);
                _exit(97);
        }
        close(p[1]);
        memset(r, 0, sizeof *r);
        r->out = p[0];
        assert_int_equal(fcntl(r->out, F_SETFL, O_NONBLOCK), 0);
        r->c = (struct child) { .pid = pid, .pidfd = (int) syscall(SYS_pidfd_open, pid, 0) };
        assert_true(r->c.pidfd >= 0);
}

struct output_wait {
        struct run *r;
        const char *needle;
};

static bool output_has(struct fx *f, void *arg) {
        struct output_wait *w = arg;
        run_drain(w->r);
        return strstr(w->r->text, w->needle) != NULL;
}

static int tendctl_wait(struct fx *f, struct run *r) {
        run_until(f, run_exited, r, r->c.pidfd, WAIT_MS, "tendctl to exit",
                  "tendctl waits for an answer the server never sends");
        close(r->c.pidfd);
        close(r->out);
        return r->c.status;
}

static int tendctl(struct fx *f, struct run *r, const char *const *argv) {
        tendctl_start(r, false, argv);
        return tendctl_wait(f, r);
}

static void test_tendctl(void **state) {
        struct fx *f = *state;
        struct run r;
        put_record(f, "web.service", "running", 1234);

        const char *status_json[] = { "tendctl", "--control-socket", f->path, "status", "--json", "web", NULL };
        assert_int_equal(tendctl(f, &r, status_json), 0);
        json *arr = json_tokener_parse(r.text);
        assert_non_null(arr);
        assert_true(json_object_is_type(arr, json_type_array));
        assert_int_equal(json_object_array_length(arr), 1);
        assert_record(json_object_array_get_idx(arr, 0), "web.service", "running", 1234, 0);
        json_object_put(arr);

        const char *status_human[] = { "tendctl", "--control-socket", f->path, "status", "web.service", NULL };
        assert_int_equal(tendctl(f, &r, status_human), 0);
        assert_non_null(strstr(r.text, "web.service"));
        assert_non_null(strstr(r.text, "Active: active (running) since"));
        assert_non_null(strstr(r.text, "Main PID: 1234"));
        assert_null(strstr(r.text, "\033[")); /* no colour: stdout is a pipe */

        const char *list_json[] = { "tendctl", "--control-socket", f->path, "list", "--json", NULL };
        assert_int_equal(tendctl(f, &r, list_json), 0);
        assert_int_equal(r.text[0], '[');

        /* start blocks until the flight answers. */
        const char *start[] = { "tendctl", "--control-socket", f->path, "start", "web", NULL };
        tendctl_start(&r, false, start);
        wait_counter(f, &f->fake.n_start, 1, "tendctl's start reaching ops->start");
        settle(f);
        assert_false(run_exited(f, &r)); /* still waiting */
        fake_answer(&f->fake, "web.service", true, 99, "success");
        assert_int_equal(tendctl_wait(f, &r), 0);

        const char *missing[] = { "tendctl", "--control-socket", f->path, "status", "nosuch", NULL };
        assert_int_equal(tendctl(f, &r, missing), 4); /* systemctl status: no such unit */
        const char *start_missing[] = { "tendctl", "--control-socket", f->path, "start", "nosuch", "--no-block", NULL };
        assert_int_equal(tendctl(f, &r, start_missing), 5); /* systemctl start: not installed */

        char sock2[160];
        snprintf(sock2, sizeof sock2, "%s/none/control", f->dir);
        const char *not_running[] = { "tendctl", "--control-socket", sock2, "status", NULL };
        assert_int_equal(tendctl(f, &r, not_running), 5);

        const char *usage[] = { "tendctl", "--control-socket", f->path, "kill", NULL };
        assert_int_equal(tendctl(f, &r, usage), 2);
        const char *kill_cmd[] = { "tendctl", "--control-socket", f->path, "kill", "web", "--signal", "HUP", "--main", NULL };
        assert_int_equal(tendctl(f, &r, kill_cmd), 0);
        assert_int_equal(f->fake.last_sig, SIGHUP);
        assert_true(f->fake.last_main);
        f->fake.reload_error = -EOPNOTSUPP;
        const char *reload[] = { "tendctl", "--control-socket", f->path, "reload", "web", NULL };
        assert_int_equal(tendctl(f, &r, reload), 3); /* systemctl: reload does not apply */

        if (geteuid() == 0) { /* permission denied: exit 4 */
                char dir[128];
                snprintf(dir, sizeof dir, "%s/run", f->dir);
                assert_int_equal(chmod(f->dir, 0755), 0);
                assert_int_equal(chmod(dir, 0755), 0);
                assert_int_equal(chmod(f->path, 0666), 0);
                const char *denied[] = { "tendctl", "--control-socket", f->path, "list", NULL };
                tendctl_start(&r, true, denied);
                assert_int_equal(tendctl_wait(f, &r), 4);
        } else
                print_message("not run: tendctl as nobody (exit 4) needs root\n");
}

/* tendctl watch re-watches after a lag: every change once, no duplicate,
 * a key deleted during the lag shown deleted. */
static void test_tendctl_watch(void **state) {
        struct fx *f = *state;
        struct run r;
        put_record(f, "web.service", "running", 1);
        put_record(f, "db.service", "running", 2);
        assert_int_equal(store_create(f->store, STORE_DURABLE, "service/gone.service", "{\"version\":1}", 13, 0, NULL), 1);

        const char *watch[] = { "tendctl", "--control-socket", f->path, "watch", "service/", "--json", NULL };
        tendctl_start(&r, false, watch);
        struct output_wait w = { &r, "gone.service" };
        run_until(f, output_has, &w, r.out, WAIT_MS, "tendctl printing the snapshot",
                  "tendctl did not send its watch, or the server sent no snapshot");
        for (int i = 0; i < 8; i++) /* overflow the watch (capacity 4) between two loop iterations */
                put_record(f, "web.service", i % 2 ? "running" : "stopping", 1);
        assert_int_equal(store_delete(f->store, STORE_DURABLE, "service/gone.service", STORE_REV_ANY, NULL), 1);
        w.needle = "\"event\":\"delete\"";
        run_until(f, output_has, &w, r.out, WAIT_MS, "tendctl showing the delete after its re-watch",
                  "tendctl did not re-watch after \"lagged\", or did not dedupe against the new snapshot");
        settle(f);
        run_drain(&r);
        (void) kill(r.c.pid, SIGTERM);
        tendctl_wait(f, &r);

        /* Each (key, revision) once; db shown once; web's last revision (11) shown. */
        unsigned db = 0, web_last = 0, lines = 0;
        char seen[64][64];
        for (char *line = strtok(r.text, "\n"); line; line = strtok(NULL, "\n")) {
                json *o = json_tokener_parse(line);
                assert_non_null(o);
                char id[64];
                snprintf(id, sizeof id, "%s@%" PRId64, str(o, "key"), num(o, "revision"));
                for (unsigned i = 0; i < lines; i++)
                        assert_string_not_equal(seen[i], id);
                assert_true(lines < 64);
                snprintf(seen[lines++], sizeof seen[0], "%s", id);
                if (streq(str(o, "key"), "service/db.service"))
                        db++;
                if (streq(str(o, "key"), "service/web.service") && num(o, "revision") == 11)
                        web_last++;
                assert_non_null(str(o, "name"));
                assert_non_null(str(o, "event"));
                assert_string_equal(str(o, "keyspace"), "durable");
                json_object_put(o);
        }
        assert_int_equal(db, 1);
        assert_int_equal(web_last, 1);
}

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_socket_path),
                cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stale_and_live, setup, teardown),
                cmocka_unit_test_setup_teardown(test_status, setup, teardown),
                cmocka_unit_test_setup_teardown(test_status_batches, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_shared, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_outcome_messages, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_cancelled_answer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_no_block, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_client_leaves, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unit_commands, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
                cmocka_unit_test_setup_teardown(test_max_clients, setup, teardown),
                cmocka_unit_test_setup_teardown(test_silent_client_dropped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peer_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peer_group, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_lagged, setup_small_watch, teardown),
                cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tendctl, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reload_waits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_daemon_reexec_deferred, setup_short_idle, teardown),
                cmocka_unit_test_setup_teardown(test_cluster_ticket, setup_short_idle, teardown),
                cmocka_unit_test_setup_teardown(test_tendctl_watch, setup_small_watch, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
