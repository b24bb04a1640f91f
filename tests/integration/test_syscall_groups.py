#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tend's system-call groups (supervisor/lang/sandbox-syscalls.c) are systemd's:
each group of `systemd-analyze syscall-filter` on this machine (systemd 252 on
Debian 12) has exactly the members tend's group has, nested groups included
by name. Skips (77) without systemd-analyze."""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
SOURCE = os.path.join(ROOT, 'supervisor', 'lang', 'sandbox-syscalls.c')


def tend_groups():
    with open(SOURCE) as f:
        src = f.read()
    table = dict(re.findall(r'\{ "(@[a-z-]+)", (group_\w+) \}', src))
    arrays = {m.group(1): set(re.findall(r'"([^"]+)"', m.group(2)))
              for m in re.finditer(r'static const char \*const (group_\w+)\[\] = \{(.*?)\};', src, re.S)}
    return {name: arrays[array] for name, array in table.items()}


def systemd_groups(out):
    groups, cur = {}, None
    for line in out.splitlines():
        if line.startswith('@'):
            cur = groups.setdefault(line.strip(), set())
        elif cur is not None and line.strip() and not line.strip().startswith('#'):
            cur.add(line.strip())
    groups.pop('@known', None)  # every call systemd knows: not a group of systemd.exec(5)
    return groups


def main():
    tool = shutil.which('systemd-analyze')
    if not tool:
        print('skip: no systemd-analyze')
        return 77
    r = subprocess.run([tool, 'syscall-filter', '--no-pager'], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        print('skip: systemd-analyze syscall-filter failed: %s' % r.stderr.strip())
        return 77
    theirs, ours = systemd_groups(r.stdout), tend_groups()
    if len(theirs) < 20:
        print('systemd-analyze printed %d groups: its output format changed?' % len(theirs))
        return 1
    bad = 0
    for name in sorted(theirs):
        if name not in ours:
            print('%s: systemd has it, tend does not' % name)
            bad += 1
            continue
        for what, diff in (('lacks', theirs[name] - ours[name]), ('has more', ours[name] - theirs[name])):
            if diff:
                print('%s: tend %s: %s' % (name, what, ' '.join(sorted(diff))))
                bad += 1
    for name in sorted(set(ours) - set(theirs)):
        print('%s: tend has it, systemd does not' % name)
        bad += 1
    print('%d groups compared, %d differences' % (len(theirs), bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
