"""A release night with a clone (issue #37, item 2): the pair of releases each regression's bisection found, their
tags in the clone, and the title that names the pull request; on throwaway repositories, without runs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from reprobisect.nightly.main_follow_up import Finding, MainPair
from reprobisect.nightly.release_follow_up import release_pair
from reprobisect.nightly.release_text import NightNews, title_of
from reprobisect.report.frame import Bisect
from reprobisect.run.sandbox import Confinement
from tests.bisect_reports import bisect_report, transition

PASS = {"outcome": "PASS", "signature_id": None}
FAIL = {"outcome": "OTHER_FAILURE", "signature_id": "f7cdbdf8b3"}


def _clone(root: Path, tags: list[str]) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for tag in tags:
        subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", f"release {tag}"], check=True)  # fmt: skip
        subprocess.run(["git", "-C", str(root), "tag", tag], check=True)
    return root


def _bisect(*transitions: tuple[str, str, dict, dict]) -> Bisect:
    steps = [transition(a, b, f, t) for a, b, f, t in transitions]
    return Bisect(path=Path("bisect.json"), report=bisect_report(repro="r", transitions=steps))


def test_the_pair_is_the_transition_from_a_pass_with_both_tags(tmp_path: Path) -> None:
    clone = _clone(tmp_path / "c", ["v0.16.4", "v0.16.5", "v0.16.6"])
    changed = _bisect(("0.16.4", "0.16.5", PASS, FAIL), ("0.16.5", "0.16.6", FAIL, {**FAIL, "signature_id": "x"}))
    assert release_pair(changed, clone) == (("0.16.4", "0.16.5"), ("v0.16.4", "v0.16.5"))
    assert "no tag of deepspeed 0.16.7" in str(release_pair(_bisect(("0.16.6", "0.16.7", PASS, FAIL)), clone))
    assert "found 0 transitions from a pass" in str(release_pair(_bisect(("0.16.5", "0.16.6", FAIL, PASS)), clone))
    twice = _bisect(("0.16.4", "0.16.5", PASS, FAIL), ("0.16.5", "0.16.6", PASS, FAIL))
    assert "found 2 transitions" in str(release_pair(twice, clone))


def test_a_release_pair_pins_its_ends_as_the_releases_and_names_its_override(tmp_path: Path) -> None:
    pair = MainPair(clone=tmp_path, good="v0.16.4", bad="v0.16.5", pins={}, backend="cpu", timeout=None, jobs=1,
                    minimize_budget=60, out=tmp_path, confinement=Confinement(), releases=("0.16.4", "0.16.5"))  # fmt: skip
    assert (pair.spec("v0.16.4"), pair.spec("v0.16.5")) == ("0.16.4", "0.16.5")
    assert pair.spec("abc123") == f"git+file://{tmp_path.resolve()}@abc123"  # a commit between them
    assert pair.back_fix == "back-to-0.16.4" and "between v0.16.4 and v0.16.5" in pair.span


def test_the_title_names_the_pull_request_when_the_night_found_it() -> None:
    key = ("r", "cell", "cpu-deepspeed", "none")
    commit = {"sha": "ac6222607114" + "0" * 28, "subject": "Training multiple models (#7018)",
              "pull_request": "deepspeedai/DeepSpeed#7018"}  # fmt: skip
    news = NightNews(at="t", backend="cpu", baseline="0.16.4", since="s", ran=["0.16.5"], regressed={"0.16.5": [key]})
    assert title_of(news) == "Nightly (cpu): deepspeed 0.16.5 regressed 1 run(s) that passed on 0.16.4"
    news.findings.append(Finding(key=key, before="✓", after="!", commit=commit))
    assert title_of(news).endswith("passed on 0.16.4; introduced by ac6222607114 (#7018)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--track", "main"], "--track main follows a clone: give --git CLONE"),
        (["--culprits", "--git", "."], "--culprits makes the harness's own clone"),
        (["--culprits", "--track", "main"], "--culprits makes the harness's own clone"),
    ],
)
def test_track_options_that_contradict_are_named(argv: list[str], message: str) -> None:
    from reprobisect.commands.main import _parse
    from reprobisect.commands.nightly import NightlyOptions, _check_options
    from reprobisect.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        _check_options(NightlyOptions.from_args(_parse(["nightly", *argv])))
    argv = ["nightly", "--track", "releases", "--git", ".", "--baseline-release", "0.16.4"]
    _check_options(NightlyOptions.from_args(_parse(argv)))


def test_every_follow_up_of_a_night_is_confined_as_the_night(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A night run with --no-sandbox (a machine whose user namespaces are closed) must not run its commit search,
    its minimization and its back-to-last-night run in a sandbox the slice's runs could not use."""
    import types

    from reprobisect.config.load import load_config
    from reprobisect.errors import BisectInconclusiveError, NotInterestingError
    from reprobisect.nightly import main_follow_up as follow
    from reprobisect.nightly.main_follow_up import pair_for
    from tests.conftest import ROOT

    night = Confinement(sandbox=False, network="off")
    settings = types.SimpleNamespace(
        backend="cpu", timeout=60.0, jobs=1, minimize_budget=30.0, out=tmp_path, confinement=night
    )
    pair = pair_for(settings, clone=tmp_path, good="a" * 40, bad="b" * 40, pins={"torch": "system"})
    assert pair.confinement == night
    asked: list[object] = []

    def bisect(config: object, request: object, ctx: object) -> None:
        asked.append(request)
        raise BisectInconclusiveError("no answer here")

    def minimize(config: object, request: object, ctx: object) -> None:
        asked.append(request)
        raise NotInterestingError("no answer here")

    def matrix(config: object, request: object, ctx: object) -> list[object]:
        asked.append(request)
        return []

    monkeypatch.setattr(follow, "run_bisect", bisect)
    monkeypatch.setattr(follow, "run_matrix", matrix)
    monkeypatch.setattr("reprobisect.minimize.pipeline.minimize", minimize)
    ctx = types.SimpleNamespace(echo=lambda line: None, here=lambda: ctx)
    finding = Finding(key=("gan", "cell", "cpu-deepspeed", "none"), before="✓", after="!")
    follow.follow_up(load_config(ROOT / "matrix.yaml"), pair, ctx, finding, ("OTHER_FAILURE", None))  # type: ignore[arg-type]
    assert [type(r).__name__ for r in asked] == ["BisectRequest", "MinimizeRequest", "MatrixRequest"]
    assert all(r.confinement == night for r in asked)  # type: ignore[attr-defined]
