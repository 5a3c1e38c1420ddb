"""Corpus entries side by side (issue #52): each in a process of its own on its share of the cores, a crashed entry
(an exception out of its triage, a process killed) a row saying so while the others go on, a performance entry
alone after the others, and a line at least every heartbeat while entries run."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from pathlib import Path

import pytest

from reprobisect.commands import corpus_jobs
from reprobisect.commands.corpus import UNANSWERED, PartialTable
from reprobisect.commands.corpus_jobs import LOG, default_entry_jobs, run_entries
from reprobisect.corpus.table import Header, NotRun, Ran
from reprobisect.corpus.truth import load_truth
from reprobisect.corpus.truth_model import Truth
from reprobisect.util import console, tally
from tests.corpus_stub import answer
from tests.unit.test_corpus import GOOD, _entry
from tests.unit.test_corpus_performance import _data, _parse


def _truths(root: Path, *names: str) -> list[Truth]:
    return [load_truth(_entry(root, GOOD, name=name)) for name in names]


def test_a_crashed_or_killed_entry_is_a_row_saying_so_and_the_others_still_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    truths = _truths(tmp_path / "corpus", "first", "raises", "killed", "last")
    run_one = functools.partial(answer, notes=tmp_path)
    ran = run_entries(truths, run_one, entry_jobs=1, out=tmp_path / "out")
    assert [r.row.entry for r in ran] == ["first", "raises", "killed", "last"]
    assert ran[0].crashed is None and ran[0].spent[tally.RUNS] == tally.Spent(1, 2.0)  # its own tally
    assert ran[1].crashed == "KeyError: 'states'" and "crashed: KeyError" in ran[1].row.ranges.found
    assert ran[2].crashed is not None and "signal 9" in ran[2].crashed and not ran[2].exact
    assert (tmp_path / "last.json").is_file()  # the run went on past both
    out = capfd.readouterr()
    assert "triaging first" in out.out and "KeyError" in out.err  # one at a time: the terminal hears each entry


def test_entries_run_side_by_side_on_their_share_of_the_cores_and_a_performance_entry_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(corpus_jobs, "heartbeat", functools.partial(console.heartbeat, every=0.1))
    (tmp_path / "perf").mkdir()
    slow = dataclasses.replace(_parse(tmp_path / "perf", _data()), name="timed")
    truths = [slow, *_truths(tmp_path / "corpus", "a", "b")]
    out = tmp_path / "out"
    ran = run_entries(truths, functools.partial(answer, notes=tmp_path, meet=("a", "b")), entry_jobs=2, out=out)
    assert [r.row.entry for r in ran] == ["timed", "a", "b"] and not any(r.crashed for r in ran)
    notes = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("timed", "a", "b")}
    assert notes["timed"]["start"] >= max(notes["a"]["end"], notes["b"]["end"])  # alone, after the others
    assert notes["timed"]["cpus"] == sorted(os.sched_getaffinity(0))  # with every core
    if len(os.sched_getaffinity(0)) >= 2:
        assert notes["a"]["met"] and notes["b"]["met"]  # side by side: each saw the other start while it ran
        assert not set(notes["a"]["cpus"]) & set(notes["b"]["cpus"])  # each on cores of its own
    assert "triaging a" in (out / "a" / LOG).read_text()  # several at once: each entry's lines in its log
    said = capfd.readouterr().out
    assert "triaging a" not in said and "== corpus entry a: started" in said
    assert "… corpus: " in said and " entries done; running " in said  # the heartbeat between entries' lines


def test_the_default_is_half_the_cores_at_most_one_per_entry() -> None:
    assert default_entry_jobs(10, cores=2) == 1 and default_entry_jobs(10, cores=16) == 8
    assert default_entry_jobs(3, cores=16) == 3 and default_entry_jobs(0, cores=16) == 1
    assert default_entry_jobs(5, cores=1) == 1


def test_the_table_so_far_is_written_as_each_entry_answers(tmp_path: Path) -> None:
    """A run stopped before its end (a full disk stopped the first whole CPU run at 15 of 21 entries, leaving no
    table) still leaves every row it made, with the entries it did not finish named."""
    truths = _truths(tmp_path / "corpus", "first", "raises", "last")
    header = Header(commit="abc", date="2026-12-07", backend="cpu", entry_jobs=1, wall_seconds=0.0)
    out = tmp_path / "out"
    partial = PartialTable(
        truths, [NotRun(entry="gpu", why="needs CUDA")], "reprobisect corpus", header, start=0.0, out=out
    )
    seen: list[list[str]] = []

    def done(name: str, ran: Ran) -> None:
        partial(name, ran)
        table = json.loads((out / "corpus.json").read_text())
        seen.append([row["entry"] for row in table["rows"]])
        if name == "first":
            waiting = {n["entry"]: n["why"] for n in table["not_run"]}
            assert waiting == {"gpu": "needs CUDA", "raises": UNANSWERED, "last": UNANSWERED}

    ran = run_entries(truths, functools.partial(answer, notes=tmp_path), entry_jobs=1, out=out, done=done)
    assert seen == [["first"], ["first", "raises"], ["first", "raises", "last"]]
    assert [r.row.entry for r in ran] == ["first", "raises", "last"]
    assert "first" in (out / "corpus.md").read_text() and UNANSWERED not in (out / "corpus.md").read_text()
