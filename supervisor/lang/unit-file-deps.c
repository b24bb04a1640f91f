/* SPDX-License-Identifier: MIT */
/*
 * The dependency keys beyond Requires=/Wants=/BindsTo=/After=/Before=
 * (docs/tend.service.5.md "DEPENDENCIES"): their lists are parsed by
 * uf_parse_unit_names() like the others and moved out of line at the end of
 * the parse, since few units set any; OnFailureJobMode='s values.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "strv.h"
#include "unit-file-internal.h"

int uf_parse_job_mode(struct parse_ctx *c, const struct key_def *k, const char *value) {
        /* systemd's job modes that tend has no transaction for (isolate stops
         * every other unit; flush and the ignore-* modes drop others' jobs).
         * corpus: replace-irreversibly is replace: tend has no job that a later
         * one could replace, so none is irreversible either. */
        static const char *const unsupported[] = { "isolate", "flush", "ignore-dependencies", "ignore-requirements" };
        bool *fail = FIELD(c, k, bool);
        if (!*value || streq(value, "replace") || streq(value, "replace-irreversibly")) {
                *fail = false;
                return 0;
        }
        if (streq(value, "fail")) {
                *fail = true;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(unsupported); i++)
                if (streq(value, unsupported[i]))
                        return report(c, LOG_ERR, EOPNOTSUPP, "%s=%s is not supported: tend has no job "
                                      "transactions (only replace, replace-irreversibly and fail)",
                                      k->key, value);
        return invalid_value(c, k, value);
}

struct unit_dep_keys *uf_dep_keys_free(struct unit_dep_keys *k) {
        if (!k)
                return NULL;
        char **lists[] = { k->requisite, k->part_of, k->conflicts, k->upholds, k->on_failure,
                           k->on_success, k->propagates_reload_to, k->reload_propagated_from };
        for (size_t i = 0; i < ELEMENTSOF(lists); i++)
                strv_free(lists[i]);
        free(k);
        return NULL;
}

int uf_finish_dep_keys(struct parse_ctx *c) {
        static const int first = LIST_REQUISITE, last = LIST_RELOAD_PROPAGATED_FROM;
        bool any = false;
        for (int i = first; i <= last; i++)
                any = any || c->lists[i].v;
        if (!any)
                return 0;
        struct unit_dep_keys *k = calloc(1, sizeof *k);
        if (!k)
                return -ENOMEM;
        char **(*dst[]) = { &k->requisite, &k->part_of, &k->conflicts, &k->upholds, &k->on_failure,
                            &k->on_success, &k->propagates_reload_to, &k->reload_propagated_from };
        static_assert(ELEMENTSOF(dst) == LIST_RELOAD_PROPAGATED_FROM - LIST_REQUISITE + 1, "one field a list");
        for (int i = first; i <= last; i++) {
                *dst[i - first] = c->lists[i].v;
                c->lists[i] = (struct strv_builder) {};
        }
        uf_dep_keys_free(c->u->dep_keys);
        c->u->dep_keys = k;
        return 0;
}
