/* SPDX-License-Identifier: MIT */
/*
 * ns: the file-system namespace keys of a unit file (issue 17; systemd.exec(5)
 * "Sandboxing"), parsed by unit-file-namespace.c and applied by
 * exec/namespace.c in a private mount namespace of each process of the unit.
 * Out of line (struct unit_sandbox_keys.ns): few units set any (SPEC §8).
 * The reference for users is docs/tend.service.5.md "HARDENING", "File system".
 */
#pragma once

#include <stdbool.h>

struct unit_file;

typedef enum unit_protect_system {
        UNIT_PROTECT_SYSTEM_NO,
        UNIT_PROTECT_SYSTEM_YES,    /* /usr, /boot, /efi read-only */
        UNIT_PROTECT_SYSTEM_FULL,   /* and /etc */
        UNIT_PROTECT_SYSTEM_STRICT, /* everything but /dev, /proc, /sys (and /home, /root, /run/user) */
} unit_protect_system;

typedef enum unit_protect_home {
        UNIT_PROTECT_HOME_NO,
        UNIT_PROTECT_HOME_YES,       /* /home, /root, /run/user inaccessible */
        UNIT_PROTECT_HOME_READ_ONLY,
        UNIT_PROTECT_HOME_TMPFS,     /* an empty read-only tmpfs on each */
} unit_protect_home;

typedef enum unit_protect_proc {
        UNIT_PROTECT_PROC_DEFAULT,
        UNIT_PROTECT_PROC_NOACCESS,   /* procfs hidepid=noaccess */
        UNIT_PROTECT_PROC_INVISIBLE,  /* hidepid=invisible */
        UNIT_PROTECT_PROC_PTRACEABLE, /* hidepid=ptraceable */
} unit_protect_proc;

/* The path lists: entries as written (specifiers resolved), validated at load. */
typedef enum unit_ns_list {
        UNIT_NS_READ_WRITE,       /* ReadWritePaths=: [-][+]/PATH */
        UNIT_NS_READ_ONLY,        /* ReadOnlyPaths= */
        UNIT_NS_INACCESSIBLE,     /* InaccessiblePaths= */
        UNIT_NS_EXEC,             /* ExecPaths= */
        UNIT_NS_NO_EXEC,          /* NoExecPaths= */
        UNIT_NS_TEMPORARY,        /* TemporaryFileSystem=: /PATH[:OPTIONS] */
        UNIT_NS_BIND,             /* BindPaths=: [-]/SRC[:/DEST[:rbind|norbind]] */
        UNIT_NS_BIND_READ_ONLY,   /* BindReadOnlyPaths= */
        _UNIT_NS_LIST_MAX,
} unit_ns_list;

struct unit_namespace_keys {
        char **lists[_UNIT_NS_LIST_MAX]; /* NULL: none */
        unit_protect_system protect_system; /* ProtectSystem=, no */
        unit_protect_home protect_home;     /* ProtectHome=, no */
        unit_protect_proc protect_proc;     /* ProtectProc=, default */
        bool private_tmp;                   /* PrivateTmp=, no */
        bool private_devices;               /* PrivateDevices=, no */
        bool protect_kernel_tunables;       /* ProtectKernelTunables=, no */
        bool protect_control_groups;        /* ProtectControlGroups=, no */
        bool private_mounts;                /* PrivateMounts=, no */
        bool proc_subset_pid;               /* ProcSubset=pid; no: all */
};

/* Every key at its default (what a NULL unit_sandbox_keys.ns means). */
extern const struct unit_namespace_keys unit_namespace_defaults;

/* f's namespace keys: never NULL, borrowed from f (or static). Thread-safe. */
const struct unit_namespace_keys *unit_file_namespace(const struct unit_file *f);

/* Whether n asks for a mount namespace (any key set). NULL: false. */
bool unit_namespace_wanted(const struct unit_namespace_keys *n);

/* Frees n and what it owns; returns NULL. NULL is accepted. */
struct unit_namespace_keys *unit_namespace_keys_free(struct unit_namespace_keys *n);

/*
 * A path entry's prefixes (systemd.exec(5)): '-' (a missing path is
 * ignored), then '+' (relative to RootDirectory=; tend has none, so '/').
 * Sets *ret_optional and returns the path after them (pointing into s).
 */
const char *unit_ns_path_prefixes(const char *s, bool *ret_optional);

/*
 * Splits "A:B:C" at its first unescaped ':' (a "\:" is a colon of A) into
 * the newly allocated *ret_a and the rest *ret_rest (NULL if no ':'), each
 * owned by the caller. 0 or -ENOMEM.
 */
int unit_ns_split_colon(const char *s, char **ret_a, char **ret_rest);
