"""A commit search between two releases that are not on one line: Lightning's patch releases live on maintenance
branches (2.1.4 on release/2.1.x), the next minor release is cut from master (2.2.0). The search starts where the
older release's branch left the newer's line, a commit no release is, probed as a commit. Real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from reprobisect.bisect import culprits, history
from reprobisect.bisect.probes import BisectRequest
from tests.bisect_reports import bisect_report, transition


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def _commit(repo: Path, name: str) -> str:
    (repo / "f.txt").write_text(name)
    _git(repo, "add", "f.txt")
    _git(repo, "commit", "-q", "-m", name)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def lightning_like(tmp_path: Path) -> dict[str, str]:
    """master: 2.1.0 → fork → a → b → 2.2.0; release/2.1.x branches at fork: fix → 2.1.4."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "master")
    shas = {"2.1.0": _commit(repo, "2.1.0")}
    _git(repo, "tag", "2.1.0")
    shas["fork"] = _commit(repo, "fork")
    _git(repo, "checkout", "-q", "-b", "release/2.1.x")
    _commit(repo, "a fix on the branch (#2)")
    shas["2.1.4"] = _commit(repo, "2.1.4")
    _git(repo, "tag", "2.1.4")
    _git(repo, "checkout", "-q", "master")
    _commit(repo, "a")
    _commit(repo, "b (#19209)")
    shas["2.2.0"] = _commit(repo, "2.2.0")
    _git(repo, "tag", "2.2.0")
    shas["repo"] = str(repo)
    return shas


def test_a_release_of_another_branch_starts_where_its_branch_left(lightning_like: dict[str, str]) -> None:
    repo = Path(lightning_like["repo"])
    assert history.branch_point(repo, "2.1.4", "2.2.0") == lightning_like["fork"]
    assert history.branch_point(repo, "2.1.0", "2.2.0") is None  # one line: as it is
    (repo.parent / "other").mkdir()
    _git(repo.parent / "other", "init", "-q", "-b", "x")
    _commit(repo.parent / "other", "unrelated")
    _git(repo, "fetch", "-q", str(repo.parent / "other"), "x:unrelated")
    assert history.branch_point(repo, "unrelated", "2.2.0") is None  # no shared history: nothing to start from


def test_the_search_starts_at_the_branch_point_probed_as_a_commit(
    lightning_like: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Path(lightning_like["repo"])
    asked: list[BisectRequest] = []

    def fake_bisect(config, request, ctx):  # type: ignore[no-untyped-def]
        asked.append(request)
        step = SimpleNamespace(first=lightning_like["2.2.0"], last=lightning_like["fork"], skipped_between=())
        return SimpleNamespace(transitions=[step]), bisect_report(versions=("a", "b")), None

    monkeypatch.setattr(culprits, "run_bisect", fake_bisect)
    monkeypatch.setattr(culprits.history, "check_clone", lambda repo: None)
    monkeypatch.setattr(culprits.history, "github_slug", lambda repo, package: None)
    said: list[str] = []
    ctx = SimpleNamespace(echo=said.append, envs_dir=repo.parent / "envs")
    change = transition(
        "2.1.4",
        "2.2.0",
        {"outcome": "PASS", "signature_id": None},
        {"outcome": "OTHER_FAILURE", "signature_id": "f7cdbdf8b3"},
    )
    request = BisectRequest(repro="script-x", axis="lightning", good="2.1.4", bad="2.2.0")
    [found] = culprits.find_culprits(None, request, [change], clone=repo, ctx=ctx, form="cpu", source=())
    assert asked[0].good == lightning_like["fork"] and asked[0].bad == "2.2.0"
    assert asked[0].end_releases == (None, "2.2.0")  # the branch point is no release: its records answer nothing
    assert "is not on 2.2.0's line" in found.release_sources[0] and found.commit is not None
    assert any(lightning_like["fork"][:12] in line for line in said)
