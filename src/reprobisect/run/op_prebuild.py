"""DeepSpeed's just-in-time ops built once per cell and op sources, before the runs that need them (#41).

A run that compiles an op pays for it inside its own timed run: the CPU comm op took 30 s of a 35 s run on two
cores, FusedAdam over 75 s on a fresh GPU node, and with eight runs at once seven of them waited on the first
one's build lock. So while cells are prepared (``run/matrix_build.py``, in parallel with the other cells' builds) the
ops a cell's runs will load are built through DeepSpeed's own builders (``run/child/build_ops.py``), with the
environment those runs get, into the shared op cache: the runs then only load them.

Which ops: the CPU comm op (``deepspeed_shm_comm``) for a run on DeepSpeed's CPU accelerator where the release's
``deepspeed/comm/torch.py`` builds it at ``init_distributed``; the optimizers a script names (``FusedAdam``,
``DeepSpeedCPUAdam``, ...). A marker per op names, build variables and interpreter spares the other cells of a
sweep an interpreter start (cells prepared at once wait for the first one's prebuild): most releases ship the same
op sources, and one whose sources differ builds its op in its first run, as before, and its record says so.
A prebuild that fails is said and left to the runs, which meet the same failure and are classified by it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.cells.envs import CellEnv
from reprobisect.cells.op_builds import cache_root
from reprobisect.errors import ToolError
from reprobisect.run.bytecode import prefix_environ
from reprobisect.run.child_env import cell_environ
from reprobisect.util import tally
from reprobisect.util.cmd import run_tool
from reprobisect.util.files import write_atomic

__all__ = ["SCRIPT_OPS", "SHM_OP", "OpPrebuild", "cell_ops", "deepspeed_folder", "ops_for", "prebuild_ops"]

PREBUILD = Path(__file__).parent / "child" / "build_ops.py"
SHM_OP = "deepspeed_shm_comm"
# words in a script that mean DeepSpeed builds an op for it, and that op's name (the builder's NAME)
SCRIPT_OPS = {
    "FusedAdam": "fused_adam",
    "DeepSpeedCPUAdam": "cpu_adam",
    "FusedLamb": "fused_lamb",
    "DeepSpeedCPUAdagrad": "cpu_adagrad",
    "DeepSpeedCPULion": "cpu_lion",
    "FusedLion": "fused_lion",
}
_TIMEOUT = 1800.0  # a CUDA op on one core of a slow node: minutes, not hours


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpPrebuild:
    """What preparing a cell's ops did: which, how long, whether a marker said they were built already."""

    names: tuple[str, ...]
    seconds: float
    reused: bool
    failure: str | None = None


def deepspeed_folder(env: CellEnv) -> Path | None:
    """The cell's installed ``deepspeed`` package, or None (not installed, or not where a venv puts it)."""
    found = sorted(env.path.glob("lib/python*/site-packages/deepspeed"))
    return found[0] if found else None


def ops_for(script_text: str, form_env: Mapping[str, str], deepspeed: Path | None) -> tuple[str, ...]:
    """The ops a run of ``script_text`` with ``form_env`` will load in a cell whose DeepSpeed is ``deepspeed``: none
    for a script that never names DeepSpeed (a torch-only script must not wait for an op it never loads)."""
    if "deepspeed" not in script_text.lower():
        return ()
    names = [op for word, op in SCRIPT_OPS.items() if word in script_text]
    if form_env.get("DS_ACCELERATOR") == "cpu" and deepspeed is not None and _builds_shm_op(deepspeed):
        names.append(SHM_OP)
    return tuple(dict.fromkeys(names))


FormEnv = tuple[tuple[str, str], ...]  # a form's variables, sorted: what a group of ops is built with


def cell_ops(env: CellEnv, runs: Sequence[tuple[str, Mapping[str, str]]]) -> dict[FormEnv, tuple[str, ...]]:
    """The ops to build in ``env`` for its runs (each a script's text and its form's variables), grouped by the
    variables they are built with (a CPU form and a GPU form build different binaries)."""
    deepspeed = deepspeed_folder(env)
    grouped: dict[FormEnv, list[str]] = {}
    for text, form_env in runs:
        names = ops_for(text, form_env, deepspeed)
        if names:
            grouped.setdefault(tuple(sorted(form_env.items())), []).extend(names)
    return {key: tuple(dict.fromkeys(names)) for key, names in grouped.items()}


def _builds_shm_op(deepspeed: Path) -> bool:
    """Whether this release's torch backend builds the CPU comm op when it initialises (0.14 and later do)."""
    try:
        return "ShareMemCommBuilder" in (deepspeed / "comm" / "torch.py").read_text(encoding="utf-8")
    except OSError:
        return False


def _environ(env: CellEnv, form_env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a run of this cell gets that decide an op's key: the scrubbed environment, the cell first on
    PATH, the op cache (or the cell's own op folder), the form's variables."""
    child = cell_environ(env, environ)
    root = cache_root(env.path.parent, environ)
    if root is not None:
        child["REPROBISECT_OP_CACHE"] = str(root)
    return child | prefix_environ(env) | dict(form_env)


def _marker(env: CellEnv, names: Sequence[str], child: Mapping[str, str]) -> Path | None:
    """Where a finished prebuild of these ops is noted, beside the op cache: keyed on the names, the variables
    that decide a build and the interpreter, not on the release. Most releases ship the same op sources, so one
    prebuild serves a whole sweep; a release whose sources differ builds its op in its first run (its record
    says ``built``), as before. A content key would need DeepSpeed imported, the very cost this spares."""
    root = child.get("REPROBISECT_OP_CACHE")
    if root is None:
        return None
    keyed = {k: v for k, v in child.items() if k.startswith(("CUDA_", "TORCH_CUDA", "DS_", "CXX", "CC"))}
    interpreter = [env.cell.python, env.cell.python_source, env.cell.torch, env.cell.torch_source]
    blob = json.dumps([sorted(names), sorted(keyed.items()), interpreter])
    return Path(root) / "prebuilt" / hashlib.sha256(blob.encode()).hexdigest()[:24]


_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(marker: Path | None) -> threading.Lock:
    """One lock per marker in this process: cells prepared at once wait for the first one's prebuild and then
    find its marker, instead of each starting an interpreter."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(marker or Path(), threading.Lock())


def prebuild_ops(
    env: CellEnv, names: Sequence[str], form_env: Mapping[str, str], environ: Mapping[str, str]
) -> OpPrebuild | None:
    """Build ``names`` in ``env`` unless a marker says they are built; None when there is nothing to build."""
    if not names:
        return None
    child = _environ(env, form_env, environ)
    marker = _marker(env, names, child)
    with _lock(marker):
        if marker is not None and marker.is_file():
            return OpPrebuild(names=tuple(names), seconds=0.0, reused=True)
        return _prebuild(env, names, child, marker)


def _prebuild(env: CellEnv, names: Sequence[str], child: Mapping[str, str], marker: Path | None) -> OpPrebuild:
    """Run the builder child; note the marker when every op is ready."""
    log = marker.with_suffix(".log") if marker is not None else env.torch_extensions / "op-prebuild.log"
    start = time.perf_counter()
    try:
        done = run_tool([env.python, PREBUILD, *names], what="building ops", timeout=_TIMEOUT, env=child, check=False)
    except ToolError as exc:
        return OpPrebuild(names=tuple(names), seconds=time.perf_counter() - start, reused=False, failure=str(exc))
    seconds = time.perf_counter() - start
    tally.add(tally.OP_BUILDS, seconds)
    log.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(log, done.stdout + done.stderr, what="the op prebuild's log")
    if done.returncode != 0:
        return OpPrebuild(
            names=tuple(names), seconds=seconds, reused=False, failure=f"exit {done.returncode}, see {log}"
        )
    if marker is not None:
        write_atomic(marker, json.dumps({"ops": list(names), "seconds": round(seconds, 3)}), what="the op marker")
    return OpPrebuild(names=tuple(names), seconds=seconds, reused=False)
