"""A private systemd --user manager for the tests that compare tend with
systemd or run tend under it (test_systemctl_compat.py, test_reexec.py).

The manager runs in a cgroup namespace rooted at a cgroup of the test's own,
with a pure cgroup2 mount on /sys/fs/cgroup and a tmpfs on /run/systemd in a
mount namespace of its own: it never sees the host's cgroups. Without that,
on a hybrid host (v1 controllers beside the unified tree), systemd --user as
root moved every process of the machine into cpu:/init.scope, whose
cpu.rt_runtime_us of 0 then refused every real-time policy
(test_exec_keys's CPUSchedulingPolicy=rr: EPERM). It is stopped by pid.
"""

import os
import shutil
import subprocess

from svctest import cgroup_usable
from tendtest import wait_until

SYSTEMD = '/lib/systemd/systemd'
SYSTEMCTL = shutil.which('systemctl')

# Exit 90: a mount refused, 91: systemd --user did not come up (both: skip).
_OUTER = r'''
mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 90
mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/system || exit 90
"$SYSTEMD" --user >"$TMP/systemd.log" 2>&1 &
pid=$!
for i in $(seq 200); do
    systemctl --user show -p Version >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || { echo "systemd --user exited: $(cat "$TMP/systemd.log")" >&2; exit 91; }
    sleep 0.05
done
systemctl --user show -p Version >/dev/null 2>&1 || { echo "systemd --user never answered" >&2; kill $pid; exit 91; }
( SCRIPT )
rc=$?
kill $pid
for i in $(seq 200); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
kill -KILL $pid 2>/dev/null
wait $pid
exit $rc
'''


def why_not_systemd():
    """None when a private systemd --user can be tried here, else why not."""
    if os.geteuid() != 0:
        return 'not root: cannot mount a tmpfs on /run/systemd'
    for exe in (SYSTEMD, SYSTEMCTL, shutil.which('unshare')):
        if not exe or not os.access(exe, os.X_OK):
            return 'missing %s' % exe
    return None


def run_under_systemd(script, env, name, timeout):
    """Runs the bash script while a private systemd --user answers (env must
    give HOME, XDG_RUNTIME_DIR and TMP, a scratch directory for its log);
    (CompletedProcess, None), or (None, why) when systemd cannot run here."""
    why = why_not_systemd()
    if why:
        return None, why
    parent, why = cgroup_usable()
    if not parent:
        return None, 'no cgroup of its own for systemd --user: %s' % why
    cg = os.path.join(parent, '%s.%d' % (name, os.getpid()))
    os.mkdir(cg)
    env = dict(env, SYSTEMD=SYSTEMD)
    env.pop('DBUS_SESSION_BUS_ADDRESS', None)
    try:
        p = subprocess.run(['unshare', '-C', '-m', '--propagation', 'private', 'bash', '-c',
                            _OUTER.replace('SCRIPT', script)],
                           env=env, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=lambda: _enter_cgroup(cg))
    finally:
        _remove_cgroup(cg)
    if p.returncode in (90, 91):
        return None, 'systemd --user could not run here: %s' % p.stderr.strip()
    return p, None


def _enter_cgroup(cg):
    with open(os.path.join(cg, 'cgroup.procs'), 'w') as f:
        f.write(str(os.getpid()))


def _remove_cgroup(cg):
    """Kills what is left in cg (the test's own cgroup) and removes it,
    children first; bounded."""
    if os.path.exists(os.path.join(cg, 'cgroup.kill')):
        with open(os.path.join(cg, 'cgroup.kill'), 'w') as f:
            f.write('1')
    for root, dirs, _ in sorted(os.walk(cg), key=lambda t: -t[0].count('/')):
        wait_until(lambda: _try_rmdir(root), 10, 'cannot remove %s: processes left in it' % root)


def _try_rmdir(d):
    try:
        os.rmdir(d)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
