"""Pack an evidence folder's records, run logs and raw logs into its one ``records.tar.xz``, and remove the loose files.

Why: a folder of a GPU map holds thousands of small records and logs (one folder alone made a device call's copy
exceed its 64 MiB); git and a reader need the rendered report, the summaries and the README as files, and the raw
material in one archive that ``reprobisect report --out FOLDER`` reads as it read the loose files (records and the
logs' tails, never extracted; ``src/reprobisect/report/archive.py``).

    python tools/pack_evidence.py reports/gpu/2026-12-03-gan-all-releases/call-7 [FOLDER ...]

Each FOLDER's ``records/``, ``logs/`` and ``*.log`` (not its subfolders': each has its own archive) go into
``FOLDER/records.tar.xz`` under the same relative paths, joining what an archive there already holds. Packing is
deterministic (members sorted, fixed mtime, owner and mode): packing the same files again gives the same bytes. To
read a member by hand: ``tar -xOJf FOLDER/records.tar.xz logs/gan/<cell>/<run>.log``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reprobisect.report.archive import ARCHIVE, ArchiveError, pack


def main(argv: list[str] | None = None) -> int:
    """Pack each folder named; 1 where one could not be packed (it is left as it was)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", metavar="FOLDER")
    args = parser.parse_args(argv)
    failed = 0
    for folder in args.folders:
        try:
            members, size = pack(folder)
        except (ArchiveError, OSError) as exc:
            print(f"pack_evidence: {folder}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{folder / ARCHIVE}: {members} members, {size} bytes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
