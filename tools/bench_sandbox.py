"""Sandboxed against unconfined runs of one cell, interleaved (issue #15): what the sandbox costs a run.

Run from the checkout with the harness installed, naming the interpreter that has torch (the cells' base):
``.nox/tests/bin/python tools/bench_sandbox.py "$(command -v python3)"``. It builds or reuses the deepspeed
0.16.4 / lightning 2.6.6 cell under .test-cells/ and runs the GAN's cpu-deepspeed form with freeze-d.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.envs import ensure_env
from reprobisect.cells.pinning import resolve_cell
from reprobisect.config.load import load_config
from reprobisect.model.store import Store
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.run.sandbox import Confinement


def main(base_python: str, runs: int = 5) -> None:
    base = base_interpreter(base_python)
    cell = resolve_cell(base, {"torch": "system", "deepspeed": "0.16.4", "lightning": "2.6.6"})
    env = ensure_env(cell, base, Path(".test-cells"))
    repro = load_config(Path("matrix.yaml")).repro("gan")
    spec = RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["freeze-d"], env=env)
    box = Confinement().open()
    times: dict[str, list[float]] = {"sandboxed": [], "unconfined": []}
    with tempfile.TemporaryDirectory() as out:
        store = Store(Path(out))
        execute(spec, store, environ=os.environ)  # warm-up: the comm op is built
        for i in range(runs):  # interleaved: drift in the machine's load hits both alike
            for name, sandbox in (("sandboxed", box), ("unconfined", None)):
                start = time.perf_counter()
                record = execute(dataclasses.replace(spec, repeat=i, sandbox=sandbox), store, environ=os.environ)
                times[name].append(time.perf_counter() - start)
                if record.outcome != "PASS":
                    sys.exit(f"{name} run {i}: {record.outcome}")
    boxed, free = statistics.median(times["sandboxed"]), statistics.median(times["unconfined"])
    print(f"median wall per run: sandboxed {boxed:.2f} s, unconfined {free:.2f} s, ratio {boxed / free:.3f}")
    for name, values in times.items():
        print(f"  {name:11} {' '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else sys.executable)
