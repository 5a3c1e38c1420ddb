"""Run a package's own tests as a repro: ``python pytest_runner.py ROOTDIR [pytest arguments...]``.

It runs inside the run's sandbox with the cell's python (started by the bootstrap, like any repro script), and is
never imported by the harness. Each test's result becomes a ``test`` event (its node id, outcome and seconds); a
test that fails also gets a ``step`` event that is not ok, so the run's "died at" is the failing test's number.
At the end the first failure's exception is printed as a Python traceback, the run's last one, so the harness
signs the run with the failing test's own error, whatever pytest's report style. A session in which no test ran
(nothing collected, all skipped, a usage error) ends with ``NoTestRan``: the harness reports that as an
environment error, never as a pass.
"""

import os
import sys
import time
import traceback

import pytest

EVENT_MARK = "@@repro "
_MAX_TESTS = 2000


class NoTestRan(Exception):
    """Raised when the session ran no test: a pass that did not happen must never look like one."""


def _event(**fields):
    import json

    print("\n" + EVENT_MARK + json.dumps(fields), flush=True)  # on a line of its own: pytest's may be open


class CollectionError(Exception):
    """A test module that could not be collected (an import that a release broke, say): a failure of the run."""


class _Results:
    """A pytest plugin that reports each test's result as events and keeps the first failure's exception."""

    def __init__(self):
        self.count = 0
        self.ran = 0
        self.skipped = 0
        self.first_failure = None  # (node id, exception)
        self.collect_error = None  # (node id, last line of pytest's report)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed and call.excinfo is not None and self.first_failure is None:
            self.first_failure = (item.nodeid, call.excinfo.value)

    def pytest_collectreport(self, report):
        if report.failed and self.collect_error is None:
            lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
            detail = next(
                (line[1:].strip() for line in reversed(lines) if line.startswith("E ")), lines[-1] if lines else ""
            )
            self.collect_error = (report.nodeid, detail)

    def pytest_runtest_logreport(self, report):
        done = report.when == "call" or report.failed or (report.when == "setup" and report.skipped)
        if not done:
            return
        state = "error" if report.failed and report.when != "call" else report.outcome
        if state == "skipped":
            self.skipped += 1
        else:
            self.ran += 1
        if self.count < _MAX_TESTS:
            _event(event="test", nodeid=report.nodeid[:500], outcome=state, seconds=round(report.duration, 6))
            if state in ("failed", "error"):
                _event(event="step", step=self.count, seconds=round(report.duration, 6), ok=False)
        self.count += 1


_INI_SECTIONS = {
    "pytest.ini": "",
    "pyproject.toml": "[tool.pytest.ini_options]",
    "tox.ini": "[pytest]",
    "setup.cfg": "[tool:pytest]",
}


def _config_file(rootdir):
    """The test tree's own pytest configuration, else an empty one: never one of a folder above the tree (the
    harness's checkout may hold the tree, and its settings are not the package's)."""
    for name, section in _INI_SECTIONS.items():
        path = os.path.join(rootdir, name)
        try:
            with open(path, encoding="utf-8") as handle:
                if section in handle.read():
                    return path
        except (OSError, UnicodeDecodeError):
            continue
    import tempfile

    handle, path = tempfile.mkstemp(suffix=".ini")
    os.write(handle, b"[pytest]\n")
    os.close(handle)
    return path


def main():
    rootdir = sys.argv[1]
    config = _config_file(rootdir)
    # --confcutdir: no conftest.py above the tree is loaded (a checkout holding the tree has its own)
    args = ["-p", "no:cacheprovider", "-q", "-rfEs", f"--rootdir={rootdir}", f"--confcutdir={rootdir}", "-c", config]
    args += sys.argv[2:]
    os.chdir(rootdir)  # conftest files and relative node ids resolve from the test tree, as in the project's CI
    sys.path.insert(0, rootdir)  # as ``python -m pytest`` run there would have it: helpers import from the tree
    results = _Results()
    start = time.perf_counter()
    code = pytest.main(args, plugins=[results])
    _event(event="setup", seconds=round(time.perf_counter() - start, 6))
    if results.first_failure is not None:
        nodeid, exc = results.first_failure
        print(f"\nreprobisect: the first failing test was {nodeid}; its exception:", flush=True)
        sys.stdout.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        sys.stdout.flush()
        sys.exit(1)
    if results.collect_error is not None:
        nodeid, detail = results.collect_error
        raise CollectionError(f"{nodeid}: {detail}")
    if results.ran == 0 or int(code) not in (0, 1):
        raise NoTestRan(
            f"pytest exit status {int(code)}: {results.ran} ran, {results.skipped} skipped of {results.count} "
            f"(arguments: {' '.join(args[8:])})"
        )
    sys.exit(int(code))


if __name__ == "__main__":
    main()
