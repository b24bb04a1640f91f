/* SPDX-License-Identifier: MIT */
/*
 * Header-only helpers shared by libexit and the supervisor: scoped cleanup
 * (STYLE.md "Errors, logging, cleanup"), ownership transfer, and the
 * negative-errno conversion used at every libc boundary.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _unused_ __attribute__((unused))
#define _pure_ __attribute__((pure))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _public_ __attribute__((visibility("default")))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f) __attribute__((cleanup(f)))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

#define container_of(ptr, type, member) \
        ((type *) ((char *) (ptr) - offsetof(type, member)))

/* Returns -errno of the failed libc call; never 0 even if errno was not set. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

/* Takes ownership out of a variable with a cleanup attribute. */
#define TAKE_PTR(p)                                 \
        ({                                          \
                __typeof__(p) *_pp_ = &(p);         \
                __typeof__(p) _p_ = *_pp_;          \
                *_pp_ = NULL;                       \
                _p_;                                \
        })

#define TAKE_FD(fd)                                 \
        ({                                          \
                int *_fdp_ = &(fd);                 \
                int _fd_ = *_fdp_;                  \
                *_fdp_ = -1;                        \
                _fd_;                               \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Closes fd if >= 0, preserving errno; returns -1 so callers can write fd = safe_close(fd). */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -1;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Defines a cleanup helper for a type whose destructor accepts NULL and returns NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)          \
        static inline void func##p(type *p) {            \
                if (*p)                                  \
                        (void) func(*p);                 \
        }

#define streq(a, b) (strcmp((a), (b)) == 0)
