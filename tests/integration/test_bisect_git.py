"""Git mode on a throwaway repository of a tiny package: each commit is installed from source into a cell."""

from __future__ import annotations

import json
import os
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


def _bisect(
    tmp_path: Path, repo: Path, good: str, bad: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict]:
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
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env)
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


def test_git_mode_offline_with_pip_as_on_a_gpu_image(tmp_path: Path) -> None:
    """The GPU image's path: no uv, no index. Each commit is built once into a kept wheel without build isolation
    (the base interpreter's setuptools) and pip installs it by path; before, pip was handed
    ``tinypkg @ git+file://…@sha`` and every commit was an ENV_ERROR."""
    shas = _tiny_repo(tmp_path, broken_from=3, commits=6)
    env = {**os.environ, "REPROBISECT_INSTALLER": "pip", "PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}
    done, report = _bisect(tmp_path, tmp_path / "tinypkg", shas[0], shas[-1], env=env)
    [transition] = report["transitions"]
    assert (transition["last"], transition["first"]) == (shas[2][:12], shas[3][:12]), done.stdout
    assert report["skipped"] == []
    probed = {p["version"] for p in report["probes"]}
    kept = {p.name.split("-")[2][:12] for p in (tmp_path / "cells" / "wheels").glob("tinypkg-git-*") if p.is_dir()}
    assert kept == probed


def test_a_commit_that_does_not_build_is_skipped_and_a_shallow_clone_is_named(tmp_path: Path) -> None:
    """A commit whose tree does not build is skipped like git bisect's 125 (ENV_ERROR, the build's words), and the
    answer names the pair around it; a shallow clone whose history stops inside the range is refused once, by name,
    instead of failing at every commit."""
    shas = _tiny_repo(tmp_path, broken_from=99, commits=4)
    repo = tmp_path / "tinypkg"
    good_toml = (repo / "pyproject.toml").read_text()
    (repo / "pyproject.toml").write_text("[build-system]\nrequires = [\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-a", "-m", "a build that breaks (#12)")
    unbuildable = _git(repo, "rev-parse", "HEAD")
    (repo / "pyproject.toml").write_text(good_toml)
    (repo / "tinypkg" / "__init__.py").write_text("REVISION = 5\nBROKEN = True\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-a", "-m", "mend the build (#13)")
    culprit = _git(repo, "rev-parse", "HEAD")
    (repo / "tinypkg" / "__init__.py").write_text("REVISION = 6\nBROKEN = True\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-a", "-m", "later")
    _, report = _bisect(tmp_path, repo, shas[0], _git(repo, "rev-parse", "HEAD"))
    [transition] = report["transitions"]
    assert (transition["last"], transition["first"]) == (shas[3][:12], culprit[:12])
    assert transition["skipped_between"] == [unbuildable[:12]]
    [skip] = report["skipped"]
    assert skip["version"] == unbuildable[:12] and skip["why"].startswith("ENV_ERROR")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo}", str(shallow)], check=True)
    argv = ["bisect", "--script", str(tmp_path / "repro.py"), "--axis", "tinypkg", "--git", str(shallow)]
    argv += ["--good", "HEAD~2", "--bad", "HEAD", "--any-failure", "--backend", "cpu", "--config"]
    argv += [str(tmp_path / "matrix.yaml"), "--out", str(tmp_path / "r2"), "--envs", str(tmp_path / "cells")]
    refused = subprocess.run(
        [sys.executable, "-m", "reprobisect", *argv, "--base-python", base_python()],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "shallow clone" in refused.stderr and "--unshallow" in refused.stderr
