"""A candidate script run in the bad cell and the good one, and the verdict: does it still tell them apart?

A candidate is *interesting* when, run in the sandbox like any script, it fails in the bad cell with the
original's target (its signature, or ``--expect-signature``) and, given a good cell, does not there: the good
cell must pass when the original passed there, and in any case must not fail the same way. So what the reducer
keeps is still a regression test between two releases, never merely a script that crashes. ENV_ERROR and
TIMEOUT are never interesting: they say nothing of the code.

Every verdict is a small JSON file named by the candidate's hash, written once: a second process (a parallel
reducer forks one per candidate), a second minimization of the same script, and the final report all read the
same answers, and a candidate is never run twice. Runs are ordinary matrix runs in a store of their own, so a
record of each is kept beside the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from reprobisect.config.load import Config
from reprobisect.config.scripts import ReproOptions, script_repro
from reprobisect.minimize.slots import RunSlots
from reprobisect.minimize.statements import Size, size_of
from reprobisect.minimize.static import why_not_runnable
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.sandbox import Confinement
from reprobisect.util.files import write_atomic
from reprobisect.util.stop import in_parallel

__all__ = [
    "CandidateVerdict",
    "CellRun",
    "Cells",
    "FailureTarget",
    "LogEntry",
    "Tester",
    "judge",
    "read_log",
    "text_key",
]

_FAILURES = (Outcome.REPRODUCED.value, Outcome.OTHER_FAILURE.value, Outcome.CRASH.value)


def text_key(text: str) -> str:
    """A candidate's name: the hash of its text."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellRun:
    """One run of a candidate in one cell, as the verdict keeps it."""

    cell: str
    outcome: str
    signature: str | None
    signature_text: str | None
    seconds: float
    reused: bool
    record: str  # the record's file, relative to the minimization's folder

    @property
    def said(self) -> str:
        """The outcome, with the signature when it failed."""
        return (
            f"{self.outcome} {self.signature_text}" if self.signature_text and self.outcome != "PASS" else self.outcome
        )

    @classmethod
    def of(cls, record: Record, reused: bool, folder: Path, store: Store) -> CellRun:
        """The fields a verdict needs from a record."""
        path = store.record_path(record.repro, str(record.cell["id"]), record.form, record.fix, record.repeat)
        return cls(
            cell=str(record.matrix_cell or record.cell.get("id", "")),
            outcome=record.outcome,
            signature=record.signature.id if record.signature else None,
            signature_text=record.signature.text if record.signature else None,
            seconds=round(record.wall_seconds, 2),
            reused=reused,
            record=os.path.relpath(path, folder),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FailureTarget:
    """What the bad cell must show: the original's failure (its outcome and signature id), or REPRODUCED when the
    user named the signature; and what the good cell must show (``PASS`` when the original passed there, else
    anything but the target)."""

    outcome: str
    signature: str | None
    text: str
    expected: bool = False  # --expect-signature: REPRODUCED is the target whatever the signature's id
    good_must_pass: bool = True

    def hit(self, run: CellRun) -> bool:
        """Does ``run`` fail the target's way?"""
        if self.expected:
            return run.outcome == Outcome.REPRODUCED.value
        return run.outcome == self.outcome and run.signature == self.signature


def judge(target: FailureTarget, bad: CellRun, good: CellRun | None) -> tuple[bool, str]:
    """(interesting, why) for a candidate's runs: ``good`` None when there is no good cell (or it was not run
    because the bad cell already said no)."""
    if bad.outcome not in _FAILURES or not target.hit(bad):
        return False, f"bad cell: {bad.said}"
    if good is None:
        return True, f"bad cell: {bad.said}"
    if good.outcome in (Outcome.ENV_ERROR.value, Outcome.TIMEOUT.value):
        return False, f"good cell: {good.outcome}"
    if target.hit(good):
        return False, "good cell fails the same way"
    if target.good_must_pass and good.outcome != Outcome.PASS.value:
        return False, f"good cell: {good.said}"
    return True, f"bad cell: {bad.said}; good cell: {good.said}"


@dataclasses.dataclass(frozen=True)
class LogEntry:
    """One line of the progress log: a verdict as every process wrote it, without its runs."""

    key: str
    interesting: bool
    runs: int  # executed, not taken from the store
    ran: int  # runs it has at all (0: refused without a run)
    size: Size


def read_log(log: Path) -> list[LogEntry]:
    """Every readable line of the progress log ``Tester.keep`` appends to (none when there is no log yet)."""
    entries = []
    with contextlib.suppress(OSError):
        for line in log.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                data = json.loads(line)
                entries.append(
                    LogEntry(
                        key=str(data["key"]),
                        interesting=bool(data["interesting"]),
                        runs=int(data["runs"]),
                        ran=int(data["ran"]),
                        size=Size(lines=int(data["lines"]), tokens=int(data["tokens"])),
                    )
                )
    return entries


@dataclasses.dataclass(frozen=True, kw_only=True)
class CandidateVerdict:
    """A candidate's answer, with what it cost."""

    key: str
    interesting: bool
    why: str
    size: Size
    runs: tuple[CellRun, ...] = ()
    at: float = 0.0  # time.time() when it was known

    @property
    def executed(self) -> int:
        """Runs that really ran (not taken from the store)."""
        return sum(1 for run in self.runs if not run.reused)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        data = dataclasses.asdict(self)
        data["size"] = {"lines": self.size.lines, "tokens": self.size.tokens}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CandidateVerdict:
        """Inverse of :meth:`to_dict` (a file of this folder, written by the harness)."""
        size = data["size"]
        return cls(
            key=str(data["key"]),
            interesting=bool(data["interesting"]),
            why=str(data["why"]),
            size=Size(lines=int(size["lines"]), tokens=int(size["tokens"])),
            runs=tuple(CellRun(**run) for run in data.get("runs", ())),
            at=float(data.get("at", 0.0)),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cells:
    """Where candidates run: the two cells' axes, the form, and everything a matrix run needs."""

    config: Config
    name: str  # the original's repro name; a candidate's is this and its key (a record of its own in the store)
    filename: str  # every candidate is written under the original's file name: tracebacks name it alike
    bad: Mapping[str, str]
    good: Mapping[str, str] | None
    backend: Literal["cuda", "cpu"]
    form: str
    script_args: tuple[str, ...] = ()
    expect: str | None = None
    shim: bool = False
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout: float | None = None
    cpus_per_run: int | None = None
    jobs: int = 1  # candidates at a time: each run gets its share of the cores
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    ctx: RunContext  # where the runs happen: the base interpreter, the cells folder, the environment


def _threads(jobs: int) -> dict[str, str]:
    """Each candidate's share of the cores (``jobs`` run at a time), as a matrix run with ``--jobs`` gives it; the
    user's ``--env OMP_NUM_THREADS`` wins. Not part of the re-check commands: a maintainer runs one at a time."""
    return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // max(1, jobs)))}


class Tester:
    """Judges candidates of one minimization; safe to call from several processes at once (each verdict is a
    file, written whole, and the same candidate always gets the same answer)."""

    def __init__(
        self,
        cells: Cells,
        target: FailureTarget,
        folder: Path,
        original_undefined: frozenset[str],
        sites: Mapping[str, int] | None = None,
    ) -> None:
        self.cells = cells
        self.target = target
        self.folder = folder
        self.store = Store(folder / "runs")
        self.original_undefined = original_undefined
        # where the original set its environment, which every candidate keeps (settings.py); set once the
        # original's traced run says which of them ran
        self.sites: Mapping[str, int] = sites or {}
        self.verdicts = folder / "verdicts"
        self.candidates = folder / "candidates"
        self.log = folder / "progress.jsonl"
        self.slots = RunSlots(folder / "slots", cells.jobs)

    def known(self, text: str) -> CandidateVerdict | None:
        """The verdict already given for ``text`` (by any process), if any."""
        path = self.verdicts / f"{text_key(text)}.json"
        try:
            return CandidateVerdict.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def runnable(self, text: str) -> bool:
        """Whether ``text`` would be run rather than refused (see ``static``), keeping no verdict: a guess the
        search may never ask about leaves no trace in the progress log."""
        return why_not_runnable(text, self.original_undefined, self.sites) is None

    def refused(self, text: str) -> CandidateVerdict | None:
        """A verdict without a run, when the candidate cannot be interesting (see ``static``)."""
        why = why_not_runnable(text, self.original_undefined, self.sites)
        if why is None:
            return None
        return self.keep(
            CandidateVerdict(key=text_key(text), interesting=False, why=why, size=size_of(text), at=time.time())
        )

    def run(self, text: str, *, at_once: bool = False, held: int | None = None) -> CandidateVerdict:
        """Run ``text`` in the bad cell and, when that hits the target, in the good one; keep and return the
        verdict. Both cells at the same time when ``at_once`` (a candidate likely to be interesting, tried while a
        core would otherwise wait) or when two of the run slots are free (``slots``; ``held``: the caller already
        holds that many): the verdict then comes in one run's time, not two."""
        if held is not None:
            return self._run(text, both=at_once or held >= 2)
        with self.slots.taken(self.wanted) as free:
            return self._run(text, both=at_once or free >= 2)

    def run_if_free(self, text: str) -> CandidateVerdict | None:
        """``text``'s verdict when its runs can all start now (two slots free with a good cell, one without), else
        None and no run: a guess at the search's next step must never keep the current one waiting."""
        with self.slots.taken(self.wanted) as free:
            return self._run(text, both=True) if free >= self.wanted else None

    @property
    def wanted(self) -> int:
        """The slots a candidate's runs take when they all start at once."""
        return 1 if self.cells.good is None else 2

    def _run(self, text: str, *, both: bool) -> CandidateVerdict:
        key = text_key(text)
        path = self.candidates / key / self.cells.filename
        if not path.is_file():
            write_atomic(path, text, what="a candidate script")
        good_pins = self.cells.good
        good: CellRun | None = None
        if both and good_pins is not None:  # the good run counts even where the bad cell says no
            bad, good = self.run_both(path, key)
        else:
            bad = self.run_in(path, self.cells.bad, key)
            if good_pins is not None and self.target.hit(bad):
                good = self.run_in(path, good_pins, key)
        interesting, why = judge(self.target, bad, good)
        runs = (bad,) if good is None else (bad, good)
        return self.keep(
            CandidateVerdict(key=key, interesting=interesting, why=why, size=size_of(text), runs=runs, at=time.time())
        )

    def run_both(self, script: Path, key: str) -> tuple[CellRun, CellRun]:
        """``script`` in the bad and the good cell at the same time (there must be a good cell)."""
        assert self.cells.good is not None
        bad, good = in_parallel(lambda pins: self.run_in(script, pins, key), [self.cells.bad, self.cells.good], 2)
        return bad, good

    def run_in(self, script: Path, pins: Mapping[str, str], key: str, *, traced: bool = False) -> CellRun:
        """One matrix run of ``script`` in the cell ``pins`` name (reused from the store when it ran before);
        ``traced``: the run reports the script's lines that ran (a record of its own: the tracer slows it)."""
        cells = self.cells
        name = f"{cells.name[:40]}-{key[:12]}" + ("-lines" if traced else "")
        traces = {"REPROBISECT_TRACE_LINES": "1"} if traced else {}
        options = ReproOptions(
            args=cells.script_args,
            expect=cells.expect,
            shim=cells.shim,
            env={**_threads(cells.jobs), **cells.env, **traces},
            timeout=cells.timeout or None,
        )
        repro = script_repro(script, options, name=name)
        config = dataclasses.replace(cells.config, repros={**cells.config.repros, name: repro})
        request = MatrixRequest(
            repros=(name,),
            backend=cells.backend,
            axes={name: (value,) for name, value in {**cells.config.default_cell, **pins}.items()},
            forms=(cells.form,),
            fixes=("none",),
            timeout=cells.timeout,
            cpus_per_run=cells.cpus_per_run,
            confinement=cells.confinement,
            use_includes=False,
        )
        stats = RunStats()
        ctx = dataclasses.replace(cells.ctx, store=self.store)
        records = run_matrix(config, request, ctx.quiet(), stats=stats)
        if len(records) != 1:
            msg = f"a candidate run in {dict(pins)} gave {len(records)} records, not one"
            raise RuntimeError(msg)
        return CellRun.of(records[0], stats.reused > 0, self.folder, self.store)

    def keep(self, verdict: CandidateVerdict) -> CandidateVerdict:
        """Write ``verdict`` where every process finds it, and a line of it to the progress log."""
        write_atomic(self.verdicts / f"{verdict.key}.json", json.dumps(verdict.to_dict()), what="a verdict")
        line = json.dumps(
            {"key": verdict.key, "interesting": verdict.interesting, "runs": verdict.executed, "ran": len(verdict.runs)}
            | {"at": verdict.at}
            | {"lines": verdict.size.lines, "tokens": verdict.size.tokens, "why": verdict.why[:200]}
        )
        with self.log.open("a", encoding="utf-8") as handle:  # one short line per write: appends do not mix
            handle.write(line + "\n")
        return verdict
