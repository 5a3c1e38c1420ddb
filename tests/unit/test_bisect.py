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
