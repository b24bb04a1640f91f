/* SPDX-License-Identifier: MIT */
/*
 * `tendctl status NAME…` as an operator reads it (tendctl-show.h): what the
 * unit is (description, file, drop-ins), its state in systemd's words beside
 * tend's, its main process and every process of its cgroup, CPU and memory
 * from the cgroup's files, the last failure, the status text, then its last
 * log lines. systemctl's exit status: 0 all active, 3 one is not, 4 one is
 * unknown.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal-util.h"
#include "tendctl-show.h"

/* The first line of path (a /proc or cgroup file), '\n' cut; "" if unreadable. */
static void read_line(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        buf[0] = 0;
        if (!f)
                return;
        if (!fgets(buf, (int) size, f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
}

/* The command line of pid, NULs as spaces; its comm when it has none. */
static void proc_cmdline(pid_t pid, char *buf, size_t size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int) pid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, size - 1, f) : 0;
        if (f)
                fclose(f);
        while (n > 0 && buf[n - 1] == 0)
                n--;
        for (size_t i = 0; i < n; i++)
                if (buf[i] == 0)
                        buf[i] = ' ';
        buf[n] = 0;
        if (n == 0) {
                snprintf(path, sizeof path, "/proc/%d/comm", (int) pid);
                read_line(path, buf, size);
        }
}

static void format_bytes(uint64_t b, char *buf, size_t size) {
        static const char units[] = "BKMGT";
        double v = (double) b;
        size_t i = 0;
        while (v >= 1024 && i + 1 < sizeof units - 1)
                v /= 1024, i++;
        if (i == 0)
                snprintf(buf, size, "%" PRIu64 "B", b);
        else
                snprintf(buf, size, "%.1f%c", v, units[i]);
}

static void print_loaded(json *p) {
        char dropins[4096];
        json *v;
        printf("     Loaded: loaded (%s; %s)\n", get_str(p, "FragmentPath", "?"), get_str(p, "UnitFileState", "enabled"));
        if (!json_object_object_get_ex(p, "DropInPaths", &v) || !json_object_is_type(v, json_type_array) ||
            json_object_array_length(v) == 0)
                return;
        format_value("DropInPaths", v, dropins, sizeof dropins);
        for (size_t i = 0; i < json_object_array_length(v); i++)
                printf("%s%s\n", i == 0 ? "    Drop-In: " : "             ",
                       json_object_get_string(json_object_array_get_idx(v, i)));
}

static void print_active(json *p) {
        const char *active = get_str(p, "ActiveState", "?"), *sub = get_str(p, "SubState", "?");
        const char *tend = get_str(p, "TendState", "?");
        int64_t since = get_int(p, "StateChangeTimestamp", 0);
        char when[64], ago[64];
        format_time(since, TIME_STATUS, when, sizeof when);
        format_ago(since, ago, sizeof ago);
        printf("     Active: %s%s (%s)%s since %s; %s\n", state_colour(tend), active, sub, colour_off(), when, ago);
        printf("       tend: %s, restarts %" PRId64 ", result %s\n", tend, get_int(p, "NRestarts", 0),
               get_str(p, "Result", "?"));
}

/* pkg: "status=1/FAILURE": an exit code with its LSB name, as systemctl. */
static void exit_status_words(int64_t status, char *buf, size_t size) {
        static const char *const lsb[] = { "SUCCESS",      "FAILURE",     "INVALIDARGUMENT", "NOTIMPLEMENTED",
                                           "NOPERMISSION", "NOTINSTALLED", "NOTCONFIGURED",  "NOTRUNNING" };
        if (status >= 0 && status < (int64_t) ELEMENTSOF(lsb))
                snprintf(buf, size, "status=%" PRId64 "/%s", status, lsb[status]);
        else
                snprintf(buf, size, "status=%" PRId64, status);
}

/* pkg: the last command that failed (show's FailedCommand* properties), as
 * systemctl's "Process:" line, with its place in its list and when. */
static void print_failed_command(json *p) {
        const char *key = get_str(p, "FailedCommand", NULL);
        if (!key)
                return;
        int64_t code = get_int(p, "FailedCommandCode", 0), status = get_int(p, "FailedCommandStatus", 0);
        int64_t pid = get_int(p, "FailedCommandPID", 0), err = get_int(p, "FailedCommandErrno", 0);
        char how[96], sig[24], when[64], pidbuf[24] = "";
        if (code == 0)
                snprintf(how, sizeof how, "%s: %s", pid > 0 ? "exec failed" : "could not start", strerror((int) err));
        else if (code == 1) {
                char st[40];
                exit_status_words(status, st, sizeof st);
                snprintf(how, sizeof how, "code=exited, %s", st);
        } else {
                const char *s = signal_to_string((int) status, sig);
                snprintf(how, sizeof how, "code=%s, signal=%s", code == 3 ? "dumped" : "killed",
                         strncmp(s, "SIG", 3) == 0 ? s + 3 : s);
        }
        if (pid > 0)
                snprintf(pidbuf, sizeof pidbuf, "%" PRId64 " ", pid);
        format_time(get_int(p, "FailedCommandTimestamp", 0), TIME_STATUS, when, sizeof when);
        printf("    Process: %s%s=%s (%s), command %" PRId64 " of %" PRId64 ", at %s\n", pidbuf, key,
               get_str(p, "FailedCommandPath", "?"), how, get_int(p, "FailedCommandIndex", 0) + 1,
               get_int(p, "FailedCommandCount", 1), when);
}

/* The last exit of the main process and, for a failed unit, why and when. */
static void print_failure(json *p) {
        int64_t code = get_int(p, "ExecMainCode", 0), status = get_int(p, "ExecMainStatus", 0);
        const char *result = get_str(p, "Result", "success");
        char sig[24], when[64];
        if (code == 1)
                printf("  Last exit: code=exited, status=%" PRId64 "\n", status);
        else if (code >= 2)
                printf("  Last exit: code=%s, signal=%s\n", code == 3 ? "dumped" : "killed",
                       signal_to_string((int) status, sig));
        print_failed_command(p);
        if (streq(result, "success") || !streq(get_str(p, "ActiveState", ""), "failed"))
                return;
        format_time(get_int(p, "StateChangeTimestamp", 0), TIME_STATUS, when, sizeof when);
        printf("     Failed: result %s at %s\n", result, when);
}

static void print_main(json *p) {
        int64_t pid = get_int(p, "MainPID", 0);
        char path[64], comm[64];
        if (pid <= 0)
                return;
        snprintf(path, sizeof path, "/proc/%" PRId64 "/comm", pid);
        read_line(path, comm, sizeof comm);
        printf("   Main PID: %" PRId64 " (%s)\n", pid, comm[0] ? comm : "?");
}

/* Tasks, memory, CPU and the processes, from the unit's cgroup. */
static void print_cgroup(json *p) {
        const char *dir = get_str(p, "CGroupDirectory", NULL);
        char path[4096], line[256];
        if (!dir)
                return;
        snprintf(path, sizeof path, "%s/memory.current", dir);
        read_line(path, line, sizeof line);
        if (line[0]) {
                char b[32];
                format_bytes(strtoull(line, NULL, 10), b, sizeof b);
                printf("     Memory: %s\n", b);
        }
        snprintf(path, sizeof path, "%s/cpu.stat", dir);
        read_line(path, line, sizeof line); /* its first line: usage_usec N */
        if (strncmp(line, "usage_usec ", 11) == 0)
                printf("        CPU: %.3fs\n", (double) strtoull(line + 11, NULL, 10) / 1e6);
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        long pid, next;
        bool have = fscanf(f, "%ld", &pid) == 1;
        if (have)
                printf("     CGroup: %s\n", dir);
        while (have) {
                char cmd[512];
                bool more = fscanf(f, "%ld", &next) == 1;
                proc_cmdline((pid_t) pid, cmd, sizeof cmd);
                printf("             %s%ld %s\n", more ? "├─" : "└─", pid, cmd);
                pid = next;
                have = more;
        }
        fclose(f);
}

/* The unit's last a->lines log lines (nothing when it has no ring). */
static void print_logs(const struct args *a, int fd, const char *name) {
        char *names[] = { (char *) name };
        _cleanup_json_ json *req = request_new(CONTROL_CMD_LOGS, names, 1);
        if (a->lines == 0 || !req || (a->lines > 0 && control_add_int64(req, "lines", a->lines) < 0) ||
            send_request(fd, req) < 0)
                return;
        bool first = true;
        for (;;) {
                _cleanup_json_ json *m = NULL;
                if (recv_message(fd, &m) < 0)
                        return;
                const char *type = get_str(m, "type", "");
                if (streq(type, "result"))
                        return;
                if (!streq(type, "line"))
                        continue;
                if (first)
                        putchar('\n');
                first = false;
                print_line(m, false);
        }
}

static void print_unit(const struct args *a, int fd, json *p) {
        const char *id = get_str(p, "Id", "?"), *desc = get_str(p, "Description", NULL);
        const char *status = get_str(p, "StatusText", NULL), *cond = get_str(p, "ConditionText", NULL);
        const char *file_error = get_str(p, "FileError", NULL);
        printf("%s●%s %s", state_colour(get_str(p, "TendState", "?")), colour_off(), id);
        if (desc && !streq(desc, id))
                printf(" - %s", desc);
        putchar('\n');
        print_loaded(p);
        print_active(p);
        print_failure(p);
        if (cond)
                printf("  Condition: %s\n", cond);
        const char *holder = get_str(p, "TendSingletonHolder", NULL); /* etcd: docs/cluster.md */
        if (holder)
                printf("  Singleton: %s%s%s\n", *holder ? "held by " : "held by no host", holder,
                       get_bool(p, "TendSingletonWaiting") ? "; this host waits for its key (it starts here when it "
                                                            "holds it)" : "");
        /* tend(8) "RELOADING DIR": what a daemon-reload did not apply. */
        if (file_error)
                printf("    Warning: its unit file no longer loads (%s); it is left as it is, on the last file that "
                       "loaded\n", file_error);
        if (get_bool(p, "FileChanged"))
                printf("    Warning: the unit file changed since the unit started; `tendctl restart %s` applies it\n",
                       id);
        print_main(p);
        if (status)
                printf("     Status: \"%s\"\n", status);
        print_cgroup(p);
        fflush(stdout);
        print_logs(a, fd, id);
}

int verb_status(const struct args *a, int fd, struct units *u) {
        int ret = 0;
        bool printed = false;
        for (size_t i = 0; i < u->n; i++) {
                if (!u->found[i]) {
                        fprintf(stderr, "Unit %s could not be found.\n", get_str(u->props[i], "Id", a->names[i]));
                        ret = EXIT_UNKNOWN_STATUS;
                        continue;
                }
                if (printed)
                        putchar('\n');
                printed = true;
                print_unit(a, fd, u->props[i]);
                const char *active = get_str(u->props[i], "ActiveState", "");
                if (ret == 0 && !streq(active, "active") && !streq(active, "reloading"))
                        ret = EXIT_PROGRAM_NOT_RUNNING;
        }
        return ret;
}
