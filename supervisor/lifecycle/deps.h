/* SPDX-License-Identifier: MIT */
/*
 * The dependency graph between units (SPEC §4 "Start jobs", "Cycles",
 * "Propagation", "Shutdown"): Requires=, Wants=, BindsTo=, After=, Before=,
 * and Requisite=, PartOf=, Conflicts=, Upholds=, OnFailure=, OnSuccess=,
 * PropagatesReloadTo=/ReloadPropagatedFrom= (docs/tend.service.5.md
 * "DEPENDENCIES") resolved from names to node indices, with the reverse edges
 * the manager walks, and ordering cycles found and broken.
 *
 * This module knows nothing of units' states; it only answers "who is
 * ordered after whom" and "who needs whom". The manager builds a graph from
 * its loaded units whenever that set changes (load, daemon-reload, a template
 * instance appearing, a removed unit freed) and keeps the node indices in
 * step with its own array.
 *
 * Cycles: ordering edges (After=, and Before= turned around) form a directed
 * graph; each strongly connected component of more than one node is an
 * ordering cycle. Every node of a cycle is logged (as an error: a mistake in
 * the units). The first node of the
 * cycle, in name order, that no other node of the cycle requires (Requires=
 * or BindsTo=) is marked cycle_broken: it is not started ("not started to
 * break ordering cycle"); when every node is required by another, all of
 * them are marked. Ordering edges between nodes of one cycle are dropped, so
 * that neither a start nor a stop ever waits around a cycle: never a hang.
 *
 * Single-threaded; a graph is immutable once built.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* One node's input: the unit name and its dependency names as the unit file
 * gave them (NULL-terminated vectors, or NULL). Borrowed during
 * dep_graph_build() only. */
struct dep_node_spec {
        const char *name;
        char *const *requires;
        char *const *wants;
        char *const *binds_to;
        char *const *after;
        char *const *before;
        char *const *requisite;
        char *const *part_of;
        char *const *conflicts;
        char *const *upholds;
        char *const *on_failure;
        char *const *on_success;
        char *const *propagates_reload_to;
        char *const *reload_propagated_from;
};

/* A list of node indices, without duplicates and without the node itself. */
struct dep_list {
        size_t *items;
        size_t n;
};

struct dep_node {
        struct dep_list requires;    /* Requires= and BindsTo= */
        struct dep_list binds_to;    /* BindsTo= */
        struct dep_list wants;       /* Wants= */
        struct dep_list after;       /* started after these: own After=, others' Before= (cycle edges dropped) */
        struct dep_list before;      /* the reverse of after: these start after this node */
        struct dep_list required_by; /* the reverse of requires */
        struct dep_list bound_by;    /* the reverse of binds_to */
        struct dep_list wanted_by;   /* the reverse of wants */
        struct dep_list requisite;   /* Requisite= */
        struct dep_list requisite_of; /* the reverse of requisite */
        struct dep_list consists_of; /* the units that are PartOf= this one */
        struct dep_list conflicts;   /* its own Conflicts= */
        struct dep_list conflicted_by; /* the units whose Conflicts= name this one */
        struct dep_list upholds;     /* Upholds= */
        struct dep_list upheld_by;   /* the reverse of upholds */
        struct dep_list on_failure;  /* OnFailure= */
        struct dep_list on_success;  /* OnSuccess= */
        struct dep_list reload_to;   /* its PropagatesReloadTo=, and the units whose
                                      * ReloadPropagatedFrom= name this one */
        char **missing;              /* Requires=/BindsTo=/Requisite= names that are not in the graph (owned) */
        unsigned cycle;              /* 0, or the number (from 1) of its ordering cycle */
        bool cycle_broken;           /* not started, to break its cycle */
};

struct dep_graph {
        struct dep_node *nodes; /* n, in the order of the specs */
        size_t n;
        unsigned n_cycles;
};

/*
 * Builds the graph of n nodes. Names that match no node are dropped from
 * every list but Requires=, BindsTo= and Requisite=, whose missing names are
 * kept in the node's `missing`. Each ordering cycle is logged at warning level (its members,
 * and which are not started), at error level. *ret is the caller's (dep_graph_free).
 * 0, or -ENOMEM (*ret untouched); -EINVAL for a NULL pointer with n > 0.
 */
int dep_graph_build(const struct dep_node_spec *nodes, size_t n, struct dep_graph **ret);

struct dep_graph *dep_graph_free(struct dep_graph *g);

/* Whether node n has no edge and nothing that keeps it from starting. */
bool dep_node_is_plain(const struct dep_node *n);

/* Whether list l holds node index i. */
bool dep_list_has(const struct dep_list *l, size_t i);
