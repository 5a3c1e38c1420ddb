"""Git mode on a throwaway repository of a tiny package: each commit is installed from source into a cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import base_python

pytestmark = pytest.mark.slow

REPRO = '''"""Fails when the installed tinypkg is broken."""
import tinypkg

if tinypkg.BROKEN:
    raise RuntimeError(f"tinypkg {tinypkg.REVISION} is broken")
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _tiny_repo(root: Path, broken_from: int, commits: int) -> list[str]:
    repo = root / "tinypkg"
    (repo / "tinypkg").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypkg"\nversion = "0.1.0"\n'
    )
    shas = []
    for i in range(commits):
        (repo / "tinypkg" / "__init__.py").write_text(f"REVISION = {i}\nBROKEN = {i >= broken_from}\n")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"revision {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return shas


def _bisect(tmp_path: Path, repo: Path, good: str, bad: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    config = tmp_path / "matrix.yaml"
    config.write_text(
        "version: 1\ndefault_cell: {torch: system}\nmatrix:\n  axes:\n    torch: [system]\n"
        "    tinypkg: ['0.1.0']\nrepros: {}\n"
    )
    (tmp_path / "repro.py").write_text(REPRO)
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "bisect",
        "--script",
        str(tmp_path / "repro.py"),
        "--axis",
        "tinypkg",
        "--git",
        str(repo),
        "--good",
        good,
        "--bad",
        bad,
        "--any-failure",
        "--backend",
        "cpu",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "reports"),
        "--envs",
        str(tmp_path / "cells"),
        "--base-python",
        base_python(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    reports = list((tmp_path / "reports").glob("bisect-*.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(reports) == 1
    return done, json.loads(reports[0].read_text())


def test_git_mode_finds_the_breaking_commit_and_reuses_probes(tmp_path: Path) -> None:
    shas = _tiny_repo(tmp_path, broken_from=5, commits=8)
    _, report = _bisect(tmp_path, tmp_path / "tinypkg", shas[0], shas[-1])
    [transition] = report["transitions"]
    assert (transition["last"], transition["first"]) == (shas[4][:12], shas[5][:12])
    assert transition["to"]["outcome"] == "OTHER_FAILURE"
    assert "tinypkg N is broken" in transition["to"]["signature"]
    assert report["releases_in_range"] == 8
    assert report["runs"] == report["probes_made"] <= 5
    # a second bisection of the same range runs nothing
    _, again = _bisect(tmp_path, tmp_path / "tinypkg", shas[0], shas[-1])
    assert again["runs"] == 0
    assert again["reused"] == report["probes_made"]
    assert again["transitions"] == report["transitions"]
