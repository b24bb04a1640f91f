/* SPDX-License-Identifier: MIT */
/*
 * security: RemoveIPC= (systemd.exec(5); docs/tend.service.5.md "HARDENING"):
 * when the last unit with RemoveIPC=yes of a user stops, the System V
 * shared memory, semaphores and message queues and the POSIX shared memory
 * (/dev/shm) and message queues (/dev/mqueue) that user owns are removed.
 * As in systemd, root's and the system users' (uid ≤ 999) objects are never
 * touched: for them the key asks for nothing.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Whether RemoveIPC= would remove anything of uid (not root, not a system user). */
bool remove_ipc_applies(uid_t uid);

/*
 * Removes every IPC object uid owns (owner or creator), as above; what
 * cannot be removed is logged at warning naming unit. Returns the number
 * of objects removed. Blocking file-system work, bounded by the objects
 * present; called from the manager's thread when a unit stops.
 */
int remove_ipc(const char *unit, uid_t uid);
