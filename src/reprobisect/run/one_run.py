"""Turn a RunSpec into a Record: start the child in the cell, classify what it did, store it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect import __version__
from reprobisect.cells.built_wheels import git_commit
from reprobisect.cells.envs import CellEnv
from reprobisect.cells.op_builds import cache_root, finished
from reprobisect.model.cell import run_cell
from reprobisect.model.classify import Classification, classify
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record, StepTime, warm_up_steps
from reprobisect.model.repro import Fix, Form, Repro
from reprobisect.model.store import Store
from reprobisect.run.bytecode import PREFIX_ENV, prefix_environ
from reprobisect.run.child_env import cell_environ
from reprobisect.run.child_process import ChildResult, ChildSpec, run_child
from reprobisect.run.events import RunEvents, read_events
from reprobisect.run.measured import (
    Measured,
    MeasuredMemory,
    checked_steps,
    checked_versions,
    measured_environment,
    measured_memory,
    tmp_full,
)
from reprobisect.run.phases import PROFILE_ENV, HarnessClock, describe_phases, run_phases
from reprobisect.run.ports import free_port
from reprobisect.run.ranks import failed_rank as failed_rank_of
from reprobisect.run.ranks import keep_rank_logs
from reprobisect.run.resources import run_resources
from reprobisect.run.sandbox import NO_SANDBOX, PRIVATE_HOME, PRIVATE_TMP, Sandbox, git_dirs, link_hops
from reprobisect.util import tally
from reprobisect.util.redact import register_secret_env

__all__ = [
    "BOOTSTRAP",
    "SHIMS",
    "RunSpec",
    "child_environ",
    "compiling_ops",
    "execute",
]

_CHILD = Path(__file__).parent / "child"
BOOTSTRAP = _CHILD / "bootstrap.py"
LAUNCH = _CHILD / "launch.py"  # starts the ranks of a run with nproc > 1
WAITER = _CHILD / "waiter.py"  # the parent of every run: its wait status (128+N in a sandbox) and peak RSS
SHIMS = {"lightning-cpu": _CHILD / "cpu_shim.py"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One run: a repro's form with one fix in one cell (the ``repeat``-th time)."""

    repro: Repro
    form: Form
    fix: Fix
    env: CellEnv
    repeat: int = 0
    timeout: float | None = None
    overlay: Path | None = None
    extra_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    matrix_cell: str | None = None
    cpus: tuple[int, ...] = ()  # how it runs (pinned cores), not what: not part of the key
    sandbox: Sandbox | None = None  # how it runs too: None is unconfined
    nproc: int = 1  # ranks, each with torchrun's variables (run/child/launch.py)
    tools: tuple[Path, ...] = ()  # folders put on the run's PYTHONPATH for what its cell lacks (pytest: cells.tools)
    rerun: tuple[str, ...] = ()  # the words of a command that re-runs it, kept in the record
    jobs: int = 1  # runs at once in its matrix run, itself included: how it runs, not what

    @property
    def args(self) -> tuple[str, ...]:
        """The script's arguments: the form's (a script's own, given after ``--``), then the fix's."""
        return (*self.form.args, *self.fix.args_for(self.form.name))

    @property
    def script(self) -> Path:
        """The file this run starts (``Form.script_for``: the report's code, or its sibling for a fix's flags)."""
        return self.form.script_for(self.fix)

    @property
    def cell_id(self) -> str:
        """The id its record and log are filed under: the cell's, with ``_nproc-N`` for several ranks."""
        return str(run_cell(self.env.cell, self.nproc)["id"])

    @property
    def key(self) -> str:
        """Hash of everything that decides the outcome; equal keys mean a stored record can be reused."""
        script = hashlib.sha256(self.script.read_bytes()).hexdigest()
        shim = SHIMS.get(self.form.shim or "")
        blob = {
            "repro": self.repro.name,
            "form": self.form.name,
            "fix": self.fix.name,
            "script": script,
            "args": self.args,
            "env": dict(self.form.env),
            "cell": self.env.cell.to_dict(),
            "shim": hashlib.sha256(shim.read_bytes()).hexdigest() if shim else None,
            "expected": self.repro.expected_signature,
            "patch": hashlib.sha256(self.fix.patch.read_bytes()).hexdigest() if self.fix.patch else None,
            "override": dict(self.fix.override),
            **({"env_fix": dict(self.fix.env)} if self.fix.env else {}),
            **({"nproc": self.nproc} if self.nproc != 1 else {}),
            **({"inputs": inputs_digest(self.form.inputs)} if self.form.inputs else {}),
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:20]


def child_environ(spec: RunSpec, environ: Mapping[str, str], *, allow: Sequence[str] = ()) -> dict[str, str]:
    """The scrubbed environment of a repro child, with the cell first on PATH."""
    env = cell_environ(spec.env, environ, allow=allow)
    if not spec.form.pytest or spec.nproc > 1:  # a port of its own for runs side by side; a package's tests run as
        # in their CI, without one (Lightning picks a free port itself, and one test asserts none is set)
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    if spec.form.distributed_env or spec.nproc > 1:  # with several ranks the launcher sets each rank's own
        # torchrun's variables, TORCHELASTIC_RUN_ID included: Lightning then takes the TorchElastic environment and
        # never probes MPI (importing mpi4py where an MPI is installed but cannot start aborts the process).
        env.update(
            {
                "RANK": "0",
                "WORLD_SIZE": "1",
                "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": "1",
                "GROUP_RANK": "0",
                "TORCHELASTIC_RUN_ID": "reprobisect",
            }
        )
    if spec.form.shim:
        env["REPROBISECT_SHIM"] = str(SHIMS[spec.form.shim])
    path = [*([spec.overlay] if spec.overlay is not None else []), *spec.tools]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    ops = cache_root(spec.env.path.parent, environ)
    if ops is not None:
        env["REPROBISECT_OP_CACHE"] = str(ops)
    if environ.get(PROFILE_ENV) == "1":
        env[PROFILE_ENV] = "1"
    env.update(prefix_environ(spec.env))  # byte code compiled once where the cell's packages ship none
    env.update(spec.form.env)
    env.update(spec.fix.env)
    env.update(spec.extra_env)
    register_secret_env(env)  # whatever secret reaches the run (--env, --fix-env, matrix.yaml) leaves it redacted
    return env


def _confined(
    spec: RunSpec, sandbox: Sandbox, argv: tuple[str, ...], env: dict[str, str], workdir: Path
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The run's command inside ``sandbox``: writable only its work folder, the cell's op folder and the op cache,
    whose finished builds are read-only."""
    env = {**env, "TMPDIR": PRIVATE_TMP}
    if env.get("HOME", "/") in ("", "/"):
        env["HOME"] = PRIVATE_HOME
    spec.env.torch_extensions.mkdir(parents=True, exist_ok=True)
    ops = Path(env["REPROBISECT_OP_CACHE"]) if env.get("REPROBISECT_OP_CACHE") else None
    if ops is not None:
        ops.mkdir(parents=True, exist_ok=True)
    readable = [
        spec.env.path,
        Path(os.path.realpath(spec.env.python)).parents[1],  # the interpreter the venv was made from
        *(hop.parent for hop in link_hops(spec.env.python)),  # and every venv its python links through
        *spec.env.base_site_dirs(),
        BOOTSTRAP.parent,
        spec.script,  # the file itself too: its folder may be /tmp or HOME, which are not shown whole
        spec.script.parent,
        Path.cwd(),  # the checkout
        *([spec.overlay] if spec.overlay is not None else []),
        *spec.tools,
        *spec.form.inputs,  # a package's test tree (--pytest)
        *([Path(env[PREFIX_ENV])] if env.get(PREFIX_ENV) else []),  # byte code compiled ahead, read-only
    ]
    wrapped = sandbox.wrap(
        argv,
        env=env,
        workdir=workdir,
        writable=[spec.env.torch_extensions, *([ops] if ops is not None else [])],
        readable=readable,
        hidden=git_dirs(Path.cwd()),
        frozen=finished(ops) if ops is not None else [],
    )
    return tuple(wrapped), env


def _failing_step(outcome: Outcome, steps: list[StepTime], *, reports_steps: bool) -> int | str | None:
    """The step a failed run died at, ``setup`` before the first step of a repro that reports steps, None when
    unknown (a script that reported none)."""
    if outcome == Outcome.PASS:
        return None
    bad = next((s.step for s in steps if not s.ok), None)
    if bad is not None:
        return bad
    if steps:
        return "after-steps"
    return "setup" if reports_steps else None


def _median_step(steps: list[StepTime]) -> float | None:
    """Median of the completed steps, the warm-up steps (``warm_up_steps``) excluded when there are others."""
    times = [s.seconds for s in steps if s.ok]
    if not times:
        return None
    return statistics.median(times[warm_up_steps(len(times)) :] or times)


def compiling_ops(*folders: Path | None) -> list[str]:
    """Ops torch is building just in time in these folders now (its build lock is held while it compiles);
    the op cache's folders are ``<name>-<key>``, shown by name."""
    names = set()
    for folder in folders:
        if folder is None:
            continue
        try:
            names |= {re.sub(r"-[0-9a-f]{24}$", "", lock.parent.name) for lock in folder.glob("*/lock")}
        except OSError:
            continue
    return sorted(names)


def _heartbeat(spec: RunSpec, echo: Callable[[str], None]) -> Callable[[float], None]:
    """A line for a run that is still going: what it is, for how long, and whether an op is compiling."""
    what = f"{spec.repro.name} {spec.form.name} {spec.fix.name}"

    def beat(elapsed: float) -> None:
        ops = compiling_ops(spec.env.torch_extensions, cache_root(spec.env.path.parent))
        doing = f", compiling op {', '.join(ops)} (just in time)" if ops else ", running"
        echo(f"  … {what}: {elapsed:.0f} s{doing}")

    return beat


def execute(
    spec: RunSpec,
    store: Store,
    *,
    environ: Mapping[str, str],
    allow_env: Sequence[str] = (),
    echo: Callable[[str], None] | None = None,
) -> Record:
    """Run ``spec`` once, write its record atomically, and return it (``echo`` hears a line every 15 s)."""
    began = time.time()
    run_id = uuid.uuid4().hex[:12]
    log_path = store.log_path(spec.repro.name, spec.cell_id, spec.form.name, spec.fix.name, spec.repeat, run_id)
    ended = _run(spec, run_id, log_path, environ=environ, allow_env=allow_env, echo=echo)
    reading = _read(spec, ended)
    claimed = reading.events.exit
    where = measured_environment(claimed, spec.env.python, fallback_python=spec.env.cell.python)
    memory = measured_memory(ended.result, claimed)
    steps, steps_refused = checked_steps(reading.steps, ended.result.wall_seconds)
    claims = {
        **where.claimed,
        **({"memory": memory.above} if memory.above else {}),
        **({"steps": steps_refused} if steps_refused else {}),
    }
    config = _record_config(spec, reading, ended.env, claims)
    full = tmp_full(ended.result)
    if full is not None:
        config["tmp_full"] = full
        if echo is not None:
            echo(f"  {spec.repro.name} {spec.form.name} {spec.fix.name}: {full}")
    if steps_refused:  # the run's figures kept as its claim, never as its steps
        config["claimed_steps"] = [step.seconds for step in reading.steps]
        reading = dataclasses.replace(reading, steps=steps)
    versions, versions_source = checked_versions(claimed.versions, spec.env)
    checked = _CheckedClaims(where=where, memory=memory, versions=versions, versions_source=versions_source)
    if ended.env.get(PROFILE_ENV) == "1":
        config["profile"] = _profile(spec, began, ended.result, reading.events, echo)
    record = _record(spec, store, ended, reading, checked, config)
    store.write(record)
    probe = any(git_commit(str(pin)) for pin in spec.env.cell.packages.values())  # a culprit search's commit
    tally.add_run(record.wall_seconds, record.config.get("ops", []), probe=probe)
    return record


@dataclasses.dataclass(frozen=True, kw_only=True)
class _EndedRun:
    """A run that has ended, as the harness saw it: what the runner measured, the logs it left, and the
    environment it was given (the sandbox's, when confined)."""

    run_id: str
    log_path: Path
    result: ChildResult
    rank_logs: dict[int, Path]  # ranks 1..N-1, copied beside the run's log
    env: dict[str, str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _RunReading:
    """What an ended run's logs say: its events, the first rank to fail, the verdict, and the steps of the log the
    verdict was read from."""

    events: RunEvents
    failed_rank: int | None
    verdict: Classification
    steps: list[StepTime]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _CheckedClaims:
    """The run's word on where it ran, what it used and what it imported, each checked against the harness's own
    measurement (``run/measured.py``): the record keeps the measurement."""

    where: Measured
    memory: MeasuredMemory
    versions: dict[str, str]
    versions_source: str


def _child_argv(spec: RunSpec) -> tuple[str, ...]:
    """The run's command: the bootstrap starting the script with its arguments (under the rank launcher with
    several ranks), all under the harness's waiter.

    The waiter is every run's parent: it tells a death by signal from an exit inside the sandbox, and its os.wait4
    measures the run's peak RSS apart from the harness's (a child the harness forks counts the harness's own size
    in its peak; one the small waiter forks, only the waiter's).
    """
    argv: tuple[str, ...] = (str(spec.env.python), str(BOOTSTRAP), str(spec.script), *spec.args)
    if spec.nproc > 1:
        argv = (str(spec.env.python), str(LAUNCH), str(spec.nproc), *argv)
    return (str(spec.env.python), "-I", "-S", str(WAITER), *argv)


def _run(
    spec: RunSpec,
    run_id: str,
    log_path: Path,
    *,
    environ: Mapping[str, str],
    allow_env: Sequence[str],
    echo: Callable[[str], None] | None,
) -> _EndedRun:
    """Start the run in a work folder of its own (confined when ``spec`` says so) and wait for it to end. The
    folder goes with it, so the further ranks' logs it wrote are kept beside the run's log first."""
    argv = _child_argv(spec)
    workdir = Path(tempfile.mkdtemp(prefix="reprobisect-run-"))
    env = child_environ(spec, environ, allow=allow_env)
    if spec.sandbox is not None:
        argv, env = _confined(spec, spec.sandbox, argv, env, workdir)
    try:
        result = run_child(
            ChildSpec(
                argv=argv,
                env=env,
                cwd=workdir,
                log_path=log_path,
                timeout=spec.timeout or spec.repro.timeout,
                heartbeat=_heartbeat(spec, echo) if echo is not None else None,
                cpus=spec.cpus,
                waited=True,
            )
        )
        rank_logs = keep_rank_logs(workdir, log_path, spec.nproc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _EndedRun(run_id=run_id, log_path=log_path, result=result, rank_logs=rank_logs, env=env)


def _read(spec: RunSpec, ended: _EndedRun) -> _RunReading:
    """The run's events and its verdict. The first rank to fail gives the run its signature and the step it died
    at, so its log is the one classified; a run that timed out has no such rank."""
    result = ended.result
    log = ended.log_path.read_text(encoding="utf-8", errors="replace")
    events = read_events(log)
    failed_rank = failed_rank_of(events.ranks, spec.nproc, ended.rank_logs) if not result.timed_out else None
    judged = ended.rank_logs[failed_rank].read_text(encoding="utf-8", errors="replace") if failed_rank else log
    oom_killed = {"oom": True, "not-oom": False}.get(result.kill.verdict) if result.kill is not None else None
    verdict = classify(
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        log=judged,
        expected=spec.repro.expected_signature,
        oom_killed=oom_killed,
    )
    steps = read_events(judged).steps if failed_rank else events.steps
    return _RunReading(events=events, failed_rank=failed_rank, verdict=verdict, steps=steps)


def _record_config(
    spec: RunSpec, reading: _RunReading, env: Mapping[str, str], claims: Mapping[str, Any]
) -> dict[str, Any]:
    """The record's ``config``: what the run reported of its settings, then what the harness adds so the record
    can be read alone (ignored events, the ops it loaded, context, claims, and how it was given the machine)."""
    events, verdict = reading.events, reading.verdict
    return {
        **events.config,
        **({"ignored_events": events.ignored} if events.ignored else {}),
        **({"ops": events.ops} if events.ops else {}),
        # a traceback printed and handled before a signal or another exit code ended the run: context only
        **({"handled_traceback": verdict.context.text} if verdict.context is not None else {}),
        **({"claimed": claims} if claims else {}),  # the run's differing word on where it ran and what it used
        "resources": run_resources(spec.cpus, env, spec.jobs),  # how it was given the machine: fair timings
    }


def _profile(
    spec: RunSpec, began: float, result: ChildResult, events: RunEvents, echo: Callable[[str], None] | None
) -> dict[str, float]:
    """Where a profiled run's seconds went (``REPROBISECT_PROFILE=1``), the harness's clock beside the run's own;
    said to ``echo`` too, as the run ends."""
    clock = HarnessClock(began=began, spawned=result.spawned, exited=result.exited, recorded=time.time())
    phases = run_phases(clock, events.clock, events.ops)
    if echo is not None:
        echo(f"  profile {spec.form.name} {spec.fix.name}: {describe_phases(phases)}")
    return phases


def _record(
    spec: RunSpec, store: Store, ended: _EndedRun, reading: _RunReading, checked: _CheckedClaims, config: dict[str, Any]
) -> Record:
    """The record of an ended run: what it was asked, what its logs say, and what the harness measured."""
    result, verdict, steps = ended.result, reading.verdict, reading.steps
    where, memory = checked.where, checked.memory
    return Record(
        run_id=ended.run_id,
        spec_key=spec.key,
        repro=spec.repro.name,
        form=spec.form.name,
        fix=spec.fix.name,
        precision=spec.form.precision,
        repeat=spec.repeat,
        script=str(spec.script.name),
        argv=[Path(spec.env.python).name, str(spec.script), *spec.args],
        cell=run_cell(spec.env.cell, spec.nproc),
        versions=checked.versions,
        versions_source=checked.versions_source,
        python=where.python,
        platform=where.platform,
        gpu=where.gpu,
        outcome=verdict.outcome.value,
        signature=verdict.signature,
        known_signature=verdict.known.name if verdict.known else None,
        upstream=list(verdict.known.upstream) if verdict.known else [],
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        failing_step=_failing_step(verdict.outcome, steps, reports_steps=spec.repro.reports_steps),
        steps=steps,
        step_median_seconds=_median_step(steps),
        first_step_seconds=steps[0].seconds if steps else None,
        setup_seconds=reading.events.setup_seconds,
        wall_seconds=round(result.wall_seconds, 3),
        env_seconds=round(spec.env.build_seconds, 3),
        peak_rss_bytes=memory.rss_bytes,
        peak_gpu_memory_bytes=memory.gpu_bytes,
        peak_rss_source=memory.rss_source,
        peak_gpu_source=memory.gpu_source,
        claimed_memory=memory.claims,
        kill_evidence=result.kill.evidence if result.kill is not None and result.exit_code in _KILLED else None,
        log_path=str(ended.log_path.relative_to(store.root)),
        started_at=result.started_at,
        finished_at=result.finished_at,
        harness_version=__version__,
        config=config,
        fix_kind=spec.fix.kind,
        matrix_cell=spec.matrix_cell or spec.cell_id,
        sandbox=spec.sandbox.description if spec.sandbox is not None else NO_SANDBOX,
        nproc=spec.nproc,
        failed_rank=reading.failed_rank,
        rank_logs=[str(path.relative_to(store.root)) for path in ended.rank_logs.values()],
        rerun=list(spec.rerun),
        tests=reading.events.tests,
        training=reading.events.training,
    )


_KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)  # a SIGKILL, as the runner or a shell reports it


_INPUT_SUFFIXES = (".py", ".cfg", ".ini", ".toml", ".json", ".yaml", ".yml", ".txt")
_MAX_INPUT_FILES = 5000


def inputs_digest(inputs: Sequence[Path]) -> str:
    """What a run's further inputs hold (a test tree's sources and configs), for its key: a test file edited, or
    a conftest changed, is another run. Bounded: at most ``_MAX_INPUT_FILES`` files, links not followed."""
    digest = hashlib.sha256()
    for root in inputs:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in _INPUT_SUFFIXES)
        for path in files[:_MAX_INPUT_FILES]:
            if path.is_symlink() or not path.is_file():
                continue
            digest.update(str(path.relative_to(root) if path != root else path.name).encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]
