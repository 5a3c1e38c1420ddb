"""One copy of the files many cells hold alike (cells/shared_files.py): a pinned torch is 1.1 to 5.1 GB a cell,
byte for byte the same in each. Identical large files become links to one stored copy, only after their bytes are
compared whole; different bytes or modes, links, small files and files already shared are left alone; a cell
built over shared files is reused on its digest; entries no cell uses go."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.cells import envs
from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.envs import MARKER, ensure_env, tree_digest
from reprobisect.cells.shared_files import STORE, share_identical_files, shared_store
from reprobisect.model.cell import Cell

BIG = 64 * 1024  # above MIN_SHARED_BYTES


def _file(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _cell_tree(root: Path, torch_bytes: bytes) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    _file(site / "torch" / "lib" / "libtorch_cpu.so", torch_bytes, 0o755)
    _file(site / "torch" / "_C.py", b"small = 1\n" * 100)
    return site


def test_identical_large_files_of_two_cells_become_one_copy(tmp_path: Path) -> None:
    torch = os.urandom(BIG)
    one, two = _cell_tree(tmp_path / "a", torch), _cell_tree(tmp_path / "b", torch)
    store = tmp_path / STORE
    first = share_identical_files(tmp_path / "a", store)
    second = share_identical_files(tmp_path / "b", store)
    lib_one, lib_two = one / "torch" / "lib" / "libtorch_cpu.so", two / "torch" / "lib" / "libtorch_cpu.so"
    assert (first.stored, first.linked, second.stored, second.linked) == (1, 0, 0, 1)
    assert second.bytes_saved == BIG and lib_one.stat().st_ino == lib_two.stat().st_ino
    assert lib_one.stat().st_nlink == 3 and lib_two.read_bytes() == torch and os.access(lib_two, os.X_OK)
    assert (one / "torch" / "_C.py").stat().st_nlink == 1  # small: not worth a hash
    cache = _file(tmp_path / "c" / "__pycache__" / "big.cpython-311.pyc", torch, 0o755)
    assert share_identical_files(tmp_path / "c", store).linked == 0 and cache.stat().st_nlink == 1  # byte caches
    assert share_identical_files(tmp_path / "b", store).linked == 0  # shared already: not even hashed again


def test_other_bytes_or_another_mode_stay_copies(tmp_path: Path) -> None:
    torch = os.urandom(BIG)
    _cell_tree(tmp_path / "a", torch)
    other = _cell_tree(tmp_path / "b", torch[:-1] + bytes([torch[-1] ^ 1]))
    readonly = _file(tmp_path / "c" / "lib.so", torch, 0o444)
    store = tmp_path / STORE
    for tree in ("a", "b", "c"):
        share_identical_files(tmp_path / tree, store)
    assert (other / "torch" / "lib" / "libtorch_cpu.so").stat().st_nlink == 2  # itself and its own store entry
    assert readonly.stat().st_mode & 0o777 == 0o444 and readonly.stat().st_nlink == 2
    assert len(list(store.iterdir())) == 3


def test_a_poisoned_store_entry_is_never_linked_to(tmp_path: Path) -> None:
    """The store's name is only a hash: a file whose entry holds other bytes (written by hand, or in place by an
    unconfined run) is compared whole and stays the cell's own copy."""
    torch = os.urandom(BIG)
    site = _cell_tree(tmp_path / "a", torch)
    store = tmp_path / STORE
    share_identical_files(tmp_path / "a", store)
    [entry] = store.iterdir()
    entry.chmod(0o755)
    shutil.copy(entry, tmp_path / "keep")  # the cell's file keeps its own inode once the entry is replaced
    os.unlink(entry)
    _file(entry, b"x" * BIG, 0o755)
    os.link(entry, tmp_path / "holder")  # a second name, so pruning leaves the poisoned entry in place
    second = _cell_tree(tmp_path / "b", torch)
    assert share_identical_files(tmp_path / "b", store).linked == 0
    assert (second / "torch" / "lib" / "libtorch_cpu.so").read_bytes() == torch
    assert (site / "torch" / "lib" / "libtorch_cpu.so").read_bytes() == torch


def test_links_are_not_followed_and_files_already_shared_are_left(tmp_path: Path) -> None:
    outside = _file(tmp_path / "outside" / "secret.bin", os.urandom(BIG))
    tree = tmp_path / "cell"
    tree.mkdir()
    (tree / "link.so").symlink_to(outside)
    os.link(outside, tree / "hard.so")  # a name of a file outside the cell: not the cell's to give to the store
    result = share_identical_files(tree, tmp_path / STORE)
    assert (result.stored, result.linked) == (0, 0) and not list((tmp_path / STORE).iterdir())
    assert outside.stat().st_nlink == 2


def test_entries_no_cell_uses_are_pruned(tmp_path: Path) -> None:
    _cell_tree(tmp_path / "a", os.urandom(BIG))
    store = tmp_path / STORE
    share_identical_files(tmp_path / "a", store)
    shutil.rmtree(tmp_path / "a")
    _cell_tree(tmp_path / "b", os.urandom(BIG))
    share_identical_files(tmp_path / "b", store)
    assert len(list(store.iterdir())) == 1  # a's torch went with a; b's is stored


def test_off_turns_it_off(tmp_path: Path) -> None:
    assert shared_store(tmp_path, {"REPROBISECT_SHARED_FILES": "off"}) is None
    assert shared_store(tmp_path, {}) == tmp_path / STORE


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(0, 2), st.sampled_from([0o644, 0o755])), max_size=8))  # fmt: skip
def test_sharing_never_changes_what_any_file_holds(files: list[tuple[str, int, int]]) -> None:
    """Whatever the mix of names, contents and modes in two trees, every file reads and runs as before."""
    import tempfile

    blobs = [bytes([n]) * BIG for n in range(3)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wanted = {}
        for i, (name, blob, mode) in enumerate(files):
            path = _file(root / f"t{i % 2}" / f"{name}{i}", blobs[blob], mode)
            wanted[path] = (blobs[blob], mode)
        for tree in ("t0", "t1"):
            if (root / tree).exists():
                share_identical_files(root / tree, root / STORE)
        for path, (blob, mode) in wanted.items():
            assert path.read_bytes() == blob and path.stat().st_mode & 0o777 == mode


def test_a_cell_built_over_shared_files_is_reused_then_rebuilt_when_written_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ensure_env shares a new cell's files before it seals its digest: the next ask reuses it, and a write into
    the one shared file (an unconfined run) makes both cells that hold it build again."""
    torch = os.urandom(BIG)

    def build(cell: Cell, base: object, path: Path, log: Path, *, uv: str, jail: object) -> None:
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").symlink_to(sys.executable)
        _cell_tree(path, torch)

    monkeypatch.setattr(envs, "_build", build)
    base = BaseInterpreter(executable=sys.executable, version="3.11.7", is_venv=False, site_packages=(), torch=None)
    envs_dir = tmp_path / "cells"
    cells = [
        Cell(python="3.11.7", torch="2.13.0", torch_source="pinned", packages={"deepspeed": v})
        for v in ("0.16.4", "0.16.5")
    ]
    built = [ensure_env(cell, base, envs_dir) for cell in cells]
    libs = [b.path / "lib" / "python3.11" / "site-packages" / "torch" / "lib" / "libtorch_cpu.so" for b in built]
    assert libs[0].stat().st_ino == libs[1].stat().st_ino
    assert "shared files: 1 files" in (envs_dir / f"{cells[1].id}.build.log").read_text()
    assert all(json.loads((b.path / MARKER).read_text())["tree"] == tree_digest(b.path) for b in built)
    assert all(ensure_env(cell, base, envs_dir).reused for cell in cells)
    with libs[0].open("r+b") as written:  # in place, as only an unconfined run could
        written.write(b"planted")
    assert not any(ensure_env(cell, base, envs_dir).reused for cell in cells)
    assert libs[0].read_bytes() == torch and libs[1].read_bytes() == torch
