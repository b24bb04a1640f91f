#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend-static, the self-contained entrypoint (issue 18; docs/tend.8.md,
CONTAINERS), as PID 1 of a new PID namespace whose root directory holds
nothing but /tend (tend-static) and /probe (child-probe linked statically):
no libc, no loader, no /proc, no /dev. The entrypoint suite's core cases run
there: exit status passthrough, signal forwarding, exit status on a signal,
orphan reaping, a missing command. A control case shows the root really is
empty: the dynamically linked tend cannot start in it.

`unshare --pid --fork --root=ROOT --kill-child /tend -- /probe …`; tend is
found from outside as unshare's child and signalled by that pid. Skips (77)
without PID namespaces."""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tendtest import TEND, TendTestCase, children_of, wait_until, zombies_of  # noqa: E402

TEND_STATIC = os.environ.get('TEND_STATIC', '')
PROBE_STATIC = os.environ.get('TEND_CHILD_PROBE_STATIC', '')
DOCKERFILE = os.environ.get('DOCKERFILE', '')
PT_INTERP = 3


def elf_interpreter(path):
    """Whether the ELF file at path names a program interpreter (PT_INTERP):
    a dynamically linked program, which needs ld.so and libraries to start."""
    with open(path, 'rb') as f:
        head = f.read(64)
        if head[:4] != b'\x7fELF' or head[4] != 2:
            raise AssertionError('%s is not a 64-bit ELF file' % path)
        phoff, = struct.unpack_from('<Q', head, 0x20)
        phentsize, phnum = struct.unpack_from('<HH', head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return any(struct.unpack_from('<I', table, i * phentsize)[0] == PT_INTERP for i in range(phnum))


def can_unshare(root):
    try:
        r = subprocess.run(['unshare', '--pid', '--fork', '--kill-child', '--root=' + root, '/probe', 'exit', '0'],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=10)
    except FileNotFoundError:
        return 'unshare(1) is not installed'
    if r.returncode != 0:
        return 'cannot create a PID namespace with a root of its own here (%s)' % r.stderr.decode().strip()
    return None


class EmptyRoot(TendTestCase):
    def setUp(self):
        super().setUp()
        self.root = self.path('root')
        os.mkdir(self.root)
        shutil.copy(TEND_STATIC, os.path.join(self.root, 'tend'))
        shutil.copy(PROBE_STATIC, os.path.join(self.root, 'probe'))
        self.assertEqual(sorted(os.listdir(self.root)), ['probe', 'tend'])
        why = can_unshare(self.root)
        if why:
            self.skipTest(why)

    def start_pid1(self, *args, tend='/tend'):
        """Starts unshare … --root=ROOT /tend ARGS; returns (unshare's Proc, tend's pid outside)."""
        p = self.start(['unshare', '--pid', '--fork', '--kill-child', '--root=' + self.root, tend] + list(args))
        target = os.path.realpath(os.path.join(self.root, tend.lstrip('/')))

        def tend_pid():
            for c in children_of(p.pid):
                try:
                    if os.readlink('/proc/%d/exe' % c) == target:
                        return c
                except FileNotFoundError:
                    pass
            return None
        return p, wait_until(tend_pid, 5, 'unshare did not start %s in the empty root; stderr %r'
                             % (tend, p.stderr_text()))

    def run_pid1(self, *args):
        """Runs unshare … --root=ROOT /tend ARGS to its end; returns (status, stderr)."""
        r = subprocess.run(['unshare', '--pid', '--fork', '--kill-child', '--root=' + self.root, '/tend'] + list(args),
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        return r.returncode, r.stderr.decode()

    def test_binaries_are_static(self):
        self.assertFalse(elf_interpreter(TEND_STATIC), '%s needs a program interpreter (not static)' % TEND_STATIC)
        self.assertFalse(elf_interpreter(PROBE_STATIC), '%s is not static' % PROBE_STATIC)

    def test_dynamic_tend_cannot_start_there(self):
        """The control: the root holds no loader and no library."""
        shutil.copy(TEND, os.path.join(self.root, 'tend-dynamic'))
        self.assertTrue(elf_interpreter(TEND), 'the dynamic tend has no interpreter: the control shows nothing')
        r = subprocess.run(['unshare', '--pid', '--fork', '--kill-child', '--root=' + self.root, '/tend-dynamic',
                            '--', '/probe', 'exit', '0'], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        self.assertNotEqual(r.returncode, 0, 'the dynamic tend ran in a root without libraries: the root is not empty')

    def test_exit_status_passthrough(self):
        for code in (0, 3, 255):
            with self.subTest(code=code):
                status, err = self.run_pid1('--', '/probe', 'exit', str(code))
                self.assertEqual(status, code, err)

    def test_missing_command_127(self):
        status, err = self.run_pid1('--', '/no-such-program')
        self.assertEqual(status, 127, err)
        self.assertIn('/no-such-program', err)

    def test_signals_forwarded(self):
        p, tend = self.start_pid1('--', '/probe', 'record', '-', 'TERM', '7', '0')
        child_ns = int(p.readline(5, 'child-probe record never said ready in the empty root').split()[1])
        # The real-time ones as glibc numbers them (34 and 64): musl, which
        # tend-static may be linked against, keeps 34 for itself (issue 18).
        for name in ('HUP', 'USR1', 'RTMIN', 'RTMAX', 'INT', 'WINCH', 'TERM'):
            os.kill(tend, getattr(signal, 'SIG' + name))
            said = {'RTMIN': 'RTMIN+0', 'RTMAX': 'RTMIN+%d' % (signal.SIGRTMAX - signal.SIGRTMIN)}.get(name, name)
            self.assertEqual(p.readline(5, 'SIG%s sent to tend-static (PID 1) never reached the child' % name),
                             'sig %d %s' % (child_ns, said))
        self.assertEqual(p.wait(5, 'tend-static (PID 1) did not exit with its child'), 7)

    def test_exit_status_on_signal(self):
        p, tend = self.start_pid1('--', '/probe', 'pause')
        p.readline(5, 'child-probe pause never said ready')
        os.kill(tend, signal.SIGTERM)
        self.assertEqual(p.wait(5, 'SIGTERM to tend-static did not reach its child'), 143)
        p, tend = self.start_pid1('--', '/probe', 'pause')
        p.readline(5, 'child-probe pause never said ready')
        child = wait_until(lambda: children_of(tend), 5, 'tend-static has no child')[0]
        os.kill(child, signal.SIGKILL)
        self.assertEqual(p.wait(5, 'tend-static did not exit after its child died of SIGKILL'), 137)

    def test_orphans_reaped(self):
        p, tend = self.start_pid1('-vv', '--', '/probe', 'orphans', '50', '4')
        self.assertEqual(p.readline(10, 'child-probe orphans did not finish forking'), 'spawned 50')
        wait_until(lambda: p.stderr_text().count('reaped orphan') >= 50, 10,
                   lambda: 'tend-static (PID 1) did not reap 50 orphans: %d reaped, zombies under it %r'
                   % (p.stderr_text().count('reaped orphan'), zombies_of(tend)))
        self.assertEqual(zombies_of(tend), [], 'zombies left under tend-static')
        p.write(b'\n')
        self.assertEqual(p.wait(5, 'tend-static (PID 1) did not exit'), 4)

    def test_tini_exit_remap_there(self):
        self.assertEqual(self.run_pid1('-e', '3', '--', '/probe', 'exit', '3'), (0, ''))
        self.assertEqual(self.run_pid1('-e', '3', '--', '/probe', 'exit', '4')[0], 4)

    def test_service_options_refused_naming_tend(self):
        status, err = self.run_pid1('--config-dir', '/')
        self.assertEqual(status, 2, err)
        self.assertIn('use tend', err)


def final_stage(path):
    """The last stage of a Dockerfile: (base, [(src, dst) of COPY --from=build], entrypoint, cmd)."""
    with open(path) as f:
        text = f.read().replace('\\\n', ' ')
    base, copies, entry, cmd = None, [], None, None
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith('#'):
            continue
        if words[0] == 'FROM':
            base, copies, entry, cmd = words[1], [], None, None
        elif words[0] == 'COPY' and words[1] == '--from=build':
            copies.append((words[2], words[3]))
        elif words[0] == 'ENTRYPOINT':
            entry = json.loads(line.split(None, 1)[1])
        elif words[0] == 'CMD':
            cmd = json.loads(line.split(None, 1)[1])
    return base, copies, entry, cmd


class DockerfileImage(TendTestCase):
    """examples/Dockerfile without docker: its final stage's root built from
    its COPY lines (the build stage's /build is this meson build), its
    ENTRYPOINT and CMD run there as PID 1."""

    def test_image_runs(self):
        if not os.path.isfile(DOCKERFILE):
            self.skipTest('DOCKERFILE=%r is not a file: run through meson test' % DOCKERFILE)
        base, copies, entry, cmd = final_stage(DOCKERFILE)
        self.assertEqual(base, 'scratch', 'the image is meant to hold nothing but what it copies')
        build = os.path.dirname(os.path.dirname(os.path.abspath(TEND_STATIC)))  # …/supervisor/tend-static
        root = self.path('image')
        for src, dst in copies:
            self.assertTrue(src.startswith('/build/'), src)
            here = os.path.join(build, src[len('/build/'):])
            self.assertTrue(os.path.isfile(here), 'the Dockerfile copies %s, which a build does not make (%s)'
                            % (src, here))
            self.assertFalse(elf_interpreter(here), '%s is not static: it cannot run in a scratch image' % src)
            os.makedirs(os.path.dirname(root + dst), exist_ok=True)
            shutil.copy(here, root + dst)
        p = self.start(['unshare', '--pid', '--fork', '--kill-child', '--root=' + root] + entry + cmd)
        self.assertEqual(p.readline(5, 'the image\'s CMD did not start under its ENTRYPOINT'),
                         'hello: pid 2, parent 1; waiting for SIGTERM')
        tend = wait_until(lambda: children_of(p.pid), 5, 'unshare has no child')[0]
        os.kill(tend, signal.SIGTERM)  # docker stop
        self.assertEqual(p.readline(5, 'SIGTERM to tend did not reach the CMD'), 'hello: got SIGTERM, exiting 0')
        self.assertEqual(p.wait(5, 'tend did not exit after its CMD'), 0)


if __name__ == '__main__':
    if not (TEND_STATIC and PROBE_STATIC):
        print('skip: TEND_STATIC / TEND_CHILD_PROBE_STATIC not set (built without -Dstatic_entrypoint)')
        sys.exit(77)
    unittest.main(verbosity=2)
