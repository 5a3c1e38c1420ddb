"""Fan-out: the cells of ``--list-json``, each run by its own process into its own folder (as one CI job or
Slurm array task each) and merged with ``report --merge``, give the report of one ``matrix`` run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.pinning import resolve_cell
from tests.conftest import ROOT, base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

SELECTION = [
    "--repro",
    "gan",
    "--backend",
    "cpu",
    "--deepspeed",
    "0.16.4,0.16.5",
    "--form",
    "cpu-deepspeed",
    "--fix",
    "none,freeze-d",
]
# What a run is, not when or where it ran: timings, run ids, paths and start times differ between any two runs.
SAME = [
    "repro",
    "cell",
    "form",
    "fix",
    "precision",
    "repeat",
    "torch",
    "deepspeed",
    "lightning",
    "torch_source",
    "outcome",
    "signature_id",
    "signature",
    "known_signature",
    "upstream",
    "failing_step",
    "exit_code",
    "timed_out",
    "n_steps",
    "python",
    "platform",
    "harness_version",
]


def _cell_id(deepspeed: str) -> str:
    """The id the harness gives this cell here: it names the base interpreter's torch, whichever build that is."""
    pins = {"torch": "system", "deepspeed": deepspeed, "lightning": "2.6.6"}
    return resolve_cell(base_interpreter(base_python()), pins).id


def _harness(*args: str, envs: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        *args,
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)


def _report(out: Path, *merge: Path) -> tuple[pd.DataFrame, str]:
    args = ["report", "--out", str(out), *(["--merge", *map(str, merge)] if merge else [])]
    done = subprocess.run([sys.executable, "-m", "reprobisect", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    frame = pd.read_csv(out / "report" / "runs.csv", keep_default_na=False, dtype=str)
    markdown = (out / "report" / "report.md").read_text(encoding="utf-8")
    return frame[SAME].sort_values(["cell", "form", "fix"]).reset_index(drop=True), markdown


def _outcome_tables(markdown: str) -> list[str]:
    """The outcome matrices (cell × fix) of the Markdown report: the part a maintainer reads first."""
    blocks = markdown.split("\n## ")
    return [block for block in blocks if block.startswith("gan · ")]


def test_list_json_cells_run_apart_and_merged_equal_one_matrix_run(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    listed = _harness("matrix", *SELECTION, "--list-json", envs=envs_dir)
    assert listed.returncode == 0, listed.stderr
    cells = json.loads(listed.stdout)["include"]
    assert [c["cell"] for c in cells] == [_cell_id(deepspeed) for deepspeed in ("0.16.4", "0.16.5")]
    assert all(c["status"] == "ok" for c in cells)

    single = _harness("matrix", *SELECTION, "--out", str(tmp_path / "single"), envs=envs_dir)
    assert single.returncode == 0, single.stdout + single.stderr
    jobs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reprobisect",
                "matrix",
                *SELECTION,
                "--cell",
                c["cell"],
                "--out",
                str(tmp_path / "cells" / c["cell"]),
                "--envs",
                str(envs_dir),
                "--base-python",
                base_python(),
                "--config",
                str(ROOT / "matrix.yaml"),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for c in cells
    ]
    for job in jobs:
        output, _ = job.communicate(timeout=1800)
        assert job.returncode == 0, output
    folders = sorted((tmp_path / "cells").iterdir())
    assert len(folders) == 2
    for folder in folders:  # each job wrote its own cell only
        assert [p.name for p in (folder / "records" / "gan").iterdir()] == [folder.name]

    merged_dir = tmp_path / "merged"
    merged_dir.mkdir()
    one, one_md = _report(tmp_path / "single")
    merged, merged_md = _report(merged_dir, *folders)
    assert len(one) == 4
    pd.testing.assert_frame_equal(one, merged)
    assert _outcome_tables(one_md) and _outcome_tables(one_md) == _outcome_tables(merged_md)
    assert set(one["outcome"]) <= {"PASS", "REPRODUCED", "OTHER_FAILURE"}
