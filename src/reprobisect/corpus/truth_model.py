"""What a corpus entry's truth holds, once read and checked (``truth.py`` reads it, ``truth_checks.py`` holds it
against its own runs): the ranges, the pull requests at their ends and inside them, the hand runs, and the one
error shape every check raises (file, key, value, what would be right).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping
from pathlib import Path

from reprobisect.errors import ConfigError
from reprobisect.model.signature import normalize_message

__all__ = [
    "AXES",
    "BACKENDS",
    "EFFECTS",
    "KINDS",
    "MARGIN",
    "MESSAGE_PREFIX",
    "PACKAGES",
    "PIN_NAMES",
    "Change",
    "EdgeChange",
    "Interaction",
    "MeasuredRelease",
    "Region",
    "SignatureChange",
    "SlowdownTruth",
    "Span",
    "Truth",
    "fail",
    "failure_key",
    "measured_commit",
]

BACKENDS = ("cpu", "gpu", "gpus")
PACKAGES = ("deepspeed", "lightning")
AXES = ("deepspeed", "lightning", "torch", "python")  # an interaction entry's two axes: two of these
EFFECTS = ("breaks", "fixes")  # an interaction's [[change]]: what the move from `before` to `after` does
KINDS = (
    "interaction",
    "wrong-numbers",
    "exception",
    "came-and-went",
    "signature-changes",
    "still-present",
    "performance",
    "lightning",
)
PIN_NAMES = ("torch", "deepspeed", "lightning", "python")
MESSAGE_PREFIX = 48  # characters of the normalized message that must agree (messages hold counts and shapes)
MARGIN = 1.2  # a performance truth's every ratio at least this factor away from its limit: no coin flips


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    """The pull request that brought (or mended) the bug, and the commit it was checked at."""

    pr: str
    commit: str
    parent: str = ""
    how: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SignatureChange(Change):
    """The pull request that changed the failure inside an affected range: ``at`` is the first release with the new
    signature; its commit fails with the new one, its parent with the old one."""

    at: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Span:
    """One affected range of neighbouring releases, with the change at each end when known."""

    first: str
    last: str
    signature: str = ""
    introduced: Change | None = None
    fixed: Change | None = None
    changed: tuple[SignatureChange, ...] = ()  # where the failure changes signature inside the range


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeasuredRelease:
    """One hand run of ``issue.py`` (a performance entry: its repeats): exit status, last traceback line, seconds,
    and for a performance entry each run's median step in milliseconds."""

    exit: int
    last_line: str
    seconds: float
    version: str = ""
    step_ms: tuple[float, ...] = ()

    @property
    def median_ms(self) -> float:
        """The median of the runs' median steps (0.0 when none was timed)."""
        return float(statistics.median(self.step_ms)) if self.step_ms else 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlowdownTruth:
    """A performance entry's rule: a release is affected when its median step is more than ``threshold`` percent
    above the first release's (the harness is asked ``triage --slower-than threshold``)."""

    threshold: float
    metric: str = "step"
    repeats: int = 3

    @property
    def limit(self) -> float:
        return 1 + self.threshold / 100


@dataclasses.dataclass(frozen=True, kw_only=True)
class Region:
    """One rectangle of an interaction's failing region, as the rule a person wrote (``rule``) and as the spans of
    listed releases it names: ``rows`` over ``releases`` (the package's), ``cols`` over ``partner_releases``, both
    inclusive index pairs."""

    rule: str
    rows: tuple[int, int]
    cols: tuple[int, int]
    signature: str = ""

    def holds(self, row: int, col: int) -> bool:
        """Whether the rule says the cell (row, col) fails."""
        return self.rows[0] <= row <= self.rows[1] and self.cols[0] <= col <= self.cols[1]


@dataclasses.dataclass(frozen=True, kw_only=True)
class EdgeChange(Change):
    """The pull request behind one step of an interaction's edge: along ``package``'s axis from ``before`` to
    ``after`` (adjacent listed releases), the other axis held at ``at``; ``effect`` says whether the step breaks
    (before passes, after fails) or fixes (before fails, after passes)."""

    package: str
    before: str
    after: str
    at: str
    effect: str

    @property
    def passing(self) -> str:
        """The release on the passing side of the step."""
        return self.before if self.effect == "breaks" else self.after

    @property
    def failing(self) -> str:
        """The release on the failing side of the step."""
        return self.after if self.effect == "breaks" else self.before


@dataclasses.dataclass(frozen=True, kw_only=True)
class Interaction:
    """What makes an entry an interaction: the grid's column axis (``partner``) and its releases, the regions whose
    union is the failing cells, the pull requests at the edges, and every cell measured by hand, keyed by
    (row release, column release)."""

    partner: str
    partner_releases: tuple[str, ...]
    regions: tuple[Region, ...]
    changes: tuple[EdgeChange, ...]
    cells: Mapping[tuple[str, str], MeasuredRelease]

    def rules(self) -> list[str]:
        """The regions' rules as written."""
        return [region.rule for region in self.regions]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Truth:
    """A corpus entry, checked."""

    name: str
    folder: Path
    title: str
    report: str
    reporter: str
    kinds: tuple[str, ...]
    package: str
    releases: tuple[str, ...]
    backend: str
    gpus: int
    precision: str
    seconds: float
    timeout: int
    script: Path
    pins: Mapping[str, str]
    affected: tuple[Span, ...]
    runs: Mapping[str, MeasuredRelease]
    commits: Mapping[str, MeasuredRelease]
    slowdown: SlowdownTruth | None = None  # a performance entry: its bug is a time, not a failure
    interaction: Interaction | None = None  # a bug between two packages: its truth is a grid of cells
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)  # other packages its cells need, by name

    def failing_cells(self) -> set[tuple[str, str]]:
        """An interaction's cells that fail by its regions, as (row release, column release)."""
        if self.interaction is None:
            return set()
        cols = self.interaction.partner_releases
        return {
            (row, col)
            for r, row in enumerate(self.releases)
            for c, col in enumerate(cols)
            if any(region.holds(r, c) for region in self.interaction.regions)
        }

    def unmeasured(self) -> list[str]:
        """What the hand tool has not measured yet: releases without a run, or an interaction's cells."""
        if self.interaction is None:
            return [r for r in self.releases if r not in self.runs]
        cells = self.interaction.cells
        grid = [(r, c) for r in self.releases for c in self.interaction.partner_releases]
        return [f"{r}|{c}" for r, c in grid if (r, c) not in cells]

    def span_releases(self) -> list[list[str]]:
        """The affected ranges as lists of the releases they hold."""
        index = {r: i for i, r in enumerate(self.releases)}
        return [list(self.releases[index[s.first] : index[s.last] + 1]) for s in self.affected]


def fail(where: str, key: str, value: object, right: str) -> ConfigError:
    """The one error of a truth: the file, the key (cut to a readable length), the value and what would be right."""
    key = key if len(key) <= 120 else key[:117] + "..."
    return ConfigError(f"{where}: {key} = {_show(value)}: {right}")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def failure_key(line: str) -> tuple[str, str]:
    """A hand run's failure as the scoring tells failures apart: the exception's name, the normalized message's
    start."""
    exception, _, message = line.partition(": ")
    return exception.rsplit(".", 1)[-1], normalize_message(message)[:MESSAGE_PREFIX]


def measured_commit(commits: Mapping[str, MeasuredRelease], sha: str) -> MeasuredRelease | None:
    """The hand run of a commit named by any prefix of its sha (or it by a prefix of the key), or None."""
    return next((row for key, row in commits.items() if key.startswith(sha) or sha.startswith(key)), None)
