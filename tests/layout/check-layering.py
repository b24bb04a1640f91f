#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering rule of docs/ARCHITECTURE.md, checked on the source tree.

    check-layering.py SOURCE_ROOT

- common/ includes nothing from libexit/ or supervisor/; libexit/ nothing from
  supervisor/ (and of common/ only headers);
- inside supervisor/, a folder includes only folders below it in LAYERS (and its
  own); no include circle between files;
- tendctl's folder (client/) includes only its own headers and the protocol side of control/.
Exit 1 naming every offending #include (file:line).
"""
import os
import re
import sys

# Lowest first: a folder may include the headers of the folders before it.
LAYERS = ['basic', 'lang', 'coord', 'exec', 'lifecycle', 'control', 'entrypoint', 'manager', 'client', '.']
CLIENT_MAY_INCLUDE = {'control-proto.h', 'signal-util.h', 'log.h', 'macro.h', 'time-util.h'}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root, top):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith(('.c', '.h')):
                yield os.path.join(d, f)


def main():
    root = sys.argv[1]
    where = {}  # header name -> path (relative to root)
    for top in ('common', 'libexit', 'supervisor'):
        for p in sources(root, top):
            rel = os.path.relpath(p, root)
            where.setdefault(os.path.basename(p), rel)
    bad = []
    graph = {}
    for top in ('common', 'libexit', 'supervisor'):
        for p in sources(root, top):
            rel = os.path.relpath(p, root)
            text = open(p, encoding='utf-8', errors='replace').read()
            graph[rel] = []
            for m in INCLUDE.finditer(text):
                line = text.count('\n', 0, m.start()) + 1
                target = where.get(os.path.basename(m.group(1)))
                if not target:
                    continue
                graph[rel].append(target)
                t_top = target.split('/')[0]
                why = None
                if top == 'common' and t_top != 'common':
                    why = 'common/ includes only common/'
                elif top == 'libexit' and t_top == 'supervisor':
                    why = 'libexit/ never includes supervisor/'
                elif top == 'supervisor' and t_top == 'supervisor':
                    a = rel.split('/')[1] if rel.count('/') > 1 else '.'
                    b = target.split('/')[1] if target.count('/') > 1 else '.'
                    if a == 'client' and b != 'client' and os.path.basename(target) not in CLIENT_MAY_INCLUDE:
                        why = 'tendctl links only the protocol side'
                    elif a != b and (a not in LAYERS or b not in LAYERS or LAYERS.index(b) > LAYERS.index(a)):
                        why = 'supervisor/%s may not include supervisor/%s (layers: %s)' % (a, b, ' < '.join(LAYERS))
                if why:
                    bad.append('%s:%d: #include "%s": %s' % (rel, line, m.group(1), why))
    # No include circle between files (a header including itself through others).
    state = {}

    def visit(n, stack):
        state[n] = 1
        for t in graph.get(n, []):
            if state.get(t) == 1:
                bad.append('include circle: %s' % ' -> '.join(stack[stack.index(t):] + [t]))
            elif not state.get(t):
                visit(t, stack + [t])
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n, [n])
    for b in bad:
        print(b)
    print('%d files, %d include(s) against the layering rule' % (len(graph), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
