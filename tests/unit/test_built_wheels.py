"""The kept wheels of sdist-only packages (issue #18): a wheel is installed by path only when its name, archive and
METADATA agree with the pin; anything else in the folder (cut, forged, another version, odd names, links) is
removed and the pin built again; one builder at a time; bounded in size; and how a cell build uses them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobisect.cells import built_wheels, envs
from reprobisect.cells.backend_build import BuildPlace, backend_wheel
from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.build_jail import BuildJail
from reprobisect.cells.built_wheels import BuildWith, build, build_commit, check_wheel, entry_name, lookup
from reprobisect.errors import EnvBuildError
from reprobisect.model.cell import SYSTEM, Cell

BASE = BaseInterpreter(
    executable="/opt/py/bin/python3", version="3.11.7", is_venv=False, site_packages=("/opt/py/site",), torch="2.5.1"
)


def _wheel(
    folder: Path,
    *,
    name: str = "deepspeed",
    version: str = "0.19.8",
    meta_name: str | None = None,
    meta_version: str | None = None,
    file_name: str | None = None,
    extra: dict[str, str] | None = None,
) -> Path:
    """A small wheel as a build leaves it: a module and its dist-info with METADATA."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (file_name or f"{name}-{version}-py3-none-any.whl")
    info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {meta_name or name}\nVersion: {meta_version or version}\n\n"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{name}/__init__.py", "VERSION = 1\n" * 200)
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        for member, text in (extra or {}).items():
            archive.writestr(member, text)
    return path


def _kept(root: Path, **kwargs: str) -> Path:
    """A wheel placed in the cache as ``build`` places it."""
    folder = entry_name(kwargs.get("name", "deepspeed"), kwargs.get("version", "0.19.8"), "3.11")
    assert folder is not None
    return _wheel(root / folder, **kwargs)  # type: ignore[arg-type]


def _said() -> tuple[list[str], Callable[[str], None]]:
    said: list[str] = []
    return said, said.append


# --- the check ---------------------------------------------------------------------------------------------


def test_a_good_wheel_passes_the_check(tmp_path: Path) -> None:
    assert check_wheel(_wheel(tmp_path), "deepspeed", "0.19.8") is None
    assert check_wheel(_wheel(tmp_path, name="Deep_Speed"), "deep-speed", "0.19.8.0") is None  # names, versions normal


@pytest.mark.parametrize(
    ("kwargs", "pin", "why"),
    [
        ({"version": "0.19.7"}, "0.19.8", "file name says"),
        ({"meta_version": "0.16.4"}, "0.19.8", "METADATA names"),
        ({"meta_name": "evil"}, "0.19.8", "METADATA names"),
        ({"meta_version": "not a version"}, "0.19.8", "METADATA names"),
        ({"file_name": "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl"}, "0.19.8", "not a pure-Python wheel"),
        ({"file_name": "deepspeed.whl"}, "0.19.8", "not a wheel's file name"),
        ({"extra": {"../../evil.pth": "import os"}}, "0.19.8", "would leave"),
        ({"extra": {"/etc/evil": "x"}}, "0.19.8", "would leave"),
        ({"extra": {"other-1.0.dist-info/METADATA": "Name: other\n"}}, "0.19.8", "2 METADATA files"),
    ],
)
def test_a_wheel_that_is_not_what_the_pin_says_fails_the_check(
    tmp_path: Path, kwargs: dict[str, object], pin: str, why: str
) -> None:
    reason = check_wheel(_wheel(tmp_path, **kwargs), "deepspeed", pin)  # type: ignore[arg-type]
    assert reason is not None and why in reason


@pytest.mark.parametrize("cut", [0, 100, -22, -300])
def test_a_cut_wheel_fails_the_check(tmp_path: Path, cut: int) -> None:
    wheel = _wheel(tmp_path)
    data = wheel.read_bytes()
    wheel.write_bytes(data[:cut])
    reason = check_wheel(wheel, "deepspeed", "0.19.8")
    assert reason is not None and "not a readable wheel" in reason


def test_a_wheel_with_an_altered_member_fails_the_check(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    data = bytearray(wheel.read_bytes())
    data[60] ^= 0xFF  # inside the first member's compressed bytes: its CRC no longer matches
    wheel.write_bytes(bytes(data))
    reason = check_wheel(wheel, "deepspeed", "0.19.8")
    assert reason is not None and ("damaged" in reason or "not a readable wheel" in reason)


@pytest.mark.parametrize(
    ("name", "version", "expected"),
    [
        ("deepspeed", "0.19.8", "deepspeed-0.19.8-py3.11"),
        ("DeepSpeed", "0.19.08", "deepspeed-0.19.8-py3.11"),
        ("deepspeed", "1!2.0+local.1", "deepspeed-1!2.0+local.1-py3.11"),
        ("deepspeed", "../../etc", None),
        ("deepspeed", "0.19.8; rm -rf", None),
        ("deep/speed", "0.19.8", None),
        ("deepspeed", "0.19.8\n", "deepspeed-0.19.8-py3.11"),  # Version() strips it; the folder has no newline
    ],
)
def test_only_a_safe_pin_names_a_folder(name: str, version: str, expected: str | None) -> None:
    assert entry_name(name, version, "3.11.7") == expected


# --- lookup: the folder is untrusted ------------------------------------------------------------------------


def test_a_kept_wheel_is_found_and_its_use_recorded(tmp_path: Path) -> None:
    wheel = _kept(tmp_path)
    lock = tmp_path / "deepspeed-0.19.8-py3.11.flock"
    lock.touch()
    os.utime(lock, (1, 1))
    said, say = _said()
    assert lookup(tmp_path, "deepspeed", "0.19.8", "3.11.7", say=say) == wheel
    assert said == [] and lock.stat().st_mtime > 1
    assert lookup(tmp_path, "deepspeed", "0.19.7", "3.11.7", say=say) is None
    assert lookup(tmp_path, "deepspeed", "0.19.8", "3.12.1", say=say) is None


@pytest.mark.parametrize(
    "plant",
    ["forged version", "cut", "two wheels", "no wheel", "a link to a wheel", "folder is a link", "folder is a file"],
)
def test_a_bad_entry_is_removed_and_said_never_installed(tmp_path: Path, plant: str) -> None:
    root = tmp_path / "wheels"
    folder = root / "deepspeed-0.19.8-py3.11"
    elsewhere = _wheel(tmp_path / "elsewhere")
    if plant == "forged version":
        _kept(root, meta_version="0.16.4")
    elif plant == "cut":
        wheel = _kept(root)
        wheel.write_bytes(wheel.read_bytes()[:500])
    elif plant == "two wheels":
        _kept(root)
        _wheel(folder, file_name="deepspeed-0.19.8-1-py3-none-any.whl")
    elif plant == "no wheel":
        folder.mkdir(parents=True)
        (folder / "README").write_text("x")
    elif plant == "a link to a wheel":
        folder.mkdir(parents=True)
        (folder / elsewhere.name).symlink_to(elsewhere)
    elif plant == "folder is a link":
        root.mkdir()
        folder.symlink_to(elsewhere.parent)
    else:
        root.mkdir()
        folder.write_text("not a folder")
    said, say = _said()
    assert lookup(root, "deepspeed", "0.19.8", "3.11.7", say=say) is None
    assert len(said) == 1 and "removed" in said[0]
    assert not folder.exists() and not folder.is_symlink()
    assert elsewhere.is_file()  # what a link pointed at is never touched


def test_odd_names_in_the_folder_never_crash_the_listing(tmp_path: Path) -> None:
    root = tmp_path / "wheels"
    _kept(root)
    (root / "x\nnewline").mkdir()
    (root / os.fsdecode(b"not-utf8-\xff")).mkdir()
    (root / "a file.whl").write_text("x")
    (root / "link").symlink_to(tmp_path)
    names = sorted(entry.name for entry in built_wheels.WHEELS.entries(root))
    assert "deepspeed-0.19.8-py3.11" in names and "link" not in names
    _, say = _said()
    assert lookup(root, "deepspeed", "0.19.8", "3.11.7", say=say) is not None


# --- build ---------------------------------------------------------------------------------------------------


class FakePip:
    """Stands in for ``pip wheel``: leaves the wheel it was told to, counts calls."""

    def __init__(self, **wheel: str) -> None:
        self.calls: list[str] = []
        self.wheel = wheel
        self.fail = False

    def __call__(self, python: str, name: str, version: str, dest: Path, log: Path, job: object) -> Path | None:
        self.calls.append(f"{name}=={version}")
        if self.fail:
            return None
        return _wheel(dest, name=name, version=version, **self.wheel)  # type: ignore[arg-type]


def test_a_build_is_kept_and_the_next_one_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip = FakePip()
    monkeypatch.setattr(built_wheels, "_pip_wheel", pip)
    root, log = tmp_path / "wheels", tmp_path / "build.log"
    first = build(root, "deepspeed", "0.19.8", BuildWith(python=sys.executable, python_version="3.11.7", log=log))
    again = build(root, "deepspeed", "0.19.8", BuildWith(python=sys.executable, python_version="3.11.7", log=log))
    assert first == again == root / "deepspeed-0.19.8-py3.11" / "deepspeed-0.19.8-py3-none-any.whl"
    assert pip.calls == ["deepspeed==0.19.8"]
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []  # no scratch left


def test_a_build_that_is_not_the_pin_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(built_wheels, "_pip_wheel", FakePip(meta_version="0.16.4"))
    root, log = tmp_path / "wheels", tmp_path / "build.log"
    assert build(root, "deepspeed", "0.19.8", BuildWith(python=sys.executable, python_version="3.11", log=log)) is None
    assert "not kept" in log.read_text() and built_wheels.WHEELS.entries(root) == []


def test_a_bad_entry_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip = FakePip()
    monkeypatch.setattr(built_wheels, "_pip_wheel", pip)
    root, log = tmp_path / "wheels", tmp_path / "build.log"
    _kept(root, meta_version="0.16.4")
    wheel = build(root, "deepspeed", "0.19.8", BuildWith(python=sys.executable, python_version="3.11", log=log))
    assert wheel is not None and check_wheel(wheel, "deepspeed", "0.19.8") is None
    assert pip.calls == ["deepspeed==0.19.8"] and "built again" in log.read_text()


def test_a_pip_that_cannot_build_leaves_a_reason(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    missing = tmp_path / "no-such-python"
    assert (
        build(tmp_path / "w", "deepspeed", "0.19.8", BuildWith(python=str(missing), python_version="3.11", log=log))
        is None
    )
    assert "not kept" in log.read_text()


def test_harnesses_building_at_once_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second builder waits on the lock, then finds the first one's wheel."""
    import threading

    pip = FakePip()

    def slow(*args: object) -> Path | None:
        time.sleep(0.3)
        return pip(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(built_wheels, "_pip_wheel", slow)
    root, log = tmp_path / "wheels", tmp_path / "build.log"
    found: list[Path | None] = []

    def one() -> None:
        found.append(
            build(root, "deepspeed", "0.19.8", BuildWith(python=sys.executable, python_version="3.11", log=log))
        )

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pip.calls == ["deepspeed==0.19.8"] and len(set(found)) == 1 and found[0] is not None


# --- size bound, clear, where ---------------------------------------------------------------------------------


def test_the_size_bound_drops_the_least_recently_used(tmp_path: Path) -> None:
    root = tmp_path / "wheels"
    for i, version in enumerate(("0.16.0", "0.17.0", "0.18.0")):
        _kept(root, version=version)
        lock = root / f"deepspeed-{version}-py3.11.flock"
        lock.touch()
        os.utime(lock, (1000 + i, 1000 + i))
    one = built_wheels.WHEELS.entries(root)[0].size
    removed = built_wheels.WHEELS.prune(root, max_bytes=2 * one + 10, keep_newer_than=0.0)
    assert [e.name for e in removed] == ["deepspeed-0.16.0-py3.11"]
    assert built_wheels.WHEELS.clear(root) > 0 and built_wheels.WHEELS.entries(root) == []


def test_the_cache_can_be_moved_or_turned_off(tmp_path: Path) -> None:
    assert built_wheels.WHEELS.root(tmp_path, {}) == tmp_path.absolute() / "wheels"
    assert built_wheels.WHEELS.root(tmp_path, {"REPROBISECT_WHEEL_CACHE": str(tmp_path / "w")}) == tmp_path / "w"
    assert built_wheels.WHEELS.root(tmp_path, {"REPROBISECT_WHEEL_CACHE": "off"}) is None


# --- how a cell build uses them (uv faked) ------------------------------------------------------------------


class FakeUv:
    """Records the commands a cell build runs; ``offline_fails`` makes ``--offline`` fail."""

    def __init__(self, *, offline_fails: bool) -> None:
        self.commands: list[list[str]] = []
        self.offline_fails = offline_fails

    def __call__(self, cmd: list[str], log: Path, what: str) -> None:
        self.commands.append([str(c) for c in cmd])
        if "--offline" in cmd and self.offline_fails:
            msg = f"{what}: not in the cache"
            raise EnvBuildError(msg)


def _build_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uv: FakeUv, pip: FakePip, **pins: str) -> list[str]:
    monkeypatch.setattr(envs, "_logged", uv)
    monkeypatch.setattr(envs, "installer", lambda: "uv")
    monkeypatch.setattr(built_wheels, "_pip_wheel", pip)
    monkeypatch.delenv("REPROBISECT_WHEEL_CACHE", raising=False)
    cell = Cell(python="3.11.7", torch="2.5.1", torch_source=SYSTEM, packages=pins)
    path = tmp_path / "envs" / cell.id
    path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "envs" / f"{cell.id}.build.log"
    log.write_text("")
    steps = envs._build(cell, BASE, path, log, uv="uv", jail=BuildJail.unconfined())
    assert steps and "venv" in steps
    return [" ".join(c) for c in uv.commands if "install" in c]


def test_a_cell_is_installed_offline_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uv, pip = FakeUv(offline_fails=False), FakePip()
    installs = _build_cell(tmp_path, monkeypatch, uv, pip, deepspeed="0.19.8", lightning="2.6.6")
    assert len(installs) == 1 and "--offline deepspeed==0.19.8 lightning==2.6.6" in installs[0]
    assert pip.calls == []  # uv's cache held it: nothing built


def test_without_the_cache_deepspeed_is_built_once_and_then_installed_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv, pip = FakeUv(offline_fails=True), FakePip()
    first = _build_cell(tmp_path, monkeypatch, uv, pip, deepspeed="0.19.8", lightning="2.6.6")
    wheel = tmp_path / "envs" / "wheels" / "deepspeed-0.19.8-py3.11" / "deepspeed-0.19.8-py3-none-any.whl"
    assert pip.calls == ["deepspeed==0.19.8"]
    assert first[-1].endswith(f"{wheel} lightning==2.6.6") and "--offline" not in first[-1]
    uv.commands.clear()
    second = _build_cell(tmp_path, monkeypatch, uv, pip, deepspeed="0.19.8", lightning="2.6.5")
    assert pip.calls == ["deepspeed==0.19.8"]  # not built again
    assert second[0].endswith(f"--offline {wheel} lightning==2.6.5")
    assert second[-1].endswith(f"{wheel} lightning==2.6.5")


def test_a_vcs_pin_goes_to_the_index_and_an_unbuildable_one_to_uv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv, pip = FakeUv(offline_fails=True), FakePip()
    pip.fail = True
    installs = _build_cell(tmp_path, monkeypatch, uv, pip, deepspeed="git+https://example.invalid/ds@v1")
    assert len(installs) == 1 and "--offline" not in installs[0] and pip.calls == []
    installs = _build_cell(tmp_path, monkeypatch, FakeUv(offline_fails=True), pip, deepspeed="0.16.4")
    assert installs[-1].endswith("deepspeed==0.16.4") and pip.calls == ["deepspeed==0.16.4"]


def test_the_ops_command_shows_bounds_and_clears_the_kept_wheels_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from reprobisect.commands import ops as ops_command

    monkeypatch.delenv("REPROBISECT_WHEEL_CACHE", raising=False)
    monkeypatch.delenv("REPROBISECT_OP_CACHE", raising=False)
    envs_dir = tmp_path / "cells"
    _kept(envs_dir / "wheels")
    (envs_dir / "wheels" / "x\nodd").mkdir()
    args = argparse.Namespace(envs=envs_dir, clear=False, max_gib=None)
    assert ops_command.run_from_args(args) == 0
    shown = capsys.readouterr().out
    assert "2 kept wheels" in shown and "'deepspeed-0.19.8-py3.11'" in shown and "'x\\nodd'" in shown
    assert ops_command.run_from_args(argparse.Namespace(envs=envs_dir, clear=True, max_gib=None)) == 0
    assert "0 kept wheels" in capsys.readouterr().out and built_wheels.WHEELS.entries(envs_dir / "wheels") == []


# --- one run of the tree's build backend instead of pip's two (cells/backend_build.py) -------------------------


def _tree(root: Path, pyproject: str | None) -> Path:
    (root / "tinypkg").mkdir(parents=True)
    (root / "tinypkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='tinypkg', version='0.3', packages=['tinypkg'])\n"
    )
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    return root


@pytest.mark.parametrize(
    "pyproject",
    [None, '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'],
    ids=["setup.py only (setuptools' legacy backend)", "pyproject.toml naming its backend"],
)
def test_the_tree_s_backend_builds_the_wheel_in_one_run(tmp_path: Path, pyproject: str | None) -> None:
    notes: list[str] = []
    wheel = backend_wheel(
        sys.executable,
        _tree(tmp_path / "src", pyproject),
        tmp_path / "dist",
        note=notes.append,
        place=BuildPlace(BuildJail.unconfined(), tmp_path, os.environ, 300),
    )
    assert wheel is not None and wheel.name == "tinypkg-0.3-py3-none-any.whl", notes
    assert check_wheel(wheel, "tinypkg", "0.3") is None and "in one run" in notes[-1]


@pytest.mark.parametrize(
    "pyproject",
    [
        '[build-system]\nbuild-backend = "no_such_backend_anywhere"\n',
        "[build-system\n",
        '[build-system]\nbuild-backend = "os:getcwd"\n',
    ],
)
def test_a_backend_that_cannot_build_leaves_it_to_pip(tmp_path: Path, pyproject: str) -> None:
    notes: list[str] = []
    assert (
        backend_wheel(
            sys.executable,
            _tree(tmp_path / "src", pyproject),
            tmp_path / "dist",
            note=notes.append,
            place=BuildPlace(BuildJail.unconfined(), tmp_path, os.environ, 300),
        )
        is None
    )
    assert "pip builds it" in notes[-1]


def test_wheels_of_the_next_round_are_built_ahead_once_and_kept(tmp_path: Path) -> None:
    """bisect/prebuild.py: the commits a search may probe next get their kept wheels in the background, each once;
    the cell that probes one later finds it kept."""
    from reprobisect.bisect.prebuild import WheelPrebuilder
    from reprobisect.cells.base import base_interpreter

    repo = _tree(tmp_path / "repo", None)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shas = []
    for n in (1, 2):
        (repo / "tinypkg" / "__init__.py").write_text(f"VALUE = {n}\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"change {n}"], check=True)
        shas.append(
            subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        )
    base = base_interpreter(sys.executable)
    prebuilder = WheelPrebuilder(
        root=tmp_path / "wheels", package="tinypkg", clone=repo, base=base, log=tmp_path / "log", workers=2
    )
    prebuilder.submit([shas[0], shas[1], shas[0]])
    prebuilder.submit([shas[1]])  # asked again: not built again
    prebuilder.close(wait=True)
    assert sorted(prebuilder.built) == sorted(shas)
    for sha in shas:
        how = BuildWith(python=sys.executable, python_version=base.version, log=tmp_path / "log2")
        kept, why = build_commit(tmp_path / "wheels", "tinypkg", repo, sha, how)
        assert kept is not None and why == ""
    assert (tmp_path / "log2").read_text().count("built before, not built again") == 2
