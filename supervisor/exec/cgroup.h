/* SPDX-License-Identifier: MIT */
/*
 * Every process of a unit (SPEC §4 "cgroups", "Signals to groups", "Stop").
 *
 * tend finds its own cgroup v2 once (cgroup_tree_open). If tend can create
 * cgroups there and the kernel has cgroup.kill (Linux 5.14), the tree is in
 * CGROUP mode: each unit gets a leaf cgroup `<tend's cgroup>/NAME.service`
 * (no controllers enabled), its processes start in it (CLONE_INTO_CGROUP),
 * its emptiness comes from cgroup.events, SIGKILL goes through cgroup.kill
 * and any other signal through one pidfd per member. Otherwise the tree is in
 * FALLBACK mode, and "every process of the unit" is the process group of its
 * first main process (units are session leaders: pgid = sid = that pid).
 *
 * A struct unit_group hides the mode: the unit manager calls the same
 * functions either way and never branches on it. What the fallback cannot do
 * (a process that left the group survives; a previous tend's leftovers cannot
 * be found) is written in docs/cgroups.md.
 *
 * Conventions: 0 (or a count >= 0) on success, a negative errno on failure;
 * ret_ parameters are written only on success; no function logs (the caller
 * logs, naming the unit). Every fd is O_CLOEXEC and owned by the object that
 * returns it. Thread-safety: none; tend calls this module from its one
 * thread (SPEC §1, §4).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "libexit.h"

/* ------------------------------------------------------------------------ */
/* Discovery, pure: parsing only, no system call (tested from strings)      */
/* ------------------------------------------------------------------------ */

struct cgroup_location {
        char *mount; /* the cgroup2 mount point, e.g. "/sys/fs/cgroup/unified" */
        char *path;  /* P, tend's cgroup as /proc/PID/cgroup names it, e.g. "/" */
        char *dir;   /* tend's cgroup directory: mount joined with P taken relative to the mount's root */
};

/*
 * Finds P in the text of /proc/PID/cgroup: the path of the "0::P" line.
 * *ret_path is malloc'ed, owned by the caller.
 * Errors: -ENOENT (no "0::" line: the process has no cgroup v2 hierarchy),
 * -EINVAL (P not absolute), -ENOMEM.
 */
int cgroup_parse_self(const char *self_cgroup, char **ret_path);

/*
 * Resolves tend's cgroup directory from the texts of /proc/self/mountinfo and
 * /proc/self/cgroup. Among the cgroup2 mounts (filesystem type "cgroup2"),
 * the last one whose root (field 4) contains P is used (a later mount shadows
 * an earlier one); mountinfo's octal escapes (\040 …) are decoded. A P or a
 * root with a ".." component (a cgroup outside the reader's cgroup namespace)
 * is outside. On success *ret holds three malloc'ed strings; release them
 * with cgroup_location_done().
 * Errors: -ENOENT (no "0::" line), -ENODEV (no cgroup2 mount), -EXDEV (P
 * outside the root of every cgroup2 mount), -EINVAL, -ENOMEM.
 */
int cgroup_locate(const char *mountinfo, const char *self_cgroup, struct cgroup_location *ret);

/* Frees the strings of loc and sets them to NULL (NULL fields accepted). */
void cgroup_location_done(struct cgroup_location *loc);

/* ------------------------------------------------------------------------ */
/* tend's cgroup                                                            */
/* ------------------------------------------------------------------------ */

enum cgroup_mode {
        CGROUP_MODE_CGROUP,   /* a writable cgroup v2 subtree with cgroup.kill */
        CGROUP_MODE_FALLBACK, /* process groups (SPEC §4 "Signals to groups") */
};

struct cgroup_tree;

/*
 * Discovers tend's cgroup from /proc/self/cgroup and /proc/self/mountinfo
 * and probes it: "writable" means tend can mkdir a child cgroup there (a
 * temporary "tend-probe.PID", removed again) and write cgroup.procs (tend
 * writes its own pid to its own cgroup.procs, a no-op move that checks the
 * delegation, and opens the child's for writing); cgroup.kill and
 * cgroup.events are probed in that child (the root cgroup has neither).
 * Anything missing selects FALLBACK mode; the reason is in
 * cgroup_tree_describe(). Call it once at start-up, before the first spawn.
 * *ret_tree is the caller's (cgroup_tree_free).
 * Errors: -ENOMEM, -EINVAL (ret_tree NULL). Never fails for lack of cgroups.
 */
int cgroup_tree_open(struct cgroup_tree **ret_tree);
/* reexec: cgroup_tree_open for a re-executed tend, which may be in its leaf
 * (CGROUP_TEND_LEAF) already: the leaf's parent is then tend's cgroup, and
 * tend is in its leaf (cgroup_tree_in_leaf()). */
int cgroup_tree_open_resumed(struct cgroup_tree **ret_tree);

/*
 * A tree in FALLBACK mode without looking at cgroups (a configuration that
 * disables them; tests). why (copied; NULL accepted) names the cause in
 * cgroup_tree_describe(). Errors: -ENOMEM, -EINVAL.
 */
int cgroup_tree_open_fallback(const char *why, struct cgroup_tree **ret_tree);

/* Closes the tree's fds and frees it (NULL accepted); removes no cgroup.
 * Every unit_group made from it must be freed first. Returns NULL. */
struct cgroup_tree *cgroup_tree_free(struct cgroup_tree *tree);

enum cgroup_mode cgroup_tree_mode(const struct cgroup_tree *tree);

/* tend's cgroup directory (owned by the tree), or NULL in FALLBACK mode. */
const char *cgroup_tree_dir(const struct cgroup_tree *tree);

/*
 * One line for the caller to log once at start-up, owned by the tree:
 * "using the cgroup v2 subtree at DIR", or
 * "no writable cgroup v2 subtree at DIR (CAUSE): using process groups",
 * "no cgroup2 mount in /proc/self/mountinfo: using process groups", …
 */
const char *cgroup_tree_describe(const struct cgroup_tree *tree);

/*
 * tend's own leaf cgroup, `<tend's cgroup>/tend.scope`, beside the units'
 * (SPEC §4 "cgroups", docs/cgroups.md). Its name ends in ".scope", so no
 * unit's cgroup ("NAME.service") can be it.
 *
 * Why: Linux (seen on 6.18; the kill_seq check of cgroup_post_fork, since
 * 6.14) SIGKILLs at birth a child that clone3(CLONE_INTO_CGROUP) puts into a
 * cgroup whose kill count differs from the spawner's own cgroup's. A
 * cgroup.kill counts in the cgroup written and in every cgroup below it
 * existing then; a new cgroup counts from 0. So a tend whose cgroup was once
 * emptied with cgroup.kill (systemd restarting tend.service) would see every
 * unit it starts in a new NAME.service killed at once, for good; from a new
 * leaf of its own, both counts are 0. It is also what Delegate=yes asks of a
 * service: no process in a cgroup that has children.
 *
 * cgroup_tree_enter_leaf: creates the leaf and moves tend there (the whole
 * process: its pid to the leaf's cgroup.procs). A leftover leaf of a previous
 * tend is removed and made afresh if empty, or joined as it is if populated
 * (returns 1 then: its count is unknown). Call it once, after
 * cgroup_tree_open, before the first spawn; from then on a unit cgroup tend
 * finds existing is renewed before its first use (unit_group_needs_renewal).
 * Returns 0 (in a new leaf) or 1 (in a populated leftover); -EOPNOTSUPP in
 * FALLBACK mode; the errno of mkdir/rmdir/open/write otherwise (-EACCES,
 * -EBUSY …): tend is then where it was, and the caller says so and carries on.
 *
 * cgroup_tree_in_leaf: whether tend is in its leaf.
 *
 * cgroup_tree_leave_leaf: at exit, moves tend back to its cgroup and removes
 * the leaf (best effort: a leaf that still holds processes, e.g. orphans of
 * CMD in combined mode, stays). NULL accepted.
 */
#define CGROUP_TEND_LEAF "tend.scope"
int cgroup_tree_enter_leaf(struct cgroup_tree *tree);
bool cgroup_tree_in_leaf(const struct cgroup_tree *tree);
void cgroup_tree_leave_leaf(struct cgroup_tree *tree);

/* ------------------------------------------------------------------------ */
/* A unit's processes, in either mode                                       */
/* ------------------------------------------------------------------------ */

struct unit_group;

/* How many passes a scan makes at most when each one finds new processes
 * (a unit that forks faster than tend signals); the caller's stop timeout
 * then escalates to SIGKILL, which cgroup.kill delivers atomically. */
#define UNIT_GROUP_MAX_PASSES 256

/*
 * The processes of unit name (NAME, with or without the ".service" suffix).
 * CGROUP mode: opens `<tend's cgroup>/NAME.service` if it exists (a
 * previous tend's, with leftovers or not, is reused: see
 * unit_group_kill_leftovers; once tend is in its leaf it is also renewed
 * before the first start: unit_group_needs_renewal). One that does not exist
 * is created and opened only when it is first needed: unit_group_kill_leftovers, which the unit
 * manager calls before each start's first spawn, or unit_group_spawn_attr.
 * Until then the group answers as an empty cgroup (populated 0, signal 0,
 * contains 0, events fd -ENOENT), and unit_group_remove removes the
 * directory if something made it. FALLBACK mode: no system call.
 * tree is borrowed and must outlive the group; so is name when it ends in
 * ".service" (the unit's own name: not copied, SPEC §8), else the group
 * keeps NAME.service of its own. *ret_group is the caller's.
 * Errors: -EINVAL (NULL, an empty name, ".", "..", a name with '/' or a
 * newline, or one too long for a directory entry), -ENOMEM, and in CGROUP
 * mode the errno of opening an existing cgroup. The errno of mkdir/open
 * (-EACCES, -EROFS, -ENOSPC past cgroup.max.descendants, …) comes from the
 * first call that creates it, and fails the unit's start (result
 * `resources`).
 */
int unit_group_new(struct cgroup_tree *tree, const char *name, struct unit_group **ret_group);

/* Closes the group's fds and frees it (NULL accepted). The cgroup stays
 * (see unit_group_remove). Returns NULL. */
struct unit_group *unit_group_free(struct unit_group *group);

/* The unit's cgroup directory, a new string (the caller's, free()), or NULL in
 * FALLBACK mode, once removed, or out of memory. */
char *unit_group_dir(const struct unit_group *group);

/*
 * Records the unit's session leader: the first main process, started with
 * EXIT_SPAWN_SETSID, so its pid is the process group (and session) id of
 * every process of the unit in FALLBACK mode. Call it after each start's
 * first spawn (a restart has a new leader); 0 forgets it. Used only in
 * FALLBACK mode; harmless in CGROUP mode.
 */
void unit_group_set_leader(struct unit_group *group, pid_t pid);

/*
 * FALLBACK mode, QA19 M1: the process groups of a unit's earlier leaders
 * that still had members when unit_group_set_leader() replaced them
 * (KillMode=process, SendSIGKILL=no survivors of an earlier run). They are
 * the unit's as its cgroup would hold them: unit_group_populated() counts
 * them, unit_group_signal() signals them (kill(-pgid): their leaders are
 * reaped, and a group id is not reused while the group lives). Each is asked
 * (kill(-pgid, 0)) at those calls and forgotten once gone. At most
 * UNIT_GROUP_MAX_OLD per unit: past that, the oldest is forgotten with a
 * warning naming it (stop and shutdown no longer reach it). Memory: none
 * until the first (then UNIT_GROUP_MAX_OLD pids).
 * unit_group_old_groups: up to max of them into pgids (the caller's array),
 * returns how many there are; 0 in CGROUP mode and for NULL.
 * unit_group_keep_old: adds pgid, as a re-executed tend puts back its
 * predecessor's list; no effect in CGROUP mode, on NULL, on a group gone.
 */
#define UNIT_GROUP_MAX_OLD 8
/* The leader unit_group_set_leader() recorded, 0 if none (NULL: 0). */
pid_t unit_group_leader(const struct unit_group *group);
size_t unit_group_old_groups(struct unit_group *group, pid_t *pgids, size_t max);
void unit_group_keep_old(struct unit_group *group, pid_t pgid);
/* How many groups that still had members this unit forgot (past
 * UNIT_GROUP_MAX_OLD, or out of memory) since it was made: shutdown cannot
 * vouch for them, so tend then exits non-zero naming the unit (issue 19).
 * 0 in CGROUP mode and for NULL. */
unsigned unit_group_forgotten(const struct unit_group *group);

/*
 * Prepares attr so the child starts in the unit's cgroup: in CGROUP mode sets
 * EXIT_SPAWN_CGROUP and cgroup_fd (a directory fd owned by the group, valid
 * until unit_group_spawn_done/remove/free: libexit uses CLONE_INTO_CGROUP, or in its fork
 * fallback writes "0" to cgroup.procs through an fd opened before the fork);
 * in FALLBACK mode leaves attr unchanged. The caller sets EXIT_SPAWN_SETSID
 * for the unit's main process itself. Creates the cgroup if it is not yet
 * (unit_group_new). Errors: -EINVAL, -ENOENT (removed), mkdir/open errors.
 */
int unit_group_spawn_attr(struct unit_group *group, struct exit_spawn_attr *attr);
/* The spawn that unit_group_spawn_attr prepared is over (done or failed):
 * the directory fd lent to attr is closed. NULL accepted. */
void unit_group_spawn_done(struct unit_group *group);

/*
 * corpus: sets pids.max of group's cgroup to max (UINT64_MAX: "max"), making
 * the cgroup if need be and enabling the pids controller for tend's units
 * when it is not yet. Returns 0, -EOPNOTSUPP (not CGROUP mode: nothing to
 * set), or the error of the mkdir or write (-ENOENT: no pids controller).
 */
int unit_group_set_pids_max(struct unit_group *group, uint64_t max);

/*
 * An fd for the event loop that raises EPOLLPRI (poll: POLLPRI, with
 * POLLERR) whenever cgroup.events changes; unit_group_populated() reads it,
 * which re-arms it (sd-event: sd_event_add_io(…, EPOLLPRI, …)). Owned by the
 * group, opened by this call and kept until unit_group_events_close (or the
 * group's removal/free): the caller stops polling it first. Between calls a
 * group holds no fd at all (issue 19's fd budget: a running unit's fds are
 * its pidfd and its log pipe), except while watched or lent to a spawn.
 * Errors: -EOPNOTSUPP in FALLBACK mode (the caller waits for the leader's
 * exit and uses unit_group_populated), -ENOENT (removed, or not created yet:
 * then it is empty), -EMFILE/-ENFILE, open errors.
 */
int unit_group_events_fd(struct unit_group *group);
/* The caller no longer polls the events fd: closed (NULL accepted). */
void unit_group_events_close(struct unit_group *group);

/*
 * Whether any process of the unit is left: 1 or 0.
 * CGROUP mode: "populated" of cgroup.events (the whole subtree), read through
 * the events fd, which re-arms its EPOLLPRI. FALLBACK mode: whether the
 * leader's process group exists (kill(-pgid, 0): one system call, no /proc
 * scan; 0 without a leader); an unreaped leader counts.
 * Errors: -ENOENT (removed), -EIO (unparsable cgroup.events), read errors.
 */
int unit_group_populated(struct unit_group *group);

/*
 * Leftovers of a previous tend: if the unit's cgroup is populated, writes
 * cgroup.kill and waits until "populated 0", at most timeout_ms
 * (CLOCK_MONOTONIC deadline; negative: no bound), blocking on the events fd.
 * Call it before the unit's first spawn of each start. Returns the number of
 * processes killed (the members listed just before the kill, the whole
 * subtree; the caller logs it), 0 when there were none, and always 0 in
 * FALLBACK mode (leftovers cannot be found without a cgroup; tend never
 * re-adopts processes). Errors: -ETIMEDOUT (still populated at the deadline:
 * a process in uninterruptible sleep), -ENOENT (removed), I/O errors.
 */
int unit_group_kill_leftovers(struct unit_group *group, int timeout_ms);

/*
 * unit_group_kill_leftovers without the wait: if the unit's cgroup is
 * populated, writes cgroup.kill and returns the number of processes killed
 * (the caller waits for "populated 0" on unit_group_events_fd() in its own
 * loop, never blocking: issue 19); 0 when empty, and in FALLBACK mode.
 * Errors: -ENOENT (removed), I/O errors.
 */
int unit_group_kill_leftovers_begin(struct unit_group *group);

/* Whether this tend ever spawned into the group (unit_group_spawn_attr): then
 * what is left in it at a start is this tend's own (a KillMode=process or
 * SendSIGKILL=no stop's survivors, SPEC §4), left alone, not a previous
 * tend's leftovers. False for NULL. */
bool unit_group_spawned(const struct unit_group *group);

/* A re-executed tend puts back its predecessor's knowledge of the group
 * (tend(8) "RE-EXECUTING"): spawned, what unit_group_spawned() answers
 * (survivors of a stop before the re-exec are this tend's lineage's, left
 * alone at the next start); renew, what unit_group_needs_renewal() answers
 * (1 or 0: the predecessor wrote cgroup.kill or not; -1: not known, the
 * guess of unit_group_new stays). No effect on NULL. */
void unit_group_resume(struct unit_group *group, bool spawned, int renew);

/* The processes of the unit's cgroup and its subtree (tend excepted): up to
 * max pids into pids (the caller's array), returns how many there are (may
 * exceed max). 0 in FALLBACK mode or when the cgroup was never made.
 * Errors: -EINVAL, -ENOENT (removed), read errors. */
int unit_group_members(struct unit_group *group, pid_t *pids, size_t max);

/* Whether the unit's cgroup is open (CGROUP mode, made or found, not
 * removed): an answer of unit_group_populated() is then the cgroup's own, not
 * "nothing spawned yet" (a leftover cgroup may still be populated). */
bool unit_group_opened(const struct unit_group *group);

/*
 * A cgroup that was emptied with cgroup.kill is replaced by a fresh one
 * before the unit's next start: Linux (seen on 6.18; the kill_seq check of
 * cgroup_post_fork, since 6.14) compares the spawner's cgroup with the
 * target's kill count, so every child clone3(CLONE_INTO_CGROUP) puts into a
 * cgroup that was ever killed is SIGKILLed at birth, for good.
 * unit_group_needs_renewal: whether that is the case (CGROUP mode, after
 * cgroup.kill; and, once tend is in its leaf, for a cgroup that existed
 * before unit_group_new: a previous tend's, whose count is unknown). unit_group_renew: if so and the cgroup is empty, removes it
 * (with any below it) and creates and opens it again: the directory fd and
 * the events fd change (the caller stops watching the old events fd before,
 * and watches unit_group_events_fd() after). Returns 1 when renewed, 0 when
 * nothing was needed. Errors: -EBUSY (still populated; nothing done),
 * -ENOENT (removed), the errno of rmdir/mkdir/open (then a later call tries
 * the mkdir again). A cgroup this tend spawned into (unit_group_spawned)
 * that still holds processes is not renewed but kept (0): they live, so its
 * kill count kills no new child either (KillMode=process survivors).
 */
bool unit_group_needs_renewal(const struct unit_group *group);
int unit_group_renew(struct unit_group *group);

/*
 * Sends sig (1 … _NSIG-1) to every process of the unit, tend excepted.
 * CGROUP mode: SIGKILL writes cgroup.kill (the kernel kills the whole
 * subtree, forks included); any other signal goes through one pidfd per
 * process read from cgroup.procs (the subtree), kept only if, after opening,
 * /proc/PID/cgroup still names the unit's cgroup (or one below it) and the
 * pidfd is live; passes repeat until one finds no new process (forks race
 * the scan), at most UNIT_GROUP_MAX_PASSES. leader_unreaped is ignored.
 * Neither happens when cgroup.events says the cgroup is empty (so an empty
 * cgroup is never cgroup.kill'ed and needs no renewal).
 * FALLBACK mode: kill(-pgid, sig), one system call whatever the number of
 * processes on the host (no /proc scan): with leader_unreaped (the caller
 * has not reaped the leader) after checking the leader leads its group; else
 * the group, if it still exists, is the unit's (a group id is not reused
 * while the group lives), and SIGTERM/SIGINT/SIGHUP are followed by SIGCONT.
 * A process that left the group (setsid, setpgid) is not reached.
 * Sending SIGCONT after KillSignal is the caller's call: sig = SIGCONT.
 * Returns the number of processes signalled one by one, or found in the
 * cgroup just before cgroup.kill; 0 after kill(-pgid) (the kernel does not
 * count) and when the unit has no process (or no leader).
 * Errors: -EINVAL (bad sig), -EPERM (FALLBACK mode, leader unreaped: the
 * leader does not lead its process group, so it was not started with
 * EXIT_SPAWN_SETSID; nothing is signalled), -ENOENT (removed), -ENOMEM,
 * I/O errors.
 */
int unit_group_signal(struct unit_group *group, int sig, bool leader_unreaped);

/*
 * Whether pid is a process of the unit, for NotifyAccess=all (SPEC §4
 * "Readiness and notify"): 1 or 0. CGROUP mode: /proc/PID/cgroup names the
 * unit's cgroup or one below it. FALLBACK mode: pid's process group or
 * session is the leader's (0 without a leader). Racy by nature for a pid
 * that exits at that moment: the answer is about the pid when it is read.
 * Errors: -ESRCH (no such process), -EINVAL (pid <= 0), -ENOENT (removed).
 */
int unit_group_contains(struct unit_group *group, pid_t pid);

/*
 * Removes the unit's cgroup once it is empty (the unit was removed by a
 * daemon-reload, or at shutdown): every cgroup below it (deepest first), then
 * the unit's own; then closes the group's fds, after which only
 * unit_group_free and unit_group_remove (0 again) may be called; the others
 * answer -ENOENT. FALLBACK mode: 0, nothing to remove.
 * Errors: -EBUSY (still populated; nothing removed), the errno of rmdir.
 */
int unit_group_remove(struct unit_group *group);
