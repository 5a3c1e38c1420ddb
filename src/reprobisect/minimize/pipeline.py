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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from reprobisect.config.load import Config
from reprobisect.config.scripts import script_name
from reprobisect.minimize.candidates import CandidateVerdict, Tester, read_log
from reprobisect.minimize.original import (
    cells_for,
    check_original,
    executed_lines,
    failure_lines,
    parse_original,
    pins_text,
    read_script,
)
from reprobisect.minimize.passes import (
    first_flattened,
    given_options,
    rewrite_round,
    setting_groups_of,
    sliced_text,
    starting_point,
    unwrap_failure_path,
)
from reprobisect.minimize.progress import progress_lines, runs_executed
from reprobisect.minimize.reduce import prune_unused, reduce_statements
from reprobisect.minimize.request import MinimizeRequest, MinimizeResult
from reprobisect.minimize.settings import required_sites, sites
from reprobisect.minimize.statements import Script, parse_script, size_of, tidy
from reprobisect.run.context import RunContext
from reprobisect.util.echo import Echo
from reprobisect.util.files import write_atomic
from reprobisect.util.stop import in_parallel

__all__ = ["MinimizeRequest", "MinimizeResult", "minimize"]


def minimize(config: Config, request: MinimizeRequest, ctx: RunContext) -> MinimizeResult:
    """Minimize ``request.script`` between its two cells, in ``out/minimize/NAME/``, its runs where ``ctx`` says
    (what it prints to ``ctx.echo``); on Ctrl-C, the best so far (``result.interrupted``)."""
    echo = ctx.echo
    source = read_script(request.script)
    script, original_undefined = parse_original(request.script, source)
    name = script_name(request.script)
    folder = (request.out / "minimize" / name).resolve()
    cells = cells_for(config, request, name, ctx)
    echo(
        f"Minimizing {request.script} ({size_of(source)}): bad cell {pins_text(cells.bad)}"
        + (f", good cell {pins_text(cells.good)}" if cells.good is not None else ", no good cell")
        + f", form {cells.form}, {request.jobs} at a time"
    )
    started = time.monotonic()
    target, original_verdict = check_original(cells, folder, source, original_undefined, echo)
    if request.timeout is None:  # a candidate that hangs (a loop lost its break) must not cost the repro's 900 s
        slowest = max(run.seconds for run in original_verdict.runs)
        cells = dataclasses.replace(cells, timeout=max(60.0, 5 * slowest))
    tester = Tester(cells, target, folder, original_undefined)
    search = _Minimization(
        request=request, tester=tester, folder=folder, started=started, runs_before=runs_executed(tester.log), echo=echo
    )
    keep = request.keep_traceback
    pinned = script.enclosing(failure_lines(folder, original_verdict, cells.filename)) if keep else frozenset()
    echo(
        f"Target: {target.text}. Reducing {len(script.units)} statements over {script.depth + 1} levels"
        + (f"; {len(pinned)} on the failure's path are kept." if pinned else ".")
    )
    best, stopped, interrupted = _search_or_stop(search, script, source, pinned)
    if interrupted or not search.judged_text(best):  # a budget spent mid-round leaves the last interesting text on disk
        best = _best_on_disk(tester, source)
    final, verdict = best, tester.known(best) or original_verdict
    if not interrupted:
        final, verdict = _tidied(tester, best, verdict, echo)
    return _result(search, source, final, verdict, original_verdict, stopped)


@dataclasses.dataclass(kw_only=True)
class _Minimization:
    """One minimization's candidates as its passes judge them: known verdicts first, the budget checked before any
    run; and how many reducer passes it has made (kept here so that an interruption keeps the count)."""

    request: MinimizeRequest
    tester: Tester
    folder: Path
    started: float
    runs_before: int
    echo: Echo
    passes: int = 0
    depth: int = -1  # the statement level being reduced (-1: none, or the groups)
    parent: int = dataclasses.field(default_factory=os.getpid)  # the process that forks the reducer's workers

    @property
    def level_file(self) -> Path:
        """Where the level being reduced is written, for the progress line (printed by a process of its own)."""
        return self.folder / "level.json"

    def spent(self) -> str | None:
        """Why the budget is spent (time or runs), or None while it lasts."""
        return self.request.budget.spent(self.started, runs_executed(self.tester.log) - self.runs_before)

    def judged_text(self, text: str, alone: bool = False, also: Iterable[str | None] = ()) -> bool:
        """Is ``text`` interesting (known, refused unrun, or run)? ``alone``: nothing else runs meanwhile, so both
        cells run at once when there are cores for two. ``also``: what the search will ask next if ``text`` is
        interesting, judged beside it while slots stand free (``_lookahead``)."""
        known = self.tester.known(text)
        if known is not None:
            return known.interesting
        if self.tester.refused(text) is not None or self.spent():
            return False
        at_once = alone and self.request.jobs > 1
        ahead = self._lookahead(text, also, taken=2 if alone else 1)
        if not ahead:
            return self.tester.run(text, at_once=at_once).interesting
        with self.tester.slots.taken(self.tester.wanted) as held:  # this candidate's slots first, then the guesses'

            def judge(candidate: str) -> bool:
                if candidate is text:
                    return self.tester.run(text, at_once=at_once, held=held).interesting
                if self.spent() is None:
                    self.tester.run_if_free(candidate)  # only with slots free now: it never keeps ``text`` waiting
                return False

            return in_parallel(judge, [text, *ahead], 1 + len(ahead))[0]

    def _lookahead(self, text: str, also: Iterable[str | None], *, taken: int) -> list[str]:
        """Of ``also``, those worth judging now, beside ``text`` (which takes ``taken`` slots): not known, not
        refused, within the slots left of ``--jobs``.

        Why: the search is a chain in which each step waits for the previous verdict (what never ran, the
        flattened script, ...), one run time each (11-15 s on the H100) while most of ``--jobs`` stood idle. The
        step after an interesting candidate is known before its verdict is; judged beside it, its verdict is in
        when the chain gets there. A guess that turns out unused costs only a slot that would have been idle."""
        room = (self.request.jobs - taken) // 2  # each in both cells at once: none may keep ``text`` waiting
        if room <= 0 or self.tester.slots.free() < taken + 2:  # no slot for a guess now: not worth making one
            return []
        ahead: list[str] = []
        for candidate in also:  # lazily: a level's guesses are made one by one, only until the room is full
            if len(ahead) >= room:
                break
            if candidate is None or candidate == text or candidate in ahead:
                continue
            if self.tester.known(candidate) is None and self.tester.runnable(candidate):
                ahead.append(candidate)
        return ahead

    def reducer(
        self, script: Script, prunes: bool, pinned: frozenset[int] = frozenset()
    ) -> tuple[Callable[..., bool], Callable[[frozenset[int]], frozenset[int]]]:
        """``interesting(removed)`` for one script's statements, and the expansion it applies (the unused too)."""

        def expand(removed: frozenset[int]) -> frozenset[int]:
            return prune_unused(script, removed) if prunes else removed

        def next_in_level(removed: frozenset[int]) -> Iterator[str]:
            """What ddmin asks next if ``removed`` is interesting, at the end of a level: one more unit of the
            level gone (its rounds there run one candidate at a time, most of the others refused unrun)."""
            if self.depth >= 0:
                for unit in script.level(self.depth, removed, pinned):
                    yield script.text(expand(removed | {unit}))

        def interesting(removed: frozenset[int], alone: bool = False) -> bool:
            if os.getpid() == self.parent:
                return self.judged_text(script.text(expand(removed)), alone)
            # A worker picire forked: it stops it with SIGTERM once another worker found a smaller script. The run
            # in flight is stopped as Ctrl-C stops it (its process group ends) and the worker leaves without a word.
            try:
                signal.signal(signal.SIGTERM, _raise_interrupt)
                return self.judged_text(script.text(expand(removed)), also=next_in_level(removed))
            except KeyboardInterrupt:
                os._exit(143)

        return interesting, expand

    def on_level(self, depth: int, units: int, passes: int) -> None:
        """Note the level the reducer is at, for the progress line (and for the workers' guesses, forked after)."""
        self.depth = depth
        write_atomic(self.level_file, json.dumps({"depth": depth, "units": units, "pass": passes}), what="the level")

    def failing_lines(self, text: str) -> tuple[int, ...]:
        """The lines of ``text`` on its failing traceback in the bad cell (none when it was not judged)."""
        verdict = self.tester.known(text)
        return failure_lines(self.folder, verdict, self.tester.cells.filename) if verdict is not None else ()

    def setting_lines(self, text: str) -> tuple[int, ...]:
        """The lines of ``text`` that set the environment as the original did (``settings``: every candidate keeps
        them, so no pass need try removing them)."""
        return tuple(site.line for site in sites(text) if site.code in self.tester.sites)

    def slice_lines(self, text: str) -> tuple[int, ...]:
        """What the failure's slice of ``text`` starts from: the failing lines and the setting lines."""
        return (*self.failing_lines(text), *self.setting_lines(text))

    def pinned_in(self, script: Script, text: str) -> frozenset[int]:
        """The statements of ``script`` (parsed from ``text``) never tried removed: those on the failure's path
        (unless ``--try-traceback-lines``) and those around the setting lines."""
        failing = self.failing_lines(text) if self.request.keep_traceback else ()
        return script.enclosing((*failing, *self.setting_lines(text)))


def _search_or_stop(
    search: _Minimization, script: Script, source: str, pinned: frozenset[int]
) -> tuple[str, str, bool]:
    """The best text, why the search stopped, and whether Ctrl-C stopped it (the best is then read from disk)."""
    with progress_lines(search.tester.log, search.level_file, size_of(source), search.runs_before, search.echo):
        try:
            best, stopped = _rounds(search, script, source, pinned)
        except KeyboardInterrupt:
            # `timeout -s INT` signals the process and then its group: a second SIGINT a moment after the first
            # must not cut the saving of the best so far short (it did on the H200: no result written). Further
            # Ctrl-Cs are ignored from here; the command restores the handler once the result is on disk.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _stop_children()
            return source, "interrupted (Ctrl-C): the best so far", True
    return best, stopped, False


def _rounds(search: _Minimization, script: Script, source: str, pinned: frozenset[int]) -> tuple[str, str]:
    """Round after round (rewrites, the failure's slice, then every level of statements) until a whole round
    changes nothing or the budget is spent; the best text and why it stopped. What never ran goes first."""
    ran = executed_lines(search.tester, search.folder, source)
    search.tester.sites = required_sites(source, ran)  # before any candidate, and before the reducer forks
    if search.tester.sites:
        search.echo(f"  kept: {_settings_said(source, search.tester.sites)}")
        pinned = pinned | script.enclosing(search.setting_lines(source))  # never cut as "never ran" either
    judged, given = search.judged_text, given_options(search.request.script_args)

    def judged_start(removed: frozenset[int]) -> bool:  # the flattened script is the next step's first candidate
        text = script.text(removed)
        return judged(text, True, also=[first_flattened(text, given)])

    removed, prunes = starting_point(script, ran, pinned, judged_start, search.echo)
    best = script.text(removed)
    for round_number in itertools.count(1):
        rewritten = _rewritten(search, best)
        if round_number > 1 and rewritten == best:
            break
        best = rewritten
        best = _reduced(search, parse_script(best), best, prunes)
        if search.spent():
            break
    return best, search.spent() or "a whole round (rewrites, then every level) changed nothing more"


def _settings_said(source: str, required: Mapping[str, int]) -> str:
    """The lines that set the environment, which every candidate keeps, as the progress and the result say them."""
    kept = [site for site in sites(source) if site.code in required]
    names = sorted({name for site in kept for name in site.names})
    lines = ", ".join(str(site.line) for site in kept)
    what = f" ({', '.join(names)})" if names else ""
    return f"line{'s' if len(kept) > 1 else ''} {lines} set the environment{what}: plain python needs them"


def _rewritten(search: _Minimization, text: str) -> str:
    """``text`` rewritten, cut to the failure's slice, and what the slice left rewritten again."""
    judged, jobs, spent, echo = search.judged_text, search.request.jobs, search.spent, search.echo
    given = given_options(search.request.script_args)
    rewritten = rewrite_round(text, judged, jobs, spent, echo, given)
    sliced = sliced_text(rewritten, judged, search.slice_lines(rewritten), jobs, echo)
    if sliced != rewritten:  # what the slice left often flattens further (a value, an identity)
        sliced = rewrite_round(sliced, judged, jobs, spent, echo, given, one_at_a_time=False)
    return sliced


def _reduced(search: _Minimization, script: Script, text: str, prunes: bool) -> str:
    """One reduction of ``script`` (parsed from ``text``) level by level, the failure's path unwrapped first."""
    pinned = search.pinned_in(script, text)
    interesting, expand = search.reducer(script, prunes, pinned)
    initial = unwrap_failure_path(script, frozenset(), pinned, functools.partial(interesting, alone=True), search.echo)
    reduction = reduce_statements(
        script,
        interesting,
        jobs=search.request.jobs,
        initial=initial,
        pinned=pinned,
        spent=search.spent,
        on_level=search.on_level,
        groups=functools.partial(setting_groups_of, script, expand, pinned),
    )
    search.passes += reduction.passes
    return script.text(expand(reduction.removed))


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


def _best_on_disk(tester: Tester, source: str) -> str:
    """The smallest interesting candidate any process has found (the original when none is smaller)."""
    best, best_size = source, size_of(source)
    for entry in read_log(tester.log):
        if entry.interesting and (entry.size.tokens, entry.size.lines) < (best_size.tokens, best_size.lines):
            with contextlib.suppress(OSError):
                path = tester.candidates / entry.key / tester.cells.filename
                best, best_size = path.read_text(encoding="utf-8"), entry.size
    return best


def _tidied(tester: Tester, best: str, verdict: CandidateVerdict, echo: Echo) -> tuple[str, CandidateVerdict]:
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
    search: _Minimization,
    source: str,
    final: str,
    verdict: CandidateVerdict,
    original_verdict: CandidateVerdict,
    stopped: str,
) -> MinimizeResult:
    """The figures of a finished (or interrupted) minimization, read from the progress log every process wrote."""
    tester = search.tester
    entries = read_log(tester.log)
    return MinimizeResult(
        folder=search.folder,
        cells=tester.cells,
        original=size_of(source),
        minimized=size_of(final),
        text=final,
        verdict=verdict,
        original_verdict=original_verdict,
        target=tester.target,
        stopped=stopped,
        passes=search.passes,
        candidates=len(entries),
        refused=sum(1 for e in entries if not e.ran),
        runs=sum(e.runs for e in entries),
        seconds=round(time.monotonic() - search.started, 1),
        kept=_settings_said(final, tester.sites) if tester.sites else "",
    )
