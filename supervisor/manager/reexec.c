/* SPDX-License-Identifier: MIT */
/*
 * reexec: the old tend's side of daemon-reexec (reexec.h): settle, check
 * the new binary, write the state into a memfd, execve.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "libexit.h"
#include "log.h"
#include "logs-handover.h"
#include "macro.h"
#include "manager.h"
#include "reexec.h"
#include "reexec-cluster.h"
#include "unit-file.h"
#include "unit-restore.h"

extern char **environ;

static struct {
        char **argv;                 /* main's */
        char path[PATH_MAX];         /* the binary tend was started from, resolved at start */
        char *notify_socket, *watchdog_usec, *watchdog_pid; /* the service manager's, or NULL */
} saved;

static char *env_copy(const char *name) {
        const char *v = getenv(name);
        return v ? strdup(v) : NULL;
}

void reexec_remember(int argc, char **argv) {
        saved.argv = argv;
        ssize_t n = readlink("/proc/self/exe", saved.path, sizeof saved.path - 1);
        saved.path[n > 0 ? n : 0] = '\0';
        saved.notify_socket = env_copy("NOTIFY_SOCKET");
        saved.watchdog_usec = env_copy("WATCHDOG_USEC");
        saved.watchdog_pid = env_copy("WATCHDOG_PID");
}

int reexec_check_version(const char *arg) {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        bool ok = !errno && *arg && !*end && v >= 1 && v <= TEND_STATE_VERSION;
        if (ok)
                printf(REEXEC_CHECK_ANSWER "\n", (int) v);
        else
                printf("tend state format %s not readable: this tend reads 1 to %d\n", arg, TEND_STATE_VERSION);
        return ok ? 0 : 1;
}

/* ---- the new binary's answer, watched from the loop (QA M1) ---- */

/* Spawns `path --check-state-version N` with a clean signal mask, its
 * stdout the write end of a pipe whose read end (O_NONBLOCK) is *ret_out. */
static int spawn_check(const char *path, pid_t *ret_pid, int *ret_out) {
        char version[16], *argv[] = { (char *) path, (char *) "--check-state-version", version, NULL };
        snprintf(version, sizeof version, "%d", TEND_STATE_VERSION);
        int out[2];
        if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0)
                return negative_errno();
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none;
        sigemptyset(&none);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO); /* dup2 clears O_CLOEXEC */
        posix_spawnattr_init(&attr);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
        int k = -posix_spawn(ret_pid, path, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        close(out[1]);
        if (k < 0) {
                close(out[0]);
                return k;
        }
        *ret_out = out[0];
        return 0;
}

/* Whether what the binary wrote (read after it exited: the pipe holds it)
 * is exactly tend's answer for this format: a binary that merely exits 0
 * (not tend, or a tend that cannot resume) is refused (QA M2). */
static bool answer_is_tend(int fd) {
        char want[64], got[64];
        snprintf(want, sizeof want, REEXEC_CHECK_ANSWER "\n", TEND_STATE_VERSION);
        ssize_t n = read(fd, got, sizeof got - 1);
        got[n > 0 ? n : 0] = '\0';
        return n > 0 && streq(got, want);
}

/* The check under way: `BINARY --check-state-version N`, tracked by the
 * reaper (never reaped behind its back: tend may be a subreaper or PID 1),
 * its exit seen through a watch on the hub, its deadline a timer; the
 * loop runs on meanwhile. One per tend (one manager per process). */
static struct reexec_check {
        struct manager *m;
        struct exit_process *process;
        struct exit_watch *watch;
        sd_event_source *exited, *deadline;
        int out;        /* the read end of its stdout */
        bool timed_out; /* killed at the deadline */
} *check;

static void check_free(void) {
        if (!check)
                return;
        check->exited = sd_event_source_disable_unref(check->exited);
        check->deadline = sd_event_source_disable_unref(check->deadline);
        check->watch = exit_watch_free(check->watch);
        check->process = exit_process_unref(check->process);
        safe_close(check->out);
        free(check);
        check = NULL;
}

static void reexec_abandon(struct manager *m, const char *why) {
        log_error("not re-executing: %s", why);
        control_server_reexec_abandoned(m->control, why);
}

static int reexec_try(sd_event_source *s, uint64_t usec, void *userdata);

/* The binary reads the state: the units settle, then the exec (reexec_now). */
static void reexec_settle(struct manager *m) {
        if (m->shutting_down) {
                reexec_abandon(m, "tend is shutting down");
                return;
        }
        /* After this event: what it changes is settled first. */
        int k = sd_event_add_time_relative(m->event, &m->reexec_retry, CLOCK_MONOTONIC, 0, 1, reexec_try, m);
        if (k < 0) {
                reexec_abandon(m, strerror(-k));
                return;
        }
        m->reexec_until = now_usec(CLOCK_MONOTONIC) + REEXEC_SETTLE_USEC;
        log_info("daemon-reexec: %s", saved.path);
}

/* The check exited (reason) or could not be watched (NULL): its verdict. */
static void check_done(const struct exit_reason *reason) {
        struct manager *m = check->m;
        char why[PATH_MAX + 160];
        bool exited0 = reason && reason->kind == EXIT_REASON_EXITED && reason->status == 0;
        bool ok = exited0 && !check->timed_out && answer_is_tend(check->out);
        snprintf(why, sizeof why, "%s cannot read tend's state format %d (%s): tend runs on as it is", saved.path,
                 TEND_STATE_VERSION, check->timed_out ? "no answer in time" : !reason ? "its exit cannot be seen" :
                 exited0 ? "its answer is not tend's \"" REEXEC_CHECK_ANSWER_TEXT "\"" : "it said so");
        check_free();
        if (ok)
                reexec_settle(m);
        else
                reexec_abandon(m, why);
}

static int check_exited(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct exit_reason reason;
        if (exit_watch_result(check->watch, NULL) == -EAGAIN)
                return 0;
        int k = exit_hub_take(check->m->hub, exit_process_id(check->process), &reason);
        check_done(k < 0 ? NULL : &reason);
        return 0;
}

static int check_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        check->timed_out = true;
        (void) exit_process_signal(check->process, SIGKILL); /* its exit follows */
        return 0;
}

/* Starts `path --check-state-version N`: 0 (its verdict comes from the
 * loop: check_done), or a negative errno with why filled. */
static int check_start(struct manager *m, const char *path, char *why, size_t size) {
        pid_t pid = 0;
        int k;
        if (!(check = calloc(1, sizeof *check)))
                return -ENOMEM;
        *check = (struct reexec_check) { .m = m, .out = -1 };
        k = spawn_check(path, &pid, &check->out);
        if (k >= 0 && (k = exit_reaper_track(m->reaper, pid, &check->process)) < 0) {
                (void) kill(pid, SIGKILL); /* untracked: reaped here, at once */
                (void) waitpid(pid, NULL, 0);
        }
        if (k >= 0)
                k = exit_hub_watch(m->hub, exit_process_id(check->process), NULL, NULL, &check->watch, NULL);
        if (k >= 0 && k != EXIT_WATCH_LIVE)
                k = -ECHILD; /* tracked and not dispatched yet: always live */
        int wfd = k >= 0 ? exit_watch_fd(check->watch) : -1;
        if (k >= 0)
                k = wfd < 0 ? wfd : sd_event_add_io(m->event, &check->exited, wfd, EPOLLIN, check_exited, NULL);
        if (k >= 0)
                k = sd_event_add_time_relative(m->event, &check->deadline, CLOCK_MONOTONIC,
                                               REEXEC_CHECK_TIMEOUT_MS * USEC_PER_MSEC, 0, check_deadline, NULL);
        if (k < 0) {
                if (check->process)
                        (void) exit_process_signal(check->process, SIGKILL); /* reaped by the reaper, untaken */
                check_free();
                snprintf(why, size, "%s: %s", path, strerror(-k));
                return k;
        }
        return 0;
}

void manager_reexec_cancel(struct manager *m) {
        if (check && check->m == m) {
                (void) exit_process_signal(check->process, SIGKILL);
                check_free();
        }
}

/* ---- what is carried ---- */

/* Whether u can be carried now: 1, or 0 (wait: *why says for what). */
static bool unit_carriable(const struct unit *u, const char **why) {
        const struct unit_rare *r = unit_rare_peek(u);
        if (!unit_restorable(u, why) || (r && (r->pid_file_retry || r->leftovers_deadline)) ||
            data(u)->removed) {
                *why = *why ? *why : "is in transition";
                return false;
        }
        return true;
}

/* 1 when every unit can be carried, else 0 (wait), naming the unit in why. */
static int units_carriable(struct manager *m, char *why, size_t size) {
        for (size_t i = 0; i < m->n_units; i++) {
                const char *w = NULL;
                if (!unit_carriable(m->units[i], &w)) {
                        snprintf(why, size, "%s %s", m->units[i]->name, w);
                        return 0;
                }
        }
        return 1;
}

/* Whether the new tend could load u from DIR as it is now (its file, or its
 * template's for an instance), under its name: 0, or a negative errno with
 * why filled (the first error, with its FILE:LINE). The files' messages are
 * not logged here: the new tend logs them at its load. */
static int unit_loadable(struct manager *m, const struct unit *u, char *why, size_t size) {
        struct unit_file *f = NULL;
        _cleanup_free_ char *message = NULL;
        int level = log_get_max_level();
        log_set_max_level(MIN(level, LOG_CRIT));
        int k = unit_load(m->opts->config_dir, u->name, &f, &message);
        log_set_max_level(level);
        if (k >= 0 && !streq(f->name, u->name))
                k = -EXDEV; /* now an alias of another unit */
        if (k < 0)
                snprintf(why, size, "%s runs, and its file in %s does not load now (%s): the new tend could not "
                         "resume it; fix its file or stop it first",
                         u->name, m->opts->config_dir,
                         message ? message : k == -ENOENT ? "gone" : k == -ERFKILL ? "masked" :
                         k == -EXDEV ? "an alias of another unit now" : strerror(-k));
        unit_file_free(f);
        return k;
}

/* Every unit with something of it running (not inactive, not failed) is one
 * the new tend can resume (QA H2: a unit running on its last good file — its
 * file does not load now — or whose file is gone would be dropped by the new
 * tend, its processes unsupervised): 0, or -ESTALE with why naming the first
 * that is not. Each such unit's file is parsed: O(running units). */
static int units_resumable(struct manager *m, char *why, size_t size) {
        for (size_t i = 0; i < m->n_units; i++) {
                const struct unit *u = m->units[i];
                if (u->pos != UNIT_POS_INACTIVE && u->pos != UNIT_POS_FAILED &&
                    unit_loadable(m, u, why, size) < 0)
                        return -ESTALE;
        }
        return 0;
}

/* ---- the state document: one function per kind of thing carried ---- */

static json_object *hex_string(const void *p, size_t n) {
        static const char digits[] = "0123456789abcdef";
        _cleanup_free_ char *s = malloc(2 * n + 1);
        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                s[2 * i] = digits[((const uint8_t *) p)[i] >> 4];
                s[2 * i + 1] = digits[((const uint8_t *) p)[i] & 15];
        }
        s[2 * n] = '\0';
        return json_object_new_string(s);
}

/* The unit's position, counts, times, outcome and start-limit history. */
static int save_unit_position(json_object *o, const struct unit *u) {
        struct unit_saved s;
        unit_saved_get(u, &s);
        json_object *starts = json_object_new_array();
        for (unsigned i = 0; starts && i < s.n_starts; i++)
                if (json_object_array_add(starts, json_object_new_uint64(s.starts[i])) < 0)
                        break;
        int k = 0;
        /* Positions and results by name: the document does not depend on the enums' order. */
        if ((k = reexec_state_add(o, "pos", json_object_new_string(unit_pos_to_string(s.pos)))) < 0 ||
            (k = reexec_state_add(o, "result", json_object_new_string(unit_result_to_string(s.result)))) < 0 ||
            (k = reexec_state_add(o, "want_up", json_object_new_boolean(s.want_up))) < 0 ||
            (k = reexec_state_add(o, "finished", json_object_new_boolean(s.finished))) < 0 ||
            (k = reexec_state_add(o, "watchdog_held", json_object_new_boolean(s.watchdog_held))) < 0 ||
            (k = reexec_state_add(o, "main_pid", json_object_new_int(s.main_pid))) < 0 ||
            (k = reexec_state_add(o, "since_realtime", json_object_new_uint64(s.since_realtime))) < 0 ||
            (k = reexec_state_add(o, "since_monotonic", json_object_new_uint64(s.since_monotonic))) < 0 ||
            (k = reexec_state_add(o, "deadline", json_object_new_uint64(s.deadline))) < 0 ||
            (k = reexec_state_add(o, "restarts", json_object_new_uint64(s.restarts))) < 0 ||
            (k = reexec_state_add(o, "restart_step", json_object_new_int64(s.restart_step))) < 0 || (k = reexec_state_add(o, "starts", starts)) < 0)
                return k;
        if (s.has_last_exit && ((k = reexec_state_add(o, "last_exit_kind", json_object_new_int(s.last_exit.kind))) < 0 ||
                                (k = reexec_state_add(o, "last_exit_status", json_object_new_int(s.last_exit.status))) < 0 ||
                                (k = reexec_state_add(o, "last_exit_core", json_object_new_int(s.last_exit.core_dumped))) < 0))
                return k;
        if (s.status_text && (k = reexec_state_add(o, "status_text", json_object_new_string(s.status_text))) < 0)
                return k;
        return 0;
}

/* Its last failed command (issue 18: status's "Process:" line, show's
 * FailedCommand*), if it has one: an object "failure". A key added to
 * format 2 (a tend without it resumes without the line). */
static int save_unit_failure(json_object *o, const struct unit *u) {
        const struct unit_rare *r = unit_rare_peek(u);
        const struct unit_failure *f = r ? r->failure : NULL;
        if (!f)
                return 0;
        json_object *j = json_object_new_object();
        int k = reexec_state_add(o, "failure", j);
        if (k >= 0)
                k = reexec_state_add(j, "key", json_object_new_string(f->key));
        if (k >= 0)
                k = reexec_state_add(j, "index", json_object_new_int64(f->index));
        if (k >= 0)
                k = reexec_state_add(j, "n", json_object_new_int64(f->n));
        if (k >= 0)
                k = reexec_state_add(j, "pid", json_object_new_int(f->pid));
        if (k >= 0)
                k = reexec_state_add(j, "exec_errno", json_object_new_int(f->exec_errno));
        if (k >= 0)
                k = reexec_state_add(j, "kind", json_object_new_int(f->reason.kind));
        if (k >= 0)
                k = reexec_state_add(j, "status", json_object_new_int(f->reason.status));
        if (k >= 0)
                k = reexec_state_add(j, "core", json_object_new_int(f->reason.core_dumped));
        if (k >= 0)
                k = reexec_state_add(j, "realtime", json_object_new_uint64(f->realtime));
        if (k >= 0)
                k = reexec_state_add(j, "path", json_object_new_string(f->path));
        return k;
}

/* Which text of its file the running instance started from (file_changed),
 * and which text this tend loaded (QA L2: its messages were logged once, the
 * new tend does not log them again while the text is the same). */
static int save_unit_started_text(json_object *o, const struct unit *u) {
        const struct unit_data *d = data(u);
        int k = reexec_state_add(o, "started_text_size", json_object_new_uint64(d->started_text_size));
        if (k >= 0)
                k = reexec_state_add(o, "started_text_hash", json_object_new_uint64(d->started_text_hash));
        if (k >= 0 && u->file)
                k = reexec_state_add(o, "file_text_size", json_object_new_uint64(u->file->text_size));
        if (k >= 0 && u->file)
                k = reexec_state_add(o, "file_text_hash", json_object_new_uint64(u->file->text_hash));
        return k;
}

/* Whether this tend (or one it was re-executed from) spawned into the
 * unit's cgroup, "spawned" (QA19 H1: its survivors, KillMode=process, are
 * then left alone at the next start, not killed as a previous tend's), and
 * whether the cgroup is to be renewed before the next spawn, "renew" (a
 * cgroup.kill written: unit_group_renew); without cgroups, the process
 * groups of its earlier runs that still have members, and its leader's when
 * it is not the main process ("old_groups", QA19 M1: a stop left it, or a
 * forking daemon's own group). Keys added to format 2
 * (reexec-restore.c resume_unit_group() says what their absence means). */
static int save_unit_group(json_object *o, const struct unit *u) {
        struct unit_group *g = data(u)->group;
        int k = reexec_state_add(o, "spawned", json_object_new_boolean(unit_group_spawned(g)));
        if (k >= 0)
                k = reexec_state_add(o, "renew", json_object_new_boolean(unit_group_needs_renewal(g)));
        pid_t old[UNIT_GROUP_MAX_OLD + 1];
        size_t n = MIN(unit_group_old_groups(g, old, UNIT_GROUP_MAX_OLD), (size_t) UNIT_GROUP_MAX_OLD);
        pid_t leader = unit_group_leader(g);
        if (leader > 1 && leader != u->main_pid)
                old[n++] = leader; /* the new tend's leader is the main pid (resume_unit_main) */
        json_object *a = k >= 0 && n > 0 ? json_object_new_array() : NULL;
        if (k >= 0 && n > 0)
                k = reexec_state_add(o, "old_groups", a);
        for (size_t i = 0; k >= 0 && i < n; i++)
                k = json_object_array_add(a, json_object_new_int(old[i]));
        return k;
}

/* The unit's log pipes' read ends (by fd number; none when it holds no
 * pipe: issue 19's fd budget), the bytes tend holds of them, its ring. */
static int save_unit_logs(json_object *o, logs_stream *s, bool cloexec) {
        struct logs_handover h;
        int k = s ? logs_stream_handover_get(s, cloexec, &h) : 0;
        if (!s || k < 0 || cloexec || (h.n_pipes == 0 && !h.ring))
                return k;
        json_object *l = json_object_new_object();
        if ((k = reexec_state_add(o, "logs", l)) < 0)
                return k;
        if (h.n_pipes > 0) {
                json_object *pipes = json_object_new_array();
                if ((k = reexec_state_add(l, "pipes", pipes)) < 0 || (k = reexec_state_add(l, "shared", json_object_new_boolean(h.shared))) < 0)
                        return k;
                for (unsigned i = 0; i < h.n_pipes; i++) {
                        json_object *p = json_object_new_object();
                        if ((k = json_object_array_add(pipes, p)) < 0 ||
                            (k = reexec_state_add(p, "rfd", json_object_new_int(h.pipe[i].rfd))) < 0 ||
                            (k = reexec_state_add(p, "in", hex_string(h.pipe[i].in, h.pipe[i].in_len))) < 0)
                                return k < 0 ? k : -ENOMEM;
                }
        }
        if (h.ring && ((k = reexec_state_add(l, "ring", hex_string(h.ring, h.ring_cap))) < 0 ||
                       (k = reexec_state_add(l, "ring_head", json_object_new_uint64(h.ring_head))) < 0 ||
                       (k = reexec_state_add(l, "ring_used", json_object_new_uint64(h.ring_used))) < 0 ||
                       (k = reexec_state_add(l, "ring_count", json_object_new_uint64(h.ring_count))) < 0))
                return k;
        return 0;
}

/* The unit's notify socket (by fd number): its processes keep its address. */
static int save_unit_notify(json_object *o, const struct unit *u, bool cloexec) {
        const struct unit_rare *r = unit_rare_peek(u);
        int fd = r && r->notify ? notify_socket_fd(r->notify) : -1, f = fd >= 0 ? fcntl(fd, F_GETFD) : -1;
        if (fd < 0)
                return 0;
        if (f < 0 || fcntl(fd, F_SETFD, cloexec ? f | FD_CLOEXEC : f & ~FD_CLOEXEC) < 0)
                return -errno;
        return cloexec ? 0 : reexec_state_add(o, "notify_fd", json_object_new_int(fd));
}

/* Every unit; with cloexec, only the fds' O_CLOEXEC put back (a failed exec). */
static int save_units(struct manager *m, json_object *state, bool cloexec) {
        json_object *units = cloexec ? NULL : json_object_new_array();
        int k = cloexec ? 0 : reexec_state_add(state, "units", units);
        for (size_t i = 0; k >= 0 && i < m->n_units; i++) {
                struct unit *u = m->units[i];
                json_object *o = cloexec ? NULL : json_object_new_object();
                if (!cloexec && ((k = json_object_array_add(units, o)) < 0 ||
                                 (k = reexec_state_add(o, "name", json_object_new_string(u->name))) < 0 ||
                                 (k = save_unit_position(o, u)) < 0 || (k = save_unit_started_text(o, u)) < 0 ||
                                 (k = save_unit_failure(o, u)) < 0 || (k = save_unit_group(o, u)) < 0))
                        break;
                k = save_unit_logs(o, data(u)->logs, cloexec);
                if (k >= 0)
                        k = save_unit_notify(o, u, cloexec);
        }
        return k < 0 ? k : 0;
}

/* The control socket's listening fd, and the connections the new tend goes on serving. */
static int save_control(struct manager *m, json_object *state, bool cloexec) {
        int fd = control_server_listen_fd(m->control), f = fd >= 0 ? fcntl(fd, F_GETFD) : -1;
        if (f < 0 || fcntl(fd, F_SETFD, cloexec ? f | FD_CLOEXEC : f & ~FD_CLOEXEC) < 0)
                return -errno;
        int fds[CONTROL_MAX_CLIENTS_DEFAULT], waiting[CONTROL_MAX_CLIENTS_DEFAULT];
        size_t n = control_server_handover(m->control, fds, ELEMENTSOF(fds), cloexec);
        size_t w = control_server_handover_waiting(m->control, waiting, ELEMENTSOF(waiting), cloexec);
        json_object *conns = cloexec ? NULL : json_object_new_array();
        json_object *answer = cloexec ? NULL : json_object_new_array();
        int k = cloexec ? 0 : reexec_state_add(state, "control_fd", json_object_new_int(fd));
        if (k >= 0 && !cloexec)
                k = reexec_state_add(state, "control_conns", conns);
        if (k >= 0 && !cloexec)
                k = reexec_state_add(state, "reexec_waiting", answer);
        else
                json_object_put(answer);
        for (size_t i = 0; k >= 0 && conns && i < n; i++)
                k = json_object_array_add(conns, json_object_new_int(fds[i]));
        /* The daemon-reexec requests waiting (QA L1): answered by the new
         * tend. In "control_conns" too: a tend that does not know
         * "reexec_waiting" serves them as idle connections (their idle
         * timeout closes them: the client sees no success). */
        for (size_t i = 0; k >= 0 && answer && i < w; i++)
                if ((k = json_object_array_add(conns, json_object_new_int(waiting[i]))) >= 0)
                        k = json_object_array_add(answer, json_object_new_int(waiting[i]));
        return k;
}

/* The state in a memfd (O_CLOEXEC until the exec), its fd. */
static int state_memfd(json_object *state) {
        const char *text = json_object_to_json_string_ext(state, JSON_C_TO_STRING_PLAIN);
        if (!text)
                return -ENOMEM;
        int fd = memfd_create("tend-state", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = strlen(text);
        for (size_t off = 0; off < n;) {
                ssize_t w = write(fd, text + off, n - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        int k = w < 0 ? -errno : -EIO;
                        close(fd);
                        return k;
                }
                off += (size_t) w;
        }
        return fd;
}

/* ---- the exec ---- */

/* environ, without what the exec sets, plus fd's name and the service
 * manager's variables: *ret_own is the index of the first entry of its own
 * (allocated: env_free()), the others are environ's. */
static char **exec_environment(int fd, size_t *ret_own) {
        static const char *const set[] = { "TEND_REEXEC_STATE_FD=", "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=" };
        size_t n = 0;
        while (environ[n])
                n++;
        char **env = calloc(n + ELEMENTSOF(set) + 1, sizeof *env);
        if (!env)
                return NULL;
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
                bool drop = false;
                for (size_t s = 0; s < ELEMENTSOF(set); s++)
                        drop = drop || strncmp(environ[i], set[s], strlen(set[s])) == 0;
                if (!drop)
                        env[j++] = environ[i];
        }
        *ret_own = j;
        const char *values[] = { NULL, saved.notify_socket, saved.watchdog_usec, saved.watchdog_pid };
        char fdtext[16];
        snprintf(fdtext, sizeof fdtext, "%d", fd);
        values[0] = fdtext;
        for (size_t s = 0; s < ELEMENTSOF(set); s++)
                if (values[s] && asprintf(&env[j], "%s%s", set[s], values[s]) >= 0)
                        j++;
        return env;
}

static void env_free(char **env, size_t own) {
        for (size_t i = own; env && env[i]; i++)
                free(env[i]);
        free(env);
}

static int do_exec(struct manager *m) {
        _cleanup_(json_object_putp) json_object *state = json_object_new_object();
        int k = state ? reexec_state_add(state, "version", json_object_new_int(TEND_STATE_VERSION)) : -ENOMEM;
        if (k >= 0)
                k = save_control(m, state, false);
        if (k >= 0)
                k = save_units(m, state, false);
        if (k >= 0) /* cluster: the etcd lease and the singletons' fences (reexec-cluster.h) */
                k = reexec_cluster_save(m, state, false);
        int fd = k < 0 ? k : state_memfd(state);
        if (fd < 0)
                return fd;
        size_t own = 0;
        char **env = exec_environment(fd, &own);
        control_server_flush(m->control); /* the answers "tend re-executes: retry" */
        log_info("re-executing %s (state: %zu bytes, %zu units)", saved.path,
                 strlen(json_object_to_json_string_ext(state, JSON_C_TO_STRING_PLAIN)), m->n_units);
        int f = fcntl(fd, F_GETFD); /* O_CLOEXEC off only now, for the exec */
        if (env && f >= 0 && fcntl(fd, F_SETFD, f & ~FD_CLOEXEC) >= 0)
                execve(saved.path, saved.argv, env);
        k = env ? -errno : -ENOMEM;
        env_free(env, own);
        close(fd);
        return k;
}

/* The exec failed: the fds get O_CLOEXEC back, tend runs on. */
static void exec_failed(struct manager *m, int error) {
        char why[PATH_MAX + 64];
        (void) save_control(m, NULL, true);
        (void) save_units(m, NULL, true);
        (void) reexec_cluster_save(m, NULL, true); /* cluster: the fences' fds */
        snprintf(why, sizeof why, "executing %s failed: %s: tend runs on as it was", saved.path, strerror(-error));
        reexec_abandon(m, why);
        notify_upstream_reloading(m->upstream, false);
}

static void reexec_end(struct manager *m) {
        m->reexec_retry = sd_event_source_disable_unref(m->reexec_retry);
        m->reexec_until = 0;
}

static int reexec_try(sd_event_source *s, uint64_t usec, void *userdata);

/* Every unit settled: the answers out, the state written, the exec. */
static void reexec_now(struct manager *m) {
        char why[PATH_MAX + 512];
        /* The start of DIR's units still spread over the loop's turns
         * (manager.c) is finished first: the state has no place for it, and
         * the new tend starts no unit the state names. */
        size_t left = manager_initial_starts_finish(m);
        if (left > 0)
                log_info("daemon-reexec: the start of DIR's units finished first (%zu were still to be reached)", left);
        int k = units_carriable(m, why, sizeof why);
        if (k == 0 && now_usec(CLOCK_MONOTONIC) < m->reexec_until) {
                (void) sd_event_source_set_time_relative(m->reexec_retry, 10 * USEC_PER_MSEC);
                (void) sd_event_source_set_enabled(m->reexec_retry, SD_EVENT_ONESHOT);
                return;
        }
        reexec_end(m);
        if (k == 0) {
                strncat(why, " after 5 s", sizeof why - strlen(why) - 1);
                reexec_abandon(m, why);
                return;
        }
        if (m->shutting_down) {
                reexec_abandon(m, "tend is shutting down");
                return;
        }
        if (units_resumable(m, why, sizeof why) < 0) { /* DIR changed since the request */
                reexec_abandon(m, why);
                return;
        }
        notify_upstream_reloading(m->upstream, true);
        records_flush(m);
        (void) logs_manager_drain_lines(m->logs, now_usec(CLOCK_MONOTONIC) + 500 * USEC_PER_MSEC);
        control_server_flush(m->control);
        exec_failed(m, do_exec(m));
}

static int reexec_try(sd_event_source *s, uint64_t usec, void *userdata) {
        reexec_now(userdata);
        return 0;
}

int manager_reexec_request(struct manager *m, char *why, size_t size) {
        if (m->opts->cmd) {
                snprintf(why, size, "%s", "combined mode (-- CMD) does not re-execute");
                return -EOPNOTSUPP;
        }
        if (m->shutting_down) {
                snprintf(why, size, "%s", "tend is shutting down");
                return -EBUSY;
        }
        if (m->reexec_retry || check)
                return 0; /* one under way: this request shares it */
        if (!saved.path[0]) {
                snprintf(why, size, "%s", "the path of tend's binary is unknown");
                return -ENOENT;
        }
        int k = units_resumable(m, why, size);
        if (k >= 0)
                k = check_start(m, saved.path, why, size);
        if (k < 0) {
                log_error("not re-executing: %s", why);
                return k;
        }
        log_info("daemon-reexec: asking %s whether it reads tend's state format %d", saved.path, TEND_STATE_VERSION);
        return 0;
}
