/* SPDX-License-Identifier: MIT */
/*
 * security: the hardening keys tend refuses, the operator's opt-out and the
 * assignments `tendctl security` reads (unit-hardening.h; docs/tend.service.5.md
 * "HARDENING"). Looked up after the key table: a key another part of tend
 * honours is in the key table and never reaches this one (the unit test
 * test-unit-hardening fails when a key is in both).
 *
 * A refused key fails the unit at load, as Type=dbus does: the decision
 * depends only on the unit's files and tend's command line, never on the
 * machine, so it is taken once per load and said once per unit, and the
 * unit never gets as far as a start (docs/tend.service.5.md "Keys tend
 * refuses" says why).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/keyctl.h>

#include "security-assess.h"
#include "unit-file-internal.h"
#include "unit-hardening.h"

/* When an assignment asks for nothing. */
enum nothing {
        NOTHING_EMPTY,  /* only the empty assignment */
        NOTHING_FALSE,  /* empty or a false boolean */
        NOTHING_ROOT,   /* empty or "/" */
        NOTHING_WORDS,  /* empty or one of words */
};

struct refused_key {
        const char *key;
        const char *why;
        enum nothing nothing;
        const char *words; /* NOTHING_WORDS: space-separated values that ask for nothing */
};

static const struct refused_key refused_keys[] = {
        { "IPAddressDeny", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "IPAddressAllow", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "IPIngressFilterPath", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "IPEgressFilterPath", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        /* parsefix: BPFProgram= (systemd 252, systemd.resource-control(5)) attaches any cgroup BPF program */
        { "BPFProgram", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "SocketBindAllow", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "SocketBindDeny", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "RestrictNetworkInterfaces", "needs a cgroup BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "DeviceAllow", "needs a cgroup device BPF program, which tend does not load", NOTHING_EMPTY, NULL },
        { "DevicePolicy", "closed and strict need a cgroup device BPF program, which tend does not load",
          NOTHING_WORDS, "auto" },
        { "RestrictFileSystems", "needs the BPF LSM, which tend does not use", NOTHING_EMPTY, NULL },
        { "AppArmorProfile", "tend does not switch AppArmor profiles", NOTHING_EMPTY, NULL },
        { "SELinuxContext", "tend does not switch SELinux contexts", NOTHING_EMPTY, NULL },
        { "SmackProcessLabel", "tend does not set SMACK labels", NOTHING_EMPTY, NULL },
        { "RootDirectory", "tend does not change a unit's root directory", NOTHING_ROOT, NULL },
        { "RootImage", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "RootImageOptions", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "RootHash", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "RootHashSignature", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "RootVerity", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "MountImages", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "ExtensionImages", "tend does not mount disk images", NOTHING_EMPTY, NULL },
        { "ExtensionDirectories", "tend does not mount system extensions", NOTHING_EMPTY, NULL },
        { "NetworkNamespacePath", "tend does not join another network namespace", NOTHING_EMPTY, NULL },
        { "IPCNamespacePath", "tend does not join another IPC namespace", NOTHING_EMPTY, NULL },
        { "MountFlags", "tend does not change mount propagation", NOTHING_WORDS, "shared" },
        { "DynamicUser", "tend does not allocate dynamic users (use User=)", NOTHING_FALSE, NULL },
        { "SecureBits", "tend does not set securebits", NOTHING_EMPTY, NULL },
};
_Static_assert(ELEMENTSOF(refused_keys) <= 64, "uf_hardening_parse.restrictive holds 64 bits");

/* The keys a drop-in or an old unit may set that ask for nothing here. */
static const char *const nothing_keys[] = {
        "TimeoutCleanSec",      /* systemctl clean's time limit: tend has no clean verb */
        "MountAPIVFS",          /* only with RootDirectory=, refused */
        NULL,
};

struct uf_hardening_parse {
        struct strv_builder assignments, accepted;
        bool accept_all, remove_ipc;
        unsigned char keyring_mode; /* keyring: enum unit_keyring_mode */
        uint64_t restrictive;    /* bit i: refused_keys[i]'s last assignment asks for something */
        unsigned line[ELEMENTSOF(refused_keys)];
};

/* The global opt-out (tend --accept-weaker-isolation). */
static char **global_accepted;
static bool global_accept_all;

static const struct refused_key *refused_find(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(refused_keys); i++)
                if (streq(refused_keys[i].key, key))
                        return &refused_keys[i];
        return NULL;
}

const char *unit_hardening_refused_why(const char *key) {
        const struct refused_key *r = refused_find(key);
        return r ? r->why : NULL;
}

const char *const *unit_hardening_refused_keys(void) {
        static const char *keys[ELEMENTSOF(refused_keys) + 1];
        for (size_t i = 0; i < ELEMENTSOF(refused_keys); i++)
                keys[i] = refused_keys[i].key;
        return keys;
}

static bool asks_nothing(const struct refused_key *r, const char *value) {
        if (!*value)
                return true;
        switch (r->nothing) {
        case NOTHING_FALSE:
                return uf_parse_boolean(value) == 0;
        case NOTHING_ROOT:
                return streq(value, "/");
        case NOTHING_WORDS: {
                size_t n = strlen(value);
                for (const char *w = r->words; *w; w += strcspn(w, " "), w += strspn(w, " "))
                        if (strcspn(w, " ") == n && strncmp(w, value, n) == 0)
                                return true;
                return false;
        }
        default:
                return false;
        }
}

static struct uf_hardening_parse *state(struct parse_ctx *c) {
        if (!c->hardening)
                c->hardening = calloc(1, sizeof *c->hardening);
        return c->hardening;
}

int uf_hardening_note(struct parse_ctx *c, const char *key, const char *value) {
        if (!security_assess_reads(key))
                return 0;
        struct uf_hardening_parse *h = state(c);
        char *a = NULL;
        if (!h || asprintf(&a, "%s=%s", key, value) < 0)
                return report(c, LOG_ERR, ENOMEM, "%s=: out of memory", key);
        return strv_builder_push(&h->assignments, a);
}

bool uf_refused_key(struct parse_ctx *c, enum section section, const char *key, const char *value) {
        if (section != SECTION_SERVICE)
                return false;
        for (const char *const *k = nothing_keys; *k; k++)
                if (streq(*k, key))
                        return true;
        const struct refused_key *r = refused_find(key);
        if (!r)
                return false;
        struct uf_hardening_parse *h = state(c);
        if (!h) {
                report(c, LOG_ERR, ENOMEM, "%s=: out of memory", key);
                return true;
        }
        size_t i = (size_t) (r - refused_keys);
        if (asks_nothing(r, value))
                h->restrictive &= ~(UINT64_C(1) << i);
        else {
                h->restrictive |= UINT64_C(1) << i;
                h->line[i] = c->line;
        }
        return true;
}

/* "Key" of word ("Key" or "Key="), or NULL if it is not a key name. */
static char *key_of(const char *word) {
        size_t n = strcspn(word, "=");
        if (n == 0 || n > 64 || (word[n] && word[n + 1]))
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", word[i]))
                        return NULL;
        return strndup(word, n);
}

int uf_parse_accept_weaker(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct uf_hardening_parse *h = state(c);
        if (!h)
                return report(c, LOG_ERR, ENOMEM, "%s=: out of memory", k->key);
        int b = *value ? uf_parse_boolean(value) : 0;
        if (b >= 0) { /* yes: every key; no, empty: none so far */
                strv_builder_clear(&h->accepted);
                h->accept_all = b > 0;
                return 0;
        }
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                int r = uf_next_word(c, k, &p, value, &w, NULL);
                if (r <= 0)
                        return r;
                char *key = key_of(w), q[QUOTE_BUF];
                if (!key)
                        return report(c, LOG_ERR, EINVAL, "%s=: %s is not a key name", k->key, uf_quote(q, w));
                r = strv_builder_push(&h->accepted, key);
                if (r < 0)
                        return report(c, LOG_ERR, ENOMEM, "%s=: out of memory", k->key);
        }
}

/* RemoveIPC= (exec/remove-ipc.h applies it when the unit stops). */
int uf_parse_remove_ipc(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct uf_hardening_parse *h = state(c);
        int b = *value ? uf_parse_boolean(value) : 0;
        char q[QUOTE_BUF];
        if (!h)
                return report(c, LOG_ERR, ENOMEM, "%s=: out of memory", k->key);
        if (b < 0)
                return syntax_error(c, "%s=: invalid boolean %s", k->key, uf_quote(q, value));
        h->remove_ipc = b > 0;
        return 0;
}

/* keyring: KeyringMode= (systemd.exec(5)): inherit, private, shared; empty: the default. */
int uf_parse_keyring_mode(struct parse_ctx *c, const struct key_def *k, const char *value) {
        static const char *const names[] = {
                [UNIT_KEYRING_INHERIT] = "inherit", [UNIT_KEYRING_PRIVATE] = "private",
                [UNIT_KEYRING_SHARED] = "shared",
        };
        struct uf_hardening_parse *h = state(c);
        char q[QUOTE_BUF];
        if (!h)
                return report(c, LOG_ERR, ENOMEM, "%s=: out of memory", k->key);
        for (size_t i = UNIT_KEYRING_INHERIT; i < ELEMENTSOF(names); i++)
                if (streq(value, names[i])) {
                        h->keyring_mode = (unsigned char) i;
                        return 0;
                }
        if (*value)
                return syntax_error(c, "%s=: %s is none of inherit, private, shared", k->key, uf_quote(q, value));
        h->keyring_mode = UNIT_KEYRING_DEFAULT;
        return 0;
}

/* Whether this tend can give a process a session keyring of its own: a
 * kernel with keys, no seccomp policy denying keyctl (a container's default
 * one does). Asked once. */
static bool keyrings_available(void) {
        static int available = -1;
        if (available < 0)
                available = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, (long) KEY_SPEC_SESSION_KEYRING, 0L) >= 0 ||
                            !(errno == ENOSYS || errno == EPERM || errno == EACCES);
        return available;
}

enum unit_keyring_mode unit_keyring_mode(const struct unit_file *f) {
        enum unit_keyring_mode m = f && f->hardening ? f->hardening->keyring_mode : UNIT_KEYRING_DEFAULT;
        if (m != UNIT_KEYRING_DEFAULT)
                return m;
        return geteuid() == 0 && keyrings_available() ? UNIT_KEYRING_PRIVATE : UNIT_KEYRING_INHERIT;
}

bool unit_keyring_available(void) {
        return keyrings_available();
}

static bool listed(char *const *l, const char *key) {
        size_t n = strcspn(key, "=");
        for (; l && *l; l++)
                if (strlen(*l) == n && strncmp(*l, key, n) == 0)
                        return true;
        return false;
}

bool unit_hardening_accepts(const struct unit_file *f, const char *key) {
        if (global_accept_all || listed(global_accepted, key))
                return true;
        const struct unit_hardening *h = f ? f->hardening : NULL;
        return h && (h->accept_all || listed(h->accepted, key));
}

int unit_hardening_accept_global(const char *list) {
        global_accepted = strv_free(global_accepted);
        global_accept_all = false;
        if (!list)
                return 0;
        if (!*list || uf_parse_boolean(list) > 0) {
                global_accept_all = true;
                return 0;
        }
        for (const char *p = list; *p;) {
                size_t n = strcspn(p, ",");
                _cleanup_free_ char *w = strndup(p, n);
                if (!w)
                        return -ENOMEM;
                char *key = key_of(w);
                if (!key)
                        return -EINVAL;
                if (strv_push(&global_accepted, key) < 0)
                        return -ENOMEM;
                p += n + (p[n] == ',');
        }
        return 0;
}

const char *unit_hardening_value(const struct unit_file *f, const char *key) {
        const struct unit_hardening *h = f->hardening;
        const char *v = NULL;
        size_t n = strlen(key);
        for (char **a = h ? h->assignments : NULL; a && *a; a++)
                if (strncmp(*a, key, n) == 0 && (*a)[n] == '=')
                        v = *a + n + 1;
        return v;
}

struct unit_hardening *unit_hardening_free(struct unit_hardening *h) {
        if (!h)
                return NULL;
        strv_free(h->assignments);
        strv_free(h->refused);
        strv_free(h->accepted);
        free(h);
        return NULL;
}

void uf_hardening_parse_free(struct parse_ctx *c) {
        if (!c->hardening)
                return;
        strv_builder_clear(&c->hardening->assignments);
        strv_builder_clear(&c->hardening->accepted);
        free(c->hardening);
        c->hardening = NULL;
}

/* One line for the keys not applied under the opt-out (said once per unit, at each load). */
static int warn_not_applied(struct parse_ctx *c, char *const *keys) {
        struct unit_buf b = {};
        int r = 0;
        for (char *const *k = keys; r >= 0 && k && *k; k++) {
                const char *why = unit_hardening_refused_why(*k);
                if (k != keys)
                        r = unit_buf_put(&b, ", ", 2);
                if (r >= 0)
                        r = unit_buf_put(&b, *k, strlen(*k));
                if (r >= 0)
                        r = unit_buf_put(&b, "= (", 3);
                if (r >= 0)
                        r = unit_buf_put(&b, why, strlen(why));
                if (r >= 0)
                        r = unit_buf_putc(&b, ')');
        }
        if (r >= 0)
                report(c, LOG_WARNING, 0, "weaker isolation accepted: not applying %s", b.s);
        free(b.s);
        return r;
}

int uf_finish_hardening(struct parse_ctx *c) {
        struct uf_hardening_parse *h = c->hardening;
        if (!h)
                return 0;
        struct unit_hardening *u = calloc(1, sizeof *u);
        if (!u)
                return -ENOMEM;
        u->accept_all = h->accept_all;
        u->remove_ipc = h->remove_ipc;
        u->keyring_mode = h->keyring_mode;
        u->accepted = h->accepted.v ? strv_builder_take(&h->accepted) : NULL;
        u->assignments = h->assignments.v ? strv_builder_take(&h->assignments) : NULL;
        c->u->hardening = u; /* before the checks: unit_hardening_accepts() reads it */
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(refused_keys); i++) {
                if (!(h->restrictive & (UINT64_C(1) << i)))
                        continue;
                const struct refused_key *k = &refused_keys[i];
                if (unit_hardening_accepts(c->u, k->key)) {
                        r = strv_extend(&u->refused, k->key);
                        continue;
                }
                c->line = h->line[i];
                report(c, LOG_ERR, EOPNOTSUPP,
                       "%s= cannot be applied (%s): refusing to run with less isolation than asked "
                       "([X-Tend] AcceptWeakerIsolation=%s accepts it)", k->key, k->why, k->key);
        }
        c->line = 0;
        if (r >= 0 && u->refused && !c->error)
                r = warn_not_applied(c, u->refused);
        return r;
}
