#!/usr/bin/env python3
"""Counts test cases in a meson testlog.json: every TAP 'ok' / 'not ok' line
of every suite, plus one failure for a suite that failed without saying which
case (a crash of the whole runner, a timeout). Prints 'passed failed'."""
import json
import sys

passed = failed = 0
for line in open(sys.argv[1]):
    test = json.loads(line)
    lines = test.get("stdout", "").splitlines()
    ok = sum(1 for l in lines if l.startswith("ok"))
    not_ok = sum(1 for l in lines if l.startswith("not ok"))
    passed += ok
    failed += not_ok
    if test["result"] not in ("OK", "EXPECTEDFAIL") and not_ok == 0:
        failed += 1
print(passed, failed)
