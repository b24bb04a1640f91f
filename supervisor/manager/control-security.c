/* SPDX-License-Identifier: MIT */
/*
 * security: the control socket's `security` (docs/control-protocol.md
 * "security"): a unit's exposure as lang/security-assess.c computes it from
 * the unit file tend loaded, so that tendctl holds no sandbox code.
 */
#include <errno.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "control-describe.h"
#include "control-proto.h"
#include "macro.h"
#include "manager-internal.h"
#include "security-assess.h"
#include "unit.h"

static int add_check(struct json_object *checks, const struct security_check *c) {
        _cleanup_json_ struct json_object *o = json_object_new_object();
        if (!o || control_add_string(o, "name", c->name) < 0 || control_add_string(o, "key", c->key) < 0 ||
            control_add_string(o, "description", c->description) < 0 ||
            control_add_int64(o, "weight", c->weight) < 0 || control_add_int64(o, "range", c->range) < 0 ||
            control_add_int64(o, "exposure", c->exposure) < 0 || control_add_bool(o, "applied", !c->not_applied) < 0)
                return -ENOMEM;
        if (c->badness == SECURITY_NOT_APPLICABLE) {
                if (json_object_object_add(o, "badness", NULL) < 0)
                        return -ENOMEM;
        } else if (control_add_int64(o, "badness", c->badness) < 0)
                return -ENOMEM;
        return json_object_array_add(checks, TAKE_PTR(o)) < 0 ? -ENOMEM : 0;
}

int manager_assess_unit(struct manager *m, const char *name, struct json_object *ret) {
        struct unit *u = manager_find_unit(m, name);
        if (!u || !u->file)
                return -ENOENT;
        struct security_assessment *a = malloc(sizeof *a); /* ~7 KiB: not on the loop's stack */
        if (!a)
                return -ENOMEM;
        int r = security_assess(u->file, a);
        struct json_object *checks = r >= 0 ? json_object_new_array() : NULL;
        if (r >= 0 && (!checks || json_object_object_add(ret, "checks", checks) < 0)) {
                json_object_put(checks);
                r = -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < a->n; i++)
                r = add_check(checks, &a->checks[i]);
        if (r >= 0 && (control_add_int64(ret, "exposure", a->exposure) < 0 || control_add_string(ret, "level", a->level) < 0))
                r = -ENOMEM;
        free(a);
        return r;
}
