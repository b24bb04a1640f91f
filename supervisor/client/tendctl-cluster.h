/* SPDX-License-Identifier: MIT */
/*
 * etcd: tendctl --cluster VIEW [NAME] (tendctl-cluster.c). Single-threaded.
 */
#pragma once

#include "tendctl-verbs.h"

/* The cluster view (a->view: list, hosts, status NAME) asked on fd and
 * printed; tendctl's exit status. */
int run_cluster(const struct args *a, int fd);
