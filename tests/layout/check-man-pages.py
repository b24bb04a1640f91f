#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the generated man pages (docs/meson.build): for each PAGE given,
`groff -man -t -ww -z PAGE` prints nothing (no warning of any kind), and
`man -l PAGE` renders it: a NAME section naming the page, a title line with
its name and section, no roff left unrendered. Exit 77 (skip) without groff
or man."""
import os
import re
import shutil
import subprocess
import sys


def check(page):
    problems = []
    g = subprocess.run(['groff', '-man', '-t', '-ww', '-z', page], capture_output=True, text=True, timeout=30)
    if g.returncode != 0 or g.stdout or g.stderr:
        problems.append('groff -man -t -ww -z: status %d, said:\n%s%s' % (g.returncode, g.stdout, g.stderr))
    env = dict(os.environ, MANPAGER='cat', MANWIDTH='80', LC_ALL='C.UTF-8')
    m = subprocess.run(['man', '-l', '-P', 'cat', page], capture_output=True, text=True, timeout=30, env=env)
    text = m.stdout
    base = os.path.basename(page)
    name, section = base.rsplit('.', 1)
    if m.returncode != 0:
        problems.append('man -l: status %d: %s' % (m.returncode, m.stderr))
    if not re.search(r'^NAME\n\s+%s\b' % re.escape(name), text, re.M):
        problems.append('man -l: no NAME section naming %s (first lines: %r)' % (name, text[:300]))
    if not re.match(r'\s*%s\(%s\)' % (re.escape(name), section), text, re.I):
        problems.append('man -l: the title line is not %s(%s): %r' % (name, section, text[:120]))
    for bad in ('\\f[', '.SH', '.TH', 'T{'):
        if bad in text:
            problems.append('man -l: unrendered roff %r in the output' % bad)
    return problems


def main():
    for tool in ('groff', 'man'):
        if not shutil.which(tool):
            print('skip: %s is not installed (apt-get install groff-base man-db)' % tool)
            return 77
    failed = 0
    for page in sys.argv[1:]:
        problems = check(page)
        for p in problems:
            print('%s: %s' % (page, p))
        failed += bool(problems)
    if not sys.argv[1:]:
        print('no pages given')
        return 1
    print('%d of %d pages clean' % (len(sys.argv) - 1 - failed, len(sys.argv) - 1))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
