/* SPDX-License-Identifier: MIT */
/* The kept environment: see kept-env.h. */
#include "kept-env.h"
#include "macro.h"
#include "unit-exec.h"

char **kept_env_take(struct kept_env *k, size_t text_size, uint64_t text_hash) {
        if (!k->env || k->size != text_size || k->hash != text_hash)
                return NULL;
        return TAKE_PTR(k->env);
}

void kept_env_keep(struct kept_env *k, char **env, size_t text_size, uint64_t text_hash) {
        strv_free(k->env);
        /* A file of the same text builds the same environment. */
        *k = (struct kept_env) { .env = env, .size = text_size, .hash = text_hash };
}

void kept_env_done(struct kept_env *k) {
        strv_free(k->env);
        *k = (struct kept_env) {};
}
