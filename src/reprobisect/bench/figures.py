"""Figures for how fast the harness builds cells and how little it adds to a run, printed side by side.

Environment builds are measured cold (empty package caches: uv's and the harness's kept wheels) and warm (both
filled by the cold build, new venv) for the harness (uv) and for nox's default backend (virtualenv + pip, its
wheel cache empty, then filled), all over the base interpreter's torch; the warm build says where its seconds
went (venv, install, marker). Reuse is the cost of finding a built cell unchanged. Overhead is the harness's
wall time per run divided by a bare ``python repros/<script>`` of the same form in the same warm cell.

Workloads (``--workloads``) are what users type, timed whole, each in empty cells (op cache included) with
the machine's package cache warm: ``repro gan`` on its default cell (what ``nox -s repro_gan`` runs), a cold
``bisect --all-transitions`` over DeepSpeed 0.16.0-0.19.8 on the CPU (as typed, one probe at a time, and again
in empty cells with two probes at a time, ``BisectRequest.jobs=2`` as ``bisect --jobs 2`` asks: the command gives
that callable), and the GAN's plain
CPU fixes in one warm cell with ``--jobs 1`` and ``--jobs 2``.
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

from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.envs import CellEnv, ensure_env
from reprobisect.cells.pinning import install_requirement, resolve_cell
from reprobisect.config.load import Config
from reprobisect.errors import EnvBuildError
from reprobisect.model.cell import Cell
from reprobisect.model.store import Store
from reprobisect.run.bytecode import PREFIX_ENV
from reprobisect.run.child_process import ChildSpec, run_child
from reprobisect.run.context import RunContext
from reprobisect.run.one_run import RunSpec, child_environ, execute
from reprobisect.run.sandbox import Confinement
from reprobisect.util.cmd import output_tail, run_tool

__all__ = ["BenchRequest", "BenchResult", "bare_run", "format_bench", "run_bench"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """What to measure and how often (``reprobisect bench``'s options, read by commands/bench.py)."""

    runs: int = 5  # runs of the repro for the overhead ratio
    with_pip: bool = True  # the virtualenv+pip comparison
    workloads: bool = False
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)  # the command line's pins
    config_path: Path  # the matrix file the workloads' commands are given


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
    fresh_repro: float | None = None
    cold_bisect: float | None = None
    bisect_probes: int | None = None
    jobs_one: float | None = None
    jobs_two: float | None = None
    warm_steps: Mapping[str, float] = dataclasses.field(default_factory=dict)
    bisect_two: float | None = None
    bisect_two_probes: int | None = None


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


def bare_run(spec: RunSpec, environ: Mapping[str, str], log: Path) -> float:
    """The same child without the bootstrap, record or classification: what a user would type (so without the byte
    code the harness compiled ahead for packages that ship none, ``run/bytecode.py``)."""
    env = child_environ(spec, environ)
    env.pop("REPROBISECT_SHIM", None)
    env.pop(PREFIX_ENV, None)
    argv = (str(spec.env.python), str(spec.script), *spec.args)
    return run_child(
        ChildSpec(argv=argv, env=env, cwd=log.parent, log_path=log, timeout=spec.repro.timeout)
    ).wall_seconds


def run_bench(
    config: Config,
    request: BenchRequest,
    ctx: RunContext,
    *,
    bisect_two: Callable[[Path, Path], int] | None = None,
) -> BenchResult:
    """Measure everything once (builds) or ``request.runs`` times (reuse, runs) over ``ctx``'s base interpreter, in
    its environment, and return the figures. ``bisect_two`` (cells folder, output folder → probes made) runs the
    workloads' bisection two probes at a time."""
    base, echo, runs = ctx.base, ctx.echo, request.runs
    cell = resolve_cell(base, {**config.default_cell, **request.pins})
    echo(f"bench cell {cell.id}; {runs} runs each; pip/virtualenv comparison: {'on' if request.with_pip else 'off'}")
    with tempfile.TemporaryDirectory(prefix="reprobisect-bench-") as tmp:
        root = Path(tmp)
        # the harness's kept wheels are a package cache too: empty for the cold build, filled for the warm one
        caches = {"UV_CACHE_DIR": str(root / "uv-cache"), "REPROBISECT_WHEEL_CACHE": str(root / "kept-wheels")}
        saved = {name: os.environ.get(name) for name in caches}
        os.environ.update(caches)
        try:
            cold = _timed(lambda: ensure_env(cell, base, root / "cold"))
            echo(f"harness cold build: {cold:.1f} s")
            start = time.perf_counter()
            warm_steps = ensure_env(cell, base, root / "warm").steps
            warm = time.perf_counter() - start
            echo(f"harness warm build: {warm:.2f} s ({_steps(warm_steps)})")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        reuse = [_timed(lambda: ensure_env(cell, base, root / "warm")) for _ in range(max(runs, 3))]
        pip_cold = pip_warm = None
        if request.with_pip:
            pip_cold = _pip_build(base, cell.packages, root / "pip-cold", root / "pip-cache")
            echo(f"virtualenv+pip cold build: {pip_cold:.1f} s")
            pip_warm = _pip_build(base, cell.packages, root / "pip-warm", root / "pip-cache")
            echo(f"virtualenv+pip warm build: {pip_warm:.1f} s")
        env = ensure_env(cell, base, root / "warm")
        harness_runs, bare_runs = _overhead(config, env, root, runs, ctx.environ)
        result = BenchResult(
            harness_cold=cold,
            harness_warm=warm,
            reuse=reuse,
            pip_cold=pip_cold,
            pip_warm=pip_warm,
            harness_runs=harness_runs,
            bare_runs=bare_runs,
            warm_steps=warm_steps,
        )
        if request.workloads:
            result = _workloads(result, config, cell, root, request.config_path, ctx, bisect_two)
    return result


def _cli(args: list[str], name: str, base: BaseInterpreter, config_path: Path) -> float:
    """One harness command as a user types it, timed whole; a harness error quotes the end of its output."""
    argv = [sys.executable, "-m", "reprobisect", *args, "--base-python", base.executable, "--config", str(config_path)]
    env = {k: v for k, v in os.environ.items() if k not in ("REPROBISECT_ENVS", "REPROBISECT_OP_CACHE")}
    start = time.perf_counter()
    done = run_tool(argv, what=f"bench: {name}", timeout=3600, error=EnvBuildError, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: a run failed as the repro should; anything else is the harness's
        msg = f"bench: {name} exited with status {done.returncode}:\n{output_tail(done.stdout + done.stderr)}"
        raise EnvBuildError(msg)
    return seconds


def _workloads(
    result: BenchResult,
    config: Config,
    cell: Cell,
    root: Path,
    config_path: Path,
    ctx: RunContext,
    bisect_two: Callable[[Path, Path], int] | None,
) -> BenchResult:
    base, echo = ctx.base, ctx.echo
    fresh = _cli(
        ["repro", "gan", "--envs", str(root / "fresh-cells"), "--out", str(root / "fresh-out")],
        "repro-gan",
        base,
        config_path,
    )
    echo(f"fresh repro gan (empty cells, warm package cache): {fresh:.0f} s")
    bisect_out = root / "bisect-out"
    bisect_args = ["bisect", "--repro", "gan", "--axis", "deepspeed", "--good", "0.16.0", "--bad", "0.19.8"]
    bisect_args += ["--all-transitions", "--envs", str(root / "bisect-cells"), "--out", str(bisect_out)]
    cold = _cli(bisect_args, "bisect", base, config_path)
    probes = len({p.parent.name for p in (bisect_out / "records").rglob("*.json")})
    echo(f"cold bisect --all-transitions 0.16.0-0.19.8: {cold:.0f} s, {probes} probes")
    two = two_probes = None
    if bisect_two is not None:
        start = time.perf_counter()
        two_probes = bisect_two(root / "bisect2-cells", root / "bisect2-out")
        two = time.perf_counter() - start
        echo(f"cold bisect --all-transitions 0.16.0-0.19.8, two probes at a time: {two:.0f} s, {two_probes} probes")
    repro = config.repro("gan")
    plain = ",".join(name for name, fix in repro.fixes.items() if fix.patch is None and not fix.override)
    timed = {}
    pins = [f"--{name}={version}" for name, version in cell.packages.items()]  # the bench's warm cell
    for jobs in (0, 1, 2):  # 0: an untimed first pass, so both timed ones find the cell and its op built
        args = ["matrix", "--repro", "gan", "--form", "cpu-deepspeed", "--fix", plain, "--jobs", str(max(jobs, 1))]
        args += ["--fresh", "--envs", str(root / "warm"), "--out", str(root / f"jobs{jobs}"), *pins]
        timed[jobs] = _cli(args, f"jobs{jobs}", base, config_path)
        if jobs:
            echo(f"gan cpu-deepspeed, {plain.count(',') + 1} fixes, --jobs {jobs}: {timed[jobs]:.0f} s")
    return dataclasses.replace(
        result,
        fresh_repro=fresh,
        cold_bisect=cold,
        bisect_probes=probes,
        jobs_one=timed[1],
        jobs_two=timed[2],
        bisect_two=two,
        bisect_two_probes=two_probes,
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
        bare.append(bare_run(spec, environ, root / "bare" / f"run{i}.log"))
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
        f"{'warm cell build (cached)':32}{result.harness_warm:>13.2f}s{_s(result.pip_warm):>16}"
        f"{ratio(result.pip_warm, result.harness_warm):>15}",
        f"{'warm harness vs pip, empty cache':32}{result.harness_warm:>13.2f}s{_s(result.pip_cold):>16}"
        f"{ratio(result.pip_cold, result.harness_warm):>15}",
        f"{'reuse of a built cell':32}{reuse:>13.3f}s",
        f"{'warm build, where it went':32}  {_steps(result.warm_steps)}",
        "",
        f"{'run of gan cpu-deepspeed none':32}{'harness':>14}{'bare python':>16}{'harness ÷ bare':>15}",
        f"{'median wall per run':32}{h_run:>13.2f}s{b_run:>15.2f}s{h_run / b_run:>14.3f}×",
        f"{'all runs (s)':32}{' '.join(f'{x:.2f}' for x in result.harness_runs):>14}  "
        f"{' '.join(f'{x:.2f}' for x in result.bare_runs)}",
        "",
        "goals: warm build ≤ 3 s and ≥ 10× faster than virtualenv+pip; reuse ≤ 0.5 s; harness ÷ bare ≤ 1.10",
    ]
    if result.fresh_repro is not None and result.jobs_one and result.jobs_two:
        lines += [
            "",
            f"{'workload (empty cells, warm package cache)':46}{'seconds':>10}{'goal':>10}",
            f"{'repro gan, its default cell (nox -s repro_gan)':46}{result.fresh_repro:>10.0f}{'≤ 180':>10}",
            f"{'bisect --all-transitions deepspeed 0.16.0-0.19.8':46}{result.cold_bisect or 0:>10.0f}{'≤ 300':>10}"
            f"   ({result.bisect_probes} probes, one at a time)",
            *(
                [
                    f"{'  the same, two probes at a time':46}{result.bisect_two:>10.0f}{'≤ 300':>10}"
                    f"   ({result.bisect_two_probes} probes)"
                ]
                if result.bisect_two is not None
                else []
            ),
            f"{'gan cpu-deepspeed plain fixes, --jobs 1':46}{result.jobs_one:>10.0f}",
            f"{'gan cpu-deepspeed plain fixes, --jobs 2':46}{result.jobs_two:>10.0f}"
            f"{'≥ 1.6×':>10}   (speed-up {result.jobs_one / result.jobs_two:.2f}×)",
        ]
    return "\n".join(lines)


def _steps(steps: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.2f} s" for name, seconds in steps.items()) or "-"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"
