"""The repository keeps evidence, not raw logs (issue #29, item 4): few tracked files, no evidence folder of
thousands, the raw logs of every evidence folder in its records.tar.xz (``tools/pack_evidence.py FOLDER`` packs
one). Why: a folder of 3,646 files made a device call's copy exceed its 64 MiB, and a reader checks the records, the
rendered report and the README, not each log."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).parents[2]
MAX_TRACKED = 1500
MAX_PER_FOLDER = 300  # a folder under reports/cpu or reports/gpu, its subfolders counted in
HOW = "pack the folder's records/, logs/ and *.log: python tools/pack_evidence.py FOLDER"


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
