/* SPDX-License-Identifier: MIT */
/*
 * tendctl's connection to tend (tendctl-conn.c; docs/control-protocol.md
 * "Framing"): connect, one message per send, the answer's messages one by
 * one, and the readers of their fields. Single-threaded (recv_message()'s
 * buffer is static).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control-proto.h"
#include "tendctl-verbs.h"

typedef struct json_object json;

/* A connected socket in *ret_fd (the caller's, O_CLOEXEC), or the exit
 * status for why not (message printed). */
int connect_tend(const struct args *a, int *ret_fd);
/* {"version": 1, "command": cmd, "units": [names…]}, the caller's; NULL on ENOMEM. */
json *request_new(enum control_command cmd, char *const *names, size_t n);
/* 0 or a negative errno (-EPIPE, -ECONNRESET: tend closed). req NULL: -ENOMEM. */
int send_request(int fd, json *req);
/* The next message (blocking), *ret the caller's; -ECONNRESET, -EMSGSIZE, -EBADMSG. */
int recv_message(int fd, json **ret);
/* Prints why reading failed; returns EXIT_FAILED. */
int recv_error(int r);
/* o's field key, or def when missing or of another type (o's string). */
const char *get_str(json *o, const char *key, const char *def);
int64_t get_int(json *o, const char *key, int64_t def);
bool get_bool(json *o, const char *key);
/* o as one line of JSON on stdout. */
void print_json(json *o);
