"""The nightly's logic without installs: which releases are new, what a ref is, how two releases' runs
meet, what counts as a regression, the state file and the issue body."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.model.cell import id_without
from reprobisect.nightly.regressions import masked, regressed_keys
from reprobisect.nightly.release_text import MARKER, NightNews, issue_body, title_of
from reprobisect.nightly.state import NightlyState, load_state, save_state
from reprobisect.nightly.targets import DEEPSPEED_REPO, new_releases, target_of
from reprobisect.report.compare import compare
from tests.conftest import ROOT, night_news

AVAILABLE = ["0.16.4", "0.16.5", "0.17.0rc1", "0.17.0", "0.18.0.dev1", "0.18.2", "0.19.8"]


def test_new_releases_are_final_releases_after_the_baseline_oldest_first() -> None:
    assert new_releases(AVAILABLE, "0.16.4") == ["0.16.5", "0.17.0", "0.18.2", "0.19.8"]
    assert new_releases(AVAILABLE, "0.16.4", up_to="0.17.0") == ["0.16.5", "0.17.0"]
    assert new_releases(AVAILABLE, "0.19.8") == []
    assert new_releases(list(reversed(AVAILABLE)), "0.18.0") == ["0.18.2", "0.19.8"]


def test_a_listed_version_is_a_release_anything_else_a_ref_of_deepspeeds_repository() -> None:
    assert target_of("0.17.0", AVAILABLE).kind == "release"
    main = target_of("main", AVAILABLE)
    assert (main.kind, main.name, main.spec) == ("ref", "main", f"git+{DEEPSPEED_REPO}@main")
    url = target_of("git+file:///src/DeepSpeed@abc123", AVAILABLE)
    assert (url.kind, url.name, url.spec) == ("ref", "abc123", "git+file:///src/DeepSpeed@abc123")
    with pytest.raises(ConfigError, match=r"--deepspeed 0\.99\.0: not a release .*newest: 0\.19\.8"):
        target_of("0.99.0", AVAILABLE)


def test_cell_ids_lose_exactly_the_deepspeed_part() -> None:
    cell = "torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6"
    assert id_without(cell, "deepspeed", "0.16.4") == "torch-2.13.0+cpu_lightning-2.6.6"
    assert id_without("torch-2.13.0+cpu_deepspeed-0.16.45_lightning-2.6.6", "deepspeed", "0.16.4").count("0.16.45")
    assert id_without("torch-2.13.0+cpu_deepspeed-git.main", "deepspeed", f"git+{DEEPSPEED_REPO}@main") == (
        "torch-2.13.0+cpu"
    )


def _night(rows: list[tuple[str, str, str, str]], release: str) -> pd.DataFrame:
    """A frame of runs of one release: (fix, outcome, signature_id, cell suffix)."""
    return pd.DataFrame(
        [
            {
                "run_id": f"{release}-{fix}",
                "repro": "gan",
                "cell": f"torch-2.13.0+cpu_deepspeed-{release}_lightning-{lightning}",
                "form": "cpu-deepspeed",
                "fix": fix,
                "outcome": outcome,
                "signature_id": sig,
                "step_ms": [],
                "deepspeed": release,
            }
            for fix, outcome, sig, lightning in rows
        ]
    )


def test_regressions_are_runs_that_passed_on_the_baseline_and_no_longer_pass() -> None:
    before = masked(
        _night(
            [
                ("none", "PASS", "", "2.6.6"),
                ("freeze-d", "PASS", "", "2.6.6"),
                ("zero-stage-0", "OTHER_FAILURE", "aaa", "2.6.6"),
            ],
            "0.19.1",
        )
    )
    after = masked(
        _night(
            [
                ("none", "OTHER_FAILURE", "bbb", "2.6.6"),
                ("freeze-d", "PASS", "", "2.6.6"),
                ("zero-stage-0", "OTHER_FAILURE", "bbb", "2.6.6"),
            ],
            "0.19.2",
        )
    )
    assert regressed_keys(before, after) == [("gan", "torch-2.13.0+cpu_lightning-2.6.6", "cpu-deepspeed", "none")]
    kinds = dict(zip(compare(after, before).changes["fix"], compare(after, before).changes["kind"], strict=True))
    assert kinds == {"none": "new-failure", "zero-stage-0": "signature-changed"}


def test_runs_of_another_lightning_do_not_meet_the_baseline() -> None:
    before = masked(_night([("none", "PASS", "", "2.6.6")], "0.19.1"))
    after = masked(_night([("none", "OTHER_FAILURE", "bbb", "2.7.0")], "0.19.2"))
    assert regressed_keys(before, after) == []
    assert len(compare(after, before).only_current) == 1


def test_state_round_trips_and_bad_state_names_the_file(tmp_path: Path) -> None:
    assert load_state(tmp_path) == NightlyState()
    (tmp_path / "baseline" / "records").mkdir(parents=True)
    state = NightlyState(
        backend="cpu",
        baseline="0.19.1",
        since="2026-12-01T00:00:00+00:00",
        slice={"axes": {"torch": "system"}, "repros": ["gan"]},
        history=({"at": "x"},),
    )
    save_state(tmp_path, state)
    assert load_state(tmp_path) == state
    (tmp_path / "state.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"state\.json: not readable JSON"):
        load_state(tmp_path)
    (tmp_path / "state.json").write_text(json.dumps({"schema": 7}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"key 'schema' is 7, this harness reads 1"):
        load_state(tmp_path)


def test_a_state_without_its_baseline_records_is_refused(tmp_path: Path) -> None:
    save_state(tmp_path, NightlyState(backend="cpu", baseline="0.19.1"))
    with pytest.raises(ConfigError, match=r"baseline 0\.19\.1 but no records under .*baseline/records"):
        load_state(tmp_path)


def test_history_is_capped(tmp_path: Path) -> None:
    (tmp_path / "baseline" / "records").mkdir(parents=True)
    save_state(tmp_path, NightlyState(baseline="0.1.0", history=tuple({"n": i} for i in range(500))))
    history = load_state(tmp_path).history
    assert len(history) == 90
    assert history[-1] == {"n": 499}


def test_titles_say_what_happened_first() -> None:
    quiet = NightNews(at="t", backend="cpu", baseline="0.19.8", since=None)
    assert title_of(quiet) == "Nightly (cpu): no DeepSpeed release newer than 0.19.8"
    seeded = NightNews(at="t", backend="cpu", baseline="0.19.1", since=None, seeded=True, ran=["0.19.1"])
    assert "0.19.1 is the new baseline" in title_of(seeded)
    before = masked(_night([("none", "PASS", "", "2.6.6")], "0.19.1"))
    after = masked(_night([("none", "OTHER_FAILURE", "bbb", "2.6.6")], "0.19.2"))
    news = night_news(before, after, baseline="0.19.1", release="0.19.2")
    assert title_of(news) == "Nightly (cpu): deepspeed 0.19.2 regressed 1 run(s) that passed on 0.19.1"
    assert news.is_regression and news.is_change
    same = NightNews(
        at="t",
        backend="cpu",
        baseline="0.19.1",
        since=None,
        ran=["0.19.2"],
        comparisons={"0.19.2": compare(before, before)},
        regressed={"0.19.2": []},
    )
    assert title_of(same) == "Nightly (cpu): deepspeed 0.19.2 behaves like 0.19.1"
    assert not same.is_regression and not same.is_change


def test_the_issue_body_carries_the_marker_and_the_regression_row() -> None:
    before = masked(_night([("none", "PASS", "", "2.6.6")], "0.19.1"))
    after = masked(_night([("none", "OTHER_FAILURE", "bbb", "2.6.6")], "0.19.2"))
    news = night_news(before, after, baseline="0.19.1", release="0.19.2", backend="cuda")
    body = issue_body(news, None)
    assert body.startswith(MARKER.format(backend="cuda"))
    assert "| **regression** | 0.19.2 | gan | cpu-deepspeed | none | ✓ | ! bbb | new-failure |" in body
    summary = news.summary()
    assert summary["regressed"] is True
    assert summary["changes"][0]["regression"] is True
    json.dumps(summary)  # nightly.json must serialize


def test_matrix_yaml_has_a_nightly_slice_without_deepspeed() -> None:
    config = load_config(ROOT / "matrix.yaml")
    assert config.nightly is not None
    assert "deepspeed" not in config.nightly.axes
    assert set(config.nightly.repros) == {"gan", "zero3"}


@pytest.mark.parametrize(
    ("nightly", "message"),
    [
        ({"axes": {"deepspeed": "0.16.4"}, "repros": ["gan"]}, "nightly.axes.deepspeed: leave it out"),
        ({"axes": {"torhc": "system"}, "repros": ["gan"]}, "nightly.axes.torhc: not an axis"),
        ({"axes": {}, "repros": ["gna"]}, "nightly.repros: repro: unknown 'gna'.*Perhaps you meant 'gan'"),
        ({"axes": {}}, "nightly"),
    ],
)
def test_bad_nightly_sections_name_the_key(tmp_path: Path, nightly: dict, message: str) -> None:
    import yaml

    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["nightly"] = nightly
    for repro in data["repros"].values():  # paths are relative to the file: keep them pointing into the repo
        repro["inputs"] = [str(ROOT / item) for item in repro.get("inputs", [])]
        for form in repro["forms"].values():
            form.update({k: str(ROOT / form[k]) for k in ("script", "fix_script") if k in form})
        for fix in repro["fixes"].values():
            if "patch" in fix:
                fix["patch"] = str(ROOT / fix["patch"])
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def _git(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_ref_is_pinned_to_the_commit_it_names_tonight(tmp_path: Path) -> None:
    from reprobisect.nightly.targets import pinned_ref

    repo = tmp_path / "DeepSpeed"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "version.txt").write_text("0.0.1\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "v0.0.1", "-m", "tag")
    first = _git(repo, "rev-parse", "HEAD")
    pinned = pinned_ref(target_of("main", AVAILABLE, repo=f"file://{repo}"))
    assert (pinned.name, pinned.spec) == (f"main@{first[:12]}", f"git+file://{repo}@{first}")
    assert pinned_ref(target_of("v0.0.1", AVAILABLE, repo=f"file://{repo}")).spec.endswith(first)  # peeled tag
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "two")
    moved = pinned_ref(target_of("main", AVAILABLE, repo=f"file://{repo}"))
    assert moved.spec.endswith(_git(repo, "rev-parse", "HEAD")) and moved.spec != pinned.spec  # a new cell
    with pytest.raises(ConfigError, match=r"--deepspeed nope: .* has no branch or tag 'nope'"):
        pinned_ref(target_of("nope", AVAILABLE, repo=f"file://{repo}"))


def test_a_slower_run_is_reported_but_is_no_outcome_change() -> None:
    before = masked(_night([("none", "PASS", "", "2.6.6")], "0.19.7")).assign(step_ms=[[30.0, 31.0, 30.5, 30.2]])
    after = masked(_night([("none", "PASS", "", "2.6.6")], "0.19.8")).assign(step_ms=[[45.0, 46.0, 45.5, 45.2]])
    news = night_news(before, after, baseline="0.19.7", release="0.19.8")
    assert news.slower() == 1 and not news.is_change and not news.is_regression
    assert title_of(news) == "Nightly (cpu): deepspeed 0.19.8 behaves like 0.19.7; 1 run(s) slower"
    assert "timing-regression median step 30.4 → 45.4 ms" in issue_body(news, None)


def test_a_baseline_of_other_pins_is_refused_before_anything_runs(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    state = tmp_path / "state"
    (state / "baseline" / "records").mkdir(parents=True)
    save_state(
        state,
        NightlyState(
            backend="cpu",
            baseline="0.19.1",
            slice={"axes": {"python": "system", "torch": "system", "lightning": "2.5.0"}, "repros": ["gan"]},
        ),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reprobisect",
            "nightly",
            "--backend",
            "cpu",
            "--state",
            str(state),
            "--out",
            str(tmp_path / "out"),
            "--config",
            str(ROOT / "matrix.yaml"),
            "--envs",
            str(tmp_path / "envs"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 2, done.stderr
    assert '"lightning": "2.5.0"' in done.stderr and "re-seed with --baseline-release" in done.stderr
    assert not (tmp_path / "out").exists()


def test_bisections_of_two_fixes_over_one_range_write_two_files() -> None:
    from reprobisect.bisect.probes import BisectRequest, bisect_slug

    def name(fix: str) -> str:
        request = BisectRequest(repro="gan", axis="deepspeed", good="0.19.1", bad="0.19.2", fix=fix)
        return bisect_slug("gan", "cuda", request, "all-transitions")

    assert name("none") == "gan-cuda-deepspeed-0.19.1-0.19.2-all-transitions"
    assert len({name("none"), name("freeze-d"), name("single-engine")}) == 3


def test_a_new_baseline_is_named_only_once_it_is_whole(tmp_path: Path) -> None:
    from reprobisect.nightly.state import baseline_root, commit_state, stage_baseline

    old = NightlyState(backend="cpu", baseline="0.19.1", baseline_dir="baseline-0.19.1-x")
    (tmp_path / "baseline-0.19.1-x" / "records" / "gan").mkdir(parents=True)
    commit_state(tmp_path, old)
    folder = stage_baseline(tmp_path, [], tmp_path / "out", "0.19.2")
    # stopped here (before commit_state): the state still names the old, whole folder
    assert load_state(tmp_path) == old
    assert (tmp_path / folder / "records").is_dir() and (tmp_path / "baseline-0.19.1-x").is_dir()
    new = NightlyState(backend="cpu", baseline="0.19.2", baseline_dir=folder)
    commit_state(tmp_path, new)
    assert load_state(tmp_path) == new
    assert baseline_root(tmp_path, new).name.startswith("baseline-0.19.2-")
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder, "state.json"]


def test_a_state_naming_a_folder_outside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"schema": 1, "baseline": "0.19.1", "baseline_dir": "../x"}))
    with pytest.raises(ConfigError, match=r"key 'baseline_dir' must name a folder inside"):
        load_state(tmp_path)
