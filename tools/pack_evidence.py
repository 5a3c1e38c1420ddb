"""Pack an evidence folder into its ``records.tar.xz`` archives, leaving loose only what a reader opens on GitHub.

Why: evidence crowded the code (issue #53: reports/ was 42 % of the tracked files and 78 % of the bytes), and a
folder of a GPU map held thousands of small records and logs (one made a device call's copy exceed its 64 MiB). A
reader needs the README, the scripts and the small summaries as files; the raw material goes into one archive per
records root, which ``reprobisect report --out FOLDER`` reads as it read the loose files (records and the logs'
tails, never extracted; ``src/reprobisect/report/archive.py``).

    python tools/pack_evidence.py reports/gpu/2026-12-06-slots [FOLDER ...]
    python tools/pack_evidence.py --check reports/gpu/2026-12-06-slots   # list what would move; change nothing

What stays loose (``kept``): every ``README.md``; scripts and patches (``*.sh``, ``*.py``, ``*.diff``, ``*.patch``);
archives (``*.tar.xz``, ``*.tar.gz``); ``.gitignore``; text summaries (``*.md``, ``*.json``, ``*.txt``, ``*.csv``,
``*.toml``, ``*.yaml``) of at most 20 KiB; and a file up to 1 MiB that a README of the folder links to (a plot or a
table its argument rests on). Everything else — records, logs, ``*.log.gz``, transcripts, long reports, tables,
images nobody links — moves into an archive.

Archives: each records root (the FOLDER, and every folder under it that already has a ``records.tar.xz``, a
``records/`` or a ``logs/``) has its own ``records.tar.xz``; a subfolder with a README of its own is another evidence
folder, left alone unless named; a file goes into the archive of the nearest root above
it, under its path relative to that root. A root's ``records/``, ``logs/`` and ``*.log`` are packed as the report
expects them (``archive.pack``); the rest joins them. Packing is deterministic (members sorted, fixed mtime, owner
and mode): packing the same files again gives the same bytes. To read a member by hand:
``tar -xOJf FOLDER/records.tar.xz logs/gan/<cell>/<run>.log``; to list them: ``tar -tJf FOLDER/records.tar.xz``.

A rendered report (``reprobisect report``'s ``report.html``, PNG plots and ``runs.parquet`` beside ``report.md``
and ``runs.csv``) is not evidence of its own: it is made again from the archive's records in seconds, so it is not
committed (CONTRIBUTING, "Evidence commits apart from code commits"); ``report.md`` and ``runs.csv`` are packed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from reprobisect.report.archive import ARCHIVE, ArchiveError, pack, read_members
from reprobisect.report.archive import _tar as tar_bytes  # the one deterministic writer, shared with archive.pack

README = "README.md"
KEPT_SUFFIXES = (".sh", ".py", ".diff", ".patch", ".tar.xz", ".tar.gz")
KEPT_NAMES = (README, ".gitignore")
SUMMARY_SUFFIXES = (".md", ".json", ".txt", ".csv", ".toml", ".yaml")
SUMMARY_MAX_BYTES = 20 * 1024
LINKED_MAX_BYTES = 1024 * 1024
_BULK = ("records", "logs")  # archive.pack's trees: a folder holding them is a records root
_LINK = re.compile(r"\]\(\s*<?([^)\s>#]+)")


def kept(path: PurePosixPath, size: int, linked: bool) -> bool:
    """Whether a file of an evidence folder stays loose: what a reader opens on GitHub (see the module's text).
    ``linked``: a README of its folder, or of one above it, links to it."""
    name = path.name
    if name in KEPT_NAMES or name.endswith(KEPT_SUFFIXES):
        return True
    if name.endswith(SUMMARY_SUFFIXES) and size <= SUMMARY_MAX_BYTES:
        return True
    return linked and size <= LINKED_MAX_BYTES


def linked_files(folder: Path) -> set[Path]:
    """Every file a README under ``folder`` links to with a relative Markdown link (resolved, existing or not)."""
    found: set[Path] = set()
    for readme in folder.rglob(README):
        for target in _LINK.findall(readme.read_text(encoding="utf-8", errors="replace")):
            if ":" not in target.split("/")[0]:  # https:, mailto: — not a file here
                found.add((readme.parent / target).resolve())
    return found


def is_root(folder: Path) -> bool:
    """A records root: the report reads its ``records.tar.xz`` (or loose ``records/`` and ``logs/``)."""
    return (folder / ARCHIVE).is_file() or any((folder / tree).is_dir() for tree in _BULK)


def own_folders(folder: Path) -> list[Path]:
    """``folder`` and the folders under it that belong to it: a subfolder with a README of its own is another
    evidence folder (``reports/cpu``'s dated folders), packed when it is named, never as part of this one."""
    found = []
    for top, dirs, _ in os.walk(folder):
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink() and not (here / d / README).is_file())
        found.append(here)
    return found


def roots(folder: Path) -> list[Path]:
    """``folder`` and every records root among its own folders, deepest first (a nested root before its parent)."""
    nested = [sub for sub in own_folders(folder) if is_root(sub)]
    return sorted({folder, *nested}, key=lambda p: (-len(p.parts), p))


def loose_rest(root: Path, all_roots: Iterable[Path], linked: set[Path]) -> list[Path]:
    """The files under ``root`` that move into its archive: neither kept nor under another (nested) root, nor in
    its ``records/`` and ``logs/`` (``archive.pack`` takes those)."""
    others = [other for other in all_roots if other != root and other.is_relative_to(root)]
    rest = []
    for path in sorted(p for here in own_folders(root) for p in here.iterdir()):
        if path.is_dir() or any(path.is_relative_to(other) for other in others):
            continue
        relative = PurePosixPath(path.relative_to(root).as_posix())
        if relative.parts[0] in _BULK or (len(relative.parts) == 1 and relative.suffix == ".log"):
            continue
        if path.is_symlink() or not path.is_file():
            msg = f"{path}: a link or special file; pack only regular files (copy what it points to)"
            raise ArchiveError(msg)
        if path.name != ARCHIVE and not kept(relative, path.stat().st_size, path.resolve() in linked):
            rest.append(path)
    return rest


def _add(root: Path, files: list[Path]) -> tuple[int, int]:
    """Write ``files`` into ``root``'s archive beside what it holds (read back and compared before any file is
    removed, as ``archive.pack`` does), then remove them and the folders they leave empty."""
    archive = root / ARCHIVE
    members = read_members(archive) if archive.exists() else {}
    for path in files:
        members[path.relative_to(root).as_posix()] = path.read_bytes()
    data = tar_bytes(members)
    tmp = root / f".{ARCHIVE}.tmp"
    tmp.write_bytes(data)
    if read_members(tmp) != members:
        tmp.unlink()
        msg = f"{tmp}: reads back different from what was packed; nothing removed"
        raise ArchiveError(msg)
    os.replace(tmp, archive)
    for path in files:
        path.unlink()
    for parent in sorted({p.parent for p in files}, key=lambda p: len(p.parts), reverse=True):
        while parent != root and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return len(members), len(data)


def pack_folder(folder: Path, *, check: bool = False) -> list[str]:
    """Pack every records root of ``folder``; one line per root that changed (with ``check``: per file that
    would move, and nothing changes). Every root's files are listed first, so that a link or special file anywhere
    stops the whole folder before anything moved."""
    lines: list[str] = []
    linked = linked_files(folder)
    every = roots(folder)
    plan = [(root, loose_rest(root, every, linked)) for root in every]  # a link anywhere: refused before any move
    for root, rest in plan:
        bulk = any((root / tree).is_dir() for tree in _BULK) or any(p.is_file() for p in root.glob("*.log"))
        if check:
            lines += [f"{path}: would move into {root / ARCHIVE}" for path in rest]
            lines += [f"{root}: records/, logs/ or *.log would move into {root / ARCHIVE}"] if bulk else []
            continue
        if bulk:
            pack(root)
        if rest:
            _add(root, rest)
        if bulk or rest:
            members = len(read_members(root / ARCHIVE))
            lines.append(f"{root / ARCHIVE}: {members} members, {(root / ARCHIVE).stat().st_size} bytes")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Pack each folder named; 1 where one could not be packed (the root that failed is left as it was), or, with
    ``--check``, where one has something left to pack."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", metavar="FOLDER")
    parser.add_argument("--check", action="store_true", help="list what would move into an archive; change nothing")
    args = parser.parse_args(argv)
    failed = 0
    for folder in args.folders:
        if not folder.is_dir():
            print(f"pack_evidence: {folder}: no such folder", file=sys.stderr)
            failed += 1
            continue
        try:
            lines = pack_folder(folder, check=args.check)
        except (ArchiveError, OSError) as exc:
            print(f"pack_evidence: {folder}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print("\n".join(lines) if lines else f"{folder}: nothing to pack")
        failed += bool(args.check and lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
