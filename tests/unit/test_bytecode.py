"""Byte code compiled once for packages that ship none (run/bytecode.py, issue #41): which modules, the child that
checks and compiles in a real venv, the cell's note, and what a run then gets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.cells.envs import BYTECODE_MARKER, CellEnv
from reprobisect.model.cell import Cell
from reprobisect.run.bytecode import (
    BYTECODE,
    PREFIX_ENV,
    bytecode_prefix,
    fill_bytecode,
    prefix_environ,
    script_modules,
)
from reprobisect.run.one_run import RunSpec, child_environ
from tests.conftest import make_repro

_NOISY = "import sys\nprint('a package that talks at import time')\nprint('{not json', file=sys.stderr)\n"


def _cell(
    tmp_path: Path, *, compiled: bool = False, body: str = "VALUE = 42\n", python: str = sys.executable, extra: int = 0
) -> CellEnv:
    """A real venv (no pip) of ``python`` holding ``slowpkg`` (two modules, and ``extra`` more) with no byte code
    beside it, or with it (``compiled``, as the packages of a cell the harness builds)."""
    path = tmp_path / ("cell-compiled" if compiled else "cell")
    subprocess.run([python, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    (site,) = path.glob("lib/python*/site-packages")
    package = site / "slowpkg"
    package.mkdir()
    (package / "__init__.py").write_text(_NOISY + "from slowpkg.inner import VALUE\n")
    (package / "inner.py").write_text(body)
    for number in range(extra):
        (package / f"extra_{number}.py").write_text(f"NUMBER = {number}\n")
    if compiled:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, timeout=120)
    cell = Cell(python="3.11", torch="2.13.0", torch_source="system", packages={})
    return CellEnv(cell=cell, path=path, reused=False, build_seconds=0.0)


def _environ(tmp_path: Path) -> dict[str, str]:
    # this machine's own PYTHONDONTWRITEBYTECODE=1 (the GPU image sets it too) must not stop the fill
    return {**os.environ, "REPROBISECT_BYTECODE_CACHE": str(tmp_path / "bytecode"), "PYTHONDONTWRITEBYTECODE": "1"}


def _cached(env: CellEnv, prefix: Path | None) -> str:
    """Where the cell's python, started as a run would be, takes ``slowpkg.inner``'s byte code from."""
    extra = {PREFIX_ENV: str(prefix)} if prefix is not None else {}
    done = subprocess.run(
        [str(env.path / "bin" / "python"), "-c", "import slowpkg.inner as m; print(m.__cached__)"],
        env={"PATH": os.defpath, "PYTHONDONTWRITEBYTECODE": "1", **extra},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def _value(env: CellEnv, prefix: Path | None) -> str:
    """``slowpkg.VALUE`` as a run of the cell reads it, with the byte code in ``prefix``."""
    done = subprocess.run(
        [str(env.path / "bin" / "python"), "-c", "import slowpkg; print(slowpkg.VALUE)"],
        env={"PATH": os.defpath, PREFIX_ENV: str(prefix), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def test_the_fill_imports_what_a_script_names_outside_the_standard_library() -> None:
    script = "import os, json\nimport torch.nn as nn\nfrom deepspeed.ops.adam import FusedAdam\nfrom . import x\n"
    assert script_modules([script, "import lightning\nimport 'not python"]) == ("deepspeed", "torch")
    assert script_modules(["import lightning, torchvision\nimport antigravity\nfrom __future__ import x"]) == (
        "lightning",
        "torchvision",
    )  # antigravity is the standard library's: it opens a browser at import, and is never imported by the fill


@given(st.lists(st.text(max_size=300), max_size=4))
def test_any_script_text_gives_identifiers_outside_the_standard_library(texts: list[str]) -> None:
    names = script_modules(texts)
    assert list(names) == sorted(set(names)) and len(names) <= 64
    assert all(name.isidentifier() and name.isascii() and name not in sys.stdlib_module_names for name in names)


def test_packages_without_byte_code_are_compiled_once_and_their_runs_read_it(tmp_path: Path) -> None:
    env, environ = _cell(tmp_path), _environ(tmp_path)
    assert not Path(_cached(env, None)).exists()  # compiled by every interpreter, written by none
    done = fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    assert done is not None and done.failure is None and not done.reused, done
    assert done.lacking == ("slowpkg",) and done.loaded >= 2
    prefix = bytecode_prefix(env)
    assert prefix is not None and prefix.parent == tmp_path / "bytecode"
    cached = Path(_cached(env, prefix))
    assert cached.is_relative_to(prefix) and cached.is_file()  # the run reads the fill's file
    assert prefix_environ(env) == {PREFIX_ENV: str(prefix)}
    again = fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    assert again is not None and again.reused  # the note answers: no interpreter started
    note = json.loads((env.path / BYTECODE_MARKER).read_text())
    assert note == {"checked": ["slowpkg"], "prefix": str(prefix)}


def test_an_edited_source_is_compiled_afresh_not_read_from_the_cache(tmp_path: Path) -> None:
    env, environ = _cell(tmp_path), _environ(tmp_path)
    fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    prefix = bytecode_prefix(env)
    inner = next(env.path.glob("lib/python*/site-packages/slowpkg/inner.py"))
    inner.write_text("VALUE = 'edited, longer than before'\n")
    assert _value(env, prefix) == "edited, longer than before"


def test_packages_that_ship_their_byte_code_change_nothing(tmp_path: Path) -> None:
    env, environ = _cell(tmp_path, compiled=True), _environ(tmp_path)
    done = fill_bytecode(env, ("slowpkg", "not_installed_anywhere"), {}, environ, tmp_path / "envs")
    assert done is not None and done.failure is None and done.lacking == () and done.loaded == 0
    assert bytecode_prefix(env) is None and prefix_environ(env) == {}
    assert not (tmp_path / "bytecode" / "py3.11").exists()
    assert "__pycache__" in _cached(env, None)  # the package's own cache, as before
    for cache in env.path.glob("lib/python*/site-packages/slowpkg/__pycache__"):
        shutil.rmtree(cache)  # the packages lose their byte code later (another tool cleaned them)
    again = fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    assert again is not None and not again.reused and again.lacking == ("slowpkg",)  # checked again, not believed
    assert bytecode_prefix(env) is not None


def test_a_pruned_prefix_is_filled_again_and_a_new_module_is_checked(tmp_path: Path) -> None:
    env, environ = _cell(tmp_path), _environ(tmp_path)
    fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    prefix = bytecode_prefix(env)
    assert prefix is not None
    BYTECODE.clear(tmp_path / "bytecode")
    assert bytecode_prefix(env) is None  # gone: the runs compile, as before, until the next fill
    done = fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    assert done is not None and not done.reused and bytecode_prefix(env) == prefix
    more = fill_bytecode(env, ("slowpkg", "json_like_missing"), {}, environ, tmp_path / "envs")
    assert more is not None and not more.reused and bytecode_prefix(env) == prefix  # a new module: checked, kept


def test_a_cache_turned_off_checks_nothing(tmp_path: Path) -> None:
    env = _cell(tmp_path)
    environ = {**os.environ, "REPROBISECT_BYTECODE_CACHE": "off"}
    assert fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs") is None
    assert bytecode_prefix(env) is None


def test_a_package_that_exits_at_import_still_gets_an_answer(tmp_path: Path) -> None:
    env = _cell(tmp_path, body="raise SystemExit(3)\n")
    done = fill_bytecode(env, ("slowpkg",), {}, _environ(tmp_path), tmp_path / "envs")
    assert done is not None and done.failure is None and done.lacking == ("slowpkg",)


@given(
    st.one_of(
        st.text(max_size=100),
        st.builds(json.dumps, st.one_of(st.lists(st.integers()), st.dictionaries(st.text(max_size=8), st.integers()))),
        st.just('{"prefix": "relative/path", "checked": "torch"}'),
        st.just('{"prefix": 7, "checked": [1, null]}'),
        st.just('{"prefix": "/nonexistent/reprobisect/prefix"}'),
    )
)
def test_a_hostile_or_cut_note_gives_no_prefix(note: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cell = Cell(python="3.11", torch="x", torch_source="system", packages={})
        env = CellEnv(cell=cell, path=Path(folder), reused=True, build_seconds=0.0)
        (Path(folder) / BYTECODE_MARKER).write_text(note)
        assert bytecode_prefix(env) is None and prefix_environ(env) == {}


def test_a_run_of_a_filled_cell_gets_the_prefix_in_its_environment(tmp_path: Path) -> None:
    env, environ = _cell(tmp_path), _environ(tmp_path)
    repro = make_repro("attack/writes_outside.py", expected=None)
    spec = RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["none"], env=env)
    assert PREFIX_ENV not in child_environ(spec, environ)
    fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    assert child_environ(spec, environ)[PREFIX_ENV] == str(bytecode_prefix(env))


def test_a_child_outside_the_sandbox_keeps_the_user_s_no_byte_code_setting() -> None:
    """An op prebuild or a bare bench run must not write byte code into the user's interpreter (the GPU image's
    site-packages are writable, and its PYTHONDONTWRITEBYTECODE=1 was dropped, so the first such child compiled
    torch there); the fill drops it on purpose, for its own folder only."""
    from reprobisect.run.child_env import scrubbed_environ

    assert scrubbed_environ({"PYTHONDONTWRITEBYTECODE": "1"}) == {"PYTHONDONTWRITEBYTECODE": "1"}


def test_a_cache_a_dependency_ships_is_copied_not_compiled_again(tmp_path: Path) -> None:
    """With a prefix Python reads no other cache, so what a dependency shipped is copied in as the fill's imports
    find it (compiling the 2,800 such modules took most of a first, 21 s fill on the GPU node). Told apart here by
    a shipped cache that Python accepts (its header matches the source's time and size) but that holds other code."""
    env = _cell(tmp_path, body="from shipped import VALUE\n")
    (site,) = env.path.glob("lib/python*/site-packages")
    module = site / "shipped.py"
    module.write_text("VALUE = 'from the cached'\n")
    subprocess.run([sys.executable, "-m", "py_compile", str(module)], check=True, timeout=60)
    stamp = module.stat().st_mtime
    module.write_text("VALUE = 'from the source'\n")  # the same length
    os.utime(module, (stamp, stamp))
    done = fill_bytecode(env, ("slowpkg",), {}, _environ(tmp_path), tmp_path / "envs")
    assert done is not None and done.lacking == ("slowpkg",)
    prefix = bytecode_prefix(env)
    assert prefix is not None
    assert _value(env, prefix) == "from the cached"  # what Python itself reads without a prefix
    assert not list(site.glob("slowpkg/__pycache__/*.pyc"))  # the lacking package compiled into the prefix only
    assert list(prefix.rglob("slowpkg/inner.*.pyc"))


def _interpreters() -> list[str]:
    """This interpreter, and a 3.12 or later where one is installed: their compileall starts its workers through a
    fork server with the child's flags, which is how the fill once wrote into the package itself."""
    found = [sys.executable]
    candidates = [shutil.which(name) for name in ("python3.12", "python3.13")]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python3"))  # not on PATH
    for path in candidates:
        if path is None or sys.version_info >= (3, 12) or len(found) > 1:
            continue
        works = subprocess.run([path, "-c", "pass"], check=False, timeout=60, capture_output=True).returncode == 0
        if works:
            found.append(path)
    return found


@pytest.mark.parametrize("python", _interpreters())
def test_the_fill_writes_nothing_into_the_user_s_interpreter(tmp_path: Path, python: str) -> None:
    env = _cell(tmp_path, python=python, extra=80)  # enough files for the fill's workers
    done = fill_bytecode(env, ("slowpkg",), {}, _environ(tmp_path), tmp_path / "envs")
    assert done is not None and done.failure is None and done.lacking == ("slowpkg",), done
    (site,) = env.path.glob("lib/python*/site-packages")
    assert not list(site.rglob("*.pyc"))
    prefix = bytecode_prefix(env)
    assert prefix is not None and len(list(prefix.rglob("slowpkg/extra_*.pyc"))) == 80  # the whole package


def test_cells_prepared_at_once_share_one_prefix(tmp_path: Path) -> None:
    """Cells of one base interpreter fill one prefix at the same time (a triage prepares 8 at once): each gets a
    working prefix, and the lacking package is compiled under a lock, not by all of them together."""
    from concurrent.futures import ThreadPoolExecutor

    cells = [_cell(tmp_path / str(n), extra=80) for n in range(3)]
    environ = _environ(tmp_path)
    with ThreadPoolExecutor(3) as pool:
        done = list(pool.map(lambda env: fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs"), cells))
    assert all(d is not None and d.failure is None and d.lacking == ("slowpkg",) for d in done), done
    for env in cells:
        prefix = bytecode_prefix(env)
        assert prefix is not None and _value(env, prefix) == "42"
    assert len({bytecode_prefix(env) for env in cells}) == 1 == len(list((tmp_path / "bytecode").glob("*.flock")))


def test_the_ops_command_lists_and_clears_the_byte_code_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobisect.commands.main import main

    env, environ = _cell(tmp_path), _environ(tmp_path)
    fill_bytecode(env, ("slowpkg",), {}, environ, tmp_path / "envs")
    prefix = bytecode_prefix(env)
    assert prefix is not None
    monkeypatch.setenv("REPROBISECT_BYTECODE_CACHE", environ["REPROBISECT_BYTECODE_CACHE"])
    assert main(["ops", "--envs", str(tmp_path / "envs")]) == 0
    listed = capsys.readouterr().out
    assert "1 byte-code folders" in listed and prefix.name in listed
    assert main(["ops", "--envs", str(tmp_path / "envs"), "--clear"]) == 0
    assert "0 byte-code folders" in capsys.readouterr().out
    assert bytecode_prefix(env) is None  # the runs compile again, as before, until the next fill
