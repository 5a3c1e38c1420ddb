"""torchvision as a cell's companion of torch: the series rule, the "not installable together" verdict on a pair made
for another torch, ``match`` left out of a cell's id, and the ELF reader that tells a torchvision built for another
build of torch (a CUDA one beside a CPU torch) — with hostile files thrown at it."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.cells.companion_match import needed_libraries, unusable_torchvision
from reprobisect.config.companions import mismatch, torchvision_series
from reprobisect.config.expand import MatrixSpec, expand, resolve_value
from reprobisect.errors import ConfigError
from reprobisect.model.cell import Cell


@pytest.mark.parametrize(
    ("torch", "series"),
    [
        ("1.10.0", "0.11"),
        ("1.13.1", "0.14"),
        ("2.0.0", "0.15"),
        ("2.5.1", "0.20"),
        ("2.11.0+cu130", "0.26"),
        ("2.13.0+cpu", "0.28"),
        ("2.14.1", "0.29"),
        ("3.0.0", None),
        ("0.4.1", None),
        ("system", None),
        ("git+https://github.com/pytorch/pytorch@main", None),
        ("2", None),
    ],
)
def test_the_torchvision_series_made_for_each_torch(torch: str, series: str | None) -> None:
    assert torchvision_series(torch) == series


def test_a_pair_made_for_another_torch_says_which_series_it_needs() -> None:
    assert mismatch("2.13.0+cpu", "0.28.0") is None
    assert mismatch("2.13.0+cpu", "0.28.0+cpu") is None
    reason = mismatch("2.13.0+cpu", "0.20.1")
    assert reason is not None and "torch 2.13 takes torchvision 0.28.x" in reason and "0.20.1" in reason
    assert mismatch("2.13.0", "./vision") is None  # a checkout has no version to judge
    assert mismatch("3.1.0", "0.40.0") is None  # a torch the rule does not know


@given(st.text(max_size=40), st.text(max_size=40))
def test_mismatch_and_series_never_raise_on_any_text(torch: str, vision: str) -> None:
    mismatch(torch, vision)
    torchvision_series(torch)


AXES = {"torch": ("2.13.0",), "deepspeed": ("0.19.8",), "lightning": ("2.6.6",)}
RELEASES = {"torch": ["2.13.0"], "deepspeed": ["0.19.8"], "lightning": ["2.6.6"], "torchvision": ["0.20.1", "0.28.0"]}


def test_a_torchvision_pinned_for_another_torch_is_not_installable_together() -> None:
    spec = MatrixSpec(axes={**AXES, "torchvision": ("0.28.0", "0.20.1", "match")})
    cells = expand(spec, RELEASES.__getitem__)
    verdicts = {c.pins["torchvision"]: c.blocked for c in cells}
    assert verdicts["0.28.0"] is None and verdicts["match"] is None
    assert verdicts["0.20.1"] is not None and "torch 2.13 takes torchvision 0.28.x" in verdicts["0.20.1"]


def test_system_torch_and_system_torchvision_are_judged_by_the_base_interpreters_versions() -> None:
    spec = MatrixSpec(axes={**AXES, "torch": ("system",), "torchvision": ("system",)})
    made_for_it = expand(spec, RELEASES.__getitem__, system_versions={"torch": "2.11.0+cu130", "torchvision": "0.26.0"})
    assert made_for_it[0].blocked is None
    other = expand(spec, RELEASES.__getitem__, system_versions={"torch": "2.11.0+cu130", "torchvision": "0.25.0"})
    assert other[0].blocked is not None and "0.26.x" in other[0].blocked


def test_match_is_only_for_a_companion() -> None:
    assert resolve_value("torchvision", "match", lambda axis: [], prereleases=False) == ["match"]
    with pytest.raises(ConfigError, match="deepspeed: 'match' is for a package built for one torch"):
        resolve_value("deepspeed", "match", lambda axis: [], prereleases=False)


def test_match_follows_torch_and_stays_out_of_the_cells_id() -> None:
    packages = {"deepspeed": "0.19.8", "lightning": "2.6.6"}
    plain = Cell(python="3.11.7", torch="2.13.0+cpu", torch_source="system", packages=packages)
    matched = Cell(
        python="3.11.7", torch="2.13.0+cpu", torch_source="system", packages={**packages, "torchvision": "match"}
    )
    pinned = Cell(
        python="3.11.7", torch="2.13.0+cpu", torch_source="system", packages={**packages, "torchvision": "0.28.0"}
    )
    assert matched.id == plain.id == "torch-2.13.0+cpu_deepspeed-0.19.8_lightning-2.6.6"
    assert pinned.id == "torch-2.13.0+cpu_deepspeed-0.19.8_lightning-2.6.6_torchvision-0.28.0"


def elf_needing(*libraries: str) -> bytes:
    """A minimal 64-bit little-endian ELF file: a null section, a string table and a dynamic section."""
    strtab = b"\0" + b"".join(name.encode() + b"\0" for name in libraries)
    offsets, at = [], 1
    for name in libraries:
        offsets.append(at)
        at += len(name) + 1
    dynamic = b"".join(struct.pack("<qQ", 1, off) for off in offsets) + struct.pack("<qQ", 0, 0)
    header_size, shentsize = 64, 64
    strtab_at = header_size
    dynamic_at = strtab_at + len(strtab)
    shoff = dynamic_at + len(dynamic)
    header = bytearray(header_size)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, shentsize, 3, 0)
    null = bytes(shentsize)
    strsec = struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, strtab_at, len(strtab), 0, 0, 1, 0)
    dynsec = struct.pack("<IIQQQQIIQQ", 0, 6, 0, 0, dynamic_at, len(dynamic), 1, 0, 8, 16)
    return bytes(header) + strtab + dynamic + null + strsec + dynsec


def test_the_elf_reader_reads_what_a_library_needs(tmp_path: Path) -> None:
    lib = tmp_path / "_C.so"
    lib.write_bytes(elf_needing("libc10.so", "libtorch_cuda.so", "libc.so.6"))
    assert needed_libraries(lib) == ["libc10.so", "libtorch_cuda.so", "libc.so.6"]
    assert needed_libraries(Path(sys.executable).resolve()) is not None  # a real one (python itself)


@given(st.binary(max_size=600))
def test_the_elf_reader_returns_none_or_a_list_on_any_bytes(data: bytes) -> None:
    from reprobisect.cells.companion_match import _dt_needed  # the parser itself, on bytes, without files

    try:
        result = _dt_needed(data)
    except (struct.error, IndexError, ValueError):
        return  # needed_libraries turns these into None
    assert result is None or all(isinstance(name, str) for name in result)


def test_truncated_and_foreign_files_are_not_read_as_needing_anything(tmp_path: Path) -> None:
    whole = elf_needing("libtorch_cuda.so")
    for name, data in {
        "cut": whole[:90],
        "text": b"#!/bin/sh\n",
        "empty": b"",
        "big-endian": whole[:5] + b"\x02",
    }.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert needed_libraries(path) in (None, []), name
    assert needed_libraries(tmp_path / "missing") is None


def site(tmp_path: Path, *, torch_libs: tuple[str, ...], vision_needs: tuple[str, ...] | None) -> Path:
    root = tmp_path / "site-packages"
    (root / "torch" / "lib").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    for name in torch_libs:
        (root / "torch" / "lib" / name).write_bytes(b"")
    if vision_needs is not None:
        (root / "torchvision").mkdir()
        (root / "torchvision" / "__init__.py").write_text("")
        (root / "torchvision" / "_C.so").write_bytes(elf_needing(*vision_needs, "libc.so.6"))
    return root


def test_a_cuda_torchvision_beside_a_cpu_torch_is_unusable_and_says_why(tmp_path: Path) -> None:
    root = site(
        tmp_path,
        torch_libs=("libc10.so", "libtorch_cpu.so"),
        vision_needs=("libc10.so", "libc10_cuda.so", "libtorch_cuda.so"),
    )
    why = unusable_torchvision([root], "2.13.0+cpu")
    assert why is not None
    assert "libc10_cuda.so, libtorch_cuda.so" in why and "2.13.0+cpu (a CPU build)" in why


def test_a_torchvision_built_for_the_cells_torch_is_usable(tmp_path: Path) -> None:
    libs = ("libc10.so", "libc10_cuda.so", "libtorch_cuda.so")
    assert unusable_torchvision([site(tmp_path, torch_libs=libs, vision_needs=libs)], "2.11.0+cu130") is None
    assert unusable_torchvision([site(tmp_path / "none", torch_libs=libs, vision_needs=None)], "2.11.0") is None
