/* SPDX-License-Identifier: MIT */
/*
 * security (issue 17): the hardening keys tend refuses (unit-hardening.h),
 * the opt-out per unit and global, and the exposure security-assess.h
 * computes, checked against the numbers systemd-analyze 252 prints for the
 * same files (`systemd-analyze security --offline=true`, run when the test
 * was written; the integration test test_security.py runs it live).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <cmocka.h>

#include "hardening.h"
#include "log.h"
#include "security-assess.h"
#include "unit-file-internal.h"
#include "unit-file.h"
#include "unit-hardening.h"

static char last_error[1024], last_warning[1024];

static void sink(int level, const char *msg, void *userdata) {
        (void) userdata;
        if (level <= LOG_ERR)
                snprintf(last_error, sizeof last_error, "%s", msg);
        else if (level == LOG_WARNING)
                snprintf(last_warning, sizeof last_warning, "%s", msg);
}

static int setup(void **state) {
        (void) state;
        last_error[0] = last_warning[0] = '\0';
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_INFO);
        return unit_hardening_accept_global(NULL);
}

/* The unit's file text, then a drop-in (or NULL). */
static int parse2(const char *text, const char *dropin, struct unit_file **ret) {
        const struct unit_text t[2] = { { "/u/a.service", text, strlen(text) },
                                        { "/u/a.service.d/x.conf", dropin, dropin ? strlen(dropin) : 0 } };
        *ret = NULL;
        return unit_file_parse_texts("a.service", t, dropin ? 2 : 1, ret, NULL);
}

static struct unit_file *parse_ok(const char *text) {
        struct unit_file *f;
        assert_int_equal(parse2(text, NULL, &f), 0);
        return f;
}

/* The coordinator merges keys other helpers honour into the key table: a key
 * in both tables would be refused by this one's docs and honoured by the
 * other; this test fails until the refused entry is deleted. */
static void test_no_key_both_honoured_and_refused(void **state) {
        (void) state;
        for (const char *const *k = unit_hardening_refused_keys(); *k; k++)
                if (uf_key_lookup(SECTION_SERVICE, *k))
                        fail_msg("%s= is in the key table (honoured) and in unit-file-refused.c: delete it there", *k);
}

static void test_refused_at_load_naming_the_key(void **state) {
        (void) state;
        struct unit_file *f;
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\nIPAddressDeny=any\n", NULL, &f), -EOPNOTSUPP);
        assert_null(f);
        assert_non_null(strstr(last_error, "/u/a.service:3: IPAddressDeny= cannot be applied (needs a cgroup BPF"));
        assert_non_null(strstr(last_error, "AcceptWeakerIsolation=IPAddressDeny"));
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\nRootDirectory=/srv\n", NULL, &f), -EOPNOTSUPP);
        assert_non_null(strstr(last_error, "RootDirectory= cannot be applied"));
}

/* Values that ask for nothing load, and a later empty assignment (a drop-in's) clears a list key. */
static void test_values_asking_for_nothing(void **state) {
        (void) state;
        static const char *const texts[] = {
                "IPAddressDeny=\n", "DevicePolicy=auto\n", "KeyringMode=inherit\n", "RemoveIPC=no\n",
                "RootDirectory=/\n", "DynamicUser=false\n", "MountFlags=shared\n", "ReadWriteDirectories=/srv\n",
        };
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
                char text[256];
                snprintf(text, sizeof text, "[Service]\nExecStart=/bin/true\n%s", texts[i]);
                unit_file_free(parse_ok(text));
        }
        struct unit_file *f;
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\nDeviceAllow=/dev/null rw\n", "[Service]\nDeviceAllow=\n", &f), 0);
        unit_file_free(f);
        /* parsefix: systemd 252 ignores an empty DevicePolicy= (the earlier value stays): refused still */
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\nDevicePolicy=closed\n", "[Service]\nDevicePolicy=\n", &f),
                         -EOPNOTSUPP);
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\nDevicePolicy=strict\n", NULL, &f), -EOPNOTSUPP);
}

/* [X-Tend] AcceptWeakerIsolation= from a drop-in: the package's file unchanged. */
static void test_opt_out_per_unit(void **state) {
        (void) state;
        const char *text = "[Service]\nExecStart=/bin/true\nIPAddressDeny=any\nSecureBits=keep-caps\n";
        struct unit_file *f;
        assert_int_equal(parse2(text, "[X-Tend]\nAcceptWeakerIsolation=IPAddressDeny\n", &f), -EOPNOTSUPP);
        assert_non_null(strstr(last_error, "SecureBits= cannot be applied"));
        assert_int_equal(parse2(text, "[X-Tend]\nAcceptWeakerIsolation=IPAddressDeny= SecureBits\n", &f), 0);
        assert_non_null(strstr(last_warning, "a.service: weaker isolation accepted: not applying IPAddressDeny= ("));
        assert_non_null(strstr(last_warning, "), SecureBits= ("));
        assert_true(unit_hardening_accepts(f, "SecureBits="));
        assert_false(unit_hardening_accepts(f, "PrivateTmp"));
        unit_file_free(f);
        assert_int_equal(parse2(text, "[X-Tend]\nAcceptWeakerIsolation=yes\n", &f), 0);
        assert_true(unit_hardening_accepts(f, "PrivateTmp"));
        unit_file_free(f);
        assert_int_equal(parse2(text, "[X-Tend]\nAcceptWeakerIsolation=Not=AKey\n", &f), -EINVAL);
}

static void test_opt_out_global(void **state) {
        (void) state;
        struct unit_file *f;
        const char *text = "[Service]\nExecStart=/bin/true\nIPAddressDeny=any\nSecureBits=keep-caps\n";
        assert_int_equal(unit_hardening_accept_global("IPAddressDeny=,SecureBits"), 0);
        assert_int_equal(parse2(text, NULL, &f), 0);
        assert_true(unit_hardening_accepts(NULL, "SecureBits="));
        assert_false(unit_hardening_accepts(NULL, "PrivateTmp="));
        unit_file_free(f);
        assert_int_equal(unit_hardening_accept_global("IPAddressDeny"), 0);
        assert_int_equal(parse2(text, NULL, &f), -EOPNOTSUPP);
        assert_int_equal(unit_hardening_accept_global("yes"), 0);
        assert_true(unit_hardening_accepts(NULL, "Anything"));
        assert_int_equal(unit_hardening_accept_global(",x"), -EINVAL);
        assert_int_equal(unit_hardening_accept_global(NULL), 0);
}

/* exec/hardening.h, what the "ns" and "seccomp" parts call when this machine
 * cannot apply a key they honour: refused unless accepted, said once per unit and key. */
static void test_cannot_apply(void **state) {
        (void) state;
        struct unit_file *f;
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\n", "[X-Tend]\nAcceptWeakerIsolation=PrivateTmp\n", &f), 0);
        assert_int_equal(hardening_cannot_apply("a.service", f, "ProtectSystem=", "needs a mount namespace"), -EPERM);
        assert_string_equal(last_error, "a.service: ProtectSystem= cannot be applied (needs a mount namespace): "
                                        "refusing to run with less isolation than asked");
        assert_int_equal(hardening_cannot_apply("a.service", f, "PrivateTmp=", "needs a mount namespace"), 1);
        assert_string_equal(last_warning, "a.service: weaker isolation accepted: not applying PrivateTmp= "
                                          "(needs a mount namespace)");
        last_warning[0] = '\0';
        assert_int_equal(hardening_cannot_apply("a.service", f, "PrivateTmp=", "needs a mount namespace"), 1);
        assert_string_equal(last_warning, ""); /* once per unit and key */
        assert_int_equal(unit_hardening_accept_global("ProtectSystem"), 0);
        assert_int_equal(hardening_cannot_apply("b.service", NULL, "ProtectSystem=", "needs a mount namespace"), 1);
        assert_non_null(strstr(last_warning, "b.service: weaker isolation accepted: not applying ProtectSystem="));
        unit_file_free(f);
}

static const struct security_check *check(const struct security_assessment *a, const char *name) {
        for (size_t i = 0; i < a->n; i++)
                if (strcmp(a->checks[i].name, name) == 0)
                        return &a->checks[i];
        fail_msg("no check %s", name);
        return NULL;
}

/*
 * systemd-analyze 252 --offline=true: 9.6, 4.9 and 7.0 for these three (with
 * systemd's default KeyringMode=private). tend as root gives the same default
 * (keyring); as another user (a user manager's default, inherit) KeyringMode=
 * is bad (weight 1000 of the sum) and flagged not applied: 9.8, 5.1, 7.1.
 */
static void test_exposure_as_systemd(void **state) {
        (void) state;
        bool priv = unit_keyring_mode(NULL) == UNIT_KEYRING_PRIVATE;
        struct security_assessment a;
        struct unit_file *f = parse_ok("[Service]\nExecStart=/bin/true\n");
        assert_int_equal(security_assess(f, &a), 0);
        assert_int_equal(check(&a, "User=/DynamicUser=")->badness, 10);
        assert_int_equal(check(&a, "SupplementaryGroups=")->badness, SECURITY_NOT_APPLICABLE);
        assert_int_equal(check(&a, "KeyringMode=")->badness, priv ? 0 : 1);
        assert_int_equal(check(&a, "KeyringMode=")->not_applied, !priv);
        assert_false(check(&a, "User=/DynamicUser=")->not_applied);
        assert_int_equal(a.exposure, priv ? 96 : 98); /* systemd 9.6 */
        assert_string_equal(a.level, "UNSAFE");
        unit_file_free(f);

        f = parse_ok("[Service]\nExecStart=/bin/true\nUser=daemon\nNoNewPrivileges=yes\nCapabilityBoundingSet=\n"
                     "UMask=0077\nSystemCallFilter=@system-service\nSystemCallFilter=~@privileged @resources\n");
        assert_int_equal(security_assess(f, &a), 0);
        assert_int_equal(check(&a, "SystemCallFilter=~@privileged")->badness, 0);
        assert_int_equal(check(&a, "SystemCallFilter=~@swap")->badness, 0);
        assert_int_equal(check(&a, "CapabilityBoundingSet=~CAP_SYS_ADMIN")->badness, 0);
        assert_int_equal(check(&a, "UMask=")->badness, 0);
        assert_int_equal(a.exposure, priv ? 49 : 51); /* systemd 4.9 */
        unit_file_free(f);

        f = parse_ok("[Service]\nExecStart=/bin/true\nUser=nobody\nSupplementaryGroups=adm\n"
                     "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_KILL\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n"
                     "NotifyAccess=all\nSystemCallFilter=~@mount @swap @reboot\nUMask=0002\n");
        assert_int_equal(security_assess(f, &a), 0);
        assert_int_equal(check(&a, "User=/DynamicUser=")->badness, 9);
        assert_int_equal(check(&a, "SupplementaryGroups=")->badness, 1);
        assert_int_equal(check(&a, "SystemCallFilter=~@mount")->badness, 0);
        assert_int_equal(check(&a, "SystemCallFilter=~@clock")->badness, 10);
        assert_int_equal(check(&a, "CapabilityBoundingSet=~CAP_KILL")->badness, 1);
        assert_int_equal(check(&a, "CapabilityBoundingSet=~CAP_SYS_ADMIN")->badness, 0);
        assert_int_equal(check(&a, "NotifyAccess=")->badness, 1);
        assert_int_equal(check(&a, "UMask=")->badness, 5);
        assert_int_equal(a.exposure, priv ? 70 : 71); /* systemd 7.0 */
        unit_file_free(f);
}

/* A key accepted under the opt-out counts as absent: the exposure rises. */
static void test_opt_out_raises_exposure(void **state) {
        (void) state;
        const char *text = "[Service]\nExecStart=/bin/true\nUser=daemon\nNoNewPrivileges=yes\nCapabilityBoundingSet=\n";
        struct unit_file *f;
        struct security_assessment with, without;
        assert_int_equal(parse2(text, NULL, &f), 0);
        assert_int_equal(security_assess(f, &with), 0);
        unit_file_free(f);
        assert_int_equal(parse2(text, "[X-Tend]\nAcceptWeakerIsolation=NoNewPrivileges\n", &f), 0);
        assert_int_equal(security_assess(f, &without), 0);
        assert_int_equal(check(&with, "NoNewPrivileges=")->badness, 0);
        assert_int_equal(check(&without, "NoNewPrivileges=")->badness, 1);
        assert_true(check(&without, "NoNewPrivileges=")->not_applied);
        assert_true(without.exposure > with.exposure);
        unit_file_free(f);
}

/* A key tend does not honour yet (not in the key table) counts as absent, flagged. */
static void test_unknown_key_counts_as_absent(void **state) {
        (void) state;
        struct security_assessment a;
        struct unit_file *f = parse_ok("[Service]\nExecStart=/bin/true\nRestrictNamespaces=yes\n");
        bool honoured = uf_key_lookup(SECTION_SERVICE, "RestrictNamespaces") != NULL;
        assert_int_equal(security_assess(f, &a), 0);
        assert_int_equal(check(&a, "RestrictNamespaces=~user")->badness, honoured ? 0 : 1);
        assert_int_equal(check(&a, "RestrictNamespaces=~user")->not_applied, !honoured);
        unit_file_free(f);
}

/* The package's own unit files, as if tend applied every key it does not
 * refuse: systemd-analyze 252 gives redis-server 1.2, memcached 4.8 and
 * apache2 9.4; tend the same as root (its default KeyringMode=private, keyring),
 * else with KeyringMode= bad (inherit): 1.4, 5.0, 9.6. This checks the
 * assessor's reading of the keys the "ns" and "seccomp" parts apply. */
static void test_daemons_as_if_every_key_applied(void **state) {
        (void) state;
        bool priv = unit_keyring_mode(NULL) == UNIT_KEYRING_PRIVATE;
        static const struct { const char *name; unsigned exposure; } t[] = {
                { "redis-server", 12 }, { "memcached", 48 }, { "apache2", 94 },
        };
        security_assess_test_apply_all(true);
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
                char path[128], *data = NULL;
                size_t size = 0;
                snprintf(path, sizeof path, "/lib/systemd/system/%s.service", t[i].name);
                FILE *fp = fopen(path, "re");
                if (!fp)
                        continue; /* not installed */
                data = malloc(65536);
                assert_non_null(data);
                size = fread(data, 1, 65536, fp);
                fclose(fp);
                const struct unit_text texts[1] = { { path, data, size } };
                struct unit_file *f = NULL;
                struct security_assessment a;
                char name[64];
                snprintf(name, sizeof name, "%s.service", t[i].name);
                assert_int_equal(unit_file_parse_texts(name, texts, 1, &f, NULL), 0);
                assert_int_equal(security_assess(f, &a), 0);
                unsigned want = t[i].exposure + (priv ? 0 : 2);
                if (a.exposure != want)
                        fail_msg("%s: exposure %u, want %u", t[i].name, a.exposure, want);
                assert_int_equal(check(&a, "KeyringMode=")->not_applied, !priv);
                unit_file_free(f);
                free(data);
        }
        security_assess_test_apply_all(false);
}

/* keyring: KeyringMode='s values, the default, and what the assessor counts. */
static void test_keyring_mode(void **state) {
        (void) state;
        static const struct { const char *text; enum unit_keyring_mode mode; int badness; } t[] = {
                { "KeyringMode=private\n", UNIT_KEYRING_PRIVATE, 0 },
                { "KeyringMode=shared\n", UNIT_KEYRING_SHARED, 1 },
                { "KeyringMode=inherit\n", UNIT_KEYRING_INHERIT, 1 },
        };
        bool available = unit_keyring_available();
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
                char text[256];
                snprintf(text, sizeof text, "[Service]\nExecStart=/bin/true\n%s", t[i].text);
                struct unit_file *f = parse_ok(text);
                struct security_assessment a;
                assert_int_equal(unit_keyring_mode(f), t[i].mode);
                assert_int_equal(security_assess(f, &a), 0);
                assert_int_equal(check(&a, "KeyringMode=")->badness, available ? t[i].badness : 1);
                assert_int_equal(check(&a, "KeyringMode=")->not_applied, !available && t[i].badness == 0);
                unit_file_free(f);
        }
        /* the default: systemd's for a system manager (root), a user manager's else */
        enum unit_keyring_mode d = geteuid() == 0 && available ? UNIT_KEYRING_PRIVATE : UNIT_KEYRING_INHERIT;
        struct unit_file *f = parse_ok("[Service]\nExecStart=/bin/true\n");
        assert_int_equal(unit_keyring_mode(f), d);
        unit_file_free(f);
        /* an empty assignment is ignored, as systemd 252 does (test-empty-assignment) */
        f = parse_ok("[Service]\nExecStart=/bin/true\nKeyringMode=shared\nKeyringMode=\n");
        assert_int_equal(unit_keyring_mode(f), UNIT_KEYRING_SHARED);
        unit_file_free(f);
        assert_int_equal(unit_keyring_mode(NULL), d);
        struct unit_file *bad;
        assert_true(parse2("[Service]\nExecStart=/bin/true\nKeyringMode=session\n", NULL, &bad) < 0);
        assert_non_null(strstr(last_error, "KeyringMode=: \"session\" is none of inherit, private, shared"));
        /* accepted under the opt-out: counted as absent */
        struct security_assessment a;
        assert_int_equal(parse2("[Service]\nExecStart=/bin/true\nKeyringMode=private\n",
                                "[X-Tend]\nAcceptWeakerIsolation=KeyringMode\n", &bad), 0);
        assert_int_equal(security_assess(bad, &a), 0);
        assert_int_equal(check(&a, "KeyringMode=")->badness, 1);
        assert_true(check(&a, "KeyringMode=")->not_applied);
        unit_file_free(bad);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_no_key_both_honoured_and_refused, setup),
                cmocka_unit_test_setup(test_refused_at_load_naming_the_key, setup),
                cmocka_unit_test_setup(test_values_asking_for_nothing, setup),
                cmocka_unit_test_setup(test_opt_out_per_unit, setup),
                cmocka_unit_test_setup(test_opt_out_global, setup),
                cmocka_unit_test_setup(test_cannot_apply, setup),
                cmocka_unit_test_setup(test_exposure_as_systemd, setup),
                cmocka_unit_test_setup(test_opt_out_raises_exposure, setup),
                cmocka_unit_test_setup(test_unknown_key_counts_as_absent, setup),
                cmocka_unit_test_setup(test_daemons_as_if_every_key_applied, setup),
                cmocka_unit_test_setup(test_keyring_mode, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
