"""A git history built from DeepSpeed's 0.16.4 and 0.16.5 sdists (tests/integration/release_history.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import base_python
from tests.integration.release_history import broken_imports, build_history, change_order

pytestmark = pytest.mark.slow

# the file whose commit flips tests/resources/scripts/bisect/stray_grad_bf16.py from PASS to FAIL: it turns the
# config default of bf16's immediate_grad_update on (DeepSpeed PR #7018)
CULPRIT = "deepspeed/runtime/constants.py"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_one_commit_per_changed_file_between_the_release_tags(tmp_path: Path) -> None:
    sdists = tmp_path / "sdists"
    history = build_history(tmp_path / "a", "deepspeed", "0.16.4", "0.16.5", base_python(), sdists=sdists)
    repo = history.repo
    old_tree, new_tree = tmp_path / "a" / "unpacked" / "0.16.4", tmp_path / "a" / "unpacked" / "0.16.5"
    (old_top,), (new_top,) = list(old_tree.iterdir()), list(new_tree.iterdir())
    changes = change_order(old_top, new_top)

    assert (history.old_tag, history.new_tag) == ("v0.16.4", "v0.16.5")
    assert _git(repo, "tag", "--list").split() == ["v0.16.4", "v0.16.5"]
    shas = _git(repo, "rev-list", "--reverse", "v0.16.4..v0.16.5").split()
    assert shas == history.shas
    assert len(shas) == len(changes) == 50  # 13 added files, 37 changed, none removed
    for (sha, path, action), (want_path, want_action) in zip(history.commits, changes, strict=True):
        assert (path, action) == (want_path, want_action)
        assert _git(repo, "show", "--name-only", "--format=", sha).splitlines() == [path]
        assert path in _git(repo, "log", "-1", "--format=%s", sha)
    assert history.commits[-1][1] == "version.txt"
    assert _git(repo, "rev-parse", "v0.16.5") == history.shas[-1]
    assert _git(repo, "show", "v0.16.5:version.txt") == "0.16.5"
    assert _git(repo, "show", "v0.16.5~1:version.txt") == "0.16.4"  # intermediate commits keep the old version
    # the new tag's tree is the new sdist's, file for file
    assert len(_git(repo, "ls-tree", "-r", "--name-only", "v0.16.5").splitlines()) == sum(
        1 for p in new_top.rglob("*") if p.is_file()
    )
    assert _git(repo, "diff", "--stat", "v0.16.4", history.sha_of(CULPRIT) + "~1", "--", CULPRIT) == ""
    assert "BFLOAT16_IMMEDIATE_GRAD_UPDATE_DEFAULT = True" in _git(repo, "show", f"{history.sha_of(CULPRIT)}:{CULPRIT}")

    # no commit between the tags leaves a `from X import name` of the package unresolved (files that import new
    # names come after the files that define them)
    base = _git(repo, "rev-parse", "v0.16.4")
    assert all(problems == [] for problems in broken_imports(repo, [base, *history.shas]).values())

    # fixed names and dates: the same sdists give the same shas
    again = build_history(tmp_path / "b", "deepspeed", "0.16.4", "0.16.5", base_python(), sdists=sdists)
    assert again.commits == history.commits
