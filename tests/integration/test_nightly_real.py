"""The nightly on real DeepSpeed releases, three nights in a row, as a CI workflow would run it.

Night 0 seeds the baseline with 0.19.1. Night 1 pretends the index ends at 0.19.2 (``--up-to``): 0.19.2
is new, it runs, and the unmodified GAN, which passes on 0.19.1, fails on 0.19.2 (DeepSpeed keeps
BatchNorm buffers fp32 from 0.19.2): a regression, so exit 1, a bisection, and the baseline advances.
Night 2 finds nothing newer than 0.19.2 and says so with exit 0. Night 3 is a dispatch with a git ref
(``--deepspeed main``) of a local repository holding 0.19.2's source: a VCS cell built from source, pinned
to the commit, compared with the baseline (it behaves alike), and never made the baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.release_history import extract_data
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

# two fixes a night, two runs at a time (a run each core): what CI's two cores allow
SLICE = ["--backend", "cpu", "--repro", "gan", "--form", "cpu-deepspeed", "--fix", "none,zero-stage-0", "--jobs", "2"]


def _night(tmp_path: Path, envs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "nightly",
        *SLICE,
        *args,
        "--state",
        str(tmp_path / "state"),
        "--out",
        str(out),
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


def test_three_nights_seed_then_a_new_release_regresses_then_nothing_new(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    seeded, summary = _night(tmp_path, envs_dir, "--baseline-release", "0.19.1")
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    assert summary["seeded"] and summary["baseline"] == "0.19.1"
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert state["baseline"] == "0.19.1"
    assert len(list((tmp_path / "state" / state["baseline_dir"] / "records").rglob("*.json"))) == 2

    night, summary = _night(tmp_path, envs_dir, "--up-to", "0.19.2")
    text = night.stdout + night.stderr
    assert night.returncode == 1, text  # a regression
    assert summary["new_releases"] == ["0.19.2"] and summary["ran"] == ["0.19.2"]
    changes = {c["fix"]: c for c in summary["changes"]}
    assert changes["none"]["kind"] == "new-failure" and changes["none"]["regression"]
    assert changes["none"]["baseline"] == "✓"
    assert summary["regressed"] is True
    assert summary["title"] == "Nightly (cpu): deepspeed 0.19.2 regressed 1 run(s) that passed on 0.19.1"
    bisect = next(b for b in summary["bisects"] if b["fix"] == "none")
    [transition] = bisect["transitions"]
    assert (transition["last"], transition["first"]) == ("0.19.1", "0.19.2")
    assert "expected scalar type" in transition["to"]["signature"]
    body = (tmp_path / "out" / "nightly.md").read_text()
    assert body.startswith("<!-- reprobisect-nightly backend=cpu -->")
    assert "| **regression** | 0.19.2 | gan | cpu-deepspeed | none |" in body
    command = "nox -s repro_gan -- --torch system --deepspeed 0.19.2 --lightning 2.6.6 --torchvision match"
    assert f"{command} --form cpu-deepspeed --fix none" in body
    assert (tmp_path / "out" / "report" / "report.html").is_file()
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert state["baseline"] == "0.19.2" and state["baseline_dir"].startswith("baseline-0.19.2-")
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [state["baseline_dir"], "state.json"]

    quiet, summary = _night(tmp_path, envs_dir, "--up-to", "0.19.2")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "No DeepSpeed release newer than the baseline 0.19.2" in quiet.stdout
    assert summary["ran"] == [] and summary["runs_executed"] == 0 and not summary["regressed"]
    history = json.loads((tmp_path / "state" / "state.json").read_text())["history"]
    assert [(h["seeded"], h["ran"], h["regressed"]) for h in history] == [
        (True, ["0.19.1"], False),
        (False, ["0.19.2"], True),
        (False, [], False),
    ]

    repo = _deepspeed_source_repo(tmp_path / "src", "0.19.2")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    ref, summary = _night(tmp_path, envs_dir, "--deepspeed", "main", "--repo", f"file://{repo}")
    assert ref.returncode == 0, ref.stdout + ref.stderr
    assert summary["refs"] == [f"main@{head[:12]}"] and summary["advanced_to"] is None
    assert summary["title"] == f"Nightly (cpu): deepspeed main@{head[:12]} behaves like 0.19.2", summary["changes"]
    records = list((tmp_path / "out" / "records" / "gan").glob(f"*deepspeed-git.{head[:12]}*/*.json"))
    assert len(records) == 2
    assert json.loads(records[0].read_text())["versions"]["deepspeed"].startswith("0.19.2")
    assert json.loads((tmp_path / "state" / "state.json").read_text())["baseline"] == "0.19.2"


def _deepspeed_source_repo(root: Path, version: str) -> Path:
    """A git repository (branch main, one commit) of a DeepSpeed release's source, from its sdist on the index."""
    root.mkdir()
    subprocess.run(
        [
            base_python(),
            "-m",
            "pip",
            "download",
            f"deepspeed=={version}",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(root),
        ],
        check=True,
        timeout=600,
    )
    [sdist] = root.glob("deepspeed-*.tar.gz")
    with tarfile.open(sdist) as archive:
        extract_data(archive, root)
    repo = root / f"deepspeed-{version}"
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"DeepSpeed {version} source"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo
