"""Slurm as the engine of a matrix run: one job per cell, the cells of one ``run_matrix`` call (a matrix, a wave of
bisection probes, a nightly slice) as one job array, through submitit.

Why submitit: it is the kept library that already does every engine step the harness needs — it pickles a Python
call and its arguments onto the shared folder, submits them as one ``sbatch --array``, learns each job's end from
``sacct`` (its own watcher, which batches the calls and backs off), and cancels with ``scancel``. The harness adds
only what is its own: which cells go, what a lost job means for the records, and one requeue.

Each job runs ``run_matrix`` for its one cell on its node (its context's ``executor`` None: threads and processes
there), writing records into the shared store, and returns them. A job Slurm lost (its node failed, it hit its time
limit, someone cancelled it, the OOM killer took it) returns nothing: its runs without a record become ENV_ERROR
records that name the job and its ``sacct`` state, and the cell is submitted once more; runs the job finished keep
their records, and the requeued job reuses them as any re-run does. A harness error inside a job (a bad patch, say)
is raised here as it would be locally. Ctrl-C or SIGTERM cancels every job this run submitted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import re
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.envs import CellEnv
from reprobisect.config.load import Config
from reprobisect.errors import ConfigError, EngineError, HarnessError, NothingToDoError, RecordError
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_build import unrun_record
from reprobisect.run.matrix_plan import Unit, listed_cells, plan_matrix, to_cell
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.one_run import RunSpec
from reprobisect.util.cmd import run_tool
from reprobisect.util.echo import Echo
from reprobisect.util.redact import redact, register_secret, secret_values

if TYPE_CHECKING:  # the names of types only: submitit itself is imported when a Slurm engine runs
    import submitit

__all__ = ["LOST", "SlurmExecutor", "SlurmOptions", "slurm_arg", "slurm_available"]

LOST = "SlurmJobLost"  # the signature's exception of a run whose job Slurm lost: ENV_ERROR, never a verdict
_KEY = re.compile(r"[a-z][a-z0-9-]*")
# sbatch options the engine sets itself: given with --slurm-arg they would contradict it
_OWN = frozenset({"array", "output", "error", "open-mode", "signal", "job-name", "parsable"})
# sbatch options that would run something else than the harness's job: a command of their own (--wrap), a script
# or program run on the submitting host or the node around the job
_FOREIGN = frozenset({"wrap", "export-file", "container", "prolog", "epilog", "task-prolog", "task-epilog", "chdir"})


def slurm_arg(text: str) -> tuple[str, str | bool]:
    """``--slurm-arg KEY=VALUE`` (or a bare ``KEY`` flag) as one sbatch option; refused when it would not be one
    (a value with a line break would add lines to the job's script)."""
    key, sep, value = text.partition("=")
    if not _KEY.fullmatch(key):  # "-w", "--wrap=…": the key is given without dashes, an option never
        msg = (
            f"--slurm-arg {text[:80]!r}: expected an sbatch option as KEY=VALUE or KEY without dashes, e.g. "
            "'qos=high' or 'exclusive'"
        )
        raise ConfigError(msg)
    if key in _FOREIGN:
        msg = f"--slurm-arg {key}: sbatch's --{key} runs something other than the harness's job; not passed on"
        raise ConfigError(msg)
    if key in _OWN:
        msg = f"--slurm-arg {text[:80]!r}: the harness sets --{key} itself (one job array per wave, its own logs)"
        raise ConfigError(msg)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        msg = f"--slurm-arg {key}=…: the value holds a control character; sbatch options are one line"
        raise ConfigError(msg)
    return key, (value if sep else True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """What passes through to Slurm for every job of a run."""

    partition: str | None = None
    account: str | None = None
    time_minutes: int = 60  # each cell's job: its builds and all its runs
    constraint: str | None = None
    cpus_per_job: int | None = None  # None: the cluster's default (one core); the runs of a job share them
    extra: Mapping[str, str | bool] = dataclasses.field(default_factory=dict)  # --slurm-arg KEY=VALUE
    folder: Path | None = None  # submitit's pickles and the jobs' logs; None: <out>/slurm (shared with the records)
    poll_seconds: float = 2.0  # how often finished jobs are looked for; sacct is asked at submitit's own pace

    def parameters(self, gpus: int) -> dict[str, Any]:
        """submitit's SlurmExecutor parameters for a job that needs ``gpus`` GPUs (0: none asked)."""
        params: dict[str, Any] = {"job_name": "reprobisect", "time": self.time_minutes}
        for name, value in (("partition", self.partition), ("account", self.account), ("constraint", self.constraint)):
            if value:
                params[name] = value
        if self.cpus_per_job:
            params["cpus_per_task"] = self.cpus_per_job
        if gpus:
            params["gres"] = f"gpu:{gpus}"
        if self.extra:
            params["additional_parameters"] = dict(self.extra)
        return params


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Payload:
    """What every job of a run gets (pickled once per job by submitit onto the shared folder)."""

    config: Config
    request: MatrixRequest
    base: BaseInterpreter
    store_root: Path
    envs_dir: Path
    environ: dict[str, str]
    # The user's secrets (util/redact.py): the job's process redacts what it writes and prints as the submitter does
    secrets: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _JobResult:
    records: list[Record]
    stats: RunStats
    seconds: float  # inside the job, for the engine's overhead: the rest of a job's wall time is Slurm's and ours
    error: HarnessError | None = None


def run_cell_job(payload: _Payload, cell: str) -> _JobResult:
    """The body of one job, on its node: ``run_matrix`` for one cell with this machine's threads and processes.

    Slurm stops a job (``scancel``, its time limit, preemption) with SIGTERM to every process of the job, the
    repro's child included, which would die of it: a CRASH that is the engine's doing. So SIGTERM here stops the
    runs as Ctrl-C does (a stopped run leaves no record), a record that still ended after it is removed, and the
    job leaves no result: its end is Slurm's to say (``sacct``), and the submitter makes it ENV_ERROR.
    """
    start = time.perf_counter()
    stats = RunStats()
    store = Store(payload.store_root)
    stopped: list[float] = []

    def on_term(signum: int, frame: object) -> None:
        stopped.append(time.time())
        raise KeyboardInterrupt

    def echo(line: str) -> None:
        print(redact(line), flush=True)  # the job's log (submitit's stdout file), as the terminal would show it

    signal.signal(signal.SIGTERM, on_term)
    for secret in payload.secrets:
        register_secret(secret)
    try:
        ctx = RunContext(base=payload.base, store=store, envs_dir=payload.envs_dir, environ=payload.environ, echo=echo)
        records = run_matrix(payload.config, payload.request, ctx, cells=(cell,), stats=stats)
    except HarnessError as exc:  # raised where the run was asked for, as a local run raises it
        return _JobResult(records=[], stats=stats, seconds=time.perf_counter() - start, error=exc)
    except KeyboardInterrupt:
        if not stopped:
            raise
        records = []
    if stopped:
        _unsay(store, cell, stopped[0])
        echo("stopped by Slurm (SIGTERM): no result; the submitter reads why from sacct")
        os._exit(128 + signal.SIGTERM)  # no result pickle: a result would say the job finished
    return _JobResult(records=records, stats=stats, seconds=time.perf_counter() - start)


def _unsay(store: Store, cell: str, since: float) -> None:
    """Remove this cell's records of runs that ended once Slurm had begun to stop the job (to the second, so a run
    that ended just before is run again, never the other way round): their children got Slurm's SIGTERM too."""
    moment = dt.datetime.fromtimestamp(int(since), dt.UTC).isoformat(timespec="seconds")
    for record in store.iter_records():
        row = record.matrix_cell or ""
        if (row == cell or row.startswith(f"{cell}_nproc-")) and record.finished_at >= moment:
            path = store.record_path(record.repro, record.cell["id"], record.form, record.fix, record.repeat)
            path.unlink(missing_ok=True)


@dataclasses.dataclass
class _Lost:
    job_id: str
    reason: str


class SlurmExecutor:
    """Runs each cell of a ``run_matrix`` call as one job of a Slurm job array (``RunContext.executor``)."""

    def __init__(self, options: SlurmOptions, *, echo: Echo = print) -> None:
        self.options = options
        self.echo = echo
        self.lost: list[str] = []  # every loss of this session, said again at its end
        self.overheads: list[float] = []  # per job: wall time from submission to result, less the time inside

    def run_matrix(
        self,
        config: Config,
        request: MatrixRequest,
        ctx: RunContext,
        *,
        cells: Sequence[str],
        stats: RunStats | None,
    ) -> list[Record]:
        """One record per unit, as ``run_matrix`` returns them: cells nothing can build run here (their
        records need no node), every other cell is a job."""
        ctx = dataclasses.replace(ctx, envs_dir=ctx.envs_dir.resolve())
        base, store, echo = ctx.base, ctx.store, ctx.echo
        listed = listed_cells(config, request, base, ctx.envs_dir)
        if cells:
            listed = [c for c in listed if c["cell"] in cells]
            if not listed:
                msg = f"--cell {', '.join(cells)}: no such cell; list them with --list"
                raise NothingToDoError(msg)
        jobs = [c["cell"] for c in listed if c["status"] == "ok"]
        unbuildable = [c["cell"] for c in listed if c["status"] != "ok"]
        records: list[Record] = []
        if unbuildable:
            records += run_matrix(config, request, ctx, cells=unbuildable, stats=stats)
        if not jobs:
            return records
        units = plan_matrix(config, request, ctx, cells=jobs).units  # what a lost job's ENV_ERROR records name
        by_cell: dict[str, list[Unit]] = {cell: [] for cell in jobs}
        for unit in units:
            planned = to_cell(unit.planned, base)[0]
            if planned is not None and planned.id in by_cell:
                by_cell[planned.id].append(unit)
        payload = _Payload(
            config=config,
            request=request,
            base=base,
            store_root=store.root,
            envs_dir=ctx.envs_dir,
            environ=dict(ctx.environ),
            secrets=secret_values(),
        )
        done = self._run_with_requeue(payload, by_cell, store, stats if stats is not None else RunStats(), echo)
        for cell in jobs:
            records += done[cell]
        return records

    def _run_with_requeue(
        self, payload: _Payload, by_cell: dict[str, list[Unit]], store: Store, stats: RunStats, echo: Echo
    ) -> dict[str, list[Record]]:
        """Every cell's records: a wave, then the cells whose jobs were lost once more; lost twice is ENV_ERROR."""
        started = time.time()
        done, lost = self._wave(payload, list(by_cell), by_cell, stats, echo, attempt=1)
        if not lost:
            return done
        written: dict[str, list[Record]] = {}
        for cell, loss in lost.items():
            text = f"Slurm job {loss.job_id} was lost: {loss.reason}"
            self.lost.append(f"{cell}: {text}; requeued once")
            echo(f"cell {cell}: {text} — its unfinished runs are ENV_ERROR; requeued once")
            written[cell] = self._lost_records(payload, by_cell[cell], store, text, started)
        again, lost_again = self._wave(payload, list(lost), by_cell, stats, echo, attempt=2)
        for cell, records in again.items():
            _drop_stale(store, written[cell], records)
            done[cell] = records
        for cell, loss in lost_again.items():
            text = f"Slurm job {loss.job_id} was lost again after one requeue: {loss.reason}"
            self.lost.append(f"{cell}: {text}")
            echo(f"cell {cell}: {text} — its unfinished runs stay ENV_ERROR")
            done[cell] = self._lost_records(payload, by_cell[cell], store, text, started)
        return done

    def _wave(
        self,
        payload: _Payload,
        cells: list[str],
        by_cell: Mapping[str, list[Unit]],
        stats: RunStats,
        echo: Echo,
        *,
        attempt: int,
    ) -> tuple[dict[str, list[Record]], dict[str, _Lost]]:
        """Submit one job per cell (one array per GPU count), wait for all, and sort them into done and lost."""
        folder = self.options.folder or payload.store_root / "slurm"
        executor = _submitit().SlurmExecutor(folder=folder / "%j", max_num_timeout=0)
        groups: dict[int, list[str]] = {}
        for cell in cells:
            groups.setdefault(_gpus(payload.request, by_cell[cell]), []).append(cell)
        submitted: list[tuple[str, submitit.Job[_JobResult], float]] = []
        done: dict[str, list[Record]] = {}
        lost: dict[str, _Lost] = {}
        error: HarnessError | None = None
        try:
            for gpus, group in groups.items():
                executor.update_parameters(**self.options.parameters(gpus))
                submitted += self._submit(executor, payload, group)
            ids = sorted({job.job_id.split("_")[0] for _, job, _ in submitted})
            where = f"partition {self.options.partition}" if self.options.partition else "the default partition"
            again = " (requeue)" if attempt > 1 else ""
            echo(f"Slurm{again}: {len(cells)} cell(s) as job array(s) {', '.join(ids)} on {where}")
            cell_of = {job.job_id: (cell, sent) for cell, job, sent in submitted}
            finished = 0
            for job in _submitit().helpers.as_completed(
                [job for _, job, _ in submitted], poll_frequency=self.options.poll_seconds
            ):
                cell, sent = cell_of[job.job_id]
                finished += 1
                outcome = _collect(job)
                if isinstance(outcome, _Lost):
                    lost[cell] = outcome
                    echo(f"[{finished}/{len(submitted)}] cell {cell}: job {job.job_id} {outcome.reason}")
                    continue
                self.overheads.append(max(0.0, time.time() - sent - outcome.seconds))
                if outcome.error is not None:
                    error = error or outcome.error
                    continue
                done[cell] = outcome.records
                stats.executed += outcome.stats.executed
                stats.reused += outcome.stats.reused
                stats.not_applicable += outcome.stats.not_applicable
                echo(
                    f"[{finished}/{len(submitted)}] cell {cell}: job {job.job_id} done in {outcome.seconds:.1f} s, "
                    f"{_tally(outcome.records)}"
                )
        except BaseException:  # Ctrl-C, SIGTERM (a timeout), an error: no job of ours outlives this run
            _cancel([job for _, job, _ in submitted], echo)
            raise
        if error is not None:
            raise error
        return done, lost

    def _submit(
        self, executor: submitit.SlurmExecutor, payload: _Payload, cells: list[str]
    ) -> list[tuple[str, submitit.Job[_JobResult], float]]:
        sent = time.time()
        try:
            with executor.batch():
                jobs = [executor.submit(run_cell_job, payload, cell) for cell in cells]
        except (OSError, RuntimeError) as exc:  # sbatch missing or refusing (a wrong partition, account, option)
            msg = f"Slurm refused the jobs: {str(exc).strip()[-600:]}; check --slurm-partition/-account/-arg"
            raise EngineError(msg) from exc
        return [(cell, job, sent) for cell, job in zip(cells, jobs, strict=True)]

    def _lost_records(
        self, payload: _Payload, units: list[Unit], store: Store, reason: str, since: float
    ) -> list[Record]:
        """The records of a lost job's cell: the ones it (or the store) already has, ENV_ERROR for the rest."""
        records = []
        for unit in units:
            found = _stored(payload, unit, store, since)
            records.append(found or unrun_record(unit, reason, store, kind=LOST))
        return records

    def summary(self) -> Iterator[str]:
        """Lines for the end of a run: the engine's losses and its overhead per job."""
        if self.overheads:
            yield (
                f"Slurm: {len(self.overheads)} job(s); harness and engine overhead per job (queue, start, pickles, "
                f"sacct) median {statistics.median(self.overheads):.1f} s"
            )
        for line in self.lost:
            yield f"Slurm lost {line}"


def _gpus(request: MatrixRequest, units: Sequence[Unit]) -> int:
    """GPUs a cell's job asks for: on the cuda backend each of its ``--jobs`` parallel runs gets ``nproc`` of its
    own; none otherwise (``--backend auto`` decides on the node and asks for none: say ``--backend cuda``)."""
    if request.backend != "cuda":
        return 0
    return max((unit.nproc for unit in units), default=1) * max(1, request.jobs)


def slurm_available() -> None:
    """Nothing when Slurm can take jobs from here; else ``EngineError`` (exit 11), one line saying what is missing.

    Checked when the engine is made, before anything is built: ``--executor slurm`` on a machine without ``sbatch``
    (or without submitit) used to fail deep inside the first wave with a traceback."""
    missing = [tool for tool in ("sbatch", "sacct") if shutil.which(tool) is None]
    if missing:
        msg = f"--executor slurm: {' and '.join(missing)} not found on PATH; Slurm is not installed here"
        raise EngineError(msg)
    try:
        _submitit()
    except ImportError as exc:
        msg = f"--executor slurm needs submitit, which cannot be imported here ({str(exc)[:120]}); install it"
        raise EngineError(msg) from exc


def _submitit() -> Any:
    """submitit, imported when a Slurm engine runs (not when the harness starts: a checkout run with
    ``PYTHONPATH=src`` on a GPU node without submitit runs every local command)."""
    import submitit  # on first use, see above
    import submitit.helpers

    return submitit


def _collect(job: submitit.Job[_JobResult]) -> _JobResult | _Lost:
    """A finished job's result, or why Slurm lost it (its sacct state and node)."""
    from submitit.core.utils import FailedJobError, UncompletedJobError  # see _submitit

    try:
        return job.result()
    except UncompletedJobError:
        info = job.get_info(mode="force")
        state = info.get("State") or job.state
        node = info.get("NodeList") or "no node"
        return _Lost(job_id=job.job_id, reason=f"{state} on {node} (sacct)")
    except FailedJobError as exc:  # the job's Python died of something no harness error covers: a bug, not Slurm
        msg = f"Slurm job {job.job_id}: the harness failed inside the job; its log says:\n{str(exc)[-1500:]}"
        raise EngineError(msg) from exc


def _stored(payload: _Payload, unit: Unit, store: Store, since: float) -> Record | None:
    """The record the store holds for exactly this unit (the local reuse rule), written since ``since`` with
    ``--fresh``; None when the run still needs one."""
    spec = RunSpec(
        repro=unit.repro,
        form=unit.form,
        fix=unit.fix,
        env=CellEnv(cell=unit.cell, path=payload.envs_dir / unit.cell.id, reused=True, build_seconds=0.0),
        repeat=unit.repeat,
        nproc=unit.nproc,
    )
    found = store.find(spec.key, unit.repro.name, spec.cell_id, unit.form.name, unit.fix.name, unit.repeat)
    if found is None or found.outcome == Outcome.ENV_ERROR.value:
        return None
    if payload.request.fresh:
        path = store.record_path(unit.repro.name, spec.cell_id, unit.form.name, unit.fix.name, unit.repeat)
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < since:
                return None
    return found


def _drop_stale(store: Store, written: Sequence[Record], kept: Sequence[Record]) -> None:
    """After a requeue that finished, remove the ENV_ERROR records of the loss that no run replaced (a patch fix
    the requeued job found not applicable): they would name a loss the cell no longer has."""
    ran = {(r.repro, r.cell["id"], r.form, r.fix, r.repeat) for r in kept}
    for record in written:
        if record.outcome != Outcome.ENV_ERROR.value or (key := (record.repro, record.cell["id"], record.form,
                                                                  record.fix, record.repeat)) in ran:  # fmt: skip
            continue
        path = store.record_path(*key)
        with contextlib.suppress(OSError, RecordError):
            if Record.load(path, root=store.root).run_id == record.run_id:
                path.unlink()


def _tally(records: Sequence[Record]) -> str:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.outcome] = counts.get(record.outcome, 0) + 1
    return f"{len(records)} run(s): " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items())


def _cancel(jobs: Sequence[submitit.Job[_JobResult]], echo: Echo) -> None:
    """``scancel`` every array this run submitted (one call: an array's id cancels all its tasks)."""
    ids = sorted({job.job_id.split("_")[0] for job in jobs})
    if not ids:
        return
    print(f"cancelling Slurm job(s) {', '.join(ids)}", file=sys.stderr)
    try:
        run_tool(["scancel", *ids], what="cancelling this run's Slurm jobs", timeout=60, check=False)
    except HarnessError as exc:  # nothing more to do on the way out; say it
        echo(f"could not cancel Slurm job(s) {', '.join(ids)}: {exc}")
