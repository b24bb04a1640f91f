/* SPDX-License-Identifier: MIT */
/*
 * cost17: the seccomp programs of a unit file are compiled once, at its first
 * start, and reused (unit-file.h struct unit_bpf_cache; exec/sandbox-seccomp.c):
 * the second plan borrows the very same programs, a child still gets them,
 * a unit without such keys gets no cache, a changed file (what
 * daemon-reload loads, manager/reload.c) compiles its own, and files with
 * the same SystemCallFilter= share one program, which outlives any one of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "sandbox-seccomp.h"
#include "sandbox.h"
#include "unit-file.h"

#define EXEC "[Service]\nExecStart=/bin/true\n"

static void quiet(int level, const char *msg, void *userdata) {
        (void) level, (void) msg, (void) userdata;
}

static struct unit_file *parse_ok(const char *text) {
        struct unit_file *u = NULL;
        char *message = NULL;
        int r = unit_file_parse("c.service", "test/c.service", text, strlen(text), &u, &message);
        if (r < 0)
                fail_msg("refused (%d): %s", r, message ? message : "?");
        free(message);
        return u;
}

static struct sandbox_plan *plan_ok(const struct unit_file *u) {
        struct sandbox_self self;
        assert_int_equal(sandbox_self_get(&self), 0);
        struct sandbox_plan *p = NULL;
        assert_int_equal(sandbox_plan_new("c.service", u, 0, &self, &p), 0);
        return p;
}

/* The child of p's hook: chroot("/") and socket(AF_PACKET) must fail as the filters say. */
static int check_filters(void) {
        if (chroot("/") == 0 || errno != EPERM)
                return 1;
        int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
        if (fd >= 0 || errno != EAFNOSUPPORT)
                return 2;
        return 0;
}

static int run_hook(struct sandbox_plan *p) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int stage = 0;
                _exit(sandbox_pre_exec(p, &stage) < 0 ? 127 : check_filters());
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char filters[] = EXEC "SystemCallFilter=~@privileged\nSystemCallErrorNumber=EPERM\n"
                                   "RestrictAddressFamilies=AF_INET AF_UNIX\n";

static void test_reused(void **state) {
        (void) state;
        struct unit_file *u = parse_ok(filters);
        assert_null(u->sandbox->bpf_cache); /* nothing compiled at load */
        struct sandbox_plan *a = plan_ok(u);
        const struct unit_bpf_cache *c = u->sandbox->bpf_cache;
        assert_non_null(c);
        assert_true(c->filter_built && c->programs_built && c->n_programs >= 1);
        assert_ptr_equal(a->seccomp_filter, c->filter.filter);
        assert_int_equal(a->seccomp_len, c->filter.len);
        assert_non_null(a->hardening);
        assert_int_equal(a->hardening->n_programs, c->n_programs);
        sandbox_plan_free(a); /* the programs stay the file's */

        struct sandbox_plan *b = plan_ok(u);
        assert_ptr_equal(u->sandbox->bpf_cache, c);
        assert_ptr_equal(b->seccomp_filter, c->filter.filter); /* the same program, not compiled again */
        for (size_t i = 0; i < c->n_programs; i++)
                assert_ptr_equal(b->hardening->programs[i].filter, c->programs[i].filter);
        assert_int_equal(run_hook(b), 0); /* and the reused programs are the ones a child loads */
        sandbox_plan_free(b);
        unit_file_free(u);
}

/* Units without seccomp keys pay nothing: no cache, not even an empty one. */
static void test_none_without_filters(void **state) {
        (void) state;
        static const char *const texts[] = {
                EXEC "NoNewPrivileges=yes\n",
                EXEC "LimitNOFILE=512\n",
                EXEC "PrivateTmp=yes\nProtectSystem=full\n",
        };
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
                struct unit_file *u = parse_ok(texts[i]);
                sandbox_plan_free(plan_ok(u));
                assert_true(!u->sandbox || !u->sandbox->bpf_cache);
                unit_file_free(u);
        }
}

/* daemon-reload of a changed file loads a new unit_file (manager/reload.c): its
 * first plan compiles the new keys' programs; the old file's stay as they were. */
static void test_changed_file_compiles_its_own(void **state) {
        (void) state;
        struct unit_file *old = parse_ok(filters);
        struct sandbox_plan *a = plan_ok(old);
        struct unit_file *changed = parse_ok(EXEC "SystemCallFilter=~@privileged @mount\nSystemCallErrorNumber=EPERM\n"
                                                  "RestrictAddressFamilies=AF_INET AF_UNIX\n");
        assert_false(unit_file_same_text(old, changed));
        struct sandbox_plan *b = plan_ok(changed);
        assert_ptr_not_equal(changed->sandbox->bpf_cache, old->sandbox->bpf_cache);
        assert_ptr_not_equal(b->seccomp_filter, a->seccomp_filter);
        assert_false(b->seccomp_len == a->seccomp_len &&
                     !memcmp(b->seccomp_filter, a->seccomp_filter, a->seccomp_len * 8u)); /* 8: sizeof(struct sock_filter) */
        assert_int_equal(run_hook(b), 0);
        sandbox_plan_free(a);
        sandbox_plan_free(b);
        unit_file_free(changed);
        unit_file_free(old);
}

/* 100 copies of a unit start with one compiled SystemCallFilter=; it lives while a file holds it. */
static void test_shared_between_files(void **state) {
        (void) state;
        struct unit_file *a = parse_ok(filters), *b = parse_ok(EXEC "SystemCallErrorNumber=EPERM\n"
                                                                    "SystemCallFilter=~@privileged\n"
                                                                    "RestrictAddressFamilies=AF_UNIX AF_INET\n");
        struct unit_file *other = parse_ok(EXEC "SystemCallFilter=~@privileged\n"); /* kills: another program */
        struct sandbox_plan *pa = plan_ok(a), *pb = plan_ok(b), *po = plan_ok(other);
        assert_ptr_not_equal(a->sandbox->bpf_cache, b->sandbox->bpf_cache); /* each file its cache */
        assert_ptr_equal(pa->seccomp_filter, pb->seccomp_filter);           /* one program */
        assert_ptr_not_equal(po->seccomp_filter, pa->seccomp_filter);
        sandbox_plan_free(pa);
        unit_file_free(a); /* b still holds it */
        assert_int_equal(run_hook(pb), 0);
        sandbox_plan_free(pb);
        struct sandbox_plan *again = plan_ok(b);
        assert_int_equal(run_hook(again), 0);
        sandbox_plan_free(again);
        sandbox_plan_free(po);
        unit_file_free(b);
        unit_file_free(other); /* LeakSanitizer (the ASan build) checks that the last one freed it */
}

int main(void) {
        log_set_sink(quiet, NULL);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reused),
                cmocka_unit_test(test_none_without_filters),
                cmocka_unit_test(test_changed_file_compiles_its_own),
                cmocka_unit_test(test_shared_between_files),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
