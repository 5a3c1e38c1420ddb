"""What a night runs: the DeepSpeed releases newer than the baseline, or the one release or git ref given instead.

A release must be one the configured index lists; anything else that is not a version (``main``, a tag such as
``v0.18.3``, a hash, a whole ``git+…@ref`` URL) is a ref of DeepSpeed's repository, a VCS cell. A ref is pinned to
the commit it names tonight (``git ls-remote``) before it runs: a cell is reused while its pins are unchanged, so a
moved branch must be a new cell.

Apart from nightly/release_night.py, which runs the targets: which releases and refs a night covers is decided from
the index and the command line alone, before anything is built or run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Literal

from packaging.version import InvalidVersion, Version

from reprobisect.bisect.history import KNOWN_REPOSITORIES
from reprobisect.errors import ConfigError
from reprobisect.util.cmd import run_tool

__all__ = ["AXIS", "DEEPSPEED_REPO", "Target", "new_releases", "pinned_ref", "target_of", "tonights_targets"]

DEEPSPEED_REPO = KNOWN_REPOSITORIES["deepspeed"]  # one table of where each package is developed
AXIS = "deepspeed"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """What tonight runs: a release on the index, or a git ref of DeepSpeed's repository (a VCS cell)."""

    kind: Literal["release", "ref"]
    name: str
    spec: str


def new_releases(available: Sequence[str], baseline: str, *, up_to: str | None = None) -> list[str]:
    """Final releases newer than ``baseline`` (and not newer than ``up_to``), oldest first."""
    low = Version(baseline)
    high = Version(up_to) if up_to else None
    found = []
    for raw in available:
        try:
            version = Version(raw)
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease or version <= low or (high is not None and version > high):
            continue
        found.append(raw)
    return sorted(found, key=Version)


def tonights_targets(
    available: Sequence[str], baseline: str, *, asked: str | None, repo: str, up_to: str | None, max_releases: int
) -> tuple[list[Target], list[str], list[str]]:
    """Tonight's targets, the releases newer than ``baseline`` and those of them too old to run tonight: the one
    release or ref ``asked`` for (``--deepspeed``), else the newest ``max_releases`` of the new releases."""
    if asked:
        targets = [pinned_ref(target_of(asked, available, repo=repo))]
        fresh = [t.name for t in targets if t.kind == "release" and Version(t.name) > Version(baseline)]
        return targets, fresh, []
    fresh = new_releases(available, baseline, up_to=up_to)
    skipped = fresh[:-max_releases] if len(fresh) > max_releases else []
    return [Target(kind="release", name=v, spec=v) for v in fresh if v not in skipped], fresh, skipped


def target_of(value: str, available: Sequence[str], *, repo: str = DEEPSPEED_REPO) -> Target:
    """``0.18.3`` is a release (it must be on the index); ``main``, a tag (``v0.18.3``) or a hash is a ref of ``repo``.

    A full VCS URL (``git+https://…@ref``, ``git+file://…@ref``) is taken as it is.
    """
    if value in available:
        return Target(kind="release", name=value, spec=value)
    if value.startswith("git+"):
        return Target(kind="ref", name=value.rsplit("@", 1)[-1] if "@" in value else "HEAD", spec=value)
    try:
        Version(value)
        number = value[:1].isdigit()  # v0.16.4 parses too, but it is a tag
    except InvalidVersion:
        number = False
    if not number:
        return Target(kind="ref", name=value, spec=f"git+{repo}@{value}")
    newest = available[-1] if available else "none"
    msg = (
        f"--deepspeed {value}: not a release of deepspeed on the configured index (newest: {newest}); "
        "give a listed release or a git ref such as main"
    )
    raise ConfigError(msg)


def pinned_ref(target: Target) -> Target:
    """A ref target with its ref replaced by the commit it names now (``git ls-remote``).

    A cell is reused while its pins are unchanged: pinned to ``main`` it would be built once and never
    again, so each night would test the first night's commit. Pinned to the commit, a moved branch is a
    new cell, and the record says exactly what ran.
    """
    if target.kind != "ref":
        return target
    url, _, ref = target.spec.removeprefix("git+").rpartition("@")
    if re.fullmatch(r"[0-9a-f]{40}", ref):
        return target
    if url.startswith("-") or not re.fullmatch(r"[A-Za-z0-9._/+-]+", ref) or ref.startswith("-"):
        msg = (
            f"--deepspeed {target.name}: {url!r} @ {ref!r} is not a repository URL and a branch, tag or hash "
            "(a URL such as https://github.com/deepspeedai/DeepSpeed.git, a ref of letters, digits, '.', '_', '/', '-')"
        )
        raise ConfigError(msg)
    done = run_tool(
        ["git", "ls-remote", "--", url, ref, f"{ref}^{{}}"],
        what=f"--deepspeed {target.name}: cannot ask {url} which commit it is",
        timeout=120,
        error=ConfigError,
        check=False,
    )
    lines = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
    if done.returncode != 0 or not lines:
        why = done.stderr.strip().splitlines()[-1:] or ["no such branch or tag"]
        msg = f"--deepspeed {target.name}: {url} has no branch or tag {ref!r} ({why[0]}); give a branch, tag or hash"
        raise ConfigError(msg)
    peeled = [sha for sha, name in lines if name.endswith("^{}")]
    sha = (peeled or [lines[0][0]])[0]
    return Target(kind="ref", name=f"{target.name}@{sha[:12]}", spec=f"git+{url}@{sha}")
