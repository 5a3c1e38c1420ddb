"""minimize's lookahead (issue #41): the chain's next candidate judged beside the current one while slots stand
free, never beyond ``--jobs``; the original's traced run beside its first runs; the plain slice beside the first
wave. Each test fails when the candidate is judged only after the current verdict."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from reprobisect.minimize import original, pipeline
from reprobisect.minimize.candidates import CandidateVerdict, CellRun
from reprobisect.minimize.passes import first_flattened, rewrite_round, sliced_text, without_unused
from reprobisect.minimize.request import Budget, MinimizeRequest
from reprobisect.minimize.slicing import failure_slice
from reprobisect.minimize.slots import RunSlots
from reprobisect.minimize.statements import parse_script, size_of

RESOURCES = Path(__file__).parents[1] / "resources" / "scripts"
LONG = RESOURCES / "minimize" / "gan_bf16_long.py"


class _Tester:
    """Judges texts by a rule, each run taking ``seconds``; remembers verdicts, what ran and the peak of runs at
    once; its slots are real (``RunSlots``), as a guess must find two free."""

    def __init__(self, folder: Path, interesting: Any, jobs: int, seconds: float = 0.05) -> None:
        self.log = folder / "progress.jsonl"
        self.slots = RunSlots(folder / "slots", jobs)
        self.wanted = 2
        self.interesting, self.seconds = interesting, seconds
        self.verdicts: dict[str, CandidateVerdict] = {}
        self.ran: list[str] = []
        self.running = self.peak = 0
        self.lock = threading.Lock()

    def known(self, text: str) -> CandidateVerdict | None:
        return self.verdicts.get(text)

    def refused(self, text: str) -> CandidateVerdict | None:
        return None

    def runnable(self, text: str) -> bool:
        return "undefined" not in text

    def run(self, text: str, *, at_once: bool = False, held: int | None = None) -> CandidateVerdict:
        with self.lock:
            self.ran.append(text)
            self.running += 2
            self.peak = max(self.peak, self.running)
        time.sleep(self.seconds)
        verdict = CandidateVerdict(
            key=str(len(self.ran)), interesting=self.interesting(text), why="", size=size_of(text), at=time.time()
        )
        with self.lock:
            self.running -= 2
            self.verdicts[text] = verdict
        return verdict

    def run_if_free(self, text: str) -> CandidateVerdict | None:
        with self.slots.taken(2) as free:
            return self.run(text, held=free) if free == 2 else None


def _search(tmp_path: Path, jobs: int, interesting: Any) -> tuple[pipeline._Minimization, _Tester]:
    tester = _Tester(tmp_path, interesting, jobs)
    request = MinimizeRequest(script=LONG, bad={"deepspeed": "0.16.5"}, jobs=jobs)
    search = pipeline._Minimization(
        request=request, tester=tester, folder=tmp_path, started=time.monotonic(), runs_before=0, echo=lambda line: None
    )  # type: ignore[arg-type]
    return search, tester


def test_the_next_candidate_is_judged_beside_the_current_one_and_its_verdict_kept(tmp_path: Path) -> None:
    search, tester = _search(tmp_path, 8, lambda text: True)
    start = time.monotonic()
    assert search.judged_text("a = 1\n", True, also=["b = 2\n", None, "a = 1\n"])
    assert time.monotonic() - start < 2 * tester.seconds  # both in one run time
    assert sorted(tester.ran) == ["a = 1\n", "b = 2\n"]
    ran = len(tester.ran)
    assert search.judged_text("b = 2\n", True)  # the chain's next step: known, no run
    assert len(tester.ran) == ran


@pytest.mark.parametrize(("jobs", "ahead"), [(1, 0), (2, 0), (3, 0), (4, 1), (8, 3), (9, 3)])
def test_what_is_judged_ahead_fits_in_the_slots_each_in_both_cells(tmp_path: Path, jobs: int, ahead: int) -> None:
    search, tester = _search(tmp_path, jobs, lambda text: False)
    search.judged_text("x = 0\n", True, also=[f"x = {i}\n" for i in range(1, 6)])
    assert len(tester.ran) == 1 + ahead
    assert tester.peak <= max(2, jobs)


def test_known_and_spent_candidates_are_not_judged_ahead(tmp_path: Path) -> None:
    search, tester = _search(tmp_path, 8, lambda text: True)
    search.judged_text("b = 2\n")
    search.judged_text("a = 1\n", True, also=["b = 2\n"])
    assert tester.ran == ["b = 2\n", "a = 1\n"]
    spent, tester = _search(tmp_path / "spent", 8, lambda text: True)
    spent.request = MinimizeRequest(script=LONG, bad={}, jobs=8, budget=Budget(seconds=0))
    assert not spent.judged_text("a = 1\n", True, also=["b = 2\n"]) and tester.ran == []


def test_the_flattened_script_guessed_ahead_is_the_one_the_rewrite_round_judges_first() -> None:
    text = (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--lr", type=float, default=0.1)\nargs = parser.parse_args()\nscale = 3\n'
        "print(args.lr * scale)\n"
    )
    asked: list[str] = []

    def judged(candidate: str, alone: bool = False) -> bool:
        asked.append(candidate)
        return False

    rewrite_round(text, judged, 8, lambda: "stop", lambda line: None, frozenset(), one_at_a_time=False)
    guessed = first_flattened(text, frozenset())
    assert guessed is not None and asked[0] == guessed and guessed != text
    assert first_flattened("print(1)\n", frozenset()) is None  # nothing flattens: nothing to guess


def _cell_run(cell: str) -> CellRun:
    return CellRun(cell=cell, outcome="PASS", signature=None, signature_text=None, seconds=1, reused=False, record="r")


@pytest.mark.parametrize(
    ("jobs", "good", "expected"),
    [
        (1, True, [("bad", False)]),
        (2, True, [("bad", False), ("good", False)]),
        (3, True, [("bad", False), ("good", False), ("bad", True)]),
        (2, False, [("bad", False), ("bad", True)]),
    ],
)
def test_the_originals_traced_run_goes_beside_its_first_runs_when_a_slot_is_left(
    jobs: int, good: bool, expected: list[tuple[str, bool]]
) -> None:
    asked: list[tuple[str, bool]] = []
    lock = threading.Lock()

    class Probe:
        cells = type("C", (), {"bad": {"x": "bad"}, "good": {"x": "good"} if good else None, "jobs": jobs})()

        def run_in(self, path: Path, pins: Mapping[str, str], key: str, *, traced: bool = False) -> CellRun:
            with lock:
                asked.append((pins["x"], traced))
            return _cell_run(pins["x"])

    bad, early_good = original._first_runs(Probe(), Path("issue.py"), "k")  # type: ignore[arg-type]
    assert sorted(asked) == sorted(expected)
    assert bad.cell == "bad" and (early_good.cell if early_good else None) == (
        "good" if len(expected) > 1 and good else None
    )


SLICED = """import os
a = 1
b = [a]
if os.sep:
    c = b[0]
    assert c == 2, "boom"
print("unrelated")
"""


@pytest.mark.parametrize(("jobs", "plain_judged"), [(2, False), (8, True)])
def test_the_plain_slice_is_judged_beside_the_first_wave_only_with_room_for_both(jobs: int, plain_judged: bool) -> None:
    asked: list[str] = []
    lock = threading.Lock()

    def judged(text: str, alone: bool = False) -> bool:
        with lock:
            asked.append(text)
        return True

    plain = failure_slice(SLICED, (6,))
    first = {failure_slice(SLICED, (6,), unwrap=True, module_calls=False), failure_slice(SLICED, (6,), unwrap=True)}
    assert plain is not None and plain not in first  # the waves differ here, or the test says nothing
    result = sliced_text(SLICED, judged, (6,), jobs, lambda line: None)
    assert result in {without_unused(t) for t in first if t is not None}  # the first wave still wins
    assert (without_unused(plain) in asked) is plain_judged


def test_a_guess_waits_for_no_slot_and_never_runs_without_two(tmp_path: Path) -> None:
    search, tester = _search(tmp_path, 4, lambda text: True)
    with tester.slots.taken(2):  # another candidate runs
        search.judged_text("a = 1\n", also=["b = 2\n"])
    assert tester.ran == ["a = 1\n"]  # two slots for "a", none left for the guess: not run, not judged


LEVEL = """import os
a = 1
b = 2
c = 3
print(a)
"""


def test_a_levels_worker_guesses_its_candidate_with_one_more_statement_of_the_level_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = parse_script(LEVEL)
    search, tester = _search(tmp_path, 8, lambda text: True)
    search.parent = -1  # every call is a forked worker's
    monkeypatch.setattr(pipeline.signal, "signal", lambda *args: None)
    interesting, _ = search.reducer(script, prunes=False)
    search.on_level(0, len(script.units), 1)
    c = next(u.id for u in script.units if script.text(frozenset({u.id})) == LEVEL.replace("c = 3\n", ""))
    assert interesting(frozenset({c}))
    guesses = tester.ran[1:]
    assert tester.ran[0] == script.text(frozenset({c})) and len(guesses) == 3  # (8 - 1) // 2 in both cells
    first_three = [u.id for u in script.units if u.id != c][:3]  # the level's order, the candidate's unit skipped
    assert set(guesses) == {script.text(frozenset({c, u})) for u in first_three}
    search.on_level(-1, 0, 1)  # the groups: no guesses there
    tester.ran.clear()
    last = script.units[-1].id
    interesting(frozenset({c, last}))
    assert tester.ran == [script.text(frozenset({c, last}))]


def test_with_no_slot_free_for_a_guess_none_is_even_made(tmp_path: Path) -> None:
    search, tester = _search(tmp_path, 8, lambda text: True)
    made: list[int] = []

    def guesses() -> Iterator[str]:
        for i in range(5):
            made.append(i)
            yield f"b = {i}\n"

    with tester.slots.taken(6):  # six runs of other workers: two left, the candidate's own
        search.judged_text("a = 1\n", also=guesses())
    assert made == [] and tester.ran == ["a = 1\n"]


def test_a_guess_that_would_be_refused_is_skipped_and_leaves_no_verdict(tmp_path: Path) -> None:
    search, tester = _search(tmp_path, 8, lambda text: True)
    search.judged_text("a = 1\n", True, also=["print(undefined)\n", "b = 2\n"])
    assert sorted(tester.ran) == ["a = 1\n", "b = 2\n"]
    assert tester.known("print(undefined)\n") is None
