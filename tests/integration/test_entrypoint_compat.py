#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every option and environment variable of tini 0.19 and dumb-init 1.2.5 in
`tend -- CMD` (issue 18; docs/tend.8.md, COMING FROM TINI OR DUMB-INIT): each
works with the peer's meaning, shown by a real CMD that observes it
(tests/helpers/child-probe: the signals it got, its process group; sh: its
parent), or is refused with a message naming tend's equivalent.

TABLE lists them all; test_table_covers_the_peers_help reads `tini -h` and
`dumb-init --help` (when installed) so that a flag they document and this
table misses fails the test."""
import os
import re
import shutil
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import PROBE, TEND, TendTestCase, children_of, proc_stat, wait_until  # noqa: E402

# (peer, flag or variable) → the test method that shows it in tend.
TABLE = {
    ('tini', '-h'): 'test_help',
    ('tini', '--version'): 'test_version',
    ('tini', '-l'): 'test_license',
    ('tini', '-s'): 'test_subreaper',
    ('tini', '-p'): 'test_parent_death_signal',
    ('tini', '-v'): 'test_verbosity_flags',
    ('tini', '-w'): 'test_warn_on_reap',
    ('tini', '-g'): 'test_process_group',
    ('tini', '-e'): 'test_exit_code_remap',
    ('tini', 'TINI_SUBREAPER'): 'test_subreaper',
    ('tini', 'TINI_VERBOSITY'): 'test_tini_verbosity',
    ('tini', 'TINI_KILL_PROCESS_GROUP'): 'test_process_group',
    ('dumb-init', '-c'): 'test_single_child',
    ('dumb-init', '--single-child'): 'test_single_child',
    ('dumb-init', '-r'): 'test_rewrite',
    ('dumb-init', '--rewrite'): 'test_rewrite',
    ('dumb-init', '-v'): 'test_verbosity_flags',
    ('dumb-init', '--verbose'): 'test_verbosity_flags',
    ('dumb-init', '-h'): 'test_help',
    ('dumb-init', '--help'): 'test_help',
    ('dumb-init', '-V'): 'test_version',
    ('dumb-init', '--version'): 'test_version',
    ('dumb-init', 'DUMB_INIT_SETSID'): 'test_dumb_init_setsid',
}



def peer_env(**extra):
    """The environment without any peer variable, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(('TINI_', 'DUMB_INIT_'))}
    env.update(extra)
    return env


class Compat(TendTestCase):
    def tend_env(self, env, *args):
        return self.tend(*args, env=peer_env(**env))

    def finish(self, p, timeout=10):
        p.popen.stdin.close()
        p.popen.stdin = None
        out = p.read_until_eof(timeout, 'tend %s did not finish its output' % ' '.join(p.argv[1:]))
        return p.wait(timeout, 'tend %s did not exit' % ' '.join(p.argv[1:])), out, p.stderr_text()

    def run_env(self, env, *args):
        return self.finish(self.tend_env(env, *args))

    def refused(self, env, args, names):
        status, out, err = self.run_env(env, *args)
        self.assertEqual(status, 2, 'tend %s was not refused (stderr %r)' % (' '.join(args), err))
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(names, err)
        return err

    # ---- the table itself ----

    def test_table_methods_exist(self):
        for key, method in TABLE.items():
            self.assertTrue(hasattr(self, method), '%s: no %s' % (key, method))

    def test_table_covers_the_peers_help(self):
        """Every flag and variable tini -h and dumb-init --help list is in TABLE."""
        found = 0
        for peer, argv in (('tini', ['tini', '-h']), ('dumb-init', ['dumb-init', '--help'])):
            if not shutil.which(peer):
                continue
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            text = r.stdout + r.stderr
            names = set(re.findall(r'^\s+(-[-\w]+)', text, re.M)) | set(re.findall(r'(?<![-\w])(-[a-zA-Z])[,:]', text))
            names |= set(re.findall(r'(?:, |\s)(--[a-z][-a-z]+)', text))
            names |= set(re.findall(r'^\s+([A-Z][A-Z_]+):', text, re.M))
            if peer == 'dumb-init':
                names.add('DUMB_INIT_SETSID')  # in its README, not its --help
            for name in names:
                found += 1
                self.assertIn((peer, name), TABLE, '%s documents %s; tend\'s table lacks it' % (peer, name))
        if not found:
            self.skipTest('neither tini nor dumb-init is installed')

    # ---- informational ----

    def test_help(self):
        for opt in ('-h', '--help'):
            status, out, _ = self.run_env({}, opt, '--', PROBE, 'exit', '9')
            self.assertEqual(status, 0, opt)
            self.assertIn('-e CODE', out, opt)

    def test_version(self):
        for opt in ('-V', '--version'):
            status, out, _ = self.run_env({}, opt)
            self.assertEqual(status, 0, opt)
            self.assertRegex(out, r'^tend \d', opt)

    def test_license(self):
        status, out, _ = self.run_env({}, '-l')
        self.assertEqual(status, 0)
        self.assertIn('MIT', out)

    # ---- verbosity ----

    def test_verbosity_flags(self):
        quiet = self.run_env({}, '--', PROBE, 'exit', '3')
        self.assertEqual(quiet, (3, '', ''))
        for flag in ('-v', '--verbose'):
            status, _, err = self.run_env({}, flag, '--', PROBE, 'exit', '3')
            self.assertEqual(status, 3)
            self.assertIn('exited with code 3', err, flag)
            self.assertNotIn('debug', err, flag)
        for flag in ('-vv', '-vvv'):
            status, _, err = self.run_env({}, flag, '--', PROBE, 'exit', '3')
            self.assertEqual(status, 3)
            self.assertIn('started %s as pid' % PROBE, err, flag)

    def test_tini_verbosity(self):
        self.assertEqual(self.run_env({'TINI_VERBOSITY': '0'}, '--', PROBE, 'exit', '3'), (3, '', ''))
        status, _, err = self.run_env({'TINI_VERBOSITY': '2'}, '--', PROBE, 'exit', '3')
        self.assertIn('exited with code 3', err)
        self.assertNotIn('started %s as pid' % PROBE, err)
        status, _, err = self.run_env({'TINI_VERBOSITY': '3'}, '--', PROBE, 'exit', '3')
        self.assertIn('started %s as pid' % PROBE, err)
        # As tini 0.19 (and tend(8): "3 or more: debug"), any larger number is the
        # most verbose level, and the refusal says so (qa18 finding 7).
        for n in ('5', '99999999999999999999'):
            status, _, err = self.run_env({'TINI_VERBOSITY': n}, '--', PROBE, 'exit', '3')
            self.assertEqual(status, 3, err)
            self.assertIn('started %s as pid' % PROBE, err, n)
        err = self.refused({'TINI_VERBOSITY': 'loud'}, ['--', PROBE, 'exit', '0'], 'TINI_VERBOSITY')
        self.assertIn('3 or more', err, 'the message names a range the parser does not keep')

    # ---- exit status ----

    def test_exit_code_remap(self):
        self.assertEqual(self.run_env({}, '-e', '3', '--', PROBE, 'exit', '3')[0], 0)
        self.assertEqual(self.run_env({}, '-e', '3', '--', PROBE, 'exit', '4')[0], 4)
        self.assertEqual(self.run_env({}, '-e', '3', '-e', '4', '--', PROBE, 'exit', '4')[0], 0)
        # tini maps the shell status, so -e 143 covers a death by SIGTERM.
        p = self.tend_env({}, '-e', '143', '--', PROBE, 'pause')
        p.readline(5, 'child-probe pause never said ready')
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(5, 'SIGTERM to tend -e 143 did not end it'), 0)
        for bad in ('256', '-1', 'x'):
            self.refused({}, ['-e', bad, '--', PROBE, 'exit', '0'], '-e wants an exit code')

    # ---- reaping ----

    def test_subreaper(self):
        """Orphans of CMD's tree are re-parented to tend, which reaps them (its
        debug lines say so; without a subreaper they would go to this test)."""
        for env, args in (({}, ['-s']), ({'TINI_SUBREAPER': '1'}, []), ({}, [])):
            with self.subTest(env=env, args=args):
                p = self.tend_env(env, *args, '-vv', '--', PROBE, 'orphans', '3', '0')
                self.assertEqual(p.readline(5, 'child-probe orphans did not finish forking'), 'spawned 3')
                wait_until(lambda: p.stderr_text().count('reaped orphan') >= 3, 5,
                           lambda: 'tend did not reap the 3 orphans (not a subreaper?); stderr %r' % p.stderr_text())
                p.write(b'\n')
                self.assertEqual(p.wait(5, 'tend did not exit with its child'), 0)

    def test_warn_on_reap(self):
        script = 'sh -c "exit 0"; exit 0'  # the sh's own child, reaped by the sh: no orphan
        orphan = '( sh -c "sleep 0.2" & ); sleep 0.6'  # an orphan tend reaps
        status, _, err = self.run_env({}, '-w', '--', 'sh', '-c', orphan)
        self.assertEqual(status, 0)
        self.assertRegex(err, r'warning: reaped zombie process with pid \d+')
        self.assertEqual(self.run_env({}, '--', 'sh', '-c', orphan), (0, '', ''))
        self.assertEqual(self.run_env({}, '-w', '--', 'sh', '-c', script), (0, '', ''))

    # ---- signals ----

    def two_recorders(self, env, *args):
        """tend ARGS -- sh running a recorder in the background and exec'ing
        another (its direct child); USR1 to tend. Returns the set of pids
        that recorded USR1, the direct child's pid and the background one's."""
        self.n_rec = getattr(self, 'n_rec', 0) + 1
        out = self.path('rec%d' % self.n_rec)
        script = '"$0" record "$1" 0 0 0 & exec "$0" record "$1" USR1 3 0'
        p = self.tend_env(env, *args, '--stop-timeout', '200ms', '--', 'sh', '-c', script, PROBE, out)
        pids = {int(p.readline(5, 'a recorder did not start').split()[1]) for _ in range(2)}
        direct = wait_until(lambda: children_of(p.pid), 5, 'tend has no child')[0]
        os.kill(p.pid, signal.SIGUSR1)
        self.assertEqual(p.wait(5, 'USR1 did not reach the direct child (it exits 3 on USR1)'), 3)
        got = {int(ln.split()[1]) for ln in self.records(out) if ln.endswith(' USR1')}
        (background,) = pids - {direct}
        return got, direct, background

    def test_process_group(self):
        for env, args in (({}, ['-g']), ({'TINI_KILL_PROCESS_GROUP': '1'}, [])):
            with self.subTest(env=env, args=args):
                got, direct, background = self.two_recorders(env, *args)
                self.assertEqual(got, {direct, background}, 'USR1 did not reach CMD\'s whole group')

    def test_single_child(self):
        for env, args in (({}, ['-c']), ({}, ['--single-child']), ({}, []),
                          ({'TINI_KILL_PROCESS_GROUP': '1'}, ['-c'])):
            with self.subTest(env=env, args=args):
                got, direct, _ = self.two_recorders(env, *args)
                self.assertEqual(got, {direct}, 'USR1 reached more than CMD')
        self.refused({}, ['-c', '-g', '--', PROBE, 'exit', '0'], '-c')

    def test_rewrite(self):
        for opt in ('-r', '--rewrite', '--remap'):
            with self.subTest(opt=opt):
                out = self.path('rec-' + opt)
                p = self.tend_env({}, opt, '15:3', opt, 'USR1:0', '--', PROBE, 'record', out, 'QUIT', '4', '0')
                child = int(p.readline(5, 'child-probe record never said ready').split()[1])
                os.kill(p.pid, signal.SIGUSR1)  # dropped
                # USR2 passes; sent after USR1 and of a higher number, it
                # arrives after USR1 would have (signals are taken lowest first).
                os.kill(p.pid, signal.SIGUSR2)
                wait_until(lambda: self.records(out), 5, 'SIGUSR2 never reached the child')
                os.kill(p.pid, signal.SIGTERM)  # arrives as QUIT: the child exits 4
                self.assertEqual(p.wait(5, '%s 15:3 did not deliver SIGQUIT' % opt), 4)
                self.assertEqual(self.records(out), ['sig %d USR2' % child, 'sig %d QUIT' % child, 'exit %d 4' % child])
        self.refused({}, ['-r', '15', '--', PROBE, 'exit', '0'], '-r/--rewrite wants FROM:TO')

    def test_parent_death_signal(self):
        """tend -p USR1 under a sh that then exits: tend gets USR1 and forwards it."""
        for i, (args, expect) in enumerate(((['-p', 'SIGUSR1'], True), (['-p', 'USR1'], True), ([], False))):
            with self.subTest(args=args):
                out = self.path('pdeath%d' % i)
                sh = self.start(['sh', '-c', '"$0" %s -- "$1" record "$2" USR1 6 0 & read x' % ' '.join(args),
                                 TEND, PROBE, out], env=peer_env())
                child = int(sh.readline(5, 'child-probe record under tend under sh never said ready').split()[1])
                tend = proc_stat(child)[1]
                sh.write(b'\n')  # sh exits: tend's parent dies
                sh.wait(5, 'sh did not exit')
                if not expect:
                    # The parent-death signal is queued by the parent's exit, before
                    # sh.wait returns; USR2 (12) sent now is taken after a pending USR1 (10).
                    os.kill(tend, signal.SIGUSR2)
                got = wait_until(lambda: self.records(out), 5,
                                 'tend %s: nothing reached the child after its parent died' % ' '.join(args))
                self.assertEqual(got[0], 'sig %d %s' % (child, 'USR1' if expect else 'USR2'))
                os.kill(tend, signal.SIGKILL)
        self.refused({}, ['-p', 'NOPE', '--', PROBE, 'exit', '0'], '-p: unknown signal')

    # ---- process groups ----

    def test_dumb_init_setsid(self):
        for value, same in (('0', True), ('1', False), (None, False)):
            with self.subTest(DUMB_INIT_SETSID=value):
                env = {} if value is None else {'DUMB_INIT_SETSID': value}
                p = self.tend_env(env, '--', PROBE, 'pause')
                child = int(p.readline(5, 'child-probe pause never said ready').split()[1])
                child_pgrp, tend_pgrp = proc_stat(child)[2], proc_stat(p.pid)[2]
                if same:
                    self.assertEqual(child_pgrp, tend_pgrp, 'DUMB_INIT_SETSID=0: CMD not in tend\'s group')
                else:
                    self.assertEqual(child_pgrp, child, 'CMD is not in a process group of its own')
                os.kill(p.pid, signal.SIGTERM)
                self.assertEqual(p.wait(5, 'SIGTERM did not reach CMD'), 143)
        self.refused({'DUMB_INIT_SETSID': '0'}, ['-g', '--', PROBE, 'exit', '0'], 'DUMB_INIT_SETSID=0')

    # ---- modes ----

    def test_without_double_dash_as_dumb_init(self):
        self.assertEqual(self.run_env({}, PROBE, 'exit', '3')[0], 3)

    def test_entrypoint_options_refused_with_config_dir(self):
        for args in (['-e', '3'], ['-w'], ['-c'], ['-p', 'KILL']):
            with self.subTest(args=args):
                self.refused({}, args + ['--config-dir', self.path('none')], 'entrypoint-mode options')


if __name__ == '__main__':
    unittest.main(verbosity=2)
