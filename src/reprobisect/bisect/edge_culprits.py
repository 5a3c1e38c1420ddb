"""The change on each side of a grid's edge (issue #51 item 3): for each axis whose releases bound the failing region,
the commit of that package where the outcome changes, with the other package held at one release.

A grid's edge (bisect/grid_result.py) is two neighbouring cells, one passing and one failing, along one axis at the
other axis's ``at`` release. Its commit is found as one-package triage finds a release transition's
(bisect/culprits.py ``find_culprits``): the commits of that axis's clone between the edge's two releases' tags,
bisected for the later state, the ends answered by the releases' own runs, the first commit with that state named
with its subject and pull request beside the last one without it. A staircase has several edges along one axis
between the same two releases (one per ``at``): they are one change of that package, so one search answers them
all, run at an edge whose both cells ran (else the first, whose two cells are run before it is searched, so that
no commit search starts from an inferred state); the answer names the ``at`` searched and the others it stands for.

Each axis is searched with its own clone: ``--git deepspeed=CLONE`` names one, ``--culprits`` has the harness clone
the package's known repository. An axis with neither, and torch and python, which no clone here builds, are not
searched, and the answer says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from reprobisect.bisect import history
from reprobisect.bisect.culprits import FAILING, find_culprits
from reprobisect.bisect.probes import BisectRequest, seen_state
from reprobisect.bisect.search import ProbeResult
from reprobisect.config.load import Config
from reprobisect.errors import ConfigError
from reprobisect.model.bisect_report import SeenState, TransitionEntry
from reprobisect.model.culprit import Culprit
from reprobisect.model.grid_report import EdgeCulprit, EdgeStep, GridEdge, GridReport
from reprobisect.run.context import RunContext

__all__ = [
    "NO_CLONE",
    "EdgeChoice",
    "EdgeSearch",
    "GridClones",
    "chosen_edges",
    "edge_culprits",
    "named_clones",
    "refuse_clones",
]

# Axes whose commits no clone here is searched for: the harness builds a package's commit into a pure-Python wheel,
# which torch is not, and python is an interpreter, not a package.
NO_CLONE: Mapping[str, str] = {
    "torch": "torch has no clone here: its commits are not built by the harness (a C++/CUDA build)",
    "python": "python is the interpreter, not a package: it has no clone to search",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
Cells = Sequence[tuple[str, str]]


def named_clones(values: Sequence[str]) -> tuple[Path | None, dict[str, Path]]:
    """``--git`` as given: a bare ``CLONE`` (the one package a range varies) and ``PACKAGE=CLONE`` ones (one per
    package of a grid). A value is ``PACKAGE=CLONE`` when what stands before its first ``=`` is a package name (a
    path holding ``=`` is given as ``./a=b``); two bare clones, a package named twice, an empty clone or a package no
    clone is searched for is a ConfigError naming the value."""
    bare: Path | None = None
    named: dict[str, Path] = {}
    for value in values:
        package, sep, path = value.partition("=")
        if not sep or not _NAME.fullmatch(package):
            if bare is not None:
                msg = f"--git {value!r}: a second clone without a package; give each as --git PACKAGE=CLONE"
                raise ConfigError(msg)
            bare = Path(value)
            continue
        name = package.lower()
        if not path:
            msg = f"--git {value!r}: no clone after '='; give --git {name}=CLONE (a clone of {name}'s repository)"
            raise ConfigError(msg)
        if name in NO_CLONE:
            msg = f"--git {value!r}: {NO_CLONE[name]}; give clones of the packages the grid varies"
            raise ConfigError(msg)
        if name in named:
            msg = f"--git {value!r}: a clone of {name} was given twice"
            raise ConfigError(msg)
        named[name] = Path(path)
    return bare, named


def refuse_clones(bare: Path | None, named: Mapping[str, Path], *, varying: Sequence[str], grid: bool) -> None:
    """Before anything runs: each ``--git PACKAGE=CLONE`` must name an axis this triage varies, a grid's clones must
    each name their package, one range takes one clone; each named clone must be a whole clone
    (``history.check_clone``)."""
    for name in named:
        if name not in varying:
            msg = (
                f"--git {name}={named[name]}: {name} is not an axis this triage varies "
                f"({', '.join(varying) or 'none'}); name the package of a range"
            )
            raise ConfigError(msg)
    if bare is not None and (grid or named):
        msg = (
            f"--git {bare}: with ranges on two packages say which package each clone is of: "
            f"{' '.join(f'--git {axis}=CLONE' for axis in varying if axis not in NO_CLONE)}"
        )
        raise ConfigError(msg)
    for name, clone in named.items():
        try:
            history.check_clone(clone.resolve())
        except ConfigError as exc:
            msg = f"--git {name}={clone}: {str(exc).removeprefix(f'--git {clone.resolve()}: ')}"
            raise ConfigError(msg) from exc


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridClones:
    """Which clone each axis of a grid is searched with: one named on the command line (``--git PACKAGE=CLONE``),
    else the harness's own clone of the package's known repository (``--culprits``), else none."""

    named: Mapping[str, Path] = dataclasses.field(default_factory=dict)
    harness: bool = False  # --culprits
    clones_dir: Path = Path(".cells/clones")  # where the harness keeps its clones (<envs>/clones)

    @property
    def asked(self) -> bool:
        """Was any commit search asked for?"""
        return bool(self.named) or self.harness

    def for_axis(self, axis: str) -> tuple[Path | None, str | None]:
        """The axis's clone, or None with why it is not searched (a clone the harness cannot make is said, not
        raised: the other axis may still be searched)."""
        if axis in NO_CLONE:
            return None, NO_CLONE[axis]
        if axis in self.named:
            return self.named[axis].resolve(), None
        if not self.harness:
            given = ", ".join(f"--git {name}=…" for name in sorted(self.named))
            return None, f"no clone of {axis} was given (only {given}): add --git {axis}=CLONE, or --culprits"
        try:
            return history.clone_known(axis, self.clones_dir), None
        except ConfigError as exc:
            return None, str(exc)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EdgeChoice(EdgeStep):
    """One commit search: along ``axis`` between ``passing`` and ``failing``, the other axis held at ``at``; ``ats``:
    the other axis's value of every edge between these two releases, the one searched first; ``measured``: both
    cells of the edge searched at ran in the grid search."""

    ats: tuple[str, ...]
    cells: tuple[tuple[str, str], tuple[str, str]]  # (row value, column value) of the passing and the failing cell
    breaking: bool  # the older release passes: the change brought the failure (else it fixed it)

    def searched(
        self,
        clone: Path | None,
        *,
        measured_now: bool | None = None,
        culprit: Culprit | None = None,
        unsearched: str | None = None,
    ) -> EdgeCulprit:
        """This search's entry of the answer's ``culprits``: the edge, the clone, and what was found."""
        return EdgeCulprit(
            **self.step_fields(),
            edges_at=self.ats,
            direction="brought" if self.breaking else "fixed",
            clone=str(clone) if clone is not None else None,
            measured_now=measured_now,
            culprit=culprit,
            unsearched=unsearched,
        )


def _key(report: GridReport, cell: Mapping[str, str]) -> tuple[str, str]:
    return cell[report.row_axis], cell[report.col_axis]


def chosen_edges(report: GridReport) -> list[EdgeChoice]:
    """One search per axis and pair of releases of a grid answer's edges, at the first edge between them whose both
    cells ran, else at the first edge between them."""
    groups: dict[tuple[str, str, str], list[GridEdge]] = {}
    for edge in report.edges:
        groups.setdefault((edge.axis, edge.passing, edge.failing), []).append(edge)
    chosen = []
    for (axis, passing, failing), edges in groups.items():
        edge = next((e for e in edges if e.measured), edges[0])
        versions = report.versions(axis)
        chosen.append(
            EdgeChoice(
                axis=axis,
                at_axis=edge.at_axis,
                at=edge.at,
                passing=passing,
                failing=failing,
                measured=edge.measured,
                ats=(edge.at, *(e.at for e in edges if e.at != edge.at)),
                cells=(_key(report, edge.passing_cell), _key(report, edge.failing_cell)),
                breaking=versions.index(passing) < versions.index(failing),
            )
        )
    return chosen


@dataclasses.dataclass(frozen=True, kw_only=True)
class EdgeSearch:
    """What every edge's commit search of one form's grid needs: the release search it starts from (``request``:
    repro, form, backend, the pins the grid held, repeats, sandbox, jobs; its axis, ends and the ``at`` pin are set
    per edge), the clones, the grid's own probe of cells (``measure``: an inferred edge's two cells are run first),
    and the options that name the repro for the re-run line."""

    config: Config
    request: BisectRequest
    ctx: RunContext
    clones: GridClones
    measure: Callable[[Cells], Sequence[ProbeResult]]
    source: Sequence[str]


def edge_culprits(search: EdgeSearch, report: GridReport) -> list[EdgeCulprit]:
    """One entry per search of ``chosen_edges``: the edge searched and those it stands for, its direction (brought
    or fixed), the commit found (as ``find_culprits`` gives it) or why none is named."""
    clones: dict[str, tuple[Path | None, str | None]] = {}
    found = []
    for choice in chosen_edges(report):
        if choice.axis not in clones:  # once an axis: --culprits may clone
            clones[choice.axis] = search.clones.for_axis(choice.axis)
        clone, why = clones[choice.axis]
        if clone is None:
            found.append(choice.searched(None, unsearched=why))
            continue
        states = _states(search, report, choice)
        if isinstance(states, str):
            found.append(choice.searched(clone, measured_now=True, unsearched=states))
            continue
        culprit = _culprit(search, choice, clone, states)
        found.append(choice.searched(clone, measured_now=not choice.measured, culprit=culprit))
    return found


def _states(search: EdgeSearch, report: GridReport, choice: EdgeChoice) -> tuple[SeenState, SeenState] | str:
    """The passing and the failing cell's states: read from the grid where both ran, else run now (the grid's probe)
    and checked against what was inferred; a string says why the edge is not searched."""
    if choice.measured:
        ran = [report.at(row, col) for row, col in choice.cells]
        good, bad = (SeenState(outcome=str(cell.outcome), signature_id=cell.signature_id) for cell in ran)
        return good, bad
    passing, failing = search.measure(list(choice.cells))
    if passing.outcome == "PASS" and failing.outcome in FAILING and not passing.skipped and not failing.skipped:
        return seen_state(passing), seen_state(failing)
    said = "; ".join(f"({r}, {c}) {p.outcome}" for (r, c), p in zip(choice.cells, (passing, failing), strict=True))
    return f"the edge's two cells, run for this search, do not bear out what was inferred ({said})"


def _culprit(search: EdgeSearch, choice: EdgeChoice, clone: Path, states: tuple[SeenState, SeenState]) -> Culprit:
    """The commit search of one edge: a release transition from the older release to the newer, the other axis
    pinned at ``at``, handed to ``find_culprits``."""
    passing, failing = states
    older, newer = (choice.passing, choice.failing) if choice.breaking else (choice.failing, choice.passing)
    before, after = (passing, failing) if choice.breaking else (failing, passing)
    transition = TransitionEntry(last=older, first=newer, before=before, after=after)
    request = dataclasses.replace(
        search.request,
        axis=choice.axis,
        good=older,
        bad=newer,
        pins={**search.request.pins, choice.at_axis: choice.at},
    )
    search.ctx.echo(
        f"\nThe {choice.axis} commit behind {choice.passing} → {choice.failing} at {choice.at_axis} {choice.at}"
        + (f" (and at {', '.join(choice.ats[1:])})" if len(choice.ats) > 1 else "")
    )
    [found] = find_culprits(
        search.config,
        request,
        [transition],
        clone=clone,
        ctx=search.ctx,
        form=str(request.form),
        source=search.source,
    )
    return found
