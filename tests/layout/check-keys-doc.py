#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/tend.service.5.md's KEYS INDEX is what the parser's key tables say
(issue 16: the page "lists every key with its status"): fails, naming each
key, when one of supervisor/lang/unit-file-keys.c, unit-file-known.c or the
hardening list is missing from the index, has another status there, is in the
index but in no table, or is documented nowhere else on the page.
Usage: check-keys-doc.py SOURCE_ROOT (scripts/unit-keys --check does the work)."""
import os
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
r = subprocess.run([sys.executable, os.path.join(root, 'scripts', 'unit-keys'), '--root', root, '--check'],
                   capture_output=True, text=True, timeout=60)
sys.stderr.write(r.stderr)
if r.returncode != 0:
    print('check-keys-doc: the KEYS INDEX of docs/tend.service.5.md differs from the key tables (above)')
sys.exit(r.returncode)
