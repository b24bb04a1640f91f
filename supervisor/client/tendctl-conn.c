/* SPDX-License-Identifier: MIT */
/*
 * tendctl's connection to tend (tendctl-conn.h): connect, one message per send,
 * the answer's messages one by one (docs/control-protocol.md "Framing").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "macro.h"
#include "tendctl-conn.h"

/*
 * Is the listener tend? SO_PEERCRED on a connected socket gives the
 * credentials of the process that called listen(): tendctl talks only to a
 * server running as root, as its own user, or as the uid $TEND_SERVER_UID
 * names (the caller's explicit trust in another user's tend), never to one
 * another user put in tend's place (docs/threat-model.md). 0, or the exit
 * status (permission denied for the verb) after saying why.
 */
static int check_server_uid(const struct args *a, int fd, const char *path) {
        struct ucred cred = { .uid = (uid_t) -1 };
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                fprintf(stderr, "tendctl: %s: cannot tell who listens there: %s\n", path, strerror(errno));
                return verb_exit_denied(a->verb);
        }
        const char *trusted = getenv("TEND_SERVER_UID");
        char *end = NULL;
        unsigned long t = trusted && *trusted ? strtoul(trusted, &end, 10) : ULONG_MAX;
        if (cred.uid == 0 || cred.uid == geteuid() || (end && *end == '\0' && t == cred.uid))
                return 0;
        fprintf(stderr, "tendctl: refused: the socket %s is served by uid %u (pid %d), not by root or your own user: "
                        "not talking to it (set TEND_SERVER_UID=%u to trust it)\n", path, (unsigned) cred.uid,
                (int) cred.pid, (unsigned) cred.uid);
        return verb_exit_denied(a->verb);
}

int connect_tend(const struct args *a, int *ret_fd) {
        _cleanup_free_ char *path = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        int r = control_socket_path(a->socket, &path);
        if (r == -ENOENT) {
                fprintf(stderr, "tendctl: tend is not running (no socket: set --control-socket, $TEND_SOCKET "
                                "or $XDG_RUNTIME_DIR)\n");
                return verb_exit_not_running(a->verb);
        }
        if (r < 0 || strlen(path) >= sizeof sa.sun_path) {
                fprintf(stderr, "tendctl: control socket path: %s\n", strerror(r < 0 ? -r : ENAMETOOLONG));
                return EXIT_FAILED;
        }
        memcpy(sa.sun_path, path, strlen(path));

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int e = errno;
                if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) {
                        fprintf(stderr, "tendctl: tend is not running (%s: %s)\n", path, strerror(e));
                        return verb_exit_not_running(a->verb);
                }
                fprintf(stderr, "tendctl: cannot connect to tend at %s: %s\n", path, strerror(e));
                return e == EACCES || e == EPERM ? verb_exit_denied(a->verb) : EXIT_FAILED;
        }
        r = check_server_uid(a, fd, path);
        if (r != 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

json *request_new(enum control_command cmd, char *const *names, size_t n) {
        _cleanup_json_ json *o = json_object_new_object();
        json *units = json_object_new_array();
        if (!o || !units || json_object_object_add(o, "units", units) < 0) {
                json_object_put(units);
                return NULL;
        }
        if (control_add_int64(o, "version", CONTROL_PROTOCOL_VERSION) < 0 ||
            control_add_string(o, "command", control_command_to_string(cmd)) < 0)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (json_object_array_add(units, json_object_new_string(names[i])) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

int send_request(int fd, json *req) {
        const char *text;
        size_t len;
        if (!req || control_message_text(req, &text, &len) < 0)
                return -ENOMEM;
        if (send(fd, text, len, MSG_NOSIGNAL) < 0)
                return negative_errno();
        return 0;
}

int recv_message(int fd, json **ret) {
        static char buf[CONTROL_MESSAGE_MAX + 1];
        ssize_t n;
        do
                n = recv(fd, buf, sizeof buf, MSG_TRUNC);
        while (n < 0 && errno == EINTR);
        /* tend closed a connection holding our unread request (a refusal):
         * the error comes first, its answer may still be queued behind it. */
        if (n < 0 && errno == ECONNRESET)
                n = recv(fd, buf, sizeof buf, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0 && errno == EAGAIN)
                errno = ECONNRESET;
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -ECONNRESET;
        if ((size_t) n > sizeof buf)
                return -EMSGSIZE;
        return control_message_parse(buf, (size_t) n, ret);
}

int recv_error(int r) {
        if (r == -ECONNRESET || r == -EPIPE)
                fprintf(stderr, "tendctl: tend closed the connection\n");
        else
                fprintf(stderr, "tendctl: reading tend's answer: %s\n", strerror(-r));
        return EXIT_FAILED;
}

const char *get_str(json *o, const char *key, const char *def) {
        const char *s;
        return control_get_string(o, key, &s) < 0 ? def : s;
}

int64_t get_int(json *o, const char *key, int64_t def) {
        int64_t v;
        return control_get_int64(o, key, &v) < 0 ? def : v;
}

bool get_bool(json *o, const char *key) {
        bool v;
        return control_get_bool(o, key, &v) >= 0 && v;
}

void print_json(json *o) {
        const char *text;
        size_t len;
        if (control_message_text(o, &text, &len) >= 0)
                printf("%.*s\n", (int) len, text);
}
