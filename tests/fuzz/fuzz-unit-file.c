/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target of the unit-file parser (supervisor/lang/unit-file.h, unit-exec.h;
 * SPEC §3 "tend never crashes on a bad file", §7). Each input is parsed as a
 * unit under one of three names (the first byte picks it, so template
 * specifiers are reached), every command of a unit that loads is expanded
 * against its environment, and the same bytes are parsed as an
 * EnvironmentFile=. Invariants that must hold are checked with abort().
 *
 * Built two ways (tests/fuzz/meson.build, tests/fuzz/README.md):
 *  - -DLIBFUZZER with -fsanitize=fuzzer: libFuzzer calls
 *    LLVMFuzzerTestOneInput() (.ci/run runs it, bounded in time);
 *  - otherwise: main() replays every file of the directories or files it is
 *    given (test fuzz-unit-file-replay: the corpus, in every build).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "unit-exec.h"
#include "unit-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(int level, const char *msg, void *userdata) {
        /* Formatting every message is part of what is fuzzed; printing it is not. */
}

#define CHECK(cond)                                                                         \
        do {                                                                                \
                if (!(cond)) {                                                              \
                        fprintf(stderr, "fuzz-unit-file: invariant broken: %s\n", #cond);   \
                        abort();                                                            \
                }                                                                           \
        } while (0)

static void check_strv(char **l) {
        CHECK(l);
        for (char **i = l; *i; i++)
                CHECK(strlen(*i) < 2 * UNIT_FILE_SIZE_MAX);
}

static void exercise_list(const struct unit_command_list *l, char *const *envp) {
        for (size_t i = 0; i < l->n; i++) {
                const struct unit_command *cmd = &l->commands[i];
                CHECK(cmd->path && *cmd->path && cmd->argv);
                CHECK(cmd->path[0] == '/' || !strchr(cmd->path, '/'));
                char **argv = NULL, **unset = NULL;
                CHECK(unit_command_expand(cmd, envp, &argv, &unset) == 0);
                check_strv(argv);
                CHECK(argv[0]); /* never an empty argv */
                strv_free(argv);
                strv_free(unset);
        }
}

static void exercise(const struct unit_file *u) {
        char *base[] = { (char *) "PATH=/usr/bin:/bin", (char *) "A=one two", (char *) "NOTIFY_SOCKET=/x", NULL };
        char **envp = NULL;
        /* No EnvironmentFile= here: the fuzzer must not read arbitrary paths. */
        CHECK(unit_build_environment(u->name, base, 42, u->environment, NULL, 0, &envp) == 0);
        check_strv(envp);
        /* tend's NOTIFY_SOCKET never passes; a unit may still set one itself, as in systemd. */
        bool own = false;
        for (char **e = u->environment; e && *e; e++)
                own |= strncmp(*e, "NOTIFY_SOCKET=", 14) == 0;
        for (char **e = envp; *e; e++)
                CHECK(strchr(*e, '=') && (own || strncmp(*e, "NOTIFY_SOCKET=", 14) != 0));
        const struct unit_command_list *lists[] = { &u->exec_start_pre, &u->exec_start, &u->exec_start_post,
                                                    &u->exec_stop, &u->exec_reload };
        for (size_t i = 0; i < ELEMENTSOF(lists); i++)
                exercise_list(lists[i], envp);
        CHECK(u->type == UNIT_TYPE_ONESHOT || u->exec_start.n == 1);
        for (size_t i = 0; i < u->n_environment_files; i++)
                CHECK(u->environment_files[i].path[0] == '/');
        CHECK(!u->working_directory || u->working_directory[0] == '/');
        strv_free(envp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const names[] = { "fuzz.service", "fuzz-a@inst-a\\x2db.service", "a-b-c.service" };
        const char *text = size ? (const char *) data : "";
        log_set_sink(quiet, NULL);

        struct unit_file *u = NULL;
        char *message = NULL;
        int r = unit_file_parse(names[size ? data[0] % 3 : 0], "fuzz", text, size, &u, &message);
        if (r >= 0) {
                CHECK(u && !message);
                exercise(u);
                unit_file_free(u);
        } else
                CHECK(!u && (r == -EINVAL || r == -EOPNOTSUPP || r == -EFBIG || r == -ENOMEM));
        free(message);

        char **envp = NULL;
        r = unit_env_file_parse(text, size, "fuzz-env", &envp);
        CHECK(r >= 0 || r == -ENOMEM);
        if (r >= 0)
                check_strv(envp);
        strv_free(envp);
        return 0;
}

#ifndef LIBFUZZER
#define FUZZ_NAME "fuzz-unit-file"
#include "replay.h"
#endif
