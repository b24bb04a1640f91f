/* SPDX-License-Identifier: MIT */
/*
 * A unit's standard input and terminal (exec-stdio.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

#include "exec-stdio.h"
#include "log.h"
#include "macro.h"

#define DEFAULT_TTY "/dev/console"

/* TTYReset=: sane line settings (as stty sane) and the terminal's own reset (ESC c). */
static void tty_reset(int fd) {
        struct termios t;
        if (tcgetattr(fd, &t) >= 0) {
                t.c_iflag &= ~(IGNBRK | BRKINT | ISTRIP | INLCR | IGNCR | IUCLC);
                t.c_iflag |= ICRNL | IMAXBEL | IUTF8;
                t.c_oflag |= ONLCR | OPOST;
                t.c_cflag |= CREAD;
                t.c_lflag = ISIG | ICANON | IEXTEN | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE;
                (void) tcsetattr(fd, TCSANOW, &t);
        }
        (void) tcflush(fd, TCIOFLUSH);
        (void) !write(fd, "\033c", 2);
}

static int open_tty(const char *unit, const struct unit_exec_keys *e, int flags) {
        const char *path = e->tty_path ? e->tty_path : DEFAULT_TTY;
        int fd = open(path, flags | O_NOCTTY | O_CLOEXEC);
        if (fd >= 0 && (e->tty_reset || e->tty_vhangup)) {
                if (e->tty_reset)
                        tty_reset(fd);
                if (e->tty_vhangup && ioctl(fd, TIOCVHANGUP) >= 0) {
                        safe_close(fd); /* hung up: a fresh open */
                        fd = open(path, flags | O_NOCTTY | O_CLOEXEC);
                }
        }
        if (fd < 0)
                return log_error_errno(errno, "%s: TTYPath=: cannot open %s: %m", unit, path);
        if (!isatty(fd)) {
                safe_close(fd);
                return log_error_errno(ENOTTY, "%s: TTYPath=: %s is not a terminal", unit, path);
        }
        return fd;
}

/* StandardInputText=: the text in a sealed memfd, at its start. */
static int open_text(const char *unit, const char *text) {
        _cleanup_close_ int fd = memfd_create("tend-stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        size_t n = text ? strlen(text) : 0;
        if (fd < 0 || (n && write(fd, text, n) != (ssize_t) n) || lseek(fd, 0, SEEK_SET) < 0)
                return log_error_errno(errno ? errno : EIO, "%s: StandardInputText=: cannot make its memfd: %m", unit);
        (void) fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
        return TAKE_FD(fd);
}

/* The input's fd, INT_MIN for the default (/dev/null), or a negative errno. */
static int open_input_fd(const char *unit, const struct unit_exec_keys *e) {
        switch (e->standard_input) {
        case UNIT_INPUT_TTY:
        case UNIT_INPUT_TTY_FORCE:
        case UNIT_INPUT_TTY_FAIL:
                return open_tty(unit, e, O_RDWR);
        case UNIT_INPUT_FILE: {
                int fd = open(e->standard_input_path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
                return fd >= 0 ? fd
                               : log_error_errno(errno, "%s: StandardInput=: cannot open %s: %m", unit, e->standard_input_path);
        }
        case UNIT_INPUT_DATA:
                return open_text(unit, e->standard_input_text);
        default:
                return INT_MIN;
        }
}

int exec_stdio_open(const char *unit, const struct unit_file *f, struct exec_stdio *ret) {
        const struct unit_exec_keys *e = unit_file_exec(f);
        struct exec_stdio s = { { -1, -1, -1 } };
        *ret = s;
        int r = open_input_fd(unit, e);
        if (r < 0 && r != INT_MIN)
                return r;
        s.fd[0] = r == INT_MIN ? -1 : r;
        bool in_tty = s.fd[0] >= 0 && e->standard_input != UNIT_INPUT_FILE && e->standard_input != UNIT_INPUT_DATA;
        const struct unit_output *o[2] = { &f->standard_output, &f->standard_error };
        for (int i = 0; i < 2; i++) {
                /* StandardError= unset follows StandardOutput= (systemd's inherit). */
                bool tty = o[i]->kind == UNIT_OUTPUT_TTY || (i == 1 && o[i]->kind == UNIT_OUTPUT_DEFAULT &&
                                                              o[0]->kind == UNIT_OUTPUT_TTY);
                if (!tty)
                        continue;
                r = in_tty ? fcntl(s.fd[0], F_DUPFD_CLOEXEC, 3) : open_tty(unit, e, O_WRONLY);
                if (r < 0) {
                        r = in_tty ? log_error_errno(errno, "%s: cannot duplicate its terminal: %m", unit) : r;
                        exec_stdio_close(&s);
                        return r;
                }
                s.fd[1 + i] = r;
        }
        *ret = s;
        return 0;
}

void exec_stdio_close(struct exec_stdio *s) {
        for (int i = 0; i < 3; i++)
                s->fd[i] = safe_close(s->fd[i]);
}
