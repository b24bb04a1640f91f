/* SPDX-License-Identifier: MIT */
/*
 * The manager's records (SPEC §5 fields): each unit's state record in the
 * store's service/NAME, written at each change; held while an exit is
 * handled (records_hold/release).
 */
#include <errno.h>
#include <stdio.h>

#include "held-records.h"
#include "log.h"
#include "manager-internal.h"
#include "record.h"
#include "singleflight.h"
#include "store.h"
#include "unit-file.h"
#include "unit.h"

/* ---- the store record (SPEC §5 fields) ---- */

/* held_records_store_t */
static void record_store(void *userdata, struct unit *u, const struct record_fields *f) {
        struct manager *m = userdata;
        size_t len = 0;
        /* A held record had no STATUS= text (held_records_write): none is added at its write. */
        record_writer_set_condition(m->records, f->has_condition ? u->condition_text : NULL); /* cond */
        const char *text = record_writer_format_fields(m->records, u->name, f->has_status ? u->status_text : NULL,
                                                       f->has_file_error ? unit_rare_peek(u)->file_error : NULL, f, &len);
        if (!text) {
                log_warning_errno(ENOMEM, "%s: state record not written (%m)", u->name);
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
        if (k < 0)
                log_warning_errno(k, "%s: state record not written (%m)", u->name);
        else if (k == 0)
                log_warning("%s: state record not written (revision conflict)", u->name);
        data(u)->record_written = k > 0;
        if (k > 0)
                manager_control_record_stored(m, u, f);
}

/* While an exit is handled, the records of the changes it makes are held
 * and written once it is handled (held-records.h): a restart spawns first
 * and writes the records of the stop, the back-off and the start after, in
 * that order (SPEC §5: each transition still gets its own record, with its
 * own revision). Nothing reads a record in between. */
void records_hold(struct manager *m) {
        held_records_hold(&m->held);
}

void records_flush(struct manager *m) {
        held_records_flush(&m->held, record_store, m);
}

void records_release(struct manager *m) {
        held_records_release(&m->held, record_store, m);
}

/* Whether a process of u runs that started from another text of u's file
 * than the one it has now (or waits to take): `tendctl restart` applies it. */
bool manager_file_changed(struct unit *u) {
        const struct unit_data *d = data(u);
        const struct unit_file *f = u->next_file ? u->next_file : u->file;
        return !unit_is_dead(u) && (f->text_size != d->started_text_size || f->text_hash != d->started_text_hash);
}

void record_write(struct manager *m, struct unit *u) {
        struct unit_data *d = data(u);
        struct record_fields now;
        int waiters = sf_table_get_waiters(m->flights, u->name);
        record_fields_of(u, waiters, &now);
        now.file_changed = manager_file_changed(u);
        now.has_file_error = unit_rare_peek(u) && unit_rare_peek(u)->file_error;
        if (u->record_revision != 0 && d->record_written && record_fields_equal(&d->record, &now))
                return; /* the same record again: nothing for the store or its watchers */
        d->record = now;
        /* Held: written (unless its write fails, record_store) once the exit is handled. */
        if (held_records_write(&m->held, u, &now, record_store, m))
                d->record_written = true;
}
