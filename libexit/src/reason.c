/* SPDX-License-Identifier: MIT */
/* Exit reasons (SPEC §2.1 "Exit reason"). */
#include <errno.h>
#include <signal.h>

#include "libexit.h"
#include "macro.h"

_public_ int exit_reason_from_siginfo(int code, int status, struct exit_reason *ret_reason) {
        if (!ret_reason)
                return -EINVAL;

        switch (code) {
        case CLD_EXITED:
                *ret_reason = (struct exit_reason) { .kind = EXIT_REASON_EXITED, .status = status & 0xff };
                return 0;
        case CLD_KILLED:
        case CLD_DUMPED:
                *ret_reason = (struct exit_reason) {
                        .kind = EXIT_REASON_KILLED,
                        .status = status,
                        .core_dumped = code == CLD_DUMPED,
                };
                return 0;
        default:
                return -EINVAL;
        }
}

_public_ int exit_reason_to_shell_status(const struct exit_reason *reason) {
        if (!reason)
                return -EINVAL;
        switch (reason->kind) {
        case EXIT_REASON_EXITED:
                return reason->status & 0xff;
        case EXIT_REASON_KILLED:
                return 128 + reason->status;
        default:
                return -EINVAL;
        }
}
