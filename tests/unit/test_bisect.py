"""The search on planted histories with a fake probe (the asv test_find idea)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.bisect.search import ProbeResult, all_transitions, first_bad, first_sample
from reprobisect.errors import BisectInconclusiveError
from reprobisect.model.culprit import Commit
from tests.bisect_reports import bisect_report, transition

VERSIONS = [f"0.16.{i}" for i in range(16)]


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
# the old search: both ends first, then bisection of every segment whose ends differ (no sample between)
SPARSE = {"probe_all_up_to": 2}


def is_bug(p: ProbeResult) -> bool:
    return p.signature_id == BUG[1]


def test_first_bad_finds_the_adjacent_pair_in_log2_probes() -> None:
    probe, calls = planted({0: ("PASS", None), 9: BUG})
    result = first_bad(VERSIONS, probe, is_bug)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.16.8", "0.16.9")
    assert len(calls) == len(set(calls)) <= 2 + 4


def test_skips_move_to_a_neighbour_and_are_listed() -> None:
    probe, _ = planted({0: ("PASS", None), 7: ("ENV_ERROR", "x"), 8: ("TIMEOUT", None), 9: BUG})
    result = first_bad(VERSIONS, probe, is_bug)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.16.6", "0.16.9")
    assert t.skipped_between == ("0.16.7", "0.16.8")
    assert {p.version for p in result.skipped} == {"0.16.7", "0.16.8"}


def test_skipped_ends_are_replaced_by_their_neighbours() -> None:
    probe, _ = planted({0: ("ENV_ERROR", "old"), 1: ("PASS", None), 5: BUG, 15: ("ENV_ERROR", "new")})
    result = first_bad(VERSIONS, probe, is_bug)
    assert [(t.last, t.first) for t in result.transitions] == [("0.16.4", "0.16.5")]


def test_a_flaky_probe_is_marked_not_trusted() -> None:
    probe, _ = planted({0: ("PASS", None), 6: BUG}, flaky={5})
    result = first_bad(VERSIONS, probe, is_bug)
    [t] = result.transitions
    assert (t.last, t.first) == ("0.16.4", "0.16.6")
    assert [p.version for p in result.skipped if p.flaky] == ["0.16.5"]


def test_other_failures_are_not_the_target() -> None:
    probe, _ = planted({0: ("OTHER_FAILURE", "aaaa"), 12: BUG})
    [t] = first_bad(VERSIONS, probe, is_bug).transitions
    assert (t.last, t.first) == ("0.16.11", "0.16.12")


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
    result = all_transitions(VERSIONS, probe, **SPARSE)
    assert [(t.last, t.first, t.before.state, t.after.state) for t in result.transitions] == [
        ("0.16.3", "0.16.4", BUG, ("OTHER_FAILURE", "bbbb")),
        ("0.16.4", "0.16.5", ("OTHER_FAILURE", "bbbb"), ("OTHER_FAILURE", "cccc")),
        ("0.16.10", "0.16.11", ("OTHER_FAILURE", "cccc"), ("PASS", None)),
    ]
    assert len(calls) < len(VERSIONS)


def test_all_transitions_with_skips_at_and_next_to_the_boundaries() -> None:
    states = {0: ("ENV_ERROR", "e"), 1: BUG, 6: ("ENV_ERROR", "e"), 7: ("PASS", None), 15: ("TIMEOUT", None)}
    probe, _ = planted(states)
    result = all_transitions(VERSIONS, probe, **SPARSE)
    [t] = result.transitions
    assert (t.last, t.first, t.skipped_between) == ("0.16.5", "0.16.7", ("0.16.6",))
    assert {"0.16.0", "0.16.6", "0.16.15"} <= {p.version for p in result.skipped}


def test_memoized_probes_are_never_repeated() -> None:
    probe, calls = planted({0: BUG, 3: ("PASS", None), 8: ("OTHER_FAILURE", "z")})
    all_transitions(VERSIONS, probe, **SPARSE)
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
    alone = all_transitions(VERSIONS, one, **SPARSE)
    many, many_calls = planted(states)
    probe_many, batches = _batched(many)
    together = all_transitions(VERSIONS, many, probe_many=probe_many, **SPARSE)
    assert [(t.last, t.first, t.skipped_between) for t in together.transitions] == [
        (t.last, t.first, t.skipped_between) for t in alone.transitions
    ]
    assert sorted(many_calls) == sorted(one_calls) and len(many_calls) == len(set(many_calls))
    assert batches[0] == ["0.16.0", "0.16.15"]  # the ends together
    assert all(len(batch) >= 2 for batch in batches)


def test_a_wave_holds_the_middle_of_every_open_segment() -> None:
    states = {0: BUG, 4: ("OTHER_FAILURE", "aaaa"), 12: ("PASS", None)}
    probe, _ = planted(states)
    probe_many, batches = _batched(probe)
    all_transitions(VERSIONS, probe, probe_many=probe_many, **SPARSE)
    assert ["0.16.3", "0.16.11"] in batches  # both halves of 0..7 and 7..15 split in one wave


def test_first_bad_probes_its_ends_together() -> None:
    probe, calls = planted({0: ("PASS", None), 9: BUG})
    probe_many, batches = _batched(probe)
    [t] = first_bad(VERSIONS, probe, is_bug, probe_many=probe_many).transitions
    assert (t.last, t.first) == ("0.16.8", "0.16.9") and batches == [["0.16.0", "0.16.15"]]
    assert len(calls) == len(set(calls))


def test_run_bisect_with_jobs_runs_a_wave_as_one_matrix_run(tmp_path, monkeypatch) -> None:
    """Probes several at a time are one matrix run with the axis holding each version and ``jobs`` slots; each
    probe's verdict comes from its own cell's records; the backend is asked once, not per probe."""
    import types
    from pathlib import Path

    from reprobisect.bisect import probes
    from reprobisect.config.load import load_config
    from reprobisect.model.store import Store
    from reprobisect.run.context import RunContext

    releases = [f"0.16.{i}" for i in range(9)]
    monkeypatch.setattr(probes, "releases_between", lambda *a, **k: releases)
    asked: list[int] = []
    monkeypatch.setattr(probes, "detect_cuda", lambda python: asked.append(1) or False)
    requests = []

    def fake_matrix(config, request, ctx, **kwargs):
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
        RunContext(
            base=types.SimpleNamespace(executable="python3", torch="2.13.0"),
            store=Store(tmp_path / "out"),
            envs_dir=tmp_path / "cells",
            environ={},
            echo=lambda _: None,
        ),
    )
    assert [(t.last, t.first) for t in result.transitions] == [("0.16.4", "0.16.5")]
    # nine releases: every one probed, in one matrix run with two slots
    assert requests[0].axes["deepspeed"] == tuple(releases) and requests[0].jobs == 2 and len(requests) == 1
    assert all(r.backend == "cpu" for r in requests) and asked == [1]
    assert report.probes_made == len({v for r in requests for v in r.axes["deepspeed"]})


# --- no stretch assumed constant (issue #28) ----------------------------------------------------------------


def test_a_bug_that_came_and_went_between_two_passing_ends_is_found_whole() -> None:
    """The H200's pasted script: PASS at both ends, wrong on five releases in the middle. The old search probed
    the two ends and said 'no transition'; a range this short is now probed whole."""
    wrong = ("OTHER_FAILURE", "5e3a1c0f9b")
    probe, calls = planted({0: ("PASS", None), 6: wrong, 11: ("PASS", None)})
    result = all_transitions(VERSIONS, probe)
    assert [(t.last, t.first) for t in result.transitions] == [("0.16.5", "0.16.6"), ("0.16.10", "0.16.11")]
    assert sorted(calls) == sorted(VERSIONS) and result.assumed == []
    # the old search (ends only) sees nothing, and now says what it assumed instead of claiming probes
    sparse, _ = planted({0: ("PASS", None), 6: wrong, 11: ("PASS", None)})
    blind = all_transitions(VERSIONS, sparse, **SPARSE)
    assert blind.transitions == []
    [stretch] = blind.assumed
    assert (stretch.last_probed, stretch.next_probed) == ("0.16.0", "0.16.15")
    assert stretch.unprobed == tuple(VERSIONS[1:15])


LONG = [f"0.{minor}.{patch}" for minor in range(10, 20) for patch in range(9)]  # 90 releases, 10 series


def test_a_long_range_is_sampled_by_series_and_each_change_refined() -> None:
    """90 releases: both ends, every series' first and last patch and evenly spaced ones are probed first; a
    bug that came at 0.13.4 and went at 0.15.2 is then bisected to its exact releases from both sides."""
    wrong = ("REPRODUCED", "36b244a365")

    def probe(version: str) -> ProbeResult:
        index = LONG.index(version)
        bad = LONG.index("0.13.4") <= index < LONG.index("0.15.2")
        outcome, sig = wrong if bad else ("PASS", None)
        return ProbeResult(version=version, outcome=outcome, signature_id=sig)

    result = all_transitions(LONG, probe)
    assert [(t.last, t.first) for t in result.transitions] == [("0.13.3", "0.13.4"), ("0.15.1", "0.15.2")]
    probed = {p.version for p in result.probes}
    assert len(probed) < len(LONG)
    for minor in range(10, 20):
        assert {f"0.{minor}.0", f"0.{minor}.8"} <= probed
    # every version not probed is named in a stretch the result says it assumed
    unprobed = {v for stretch in result.assumed for v in stretch.unprobed}
    assert unprobed == set(LONG) - probed


def test_first_sample_keeps_ends_series_and_spacing() -> None:
    assert first_sample(VERSIONS, 48) == list(range(16))
    sample = first_sample(LONG, 20)
    assert sample[0] == 0 and sample[-1] == len(LONG) - 1 and sample == sorted(set(sample))
    assert max(b - a for a, b in itertools.pairwise(sample)) <= len(LONG) // 9
    commits = [f"{i:040x}" for i in range(200)]  # no series: evenly spaced
    spaced = first_sample(commits, 20)
    assert len(spaced) == 10 and spaced[0] == 0 and spaced[-1] == 199


@given(
    st.lists(st.sampled_from(["PASS", "BUG", "OTHER", "ENV_ERROR", "TIMEOUT"]), min_size=2, max_size=30),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_probing_every_version_reports_every_change_between_usable_neighbours(states, batched) -> None:
    """Property: on a range short enough to probe whole, the transitions are exactly the changes between
    neighbouring usable versions (skipped ones between them named), whatever the history."""
    versions = [f"1.0.{i}" for i in range(len(states))]
    signatures = {"PASS": ("PASS", None), "BUG": ("REPRODUCED", "b"), "OTHER": ("OTHER_FAILURE", "o")}

    def probe(version: str) -> ProbeResult:
        name = states[versions.index(version)]
        outcome, sig = signatures.get(name, (name, None))
        return ProbeResult(version=version, outcome=outcome, signature_id=sig)

    usable = [i for i, name in enumerate(states) if name in signatures]
    many = (lambda chosen: [probe(v) for v in chosen]) if batched else None
    if len(usable) < 2:  # nothing to compare a version with
        with pytest.raises(BisectInconclusiveError):
            all_transitions(versions, probe, probe_many=many)
        return
    result = all_transitions(versions, probe, probe_many=many)
    expected = [
        (versions[a], versions[b], tuple(versions[a + 1 : b]))
        for a, b in itertools.pairwise(usable)
        if states[a] != states[b]
    ]
    assert [(t.last, t.first, t.skipped_between) for t in result.transitions] == expected
    assert result.assumed == []
    assert len(result.probes) == len({p.version for p in result.probes})


@given(
    st.integers(min_value=1, max_value=59),
    st.sets(st.integers(min_value=1, max_value=58), max_size=20),
    st.integers(min_value=2, max_value=9),
)
@settings(max_examples=300, deadline=None)
def test_several_probes_a_round_find_the_same_pair_in_fewer_rounds(first_bad_index, skipped, jobs) -> None:
    """Property: a (jobs+1)-ary search over a monotone history with skips names the same (last good, first bad) pair
    and the same skipped versions between them as the one-at-a-time search, in no more rounds."""
    versions = [f"{i:040x}" for i in range(60)]

    def probe(version: str) -> ProbeResult:
        index = versions.index(version)
        if index in skipped and index != first_bad_index:
            return ProbeResult(version=version, outcome="ENV_ERROR", signature="does not build")
        bad = index >= first_bad_index
        return ProbeResult(version=version, outcome="REPRODUCED" if bad else "PASS", signature_id="b" if bad else None)

    def bad(p: ProbeResult) -> bool:
        return p.outcome == "REPRODUCED"

    alone = first_bad(versions, probe, bad)
    rounds: list[int] = []
    together = first_bad(
        versions, probe, bad, probe_many=lambda vs: rounds.append(len(vs)) or [probe(v) for v in vs], jobs=jobs
    )
    [a], [b] = alone.transitions, together.transitions
    assert (a.last, a.first, a.skipped_between) == (b.last, b.first, b.skipped_between)
    assert len(rounds) <= len(alone.probes)
    assert all(size <= max(jobs, 2) for size in rounds)


def test_eight_probes_a_round_bisect_forty_five_commits_in_three_rounds() -> None:
    """The H200's culprit search: 46 versions (a tag and 45 commits) took 7 probes one after another; eight at a
    time it takes the ends and two rounds."""
    versions = [f"{i:040x}" for i in range(46)]
    probe, rounds = _commits_probe(versions, first_bad_index=28)
    result = first_bad(versions, probe, lambda p: p.outcome == "REPRODUCED", probe_many=rounds.batch, jobs=8)
    [t] = result.transitions
    assert (t.last, t.first) == (versions[27], versions[28])
    assert len(rounds.sizes) == 3 and rounds.sequential == []


def _commits_probe(versions: list[str], first_bad_index: int):
    class Rounds:
        def __init__(self) -> None:
            self.sizes: list[int] = []
            self.sequential: list[str] = []

        def batch(self, chosen):
            self.sizes.append(len(chosen))
            return [answer(v) for v in chosen]

    rounds = Rounds()

    def answer(version: str) -> ProbeResult:
        bad = versions.index(version) >= first_bad_index
        return ProbeResult(version=version, outcome="REPRODUCED" if bad else "PASS")

    def probe(version: str) -> ProbeResult:
        rounds.sequential.append(version)
        return answer(version)

    return probe, rounds


def test_the_culprit_searches_of_two_changes_run_side_by_side_sharing_the_jobs(tmp_path, monkeypatch) -> None:
    """Two changes (a bug that came and went): their commit searches are independent, so they run at once, each
    with half the --jobs; a change whose release has no tag in the clone takes no share."""
    import threading
    import time
    from types import SimpleNamespace

    from reprobisect.bisect import culprits
    from reprobisect.bisect.probes import BisectRequest

    tags = {"0.16.4": "v0.16.4", "0.16.5": "v0.16.5", "0.17.0": "v0.17.0", "0.17.1": "v0.17.1"}
    monkeypatch.setattr(culprits.history, "check_clone", lambda repo: None)
    monkeypatch.setattr(culprits.history, "github_slug", lambda repo, package: None)
    monkeypatch.setattr(culprits.history, "release_tag", lambda repo, version: tags.get(version))
    commit = Commit(sha="abc", subject="x (#1)", pull_request="#1")
    monkeypatch.setattr(culprits.history, "commit_info", lambda repo, sha, slug: commit)
    seen: list[tuple[int, str]] = []
    ends: list[tuple[str, str] | None] = []
    both_running = threading.Barrier(2, timeout=10)

    def fake_bisect(config, request, ctx):
        seen.append((request.jobs, request.good))
        ends.append(request.end_releases)
        if len(tags) == 4:
            both_running.wait()  # fails unless the other search is running at the same time
        step = SimpleNamespace(first="b", last="a", skipped_between=())
        return SimpleNamespace(transitions=[step]), bisect_report(versions=("a", "b")), None

    monkeypatch.setattr(culprits, "run_bisect", fake_bisect)
    state = {"outcome": "PASS", "signature_id": None}
    bad = {"outcome": "OTHER_FAILURE", "signature_id": "f7cdbdf8b3"}
    changes = [transition("0.16.4", "0.16.5", state, bad), transition("0.17.0", "0.17.1", bad, state)]
    request = BisectRequest(repro="script-x", axis="deepspeed", good="0.16.4", bad="0.17.1", jobs=8)
    ctx = SimpleNamespace(echo=lambda line: None, envs_dir=tmp_path / "envs")  # no cell: each end is its tag
    start = time.perf_counter()
    found = culprits.find_culprits(None, request, changes, clone=tmp_path, ctx=ctx, form="cpu", source=())
    assert [f.commit.sha if f.commit else None for f in found] == ["abc", "abc"] and time.perf_counter() - start < 10
    assert sorted(seen) == [(4, "v0.16.4"), (4, "v0.17.0")]
    assert sorted(ends) == [("0.16.4", "0.16.5"), ("0.17.0", "0.17.1")]  # the tags' ends are the releases' records
    seen.clear()
    del tags["0.17.0"]  # the clone lacks one end of the second change: the first search gets every job
    found = culprits.find_culprits(None, request, changes, clone=tmp_path, ctx=ctx, form="cpu", source=())
    assert seen == [(8, "v0.16.4")] and "no tag of deepspeed 0.17.0" in str(found[1].why)


def test_each_round_tells_what_the_next_may_probe_before_it_runs() -> None:
    """Whatever a round finds, the next round's probes are among what ``prepare`` heard before the round ran: their
    wheels can build while it runs (bisect/prebuild.py)."""
    versions = [f"{i:040x}" for i in range(46)]
    for culprit in (1, 9, 28, 45):
        probe, rounds = _commits_probe(versions, first_bad_index=culprit)
        heard: list[list[str]] = []
        asked: list[list[str]] = []

        def batch(chosen, rounds=rounds, asked=asked):
            asked.append(list(chosen))
            return rounds.batch(chosen)

        result = first_bad(
            versions, probe, lambda p: p.outcome == "REPRODUCED", probe_many=batch, jobs=4, prepare=heard.append
        )
        assert (result.transitions[0].first) == versions[culprit]
        # asked[0] holds the ends, asked[k] round k; the round after each prepare was told of in advance
        later_rounds = [*asked[2:], *([rounds.sequential] if rounds.sequential else [])]  # a last single probe too
        for told, later in zip(heard, later_rounds, strict=False):
            assert set(later) <= set(told), (culprit, later, told)
        assert all(not set(told) & set(asked[0]) for told in heard)  # never what was probed already


@pytest.mark.parametrize(("cores", "jobs", "builders"), [(2, 2, 0), (2, 1, 0), (8, 4, 2), (16, 8, 4), (64, 8, 4)])
def test_wheels_build_ahead_only_with_cores_to_spare(cores: int, jobs: int, builders: int) -> None:
    from reprobisect.bisect.prebuild import spare_builders

    assert spare_builders(cores, jobs) == builders
