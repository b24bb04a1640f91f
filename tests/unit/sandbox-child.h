/* SPDX-License-Identifier: MIT */
/*
 * The sandbox tests' child runner (test-sandbox.c, test-hardening.c), header-only:
 * a plan's pre-exec hook run in a real forked child, then a check there.
 */
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"

/* Forks; the child runs p's hook, reports its result through a pipe, then
 * exits with check()'s value (127 when the hook failed). Returns the child's
 * wait status; *ret_error, *ret_stage: the hook's negative errno and stage
 * (0 and 0 when it succeeded). p stays the caller's. Uses cmocka asserts. */
static inline int sandbox_hook_in_child(struct sandbox_plan *p, int (*check)(void), int *ret_error, int *ret_stage) {
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int stage = 0, r = sandbox_pre_exec(p, &stage);
                int report[2] = { r, stage };
                (void) !write(pipefd[1], report, sizeof report);
                _exit(r < 0 ? 127 : check());
        }
        close(pipefd[1]);
        int report[2] = { 0, 0 }, status;
        (void) !read(pipefd[0], report, sizeof report);
        close(pipefd[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        *ret_error = report[0];
        *ret_stage = report[1];
        return status;
}
