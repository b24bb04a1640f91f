/* SPDX-License-Identifier: MIT */
/*
 * The dependency graph (deps.h): names resolved, reverse edges, ordering
 * cycles found with Tarjan's algorithm (iterative, so a long chain of units
 * cannot exhaust the stack) and broken as SPEC §4 says.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deps.h"
#include "log.h"
#include "macro.h"
#include "strv.h"

bool dep_list_has(const struct dep_list *l, size_t i) {
        for (size_t j = 0; j < l->n; j++)
                if (l->items[j] == i)
                        return true;
        return false;
}

static int dep_list_add(struct dep_list *l, size_t i) {
        if (dep_list_has(l, i))
                return 0;
        size_t *v = realloc(l->items, (l->n + 1) * sizeof *v);
        if (!v)
                return -ENOMEM;
        l->items = v;
        l->items[l->n++] = i;
        return 0;
}

/* Drops from l the nodes of cycle c. */
static void dep_list_remove_cycle(const struct dep_graph *g, struct dep_list *l, unsigned c) {
        size_t kept = 0;
        for (size_t j = 0; j < l->n; j++)
                if (g->nodes[l->items[j]].cycle != c)
                        l->items[kept++] = l->items[j];
        l->n = kept;
}

static void dep_list_done(struct dep_list *l) {
        free(l->items);
        *l = (struct dep_list) {};
}

/* Every list of d, into out (DEP_NODE_LISTS entries). */
#define DEP_NODE_LISTS 18
static void node_lists(struct dep_node *d, struct dep_list *out[static DEP_NODE_LISTS]) {
        struct dep_list *l[DEP_NODE_LISTS] = {
                &d->requires,  &d->binds_to,      &d->wants,     &d->after,        &d->before,
                &d->required_by, &d->bound_by,    &d->wanted_by, &d->requisite,    &d->requisite_of,
                &d->consists_of, &d->conflicts,   &d->conflicted_by, &d->upholds,  &d->upheld_by,
                &d->on_failure, &d->on_success,   &d->reload_to,
        };
        memcpy(out, l, sizeof l);
}

bool dep_node_is_plain(const struct dep_node *n) {
        struct dep_list *l[DEP_NODE_LISTS];
        node_lists((struct dep_node *) n, l);
        for (size_t j = 0; j < DEP_NODE_LISTS; j++)
                if (l[j]->n)
                        return false;
        return !n->missing && !n->cycle_broken;
}

struct dep_graph *dep_graph_free(struct dep_graph *g) {
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n; i++) {
                struct dep_node *d = &g->nodes[i];
                struct dep_list *lists[DEP_NODE_LISTS];
                node_lists(d, lists);
                for (size_t j = 0; j < DEP_NODE_LISTS; j++)
                        dep_list_done(lists[j]);
                for (char **p = d->missing; p && *p; p++)
                        free(*p);
                free(d->missing);
        }
        free(g->nodes);
        free(g);
        return NULL;
}

/* ---- names ---- */

struct name_index {
        const struct dep_node_spec *specs;
        size_t *sorted; /* node indices in name order */
        size_t n;
};

static const struct dep_node_spec *sort_specs; /* qsort has no userdata; single-threaded */

static int cmp_index(const void *a, const void *b) {
        return strcmp(sort_specs[*(const size_t *) a].name, sort_specs[*(const size_t *) b].name);
}

static int name_index_init(struct name_index *x, const struct dep_node_spec *specs, size_t n) {
        x->specs = specs;
        x->n = n;
        x->sorted = malloc((n ? n : 1) * sizeof(size_t));
        if (!x->sorted)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                x->sorted[i] = i;
        sort_specs = specs;
        qsort(x->sorted, n, sizeof(size_t), cmp_index);
        return 0;
}

/* The index of the node named name, or -1. */
static long name_lookup(const struct name_index *x, const char *name) {
        size_t lo = 0, hi = x->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(name, x->specs[x->sorted[mid]].name);
                if (c == 0)
                        return (long) x->sorted[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return -1;
}

#define NO_REVERSE ((size_t) -1)

/* Adds the edges of node i's names to the list at list_off of node i and
 * i to the list at reverse_off of each target (either offset may be
 * NO_REVERSE: that side has no list). Missing names go to *missing when given. */
static int add_edges(struct dep_graph *g, const struct name_index *x, size_t i, char *const *names, size_t list_off,
                     size_t reverse_off, char ***missing) {
        for (char *const *p = names; p && *p; p++) {
                long t = name_lookup(x, *p);
                if (t < 0) {
                        if (missing && strv_extend(missing, *p) < 0)
                                return -ENOMEM;
                        continue;
                }
                if ((size_t) t == i)
                        continue; /* a unit never depends on itself (systemd ignores it too) */
                if (list_off != NO_REVERSE &&
                    dep_list_add((struct dep_list *) ((char *) &g->nodes[i] + list_off), (size_t) t) < 0)
                        return -ENOMEM;
                if (reverse_off != NO_REVERSE &&
                    dep_list_add((struct dep_list *) ((char *) &g->nodes[t] + reverse_off), i) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* One kind of edge: the spec's names at spec_off go to the node's list at
 * list_off, and the node to each target's list at reverse_off. */
struct edge_kind {
        size_t spec_off, list_off, reverse_off;
        bool keep_missing; /* a name that matches no node is kept in `missing` */
};

#define SPEC(f) offsetof(struct dep_node_spec, f)
#define NODE(f) offsetof(struct dep_node, f)

static const struct edge_kind edge_kinds[] = {
        { SPEC(requires), NODE(requires), NODE(required_by), true },
        { SPEC(binds_to), NODE(requires), NODE(required_by), true },
        { SPEC(binds_to), NODE(binds_to), NODE(bound_by), false },
        { SPEC(wants), NODE(wants), NODE(wanted_by), false },
        { SPEC(after), NODE(after), NODE(before), false },
        /* Before=T: T starts after this node. */
        { SPEC(before), NODE(before), NODE(after), false },
        { SPEC(requisite), NODE(requisite), NODE(requisite_of), true },
        /* PartOf=T: T's stop and restart reach this node. */
        { SPEC(part_of), NO_REVERSE, NODE(consists_of), false },
        { SPEC(conflicts), NODE(conflicts), NODE(conflicted_by), false },
        { SPEC(upholds), NODE(upholds), NODE(upheld_by), false },
        { SPEC(on_failure), NODE(on_failure), NO_REVERSE, false },
        { SPEC(on_success), NODE(on_success), NO_REVERSE, false },
        { SPEC(propagates_reload_to), NODE(reload_to), NO_REVERSE, false },
        /* ReloadPropagatedFrom=T: T's reload reaches this node. */
        { SPEC(reload_propagated_from), NO_REVERSE, NODE(reload_to), false },
};

static int resolve(struct dep_graph *g, const struct dep_node_spec *specs, const struct name_index *x) {
        for (size_t i = 0; i < g->n; i++)
                for (size_t e = 0; e < ELEMENTSOF(edge_kinds); e++) {
                        const struct edge_kind *k = &edge_kinds[e];
                        char *const *names = *(char *const *const *) ((const char *) &specs[i] + k->spec_off);
                        int r = add_edges(g, x, i, names, k->list_off, k->reverse_off,
                                          k->keep_missing ? &g->nodes[i].missing : NULL);
                        if (r < 0)
                                return r;
                }
        return 0;
}

/* ---- ordering cycles ---- */

struct tarjan {
        size_t *index, *low, *stack, *call, *edge;
        bool *on_stack;
        size_t next_index, sp, n;
};

#define UNVISITED ((size_t) -1)

/* Strongly connected components of the `after` edges; comp[i] = component
 * number (from 0) of node i. Iterative: call[] is the explicit call stack and
 * edge[] each frame's position in its node's edge list. */
static int tarjan_run(const struct dep_graph *g, size_t *comp, size_t *ret_n_comp) {
        size_t n = g->n, n_comp = 0;
        struct tarjan t = { .n = n };
        t.index = malloc(n * sizeof(size_t));
        t.low = malloc(n * sizeof(size_t));
        t.stack = malloc(n * sizeof(size_t));
        t.call = malloc(n * sizeof(size_t));
        t.edge = malloc(n * sizeof(size_t));
        t.on_stack = calloc(n, sizeof(bool));
        int k = 0;
        if (!t.index || !t.low || !t.stack || !t.call || !t.edge || !t.on_stack) {
                k = -ENOMEM;
                goto done;
        }
        for (size_t i = 0; i < n; i++)
                t.index[i] = UNVISITED;
        for (size_t root = 0; root < n; root++) {
                if (t.index[root] != UNVISITED)
                        continue;
                size_t depth = 0;
                t.call[depth] = root;
                t.edge[depth] = 0;
                t.index[root] = t.low[root] = t.next_index++;
                t.stack[t.sp++] = root;
                t.on_stack[root] = true;
                while (true) {
                        size_t v = t.call[depth];
                        const struct dep_list *e = &g->nodes[v].after;
                        if (t.edge[depth] < e->n) {
                                size_t w = e->items[t.edge[depth]++];
                                if (t.index[w] == UNVISITED) {
                                        t.index[w] = t.low[w] = t.next_index++;
                                        t.stack[t.sp++] = w;
                                        t.on_stack[w] = true;
                                        depth++;
                                        t.call[depth] = w;
                                        t.edge[depth] = 0;
                                } else if (t.on_stack[w] && t.index[w] < t.low[v])
                                        t.low[v] = t.index[w];
                                continue;
                        }
                        if (t.low[v] == t.index[v]) {
                                size_t w;
                                do {
                                        w = t.stack[--t.sp];
                                        t.on_stack[w] = false;
                                        comp[w] = n_comp;
                                } while (w != v);
                                n_comp++;
                        }
                        if (depth == 0)
                                break;
                        depth--;
                        size_t parent = t.call[depth];
                        if (t.low[v] < t.low[parent])
                                t.low[parent] = t.low[v];
                }
        }
        *ret_n_comp = n_comp;
done:
        free(t.index);
        free(t.low);
        free(t.stack);
        free(t.call);
        free(t.edge);
        free(t.on_stack);
        return k;
}

/* Whether another member of cycle c requires node i. */
static bool required_in_cycle(const struct dep_graph *g, size_t i, unsigned c) {
        const struct dep_list *r = &g->nodes[i].required_by;
        for (size_t j = 0; j < r->n; j++)
                if (g->nodes[r->items[j]].cycle == c)
                        return true;
        return false;
}

/* Marks, logs and unlinks one cycle; members holds its node indices in name order. */
static void break_cycle(struct dep_graph *g, const struct dep_node_spec *specs, const size_t *members, size_t n_members,
                        unsigned c) {
        char text[1024];
        size_t len = 0;
        for (size_t j = 0; j < n_members && len < sizeof text; j++)
                len += (size_t) snprintf(text + len, sizeof text - len, "%s%s", j ? ", " : "", specs[members[j]].name);
        long broken = -1;
        for (size_t j = 0; j < n_members && broken < 0; j++)
                if (!required_in_cycle(g, members[j], c))
                        broken = (long) members[j];
        if (broken >= 0) {
                g->nodes[broken].cycle_broken = true;
                log_error("ordering cycle between %s: %s is not started, to break it", text, specs[broken].name);
        } else {
                for (size_t j = 0; j < n_members; j++)
                        g->nodes[members[j]].cycle_broken = true;
                log_error("ordering cycle between %s: each is required by another, so none of them is started",
                            text);
        }
        /* No wait, at start or at stop, between members of the cycle. */
        for (size_t j = 0; j < n_members; j++) {
                struct dep_node *d = &g->nodes[members[j]];
                dep_list_remove_cycle(g, &d->after, c);
                dep_list_remove_cycle(g, &d->before, c);
        }
}

static int find_cycles(struct dep_graph *g, const struct dep_node_spec *specs, const struct name_index *x) {
        size_t n_comp = 0;
        _cleanup_free_ size_t *comp = malloc((g->n ? g->n : 1) * sizeof(size_t));
        _cleanup_free_ size_t *size = calloc(g->n ? g->n : 1, sizeof(size_t));
        _cleanup_free_ size_t *members = malloc((g->n ? g->n : 1) * sizeof(size_t));
        _cleanup_free_ unsigned *cycle_of = calloc(g->n ? g->n : 1, sizeof(unsigned));
        if (!comp || !size || !members || !cycle_of)
                return -ENOMEM;
        int k = tarjan_run(g, comp, &n_comp);
        if (k < 0)
                return k;
        for (size_t i = 0; i < g->n; i++)
                size[comp[i]]++;
        /* Number the cycles and mark their nodes first: required_in_cycle()
         * looks at every member's number. */
        for (size_t i = 0; i < g->n; i++) {
                size_t c = comp[i];
                if (size[c] < 2)
                        continue;
                if (!cycle_of[c])
                        cycle_of[c] = ++g->n_cycles;
                g->nodes[i].cycle = cycle_of[c];
        }
        for (unsigned c = 1; c <= g->n_cycles; c++) {
                size_t n_members = 0;
                for (size_t j = 0; j < g->n; j++) /* name order: x->sorted */
                        if (g->nodes[x->sorted[j]].cycle == c)
                                members[n_members++] = x->sorted[j];
                break_cycle(g, specs, members, n_members, c);
        }
        return 0;
}

int dep_graph_build(const struct dep_node_spec *nodes, size_t n, struct dep_graph **ret) {
        if ((!nodes && n > 0) || !ret)
                return -EINVAL;
        struct dep_graph *g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->n = n;
        g->nodes = calloc(n ? n : 1, sizeof *g->nodes);
        struct name_index x = {};
        int k = g->nodes ? name_index_init(&x, nodes, n) : -ENOMEM;
        if (k >= 0)
                k = resolve(g, nodes, &x);
        if (k >= 0)
                k = find_cycles(g, nodes, &x);
        free(x.sorted);
        if (k < 0) {
                dep_graph_free(g);
                return k;
        }
        *ret = g;
        return 0;
}
