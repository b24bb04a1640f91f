/* SPDX-License-Identifier: MIT */
/*
 * Command lines and environments of a unit (SPEC §3), the start-time half of
 * the unit-file module: unit-file.c parses and stores commands unexpanded;
 * what is computed at each start (the environment, $VAR expansion, the PATH
 * lookup) lives here, so the spawner calls it before the fork (SPEC §2.2
 * "everything that can allocate or fail is prepared before the fork").
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - Return 0 (or the count named) on success, a negative errno on failure;
 *    ret_* out-parameters are written only on success.
 *  - A "strv" is a NULL-terminated array of malloc'ed strings in one malloc'ed
 *    array, freed with strv_free(). An "envp" is a strv of "NAME=VALUE".
 *  - Pure and reentrant (no global state) except where a comment says it
 *    reads files; messages go through log.h (thread-safe).
 *
 * Semantics are systemd's (systemd.service(5) "COMMAND LINES", systemd.exec(5)
 * "ENVIRONMENT"); the differences are in docs/tend.service.5.md.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "macro.h"
#include "strv.h"

/* The PATH a unit gets when tend's own environment has none (systemd's). */
#define UNIT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"

/* ------------------------------------------------------------------------ */
/* Words (systemd.syntax(7) "Quoting")                                       */
/* ------------------------------------------------------------------------ */

enum {
        EXTRACT_UNQUOTE = 1 << 0,   /* '…' and "…" group a word and are removed (anywhere in it) */
        EXTRACT_CUNESCAPE = 1 << 1, /* C escapes: \a \b \f \n \r \t \v \\ \" \' \s \xHH \nnn \uHHHH \UHHHHHHHH */
        EXTRACT_RELAX = 1 << 2,     /* an open quote or a trailing backslash ends the word instead of failing */
};

/*
 * Extracts the next whitespace-separated word of *p and advances *p past it
 * and the whitespace that follows. A backslash escapes the next character,
 * inside quotes too (systemd, unlike the shell); with EXTRACT_CUNESCAPE an
 * escape that is not in the table is kept verbatim, backslash included, and
 * *ret_bad_escape (optional) is set true — systemd warns and does the same.
 * Returns 1 with the word in *ret (owned by the caller; "" for an empty quoted
 * word), 0 when only whitespace is left (*ret = NULL), -EINVAL for an
 * unbalanced quote or a trailing backslash (unless EXTRACT_RELAX), -ENOMEM.
 */
int unit_extract_word(const char **p, unsigned flags, char **ret, bool *ret_bad_escape);

/* True if s is a valid environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
bool unit_env_name_is_valid(const char *s);

/* True if s is "NAME=VALUE" with a valid name and a valid UTF-8 value. */
bool unit_env_assignment_is_valid(const char *s);

/* True if s (len bytes) is valid UTF-8 (no overlong forms, no surrogates). */
bool unit_utf8_is_valid(const char *s, size_t len);

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

enum {
        UNIT_COMMAND_IGNORE_FAILURE = 1 << 0, /* '-': a failed exit counts as success */
        UNIT_COMMAND_NO_ENV_EXPAND = 1 << 1,  /* ':': no $VAR / ${VAR} expansion */
        UNIT_COMMAND_FULL_PRIVILEGES = 1 << 2, /* '+': none of the sandbox (User=, capabilities, seccomp…) */
        UNIT_COMMAND_NO_SETUID = 1 << 3,      /* '!': User=, Group=, SupplementaryGroups= not applied */
        UNIT_COMMAND_AMBIENT_MAGIC = 1 << 4,  /* '!!': as '!' on a kernel without ambient capabilities,
                                               * otherwise no effect (systemd.service(5)) */
};

/*
 * One command line of an Exec*= key, as loaded: quotes, escapes and %
 * specifiers resolved, $VAR / ${VAR} / $$ kept for unit_command_expand() at
 * start.
 */
struct unit_command {
        char *path;     /* the executable: absolute, or a bare file name looked up in PATH at start
                         * (unit_command_find_executable()) */
        char **argv;    /* strv, ≥ 1 entry, packed (strv_pack(): freed with free()): argv[0] is
                         * path, or the word '@' put there */
        unsigned flags; /* UNIT_COMMAND_* */
};

/* The commands of one Exec*= key in file order (an empty assignment resets). */
struct unit_command_list {
        struct unit_command *commands; /* n entries, owned */
        size_t n;
};

/* Frees the commands and empties the list (the struct itself is the caller's). */
void unit_command_list_clear(struct unit_command_list *l);

/*
 * Expands cmd->argv against envp for one start (systemd.service(5)): a word
 * that is exactly $NAME becomes the value split at whitespace, quotes
 * respected then removed (zero or more words); ${NAME} anywhere in a word is
 * replaced by the exact value (one word); $$ is a literal $; a $ followed by
 * anything else stays as it is. An unset variable expands to nothing (zero
 * words, or the empty string), as in systemd. UNIT_COMMAND_NO_ENV_EXPAND
 * copies argv unchanged. *ret_argv is a new strv owned by the caller, never
 * empty (should '@' give an argv[0] that expands to nothing, argv[0] is the
 * path).
 * ret_unset (optional) receives a strv of the unset names referenced, for the
 * caller to log, or NULL when there were none.
 * Returns 0, -EINVAL (NULL argument), -ENOMEM.
 */
int unit_command_expand(const struct unit_command *cmd, char *const *envp, char ***ret_argv, char ***ret_unset);

/*
 * The executable to exec for cmd: its path if absolute, otherwise the first
 * directory of envp's PATH (UNIT_DEFAULT_PATH when envp has none) holding a
 * regular file named path that this process may execute. Reads the file
 * system (call it before the fork). *ret is owned by the caller.
 * Returns 0; -ENOENT (in no directory: exit status 127), -EACCES (found,
 * but not executable: 126) — the message is the caller's; -EINVAL, -ENOMEM.
 */
int unit_command_find_executable(const struct unit_command *cmd, char *const *envp, char **ret);

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

/* One EnvironmentFile= entry: a path or glob, absolute. */
struct unit_env_file {
        char *path;
        bool optional; /* '-' prefix: a missing file (or a glob matching nothing) is skipped */
};

/*
 * True if tend must not pass NAME=… from its own environment to a unit:
 * NOTIFY_SOCKET, JOURNAL_STREAM, WATCHDOG_*, LISTEN_*, TEND_* (SPEC §3).
 * assignment may be "NAME" or "NAME=VALUE".
 */
bool unit_env_is_private(const char *assignment);

/*
 * Sets NAME=VALUE in *envp: replaces an existing NAME in place (its position
 * kept), or appends. assignment is copied. Returns 0, -EINVAL (no '='),
 * -ENOMEM.
 */
int unit_env_set(char ***envp, const char *assignment);

/*
 * Sets every assignment of l (a strv of "NAME=VALUE") into *envp as
 * unit_env_set() does, in linear time. Returns 0, -EINVAL, -ENOMEM.
 */
int unit_env_merge(char ***envp, char *const *l);

/*
 * Parses the text of an EnvironmentFile= (systemd's format: NAME=VALUE lines,
 * '#'/';' comment lines, '…' literal, "…" with \" \\ \` \$ escapes, a trailing
 * backslash continues the line, no variable expansion) and sets each
 * assignment into *envp with unit_env_set() (later ones override). A line with an
 * invalid name or value is skipped with a warning naming origin:line, as
 * systemd does. origin names the file in messages. Returns the number of
 * assignments set, or -ENOMEM.
 */
int unit_env_file_parse(const char *data, size_t size, const char *origin, char ***envp);

/*
 * Reads every EnvironmentFile= entry of files[0..n) in order (globs expanded,
 * sorted) and sets its assignments into *envp. Files are read now, not at
 * load (systemd reads them at each start). A missing file without '-' is an
 * error naming the file and unit (logged); so is a file over 4 MiB or one
 * that cannot be read. Returns 0 or a negative errno (-ENOENT, -EFBIG, -ENOMEM,
 * an open/read error).
 */
int unit_env_files_load(const char *unit, const struct unit_env_file *files, size_t n, char ***envp);

/*
 * The environment of one process of a unit (SPEC §3 "Environment of a unit"),
 * in this order, a later assignment replacing an earlier one of the same name
 * in place:
 *   1. base (tend's environ) minus unit_env_is_private() names; entries
 *      without '=' are dropped; of duplicate names the first is kept;
 *   2. PATH=UNIT_DEFAULT_PATH if step 1 has no PATH;
 *   3. MAINPID=main_pid if main_pid > 0 (ExecStartPost=, ExecReload=, ExecStop=);
 *   4. environment (Environment=, "NAME=VALUE" strv, may be NULL);
 *   5. files[0..n) (EnvironmentFile=), read now with unit_env_files_load().
 * unit names the unit in messages. *ret_envp is a new strv owned by the caller.
 * Returns 0 or an error of unit_env_files_load() (logged), -EINVAL, -ENOMEM.
 */
int unit_build_environment(const char *unit, char *const *base, pid_t main_pid, char *const *environment,
                           const struct unit_env_file *files, size_t n, char ***ret_envp);

/* ------------------------------------------------------------------------ */
/* Shared with unit-file.c (not for other modules)                           */
/* ------------------------------------------------------------------------ */

/* Longest EnvironmentFile= read (SPEC §7: bounded memory). */
#define UNIT_ENV_FILE_SIZE_MAX (1024 * 1024)

/* A growable NUL-terminated string; zero-initialise; s is NULL until first growth. */
struct unit_buf {
        char *s;
        size_t len, cap;
};
int unit_buf_grow(struct unit_buf *b, size_t more);
int unit_buf_put(struct unit_buf *b, const char *s, size_t n);
int unit_buf_putc(struct unit_buf *b, char c);
/* The string (never NULL on success: "" when empty), shrunk to its length, ownership to the caller; b
 * is reset. NULL: -ENOMEM. */
char *unit_buf_take(struct unit_buf *b);

/* Reads fd to its end into a new NUL-terminated buffer. Returns 0, -EFBIG past max bytes, -ENOMEM, a read error. */
int unit_read_file(int fd, size_t max, char **ret, size_t *ret_size);

/* True if every $ reference in word w is one unit_command_expand() understands:
 * a whole-word $NAME, ${NAME}, $$, or a $ not followed by '{' (literal) —
 * NAME a valid variable name and every ${ closed. */
bool unit_word_variables_valid(const char *w);
