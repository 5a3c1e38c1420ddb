"""Issue #36 end to end on real packages: one corpus entry, cut to two releases, scored exact.

The entry is ds-bf16-stray-grad's script with its hand-measured truth for 0.16.4 (passes) and 0.16.5 (fails), and
CI has no GitHub, so the clone is the history built from the two releases' sdists (one commit per changed file,
tests/integration/release_history.py): the introducing pull request the truth names is the one of the commit that
changes deepspeed/runtime/constants.py there (DeepSpeed #7018 changed that default). ``reprobisect corpus`` must
triage it, find the range, the commit and its pull request, agree with every release's signature and say "1 of 1
exact"; a second truth with the wrong pull request must make the row wrong and the command exit 1.

The second test is the same on the Lightning axis (pl-ds3-summary-flops, 2.5.3 passes, 2.5.4 fails), the fast one:
DeepSpeed is pinned, so it is built once and its op compiled once for every cell and every probe, and each probe
builds a pure-Python Lightning wheel; the history from the two sdists holds 28 file commits, the culprit the one
that changes model_summary_deepspeed.py (Lightning #21100 there).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.release_history import build_history
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

ENTRY = ROOT / "corpus" / "ds-bf16-stray-grad"
CULPRIT = "deepspeed/runtime/constants.py"
PL_ENTRY = ROOT / "corpus" / "pl-ds3-summary-flops"
PL_CULPRIT = "src/lightning/pytorch/utilities/model_summary/model_summary_deepspeed.py"


def _entry(root: Path, pr: str) -> Path:
    """The real entry's script and its measured runs of 0.16.4 and 0.16.5, with ``pr`` as the introducing PR."""
    runs = tomllib.loads((ENTRY / "truth.toml").read_text())["runs"]
    folder = root / "ds-bf16-stray-grad-two"
    folder.mkdir(parents=True)
    shutil.copy(ENTRY / "issue.py", folder / "issue.py")
    rows = "\n".join(
        f'"{r}" = {{ exit = {runs[r]["exit"]}, last_line = {json.dumps(runs[r]["last_line"])}, seconds = 1.0 }}'
        for r in ("0.16.4", "0.16.5")
    )
    (folder / "truth.toml").write_text(
        'schema = 1\ntitle = "t"\nreport = "Lightning-AI/pytorch-lightning#17856"\nreporter = "r"\n'
        'kinds = ["wrong-numbers", "still-present"]\npackage = "deepspeed"\nreleases = ["0.16.4", "0.16.5"]\nbackend = "cpu"\n'
        'precision = "bf16"\ntimeout = 900\n[pins]\ntorch = "system"\nlightning = "2.6.6"\n'
        f'[[affected]]\nfirst = "0.16.5"\nlast = "0.16.5"\n[affected.introduced]\npr = "{pr}"\ncommit = "abcdef0"\n'
        f"[runs]\n{rows}\n"
    )
    return root


def _corpus(corpus: Path, clone: Path, out: Path, envs: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "reprobisect", "corpus", "--corpus", str(corpus), "--git", str(clone)]
    cmd += ["--out", str(out), "--envs", str(envs), "--base-python", base_python(), "--jobs", "2"]
    cmd += ["--config", str(ROOT / "matrix.yaml")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)


def test_one_real_entry_is_triaged_and_scored_exact_and_a_wrong_truth_fails(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    history = build_history(tmp_path / "history", "deepspeed", "0.16.4", "0.16.5", base_python())
    subject = subprocess.run(
        ["git", "-C", str(history.repo), "log", "-1", "--format=%s", history.sha_of(CULPRIT)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    pr = "deepspeedai/DeepSpeed#" + re.findall(r"\(#(\d+)\)", subject)[-1]
    out = tmp_path / "out"
    done = _corpus(_entry(tmp_path / "right", pr), history.repo, out, envs_dir)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    table = json.loads((out / "corpus.json").read_text())
    assert table["headline"] == "1 of 1 exact", table
    [row] = table["rows"]
    assert row["ranges"]["found"] == "0.16.5" and row["introduced"]["found"] == pr and row["fixed"]["ok"] is None
    assert "1 of 1 exact" in (out / "corpus.md").read_text()
    # the header (issue #52): the code, the date, the wall time and where it went, each entry's runs
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|reprobisect \S+ \(installed\)", table["commit"]), table["commit"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", table["date"]) and table["wall_seconds"] >= row["seconds"]
    where = row["where"]
    assert where["runs"]["count"] >= 2 and where["probe runs"]["count"] >= 1, where  # two releases, a culprit search
    assert table["where"] == where, table["where"]  # one entry: the header's sum is its own (kept wheels may be reused)
    assert f"| {where['runs']['count']} / {where['probe runs']['count']} |" in (out / "corpus.md").read_text()
    # a whole run: one line of history, drawn on the page beside corpus.md
    runs = [json.loads(line) for line in (tmp_path / "right" / "history.jsonl").read_text().splitlines()]
    assert [(r["k"], r["n"], r["commit"]) for r in runs] == [(1, 1, table["commit"])]
    assert "Trend over whole runs (1)" in (out / "corpus.html").read_text()
    # the same triage (its records reused) against a truth naming another pull request: a wrong row, exit 1
    wrong = _corpus(_entry(tmp_path / "wrong", "deepspeedai/DeepSpeed#1"), history.repo, out, envs_dir)
    assert wrong.returncode == 1, wrong.stdout[-4000:]
    assert json.loads((out / "corpus.json").read_text())["headline"] == "0 of 1 exact"
    assert json.loads((tmp_path / "wrong" / "history.jsonl").read_text())["k"] == 0  # that corpus's own history


def _pl_entry(root: Path, pr: str) -> Path:
    """pl-ds3-summary-flops's script and its measured runs of 2.5.3 and 2.5.4, with ``pr`` as the introducing PR."""
    runs = tomllib.loads((PL_ENTRY / "truth.toml").read_text())["runs"]
    folder = root / "pl-ds3-summary-flops-two"
    folder.mkdir(parents=True)
    shutil.copy(PL_ENTRY / "issue.py", folder / "issue.py")
    rows = "\n".join(
        f'"{r}" = {{ exit = {runs[r]["exit"]}, last_line = {json.dumps(runs[r]["last_line"])}, seconds = 1.0 }}'
        for r in ("2.5.3", "2.5.4")
    )
    (folder / "truth.toml").write_text(
        'schema = 1\ntitle = "t"\nreport = "Lightning-AI/pytorch-lightning#21231"\nreporter = "r"\n'
        'kinds = ["exception", "lightning", "still-present"]\npackage = "lightning"\nreleases = ["2.5.3", "2.5.4"]\nbackend = "cpu"\n'
        'precision = "32-true"\ntimeout = 900\n[pins]\ntorch = "system"\ndeepspeed = "0.18.6"\n'
        f'[[affected]]\nfirst = "2.5.4"\nlast = "2.5.4"\n[affected.introduced]\npr = "{pr}"\ncommit = "abcdef0"\n'
        f"[runs]\n{rows}\n"
    )
    return root


@pytest.mark.scheduled  # about 4.5 minutes on CI's two cores: beside the DeepSpeed entry, past CI's budget
def test_a_lightning_entry_is_triaged_and_scored_exact(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    history = build_history(tmp_path / "history", "lightning", "2.5.3", "2.5.4", base_python())
    subject = subprocess.run(
        ["git", "-C", str(history.repo), "log", "-1", "--format=%s", history.sha_of(PL_CULPRIT)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    pr = "Lightning-AI/pytorch-lightning#" + re.findall(r"\(#(\d+)\)", subject)[-1]
    out = tmp_path / "out"
    done = _corpus(_pl_entry(tmp_path / "right", pr), history.repo, out, envs_dir)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    table = json.loads((out / "corpus.json").read_text())
    assert table["headline"] == "1 of 1 exact", table
    [row] = table["rows"]
    assert row["ranges"]["found"] == "2.5.4" and row["introduced"]["found"] == pr and row["fixed"]["ok"] is None


PERF_ENTRY = "ds-zero2-hook-count-slowdown"


def test_the_performance_entry_finds_its_slower_releases(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """The corpus's performance entry (DeepSpeed #7885) over its four releases, without a clone (CI has no GitHub):
    the timing search must find 0.18.5 … 0.18.6 slower than 0.18.4 and every release passing, as the hand runs did;
    the pull request columns say 'not asked' and the row is wrong for them, never hidden (exit 1)."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "corpus", "--corpus", str(ROOT / "corpus"), "--entry", PERF_ENTRY]
    cmd += ["--no-culprits", "--out", str(out), "--envs", str(envs_dir), "--base-python", base_python()]
    cmd += ["--config", str(ROOT / "matrix.yaml")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)
    assert done.returncode == 1, done.stdout[-6000:] + done.stderr[-3000:]
    [row] = json.loads((out / "corpus.json").read_text())["rows"]
    assert row["ranges"]["ok"] is True and row["ranges"]["found"] == "0.18.5 … 0.18.6", row
    assert row["signature"]["ok"] is True and row["introduced"]["found"].startswith("no commit: not asked"), row
    assert "--slower-than 50" in (out / PERF_ENTRY / "summary-script-issue.md").read_text()
