/* SPDX-License-Identifier: MIT */
/*
 * libcurl through dlopen(3) (curl-api.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "curl-api.h"
#include "log.h"
#include "macro.h"

#define LIBCURL_SONAME "libcurl.so.4"

struct curl_api curl_api;

static const struct {
        const char *name;
        size_t offset;
} symbols[] = {
#define SYM(f) { "curl_" #f, offsetof(struct curl_api, f) }
        SYM(global_init), SYM(easy_init), SYM(easy_setopt), SYM(easy_getinfo), SYM(easy_perform),
        SYM(easy_reset), SYM(easy_cleanup), SYM(easy_strerror), SYM(slist_append), SYM(slist_free_all),
        SYM(multi_init), SYM(multi_add_handle), SYM(multi_remove_handle), SYM(multi_perform),
        SYM(multi_poll), SYM(multi_wakeup), SYM(multi_info_read), SYM(multi_cleanup),
#undef SYM
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;

static void load(void) {
        void *h = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                log_error("etcd: cannot load %s: %s (install libcurl4)", LIBCURL_SONAME, dlerror());
                loaded = -ELIBACC;
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(symbols); i++) {
                void *f = dlsym(h, symbols[i].name);
                if (!f) {
                        log_error("etcd: %s has no %s: %s", LIBCURL_SONAME, symbols[i].name, dlerror());
                        loaded = -ELIBACC;
                        return; /* h stays open: nothing of it is called */
                }
                *(void **) ((char *) &curl_api + symbols[i].offset) = f;
        }
        if (curl_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                log_error("etcd: %s: curl_global_init failed", LIBCURL_SONAME);
                loaded = -ELIBACC;
        }
}

int curl_api_load(void) {
        pthread_once(&once, load);
        return loaded;
}
