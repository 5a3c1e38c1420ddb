"""Shared fixtures: a stand-in cell whose interpreter is the test interpreter, and tiny repros.

And where a test run writes: cells under ``.test-cells/``, tmp_path folders and matplotlib's cache under
``.test-tmp/`` (both gitignored), and everything else that goes to the temporary folder ($TMPDIR: harness run
folders, compiler and uv scratch files, torch's inductor cache of the repro children) into one folder of this
run, removed when it ends. Outside the checkout a run leaves only the package managers' download caches.

The header names each missing system tool (tests/system_tools.py) and the tests that skip without it; slow
tests print a line when they start and every 15 s while they run (tests/slow_heartbeat.py).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from reprobisect.cells.envs import CellEnv
from reprobisect.model.cell import Cell
from reprobisect.model.repro import Fix, Form, Repro
from tests import slow_heartbeat, system_tools

# Hypothesis's per-example deadline (200 ms) measures the machine, not the code: on CI's two shared cores a
# busy moment failed a scrubbing property now and then. Properties keep their example counts; no deadline.
settings.register_profile("shared-cores", deadline=None)
settings.load_profile("shared-cores")

if TYPE_CHECKING:
    import pandas as pd

    from reprobisect.nightly.release_text import NightNews

SCRIPTS = Path(__file__).parent / "resources" / "scripts"
TRACEBACKS = Path(__file__).parent / "resources" / "tracebacks"
ROOT = Path(__file__).parent.parent
# Cells the slow tests build: in the checkout but apart from the user's own .cells/ (gitignored, kept between runs).
TEST_CELLS = ROOT / ".test-cells"
# tmp_path folders (pytest-of-USER/pytest-N/, a failing test's kept for a look) and matplotlib's font cache
TEST_TMP = ROOT / ".test-tmp"
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(TEST_TMP))
os.environ.setdefault("MPLCONFIGDIR", str(TEST_TMP / "matplotlib"))  # else ~/.config and ~/.cache/matplotlib
# The commands the harness prints are the checkout's (`nox -s triage -- ...`) as under `nox -s tests`, also where
# pytest runs on its own; tests of the installed form (`reprobisect triage ...`) pass an environment without it.
os.environ.setdefault("NOX_CURRENT_SESSION", "tests")
RUN_TMPDIR = "REPROBISECT_TEST_TMPDIR"  # the run's $TMPDIR, named for xdist workers (the controller removes it)


_LACKING = pytest.StashKey[list[system_tools.Tool]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    slow_heartbeat.pytest_addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    TEST_TMP.mkdir(exist_ok=True)
    _run_tmpdir(config)
    slow_heartbeat.pytest_configure(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return system_tools.header(_lacking(config), ci=_ci())


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under -q pytest prints no header: a missing tool is still named up front."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not reporter.showheader and not reporter.no_header:
        for tool in _lacking(session.config):
            reporter.write_line(system_tools.header([tool], ci=_ci())[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip a test marked requires_tool(...) where one of its tools is missing (pytest -rs names it)."""
    for item in items:
        found = _tool_verdict(item)
        if found is not None and found[0] == "skip":
            item.add_marker(pytest.mark.skip(reason=found[1]))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under CI=true, fail such a test instead when CI installs the tool: a CI run must not pass by skipping."""
    found = _tool_verdict(item)
    if found is not None and found[0] == "fail":
        pytest.fail(found[1], pytrace=False)


def _tool_verdict(item: pytest.Item) -> tuple[str, str] | None:
    names = [name for mark in item.iter_markers("requires_tool") for name in mark.args]
    return system_tools.verdict(names, _lacking(item.config), ci=_ci()) if names else None


def _lacking(config: pytest.Config) -> list[system_tools.Tool]:
    if _LACKING not in config.stash:
        config.stash[_LACKING] = system_tools.missing(base_python())
    return config.stash[_LACKING]


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def _run_tmpdir(config: pytest.Config) -> None:
    """Point $TMPDIR of this process and of every process it starts at a folder of this run; remove it at the end.

    It sits in the system's temporary folder, not in the checkout: a Unix socket path (108 bytes at most) made
    under it must still fit.
    """
    if os.environ.get(RUN_TMPDIR):
        return
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    path = tempfile.mkdtemp(prefix="reprobisect-tests-")
    os.environ[RUN_TMPDIR] = os.environ["TMPDIR"] = tempfile.tempdir = path

    def restore() -> None:
        shutil.rmtree(path, ignore_errors=True)
        del os.environ[RUN_TMPDIR]
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]

    config.add_cleanup(restore)


@pytest.fixture
def plain_env(tmp_path: Path) -> CellEnv:
    """A 'cell' whose bin/python is this interpreter: enough to exercise the runner without installs."""
    path = tmp_path / "cell"
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").symlink_to(sys.executable)
    cell = Cell(python="3", torch="none", torch_source="pinned", packages={})
    return CellEnv(cell=cell, path=path, reused=True, build_seconds=0.0)


def make_repro(
    script: str, *, expected: str | None = "zero-ipg-buffer-none", timeout: float = 60, args: tuple[str, ...] = ()
) -> Repro:
    """A repro with one cpu-deepspeed form running a test script, and the fix 'none'."""
    form = Form(name="cpu-deepspeed", script=SCRIPTS / script, precision="fp32", args=args)
    return Repro(
        name=Path(script).stem,
        title=script,
        report="",
        expected_signature=expected,
        timeout=timeout,
        forms={"cpu-deepspeed": form},
        fixes={"none": Fix(name="none", description="")},
    )


def night_news(
    before: pd.DataFrame, after: pd.DataFrame, *, baseline: str, release: str, backend: str = "cpu"
) -> NightNews:
    """One night that ran ``release`` (frame ``after``) against ``baseline`` (frame ``before``), both masked."""
    from reprobisect.nightly.regressions import regressed_keys
    from reprobisect.nightly.release_text import NightNews
    from reprobisect.report.compare import compare

    return NightNews(
        at="t",
        backend=backend,
        baseline=baseline,
        since=None,
        ran=[release],
        comparisons={release: compare(after, before)},
        regressed={release: regressed_keys(before, after)},
    )


def base_python() -> str:
    """The interpreter integration cells are made from (it must have torch)."""
    return os.environ.get("REPROBISECT_BASE_PYTHON", sys.executable)


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """Each test leaves SIGINT and SIGTERM as it found them. Tests that call the CLI's ``main()`` in this process
    install its handler (SIGTERM raises KeyboardInterrupt); without this, a later test's forked workers (picire's
    ParallelDD) inherited it, and a worker picire stopped with SIGTERM unwound pytest's own stack in the fork and
    took the parallel reducer's shared state down with it (a flaky test_minimize failure)."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        if handler is not None:
            signal.signal(sig, handler)


def tool_module(name: str) -> ModuleType:
    """``tools/NAME.py`` imported as a module (the tools are scripts, not a package): its functions under test.
    Registered in ``sys.modules`` first, as dataclasses and pickling in a tool need."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
