"""The nightly workflow's two scripts, run by bash against a stand-in ``gh`` that records its calls.

restore-nightly-state.sh must find the previous night's state (skipping runs without one), start empty on
the first night, and fail loudly rather than silently start over when the API or a download fails.
nightly-issue.sh must keep ONE tracking issue: comment on the open one, else create it, with the
regressed backends' nightly.md as the body and nightly.json's title.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).parents[2] / ".github" / "scripts"
RESTORE = SCRIPTS / "restore-nightly-state.sh"
ISSUE = SCRIPTS / "nightly-issue.sh"

# Answers by argument prefix, first match wins; "download" makes `gh run download ... -D DIR` write DIR/state.json.
GH_STUB = f"""#!{sys.executable}
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
call = {{"args": args}}
if "--body-file" in args:
    call["body"] = Path(args[args.index("--body-file") + 1]).read_text(encoding="utf-8")
with open(os.environ["GH_STUB_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps(call) + "\\n")
for rule in json.loads(Path(os.environ["GH_STUB"]).read_text()):
    if args[: len(rule["prefix"])] == rule["prefix"]:
        if "download" in rule:
            folder = Path(args[args.index("-D") + 1])
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "state.json").write_text(rule["download"])
        sys.stdout.write(rule.get("stdout", ""))
        sys.exit(rule.get("rc", 0))
sys.stderr.write("gh stub: unexpected call " + " ".join(args) + "\\n")
sys.exit(99)
"""

NEEDS_JQ = pytest.mark.requires_tool("jq")  # nightly-issue.sh reads nightly.json with jq
Run = Callable[..., tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]]


@pytest.fixture
def run_script(tmp_path: Path) -> Run:
    """Runs a script in tmp_path with the stand-in gh first on PATH; returns the result and gh's calls."""
    bash = shutil.which("bash")
    assert bash
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    (stub_dir / "gh").write_text(GH_STUB)
    (stub_dir / "gh").chmod(0o755)

    def run(
        script: Path, *args: str, rules: list[dict[str, Any]]
    ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
        (tmp_path / "rules.json").write_text(json.dumps(rules))
        log = tmp_path / "calls.jsonl"
        log.write_text("")
        env = {
            "PATH": f"{stub_dir}{os.pathsep}{os.environ['PATH']}",
            "GH_STUB": str(tmp_path / "rules.json"),
            "GH_STUB_LOG": str(log),
            "GITHUB_REF_NAME": "main",
            "GITHUB_RUN_ID": "555",
            "GITHUB_SERVER_URL": "https://github.invalid",
            "GITHUB_REPOSITORY": "owner/repo",
        }
        done = subprocess.run(
            [bash, str(script), *args], capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path
        )
        return done, [json.loads(line) for line in log.read_text().splitlines()]

    return run


def _artifacts(run: int) -> list[str]:
    return ["api", f"repos/{{owner}}/{{repo}}/actions/runs/{run}/artifacts?name=nightly-state-cpu"]


def test_first_night_starts_from_an_empty_state(run_script: Run, tmp_path: Path) -> None:
    done, calls = run_script(
        RESTORE, "nightly-state-cpu", "state", rules=[{"prefix": ["run", "list"], "stdout": "555\n"}]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "state").is_dir() and not any((tmp_path / "state").iterdir())
    assert "::notice::No earlier run has nightly-state-cpu" in done.stdout
    [listing] = calls  # the current run (555) is not asked for its artifacts
    assert listing["args"][:6] == ["run", "list", "--workflow", "nightly.yml", "--branch", "main"]


def test_restores_the_newest_earlier_run_that_has_the_state(run_script: Run, tmp_path: Path) -> None:
    done, calls = run_script(
        RESTORE,
        "nightly-state-cpu",
        "state",
        rules=[
            {"prefix": ["run", "list"], "stdout": "555\n444\n333\n222\n"},
            {"prefix": _artifacts(444), "stdout": "0\n"},  # a night that failed before uploading its state
            {"prefix": _artifacts(333), "stdout": "1\n"},
            {"prefix": ["run", "download", "333"], "download": "night 333"},
        ],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "state" / "state.json").read_text() == "night 333"
    assert [c["args"] for c in calls][-1] == ["run", "download", "333", "-n", "nightly-state-cpu", "-D", "state"]
    assert not any("222" in " ".join(c["args"]) for c in calls)


@pytest.mark.parametrize(
    "rules",
    [
        [{"prefix": ["run", "list"], "rc": 1}],
        [
            {"prefix": ["run", "list"], "stdout": "444\n333\n"},
            {"prefix": _artifacts(444), "stdout": "1\n"},
            {"prefix": ["run", "download", "444"], "rc": 1},
            {"prefix": _artifacts(333), "stdout": "1\n"},
            {"prefix": ["run", "download", "333"], "download": "night 333"},
        ],
    ],
    ids=["run-list-fails", "download-fails"],
)
def test_a_failing_call_fails_instead_of_starting_over(
    run_script: Run, tmp_path: Path, rules: list[dict[str, Any]]
) -> None:
    """An older state or none would make the nightly re-run or miss releases: better no night at all."""
    done, _ = run_script(RESTORE, "nightly-state-cpu", "state", rules=rules)
    assert done.returncode != 0
    assert not (tmp_path / "state" / "state.json").exists()


@pytest.fixture
def reports(tmp_path: Path) -> Callable[..., Path]:
    """Writes nightly-report-<backend>/nightly.{md,json} as the track job downloads them."""
    root = tmp_path / "reports"

    def write(backend: str, *, regressed: bool, body: str = "") -> Path:
        folder = root / f"nightly-report-{backend}"
        folder.mkdir(parents=True)
        title = f"Nightly ({backend}): deepspeed 0.19.2 regressed 1 run(s)"
        (folder / "nightly.json").write_text(json.dumps({"title": title, "regressed": regressed}))
        (folder / "nightly.md").write_text(body or f"<!-- reprobisect-nightly backend={backend} -->\n| table |\n")
        return root

    return write


ISSUE_RULES = [{"prefix": ["label", "create"]}, {"prefix": ["issue", "create"]}, {"prefix": ["issue", "comment"]}]


@NEEDS_JQ
def test_creates_the_issue_when_none_is_open(run_script: Run, reports: Callable[..., Path]) -> None:
    reports("cpu", regressed=True)
    done, calls = run_script(ISSUE, "reports", rules=[{"prefix": ["issue", "list"], "stdout": ""}, *ISSUE_RULES])
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["args"][:2] for c in calls] == [["label", "create"], ["issue", "list"], ["issue", "create"]]
    assert calls[0]["args"][2] == "nightly-regression" and "--force" in calls[0]["args"]
    assert calls[1]["args"][2:] == [
        "--label",
        "nightly-regression",
        "--state",
        "open",
        "--limit",
        "1",
        "--json",
        "number",
        "--jq",
        ".[0].number // empty",
    ]
    create = calls[2]
    assert create["args"][2:6] == [
        "--title",
        "Nightly (cpu): deepspeed 0.19.2 regressed 1 run(s)",
        "--label",
        "nightly-regression",
    ]
    assert create["body"].startswith("## cpu\n\n<!-- reprobisect-nightly backend=cpu -->\n| table |\n")
    assert create["body"].rstrip().endswith("Run: https://github.invalid/owner/repo/actions/runs/555")


@NEEDS_JQ
def test_comments_on_the_open_issue(run_script: Run, reports: Callable[..., Path]) -> None:
    reports("cpu", regressed=False)
    reports("cuda", regressed=True)
    done, calls = run_script(ISSUE, "reports", rules=[{"prefix": ["issue", "list"], "stdout": "42\n"}, *ISSUE_RULES])
    assert done.returncode == 0, done.stdout + done.stderr
    [comment] = [c for c in calls if c["args"][:2] == ["issue", "comment"]]
    assert comment["args"][2] == "42"
    assert comment["body"].startswith("## cuda\n") and "## cpu" not in comment["body"]
    assert not any(c["args"][:2] == ["issue", "create"] for c in calls)


@NEEDS_JQ
def test_both_backends_in_one_body_titled_by_the_first(run_script: Run, reports: Callable[..., Path]) -> None:
    reports("cpu", regressed=True)
    reports("cuda", regressed=True)
    done, calls = run_script(ISSUE, "reports", rules=[{"prefix": ["issue", "list"], "stdout": ""}, *ISSUE_RULES])
    assert done.returncode == 0, done.stdout + done.stderr
    create = calls[-1]
    assert create["args"][3] == "Nightly (cpu): deepspeed 0.19.2 regressed 1 run(s)"
    assert create["body"].index("## cpu") < create["body"].index("## cuda")


@NEEDS_JQ
def test_nothing_regressed_is_an_error_and_touches_no_issue(run_script: Run, reports: Callable[..., Path]) -> None:
    """The job runs only when a nightly exited 1; no nightly.json agreeing means the two disagree."""
    reports("cpu", regressed=False)
    done, calls = run_script(ISSUE, "reports", rules=ISSUE_RULES)
    assert done.returncode == 1
    assert "no nightly.json" in done.stdout
    assert calls == []


@NEEDS_JQ
def test_a_huge_report_is_cut_to_what_an_issue_takes(run_script: Run, reports: Callable[..., Path]) -> None:
    reports("cpu", regressed=True, body="é" * 100_000)
    done, calls = run_script(ISSUE, "reports", rules=[{"prefix": ["issue", "list"], "stdout": ""}, *ISSUE_RULES])
    assert done.returncode == 0, done.stdout + done.stderr
    body = calls[-1]["body"]
    assert len(body) <= 65536
    assert "(cut here: the whole report is in the run's nightly-report-* artifacts)" in body
    assert body.rstrip().endswith("Run: https://github.invalid/owner/repo/actions/runs/555")
