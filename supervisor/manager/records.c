/* SPDX-License-Identifier: MIT */
/*
 * The manager's records (SPEC §5 fields): each unit's state record in the
 * store's service/NAME, written at each change; held while an exit is
 * handled (records_hold/release).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "control.h"
#include "libexit.h"
#include "log.h"
#include "logs.h"
#include "macro.h"
#include "manager.h"
#include "manager-internal.h"
#include "record.h"
#include "notify.h"
#include "sandbox.h"
#include "signal-util.h"
#include "singleflight.h"
#include "store.h"
#include "unit-file.h"
#include "unit.h"
#include "watchdog.h"

/* ---- the store record (SPEC §5 fields) ---- */

struct held_record {
        struct unit *u;
        struct record_fields fields;
};

static void record_store(struct manager *m, struct unit *u, const struct record_fields *f) {
        size_t len = 0;
        /* A held record had no STATUS= text (record_held): none is added at its write. */
        const char *text = record_writer_format_fields(m->records, u->name, f->has_status ? u->status_text : NULL,
                                                       f, &len);
        if (!text) {
                log_warning("%s: state record not written (%s)", u->name, strerror(ENOMEM));
                data(u)->record_written = false;
                return;
        }
        char key[STORE_KEY_MAX];
        snprintf(key, sizeof key, "service/%s", u->name);
        int k;
        if (u->record_revision == 0)
                k = store_create(m->store, STORE_DURABLE, key, text, len, 0, &u->record_revision);
        else
                k = store_update(m->store, STORE_DURABLE, key, text, len, u->record_revision, 0, &u->record_revision);
        if (k <= 0)
                log_warning("%s: state record not written (%s)", u->name, k < 0 ? strerror(-k) : "revision conflict");
        data(u)->record_written = k > 0;
        if (k > 0)
                manager_control_record_stored(m, u, f);
}

/* While an exit is handled, the records of the changes it makes are taken
 * (their fields, at the change) and written once it is handled: a restart
 * spawns first and writes the records of the stop, the back-off and the
 * start after, in that order (SPEC §5: each transition still gets its own
 * record, with its own revision). Nothing reads a record in between. */
void records_hold(struct manager *m) {
        m->records_hold++;
}

void records_flush(struct manager *m) {
        for (size_t i = 0; i < m->n_held; i++)
                record_store(m, m->held[i].u, &m->held[i].fields);
        m->n_held = 0;
}

void records_release(struct manager *m) {
        assert(m->records_hold > 0);
        if (--m->records_hold == 0)
                records_flush(m);
}

static bool record_held(struct manager *m, struct unit *u, const struct record_fields *f) {
        if (m->records_hold == 0 || f->has_status) /* a STATUS= text is the unit's current one */
                return false;
        if (m->n_held == m->n_held_max) {
                size_t n = m->n_held_max ? 2 * m->n_held_max : 8;
                struct held_record *h = reallocarray(m->held, n, sizeof *h);
                if (!h)
                        return false; /* written now instead */
                m->held = h;
                m->n_held_max = n;
        }
        m->held[m->n_held++] = (struct held_record) { u, *f };
        return true;
}

void record_write(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        struct record_fields now;
        int waiters = sf_table_get_waiters(m->flights, u->name);
        record_fields_of(u, waiters, &now);
        if (u->record_revision != 0 && d->record_written && record_fields_equal(&d->record, &now))
                return; /* the same record again: nothing for the store or its watchers */
        d->record = now;
        if (record_held(m, u, &now)) {
                d->record_written = true; /* unless its write fails (record_store) */
                return;
        }
        records_flush(m); /* the ones held before it go first */
        record_store(m, u, &now);
}
