/* SPDX-License-Identifier: MIT */
/*
 * libcurl, loaded when a store on etcd is first made (docs/store.md §4).
 *
 * tend links no HTTP client: libcurl and the ~30 libraries it pulls in
 * (TLS, Kerberos, LDAP, …) cost every tend start ≈ 4 ms in the dynamic
 * loader — `tend -- CMD` and a tend without --store included — so the etcd
 * client opens libcurl.so.4 with dlopen(3) the first time one is made, and
 * calls it through curl_api. Only store-etcd-client.c uses it.
 */
#pragma once

#define CURL_DISABLE_TYPECHECK 1 /* curl_api's members are called, not curl's macros */
#include <curl/curl.h>

/* The libcurl functions the etcd client calls (their libcurl names without
 * "curl_"); valid once curl_api_load() returned 0, never unloaded. */
struct curl_api {
        CURLcode (*global_init)(long flags);
        CURL *(*easy_init)(void);
        CURLcode (*easy_setopt)(CURL *h, CURLoption option, ...);
        CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
        CURLcode (*easy_perform)(CURL *h);
        void (*easy_reset)(CURL *h);
        void (*easy_cleanup)(CURL *h);
        const char *(*easy_strerror)(CURLcode code);
        struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
        void (*slist_free_all)(struct curl_slist *l);
        CURLM *(*multi_init)(void);
        CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
        CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
        CURLMcode (*multi_perform)(CURLM *m, int *running);
        CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *extra, unsigned n, int timeout_ms, int *ret);
        CURLMcode (*multi_wakeup)(CURLM *m);
        CURLMsg *(*multi_info_read)(CURLM *m, int *left);
        CURLMcode (*multi_cleanup)(CURLM *m);
};

extern struct curl_api curl_api;

/* Opens libcurl.so.4 and resolves curl_api, then curl_global_init(), once per
 * process (the first call does it; later ones return its result).
 * Returns 0, or -ELIBACC when libcurl (or one of its functions) cannot be
 * loaded, said once in one log line with dlerror()'s reason. Thread-safe. */
int curl_api_load(void);
