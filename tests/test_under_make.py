"""`make test`, the README's test command, starts the suite from a make: the commands the tests run must read the
same there as in a person's shell (a nested `make` printed "make[1]: Entering directory" lines that a test took for
targets)."""

from __future__ import annotations

import os
import subprocess
import sys

from processes import MAKE_VARIABLES, ROOT, user_env

UNDER_MAKE = {"MAKELEVEL": "1", "MAKEFLAGS": "w", "MFLAGS": "-w"}  # as a make that ran the suite leaves them


def test_the_tests_that_run_make_pass_when_make_started_the_suite():
    """The tests that shell out to `make`, in a pytest started with a make's variables set."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_experiment_scripts.py", "-k", "make"],
                          cwd=ROOT, env={**os.environ, **UNDER_MAKE}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout.splitlines()[-1] and " failed" not in proc.stdout.splitlines()[-1]


def test_a_command_a_test_runs_sees_a_persons_environment(monkeypatch):
    """Guards the test above: under a make's variables, a plain `make help` does print the directory lines, and
    `user_env` takes them away."""
    for name, value in UNDER_MAKE.items():
        monkeypatch.setenv(name, value)
    raw = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "Entering directory" in raw.stdout
    clean = subprocess.run(["make", "help"], cwd=ROOT, env=user_env(), capture_output=True, text=True, timeout=60)
    assert "Entering directory" not in clean.stdout and clean.stdout.startswith("demo ")
    assert not set(MAKE_VARIABLES) & set(user_env())
