"""``reprobisect minimize``: a pasted script cut down, by machine, to the smallest one that still tells the bad
release from the good one.

The original is run first in both cells: it must fail in the bad one (its signature becomes the target) and not
fail that way in the good one, or there is nothing to keep and the command says why. What never ran goes first;
then, round after round, the script is rewritten (``rewrite``: inlined, its settings' values put where they are
read), cut to the failure's slice (``slicing``) and its statements removed level by level (``reduce``), each
candidate judged by real runs in the sandbox (``candidates``), up to ``jobs`` at a time; the cells are built once
and every verdict is kept on disk, so a second minimization of the same script starts where the first stopped.
The result is the smallest interesting candidate, tidied of comment lines when that keeps it interesting, with its
diff, sizes, verdicts and the commands that re-check it (``outputs``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Literal

from reprobisect.cells.base import BaseInterpreter
from reprobisect.config.load import Config
from reprobisect.config.scripts import script_name
from reprobisect.errors import ConfigError, NotInterestingError
from reprobisect.minimize.candidates import CellRun, Cells, Target, Tester, Verdict, read_log, text_key
from reprobisect.minimize.groups import Group, setting_groups
from reprobisect.minimize.reduce import Budget, prune_unused, reduce_statements
from reprobisect.minimize.rewrite import flattened, rewrite_named, rewrites
from reprobisect.minimize.slicing import failure_slice
from reprobisect.minimize.statements import Script, Size, parse_script, size_of, tidy
from reprobisect.minimize.static import undefined_names
from reprobisect.model.outcome import Outcome
from reprobisect.model.repro import script_forms
from reprobisect.model.signature import script_lines
from reprobisect.run.events import read_events
from reprobisect.run.sandbox import Confinement
from reprobisect.run.select import detect_cuda
from reprobisect.util.echo import Echo
from reprobisect.util.files import inside, write_atomic
from reprobisect.util.stop import in_parallel

__all__ = ["MinimizeRequest", "MinimizeResult", "minimize", "progress_summary"]

PROGRESS_EVERY = 15.0  # seconds between progress lines


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinimizeRequest:
    """A minimization as asked for on the command line."""

    script: Path
    bad: Mapping[str, str]
    good: Mapping[str, str] | None = None
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)  # held in both cells (--torch, ...)
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    form: str | None = None
    script_args: tuple[str, ...] = ()
    expect: str | None = None
    shim: bool = False
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout: float | None = None
    cpus_per_run: int | None = None
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    jobs: int = 1
    keep_traceback: bool = True  # never try removing the statements the original's failure passed through
    budget: Budget = dataclasses.field(default_factory=Budget)
    out: Path = Path("reports")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinimizeResult:
    """What a minimization found, and where it wrote it."""

    folder: Path
    cells: Cells
    original: Size
    minimized: Size
    text: str
    verdict: Verdict  # the minimized script's own
    original_verdict: Verdict
    target: Target
    stopped: str
    passes: int
    candidates: int
    refused: int  # candidates answered without a run (they do not compile, or use a name they lost)
    runs: int  # runs executed (not taken from the store)
    seconds: float

    @property
    def interrupted(self) -> bool:
        """Stopped by Ctrl-C: the result is the best found so far."""
        return self.stopped.startswith("interrupted")


def minimize(
    config: Config,
    request: MinimizeRequest,
    *,
    base: BaseInterpreter,
    envs_dir: Path,
    environ: Mapping[str, str],
    echo: Echo = print,
) -> MinimizeResult:
    """Minimize ``request.script`` between its two cells, in ``out/minimize/NAME/``; on Ctrl-C, the best so far
    (``result.interrupted``)."""
    source = _read(request.script)
    try:
        script = parse_script(source)
    except SyntaxError as exc:
        msg = f"{request.script}: line {exc.lineno}: {exc.msg}; minimize needs a Python script that parses"
        raise ConfigError(msg) from exc
    original_undefined = undefined_names(source)
    if original_undefined is None:
        msg = f"{request.script}: does not compile; minimize needs a Python script that compiles"
        raise ConfigError(msg)
    name = script_name(request.script)
    folder = (request.out / "minimize" / name).resolve()
    cells = _cells(config, request, name, base, envs_dir, environ)
    echo(
        f"Minimizing {request.script} ({size_of(source)}): bad cell {_pins(cells.bad)}"
        + (f", good cell {_pins(cells.good)}" if cells.good is not None else ", no good cell")
        + f", form {cells.form}, {request.jobs} at a time"
    )
    started = time.monotonic()
    target, original_verdict = _check_original(cells, folder, source, original_undefined, echo)
    if request.timeout is None:  # a candidate that hangs (a loop lost its break) must not cost the repro's 900 s
        slowest = max(run.seconds for run in original_verdict.runs)
        cells = dataclasses.replace(cells, timeout=max(60.0, 5 * slowest))
    tester = Tester(cells, target, folder, original_undefined)
    runs_before = _executed(tester.log)
    pinned = (
        script.enclosing(_failure_lines(folder, original_verdict, cells.filename))
        if request.keep_traceback
        else frozenset()
    )
    echo(
        f"Target: {target.text}. Reducing {len(script.units)} statements over {script.depth + 1} levels"
        + (f"; {len(pinned)} on the failure's path are kept." if pinned else ".")
    )

    def spent() -> str | None:
        return request.budget.spent(started, _executed(tester.log) - runs_before)

    def judged_text(text: str, alone: bool = False) -> bool:
        """Is ``text`` interesting (known, refused unrun, or run)? ``alone``: nothing else runs meanwhile, so both
        cells run at once when there are cores for two."""
        known = tester.known(text)
        if known is not None:
            return known.interesting
        if tester.refused(text) is not None or spent():
            return False
        return tester.run(text, at_once=alone and request.jobs > 1).interesting

    parent = os.getpid()

    def reducer(script: Script, prunes: bool) -> tuple[Callable[..., bool], Callable[[frozenset[int]], frozenset[int]]]:
        """``interesting(removed)`` for one script's statements, and the expansion it applies (the unused too)."""

        def expand(removed: frozenset[int]) -> frozenset[int]:
            return prune_unused(script, removed) if prunes else removed

        def interesting(removed: frozenset[int], alone: bool = False) -> bool:
            if os.getpid() == parent:
                return judged_text(script.text(expand(removed)), alone)
            # A worker picire forked: it stops it with SIGTERM once another worker found a smaller script. The run
            # in flight is stopped as Ctrl-C stops it (its process group ends) and the worker leaves without a word.
            try:
                signal.signal(signal.SIGTERM, _raise_interrupt)
                return judged_text(script.text(expand(removed)))
            except KeyboardInterrupt:
                os._exit(143)

        return interesting, expand

    level_file = folder / "level.json"

    def on_level(depth: int, units: int, passes: int) -> None:
        write_atomic(level_file, json.dumps({"depth": depth, "units": units, "pass": passes}), what="the level")

    def failing_lines(text: str) -> tuple[int, ...]:
        verdict = tester.known(text)
        return _failure_lines(folder, verdict, cells.filename) if verdict is not None else ()

    def pinned_in(script: Script, text: str) -> frozenset[int]:
        return script.enclosing(failing_lines(text)) if request.keep_traceback else frozenset()

    stopped, passes = "", 0
    best = source
    interrupted = False
    given = _given_options(request.script_args)
    with _progress_lines(tester.log, level_file, size_of(source), runs_before, echo):
        try:
            ran = _executed_lines(tester, folder, source)
            removed, prunes = _starting_point(script, ran, pinned, lambda r: judged_text(script.text(r), True), echo)
            best = script.text(removed)
            for round_number in itertools.count(1):
                rewritten = _rewrite_round(best, judged_text, request.jobs, spent, echo, given)
                sliced = _sliced(rewritten, judged_text, failing_lines(rewritten), request.jobs, echo)
                if sliced != rewritten:  # what the slice left often flattens further (a value, an identity)
                    sliced = _rewrite_round(sliced, judged_text, request.jobs, spent, echo, given, one_at_a_time=False)
                rewritten = sliced
                if round_number > 1 and rewritten == best:
                    break
                best = rewritten
                script = parse_script(best)
                interesting, expand = reducer(script, prunes)
                pinned = pinned_in(script, best)
                initial = _unwrap_failure_path(
                    script, frozenset(), pinned, functools.partial(interesting, alone=True), echo
                )
                reduction = reduce_statements(
                    script,
                    interesting,
                    jobs=request.jobs,
                    initial=initial,
                    pinned=pinned,
                    spent=spent,
                    on_level=on_level,
                    groups=functools.partial(_groups, script, expand, pinned),
                )
                passes += reduction.passes
                stopped, best = reduction.stopped, script.text(expand(reduction.removed))
                if spent():
                    break
            stopped = spent() or "a whole round (rewrites, then every level) changed nothing more"
        except KeyboardInterrupt:
            # `timeout -s INT` signals the process and then its group: a second SIGINT a moment after the first
            # must not cut the saving of the best so far short (it did on the H200: no result written). Further
            # Ctrl-Cs are ignored from here; the command restores the handler once the result is on disk.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _stop_children()
            interrupted, stopped = True, "interrupted (Ctrl-C): the best so far"
    if interrupted or not judged_text(best):  # a budget spent mid-round leaves the last interesting text on disk
        best = _best_on_disk(tester, source)
    final, verdict = best, tester.known(best) or original_verdict
    if not interrupted:
        final, verdict = _tidied(tester, best, verdict, echo)
    return _result(tester, folder, source, final, verdict, original_verdict, target, stopped, passes, started)


def _failure_lines(folder: Path, verdict: Verdict, filename: str) -> tuple[int, ...]:
    """The script's lines on the original's failing traceback in the bad cell (none when it has no traceback): a
    candidate without one of them cannot fail there the same way, so trying costs a run for nothing."""
    log = _run_log(folder, verdict.runs[0]) if verdict.runs else None
    return script_lines(log, filename) if log is not None else ()


def _run_log(folder: Path, run: CellRun) -> str | None:
    """The log a run's record names (None when either is gone or unreadable, or the record names a file outside
    the minimization's store)."""
    try:
        relative = json.loads((folder / run.record).read_text(encoding="utf-8"))["log_path"]
        if not isinstance(relative, str) or not inside(folder / "runs", relative):
            return None
        return (folder / "runs" / relative).read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _executed_lines(tester: Tester, folder: Path, source: str) -> frozenset[int] | None:
    """The original's lines that ran in the bad cell, from one more run with the line tracer on (None when the
    traced run did not fail the target's way: what it ran then says nothing of the failure)."""
    key = text_key(source)
    run = tester.run_in(tester.candidates / key / tester.cells.filename, tester.cells.bad, key, traced=True)
    log = _run_log(folder, run)
    if not tester.target.hit(run) or log is None:
        return None
    return read_events(log).lines


def _starting_point(
    script: Script,
    ran: frozenset[int] | None,
    pinned: frozenset[int],
    judged: Callable[[frozenset[int]], bool],
    echo: Echo,
) -> tuple[frozenset[int], bool]:
    """Where the reduction starts, and whether it drops unused imports and definitions beside every candidate:
    first everything that never ran before the failure, with what is then unused, in one candidate; then that
    without the unused; then the original without its unused imports and definitions. Each is one run (two with a
    good cell), where the reducer would spend dozens to find the same."""
    dead = script.unexecuted(ran) - pinned if ran else frozenset()
    tries: list[tuple[str, frozenset[int], bool]] = []
    if dead:
        tries += [("never ran, and the unused", prune_unused(script, dead), True), ("never ran", dead, False)]
    tries.append(("the unused imports and definitions", prune_unused(script, frozenset()), True))
    for what, removed, prunes in tries:
        if not removed:
            continue
        size = size_of(script.text(removed))
        if judged(removed):
            echo(f"  without what {what} ({len(removed)} statements): {size}, still interesting")
            return removed, prunes
        echo(f"  without what {what} ({len(removed)} statements): {size}, not interesting")
    return frozenset(), False


def _unwrap_failure_path(
    script: Script,
    removed: frozenset[int],
    pinned: frozenset[int],
    judged: Callable[[frozenset[int]], bool],
    echo: Echo,
) -> frozenset[int]:
    """``removed`` with the loops, ``if``s and ``with``s around the failing line unwrapped, innermost first, each
    while that stays interesting (one run each). What they held up (a loader, a flag, a dataset) can then go at the
    first level instead of waiting for the reducer to reach them."""
    around = sorted((script.units[u] for u in pinned if script.units[u].body), key=lambda unit: -unit.depth)
    kept = 0
    for unit in around:
        if unit.id in script.removed_with_descendants(removed):
            continue
        trial = removed | {script.unwrap_id(unit.id)}
        if judged(trial):
            removed, kept = trial, kept + 1
    if around:
        echo(f"  the failure's path: {kept} of {len(around)} statements around the failing line unwrapped")
    return removed


def _groups(
    script: Script, expand: Callable[[frozenset[int]], frozenset[int]], pinned: frozenset[int], removed: frozenset[int]
) -> list[Group]:
    return setting_groups(script, expand(removed), pinned)


def _rewrite_round(
    text: str,
    judged: Callable[..., bool],
    jobs: int,
    spent: Callable[[], str | None],
    echo: Echo,
    given: frozenset[str],
    *,
    one_at_a_time: bool = True,
) -> str:
    """``text`` with the rewrites (``rewrite``) that keep it interesting: first all of them at once, the script
    flattened (one candidate; if that is not interesting, once more without removing unread assignments); then
    (unless not ``one_at_a_time``) one at a time, ``jobs`` tried at once, the smallest interesting one kept and
    the other interesting ones of its batch tried together on top of it; a rewrite that was not interesting is not
    tried again this round. Each candidate goes without what it left unused."""
    for skip in (("keyword",), ("keyword", "unread")):  # the unread go second: a value can matter for its effect
        flat, done = flattened(text, given, skip=skip)
        if not done:
            break
        flat = _without_unused(flat)
        ok = judged(flat, True)
        echo(
            f"  flattened ({len(done)} rewrites: {_kinds(done)}): {size_of(flat)}, "
            + ("still interesting" if ok else "not interesting")
        )
        if ok:
            text = flat
            break
    failed: set[str] = set()
    kept = 0
    options, of = [], ""  # the rewrites of ``of``: listed again only when the text changed
    while one_at_a_time and spent() is None:
        if of != text:
            options, of = rewrites(text, given), text
        batch = [r for r in options if r.what not in failed][: max(1, jobs)]
        if not batch:
            break
        texts = [_without_unused(r.text) for r in batch]
        answers = _judge_all(judged, texts, jobs)
        failed.update(r.what for r, ok in zip(batch, answers, strict=True) if not ok)
        good = sorted((size_of(t).tokens, r.what, t) for r, t, ok in zip(batch, texts, answers, strict=True) if ok)
        if not good:
            continue
        text, kept = good[0][2], kept + 1
        failed.add(good[0][1])
        together = _composed(text, [what for _, what, _ in good[1:]], given)
        if together is not None and judged(together, True):
            text, kept = together, kept + len(good) - 1
            failed.update(what for _, what, _ in good[1:])
    if kept:
        echo(f"  rewrites one at a time: {kept} kept, {size_of(text)}")
    return text


def _sliced(text: str, judged: Callable[..., bool], lines: tuple[int, ...], jobs: int, echo: Echo) -> str:
    """``text`` cut to the failure's slice (``slicing``) when that stays interesting: first the slice with the
    statements around the failing line unwrapped, with and without calls on modules counting as effects (tried at
    once, the smaller interesting one wins); then the plain slice."""
    if not lines:
        return text
    waves = (
        [failure_slice(text, lines, unwrap=True, module_calls=False), failure_slice(text, lines, unwrap=True)],
        [failure_slice(text, lines)],
    )
    tried: set[str] = {text}
    for wave in waves:
        texts = sorted({_without_unused(t) for t in wave if t is not None} - tried, key=lambda t: size_of(t).tokens)
        if not texts:
            continue
        tried.update(texts)
        answers = _judge_all(judged, texts, jobs)
        good = [t for t, ok in zip(texts, answers, strict=True) if ok]
        if good:
            echo(f"  the failure's slice: {size_of(good[0])}, still interesting")
            return good[0]
        echo(f"  the failure's slice: {size_of(texts[0])}, not interesting")
    return text


def _judge_all(judged: Callable[..., bool], texts: list[str], jobs: int) -> list[bool]:
    """``judged`` on each of ``texts``, ``jobs`` at a time; one text alone is judged in both cells at once."""
    if len(texts) == 1:
        return [judged(texts[0], True)]
    return in_parallel(judged, texts, max(1, min(jobs, len(texts))))


def _composed(text: str, whats: list[str], given: frozenset[str]) -> str | None:
    """``text`` with the rewrites named ``whats`` made one after another (those that still apply), or None."""
    applied = 0
    for what in whats:
        step = rewrite_named(text, what, given)
        if step is not None:
            text, applied = step.text, applied + 1
    return _without_unused(text) if applied else None


def _without_unused(text: str) -> str:
    """``text`` without the imports and top-level definitions nothing uses any more."""
    try:
        script = parse_script(text)
    except SyntaxError:
        return text
    return script.text(prune_unused(script, frozenset()))


def _kinds(done: list[str]) -> str:
    counts: dict[str, int] = {}
    for what in done:
        kind = what.split(" ", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def _given_options(script_args: tuple[str, ...]) -> frozenset[str]:
    """The options the run passes the script (``--lr``, ``--lr=0.5``): their defaults are not what runs."""
    return frozenset(arg.split("=", 1)[0] for arg in script_args if arg.startswith("-"))


def _read(script: Path) -> str:
    try:
        return script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{script}: cannot read it as UTF-8 text ({exc}); give a Python script"
        raise ConfigError(msg) from exc


def _pins(pins: Mapping[str, str] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (pins or {}).items()) or "(the default cell)"


def _cells(
    config: Config,
    request: MinimizeRequest,
    name: str,
    base: BaseInterpreter,
    envs_dir: Path,
    environ: Mapping[str, str],
) -> Cells:
    backend: Literal["cuda", "cpu"]
    if request.backend == "auto":  # asked once: each ask imports torch
        backend = "cuda" if base.torch and detect_cuda(Path(base.executable)) else "cpu"
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
        base=base,
        envs_dir=envs_dir,
        environ=environ,
    )


def _check_original(
    cells: Cells, folder: Path, source: str, undefined: frozenset[str], echo: Echo
) -> tuple[Target, Verdict]:
    """The original's runs in both cells and the target they give; NotInterestingError when they do not differ."""
    probe = Tester(cells, Target(outcome="", signature=None, text=""), folder, undefined)
    key = text_key(source)
    path = probe.candidates / key / cells.filename
    write_atomic(path, source, what="the original script")
    early_good: CellRun | None = None
    if cells.good is not None and cells.jobs > 1:  # both cells at once: the original is expected to tell them apart
        bad, early_good = probe.run_both(path, key)
    else:
        bad = probe.run_in(path, cells.bad, key)
    echo(f"  bad cell:  {_said(bad)}")
    if bad.outcome in (Outcome.PASS.value, Outcome.ENV_ERROR.value, Outcome.TIMEOUT.value) or (
        cells.expect and bad.outcome != Outcome.REPRODUCED.value
    ):
        want = f"REPRODUCED ({cells.expect})" if cells.expect else "a failure"
        msg = (
            f"{cells.filename} gives {_said(bad)} in the bad cell ({_pins(cells.bad)}), not {want}: nothing to "
            f"minimize (log: {folder / bad.record})"
        )
        raise NotInterestingError(msg)
    target = Target(
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
                f"{cells.filename} gives {_said(good)} in the good cell ({_pins(cells.good)}): it does not tell the "
                "good cell from the bad one, so a smaller script could not either"
            )
            raise NotInterestingError(msg)
        target = dataclasses.replace(target, good_must_pass=good.outcome == Outcome.PASS.value)
    tester = Tester(cells, target, folder, undefined)
    runs = (bad,) if good is None else (bad, good)
    verdict = Verdict(key=key, interesting=True, why="the original", size=size_of(source), runs=runs, at=time.time())
    if tester.known(source) is None:
        tester.keep(verdict)  # the original's verdict, judged here rather than by Tester.run
    return target, verdict


def _said(run: CellRun) -> str:
    return f"{run.said} ({run.seconds:.1f} s{', reused' if run.reused else ''})"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop_children() -> None:
    """Stop the candidates still running in forked processes: each stops its own run's process group."""
    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(timeout=30)
        if child.is_alive():
            child.kill()


def _executed(log: Path) -> int:
    """Runs executed so far, by every process (from the progress log)."""
    return sum(entry.runs for entry in read_log(log))


def _best_on_disk(tester: Tester, source: str) -> str:
    """The smallest interesting candidate any process has found (the original when none is smaller)."""
    best, best_size = source, size_of(source)
    for entry in read_log(tester.log):
        if entry.interesting and (entry.size.tokens, entry.size.lines) < (best_size.tokens, best_size.lines):
            with contextlib.suppress(OSError):
                path = tester.candidates / entry.key / tester.cells.filename
                best, best_size = path.read_text(encoding="utf-8"), entry.size
    return best


def _tidied(tester: Tester, best: str, verdict: Verdict, echo: Echo) -> tuple[str, Verdict]:
    """``best`` without comment lines when that is still interesting (checked by a run), else ``best``."""
    tidy_text = tidy(best)
    if tidy_text == best or not tidy_text.strip():
        return best, verdict
    known = tester.known(tidy_text)
    checked = known if known is not None else tester.run(tidy_text, at_once=tester.cells.jobs > 1)
    if checked.interesting:
        return tidy_text, checked
    echo(f"  without its comment lines the script is no longer interesting ({checked.why}): kept them")
    return best, verdict


def _result(
    tester: Tester,
    folder: Path,
    source: str,
    final: str,
    verdict: Verdict,
    original_verdict: Verdict,
    target: Target,
    stopped: str,
    passes: int,
    started: float,
) -> MinimizeResult:
    entries = read_log(tester.log)
    return MinimizeResult(
        folder=folder,
        cells=tester.cells,
        original=size_of(source),
        minimized=size_of(final),
        text=final,
        verdict=verdict,
        original_verdict=original_verdict,
        target=target,
        stopped=stopped,
        passes=passes,
        candidates=len(entries),
        refused=sum(1 for e in entries if not e.ran),
        runs=sum(e.runs for e in entries),
        seconds=round(time.monotonic() - started, 1),
    )


def progress_summary(log: Path, original: Size, runs_before: int, elapsed: float, level: Mapping[str, int]) -> str:
    """One progress line: the best size so far, runs and their rate, candidates, the level being reduced."""
    entries = read_log(log)
    best = min((e.size for e in entries if e.interesting), key=lambda size: size.tokens, default=original)
    best = best if best.tokens < original.tokens else original
    candidates, refused = len(entries), sum(1 for e in entries if not e.ran)
    runs = sum(e.runs for e in entries) - runs_before
    rate = runs / (elapsed / 60) if elapsed > 0 else 0.0
    where = ""
    if level and level.get("depth", 0) < 0:
        where = f" · settings and what uses them, pass {level['pass']}"
    elif level:
        where = f" · level {level['depth']} ({level['units']} statements), pass {level['pass']}"
    return (
        f"  {_clock(elapsed)}: best {best} (from {original.lines} lines, {original.tokens} tokens) · "
        f"{runs} runs, {rate:.1f} a minute · {candidates} candidates, {refused} refused unrun{where}"
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


@contextlib.contextmanager
def _progress_lines(log: Path, level_file: Path, original: Size, runs_before: int, echo: Echo) -> Iterator[None]:
    """A line every PROGRESS_EVERY seconds while the block runs, from a process of its own: the reducer forks
    workers, and a thread printing in the parent could hold a lock across a fork."""
    printer = multiprocessing.Process(
        target=_print_progress, args=(log, level_file, original, runs_before, echo), daemon=True
    )
    printer.start()
    try:
        yield
    finally:
        printer.terminate()
        printer.join(timeout=5)


def _print_progress(log: Path, level_file: Path, original: Size, runs_before: int, echo: Echo) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent ends it with SIGTERM: no traceback, no KeyboardInterrupt
    started = time.monotonic()
    while True:
        time.sleep(PROGRESS_EVERY)
        level: dict[str, int] = {}
        with contextlib.suppress(OSError, ValueError):
            level = json.loads(level_file.read_text(encoding="utf-8"))
        echo(progress_summary(log, original, runs_before, time.monotonic() - started, level))
        sys.stdout.flush()  # a pipe buffers: the line is for now
