"""Read and check one corpus entry's ``truth.toml``: what a real regression did, measured by hand.

The truth is what the harness's answers are scored against, so a wrong or ambiguous truth would silently turn a
wrong answer into a right one. It is checked as hostile input: every key known, every value of its type, every
release named in a range listed in ``releases``, the script inside the entry's folder, and the hand-written ranges
equal to what the measured runs (``[runs]``, written by ``tools/corpus_truth.py``) say. Every error names the
file, the key, the value and what would be right.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
import statistics
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from reprobisect.errors import ConfigError
from reprobisect.model.signature import normalize_message

__all__ = [
    "BACKENDS",
    "KINDS",
    "MESSAGE_PREFIX",
    "PACKAGES",
    "Change",
    "MeasuredRelease",
    "SlowdownTruth",
    "Span",
    "Truth",
    "load_truth",
    "parse_truth",
]

MAX_TRUTH_BYTES = 1 << 20
BACKENDS = ("cpu", "gpu", "gpus")
PACKAGES = ("deepspeed", "lightning")
KINDS = (
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
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}#[1-9][0-9]{0,6}")
_SHA = re.compile(r"[0-9a-f]{7,40}")
_TOP = {
    "schema": int, "title": str, "report": str, "reporter": str, "kinds": list, "package": str, "releases": list,
    "backend": str, "gpus": int, "precision": str, "seconds": (int, float), "timeout": int, "script": str,
    "pins": dict, "affected": list, "runs": dict, "commits": dict, "notes": str, "slowdown": dict,
}  # fmt: skip
_REQUIRED = ("schema", "title", "report", "reporter", "kinds", "package", "releases", "backend", "precision")
_SPAN = {"first": str, "last": str, "signature": str, "introduced": dict, "fixed": dict}
_CHANGE = {"pr": str, "commit": str, "parent": str, "how": str}
_RUN = {"exit": int, "last_line": str, "seconds": (int, float), "version": str, "step_ms": list}
_SLOWDOWN = {"threshold": (int, float), "metric": str, "repeats": int}
MARGIN = 1.2  # a performance truth's every ratio at least this factor away from its limit: no coin flips


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    """The pull request that brought (or mended) the bug, and the commit it was checked at."""

    pr: str
    commit: str
    parent: str = ""
    how: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Span:
    """One affected range of neighbouring releases, with the change at each end when known."""

    first: str
    last: str
    signature: str = ""
    introduced: Change | None = None
    fixed: Change | None = None


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

    def span_releases(self) -> list[list[str]]:
        """The affected ranges as lists of the releases they hold."""
        index = {r: i for i, r in enumerate(self.releases)}
        return [list(self.releases[index[s.first] : index[s.last] + 1]) for s in self.affected]


def _fail(where: str, key: str, value: object, right: str) -> ConfigError:
    return ConfigError(f"{where}: {key} = {_show(value)}: {right}")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _keys(table: Mapping[str, Any], known: Mapping[str, object], where: str, prefix: str) -> None:
    """Unknown keys and wrongly typed values are errors (a typo must not drop a fact)."""
    for key, value in table.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), 1, 0.6)
            hint = f"perhaps you meant {close[0]!r}" if close else f"known keys: {', '.join(known)}"
            raise _fail(where, prefix + key, value, f"unknown key; {hint}")
        wanted = known[key]
        if isinstance(value, bool) or not isinstance(value, wanted):  # type: ignore[arg-type]
            types = wanted if isinstance(wanted, tuple) else (wanted,)
            names = " or ".join(t.__name__ for t in types)
            raise _fail(where, prefix + key, value, f"must be a {names}")


def _strings(values: list[Any], where: str, key: str) -> list[str]:
    for value in values:
        if not isinstance(value, str):
            raise _fail(where, key, value, "must be a list of strings")
    return list(values)


def _releases(values: list[Any], where: str) -> tuple[str, ...]:
    releases = _strings(values, where, "releases")
    if len(releases) < 2:
        raise _fail(where, "releases", values, "list at least two releases (the range the truth was measured on)")
    parsed = []
    for release in releases:
        try:
            parsed.append(Version(release))
        except InvalidVersion:
            raise _fail(where, "releases", release, "not a version (write 0.16.5)") from None
    if parsed != sorted(set(parsed)):
        raise _fail(where, "releases", values, "must be distinct and in increasing order")
    return tuple(releases)


def _ref(value: str, where: str, key: str) -> str:
    if not _REF.fullmatch(value):
        raise _fail(where, key, value, "must be owner/repo#N (deepspeedai/DeepSpeed#7018)")
    return value


def _change(table: Mapping[str, Any], where: str, key: str) -> Change:
    _keys(table, _CHANGE, where, key + ".")
    for name in ("pr", "commit"):
        if name not in table:
            raise _fail(where, f"{key}.{name}", None, "missing; the pull request and the commit it was checked at")
    for name in ("commit", "parent"):
        if name in table and not _SHA.fullmatch(table[name]):
            raise _fail(where, f"{key}.{name}", table[name], "must be a commit sha (7-40 lowercase hex digits)")
    return Change(pr=_ref(table["pr"], where, key + ".pr"), **{k: table[k] for k in table if k != "pr"})


def _span(table: Any, releases: tuple[str, ...], where: str, n: int) -> Span:
    key = f"affected[{n}]"
    if not isinstance(table, dict):
        raise _fail(where, key, table, "must be a table ([[affected]] with first and last)")
    _keys(table, _SPAN, where, key + ".")
    for end in ("first", "last"):
        if table.get(end) not in releases:
            right = f"must be one of the releases listed in 'releases' ({', '.join(releases)})"
            raise _fail(where, f"{key}.{end}", table.get(end), right)
    if releases.index(table["first"]) > releases.index(table["last"]):
        raise _fail(where, key, f"{table['first']} … {table['last']}", "first must not come after last")
    changes = {end: _change(table[end], where, f"{key}.{end}") for end in ("introduced", "fixed") if end in table}
    return Span(first=table["first"], last=table["last"], signature=table.get("signature", ""), **changes)


def _measured(table: Mapping[str, Any], where: str, key: str) -> dict[str, MeasuredRelease]:
    found = {}
    for name, row in table.items():
        if not isinstance(row, dict):
            raise _fail(where, f"{key}.{name}", row, "must be a table {exit, last_line, seconds}")
        _keys(row, _RUN, where, f"{key}.{name}.")
        missing = [k for k in ("exit", "last_line", "seconds") if k not in row]
        if missing:
            raise _fail(where, f"{key}.{name}", row, f"missing {', '.join(missing)}; rerun tools/corpus_truth.py")
        found[name] = MeasuredRelease(**{**row, "step_ms": _step_ms(row.get("step_ms", []), where, f"{key}.{name}")})
    return found


def _step_ms(values: list[Any], where: str, key: str) -> tuple[float, ...]:
    """Each run's median step in milliseconds: finite positive numbers."""
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
            raise _fail(where, f"{key}.step_ms", value, "must be a list of positive numbers (milliseconds)")
    return tuple(float(v) for v in values)


def _slowdown(data: Mapping[str, Any], where: str) -> SlowdownTruth | None:
    """The ``[slowdown]`` table, present exactly when the entry's kinds say ``performance``."""
    table, performance = data.get("slowdown"), "performance" in data["kinds"]
    if table is None and not performance:
        return None
    if table is None or not performance:
        right = "a performance entry needs [slowdown] threshold = PERCENT, and only a performance entry has one"
        raise _fail(where, "slowdown", table, right)
    _keys(table, _SLOWDOWN, where, "slowdown.")
    threshold, metric, repeats = table.get("threshold"), table.get("metric", "step"), table.get("repeats", 3)
    if threshold is None or not 0 < threshold < 10000:
        raise _fail(where, "slowdown.threshold", threshold, "must be a percentage above 0 (50: 1.5 times slower)")
    if metric != "step":
        raise _fail(where, "slowdown.metric", metric, "must be 'step' (what tools/corpus_truth.py measures by hand)")
    if not 2 <= repeats <= 20:
        raise _fail(where, "slowdown.repeats", repeats, "must be 2 to 20 (runs of each release by hand)")
    return SlowdownTruth(threshold=float(threshold), metric=metric, repeats=repeats)


def _script(folder: Path, value: str, where: str) -> Path:
    """The script, which must lie inside the entry's folder (no absolute path, no '..', no link out of it)."""
    path = Path(value)
    if path.is_absolute() or ".." in path.parts or not value:
        raise _fail(where, "script", value, "must be a file name inside the entry's folder (issue.py)")
    resolved = (folder / path).resolve()
    if not resolved.is_relative_to(folder.resolve()):
        raise _fail(where, "script", value, "leads out of the entry's folder (a link?); keep the script inside it")
    if not resolved.is_file():
        raise _fail(where, "script", value, f"no such file in {folder}")
    return resolved


def _pins(table: Mapping[str, Any], package: str, where: str) -> dict[str, str]:
    for name, value in table.items():
        if name not in PIN_NAMES or name == package:
            right = f"pin one of {', '.join(n for n in PIN_NAMES if n != package)} (the package varies: releases)"
            raise _fail(where, f"pins.{name}", value, right)
        if not isinstance(value, str) or not value or value.startswith("-") or not value.isprintable():
            raise _fail(where, f"pins.{name}", value, "must be a version such as '2.6.6', or 'system'")
    return dict(table)


def _check_header(data: Mapping[str, Any], where: str) -> None:
    _keys(data, _TOP, where, "")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise _fail(where, missing[0], None, f"missing; an entry needs {', '.join(_REQUIRED)}")
    if data["schema"] != 1:
        raise _fail(where, "schema", data["schema"], "must be 1 (the only format so far)")
    for key, allowed in (("package", PACKAGES), ("backend", BACKENDS)):
        if data[key] not in allowed:
            raise _fail(where, key, data[key], f"must be one of {', '.join(allowed)}")
    unknown = [k for k in _strings(data["kinds"], where, "kinds") if k not in KINDS]
    if unknown:
        raise _fail(where, "kinds", unknown[0], f"must be among {', '.join(KINDS)}")
    gpus = data.get("gpus", 0)
    need = {"cpu": gpus == 0, "gpu": gpus == 1, "gpus": gpus >= 2}[data["backend"]]
    if not need:
        raise _fail(where, "gpus", gpus, f"does not fit backend {data['backend']!r} (cpu: 0, gpu: 1, gpus: 2 or more)")
    _ref(data["report"], where, "report")


def _check_spans(spans: list[Span], releases: tuple[str, ...], where: str) -> None:
    """Ranges in order, not touching (two neighbouring ranges are one range), the ends' changes where they can be."""
    for before, after in itertools.pairwise(spans):
        if releases.index(after.first) <= releases.index(before.last) + 1:
            raise _fail(where, "affected", f"{before.last} and {after.first}", "ranges must be apart and in order")
    for n, span in enumerate(spans):
        if span.introduced is not None and span.first == releases[0]:
            right = "the first release listed is affected, so no release transition brings it; drop it or list more"
            raise _fail(where, f"affected[{n}].introduced", span.introduced.pr, right)
        if span.fixed is not None and span.last == releases[-1]:
            right = "the last release listed is affected, so no release transition mends it; drop it or list more"
            raise _fail(where, f"affected[{n}].fixed", span.fixed.pr, right)


def _check_runs(truth: Truth, where: str) -> None:
    """Measured runs name listed releases, and where every release ran, the failing ones are the affected ones."""
    for release in truth.runs:
        if release not in truth.releases:
            raise _fail(where, f"runs.{release}", truth.runs[release].exit, "names a release not listed in 'releases'")
    if set(truth.runs) != set(truth.releases):
        return  # not measured yet (the tool fills it); corpus runs refuse an entry without every run
    if truth.slowdown is not None:
        _check_timed_runs(truth, truth.slowdown, where)
        _check_kinds(truth, where)
        return
    failing = [r for r in truth.releases if truth.runs[r].exit != 0]
    stated = [r for span in truth.span_releases() for r in span]
    if failing != stated:
        right = f"the runs fail on {', '.join(failing) or 'none'}; the affected ranges must say the same"
        raise _fail(where, "affected", ", ".join(stated) or "none", right)
    _check_kinds(truth, where)


def _failure_key(line: str) -> tuple[str, str]:
    """A hand run's failure as the scoring tells failures apart: the exception's name, the normalized message's
    start."""
    exception, _, message = line.partition(": ")
    return exception.rsplit(".", 1)[-1], normalize_message(message)[:MESSAGE_PREFIX]


def _check_kinds(truth: Truth, where: str) -> None:
    """The kinds the runs decide are stated exactly when the runs say so: ``came-and-went`` (a range with a passing
    release listed on each side), ``still-present`` (the last release listed is affected: it fails, or for a
    performance entry is slower), ``signature-changes`` (a range whose failures differ, as the scoring tells them
    apart)."""
    spans = truth.span_releases()
    said = {
        "came-and-went": any(s[0] != truth.releases[0] and s[-1] != truth.releases[-1] for s in spans),
        "still-present": bool(spans) and spans[-1][-1] == truth.releases[-1],
        "signature-changes": any(len({_failure_key(truth.runs[r].last_line) for r in s}) > 1 for s in spans),
    }
    for kind, runs_say in said.items():
        if (kind in truth.kinds) != runs_say:
            right = f"the runs {'say' if runs_say else 'do not say'} {kind!r}; {'add' if runs_say else 'drop'} it"
            raise _fail(where, "kinds", list(truth.kinds), right)


def _check_timed_runs(truth: Truth, rule: SlowdownTruth, where: str) -> None:
    """A performance entry's runs all pass and are timed; the releases slower than the first beyond the limit are
    the affected ones, and none lies within ``MARGIN`` of the limit (the harness's verdict there is a coin flip)."""
    for release in truth.releases:
        run = truth.runs[release]
        if run.exit != 0 or not run.step_ms:
            right = "a performance entry's runs must pass and be timed (step_ms): its bug is a time; rerun the tool"
            raise _fail(where, f"runs.{release}", run.exit if run.exit else list(run.step_ms), right)
    reference = truth.runs[truth.releases[0]].median_ms
    ratios = {r: truth.runs[r].median_ms / reference for r in truth.releases}
    for release, ratio in ratios.items():
        if rule.limit / MARGIN < ratio < rule.limit * MARGIN:
            right = (
                f"×{ratio:.2f} of {truth.releases[0]} is too near the limit ×{rule.limit:.2f}; choose another threshold"
            )
            raise _fail(where, f"runs.{release}.step_ms", list(truth.runs[release].step_ms), right)
    slower = [r for r in truth.releases if ratios[r] > rule.limit]
    stated = [r for span in truth.span_releases() for r in span]
    if slower != stated:
        right = f"the runs are slower on {', '.join(slower) or 'none'}; the affected ranges must say the same"
        raise _fail(where, "affected", ", ".join(stated) or "none", right)


def _row(commits: Mapping[str, MeasuredRelease], sha: str) -> MeasuredRelease | None:
    return next((row for key, row in commits.items() if key.startswith(sha) or sha.startswith(key)), None)


def _check_commits(truth: Truth, where: str) -> None:
    """A pull request checked by hand must say what it claims: the introducing commit fails and its parent passes,
    the fixing commit passes and its parent fails (where ``[commits]`` holds their runs); for a performance entry,
    the introducing commit is slower than its parent beyond the limit and the fixing one's parent than it."""
    if truth.slowdown is not None:
        _check_timed_commits(truth, truth.slowdown, where)
        return
    for n, span in enumerate(truth.affected):
        for end, change in (("introduced", span.introduced), ("fixed", span.fixed)):
            if change is None:
                continue
            for sha, fails in ((change.commit, end == "introduced"), (change.parent, end == "fixed")):
                row = _row(truth.commits, sha) if sha else None
                if row is not None and (row.exit != 0) != fails:
                    said = f"exit {row.exit}" + (f": {row.last_line[:80]}" if row.last_line else "")
                    right = f"its measured run must {'fail' if fails else 'pass'} for the {end} side ({said})"
                    raise _fail(where, f"affected[{n}].{end}", sha, right)


def _check_timed_commits(truth: Truth, rule: SlowdownTruth, where: str) -> None:
    for n, span in enumerate(truth.affected):
        for end, change in (("introduced", span.introduced), ("fixed", span.fixed)):
            if change is None or not change.parent:
                continue
            commit, parent = _row(truth.commits, change.commit), _row(truth.commits, change.parent)
            if commit is None or parent is None or not commit.step_ms or not parent.step_ms:
                continue  # not measured yet
            slow, fast = (commit, parent) if end == "introduced" else (parent, commit)
            if slow.median_ms / fast.median_ms <= rule.limit:
                said = f"{slow.median_ms:.2f} ms against {fast.median_ms:.2f} ms"
                right = f"the {end} side must be slower beyond ×{rule.limit:.2f} across the commit ({said})"
                raise _fail(where, f"affected[{n}].{end}", change.commit, right)


def parse_truth(data: Mapping[str, Any], folder: Path, *, where: str) -> Truth:
    """A checked Truth from the parsed TOML of ``folder``'s truth.toml (``where`` names it in errors)."""
    _check_header(data, where)
    releases = _releases(data["releases"], where)
    spans = [_span(t, releases, where, n) for n, t in enumerate(data.get("affected", []))]
    _check_spans(spans, releases, where)
    truth = Truth(
        name=folder.name,
        folder=folder,
        title=data["title"],
        report=data["report"],
        reporter=data["reporter"],
        kinds=tuple(data["kinds"]),
        package=data["package"],
        releases=releases,
        backend=data["backend"],
        gpus=data.get("gpus", 0),
        precision=data["precision"],
        seconds=float(data.get("seconds", 0)),
        timeout=data.get("timeout", 900),
        script=_script(folder, data.get("script", "issue.py"), where),
        pins=_pins(data.get("pins", {}), data["package"], where),
        affected=tuple(spans),
        runs=_measured(data.get("runs", {}), where, "runs"),
        commits=_measured(data.get("commits", {}), where, "commits"),
        slowdown=_slowdown(data, where),
    )
    _check_runs(truth, where)
    _check_commits(truth, where)
    return truth


def load_truth(folder: Path) -> Truth:
    """The checked truth of one entry folder; a ConfigError names the file, key, value and the fix."""
    path = folder / "truth.toml"
    where = str(path)
    if not path.is_file():
        msg = f"{where}: no such file; every corpus entry holds issue.py and truth.toml (corpus/README.md)"
        raise ConfigError(msg)
    raw = path.read_bytes()[: MAX_TRUTH_BYTES + 1]
    if len(raw) > MAX_TRUTH_BYTES:
        msg = f"{where}: larger than {MAX_TRUTH_BYTES} bytes; a truth file is a page of facts"
        raise ConfigError(msg)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        msg = f"{where}: not valid TOML: {exc}"
        raise ConfigError(msg) from exc
    return parse_truth(data, folder, where=where)
