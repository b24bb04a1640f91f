/* SPDX-License-Identifier: MIT */
/* security: RemoveIPC= when a unit stops (manager-internal.h, exec/remove-ipc.h). */
#include <stdbool.h>

#include "manager-internal.h"
#include "remove-ipc.h"
#include "sandbox.h"
#include "unit.h"

static bool remove_ipc_set(const struct unit *u) {
        return u->file && u->file->hardening && u->file->hardening->remove_ipc;
}

void manager_remove_ipc(struct manager *m, struct unit *u) {
        uid_t uid, other;
        gid_t gid;
        if (!remove_ipc_set(u) || sandbox_owner(u->name, u->file, &uid, &gid) < 0 || !remove_ipc_applies(uid))
                return;
        /* as systemd: the user's objects go when its last such unit stops */
        for (size_t i = 0; i < m->n_units; i++) {
                struct unit *o = m->units[i];
                if (o != u && remove_ipc_set(o) && !unit_is_dead(o) && sandbox_owner(o->name, o->file, &other, &gid) >= 0 &&
                    other == uid)
                        return;
        }
        (void) remove_ipc(u->name, uid);
}
