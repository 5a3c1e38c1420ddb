"""What commit bisection reads from a package's git history: pull requests in subjects, the GitHub slug, and
clones that cannot serve (shallow, partial, not a clone), on throwaway repositories."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.bisect import history
from reprobisect.bisect.culprits import change_kind
from reprobisect.errors import ConfigError


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Training multiple models (#7018)", "deepspeedai/DeepSpeed#7018"),
        ("Improve overflow handling in ZeRO (#6976)  ", "deepspeedai/DeepSpeed#6976"),
        ("Merge pull request #123 from someone/branch", "deepspeedai/DeepSpeed#123"),
        ("Fix (#12) in the middle of a subject", None),
        ("Bump version to 0.16.5", None),
        ("Refers to #7018 without parentheses", None),
    ],
)
def test_the_pull_request_a_subject_names(subject: str, expected: str | None) -> None:
    assert history.pull_request(subject, "deepspeedai/DeepSpeed") == expected


@given(st.text(max_size=300))
def test_any_subject_gives_none_or_a_reference_of_digits(subject: str) -> None:
    found = history.pull_request(subject, "o/r")
    assert found is None or (found.startswith("o/r#") and found[4:].isdigit())


def _repo(path: Path, origin: str | None = None) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "f").write_text("1\n")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first (#1)"], check=True)
    (path / "f").write_text("2\n")
    subprocess.run([*git, "commit", "-q", "-a", "-m", "second (#2)"], check=True)
    subprocess.run([*git, "tag", "v1.0.0"], check=True)
    if origin:
        subprocess.run([*git, "remote", "add", "origin", origin], check=True)
    return path


@pytest.mark.parametrize(
    ("origin", "package", "slug"),
    [
        ("https://github.com/acme/tinypkg.git", "tinypkg", "acme/tinypkg"),
        ("git@github.com:acme/tinypkg.git", "tinypkg", "acme/tinypkg"),
        ("https://gitlab.example/acme/tinypkg.git", "deepspeed", "deepspeedai/DeepSpeed"),
        (None, "DeepSpeed", "deepspeedai/DeepSpeed"),
        (None, "tinypkg", None),
        ("https://github.com/../../etc", "tinypkg", None),
    ],
)
def test_the_slug_comes_from_origin_or_the_known_repository(tmp_path, origin, package, slug) -> None:
    assert history.github_slug(_repo(tmp_path / "r", origin), package) == slug


def test_tags_subjects_and_revisions(tmp_path) -> None:
    repo = _repo(tmp_path / "r")
    assert history.release_tag(repo, "1.0.0") == "v1.0.0"
    assert history.release_tag(repo, "2.0.0") is None
    commits = history.revisions(repo, "HEAD~1", "v1.0.0")
    assert len(commits) == 2 and all(len(c) == 40 for c in commits)
    info = history.commit_info(repo, commits[1], "acme/r")
    assert (info.subject, info.pull_request) == ("second (#2)", "acme/r#2")
    with pytest.raises(ConfigError, match="not an ancestor"):
        history.revisions(repo, "v1.0.0", "HEAD~1")
    with pytest.raises(ConfigError, match="--git"):
        history.revisions(repo, "--output=/tmp/x", "HEAD")  # an option-looking revision reaches git as a revision


def test_clones_that_cannot_serve_are_named(tmp_path) -> None:
    repo = _repo(tmp_path / "r")
    history.check_clone(repo)
    with pytest.raises(ConfigError, match="no such folder"):
        history.check_clone(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="plain"):
        history.check_clone(tmp_path / "plain")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    history.check_clone(shallow)  # it serves the commits it holds (the nightly's clone since last night)
    with pytest.raises(ConfigError, match=r"shallow clone, whose history stops before HEAD~1.*--unshallow"):
        history.revisions(shallow, "HEAD~1", "HEAD")
    partial = tmp_path / "partial"
    subprocess.run(["git", "clone", "-q", "--filter=blob:none", f"file://{repo}", str(partial)], check=True)
    with pytest.raises(ConfigError, match="partial clone"):
        history.check_clone(partial)


def _blob_dropped(repo: Path, path: str) -> None:
    """Remove the loose object of ``path``'s blob at HEAD, as a mirror that left it out would lack it."""
    oid = subprocess.run(["git", "-C", repo, "rev-parse", f"HEAD:{path}"], capture_output=True, text=True, check=True)
    sha = oid.stdout.strip()
    (repo / ".git" / "objects" / sha[:2] / sha[2:]).unlink()


def test_a_clone_that_lacks_only_images_serves_and_one_that_lacks_code_is_named(tmp_path) -> None:
    repo = _repo(tmp_path / "r")
    (repo / "blogs").mkdir()
    (repo / "blogs" / "figure.JPG").write_bytes(b"\xff\xd8 not really a jpeg")
    (repo / "op.py").write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "blogs", "op.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "third (#3)"], check=True)
    assert history.missing_objects(repo, "HEAD~1", "HEAD") == {}
    _blob_dropped(repo, "blogs/figure.JPG")
    missing = history.missing_objects(repo, "HEAD~1", "HEAD")
    assert list(missing.values()) == ["blogs/figure.JPG"] and history.needed_missing(missing) == []
    assert len(history.revisions(repo, "HEAD~1", "HEAD")) == 2  # no build reads an image: searched as a whole clone
    _blob_dropped(repo, "op.py")
    with pytest.raises(ConfigError, match=r"1 objects of the commits between HEAD~1 and HEAD are missing \(op\.py: a"):
        history.revisions(repo, "HEAD~1", "HEAD")


def test_a_clone_without_network_names_the_option(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(history.KNOWN_REPOSITORIES, "tinypkg", "http://127.0.0.1:9/acme/tinypkg")
    with pytest.raises(ConfigError, match="pass --git CLONE"):
        history.clone_known("tinypkg", tmp_path)
    with pytest.raises(ConfigError, match="no known repository for unknownpkg"):
        history.clone_known("unknownpkg", tmp_path)


def test_two_asking_at_once_clone_once_and_the_second_fetches(tmp_path, monkeypatch) -> None:
    # two corpus entries in processes of their own asking for the harness's clone at once (issue #52)
    monkeypatch.setitem(history.KNOWN_REPOSITORIES, "tinypkg", "http://127.0.0.1:9/acme/tinypkg")
    calls: list[str] = []

    def git(argv, **kwargs):
        calls.append(str(argv[1] if argv[1] != "-C" else argv[3]))
        if argv[1] == "clone":
            time.sleep(0.3)  # the other one asks meanwhile
            (Path(argv[-1]) / ".git").mkdir(parents=True)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(history, "run_tool", git)
    threads = [threading.Thread(target=history.clone_known, args=("tinypkg", tmp_path)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["clone", "fetch"]


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("PASS", "REPRODUCED", "introduced"),
        ("PASS", "CRASH", "introduced"),
        ("OTHER_FAILURE", "PASS", "fixed"),
        ("REPRODUCED", "OTHER_FAILURE", "changed"),
    ],
)
def test_change_kinds(before, after, kind) -> None:
    assert change_kind(before, after) == kind
