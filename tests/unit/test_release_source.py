"""Which commit a release is (bisect/release_source.py): a cell's installed files held against the tag's tree, on
throwaway repositories and cells. DeepSpeed 0.19.1's sdist was built days after its tag: a search between the
tags named the tag itself as the fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.bisect import release_source as rs


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """tag v1.0 at the code of 'tagged'; the release was made two commits later ('released'), then a docs change."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shas = {
        "old": _commit(repo, {"src/pkg/__init__.py": "v = 0\n", "src/pkg/core.py": "a = 1\n"}, "old (#1)"),
        "tagged": _commit(repo, {"src/pkg/core.py": "a = 2\n", "tests/test_core.py": "x = 1\n"}, "tagged (#2)"),
    }
    subprocess.run(["git", "-C", str(repo), "tag", "v1.0"], check=True)
    shas["fix"] = _commit(repo, {"src/pkg/core.py": "a = 3\n"}, "the fix (#3)")
    shas["released"] = _commit(repo, {"src/pkg/extra.py": "b = 1\n"}, "released (#4)")
    shas["docs"] = _commit(repo, {"README.md": "docs\n"}, "docs (#5)")
    return repo, shas


def _cell(envs: Path, name: str, version: str, files: dict[str, str], package: str = "pkg") -> None:
    cell = envs / name
    top = cell / "lib" / "python3.11" / "site-packages" / package
    for path, text in files.items():
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text(text)
    (cell / "reprobisect-cell.json").write_text(json.dumps({"cell": {"packages": {package: version}}}))


def test_a_release_built_after_its_tag_is_the_commit_its_files_are(repo, tmp_path: Path) -> None:
    clone, shas = repo
    envs = tmp_path / "envs"
    # the release's files: the fix and the extra module; a generated file no commit has does not count
    _cell(envs, "c1", "1.0", {"__init__.py": "v = 0\n", "core.py": "a = 3\n", "extra.py": "b = 1\n", "_gen.py": "g\n"})
    found = rs.release_source(clone, "v1.0", "pkg", "1.0", envs)
    assert found.moved and found.commit == shas["released"] and found.differing == 2  # core.py, extra.py
    assert "1.0 as published is commit" in found.note() and "not its tag v1.0" in found.note()


def test_a_release_that_is_its_tag_keeps_it_and_so_does_one_without_a_cell_or_a_match(repo, tmp_path: Path) -> None:
    clone, shas = repo
    envs = tmp_path / "envs"
    _cell(envs, "c1", "1.0", {"__init__.py": "v = 0\n", "core.py": "a = 2\n"})
    assert rs.release_source(clone, "v1.0", "pkg", "1.0", envs) == rs.ReleaseSource(
        version="1.0", tag="v1.0", commit=shas["tagged"]
    )
    assert not rs.release_source(clone, "v1.0", "pkg", "2.0", envs).moved  # no cell of 2.0 here
    _cell(envs, "c2", "3.0", {"core.py": "a = 99\n"})  # files no commit holds: the tag stays, the difference said
    kept = rs.release_source(clone, "v1.0", "pkg", "3.0", envs)
    assert not kept.moved and kept.commit == shas["tagged"] and kept.differing == 1


def test_hostile_cell_manifests_are_passed_over(repo, tmp_path: Path) -> None:
    clone, _ = repo
    envs = tmp_path / "envs"
    for name, text in {"a": "{", "b": "[]", "c": '{"cell": {"packages": ["pkg"]}}', "d": '{"cell": null}'}.items():
        (envs / name).mkdir(parents=True)
        (envs / name / "reprobisect-cell.json").write_text(text)
    assert rs.installed_files(envs, "pkg", "1.0") is None
    assert not rs.release_source(clone, "v1.0", "pkg", "1.0", envs).moved


@given(st.binary(max_size=2000))
def test_blob_ids_are_gits(data: bytes) -> None:
    assert len(rs.blob_id(data)) == 40


def test_blob_ids_agree_with_git_hash_object(tmp_path: Path) -> None:
    path = tmp_path / "f.py"
    path.write_bytes(b"print('x')\n\x00\xff")
    done = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    assert rs.blob_id(path.read_bytes()) == done.stdout.strip()


def test_search_ends_move_only_the_end_that_is_not_its_tag_and_never_cross(repo, tmp_path: Path) -> None:
    clone, shas = repo
    subprocess.run(["git", "-C", str(clone), "tag", "v0.9", shas["old"]], check=True)
    envs = tmp_path / "envs"
    _cell(envs, "c0", "0.9", {"__init__.py": "v = 0\n", "core.py": "a = 1\n"})
    _cell(envs, "c1", "1.0", {"__init__.py": "v = 0\n", "core.py": "a = 3\n", "extra.py": "b = 1\n"})
    ends, notes = rs.search_ends(clone, ("v0.9", "v1.0"), ("0.9", "1.0"), "pkg", envs)
    assert ends == ("v0.9", shas["released"]) and len(notes) == 1 and notes[0].startswith("1.0 as published")
    assert rs.search_ends(clone, ("v0.9", "v1.0"), ("0.9", "2.0"), "pkg", envs) == (("v0.9", "v1.0"), [])
    # an earlier release whose files are a later commit than the later release's: the ends would cross
    _cell(envs, "c2", "0.8", {"__init__.py": "v = 0\n", "core.py": "a = 3\n", "extra.py": "b = 1\n"})
    subprocess.run(["git", "-C", str(clone), "tag", "v0.8", shas["old"]], check=True)
    assert rs.search_ends(clone, ("v0.8", "v0.9"), ("0.8", "0.9"), "pkg", envs) == (("v0.8", "v0.9"), [])


def test_a_tag_moved_to_an_unrelated_commit_is_named_not_trusted(repo, tmp_path: Path) -> None:
    """Issue #50: a hostile clone whose tag v1.0 names a commit of other code (an orphan line: no commit near it is
    the release). Before, the tag stayed and the search ran from it, answering for code the release never held."""
    clone, shas = repo
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "checkout", "-q", "--orphan", "elsewhere"], check=True)
    subprocess.run([*git, "rm", "-q", "-r", "-f", "."], check=True)
    unrelated = _commit(clone, {"src/pkg/__init__.py": "evil = 1\n", "src/pkg/core.py": "a = 666\n"}, "unrelated")
    subprocess.run([*git, "tag", "-f", "v1.0", unrelated], check=True, capture_output=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    subprocess.run([*git, "tag", "v0.9", shas["old"]], check=True)
    envs = tmp_path / "envs"
    _cell(envs, "c0", "0.9", {"__init__.py": "v = 0\n", "core.py": "a = 1\n"})
    _cell(envs, "c1", "1.0", {"__init__.py": "v = 0\n", "core.py": "a = 3\n", "extra.py": "b = 1\n"})
    assert rs.release_source(clone, "v1.0", "pkg", "1.0", envs).untrusted
    with pytest.raises(rs.UntrustedTagError) as info:
        rs.search_ends(clone, ("v0.9", "v1.0"), ("0.9", "1.0"), "pkg", envs)
    message = str(info.value)
    assert message.startswith("1.0: its tag v1.0 is commit " + unrelated[:12]) and "not trusted" in message


def test_the_file_a_build_writes_into_the_package_never_makes_a_tag_untrusted(repo, tmp_path: Path) -> None:
    """DeepSpeed's setup.py writes git_version_info_installed.py (version, git hash, built ops) at every build: a
    clone replayed from the sdists commits the sdist's copy, the cell holds the build's. Compared, every tag of such
    a clone was 'not the release's code' and every culprit search refused (CI on 2026-12-07)."""
    clone, _ = repo
    _commit(clone, {"src/pkg/git_version_info_installed.py": "git_hash = 'sdist'\n"}, "the sdist's copy (#6)")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "tag", "v2.0"], check=True)
    envs = tmp_path / "envs"
    files = {"__init__.py": "v = 0\n", "core.py": "a = 3\n", "extra.py": "b = 1\n"}
    _cell(envs, "c2", "2.0", {**files, "git_version_info_installed.py": "git_hash = 'built here'\n"})
    found = rs.release_source(clone, "v2.0", "pkg", "2.0", envs)
    assert not found.untrusted and not found.moved and found.differing == 0
