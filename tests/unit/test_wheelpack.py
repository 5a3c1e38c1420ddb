"""tools/wheelpack.py: many wheels in one small archive for the offline GPU machine, rebuilt there unchanged."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import tool_module

wheelpack = tool_module("wheelpack")


def _wheel(folder: Path, name: str, files: dict[str, bytes]) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in files.items():
            zf.writestr(member, data)
    return path


def test_wheels_come_back_with_the_same_files_and_numpy_stays_behind(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    shared = bytes(range(256)) * 400  # a file every release has unchanged
    for version in ("0.16.0", "0.16.1"):
        _wheel(src, f"deepspeed-{version}-py3-none-any.whl", {
            "deepspeed/big.py": shared,
            "deepspeed/version.py": version.encode(),
            f"deepspeed-{version}.dist-info/RECORD": b"record " + version.encode(),
        })  # fmt: skip
    _wheel(src, "numpy-2.0.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"numpy/__init__.py": b""})
    archive = tmp_path / "pack" / "w.tar.xz"
    assert wheelpack.pack(src, archive) == 2
    assert wheelpack.unpack(archive, tmp_path / "out") == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "deepspeed-0.16.0-py3-none-any.whl", "deepspeed-0.16.1-py3-none-any.whl",
    ]  # fmt: skip
    for rebuilt in (tmp_path / "out").iterdir():
        with zipfile.ZipFile(rebuilt) as new, zipfile.ZipFile(src / rebuilt.name) as old:
            assert sorted(new.namelist()) == sorted(old.namelist())
            assert all(new.read(n) == old.read(n) for n in old.namelist())
    assert archive.stat().st_size < len(shared)  # the shared file is stored about once


def test_an_empty_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no wheels to pack"):
        wheelpack.pack(tmp_path, tmp_path / "w.tar.xz")


@pytest.mark.parametrize("member", ["../evil.whl/x", "a.whl/../../x", "notawheel/x", "/abs.whl/x"])
def test_hostile_member_names_are_refused_and_nothing_is_written_outside(tmp_path: Path, member: str) -> None:
    archive = tmp_path / "w.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        info = tarfile.TarInfo(member)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(SystemExit, match="unexpected member"):
        wheelpack.unpack(archive, tmp_path / "out")
    assert not (tmp_path / "evil.whl").exists() and not (tmp_path.parent / "x").exists()


def test_a_broken_wheel_or_archive_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "deepspeed-0.1-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(SystemExit, match="not a readable wheel"):
        wheelpack.pack(tmp_path, tmp_path / "w.tar.xz")
    (tmp_path / "w.tar.xz").write_bytes(b"\xfd7zXZ garbage")
    with pytest.raises(SystemExit, match=r"not an archive of wheelpack\.py pack"):
        wheelpack.unpack(tmp_path / "w.tar.xz", tmp_path / "out")
