"""The search on planted histories with a fake probe (the asv test_find idea)."""

from __future__ import annotations

import pytest

from reprobisect.bisect.search import ProbeResult, all_transitions, first_bad
from reprobisect.errors import BisectInconclusiveError

VERSIONS = [f"0.{i}.0" for i in range(16)]


def planted(states: dict[int, tuple[str, str | None]], default=("PASS", None), flaky=()):
    """A probe over VERSIONS: states[i] from index i on (until the next key); counts calls."""
    calls: list[str] = []

    def probe(version: str) -> ProbeResult:
        calls.append(version)
        index = VERSIONS.index(version)
        keys = [k for k in sorted(states) if k <= index]
        outcome, sig = states[keys[-1]] if keys else default
        return ProbeResult(version=version, outcome=outcome, signature_id=sig, signature=sig, flaky=index in flaky)

    return probe, calls


BUG = ("REPRODUCED", "36b244a365")


def is_bug(p: ProbeResult) -> bool:
    return p.signature_id == BUG[1]


def test_first_bad_finds_the_adjacent_pair_in_log2_probes() -> None:
    probe, calls = planted({0: ("PASS", None), 9: BUG})
    result = first_bad(VERSIONS, probe, is_bug)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.8.0", "0.9.0")
    assert len(calls) == len(set(calls)) <= 2 + 4


def test_skips_move_to_a_neighbour_and_are_listed() -> None:
    probe, _ = planted({0: ("PASS", None), 7: ("ENV_ERROR", "x"), 8: ("TIMEOUT", None), 9: BUG})
    result = first_bad(VERSIONS, probe, is_bug)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.6.0", "0.9.0")
    assert t.skipped_between == ("0.7.0", "0.8.0")
    assert {p.version for p in result.skipped} == {"0.7.0", "0.8.0"}


def test_skipped_ends_are_replaced_by_their_neighbours() -> None:
    probe, _ = planted({0: ("ENV_ERROR", "old"), 1: ("PASS", None), 5: BUG, 15: ("ENV_ERROR", "new")})
    result = first_bad(VERSIONS, probe, is_bug)
    assert [(t.last, t.first) for t in result.transitions] == [("0.4.0", "0.5.0")]


def test_a_flaky_probe_is_marked_not_trusted() -> None:
    probe, _ = planted({0: ("PASS", None), 6: BUG}, flaky={5})
    result = first_bad(VERSIONS, probe, is_bug)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.4.0", "0.6.0")
    assert [p.version for p in result.skipped if p.flaky] == ["0.5.0"]


def test_other_failures_are_not_the_target() -> None:
    probe, _ = planted({0: ("OTHER_FAILURE", "aaaa"), 12: BUG})
    [t] = first_bad(VERSIONS, probe, is_bug).transitions
    assert (t.last, t.first) == ("0.11.0", "0.12.0")


def test_wrong_ends_say_what_to_change() -> None:
    probe, _ = planted({0: BUG})
    with pytest.raises(BisectInconclusiveError, match="already bad"):
        first_bad(VERSIONS, probe, is_bug)
    probe, _ = planted({0: ("PASS", None)})
    with pytest.raises(BisectInconclusiveError, match="is not bad"):
        first_bad(VERSIONS, probe, is_bug)
    probe, _ = planted({0: ("ENV_ERROR", "x")})
    with pytest.raises(BisectInconclusiveError, match="every version"):
        first_bad(VERSIONS, probe, is_bug)


def test_all_transitions_maps_a_drifting_symptom() -> None:
    states = {0: BUG, 4: ("OTHER_FAILURE", "bbbb"), 5: ("OTHER_FAILURE", "cccc"), 11: ("PASS", None)}
    probe, calls = planted(states)
    result = all_transitions(VERSIONS, probe)
    assert [(t.last, t.first, t.before.state, t.after.state) for t in result.transitions] == [
        ("0.3.0", "0.4.0", BUG, ("OTHER_FAILURE", "bbbb")),
        ("0.4.0", "0.5.0", ("OTHER_FAILURE", "bbbb"), ("OTHER_FAILURE", "cccc")),
        ("0.10.0", "0.11.0", ("OTHER_FAILURE", "cccc"), ("PASS", None)),
    ]
    assert len(calls) < len(VERSIONS)


def test_all_transitions_with_skips_at_and_next_to_the_boundaries() -> None:
    states = {0: ("ENV_ERROR", "e"), 1: BUG, 6: ("ENV_ERROR", "e"), 7: ("PASS", None), 15: ("TIMEOUT", None)}
    probe, _ = planted(states)
    result = all_transitions(VERSIONS, probe)
    [t] = result.transitions
    assert (t.last, t.first, t.skipped_between) == ("0.5.0", "0.7.0", ("0.6.0",))
    assert {"0.0.0", "0.6.0", "0.15.0"} <= {p.version for p in result.skipped}


def test_memoized_probes_are_never_repeated() -> None:
    probe, calls = planted({0: BUG, 3: ("PASS", None), 8: ("OTHER_FAILURE", "z")})
    all_transitions(VERSIONS, probe)
    assert len(calls) == len(set(calls))


# --- probes several at a time (issue #18) -------------------------------------------------------------------


def _batched(probe):
    """A probe_many over ``probe`` that records each batch it was given."""
    batches: list[list[str]] = []

    def probe_many(versions):
        batches.append(list(versions))
        return [probe(v) for v in versions]

    return probe_many, batches


@pytest.mark.parametrize(
    "states",
    [
        {0: BUG, 5: ("OTHER_FAILURE", "aaaa"), 9: ("PASS", None), 13: ("OTHER_FAILURE", "bbbb")},
        {0: BUG, 3: ("ENV_ERROR", "x"), 4: ("PASS", None), 11: ("TIMEOUT", None), 12: ("PASS", None)},
        {0: ("PASS", None), 15: BUG},
        {0: ("PASS", None)},
    ],
)
def test_all_transitions_in_waves_ask_the_same_and_find_the_same(states) -> None:
    one, one_calls = planted(states)
    alone = all_transitions(VERSIONS, one)
    many, many_calls = planted(states)
    probe_many, batches = _batched(many)
    together = all_transitions(VERSIONS, many, probe_many=probe_many)
    assert [(t.last, t.first, t.skipped_between) for t in together.transitions] == [
        (t.last, t.first, t.skipped_between) for t in alone.transitions
    ]
    assert sorted(many_calls) == sorted(one_calls) and len(many_calls) == len(set(many_calls))
    assert batches[0] == ["0.0.0", "0.15.0"]  # the ends together
    assert all(len(batch) >= 2 for batch in batches)


def test_a_wave_holds_the_middle_of_every_open_segment() -> None:
    states = {0: BUG, 4: ("OTHER_FAILURE", "aaaa"), 12: ("PASS", None)}
    probe, _ = planted(states)
    probe_many, batches = _batched(probe)
    all_transitions(VERSIONS, probe, probe_many=probe_many)
    assert ["0.3.0", "0.11.0"] in batches  # both halves of 0..7 and 7..15 split in one wave


def test_first_bad_probes_its_ends_together() -> None:
    probe, calls = planted({0: ("PASS", None), 9: BUG})
    probe_many, batches = _batched(probe)
    [t] = first_bad(VERSIONS, probe, is_bug, probe_many=probe_many).transitions
    assert (t.last, t.first) == ("0.8.0", "0.9.0") and batches == [["0.0.0", "0.15.0"]]
    assert len(calls) == len(set(calls))


def test_run_bisect_with_jobs_runs_a_wave_as_one_matrix_run(tmp_path, monkeypatch) -> None:
    """Probes several at a time are one matrix run with the axis holding each version and ``jobs`` slots; each
    probe's verdict comes from its own cell's records; the backend is asked once, not per probe."""
    import types
    from pathlib import Path

    from reprobisect.bisect import probes
    from reprobisect.config.load import load_config
    from reprobisect.run.store import Store

    releases = [f"0.16.{i}" for i in range(9)]
    monkeypatch.setattr(probes, "releases_between", lambda *a, **k: releases)
    asked: list[int] = []
    monkeypatch.setattr(probes, "detect_cuda", lambda python: asked.append(1) or False)
    requests = []

    def fake_matrix(config, request, **kwargs):
        requests.append(request)
        return [
            types.SimpleNamespace(
                outcome="REPRODUCED" if version < "0.16.5" else "PASS",
                signature=types.SimpleNamespace(id="36b244a365", text="bug") if version < "0.16.5" else None,
                cell={"packages": {"deepspeed": version, "lightning": "2.6.6"}},
            )
            for version in request.axes["deepspeed"]
        ]

    monkeypatch.setattr(probes, "run_matrix", fake_matrix)
    root = Path(__file__).resolve().parents[2]
    request = probes.BisectRequest(
        repro="gan", axis="deepspeed", good="0.16.0", bad="0.16.8", all_transitions=True, jobs=2
    )
    result, report, _ = probes.run_bisect(
        load_config(root / "matrix.yaml"),
        request,
        base=types.SimpleNamespace(executable="python3", torch="2.13.0"),
        store=Store(tmp_path / "out"),
        envs_dir=tmp_path / "cells",
        environ={},
        echo=lambda _: None,
    )
    assert [(t.last, t.first) for t in result.transitions] == [("0.16.4", "0.16.5")]
    assert requests[0].axes["deepspeed"] == ("0.16.0", "0.16.8") and requests[0].jobs == 2
    assert all(r.backend == "cpu" for r in requests) and asked == [1]
    assert report["probes_made"] == len({v for r in requests for v in r.axes["deepspeed"]})
