"""The run phase of a matrix run: every unit that can start, ``jobs`` at a time, each run's record kept.

Units run ``jobs`` at a time: on the CPU each job gets its share of the cores, on a GPU host each job gets its
own GPU through CUDA_VISIBLE_DEVICES. A unit already on record is taken from the store unless ``fresh`` is
asked for. A patch fix runs once the unpatched runs of its cell and form are done, and only where they imported
what the patch changes.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping, Sequence

from packaging.utils import canonicalize_name

from reprobisect.cells.patches import patched_paths
from reprobisect.errors import ToolError
from reprobisect.model.classify import known_name
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.repro import Backend
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_build import Prepared
from reprobisect.run.matrix_plan import Unit
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.util.cmd import run_tool
from reprobisect.util.console import WIDTH, cut, plural
from reprobisect.util.echo import Echo
from reprobisect.util.stop import in_parallel_growing

__all__ = ["ProgressLine", "gpu_count", "job_cpus", "run_units"]


class _Progress:
    """One line per finished unit: ``[done/total, n running] what: outcome (stored) signature``, at most the
    console's width. The verdict is never cut: the signature goes first, then the middle of what ran."""

    def __init__(self, total: int, echo: Echo) -> None:
        self.total, self.done, self.running, self.echo = total, 0, 0, echo
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self.running += 1

    def drop(self, count: int) -> None:
        """``count`` announced units will not run (patches whose form never imports what they change)."""
        with self.lock:
            self.total -= count

    def finish(self, line: ProgressLine) -> None:
        with self.lock:
            self.running -= 1
            self.done += 1
            running = f", {self.running} running" if self.running else ""
            self.echo(line.fitted(f"[{self.done}/{self.total}{running}] ", WIDTH))


def run_units(
    units: Sequence[Unit],
    prepared: Prepared,
    request: MatrixRequest,
    ctx: RunContext,
    *,
    backend: Backend,
    stats: RunStats,
) -> list[Record]:
    """Run ``units`` (all of which can start) in ``prepared``; one record each, in the units' order.

    A patch unit waits for the unpatched units of its cell and form, and runs only when they showed that the form
    imports what the patch changes (``_applicable``); it then starts before the unpatched units of other cells and
    forms not started yet. The counter starts at every unit, as the run announced them, and loses those that will
    not run once that is known: ``[1/6]`` … ``[4/6]``, then ``[5/5]`` when one patch does not apply.
    """
    order = {id(unit): index for index, unit in enumerate(units)}
    plain = [u for u in units if u.fix.patch is None]
    patches = _Patches([u for u in units if u.fix.patch is not None], plain, ctx.echo)
    progress = _Progress(len(units), ctx.echo)  # what the run announced; a patch found not applicable leaves it
    with_cell = len({unit.cell.id for unit in units}) > 1
    batch = _Batch(prepared, request, ctx, backend=backend, stats=stats, progress=progress, with_cell=with_cell)

    def then(unit: Unit, record: Record) -> list[Unit]:
        released, skipped = patches.after(unit, record)
        progress.drop(skipped)
        stats.not_applicable += skipped
        return released

    ran = batch.run([*plain, *patches.ready], then)
    return [record for _, record in sorted(ran, key=lambda pair: order[id(pair[0])])]


class _Patches:
    """The patch units of a run, each waiting for the unpatched units of its cell and form (its leaders)."""

    def __init__(self, patched: list[Unit], plain: list[Unit], echo: Echo) -> None:
        self.echo, self.said, self.total, self.skipped = echo, set[tuple[str, str]](), len(patched), 0
        self.leaders: dict[tuple[str, str], list[Unit]] = {}
        for unit in plain:
            self.leaders.setdefault(_group(unit), []).append(unit)
        self.waiting: dict[tuple[str, str], list[Unit]] = {}
        self.ready: list[Unit] = []  # no unpatched unit to wait for, nothing to learn from: they run
        for unit in patched:
            if _group(unit) in self.leaders:
                self.waiting.setdefault(_group(unit), []).append(unit)
            else:
                self.ready.append(unit)
        self.records: dict[int, Record] = {}

    def after(self, unit: Unit, record: Record) -> tuple[list[Unit], int]:
        """The patch units ``unit``'s end releases (when it was the last of their leaders) that will run, and how
        many it released that will not (their form never imports what they change)."""
        group = _group(unit)
        if unit.fix.patch is not None or group not in self.waiting:
            return [], 0
        self.records[id(unit)] = record
        leaders = self.leaders[group]
        if any(id(leader) not in self.records for leader in leaders):
            return [], 0
        candidates = self.waiting.pop(group)
        kept = _applicable(candidates, self.records, leaders, self.echo, self.said)
        self.skipped += len(candidates) - len(kept)
        if not self.waiting and self.total:
            ran, skipped = self.total - self.skipped, self.skipped
            tail = f" ({skipped} not applicable, not run)" if skipped else ""
            self.echo(f"{plural(ran, 'patched run')} in all{tail}")
        return kept, len(candidates) - len(kept)


def _group(unit: Unit) -> tuple[str, str]:
    return unit.cell.id, unit.form.name


class _Batch:
    """Runs units over ``request.jobs`` job slots: each slot its GPU or share of the cores."""

    def __init__(
        self,
        prepared: Prepared,
        request: MatrixRequest,
        ctx: RunContext,
        *,
        backend: Backend,
        stats: RunStats,
        progress: _Progress,
        with_cell: bool,
    ) -> None:
        self.prepared, self.request, self.ctx, self.backend = prepared, request, ctx, backend
        self.stats, self.progress, self.with_cell = stats, progress, with_cell
        self.lock = threading.Lock()

    def run(self, first: list[Unit], then: Callable[[Unit, Record], list[Unit]]) -> list[tuple[Unit, Record]]:
        """Each unit of ``first``, and those ``then`` adds, with its record, ``request.jobs`` at a time."""
        request, backend = self.request, self.backend
        per_run = request.cpus_per_run if request.cpus_per_run is not None else (1 if backend == "cuda" else 0)
        allowed = _allowed_cpus()
        gpus = gpu_count() if backend == "cuda" and request.jobs > 1 else 0
        slots: list[int] = list(range(max(1, request.jobs)))

        def run(unit: Unit) -> Record:
            with self.lock:
                slot = slots.pop()
            try:
                spec = RunSpec(
                    repro=unit.repro,
                    form=unit.form,
                    fix=unit.fix,
                    env=self.prepared.env(unit),
                    repeat=unit.repeat,
                    timeout=request.timeout,
                    overlay=self.prepared.overlays.get((unit.cell.id, unit.fix.name)),
                    extra_env=_job_env(slot, request.jobs, backend, gpus),
                    cpus=job_cpus(slot, request.jobs, per_run, allowed),
                    jobs=max(1, request.jobs),
                    sandbox=self.prepared.sandbox,
                    matrix_cell=unit.matrix_cell,
                    nproc=unit.nproc,
                    rerun=unit.rerun,
                    tools=self.prepared.tools.get(unit.cell.id, ()) if unit.form.pytest else (),
                )
                return self._one(unit, spec, with_cell=self.with_cell)
            finally:
                with self.lock:
                    slots.append(slot)

        return in_parallel_growing(run, first, max(1, request.jobs), then)

    def _one(self, unit: Unit, spec: RunSpec, *, with_cell: bool) -> Record:
        """The unit's stored record (unless ``fresh``) or a new run's, counted and shown."""
        ctx = self.ctx
        self.progress.start()
        stored = (
            None
            if self.request.fresh
            else ctx.store.find(spec.key, unit.repro.name, spec.cell_id, unit.form.name, unit.fix.name, unit.repeat)
        )
        record = stored or execute(spec, ctx.store, environ=ctx.environ, echo=lambda line: ctx.echo(cut(line, WIDTH)))
        with self.lock:
            if stored is None:
                self.stats.executed += 1
            else:
                self.stats.reused += 1
        self.progress.finish(_describe(record, unit, stored is not None, with_cell=with_cell))
        return record


def _imports(record: Record) -> set[str] | None:
    """Distributions a run imported, as its own report said (None when it never got to say)."""
    if record.versions_source == "installed" or record.outcome == Outcome.ENV_ERROR.value:
        return None
    return {canonicalize_name(name) for name in record.versions}


def _applicable(
    patched: list[Unit], done: Mapping[int, Record], plain: list[Unit], echo: Echo, said: set[tuple[str, str]]
) -> list[Unit]:
    """The patch units worth running: a patch whose packages the form never imports in this cell (a Lightning
    patch on the pure-DeepSpeed form) cannot change its outcome, so it is said once and not run. Known from
    the run of an unpatched fix of the same cell and form (``none`` first); without one, the unit runs."""
    imported: dict[tuple[str, str], set[str]] = {}
    for unit in plain:
        found = _imports(done[id(unit)])
        if found is not None:
            imported.setdefault((unit.cell.id, unit.form.name), set()).update(found)
    kept: list[Unit] = []
    for unit in patched:
        assert unit.fix.patch is not None
        seen = imported.get((unit.cell.id, unit.form.name))
        touched = sorted({path.parts[0] for path in patched_paths(unit.fix.patch, unit.fix.patch_strip)})
        if seen is None or any(canonicalize_name(top) in seen for top in touched):
            kept.append(unit)
            continue
        if (unit.form.name, unit.fix.name) not in said:
            said.add((unit.form.name, unit.fix.name))
            echo(
                f"{unit.repro.name} {unit.form.name} {unit.fix.name}: not applicable, not run — the form never "
                f"imports {', '.join(touched)}, which the patch changes"
            )
    return kept


@dataclasses.dataclass(frozen=True)
class ProgressLine:
    """A finished unit as its progress line says it: where (the cell, when there are several), what ran, the
    verdict, the signature."""

    what: str
    verdict: str
    label: str = ""
    where: str = ""

    def fitted(self, prefix: str, width: int) -> str:
        """``prefix where what: verdict label`` in ``width`` characters. Cut first: the label, then the middle of
        ``where`` (a long cell id), then the end of ``what``; the verdict (outcome, stored or seconds) is kept
        whole, the width notwithstanding.
        Why: a cut that took "(stored)" off the end made a reused record read as a new run (CI, 2026-12-05)."""
        verdict = f": {cut(self.verdict, 10**6)}"  # never cut
        room = max(0, width - len(prefix) - len(verdict))
        what = cut(self.what, max(1, room))
        where = _cut_middle(cut(self.where, 10**6), room - len(what) - 1) if self.where else ""
        head = f"{prefix}{where} {what}" if where else f"{prefix}{what}"
        rest = width - len(head) - len(verdict) - 1
        label = cut(self.label, rest) if self.label and rest >= 12 else ""  # shorter than that says nothing
        return f"{head}{verdict}" + (f" {label}" if label else "")


def _cut_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle replaced by "…" (a cell id's ends say the most)."""
    if len(text) <= width:
        return text
    if width < 3:
        return ""
    keep = width - 1
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2 :]


def _describe(record: Record, unit: Unit, reused: bool, *, with_cell: bool) -> ProgressLine:
    sig = record.signature
    label = f"{sig.id} {known_name(record) or sig.text}" if sig else ""
    stored = "(stored)" if reused else f"[{record.wall_seconds:.1f} s]"
    where = f"{unit.cell.id} " if with_cell else ""
    outcome = Outcome(record.outcome)
    return ProgressLine(
        where=where.strip(),
        what=f"{unit.repro.name} {unit.form.name} {unit.fix.name}",
        verdict=f"{outcome.glyph} {outcome.value} {stored}",
        label=label,
    )


def gpu_count() -> int:
    """GPUs this host shows (nvidia-smi -L), 0 without a driver."""
    try:
        done = run_tool(["nvidia-smi", "-L"], what="counting GPUs", timeout=30, check=False)
    except ToolError:
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def _job_env(slot: int, jobs: int, backend: str, gpus: int) -> dict[str, str]:
    """Each parallel job's share: its own GPU on a GPU host (shared round-robin when jobs > GPUs),
    its share of the cores on the CPU."""
    if jobs <= 1:
        return {}
    threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // jobs))}
    if backend == "cuda" and gpus > 0:
        return {**threads, "CUDA_VISIBLE_DEVICES": str(slot % gpus)}
    return threads


def job_cpus(slot: int, jobs: int, per_run: int, allowed: Sequence[int]) -> tuple[int, ...]:
    """The cores job slot ``slot``'s runs are pinned to: ``per_run`` cores of its own, the harness keeping the
    first allowed core when there are more cores than the jobs need; () when pinning is off.

    Why: a small model's GPU step is bound by the host. Unpinned, three repeats of one H200 cell had median
    steps 12.7 % apart (coefficient of variation); with the run on one core of its own, 2.2 %.
    """
    cores = sorted(allowed)
    if per_run <= 0 or not cores:
        return ()
    spare = cores[1:] if len(cores) > jobs * per_run else cores
    start = slot * per_run
    return tuple(sorted({spare[(start + i) % len(spare)] for i in range(min(per_run, len(spare)))}))


def _allowed_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: no pinning
        return []
