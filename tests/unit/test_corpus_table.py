"""The corpus table (issue #52): its verdict columns are the row's own, its header says which code made it, when,
how long it took and where the time went, and a crashed entry is a wrong row that says so."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reprobisect import __version__
from reprobisect.commands import corpus as corpus_command
from reprobisect.commands.corpus_jobs import failed_row
from reprobisect.commands.main import main
from reprobisect.corpus.provenance import harness_commit
from reprobisect.corpus.run_history import HISTORY, read_history
from reprobisect.corpus.scoring import NOT_APPLICABLE, ColumnVerdict, Row, score
from reprobisect.corpus.table import TITLES, Header, NotRun, Ran, Table, markdown, verdict_columns, write_table
from reprobisect.corpus.truth import load_truth
from reprobisect.corpus.truth_model import Truth
from reprobisect.util.tally import CELLS, COMMIT_WHEELS, OP_BUILDS, PROBES, RUNS, Spent
from tests.unit.test_corpus import GOOD, _entry, _found, _truth

HEADER = Header(commit="0123abcd+dirty", date="2026-12-07 05:00 UTC", backend="cpu", entry_jobs=2, wall_seconds=754.4)
SPENT = {CELLS: Spent(3, 12.0), OP_BUILDS: Spent(1, 29.0), COMMIT_WHEELS: Spent(4, 80.0), RUNS: Spent(5, 50.0),
         PROBES: Spent(7, 70.0)}  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class RowWithRule(Row):
    """A row as a scoring that adds a column would make it (the interaction rule of a grid)."""

    interaction_rule: ColumnVerdict = NOT_APPLICABLE


def _table(rows: list[Ran], not_run: list[NotRun] | None = None) -> Table:
    return Table(rows=rows, not_run=not_run or [], command="reprobisect corpus --jobs 2", header=HEADER)


def test_the_header_says_the_code_the_date_k_of_n_the_wall_time_and_where_it_went(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    table = _table([Ran(row=score(truth, _found()), spent=SPENT), Ran(row=score(truth, _found(affected=[])))])
    text = markdown(table)
    head = text.split("| entry")[0]
    assert "1 of 2 exact" in head and "`0123abcd+dirty`" in head and "2026-12-07 05:00 UTC" in head
    assert "wall time: 754 s" in head and "2 entries at a time" in head
    for part in ("cells made 3 in 12 s", "op builds 1 in 29 s", "commit wheels built 4 in 80 s", "runs 5 in 50 s",
                 "probe runs 7 in 70 s"):  # fmt: skip
        assert part in head, head
    assert "| 5 / 7 |" in text and "| 0 / 0 |" in text  # each entry's runs: cells run / probes
    _, js = write_table(table, tmp_path / "out")
    data = json.loads(js.read_text())
    assert data["commit"] == "0123abcd+dirty" and data["wall_seconds"] == 754.4 and data["exact"] == 1
    assert data["where"]["probe runs"] == {"count": 7, "seconds": 70.0}
    assert data["rows"][0]["where"]["runs"]["count"] == 5 and data["rows"][1]["exact"] is False


def test_the_columns_are_the_rows_own_and_a_new_one_shows_without_a_change_here(tmp_path: Path) -> None:
    base = score(_truth(tmp_path), _found())
    assert [name for name, _ in verdict_columns(base)] == list(TITLES)
    wrong = ColumnVerdict(ok=False, truth="fails where lightning < 2.4", found="no rule")
    row = RowWithRule(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, interaction_rule=wrong)
    text = markdown(_table([Ran(row=row)]))
    assert "| interaction rule? |" in text
    assert "**NO**: truth fails where lightning &lt; 2.4, found no rule" in text
    # exact is the row's own verdict: the scoring decides which columns count
    assert Ran(row=row).exact is row.exact


def test_a_crashed_entry_is_a_wrong_row_that_says_so(tmp_path: Path) -> None:
    good = Ran(row=score(_truth(tmp_path), _found()))
    why = "KeyError: 'states'"
    crashed = Ran(row=failed_row("boom", f"crashed: {why}", 3.0), crashed=why)
    table = _table([good, crashed], [NotRun(entry="gpu-one", why="needs 1 GPU(s)")])
    text = markdown(table)
    assert table.headline == "1 of 2 exact (1 not run)"
    assert "| boom (crashed) |" in text and "Crashed (the triage raised" in text and "- boom: KeyError" in text
    assert all(verdict.ok is False for _, verdict in verdict_columns(crashed.row)) and not crashed.exact
    assert json.loads(json.dumps(table.to_dict()))["rows"][1]["crashed"] == why


def test_text_from_a_row_cannot_break_the_table() -> None:
    row = failed_row("e|x", "harness error: a|b\nc <!-- @someone", 1.0)
    line = next(line for line in markdown(_table([Ran(row=row)])).splitlines() if line.startswith("| e"))
    assert line.count(" | ") == len(TITLES) + 3 and "<!--" not in line and "\n" not in line


def test_the_code_is_the_checkouts_commit_dirty_when_changed_or_the_installed_version(tmp_path: Path) -> None:
    package = tmp_path / "src" / "reprobisect"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert harness_commit(package) == f"reprobisect {__version__} (installed)"  # not in a checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert harness_commit(package) == sha
    (package / "__init__.py").write_text("x = 1\n")
    assert harness_commit(package) == sha + "+dirty"
    inner = tmp_path / "venv" / "site-packages" / "reprobisect"  # installed inside some other repository
    inner.mkdir(parents=True)
    assert harness_commit(inner) == f"reprobisect {__version__} (installed)"


def test_a_whole_run_appends_to_the_history_and_a_chosen_entry_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus_dir = tmp_path / "corpus"
    truth = load_truth(_entry(corpus_dir, GOOD, name="entry"))

    def run(truths: list[Truth], run_one: object, *, entry_jobs: int, out: Path, done: Any) -> list[Ran]:
        assert [t.name for t in truths] == ["entry"] and entry_jobs == 3
        ran = Ran(row=score(truth, _found()), spent=SPENT)
        done("entry", ran)  # the table so far, as a real run writes it
        return [ran]

    monkeypatch.setattr(corpus_command, "run_entries", run)
    out = tmp_path / "out"
    argv = ["corpus", "--corpus", str(corpus_dir), "--out", str(out), "--entry-jobs", "3"]
    assert main(argv) == 0
    assert main([*argv, "--entry", "entry"]) == 0
    [point] = read_history(corpus_dir / HISTORY).points  # the second, of a chosen entry, is not the corpus's
    assert (point.k, point.n, point.backend) == (1, 1, "cpu") and point.commit == harness_commit()
    data = json.loads((out / "corpus.json").read_text())
    assert data["entry_jobs"] == 3 and data["commit"] == point.commit and data["where"]["runs"]["count"] == 5
    page = (out / "corpus.html").read_text()
    assert "Trend over whole runs (1)" in page and "<svg" in page
    for wrong in ("0", "-1", "nan", "1e9", "two"):  # refused by name before any entry runs
        with pytest.raises(SystemExit) as refused:
            main(["corpus", "--corpus", str(corpus_dir), "--out", str(out), "--entry-jobs", wrong])
        assert refused.value.code == 2 and "--entry-jobs" in capsys.readouterr().err
