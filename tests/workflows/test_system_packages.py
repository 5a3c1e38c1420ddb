"""tools/system-packages.sh: the one list of the Debian/Ubuntu packages the tests use, installed only where a tool
is missing. The README, CONTRIBUTING and docs/development.md name it and .ci/run runs it, so there is one copy; a
fixed ``apt-get install ... nodejs npm ...`` failed whole on a machine whose node came from NodeSource ("nodejs :
Conflicts: npm"). ``--print`` is run here against a PATH of stand-ins."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "tools" / "system-packages.sh"
FIXED_LIST = re.compile(r"apt-get install g\+\+ [^`]*nodejs npm")


@pytest.mark.parametrize("doc", ["README.md", "CONTRIBUTING.md", "docs/development.md"])
def test_the_docs_name_the_script_and_no_fixed_list(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert "tools/system-packages.sh" in text
    assert not FIXED_LIST.search(text)


def test_ci_runs_the_same_script_and_installs_nothing_of_its_own() -> None:
    """.ci/run sources .ci/setup (the scheduled workflow runs it too), which runs the script."""
    assert "source .ci/setup" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "setup").read_text(encoding="utf-8")
    assert re.search(r"^tools/system-packages\.sh --slurm$", ci, re.MULTILINE)
    assert "apt-get" not in ci
    assert os.access(SCRIPT, os.X_OK)


def _printed(tmp_path: Path, *tools: str) -> str:
    """What ``--print`` says where PATH holds only ``tools`` (stand-ins) and what the script itself needs."""
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name in ("tr", "sed", "id"):
        os.symlink(shutil.which(name) or name, stubs / name)
    os.symlink(sys.executable, stubs / "python3")
    for name in tools:
        (stubs / name).write_text("#!/bin/sh\n")
        (stubs / name).chmod(0o755)
    env = {"PATH": str(stubs), "HOME": str(tmp_path)}
    bash = shutil.which("bash") or "/bin/bash"
    done = subprocess.run([bash, str(SCRIPT), "--print"], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def test_a_node_that_brings_its_own_npm_gets_no_npm(tmp_path: Path) -> None:
    line = _printed(tmp_path, "node", "npm")
    assert line.startswith("apt-get install chromium patch g++")
    assert "nodejs" not in line.split() and "npm" not in line.split()
    assert "slurm-wlm" not in line  # only with --slurm


def test_only_the_missing_tool_is_asked_for(tmp_path: Path) -> None:
    words = _printed(tmp_path, "node", "chromium", "patch", "c++", "jq").split()
    assert "npm" in words and "nodejs" not in words and "chromium" not in words and "jq" not in words


def test_nothing_missing_installs_nothing(tmp_path: Path) -> None:
    line = _printed(tmp_path, "node", "npm", "chromium", "patch", "c++", "jq")
    assert line in ("system packages: nothing missing", "apt-get install python3-dev")  # headers: this python's own
