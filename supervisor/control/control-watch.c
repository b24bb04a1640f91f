/* SPDX-License-Identifier: MIT */
/* One store event as a watch message: spliced or as a tree (control-watch.h). */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "control-proto.h"
#include "control-watch.h"
#include "macro.h"

/* ------------------------------------------------------------------------ */
/* Canonical form: what json-c writes, so what a parse and a serialisation  */
/* would give back unchanged                                                */
/* ------------------------------------------------------------------------ */

/* Deeper values, or objects with more keys, are left to the tree (json-c's
 * own parser stops at depth 32). */
#define CANON_DEPTH_MAX 16u
#define CANON_KEYS_MAX 32u

struct scan {
        const char *p, *end;
};

static bool scan_value(struct scan *s, unsigned depth);

static bool scan_char(struct scan *s, char c) {
        if (s->p >= s->end || *s->p != c)
                return false;
        s->p++;
        return true;
}

static int hex_lower(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A \u escape json-c writes: \u00XY (lower-case hex) for a control character
 * without a short form, never \u0000 (a NUL cuts a key short in json-c). */
static bool scan_unicode_escape(struct scan *s) {
        if (s->end - s->p < 4 || s->p[0] != '0' || s->p[1] != '0')
                return false;
        int hi = hex_lower(s->p[2]), lo = hex_lower(s->p[3]);
        if (hi < 0 || lo < 0)
                return false;
        int c = hi * 16 + lo;
        if (c == 0 || c >= 0x20 || strchr("\b\t\n\f\r", c))
                return false;
        s->p += 4;
        return true;
}

/* A string as json-c writes it: raw bytes from 0x20 up (and '/' unescaped),
 * except '"' and '\\', which are escaped like \b \t \n \f \r. */
static bool scan_string(struct scan *s) {
        if (!scan_char(s, '"'))
                return false;
        while (s->p < s->end) {
                unsigned char c = (unsigned char) *s->p++;
                if (c == '"')
                        return true;
                if (c < 0x20)
                        return false;
                if (c != '\\')
                        continue;
                if (s->p >= s->end)
                        return false;
                char e = *s->p++;
                if (e == 'u' && !scan_unicode_escape(s))
                        return false;
                if (e != 'u' && (e == '\0' || !strchr("\"\\bfnrt", e)))
                        return false;
        }
        return false;
}

/* An integer json-c reads into an int64 and writes back the same: no "-0",
 * no leading zero, at most 18 digits. Fractions and exponents are doubles,
 * which json-c may write otherwise. */
static bool scan_number(struct scan *s) {
        bool minus = scan_char(s, '-');
        const char *digits = s->p;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
                s->p++;
        size_t n = (size_t) (s->p - digits);
        if (n == 0 || n > 18 || (digits[0] == '0' && (n > 1 || minus)))
                return false;
        return true;
}

static bool scan_literal(struct scan *s, const char *word) {
        size_t n = strlen(word);
        if ((size_t) (s->end - s->p) < n || memcmp(s->p, word, n) != 0)
                return false;
        s->p += n;
        return true;
}

/* json-c keeps the last of duplicate keys (and writes one): not canonical.
 * Canonical strings are equal exactly when their texts are. */
static bool scan_object(struct scan *s, unsigned depth) {
        struct {
                const char *text;
                size_t len;
        } keys[CANON_KEYS_MAX];
        size_t n_keys = 0;

        if (!scan_char(s, '{'))
                return false;
        if (scan_char(s, '}'))
                return true;
        do {
                const char *key = s->p;
                if (n_keys == CANON_KEYS_MAX || !scan_string(s))
                        return false;
                size_t len = (size_t) (s->p - key);
                for (size_t i = 0; i < n_keys; i++)
                        if (keys[i].len == len && memcmp(keys[i].text, key, len) == 0)
                                return false;
                keys[n_keys].text = key;
                keys[n_keys++].len = len;
                if (!scan_char(s, ':') || !scan_value(s, depth + 1))
                        return false;
        } while (scan_char(s, ','));
        return scan_char(s, '}');
}

static bool scan_array(struct scan *s, unsigned depth) {
        if (!scan_char(s, '['))
                return false;
        if (scan_char(s, ']'))
                return true;
        do
                if (!scan_value(s, depth + 1))
                        return false;
        while (scan_char(s, ','));
        return scan_char(s, ']');
}

static bool scan_value(struct scan *s, unsigned depth) {
        if (s->p >= s->end || depth > CANON_DEPTH_MAX)
                return false;
        switch (*s->p) {
        case '{':
                return scan_object(s, depth);
        case '[':
                return scan_array(s, depth);
        case '"':
                return scan_string(s);
        case 't':
                return scan_literal(s, "true");
        case 'f':
                return scan_literal(s, "false");
        case 'n':
                return scan_literal(s, "null");
        default:
                return scan_number(s);
        }
}

bool watch_value_is_canonical(const char *text, size_t len) {
        struct scan s = { .p = text, .end = text + len };
        if (!text || len == 0 || *text != '{')
                return false;
        return scan_object(&s, 1) && s.p == s.end;
}

/* ------------------------------------------------------------------------ */
/* The splice                                                               */
/* ------------------------------------------------------------------------ */

/* The short escapes json-c writes; 0: none (\u00XY below 0x20, else raw). */
static char short_escape(unsigned char c) {
        switch (c) {
        case '"':
                return '"';
        case '\\':
                return '\\';
        case '\b':
                return 'b';
        case '\t':
                return 't';
        case '\n':
                return 'n';
        case '\f':
                return 'f';
        case '\r':
                return 'r';
        default:
                return 0;
        }
}

/* s (NUL-terminated) as the body of a JSON string, the way json-c writes it:
 * its length, and the text at out when out is not NULL. */
static size_t escape(const char *s, char *out) {
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                char e = short_escape(*p);
                char buf[7];
                size_t k;
                if (e) {
                        buf[0] = '\\';
                        buf[1] = e;
                        k = 2;
                } else if (*p < 0x20)
                        k = (size_t) snprintf(buf, sizeof buf, "\\u%04x", *p);
                else {
                        buf[0] = (char) *p;
                        k = 1;
                }
                if (out)
                        memcpy(out + n, buf, k);
                n += k;
        }
        return n;
}

/* The fields before the key's text, and between it and the value. */
static int splice_head(const struct store_event *ev, char *buf, size_t size) {
        return snprintf(buf, size,
                        "{\"version\":%d,\"type\":\"event\",\"keyspace\":\"%s\",\"revision\":%" PRId64
                        ",\"event\":\"%s\",\"key\":\"",
                        CONTROL_PROTOCOL_VERSION, store_keyspace_to_string(ev->keyspace), (int64_t) ev->revision,
                        store_event_type_to_string(ev->type));
}

static const char splice_mid[] = "\",\"value\":";

size_t watch_splice_size(const struct store_event *ev) {
        if (ev->type != STORE_EVENT_PUT || !watch_value_is_canonical(ev->value, ev->value_size))
                return 0;
        int head = splice_head(ev, NULL, 0);
        if (head < 0)
                return 0;
        size_t n = (size_t) head + escape(ev->key, NULL) + strlen(splice_mid) + ev->value_size + 1;
        /* The tree path omits a value whose message would not fit (the same length). */
        return n > CONTROL_MESSAGE_MAX - 64 ? 0 : n;
}

void watch_splice_write(const struct store_event *ev, char *buf, size_t size) {
        char head[256];
        int k = splice_head(ev, head, sizeof head);
        assert(k > 0 && (size_t) k < sizeof head);
        char *p = mempcpy(buf, head, (size_t) k);
        p += escape(ev->key, p);
        p = mempcpy(p, splice_mid, strlen(splice_mid));
        p = mempcpy(p, ev->value, ev->value_size);
        *p++ = '}';
        assert((size_t) (p - buf) == size);
}

/* ------------------------------------------------------------------------ */
/* The tree                                                                 */
/* ------------------------------------------------------------------------ */

static struct json_object *watch_value(const struct store_event *ev) {
        struct json_object *v = NULL;
        if (control_json_parse(ev->value, ev->value_size, &v) < 0 || !v)
                v = json_object_new_string_len(ev->value, (int) ev->value_size);
        return v;
}

struct json_object *watch_message_tree(const struct store_event *ev) {
        bool marker = ev->type == STORE_EVENT_SNAPSHOT_DONE;
        _cleanup_json_ struct json_object *o = control_message_new(marker ? "snapshot-done" : "event");
        if (!o || control_add_string(o, "keyspace", store_keyspace_to_string(ev->keyspace)) < 0 ||
            control_add_int64(o, "revision", (int64_t) ev->revision) < 0)
                return NULL;
        if (marker)
                return TAKE_PTR(o);
        if (control_add_string(o, "event", store_event_type_to_string(ev->type)) < 0 ||
            control_add_string(o, "key", ev->key) < 0)
                return NULL;
        if (ev->type == STORE_EVENT_DELETE) {
                if (control_add_string(o, "cause", store_cause_to_string(ev->cause)) < 0 ||
                    control_add_int64(o, "prev_revision", (int64_t) ev->prev_revision) < 0)
                        return NULL;
                return TAKE_PTR(o);
        }
        if (json_object_object_add(o, "value", watch_value(ev)) < 0)
                return NULL;

        /* A value whose text (escaped) would not fit one message is omitted. */
        const char *text;
        size_t len;
        if (control_message_text(o, &text, &len) < 0)
                return NULL;
        if (len > CONTROL_MESSAGE_MAX - 64 &&
            (json_object_object_add(o, "value", NULL) < 0 || control_add_bool(o, "value_omitted", true) < 0))
                return NULL;
        return TAKE_PTR(o);
}
