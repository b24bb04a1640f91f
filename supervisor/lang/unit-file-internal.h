/* SPDX-License-Identifier: MIT */
/*
 * What the unit-file parser's files share (unit-file.c lists them); not for
 * other modules, which use unit-file.h. The parse of one unit is single-
 * threaded: a struct parse_ctx belongs to one unit_file_parse() call.
 * Conventions as in unit-file.h: 0 or a negative errno; a parser reports its
 * own errors (report()), and the first error becomes the unit's result.
 */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "unit-exec.h"
#include "unit-file.h"
#include "unit-file-namespace.h" /* ns */

#define WHITESPACE " \t\n\r"
#define QUOTE_MAX 64       /* bytes of a user's token (a value, a name) shown in a message */
#define MESSAGES_MAX 50    /* logged per file: a garbage file cannot flood the log */

enum section {
        SECTION_NONE,    /* before the first header */
        SECTION_UNIT,
        SECTION_SERVICE,
        SECTION_INSTALL, /* [Install]: Alias= read, the rest silently ignored (unit-file-known.c) */
        SECTION_TEND,    /* [X-Tend]: tend's own keys, a section systemd ignores (X- prefix) */
        SECTION_IGNORED, /* [X-…]: silently ignored */
        SECTION_UNKNOWN, /* warned once at its header, its keys ignored */
};

/* Lists that accumulate while parsing; moved into the unit at the end. */
enum {
        LIST_ENVIRONMENT,
        LIST_REQUIRES,
        LIST_WANTS,
        LIST_BINDS_TO,
        LIST_AFTER,
        LIST_BEFORE,
        LIST_SUPPLEMENTARY_GROUPS,
        /* deps: the dependency keys' lists (unit-file-deps.c moves them into unit_dep_keys) */
        LIST_REQUISITE,
        LIST_PART_OF,
        LIST_CONFLICTS,
        LIST_UPHOLDS,
        LIST_ON_FAILURE,
        LIST_ON_SUCCESS,
        LIST_PROPAGATES_RELOAD_TO,
        LIST_RELOAD_PROPAGATED_FROM,
        LIST_ALIAS,      /* load: [Install] Alias= */
        /* etcd: [X-Tend] Hosts=, HostMetadata= (unit-file-cluster.c) */
        LIST_HOSTS,
        LIST_HOST_METADATA,
        _LIST_MAX,
};

struct parse_ctx {
        const char *origin; /* the file, for messages */
        unsigned line;      /* line of the assignment being parsed; 0: the whole file */
        struct unit_file *u;
        const char *name;   /* specifiers: "foo@bar.service" */
        char *prefix;       /* "foo" */
        const char *instance; /* "bar", or NULL */
        int error;          /* the first error, a negative errno */
        char *message;      /* its message */
        unsigned n_messages;
        bool type_set, timeout_start_set;
        unsigned exec_start_extra_line, restart_line, type_line;
        unsigned ambient_line, syscall_filter_line;
        struct strv_builder lists[_LIST_MAX];
        struct unit_sandbox_keys sb; /* the sandboxing keys while parsing; moved out of line at the end */
        bool sb_set;                 /* a sandboxing key was assigned */
        struct unit_exit_statuses xs; /* the same for the exit status sets */
        bool xs_set;
        /* load: the texts parsed (the main file, its drop-ins); c->line of a
         * drop-in's line carries its index (UF_LINE_FILE_SHIFT) */
        const struct unit_text *texts;
        size_t n_texts;
        unsigned line_base;
        uint64_t differs_warned[2]; /* unit-file-known.c: keys already warned about, by table index */
        /* security: the refused keys, the opt-out, the assessed assignments (unit-file-refused.c) */
        struct uf_hardening_parse *hardening; /* NULL until one is assigned */
};

/* A line number's text index and its line in that text. */
/* parsefix: 21 bits of line (a file is at most UNIT_FILE_SIZE_MAX = 1 MiB: at most 2^20 + 1
 * lines), 11 of text index (UNIT_DROPINS_MAX + 1 = 1,025 texts) */
#define UF_LINE_FILE_SHIFT 21
#define UF_LINE_MASK ((1u << UF_LINE_FILE_SHIFT) - 1)
_Static_assert(UNIT_FILE_SIZE_MAX + 1 <= UF_LINE_MASK && UNIT_DROPINS_MAX + 1 <= (UINT_MAX >> UF_LINE_FILE_SHIFT),
               "a line number holds a text index and a line");
/* The file of line (a line of c->texts, or the main file). */
static inline const char *uf_line_origin(const struct parse_ctx *c, unsigned line) {
        size_t i = line >> UF_LINE_FILE_SHIFT;
        return c->texts && i < c->n_texts ? c->texts[i].origin : c->origin;
}

struct key_def {
        enum section section;
        const char *key;
        int (*parse)(struct parse_ctx *c, const struct key_def *k, const char *value);
        size_t offset, size; /* the field in struct unit_file (KEY_SB: unit_sandbox_keys, KEY_XS: unit_exit_statuses) */
        const void *data;    /* the parser's own: an enum table, a list index */
};


/* The defaults of struct unit_file's keys (unit-file-keys.c). */
extern const struct unit_file unit_defaults;

/* key_def.offset of a field in struct unit_sandbox_keys, in struct unit_exit_statuses. */
#define KEY_SB ((size_t) 1 << 30)
#define KEY_XS ((size_t) 1 << 29)
#define KEY_OFFSET(k) ((k)->offset & ~(KEY_SB | KEY_XS))

/* ------------------------------------------------------------------------ */
/* unit-file.c: messages, specifiers, words                                  */
/* ------------------------------------------------------------------------ */

#define QUOTE_BUF (QUOTE_MAX * 4 + 8)

/* s in double quotes for a message: control bytes as \xHH, cut after QUOTE_MAX
 * bytes. Returns buf. */
const char *uf_quote(char buf[static QUOTE_BUF], const char *s);

/*
 * Logs "FILE:LINE: text" at level (the first MESSAGES_MAX of a file); an error
 * (level ≤ LOG_ERR) also becomes the unit's result if it is the first.
 * Returns -abs(error).
 */
_printf_(4, 5) int report(struct parse_ctx *c, int level, int error, const char *fmt, ...);

#define syntax_error(c, ...) report((c), LOG_ERR, EINVAL, __VA_ARGS__)
#define invalid_value(c, k, v) ({                                               \
        char _q[QUOTE_BUF];                                                     \
        report((c), LOG_ERR, EINVAL, "%s=: invalid value %s", (k)->key, uf_quote(_q, (v))); \
})

/* Whether s[0..n) are all unit-name characters ('@' too if at_ok). */
bool uf_unit_name_chars(const char *s, size_t n, bool at_ok);

/* Resolves every specifier of systemd 252 (the unit's own here, the rest
 * uf_put_system_specifier()) in a value of key k into *ret (owned by the
 * caller). An unknown or unresolvable specifier is reported. */
int uf_resolve_specifiers(struct parse_ctx *c, const struct key_def *k, const char *in, char **ret);

/* corpus: the manager's and the machine's specifiers (unit-specifiers.c): %a %A
 * %b %B %C %d %E %g %G %h %H %l %L %m %M %o %s %S %t %T %u %U %v %V %w %W %y
 * %Y appended to b. 0, -EBADSLT (not one of them), -ENXIO (a root's variable
 * unset: unit_dir_root()), -ESRCH (no home or shell), another negative errno. */
int uf_put_system_specifier(struct parse_ctx *c, struct unit_buf *b, char spec);

/* Extracts the next word of an assignment into *ret (owned by the caller),
 * reporting bad quoting; 1, 0 at the end, or an error. */
int uf_next_word(struct parse_ctx *c, const struct key_def *k, const char **p, const char *value, char **ret,
              bool *bad_escape);
/* uf_next_word, then its specifiers resolved (uf_resolve_specifiers): 1 with
 * *ret (owned by the caller), 0 at the end, or an error (reported). */
int uf_next_word_resolved(struct parse_ctx *c, const struct key_def *k, const char **p, const char *value, char **ret,
                          bool *bad_escape);
/* Warns once that value had an unknown escape sequence, if bad. */
void uf_warn_bad_escape(struct parse_ctx *c, const struct key_def *k, const char *value, bool bad);

/* ------------------------------------------------------------------------ */
/* unit-file-keys.c: the key table, the fields a key sets                    */
/* ------------------------------------------------------------------------ */

/* The sandboxing keys being parsed, marked as assigned. */
struct unit_sandbox_keys *uf_sandbox_keys(struct parse_ctx *c);
/* The field key k sets (in c->u, c's sandboxing keys or exit statuses), and its default. */
void *uf_key_field(struct parse_ctx *c, const struct key_def *k);
const void *uf_key_default(const struct key_def *k);
#define FIELD(c, k, type) ((type *) uf_key_field((c), (k)))
/* An empty assignment resets a scalar to its default. */
void uf_reset_default(struct parse_ctx *c, const struct key_def *k);

/* The key of section named key, or NULL. */
const struct key_def *uf_key_lookup(enum section section, const char *key);

/* Restart='s names, by unit_restart. */
extern const char *const restart_names[];

/* ------------------------------------------------------------------------ */
/* The parsers of the key table: (c, k, value), value stripped, empty: reset */
/* ------------------------------------------------------------------------ */

/* unit-file-values.c */
int uf_parse_environment(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_unit_names(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_environment_file(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_working_directory(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_output(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_exit_status(struct parse_ctx *c, const struct key_def *k, const char *value);

/* deps: unit-file-deps.c, the dependency keys beyond Requires=/Wants=/BindsTo= */
/* OnFailureJobMode=: replace or fail; systemd's other modes are refused. */
int uf_parse_job_mode(struct parse_ctx *c, const struct key_def *k, const char *value);
/* Moves the LIST_REQUISITE … LIST_RELOAD_PROPAGATED_FROM lists into c->u->dep_keys
 * (allocated only when one is not empty). 0 or -ENOMEM. */
int uf_finish_dep_keys(struct parse_ctx *c);
/* Frees k and its lists; NULL. */
struct unit_dep_keys *uf_dep_keys_free(struct unit_dep_keys *k);

/* unit-file-commands.c */
int uf_parse_exec(struct parse_ctx *c, const struct key_def *k, const char *value);

/* unit-file-sandbox.c */
int uf_parse_user(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_supplementary_groups(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_umask(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_limit(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_capabilities(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_syscall_filter(struct parse_ctx *c, const struct key_def *k, const char *value);
/* seccomp: SystemCallFilter='s syntax and merging into f (SystemCallLog= too); errors reported. */
int uf_parse_syscall_list(struct parse_ctx *c, const struct key_def *k, const char *value,
                          struct sandbox_syscall_filter *f);
int uf_parse_errno(struct parse_ctx *c, const struct key_def *k, const char *value);

/* exec: unit-file-process.c (issue 16's directories and process keys) */
int uf_parse_exec_directory(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_exec_directory_mode(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_process(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_cpu_affinity(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_standard_input(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_standard_input_text(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_parse_tty_path(struct parse_ctx *c, const struct key_def *k, const char *value);
/* The process keys being parsed (allocated at the first, NULL on ENOMEM), marked as assigned. */
struct unit_exec_keys *uf_exec_keys(struct parse_ctx *c);
/* The process keys that depend on each other (CPUSchedulingPriority= by policy); at the end of a file. */
void uf_verify_process(struct parse_ctx *c);
/* cond: unit-file-conditions.c. k->data: the type, UF_CONDITION_ASSERT for Assert*=. */
#define UF_CONDITION_ASSERT 0x100
int uf_parse_condition(struct parse_ctx *c, const struct key_def *k, const char *value);
/* fork: unit-file-forking.c (Type=forking's keys) */
int uf_parse_pid_file(struct parse_ctx *c, const struct key_def *k, const char *value);

/* ------------------------------------------------------------------------ */
/* unit-file-known.c (load): keys tend does not apply                         */
/* ------------------------------------------------------------------------ */

/*
 * A key that is not in the key table: accepted silently (it matters only to
 * systemd's own machinery), or named in one warning per unit saying what
 * differs. True if the key was one of those (and handled), false if it is
 * unknown to both tables (the caller warns).
 */
bool uf_known_key(struct parse_ctx *c, enum section section, const char *key);

/* corpus: unit-file-extra.c, UnsetEnvironment=, RestartKillSignal=, SendSIGHUP=,
 * PermissionsStartOnly=, TasksMax= (k->data: which); uf_finish_extra() at the
 * end of the parse applies PermissionsStartOnly= to the commands. */
enum { UF_EXTRA_UNSET_ENVIRONMENT, UF_EXTRA_RESTART_KILL_SIGNAL, UF_EXTRA_SEND_SIGHUP, UF_EXTRA_PERMISSIONS_START_ONLY,
       UF_EXTRA_TASKS_MAX, UF_EXTRA_OOM_POLICY };
int uf_parse_extra(struct parse_ctx *c, const struct key_def *k, const char *value);
void uf_finish_extra(struct parse_ctx *c);

/* seccomp: unit-file-hardening.c (issue 17's seccomp and namespace keys; k->data: which) */
enum { UF_HARDENING_ADDRESS_FAMILIES, UF_HARDENING_NAMESPACES, UF_HARDENING_ARCHS, UF_HARDENING_LOCK_PERSONALITY,
       UF_HARDENING_MDWE, UF_HARDENING_REALTIME, UF_HARDENING_SUID_SGID, UF_HARDENING_CLOCK, UF_HARDENING_MODULES,
       UF_HARDENING_LOGS, UF_HARDENING_HOSTNAME, UF_HARDENING_NETWORK, UF_HARDENING_IPC, UF_HARDENING_USERS,
       UF_HARDENING_SYSCALL_LOG };
int uf_parse_hardening(struct parse_ctx *c, const struct key_def *k, const char *value);

/* unit-file-load.c: sorts l in place, each string once (the duplicates freed). */
void uf_strv_sort_unique(char **l);

/* [Install] Alias= (unit-file-known.c). */
int uf_parse_alias(struct parse_ctx *c, const struct key_def *k, const char *value);

/* journal: unit-file-syslog.c (issue 18's SyslogLevelPrefix=, SyslogLevel=, SyslogFacility=) */
enum { UF_SYSLOG_LEVEL_PREFIX, UF_SYSLOG_LEVEL, UF_SYSLOG_FACILITY };
int uf_parse_syslog(struct parse_ctx *c, const struct key_def *k, const char *value);
/* "yes"/"no" and systemd's other words: 1, 0, or -EINVAL. */
int uf_parse_boolean(const char *value);

/* ns: unit-file-namespace.c, the file-system namespace keys (issue 17). k->data:
 * a unit_ns_list (unit-file-namespace.h) for the path lists, else one of these. */
enum {
        UF_NS_PROTECT_SYSTEM = 16,
        UF_NS_PROTECT_HOME,
        UF_NS_PROTECT_PROC,
        UF_NS_PROC_SUBSET,
        UF_NS_PRIVATE_TMP,
        UF_NS_PRIVATE_DEVICES,
        UF_NS_PROTECT_KERNEL_TUNABLES,
        UF_NS_PROTECT_CONTROL_GROUPS,
        UF_NS_PRIVATE_MOUNTS,
};
int uf_parse_namespace(struct parse_ctx *c, const struct key_def *k, const char *value);
/* parsefix: unit-file-empty.c. Whether key= (value "") in section is one
 * systemd 252 ignores (keeping the earlier value): if so it is reported (a
 * warning naming the key; DynamicUser=: an error, as systemd's) and true is
 * returned, the assignment is consumed. */
bool uf_empty_assignment(struct parse_ctx *c, enum section section, const char *key, const char *value);
/* The keys of [Service] whose empty assignment is ignored; NULL-terminated, static. */
const char *const *uf_empty_ignored_keys(void);

/* security: unit-file-refused.c (unit-hardening.h) */
/* Keeps "key=value" if `tendctl security` reads key (security_assess_reads()). 0 or -ENOMEM (reported). */
int uf_hardening_note(struct parse_ctx *c, const char *key, const char *value);
/* A key tend refuses (or one that never asks for anything): true, and
 * remembered until the end of the parse; false if key is none of those. */
bool uf_refused_key(struct parse_ctx *c, enum section section, const char *key, const char *value);
/* RemoveIPC=: a boolean, kept in c->u->hardening. */
int uf_parse_remove_ipc(struct parse_ctx *c, const struct key_def *k, const char *value);
/* keyring: KeyringMode=: inherit, private, shared or empty, kept in c->u->hardening. */
int uf_parse_keyring_mode(struct parse_ctx *c, const struct key_def *k, const char *value);
/* [X-Tend] AcceptWeakerIsolation=: yes, no, or keys with or without '='. */
int uf_parse_accept_weaker(struct parse_ctx *c, const struct key_def *k, const char *value);
/* At the end of a parse: each refused key set is reported as the unit's error,
 * or named in one warning if accepted; c->u->hardening is set. 0 or -ENOMEM. */
int uf_finish_hardening(struct parse_ctx *c);
/* Frees c->hardening. */
void uf_hardening_parse_free(struct parse_ctx *c);

/* ------------------------------------------------------------------------ */
/* unit-file-lines.c                                                         */
/* ------------------------------------------------------------------------ */

/*
 * Parses data[0..size) line by line into c (systemd.syntax(7)); each
 * assignment goes to its key's parser, which reports its own errors.
 * Returns 0 (c->error holds the first error of the text), -EFBIG (a logical
 * line over UNIT_FILE_SIZE_MAX) or -ENOMEM.
 */
int uf_parse_text(struct parse_ctx *c, const char *data, size_t size);

/* etcd: [X-Tend] Hosts=, HostMetadata= (unit-file-cluster.c): words into their
 * list; the lists moved into u->cluster_keys at the end (0 or -ENOMEM). */
int uf_parse_cluster_words(struct parse_ctx *c, const struct key_def *k, const char *value);
int uf_finish_cluster_keys(struct parse_ctx *c);
