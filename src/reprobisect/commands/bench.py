"""``reprobisect bench``: what a cell costs to build (cold, warm, against virtualenv+pip) and what the harness
adds to each run, side by side."""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from reprobisect.bench.figures import BenchRequest, format_bench, run_bench
from reprobisect.bench.gpu import format_gpu_bench, run_gpu_bench
from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.cells.base import base_interpreter
from reprobisect.cells.envs import ensure_env
from reprobisect.cells.pinning import resolve_cell
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import JOBS, CommonOptions, Subparsers, add_common, prepare
from reprobisect.config.load import Config, load_config
from reprobisect.model.store import Store
from reprobisect.run.context import RunContext
from reprobisect.util.console import heartbeat

__all__ = ["BenchOptions", "run_from_args", "setup_arguments"]


RUNS = Flag.of("--runs", type=int, default=5)
NO_PIP = Flag.of("--no-pip", action="store_true", read=lambda skip: not skip)  # with_pip: not --no-pip
WORKLOADS = Flag.of("--workloads", action="store_true")
GPU = Flag.of("--gpu", action="store_true")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """``bench``'s command line, read once: what to measure and how often. Each option declared here once, as its
    field, in the order ``--help`` lists them (commands/declared.py)."""

    runs: int = option(RUNS, help="runs of the repro for the overhead ratio")
    with_pip: bool = option(NO_PIP, help="skip the virtualenv+pip comparison", dest="no_pip")  # --no-pip: False
    workloads: bool = option(
        WORKLOADS,
        help="also time a fresh repro gan, a cold all-transitions bisection and --jobs 1 vs 2 (about 20 minutes)",
    )
    gpu: bool = option(
        GPU,
        help="only the GPU rows: imports and CUDA init, the GAN's cuda form bare and through the harness, alone and "
        "--jobs at once, with the harness's phases (needs a GPU)",
    )  # only the GPU rows (bench/gpu.py)
    jobs: int = option(dataclasses.replace(JOBS, default=8), help="with --gpu: runs at once for the 'N at once' row")
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchOptions:
        """The command line as parsed."""
        return read_fields(cls, args)

    def request(self) -> BenchRequest:
        """What bench/figures.py measures, from these options."""
        return BenchRequest(
            runs=self.runs,
            with_pip=self.with_pip,
            workloads=self.workloads,
            pins=dict(self.common.pins),
            config_path=self.common.config,
        )


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``bench`` and its options (``BenchOptions``)."""
    parser = subparsers.add_parser("bench", help="cell build and run overhead figures, side by side")
    add_fields(parser, BenchOptions)
    parser.set_defaults(run=run_from_args)


def _bisect_two(config: Config, ctx: RunContext) -> Callable[[Path, Path], int]:
    """The workloads' cold bisection with two probes at a time (what ``bisect --jobs 2`` runs), in the environment
    a command gets: no moved cells or caches."""
    moved = ("REPROBISECT_ENVS", "REPROBISECT_OP_CACHE", "REPROBISECT_WHEEL_CACHE")
    environ = {k: v for k, v in ctx.environ.items() if k not in moved}

    def bisect(envs_dir: Path, out: Path) -> int:
        request = BisectRequest(
            repro="gan", axis="deepspeed", good="0.16.0", bad="0.19.8", all_transitions=True, jobs=2
        )
        here = dataclasses.replace(ctx, store=Store(out), envs_dir=envs_dir, environ=environ)
        result, _, _ = run_bisect(config, request, here.quiet())
        return len(result.probes)

    return bisect


def _gpu_rows(options: BenchOptions, config: Config, ctx: RunContext) -> int:
    """``--gpu``: the GPU rows alone, in the default cell (or the pinned one) under ``--envs``."""
    common = options.common
    phase = ["resolving and building the cell"]

    def say(what: str) -> None:
        phase[0] = what
        print(f"bench --gpu: {what}", flush=True)

    with heartbeat(lambda line: print(line, flush=True), lambda: f"bench --gpu: {phase[0]}"):
        env = ensure_env(resolve_cell(ctx.base, {**config.default_cell, **common.pins}), ctx.base, common.envs)
        with tempfile.TemporaryDirectory(prefix="reprobisect-bench-gpu-") as tmp:
            bench = run_gpu_bench(config, env, Path(tmp), ctx, runs=options.runs, jobs=max(1, options.jobs), say=say)
    print()
    print(format_gpu_bench(bench))
    return 0


def run_from_args(args: argparse.Namespace) -> int:
    """Measure and print the figures."""
    options = BenchOptions.from_args(args)
    common = options.common
    prepare(common)
    config = load_config(common.config)
    # the figures are a user's runs' (this process's environment, without --profile's clock), on no engine
    ctx = RunContext(
        base=base_interpreter(common.base_python), store=Store(common.out), envs_dir=common.envs, environ=os.environ
    )
    if options.gpu:
        return _gpu_rows(options, config, ctx)
    result = run_bench(config, options.request(), ctx, bisect_two=_bisect_two(config, ctx))
    print()
    print(format_bench(result))
    return 0
