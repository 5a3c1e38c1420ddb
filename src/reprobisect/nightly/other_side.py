"""Which side a regression of a new DeepSpeed release belongs to, Lightning's or DeepSpeed's (issue #51, item 5).

A night runs each new DeepSpeed release with the slice's pinned Lightning. A run that passed on the baseline and
fails on the new release may be DeepSpeed's bug, or a meeting of the two packages that a newer Lightning already
answers (a keyword it learnt, a call it stopped making): then the fix is Lightning's, and a user's workaround is an
upgrade. So each regression's run is made once more with the newest Lightning release the index lists
(``--lightning-up-to`` bounds it, as ``--up-to`` bounds DeepSpeed's), DeepSpeed at the new release:

* it fails there as it does with the pinned Lightning (same outcome and signature): "fails with every Lightning
  tried (pinned P, newest N): DeepSpeed's side";
* it passes: the first Lightning release that passes is searched among the releases the index lists between the
  two (bisect/search.py's ``first_bad``, "bad" being a pass): "fails with lightning ≤ X, passes with Y: the fix is
  Lightning's (or a Lightning release already has it)";
* anything else — no Lightning newer than the pinned one, a run that says nothing (ENV_ERROR, TIMEOUT, flaky), a
  failure of another kind, a search that does not settle, an error of the harness — is "could not tell", with why,
  never a verdict.

Lightning's main is not tried: the nightly takes no clone of Lightning. ``which_side`` is the verdict, pure, its
probe injected; ``other_sides`` gives it the night's runs (ordinary matrix runs: tonight's run with the pinned
Lightning is reused from its record).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from packaging.version import Version

from reprobisect.bisect.probes import probe_result
from reprobisect.bisect.search import ProbeResult, first_bad
from reprobisect.cells.index import IndexCache
from reprobisect.errors import BisectInconclusiveError, ConfigError, HarnessError
from reprobisect.model.outcome import Outcome
from reprobisect.nightly.targets import AXIS, Target
from reprobisect.report.verdicts import Key
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix

__all__ = ["LIGHTNING", "OtherSide", "lightning_releases", "other_sides", "which_side"]

LIGHTNING = "lightning"
PASS = Outcome.PASS.value
_LONGEST_VERSION = 64  # an index (or a cache file) listing a longer "version" lists garbage


@dataclasses.dataclass(frozen=True, kw_only=True)
class OtherSide:
    """One regression run again with newer Lightning releases: the side it belongs to, or why none was found."""

    key: Key
    deepspeed: str  # the new release (or ref) it regressed on
    pinned: str  # the slice's Lightning
    newest: str | None = None
    side: Literal["lightning", "deepspeed"] | None = None  # None: could not tell (``why``)
    last_failing: str | None = None
    first_passing: str | None = None
    skipped_between: tuple[str, ...] = ()
    probes: tuple[ProbeResult, ...] = ()  # every Lightning release asked, in order
    why: str | None = None

    def sentence(self) -> str:
        """The verdict in one line, as the issue, the terminal and ``nightly.json`` say it."""
        if self.side == "lightning":
            gap = f" ({', '.join(self.skipped_between)} between gave no verdict)" if self.skipped_between else ""
            return (
                f"fails with lightning ≤ {self.last_failing}, passes with {self.first_passing}{gap}: the fix is "
                "Lightning's (or a Lightning release already has it)"
            )
        if self.side == "deepspeed":
            return f"fails with every Lightning tried (pinned {self.pinned}, newest {self.newest}): DeepSpeed's side"
        return f"could not tell which side: {self.why}"

    def to_json(self) -> dict[str, Any]:
        """The check as ``nightly.json``'s ``other_side`` lists it."""
        repro, cell, form, fix = self.key
        return {
            "repro": repro,
            "cell": cell,
            "form": form,
            "fix": fix,
            "deepspeed": self.deepspeed,
            "pinned_lightning": self.pinned,
            "newest_lightning": self.newest,
            "side": self.side,
            "last_failing": self.last_failing,
            "first_passing": self.first_passing,
            "skipped_between": list(self.skipped_between),
            "why": self.why,
            "verdict": self.sentence(),
            "probes": [
                {"lightning": p.version, "outcome": p.outcome, "signature_id": p.signature_id, "skipped": p.skipped}
                for p in self.probes
            ],
        }


def _version(raw: object) -> Version | None:
    """``raw`` as a version, or None for anything that is not one (or is too long to be one)."""
    if not isinstance(raw, str) or len(raw) > _LONGEST_VERSION:
        return None
    try:
        return Version(raw)
    except ValueError:  # InvalidVersion, or a number too long for an int
        return None


def lightning_releases(available: Sequence[object], pinned: str, *, up_to: str | None = None) -> list[str] | str:
    """The pinned Lightning, then every final release newer than it (and not newer than ``up_to``) of
    ``available``, oldest first; or why there is nothing to try. What is not a version is passed over."""
    low = _version(pinned)
    if low is None:
        return f"the slice's lightning pin {pinned!r} is not a release"
    high = _version(up_to) if up_to else None
    newer: dict[Version, str] = {}
    for raw in available:
        version = _version(raw)
        if version is None or version.is_prerelease or version.is_devrelease or version <= low:
            continue
        if high is None or version <= high:
            newer.setdefault(version, str(raw))
    if not newer:
        bound = f" up to {up_to}" if up_to else ""
        return f"the configured index lists no Lightning release newer than the pinned {pinned}{bound}"
    return [pinned, *(newer[v] for v in sorted(newer))]


def _said(result: ProbeResult) -> str:
    return f"{result.outcome} {result.signature_id or ''}".strip()


def which_side(
    key: Key,
    deepspeed: str,
    versions: Sequence[str],
    probe: Callable[[str], ProbeResult],
    log: Callable[[str], None] = lambda _: None,
) -> OtherSide:
    """The side of one regression: ``versions`` are the pinned Lightning first, then the newer releases, the newest
    last (``lightning_releases``); ``probe`` runs the regression's cell with one of them. Each is run once; an error
    of the harness in a probe is a probe that says nothing (ENV_ERROR), never a verdict."""
    seen: dict[str, ProbeResult] = {}

    def asked(version: str) -> ProbeResult:
        if version not in seen:
            try:
                seen[version] = probe(version)
            except HarnessError as exc:
                seen[version] = ProbeResult(version=version, outcome="ENV_ERROR", signature=f"harness error: {exc}")
        return seen[version]

    base = OtherSide(key=key, deepspeed=deepspeed, pinned=versions[0], newest=versions[-1])
    answer = _answer(base, versions, asked, log)
    return dataclasses.replace(answer, probes=tuple(seen.values()))


def _answer(
    base: OtherSide, versions: Sequence[str], asked: Callable[[str], ProbeResult], log: Callable[[str], None]
) -> OtherSide:
    pinned, newest = asked(versions[0]), asked(versions[-1])
    if pinned.skipped or pinned.outcome == PASS:
        why = pinned.skipped or "it passes"
        return dataclasses.replace(base, why=f"the run with the pinned lightning {base.pinned} gives no failure: {why}")
    if newest.skipped:
        return dataclasses.replace(base, why=f"the newest lightning {base.newest} gave no verdict: {newest.skipped}")
    if newest.outcome != PASS:
        if newest.state == pinned.state:
            return dataclasses.replace(base, side="deepspeed")
        why = f"it fails otherwise with lightning {base.newest} ({_said(newest)}) than with {base.pinned} "
        return dataclasses.replace(base, why=why + f"({_said(pinned)})")
    try:
        result = first_bad(versions, asked, lambda p: p.outcome == PASS, log=log)
    except BisectInconclusiveError as exc:
        why = f"the search over lightning {base.pinned} … {base.newest} did not settle: {exc}"
        return dataclasses.replace(base, why=why)
    [step] = result.transitions
    return dataclasses.replace(
        base, side="lightning", last_failing=step.last, first_passing=step.first, skipped_between=step.skipped_between
    )


class _NightCheck(Protocol):  # nightly/release_night.py's Night, as far as this check needs it
    config: Any
    request: Any
    ctx: Any
    stats: Any
    slice: dict[str, Any]
    echo: Callable[[str], None]


def other_sides(
    night: _NightCheck, regressed: Mapping[str, Sequence[Key]], targets: Sequence[Target]
) -> list[OtherSide]:
    """Each regression of tonight (``regressed``: by target, oldest first; a key on the newest target it regressed
    on), at most ``--max-bisects``, run again with newer Lightning releases; none with ``--no-other-side``."""
    latest = {key: target for target, keys in regressed.items() for key in keys}  # a later target overrides
    if not night.request.other_side or not latest:
        return []
    order = sorted(latest.items(), key=lambda item: (item[0][3] != "none", item[0]))
    limit = night.request.max_bisects
    if len(order) > limit:
        night.echo(f"{len(order) - limit} regression(s) not run with newer Lightning (--max-bisects {limit})")
    pinned = str(night.slice["axes"].get(LIGHTNING, ""))
    versions = _lightning_versions(night, pinned)
    specs = {t.name: t.spec for t in targets}
    return [_side(night, key, (name, specs.get(name, name)), pinned, versions) for key, name in order[:limit]]


def _lightning_versions(night: _NightCheck, pinned: str) -> list[str] | str:
    """The Lightning releases to try, asked of the index tonight (a release of today counts), or why none."""
    index = IndexCache(night.ctx.envs_dir.resolve() / "index-cache.json", night.ctx.base.executable)
    try:
        available = index.versions(LIGHTNING, refresh=True)
    except ConfigError as exc:
        return f"the configured index did not list Lightning's releases: {exc}"
    return lightning_releases(available, pinned, up_to=night.request.lightning_up_to)


def _side(
    night: _NightCheck, key: Key, deepspeed: tuple[str, str], pinned: str, versions: Sequence[str] | str
) -> OtherSide:
    repro, _, form, fix = key
    base = OtherSide(key=key, deepspeed=deepspeed[0], pinned=pinned)
    if isinstance(versions, str):
        return dataclasses.replace(base, why=versions)
    shape = next((f for name, f in night.config.repros[repro].forms.items() if name == form), None)
    if shape is not None and shape.pytest:
        why = "Lightning's own tests are the pinned release's: with another Lightning they test other code"
        return dataclasses.replace(base, newest=versions[-1], why=why)
    night.echo(f"\n== {repro} {form} {fix} on deepspeed {deepspeed[0]}: lightning {pinned} .. {versions[-1]} ==")
    return which_side(key, deepspeed[0], versions, _probe(night, key, deepspeed[1]), log=night.echo)


def _probe(night: _NightCheck, key: Key, deepspeed_spec: str) -> Callable[[str], ProbeResult]:
    """A probe that runs the key's cell with one Lightning release: tonight's slice cell with DeepSpeed at the
    release it regressed on and Lightning changed, so the pinned end is tonight's own record."""
    repro, _, form, fix = key
    request = night.request

    def probe(version: str) -> ProbeResult:
        axes = {name: (value,) for name, value in night.slice["axes"].items()}  # as tonight's slice ran
        axes |= {AXIS: (deepspeed_spec,), LIGHTNING: (version,)}
        matrix = MatrixRequest(
            repros=(repro,),
            backend=request.backend,
            axes=axes,
            forms=(form,),
            fixes=(fix,),
            repeat=request.repeat,
            timeout=request.timeout,
            use_includes=False,
            confinement=request.confinement,
        )
        return probe_result(version, run_matrix(night.config, matrix, night.ctx.quiet(), stats=night.stats))

    return probe
