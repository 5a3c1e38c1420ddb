"""Which commit a release really is: its tag, or the commit its published files were built from.

A commit search between two releases starts from their tags, and its ends are answered by the releases' records
(bisect/culprits.py). That holds only where a release's files are its tag's tree. DeepSpeed 0.19.1 was not: its tag
(510ebe58e, 2026-05-25) lacks #8029, which the published sdist holds (the release was made from main days later,
at "Version fix to unblock pypi", #8039). Searching between the tags, every commit failed as 0.19.0 did and the
search named the tag itself as the fix. So before a search, the Python files a cell installed for each release are
held against the tag's tree (git blob ids, compared where both have a file); when they differ, the first-parent
line after the tag (then before it) is walked for the nearest commit whose files are the release's, and that
commit is the end. Where no cell of the release is here to compare with, the tag stays. Where the tag's files differ
and no commit near it holds the release's (a clone whose tag was moved to an unrelated commit, or a fork's), the tag
is not trusted: ``search_ends`` raises UntrustedTagError naming the release, the tag and its commit, and no commit is
searched between tags that would answer for code the release does not hold.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import canonicalize_name

from reprobisect.bisect.history import file_changes, git_output, is_ancestor
from reprobisect.errors import ConfigError

__all__ = ["ReleaseSource", "UntrustedTagError", "installed_files", "release_source", "search_ends"]

WALK = 400  # commits walked on each side of a tag: a release is made days from its tag, not months


class UntrustedTagError(ConfigError):
    """A release's tag in the clone is not the release's code, and no commit near it is: its message names both."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseSource:
    """The commit to search from for a release: its tag's commit, or the one its files are (``moved``)."""

    version: str
    tag: str
    commit: str  # full hash
    moved: bool = False
    differing: int = 0  # files of the release that differ from the tag's

    @property
    def untrusted(self) -> bool:
        """Is the tag not the release's code, with no commit near it that is (nothing to search from)?"""
        return not self.moved and self.differing > 0

    def distrust(self) -> str:
        """What a maintainer reads when the tag cannot be trusted: the release, the tag, the commit it names."""
        return (
            f"{self.version}: its tag {self.tag} is commit {self.commit[:12]}, whose files are not the release's "
            f"({self.differing} of the Python files the release installs differ) and no commit within {WALK} of it "
            "holds them: the tag is not trusted, and no commit is searched from it (a clone whose tag was moved, or "
            "another repository's: give --git a clone of the project's own history)"
        )

    def note(self) -> str:
        """What a maintainer reads when the release is not its tag."""
        return (
            f"{self.version} as published is commit {self.commit[:12]}, not its tag {self.tag} ({self.differing} "
            f"of its Python files differ from the tag's): the search ends there"
        )


def blob_id(data: bytes) -> str:
    """git's object id of a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


# Files a package's build writes into the package itself, whose contents say where and when it was built: never the
# same in a clone's tree (a replay of the sdists commits the sdist's copy) and in what a cell installed, so they say
# nothing of which commit a release is. DeepSpeed's setup.py writes its version, git hash and the ops it built here.
_BUILT_FILES = frozenset({"git_version_info_installed.py"})


def installed_files(envs_dir: Path, package: str, version: str) -> dict[str, str] | None:
    """The blob ids of the ``.py`` files of ``package`` as a cell here installed ``package==version``, keyed by
    their path below the package's import folder, the files its build writes (``_BUILT_FILES``) left out; None
    when no cell here pins that release."""
    name = canonicalize_name(package)
    for manifest in sorted(envs_dir.glob("*/reprobisect-cell.json")):
        try:
            packages = json.loads(manifest.read_text(encoding="utf-8"))["cell"]["packages"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        pins = {canonicalize_name(str(k)): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {}
        if pins.get(name) != version:
            continue
        for top in sorted(manifest.parent.glob(f"lib/python*/site-packages/{name.replace('-', '_')}")):
            files = {
                p.relative_to(top).as_posix(): blob_id(p.read_bytes())
                for p in top.rglob("*.py")
                if p.is_file() and p.relative_to(top).as_posix() not in _BUILT_FILES
            }
            if files:
                return files
    return None


def _tree_files(repo: Path, rev: str, prefix: str) -> dict[str, str]:
    """The blob ids of the ``.py`` files under ``prefix`` at ``rev``, keyed by their path below it."""
    listed = git_output(repo, "ls-tree", "-r", "-z", "--full-tree", "--end-of-options", rev, "--", prefix)
    files = {}
    for entry in listed.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and path.endswith(".py"):
            files[path[len(prefix) + 1 :]] = parts[2]
    return files


@dataclasses.dataclass
class _Match:
    """How far a tree is from the release's files: files both hold with different contents, and files of the
    release the tree lacks (a build adds some, e.g. DeepSpeed's git_version_info_installed.py; a tree's extra files,
    tests and tools, never count)."""

    installed: Mapping[str, str]
    tree: dict[str, str]
    differing: int = 0
    missing: int = 0

    def __post_init__(self) -> None:
        self.differing = sum(1 for p in self.installed.keys() & self.tree.keys() if self.installed[p] != self.tree[p])
        self.missing = len(self.installed.keys() - self.tree.keys())

    def _count(self, path: str, sign: int) -> None:
        if path in self.installed:
            held = self.tree.get(path)
            self.missing += sign * (held is None)
            self.differing += sign * (held is not None and held != self.installed[path])

    def set(self, path: str, blob: str | None) -> None:
        """The tree with ``path`` at ``blob`` (None: removed), the counts kept."""
        self._count(path, -1)
        if blob is None:
            self.tree.pop(path, None)
        else:
            self.tree[path] = blob
        self._count(path, +1)


def _prefix(repo: Path, rev: str, package: str, installed: Mapping[str, str]) -> str | None:
    """Where the package's import folder lies in the repository (``deepspeed``, ``src/lightning``): the
    candidate holding the most of the release's files."""
    top = canonicalize_name(package).replace("-", "_")
    best, shared = None, 0
    for prefix in (top, f"src/{top}"):
        count = len(installed.keys() & _tree_files(repo, rev, prefix).keys())
        if count > shared:
            best, shared = prefix, count
    return best


_ZERO = "0" * 40


def _changes(repo: Path, prefix: str, *args: str) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """Each first-parent commit ``git log ARGS`` lists, with its ``.py`` changes under ``prefix`` as (path below
    prefix, old blob, new blob, status)."""
    walked = file_changes(repo, "--first-parent", "--diff-merges=first-parent", *args, "--", prefix)
    return [
        (sha, [(c.path[len(prefix) + 1 :], c.old, c.new, c.status) for c in changes if c.path.endswith(".py")])
        for sha, changes in walked
    ]


def _nearest_match(repo: Path, commit: str, prefix: str, installed: Mapping[str, str]) -> tuple[str, _Match, int]:
    """The commit of the first-parent line within WALK of ``commit`` (after it, then before it) whose tree is the
    release's: nothing differs and the fewest of its files are missing; the nearest of those; ``commit`` itself
    when it is one of them. With it, the tag's match and how many of the release's files the chosen tree lacks."""
    at_tag = _Match(installed, _tree_files(repo, commit, prefix))
    found = [(0, commit, at_tag.differing, at_tag.missing)]
    forward = _Match(installed, dict(at_tag.tree))
    after = _changes(repo, prefix, "--reverse", "--ancestry-path", "--end-of-options", f"{commit}..HEAD")
    for distance, (sha, changes) in enumerate(after[:WALK], start=1):
        for path, _, new, status in changes:
            forward.set(path, None if status == "D" or new == _ZERO else new)
        found.append((distance, sha, forward.differing, forward.missing))
    backward = _Match(installed, dict(at_tag.tree))
    before = _changes(repo, prefix, f"--max-count={WALK + 1}", "--end-of-options", commit)
    for distance, ((_, changes), (parent, _)) in enumerate(itertools.pairwise(before), start=1):
        for path, old, _, status in changes:  # undo the commit: its parent's tree
            backward.set(path, None if status == "A" or old == _ZERO else old)
        found.append((distance, parent, backward.differing, backward.missing))
    exact = [f for f in found if f[2] == 0]
    if not exact:
        return commit, at_tag, at_tag.missing
    _, best, _, missing = min(exact, key=lambda f: (f[3], f[0]))  # the fewest missing, then the nearest
    return best, at_tag, missing


def release_source(repo: Path, tag: str, package: str, version: str, envs_dir: Path) -> ReleaseSource:
    """The commit a search should take for ``version`` (tagged ``tag`` in ``repo``): the tag's, unless a cell
    here shows the release's files differ from it and a nearby commit of the first-parent line holds them."""
    commit = git_output(repo, "rev-parse", "--verify", "--end-of-options", f"{tag}^{{commit}}").strip()
    kept = ReleaseSource(version=version, tag=tag, commit=commit)
    installed = installed_files(envs_dir, package, version)
    prefix = _prefix(repo, commit, package, installed) if installed else None
    if installed is None or prefix is None:
        return kept
    best, at_tag, missing = _nearest_match(repo, commit, prefix, installed)
    if best == commit:
        return dataclasses.replace(kept, differing=at_tag.differing)
    changed = at_tag.differing + at_tag.missing - missing  # differing at the tag, or there only in the release
    return ReleaseSource(version=version, tag=tag, commit=best, moved=True, differing=changed)


def search_ends(
    repo: Path, tags: tuple[str, str], releases: tuple[str, str], package: str, envs_dir: Path
) -> tuple[tuple[str, str], list[str]]:
    """The two ends of a commit search between two releases (each its tag, or the commit its files are) and what
    to tell the maintainer about each end that moved; the tags where that cannot be told or the ends would cross.
    UntrustedTagError where a tag is not its release's code and no commit near it is (``ReleaseSource.untrusted``)."""
    try:
        sources = [release_source(repo, tags[i], package, releases[i], envs_dir) for i in (0, 1)]
    except ConfigError:  # a clone git cannot read as asked: the search names it itself
        return tags, []
    untrusted = [source.distrust() for source in sources if source.untrusted]
    if untrusted:
        raise UntrustedTagError("; ".join(untrusted))
    ends = (sources[0].commit if sources[0].moved else tags[0], sources[1].commit if sources[1].moved else tags[1])
    if ends == tags:
        return tags, []
    if not is_ancestor(repo, ends[0], ends[1]):  # the moved ends would cross: the tags, as before
        return tags, []
    return ends, [source.note() for source in sources if source.moved]
