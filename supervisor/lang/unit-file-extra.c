/* SPDX-License-Identifier: MIT */
/*
 * Keys the Debian unit-file corpus uses that tend honours with a little code
 * each (docs/tend.service.5.md "MORE KEYS", docs/unit-corpus.md):
 *   UnsetEnvironment=      removed from each process's environment (runtime)
 *   RestartKillSignal=     the signal of a restart's stop (lifecycle)
 *   SendSIGHUP=            SIGHUP right after KillSignal= (lifecycle)
 *   PermissionsStartOnly=  ExecStartPre=/Post=/Stop=/Reload= as with '+' (here, at load)
 *   TasksMax=              pids.max of the unit's cgroup (cgroup mode)
 *   OOMPolicy=             continue is what tend does; stop and kill are warned
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal-util.h"
#include "strv.h"

#include "unit-file-internal.h"

/* UnsetEnvironment=: names and assignments, added; empty resets. */
static int parse_unset(struct parse_ctx *c, const struct key_def *k, const char *value, struct unit_exec_keys *e) {
        if (!*value) {
                e->unset_environment = strv_free(e->unset_environment);
                return 0;
        }
        for (const char *p = value;;) {
                char *n = NULL, q[QUOTE_BUF];
                int r = uf_next_word_resolved(c, k, &p, value, &n, NULL);
                if (r <= 0)
                        return r;
                if (!(strchr(n, '=') ? unit_env_assignment_is_valid(n) : unit_env_name_is_valid(n))) {
                        /* systemd: an invalid entry is skipped with a warning */
                        report(c, LOG_WARNING, 0, "%s=: invalid variable name or assignment %s, ignoring", k->key,
                               uf_quote(q, n));
                        free(n);
                        continue;
                }
                r = strv_push(&e->unset_environment, n);
                if (r < 0)
                        return r;
        }
}

/* TasksMax=: N, N% of the system's limit (the lower of kernel.pid_max and
 * kernel.threads-max, as systemd), or infinity; empty resets (not set). */
static int parse_tasks_max(struct parse_ctx *c, const struct key_def *k, const char *value, uint64_t *ret) {
        char *end;
        if (!*value) {
                *ret = 0;
                return 0;
        }
        if (streq(value, "infinity")) {
                *ret = UINT64_MAX;
                return 0;
        }
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || errno || end == value || (*end && !streq(end, "%")) || v == 0 ||
            (*end && v > 100))
                return invalid_value(c, k, value);
        if (!*end) {
                *ret = v;
                return 0;
        }
        uint64_t limit = UINT64_MAX;
        static const char *const files[] = { "/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                FILE *f = fopen(files[i], "re");
                unsigned long long n;
                if (f && fscanf(f, "%llu", &n) == 1 && n < limit)
                        limit = n;
                if (f)
                        fclose(f);
        }
        if (limit == UINT64_MAX)
                return report(c, LOG_ERR, ENOENT, "%s=%s: the system's task limit cannot be read", k->key, value);
        *ret = limit * v / 100 ? limit * v / 100 : 1;
        return 0;
}

/* OOMPolicy=: tend does not watch memory.events, so an OOM kill of a process
 * other than the main one is one exit among others: systemd's continue. */
static int parse_oom_policy(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if (!*value || streq(value, "continue"))
                return 0;
        if (!streq(value, "stop") && !streq(value, "kill"))
                return invalid_value(c, k, value);
        report(c, LOG_WARNING, 0, "OOMPolicy=%s is not supported: the unit runs as with continue (an OOM kill of one "
               "of its processes does not stop it; of the main process it is a SIGKILL exit)", value);
        return 0;
}

int uf_parse_extra(struct parse_ctx *c, const struct key_def *k, const char *value) {
        if ((uintptr_t) k->data == UF_EXTRA_OOM_POLICY) /* nothing kept: no process keys allocated */
                return parse_oom_policy(c, k, value);
        struct unit_exec_keys *e = uf_exec_keys(c);
        char q[QUOTE_BUF];
        int b, sig;
        if (!e)
                return -ENOMEM;
        switch ((uintptr_t) k->data) {
        case UF_EXTRA_UNSET_ENVIRONMENT:
                return parse_unset(c, k, value, e);
        case UF_EXTRA_RESTART_KILL_SIGNAL:
                if (!*value) {
                        e->restart_kill_signal = 0;
                        return 0;
                }
                if ((sig = signal_from_string(value)) <= 0)
                        return syntax_error(c, "%s=: invalid signal %s", k->key, uf_quote(q, value));
                e->restart_kill_signal = sig;
                return 0;
        case UF_EXTRA_SEND_SIGHUP:
        case UF_EXTRA_PERMISSIONS_START_ONLY:
                b = *value ? uf_parse_boolean(value) : 0;
                if (b < 0)
                        return syntax_error(c, "%s=: invalid boolean %s", k->key, uf_quote(q, value));
                if ((uintptr_t) k->data == UF_EXTRA_SEND_SIGHUP)
                        e->send_sighup = b;
                else
                        e->permissions_start_only = b;
                return 0;
        default:
                return parse_tasks_max(c, k, value, &e->tasks_max);
        }
}

/* PermissionsStartOnly=yes (deprecated in systemd): the commands other than
 * ExecStart= run with full privileges, as if prefixed with '+' (one that has
 * a privilege prefix of its own keeps it). */
void uf_finish_extra(struct parse_ctx *c) {
        const struct unit_exec_keys *e = c->sb.exec;
        if (!e || !e->permissions_start_only)
                return;
        const unsigned privileged = UNIT_COMMAND_FULL_PRIVILEGES | UNIT_COMMAND_NO_SETUID | UNIT_COMMAND_AMBIENT_MAGIC;
        struct unit_command_list *lists[] = { &c->u->exec_start_pre, &c->u->exec_start_post, &c->u->exec_stop,
                                              &c->u->exec_reload };
        for (size_t i = 0; i < ELEMENTSOF(lists); i++)
                for (size_t j = 0; j < lists[i]->n; j++)
                        if (!(lists[i]->commands[j].flags & privileged))
                                lists[i]->commands[j].flags |= UNIT_COMMAND_FULL_PRIVILEGES;
}

void unit_env_unset(char **envp, char *const *unset) {
        if (!envp || !unset)
                return;
        size_t o = 0;
        for (size_t i = 0; envp[i]; i++) {
                bool drop = false;
                size_t n = strcspn(envp[i], "=");
                for (size_t j = 0; unset[j] && !drop; j++)
                        drop = strchr(unset[j], '=') ? streq(envp[i], unset[j])
                                                     : strlen(unset[j]) == n && strncmp(envp[i], unset[j], n) == 0;
                if (drop)
                        free(envp[i]);
                else
                        envp[o++] = envp[i];
        }
        envp[o] = NULL;
}
