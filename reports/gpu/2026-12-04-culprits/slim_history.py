"""Make a small, self-contained git history of DeepSpeed for the GPU node (no network there): for each range of
release tags, the first tag's tree and then every commit of the range's first-parent line with its own subject,
author and dates, but only the paths a build needs (no docs, blogs, tests: the upstream clone is 156 MB, this
one a few MB). Commit hashes differ from upstream; subjects, and so the pull requests they name, are upstream's.

    python3 slim_history.py UPSTREAM_CLONE DEST v0.16.4..v0.16.5 v0.17.0..v0.17.1
    python3 slim_history.py UPSTREAM_CLONE DEST v0.17.5..v0.17.6 v0.19.0..819af0e59   # tags inside a range kept

Ranges follow each other on one line: the first tag of a later range is one commit on top of the earlier range's
last. Read-only on UPSTREAM_CLONE (its objects are borrowed, then copied in by a repack).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KEEP = ["accelerator", "bin", "csrc", "deepspeed", "op_builder", "requirements", "setup.py", "setup.cfg",
        "version.txt", "MANIFEST.in", "README.md", "LICENSE", "build_win.bat"]  # fmt: skip


def git(repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env, input=stdin
    )
    return done.stdout.strip()


def slim_tree(dest: Path, commit: str) -> str:
    listing = git(dest, "ls-tree", commit, "--", *KEEP)
    return git(dest, "mktree", stdin=listing + "\n")


def copy_commit(dest: Path, commit: str, parent: str | None, subject: str | None = None) -> str:
    fields = git(dest, "log", "-1", "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%s", commit).split("\0")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": fields[0], "GIT_AUTHOR_EMAIL": fields[1], "GIT_AUTHOR_DATE": fields[2],
        "GIT_COMMITTER_NAME": fields[3], "GIT_COMMITTER_EMAIL": fields[4], "GIT_COMMITTER_DATE": fields[5],
    }  # fmt: skip
    parents = ["-p", parent] if parent else []
    return git(dest, "commit-tree", slim_tree(dest, commit), *parents, "-m", subject or fields[6], env=env)


def release_tags(upstream: Path) -> dict[str, list[str]]:
    """Upstream's release tags (``v*``) by the commit they point at."""
    found: dict[str, list[str]] = {}
    fields = "--format=%(objectname) %(refname:short) %(*objectname)"
    for line in git(upstream, "for-each-ref", fields, "refs/tags/v*").splitlines():
        plain, name, peeled = [*line.split(" "), ""][:3]  # a lightweight tag has no peeled commit (the third field)
        found.setdefault(peeled or plain, []).append(name)
    return found


def main(upstream: Path, final: Path, ranges: list[str]) -> None:
    dest = final.with_name(final.name + ".staging")
    git(Path.cwd(), "init", "-q", "-b", "main", str(dest))
    (dest / ".git" / "objects" / "info" / "alternates").write_text(str(upstream.resolve() / "objects") + "\n")
    head: str | None = None
    tags = release_tags(upstream)
    for spec in ranges:
        first, last = spec.split("..")
        start = git(upstream, "rev-parse", f"{first}^{{commit}}")
        subject = None if head is None else f"Release {first} (the commits before it)"
        head = copy_commit(dest, start, head, subject)
        git(dest, "tag", first, head)
        for commit in git(upstream, "rev-list", "--first-parent", "--reverse", spec).split():
            head = copy_commit(dest, commit, head)
            for tag in tags.get(commit, []):  # a release tagged inside the range keeps its tag
                git(dest, "tag", "-f", tag, head)
        if not last.startswith("v"):  # a range may end at a commit (a release's sdist built after its tag)
            continue
        git(dest, "tag", "-f", last, head)
    assert head is not None
    git(dest, "update-ref", "refs/heads/main", head)
    # a clone over the pack protocol copies only what the slim commits reach (a repack took all of upstream)
    git(Path.cwd(), "clone", "-q", "--no-local", "--mirror", str(dest), str(final / ".git"))
    git(final, "config", "--bool", "core.bare", "false")
    git(final, "remote", "remove", "origin")
    git(final, "checkout", "-q", "-f", "main")
    git(final, "fsck", "--connectivity-only")
    print(git(final, "log", "--oneline", "--decorate", "-n", "5"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
