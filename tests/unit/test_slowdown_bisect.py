"""A timing search (``bisect --slower-than``) over fake matrix runs: the slower release found, repeats added only
while a version's interval straddles the threshold, an ambiguous version skipped and listed, runs that did not run
alike said, and the report's timing picture."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.bisect import probes
from reprobisect.bisect.timed import timed_slots
from reprobisect.commands import bisect as command
from reprobisect.config.load import load_config
from reprobisect.errors import BisectInconclusiveError, ConfigError
from reprobisect.model.bisect_report import BisectReport, SeenState
from reprobisect.model.fairness import UNSAID, busy, how_it_ran, unlike
from reprobisect.model.record import StepTime
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.model.store import Store
from reprobisect.report.timing_view import timing_lines, timing_search
from reprobisect.run.context import RunContext
from reprobisect.run.resources import run_resources
from tests.bisect_reports import report_of

ROOT = Path(__file__).resolve().parents[2]
RELEASES = [f"0.18.{i}" for i in range(3, 10)]
NOISY = 1.10  # a version this much slower has runs far apart: its interval straddles the limit
ALIKE = {"pinned_cores": 0, "allowed_cores": 2, "omp_threads": "1", "jobs": 1, "gpus_visible": "all", "cpu_model": "X"}


def _fake_records(speed: dict[str, float], requests: list[Any], resources: dict[str, Any] | None = None) -> Any:
    """A run_matrix whose runs have 30 steps around ``speed[version]`` × 10 ms (3 % run-to-run, 2 % step noise; a
    ``NOISY`` version's runs 0.8 to 1.4 times its level)."""

    def fake_matrix(config: Any, request: Any, ctx: Any, **kwargs: Any) -> list[Any]:
        requests.append(request)
        out = []
        for version in request.axes["deepspeed"]:
            for repeat in range(request.repeat):
                rng = random.Random(f"{version}-{repeat}")
                level = 0.010 * speed.get(version, 1.0) * rng.gauss(1, 0.03)
                if speed.get(version) == NOISY:  # runs far apart, around the limit
                    level = 0.010 * NOISY * (0.8, 1.4, 1.0, 0.85, 1.3, 1.1)[repeat % 6]
                steps = [StepTime(step=i, seconds=level * rng.gauss(1, 0.02), ok=True) for i in range(30)]
                out.append(
                    types.SimpleNamespace(
                        outcome="PASS",
                        signature=None,
                        cell={"packages": {"deepspeed": version}},
                        steps=steps,
                        config={"resources": (resources or {}).get(version, ALIKE)},
                        gpu=None,
                        nproc=1,
                        sandbox="none",
                    )
                )
        return out

    return fake_matrix


def _bisect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, speed: dict[str, float], **changes: Any
) -> tuple[Any, BisectReport, list[Any]]:
    monkeypatch.setattr(probes, "releases_between", lambda *a, **k: RELEASES)
    requests: list[Any] = []
    monkeypatch.setattr(probes, "run_matrix", _fake_records(speed, requests, changes.pop("resources", None)))
    request = probes.BisectRequest(
        repro="gan",
        axis="deepspeed",
        good=RELEASES[0],
        bad=RELEASES[-1],
        backend=changes.pop("backend", "cpu"),
        slowdown=changes.pop("rule", SlowdownRule(threshold=0.10)),
        **changes,
    )
    ctx = RunContext(
        base=types.SimpleNamespace(executable="python3", torch="2.13.0"),
        store=Store(tmp_path / "out"),
        envs_dir=tmp_path / "cells",
        environ={},
        echo=lambda _: None,
    )
    result, report, _ = probes.run_bisect(load_config(ROOT / "matrix.yaml"), request, ctx)
    return result, report, requests


SLOW_FROM_5 = {"0.18.5": 3.0, "0.18.6": 3.0, "0.18.7": 3.0, "0.18.8": 3.0, "0.18.9": 3.0}


def test_the_first_slower_release_is_found_with_three_runs_each(monkeypatch, tmp_path) -> None:
    result, report, requests = _bisect(monkeypatch, tmp_path, SLOW_FROM_5)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.18.4", "0.18.5") and t.after.slower and not t.before.slower
    assert {r.repeat for r in requests} == {3}  # every verdict clear at the minimum: no extra runs
    assert all(r.jobs == 1 for r in requests)
    assert report.timing is not None and not report.timing.unlike and report.timing.slowdown["threshold_percent"] == 10
    slower = next(p.state.timing for p in report.probes if p.version == "0.18.5")
    assert slower is not None and slower["verdict"] == "slower" and slower["ratio"] == pytest.approx(3.0, rel=0.05)


def test_a_slowdown_that_came_and_went_gives_both_transitions(monkeypatch, tmp_path) -> None:
    result, _, _ = _bisect(monkeypatch, tmp_path, {"0.18.5": 3.0, "0.18.6": 3.0}, all_transitions=True)
    assert [(t.last, t.first) for t in result.transitions] == [("0.18.4", "0.18.5"), ("0.18.6", "0.18.7")]


def test_compared_with_the_bad_end_the_search_finds_where_a_slowdown_went(monkeypatch, tmp_path) -> None:
    speed = {"0.18.3": 3.0, "0.18.4": 3.0, "0.18.5": 3.0, "0.18.6": 3.0}  # slow up to 0.18.6, mended in 0.18.7
    result, report, _ = _bisect(monkeypatch, tmp_path, speed, compare_with="bad")
    [t] = result.transitions
    assert (t.last, t.first) == ("0.18.6", "0.18.7") and t.before.slower and t.after.slower is False
    assert report.timing is not None and report.timing.reference == "0.18.9"
    assert report.target is not None and report.target.startswith("step no longer slower")


def test_a_version_at_the_threshold_is_repeated_then_skipped_and_listed(monkeypatch, tmp_path) -> None:
    speed = {**SLOW_FROM_5, "0.18.6": NOISY}  # the middle probe sits on the limit, in much noise
    rule = SlowdownRule(threshold=0.10, max_repeats=5)
    result, report, requests = _bisect(monkeypatch, tmp_path, speed, rule=rule)
    [skip] = [s for s in report.skipped if s.version == "0.18.6"]
    assert skip.why.startswith("ambiguous:") and "straddles" in skip.why
    asked = [r.repeat for r in requests if r.axes["deepspeed"] == ("0.18.6",)]
    assert asked == [3, 4, 5]  # one more run a round, up to the budget
    reference = [r.repeat for r in requests if r.axes["deepspeed"] == ("0.18.3",)]
    assert max(reference) == 5  # the good end repeated beside it
    [t] = result.transitions
    assert (t.last, t.first) == ("0.18.4", "0.18.5")


def test_runs_that_did_not_run_alike_are_said(monkeypatch, tmp_path) -> None:
    other = {**ALIKE, "jobs": 4}
    _, report, _ = _bisect(monkeypatch, tmp_path, SLOW_FROM_5, resources={"0.18.9": other})
    assert report.timing is not None and report.timing.unlike == ("jobs: 1 (12 runs), 4 (3 runs)",)
    assert report.to_json()["comparable"] is False
    lines = timing_lines(report)
    assert any("NOT COMPARABLE" in line for line in lines) and any("jobs: 1 (12 runs)" in line for line in lines)


def test_a_good_end_that_times_nothing_stops_the_search_by_name(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(probes, "releases_between", lambda *a, **k: RELEASES)
    monkeypatch.setattr(
        probes,
        "run_matrix",
        lambda config, request, ctx, **kw: (
            [types.SimpleNamespace(outcome="PASS", signature=None, cell={}, steps=[], config={}, gpu=None, nproc=1)]
            * request.repeat
        ),
    )
    request = probes.BisectRequest(
        repro="gan", axis="deepspeed", good="0.18.3", bad="0.18.9", backend="cpu", slowdown=SlowdownRule(threshold=0.1)
    )
    ctx = RunContext(
        base=types.SimpleNamespace(executable="python3", torch="2.13.0"),
        store=Store(tmp_path / "out"),
        envs_dir=tmp_path / "cells",
        environ={},
        echo=lambda _: None,
    )
    with pytest.raises(BisectInconclusiveError, match=r"0\.18\.3 cannot be the reference of a timing search"):
        probes.run_bisect(load_config(ROOT / "matrix.yaml"), request, ctx)


def test_the_timing_picture_lists_every_probe_in_version_order(monkeypatch, tmp_path) -> None:
    _, report, _ = _bisect(monkeypatch, tmp_path, SLOW_FROM_5)
    search = timing_search(BisectReport.from_json(json.loads(json.dumps(report.to_json())), where="bisect.json"))
    assert search is not None and search.limit == pytest.approx(1.1)
    versions = [row.version for row in search.rows]
    assert versions == sorted(versions, key=RELEASES.index)
    good = search.rows[0]
    assert good.verdict == "not slower" and good.value is not None and good.value_low is not None


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--slower-than", "10", "--jobs", "2", "--backend", "cpu"], "one run at a time"),
        (["--slower-than", "10", "--any-failure"], "contradicts --signature, --any-failure"),
        # --slower-than 0 and --min-repeats 1 are refused by the parser itself (tests/unit/test_bounds.py)
        (["--slower-than", "10", "--min-repeats", "5", "--max-repeats", "3"], "at least 2 runs"),
    ],
)
def test_a_timing_search_that_cannot_work_is_refused_before_anything_runs(
    extra: list[str], words: str, monkeypatch, capsys
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing may run")

    monkeypatch.setattr("reprobisect.commands.bisect.run_bisect", refuse)
    parser = argparse.ArgumentParser()
    command.setup_arguments(parser.add_subparsers())
    args = parser.parse_args(["bisect", "--repro", "gan", "--good", "0.18.3", "--bad", "0.18.9", *extra])
    with pytest.raises(ConfigError, match=words):
        command._request(command.BisectOptions.from_args(args), "gan")


def test_a_record_says_how_its_run_was_given_the_machine() -> None:
    given = run_resources((3,), {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "2"}, jobs=4)
    assert given["pinned_cores"] == 1 and given["omp_threads"] == "1" and given["jobs"] == 4
    assert given["gpus_visible"] == 1 and given["cpu_model"]
    assert isinstance(given["load_1m"], float)
    loaded = types.SimpleNamespace(config={"resources": {"load_1m": 9.6, "allowed_cores": 2}})
    calm = types.SimpleNamespace(config={"resources": {"load_1m": 0.5, "allowed_cores": 2}})
    assert busy([loaded, calm, calm]) == "1 of 3 runs ended with the machine's load above its cores (up to 9.6 on 2)"
    assert busy([calm]) is None and busy([types.SimpleNamespace(config={"resources": "x"})]) is None
    older = types.SimpleNamespace(config={}, gpu=None, nproc=1, sandbox="none")
    assert how_it_ran(older)["jobs"] == UNSAID  # written before records said it: not a guess
    assert unlike([older, older]) == []


_TIMED = {
    "slowdown": {"metric": "step", "threshold_percent": 10},
    "reference": {"version": "0.18.3", "runs": 3},
    "unlike": [],
    "busy": None,
    "claims_refused": [],
    "target": "step slower than 0.18.3 by more than 10%",
}


@pytest.mark.parametrize(
    "timing",
    [
        {"verdict": "slower", "ratio": "NaN", "low": None, "runs": True},
        {"verdict": "<script>", "ratio": float("inf"), "runs": -3},
        {},
    ],
)
def test_a_malformed_timing_in_a_merged_file_shows_as_unmeasured(timing: dict[str, Any]) -> None:
    probe = {"version": "0.18.5", "outcome": "PASS", "signature_id": None, "signature": None, "timing": timing}
    search = timing_search(report_of({**_TIMED, "probes": [probe]}))
    assert search is not None
    [row] = search.rows
    assert row.ratio is None and row.runs == 0 and row.verdict in ("slower", "unmeasured")


@pytest.mark.parametrize(
    ("probe", "key"),
    [
        ({"version": "0.18.5", "outcome": "PASS", "timing": ["not", "a", "dict"]}, "'timing'"),
        ({"version": "0.18.5"}, "'outcome'"),
        ({"version": 5, "outcome": "PASS"}, "'version'"),
        ({"version": "0.18.5", "outcome": "PASS", "slower": "yes", "timing": {}}, "'slower'"),
    ],
)
def test_a_merged_file_whose_probe_is_no_probe_is_refused_by_key(probe: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=rf"bisect-test.json: probes\[0\] {key} is"):
        report_of({**_TIMED, "probes": [probe]})


def test_a_slowdown_that_came_or_went_is_searched_by_commit_and_its_rerun_line_is_a_timing_search(tmp_path) -> None:
    from reprobisect.bisect import culprits

    came = (SeenState(outcome="PASS", slower=False), SeenState(outcome="PASS", slower=True))
    assert culprits.timing_kind(*came) == "introduced" and culprits.timing_kind(*reversed(came)) == "fixed"
    request = probes.BisectRequest(
        repro="gan", axis="deepspeed", good="v0.18.4", bad="v0.18.5", slowdown=SlowdownRule(threshold=0.5)
    )
    search = culprits._Search(
        config=None,  # type: ignore[arg-type]
        request=request,
        clone=tmp_path,
        slug=None,
        ctx=None,  # type: ignore[arg-type]
        source=["--script", "s.py", "--", "--steps", "20"],
    )
    line = culprits._rerun(search, request)
    assert "--slower-than 50 --metric step --min-repeats 3 --max-repeats 10" in line
    assert "--target-outcome" not in line and line.endswith("-- --steps 20") and "--compare-with" not in line
    went = culprits._rerun(search, dataclasses.replace(request, compare_with="bad"))
    assert "--max-repeats 10 --compare-with bad" in went


def test_fresh_reruns_a_version_once_not_at_every_extra_repeat(monkeypatch, tmp_path) -> None:
    speed = {**SLOW_FROM_5, "0.18.6": NOISY}
    _, report, requests = _bisect(
        monkeypatch, tmp_path, speed, rule=SlowdownRule(threshold=0.1, max_repeats=5), fresh=True
    )
    asked = [(r.axes["deepspeed"], r.repeat, r.fresh) for r in requests if r.axes["deepspeed"] == ("0.18.6",)]
    assert asked == [(("0.18.6",), 3, True), (("0.18.6",), 4, False), (("0.18.6",), 5, False)]
    assert report.timing is not None and (report.timing.reference, report.timing.reference_runs) == ("0.18.3", 5)


@settings(max_examples=25, deadline=None)
@given(levels=st.lists(st.floats(min_value=0.5, max_value=3.0), min_size=1, max_size=4), spread=st.floats(0, 0.5))
def test_no_version_is_run_beyond_the_budget_and_the_good_end_never_slower(levels: list[float], spread: float) -> None:
    """Whatever the speeds and the noise, a probe stops at max_repeats a side, and the good end is not slower."""
    from reprobisect.bisect.timed import TimedProbes

    rule = SlowdownRule(threshold=0.1, min_repeats=2, max_repeats=4, resamples=200)
    versions = ["good", *(f"v{i}" for i in range(len(levels)))]
    speed = dict(zip(versions, [1.0, *levels], strict=True))
    asked: dict[str, int] = {}

    def run(version: str, repeats: int) -> list[Any]:
        asked[version] = max(asked.get(version, 0), repeats)
        rng = random.Random(f"{version}{spread}")
        return [
            types.SimpleNamespace(
                outcome="PASS",
                steps=[
                    StepTime(step=i, seconds=0.01 * speed[version] * rng.uniform(1 - spread, 1 + spread), ok=True)
                    for i in range(12)
                ],
                config={},
                gpu=None,
                nproc=1,
                sandbox="none",
            )
            for _ in range(repeats)
        ]

    timed = TimedProbes(rule, "good", run, lambda v, records: probes.ProbeResult(version=v, outcome="PASS"))
    results = [timed.probe(v) for v in versions]
    assert results[0].slower is False
    assert all(count <= rule.max_repeats for count in asked.values())


@pytest.mark.parametrize(
    ("jobs", "backend", "gpus", "slots", "words"),
    [
        (1, "cuda", 8, 1, ""),
        (4, "cpu", 0, 1, "on the CPU, runs side by side share caches"),
        (4, "cuda", 1, 1, "1 GPU here"),
        (4, "cuda", 0, 1, "0 GPUs here"),
        (4, "cuda", 8, 4, "4 at a time, each on a GPU and cores of its own"),
        (8, "cuda", 2, 2, "2 at a time, each on a GPU and cores of its own (--jobs 8, 2 GPUs)"),
    ],
)
def test_a_versions_timed_runs_go_side_by_side_only_one_per_gpu(jobs, backend, gpus, slots, words) -> None:
    assert timed_slots(jobs, backend, gpus) == (slots, timed_slots(jobs, backend, gpus)[1])
    found, why = timed_slots(jobs, backend, gpus)
    assert found == slots and words in why and (why == "") == (words == "")


@given(jobs=st.integers(1, 300), gpus=st.integers(0, 64), backend=st.sampled_from(["cpu", "cuda"]))
def test_never_more_timed_runs_at_once_than_gpus_nor_than_jobs(jobs: int, gpus: int, backend: str) -> None:
    slots, _ = timed_slots(jobs, backend, gpus)
    assert 1 <= slots <= jobs
    assert slots == 1 or (backend == "cuda" and slots <= gpus)


def test_on_four_gpus_a_versions_runs_go_four_at_a_time_and_stay_comparable(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(probes, "gpu_count", lambda: 4)
    four = {**ALIKE, "jobs": 4, "gpus_visible": 1}
    rule = SlowdownRule(threshold=0.10, min_repeats=3, max_repeats=12)
    noisy = {"0.18.5": NOISY, "0.18.6": 3.0, "0.18.7": 3.0, "0.18.8": 3.0, "0.18.9": 3.0}
    _, report, requests = _bisect(
        monkeypatch,
        tmp_path,
        noisy,
        jobs=4,
        rule=rule,
        resources=dict.fromkeys(RELEASES, four),
        backend="cuda",
        all_transitions=True,
        probe_all_up_to=len(RELEASES),
    )
    assert {r.jobs for r in requests} == {4}  # every matrix run of the search: one run per GPU, 4 at a time
    asked = sorted({r.repeat for r in requests})
    assert asked[0] == 3 and all(b - a == 4 or b == 12 for a, b in itertools.pairwise(asked))  # four more at once
    assert report.timing is not None and not report.timing.unlike


def test_on_the_cpu_jobs_leave_a_timing_search_one_run_at_a_time_and_say_why(monkeypatch, tmp_path) -> None:
    said: list[str] = []
    monkeypatch.setattr(probes, "gpu_count", lambda: 8)
    monkeypatch.setattr(probes, "releases_between", lambda *a, **k: RELEASES)
    requests: list[Any] = []
    monkeypatch.setattr(probes, "run_matrix", _fake_records(SLOW_FROM_5, requests))
    request = probes.BisectRequest(
        repro="gan",
        axis="deepspeed",
        good=RELEASES[0],
        bad=RELEASES[-1],
        backend="cpu",
        jobs=4,
        slowdown=SlowdownRule(threshold=0.10),
    )
    ctx = RunContext(
        base=types.SimpleNamespace(executable="python3", torch="2.13.0"),
        store=Store(tmp_path / "out"),
        envs_dir=tmp_path / "cells",
        environ={},
        echo=said.append,
    )
    probes.run_bisect(load_config(ROOT / "matrix.yaml"), request, ctx)
    assert {r.jobs for r in requests} == {1}
    assert any("--jobs 4: a timing search runs one run at a time here (on the CPU" in line for line in said)


@pytest.mark.parametrize(
    ("jobs", "backend", "gpus", "expected"), [(4, "cuda", 2, 2), (4, "cpu", 8, 1), (1, "cuda", 8, 1)]
)
def test_a_triage_sweep_beside_a_timing_search_runs_as_the_search_will(
    monkeypatch, tmp_path, jobs, backend, gpus, expected
):
    monkeypatch.setattr(probes, "gpu_count", lambda: gpus)
    ctx = RunContext(
        base=types.SimpleNamespace(executable="python3", torch="2.13.0"),
        store=Store(tmp_path / "out"),
        envs_dir=tmp_path / "cells",
        environ={},
        echo=lambda _: None,
    )
    assert probes.timing_jobs(jobs, backend, ctx) == expected
