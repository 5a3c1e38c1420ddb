"""The repository keeps evidence, not raw logs (issue #29, item 4), and the code stays its larger part (#53): few
tracked files, no evidence folder of thousands, every evidence folder packed (``tools/pack_evidence.py FOLDER``)
with a README and a row in reports/README.md. Why: a folder of 3,646 files made a device call's copy exceed its
64 MiB; evidence once was 42 % of the tracked files and 78 % of the bytes; a reader checks the README, the scripts
and the summaries, not each log."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import PurePosixPath
from types import ModuleType

import pytest

from tests.conftest import ROOT, tool_module

MAX_TRACKED = 1500
MAX_PER_FOLDER = 300  # a folder under reports/cpu or reports/gpu, its subfolders counted in
HOW = "pack the folder: python tools/pack_evidence.py FOLDER (README, scripts and small summaries stay loose)"
EVIDENCE_PARENTS = ("reports/cpu", "reports/gpu")  # their subfolders are evidence folders; so is reports/X itself


def load_tool() -> ModuleType:
    """tools/pack_evidence.py, which is no package: its rule of what stays loose is the one checked here."""
    return tool_module("pack_evidence")


def evidence_folder(name: str) -> str | None:
    """The evidence folder a tracked path under reports/ belongs to: reports/cpu/X or reports/gpu/X, reports/X for
    any other X (screenshots, upstream), reports/cpu or reports/gpu for their own loose files; None for the index."""
    parts = PurePosixPath(name).parts
    if len(parts) <= 2 or parts[0] != "reports":
        return None
    if "/".join(parts[:2]) in EVIDENCE_PARENTS:
        return "/".join(parts[:3]) if len(parts) > 3 else "/".join(parts[:2])
    return "/".join(parts[:2])


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    """Every tracked path (git ls-files); skipped outside a git checkout (an sdist, a copy of the tree)."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed: the repository's shape is a property of a git checkout")
    try:
        done = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"{ROOT} is not a git checkout (git ls-files: {exc}); the shape is checked in a checkout only")
    files = [name for name in done.stdout.decode("utf-8", errors="replace").split("\0") if name]
    if not files:
        pytest.skip(f"{ROOT}: git tracks no files here; not the project's checkout")
    return files


def test_the_repository_tracks_at_most_1500_files(tracked: list[str]) -> None:
    under = Counter(PurePosixPath(name).parts[0] for name in tracked)
    biggest = ", ".join(f"{top}/ {n}" for top, n in under.most_common(3))
    assert len(tracked) <= MAX_TRACKED, f"{len(tracked)} tracked files (most under {biggest}); {HOW}"


def test_no_evidence_folder_holds_more_than_300_files(tracked: list[str]) -> None:
    folders = Counter(
        "/".join(parts[:3])
        for parts in (PurePosixPath(name).parts for name in tracked)
        if len(parts) > 3 and parts[0] == "reports" and parts[1] in ("cpu", "gpu")
    )
    over = {folder: n for folder, n in folders.items() if n > MAX_PER_FOLDER}
    assert not over, f"evidence folders over {MAX_PER_FOLDER} files: {over}; {HOW}"


def test_no_raw_log_is_tracked_outside_an_archive(tracked: list[str]) -> None:
    loose = [name for name in tracked if name.startswith("reports/") and name.endswith(".log")]
    assert not loose, f"{len(loose)} raw log(s) tracked, e.g. {loose[:3]}; {HOW}"


def test_every_record_and_run_log_is_archived(tracked: list[str]) -> None:
    """A store's records/ and logs/ trees go into their folder's archive whole (the report reads it)."""
    loose = [
        name
        for name in tracked
        if name.startswith("reports/") and {"records", "logs"} & set(PurePosixPath(name).parts[1:-1])
    ]
    assert not loose, f"{len(loose)} loose record/log file(s), e.g. {loose[:3]}; {HOW}"


def _sizes(names: list[str]) -> int:
    return sum((ROOT / name).lstat().st_size for name in names if (ROOT / name).exists())  # a deletion not committed


def test_the_code_is_the_larger_part_of_the_tracked_files_and_bytes(tracked: list[str]) -> None:
    evidence = [name for name in tracked if name.startswith("reports/")]
    code = [name for name in tracked if not name.startswith("reports/")]
    biggest = sorted(evidence, key=lambda name: -_sizes([name]))[:3]
    assert len(code) > len(evidence), f"reports/ holds {len(evidence)} tracked files, the rest {len(code)}; {HOW}"
    assert _sizes(code) > _sizes(evidence), (
        f"reports/ holds {_sizes(evidence)} bytes, the rest {_sizes(code)} (largest: {biggest}); {HOW}, and keep "
        "a report's page, plots and runs.parquet out of git (reprobisect report makes them again from the records)"
    )


def test_every_evidence_folder_has_a_readme_and_a_row_in_the_index(tracked: list[str]) -> None:
    folders = {folder for folder in map(evidence_folder, tracked) if folder is not None}
    assert "reports/README.md" in tracked, "reports/README.md, the index of the evidence folders, is missing"
    index = (ROOT / "reports" / "README.md").read_text(encoding="utf-8")
    without = sorted(folder for folder in folders if f"{folder}/README.md" not in tracked)
    unlisted = sorted(folder for folder in folders if f"]({folder.removeprefix('reports/')}/README.md)" not in index)
    assert not without, f"evidence folders without a README.md (how it was made, what it shows): {without}"
    assert not unlisted, f"evidence folders without a row in reports/README.md (date, what, issue): {unlisted}"


def test_every_evidence_folder_is_packed(tracked: list[str]) -> None:
    """Every tracked file under reports/ is one the tool leaves loose: the rule and the tree agree."""
    tool = load_tool()
    folders = {folder for folder in map(evidence_folder, tracked) if folder is not None}
    linked = {path for folder in folders for path in tool.linked_files(ROOT / folder)}
    loose = [
        name
        for name in tracked
        if evidence_folder(name) is not None
        and (ROOT / name).exists()
        and not tool.kept(PurePosixPath(name), (ROOT / name).stat().st_size, (ROOT / name).resolve() in linked)
    ]
    assert not loose, f"{len(loose)} tracked file(s) the tool would pack, e.g. {loose[:3]}; {HOW}"


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("reports/README.md", None),
        ("reports/cpu/bench.txt", "reports/cpu"),
        ("reports/cpu/2026-12-05-x/call-1/a.log.gz", "reports/cpu/2026-12-05-x"),
        ("reports/gpu/2026-12-06-y/README.md", "reports/gpu/2026-12-06-y"),
        ("reports/upstream/write-up.md", "reports/upstream"),
        ("src/reprobisect/x.py", None),
    ],
)
def test_a_tracked_path_belongs_to_its_evidence_folder(name: str, folder: str | None) -> None:
    assert evidence_folder(name) == folder
