/* SPDX-License-Identifier: MIT */
/*
 * seccomp-refuse ERRNO SYSCALL[,SYSCALL…] PROGRAM [ARG…]: runs PROGRAM under a
 * seccomp filter that answers ERRNO (a number: 1 EPERM, 38 ENOSYS) for the
 * named system calls and allows everything else, as a container profile older
 * than those calls does (docker < 20.10: EPERM). The filter is inherited by
 * PROGRAM's children. For test_entrypoint_seccomp.py (issue 18, qa18 finding 0).
 * Exits 2 on bad arguments or a filter that does not load, 127 if exec fails.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int add_rules(scmp_filter_ctx ctx, int error, char *names) {
        char *save = NULL;
        for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
                int nr = seccomp_syscall_resolve_name(name);
                if (nr == __NR_SCMP_ERROR) {
                        fprintf(stderr, "seccomp-refuse: unknown system call %s\n", name);
                        return -EINVAL;
                }
                int k = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned) error), nr, 0);
                if (k < 0) {
                        fprintf(stderr, "seccomp-refuse: %s: %s\n", name, strerror(-k));
                        return k;
                }
        }
        return 0;
}

int main(int argc, char **argv) {
        if (argc < 4) {
                fprintf(stderr, "usage: seccomp-refuse ERRNO SYSCALL[,SYSCALL...] PROGRAM [ARG...]\n");
                return 2;
        }
        char *end = NULL;
        long error = strtol(argv[1], &end, 10);
        if (*end || error <= 0 || error > 4095) {
                fprintf(stderr, "seccomp-refuse: bad errno %s\n", argv[1]);
                return 2;
        }
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx) {
                fprintf(stderr, "seccomp-refuse: seccomp_init failed\n");
                return 2;
        }
        int k = add_rules(ctx, (int) error, argv[2]);
        if (k == 0)
                k = seccomp_load(ctx);
        seccomp_release(ctx);
        if (k < 0) {
                fprintf(stderr, "seccomp-refuse: loading the filter: %s\n", strerror(-k));
                return 2;
        }
        execv(argv[3], argv + 3);
        fprintf(stderr, "seccomp-refuse: %s: %s\n", argv[3], strerror(errno));
        return 127;
}
