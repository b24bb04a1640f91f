/* SPDX-License-Identifier: MIT */
/* security: RemoveIPC= (remove-ipc.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"

#include "remove-ipc.h"

#define SYSTEM_UID_MAX 999 /* Debian's SYS_UID_MAX, systemd's default */

bool remove_ipc_applies(uid_t uid) {
        return uid > SYSTEM_UID_MAX && uid != (uid_t) -1 && uid != 65534; /* nobody: shared by everyone */
}

/* The index of column name in a /proc/sysvipc header line, or -1. */
static int column(const char *header, const char *name) {
        int i = 0;
        for (const char *p = header;; i++) {
                p += strspn(p, " \t\n");
                size_t n = strcspn(p, " \t\n");
                if (n == 0)
                        return -1;
                if (strlen(name) == n && strncmp(p, name, n) == 0)
                        return i;
                p += n;
        }
}

/* Field i of a line, as a number. */
static long long field(const char *line, int i) {
        const char *p = line;
        for (int k = 0; k < i; k++) {
                p += strspn(p, " \t");
                p += strcspn(p, " \t\n");
        }
        return strtoll(p, NULL, 10);
}

enum sysv { SYSV_SHM, SYSV_SEM, SYSV_MSG };

static int sysv_remove(enum sysv kind, int id) {
        int r = kind == SYSV_SHM ? shmctl(id, IPC_RMID, NULL)
              : kind == SYSV_SEM ? semctl(id, 0, IPC_RMID)
                                 : msgctl(id, IPC_RMID, NULL);
        return r < 0 ? -errno : 0;
}

/* The System V objects of one kind that uid owns or made. */
static int remove_sysv(const char *unit, uid_t uid, enum sysv kind) {
        static const char *const files[] = { "/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg" };
        static const char *const ids[] = { "shmid", "semid", "msqid" };
        FILE *f = fopen(files[kind], "re");
        if (!f)
                return 0; /* a kernel without System V IPC */
        char line[512];
        int n = 0, ci = -1, cu = -1, cc = -1;
        if (fgets(line, sizeof line, f))
                ci = column(line, ids[kind]), cu = column(line, "uid"), cc = column(line, "cuid");
        while (ci >= 0 && cu >= 0 && cc >= 0 && fgets(line, sizeof line, f)) {
                if (field(line, cu) != (long long) uid && field(line, cc) != (long long) uid)
                        continue;
                int r = sysv_remove(kind, (int) field(line, ci));
                if (r >= 0)
                        n++;
                else if (r != -EINVAL && r != -EIDRM)
                        log_warning_errno(r, "%s: RemoveIPC=: cannot remove %s %lld: %m", unit, ids[kind],
                                          field(line, ci));
        }
        fclose(f);
        return n;
}

/* The entries of dir (/dev/shm, /dev/mqueue) that uid owns; directories are left. */
static int remove_posix(const char *unit, uid_t uid, const char *dir) {
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        int n = 0;
        for (struct dirent *e; (e = readdir(d));) {
                struct stat st;
                if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    st.st_uid != uid || S_ISDIR(st.st_mode))
                        continue;
                if (unlinkat(dirfd(d), e->d_name, 0) >= 0)
                        n++;
                else if (errno != ENOENT)
                        log_warning_errno(errno, "%s: RemoveIPC=: cannot remove %s/%s: %m", unit, dir, e->d_name);
        }
        closedir(d);
        return n;
}

int remove_ipc(const char *unit, uid_t uid) {
        if (!remove_ipc_applies(uid))
                return 0;
        int n = remove_sysv(unit, uid, SYSV_SHM) + remove_sysv(unit, uid, SYSV_SEM) + remove_sysv(unit, uid, SYSV_MSG) +
                remove_posix(unit, uid, "/dev/shm") + remove_posix(unit, uid, "/dev/mqueue");
        if (n > 0)
                log_info("%s: RemoveIPC=: removed %d IPC object(s) of uid %u", unit, n, (unsigned) uid);
        return n;
}
