/* SPDX-License-Identifier: MIT */
/*
 * The log pipeline for units (SPEC §4 "Logs"). The contract is logs.h; the
 * user-facing description docs/logging.md. Design in brief:
 *
 *  - A pipe is read one chunk (LOGS_READ_CHUNK) per wake-up into the
 *    manager's scratch buffer, after the pipe's own leftover (an incomplete
 *    line, or lines a blocked sink did not take). Lines are cut there and
 *    written in batches (one writev per up to BATCH_LINES lines). Only the
 *    leftover is copied into the pipe's heap buffer, which is freed when
 *    empty: an idle unit costs no buffer.
 *  - A sink takes a batch whole, or up to some byte. The line that byte falls
 *    in is *committed*: its unwritten rest moves into the sink's pending
 *    buffer (one line at most) and the sink is blocked. Lines after it stay
 *    with their pipe, which is paused (its io source disabled) and queued on
 *    the sink. EPOLLOUT on the sink writes the pending rest first, then
 *    resumes the queued pipes in order. A blocked sink is never written by
 *    anyone else, so a pipe that finds it blocked joins the queue without
 *    writing: that is what keeps lines of several units whole and in order.
 *  - A line reaches the ring and the followers when its sink accepted (or
 *    committed) it, so the ring's order is the sink's order.
 *
 * The files (logs-internal.h says what they share):
 *   logs.c       targets, streams, the manager
 *   logs-pipe.c  pipes: read, cut into lines, write; draining
 *   logs-sink.c  sinks: tend's stdout, file: and append: targets; backpressure
 *   logs-ring.c  where an accepted line goes: the ring and the followers
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"
#include "logs.h"
#include "logs-internal.h"

/* ------------------------------------------------------------------------ */
/* Targets                                                                   */
/* ------------------------------------------------------------------------ */

const char *const target_names[_LOGS_TARGET_MAX] = {
        [LOGS_TARGET_CONSOLE] = "console",
        [LOGS_TARGET_FILE] = "file",
        [LOGS_TARGET_APPEND] = "append",
        [LOGS_TARGET_NULL] = "null",
        [LOGS_TARGET_INHERIT] = "inherit",
        [LOGS_TARGET_JOURNAL] = "journal",
};

const char *logs_target_type_to_string(enum logs_target_type t) {
        if ((unsigned) t >= _LOGS_TARGET_MAX)
                return NULL;
        return target_names[t];
}

int logs_target_parse(const char *s, struct logs_target *ret) {
        if (!s || !ret)
                return -EINVAL;
        for (int t = LOGS_TARGET_CONSOLE; t < _LOGS_TARGET_MAX; t++) {
                if (t == LOGS_TARGET_FILE || t == LOGS_TARGET_APPEND) {
                        size_t n = strlen(target_names[t]);
                        if (strncmp(s, target_names[t], n) == 0 && s[n] == ':') {
                                if (s[n + 1] != '/')
                                        return -EINVAL;
                                *ret = (struct logs_target) { .type = t, .path = s + n + 1 };
                                return 0;
                        }
                } else if (streq(s, target_names[t])) {
                        *ret = (struct logs_target) { .type = t };
                        return 0;
                }
        }
        return -EINVAL;
}

bool logs_journal_stream_matches(int fd, const char *journal_stream) {
        return log_stream_is_journal(fd, journal_stream);
}

enum logs_target_type logs_target_default(void) {
        if (logs_journal_stream_matches(STDERR_FILENO, getenv("JOURNAL_STREAM")))
                return LOGS_TARGET_JOURNAL;
        return LOGS_TARGET_CONSOLE;
}

static bool target_has_pipe(const struct logs_target *t) {
        return t->type == LOGS_TARGET_CONSOLE || t->type == LOGS_TARGET_FILE || t->type == LOGS_TARGET_APPEND ||
               t->type == LOGS_TARGET_JOURNAL;
}

size_t logs_parse_level_prefix(const char *text, size_t len, int *level) {
        /* journald's reading: one digit 0-7 after at most two zeros, in <>. */
        size_t i = 1;
        if (!text || len < 3 || text[0] != '<')
                return 0;
        while (i < 3 && i + 2 < len && text[i] == '0' && text[i + 1] != '>')
                i++;
        if (i + 1 >= len || text[i] < '0' || text[i] > '7' || text[i + 1] != '>')
                return 0;
        *level = text[i] - '0';
        return i + 2;
}

static bool target_same(const struct logs_target *a, const struct logs_target *b) {
        if (a->type != b->type)
                return false;
        if (a->type == LOGS_TARGET_FILE || a->type == LOGS_TARGET_APPEND)
                return streq(a->path, b->path);
        return true;
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

static int stream_check_config(const logs_manager *m, const struct logs_stream_config *c) {
        if (!c->name || !c->name[0] || strlen(c->name) > LOGS_NAME_MAX)
                return -EINVAL;
        size_t ring = c->ring_bytes ?: m->ring_bytes;
        if (ring < LOGS_RING_MIN || ring > LOGS_RING_MAX)
                return -EINVAL;
        if (c->syslog_priority < 0 || c->syslog_priority > (LOG_LOCAL7 | LOG_DEBUG))
                return -EINVAL;
        const struct logs_target *t[2] = { &c->stdout_target, &c->stderr_target };
        for (unsigned i = 0; i < 2; i++) {
                if ((unsigned) t[i]->type >= _LOGS_TARGET_MAX)
                        return -EINVAL;
                bool file = t[i]->type == LOGS_TARGET_FILE || t[i]->type == LOGS_TARGET_APPEND;
                if (file != (t[i]->path != NULL) || (file && t[i]->path[0] != '/'))
                        return -EINVAL;
        }
        return 0;
}

static int stream_copy_config(logs_stream *s, const struct logs_stream_config *c) {
        const struct logs_target *t[2] = { &c->stdout_target, &c->stderr_target };

        s->priority = (uint8_t) (c->syslog_priority ?: LOGS_PRIORITY_DEFAULT);
        s->level_prefix = !c->no_level_prefix;
        s->name = c->name;
        s->ident = c->syslog_identifier ? strdup(c->syslog_identifier) : (char *) s->name; /* shared when the same */
        if (!s->ident)
                return -ENOMEM;
        for (unsigned i = 0; i < 2; i++) {
                s->target[i] = *t[i];
                if (t[i]->path) {
                        s->path[i] = strdup(t[i]->path);
                        if (!s->path[i])
                                return -ENOMEM;
                        s->target[i].path = s->path[i];
                }
        }
        return 0;
}

unsigned logs_stream_pipe_layout(const logs_stream *s, bool *ret_shared) {
        bool has0 = target_has_pipe(&s->target[0]), has1 = target_has_pipe(&s->target[1]);
        *ret_shared = has0 && has1 && target_same(&s->target[0], &s->target[1]);
        return (unsigned) has0 + (has1 && !*ret_shared);
}

int logs_stream_make_pipes(logs_stream *s, const int *rfd, unsigned n) {
        unsigned j = 0;
        for (unsigned i = 0; i < 2; i++) {
                if (!target_has_pipe(&s->target[i]) || s->pipe[i])
                        continue;
                if (i == 1 && s->pipe[0] && target_same(&s->target[0], &s->target[1])) {
                        s->pipe[1] = s->pipe[0]; /* one pipe for both (SPEC §4) */
                        continue;
                }
                if (rfd && j >= n)
                        return -ESTALE;
                int r = logs_pipe_new(s, i == 0 ? LOGS_ORIGIN_STDOUT : LOGS_ORIGIN_STDERR, &s->target[i],
                                      rfd ? rfd[j++] : -1, &s->pipe[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int logs_stream_open_pipes(logs_stream *s) {
        if (!s)
                return -EINVAL;
        return logs_stream_make_pipes(s, NULL, 0);
}

int logs_stream_new(logs_manager *m, const struct logs_stream_config *c, logs_stream **ret) {
        int r;

        if (!m || !c || !ret)
                return -EINVAL;
        if ((r = stream_check_config(m, c)) < 0)
                return log_error_errno(r, "unit %s: invalid log configuration", c->name ? c->name : "(null)");
        _cleanup_(logs_stream_freep) logs_stream *s = calloc(1, sizeof *s);
        if (!s)
                return log_error_errno(-ENOMEM, "unit %s: out of memory", c->name);
        s->m = m;
        s->ring.cap = c->ring_bytes ?: m->ring_bytes;
        /* Linked first so that a failure below is undone by logs_stream_free(). */
        s->next = m->streams;
        if (m->streams)
                m->streams->prev = s;
        m->streams = s;
        if ((r = stream_copy_config(s, c)) < 0)
                return log_error_errno(r, "unit %s: out of memory", c->name);
        /* No pipe yet (issue 19's fd budget: a unit that does not run holds
         * no fd): logs_stream_open_pipes() before its start. */
        *ret = TAKE_PTR(s);
        return 0;
}

/* What a free leaves behind unwritten: counted and said once. */
static void stream_note_loss(logs_stream *s) {
        struct logs_pipe *ps[2];
        size_t lost = 0;

        for (unsigned i = 0, n = logs_stream_pipes(s, ps); i < n; i++) {
                int left = 0;
                lost += ps[i]->in_len;
                if (ioctl(ps[i]->rfd, FIONREAD, &left) >= 0 && left > 0)
                        lost += (size_t) left;
                if (ps[i]->sink->n_ref == 1 && ps[i]->sink->pending_owner == s)
                        lost += ps[i]->sink->pending_len - ps[i]->sink->pending_off;
        }
        if (lost > 0) {
                s->st.sink_lost_lines++;
                log_warning("unit %s: %zu bytes of log output lost: its sink stayed blocked until the unit's "
                            "log was closed", s->name, lost);
        }
}

logs_stream *logs_stream_free(logs_stream *s) {
        if (!s)
                return NULL;
        logs_manager *m = s->m;
        struct logs_pipe *ps[2];
        unsigned n = logs_stream_pipes(s, ps);

        if (n > 0) {
                (void) logs_drain(m, s, 0);
                stream_note_loss(s);
        }
        while (s->followers) {
                logs_follower *f = s->followers;
                logs_follower_detach(f);
                if (f->notify)
                        f->notify(f, f->userdata);
        }
        for (unsigned i = 0; i < n; i++)
                logs_pipe_free(ps[i]); /* their write ends too */
        s->pipe[0] = s->pipe[1] = NULL;
        if (s->prev)
                s->prev->next = s->next;
        else if (m->streams == s)
                m->streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        free(s->ring.buf);
        if (s->ident != s->name)
                free(s->ident);
        free(s->path[0]);
        free(s->path[1]);
        free(s);
        return NULL;
}

static int devnull_fd(logs_manager *m) {
        if (m->devnull < 0)
                m->devnull = open("/dev/null", O_WRONLY | O_NOCTTY | O_CLOEXEC);
        return m->devnull >= 0 ? m->devnull : negative_errno();
}

int logs_stream_prepare_spawn(logs_stream *s, int *ret_stdout, int *ret_stderr) {
        int fd[2];

        if (!s || !ret_stdout || !ret_stderr)
                return -EINVAL;
        logs_stream_spawn_done(s);
        int r = logs_stream_open_pipes(s);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < 2; i++) {
                if (s->target[i].type == LOGS_TARGET_JOURNAL && (r = logs_journal_connect(s->m)) < 0)
                        return log_error_errno(r, "unit %s: cannot connect %s to the journal (is systemd-journald "
                                               "running?): %m", s->name, i == 0 ? "stdout" : "stderr");
                switch (s->target[i].type) {
                case LOGS_TARGET_JOURNAL:
                case LOGS_TARGET_CONSOLE:
                case LOGS_TARGET_FILE:
                case LOGS_TARGET_APPEND:
                        fd[i] = logs_pipe_writer(s->pipe[i]);
                        if (fd[i] < 0)
                                return log_error_errno(fd[i], "unit %s: cannot open its log pipe for writing: %m",
                                                       s->name);
                        break;
                case LOGS_TARGET_NULL:
                        fd[i] = devnull_fd(s->m);
                        if (fd[i] < 0)
                                return log_error_errno(fd[i], "unit %s: open /dev/null: %m", s->name);
                        break;
                case LOGS_TARGET_INHERIT:
                default:
                        fd[i] = s->m->console_orig;
                        break;
                }
        }
        *ret_stdout = fd[0];
        *ret_stderr = fd[1];
        return 0;
}

void logs_stream_spawn_done(logs_stream *s) {
        struct logs_pipe *ps[2];
        if (!s)
                return;
        /* The child has its copy: tend keeps only the read end (issue 19's
         * fd budget: a running unit holds its pidfd and its log pipe), and
         * reads the pipe to its end once every writer is gone. */
        for (unsigned i = 0, n = logs_stream_pipes(s, ps); i < n; i++)
                ps[i]->wfd = safe_close(ps[i]->wfd);
}

void logs_stream_set_pid(logs_stream *s, pid_t pid) {
        if (s)
                s->pid = pid > 0 ? pid : 0;
}

int logs_stream_main_exited(logs_stream *s) {
        struct logs_pipe *ps[2];
        int r = 0;

        if (!s)
                return -EINVAL;
        for (unsigned i = 0, n = logs_stream_pipes(s, ps); i < n; i++) {
                int k = logs_pipe_mark_flush(ps[i]);
                if (k < 0) {
                        r = log_warning_errno(k, "unit %s: FIONREAD on its log pipe: %m", s->name);
                        continue;
                }
                logs_pipe_run_to_flush(ps[i]);
        }
        return r;
}

void logs_stream_get_stats(const logs_stream *s, struct logs_stream_stats *ret) {
        if (s && ret)
                *ret = s->st;
}

unsigned logs_stream_n_pipes(const logs_stream *s) {
        struct logs_pipe *ps[2];
        return s ? logs_stream_pipes(s, ps) : 0;
}

/* ------------------------------------------------------------------------ */
/* Manager                                                                   */
/* ------------------------------------------------------------------------ */

int logs_manager_new(sd_event *event, const struct logs_manager_options *o, logs_manager **ret) {
        struct logs_manager_options def = { .console_fd = -1 };
        int r;

        if (!event || !ret)
                return -EINVAL;
        if (!o)
                o = &def;
        size_t ring = o->ring_bytes ?: LOGS_RING_DEFAULT;
        size_t follow = o->follower_queue_bytes ?: LOGS_FOLLOWER_QUEUE_DEFAULT;
        if (ring < LOGS_RING_MIN || ring > LOGS_RING_MAX || follow < LOGS_FOLLOWER_QUEUE_MIN)
                return -EINVAL;

        _cleanup_(logs_manager_freep) logs_manager *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        m->devnull = -1;
        m->pipes_ep = epoll_create1(EPOLL_CLOEXEC);
        if (m->pipes_ep < 0)
                return negative_errno();
        if ((r = sd_event_add_io(event, &m->pipes_src, m->pipes_ep, EPOLLIN, logs_pipes_on_readable, m)) < 0)
                return r;
        (void) sd_event_source_set_description(m->pipes_src, "logs-pipes");
        m->console_orig = o->console_fd >= 0 ? o->console_fd : STDOUT_FILENO;
        m->ring_bytes = ring;
        m->follower_bytes = follow;
        m->resumed = o->resumed;
        m->journal_path = strdup(o->journal_socket ?: LOGS_JOURNAL_SOCKET);
        if (!m->journal_path)
                return -ENOMEM;
        m->scratch = malloc(SCRATCH_SIZE);
        m->linebuf = malloc(LOGS_LINE_MAX + 1);
        if (!m->scratch || !m->linebuf)
                return -ENOMEM;
        if ((r = logs_console_open(m, m->console_orig, &m->console)) < 0)
                return log_error_errno(r, "logs: cannot open tend's stdout: %m");
        *ret = TAKE_PTR(m);
        return 0;
}

logs_manager *logs_manager_free(logs_manager *m) {
        if (!m)
                return NULL;
        while (m->streams)
                logs_stream_free(m->streams);
        sd_event_source_disable_unref(m->pipes_src);
        safe_close(m->pipes_ep);
        logs_sink_unref(m->console);
        logs_sink_unref(m->journal);
        free(m->journal_path);
        safe_close(m->devnull);
        free(m->scratch);
        free(m->linebuf);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

int logs_manager_console_fd(const logs_manager *m) {
        if (!m || !m->console || m->console->kind == SINK_DISCARD)
                return -1;
        return m->console->fd;
}
