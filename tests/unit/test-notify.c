/* SPDX-License-Identifier: MIT */
/*
 * The sd_notify module (supervisor/exec/notify.h) and the watchdog leases
 * (supervisor/exec/watchdog.h): the datagram parser alone; a unit's socket with
 * real datagrams (credentials, fds, sizes, the per-wake-up bound); the
 * environment; tend's own notifications to a socket the test binds; leases
 * in a store on a test clock, so expiry is deterministic.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "notify.h"
#include "store.h"
#include "unit-exec.h"
#include "watchdog.h"
#include "testutil.h"

/* ---- the parser ---- */

static int parse(const char *text, struct notify_message *m) {
        static char buf[NOTIFY_DATAGRAM_MAX + 2];
        size_t n = strlen(text);
        memcpy(buf, text, n);
        return notify_parse(buf, n, m);
}

static void test_parse_keys(void **state) {
        struct notify_message m;
        assert_int_equal(parse("READY=1\nSTATUS=Hello, wörld\nMAINPID=42\nWATCHDOG=1\nWATCHDOG=trigger\n"
                               "STOPPING=1\nRELOADING=1\nEXTEND_TIMEOUT_USEC=5000000\nERRNO=2\nBARRIER=1\nX_Y=z",
                               &m),
                         0);
        assert_true(m.ready && m.watchdog_ping && m.watchdog_trigger && m.stopping && m.reloading);
        assert_string_equal(m.status, "Hello, wörld");
        assert_int_equal(m.main_pid, 42);
        assert_true(m.has_extend_timeout);
        assert_int_equal(m.extend_timeout_usec, 5000000);
        assert_true(m.has_errno);
        assert_int_equal(m.status_errno, 2);
        assert_int_equal(m.n_invalid, 0);

        /* Nothing recognised: all false; the first of a key counts. */
        assert_int_equal(parse("READY=0\nREADY=11\nready=1\n READY=1\nSTATUS=a\nSTATUS=b\nMAINPID=7\nMAINPID=8", &m), 0);
        assert_false(m.ready);
        assert_string_equal(m.status, "a");
        assert_int_equal(m.main_pid, 7);
        assert_int_equal(parse("", &m), 0);
        assert_false(m.ready || m.status || m.main_pid || m.has_errno || m.has_extend_timeout);
        assert_int_equal(parse("STATUS=", &m), 0);
        assert_string_equal(m.status, "");
}

static void test_parse_invalid(void **state) {
        struct notify_message m;
        assert_int_equal(parse("MAINPID=abc\nMAINPID=0\nMAINPID=-1\nMAINPID=99999999999\nERRNO=5000\n"
                               "EXTEND_TIMEOUT_USEC=1e6\nSTATUS=\xff\xfe\nREADY=1",
                               &m),
                         0);
        assert_int_equal(m.main_pid, 0);
        assert_false(m.has_errno);
        assert_false(m.has_extend_timeout);
        assert_null(m.status);
        assert_true(m.ready); /* the rest of the datagram still counts */
        assert_int_equal(m.n_invalid, 4); /* only the first MAINPID= counts */
        /* An overlong encoding and a surrogate are not UTF-8. */
        assert_int_equal(parse("STATUS=\xc0\xaf", &m), 0);
        assert_null(m.status);
        assert_int_equal(parse("STATUS=\xed\xa0\x80", &m), 0);
        assert_null(m.status);

        char buf[NOTIFY_DATAGRAM_MAX + 2] = "READY=1";
        assert_int_equal(notify_parse(buf, 9, &m), -EBADMSG); /* "READY=1\0\0" */
        assert_int_equal(notify_parse(buf, NOTIFY_DATAGRAM_MAX + 1, &m), -EMSGSIZE);
        assert_int_equal(notify_parse(NULL, 0, &m), -EINVAL);
}

/* ---- a unit's socket ---- */

struct received {
        int n;
        pid_t sender;
        bool ready;
        char status[64];
};

static void on_message(void *userdata, pid_t sender, const struct notify_message *m) {
        struct received *r = userdata;
        r->n++;
        r->sender = sender;
        r->ready = m->ready;
        snprintf(r->status, sizeof r->status, "%s", m->status ? m->status : "");
}

static int client_to(const struct notify_socket *s) {
        const char *a = notify_socket_address(s);
        assert_int_equal(a[0], '@');
        assert_true(strlen(a) <= 8); /* short: "@" and the kernel's 5 hex digits */
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n = strlen(a);
        memcpy(sa.sun_path, a, n);
        sa.sun_path[0] = '\0';
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n)), 0);
        return fd;
}


static void test_socket_roundtrip(void **state) {
        struct received r = {};
        struct notify_socket *s = NULL;
        int fds_before = count_fds();
        assert_int_equal(notify_socket_new(NULL, "t.service", NULL, on_message, &r, &s), 0);
        int c = client_to(s);
        assert_true(send(c, "READY=1\nSTATUS=up", 17, 0) == 17);
        assert_int_equal(notify_socket_dispatch(s), 1);
        assert_int_equal(r.n, 1);
        assert_int_equal(r.sender, getpid());
        assert_true(r.ready);
        assert_string_equal(r.status, "up");
        assert_int_equal(notify_socket_dispatch(s), 0);

        /* 4096 bytes pass; 4097 are dropped whole; so is a NUL. */
        char big[NOTIFY_DATAGRAM_MAX + 1];
        memset(big, 'x', sizeof big);
        memcpy(big, "STATUS=", 7);
        assert_true(send(c, big, NOTIFY_DATAGRAM_MAX, 0) == NOTIFY_DATAGRAM_MAX);
        assert_true(send(c, big, NOTIFY_DATAGRAM_MAX + 1, 0) == NOTIFY_DATAGRAM_MAX + 1);
        assert_true(send(c, "READY=1\0", 8, 0) == 8);
        assert_int_equal(notify_socket_dispatch(s), 3);
        assert_int_equal(r.n, 2);

        /* Every fd a datagram carries is closed at once (systemd-notify's
         * BARRIER=1 waits for the peer of the pipe it sends to hang up). */
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        struct iovec iov = { .iov_base = (void *) "BARRIER=1", .iov_len = 9 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &p[1], sizeof(int));
        assert_true(sendmsg(c, &mh, 0) == 9);
        close(p[1]);
        assert_int_equal(notify_socket_dispatch(s), 1);
        char b;
        assert_int_equal(read(p[0], &b, 1), 0); /* EOF: tend's copy is closed too */
        close(p[0]);

        /* A burst: at most NOTIFY_DISPATCH_MAX per call (the kernel's queue may hold fewer). */
        int sent = 0;
        while (sent < 2 * NOTIFY_DISPATCH_MAX && send(c, "WATCHDOG=1", 10, 0) == 10)
                sent++;
        int got = notify_socket_dispatch(s);
        assert_int_equal(got, sent < NOTIFY_DISPATCH_MAX ? sent : NOTIFY_DISPATCH_MAX);
        while (got < sent) {
                int k = notify_socket_dispatch(s);
                assert_true(k > 0);
                got += k;
        }
        close(c);
        notify_socket_free(s);
        assert_int_equal(count_fds(), fds_before);
}

static int n_logged;
static char last_log[512];
static void sink(int level, const char *msg, void *userdata) {
        n_logged++;
        snprintf(last_log, sizeof last_log, "%s", msg);
}

static void test_reject_ratelimited(void **state) {
        struct received r = {};
        struct notify_socket *s = NULL;
        assert_int_equal(notify_socket_new(NULL, "t.service", NULL, on_message, &r, &s), 0);
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_WARNING);
        n_logged = 0;
        for (int i = 0; i < 100; i++)
                notify_socket_log_rejected(s, 1234, "NotifyAccess=main and it is not the main process");
        log_set_sink(NULL, NULL);
        log_set_max_level(LOG_EMERG);
        assert_int_equal(n_logged, NOTIFY_REJECT_LOG_BURST);
        assert_non_null(strstr(last_log, "t.service: notification from pid 1234 ignored: NotifyAccess=main"));
        assert_int_equal(notify_socket_log_rejected(s, 1, "x") - 1, 100);
        notify_socket_free(s);
}

static void test_env_add(void **state) {
        char **env = NULL;
        assert_int_equal(unit_env_set(&env, "A=1"), 0);
        assert_int_equal(notify_env_add(&env, "@abcde", 2 * USEC_PER_SEC), 0);
        assert_string_equal(env[1], "NOTIFY_SOCKET=@abcde");
        assert_string_equal(env[2], "WATCHDOG_USEC=2000000");
        assert_null(env[3]);
        strv_free(env);
        /* A unit's own Environment=NOTIFY_SOCKET= wins, as in systemd. */
        env = NULL;
        assert_int_equal(unit_env_set(&env, "NOTIFY_SOCKET=/own"), 0);
        assert_int_equal(notify_env_add(&env, "@abcde", 0), 0);
        assert_string_equal(env[0], "NOTIFY_SOCKET=/own");
        assert_null(env[1]);
        strv_free(env);
}

/* ---- tend's own notifications ---- */

static int recv_text(int fd, char *buf, size_t size) {
        ssize_t n = recv(fd, buf, size - 1, MSG_DONTWAIT);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return (int) n;
}

static void test_upstream(void **state) {
        int srv = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(srv >= 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "/tmp/test-notify.%d", (int) getpid());
        unlink(sa.sun_path);
        assert_int_equal(bind(srv, (struct sockaddr *) &sa, sizeof sa), 0);
        char pid[16];
        snprintf(pid, sizeof pid, "%d", (int) getpid());
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        setenv("WATCHDOG_USEC", "40000", 1);
        setenv("WATCHDOG_PID", pid, 1);
        setenv("WATCHDOG_OTHER", "x", 1);

        sd_event *e = NULL;
        assert_int_equal(sd_event_new(&e), 0);
        struct notify_upstream *u = NULL;
        assert_int_equal(notify_upstream_new(e, &u), 0);
        assert_non_null(u);
        assert_int_equal(notify_upstream_watchdog_usec(u), 40000);
        /* Gone from tend's environment: no child inherits them. */
        assert_null(getenv("NOTIFY_SOCKET"));
        assert_null(getenv("WATCHDOG_USEC"));
        assert_null(getenv("WATCHDOG_PID"));
        assert_null(getenv("WATCHDOG_OTHER"));

        char b[256];
        notify_upstream_update(u, false, 2, 1, 0);
        assert_true(recv_text(srv, b, sizeof b) > 0);
        assert_string_equal(b, "STATUS=2 units: 1 running, 0 failed");
        notify_upstream_update(u, false, 2, 1, 0); /* unchanged: nothing */
        assert_int_equal(recv_text(srv, b, sizeof b), -EAGAIN);
        notify_upstream_update(u, true, 2, 1, 1);
        assert_true(recv_text(srv, b, sizeof b) > 0);
        assert_string_equal(b, "READY=1\nSTATUS=2 units: 1 running, 1 failed");
        notify_upstream_update(u, true, 2, 2, 0); /* READY=1 once */
        assert_true(recv_text(srv, b, sizeof b) > 0);
        assert_string_equal(b, "STATUS=2 units: 2 running, 0 failed");
        notify_upstream_reloading(u, true);
        assert_true(recv_text(srv, b, sizeof b) > 0);
        assert_true(strncmp(b, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0);
        notify_upstream_reloading(u, false);
        assert_true(recv_text(srv, b, sizeof b) > 0);
        assert_string_equal(b, "READY=1");

        /* WATCHDOG=1 at half of WATCHDOG_USEC, from a one-shot timer. */
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        int pings = 0;
        while (pings < 3) {
                assert_true(sd_event_run(e, 1000000) > 0);
                while (recv_text(srv, b, sizeof b) > 0) {
                        assert_string_equal(b, "WATCHDOG=1");
                        pings++;
                }
        }
        usec_t dt = now_usec(CLOCK_MONOTONIC) - t0;
        /* Never early (the timer is a deadline); late only as far as a loaded
         * machine delays a wake-up — speed is not judged here. */
        /* The first ping's deadline was armed before t0 was read: only the two
         * intervals after it are whole. */
        if (dt < 2 * 20000)
                fail_msg("3 pings in %llu µs: faster than half of WATCHDOG_USEC", (unsigned long long) dt);

        notify_upstream_stopping(u);
        notify_upstream_stopping(u);
        assert_true(recv_text(srv, b, sizeof b) > 0);
        assert_string_equal(b, "STOPPING=1");
        assert_int_equal(recv_text(srv, b, sizeof b), -EAGAIN);
        notify_upstream_free(u);
        sd_event_unref(e);
        close(srv);
        unlink(sa.sun_path);

        /* Without NOTIFY_SOCKET nothing is sent; a foreign WATCHDOG_PID is not tend's. */
        setenv("WATCHDOG_USEC", "40000", 1);
        setenv("WATCHDOG_PID", "1", 1);
        assert_int_equal(sd_event_new(&e), 0);
        u = (struct notify_upstream *) 1;
        assert_int_equal(notify_upstream_new(e, &u), 0);
        assert_null(u);
        assert_null(getenv("WATCHDOG_USEC"));
        notify_upstream_update(NULL, true, 0, 0, 0);
        sd_event_unref(e);
}

/* ---- watchdog leases (test clock) ---- */

struct tclock {
        usec_t now, armed;
};
static usec_t tc_now(void *ud) {
        return ((struct tclock *) ud)->now;
}
static int tc_arm(void *ud, usec_t deadline) {
        ((struct tclock *) ud)->armed = deadline;
        return 0;
}

struct expiries {
        int n, rechecks;
        char name[64];
        uint64_t revision;
};
static void on_expired(void *ud, const char *name, uint64_t revision) {
        struct expiries *x = ud;
        if (!name) {
                x->rechecks++;
                return;
        }
        x->n++;
        snprintf(x->name, sizeof x->name, "%s", name);
        x->revision = revision;
}

static void test_leases(void **state) {
        struct tclock tc = { .now = 1000 * USEC_PER_SEC, .armed = USEC_INFINITY };
        struct store_clock clock = { .now = tc_now, .arm = tc_arm, .userdata = &tc };
        struct store *st = NULL;
        assert_int_equal(store_new(&(struct store_options) { .clock = &clock }, &st), 0);
        struct expiries x = {};
        struct watchdog_leases *w = NULL;
        assert_int_equal(watchdog_leases_new(NULL, st, on_expired, &x, &w), 0);
        assert_int_equal(tc.armed, USEC_INFINITY); /* no lease, no timer */

        uint64_t rev = 0;
        assert_int_equal(watchdog_lease_set(w, "a.service", USEC_PER_SEC, 42, &rev), 1);
        assert_true(rev > 0);
        assert_int_equal(tc.armed, tc.now + USEC_PER_SEC);
        struct store_event *ev = NULL;
        assert_int_equal(store_get(st, STORE_EPHEMERAL, "watchdog/a.service", &ev), 0);
        assert_string_equal(ev->value, "{\"main_pid\":42,\"usec\":1000000}");
        store_event_unref(ev);

        /* Renewed within the TTL: alive past the first deadline. */
        tc.now += 900 * USEC_PER_MSEC;
        uint64_t before = rev;
        assert_int_equal(watchdog_lease_set(w, "a.service", USEC_PER_SEC, 42, &rev), 1);
        assert_true(rev > before);
        tc.now += 900 * USEC_PER_MSEC;
        assert_int_equal(store_run_expiry(st), 0);
        assert_int_equal(watchdog_leases_dispatch(w), 0);
        assert_int_equal(x.n, 0);
        assert_int_equal(watchdog_lease_alive(w, "a.service", rev), 1);

        /* Not renewed: the store expires it; the watch reports it with its revision. */
        tc.now += 100 * USEC_PER_MSEC;
        assert_int_equal(store_run_expiry(st), 1);
        assert_int_equal(watchdog_leases_dispatch(w), 0);
        assert_int_equal(x.n, 1);
        assert_string_equal(x.name, "a.service");
        assert_int_equal(x.revision, rev);
        assert_int_equal(watchdog_lease_alive(w, "a.service", rev), 0);
        /* A late renewal does not revive it. */
        before = rev;
        assert_int_equal(watchdog_lease_set(w, "a.service", USEC_PER_SEC, 42, &rev), 0);
        assert_int_equal(rev, before);

        /* tend's own delete (a stop) is not an expiry. */
        rev = 0;
        assert_int_equal(watchdog_lease_set(w, "b.service", USEC_PER_SEC, 7, &rev), 1);
        assert_int_equal(watchdog_lease_clear(w, "b.service", &rev), 0);
        assert_int_equal(rev, 0);
        assert_int_equal(watchdog_leases_dispatch(w), 0);
        assert_int_equal(x.n, 1);
        assert_int_equal(tc.armed, USEC_INFINITY);
        assert_int_equal(watchdog_lease_clear(w, "b.service", &rev), 0); /* vacuous */

        watchdog_leases_free(w);
        store_unref(st);
}

/* parsefix (M7): with a directory the socket is a path any user may connect to
 * (PrivateNetwork=: an abstract address is out of reach); adopted after a
 * reexec it keeps its path; freed, the file goes. */
static void test_socket_path(void **state) {
        char dir[] = "/tmp/test-notify-XXXXXX", sub[64];
        assert_non_null(mkdtemp(dir));
        snprintf(sub, sizeof sub, "%s/notify", dir);
        struct received r = {};
        struct notify_socket *s = NULL;
        mode_t mask = umask(077); /* tend's umask does not narrow the modes */
        assert_int_equal(notify_socket_new(NULL, "t.service", sub, on_message, &r, &s), 0);
        umask(mask);
        const char *a = notify_socket_address(s);
        assert_true(strncmp(a, sub, strlen(sub)) == 0 && a[strlen(sub)] == '/' && strlen(a) == strlen(sub) + 17);
        struct stat st;
        assert_int_equal(stat(a, &st), 0);
        assert_true(S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0666);
        assert_int_equal(stat(sub, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0755);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", a);
        int c = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(c >= 0);
        assert_true(sendto(c, "READY=1", 7, 0, (struct sockaddr *) &sa, sizeof sa) == 7);
        assert_int_equal(notify_socket_dispatch(s), 1);
        assert_true(r.ready);
        char path[sizeof sa.sun_path + 1];
        snprintf(path, sizeof path, "%s", a);
        sd_event *e = NULL;
        assert_int_equal(sd_event_new(&e), 0);
        struct notify_socket *t = NULL; /* as reexec-restore hands the fd on */
        assert_int_equal(notify_socket_adopt(e, "t.service", on_message, &r, dup(notify_socket_fd(s)), &t), 0);
        assert_string_equal(notify_socket_address(t), path);
        notify_socket_free(t);
        assert_int_equal(access(path, F_OK), -1); /* removed by whoever frees it */
        notify_socket_free(s);
        sd_event_unref(e);
        close(c);
        assert_int_equal(rmdir(sub), 0);
        assert_int_equal(rmdir(dir), 0);
        (void) state;
}

int main(void) {
        log_set_max_level(LOG_EMERG);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_keys),
                cmocka_unit_test(test_parse_invalid),
                cmocka_unit_test(test_socket_roundtrip),
                cmocka_unit_test(test_socket_path),
                cmocka_unit_test(test_reject_ratelimited),
                cmocka_unit_test(test_env_add),
                cmocka_unit_test(test_upstream),
                cmocka_unit_test(test_leases),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
