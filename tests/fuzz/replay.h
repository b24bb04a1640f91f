/* SPDX-License-Identifier: MIT */
/*
 * The replay main() of a fuzz target built without libFuzzer (tests/fuzz/
 * README.md): every file of the directories (or the files) given is passed to
 * LLVMFuzzerTestOneInput() in an exact-size buffer, as libFuzzer passes it,
 * so ASan sees any read past an input's end. An empty replay fails: a wrong
 * corpus path must not pass. Include it once, after defining
 * LLVMFuzzerTestOneInput(), with FUZZ_NAME set to the target's name.
 */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including replay.h"
#endif

static int replay_file(const char *path) {
        FILE *f = fopen(path, "re");
        if (!f) {
                fprintf(stderr, FUZZ_NAME ": %s: %s\n", path, strerror(errno));
                return -1;
        }
        size_t cap = 4096, size = 0;
        uint8_t *buf = malloc(cap);
        for (size_t n; buf && (n = fread(buf + size, 1, cap - size, f)) > 0;) {
                size += n;
                if (size == cap) {
                        uint8_t *b = realloc(buf, cap *= 2);
                        if (!b)
                                free(buf);
                        buf = b;
                }
        }
        fclose(f);
        uint8_t *exact = buf ? malloc(size ? size : 1) : NULL;
        if (exact)
                memcpy(exact, buf, size);
        free(buf);
        if (!exact)
                return -1;
        LLVMFuzzerTestOneInput(exact, size);
        free(exact);
        return 0;
}

/* Replays every regular file of dir, in name order. Returns the count, or -1. */
static int replay_dir(const char *dir) {
        struct dirent **entries;
        int n = scandir(dir, &entries, NULL, alphasort), count = 0;
        if (n < 0) {
                fprintf(stderr, FUZZ_NAME ": %s: %s\n", dir, strerror(errno));
                return -1;
        }
        for (int i = 0; i < n; i++) {
                char path[4096];
                struct stat st;
                snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                        if (replay_file(path) < 0)
                                count = -1;
                        else if (count >= 0)
                                count++;
                }
                free(entries[i]);
        }
        free(entries);
        return count;
}

int main(int argc, char **argv) {
        int total = 0;
        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS-DIR|FILE...\n", argv[0]);
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                struct stat st;
                int n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0;
                if (n < 0)
                        return 1;
                total += n;
        }
        if (total == 0) {
                fprintf(stderr, FUZZ_NAME ": no input found\n");
                return 1;
        }
        printf(FUZZ_NAME ": %d inputs replayed, no invariant broken\n", total);
        return 0;
}
