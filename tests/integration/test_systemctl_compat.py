#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tendctl speaks systemctl (issue 18): the same script runs against tendctl
and against a real systemd 252 user manager that this test starts privately
(`systemd --user` in its own mount namespace, a tmpfs on /run/systemd, its
own $XDG_RUNTIME_DIR and $HOME; `systemctl --user` reaches it over
$XDG_RUNTIME_DIR/systemd/private, no D-Bus), stopped by pid. For each verb,
the exit codes for an active, an inactive, a failed and an unknown unit are
compared, and `show -p PROP --value` for each of them.

Where systemd --user cannot run (not root, no unshare, no systemd), the test
compares against DOCUMENTED below: systemctl(1)'s exit codes, each with the
sentence it comes from (and what the real manager answered here when it
could run). Where the answers differ by design (tend has no "static" unit
file state), the property is not compared and DIFFERENCES says why.

NRestarts is compared after automatic and requested restarts too
(RestartCounts): systemd counts only automatic ones, and a start that is not
one (a requested restart, a start after a stop) begins the count anew."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import TENDCTL, ServiceTestCase  # noqa: E402
from tendtest import wait_until  # noqa: E402
from sdtest import run_under_systemd, why_not_systemd  # noqa: E402


UNITS = {
    # active: runs until stopped
    'act': '[Unit]\nDescription=an active unit\n[Service]\nExecStart=/bin/sleep 1071\n',
    # inactive: started, then stopped (so systemd keeps it loaded, as tend does)
    'ina': '[Service]\nExecStart=/bin/sleep 1072\n',
    # failed: a oneshot whose command exits 7 (its start always fails: no race)
    'bad': '[Service]\nType=oneshot\nExecStart=/bin/sh -c "exit 7"\n',
}
NAMES = ['act', 'ina', 'bad', 'nosuch']
VERBS = ['status', 'is-active', 'is-failed', 'is-enabled', 'show', 'cat', 'list-dependencies', 'start', 'stop',
         'restart', 'try-restart', 'reload-or-restart', 'reload', 'reset-failed', 'kill', 'enable', 'disable']
PROPS = ['Id', 'LoadState', 'ActiveState', 'SubState', 'Result', 'ExecMainCode', 'ExecMainStatus', 'NRestarts',
         'Description']
# Compared as "set or not": the values are each manager's own.
PROPS_SET = ['MainPID', 'FragmentPath', 'ActiveEnterTimestamp']
DIFFERENCES = {
    'UnitFileState': 'a unit in tend\'s DIR is "enabled" unless disabled (a DIR/NAME.disabled marker); systemd '
                     'says "static" for one without [Install]',
}

# systemd unloads an inactive unit nobody references (garbage collection) and
# then refuses it: "Unit ina.service not loaded." (1). tend keeps every unit of
# DIR loaded, so these verbs act on it; tend's own code is asserted instead.
UNLOADED = {('reset-failed', 'ina'): 0, ('kill', 'ina'): 0}
# Likewise its properties: systemd shows the unloaded unit afresh (no exit),
# tend the SIGTERM its stop sent (ExecMainCode 2 = CLD_KILLED).
UNLOADED_PROPS = {('ina', 'ExecMainCode'): '2', ('ina', 'ExecMainStatus'): '15'}

# systemctl(1) (systemd 252), "EXIT STATUS" and the verbs' own text; the
# codes the real manager gave here (act, ina, bad, nosuch) agree.
DOCUMENTED = {
    # "status ... returns 3 (program is not running) ... 4 (no such unit)" (LSB, systemctl(1) table)
    'status': (0, 3, 3, 4),
    # is-active: "Returns an exit code 0 if at least one is active, or non-zero otherwise."
    # (3: LSB "program is not running"; an unknown unit prints "inactive")
    'is-active': (0, 3, 3, 3),
    # is-failed: "Returns an exit code 0 if at least one has failed, non-zero otherwise."
    'is-failed': (1, 1, 0, 1),
    # is-enabled: "returns 0 for enabled/static/… and non-zero for disabled, or when the unit is not found"
    'is-enabled': (0, 0, 0, 1),
    # show: a unit that does not exist is shown with LoadState=not-found, exit 0
    'show': (0, 0, 0, 0),
    # cat: "No files found for NAME." exit 1
    'cat': (0, 0, 0, 1),
    'list-dependencies': (0, 0, 0, 0),
    # start/stop/restart/…: 5 "program is not installed" (the unit does not exist);
    # 1 "unspecified failure" (the job failed)
    'start': (0, 0, 1, 5),
    'stop': (0, 0, 0, 5),
    'restart': (0, 0, 1, 5),
    'try-restart': (0, 0, 0, 5),
    'reload-or-restart': (0, 0, 1, 5),
    # reload of a unit without ExecReload=: 3 (LSB "unimplemented feature")
    'reload': (3, 3, 3, 5),
    'reset-failed': (0, 1, 0, 1),
    # kill: 0 also when no process is left (bad); 1 for a unit that is not loaded
    # (ina: systemd unloaded it, see UNLOADED; nosuch)
    'kill': (0, 1, 0, 1),
    # enable/disable (pkg): a unit file without [Install] is enabled with a warning, exit 0
    # ("The unit files have no installation config"), disabled with nothing to do, 0; a
    # unit file that does not exist: "Unit file nosuch.service does not exist.", 1
    'enable': (0, 0, 0, 1),
    'disable': (0, 0, 0, 1),
}

# The script, the same for both: $CTL is `systemctl --user` or `tendctl
# --control-socket …`. restore puts each unit back in its state after a verb.
SCRIPT = r'''
restore() {
    # again until they hold: a kill's process may still be exiting when the first start comes
    for i in $(seq 100); do
        $CTL is-active -q ina && $CTL stop ina >/dev/null 2>&1
        $CTL is-active -q act || $CTL start act >/dev/null 2>&1
        $CTL is-failed -q bad || $CTL start bad >/dev/null 2>&1
        $CTL is-failed -q bad && $CTL is-active -q act && ! $CTL is-active -q ina && return 0
        sleep 0.05
    done
    echo "restore: the units never came back to active, inactive, failed" >&2
    return 1
}
restore || exit 1
for u in act ina bad nosuch; do
    for p in PROPS; do echo "show $u $p=$($CTL show -p $p --value $u 2>/dev/null)"; done
done
for v in VERBS; do
    for u in act ina bad nosuch; do
        $CTL $v $u >/dev/null 2>&1 </dev/null
        echo "code $v $u $?"
        restore || exit 1
    done
done
'''.replace('PROPS', ' '.join(PROPS + PROPS_SET)).replace('VERBS', ' '.join(VERBS))


def parse(out):
    codes, props = {}, {}
    for line in out.splitlines():
        kind, rest = line.split(' ', 1)
        if kind == 'code':
            verb, unit, code = rest.split()
            codes[(verb, unit)] = int(code)
        elif kind == 'show':
            unit, kv = rest.split(' ', 1)
            k, v = kv.split('=', 1)
            props[(unit, k)] = v
    return codes, props


def normalise(props):
    """Values compared as set or not, and paths by their file name."""
    out = {}
    for (unit, k), v in props.items():
        if k in PROPS_SET:
            v = bool(v) and v != '0'
        out[(unit, k)] = v
    return out


def run_systemd(tmp, units=UNITS, script=SCRIPT):
    """The script against a private systemd --user; (stdout, None) or
    (None, why it could not run)."""
    if why_not_systemd():
        return None, why_not_systemd()
    home, rt = os.path.join(tmp, 'home'), os.path.join(tmp, 'rt')
    os.makedirs(os.path.join(home, '.config/systemd/user'))
    os.mkdir(rt, 0o700)
    for name, text in units.items():
        with open(os.path.join(home, '.config/systemd/user', name + '.service'), 'w') as f:
            f.write(text)
    env = dict(os.environ, HOME=home, XDG_RUNTIME_DIR=rt, TMP=tmp, CTL='systemctl --user')
    p, why = run_under_systemd(script, env, 'tend-sd-compat', 300)
    if p is None:
        return None, why
    if p.returncode != 0:
        raise AssertionError('the script failed against systemd --user (%d): %s' % (p.returncode, p.stderr))
    return p.stdout, None


# NRestarts after each step (RestartCounts): cr fails its first run (exit 3,
# Restart=on-failure), then runs; man only ever runs. MARK: a file of the run.
RESTART_UNITS = {
    'cr': '[Service]\nExecStart=/bin/sh -c \'[ -e MARK ] && exec sleep 1074; touch MARK; exit 3\'\n'
          'Restart=on-failure\nRestartSec=100ms\n',
    'man': '[Service]\nExecStart=/bin/sleep 1075\n',
}
RESTART_SCRIPT = r'''
running() {  # $1 runs its sleep, in a process other than $2
    for i in $(seq 200); do
        pid=$($CTL show -p MainPID --value $1)
        [ "$pid" != 0 ] && [ "$pid" != "$2" ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = sleep ] && return 0
        sleep 0.05
    done
    echo "$1 never ran its sleep (MainPID $pid, was $2)" >&2
    exit 1
}
n() { echo "$1 $2 $($CTL show -p NRestarts --value $2)"; }
$CTL start man; running man; n fresh man
$CTL restart man; running man; n requested man
$CTL start cr; running cr; n automatic cr
$CTL restart cr; running cr; n automatic-then-requested cr
old=$($CTL show -p MainPID --value cr)
$CTL kill -s KILL cr; running cr $old; n killed cr
$CTL daemon-reexec; running cr; n reexecuted cr
$CTL stop cr; $CTL start cr; running cr; n stopped-then-started cr
'''
# systemd 252's counts (src/core/service.c: n_restarts grows at an automatic
# restart only; a start that is not one flushes it).
RESTART_COUNTS = {('fresh', 'man'): '0', ('requested', 'man'): '0', ('automatic', 'cr'): '1',
                  ('automatic-then-requested', 'cr'): '0', ('killed', 'cr'): '1', ('reexecuted', 'cr'): '1',
                  ('stopped-then-started', 'cr'): '0'}


def restart_units(mark):
    return {n: t.replace('MARK', mark) for n, t in RESTART_UNITS.items()}


def parse_counts(out):
    return {(step, unit): n for step, unit, n in (line.split() for line in out.splitlines())}


class SystemctlCompat(ServiceTestCase):
    def run_tend_script(self):
        for name, text in UNITS.items():
            self.unit(name, text)
        self.start_tend()
        env = dict(os.environ, CTL='%s --control-socket %s' % (TENDCTL, self.sock))
        p = subprocess.run(['bash', '-c', SCRIPT], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, 'the script failed against tend: %s' % p.stderr)
        return parse(p.stdout)

    def test_same_script_same_answers(self):
        tend_codes, tend_props = self.run_tend_script()
        with tempfile.TemporaryDirectory(prefix='tend-sd-') as tmp:
            out, why = run_systemd(tmp)
        if out is None:
            # Documented codes instead (said in the test's output).
            print('compared with systemctl(1)\'s documented codes: %s' % why, file=sys.stderr)
            sd_codes = {(v, u): DOCUMENTED[v][i] for v in VERBS for i, u in enumerate(NAMES)}
            sd_props = None
        else:
            sd_codes, sd_props = parse(out)
        self.assertEqual(len(tend_codes), len(VERBS) * len(NAMES), 'the script ran every verb on every unit')
        diffs = ['%s %s: tendctl %d, systemctl %d' % (v, u, tend_codes[(v, u)], sd_codes[(v, u)])
                 for v in VERBS for u in NAMES
                 if tend_codes[(v, u)] != UNLOADED.get((v, u), sd_codes[(v, u)])]
        self.assertEqual(diffs, [], 'exit codes differ')
        # The real manager's codes are what systemctl(1) documents (kept true).
        self.assertEqual({k: c for k, c in sd_codes.items()},
                         {(v, u): DOCUMENTED[v][i] for v in VERBS for i, u in enumerate(NAMES)})
        if sd_props is None:
            self.assertEqual(tend_props[('act', 'ActiveState')], 'active')
            self.assertEqual(tend_props[('bad', 'Result')], 'exit-code')
            return
        t, s = normalise(tend_props), normalise(sd_props)
        pdiffs = ['%s %s: tendctl %r, systemctl %r' % (u, k, t[(u, k)], s[(u, k)])
                  for u in NAMES for k in PROPS + PROPS_SET if t[(u, k)] != UNLOADED_PROPS.get((u, k), s[(u, k)])]
        self.assertEqual(pdiffs, [], 'show -p … --value differs')


class RestartCounts(ServiceTestCase):
    def test_nrestarts_counts_automatic_restarts_only(self):
        for name, text in restart_units(self.path('cr.mark')).items():
            self.unit(name, text)
            # Not started by tend on its own (systemd --user does not start a
            # unit without [Install]): the script's start is the first.
            open(os.path.join(self.dir, name + '.service.disabled'), 'w').close()
        self.start_tend()
        env = dict(os.environ, CTL='%s --control-socket %s' % (TENDCTL, self.sock))
        p = subprocess.run(['bash', '-c', RESTART_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, 'the script failed against tend: %s' % p.stderr)
        with tempfile.TemporaryDirectory(prefix='tend-sd-') as tmp:
            out, why = run_systemd(tmp, restart_units(os.path.join(tmp, 'cr.mark')), RESTART_SCRIPT)
        if out is None:
            print('compared with systemd 252\'s counts: %s' % why, file=sys.stderr)
        else:
            self.assertEqual(parse_counts(out), RESTART_COUNTS, 'systemd --user counted otherwise')
        self.assertEqual(parse_counts(p.stdout), RESTART_COUNTS,
                         'NRestarts differs from systemd\'s (a requested restart counted?)')


if __name__ == '__main__':
    unittest.main()
