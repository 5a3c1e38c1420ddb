"""A package's own git history, as commit bisection reads it: the commits between two revisions, the tag of a
release, a commit's subject and the pull request it names, and whether a clone holds what a build needs.

Read-only on the user's clone: the harness never checks out, fetches into or writes to it; each probe builds from
a throwaway ``git clone --shared`` of it (cells/built_wheels.py). Every revision a user typed reaches git after
``--end-of-options``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from packaging.utils import canonicalize_name

from reprobisect.errors import ConfigError, ToolError
from reprobisect.model.culprit import Commit
from reprobisect.util.cmd import run_tool
from reprobisect.util.git_names import is_commit_hash

__all__ = [
    "KNOWN_REPOSITORIES",
    "FileChange",
    "check_clone",
    "clone_known",
    "commit_info",
    "file_changes",
    "git_output",
    "github_slug",
    "is_ancestor",
    "pull_request",
    "release_tag",
    "revisions",
]

# Where each package of this stack is developed: a clone the harness may make itself, and the ``owner/name`` that
# a subject's ``(#1234)`` refers to.
KNOWN_REPOSITORIES: Mapping[str, str] = {
    "deepspeed": "https://github.com/deepspeedai/DeepSpeed",
    "lightning": "https://github.com/Lightning-AI/pytorch-lightning",
    "pytorch-lightning": "https://github.com/Lightning-AI/pytorch-lightning",
    "torch": "https://github.com/pytorch/pytorch",
    "torchvision": "https://github.com/pytorch/vision",
}
_PR = re.compile(r"\(#(\d{1,7})\)\s*$|\bMerge pull request #(\d{1,7})\b")


def git_output(repo: Path, *args: str, timeout: float = 300) -> str:
    """What ``git -C repo ARGS`` prints, stripped; a failure is a ConfigError naming the clone."""
    return run_tool(["git", "-C", repo, *args], what=f"--git {repo}", timeout=timeout, error=ConfigError).stdout.strip()


def check_clone(repo: Path) -> None:
    """Refuse, once and by name, a clone that cannot build its past commits offline: a partial (``--filter``) one
    lacks the files and would fetch them per commit. A shallow clone serves the commits it holds (the nightly's
    clone of DeepSpeed since last night's main); a range reaching past them is named by ``revisions``."""
    if not repo.is_dir():
        msg = f"--git {repo}: no such folder; pass a clone of the package's repository"
        raise ConfigError(msg)
    if git_output(repo, "rev-parse", "--is-bare-repository") != "true":  # not a clone at all: git's words, named
        top = Path(git_output(repo, "rev-parse", "--show-toplevel"))
        if top.resolve() != repo.resolve():
            msg = f"--git {repo}: not a clone but a folder inside the clone {top}; pass the package's own clone"
            raise ConfigError(msg)
    promisor = run_tool(
        ["git", "-C", repo, "config", "--get-regexp", r"^(extensions\.partialclone|remote\..*\.promisor)$"],
        what=f"--git {repo}",
        timeout=60,
        check=False,
    ).stdout.strip()
    if promisor:
        msg = (
            f"--git {repo}: a partial clone (made with --filter: {promisor.splitlines()[0]}), whose files are "
            f"fetched per commit, which a node without network cannot do; clone it without --filter"
        )
        raise ConfigError(msg)


# Files no build reads (images, documents, videos): a clone that lacks some of them (a mirror that left out the large
# images under docs/ and blogs/) builds every commit as a whole clone does, so they are not counted as missing.
NEVER_BUILT = frozenset(
    {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".ico", ".tif", ".tiff", ".pdf", ".mp4", ".mov", ".webm"}
)


def missing_objects(repo: Path, start: str, end: str) -> dict[str, str | None]:
    """The objects of the commits ``start..end`` the clone lacks, each with the path a commit of the range gave it
    (None when no commit's diff names it: a tree, or an object only a merge brought); empty for a whole clone."""
    listed = run_tool(
        ["git", "-C", repo, "rev-list", "--objects", "--missing=print", "--end-of-options", f"{start}..{end}"],
        what=f"--git {repo}: listing the objects between {start} and {end}",
        timeout=600,
        error=ConfigError,
    ).stdout
    missing: dict[str, str | None] = {line[1:].strip(): None for line in listed.splitlines() if line.startswith("?")}
    if missing:
        for _, changes in file_changes(repo, "--end-of-options", f"{start}..{end}"):
            for change in changes:
                if change.new in missing:
                    missing[change.new] = change.path
    return missing


@dataclasses.dataclass(frozen=True)
class FileChange:
    """One file a commit changed, as ``git log --raw`` says it: its path, the blob before and after (forty zeros
    where there is none) and the status letter (A, M, D, T)."""

    path: str
    old: str
    new: str
    status: str


def file_changes(repo: Path, *log_args: str) -> list[tuple[str, list[FileChange]]]:
    """Each commit ``git log LOG_ARGS`` lists, in its order, with the files it changed (renames as a deletion and
    an addition): one git call for a whole range."""
    raw = ["--raw", "-z", "--no-abbrev", "--no-renames", "--format=%x01%H"]
    out = git_output(repo, "log", *raw, *log_args)
    commits = []
    for chunk in out.split("\x01")[1:]:
        sha, _, rest = chunk.partition("\0")
        tokens, changes = rest.split("\0"), []
        for meta, path in itertools.pairwise(tokens):  # ":100644 100644 <old> <new> M", then its path
            parts = meta.strip().split()
            if meta.strip().startswith(":") and len(parts) == 5:
                changes.append(FileChange(path=path, old=parts[2], new=parts[3], status=parts[4]))
        commits.append((sha.strip(), changes))
    return commits


def needed_missing(missing: Mapping[str, str | None]) -> list[str]:
    """What of ``missing`` a build could read (by path, else by object id): all but the files in NEVER_BUILT."""
    return sorted(
        path or oid for oid, path in missing.items() if path is None or Path(path).suffix.lower() not in NEVER_BUILT
    )


def revisions(repo: Path, good: str, bad: str, *, first_parent: bool = True) -> list[str]:
    """Commits from ``good`` to ``bad``, oldest first, as full hashes, ``good`` included.

    ``first_parent``: where history merges, the line of the branch ``bad`` is on (each merge is one step, as
    ``git bisect --first-parent`` takes it), not every commit of every merged branch; ancestry-path otherwise.
    """
    try:
        start = git_output(repo, "rev-parse", "--verify", "--end-of-options", f"{good}^{{commit}}")
        end = git_output(repo, "rev-parse", "--verify", "--end-of-options", f"{bad}^{{commit}}")
    except ConfigError as exc:
        if git_output(repo, "rev-parse", "--is-shallow-repository") != "true":
            raise
        msg = (
            f"--git {repo}: a shallow clone, whose history stops before {good} or {bad}; "
            f"run `git -C {repo} fetch --unshallow --tags` or clone it whole"
        )
        raise ConfigError(msg) from exc
    if not is_ancestor(repo, start, end):
        msg = f"--good {good!r} is not an ancestor of --bad {bad!r} in {repo}: give two revisions of one history"
        raise ConfigError(msg)
    walk = ["--first-parent"] if first_parent else ["--ancestry-path"]
    between = git_output(repo, "rev-list", *walk, "--reverse", f"{start}..{end}").split()
    needed = needed_missing(missing_objects(repo, start, end))
    if needed:
        shown = ", ".join(needed[:3]) + (f" and {len(needed) - 3} more" if len(needed) > 3 else "")
        msg = (
            f"--git {repo}: {len(needed)} objects of the commits between {good} and {bad} are missing ({shown}: a "
            f"partial or damaged clone); run `git -C {repo} fetch --refetch` or clone it whole"
        )
        raise ConfigError(msg)
    return [start, *between]


def branch_point(repo: Path, older: str, newer: str) -> str | None:
    """Where ``older``'s branch left ``newer``'s line (their merge base), when ``older`` is not on that line: a
    patch release of a maintenance branch (Lightning's 2.1.4 on release/2.1.x) before the next minor release, cut
    from master (2.2.0). None where ``older`` is an ancestor of ``newer`` (one line: search between them as they
    are) or where the two share no history. What changed between the two releases along ``newer``'s line came
    after that point; the point itself is a commit no release is, so a search probes it as a commit."""
    if is_ancestor(repo, older, newer):
        return None
    done = run_tool(
        ["git", "-C", repo, "merge-base", "--end-of-options", older, newer],
        what=f"--git {repo}",
        timeout=120,
        check=False,
    )
    found = done.stdout.strip()
    return found if done.returncode == 0 and is_commit_hash(found) else None


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    """Whether ``older`` is ``newer`` or one of its ancestors in ``repo``."""
    done = run_tool(
        ["git", "-C", repo, "merge-base", "--is-ancestor", older, newer], what=f"--git {repo}", timeout=120, check=False
    )
    return done.returncode == 0


def release_tag(repo: Path, version: str) -> str | None:
    """The tag of release ``version`` in the clone (``v0.16.5``, or ``0.16.5``), or None when it has neither."""
    for tag in (f"v{version}", version):
        done = run_tool(
            ["git", "-C", repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"refs/tags/{tag}^{{commit}}"],
            what=f"--git {repo}: finding the tag of {version}",
            timeout=60,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip():
            return tag
    return None


def github_slug(repo: Path, package: str) -> str | None:
    """``owner/name`` for pull-request references: the clone's ``origin`` when it is on GitHub, else the package's
    known repository."""
    origin = run_tool(
        ["git", "-C", repo, "config", "--get", "remote.origin.url"], what=f"--git {repo}", timeout=60, check=False
    ).stdout.strip()
    for url in (origin, KNOWN_REPOSITORIES.get(canonicalize_name(package), "")):
        slug = _slug(url)
        if slug:
            return slug
    return None


def _slug(url: str) -> str | None:
    if url.startswith("git@github.com:"):
        path = url.removeprefix("git@github.com:")
    else:
        parsed = urlparse(url)
        if parsed.hostname != "github.com":
            return None
        path = parsed.path
    parts = path.strip("/").removesuffix(".git").split("/")
    if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", p) for p in parts):
        return None
    return "/".join(parts)


def pull_request(subject: str, slug: str | None) -> str | None:
    """The pull request a subject names: GitHub's squash ``Title (#7018)`` or ``Merge pull request #7018``."""
    found = _PR.search(subject)
    if found is None:
        return None
    number = found.group(1) or found.group(2)
    return f"{slug}#{number}" if slug else f"#{number}"


def commit_info(repo: Path, sha: str, slug: str | None) -> Commit:
    """The commit's full hash, its subject (one line, at most 200 characters) and the pull request it names."""
    out = git_output(repo, "log", "-1", "--format=%H%x00%s", "--end-of-options", sha)
    full, _, subject = out.partition("\0")
    subject = " ".join(subject.split())[:200]
    return Commit(sha=full, subject=subject, pull_request=pull_request(subject, slug))


def clone_known(package: str, dest: Path) -> Path:
    """A full clone of ``package``'s known repository under ``dest`` (made once, then fetched), for a culprit
    search without ``--git``. Offline, or for a package with no known repository: a ConfigError naming ``--git``.
    """
    url = KNOWN_REPOSITORIES.get(canonicalize_name(package))
    if url is None:
        msg = f"no known repository for {package}: pass --git CLONE (a full clone of its repository)"
        raise ConfigError(msg)
    target = dest / canonicalize_name(package)
    dest.mkdir(parents=True, exist_ok=True)
    # two entries of ``reprobisect corpus`` (or two harnesses) asking at once: one clones or fetches, the other
    # waits and then fetches the clone it made; never two ``git clone`` into one folder
    with (dest / f"{target.name}.flock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _clone_or_fetch(url, target, package)
    return target


def _clone_or_fetch(url: str, target: Path, package: str) -> None:
    """Clone ``url`` into ``target``, or fetch it there when it is cloned already; a ConfigError naming --git."""
    try:
        if (target / ".git").exists():
            fetch: list[str | Path] = ["git", "-C", target, "fetch", "--quiet", "--tags", "origin"]
            run_tool(fetch, what=f"updating {target}", timeout=1800)
        else:
            run_tool(["git", "clone", "--quiet", "--", url, target], what=f"cloning {url}", timeout=3600)
    except ToolError as exc:
        msg = (
            f"could not clone {url} into {target} ({str(exc).splitlines()[0][:200]}); without network pass "
            f"--git CLONE, a full clone of {package}'s repository made where there is network"
        )
        raise ConfigError(msg) from exc
