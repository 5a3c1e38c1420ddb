"""Cell environments without installing anything: reuse only while pins and the tree are unchanged, the tree
digest (byte caches aside), the base interpreter's probe, pin resolution with the resolver faked, and what uv is
asked to install."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.cells import envs, pinning
from reprobisect.cells.base import BaseInterpreter, base_interpreter
from reprobisect.cells.envs import MARKER, CellEnv, ensure_env, installer, tree_digest
from reprobisect.cells.pinning import install_requirement, resolve_cell
from reprobisect.cells.pythons import find_python
from reprobisect.errors import ConfigError, EnvBuildError
from reprobisect.model.cell import SYSTEM, Cell

BASE = BaseInterpreter(
    executable="/opt/py/bin/python3", version="3.11.7", is_venv=False, site_packages=("/opt/py/site",), torch="2.5.1"
)


def _cell(**packages: str) -> Cell:
    return Cell(python="3.11.7", torch="2.5.1", torch_source=SYSTEM, packages=packages or {"deepspeed": "0.16.4"})


class FakeBuild:
    """Stands in for the venv build: writes a tiny tree, counts builds, can fail."""

    def __init__(self) -> None:
        self.builds: list[str] = []
        self.fail: str | None = None

    def __call__(self, cell: Cell, base: BaseInterpreter, path: Path, log: Path, *, uv: str, jail: object) -> None:
        self.builds.append(cell.id)
        site = path / "lib" / "python3.11" / "site-packages"
        (path / "bin").mkdir(parents=True)
        site.mkdir(parents=True)
        (path / "bin" / "python").symlink_to(sys.executable)
        (site / "deepspeed.py").write_text("VERSION = 1\n")
        if self.fail:
            raise EnvBuildError(self.fail)


@pytest.fixture
def build(monkeypatch: pytest.MonkeyPatch) -> FakeBuild:
    fake = FakeBuild()
    monkeypatch.setattr(envs, "_build", fake)
    return fake


# --- reuse -------------------------------------------------------------------------------------------------


def test_a_cell_is_built_once_then_reused(tmp_path: Path, build: FakeBuild) -> None:
    cell = _cell()
    started: list[str] = []
    first = ensure_env(cell, BASE, tmp_path / "envs", on_build=lambda: started.append("build"))
    again = ensure_env(cell, BASE, tmp_path / "envs", on_build=lambda: started.append("build"))
    assert (first.reused, again.reused) == (False, True)
    assert first.path == again.path == (tmp_path / "envs" / cell.id).resolve()
    assert build.builds == [cell.id] and started == ["build"]
    marker = json.loads((first.path / MARKER).read_text())
    assert marker["cell"] == cell.to_dict() and marker["tree"] == tree_digest(first.path)


def test_other_pins_are_another_cell(tmp_path: Path, build: FakeBuild) -> None:
    one = ensure_env(_cell(deepspeed="0.16.4"), BASE, tmp_path)
    two = ensure_env(_cell(deepspeed="0.17.0"), BASE, tmp_path)
    assert one.path != two.path and not two.reused
    assert ensure_env(_cell(deepspeed="0.16.4"), BASE, tmp_path).reused


def test_another_base_interpreter_rebuilds_the_cell(tmp_path: Path, build: FakeBuild) -> None:
    cell = _cell()
    ensure_env(cell, BASE, tmp_path)
    other = dataclasses.replace(BASE, executable="/other/python3")
    assert not ensure_env(cell, other, tmp_path).reused
    assert len(build.builds) == 2


def test_a_file_planted_in_the_cell_rebuilds_it_and_removes_the_plant(tmp_path: Path, build: FakeBuild) -> None:
    env = ensure_env(_cell(), BASE, tmp_path)
    plant = env.path / "lib" / "python3.11" / "site-packages" / "sitecustomize.py"
    plant.write_text("import os; os.system('echo pwned')\n")
    again = ensure_env(_cell(), BASE, tmp_path)
    assert not again.reused and not plant.exists()


def test_an_edited_file_rebuilds_the_cell(tmp_path: Path, build: FakeBuild) -> None:
    env = ensure_env(_cell(), BASE, tmp_path)
    module = env.path / "lib" / "python3.11" / "site-packages" / "deepspeed.py"
    stat = module.stat()
    module.write_text("VERSION = 2\n")  # same size
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert not ensure_env(_cell(), BASE, tmp_path).reused


def test_byte_caches_op_builds_and_overlays_keep_the_cell(tmp_path: Path, build: FakeBuild) -> None:
    env = ensure_env(_cell(), BASE, tmp_path)
    site = env.path / "lib" / "python3.11" / "site-packages"
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "deepspeed.cpython-311.pyc").write_bytes(b"\x00" * 16)
    (env.torch_extensions / "cpu_adam").mkdir(parents=True)
    (env.torch_extensions / "cpu_adam" / "cpu_adam.so").write_bytes(b"so")
    (env.path / "overlays" / "fix-abc").mkdir(parents=True)
    (env.path / "overlays" / "fix-abc" / "x.py").write_text("")
    assert ensure_env(_cell(), BASE, tmp_path).reused


@pytest.mark.parametrize(
    "marker",
    ["", "not json", "[]", "null", '{"tree": "x"}', '{"fingerprint": 1, "tree": 2}', '{"fingerprint": {}}', "{" * 10],
)
def test_an_unreadable_marker_rebuilds_the_cell(tmp_path: Path, build: FakeBuild, marker: str) -> None:
    env = ensure_env(_cell(), BASE, tmp_path)
    (env.path / MARKER).write_text(marker)
    assert not ensure_env(_cell(), BASE, tmp_path).reused


def test_a_cell_without_its_python_is_rebuilt(tmp_path: Path, build: FakeBuild) -> None:
    env = ensure_env(_cell(), BASE, tmp_path)
    (env.path / "bin" / "python").unlink()
    assert not ensure_env(_cell(), BASE, tmp_path).reused


def test_a_failed_build_leaves_no_marker_so_it_is_never_reused(tmp_path: Path, build: FakeBuild) -> None:
    build.fail = "uv pip install failed (exit 1)"
    with pytest.raises(EnvBuildError, match="exit 1"):
        ensure_env(_cell(), BASE, tmp_path)
    assert not (tmp_path / _cell().id / MARKER).exists()
    assert (tmp_path / f"{_cell().id}.build.log").is_file()
    build.fail = None
    assert not ensure_env(_cell(), BASE, tmp_path).reused
    assert len(build.builds) == 2


def test_a_touched_local_wheel_rebuilds_the_cell(tmp_path: Path, build: FakeBuild) -> None:
    wheel = tmp_path / "deepspeed-0.16.4-py3-none-any.whl"
    wheel.write_bytes(b"zip")
    cell = _cell(deepspeed=str(wheel))
    ensure_env(cell, BASE, tmp_path / "envs")
    assert ensure_env(cell, BASE, tmp_path / "envs").reused
    os.utime(wheel, (time.time() + 10, time.time() + 10))
    assert not ensure_env(cell, BASE, tmp_path / "envs").reused


# --- the tree digest ---------------------------------------------------------------------------------------


def _tree(root: Path) -> Path:
    (root / "lib" / "site-packages" / "pkg").mkdir(parents=True)
    (root / "lib" / "site-packages" / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "bin").mkdir()
    (root / "bin" / "tool").write_text("#!/bin/sh\n")
    return root


def test_the_digest_is_stable_and_short(tmp_path: Path) -> None:
    root = _tree(tmp_path / "cell")
    assert tree_digest(root) == tree_digest(root)
    assert len(tree_digest(root)) == 20
    assert tree_digest(tmp_path / "missing") == tree_digest(tmp_path / "empty-also-missing")


@pytest.mark.parametrize(
    "ignored",
    [
        "lib/site-packages/pkg/__pycache__/__init__.cpython-311.pyc",
        "lib/site-packages/__pycache__/anything.txt",
        "torch_extensions/op/op.so",
        "overlays/fix-1/pkg/__init__.py",
        MARKER,
        f"lib/{MARKER}",
    ],
)
def test_the_digest_ignores_what_the_harness_and_python_write_later(tmp_path: Path, ignored: str) -> None:
    root = _tree(tmp_path / "cell")
    before = tree_digest(root)
    (root / ignored).parent.mkdir(parents=True, exist_ok=True)
    (root / ignored).write_bytes(b"later")
    assert tree_digest(root) == before


def test_a_cell_holding_a_name_that_is_not_utf8_is_rebuilt(tmp_path: Path, build: FakeBuild) -> None:
    env = ensure_env(_cell(), BASE, tmp_path)
    (env.path / os.fsdecode(b"\xff\xfe.py")).write_text("")
    assert not ensure_env(_cell(), BASE, tmp_path).reused


@pytest.mark.parametrize(
    "change",
    [
        "add",
        "remove",
        "grow",
        "touch",
        "rename",
        "link",
        "empty-dir-file",
        pytest.param("binary-name"),
    ],
)
def test_the_digest_sees_every_other_change(tmp_path: Path, change: str) -> None:
    root = _tree(tmp_path / "cell")
    module = root / "lib" / "site-packages" / "pkg" / "__init__.py"
    before = tree_digest(root)
    if change == "add":
        (root / "lib" / "site-packages" / "sitecustomize.py").write_text("")
    elif change == "remove":
        (root / "bin" / "tool").unlink()
    elif change == "grow":
        module.write_text("x = 12\n")
    elif change == "touch":
        os.utime(module, ns=(0, module.stat().st_mtime_ns + 1))
    elif change == "rename":
        module.rename(module.with_name("__init__2.py"))
    elif change == "link":
        (root / "lib" / "site-packages" / "evil.pth").symlink_to("/etc/hostname")
    elif change == "empty-dir-file":
        (root / "lib" / "site-packages" / "new").mkdir()
        (root / "lib" / "site-packages" / "new" / "f").write_text("")
    elif change == "binary-name":
        (root / "lib" / os.fsdecode(b"\xff\xfe.py")).write_text("")
    assert tree_digest(root) != before


def test_a_sourceless_pyc_outside_pycache_changes_the_digest(tmp_path: Path) -> None:
    root = _tree(tmp_path / "cell")
    before = tree_digest(root)
    (root / "lib" / "site-packages" / "sitecustomize.pyc").write_bytes(b"\x00" * 32)
    assert tree_digest(root) != before


@given(
    st.lists(
        st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=12),
        max_size=6,
    )
)
def test_the_digest_of_any_names_does_not_raise(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in names:
            if name in (".", ".."):
                continue
            try:
                (root / name).write_text("x")
            except OSError:
                continue
        assert len(tree_digest(root)) == 20


# --- the base interpreter ----------------------------------------------------------------------------------


def test_the_test_interpreter_describes_itself() -> None:
    base = base_interpreter(sys.executable)
    assert base.version == ".".join(map(str, sys.version_info[:3]))
    assert base.is_venv == (sys.prefix != sys.base_prefix)
    assert all(isinstance(p, str) for p in base.site_packages) and base.site_packages
    assert base.torch is None or isinstance(base.torch, str)


@pytest.mark.parametrize("exit_code", [1, 2])
def test_an_interpreter_that_fails_is_a_config_error(tmp_path: Path, exit_code: int) -> None:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho oops >&2\nexit {exit_code}\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError, match="--base-python"):
        base_interpreter(str(fake))
    with pytest.raises(ConfigError, match="--base-python"):
        base_interpreter(str(tmp_path / "no-such-python"))


@pytest.mark.parametrize(
    "stdout", ["", "Welcome to the cluster\\n{}", "[1, 2]", '{"executable": "x"}', "not json at all"]
)
def test_an_interpreter_that_prints_no_probe_answer_is_a_config_error(tmp_path: Path, stdout: str) -> None:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nprintf '{stdout}'\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError, match="--base-python"):
        base_interpreter(str(fake))


def test_find_python_takes_a_path_as_it_is(tmp_path: Path) -> None:
    assert find_python(sys.executable) == sys.executable
    assert find_python(str(tmp_path / "nope" / "python3")) is None


def test_find_python_never_downloads_and_finds_no_such_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    assert find_python("3.1") is None


def test_find_python_looks_in_pyenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no uv, no python3.1 on PATH
    for version in ("3.1.2", "3.1.9"):
        python = tmp_path / "pyenv" / "versions" / version / "bin" / "python3.1"
        python.parent.mkdir(parents=True)
        python.write_text("")
    assert find_python("3.1") == str(tmp_path / "pyenv" / "versions" / "3.1.9" / "bin" / "python3.1")


def test_find_python_finds_a_full_version_in_pyenv_by_its_minor_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pin of 3.12.1 is pyenv's versions/3.12.1/bin/python3.12 (no python3.12.1 binary exists); 3.1.2 is not
    3.1.20, and 3.1 takes the newest 3.1.x by number (3.1.20 over 3.1.10 and 3.1.2), never 3.10."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    versions = tmp_path / "pyenv" / "versions"
    for version, binary in (("3.1.2", "python3.1"), ("3.1.20", "python3.1"), ("3.1.10", "python3.1"),
                            ("3.10.4", "python3.10"), ("3.1.9-debug", "python3.1")):  # fmt: skip
        (versions / version / "bin").mkdir(parents=True)
        (versions / version / "bin" / binary).write_text("")
    assert find_python("3.1.2") == str(versions / "3.1.2" / "bin" / "python3.1")
    assert find_python("3.1.3") is None
    assert find_python("3.1") == str(versions / "3.1.20" / "bin" / "python3.1")
    assert find_python("3.10") == str(versions / "3.10.4" / "bin" / "python3.10")


# --- resolving pins ----------------------------------------------------------------------------------------


def test_exact_pins_need_no_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pinning, "uv_compile", lambda *a, **k: pytest.fail("resolver asked"))
    monkeypatch.setattr(pinning, "list_versions", lambda *a, **k: pytest.fail("index asked"))
    cell = resolve_cell(BASE, {"deepspeed": "0.16.4", "lightning": SYSTEM})
    assert cell == Cell(
        python="3.11.7", torch="2.5.1", torch_source=SYSTEM, packages={"deepspeed": "0.16.4", "lightning": SYSTEM}
    )
    pinned = resolve_cell(BASE, {"torch": "2.4.0", "deepspeed": "0.16.4"})
    assert (pinned.torch, pinned.torch_source) == ("2.4.0", "pinned")


def test_system_torch_without_torch_in_the_base_is_a_config_error() -> None:
    no_torch = dataclasses.replace(BASE, torch=None)
    with pytest.raises(ConfigError, match="has no torch"):
        resolve_cell(no_torch, {"deepspeed": "0.16.4"})


def _compiled(stdout: str, returncode: int = 0, stderr: str = "") -> types.SimpleNamespace:
    return types.SimpleNamespace(stdout=stdout, returncode=returncode, stderr=stderr)


def test_loose_pins_are_resolved_together_by_uv(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: dict[str, object] = {}

    def compile_(requirements: list[str], **kwargs: object) -> types.SimpleNamespace:
        asked.update(requirements=requirements, **kwargs)
        return _compiled(
            "deepspeed==0.19.8 ; python_version >= '3.8'\nlightning==2.6.6\nnumpy==2.0.0\n# a comment\n-e ./x\n"
        )

    monkeypatch.setenv("REPROBISECT_INSTALLER", "uv")
    monkeypatch.setattr(pinning, "uv_compile", compile_)
    cell = resolve_cell(BASE, {"deepspeed": "latest", "lightning": ">=2.6", "pydantic": SYSTEM, "x": "1.0"})
    assert dict(cell.packages) == {"deepspeed": "0.19.8", "lightning": "2.6.6", "pydantic": SYSTEM, "x": "1.0"}
    assert asked["requirements"] == ["deepspeed", "lightning>=2.6", "x==1.0"]
    assert asked["python_version"] == "3.11" and asked["excluded"] == ["pydantic"]


def test_a_resolver_failure_is_a_config_error_with_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPROBISECT_INSTALLER", "uv")
    monkeypatch.setattr(pinning, "uv_compile", lambda *a, **k: _compiled("", 1, "x" * 5000 + "no solution found"))
    with pytest.raises(ConfigError, match=r"cannot resolve deepspeed together: x+no solution found") as info:
        resolve_cell(BASE, {"deepspeed": "latest"})
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("answer", ["pytorch-lightning==2.5.0\n", "numpy==2.0.0\n", ""])
def test_a_loose_pin_the_resolver_does_not_answer_never_vanishes(monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    monkeypatch.setenv("REPROBISECT_INSTALLER", "uv")
    monkeypatch.setattr(pinning, "uv_compile", lambda *a, **k: _compiled(answer))
    try:
        cell = resolve_cell(BASE, {"pytorch_lightning": "latest"})
    except ConfigError:
        return
    assert {"pytorch_lightning", "pytorch-lightning"} & set(cell.packages)


def test_without_uv_the_newest_release_in_range_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    releases = {"deepspeed": ["0.15.0", "0.16.4", "0.17.0rc1", "0.16.9"], "lightning": ["2.5.0", "2.6.6"]}
    monkeypatch.setenv("REPROBISECT_INSTALLER", "pip")
    monkeypatch.setattr(pinning, "list_versions", lambda python, name, **_: releases[name])
    cell = resolve_cell(BASE, {"deepspeed": "<0.17", "lightning": "latest"})
    assert dict(cell.packages) == {"deepspeed": "0.16.9", "lightning": "2.6.6"}
    with pytest.raises(ConfigError, match=r"deepspeed>=9: no release"):
        resolve_cell(BASE, {"deepspeed": ">=9"})


def test_an_empty_pin_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        resolve_cell(BASE, {"deepspeed": ""})


@pytest.mark.parametrize(
    ("forced", "expected"),
    [("uv", "uv"), ("pip", "pip")],
)
def test_the_installer_can_be_forced(monkeypatch: pytest.MonkeyPatch, forced: str, expected: str) -> None:
    monkeypatch.setenv("REPROBISECT_INSTALLER", forced)
    assert installer() == expected


def test_the_installer_is_uv_only_when_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPROBISECT_INSTALLER", "conda; rm -rf /")  # not a choice: ignored
    monkeypatch.setenv("PATH", str(tmp_path))
    assert installer() == "pip"
    (tmp_path / "uv").write_text("#!/bin/sh\n")
    (tmp_path / "uv").chmod(0o755)
    assert installer() == "uv"


# --- what is installed -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0.16.4", "deepspeed==0.16.4"),
        (
            "git+https://github.com/microsoft/DeepSpeed@v0.16.4",
            "deepspeed @ git+https://github.com/microsoft/DeepSpeed@v0.16.4",
        ),
        ("https://example.invalid/ds.whl", "deepspeed @ https://example.invalid/ds.whl"),
        ("/wheels/deepspeed-0.16.4-py3-none-any.whl", "/wheels/deepspeed-0.16.4-py3-none-any.whl"),
    ],
)
def test_install_requirement(spec: str, expected: str) -> None:
    assert install_requirement("deepspeed", spec) == expected


def test_a_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert install_requirement("deepspeed", "./DeepSpeed") == str(tmp_path.resolve() / "DeepSpeed")
    assert install_requirement("deepspeed", "ds-0.16.4.tar.gz") == str(tmp_path.resolve() / "ds-0.16.4.tar.gz")


@given(st.text(min_size=1, max_size=60).filter(lambda s: "\x00" not in s))
def test_an_install_requirement_is_one_argument_that_is_never_an_option(spec: str) -> None:
    requirement = install_requirement("deepspeed", spec)
    assert isinstance(requirement, str) and not requirement.startswith("-")


def test_base_site_dirs_come_from_the_pth_file(tmp_path: Path) -> None:
    site = tmp_path / "cell" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "_reprobisect_base.pth").write_text(
        "import site; site.addsitedir('/opt/py/lib/site-packages')\nimport site; site.addsitedir('/opt/x')\n"
        "garbage line\nimport os; os.system('x')\n"
    )
    env = CellEnv(cell=_cell(), path=tmp_path / "cell", reused=True, build_seconds=0.0)
    assert env.base_site_dirs() == [Path("/opt/py/lib/site-packages"), Path("/opt/x")]
    assert env.python == tmp_path / "cell" / "bin" / "python"
    assert env.torch_extensions == tmp_path / "cell" / "torch_extensions"
    assert CellEnv(cell=_cell(), path=tmp_path / "none", reused=True, build_seconds=0.0).base_site_dirs() == []
