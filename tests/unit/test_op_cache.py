"""The cache of just-in-time ops (issue #18): keyed on what determines the binary, never on where the sources
lie; one build when several processes ask at once; a killed build never blocks the next; bounded in size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobisect.cells import op_builds
from reprobisect.run.child import op_cache


@pytest.fixture(autouse=True)
def _no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unit tests run without torch: its identity is a constant here."""
    monkeypatch.setattr(op_cache, "_torch_identity", lambda with_cuda: ["2.13.0+cpu", "abc", "", "True"])


def _op_tree(root: Path, *, body: str = "int f() { return 1; }") -> tuple[list[str], dict[str, object]]:
    """An op's sources as DeepSpeed lays them out: csrc/comm/shm.cpp beside shm.h, csrc/includes/."""
    (root / "csrc" / "comm").mkdir(parents=True)
    (root / "csrc" / "includes").mkdir()
    (root / "csrc" / "comm" / "shm.cpp").write_text(body)
    (root / "csrc" / "comm" / "shm.h").write_text("#pragma once\n")
    (root / "csrc" / "includes" / "common.h").write_text("#define X 1\n")
    sources = [str(root / "csrc" / "comm" / "shm.cpp")]
    options = {
        "name": "shm_comm",
        "sources": sources,
        "extra_include_paths": [str(root / "csrc" / "includes")],
        "extra_cflags": ["-O3", "-fopenmp"],
        "extra_ldflags": [f"-L{sys.prefix}/lib"],
        "verbose": True,
    }
    return sources, options


def test_two_cells_with_the_same_sources_share_a_key(tmp_path: Path) -> None:
    one, options_one = _op_tree(tmp_path / "cell-a")
    two, options_two = _op_tree(tmp_path / "cell-b")
    assert op_cache.op_key("shm_comm", one, options_one) == op_cache.op_key("shm_comm", two, options_two)


@pytest.mark.parametrize(
    "change",
    ["source", "header beside it", "include folder", "flags", "torch", "compiler env"],
)
def test_anything_that_changes_the_binary_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    sources, options = _op_tree(tmp_path / "cell")
    before = op_cache.op_key("shm_comm", sources, options)
    comm, includes = tmp_path / "cell" / "csrc" / "comm", tmp_path / "cell" / "csrc" / "includes"
    if change == "source":
        (comm / "shm.cpp").write_text("int f() { return 2; }")
    elif change == "header beside it":
        (comm / "shm.h").write_text("#pragma once\n#define Y\n")
    elif change == "include folder":
        (includes / "new.h").write_text("")
    elif change == "flags":
        options = {**options, "extra_cflags": ["-O2"]}
    elif change == "torch":
        monkeypatch.setattr(op_cache, "_torch_identity", lambda with_cuda: ["2.14.1", "def", "13.0", "True"])
    else:
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert op_cache.op_key("shm_comm", sources, options) != before


def test_a_build_folder_or_a_standalone_build_is_left_to_torch(tmp_path: Path) -> None:
    calls: list[dict[str, object]] = []

    def original(name: str, sources: list[str], build_directory: str | None = None, is_standalone: bool = False):
        calls.append({"build_directory": build_directory, "is_standalone": is_standalone})
        return "torch's own"

    load = op_cache.cached_load(original, str(tmp_path / "ops"))
    assert load("x", ["a.cpp"], build_directory="/somewhere") == "torch's own"
    assert load("x", ["a.cpp"], is_standalone=True) == "torch's own"
    assert calls == [
        {"build_directory": "/somewhere", "is_standalone": False},
        {"build_directory": None, "is_standalone": True},
    ]
    assert not (tmp_path / "ops").exists()


def _fake_torch_load(builds: Path):
    """A stand-in for torch's load: 'builds' by writing <name>.so into the build folder, counting builds."""

    def load(
        name,
        sources,
        extra_include_paths=None,
        extra_cflags=None,
        extra_ldflags=None,
        build_directory=None,
        verbose=False,
        with_cuda=None,
    ):
        with builds.open("a") as handle:
            handle.write(f"{build_directory}\n")
        time.sleep(0.3)
        Path(build_directory, f"{name}.so").write_text("binary")
        return f"built {name}"

    return load


def test_the_first_call_builds_the_next_one_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(op_cache, "_import_built", lambda name, folder: f"loaded {name} from {Path(folder).name}")
    builds = tmp_path / "builds.txt"
    load = op_cache.cached_load(_fake_torch_load(builds), str(tmp_path / "ops"))
    one_sources, one_options = _op_tree(tmp_path / "cell-a")
    _, two_options = _op_tree(tmp_path / "cell-b")
    assert load(**one_options) == "built shm_comm"
    key = op_cache.op_key("shm_comm", one_sources, one_options)
    assert load(**two_options) == f"loaded shm_comm from shm_comm-{key}"
    assert len(builds.read_text().splitlines()) == 1
    out = capsys.readouterr().out.splitlines()
    events = [json.loads(line.partition("@@repro ")[2]) for line in out if line.startswith("@@repro ")]
    assert [(e["event"], e["built"]) for e in events] == [("op", True), ("op", False)]


def test_a_default_spelled_out_is_the_same_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSpeed 0.16.7 began to pass ``with_cuda=None``, torch's default, to the same op 0.16.6 built with the
    same sources and flags: one build serves both; a value other than the default is another build."""
    monkeypatch.setattr(op_cache, "_import_built", lambda name, folder: f"loaded {name}")
    builds = tmp_path / "builds.txt"
    load = op_cache.cached_load(_fake_torch_load(builds), str(tmp_path / "ops"))
    _, older = _op_tree(tmp_path / "deepspeed-0.16.6")
    _, newer = _op_tree(tmp_path / "deepspeed-0.16.7")
    assert load(**older) == "built shm_comm"
    assert load(**newer, with_cuda=None) == "loaded shm_comm"
    assert len(builds.read_text().splitlines()) == 1
    assert load(**newer, with_cuda=True) == "built shm_comm"
    assert len(builds.read_text().splitlines()) == 2


def test_a_killed_build_is_cleared_and_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = tmp_path / "builds.txt"
    load = op_cache.cached_load(_fake_torch_load(builds), str(tmp_path / "ops"))
    sources, options = _op_tree(tmp_path / "cell")
    key = op_cache.op_key("shm_comm", sources, options)
    left = tmp_path / "ops" / f"shm_comm-{key}"
    left.mkdir(parents=True)
    (left / "lock").write_text("")  # torch's baton of a build that was killed: it would wait on it forever
    (left / "shm.o").write_text("half an object")
    assert load(**options) == "built shm_comm"
    assert not (left / "lock").exists() and not (left / "shm.o").exists()


DRIVER = """
import sys, time
from pathlib import Path
from reprobisect.run.child import op_cache
op_cache._torch_identity = lambda with_cuda: ["x"]
op_cache._import_built = lambda name, folder: "loaded"
root, src, builds = sys.argv[1:4]
def original(name, sources, build_directory=None, verbose=False):
    with open(builds, "a") as handle:
        handle.write(build_directory + "\\n")
    time.sleep(1.0)
    Path(build_directory, name + ".so").write_text("binary")
    return "built"
print(op_cache.cached_load(original, root)(name="op", sources=[src]))
"""


def test_harnesses_asking_at_once_build_it_once(tmp_path: Path) -> None:
    source = tmp_path / "csrc" / "op.cpp"  # a folder of its own: the files beside a source are part of its key
    source.parent.mkdir()
    source.write_text("int f();")
    builds = tmp_path / "builds.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-c", DRIVER, str(tmp_path / "ops"), str(source), str(builds)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    answers = sorted(p.communicate(timeout=60)[0].strip().splitlines()[-1] for p in procs)
    assert answers == ["built", "loaded", "loaded"], builds.read_text()
    assert len(builds.read_text().splitlines()) == 1


def test_the_harness_sees_finished_builds_and_bounds_the_size(tmp_path: Path) -> None:
    root = tmp_path / "ops"
    for index, (name, finished) in enumerate([("old", True), ("mid", True), ("building", False)]):
        folder = root / f"{name}-{index:024x}"
        folder.mkdir(parents=True)
        (folder / "blob.o").write_bytes(b"x" * 1000)
        if finished:
            (folder / f"{name}.so").write_bytes(b"y" * 1000)
        else:
            (folder / "lock").write_text("")
        lock = root / f"{folder.name}.flock"
        lock.write_text("")
        os.utime(lock, (time.time() - 7200 + index * 600, time.time() - 7200 + index * 600))
    assert [p.name.split("-")[0] for p in op_builds.finished(root)] == ["old", "mid"]
    removed = op_builds.OPS.prune(root, max_bytes=3500)
    assert [e.name.split("-")[0] for e in removed] == ["old"]
    assert sorted(e.name.split("-")[0] for e in op_builds.OPS.entries(root)) == ["building", "mid"]
    assert op_builds.OPS.clear(root) == 3000 and op_builds.OPS.entries(root) == []


def test_the_cache_can_be_moved_or_turned_off(tmp_path: Path) -> None:
    assert op_builds.cache_root(tmp_path / "cells", {}) == (tmp_path / "cells" / "ops").absolute()
    assert op_builds.cache_root(tmp_path / "cells", {"REPROBISECT_OP_CACHE": str(tmp_path / "x")}) == tmp_path / "x"
    assert op_builds.cache_root(tmp_path / "cells", {"REPROBISECT_OP_CACHE": "off"}) is None
