/* SPDX-License-Identifier: MIT */
/*
 * parsefix (issue 17, QA finding H2): for every sandboxing key, `KEY=value`
 * then `KEY=` leaves the unit as systemd 252 leaves it. systemd ignores an
 * empty boolean, enum, mode or resource limit ("Failed to parse boolean
 * value, ignoring": the earlier value is kept) and resets a list; both were
 * checked with `systemd-analyze verify` of systemd 252 on a file setting
 * each key and then emptying it. The state compared is everything tend
 * applies or reports: the parsed fields, the refused keys and the exposure
 * `tendctl security` computes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <cmocka.h>

#include "log.h"
#include "security-assess.h"
#include "unit-file-internal.h"
#include "unit-file-namespace.h"
#include "unit-file.h"
#include "unit-hardening.h"

static char last_warning[1024], last_error[1024];

static void sink(int level, const char *msg, void *userdata) {
        (void) userdata;
        if (level <= LOG_ERR)
                snprintf(last_error, sizeof last_error, "%s", msg);
        else if (level == LOG_WARNING && !strstr(msg, "weaker isolation accepted"))
                snprintf(last_warning, sizeof last_warning, "%s", msg);
}

static int setup(void **state) {
        (void) state;
        last_warning[0] = last_error[0] = '\0';
        log_set_sink(sink, NULL);
        log_set_max_level(LOG_INFO);
        security_assess_test_apply_all(true);
        return unit_hardening_accept_global(NULL);
}

enum after_empty { KEPT, RESET };

static const struct {
        const char *key, *value;
        enum after_empty after;
} keys[] = {
        /* booleans, enums, modes: systemd ignores "" */
        { "PrivateTmp", "yes", KEPT }, { "PrivateDevices", "yes", KEPT }, { "PrivateNetwork", "yes", KEPT },
        { "PrivateUsers", "yes", KEPT }, { "PrivateMounts", "yes", KEPT }, { "PrivateIPC", "yes", KEPT },
        { "ProtectSystem", "strict", KEPT }, { "ProtectHome", "yes", KEPT }, { "ProtectProc", "invisible", KEPT },
        { "ProcSubset", "pid", KEPT }, { "ProtectKernelTunables", "yes", KEPT },
        { "ProtectKernelModules", "yes", KEPT }, { "ProtectKernelLogs", "yes", KEPT },
        { "ProtectControlGroups", "yes", KEPT }, { "ProtectClock", "yes", KEPT },
        { "ProtectHostname", "yes", KEPT }, { "MemoryDenyWriteExecute", "yes", KEPT },
        { "LockPersonality", "yes", KEPT }, { "RestrictRealtime", "yes", KEPT },
        { "RestrictSUIDSGID", "yes", KEPT }, { "NoNewPrivileges", "yes", KEPT }, { "UMask", "0077", KEPT },
        { "RemoveIPC", "yes", KEPT }, { "NotifyAccess", "all", KEPT }, { "KeyringMode", "shared", KEPT },
        { "DevicePolicy", "strict", KEPT }, { "RuntimeDirectoryMode", "0700", KEPT },
        { "StateDirectoryMode", "0700", KEPT }, { "CacheDirectoryMode", "0700", KEPT },
        { "LogsDirectoryMode", "0700", KEPT }, { "ConfigurationDirectoryMode", "0700", KEPT },
        { "LimitCPU", "10", KEPT }, { "LimitFSIZE", "10", KEPT }, { "LimitDATA", "10", KEPT },
        { "LimitSTACK", "10", KEPT }, { "LimitCORE", "10", KEPT }, { "LimitRSS", "10", KEPT },
        { "LimitNOFILE", "10", KEPT }, { "LimitAS", "10", KEPT }, { "LimitNPROC", "10", KEPT },
        { "LimitMEMLOCK", "10", KEPT }, { "LimitLOCKS", "10", KEPT }, { "LimitSIGPENDING", "10", KEPT },
        { "LimitMSGQUEUE", "10", KEPT }, { "LimitNICE", "10", KEPT }, { "LimitRTPRIO", "10", KEPT },
        { "LimitRTTIME", "10", KEPT },
        /* lists and strings: systemd resets on "" */
        { "RestrictAddressFamilies", "AF_INET", RESET }, { "RestrictNamespaces", "yes", RESET },
        { "SystemCallArchitectures", "native", RESET }, { "SystemCallFilter", "@system-service", RESET },
        { "SystemCallLog", "@clock", RESET }, { "SystemCallErrorNumber", "EPERM", RESET },
        { "ReadWritePaths", "/tmp", RESET }, { "ReadOnlyPaths", "/tmp", RESET },
        { "InaccessiblePaths", "/tmp", RESET }, { "ExecPaths", "/tmp", RESET }, { "NoExecPaths", "/tmp", RESET },
        { "TemporaryFileSystem", "/tmp", RESET }, { "BindPaths", "/tmp", RESET },
        { "BindReadOnlyPaths", "/tmp", RESET }, { "ReadWriteDirectories", "/tmp", RESET },
        { "ReadOnlyDirectories", "/tmp", RESET }, { "InaccessibleDirectories", "/tmp", RESET },
        { "User", "nobody", RESET }, { "Group", "nogroup", RESET }, { "SupplementaryGroups", "adm", RESET },
        /* refused keys (unit-file-refused.c): systemd resets on "" */
        { "IPAddressDeny", "any", RESET }, { "IPAddressAllow", "localhost", RESET },
        { "IPIngressFilterPath", "/sys/fs/bpf/x", RESET }, { "IPEgressFilterPath", "/sys/fs/bpf/x", RESET },
        { "BPFProgram", "egress:/sys/fs/bpf/x", RESET },
        { "SocketBindAllow", "tcp:80", RESET }, { "SocketBindDeny", "any", RESET },
        { "RestrictNetworkInterfaces", "lo", RESET }, { "DeviceAllow", "/dev/null rw", RESET },
        { "RestrictFileSystems", "ext4", RESET }, { "AppArmorProfile", "foo", RESET },
        { "SELinuxContext", "foo", RESET }, { "SmackProcessLabel", "foo", RESET },
        { "RootDirectory", "/srv", RESET }, { "RootImage", "/x", RESET }, { "RootImageOptions", "root:ro", RESET },
        { "RootHash", "0123456789abcdef0123456789abcdef", RESET }, { "RootHashSignature", "base64:aGVsbG8=", RESET },
        { "RootVerity", "/x", RESET }, { "MountImages", "/x:/y", RESET }, { "ExtensionImages", "/x", RESET },
        { "ExtensionDirectories", "/x", RESET }, { "NetworkNamespacePath", "/run/netns/x", RESET },
        { "IPCNamespacePath", "/run/x", RESET }, { "MountFlags", "private", RESET },
        { "SecureBits", "keep-caps", RESET },
};

static int find(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (streq(keys[i].key, key))
                        return (int) i;
        return -1;
}

static void put(char **b, size_t *n, const void *p, size_t len) {
        for (size_t i = 0; i < len; i++) {
                char *s = NULL;
                assert_true(asprintf(&s, "%s%02x", *b ? *b : "", ((const unsigned char *) p)[i]) >= 0);
                free(*b);
                *b = s;
        }
        *n += len;
}

/* Everything tend applies or reports of f, as a string (owned by the caller). */
static char *fingerprint(const struct unit_file *f) {
        char *b = NULL;
        size_t n = 0;
        const struct unit_sandbox_keys *sb = unit_file_sandbox(f);
        const struct unit_namespace_keys *ns = unit_file_namespace(f);
        const struct unit_hardening_keys *h = unit_file_hardening(f);
        int lists[_UNIT_NS_LIST_MAX];
        for (int i = 0; i < _UNIT_NS_LIST_MAX; i++)
                lists[i] = ns->lists[i] ? (int) strv_length(ns->lists[i]) : 0;
        put(&b, &n, lists, sizeof lists);
        put(&b, &n, &ns->protect_system, offsetof(struct unit_namespace_keys, proc_subset_pid) + 1 -
                                                 offsetof(struct unit_namespace_keys, protect_system));
        put(&b, &n, h, offsetof(struct unit_hardening_keys, syscall_log));
        put(&b, &n, &h->syscall_log.set, 1);
        put(&b, &n, &sb->umask, sizeof sb->umask);
        put(&b, &n, unit_file_exec(f)->directory_modes, sizeof unit_file_exec(f)->directory_modes);
        put(&b, &n, sb->limits, sizeof sb->limits);
        put(&b, &n, &sb->no_new_privileges, 1);
        put(&b, &n, &sb->syscall_filter.set, 1);
        put(&b, &n, &sb->syscall_error_number, sizeof sb->syscall_error_number);
        put(&b, &n, &f->notify_access, sizeof f->notify_access);
        bool user = sb->user, group = sb->group, groups = sb->supplementary_groups;
        put(&b, &n, &user, 1), put(&b, &n, &group, 1), put(&b, &n, &groups, 1);
        bool rmipc = f->hardening && f->hardening->remove_ipc;
        put(&b, &n, &rmipc, 1);
        enum unit_keyring_mode keyring = unit_keyring_mode(f);
        put(&b, &n, &keyring, sizeof keyring);
        for (char **r = f->hardening ? f->hardening->refused : NULL; r && *r; r++)
                put(&b, &n, *r, strlen(*r) + 1);
        struct security_assessment a;
        assert_int_equal(security_assess(f, &a), 0);
        for (size_t i = 0; i < a.n; i++)
                put(&b, &n, &a.checks[i].badness, sizeof a.checks[i].badness);
        return b;
}

/* The fingerprint of a unit with lines (each "KEY=VALUE\n") in [Service]; refused keys accepted. */
static char *unit_with(const char *lines) {
        _cleanup_free_ char *text = NULL;
        struct unit_file *f = NULL;
        assert_true(asprintf(&text, "[Service]\nExecStart=/bin/true\n%s[X-Tend]\nAcceptWeakerIsolation=yes\n",
                             lines) >= 0);
        const struct unit_text t = { "/u/a.service", text, strlen(text) };
        int r = unit_file_parse_texts("a.service", &t, 1, &f, NULL);
        if (r < 0)
                fail_msg("%s: %s", lines, last_error);
        char *fp = fingerprint(f);
        unit_file_free(f);
        return fp;
}

static void test_every_key_as_systemd(void **state) {
        (void) state;
        _cleanup_free_ char *none = unit_with("");
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_free_ char *set = NULL, *emptied = NULL, *a = NULL, *b = NULL;
                assert_true(asprintf(&a, "%s=%s\n", keys[i].key, keys[i].value) >= 0);
                assert_true(asprintf(&b, "%s=%s\n%s=\n", keys[i].key, keys[i].value, keys[i].key) >= 0);
                last_warning[0] = '\0';
                set = unit_with(a);
                if (streq(set, none))
                        fail_msg("%s=%s changes nothing tend applies or reports", keys[i].key, keys[i].value);
                last_warning[0] = '\0';
                emptied = unit_with(b);
                if (keys[i].after == KEPT) {
                        if (!streq(emptied, set))
                                fail_msg("%s= after %s=%s: systemd keeps the value, tend does not", keys[i].key,
                                         keys[i].key, keys[i].value);
                        _cleanup_free_ char *want = NULL;
                        assert_true(asprintf(&want, "/u/a.service:4: %s=: empty value, ignoring", keys[i].key) >= 0);
                        assert_string_equal(last_warning, want);
                } else if (!streq(emptied, none))
                        fail_msg("%s= after %s=%s: systemd resets the key, tend does not", keys[i].key, keys[i].key,
                                 keys[i].value);
        }
}

/* Every key tend ignores when empty, and every key it refuses, is in the table above. */
static void test_table_complete(void **state) {
        (void) state;
        for (const char *const *k = uf_empty_ignored_keys(); *k; k++) {
                int i = find(*k);
                if (i < 0 || keys[i].after != KEPT)
                        fail_msg("%s: not in the test's table as KEPT", *k);
        }
        for (const char *const *k = unit_hardening_refused_keys(); *k; k++)
                if (find(*k) < 0 && !streq(*k, "DynamicUser"))
                        fail_msg("%s: a refused key missing from the test's table", *k);
}

/* systemd 252: DynamicUser= is a fatal error ("Failed to parse boolean value"), the unit is not loaded. */
static void test_dynamic_user_empty_fails(void **state) {
        (void) state;
        static const char text[] = "[Service]\nExecStart=/bin/true\nDynamicUser=yes\nDynamicUser=\n";
        const struct unit_text t = { "/u/a.service", text, sizeof text - 1 };
        struct unit_file *f = NULL;
        assert_true(unit_file_parse_texts("a.service", &t, 1, &f, NULL) < 0);
        assert_non_null(strstr(last_error, "a.service:4: DynamicUser=: empty value"));
        unit_file_free(f);
}

/* The QA case: a drop-in empties the package's PrivateTmp=yes. */
static void test_dropin_keeps_private_tmp(void **state) {
        (void) state;
        static const char text[] = "[Service]\nExecStart=/bin/true\nPrivateTmp=yes\n", dropin[] = "[Service]\nPrivateTmp=\n";
        const struct unit_text t[2] = { { "/u/a.service", text, sizeof text - 1 },
                                        { "/u/a.service.d/x.conf", dropin, sizeof dropin - 1 } };
        struct unit_file *f = NULL;
        assert_int_equal(unit_file_parse_texts("a.service", t, 2, &f, NULL), 0);
        assert_true(unit_file_namespace(f)->private_tmp);
        assert_string_equal(last_warning, "/u/a.service.d/x.conf:2: PrivateTmp=: empty value, ignoring");
        unit_file_free(f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_every_key_as_systemd, setup),
                cmocka_unit_test_setup(test_table_complete, setup),
                cmocka_unit_test_setup(test_dynamic_user_empty_fails, setup),
                cmocka_unit_test_setup(test_dropin_keeps_private_tmp, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
