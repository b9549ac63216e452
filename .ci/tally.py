#!/usr/bin/env python3
"""Counts test cases after `meson test -C BUILD`: every 'ok' / 'not ok' line of
the TAP report each Criterion suite wrote to BUILD/tests/SUITE.tap, plus one
failure for a suite that failed without reporting a failed case (a crash of
the whole runner, a timeout). Prints 'passed failed'."""
import json
import os
import sys

build = sys.argv[1]
passed = failed = 0
for line in open(os.path.join(build, "meson-logs", "testlog.json")):
    test = json.loads(line)
    suite = test["name"].split(" / ")[-1]
    tap = os.path.join(build, "tests", suite + ".tap")
    lines = open(tap).read().splitlines() if os.path.exists(tap) else []
    ok = sum(1 for l in lines if l.startswith("ok"))
    not_ok = sum(1 for l in lines if l.startswith("not ok"))
    passed += ok
    failed += not_ok
    if test["result"] not in ("OK", "EXPECTEDFAIL") and not_ok == 0:
        failed += 1
print(passed, failed)
