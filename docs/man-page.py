#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turns one markdown page of docs/ into a man page (roff) with pandoc.

  man-page.py PANDOC INPUT.md OUTPUT NAME SECTION VERSION

The page's first heading ("# tend(8)") becomes the title line (.TH, from NAME
and SECTION); its "## NAME", "## SYNOPSIS" … become the sections (.SH).
Then three touches so `groff -man -t -ww -z` stays silent: no adjusting
(.na: the tables' narrow columns cannot be justified), a glyph the
PostScript device lacks (●) spelled as a bullet, and break points after '/'
and '_' in table cells, where paths and names are longer than a column.
"""
import re
import subprocess
import sys


def fix(roff):
    roff = re.sub(r'^(\.TH .*)$', r'\1\n.na', roff, count=1, flags=re.M)
    roff = roff.replace('\\[u25CF]', '\\(bu')
    out, in_cell = [], False
    for line in roff.split('\n'):
        if line.startswith('T}') or line.endswith('T{'):
            in_cell = line.endswith('T{')  # "T}@T{" ends a cell and opens the next
        elif in_cell and not line.startswith('.'):
            line = re.sub(r'([/_])(?=[^\s\\])', r'\1\\:', line)
        if line == '.TS':
            # A table never starts in the last lines of a page: tbl warns "table text block
            # will not fit on one page" when a row's text block is cut by the page's end.
            out.append('.ne 12v')
        out.append(line)
    return '\n'.join(out)


def main():
    pandoc, src, dst, name, section, version = sys.argv[1:7]
    roff = subprocess.run([pandoc, '--standalone', '--from', 'markdown', '--to', 'man', '--columns=10000',
                           '--shift-heading-level-by=-1',
                           '--metadata', 'title=' + name, '--metadata', 'section=' + section,
                           '--metadata', 'header=tend manual', '--metadata', 'footer=tend ' + version,
                           src], check=True, capture_output=True, text=True).stdout
    with open(dst, 'w') as f:
        f.write(fix(roff))


if __name__ == '__main__':
    main()
