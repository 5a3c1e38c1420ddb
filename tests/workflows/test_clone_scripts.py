"""The nightly workflow's clone scripts, run by bash against local repositories standing in for GitHub's.

deepspeed-clone.sh must give the main night a clone that holds every commit from last night's main to tonight's
with their whole trees (the harness's commit search runs in it, offline), and nothing much older; a hostile state
must stop it by name. lightning-tests.sh must check out the tests of the Lightning release matrix.yaml's nightly
slice pins, and refuse a pin that is not a release.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from reprobisect.bisect import history

ROOT = Path(__file__).parents[2]
SCRIPTS = ROOT / ".github" / "scripts"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=master"]


def _upstream(path: Path, commits: int) -> list[str]:
    """A DeepSpeed stand-in: ``commits`` commits on master, each changing a file; their hashes, oldest first."""
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    shas = []
    for n in range(commits):
        (path / "version.txt").write_text(f"0.0.{n}\n")
        subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
        subprocess.run([*GIT, "-C", str(path), "commit", "-q", "-m", f"change {n} (#{n + 1})"], check=True)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())  # fmt: skip
    return shas


def _run(script: str, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash
    environ = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", **env}
    return subprocess.run(
        [bash, str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=environ
    )


def _state(folder: Path, commit: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "state.json").write_text(json.dumps({"schema": 1, "main": {"commit": commit}}))
    return folder


def test_the_main_clone_holds_every_commit_since_last_night_and_little_more(tmp_path: Path) -> None:
    shas = _upstream(tmp_path / "upstream", 130)
    last = shas[40]  # 89 commits since last night: two deepenings of 50
    state = _state(tmp_path / "state", last)
    done = _run("deepspeed-clone.sh", str(state), str(tmp_path / "clone"), cwd=tmp_path,
                DEEPSPEED_GIT_URL=f"file://{tmp_path / 'upstream'}")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    clone = tmp_path / "clone"
    depth = int(subprocess.run(["git", "-C", str(clone), "rev-list", "--count", "HEAD"], capture_output=True,
                               text=True, check=True).stdout)  # fmt: skip
    assert 90 <= depth <= 101 < len(shas)  # last night's commit and at most one deepening more, never the whole
    history.check_clone(clone)  # the harness takes it
    assert history.revisions(clone, last, "HEAD") == shas[40:]  # every commit of the window, first parents
    assert history.missing_objects(clone, last, "HEAD") == {}  # with their whole trees: buildable offline
    assert f"at {shas[-1]}" in done.stdout


def test_the_first_night_clones_one_commit(tmp_path: Path) -> None:
    shas = _upstream(tmp_path / "upstream", 3)
    done = _run("deepspeed-clone.sh", str(tmp_path / "no-state"), str(tmp_path / "clone"), cwd=tmp_path,
                DEEPSPEED_GIT_URL=f"file://{tmp_path / 'upstream'}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 commits deep" in done.stdout and shas[-1] in done.stdout


def test_a_commit_gone_from_the_branch_fetches_the_whole_history(tmp_path: Path) -> None:
    _upstream(tmp_path / "upstream", 4)
    state = _state(tmp_path / "state", "f" * 40)  # a force-push took last night's commit away
    done = _run("deepspeed-clone.sh", str(state), str(tmp_path / "clone"), cwd=tmp_path,
                DEEPSPEED_GIT_URL=f"file://{tmp_path / 'upstream'}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "::warning::last night's main" in done.stdout and "4 commits deep" in done.stdout


@pytest.mark.parametrize("commit", ["; rm -rf /", "HEAD~1", "abc", "A" * 40, 7, ["x"]])
def test_a_hostile_main_commit_in_the_state_stops_the_clone_by_name(tmp_path: Path, commit: object) -> None:
    _upstream(tmp_path / "upstream", 2)
    state = _state(tmp_path / "state", commit)
    done = _run("deepspeed-clone.sh", str(state), str(tmp_path / "clone"), cwd=tmp_path,
                DEEPSPEED_GIT_URL=f"file://{tmp_path / 'upstream'}")  # fmt: skip
    assert done.returncode != 0
    assert "main.commit is" in done.stdout and "not a full commit hash" in done.stdout
    assert not (tmp_path / "clone").exists()


def _lightning(path: Path, tag: str) -> None:
    (path / "tests" / "tests_fabric" / "strategies").mkdir(parents=True)
    (path / "tests" / "tests_fabric" / "strategies" / "test_deepspeed.py").write_text("def test_a():\n    pass\n")
    (path / "src").mkdir()
    (path / "src" / "big.bin").write_bytes(b"x" * 1000)
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-q", "-m", "release"], check=True)
    subprocess.run([*GIT, "-C", str(path), "tag", tag], check=True)


def test_lightnings_tests_are_those_of_the_pinned_release(tmp_path: Path) -> None:
    pinned = yaml.safe_load((ROOT / "matrix.yaml").read_text())["nightly"]["axes"]["lightning"]
    _lightning(tmp_path / "lightning", pinned)
    done = _run("lightning-tests.sh", str(tmp_path / "out"), cwd=ROOT,
                LIGHTNING_GIT_URL=f"file://{tmp_path / 'lightning'}")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "out" / "tests" / "tests_fabric" / "strategies" / "test_deepspeed.py").is_file()
    assert not (tmp_path / "out" / "src").exists()  # only tests/ is checked out
    assert f"Lightning {pinned}'s tests/" in done.stdout


@pytest.mark.parametrize("pin", ["main", "2.6.6; rm -rf /", "latest", ">=2.5"])
def test_a_lightning_pin_that_is_not_a_release_is_refused(tmp_path: Path, pin: str) -> None:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["nightly"]["axes"]["lightning"] = pin
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data))
    done = _run("lightning-tests.sh", str(tmp_path / "out"), cwd=tmp_path, LIGHTNING_GIT_URL="file:///nowhere")
    assert done.returncode != 0 and "not a release whose tag holds its tests" in done.stdout
