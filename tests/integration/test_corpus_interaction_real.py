"""Issue #51 item 4 end to end on real packages: an interaction entry, triaged as a grid search and scored.

The entry is built here from the real stand-in tests/resources/scripts/grid/frozen_copies.py (a test fixture, not a
corpus entry: no real bug): it fails where deepspeed >= 0.16.4 and lightning < 2.5.5, each side checked by hand in
the releases' sources. Its grid is 3 × 3 (Lightning 2.5.2, 2.5.5, 2.6.0 × DeepSpeed 0.16.0, 0.16.4, 0.17.0, torch
the base interpreter's); its [cells] say what those sources say. ``reprobisect corpus`` must triage it with the two
ranges, run fewer cells than the grid, state the truth's rule cell by cell with the failure recorded, and say "1 of 1
exact"; a truth whose region is one row too long (and cells to match) must make the rule wrong and the command exit 1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "grid" / "frozen_copies.py"
LIGHTNING = ("2.5.2", "2.5.5", "2.6.0")
DEEPSPEED = ("0.16.0", "0.16.4", "0.17.0")
BUG = "TypeError: DeepSpeedStrategy.__init__() got an unexpected keyword argument 'exclude_frozen_parameters'"
RULE = "lightning < 2.5.5 and deepspeed >= 0.16.4"


def _entry(corpus: Path, rule: str, failing: Collection[tuple[str, str]]) -> None:
    folder = corpus / "pl-ds-frozen-copies"
    folder.mkdir(parents=True)
    shutil.copy(SCRIPT, folder / "issue.py")
    cells = "\n".join(
        f'"{row}|{col}" = {{ exit = {int((row, col) in failing)}, '
        f"last_line = {json.dumps(BUG if (row, col) in failing else '')}, seconds = 20.0 }}"
        for row in LIGHTNING
        for col in DEEPSPEED
    )
    (folder / "truth.toml").write_text(
        'schema = 1\ntitle = "stand-in"\nreport = "Lightning-AI/pytorch-lightning#20040"\nreporter = "none"\n'
        'kinds = ["interaction", "exception"]\npackage = "lightning"\npartner = "deepspeed"\n'
        f"releases = {json.dumps(list(LIGHTNING))}\npartner_releases = {json.dumps(list(DEEPSPEED))}\n"
        'backend = "cpu"\nprecision = "bf16"\ntimeout = 600\n[pins]\ntorch = "system"\n'
        f'[[region]]\nrule = "{rule}"\nsignature = "TypeError"\n[cells]\n{cells}\n'
    )


def _corpus(corpus: Path, out: Path, envs: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "reprobisect", "corpus", "--corpus", str(corpus), "--out", str(out)]
    cmd += ["--envs", str(envs), "--base-python", base_python(), "--jobs", "2", "--config", str(ROOT / "matrix.yaml")]
    cmd += ["--no-culprits"]  # the rule is what this scores; the commit behind each edge: test_grid_real.py
    return subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False, cwd=ROOT)


@pytest.mark.scheduled  # 260 s with its six cells built, 680 s without: the corpus's CI share is test_corpus_real
def test_an_interaction_entry_is_searched_as_a_grid_and_its_rule_scored_exact(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    failing = {(row, col) for row in LIGHTNING[:1] for col in DEEPSPEED[1:]}
    _entry(tmp_path / "right", RULE, failing)
    out = tmp_path / "out"
    done = _corpus(tmp_path / "right", out, envs_dir)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    [row] = json.loads((out / "corpus.json").read_text())["rows"]
    assert row["exact"] and row["rule"]["ok"] and row["signature"]["ok"], row
    assert row["edges"]["ok"] is None and row["ranges"]["ok"] is None
    run, size = (int(n) for n in row["cells"].split(" of "))
    assert size == 9 and 0 < run < size  # the grid searched, not run whole
    assert "1 of 1 exact" in (out / "corpus.md").read_text()
    [path] = (out / "pl-ds-frozen-copies").glob("grid-*.json")
    grid = json.loads(path.read_text())
    [region] = grid["regions"]  # the harness's rows are its own (deepspeed here): the same rule, clauses reordered
    assert grid["cells_run"] == run and sorted(region["clauses"]) == ["deepspeed ≥ 0.16.4", "lightning < 2.5.5"]
    assert "--lightning 2.5.2,2.5.5,2.6.0 --deepspeed 0.16.0,0.16.4,0.17.0" in done.stdout

    wider = failing | {("2.5.5", col) for col in DEEPSPEED[1:]}  # a truth one row too wide: the rule is wrong
    _entry(tmp_path / "wrong", "lightning < 2.6.0 and deepspeed >= 0.16.4", wider)
    done = _corpus(tmp_path / "wrong", out, envs_dir)  # the same --out: the cells' records are reused
    assert done.returncode == 1, done.stdout[-6000:] + done.stderr[-3000:]
    [row] = json.loads((out / "corpus.json").read_text())["rows"]
    assert row["rule"]["ok"] is False and "2.5.5|0.16.4" in row["rule"]["found"] and not row["exact"]


REAL = ROOT / "corpus" / "ia-pl-ds-zero3-eval-mode"
REAL_CUT = {"releases": ("2.1.4", "2.2.0"), "partner_releases": ("0.15.3", "0.15.4")}


def _real_entry_cut(corpus: Path) -> None:
    """The real entry (Lightning #19467 × DeepSpeed #6662) cut to its 2 × 2 core, one release on each side of each
    edge: its own script, rule, changes and hand-measured cells, nothing else changed."""
    folder = corpus / REAL.name
    folder.mkdir(parents=True)
    shutil.copy(REAL / "issue.py", folder / "issue.py")
    lines = []
    for line in (REAL / "truth.toml").read_text().splitlines():
        key = line.split(" = ", 1)[0]
        if key in REAL_CUT:
            line = f"{key} = {json.dumps(list(REAL_CUT[key]))}"
        elif line.startswith('"') and "|" in key:  # a cell: kept where both its releases are
            row, col = key.strip('"').split("|")
            if row not in REAL_CUT["releases"] or col not in REAL_CUT["partner_releases"]:
                continue
        lines.append(line)
    (folder / "truth.toml").write_text("\n".join(lines) + "\n")


def test_a_real_bug_of_a_pair_is_found_as_its_truth_says_on_the_cpu(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    """Issue #51 item 4 in CI: a real interaction entry, triaged as a grid over real Lightning and DeepSpeed releases
    on the CPU: the rule and the failing cells' signature are exact. CI has no GitHub, so the pull request behind each
    edge is not asked, which the row says and counts as wrong (the whole entry, with clones: reports/)."""
    _real_entry_cut(tmp_path / "corpus")
    out = tmp_path / "out"
    done = _corpus(tmp_path / "corpus", out, envs_dir)
    assert done.returncode == 1, done.stdout[-6000:] + done.stderr[-3000:]  # the edges were not asked
    [row] = json.loads((out / "corpus.json").read_text())["rows"]
    assert row["rule"]["ok"] and row["signature"]["ok"], row
    assert row["edges"]["ok"] is False and "not asked" in row["edges"]["found"], row
    assert "#6662" in row["edges"]["truth"] and "#18951" in row["edges"]["truth"], row
    [path] = (out / REAL.name).glob("grid-*.json")
    [region] = json.loads(path.read_text())["regions"]  # one failing cell: 2.2.0 with 0.15.3
    assert region["cells"] == 1 and region["cells_run"] == 1, region
    [signature] = region["signatures"]
    assert signature["text"].startswith("AssertionError: backward pass is invalid for module in evaluation mode"), (
        region
    )
