/* SPDX-License-Identifier: MIT */
/*
 * etcd: [X-Tend] Hosts= and HostMetadata= (issue 20; docs/cluster.md,
 * tend.service(5) "CLUSTER: SINGLETON UNITS"): which hosts of a cluster may
 * run the unit. Words with specifiers resolved, each assignment appended, an
 * empty one resets the list (systemd's list semantics). HostMetadata= words
 * are K=V. Kept out of line (struct unit_cluster_keys): few units set them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "unit-file-internal.h"

int uf_parse_cluster_words(struct parse_ctx *c, const struct key_def *k, const char *value) {
        struct strv_builder *l = &c->lists[(uintptr_t) k->data];
        if (!*value) {
                strv_builder_clear(l);
                return 0;
        }
        int r;
        bool bad = false;
        for (const char *p = value;;) {
                _cleanup_free_ char *w = NULL;
                char q[QUOTE_BUF];
                r = uf_next_word_resolved(c, k, &p, value, &w, &bad);
                if (r <= 0)
                        break;
                if ((uintptr_t) k->data == LIST_HOST_METADATA && (!strchr(w, '=') || w[0] == '=')) {
                        report(c, LOG_WARNING, 0, "HostMetadata=%s ignored: not KEY=VALUE", uf_quote(q, w));
                        continue;
                }
                if ((r = strv_builder_push(l, TAKE_PTR(w))) < 0)
                        break;
        }
        uf_warn_bad_escape(c, k, value, bad);
        return r < 0 ? r : 0;
}

/* The lists moved into u->cluster_keys (allocated only when one is set). */
int uf_finish_cluster_keys(struct parse_ctx *c) {
        struct strv_builder *h = &c->lists[LIST_HOSTS], *m = &c->lists[LIST_HOST_METADATA];
        if (!h->v && !m->v)
                return 0;
        struct unit_cluster_keys *ck = calloc(1, sizeof(*ck));
        if (!ck)
                return -ENOMEM;
        ck->hosts = h->v;
        ck->host_metadata = m->v;
        *h = (struct strv_builder) {};
        *m = (struct strv_builder) {};
        c->u->cluster_keys = ck;
        return 0;
}

void unit_cluster_keys_free(struct unit_cluster_keys *ck) {
        if (!ck)
                return;
        strv_free(ck->hosts);
        strv_free(ck->host_metadata);
        free(ck);
}
