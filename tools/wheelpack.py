"""Carry many DeepSpeed wheels to the offline GPU machine in one small archive, and rebuild them there.

Why: a call to the device carries at most 64 MiB, and 36 DeepSpeed wheels (1.5-2.2 MB each, zip-compressed file
by file) are more than that, while most of their files are the same from one release to the next. The archive holds
the wheels' *unzipped* files, the same file of every release next to each other, compressed as one xz stream, so a
file that did not change costs almost nothing. Unpacking zips each wheel again from the same files: a wheel's RECORD
hashes its files, not the zip, so the rebuilt wheels install as the originals do.

    python tools/wheelpack.py pack .whl .whlpack/wheels.tar.xz     # here (leaves numpy out: the image has its own)
    python tools/wheelpack.py unpack .whlpack/wheels.tar.xz .whl   # there
"""

from __future__ import annotations

import argparse
import io
import sys
import tarfile
import zipfile
from pathlib import Path

#: wheels left out: the GPU image ships its own numpy, and two versions of one package stop the whole install
LEFT_OUT = ("numpy-",)


def pack(source: Path, archive: Path) -> int:
    """Write every wheel in ``source`` (unzipped, member by member) into ``archive``; returns the wheel count."""
    wheels = sorted(w for w in source.glob("*.whl") if not w.name.startswith(LEFT_OUT))
    if not wheels:
        raise SystemExit(f"{source}: no wheels to pack (expected *.whl files)")
    archive.parent.mkdir(parents=True, exist_ok=True)
    opened: dict[Path, zipfile.ZipFile] = {}
    try:
        for wheel in wheels:
            try:
                opened[wheel] = zipfile.ZipFile(wheel)
            except (zipfile.BadZipFile, OSError) as exc:
                raise SystemExit(f"{wheel}: not a readable wheel ({exc}); rebuild it or remove it") from None
        # (member name, wheel): the same member of every wheel side by side, for the compressor
        entries = [
            (info.filename, wheel) for wheel, zf in opened.items() for info in zf.infolist() if not info.is_dir()
        ]
        with tarfile.open(archive, "w:xz", preset=6) as tar:
            for member, wheel in sorted(entries, key=lambda e: (e[0].split("/", 1)[-1], e[1].name)):
                data = opened[wheel].read(member)
                info = tarfile.TarInfo(f"{wheel.name}/{member}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    finally:
        for zf in opened.values():
            zf.close()
    return len(wheels)


def _opened_archive(archive: Path) -> tarfile.TarFile:
    """``archive`` open for reading, or a clear error for a file that is not what ``pack`` writes."""
    try:
        return tarfile.open(archive, "r:xz")
    except (tarfile.ReadError, OSError, EOFError) as exc:
        raise SystemExit(f"{archive}: not an archive of wheelpack.py pack ({exc})") from None


def unpack(archive: Path, dest: Path) -> int:
    """Rebuild every wheel of ``archive`` into ``dest``; returns the wheel count."""
    dest.mkdir(parents=True, exist_ok=True)
    writers: dict[str, zipfile.ZipFile] = {}
    try:
        with _opened_archive(archive) as tar:
            for info in tar:
                wheel, _, member = info.name.partition("/")
                if not info.isfile() or not wheel.endswith(".whl") or "/" in wheel or ".." in member.split("/"):
                    raise SystemExit(f"{archive}: unexpected member {info.name!r} (expected WHEEL.whl/path)")
                if wheel not in writers:
                    writers[wheel] = zipfile.ZipFile(dest / wheel, "w", zipfile.ZIP_DEFLATED)
                handle = tar.extractfile(info)
                assert handle is not None
                writers[wheel].writestr(member, handle.read())
    finally:
        for zf in writers.values():
            zf.close()
    return len(writers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, first, second in (("pack", "source", "archive"), ("unpack", "archive", "dest")):
        cmd = sub.add_parser(name)
        cmd.add_argument(first, type=Path)
        cmd.add_argument(second, type=Path)
    args = parser.parse_args(argv)
    if args.command == "pack":
        count = pack(args.source, args.archive)
        print(f"{count} wheels -> {args.archive} ({args.archive.stat().st_size / 2**20:.1f} MiB)")
    else:
        count = unpack(args.archive, args.dest)
        print(f"{count} wheels rebuilt in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
