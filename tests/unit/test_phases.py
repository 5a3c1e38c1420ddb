"""Where a run's time went (--profile): the harness's instants, the run's claimed ones, and what is believed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from reprobisect.run.events import read_events
from reprobisect.run.one_run import BOOTSTRAP
from reprobisect.run.phases import ChildClock, HarnessClock, describe_phases, run_phases

T0 = 1_800_000_000.0
OUTSIDE = HarnessClock(began=T0, spawned=T0 + 0.05, exited=T0 + 10.0, recorded=T0 + 10.2)


def _inside(**changes: float) -> ChildClock:
    fields = {
        "started": T0 + 0.3,
        "script_started": T0 + 0.35,
        "script_ended": T0 + 9.0,
        "reported": T0 + 9.6,
        "imports": 5.0,
        "cuda_init": 1.0,
        "atexit": 0.1,
        "report": 0.5,
    }
    return ChildClock(**{**fields, **changes})


def test_the_phases_add_up_to_the_harness_s_own_wall_time() -> None:
    phases = run_phases(OUTSIDE, _inside(), [{"name": "fused_adam", "seconds": 1.5}])
    assert list(phases) == [
        "prepare", "start", "bootstrap", "imports", "cuda_init", "ops", "script", "atexit", "report", "teardown", "record"
    ]  # fmt: skip
    assert phases["start"] == 0.25 and phases["ops"] == 1.5 and phases["teardown"] == 0.4
    assert phases["script"] == round(8.65 - 5.0 - 1.0 - 1.5, 3)
    assert abs(sum(phases.values()) - (OUTSIDE.recorded - OUTSIDE.began)) < 0.01 + 0.005 * len(phases)
    assert describe_phases(phases).endswith("= 10.2 s")


def test_a_claim_outside_the_harness_s_instants_is_not_believed() -> None:
    for forged in (
        _inside(started=T0 - 100),  # before the run was started
        _inside(reported=T0 + 50),  # after it ended
        _inside(imports=1000.0),  # more than the script's own time
        _inside(script_ended=T0 + 0.2),  # out of order
    ):
        phases = run_phases(OUTSIDE, forged)
        assert set(phases) == {"prepare", "run", "record"}
        assert phases["run"] == round(OUTSIDE.exited - OUTSIDE.spawned, 3)


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.lists(st.integers())
)


@given(st.dictionaries(st.sampled_from(["started", "script_started", "script_ended", "reported", "imports",
                                        "cuda_init", "atexit", "report", "x"]), _VALUES))  # fmt: skip
def test_any_profile_event_is_either_a_clock_of_numbers_or_ignored(fields: dict[str, object]) -> None:
    events = read_events("@@repro " + json.dumps({"event": "profile", **fields}))
    if events.clock is None:
        assert events.ignored == 1
        return
    for value in vars(events.clock).values():
        assert isinstance(value, float) and value >= 0
    phases = run_phases(OUTSIDE, events.clock)  # whatever it claims, the phases stay finite and non-negative
    assert all(0 <= seconds < 1e12 for seconds in phases.values())


def test_the_bootstrap_times_a_real_run_s_imports_and_script(tmp_path: Path) -> None:
    script = tmp_path / "issue.py"
    script.write_text("import json, time\ntime.sleep(0.3)\nprint(json.dumps([1]))\n")
    env = {**os.environ, "REPROBISECT_PROFILE": "1"}
    env.pop("REPROBISECT_OP_CACHE", None)
    done = subprocess.run(
        [sys.executable, str(BOOTSTRAP), str(script)], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    clock = read_events(done.stdout).clock
    assert clock is not None
    assert clock.started <= clock.script_started <= clock.script_ended <= clock.reported
    assert clock.script_ended - clock.script_started >= 0.3 > clock.imports
    assert clock.cuda_init == 0.0


def test_without_the_switch_the_bootstrap_prints_no_profile(tmp_path: Path) -> None:
    script = tmp_path / "issue.py"
    script.write_text("print('hi')\n")
    env = {k: v for k, v in os.environ.items() if k != "REPROBISECT_PROFILE"}
    done = subprocess.run(
        [sys.executable, str(BOOTSTRAP), str(script)], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert '"event": "profile"' not in done.stdout and read_events(done.stdout).clock is None


def test_the_gpu_bench_rows_give_the_ratios_the_goals_are_stated_in() -> None:
    from reprobisect.bench.gpu import GpuBench, format_gpu_bench

    bench = GpuBench(
        what="gan cuda none in torch-2.11.0_deepspeed-0.19.8",
        jobs=8,
        imports={"torch": 4.4, "deepspeed": 11.3, "cuda_init": 0.1},
        imports_in_runs={"torch": 1.3, "deepspeed": 5.1, "cuda_init": 0.1},
        bytecode="torch ship none: 1399 modules compiled in 2.7 s",
        bare_alone=[21.0, 22.0, 23.0],
        harness_alone=[25.0, 24.0, 26.0],
        bare_together=[21.9] * 8,
        harness_together=[23.0] * 7 + [24.1],
        phases={"start": 0.15, "imports": 18.7, "report": 0.004},
    )
    text = format_gpu_bench(bench)
    assert "1.14×" in text  # 25 / 22, the medians
    assert "1.10×" in text  # 24.1 / 21.9, the last to finish of each
    assert "imports 18.70" in text and "report" not in text.splitlines()[-1]  # under a hundredth: not shown
    assert "torch 4.40 · deepspeed 11.30" in text and "torch 1.30 · deepspeed 5.10" in text
    assert "1399 modules compiled" in text
