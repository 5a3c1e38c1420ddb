"""The original script before any candidate: read and parsed, its two cells, its runs there and the target they
give (``NotInterestingError`` when the cells do not tell it apart), the lines its failure passes through and the
lines that ran at all.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from reprobisect.config.load import Config
from reprobisect.errors import ConfigError, NotInterestingError
from reprobisect.minimize.candidates import CandidateVerdict, CellRun, Cells, FailureTarget, Tester, text_key
from reprobisect.minimize.request import MinimizeRequest
from reprobisect.minimize.statements import Script, parse_script, size_of
from reprobisect.minimize.static import undefined_names
from reprobisect.model.outcome import Outcome
from reprobisect.model.repro import script_forms
from reprobisect.model.signature import script_lines
from reprobisect.run.context import RunContext
from reprobisect.run.events import read_events
from reprobisect.run.select import detect_cuda
from reprobisect.util.echo import Echo
from reprobisect.util.files import inside, write_atomic
from reprobisect.util.stop import in_parallel

__all__ = [
    "cells_for",
    "check_original",
    "executed_lines",
    "failure_lines",
    "parse_original",
    "pins_text",
    "read_script",
    "run_log",
]


def failure_lines(folder: Path, verdict: CandidateVerdict, filename: str) -> tuple[int, ...]:
    """The script's lines on the original's failing traceback in the bad cell (none when it has no traceback): a
    candidate without one of them cannot fail there the same way, so trying costs a run for nothing."""
    log = run_log(folder, verdict.runs[0]) if verdict.runs else None
    return script_lines(log, filename) if log is not None else ()


def run_log(folder: Path, run: CellRun) -> str | None:
    """The log a run's record names (None when either is gone or unreadable, or the record names a file outside
    the minimization's store)."""
    try:
        relative = json.loads((folder / run.record).read_text(encoding="utf-8"))["log_path"]
        if not isinstance(relative, str) or not inside(folder / "runs", relative):
            return None
        return (folder / "runs" / relative).read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def executed_lines(tester: Tester, folder: Path, source: str) -> frozenset[int] | None:
    """The original's lines that ran in the bad cell, from one more run with the line tracer on (None when the
    traced run did not fail the target's way: what it ran then says nothing of the failure)."""
    key = text_key(source)
    run = tester.run_in(tester.candidates / key / tester.cells.filename, tester.cells.bad, key, traced=True)
    log = run_log(folder, run)
    if not tester.target.hit(run) or log is None:
        return None
    return read_events(log).lines


def parse_original(path: Path, source: str) -> tuple[Script, frozenset[str]]:
    """The script's statements and the names it leaves undefined (a candidate may not add to them); ConfigError
    when it does not parse or compile: there is nothing to run."""
    try:
        script = parse_script(source)
    except SyntaxError as exc:
        msg = f"{path}: line {exc.lineno}: {exc.msg}; minimize needs a Python script that parses"
        raise ConfigError(msg) from exc
    undefined = undefined_names(source)
    if undefined is None:
        msg = f"{path}: does not compile; minimize needs a Python script that compiles"
        raise ConfigError(msg)
    return script, undefined


def read_script(script: Path) -> str:
    """The script's text; ConfigError when it is not readable UTF-8 text."""
    try:
        return script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{script}: cannot read it as UTF-8 text ({exc}); give a Python script"
        raise ConfigError(msg) from exc


def pins_text(pins: Mapping[str, str] | None) -> str:
    """A cell's pins as the progress lines and errors show them."""
    return ", ".join(f"{k} {v}" for k, v in (pins or {}).items()) or "(the default cell)"


def cells_for(config: Config, request: MinimizeRequest, name: str, ctx: RunContext) -> Cells:
    """Where candidates run: the two cells, the backend (CUDA when the base torch sees a GPU, asked once) and the
    form; ConfigError for a form the script does not run in."""
    backend: Literal["cuda", "cpu"]
    if request.backend == "auto":  # asked once: each ask imports torch
        backend = "cuda" if ctx.base.torch and detect_cuda(Path(ctx.base.executable)) else "cpu"
    else:
        backend = request.backend
    forms = script_forms(request.script.resolve(), shim=request.shim)
    form = request.form or ("cuda" if backend == "cuda" else next(n for n in forms if n != "cuda"))
    if form not in forms:
        msg = f"--form {form}: a script runs in {', '.join(forms)}"
        raise ConfigError(msg)
    return Cells(
        config=config,
        name=name,
        filename=request.script.name,
        bad={**request.pins, **request.bad},
        good={**request.pins, **request.good} if request.good is not None else None,
        backend=backend,
        form=form,
        script_args=request.script_args,
        expect=request.expect,
        shim=request.shim,
        env=request.env,
        jobs=request.jobs,
        timeout=request.timeout,
        # Unpinned unless asked: each candidate is a matrix run of one job in a process of its own, so the cuda
        # backend's default (one core, the first spare one) pinned every candidate to the same core: on the H200,
        # 8 at a time took 80-117 s a run where one alone took 19 s. Pinning steadies step times; a verdict
        # does not need it.
        cpus_per_run=request.cpus_per_run if request.cpus_per_run is not None else 0,
        confinement=request.confinement,
        ctx=ctx,
    )


def _first_runs(probe: Tester, path: Path, key: str) -> tuple[CellRun, CellRun | None]:
    """The original in the bad cell and, with slots for it, in the good one at once (the original is expected to
    tell them apart); with a slot more, its traced run beside them (``executed_lines`` then finds it in the store):
    what never ran is the search's first step, and its traced run was one more run time of the chain."""
    cells = probe.cells
    wanted: list[tuple[Mapping[str, str], bool]] = [(cells.bad, False)]
    if cells.good is not None and cells.jobs > 1:
        wanted.append((cells.good, False))
    if cells.jobs > len(wanted):
        wanted.append((cells.bad, True))
    runs = in_parallel(lambda want: probe.run_in(path, want[0], key, traced=want[1]), wanted, len(wanted))
    return runs[0], runs[1] if len(wanted) > 1 and not wanted[1][1] else None


def check_original(
    cells: Cells, folder: Path, source: str, undefined: frozenset[str], echo: Echo
) -> tuple[FailureTarget, CandidateVerdict]:
    """The original's runs in both cells and the target they give; NotInterestingError when they do not differ."""
    probe = Tester(cells, FailureTarget(outcome="", signature=None, text=""), folder, undefined)
    key = text_key(source)
    path = probe.candidates / key / cells.filename
    write_atomic(path, source, what="the original script")
    bad, early_good = _first_runs(probe, path, key)
    echo(f"  bad cell:  {_said(bad)}")
    if bad.outcome in (Outcome.PASS.value, Outcome.ENV_ERROR.value, Outcome.TIMEOUT.value) or (
        cells.expect and bad.outcome != Outcome.REPRODUCED.value
    ):
        want = f"REPRODUCED ({cells.expect})" if cells.expect else "a failure"
        msg = (
            f"{cells.filename} gives {_said(bad)} in the bad cell ({pins_text(cells.bad)}), not {want}: nothing to "
            f"minimize (log: {folder / bad.record})"
        )
        raise NotInterestingError(msg)
    target = FailureTarget(
        outcome=bad.outcome,
        signature=bad.signature,
        text=f"{bad.outcome} {bad.signature_text or ''}".strip(),
        expected=bool(cells.expect),
    )
    good: CellRun | None = None
    if cells.good is not None:
        good = early_good or probe.run_in(path, cells.good, key)
        echo(f"  good cell: {_said(good)}")
        if good.outcome in (Outcome.ENV_ERROR.value, Outcome.TIMEOUT.value) or target.hit(good):
            msg = (
                f"{cells.filename} gives {_said(good)} in the good cell ({pins_text(cells.good)}): it does not tell "
                "the good cell from the bad one, so a smaller script could not either"
            )
            raise NotInterestingError(msg)
        target = dataclasses.replace(target, good_must_pass=good.outcome == Outcome.PASS.value)
    tester = Tester(cells, target, folder, undefined)
    runs = (bad,) if good is None else (bad, good)
    verdict = CandidateVerdict(
        key=key, interesting=True, why="the original", size=size_of(source), runs=runs, at=time.time()
    )
    if tester.known(source) is None:
        tester.keep(verdict)  # the original's verdict, judged here rather than by Tester.run
    return target, verdict


def _said(run: CellRun) -> str:
    return f"{run.said} ({run.seconds:.1f} s{', reused' if run.reused else ''})"
