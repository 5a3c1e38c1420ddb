"""The commit behind each release transition, on a throwaway package whose history holds one change that broke it
and a later one that mended it: both named with their subject and pull request, from commits built into cells."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprobisect.bisect.culprits import find_culprits
from reprobisect.bisect.probes import BisectRequest
from reprobisect.cells.base import base_interpreter
from reprobisect.config.load import load_config
from reprobisect.config.scripts import script_repro
from reprobisect.model.bisect_report import BisectReport, SeenState, TransitionEntry
from reprobisect.model.culprit import Commit, Culprit
from reprobisect.model.store import Store
from reprobisect.run.context import RunContext
from reprobisect.run.sandbox import Confinement
from tests.conftest import base_python
from tests.integration.test_bisect_git import REPRO, _git

pytestmark = pytest.mark.slow


def _commit(repo: Path, revision: int, broken: bool, subject: str, tag: str | None = None) -> str:
    (repo / "tinypkg" / "__init__.py").write_text(f"REVISION = {revision}\nBROKEN = {broken}\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", subject)
    if tag:
        _git(repo, "tag", tag)
    return _git(repo, "rev-parse", "HEAD")


def _history(root: Path) -> tuple[Path, dict[str, str]]:
    """v0.1.0 good, v0.2.0 broken by 'Break it (#7018)', v0.3.0 mended by 'Mend it (#6976)'."""
    repo = root / "tinypkg"
    (repo / "tinypkg").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "remote", "add", "origin", "https://github.com/acme/tinypkg.git")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypkg"\nversion = "0.1.0"\n'
    )
    shas = {
        "v0.1.0": _commit(repo, 0, False, "Start (#1)", tag="v0.1.0"),
        "a": _commit(repo, 1, False, "Docs (#2)"),
        "break": _commit(repo, 2, True, "Break it (#7018)"),
        "b": _commit(repo, 3, True, "More (#3)"),
        "v0.2.0": _commit(repo, 4, True, "Release 0.2.0", tag="v0.2.0"),
        "mend": _commit(repo, 5, False, "Mend it (#6976)"),
        "v0.3.0": _commit(repo, 6, False, "Release 0.3.0", tag="v0.3.0"),
    }
    return repo, shas


def test_each_release_transition_gets_its_commit_and_pull_request(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    script = tmp_path / "repro.py"
    script.write_text(REPRO)
    (tmp_path / "matrix.yaml").write_text(
        "version: 1\ndefault_cell: {torch: system}\nmatrix:\n  axes:\n    torch: [system]\n"
        "    tinypkg: ['0.1.0']\nrepros: {}\n"
    )
    config = load_config(tmp_path / "matrix.yaml")
    repro = script_repro(script)
    config = dataclasses.replace(config, repros={**config.repros, repro.name: repro})
    request = BisectRequest(
        repro=repro.name, axis="tinypkg", good="0.1.0", bad="0.3.0", backend="cpu", confinement=Confinement()
    )
    # the states the release probes would have found (a failure's signature id as the commit probes give it)
    failing = subprocess.run(
        [sys.executable, "-m", "reprobisect", "bisect", "--script", str(script), "--axis", "tinypkg", "--git",
         str(repo), "--good", "v0.1.0", "--bad", "v0.2.0", "--any-failure", "--backend", "cpu", "--config",
         str(tmp_path / "matrix.yaml"), "--out", str(tmp_path / "reports"), "--envs", str(tmp_path / "cells"),
         "--base-python", base_python()],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert failing.returncode == 0, failing.stdout + failing.stderr
    [report] = (tmp_path / "reports").glob("bisect-*.json")
    bug = BisectReport.from_json(json.loads(report.read_text()), where=str(report)).transitions[0].after
    ok = SeenState(outcome="PASS")
    transitions = [
        TransitionEntry(last="0.1.0", first="0.2.0", before=ok, after=bug),
        TransitionEntry(last="0.2.0", first="0.3.0", before=bug, after=ok),
        TransitionEntry(last="0.3.0", first="0.4.0", before=ok, after=bug),  # no such tag
    ]
    lines: list[str] = []
    found = find_culprits(
        config,
        request,
        transitions,
        clone=repo,
        ctx=RunContext(
            base=base_interpreter(base_python()),
            store=Store(tmp_path / "reports"),
            envs_dir=tmp_path / "cells",
            environ=os.environ,
            echo=lines.append,
        ),
        form="cpu-deepspeed",
        source=["--script", str(script)],
    )
    introduced, fixed, untagged = found
    assert introduced.kind == "introduced" and introduced.commit is not None
    assert introduced.commit == Commit(sha=shas["break"], subject="Break it (#7018)", pull_request="acme/tinypkg#7018")
    assert introduced.last_good_commit is not None and introduced.last_good_commit.sha == shas["a"]
    assert fixed.kind == "fixed" and fixed.commit is not None and fixed.commit.sha == shas["mend"]
    assert fixed.commit.pull_request == "acme/tinypkg#6976"
    assert fixed.rerun is not None and "--target-outcome PASS" in fixed.rerun and f"--git {repo}" in fixed.rerun
    assert untagged.commit is None and "no tag of tinypkg 0.4.0" in str(untagged.why)
    assert introduced.probes <= 4 and introduced.commits == 4
    assert Culprit.from_json(json.loads(json.dumps(introduced.to_json())), where="x") == introduced  # as written
