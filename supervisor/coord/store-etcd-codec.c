/* SPDX-License-Identifier: MIT */
/*
 * The etcd backend's encoding helpers (store-etcd-internal.h): base64 of
 * the gateway's keys and values, and its int64 fields (sent as JSON strings).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store-etcd-internal.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *etcd_base64(const void *data, size_t n) {
        const unsigned char *p = data;
        char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t) p[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t) p[i + 1] << 8;
                if (i + 2 < n)
                        v |= p[i + 2];
                *o++ = b64[v >> 18 & 63];
                *o++ = b64[v >> 12 & 63];
                *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
                *o++ = i + 2 < n ? b64[v & 63] : '=';
        }
        *o = '\0';
        return out;
}

static int b64_value(char ch) {
        const char *p = ch ? strchr(b64, ch) : NULL;
        return p ? (int) (p - b64) : -1;
}

int etcd_unbase64(const char *text, char **ret, size_t *ret_n) {
        size_t len = text ? strlen(text) : 0, n = 0;
        uint32_t acc = 0;
        unsigned bits = 0;
        char *out = malloc(len / 4 * 3 + 3);

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len && text[i] != '='; i++) {
                int v = b64_value(text[i]);
                if (v < 0) {
                        free(out);
                        return -EINVAL;
                }
                acc = acc << 6 | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (char) (acc >> bits & 0xff);
                }
        }
        out[n] = '\0';
        *ret = out;
        *ret_n = n;
        return 0;
}

int64_t etcd_json_int(struct json_object *o, const char *field) {
        struct json_object *v;

        if (!o || !json_object_object_get_ex(o, field, &v))
                return 0;
        if (json_object_is_type(v, json_type_string))
                return strtoll(json_object_get_string(v), NULL, 10);
        return json_object_get_int64(v);
}
