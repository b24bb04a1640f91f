/* SPDX-License-Identifier: MIT */
/*
 * pkg: a unit's last failed command (unit.h struct unit_failure; issue 18:
 * `tendctl status` says which Exec*= command failed, how and when, as
 * systemctl's "Process: 123 ExecStartPre=/bin/false (code=exited,
 * status=1/FAILURE)" line does).
 */
#include "time-util.h"
#include "unit-file.h"
#include "unit-internal.h"

/* The Exec*= key whose list of u's file l is. */
static const char *key_of(const struct unit *u, const struct unit_command_list *l) {
        const struct unit_file *f = u->file;
        return l == &f->exec_start_pre    ? "ExecStartPre"
               : l == &f->exec_start      ? "ExecStart"
               : l == &f->exec_start_post ? "ExecStartPost"
               : l == &f->exec_reload     ? "ExecReload"
               : l == &f->exec_stop       ? "ExecStop"
                                          : "Exec";
}

void unit_note_failure(struct unit *u, const struct unit_command_list *l, unsigned index, pid_t pid,
                       const struct exit_reason *r, int exec_errno) {
        const struct unit_command *cmd = l && index < l->n ? &l->commands[index] : NULL;
        if (!u->ops->command_failed)
                return;
        struct unit_failure f = {
                .key = key_of(u, l),
                .index = index,
                .n = l ? (unsigned) l->n : 0,
                .pid = pid,
                .exec_errno = exec_errno,
                .reason = r ? *r : (struct exit_reason) {},
                .realtime = now_usec(CLOCK_REALTIME),
                .path = cmd && cmd->path ? cmd->path : "",
        };
        u->ops->command_failed(u->userdata, u, &f);
}
