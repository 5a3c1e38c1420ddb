"""The order of the sandbox's mounts and the links a cell's python goes through (issue #15): found by a
fresh clone under /tmp, where a test's fake HOME lies inside the checkout that is shown again."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.errors import ConfigError
from reprobisect.run.sandbox import Sandbox, git_dirs, link_hops
from reprobisect.util.bwrap import DEFAULT_TMP_BYTES, TMP_SIZE_ENV, tmp_limit


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A folder in /tmp, which the sandbox empties: what lies there is shown again only when named."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="reprobisect-mounts-") as folder:
        yield Path(folder)


def _mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(kind, path) of each mount after the root's, in the order bwrap applies them."""
    out, i = [], argv.index("/dev") + 1
    while argv[i] != "--chdir":
        if argv[i] == "--size":  # the bound of the tmpfs that follows
            i += 2
            continue
        kind = argv[i]
        out.append((kind, argv[i + 1]))
        i += 2 if kind == "--tmpfs" else 3
    return [m for m in out if not m[1].startswith("/dev/")]


def test_a_home_inside_a_shown_checkout_is_emptied_after_the_checkout_is_shown(under_tmp: Path) -> None:
    tmp_path = under_tmp
    checkout = tmp_path / "repo"
    home = checkout / ".test-tmp" / "home"
    (home / ".ssh").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    argv = Sandbox(bwrap="bwrap", version="0").wrap(
        ["true"], env={"HOME": str(home)}, workdir=work, readable=[checkout, home / ".ssh"]
    )
    mounts = _mounts(argv)
    assert mounts.index(("--ro-bind", str(checkout))) < mounts.index(("--tmpfs", str(home)))
    assert mounts.index(("--tmpfs", str(home))) < mounts.index(("--ro-bind", str(home / ".ssh")))
    assert mounts[0] == ("--tmpfs", "/tmp") and ("--bind", str(work)) in mounts


def test_hidden_and_writable_folders_come_after_the_folder_that_shows_them(under_tmp: Path) -> None:
    tmp_path = under_tmp
    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)
    ops = tmp_path / "cell" / "ops"
    ops.mkdir(parents=True)
    argv = Sandbox(bwrap="bwrap", version="0").wrap(
        ["true"],
        env={"HOME": "/nonexistent-home"},
        workdir=tmp_path,
        readable=[checkout, tmp_path / "cell"],
        hidden=[checkout / ".git"],
        writable=[ops],
    )
    mounts = _mounts(argv)
    assert mounts.index(("--ro-bind", str(checkout))) < mounts.index(("--tmpfs", str(checkout / ".git")))
    assert mounts.index(("--ro-bind", str(tmp_path / "cell"))) < mounts.index(("--bind", str(ops)))


def test_link_hops_follow_a_chain_of_venvs(tmp_path: Path) -> None:
    system = tmp_path / "usr" / "bin" / "python3.11"
    system.parent.mkdir(parents=True)
    system.write_text("")
    (tmp_path / "usr" / "bin" / "python3").symlink_to("python3.11")
    base = tmp_path / "base" / "bin" / "python"
    base.parent.mkdir(parents=True)
    base.symlink_to(tmp_path / "usr" / "bin" / "python3")
    cell = tmp_path / "cell" / "bin" / "python"
    cell.parent.mkdir(parents=True)
    cell.symlink_to(base)
    assert link_hops(cell) == [cell, base, tmp_path / "usr" / "bin" / "python3", system]


def test_link_hops_stop_on_a_loop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert len(link_hops(tmp_path / "a")) <= 41


def test_a_git_worktree_hides_its_dot_git_file_and_the_repository_it_points_to(under_tmp: Path) -> None:
    repo_git = under_tmp / "main" / ".git"
    own = repo_git / "worktrees" / "wt"
    own.mkdir(parents=True)
    checkout = under_tmp / "wt"
    checkout.mkdir()
    (checkout / ".git").write_text(f"gitdir: {own}\n")
    hidden = git_dirs(checkout)
    assert hidden == [checkout / ".git", own, repo_git]
    argv = Sandbox(bwrap="bwrap", version="0").wrap(
        ["true"], env={"HOME": "/nonexistent-home"}, workdir=under_tmp, readable=[checkout], hidden=hidden
    )
    joined = " ".join(argv)
    assert f"--ro-bind /dev/null {checkout / '.git'}" in joined  # bwrap cannot mount a tmpfs on a file
    assert f"--tmpfs {own}" in joined and f"--tmpfs {repo_git}" in joined


@pytest.mark.parametrize(
    "text",
    [
        "",
        "gitdir:",
        "gitdir: relative/missing",
        "garbage\x00\xff",
        "gitdir: /nonexistent/x\n" * 1000,
        "gitdir: /",
        "gitdir: .",
    ],
)
def test_a_dot_git_file_that_says_something_else_hides_only_itself(under_tmp: Path, text: str) -> None:
    (under_tmp / ".git").write_text(text, errors="surrogateescape")
    assert git_dirs(under_tmp) == [under_tmp / ".git"]


def test_every_tmpfs_is_bounded(under_tmp: Path) -> None:
    """A tmpfs is memory the harness's cgroup counts: /tmp, HOME and the empty folders over hidden ones (writable
    too) each hold at most the sandbox's bound (issue #50, item 7)."""
    checkout = under_tmp / "repo"
    (checkout / ".git").mkdir(parents=True)
    work = under_tmp / "work"
    work.mkdir()
    argv = Sandbox(bwrap="bwrap", version="0", tmp_bytes=8 << 20).wrap(
        ["true"], env={"HOME": str(under_tmp / "home")}, workdir=work, hidden=[checkout / ".git"]
    )
    tmpfs = [i for i, arg in enumerate(argv) if arg == "--tmpfs"]
    assert len(tmpfs) >= 3  # /tmp, HOME, the hidden .git
    assert all(argv[i - 2 : i] == ["--size", str(8 << 20)] for i in tmpfs)
    unbounded = Sandbox(bwrap="bwrap", version="0", tmp_bytes=None).wrap(["true"], env={}, workdir=work)
    assert "--size" not in unbounded


@pytest.mark.parametrize(
    ("raw", "size"), [("8M", 8 << 20), ("2G", 2 << 30), ("512MiB", 512 << 20), ("1048576", 1 << 20)]
)
def test_the_tmp_bound_is_read_from_its_variable(raw: str, size: int) -> None:
    assert tmp_limit({TMP_SIZE_ENV: raw}) == size


def test_the_tmp_bound_defaults_to_at_most_a_gib() -> None:
    assert 1 << 20 <= tmp_limit({}) <= DEFAULT_TMP_BYTES


@given(st.text(max_size=40).filter(lambda t: t.strip() and not t.strip().rstrip("BbIiKkMmGgTt ").strip().isdigit()))
def test_a_tmp_bound_that_is_no_size_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match=TMP_SIZE_ENV):
        tmp_limit({TMP_SIZE_ENV: raw})


@pytest.mark.parametrize("raw", ["0", "1K", "-5M", "1e9", "9" * 40])
def test_a_tmp_bound_too_small_or_malformed_is_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match=TMP_SIZE_ENV):
        tmp_limit({TMP_SIZE_ENV: raw})
