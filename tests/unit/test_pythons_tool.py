"""tools/pythons.py finds the oldest and newest supported interpreters, whatever else lies on PATH."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import tool_module


def _tool() -> ModuleType:
    return tool_module("pythons")


def _fake(folder: Path, name: str, output: str, status: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{output}'\nexit {status}\n")
    path.chmod(0o755)


def test_the_oldest_and_newest_supported_interpreters_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _tool()
    _fake(tmp_path / "a", "python3", "3 11 2")
    _fake(tmp_path / "a", "python3.10", "3 10 13")  # older than requires-python: not counted
    _fake(tmp_path / "b", "python3.13", "3 13 0")
    _fake(tmp_path / "b", "python3.12", "a shim for a version pyenv has not made current", status=127)
    _fake(tmp_path / "b", "python3.14", "3 14 x")  # not a version: not counted
    monkeypatch.setenv("PATH", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setattr(tool, "SYSTEM_DIRS", ())
    assert tool.found() == {(3, 11, 2): str(tmp_path / "a" / "python3"), (3, 13, 0): str(tmp_path / "b" / "python3.13")}
    assert tool.oldest() == str(tmp_path / "a" / "python3") and tool.newest() == str(tmp_path / "b" / "python3.13")


def test_pyenv_versions_count_though_their_shims_do_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool()
    _fake(tmp_path / "pyenv" / "versions" / "3.12.1" / "bin", "python3", "3 12 1")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setattr(tool, "SYSTEM_DIRS", ())
    assert tool.newest() == str(tmp_path / "pyenv" / "versions" / "3.12.1" / "bin" / "python3")
    assert tool.main(["oldest"]) == 0
