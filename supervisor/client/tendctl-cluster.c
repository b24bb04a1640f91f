/* SPDX-License-Identifier: MIT */
/*
 * tendctl --cluster list|hosts|status NAME (issue 20; docs/tendctl.1.md
 * "CLUSTER"): the cluster as the local tend sees it, over the control
 * protocol's "cluster" command (tendctl links no HTTP client: tend answers
 * from its watches of etcd). --json prints the items as one JSON array.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "macro.h"
#include "tendctl-cluster.h"
#include "tendctl-conn.h"

static const char *field(json *o, const char *key) {
        json *v;
        if (!json_object_object_get_ex(o, key, &v) || !v)
                return "-";
        return json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                        : json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
}

/* A host's lease time left ("lease_left_ms", etcd's whole seconds) as "4s"; "-" when unknown. */
static const char *time_left(json *it, char *buf, size_t size) {
        json *v;
        if (!json_object_object_get_ex(it, "lease_left_ms", &v) || !json_object_is_type(v, json_type_int))
                return "-";
        snprintf(buf, size, "%" PRId64 "s", json_object_get_int64(v) / 1000);
        return buf;
}

static void print_items(const char *view, json *items) {
        size_t n = json_object_array_length(items);
        char left[32];
        if (streq(view, "hosts"))
                printf("%-24s %-16s %-8s %-5s %-6s %s\n", "HOST", "HOSTNAME", "PID", "TTL", "LEFT", "METADATA");
        else if (streq(view, "list"))
                printf("%-24s %-32s %-12s %-8s %s\n", "HOST", "UNIT", "STATE", "PID", "RESULT");
        for (size_t i = 0; i < n; i++) {
                json *it = json_object_array_get_idx(items, i);
                const char *waiting = get_str(it, "waiting", NULL); /* this tend: its host id in use */
                char note[96] = "";
                if (get_bool(it, "self"))
                        snprintf(note, sizeof note, "  (this host%s%s)", waiting ? ", " : "", waiting ?: "");
                if (streq(view, "hosts"))
                        printf("%-24s %-16s %-8s %-5s %-6s %s%s\n", field(it, "host"), field(it, "hostname"),
                               field(it, "pid"), field(it, "ttl_sec"), time_left(it, left, sizeof left),
                               field(it, "metadata"), note);
                else if (streq(view, "list"))
                        printf("%-24s %-32s %-12s %-8s %s%s\n", field(it, "host"), field(it, "unit"),
                               field(it, "state"), field(it, "main_pid"), field(it, "result"),
                               get_bool(it, "host_present") ? "" : "  (host gone)");
                else
                        printf("%s: singleton held by %s (fencing token %s), %s, main pid %s%s%s\n",
                               field(it, "unit"), field(it, "holder"), field(it, "fencing_token"), field(it, "state"),
                               field(it, "main_pid"), get_str(it, "this_host", NULL) ? "; this host: " : "",
                               get_str(it, "this_host", ""));
        }
}

int run_cluster(const struct args *a, int fd) {
        _cleanup_json_ json *req = request_new(CONTROL_CMD_CLUSTER, a->names, a->n_names);
        _cleanup_json_ json *items = json_object_new_array();
        if (!req || !items || control_add_string(req, "view", a->view) < 0)
                return EXIT_FAILED;
        int r = send_request(fd, req);
        if (r != 0)
                return r;
        for (;;) {
                _cleanup_json_ json *msg = NULL;
                if ((r = recv_message(fd, &msg)) < 0)
                        return recv_error(r);
                const char *type = get_str(msg, "type", "");
                json *it;
                if (streq(type, "cluster-item") && json_object_object_get_ex(msg, "item", &it)) {
                        json_object_array_add(items, json_object_get(it));
                        continue;
                }
                if (!streq(type, "result"))
                        continue;
                if (!get_bool(msg, "ok")) {
                        fprintf(stderr, "tendctl: %s\n", get_str(msg, "message", "failed"));
                        return control_error_exit_status(control_error_from_string(get_str(msg, "error", NULL)));
                }
                break;
        }
        if (a->json)
                print_json(items);
        else
                print_items(a->view, items);
        return 0;
}
