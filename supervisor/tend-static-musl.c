/* SPDX-License-Identifier: MIT */
/*
 * tend-static's sources as one translation unit, for the musl build
 * (supervisor/meson.build): one compiler call, so that its depfile names
 * every header any of them includes. The same sources as the glibc build's
 * executable('tend-static'); keep the two lists equal.
 */
#include "main.c"
#include "entrypoint/entrypoint.c"
#include "entrypoint/cmd-run.c"
#include "basic/options.c"
#include "basic/log.c"
#include "basic/timespan.c"
#include "basic/signal-util.c"
#include "exec/proc-scan.c"
#include "../libexit/src/reason.c"
#include "../libexit/src/hub.c"
#include "../libexit/src/reaper.c"
#include "../libexit/src/spawn.c"
