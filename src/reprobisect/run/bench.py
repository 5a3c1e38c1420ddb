"""Figures for how fast the harness builds cells and how little it adds to a run, printed side by side.

Environment builds are measured cold (empty package cache) and warm (cache filled, new venv) for the
harness (uv) and for nox's default backend (virtualenv + pip), both over the base interpreter's torch.
Reuse is the cost of finding a built cell unchanged. Overhead is the harness's wall time per run divided
by a bare ``python repros/<script>`` of the same form in the same warm cell.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from reprobisect.cells.envs import BaseInterpreter, CellEnv, ensure_env, install_requirement, resolve_cell
from reprobisect.config.load import Config
from reprobisect.errors import EnvBuildError
from reprobisect.run.execute import RunSpec, child_environ, execute
from reprobisect.run.runner import ChildSpec, run_child
from reprobisect.run.sandbox import Confinement
from reprobisect.run.store import Store
from reprobisect.util.cmd import run_tool
from reprobisect.util.echo import Echo

__all__ = ["BenchResult", "run_bench"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchResult:
    """Seconds for each measurement (lists: one per repetition)."""

    harness_cold: float
    harness_warm: float
    reuse: list[float]
    pip_cold: float | None
    pip_warm: float | None
    harness_runs: list[float]
    bare_runs: list[float]


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _pip_build(base: BaseInterpreter, packages: Mapping[str, str], venv: Path, cache: Path) -> float:
    """nox's default: virtualenv (here over the base interpreter's torch), then pip install."""

    def build() -> None:
        virtualenv = [sys.executable, "-m", "virtualenv", "--quiet", "--system-site-packages", "-p", base.executable]
        run_tool([*virtualenv, venv], what="bench: virtualenv", timeout=600, error=EnvBuildError)
        reqs = [install_requirement(n, v) for n, v in packages.items()]
        pip: list[str | Path] = [venv / "bin" / "pip", "install", "--quiet", "--cache-dir", cache, *reqs]
        run_tool(pip, what="bench: pip install", timeout=3600, error=EnvBuildError)

    return _timed(build)


def _bare_run(spec: RunSpec, environ: Mapping[str, str], log: Path) -> float:
    """The same child without the bootstrap, record or classification: what a user would type."""
    env = child_environ(spec, environ)
    env.pop("REPROBISECT_SHIM", None)
    argv = (str(spec.env.python), str(spec.form.script), *spec.args)
    return run_child(
        ChildSpec(argv=argv, env=env, cwd=log.parent, log_path=log, timeout=spec.repro.timeout)
    ).wall_seconds


def run_bench(
    config: Config,
    base: BaseInterpreter,
    pins: Mapping[str, str],
    *,
    runs: int,
    with_pip: bool,
    environ: Mapping[str, str],
    echo: Echo = print,
) -> BenchResult:
    """Measure everything once (builds) or ``runs`` times (reuse, runs) and return the figures."""
    cell = resolve_cell(base, {**config.default_cell, **pins})
    echo(f"bench cell {cell.id}; {runs} runs each; pip/virtualenv comparison: {'on' if with_pip else 'off'}")
    with tempfile.TemporaryDirectory(prefix="reprobisect-bench-") as tmp:
        root = Path(tmp)
        os.environ["UV_CACHE_DIR"] = str(root / "uv-cache")
        try:
            cold = _timed(lambda: ensure_env(cell, base, root / "cold"))
            echo(f"harness cold build: {cold:.1f} s")
            warm = _timed(lambda: ensure_env(cell, base, root / "warm"))
            echo(f"harness warm build: {warm:.1f} s")
        finally:
            del os.environ["UV_CACHE_DIR"]
        reuse = [_timed(lambda: ensure_env(cell, base, root / "warm")) for _ in range(max(runs, 3))]
        pip_cold = pip_warm = None
        if with_pip:
            pip_cold = _pip_build(base, cell.packages, root / "pip-cold", root / "pip-cache")
            echo(f"virtualenv+pip cold build: {pip_cold:.1f} s")
            pip_warm = _pip_build(base, cell.packages, root / "pip-warm", root / "pip-cache")
            echo(f"virtualenv+pip warm build: {pip_warm:.1f} s")
        env = ensure_env(cell, base, root / "warm")
        harness_runs, bare_runs = _overhead(config, env, root, runs, environ)
    return BenchResult(
        harness_cold=cold,
        harness_warm=warm,
        reuse=reuse,
        pip_cold=pip_cold,
        pip_warm=pip_warm,
        harness_runs=harness_runs,
        bare_runs=bare_runs,
    )


def _overhead(
    config: Config, env: CellEnv, root: Path, runs: int, environ: Mapping[str, str]
) -> tuple[list[float], list[float]]:
    repro = config.repro("gan")
    form = repro.forms["cpu-deepspeed"]
    # sandboxed, as every run is by default: the figure is what a user's run costs
    spec = RunSpec(repro=repro, form=form, fix=repro.fixes["none"], env=env, sandbox=Confinement().open())
    store = Store(root / "reports")
    (root / "bare").mkdir()
    execute(spec, store, environ=environ)  # warm-up: the comm op compiles once per cell
    harness: list[float] = []
    bare: list[float] = []
    for i in range(runs):  # interleaved, so drift in machine load hits both alike
        start = time.perf_counter()
        execute(dataclasses.replace(spec, repeat=i + 1), store, environ=environ)
        harness.append(time.perf_counter() - start)
        bare.append(_bare_run(spec, environ, root / "bare" / f"run{i}.log"))
    return harness, bare


def format_bench(result: BenchResult) -> str:
    """The figures side by side, with the ratios the goals are stated in."""

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.1f}×" if a and b else "-"

    reuse = statistics.median(result.reuse)
    h_run, b_run = statistics.median(result.harness_runs), statistics.median(result.bare_runs)
    lines = [
        f"{'':32}{'harness (uv)':>14}{'virtualenv+pip':>16}{'pip ÷ harness':>15}",
        f"{'cold cell build (empty cache)':32}{result.harness_cold:>13.1f}s{_s(result.pip_cold):>16}"
        f"{ratio(result.pip_cold, result.harness_cold):>15}",
        f"{'warm cell build (cached)':32}{result.harness_warm:>13.1f}s{_s(result.pip_warm):>16}"
        f"{ratio(result.pip_warm, result.harness_warm):>15}",
        f"{'reuse of a built cell':32}{reuse:>13.3f}s",
        "",
        f"{'run of gan cpu-deepspeed none':32}{'harness':>14}{'bare python':>16}{'harness ÷ bare':>15}",
        f"{'median wall per run':32}{h_run:>13.2f}s{b_run:>15.2f}s{h_run / b_run:>14.3f}×",
        f"{'all runs (s)':32}{' '.join(f'{x:.2f}' for x in result.harness_runs):>14}  "
        f"{' '.join(f'{x:.2f}' for x in result.bare_runs)}",
        "",
        "goals: warm build ≤ 3 s and ≥ 10× faster than virtualenv+pip; reuse ≤ 0.5 s; harness ÷ bare ≤ 1.10",
    ]
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"
