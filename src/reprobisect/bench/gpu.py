"""The GPU rows of ``reprobisect bench --gpu``: what a GPU run costs, and how much of it is the harness's (#41).

Every GPU answer (a sweep, a culprit search, a minimization, a night) is a multiple of one run's cost, so the bench
keeps it in view, side by side in one cell of this machine: (a) ``import torch, deepspeed`` and the CUDA
initialisation in the cell's interpreter, as a user's interpreter pays them and as the harness's runs do (with
the byte code it compiled once where the cell's packages ship none, ``run/bytecode.py``); (b) the repro's cuda
form as a bare ``python script``, alone and N at once; (c) the same through the harness (sandboxed, pinned from
the first step as a cuda run is by default), alone and N at once, with the phases of its runs (``--profile``'s
clock) so a regression says where it came from. The goals: the harness at most 1.3× the bare script, alone and N
at once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from reprobisect.bench.figures import bare_run
from reprobisect.cells.envs import CellEnv
from reprobisect.config.load import Config
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.run.bytecode import PREFIX_ENV, BytecodeFill, fill_bytecode, prefix_environ, script_modules
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_units import job_cpus
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.run.phases import PROFILE_ENV
from reprobisect.run.sandbox import Confinement
from reprobisect.util.cmd import run_tool
from reprobisect.util.stop import in_parallel

__all__ = ["GpuBench", "format_gpu_bench", "run_gpu_bench"]

_IMPORTS = (
    "import json, time; t = time.perf_counter(); import torch; a = time.perf_counter(); import deepspeed; "
    "b = time.perf_counter(); torch.zeros(1, device='cuda'); torch.cuda.synchronize(); c = time.perf_counter(); "
    "print(json.dumps({'torch': a - t, 'deepspeed': b - a, 'cuda_init': c - b}))"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuBench:
    """Seconds: the imports, and the wall time of each bare and harness run, alone and ``jobs`` at once."""

    what: str
    jobs: int
    imports: Mapping[str, float]  # as a user's interpreter pays them
    imports_in_runs: Mapping[str, float]  # with the byte code the harness compiled ahead, if any
    bytecode: str  # what compiling it ahead did
    bare_alone: list[float]
    harness_alone: list[float]
    bare_together: list[float]
    harness_together: list[float]
    phases: Mapping[str, float]  # the median of each phase over the harness's runs alone


def _imports(env: CellEnv, environ: Mapping[str, str]) -> dict[str, float]:
    done = run_tool([env.python, "-c", _IMPORTS], what="bench: imports", timeout=600, env=dict(environ))
    return {name: float(seconds) for name, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def run_gpu_bench(
    config: Config,
    env: CellEnv,
    root: Path,
    ctx: RunContext,
    *,
    runs: int,
    jobs: int,
    say: Callable[[str], None] = lambda phase: None,
) -> GpuBench:
    """Measure (a), (b) and (c) in ``env`` for the GAN's cuda form (fix none), from ``ctx``'s environment; bare and
    harness runs interleaved, so drift in the machine hits both alike. ``say`` hears each phase as it starts (the
    command's heartbeat repeats the last one: on an H100 the bench was silent for 240 s)."""
    environ = ctx.environ
    repro = config.repro("gan")
    profiled = {**environ, PROFILE_ENV: "1"}
    spec = RunSpec(
        repro=repro, form=repro.forms["cuda"], fix=repro.fixes["none"], env=env, sandbox=Confinement().open()
    )
    store, bare_logs = Store(root / "reports"), root / "bare"
    bare_logs.mkdir(parents=True, exist_ok=True)
    say("compiling the byte code the cell's packages lack")
    filled = fill_bytecode(env, script_modules([spec.script.read_text()]), spec.form.env, environ, ctx.envs_dir)
    say("timing import torch, deepspeed and the CUDA initialisation")
    imports = _imports(env, {k: v for k, v in environ.items() if k != PREFIX_ENV})
    imports_in_runs = _imports(env, {**environ, **prefix_environ(env)})
    cpus = job_cpus(0, 1, 1, sorted(os.sched_getaffinity(0)))
    harness_alone, bare_alone, records = [], [], []
    for i in range(runs):
        say(f"run {i + 1} of {runs} alone, through the harness and bare")
        start = time.perf_counter()
        records.append(execute(dataclasses.replace(spec, repeat=i, cpus=cpus), store, environ=profiled))
        harness_alone.append(time.perf_counter() - start)
        bare_alone.append(bare_run(spec, environ, bare_logs / f"alone-{i}.log"))

    def together_harness(slot: int) -> float:
        allowed = sorted(os.sched_getaffinity(0))
        one = dataclasses.replace(spec, repeat=runs + slot, cpus=job_cpus(slot, jobs, 1, allowed))
        start = time.perf_counter()
        execute(one, store, environ=profiled)
        return time.perf_counter() - start

    say(f"{jobs} runs at once through the harness, then {jobs} bare")
    harness_together = in_parallel(together_harness, list(range(jobs)), jobs)
    bare_together = in_parallel(
        lambda slot: bare_run(spec, environ, bare_logs / f"together-{slot}.log"), list(range(jobs)), jobs
    )
    return GpuBench(
        what=f"{repro.name} cuda none in {env.cell.id}",
        jobs=jobs,
        imports=imports,
        imports_in_runs=imports_in_runs,
        bytecode=_said(filled),
        bare_alone=bare_alone,
        harness_alone=harness_alone,
        bare_together=bare_together,
        harness_together=harness_together,
        phases=_phases(records),
    )


def _phases(records: list[Record]) -> dict[str, float]:
    """The median of each phase over the harness's runs (``--profile``'s clock)."""
    profiles = [r.config.get("profile", {}) for r in records]
    names = list(profiles[0]) if profiles else []
    return {name: statistics.median(p.get(name, 0.0) for p in profiles) for name in names}


def _said(filled: BytecodeFill | None) -> str:
    """What compiling the byte code ahead did, in a few words."""
    if filled is None:
        return "not checked (REPROBISECT_BYTECODE_CACHE=off)"
    if filled.failure is not None:
        return f"failed: {filled.failure}"
    if filled.reused:
        return "checked before (the cell's note)"
    if not filled.lacking:
        return "the packages ship their own"
    return f"{', '.join(filled.lacking)} ship none: {filled.loaded} modules compiled in {filled.seconds:.1f} s"


def format_gpu_bench(bench: GpuBench) -> str:
    """The rows, with the ratios the goals are stated in."""
    alone = statistics.median(bench.harness_alone) / statistics.median(bench.bare_alone)
    together = max(bench.harness_together) / max(bench.bare_together)
    imports = " · ".join(f"{name} {seconds:.2f}" for name, seconds in bench.imports.items())
    in_runs = " · ".join(f"{name} {seconds:.2f}" for name, seconds in bench.imports_in_runs.items())
    return "\n".join(
        [
            f"GPU: {bench.what}",
            f"{'':34}{'harness':>12}{'bare python':>14}{'harness ÷ bare':>16}{'goal':>8}",
            f"{'one run (median wall)':34}{statistics.median(bench.harness_alone):>11.1f}s"
            f"{statistics.median(bench.bare_alone):>13.1f}s{alone:>15.2f}×{'≤ 1.3':>8}",
            f"{f'{bench.jobs} at once (last to finish)':34}{max(bench.harness_together):>11.1f}s"
            f"{max(bench.bare_together):>13.1f}s{together:>15.2f}×{'≤ 1.3':>8}",
            f"{'imports and CUDA init (s)':34}  {imports}",
            f"{'the same in the runs (s)':34}  {in_runs}",
            f"{'byte code compiled ahead':34}  {bench.bytecode}",
            f"{'a harness run, where it went (s)':34}  "
            + " · ".join(f"{name} {seconds:.2f}" for name, seconds in bench.phases.items() if seconds >= 0.01),
        ]
    )
