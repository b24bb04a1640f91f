/* SPDX-License-Identifier: MIT */
/*
 * The manager's own state, shared by the files of supervisor/manager/:
 * manager.c (set-up, signals), loop.c (exits), runtime.c (the state
 * machine's seam), units.c, records.c, reload.c, cmd.c (combined mode),
 * control-adapter.c, shutdown.c, and the mechanisms each in a file of its
 * own (held-records, exit-routes, due-timer, group-cache, kept-env). Start
 * and stop jobs are lifecycle/jobs.h's, over the manager's units. Nothing
 * else includes it.
 * Single-threaded: everything runs in tend's event loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "cluster.h"
#include "control.h"
#include "jobs.h"
#include "due-timer.h"
#include "exit-routes.h"
#include "group-cache.h"
#include "hashmap.h"
#include "held-records.h"
#include "libexit.h"
#include "kept-env.h"
#include "logs.h"
#include "notify.h"
#include "options.h"
#include "record.h"
#include "singleflight.h"
#include "store.h"
#include "unit.h"
#include "watchdog.h"

/* What few units use, out of line (unit_data.rare): allocated at the first use
 * (unit_rare()), so that 1,000 plain units keep none (SPEC §8's footprint). */
struct unit_rare {
        struct kept_env main_env;      /* the main process's last environment, kept for its next spawn
                                        * (only once the unit restarted: kept-env.h) */
        char *file_error;              /* reload: why its file no longer loads (owned), NULL when it does:
                                        * tend(8) "RELOADING DIR" */
        char **aliases;                /* load: its other names in the manager's names (units.c); NULL: none */
        struct notify_socket *notify;  /* NOTIFY_SOCKET, made at the first spawn that needs it */
        uint64_t watchdog_revision;    /* of watchdog/NAME, 0 without a lease (watchdog.h) */
        /* fork: Type=forking (runtime.c op_forking_main) */
        sd_event_source *pid_file_retry; /* the next read of its PID file, while it waits for it */
        exit_id_t forking_since;       /* its start process's exit id: orphans reaped after it may be its daemon */
        unsigned pid_file_reads;       /* reads of the PID file in this start (the retry's back-off) */
        unsigned char pid_file_said;   /* the last reason the wait for its PID file was logged (forking.c) */
        unsigned long long forking_start_ticks; /* without cgroups: its start process's start time (forking.c) */
        /* prepare: a previous tend's leftovers dying: the start waits (op_prepare) */
        sd_event_source *leftovers_deadline;
        struct unit_failure *failure;  /* pkg: its last failed command, path copied after it (control-describe.c) */
};

/* (The fields are ordered to leave no hole, and rarely used ones are in
 * struct unit_rare: 1,000 units keep one each, a 224-byte malloc chunk.) */
struct unit_data {
        struct manager *m;
        struct exit_owner exits;       /* its main and control processes' routes (exit-routes.h) */
        struct due_timer timer;        /* its deadline (due-timer.h) */
        sd_event_source *group_source;
        struct unit_group *group;
        logs_stream *logs;
        char *logs_key;                /* the output settings logs was made from (output_key()): owned,
                                        * or the manager's logs_key_shared (key_drop()) */
        sf_waiter *own_waiter;         /* tend's own requester's share, held until its answer is final */
        struct group_cache group_cache; /* its cgroup read empty in this iteration (group-cache.h) */
        struct record_fields record;   /* what its last state record was made of */
        /* reload: the file text its running instance started from (op_prepare) */
        size_t started_text_size;
        uint64_t started_text_hash;
        struct unit_rare *rare;        /* owned, NULL until one of its fields is needed (unit_rare()) */
        struct jobs_unit jobs;         /* its start and stop jobs' state (jobs.h) */
        bool record_written;           /* record is that of the record in the store (or held to be) */
        bool removed;                  /* gone from DIR at a reload: freed once dead */
        bool resumed;                  /* reexec: put back from the previous tend's state, not started */
        bool fds_short;                /* its last start failed "out of file descriptors" (logged once) */
        /* QA L5: a `tendctl reload` waits for the ExecReload= run it started
         * (control-adapter.c), and one of its commands failed meanwhile */
        bool reload_waited, reload_failed;
};

/* units.c: u's rare fields, allocated (zeroed) at the first call; NULL when
 * out of memory (the caller then does without: no kept environment, no
 * alias, …, and says so where it matters). */
struct unit_rare *unit_rare(struct unit *u);

/* u's rare fields if it has any, else NULL (readers: a NULL reads as every
 * field zero). */
static inline const struct unit_rare *unit_rare_peek(const struct unit *u) {
        return ((const struct unit_data *) u->manager_data)->rare;
}

/* u's watchdog lease revision (0: none). */
static inline uint64_t unit_watchdog_revision(const struct unit *u) {
        const struct unit_rare *r = unit_rare_peek(u);
        return r ? r->watchdog_revision : 0;
}

/* load: a name of a unit (its own, or an alias) → the unit (units.c). */
struct unit_name_slot {
        uint64_t key;     /* hashmap_str_key(name) */
        const char *name; /* the unit's own name, or one of its unit_data.aliases */
        struct unit *unit;
};
HASHMAP_DEFINE(unit_name_map, struct unit_name_slot);

/* Combined mode's CMD (SPEC §1; cmd.c, entrypoint/cmd-run.h). */
struct cmd_state {
        const int *inherited;         /* fds for CMD (socket activation); tend keeps no copy */
        size_t n_inherited;
        rlim_t nofile_soft_inherited; /* CMD gets it back (SPEC §7) */
        struct exit_process *process; /* while CMD runs */
        bool started, done;
        int status;                   /* CMD's exit status, once done */
};

struct manager {
        const struct tend_options *opts;
        sd_event *event;
        struct exit_hub *hub;
        struct exit_reaper *reaper;
        struct exit_sub *sub;
        sf_table *flights;
        struct store *store;
        struct record_writer *records;     /* service/NAME's JSON (record.h) */
        struct held_records held;          /* while an exit is handled (records_hold/release) */
        struct cgroup_tree *cgroups;
        logs_manager *logs;
        struct control_server *control;
        struct watchdog_leases *watchdogs; /* expiries of watchdog/… leases */
        struct notify_upstream *upstream;  /* tend's own $NOTIFY_SOCKET, or NULL */
        bool initial_jobs_queued;          /* every initial start job exists: "settled" can be judged */
        struct unit **units;
        size_t n_units;
        struct unit_name_map names;    /* load: every name of units[] → its unit (manager_find_unit()) */
        struct exit_routes routes;     /* exit id → the unit and role of its process (loop.c) */
        sd_event_source *sweep;        /* frees removed units once dead (daemon-reload) */

        struct jobs *jobs;             /* start and stop jobs over units[] (jobs.h) */
        char *logs_key_shared;         /* owned: the first unit's output key, which the units with the
                                        * same output settings share (units.c: most have the defaults) */

        bool shutting_down;
        bool units_stopping;           /* the shutdown's stop jobs exist (after CMD in combined mode) */
        bool force_killed;
        /* fix19: repeated "out of file descriptors" starts, counted, one line per FDS_SHORT_LOG_USEC */
        unsigned fds_short_repeats;
        usec_t fds_short_since;
        /* fix19: the units' stop is over, their leftovers (KillMode=process,
         * SendSIGKILL=no) got SIGTERM; polled until gone or the deadline */
        bool leftovers_termed;
        sd_event_source *leftovers_poll;
        sd_event_source *shutdown_timer;
        int exit_status;

        struct cmd_state cmd;          /* combined mode's CMD (cmd.c) */

        /* reexec (reexec.h): a daemon-reexec under way (its retry while
         * units settle, until reexec_until), and the previous tend's state
         * while a re-executed tend puts its units back */
        sd_event_source *reexec_retry;
        usec_t reexec_until;
        struct json_object *resumed;
        struct cluster *cluster;       /* etcd: with --store, the cluster agent (cluster.h), else NULL */
};

static inline struct unit_data *data(const struct unit *u) {
        return u->manager_data;
}

/* Runs handler once, after the event being handled, from *source (a defer
 * source created at the first call and re-enabled for one run after that). */
static inline void manager_defer(struct manager *m, sd_event_source **source, sd_event_handler_t handler) {
        if (*source)
                (void) sd_event_source_set_enabled(*source, SD_EVENT_ONESHOT);
        else
                (void) sd_event_add_defer(m->event, source, handler, m);
}

struct json_object;

/* ---- between the manager's files ---- */

/* records.c: u's record (service/NAME) written if it changed; while held
 * (records_hold, an exit being handled) kept in order and written at the
 * last records_release; records_flush writes the held ones now. */
void record_write(struct manager *m, struct unit *u);
/* records.c: whether a process of u runs that was started from another text
 * of its file than the one it has now (the record's file_changed). */
bool manager_file_changed(struct unit *u);
void records_hold(struct manager *m);
void records_release(struct manager *m);
void records_flush(struct manager *m);

/* runtime.c: the seam's table (unit.h struct unit_ops). */
extern const struct unit_ops manager_unit_ops;
/* Runs u's deadline at once if it was already due when armed (RestartSec=0). */
void manager_run_due(struct unit *u);
/* tend's own requester lets go of its share once the flight is answered. */
void own_waiter_settle(struct unit_data *d);
/* watchdog.h's expiry callback (name NULL: every lease is checked). */
void manager_on_lease_expired(void *userdata, const char *name, uint64_t revision);
/* tend's own manager hears the counts and READY=1 once settled (SPEC §1). */
void manager_upstream_update(struct manager *m);

/* runtime.c (reexec): u's notify socket is fd, made by the tend that
 * re-executed (taken on success). 0 or a negative errno (notify.h). */
int manager_notify_adopt(struct manager *m, struct unit *u, int fd);
/* runtime.c (issue 19's fd budget): u is dead: its log pipes read to the
 * end and closed unless something of it still runs (its cgroup populated)
 * or a sink holds bytes of them (logs_stream_close_pipes). reexec: also
 * for a dead unit resumed with pipes (a format-1 state carried every unit's). */
void manager_logs_release(struct manager *m, struct unit *u);

/* units.c */
struct logs_target manager_output_target(const struct unit_output *o, bool is_stderr, const struct unit_output *out);
/* A new log stream for u when its output settings changed (before each start). */
int manager_logs_renew(struct manager *m, struct unit *u);
/* Frees u and its manager data; NULL. */
struct unit *manager_unit_free(struct unit *u);
/* Loads DIR at start-up: every unit file that loads becomes a unit. */
int manager_load_units(struct manager *m);
/* A notice for each Wants= of a unit that is neither loaded nor in DIR (an
 * instance: nor its template): once per load (manager_load_units, reload). */
void manager_notice_missing_wants(struct manager *m);

/* reload.c: DIR read again and the difference applied (report: NULL for
 * SIGHUP, else the daemon-reload answer's arrays). 0 or the error of reading
 * DIR (logged). */
int manager_reload(struct manager *m, struct json_object *report);
/* manager.c (fds, issue 19): the start of DIR's units still spread over the
 * loop's turns is finished at once (before a reload reshapes units[], before
 * a re-exec writes the state). Returns how many units of DIR were still to
 * be reached (0: none, the start was over). */
size_t manager_initial_starts_finish(struct manager *m);
/* Removed units that are dead are freed after the current event. */
void manager_sweep_schedule(struct manager *m);

/* loop.c: the loop's handlers of the reaper's fd, the hub subscription's
 * and the store's timerfd. */
int manager_on_reaper(sd_event_source *s, int fd, uint32_t revents, void *userdata);
int manager_on_sub(sd_event_source *s, int fd, uint32_t revents, void *userdata);
int manager_on_store(sd_event_source *s, int fd, uint32_t revents, void *userdata);

/* cmd.c: combined mode's CMD starts once every initial start job has settled. */
void manager_maybe_start_cmd(struct manager *m);
/* An exit of CMD: tend's exit status is CMD's and the shutdown begins.
 * Returns whether id was CMD's (false: not CMD, nothing done). */
bool manager_cmd_exited(struct manager *m, exit_id_t id);
/* cmd.c: CMD's exec result popped from the reaper (p borrowed): reported.
 * Returns whether p is CMD. */
bool manager_cmd_exec_result(struct manager *m, struct exit_process *p);

/* control-adapter.c: the control socket, answered from the units. */
int manager_setup_control(struct manager *m);
/* A record of u with fields f is in the store (records.c): the control
 * server hears of the units it shows down (control_server_unit_stopped()). */
void manager_control_record_stored(struct manager *m, struct unit *u, const struct record_fields *f);
/* QA L5: u changed (runtime.c op_changed): a reload tendctl waits for that
 * has ended is reported (control_server_unit_reloaded()). */
void manager_control_unit_changed(struct manager *m, struct unit *u);

/* shutdown.c (SPEC §4 "Shutdown") */
/* Shutdown begins with status (once; later calls do nothing): in combined
 * mode CMD gets SIGTERM first and the units stop once it is gone, else the
 * units stop at once; all within --shutdown-timeout. */
void manager_begin_shutdown(struct manager *m, int status);
/* CMD is gone: a shutdown under way goes on to the units. */
void manager_shutdown_cmd_gone(struct manager *m);
void manager_check_shutdown_done(struct manager *m);
void manager_kill_everything(struct manager *m);

/* ---- units.c ---- */

/* The loaded unit named name ("foo.service"), or one of whose aliases it is; NULL if none. */
struct unit *manager_find_unit(struct manager *m, const char *name);

/* A unit's names after a daemon-reload gave it file f: its aliases become f's
 * (an alias that is another unit's name is dropped with a warning). */
void manager_unit_names_update(struct manager *m, struct unit *u, const struct unit_file *f);

/* Adds a unit for f (taken on success; the caller keeps it on failure) at the
 * end of units[]. 0 or a negative errno. */
int manager_add_unit(struct manager *m, struct unit_file *f);

/* Starts u as one of tend's own requesters of its flight (SPEC §2.3). */
void manager_start_unit(struct manager *m, struct unit *u);
/* cluster-start.c, etcd: what the cluster agent asks of the manager (singletons). */
extern const struct cluster_ops manager_cluster_ops;
/* cluster-start.c, etcd: a start or restart of u asked by a client (docs/cluster.md §5):
 * 1 with *ret_waiter answered at once — refused when u is a singleton another host
 * holds (the holder named; this host then stands by for it) or one this host's
 * Hosts=/HostMetadata= exclude; accepted ("queued") when nobody is known to hold it,
 * the unit then starting when this host acquires its key — 0 when u is not such a
 * unit or this host holds it (start it as usual), or sf_table_join()'s negative errno. */
int manager_cluster_start_refused(struct manager *m, struct unit *u, sf_waiter **ret_waiter);
/* cluster-start.c, etcd: `tendctl stop` of u (or its file removed from DIR): this host
 * no longer contends for a singleton's key; a key held goes once u is down (QA20 M3).
 * No-op otherwise. */
void manager_cluster_stopped(struct manager *m, struct unit *u);
/* cluster-start.c, etcd: u's record says inactive or failed (a hold given up goes). */
void manager_cluster_unit_down(struct manager *m, struct unit *u);
/* cluster-start.c, etcd: u's file changed at a daemon-reload: Singleton= added or
 * removed, Hosts=/HostMetadata= changed, applied to this host's hold (QA20 M2, M4). */
void manager_cluster_reloaded(struct manager *m, struct unit *u);

/* Stops u at once: its flight cancelled (or the stop queued behind a
 * publishing one), then the stop sequence. */
void manager_stop_unit(struct manager *m, struct unit *u);

/* Joins u's flight as one of tend's own requesters; the resolution when this
 * request leads, else NULL. */
sf_resolution *manager_join_own(struct manager *m, struct unit *u);

/* units.c: the jobs' operations on the manager's units (jobs.h). */
extern const struct jobs_ops manager_jobs_ops;

/* ---- forking.c: Type=forking's main process (fork) ---- */

/* A forking unit's start process was spawned: orphans reaped from now on
 * may be its daemon; the PID file's reads start again. */
void manager_forking_spawned(struct unit *u, struct exit_process *start);
/* A change of u's record: a forking unit that is dead (or in back-off)
 * loses its PID file, as under systemd. */
void manager_forking_changed(struct unit *u);
/* unit.h ops->forking_main. */
int manager_forking_main(void *userdata, struct unit *u, struct exit_process **ret, struct exit_reason *ret_reason);


/* security: u, which has RemoveIPC=yes, stopped (not to restart): the IPC
 * objects of its user are removed unless another live unit of that user
 * has RemoveIPC=yes too (exec/remove-ipc.h; manager/remove-ipc-units.c). */
void manager_remove_ipc(struct manager *m, struct unit *u);
/* pkg: unit.h ops->command_failed: keeps f in u's rare fields (control-describe.c). */
void manager_command_failed(void *userdata, struct unit *u, const struct unit_failure *f);

/* ---- enablement.c (pkg: enable/disable, issue 18; docs/tendctl.1.md "enable") ---- */

/* A unit's enablement, as systemctl's UnitFileState words say it. */
enum unit_enablement {
        UNIT_ENABLED,  /* its file is in DIR and no NAME.disabled marker: started at tend's start and daemon-reload */
        UNIT_DISABLED, /* DIR/NAME.disabled exists: loaded, startable, not started by tend on its own */
        UNIT_STATIC,   /* no file of its name in DIR (an instance pulled in): started only when pulled */
};

/* "enabled", "disabled", "static". */
const char *unit_enablement_to_string(enum unit_enablement e);
/* u's enablement, read from DIR now (one fstatat() or two). */
enum unit_enablement manager_unit_enablement(const struct manager *m, const struct unit *u);
/* Whether tend starts u on its own (at its start, at daemon-reload); logs
 * the one line saying why not when it does not. */
bool manager_unit_starts_on_its_own(const struct manager *m, const struct unit *u);
/* tendctl enable/disable: removes/creates DIR/NAME.disabled. Never starts or
 * stops u. 0 (also when it was so already); -EADDRNOTAVAIL: u's file is not
 * in DIR (static); else the errno of creating or removing the marker
 * (-EROFS, -EACCES, …). Logged at info. */
int manager_unit_set_enabled(struct manager *m, struct unit *u, bool enabled);
